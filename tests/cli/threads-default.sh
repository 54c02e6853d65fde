# The default thread count follows the CPUs the process may run on (sched_getaffinity):
# under taskset -c 0 the tools use 1 thread, and as many as the allowed CPUs otherwise.
# (The cgroup CPU quota is tested in test_common over fake cgroup trees.)
. "$ROOT/tests/lib/common.sh"
command -v taskset >/dev/null || fail "taskset (util-linux) is missing"
run tq-mkmodel --quiet --seed 3 m
taskset -c 0 tq-convert m c1 >out1 || fail "convert under taskset -c 0"
grep -q " in [0-9.]* s (1 threads)$" out1 || fail "taskset -c 0: $(tail -n 1 out1)"
# Without taskset: at most the CPUs of the affinity mask (nproc counts them; fewer under a
# cgroup quota).
n=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
tq-convert m c2 >out2 || fail "convert"
got=$(sed -n 's/.* s (\([0-9]*\) threads)$/\1/p' out2)
[ -n "$got" ] && [ "$got" -ge 1 ] && [ "$got" -le "$n" ] || fail "default threads $got, nproc $n"
if [ "$n" -ge 2 ]; then
  taskset -c 0,1 tq-convert m c3 >out3 || fail "convert under taskset -c 0,1"
  grep -q "([12] threads)$" out3 || fail "taskset -c 0,1: $(tail -n 1 out3)"
fi
echo "taskset -c 0: 1 thread; default: $got of $n CPUs"
