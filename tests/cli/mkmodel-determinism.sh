# tq-mkmodel: same flags + seed -> identical files (any thread count), other seed differs.
set -eu
. "$ROOT/tests/lib/common.sh"
same_dirs() {
  [ "$(cd "$1" && ls)" = "$(cd "$2" && ls)" ] || fail "$1 and $2 list different files"
  for f in "$1"/*; do cmp -s "$f" "$2/$(basename "$f")" || fail "$(basename "$f") differs between $1 and $2"; done
}
args="--arch qwen3_moe --size tiny --experts 4 --layers 2 --shard-size 200K --quiet"
tq-mkmodel $args --seed 3 --threads 1 a
tq-mkmodel $args --seed 3 --threads 2 b
tq-mkmodel $args --seed 3 --threads 7 c
tq-mkmodel $args --seed 4 d
same_dirs a b
same_dirs a c
[ -f a/model.safetensors.index.json ] || fail "no index.json with --shard-size 200K"
n=$(ls a/model-*-of-*.safetensors | wc -l)
[ "$n" -ge 3 ] || fail "only $n shards"
for f in a/model-*.safetensors; do
  ! cmp -s "$f" "d/$(basename "$f")" || fail "seed 4 gives the same $(basename "$f") as seed 3"
done
# every arch and dtype, mlx naming and affine quantization are deterministic too
for extra in "--arch llama --dtype f16" "--arch qwen3 --dtype f32 --tie-embeddings" \
             "--naming mlx --quant affine4" "--naming mlx --quant affine8 --shared-expert" \
             "--arch ngram --rows 500 --dtype f16"; do
  rm -rf x y
  tq-mkmodel $extra --seed 9 --threads 1 --quiet x
  tq-mkmodel $extra --seed 9 --threads 3 --quiet y
  same_dirs x y
done
tq-verify ls a >/dev/null
echo ok
