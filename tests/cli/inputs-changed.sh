# Inputs read over time (issue 24): a source touched, replaced by rename, rewritten in place
# or given a new neighbour while a tool reads it is noticed before anything is published:
# exit 1 naming the file, no output under the final name, the partial kept and named.
set -u
. "$ROOT/tests/lib/safety.sh"
tq-mkmodel --quiet --seed 5 src || fail mkmodel
tq-split --quiet src split || fail split
tq-verify pack --quiet src -o b.tar.zst || fail pack
tq-mkmodel --quiet --arch ngram --rows 3000 ng || fail "mkmodel ngram"
tq-rowlayout ng/model.safetensors --out r0.rows --quiet || fail rowlayout

for mode in touch replace overwrite add; do
  input_changed out src/model.safetensors 1000 $mode -- tq-convert --quiet --threads 2 src out
  input_changed sp src/model.safetensors 1000 $mode -- tq-split --quiet --threads 2 src sp
  input_changed pk.tar.zst src/model.safetensors 1000 $mode -- tq-verify pack --quiet src -o pk.tar.zst
done
for mode in touch replace add; do # join checks block hashes itself: only content-preserving changes here
  input_changed joined split/experts/layer_01.bin 1000 $mode -- tq-split --quiet --join split joined
done
for mode in touch replace; do
  input_changed un b.tar.zst 1000 $mode -- tq-verify unpack --quiet b.tar.zst -o un
  input_changed ex/model.safetensors r0.rows 1000 $mode -- tq-rowlayout --extract r0.rows --to ex --quiet --chunk-size 4096
done

# tq-rowlayout keeps its own MTPLX identity (inode included): a source replaced by rename
cp ng/model.safetensors victim.safetensors
PAUSE_ERR=perr pause_at 50000 tq-rowlayout victim.safetensors --out v.rows --chunk-size 4096 --quiet || fail "did not pause"
cp victim.safetensors victim.new && mv victim.new victim.safetensors
kill -CONT "$PID"; wait "$PID"; rc=$?
[ "$rc" = 1 ] || fail "source replaced by rename: exit $rc ($(cat perr))"
grep -q "victim.safetensors: changed during the conversion (.*inode" perr || fail "message: $(cat perr)"
kept=$(sed -n 's/.*incomplete output kept at //p' perr)
[ -f "$kept" ] && [ ! -e v.rows ] || fail "replaced source: kept '$kept', v.rows $(ls v.rows 2>&1)"
echo "tq-rowlayout: a source replaced by rename is refused"
exit 0
