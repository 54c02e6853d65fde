# tq-rowlayout crash and disk-full safety (issue 9), with tests/lib/safety.sh:
# kill -9 at several points -> no OUT, an identifiable partial, a re-run gives the same bytes;
# a source changed or truncated under the tool is detected; ulimit -f -> exit 1, message
# naming the file, partial removed, inputs untouched.
set -u
. "$ROOT/tests/lib/safety.sh"

tq-mkmodel --arch ngram --rows 3000 --quiet t || fail mkmodel
src=t/model.safetensors
before=$(snapshot "$src")
rl() { tq-rowlayout "$@" --chunk-size 4K --quiet; }

for mode in plain paged; do
  extra=(); [ $mode = paged ] && extra=(--page-align 4096)
  rl "$src" --out ref-$mode.rows "${extra[@]}" || fail "reference run ($mode)"
  total=$(stat -c %s ref-$mode.rows)
  pts="1 $(crash_points "$total" 3 | tr '\n' ' ') $((total - 1))"
  crash_check out-$mode.rows ref-$mode.rows "$pts" -- rl "$src" --out out-$mode.rows "${extra[@]}"
  # the partial is named after the output and left as is
  crash_at $((total / 2)) rl "$src" --out out-$mode.rows "${extra[@]}" || fail "not killed ($mode)"
  p=$(partials out-$mode.rows)
  [ "$(echo "$p" | wc -l)" = 1 ] && [[ $p == out-$mode.rows.partial-?????? ]] || fail "partial name: $p"
  [ ! -e out-$mode.rows ] || fail "final name exists after a kill ($mode)"
  rm -f $p
  # extract: same guarantees for the rebuilt source file
  crash_check ex-$mode/model.safetensors "$src" "1 $(( $(stat -c %s "$src") / 2 ))" -- \
    rl --extract ref-$mode.rows --to ex-$mode
done

# the source changes during the conversion: exit 1, the partial file is kept and named
cp "$src" victim.safetensors
PAUSE_ERR=perr pause_at 50000 tq-rowlayout victim.safetensors --out chg.rows --chunk-size 4K --quiet || fail "did not pause"
touch -d '2001-01-01' victim.safetensors
kill -CONT "$PID"; wait "$PID"; rc=$?
[ "$rc" = 1 ] || fail "changed source: exit $rc ($(cat perr))"
grep -q "victim.safetensors: changed during the conversion (mtime_ns" perr || fail "message: $(cat perr)"
kept=$(sed -n 's/.*incomplete output kept at //p' perr)
[[ $kept == */chg.rows.partial-?????? ]] && [ -f "$kept" ] || fail "kept partial: '$kept'"
[ ! -e chg.rows ] || fail "chg.rows exists"

# the source is truncated under the tool: detected as a short read, partial removed
cp "$src" victim2.safetensors
PAUSE_ERR=perr2 pause_at 50000 tq-rowlayout victim2.safetensors --out cut.rows --chunk-size 4K --quiet || fail "did not pause"
truncate -s 100000 victim2.safetensors
kill -CONT "$PID"; wait "$PID"; rc=$?
[ "$rc" = 1 ] || fail "truncated source: exit $rc"
grep -q "victim2.safetensors: unexpected end of file" perr2 || fail "message: $(cat perr2)"
[ ! -e cut.rows ] && [ -z "$(partials cut.rows)" ] || fail "truncated source left output"

# disk full (file-size limit): exit 1, the message names the file, no partial left
for args in "$src --out full.rows" "$src --out full.rows --page-align 4096" "--extract ref-plain.rows --to fullx"; do
  file_limit_run 64 tq-rowlayout $args --quiet
  [ "$RC" = 1 ] || fail "ulimit -f ($args): exit $RC: $ERR"
  echo "$ERR" | grep -q "File too large" || fail "ulimit -f ($args): $ERR"
  echo "$ERR" | grep -q "full.rows\|fullx/model.safetensors" || fail "message does not name the file: $ERR"
  [ ! -e full.rows ] && [ -z "$(partials full.rows)" ] && [ -z "$(partials fullx/model.safetensors)" ] &&
    [ ! -e fullx/model.safetensors ] || fail "ulimit -f ($args) left output"
done

after=$(snapshot "$src")
[ "$before" = "$after" ] || fail "the source changed"
exit 0
