# Helpers for every CLI test (sourced, not a test itself; tests/lib/safety.sh sources it).
#
#   fail MESSAGE...        print "FAIL: MESSAGE" on stderr and end the test with status 1
#   run CMD...             run CMD; fail, naming it, when it exits non-zero
#   expect_exit STATUS TOOL ARGS...
#                          run TOOL ARGS (stdout to ./out, stderr to ./err); fail unless it
#                          exits STATUS with nothing on stdout and a 'TOOL: ' message; print
#                          the message on stdout with partial-XXXXXX names written partial-X
#                          (for .stdout.exact goldens)
#   expect_msg STATUS TEXT TOOL ARGS...
#                          the same, printing nothing; the message must also contain TEXT
#   jget FILE KEY          (tests/lib/json.sh) a top-level value of a tq --json report

. "$(dirname "${BASH_SOURCE[0]}")/json.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }

run() { "$@" || fail "$* exited $?"; }

expect_exit() {
  local want=$1 tool=$2 rc
  shift 2
  "$tool" "$@" >out 2>err; rc=$?
  [ "$rc" -eq "$want" ] || fail "$tool $*: exit $rc, expected $want ($(cat err))"
  [ ! -s out ] || fail "$tool $*: wrote to stdout ($(cat out))"
  grep -q "^$tool: " err || fail "$tool $*: no '$tool:' message ($(cat err))"
  sed 's/partial-[A-Za-z0-9]*/partial-X/' err
}

expect_msg() {
  local want=$1 msg=$2
  shift 2
  expect_exit "$want" "$@" >/dev/null
  grep -q -- "$msg" err || fail "$*: stderr lacks '$msg' ($(cat err))"
}
