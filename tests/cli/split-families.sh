# tq-split on every MoE family of formats/family.h: the HF checkpoint (tq-mkmodel's default:
# per-expert tensors, qwen3_5_moe's and gemma4's fused gate_up_proj, gpt-oss's MXFP4 blocks),
# the MLX form (tq-mkmodel --naming mlx) and the TurboQuant output of tq-convert split into
# one layer file per MoE layer, with no routed-expert tensor left in pinned.safetensors
# (fused experts stay fused: one expert's slice per block); --join gives the source back
# byte for byte; tq-run decodes each split streamed (a 1-byte cache: every expert read from
# SSD) and --resident exactly like the unsplit model. Dense layers of a MoE family stay
# pinned wherever they are (DeepSeek's first_k_dense_replace, a dense last layer); malformed
# family checkpoints exit 1 naming the tensor or the config key.
set -u
. "$ROOT/tests/lib/common.sh"
experts_in_pinned() { # expert-named tensors of SPLIT's pinned file (MTP heads: mtp.* and
  # DeepSeek's layers from num_hidden_layers on; codebooks, signs excepted)
  local n
  n=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print((c.get("text_config") or c)["num_hidden_layers"])' "$1/config.json")
  tq-verify ls "$1/pinned.safetensors" | cut -f1 | grep -E '\.experts\.|switch_mlp\.|switch_glu\.' |
    grep -vE '\.(codebook|signs)$' | grep -v '^mtp\.' |
    awk -v n="$n" '{ if (match($0, /layers\.[0-9]+\./) && substr($0, RSTART + 7, RLENGTH - 8) + 0 >= n) next; print }'
}
# rename tensors of DIR/model.safetensors: python re.sub(PATTERN, REPLACEMENT) on every name
rename_tensors() {
  python3 - "$1/model.safetensors" "$2" "$3" <<'PY'
import json, re, struct, sys
p, pat, rep = sys.argv[1:4]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h = {(k if k == "__metadata__" else re.sub(pat, rep, k)): v for k, v in h.items()}
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
}
reshape() { # reshape DIR TENSOR JSON-SHAPE: a new shape of the same byte size in the header
  python3 - "$1/model.safetensors" "$2" "$3" <<'PY'
import json, struct, sys
p, name, shape = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h[name]["shape"] = shape
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
}
set_config() { # set_config DIR KEY JSON-VALUE (in text_config when there is one)
  python3 - "$1/config.json" "$2" "$3" <<'PY'
import json, sys
p, k, v = sys.argv[1:4]
c = json.load(open(p))
(c.get("text_config") or c)[k] = json.loads(v)
json.dump(c, open(p, "w"), indent=2, sort_keys=True)
PY
}
decodes_like_source() { # decodes_like_source SOURCE SPLIT
  tq-run "$1" --tokens 1,2,3 --max-tokens 6 --quiet --logits "$1.f32" >/dev/null || fail "$1: tq-run failed"
  tq-run "$2" --tokens 1,2,3 --max-tokens 6 --cache-budget 1B --json --logits "$2.f32" >"$2.json" ||
    fail "$2: streamed tq-run failed"
  [ "$(jget "$2.json" streamed)" = true ] && [ "$(jget "$2.json" expert_misses)" -gt 0 ] || fail "$2: nothing streamed"
  cmp -s "$1.f32" "$2.f32" || fail "$2: streamed logits differ from the unsplit model's"
  tq-run "$2" --tokens 1,2,3 --max-tokens 6 --resident --quiet --logits "$2-r.f32" >/dev/null || fail "$2: --resident failed"
  cmp -s "$1.f32" "$2-r.f32" || fail "$2: --resident logits differ from the unsplit model's"
}

