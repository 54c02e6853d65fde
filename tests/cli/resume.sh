# tq-convert --resume and tq-split --resume: a run SIGKILLed at every step point (shard or
# layer file renamed, fsynced, journaled; the journal removed; the directory published) and
# at byte counts inside pieces, then rerun with --resume, ends byte-identical to an
# uninterrupted run without --resume, having kept finished pieces; SIGINT/SIGTERM keep
# OUT.partial-resume and say so; a changed kept piece is redone (not refused); another
# command's partial directory (other options: exit 2, other inputs: exit 1) is refused and
# left as it is; a second run on the same directory is refused while the first holds it.
. "$ROOT/tests/lib/safety.sh"
make_dfl # ./dfl CMD...: CMD with SIGINT at its default
run tq-mkmodel --quiet --seed 9 --layers 4 m
run tq-mkmodel --quiet --arch llama --size tiny --seed 5 --layers 3 d
run tq-convert --quiet m c

# report without the timings: what a resumed run must reproduce
report() {
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for k in list(r):
    if "seconds" in k or "per_s" in k or k.endswith("_s") or k in ("peak_rss_bytes", "elapsed_s"): del r[k]
print(json.dumps(r, sort_keys=True))' "$1"
}

# steps OUT REF -- CMD...: for k = 1, 2, ...: CMD --resume killed at its k-th step point
# (TQ_CRASH_AT_STEP), then CMD --resume again; OUT must equal REF, with nothing left beside.
# Counts the reruns that kept pieces in KEPT_RUNS.
steps() {
  local out=$1 ref=$2 k rc kept=0
  shift 3
  for ((k = 1; ; k++)); do
    rm -rf "$out" "$out".partial-*
    TQ_CRASH_AT_STEP=$k "$@" --resume --quiet >/dev/null 2>&1; rc=$?
    [ "$rc" -eq 0 ] && break
    [ "$rc" -eq 137 ] || fail "$* --resume, step $k: exit $rc, expected a kill"
    if [ -e "$out" ]; then # killed after publishing: complete, nothing to resume
      diff -r "$ref" "$out" >/dev/null || fail "step $k: published $out differs from $ref"
      [ ! -e "$out.partial-resume" ] || fail "step $k: $out published and $out.partial-resume left"
      continue
    fi
    [ -d "$out.partial-resume" ] || fail "step $k: no $out.partial-resume after the kill"
    "$@" --resume >stdout 2>resume.err || fail "$* --resume after a kill at step $k: $(cat resume.err)"
    grep -q "kept from the interrupted run" resume.err && kept=$((kept + 1))
    diff -r "$ref" "$out" >/dev/null || fail "$* --resume after a kill at step $k: $out differs from $ref"
    [ -z "$(ls -d "$out".partial-* 2>/dev/null)" ] || fail "step $k: left $(ls -d "$out".partial-*)"
  done
  [ "$k" -gt 4 ] || fail "$*: only $k step points"
  [ "$kept" -gt 1 ] || fail "$*: no rerun kept a finished piece ($kept of $k)"
  KEPT_RUNS=$kept
  echo "$*: killed at each of $((k - 1)) step points, resumed identical ($kept reruns kept finished pieces)"
}

# bytes OUT REF N... -- CMD...: killed once N bytes are written (twice: N, then 2N on the
# rerun), then resumed to completion.
bytes() {
  local out=$1 ref=$2 n
  shift 2
  local pts=()
  while [ "$1" != -- ]; do pts+=("$1"); shift; done
  shift
  for n in "${pts[@]}"; do
    rm -rf "$out" "$out".partial-*
    crash_at "$n" "$@" --resume || fail "$*: finished before $n bytes"
    if crash_at $((2 * n)) "$@" --resume; then
      "$@" --resume --quiet >/dev/null 2>resume.err || fail "$* --resume after kills at $n bytes: $(cat resume.err)"
    fi
    diff -r "$ref" "$out" >/dev/null || fail "$* --resume after kills at $n bytes: differs from $ref"
  done
  echo "$*: killed at ${pts[*]} bytes (and twice that on the rerun), resumed identical"
}

