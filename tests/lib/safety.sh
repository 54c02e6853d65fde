# Crash, disk-full and input-change checks for the CLI tests (sourced, not a test itself).
#
# tq writes every output through NAME.partial-XXXXXX (fsync, rename), and the common write
# path has two test hooks: TQ_CRASH_AFTER_BYTES=N (SIGKILL before the write that crosses N
# bytes) and TQ_PAUSE_AFTER_BYTES=N (SIGSTOP there, once). Primitives:
#
#   crash_at N CMD...           run CMD with TQ_CRASH_AFTER_BYTES=N; status 0 if it was
#                               killed, 1 if it finished before writing N bytes
#   crash_points TOTAL K        K crash points spread over (0, TOTAL), one a line
#   crash_check FINAL REF PTS -- CMD...
#                               for each point of PTS: kill CMD there, assert nothing exists
#                               under FINAL and a partial FINAL.partial-* does, then re-run CMD
#                               and assert FINAL (a file) is byte-identical to REF.
#                               PARTIAL_GLOB overrides the partial pattern.
#   partials FINAL              the partial files of FINAL, one a line
#   pause_at N CMD...           start CMD (a program) in the background with
#                               TQ_PAUSE_AFTER_BYTES=N and wait until it has stopped itself;
#                               sets PID (kill -CONT "$PID"; wait "$PID"). Status 1 if it
#                               exited instead. Output goes to $PAUSE_OUT/$PAUSE_ERR.
#   file_limit_run BLOCKS CMD...  run CMD under ulimit -f BLOCKS (1 KiB); sets RC and ERR
#   snapshot FILE...            SHA-256 lines of FILEs, to compare before/after
#   tree_hash PATH, out_bytes PATH   digest / total size of a file or directory tree
# Whole checks, for a tool writing one output OUT (file or directory) from INPUT:
#   crash_safety OUT INPUT -- CMD...       kill at six points, re-run, compare
#   disk_full OUT INPUT LIMIT_KIB -- CMD...  exit 1 naming OUT, nothing left, input intact
#   input_truncated OUT INPUT_DIR AFTER_BYTES -- CMD...  shards cut mid-run are detected

. "$(dirname "${BASH_SOURCE[0]}")/common.sh" # fail, run, expect_exit, jget

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
  for ((i = 0; i < 6000; i++)); do # up to a minute on a loaded machine
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

file_limit_run() {
  local blocks=$1; shift
  local ef
  ef=$(mktemp)
  ( trap '' XFSZ; ulimit -f "$blocks"; exec "$@" ) >/dev/null 2>"$ef"
  RC=$?
  ERR=$(cat "$ef")
  rm -f "$ef"
}

snapshot() { sha256sum "$@"; }

tree_hash() { # stable digest of a file or directory tree (names + contents)
  if [ -d "$1" ]; then (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum
  else sha256sum < "$1"; fi
}

out_bytes() { # total bytes of a file or directory tree
  if [ -d "$1" ]; then find "$1" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}'
  else stat -c %s "$1"; fi
}

