# tq-verify ls on every file of the malformed safetensors corpus: exit status 1 and exactly
# the line in NAME.expected, nothing on stdout.
set -u
cd "$ROOT/tests/data/malformed-safetensors"
n=0; bad=0
for f in *.safetensors; do
  exp=${f%.safetensors}.expected
  if [ ! -f "$exp" ]; then echo "$f: no $exp" >&2; bad=$((bad + 1)); continue; fi
  tq-verify ls "$f" >"$TQ_TMP/out" 2>"$TQ_TMP/err"; rc=$?
  if [ "$rc" -ne 1 ]; then echo "$f: exit status $rc, expected 1" >&2; bad=$((bad + 1)); fi
  if [ -s "$TQ_TMP/out" ]; then echo "$f: unexpected stdout" >&2; bad=$((bad + 1)); fi
  if ! cmp -s "$exp" "$TQ_TMP/err"; then
    echo "$f: stderr differs:" >&2; diff "$exp" "$TQ_TMP/err" >&2; bad=$((bad + 1))
  fi
  n=$((n + 1))
done
echo "$n malformed files checked"
[ "$n" -ge 25 ] && [ "$bad" -eq 0 ]
