# tq-verify manifest (issue 24): SHA256SUMS and tq-manifest.json are written and fsynced as
# partials before either is published, so disk full or a kill leaves under each name a
# complete file (the earlier one or the new one), never a short one, and no partial after
# an error.
set -u
. "$ROOT/tests/lib/safety.sh"
tq-mkmodel --quiet --seed 5 m || fail mkmodel
tq-verify manifest --quiet m || fail manifest
cp m/SHA256SUMS old.sums && cp m/tq-manifest.json old.json
echo "another file" > m/notes.txt            # the next manifest differs
cp -a m m-new && tq-verify manifest --quiet m-new && cp m-new/SHA256SUMS new.sums && cp m-new/tq-manifest.json new.json
cmp -s old.sums new.sums && fail "test needs the new manifest to differ"
each_complete() { # each final name holds the old or the new file, whole
  { cmp -s m/SHA256SUMS old.sums || cmp -s m/SHA256SUMS new.sums; } || fail "$1: SHA256SUMS is neither the old nor the new one"
  { cmp -s m/tq-manifest.json old.json || cmp -s m/tq-manifest.json new.json; } || fail "$1: tq-manifest.json is neither"
}
restore() { cp old.sums m/SHA256SUMS; cp old.json m/tq-manifest.json; rm -f m/*.partial-*; }

# out of space (file-size limits below, between and above the two files' sizes)
for kib in 1 4 $(( $(stat -c %s new.json) / 1024 )); do
  restore
  file_limit_run "$kib" tq-verify manifest --quiet m
  [ "$RC" = 1 ] || fail "ulimit -f $kib: exit $RC ($ERR)"
  grep -q "File too large" <<<"$ERR" && grep -q "SHA256SUMS\|tq-manifest.json" <<<"$ERR" || fail "ulimit -f $kib: $ERR"
  cmp -s m/SHA256SUMS old.sums && cmp -s m/tq-manifest.json old.json || fail "ulimit -f $kib: the earlier pair changed"
  [ -z "$(ls m | grep partial)" ] || fail "ulimit -f $kib: partial left"
done
echo "disk full: the earlier SHA256SUMS and tq-manifest.json stay whole, nothing left over"

# killed while writing (every 256 bytes of the two files): both names keep the earlier pair
total=$(( $(stat -c %s new.json) + $(stat -c %s new.sums) ))
for ((n = 0; n < total; n += 256)); do
  restore
  crash_at "$n" tq-verify manifest --quiet m || fail "not killed at $n of $total bytes"
  cmp -s m/SHA256SUMS old.sums && cmp -s m/tq-manifest.json old.json || fail "killed at byte $n: the earlier pair changed"
done
# killed at every step of publishing: each name holds a whole file, old or new
for ((k = 1; ; k++)); do
  restore
  TQ_CRASH_AT_STEP=$k tq-verify manifest --quiet m >/dev/null 2>&1; rc=$?
  each_complete "step $k"
  [ "$rc" = 0 ] && break
  [ "$rc" = 137 ] || fail "step $k: exit $rc"
done
cmp -s m/SHA256SUMS new.sums && cmp -s m/tq-manifest.json new.json || fail "the finished run did not write the new pair"
echo "killed at $((total / 256 + 1)) byte points and $((k - 1)) publishing steps: never a short SHA256SUMS or tq-manifest.json"
exit 0