# crash_safety OUT INPUT -- CMD...  (CMD writes OUT from INPUT)
# Kills CMD (SIGKILL, via TQ_CRASH_AFTER_BYTES) after 0, 1 and 1/4..3/4 of the output bytes
# and just before the end; each time nothing may exist under OUT, a partial must be left
# under an identifiable OUT.partial-* name, the input must be untouched, and a re-run must
# succeed and give the same bytes as an uninterrupted run.
crash_safety() {
  local out=$1 input=$2; shift 3
  local in_hash ref total n
  in_hash=$(tree_hash "$input")
  rm -rf "$out" "$out".partial-*
  "$@" >/dev/null || fail "uninterrupted run failed: $*"
  ref=$(tree_hash "$out"); total=$(out_bytes "$out")
  [ "$total" -gt 16 ] || fail "output too small to crash-test ($total bytes)"
  for n in 0 1 $((total / 4)) $((total / 2)) $((total * 3 / 4)) $((total - 8)); do
    rm -rf "$out" "$out".partial-*
    crash_at "$n" "$@" || fail "not killed after $n of $total bytes: it finished first"
    [ ! -e "$out" ] && [ ! -L "$out" ] || fail "killed after $n bytes: $out exists"
    compgen -G "$out.partial-*" >/dev/null || fail "killed after $n bytes: no $out.partial-* left to identify"
    [ "$(tree_hash "$input")" = "$in_hash" ] || fail "killed after $n bytes: input changed"
    "$@" >/dev/null || fail "re-run after a kill at $n bytes failed"
    [ "$(tree_hash "$out")" = "$ref" ] || fail "re-run after a kill at $n bytes gave different bytes"
  done
  rm -rf "$out".partial-*
  echo "crash-safe at 6 kill points over $total bytes: $*"
}

# disk_full OUT INPUT LIMIT_KIB -- CMD...
# Runs CMD under a file-size limit: it must exit 1 with a message naming the output, leave
# neither OUT nor any OUT.partial-*, and not touch the input.
disk_full() {
  local out=$1 input=$2 kib=$3; shift 4
  local in_hash rc err
  in_hash=$(tree_hash "$input")
  rm -rf "$out" "$out".partial-*
  file_limit_run "$kib" "$@"; rc=$RC; err=$ERR
  [ "$rc" -eq 1 ] || fail "with a ${kib} KiB file-size limit: expected exit 1, got $rc ($err)"
  grep -q "$(basename "$out")" <<<"$err" || fail "error does not name the output: $err"
  grep -qi "too large\|no space\|write" <<<"$err" || fail "error does not say what failed: $err"
  [ ! -e "$out" ] || fail "$out exists after a failed write"
  ! compgen -G "$out.partial-*" >/dev/null || fail "partial output left behind: $(echo "$out".partial-*)"
  [ "$(tree_hash "$input")" = "$in_hash" ] || fail "input changed"
  echo "disk full handled (limit ${kib} KiB): $err"
}

# input_truncated OUT INPUT_DIR AFTER_BYTES -- CMD...  (CMD writes OUT from the model in INPUT_DIR)
# Stops CMD (SIGSTOP, via TQ_PAUSE_AFTER_BYTES) once it has written AFTER_BYTES, cuts every
# *.safetensors shard of INPUT_DIR down to its header, and lets CMD continue: it must notice
# the shorter input (exit 1, a message naming a shard and the truncation), and leave neither
# OUT nor OUT.partial-*. Deterministic: CMD cannot finish before the truncation, because it
# stops itself in the middle of writing.
input_truncated() {
  local out=$1 input=$2 after=$3; shift 4
  local rc f hl
  rm -rf "$out" "$out".partial-*
  PAUSE_ERR=err.txt pause_at "$after" "$@" ||
    fail "$* did not stop after writing $after bytes: the test needs a larger input"
  for f in "$input"/*.safetensors; do
    hl=$(od -An -tu8 -N8 "$f" | tr -d ' ')
    truncate -s $((8 + hl)) "$f"
  done
  kill -CONT "$PID"
  wait "$PID"; rc=$?
  [ "$rc" -eq 1 ] || fail "input truncated under $*: expected exit 1, got $rc ($(cat err.txt))"
  grep -Eq "$(basename "$input")/[^ :]*\.safetensors" err.txt || fail "error does not name the shard: $(cat err.txt)"
  grep -Eqi "unexpected end of file|truncated" err.txt || fail "error does not say the file is short: $(cat err.txt)"
  [ ! -e "$out" ] || fail "$out exists after the input was truncated"
  ! compgen -G "$out.partial-*" >/dev/null || fail "partial output left behind: $(echo "$out".partial-*)"
  echo "input truncation detected after $after bytes written: $(cat err.txt)"
}
