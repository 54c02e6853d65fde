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
#   expect_refused TEXT FINAL TOOL ARGS...
#                          hostile input: TOOL ARGS must exit 1 within 10 s (run under
#                          timeout 10, so a hang fails the test) with a 'TOOL: ' message
#                          containing TEXT (grep -F), and leave nothing under FINAL, nor a
#                          FINAL.partial-* ('-' when the command writes nothing)
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

expect_refused() {
  local msg=$1 final=$2 tool=$3 rc
  shift 3
  timeout 10 "$tool" "$@" >out 2>err; rc=$?
  [ "$rc" -ne 124 ] || fail "$tool $*: still running after 10 s (blocked?)"
  [ "$rc" -eq 1 ] || fail "$tool $*: exit $rc, expected 1 ($(cat err))"
  grep -q "^$tool: " err || fail "$tool $*: no '$tool:' message ($(cat err))"
  grep -qF -- "$msg" err || fail "$tool $*: stderr lacks '$msg' ($(cat err))"
  if [ "$final" != - ]; then
    [ ! -e "$final" ] && [ ! -L "$final" ] || fail "$tool $*: $final exists after a refusal"
    ! compgen -G "$final.partial-*" >/dev/null || fail "$tool $*: left $(echo "$final".partial-*)"
  fi
  return 0
}
