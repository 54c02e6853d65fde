# tq-split --target mac-code|mlx-sniper: each split is read by a port of that consumer's
# reader (tests/consumers/consumers.py: names, 16384-byte header page, layer 0's layout,
# top-level config keys, pinned names) and every tensor equals the source; tq-run decodes
# each exactly like the unsplit model; what the consumer cannot run is refused (exit 1) with
# the reason; --plan says per target whether it can read the split and whether it fits.
set -eu
. "$ROOT/tests/lib/common.sh"
C="python3 $ROOT/tests/consumers/consumers.py"
tq-mkmodel --arch qwen3_moe --size tiny --seed 5 --naming mlx --quant affine4 --shared-expert m >/dev/null
tq-run m --tokens 1,2,3 --max-tokens 6 --quiet --logits ref.f32 >/dev/null
decodes_like_ref() {
  tq-run "$1" --tokens 1,2,3 --max-tokens 6 --cache-budget 1B --quiet --logits "$1.f32" >/dev/null
  cmp ref.f32 "$1.f32" || fail "$1 decodes differently"
  tq-run "$1" --tokens 1,2,3 --max-tokens 6 --resident --quiet --logits "$1-r.f32" >/dev/null
  cmp ref.f32 "$1-r.f32" || fail "$1 --resident decodes differently"
}
# mac-code: experts/layer_LL.bin, names with mlp., 16 KiB page
tq-split --quiet --target mac-code m mc
$C read mac-code mc m | grep -q 'equal the source'
decodes_like_ref mc
grep -q '"target": "mac-code"' mc/split.json || fail "split.json does not name the target"
# mlx-sniper: bin/moe_layer_LL.bin + layer_LL.bin links, names without mlp.
tq-split --quiet --target mlx-sniper m sn
[ -L sn/bin/layer_01.bin ] && [ "$(readlink sn/bin/layer_01.bin)" = moe_layer_01.bin ] || fail "no layer links"
grep -q '"expert_dir": "bin"' sn/config.json || fail "expert_dir"
head -c 16384 sn/bin/moe_layer_00.bin | tr -d '\0' | grep -q '"switch_mlp.gate_proj.weight"' || fail "names"
if head -c 16384 sn/bin/moe_layer_00.bin | tr -d '\0' | grep -q '"mlp.switch_mlp'; then fail "mlp. prefix"; fi
$C read mlx-sniper sn m | grep -q 'equal the source'
decodes_like_ref sn
tq-verify golden --update --tokens 1,2,3 --quiet m --golden g.json
tq-verify golden --quiet sn --golden g.json
# Qwen3.5-style wrapped source ("language_model." names, text_config): flattened config,
# pinned names without the wrapper; still decodes like the unwrapped model
$C wrap m w
tq-split --quiet --target mac-code w wc
python3 - wc <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + "/config.json"))
assert "text_config" not in c and c["num_hidden_layers"] == 2 and c["model_type"] == "qwen3_moe", c
PY
if tq-verify ls wc/pinned.safetensors | grep -q '^language_model\.'; then fail "wrapper kept in pinned names"; fi
$C read mac-code wc w | grep -q 'equal the source'
decodes_like_ref wc
# the generator's own Qwen3.5 MoE (linear attention, MTP head) in its MLX form
tq-mkmodel --arch qwen3_5_moe --size tiny --naming mlx --quant affine4 q35 >/dev/null
tq-split --quiet --target mac-code q35 q35s
$C read mac-code q35s q35 | grep -q 'equal the source'
# HF checkpoint -> tq-convert --method affine -> mac-code
tq-mkmodel --arch qwen3_moe --size tiny --seed 6 --shared-expert hf >/dev/null
tq-convert --quiet --method affine hf hfa
tq-split --quiet --target mac-code hfa hfs
$C read mac-code hfs hfa | grep -q 'equal the source'
# a dense model: mac-code's aligned FFN files
tq-mkmodel --arch qwen3 --size tiny --quant affine4 d >/dev/null
tq-split --quiet --target mac-code d ds
$C read mac-code ds d | grep -q 'dense layers'
# refusals, with the reason, nothing written
set +e
tq-convert --quiet hf tq3
expect_msg 1 "TurboQuant or another format" tq-split --target mac-code tq3 x1
tq-convert --quiet --method affine --bits 8 hf a8
expect_msg 1 "affine 8-bit group 64: mac-code computes only MLX affine 4-bit group-64" tq-split --target mac-code a8 x2
tq-convert --quiet --method affine --bits-for 'layers\.1\..*switch_mlp=8' hf mixed
expect_msg 1 "layer 1's experts are laid out differently from layer 0's" tq-split --target mac-code mixed x4
tq-mkmodel --arch deepseek_v3 --size tiny --naming mlx --quant affine4 dsk >/dev/null
expect_msg 1 "layer 0 has no routed experts (a dense MLP): mac-code opens an expert file for every layer" tq-split --target mac-code dsk x5
expect_msg 1 "mlx-sniper reads only MoE splits" tq-split --target mlx-sniper d x6
expect_msg 2 "mac-code reads exactly 16384 header bytes" tq-split --target mac-code --align 4096 m x7
expect_msg 1 "layer 0 experts gate_proj are BF16 weights (not quantized): mlx-sniper computes only MLX affine 4-bit" \
  tq-split --target mlx-sniper hf x8
expect_msg 1 "affine 8-bit group 64: mlx-sniper computes only MLX affine 4-bit group-64" tq-split --target mlx-sniper a8 x9
for x in x1 x2 x4 x5 x6 x7 x8 x9; do [ ! -e $x ] || fail "$x written"; done
# the refusal is what the consumers' readers would meet: the 8-bit model split by their own
# writers fails their reader's affine 4-bit group-64 check
for t in mac-code mlx-sniper; do
  $C write $t a8 w-$t
  $C read $t w-$t a8 > r-$t.txt 2>&1 && fail "$t's reader accepted 8-bit experts"
  grep -q 'gate_proj is not affine 4-bit group 64' r-$t.txt || fail "$t: $(cat r-$t.txt)"
done
set -e
# --plan: per target, readable and fits
tq-split --plan --ram 16G tq3 > plan.txt
grep -q '^target tq: fits' plan.txt || fail "$(cat plan.txt)"
grep -q '^target mac-code: cannot read it: .*TurboQuant or another format' plan.txt || fail "$(cat plan.txt)"
grep -q '^target mlx-sniper: cannot read it: ' plan.txt || fail "$(cat plan.txt)"
tq-split --plan --ram 16G --json m > plan.json
python3 - plan.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["targets"]
assert all(t[k]["readable"] and t[k]["fits"] for k in ("tq", "mac-code", "mlx-sniper")), t
assert t["tq"]["min_ram_bytes"] == 3 * 2**30 + 339968 + 2 * 2 * 32768, t
PY
tq-split --plan --ram 1G m | grep -q '^target mac-code: does not fit' || fail "1G fits?"
