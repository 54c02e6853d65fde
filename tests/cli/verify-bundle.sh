# tq-verify pack/check/unpack: deterministic bundle bytes; damaged bundles are errors.
set -euo pipefail
tq-mkmodel --arch qwen3_moe --size tiny --seed 5 --quiet m
tq-verify pack --quiet m -o a.tar.zst
tq-verify pack --quiet --threads 1 --level 3 m -o b.tar.zst
cmp a.tar.zst b.tar.zst
# A copy with other mtimes and modes packs to the same bytes.
cp -r m m2; touch -d '2001-02-03 04:05:06' m2/*; chmod 600 m2/config.json
tq-verify pack --quiet m2 -o c.tar.zst
cmp a.tar.zst c.tar.zst
# The manifest it contains is what manifest writes; pack leaves DIR untouched.
[ ! -e m/SHA256SUMS ] && [ ! -e m/tq-manifest.json ]
tq-verify check a.tar.zst | grep -x "a.tar.zst: OK (5 of 5 files verified, 0 problems)" >/dev/null
tq-verify unpack --quiet a.tar.zst -o u
tq-verify manifest --quiet m
cmp m/tq-manifest.json u/tq-manifest.json && cmp m/SHA256SUMS u/SHA256SUMS
(cd u && sha256sum -c --quiet SHA256SUMS)
# With a manifest in DIR the bundle is the same; a stale one makes pack refuse.
tq-verify pack --quiet m -o d.tar.zst
cmp a.tar.zst d.tar.zst
echo more >> m/tokenizer_config.json
set +e; tq-verify pack --quiet m -o e.tar.zst 2>err; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "has changed since the manifest was written" err && [ ! -e e.tar.zst ]
ls | grep partial >/dev/null && { echo "partial file left"; exit 1; }
# Truncated and corrupted bundles: exit 1 (never a crash), nothing unpacked.
size=$(stat -c %s a.tar.zst)
for cut in 0 1 100 $((size / 3)) $((size / 2)) $((size - 1)); do
  head -c "$cut" a.tar.zst > t.tar.zst
  set +e; tq-verify check t.tar.zst >/dev/null 2>&1; rc=$?
  tq-verify unpack --quiet t.tar.zst -o ut >/dev/null 2>&1; rc2=$?; set -e
  [ "$rc" = 1 ] && [ "$rc2" = 1 ] || { echo "cut $cut: exit $rc/$rc2"; exit 1; }
  [ ! -e ut ]
done
for at in 50 $((size / 4)) $((size / 2)); do
  cp a.tar.zst x.tar.zst
  printf 'garbage!' | dd of=x.tar.zst bs=1 seek="$at" conv=notrunc status=none
  set +e; tq-verify check x.tar.zst >/dev/null 2>&1; rc=$?; set -e
  [ "$rc" = 1 ] || { echo "corruption at $at: exit $rc"; exit 1; }
done
# Not a bundle at all.
echo hello > plain.txt
set +e; tq-verify check plain.txt 2>err; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "cannot read as .tar.zst" err
# Names too long for ustar get pax extended headers: still the same bytes a second later.
long=$(printf 'd%.0s' $(seq 120))/$(printf 'f%.0s' $(seq 130))
mkdir -p "ln/${long%/*}"; echo x > "ln/$long"
tq-verify pack --quiet ln -o l1.tar.zst
sleep 1.1
tq-verify pack --quiet ln -o l2.tar.zst
cmp l1.tar.zst l2.tar.zst
tq-verify check --quiet l1.tar.zst
