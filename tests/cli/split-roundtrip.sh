# tq-split on generated models: --join gives back the source files byte for byte (HF and
# MLX naming, bf16 and affine4, dense), the output does not depend on --threads, layer files
# are multiples of the alignment, and --plan agrees with what the split writes.
set -u
. "$ROOT/tests/lib/common.sh"
aligned() { # aligned DIR ALIGN: every layer file's size is a multiple of ALIGN
  for f in "$1"/*.bin; do
    [ -f "$f" ] || fail "no layer files in $1"
    sz=$(wc -c < "$f"); [ $((sz % $2)) -eq 0 ] || fail "$f: $sz bytes, not a multiple of $2"
  done
}
run tq-mkmodel --quiet --arch qwen3_moe --naming hf m-hf
run tq-split --quiet m-hf s-hf
aligned s-hf/experts 16384
[ -f s-hf/pinned.safetensors ] && [ -f s-hf/split.json ] && [ -f s-hf/tokenizer.json ] || fail "split output incomplete: $(ls s-hf)"
grep -q '"streaming"' s-hf/config.json || fail "config.json has no streaming block"
run tq-split --join --quiet s-hf j-hf
diff -r -x tq-provenance.json m-hf j-hf >/dev/null || fail "join of an HF-named split differs from its source"

run tq-mkmodel --quiet --arch qwen3_moe --naming mlx --quant affine4 m-mlx
run tq-split --quiet --threads 1 m-mlx s1
run tq-split --quiet --threads 3 m-mlx s3
diff -r -x tq-provenance.json s1 s3 >/dev/null || fail "output depends on --threads"
run tq-split --join --quiet s1 j-mlx
diff -r -x tq-provenance.json m-mlx j-mlx >/dev/null || fail "join of an MLX affine4 split differs from its source"
# the same model from another directory, with the same --source-label: the same bytes
cp -r m-mlx m-copy
run tq-split --quiet --source-label m-mlx m-copy s-copy
run tq-split --quiet --source-label m-mlx m-mlx s-label
diff -r -x tq-provenance.json s-label s-copy >/dev/null || fail "--source-label: splits of identical copies differ"
run tq-split --quiet --align 4096 m-mlx s4k
aligned s4k/experts 4096
head -c 4096 s4k/experts/layer_00.bin | tr -d '\000' | grep -q '"page_size":4096' || fail "4096 header"

# the plan's numbers are the split's
block=$(tq-split --plan --ram 16G --json m-mlx | sed -n 's/.*"expert_block_bytes": \([0-9]*\).*/\1/p')
[ -n "$block" ] || fail "--plan --json has no expert_block_bytes"
grep -q "\"expert_block_size\":$block," s1/experts/layer_00.bin || fail "plan block $block != layer header"
tq-split --plan --ram 16G m-mlx | grep -q "^cache holds: " || fail "--plan text"
[ ! -e plan-out ] || fail "--plan wrote something"

# a shared expert (qwen2_moe style) stays pinned
run tq-mkmodel --quiet --arch qwen3_moe --shared-expert --tie-embeddings m-shared
run tq-split --quiet m-shared s-shared
tq-verify ls s-shared/pinned.safetensors | grep -q "^model.layers.1.mlp.shared_expert.down_proj.weight	" || fail "shared expert not pinned"
run tq-split --join --quiet s-shared j-shared
diff -r -x tq-provenance.json m-shared j-shared >/dev/null || fail "join of a shared-expert split differs"

# GGUF input (tensors dequantized to F32 under HF names)
# without --top-k: its metadata has no expert_used_count, and the message names the GGUF key
expect_exit 1 tq-split --quiet "$ROOT/testdata/vectors/ggml-vectors.gguf" s-gguf-nok >nok.msg
grep -q "the GGUF metadata has no ARCH.expert_used_count (num_experts_per_tok); pass --top-k" nok.msg ||
  fail "GGUF without expert_used_count: $(cat nok.msg)"
[ ! -e s-gguf-nok ] || fail "a refused split left its output"
run tq-split --quiet --top-k 2 "$ROOT/testdata/vectors/ggml-vectors.gguf" s-gguf
run tq-split --join --quiet s-gguf j-gguf
tq-verify compare "$ROOT/testdata/vectors/ggml-vectors.gguf" j-gguf >cmp 2>&1 || fail "GGUF split round trip: $(cat cmp)"

run tq-mkmodel --quiet --arch qwen3 m-dense
run tq-split --quiet m-dense s-dense
aligned s-dense/ffn_aligned 16384
[ ! -e s-dense/experts ] || fail "dense split has an experts dir"
run tq-split --join --quiet s-dense j-dense
diff -r -x tq-provenance.json m-dense j-dense >/dev/null || fail "join of a dense split differs from its source"
exit 0
