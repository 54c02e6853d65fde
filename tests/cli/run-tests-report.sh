# tests/run-tests reports what a failure needs: a unit-test binary killed by a signal names
# the signal, the case it died in (check.h's RUN line), the cases that passed before and the
# lines the dying case printed; a CLI script that fails shows its stdout as well as stderr; a
# .exact mismatch shows the first differing lines.
set -euo pipefail
. "$ROOT/tests/lib/common.sh"

# A scratch tree run-tests can run: its own copy of the runner, one CLI script, one binary.
mkdir -p root/tests/lib root/tests/cli build/tests
cp "$ROOT/tests/run-tests" root/tests/
cp "$ROOT/tests/lib/fuzz.sh" root/tests/lib/
cat > die.c <<'C'
#include "tests/unit/check.h"
#include <signal.h>
static void case_one(void) { CHECK(1 + 1 == 2); }
static void case_two(void)
{
    printf("  about to divide\n"); /* must reach the runner although stdout is a pipe */
    raise(SIGFPE);
}
static void case_three(void) { CHECK(1); }
int main(void)
{
    RUN(case_one);
    RUN(case_two);
    RUN(case_three);
    TEST_MAIN_END();
}
C
${CC:-cc} -I"$ROOT" -o build/tests/test_die die.c "$ROOT/tests/unit/check.c" -lm
cat > root/tests/cli/noisy.sh <<'SH'
echo "verify: first differing output: a/b.json (golden 11, now 22)"
echo "some stderr" >&2
exit 1
SH
printf 'one\ntwo\n' > root/tests/cli/exact.stdout.exact
printf 'echo one; echo TWO\n' > root/tests/cli/exact.sh

set +e
TQ_TEST_FILTER=. BUILD=$PWD/build BIN=$PWD/bin bash root/tests/run-tests > out 2>&1; rc=$?
set -e
[ "$rc" = 1 ] || fail "runner exit $rc"
grep -qx "FAIL test_die: killed by SIGFPE in case_two; passed before: case_one" out ||
  fail "death not reported: $(cat out)"
grep -qx "  about to divide" out || fail "the dying case's output was lost: $(cat out)"
grep -q "^test_die  *1 passed, 1 failed" out || fail "counts: $(cat out)"
grep -qx "  stdout: verify: first differing output: a/b.json (golden 11, now 22)" out ||
  fail "failing script's stdout not shown: $(cat out)"
grep -qx "  stderr: some stderr" out || fail "failing script's stderr not shown: $(cat out)"
grep -qx "FAIL cli/exact: stdout differs from exact.stdout.exact" out || fail "exact: $(cat out)"
grep -qx "  +TWO" out || fail ".exact diff not shown: $(cat out)"
grep -qx "1 passed, 3 failed" out || fail "totals: $(cat out)"

# a binary that ends normally with failures is not reported as dying
cat > fails.c <<'C'
#include "tests/unit/check.h"
static void bad(void) { CHECK(1 == 2); }
int main(void)
{
    RUN(bad);
    TEST_MAIN_END();
}
C
rm build/tests/test_die root/tests/cli/*
${CC:-cc} -I"$ROOT" -o build/tests/test_fails fails.c "$ROOT/tests/unit/check.c" -lm
set +e
TQ_TEST_FILTER=. BUILD=$PWD/build BIN=$PWD/bin bash root/tests/run-tests > out 2>&1
set -e
grep -q "^FAIL bad: fails.c:2: 1 == 2" out || fail "check failure: $(cat out)"
! grep -q "exited with status" out || fail "a normal failing exit reported as a death: $(cat out)"
grep -qx "0 passed, 1 failed" out || fail "totals: $(cat out)"
