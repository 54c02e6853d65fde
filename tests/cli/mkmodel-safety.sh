# tq-mkmodel: a killed or out-of-space generation leaves no OUTPUT_DIR behind.
. "$ROOT/tests/lib/safety.sh"
mkdir -p none
crash_safety out none -- tq-mkmodel --quiet --seed 9 out
disk_full out none 64 -- tq-mkmodel --quiet --seed 9 out
