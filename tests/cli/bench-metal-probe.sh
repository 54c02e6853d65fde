# bench/metal.sh as docs/metal.md says to run it (default TQ_BENCH_SIZE=8g) on a build or
# machine without Metal: it says so and exits 0 within seconds, having generated only the tiny
# probe model, never the 8 GB one (issue 32: it used to generate the 8 GB model first). On a
# Mac with a Metal device there is nothing to check here: the benchmark would run in full.
. "$ROOT/tests/lib/common.sh"
tq-mkmodel --quiet --size tiny --arch qwen3_moe p && tq-split --quiet p p.split || fail "probe model"
if tq-run p.split --tokens 1 --max-tokens 1 --backend metal --quiet >/dev/null 2>&1; then
  echo "a Metal device answers here: bench/metal.sh would run in full, not checked"
  exit 0
fi
mkdir bo
TQ_BENCH_DIR=$PWD/bo timeout 60 bash "$ROOT/bench/metal.sh" >out 2>err; rc=$?
[ $rc = 0 ] || fail "bench/metal.sh without Metal: exit $rc: $(tail -n3 err)"
grep -q '^metal: skipped, no metal backend here: tq-run: ' out || fail "no clear message: $(cat out)"
[ ! -e bo/moe-8g ] || fail "bench/metal.sh generated the 8g model before finding there is no Metal"
echo "bench/metal.sh without Metal: $(head -n1 out)"
