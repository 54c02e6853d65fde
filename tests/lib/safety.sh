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
#   pause_env VAR=VALUE CMD...  the same with another pausing hook (TQ_PAUSE_BEFORE_CHECK=1)
#   change_input FILE MODE      touch, replace, overwrite or add (see input_changed)
#   file_limit_run BLOCKS CMD...  run CMD under ulimit -f BLOCKS (1 KiB); sets RC and ERR
#   snapshot FILE...            SHA-256 lines of FILEs, to compare before/after
#   tree_hash PATH, out_bytes PATH   digest / total size of a file or directory tree
#   model_hash DIR                   tree_hash without DIR/tq-provenance.json
# Whole checks, for a tool writing one output OUT (file or directory) from INPUT:
#   crash_safety OUT INPUT -- CMD...       kill at six points, re-run, compare
#   disk_full OUT INPUT LIMIT_KIB -- CMD...  exit 1 naming OUT, nothing left, input intact
#   input_truncated OUT INPUT_DIR AFTER_BYTES -- CMD...  shards cut mid-run are detected
#   output_appears OUT AFTER_BYTES -- CMD...   OUT made by someone else mid-run survives
#   two_writers OUT N -- CMD...               two runs into one new OUT, N times: one wins
#   force_kill_steps OUT OLD -- CMD...        --force replacement killed at every step
#   input_changed OUT FILE AFTER MODE -- CMD...  an input touched/replaced/rewritten mid-run
# Inputs for checks that run every tool:
#   safety_inputs               in the current directory: src (a generated model), split (its
#                               tq-split), b.tar.zst (its bundle), ng (an n-gram row table),
#                               r0.rows (ng's row file)

. "$(dirname "${BASH_SOURCE[0]}")/common.sh" # fail, run, expect_exit, jget

# make_dfl: writes ./dfl, which runs a command with SIGINT at its default, in place of
# itself. A script's background jobs start with SIGINT ignored (and tq keeps an ignored
# signal ignored), which a shell cannot undo.
make_dfl() {
  cat >dfl <<'PY'
#!/usr/bin/env python3
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])
PY
  chmod +x dfl
}

safety_inputs() {
  tq-mkmodel --quiet --seed 5 src || fail mkmodel
  tq-split --quiet src split || fail split
  tq-verify pack --quiet src -o b.tar.zst || fail pack
  tq-mkmodel --quiet --arch ngram --rows 3000 ng || fail "mkmodel ngram"
  tq-rowlayout ng/model.safetensors --out r0.rows --quiet || fail rowlayout
}

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
  pause_env "TQ_PAUSE_AFTER_BYTES=$n" "$@"
}

