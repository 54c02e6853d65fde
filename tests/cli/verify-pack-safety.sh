# tq-verify pack: killed at any point or out of space, no bundle under the final name, the
# directory untouched; a re-run gives the same bytes. unpack likewise leaves no directory.
. "$ROOT/tests/lib/safety.sh"
tq-mkmodel --quiet --seed 8 src || fail "mkmodel"
crash_safety b.tar.zst src -- tq-verify pack --quiet --threads 2 src -o b.tar.zst
disk_full b.tar.zst src 64 -- tq-verify pack --quiet src -o b.tar.zst
tq-verify pack --quiet src -o b.tar.zst || fail "pack"
crash_safety unpacked b.tar.zst -- tq-verify unpack --quiet b.tar.zst -o unpacked
disk_full unpacked b.tar.zst 64 -- tq-verify unpack --quiet b.tar.zst -o unpacked