# ---- tq-convert: 5 shards
tq-convert --json --shard-size 200K m cref >cref.json || fail "reference convert"
steps c2 cref -- tq-convert --shard-size 200K m c2
bytes c2 cref 1 150000 400000 700000 -- tq-convert --shard-size 200K m c2
# the report (rel_mse of every tensor) of a run that kept shards is the uninterrupted one's
rm -rf c2 c2.partial-resume
TQ_CRASH_AT_STEP=9 tq-convert --quiet --resume --shard-size 200K m c2 >/dev/null 2>&1
tq-convert --json --resume --shard-size 200K m c2 >c2.json 2>resume.err || fail "resume --json: $(cat resume.err)"
grep -q "resumed: [1-9] of 5 shards kept" resume.err || fail "no shard kept: $(cat resume.err)"
[ "$(report c2.json)" = "$(report cref.json)" ] || fail "the resumed run's report differs from the uninterrupted one's"
# threads: the journal names no thread count; a rerun with another keeps the shards
rm -rf c2 c2.partial-resume
TQ_CRASH_AT_STEP=9 tq-convert --quiet --resume --threads 1 --shard-size 200K m c2 >/dev/null 2>&1
run tq-convert --resume --threads 3 --shard-size 200K m c2 2>resume.err >/dev/null
grep -q "resumed: [1-9] of 5 shards kept" resume.err || fail "--threads 3 did not keep shards: $(cat resume.err)"
diff -r cref c2 >/dev/null || fail "resumed with other --threads: differs"

# ---- tq-split: MoE layer files and dense FFN layer files
run tq-split --quiet c sref
run tq-convert --quiet d dc
run tq-split --quiet dc dref
steps s2 sref -- tq-split c s2
steps s3 dref -- tq-split dc s3
bytes s2 sref 1 70000 200000 -- tq-split c s2

