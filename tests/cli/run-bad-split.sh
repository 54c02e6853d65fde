# tq-run on damaged split directories: exit 1 with a message naming the file, never a crash.
set -u
tq-mkmodel --arch qwen3_moe --size tiny --seed 8 m >/dev/null || exit 1
tq-split --quiet m s || exit 1
. "$ROOT/tests/lib/common.sh"
refused() { expect_msg 1 "$1" tq-run "$2" --tokens 1,2 --max-tokens 3 --cache-budget 1B; } # refused PATTERN DIR
cp -r s a && rm a/experts/layer_01.bin
refused "layer_01.bin" a
cp -r s b && sed '/"streaming"/,/}/ s/"num_experts": 8/"num_experts": 9/' s/config.json > b/config.json
grep -q '"num_experts": 9' b/config.json || { echo "could not edit b/config.json"; exit 1; }
refused "num_experts" b
cp -r s c && printf 'not json' | dd of=c/experts/layer_00.bin conv=notrunc 2>/dev/null
refused "layer_00.bin" c
cp -r s d && head -c 20000 s/experts/layer_00.bin > d/experts/layer_00.bin
refused "layer_00.bin" d
cp -r s e && rm e/pinned.safetensors
refused "pinned.safetensors" e
# a corrupt block is only detected with --check-blocks (the data is not malformed)
cp -r s f
bs=$(head -c 16384 f/experts/layer_00.bin | tr -d '\0' | grep -o '"expert_block_size": *[0-9]*' | grep -o '[0-9]*$')
[ -n "$bs" ] || { echo "no expert_block_size"; exit 1; }
for x in 0 1 2 3 4 5 6 7; do
  off=$((16384 + x * bs + 8))
  old=$(od -An -tu1 -j $off -N1 f/experts/layer_00.bin | tr -d ' ')
  printf "\\$(printf '%03o' $(( (old + 1) % 256 )))" | dd of=f/experts/layer_00.bin bs=1 seek=$off conv=notrunc 2>/dev/null
done
cmp -s s/experts/layer_00.bin f/experts/layer_00.bin && { echo "corruption failed"; exit 1; }
tq-run f --tokens 1,2 --max-tokens 3 --quiet >/dev/null || exit 1
tq-run f --tokens 1,2 --max-tokens 3 --check-blocks >/dev/null 2>err.txt && { echo "corrupt block not detected"; exit 1; }
grep -q "does not match split.json" err.txt || { cat err.txt; exit 1; }
exit 0
