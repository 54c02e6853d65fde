# tq-run on damaged split directories: exit 1 with a message naming the file, never a crash.
set -u
tq-mkmodel --arch qwen3_moe --size tiny --seed 8 m >/dev/null || exit 1
tq-split --quiet m s || exit 1
fail() { # fail PATTERN DIR: tq-run must exit 1 and print PATTERN
  local pat=$1 dir=$2
  tq-run "$dir" --tokens 1,2 --max-tokens 3 --cache-budget 1 >out.txt 2>err.txt; local rc=$?
  [ "$rc" -eq 1 ] || { echo "$dir: exit $rc, expected 1"; cat err.txt; exit 1; }
  grep -q -- "$pat" err.txt || { echo "$dir: message lacks '$pat':"; cat err.txt; exit 1; }
}
cp -r s a && rm a/experts/layer_01.bin
fail "layer_01.bin" a
cp -r s b && sed '/"streaming"/,/}/ s/"num_experts": 8/"num_experts": 9/' s/config.json > b/config.json
grep -q '"num_experts": 9' b/config.json || { echo "could not edit b/config.json"; exit 1; }
fail "num_experts" b
cp -r s c && printf 'not json' | dd of=c/experts/layer_00.bin conv=notrunc 2>/dev/null
fail "layer_00.bin" c
cp -r s d && head -c 20000 s/experts/layer_00.bin > d/experts/layer_00.bin
fail "layer_00.bin" d
cp -r s e && rm e/pinned.safetensors
fail "pinned.safetensors" e
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