# families the runtime decodes
for a in mixtral deepseek_v3 kimi_k2 gpt_oss qwen3_next qwen3_5_moe qwen2_moe gemma4; do
  run tq-mkmodel --quiet --arch $a hf-$a
  run tq-mkmodel --quiet --arch $a --naming mlx mlx-$a
  run tq-convert --quiet hf-$a tq-$a
  for m in hf-$a mlx-$a tq-$a; do
    run tq-split --quiet $m s-$m
    left=$(experts_in_pinned s-$m)
    [ -z "$left" ] || fail "$m: expert tensors left in pinned.safetensors: $left"
    run tq-split --join --quiet s-$m j-$m
    diff -r -x tq-provenance.json $m j-$m >/dev/null || fail "$m: join differs from the source"
    decodes_like_source $m s-$m
  done
done
# which layers have files: mixtral every layer, DeepSeek's dense layer 0 none (it stays pinned)
[ "$(ls s-tq-mixtral/experts)" = "$(printf 'layer_00.bin\nlayer_01.bin')" ] || fail "mixtral files: $(ls s-tq-mixtral/experts)"
[ "$(ls s-tq-deepseek_v3/experts)" = "$(printf 'layer_01.bin\nlayer_02.bin')" ] || fail "deepseek files: $(ls s-tq-deepseek_v3/experts)"
tq-verify ls s-tq-deepseek_v3/pinned.safetensors | grep -q '^model.layers.0.mlp.down_proj.weight	' || fail "dense layer 0 not pinned"
tq-verify ls s-tq-deepseek_v3/pinned.safetensors | grep -q '^model.layers.1.mlp.shared_experts.down_proj.weight	' ||
  fail "shared experts not pinned"
grep -q '"num_layers": 3' s-tq-deepseek_v3/config.json || fail "streaming.num_layers is not num_hidden_layers"
head -c 16384 s-tq-mixtral/experts/layer_01.bin | tr -d '\0' | grep -q '"layer_idx":1' || fail "mixtral layer header"

# HF per-expert checkpoints split as they are (Mixtral's w1/w3/w2 names came back on --join
# above), and join stacked on request
run tq-split --join --quiet --naming mlx s-hf-mixtral jm-hf-mixtral
tq-verify ls jm-hf-mixtral | grep -q '^model.layers.1.block_sparse_moe.switch_mlp.down_proj.weight	BF16	\[8,128,128\]' ||
  fail "--naming mlx: no stacked mixtral experts"

# a dense last layer (mlp_only_layers) stays pinned by the same rule as dense-first layers
run tq-mkmodel --quiet --arch qwen3_moe --layers 3 --naming mlx dl
rename_tensors dl 'layers\.2\.mlp\.switch_mlp\.' 'layers.2.mlp.'
set_config dl mlp_only_layers '[2]'
run tq-split --quiet dl s-dl
[ "$(ls s-dl/experts)" = "$(printf 'layer_00.bin\nlayer_01.bin')" ] || fail "dense-last files: $(ls s-dl/experts)"
grep -q '"num_layers": 3' s-dl/config.json || fail "dense-last: streaming.num_layers"
run tq-split --join --quiet s-dl j-dl
tq-verify compare dl j-dl >/dev/null || fail "dense-last: join differs from the source (header rewritten here, so tensor by tensor)"

# refusals: exit 1, the tensor or key named, nothing written
cp -r tq-deepseek_v3 bad-k0 && set_config bad-k0 first_k_dense_replace 0
expect_refused "config.json makes layer 0 a MoE layer (deepseek_v3) but it has no routed expert tensors ('model.layers.0.mlp.switch_mlp.gate_proj.weight' is missing)" o1 tq-split bad-k0 o1
cp -r tq-deepseek_v3 bad-k2 && set_config bad-k2 first_k_dense_replace 2
expect_refused "config.json makes layer 1 a dense layer but it has routed experts" o2 tq-split bad-k2 o2
cp -r hf-mixtral bad-missing && rename_tensors bad-missing 'layers\.1\.block_sparse_moe\.experts\.3\.w2\.' 'layers.1.block_sparse_moe.exparts.3.w2.'
expect_refused "layer 1: expert 3 has no down_proj.weight tensor ('model.layers.1.block_sparse_moe.experts.3.w2.weight' is missing)" o3 tq-split bad-missing o3
cp -r hf-mixtral bad-name && rename_tensors bad-name 'experts\.5\.w1\.' 'experts.5.w9.'
expect_refused "tensor 'model.layers.0.block_sparse_moe.experts.5.w9.weight' is named like a routed expert" o4 tq-split bad-name o4
cp -r tq-mixtral bad-count && set_config bad-count num_local_experts 6
expect_refused "config.json says num_local_experts = 6 but the layers have 8 experts (tensor 'model.layers.0.block_sparse_moe.switch_mlp.gate_proj.weight')" o5 tq-split bad-count o5

