# tq-split (and --join): killed at any point or out of space, no output dir, input intact.
. "$ROOT/tests/lib/safety.sh"
tq-mkmodel --quiet --seed 6 src || fail "mkmodel"
crash_safety out src -- tq-split --quiet --threads 2 src out
disk_full out src 64 -- tq-split --quiet src out
tq-split --quiet src split || fail "split"
crash_safety joined split -- tq-split --quiet --join split joined
disk_full joined split 64 -- tq-split --quiet --join split joined
