# tests/cli/lib/crash.sh — crash-safety and disk-full helpers for CLI tests (source it).
#
# tq writes every output through NAME.partial-XXXXXX (fsync, rename), and the common write
# path has two test hooks: TQ_CRASH_AFTER_BYTES=N (SIGKILL before the write that crosses N
# bytes) and TQ_PAUSE_AFTER_BYTES=N (SIGSTOP there, once). These helpers turn them into
# assertions any tool's test can reuse:
#
#   crash_at N CMD...           run CMD with TQ_CRASH_AFTER_BYTES=N; status 0 if it was
#                               killed, 1 if it finished before writing N bytes
#   crash_points TOTAL K        K crash points spread over (0, TOTAL), one a line
#   crash_check FINAL REF PTS -- CMD...
#                               for each point of PTS (a space-separated list): kill CMD
#                               there, assert nothing exists under FINAL and a partial
#                               FINAL.partial-* does (unless the point is past the end), then
#                               re-run CMD to completion and assert FINAL is byte-identical
#                               to REF; FINAL and partials are removed between points.
#                               PARTIAL_GLOB overrides the partial pattern (default
#                               "FINAL.partial-*").
#   partials FINAL              the partial files of FINAL, one a line
#   pause_at N CMD...           start CMD (a program, not a shell function: PID must be
#                               the process that stops) in the background with TQ_PAUSE_AFTER_BYTES=N, wait
#                               until it has stopped itself; sets PID (kill -CONT "$PID";
#                               wait "$PID" to finish it). Status 1 if it exited instead.
#                               Its stdout/stderr go to $PAUSE_OUT/$PAUSE_ERR (default none).
#   disk_full BLOCKS CMD...     run CMD under ulimit -f BLOCKS (1 KiB units); sets RC and
#                               ERR (its stderr)
#   snapshot FILE...            SHA-256 lines of FILEs, to compare before/after
#   fail MSG                    print MSG on stderr, exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }

partials() {
  local g=${PARTIAL_GLOB:-"$1.partial-*"} f
  for f in $g; do [ -e "$f" ] && echo "$f"; done
  return 0
}

crash_at() {
  local n=$1; shift
  TQ_CRASH_AFTER_BYTES=$n "$@" >/dev/null 2>&1
  local rc=$?
  [ "$rc" -eq 137 ] && return 0
  [ "$rc" -eq 0 ] && return 1
  fail "crash_at $n: $* exited with status $rc instead of being killed or finishing"
}

crash_points() {
  local total=$1 k=$2 i
  for ((i = 1; i <= k; i++)); do echo $(( total * i / (k + 1) )); done
}

crash_check() {
  local final=$1 ref=$2 pts=$3; shift 3
  [ "$1" = "--" ] && shift
  local p
  for p in $pts; do
    rm -f "$final"; partials "$final" | xargs -r rm -f
    if crash_at "$p" "$@"; then
      [ -e "$final" ] && fail "killed after $p bytes, yet $final exists"
      [ -n "$(partials "$final")" ] || fail "killed after $p bytes: no partial file for $final"
    fi
    "$@" >/dev/null 2>&1 || fail "re-run after a crash at $p bytes failed: $*"
    cmp -s "$final" "$ref" || fail "re-run after a crash at $p bytes: $final differs from $ref"
  done
  rm -f "$final"; partials "$final" | xargs -r rm -f
  return 0
}

pause_at() {
  local n=$1; shift
  TQ_PAUSE_AFTER_BYTES=$n "$@" >"${PAUSE_OUT:-/dev/null}" 2>"${PAUSE_ERR:-/dev/null}" &
  PID=$!
  local i state
  for ((i = 0; i < 1000; i++)); do
    if [ -r "/proc/$PID/stat" ]; then
      state=$(sed 's/^.*) //' "/proc/$PID/stat" | cut -d' ' -f1)
    else
      state=$(ps -o stat= -p "$PID" 2>/dev/null | cut -c1)
    fi
    [ "$state" = T ] && return 0
    [ -z "$state" ] || [ "$state" = Z ] && { wait "$PID"; return 1; }
    sleep 0.01
  done
  fail "pause_at $n: $* did not stop"
}

disk_full() {
  local blocks=$1; shift
  local ef
  ef=$(mktemp)
  ( trap '' XFSZ; ulimit -f "$blocks"; exec "$@" ) >/dev/null 2>"$ef"
  RC=$?
  ERR=$(cat "$ef")
  rm -f "$ef"
}

snapshot() { sha256sum "$@"; }
