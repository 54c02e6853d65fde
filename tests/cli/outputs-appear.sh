# Outputs are never replaced unasked (issue 24): an output that someone else creates while a
# tool writes is left as it is (exit 1, the tool's complete output kept under the partial name
# it gives); two runs into one new output: one wins, the other keeps its partial; a --force
# replacement killed at any step leaves a complete output, old or new, under the final name.
set -u
. "$ROOT/tests/lib/safety.sh"
safety_inputs

output_appears out 1000 -- tq-convert --quiet --threads 2 src out
output_appears sp 1000 -- tq-split --quiet --threads 2 src sp
output_appears joined 1000 -- tq-split --quiet --join split joined
output_appears un 1000 -- tq-verify unpack --quiet b.tar.zst -o un
output_appears r.rows 1000 -- tq-rowlayout ng/model.safetensors --out r.rows --quiet --chunk-size 4K
output_appears ex/model.safetensors 1000 -- tq-rowlayout --extract r0.rows --to ex --quiet --chunk-size 4K

two_writers out 10 -- tq-convert --quiet --threads 2 src out
two_writers sp 10 -- tq-split --quiet --threads 2 src sp
two_writers joined 5 -- tq-split --quiet --join split joined
two_writers un 5 -- tq-verify unpack --quiet b.tar.zst -o un
two_writers r.rows 5 -- tq-rowlayout ng/model.safetensors --out r.rows --quiet --chunk-size 4K

# --force and tq-mkmodel replace only the directory that was there when they started
output_appears qf 1000 -- tq-convert --quiet --force --threads 2 src qf
output_appears mm 1000 -- tq-mkmodel --quiet --seed 9 mm
tq-convert --quiet --bits 2 src old || fail "convert --bits 2"
cp -a old q
PAUSE_ERR=sw.err pause_at 1000 tq-convert --quiet --force --threads 2 src q || fail "did not pause"
mv q q-moved && make_theirs q dir
kill -CONT "$PID"; wait "$PID"; rc=$?
[ "$rc" = 1 ] && grep -q "q: appeared while this output was being written" sw.err || fail "swapped-in q: exit $rc: $(cat sw.err)"
theirs_intact q && [ "$(tree_hash q-moved)" = "$(tree_hash old)" ] || fail "--force touched a directory it was not given"
rm -rf q q-moved q.partial-* sw.err
echo "--force leaves alone a directory swapped in for the one it was given"
tq-mkmodel --quiet --seed 8 mf || fail mkmodel
PAUSE_ERR=mf.err pause_at 1000 tq-mkmodel --quiet --force --seed 9 mf || fail "did not pause"
echo mine > mf/notes.txt
kill -CONT "$PID"; wait "$PID"; rc=$?
[ "$rc" = 1 ] && grep -q "holds 'notes.txt'.*kept at mf.partial-" mf.err && [ "$(cat mf/notes.txt)" = mine ] ||
  fail "tq-mkmodel replaced a directory that got a foreign file: exit $rc: $(cat mf.err)"
rm -rf mf mf.partial-* mf.err
echo "tq-mkmodel leaves alone a directory that got someone else's file meanwhile"

# --force: an atomic exchange, then the old output is removed
force_kill_steps q old -- tq-convert --quiet --force src q
# tq-mkmodel --force replaces an earlier model the same way
tq-mkmodel --quiet --seed 8 oldm || fail "mkmodel --seed 8"
force_kill_steps m oldm -- tq-mkmodel --quiet --force --seed 9 m

# Without RENAME_EXCHANGE (TQ_RENAME_FALLBACK=1) the old directory is moved aside first: a
# kill between the two renames can leave the final name empty, but never loses an output:
# the old one is then complete under q.old-*.
oldh=$(tree_hash old)
for ((k = 1; k < 100; k++)); do
  rm -rf q q.partial-* q.old-*; cp -a old q
  TQ_RENAME_FALLBACK=1 TQ_CRASH_AT_STEP=$k tq-convert --quiet --force src q >/dev/null 2>&1; rc=$?
  [ "$rc" = 0 ] && break
  [ "$rc" = 137 ] || fail "fallback, step $k: exit $rc"
  if [ ! -e q ]; then
    o=$(ls -d q.old-*) && [ "$(tree_hash "$o")" = "$oldh" ] || fail "fallback, step $k: no q and no complete q.old-*"
  fi
done
[ "$rc" = 0 ] && [ -z "$(ls -d q.partial-* q.old-* 2>/dev/null)" ] || fail "fallback replacement did not finish cleanly"
echo "fallback replacement: nothing lost at any of $((k - 1)) steps"
exit 0
