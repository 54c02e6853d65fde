# gpt-oss in float as HuggingFace transformers saves it (models/gpt_oss/modeling_gpt_oss.py,
# GptOssExperts: gate_up_proj [E, H, 2I] and down_proj [E, I, H] used as x @ W, gate and up
# interleaved along the last axis): tq-convert writes mlx-lm's experts.{gate,up,down}_proj,
# checked value for value by tests/consumers/gptoss_transformers.py (restated from transformers'
# source: an independent oracle), and the model then decodes bit for bit like the MXFP4 release
# it was dequantized from (transformers' convert_moe_packed_tensors, restated there too). Square
# experts (hidden = I) so that a transposed read cannot pass a shape check; a non-square case
# too. tq-split and tq-run read the unconverted layout too: the split holds the expert blocks
# the split of the converted model holds, byte for byte, and every path decodes alike (the
# decode against the f64 oracle written from GptOssExperts.forward is test_runtime_gptoss).
set -u
. "$ROOT/tests/lib/common.sh"
O="python3 $ROOT/tests/consumers/gptoss_transformers.py"
run tq-mkmodel --arch gpt_oss --size tiny --seed 11 --quiet mx
[ "$(jget mx/config.json hidden_size)" = "$(jget mx/config.json intermediate_size)" ] || fail "not square"
run $O dequantize mx hf
tq-verify ls hf | grep -q $'^model.layers.0.mlp.experts.gate_up_proj\tBF16\t\\[8,128,256\\]' || fail "$(tq-verify ls hf)"
# every tensor kept float: the experts are only renamed, transposed and de-interleaved
run tq-convert --quiet --keep . hf k
$O check hf k > chk.txt || fail "$(cat chk.txt)"
grep -qx '12 expert tensors equal transformers. GptOssExperts layout' chk.txt || fail "$(cat chk.txt)"
# ... and decode bit for bit like the MXFP4 release they were dequantized from
run tq-run mx --resident --tokens 1,2,3,4 --max-tokens 6 --quiet --logits mx.f32
run tq-run k --resident --tokens 1,2,3,4 --max-tokens 6 --quiet --logits k.f32
cmp -s mx.f32 k.f32 || fail "the converted transformers layout decodes differently from the MXFP4 release"
# TurboQuant: the same tensors as converting the release (the values are the same)
run tq-convert --quiet --threads 1 hf q
run tq-convert --quiet --threads 1 mx qm
for f in qm/*.safetensors; do cmp -s "$f" "q/${f#qm/}" || fail "${f#qm/} differs between the bf16 and MXFP4 forms"; done
# split and streamed decode equal to resident
run tq-split --quiet q qs
run tq-run qs --tokens 1,2,3,4 --max-tokens 6 --quiet --logits s.f32
run tq-run q --resident --tokens 1,2,3,4 --max-tokens 6 --quiet --logits r.f32
cmp -s s.f32 r.f32 || fail "streamed and resident logits differ"
# the unconverted layout split and decoded directly: the same blocks as splitting the converted
# model, split.json naming "fused_xw", the source back byte for byte from --join
run tq-split --quiet hf hs
run tq-split --quiet k ks
for f in ks/experts/*.bin; do cmp -s "$f" "hs/${f#ks/}" || fail "${f#ks/}: the split of transformers' layout differs"; done
grep -q '"naming": "fused_xw"' hs/split.json || fail "$(cat hs/split.json)"
run tq-split --join --quiet hs hj
tq-verify compare hf hj | grep -q '^IDENTICAL' || fail "$(tq-verify compare hf hj)"
run tq-run hf --resident --tokens 1,2,3,4 --max-tokens 6 --quiet --logits hf.f32
run tq-run hs --tokens 1,2,3,4 --max-tokens 6 --quiet --logits hs.f32
cmp -s mx.f32 hf.f32 || fail "transformers' layout decodes differently from the MXFP4 release"
cmp -s mx.f32 hs.f32 || fail "the split of transformers' layout decodes differently from the MXFP4 release"
# a non-square model (hidden 128, I 32)
run tq-mkmodel --arch gpt_oss --layers 1 --hidden 128 --intermediate 32 --experts 4 --top-k 2 --vocab 256 \
  --heads 2 --kv-heads 1 --head-dim 64 --seed 12 --quiet mx2
run $O dequantize mx2 hf2
run tq-convert --quiet --keep . hf2 k2
$O check hf2 k2 > chk2.txt || fail "$(cat chk2.txt)"
# a gate_up tensor in the invented [E, 2I, H] layout contradicts config.json and is refused
python3 - hf2 <<'PY'
import json, struct, sys
p = sys.argv[1] + "/model.safetensors"
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["model.layers.0.mlp.experts.gate_up_proj"]["shape"] = [4, 64, 128]
h["model.layers.0.mlp.experts.down_proj"]["shape"] = [4, 128, 32]
s = json.dumps(h, separators=(",", ":")).encode()
s += b" " * (n - len(s))
open(p, "wb").write(b[:8] + s + b[8 + n:])
PY
expect_msg 1 "transformers' GptOssExperts layout" tq-convert --quiet hf2 bad
expect_msg 1 "is BF16 \\[4, 64, 128\\] but 4 experts of width 32 and hidden size 128" tq-split --quiet hf2 bad
[ ! -e bad ] || fail "tq-split left bad"
expect_msg 1 "expected floats \\[4, 128, 64\\] (gpt_oss experts as transformers saves them" \
  tq-run hf2 --resident --tokens 1 --max-tokens 1 --quiet
# a missing bias is named by both
run $O dequantize mx2 hf3
python3 - hf3 <<'PY'
import json, struct, sys
p = sys.argv[1] + "/model.safetensors"
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["model.layers.0.mlp.router.extra"] = h.pop("model.layers.0.mlp.experts.gate_up_proj_bias")
s = json.dumps(h, separators=(",", ":")).encode()
s += b" " * (n - len(s))
open(p, "wb").write(b[:8] + s + b[8 + n:])
PY
expect_msg 1 "'model.layers.0.mlp.experts.gate_up_proj_bias' is missing" tq-split --quiet hf3 bad
expect_msg 1 "tensor 'model.layers.0.mlp.experts.gate_up_proj_bias': missing; expected floats \\[4, 64\\]" \
  tq-run hf3 --resident --tokens 1 --max-tokens 1 --quiet
# split.json claiming fused_xw for a layer that does not hold those six tensors is refused by
# the readers that rebuild source names
run tq-mkmodel --arch qwen3_moe --size tiny --seed 3 --quiet qm3
run tq-split --quiet qm3 qs3
sed -i 's/"naming": "[a-z]*"/"naming": "fused_xw"/' qs3/split.json
expect_msg 1 "a layer of naming fused_xw holds exactly gate_proj, up_proj and down_proj" tq-split --join --quiet qs3 bad
