# tq-verify manifest/check: coreutils accepts SHA256SUMS; every flipped byte, missing and
# extra file is reported and named (file, tensor, expert block).
set -euo pipefail
flip() { # FILE OFFSET: xor one byte with 0x01
  local b; b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 1)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
fails() { # expect exit status 1 from "$@", output in out
  set +e; "$@" >out 2>err; local rc=$?; set -e
  [ "$rc" = 1 ] || { echo "expected exit 1, got $rc: $*"; cat out err; exit 1; }
}
tq-mkmodel --arch qwen3_moe --size tiny --seed 3 --quiet m
tq-split --quiet m s
for d in m s; do
  tq-verify manifest --quiet --threads 2 "$d"
  (cd "$d" && sha256sum -c --quiet SHA256SUMS)
  [ "$(cd "$d" && find . -type f ! -name SHA256SUMS ! -name tq-manifest.json | sed 's|^\./||' | LC_ALL=C sort)" = "$(cut -c67- "$d/SHA256SUMS")" ]
  tq-verify check "$d" >out
  grep -qx "$d: OK (.* 0 problems)" out
done
# Same manifest whatever the thread count.
cp m/tq-manifest.json m1.json
tq-verify manifest --quiet --threads 1 m
cmp m/tq-manifest.json m1.json

# One flipped byte in every tensor in turn: the file and the tensor are named.
tq-verify ls m | while IFS=$'\t' read -r name dtype shape file off nbytes; do
  at=$((off + nbytes / 2))
  flip "m/$file" "$at"
  fails tq-verify check m
  grep -qF "$file: tensor '$name': bytes [$off, $((off + nbytes))) differ" out || { echo "tensor $name not named"; cat out; exit 1; }
  [ "$(grep -c 'differ' out)" = 1 ]
  flip "m/$file" "$at"
done
tq-verify check --quiet m

# One flipped byte in every expert block of the split: layer and expert are named.
for f in s/experts/layer_*.bin; do
  layer=$((10#$(basename "$f" .bin | sed 's/layer_//')))
  for e in 0 3 7; do
    at=$((16384 + e * 98304 + 777))
    flip "$f" "$at"
    fails tq-verify check s
    grep -qF "${f#s/}: expert block (layer $layer, expert $e): bytes" out || { echo "block $layer/$e not named"; cat out; exit 1; }
    flip "$f" "$at"
  done
done
# The same through split.json alone (no manifest in the directory).
mkdir s2; cp -r s/* s2/; rm s2/SHA256SUMS s2/tq-manifest.json
tq-verify check --quiet s2
flip s2/experts/layer_01.bin $((16384 + 5 * 98304))
fails tq-verify check s2
grep -qF "experts/layer_01.bin: expert block (layer 1, expert 5)" out

# Any plain file; a missing and an extra file; JSON report.
flip m/config.json 5
rm m/tokenizer.json
echo extra > m/notes.txt
fails tq-verify check m
grep -q "^config.json: sha256 " out
grep -qx "tokenizer.json: listed in the manifest but missing" out
grep -qx "notes.txt: present but not listed in the manifest" out
grep -qx "m: FAILED (3 of 5 files verified, 3 problems)" out
fails tq-verify check --json m
grep -q '"ok": false' out && grep -q '"kind": "missing"' out && grep -q '"kind": "extra"' out
# sha256sum -c agrees that the directory is damaged.
! (cd m && sha256sum -c --quiet SHA256SUMS >/dev/null 2>&1)
# A directory with nothing to check against.
mkdir empty
set +e; tq-verify check empty 2>err; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "no tq-manifest.json" err
