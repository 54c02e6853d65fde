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
cp -r s b && python3 - <<'PY'
import json
c = json.load(open("b/config.json")); c["streaming"]["num_experts"] = 9
json.dump(c, open("b/config.json", "w"))
PY
fail "num_experts" b
cp -r s c && printf 'not json' | dd of=c/experts/layer_00.bin conv=notrunc 2>/dev/null
fail "layer_00.bin" c
cp -r s d && truncate -s 20000 d/experts/layer_00.bin
fail "layer_00.bin" d
cp -r s e && rm e/pinned.safetensors
fail "pinned.safetensors" e
# a corrupt block is only detected with --check-blocks (the data is not malformed)
cp -r s f && python3 - <<'PY'
import json
h = json.loads(open("f/experts/layer_00.bin", "rb").read(16384).rstrip(b"\0"))
bs = h["layout"]["expert_block_size"]
with open("f/experts/layer_00.bin", "r+b") as fp:
    for x in range(h["layout"]["num_experts"]):
        fp.seek(16384 + x * bs + 8); b = fp.read(1); fp.seek(16384 + x * bs + 8); fp.write(bytes([b[0] ^ 1]))
PY
tq-run f --tokens 1,2 --max-tokens 3 --quiet >/dev/null || exit 1
tq-run f --tokens 1,2 --max-tokens 3 --check-blocks >/dev/null 2>err.txt && { echo "corrupt block not detected"; exit 1; }
grep -q "does not match split.json" err.txt || { cat err.txt; exit 1; }
exit 0