# fused experts stay fused: one expert's slice of each fused tensor per block, gate rows
# first (qwen3_5_moe, gemma4) or gpt-oss's MXFP4 parts with interleaved gate/up rows
h=$(head -c 16384 s-hf-qwen3_5_moe/experts/layer_00.bin | tr -d '\0')
case $h in *'"mlp.switch_mlp.gate_up_proj.weight":{"dtype":"bfloat16","inner_offset":0,"nbytes":65536,"shape_per_expert":[256,128]}'*) ;;
  *) fail "qwen3_5_moe fused layer header: $h" ;; esac
h=$(head -c 16384 s-hf-gpt_oss/experts/layer_00.bin | tr -d '\0')
for p in gate_up_proj.blocks gate_up_proj.scales gate_up_proj.bias down_proj.blocks down_proj.scales down_proj.bias; do
  case $h in *"\"mlp.switch_mlp.$p\""*) ;; *) fail "gpt_oss layer header lacks $p: $h" ;; esac
done
grep -q '"naming": "fused"' s-hf-gemma4/split.json || fail "gemma4: split.json does not say the layers are fused"
# the fused source comes back only under its own names
expect_refused "keeps the gpt_oss experts fused as its source did" o6 tq-split --join --naming mlx s-hf-gpt_oss o6
# readers that compute separate gate, up and down cannot take fused layers
expect_refused "layer 0 keeps the qwen3_5_moe experts fused" o7 tq-split --target mac-code hf-qwen3_5_moe o7
# malformed fused checkpoints: the tensor named
cp -r hf-qwen3_5_moe bad-f1 && reshape bad-f1 model.language_model.layers.1.mlp.experts.gate_up_proj '[8,128,256]'
expect_refused "tensor 'model.language_model.layers.1.mlp.experts.gate_up_proj' is BF16 [8, 128, 256] but 8 fused experts of width 128 and hidden size 128 (moe_intermediate_size and hidden_size of config.json) need [8, 256, 128]" o8 tq-split bad-f1 o8
cp -r hf-gemma4 bad-f2 && set_config bad-f2 moe_intermediate_size 32
expect_refused "tensor 'model.language_model.layers.0.experts.gate_up_proj' is BF16 [8, 128, 128] but 8 fused experts of width 32" o9 tq-split bad-f2 o9
cp -r hf-qwen3_5_moe bad-f3 && set_config bad-f3 num_experts 6
expect_refused "config.json says num_experts = 6 but the layers have 8 experts (tensor 'model.language_model.layers.0.mlp.experts.gate_up_proj')" o10 tq-split bad-f3 o10
cp -r hf-gpt_oss bad-f4 && rename_tensors bad-f4 'layers\.1\.mlp\.experts\.down_proj_scales' 'layers.1.mlp.down_scales'
expect_refused "layer 1: 'model.layers.1.mlp.experts.down_proj_scales' is missing (the gpt_oss experts are fused)" o11 tq-split bad-f4 o11
cp -r hf-gpt_oss bad-f5 && set_config bad-f5 num_local_experts 4
expect_refused "config.json says num_local_experts = 4 but the layers have 8 experts (tensor 'model.layers.0.mlp.experts.gate_up_proj_blocks')" o12 tq-split bad-f5 o12
exit 0