pause_env() {
  local hook=$1; shift
  env "$hook" "$@" >"${PAUSE_OUT:-/dev/null}" 2>"${PAUSE_ERR:-/dev/null}" &
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
  fail "$hook: $* did not stop"
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

model_hash() { # tree_hash of a directory without its tq-provenance.json (the command differs)
  (cd "$1" && find . -type f ! -name tq-provenance.json -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum
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

# make_theirs OUT KIND: someone else's output at OUT: a directory holding a file (KIND dir) or
# a file (KIND file). theirs_intact OUT: it is still exactly that.
make_theirs() {
  if [ "$2" = dir ]; then mkdir "$1" && echo "not yours" > "$1/theirs.txt"
  else echo "not yours" > "$1"; fi
}
theirs_intact() {
  if [ -d "$1" ]; then [ "$(ls -A "$1")" = theirs.txt ] && [ "$(cat "$1/theirs.txt")" = "not yours" ]
  else [ "$(cat "$1" 2>/dev/null)" = "not yours" ]; fi
}

# kept_partial ERRFILE: the partial a refused run kept, as its message names it (one path).
kept_partial() { sed -n 's/.* kept at \([^ ;]*\).*/\1/p' "$1" | head -n 1; }

# output_appears OUT AFTER_BYTES -- CMD...  (CMD writes OUT, a file or a directory)
# Stops CMD after AFTER_BYTES bytes of output, makes OUT as someone else would (a directory
# with a file, or a file, like the output CMD writes), lets CMD go on: it must exit 1 saying
# OUT appeared, leave that OUT exactly as it was, and keep its own complete output under the
# partial name its message gives (identical to an undisturbed run's output).
output_appears() {
  local out=$1 after=$2; shift 3
  local kind rc ref kept
  rm -rf "$out" "$out".partial-*
  "$@" >/dev/null || fail "undisturbed run failed: $*"
  ref=$(tree_hash "$out"); kind=file; [ -d "$out" ] && kind=dir
  rm -rf "$out"
  PAUSE_ERR=appear.err pause_at "$after" "$@" || fail "$* did not stop after $after bytes"
  make_theirs "$out" "$kind"
  kill -CONT "$PID"; wait "$PID"; rc=$?
  [ "$rc" -eq 1 ] || fail "output appeared under $*: exit $rc, expected 1 ($(cat appear.err))"
  grep -q "$(basename "$out"): appeared while this output was being written" appear.err ||
    fail "message does not say the output appeared: $(cat appear.err)"
  theirs_intact "$out" || fail "the $kind that appeared at $out was changed"
  kept=$(kept_partial appear.err)
  [[ $kept == *"$(basename "$out")".partial-* ]] && [ -e "$kept" ] || fail "no kept partial named: $(cat appear.err)"
  [ "$(tree_hash "$kept")" = "$ref" ] || fail "the kept partial $kept is not the complete output"
  rm -rf "$out" "$out".partial-* appear.err
  echo "output appearing after $after bytes left intact, partial kept: $*"
}

# two_writers OUT N -- CMD...  Two copies of CMD write the same new OUT, N times: both are
# stopped mid-write (after TWO_AT bytes, default 1000) and let go together, so both reach the commit. Exactly one exits 0 and
# the other 1 (saying OUT appeared, keeping its partial, identical to the winner's output),
# OUT is complete (equal to an undisturbed run's output), and nothing else is left over.
two_writers() {
  local out=$1 n=$2; shift 3
  local ref i p1 p2 r1 r2 err kept
  rm -rf "$out" "$out".partial-*
  "$@" >/dev/null || fail "undisturbed run failed: $*"
  ref=$(tree_hash "$out")
  for ((i = 1; i <= n; i++)); do
    rm -rf "$out" "$out".partial-*
    PAUSE_ERR=w1.err pause_at "${TWO_AT:-1000}" "$@" || fail "writer 1 did not stop"; p1=$PID
    PAUSE_ERR=w2.err pause_at "${TWO_AT:-1000}" "$@" || fail "writer 2 did not stop"; p2=$PID
    if ((i % 2)); then kill -CONT "$p1" "$p2"; else kill -CONT "$p2" "$p1"; fi
    wait "$p1"; r1=$?; wait "$p2"; r2=$?
    [ "$((r1 + r2))" -eq 1 ] && [ "$((r1 * r2))" -eq 0 ] ||
      fail "round $i: exits $r1 and $r2, expected one 0 and one 1 ($(cat w1.err w2.err))"
    err=w1.err; [ "$r1" -eq 0 ] && err=w2.err
    grep -q "appeared while this output was being written" "$err" || fail "round $i: loser says: $(cat "$err")"
    [ "$(tree_hash "$out")" = "$ref" ] || fail "round $i: $out is not the complete output"
    kept=$(kept_partial "$err")
    [ -e "$kept" ] && [ "$(tree_hash "$kept")" = "$ref" ] || fail "round $i: loser's partial '$kept' not complete"
    rm -rf "$kept"
    [ -z "$(partials "$out")" ] || fail "round $i: left over: $(partials "$out")"
  done
  # and free-running, started together
  for ((i = 1; i <= n; i++)); do
    rm -rf "$out" "$out".partial-*
    "$@" >/dev/null 2>w1.err & p1=$!
    "$@" >/dev/null 2>w2.err & p2=$!
    wait "$p1"; r1=$?; wait "$p2"; r2=$?
    # TWO_OWN=1: CMD replaces its own earlier output by design (tq-formats(5), OUTPUTS), so
    # when the second run starts after the first has published, both exit 0
    if [ "${TWO_OWN:-0}" = 1 ] && [ "$r1" -eq 0 ] && [ "$r2" -eq 0 ]; then :
    else
      [ "$((r1 + r2))" -eq 1 ] && [ "$((r1 * r2))" -eq 0 ] ||
        fail "free round $i: exits $r1 and $r2, expected one 0 and one 1 ($(cat w1.err w2.err))"
    fi
    [ "$(tree_hash "$out")" = "$ref" ] || fail "free round $i: $out is not the complete output"
    partials "$out" | xargs -r rm -rf
  done
  rm -rf "$out" "$out".partial-* w1.err w2.err
  echo "two writers into one new output, $n + $n rounds: one wins, the other keeps its partial: $*"
}

# force_kill_steps OUT OLD -- CMD...  (CMD replaces OUT, e.g. with --force)
# OLD is a complete earlier output. For k = 1, 2, ...: OUT starts as a copy of OLD and CMD is
# SIGKILLed at its k-th step point (TQ_CRASH_AT_STEP: between the system calls that publish
# an output or remove the replaced one), until a run finishes. After every kill OUT must be
# complete, the old output or the new one, never missing or mixed; a re-run must then
# succeed. The finished run must have put the new output in place with nothing left beside.
force_kill_steps() {
  local out=$1 old=$2; shift 3
  local oldh newh k rc h
  oldh=$(tree_hash "$old")
  rm -rf "$out" "$out".partial-* "$out".old-*
  cp -a "$old" "$out"
  "$@" >/dev/null || fail "undisturbed replacement failed: $*"
  newh=$(tree_hash "$out")
  [ "$newh" != "$oldh" ] || fail "the old and the new output are the same; the test needs them to differ"
  for ((k = 1; ; k++)); do
    rm -rf "$out" "$out".partial-* "$out".old-*
    cp -a "$old" "$out"
    TQ_CRASH_AT_STEP=$k "$@" >/dev/null 2>&1; rc=$?
    [ -e "$out" ] || fail "killed at step $k: $out is missing"
    h=$(tree_hash "$out")
    if [ "$rc" -eq 0 ]; then
      [ "$h" = "$newh" ] || fail "finished (step $k): $out is not the new output"
      [ -z "$(ls -d "$out".partial-* "$out".old-* 2>/dev/null)" ] || fail "finished: left over: $(ls -d "$out".*)"
      break
    fi
    [ "$rc" -eq 137 ] || fail "step $k: exit $rc, expected a kill (137) or success"
    [ "$h" = "$oldh" ] || [ "$h" = "$newh" ] || fail "killed at step $k: $out is neither the old nor the new output"
    "$@" >/dev/null || fail "re-run after a kill at step $k failed"
    [ "$(tree_hash "$out")" = "$newh" ] || fail "re-run after a kill at step $k: not the new output"
  done
  [ "$k" -gt 3 ] || fail "only $((k - 1)) step points: the hook is not reached"
  rm -rf "$out".partial-* "$out".old-*
  echo "killed at each of $((k - 1)) steps of a replacement: $out always complete: $*"
}

# change_input FILE MODE: MODE touch (only the modification time), replace (an identical copy
# renamed over it: a new inode), overwrite (one low mantissa bit of a byte in the middle
# flipped in place, same size) or add (a new file added-meanwhile.txt next to it). Prints the
# name the tool must report as changed (add: FILE's directory).
change_input() {
  local file=$1 mode=$2 mid
  case $mode in
    touch) touch -d '2001-01-01 00:00:00' "$file" ;;
    replace) cp -p "$file" "$file.new" && mv "$file.new" "$file" ;;
    overwrite)
      mid=$(( $(stat -c %s "$file") / 2 / 2 * 2 ))
      printf "\\$(printf '%03o' $(( $(od -An -tu1 -j "$mid" -N1 "$file") ^ 1 )))" |
        dd of="$file" bs=1 seek="$mid" conv=notrunc 2>/dev/null ;;
    add) echo extra > "$(dirname "$file")/added-meanwhile.txt"; basename "$(dirname "$file")"; return ;;
    *) fail "change_input: unknown mode $mode" ;;
  esac
  basename "$file"
}

