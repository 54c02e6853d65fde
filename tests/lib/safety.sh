# Crash and disk-full checks shared by tests/cli/*-safety.sh (sourced, not a test itself).
# A tool under test writes one output OUT (a file or a directory) through tq's atomic path:
# everything goes to OUT.partial-XXXXXX first and is renamed at the very end.

fail() { echo "FAIL: $*" >&2; exit 1; }

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
  local in_hash ref total n rc
  in_hash=$(tree_hash "$input")
  rm -rf "$out" "$out".partial-*
  "$@" >/dev/null || fail "uninterrupted run failed: $*"
  ref=$(tree_hash "$out"); total=$(out_bytes "$out")
  [ "$total" -gt 16 ] || fail "output too small to crash-test ($total bytes)"
  for n in 0 1 $((total / 4)) $((total / 2)) $((total * 3 / 4)) $((total - 8)); do
    rm -rf "$out" "$out".partial-*
    TQ_CRASH_AFTER_BYTES=$n "$@" >/dev/null 2>&1; rc=$?
    [ "$rc" -eq 137 ] || fail "killed after $n of $total bytes: expected SIGKILL (137), got $rc"
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
  err=$( (ulimit -f "$kib"; "$@" >/dev/null) 2>&1 ); rc=$?
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
  local pid st rc f hl
  rm -rf "$out" "$out".partial-*
  TQ_PAUSE_AFTER_BYTES=$after "$@" >/dev/null 2>err.txt &
  pid=$!
  for _ in $(seq 1 3000); do # up to 60 s
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || st=gone
    [ "$st" = T ] || [ "$st" = gone ] || [ "$st" = Z ] && break
    sleep 0.02
  done
  if [ "$st" != T ]; then
    wait "$pid"; rc=$?
    fail "$* did not stop after writing $after bytes (state $st, exit $rc): the test needs a larger input"
  fi
  for f in "$input"/*.safetensors; do
    hl=$(od -An -tu8 -N8 "$f" | tr -d ' ')
    truncate -s $((8 + hl)) "$f"
  done
  kill -CONT "$pid"
  wait "$pid"; rc=$?
  [ "$rc" -eq 1 ] || fail "input truncated under $*: expected exit 1, got $rc ($(cat err.txt))"
  grep -Eq "$(basename "$input")/[^ :]*\.safetensors" err.txt || fail "error does not name the shard: $(cat err.txt)"
  grep -Eqi "unexpected end of file|truncated" err.txt || fail "error does not say the file is short: $(cat err.txt)"
  [ ! -e "$out" ] || fail "$out exists after the input was truncated"
  ! compgen -G "$out.partial-*" >/dev/null || fail "partial output left behind: $(echo "$out".partial-*)"
  echo "input truncation detected after $after bytes written: $(cat err.txt)"
}
