# tq-convert: killed at any point or out of space, it leaves no OUTPUT_DIR and the input intact.
. "$ROOT/tests/lib/safety.sh"
tq-mkmodel --quiet --seed 5 src || fail "mkmodel"
crash_safety out src -- tq-convert --quiet --threads 2 src out
disk_full out src 64 -- tq-convert --quiet src out