# input_changed OUT FILE AFTER_BYTES MODE -- CMD...  (CMD writes OUT reading FILE over time)
# Stops CMD after AFTER_BYTES bytes of output and changes its input FILE (change_input FILE
# MODE). CMD must exit 1 naming FILE (add: its directory) as changed, publish
# nothing under OUT, and keep its output under the partial name it gives. FILE is put back.
input_changed() {
  local out=$1 file=$2 after=$3 mode=$4; shift 5
  local rc kept name
  rm -rf "$out" "$out".partial-*
  cp -p "$file" "$file.saved"
  PAUSE_ERR=chg.err pause_at "$after" "$@" || fail "$* did not stop after $after bytes"
  name=$(change_input "$file" "$mode")
  kill -CONT "$PID"; wait "$PID"; rc=$?
  rm -f "$(dirname "$file")/added-meanwhile.txt"; mv "$file.saved" "$file"
  [ "$rc" -eq 1 ] || fail "input $mode under $*: exit $rc, expected 1 ($(cat chg.err))"
  grep -q "$name: changed" chg.err || fail "input $mode: message does not name $name as changed: $(cat chg.err)"
  [ ! -e "$out" ] || fail "input $mode: $out was published"
  kept=$(kept_partial chg.err)
  [[ $kept == *"$(basename "$out")".partial-* ]] && [ -e "$kept" ] || fail "input $mode: no kept partial named: $(cat chg.err)"
  rm -rf "$kept" chg.err
  echo "input $mode after $after bytes refused, partial kept: $*"
}
