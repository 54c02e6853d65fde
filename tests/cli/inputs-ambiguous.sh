# Inputs that could be read two ways are refused with the reason, not resolved by a guess:
# a model directory holding both safetensors and GGUF files, an index whose weight_map is
# empty, an MoE block with both per-expert (experts.N.*) and stacked (switch_mlp.*) expert
# tensors, and expert indices that are not canonical decimals (experts.01, 2^32). Each: exit 1
# within 10 s naming the directory or tensor, nothing under the output's name.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 8 m
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 8 --shard-size 300k mi
run tq-mkmodel --quiet --arch llama --size tiny --seed 9 d
# one more shard: DIR/extra.safetensors holding one F32 [2] tensor named NAME
extra() {
  python3 - "$1/extra.safetensors" "$2" <<'PY' || fail "cannot write $1/extra.safetensors"
import json, struct, sys
h = json.dumps({sys.argv[2]: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * 8)
PY
}
both_tools() { # MESSAGE DIR
  expect_refused "$1" res tq-convert --bits 4 "$2" res
  expect_refused "$1" res tq-split "$2" res
  expect_refused "$1" - tq-verify ls "$2"
}

# safetensors and GGUF in one directory
rm -rf x; cp -r d x; cp "$ROOT/testdata/vectors/ggml-vectors.gguf" x/
both_tools "x: holds both safetensors (model.safetensors) and GGUF (ggml-vectors.gguf) files" x
# an index that names no tensor
rm -rf x; cp -r mi x
python3 -c 'import json, sys; p = sys.argv[1]; j = json.load(open(p)); j["weight_map"] = {}; json.dump(j, open(p, "w"))' \
  x/model.safetensors.index.json || fail "cannot edit the index"
both_tools "x/model.safetensors.index.json: weight_map is empty" x
# per-expert and stacked experts in one block
rm -rf x; cp -r m x; extra x model.layers.1.mlp.switch_mlp.gate_proj.weight
both_tools "x: 'model.layers.1.mlp.' holds both per-expert (model.layers.1.mlp.experts." x
rm -rf x; cp -r m x; extra x model.layers.0.mlp.experts.gate_up_proj
both_tools "holds both per-expert (model.layers.0.mlp.experts.0." x
# non-canonical expert indices
rm -rf x; cp -r m x; extra x model.layers.0.mlp.experts.01.gate_proj.weight
both_tools "x: tensor 'model.layers.0.mlp.experts.01.gate_proj.weight': expert index '01' is not a canonical decimal" x
rm -rf x; cp -r m x; extra x model.layers.0.mlp.experts.4294967296.gate_proj.weight
both_tools "expert index '4294967296' is not a canonical decimal below 1048576" x
# the plain models still open
run tq-verify ls m >/dev/null && run tq-verify ls mi >/dev/null
echo "every ambiguous input was refused with its reason"
