# Every tool's output is byte-identical across --threads 1/2/7 and across two runs.
. "$ROOT/tests/lib/safety.sh"
same() { [ "$(tree_hash "$1")" = "$(tree_hash "$2")" ] || fail "$1 and $2 differ"; }
for t in 1 2 7; do
  tq-mkmodel --quiet --seed 11 --naming hf --threads $t m$t || fail "mkmodel --threads $t"
  tq-convert --quiet --threads $t m1 c$t || fail "convert --threads $t"
  tq-convert --quiet --threads $t --bits 2 --group-size 32 --scale rms m1 r$t || fail "convert rms --threads $t"
  tq-split --quiet --threads $t c1 s$t || fail "split --threads $t"
  tq-split --quiet --join --threads $t s1 j$t || fail "join --threads $t"
  tq-run --quiet --threads $t s1 --tokens 1,2,3 --max-tokens 4 --logits l$t.f32 > tok$t || fail "run --threads $t"
done
for t in 2 7; do
  same m1 m$t; same c1 c$t; same r1 r$t; same s1 s$t; same j1 j$t; same l1.f32 l$t.f32; same tok1 tok$t
done
# A second run with the same flags.
tq-convert --quiet --threads 2 m1 c1b && same c1 c1b
tq-split --quiet --threads 2 c1 s1b
same s1 s1b
echo "threads 1/2/7 and repeated runs: identical"