# ---- SIGINT / SIGTERM keep OUT.partial-resume (finished pieces, journal), nothing else
for sig in INT:130 TERM:143; do
  s=${sig%:*} st=${sig#*:}
  for t in "c2 tq-convert --shard-size 200K m c2" "s2 tq-split c s2"; do
    set -- $t
    out=$1; shift
    rm -rf "$out" "$out".partial-*
    PAUSE_ERR=$PWD/int.err pause_at 300000 ./dfl "$@" --resume --quiet || fail "$*: finished before 300000 bytes"
    kill -s "$s" "$PID"; kill -CONT "$PID"; wait "$PID"; rc=$?
    [ "$rc" -eq "$st" ] || fail "$* --resume, SIG$s: exit $rc, expected $st"
    grep -qx "$1: interrupted by SIG$s; finished pieces are kept in $out.partial-resume (rerun with --resume to continue)" int.err ||
      fail "$* --resume, SIG$s: message $(cat int.err)"
    [ -d "$out.partial-resume" ] && [ ! -e "$out" ] || fail "$* --resume, SIG$s: $out.partial-resume not kept"
    [ "$(ls -d "$out".partial-* | wc -l)" -eq 1 ] || fail "SIG$s: other partials: $(ls -d "$out".partial-*)"
    [ -z "$(find "$out.partial-resume" -mindepth 1 -name '*.partial-*')" ] || fail "SIG$s: partial files inside: $(find "$out.partial-resume" -mindepth 1 -name '*.partial-*')"
    "$@" --resume --quiet || fail "$* --resume after SIG$s"
    ref=cref; [ "$out" = s2 ] && ref=sref
    diff -r "$ref" "$out" >/dev/null || fail "$* --resume after SIG$s: differs"
  done
done
echo "SIGINT and SIGTERM under --resume: exit 130/143, OUT.partial-resume kept and named, resumed identical"

# ---- a kept piece changed in the partial directory is redone, not trusted
rm -rf c2 c2.partial-resume
TQ_CRASH_AT_STEP=12 tq-convert --quiet --resume --shard-size 200K m c2 >/dev/null 2>&1
f=c2.partial-resume/model-00002-of-00005.safetensors
[ -f "$f" ] || fail "no finished shard 2 to change ($(ls c2.partial-resume))"
printf 'X' | dd of="$f" bs=1 seek=5000 conv=notrunc 2>/dev/null
rm -f c2.partial-resume/model-00001-of-00005.safetensors
run tq-convert --resume --shard-size 200K m c2 >/dev/null 2>resume.err
grep -q "changed or missing ones redone" resume.err || fail "changed shard: $(cat resume.err)"
diff -r cref c2 >/dev/null || fail "a changed shard was kept: differs"
rm -rf s2 s2.partial-resume
TQ_CRASH_AT_STEP=5 tq-split --quiet --resume c s2 >/dev/null 2>&1
f=$(ls s2.partial-resume/experts/*.bin | head -n 1)
printf 'X' | dd of="$f" bs=1 seek=20000 conv=notrunc 2>/dev/null
run tq-split --resume c s2 >/dev/null 2>resume.err
grep -q "changed or missing ones redone" resume.err || fail "changed layer file: $(cat resume.err)"
diff -r sref s2 >/dev/null || fail "a changed layer file was kept: differs"
# a torn or foreign journal line is left out; a lone partial directory without a journal is
# started afresh
rm -rf c2 c2.partial-resume
TQ_CRASH_AT_STEP=9 tq-convert --quiet --resume --shard-size 200K m c2 >/dev/null 2>&1
printf 'piece 00 12 model-00005-of-00005.safetensors\npiece 1234' >>c2.partial-resume/.tq-resume
run tq-convert --quiet --resume --shard-size 200K m c2
diff -r cref c2 >/dev/null || fail "torn journal line: differs"
rm -rf c2; mkdir -p c2.partial-resume; echo junk >c2.partial-resume/model.safetensors
run tq-convert --quiet --resume --shard-size 200K m c2
diff -r cref c2 >/dev/null || fail "directory without a journal: differs"
echo "changed, missing and unjournaled pieces are redone"

# ---- another command's partial directory: refused, left untouched
rm -rf c2 c2.partial-resume
TQ_CRASH_AT_STEP=9 tq-convert --quiet --resume --shard-size 200K m c2 >/dev/null 2>&1
before=$(tree_hash c2.partial-resume)
expect_msg 2 "left by another command (--bits was 3 there, 4 here)" tq-convert --resume --bits 4 --shard-size 200K m c2
expect_msg 2 "(--shard-size was" tq-convert --resume --shard-size 300K m c2
expect_msg 2 "(--keep was" tq-convert --resume --keep lm_head --shard-size 200K m c2
grep -q "remove c2.partial-resume to start over" err || fail "no way out named: $(cat err)"
grep -q "finished pieces are kept in c2.partial-resume" err || fail "kept directory not named: $(cat err)"
[ "$(tree_hash c2.partial-resume)" = "$before" ] || fail "a refused --resume changed the partial directory"
cp -a m m2 # the same files under another path: the same input
touch -d '2001-01-01' m2/config.json
expect_msg 2 "(--bits was 3 there, 4 here)" tq-convert --resume --bits 4 --shard-size 200K m2 c2
expect_msg 1 "the input changed: config.json" tq-convert --resume --shard-size 200K m2 c2
[ "$(tree_hash c2.partial-resume)" = "$before" ] || fail "a refused --resume changed the partial directory"
rm -rf s2 s2.partial-resume
TQ_CRASH_AT_STEP=5 tq-split --quiet --resume c s2 >/dev/null 2>&1
expect_msg 2 "(--align was \"16384\" there, \"32768\" here)" tq-split --resume --align 32768 c s2
expect_msg 2 "(--source-label was not given there, \"x\" here)" tq-split --resume --source-label x c s2
# without --resume the directory is named and left alone
run tq-convert --quiet --shard-size 200K m c3 2>note.err
[ ! -s note.err ] || fail "a note without a resumable directory: $(cat note.err)"
mkdir c3x.partial-resume
tq-convert --quiet --shard-size 200K m c3x 2>note.err || fail "run beside a resumable directory failed"
grep -qx "tq-convert: note: c3x.partial-resume holds an interrupted --resume run; it is left alone (add --resume to continue it, or remove it)" note.err ||
  fail "no note about c3x.partial-resume: $(cat note.err)"
[ -d c3x.partial-resume ] || fail "c3x.partial-resume removed without --resume"
# not a directory: refused
rm -rf c4 c4.partial-resume; ln -s /tmp c4.partial-resume
expect_msg 1 "c4.partial-resume: exists and is a symbolic link, not the directory of an interrupted --resume run" \
  tq-convert --resume m c4
[ -L c4.partial-resume ] || fail "the link was replaced"
# one run at a time
rm -rf c2 c2.partial-resume
PAUSE_ERR=/dev/null pause_at 300000 tq-convert --resume --quiet --shard-size 200K m c2 || fail "did not stop"
expect_msg 1 "c2.partial-resume: another --resume run is writing it" tq-convert --resume --shard-size 200K m c2
kill -CONT "$PID"; wait "$PID" || fail "the first run failed after a second was refused"
diff -r cref c2 >/dev/null || fail "the first run's output differs"
echo "another command's directory refused (options: 2, inputs: 1), untouched; one run at a time"
