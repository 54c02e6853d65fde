# tq-convert --method affine: bit for bit what mlx.core.quantize writes (checked by
# tests/consumers/mlx_affine.py, a Python restatement of MLX's Metal and CPU rules), config as
# mlx_lm.convert writes it, deterministic for any thread count, crash-safe, --dequantize is
# scale*q + bias, NaN refused, --embed for both methods, decodable by tq-run.
set -eu
. "$ROOT/tests/lib/safety.sh"
A="python3 $ROOT/tests/consumers/mlx_affine.py"
tq-mkmodel --arch qwen3_moe --layers 1 --hidden 128 --intermediate 128 --moe-intermediate 64 --experts 4 \
  --top-k 2 --vocab 256 --heads 2 --kv-heads 1 --head-dim 64 --shared-expert --seed 3 s >/dev/null
# default: GPU rule, 4 bits, group 64; HF experts stacked; routers at 8 bits group 64
tq-convert --json --threads 1 --method affine s a > r.json
[ "$(jget r.json method)" = affine ] || fail "method"
[ "$(jget r.json affine_rule)" = gpu ] || fail "rule"
[ "$(jget r.json bits)" = 4 ] || fail "bits"
$A check s a gpu > chk.txt
grep -qx '14 modules equal MLX.s gpu rule' chk.txt || fail "$(cat chk.txt)"
# the rules differ on this model: the CPU rule's oracle does not accept the GPU output
if $A check s a cpu > /dev/null; then fail "the CPU rule's oracle accepted the GPU rule's output"; fi
python3 - a/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
q = c["quantization"]
assert q == c["quantization_config"], "quantization_config is not a copy"
assert (q["bits"], q["group_size"], q["mode"]) == (4, 64, "affine"), q
assert q["model.layers.0.mlp.gate"] == {"bits": 8, "group_size": 64}, q
assert q["model.layers.0.mlp.shared_expert_gate"] == {"bits": 8, "group_size": 64}, q
PY
tq-verify ls a > ls.txt
grep -q $'^model.layers.0.mlp.switch_mlp.gate_proj.weight\tU32\t\\[4,64,16\\]' ls.txt
grep -q $'^model.layers.0.mlp.switch_mlp.gate_proj.scales\tBF16\t\\[4,64,2\\]' ls.txt
grep -q $'^model.layers.0.mlp.switch_mlp.gate_proj.biases\tBF16\t\\[4,64,2\\]' ls.txt
grep -q $'^model.embed_tokens.scales\tBF16' ls.txt
grep -q $'^model.norm.weight\tBF16' ls.txt
# any thread count, same bytes
tq-convert --quiet --threads 3 --method affine s a3
[ "$(tree_hash a)" = "$(tree_hash a3)" ] || fail "threads changed the output"
# CPU rule, 8 bits, group 32, f16 (scales and biases follow the weights' dtype)
tq-convert --quiet --method affine --affine-rule cpu --bits 8 --group-size 32 --dtype f16 s c8
$A check s c8 cpu | grep -q 'equal MLX.s cpu rule'
tq-verify ls c8 | grep -q $'^model.layers.0.self_attn.q_proj.scales\tF16\t\\[128,4\\]'
# --dequantize: scale * q + bias, under the HF names again
tq-convert --quiet --dequantize --dtype f32 a d
$A dequant-check a d | grep -q 'dequantize to scale'
tq-verify ls d | grep -q $'^model.layers.0.mlp.experts.3.down_proj.weight\tF32\t\\[128,64\\]'
if grep -q quantization d/config.json; then fail "dequantized config keeps a quantization block"; fi
# decodable; a split of it decodes the same
tq-run a --tokens 1,2,3 --max-tokens 4 --quiet --logits a.f32 >/dev/null
tq-split --quiet a as
tq-run as --tokens 1,2,3 --max-tokens 4 --cache-budget 1B --quiet --logits as.f32 >/dev/null
cmp a.f32 as.f32
# --embed: keep (affine), affine8 beside TurboQuant linears
tq-convert --quiet --method affine --embed keep s ak
tq-verify ls ak | grep -q $'^model.embed_tokens.weight\tBF16'
tq-convert --quiet --embed affine8 s te
tq-verify ls te | grep -q $'^model.embed_tokens.scales\tBF16\t\\[256,2\\]'
grep -q '"model.embed_tokens": {' te/config.json
$A check s te gpu | grep -qx '1 modules equal MLX.s gpu rule'
tq-run te --tokens 1,2,3 --max-tokens 2 --quiet >/dev/null
# crash safety like the TurboQuant path
crash_safety co s -- tq-convert --quiet --method affine s co
# a NaN weight is refused, naming tensor, row and column; nothing is left behind
cp -r s n
python3 - n <<'PY'
import json, struct, sys
f = sys.argv[1] + "/model.safetensors"
raw = open(f, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
b = h["model.layers.0.self_attn.k_proj.weight"]["data_offsets"][0]
off = 8 + n + b + 2 * (3 * 128 + 5)   # row 3, column 5 (bf16)
raw = raw[:off] + struct.pack("<H", 0x7FC0) + raw[off + 2:]
open(f, "wb").write(raw)
PY
set +e # expect_* check the exit status themselves
expect_msg 1 "tensor 'model.layers.0.self_attn.k_proj.weight' row 3 column 5: NaN weight" tq-convert --method affine n no
[ ! -e no ] || fail "output left behind"
[ -z "$(partials no)" ] || fail "partial output left behind"
# usage
expect_msg 2 "--bits must be 4 or 8" tq-convert --method affine --bits 3 s x
expect_msg 2 "TurboQuant options" tq-convert --method affine --scale rms s x
expect_msg 2 "--affine-rule goes with --method affine" tq-convert --affine-rule cpu s x
