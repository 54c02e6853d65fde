# Inputs read over time (issue 24): a source touched, replaced by rename, rewritten in place
# or given a new neighbour while a tool reads it is noticed before anything is published:
# exit 1 naming the file, no output under the final name, the partial kept and named (or,
# for tq-verify manifest and sign stopped before their first check, nothing written and the
# earlier files intact).
set -u
. "$ROOT/tests/lib/safety.sh"
safety_inputs

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
  input_changed ex/model.safetensors r0.rows 1000 $mode -- tq-rowlayout --extract r0.rows --to ex --quiet --chunk-size 4K
done

# tq-verify manifest and sign write only after reading everything: stopped just before their
# check (TQ_PAUSE_BEFORE_CHECK), a changed file makes them write nothing; the earlier
# SHA256SUMS, tq-manifest.json and model.sig stay as they were.
. "$ROOT/tests/lib/keys.sh"
make_key k ed25519
cp -a src ms
tq-verify manifest --quiet ms && tq-verify sign --quiet ms --key k.pem || fail "first manifest and signature"
earlier=$(cat ms/SHA256SUMS ms/tq-manifest.json ms/model.sig | sha256sum)
for mode in touch replace overwrite add; do
  for tool in "manifest --quiet ms" "sign --quiet --force ms --key k.pem"; do
    cp -p ms/model.safetensors saved.safetensors
    # shellcheck disable=SC2086
    PAUSE_ERR=chg.err pause_env TQ_PAUSE_BEFORE_CHECK=1 tq-verify $tool || fail "tq-verify $tool did not stop"
    name=$(change_input ms/model.safetensors "$mode")
    kill -CONT "$PID"; wait "$PID"; rc=$?
    rm -f ms/added-meanwhile.txt; mv saved.safetensors ms/model.safetensors
    [ "$rc" = 1 ] && grep -q "$name: changed while it was being read" chg.err && grep -q "not written" chg.err ||
      fail "tq-verify $tool, input $mode: exit $rc: $(cat chg.err)"
    [ "$(cat ms/SHA256SUMS ms/tq-manifest.json ms/model.sig | sha256sum)" = "$earlier" ] ||
      fail "tq-verify $tool, input $mode: the earlier manifest or signature changed"
    [ -z "$(ls ms | grep partial)" ] || fail "tq-verify $tool, input $mode: left $(ls ms | grep partial)"
    echo "tq-verify $tool: input $mode before the check refused, nothing written"
  done
done

# ... and they check again up to publishing (issue 31): stopped while writing their outputs
# (TQ_PAUSE_AFTER_BYTES=1, after the first check), a changed file makes them publish nothing:
# exit 1 naming it, the earlier files intact, the new ones kept under the partial names given.
for mode in touch replace overwrite add; do
  for tool in "manifest --quiet ms" "sign --quiet --force ms --key k.pem"; do
    cp -p ms/model.safetensors saved.safetensors
    # shellcheck disable=SC2086
    PAUSE_ERR=chg.err pause_at 1 tq-verify $tool || fail "tq-verify $tool did not stop while writing"
    name=$(change_input ms/model.safetensors "$mode")
    kill -CONT "$PID"; wait "$PID"; rc=$?
    rm -f ms/added-meanwhile.txt; mv saved.safetensors ms/model.safetensors
    [ "$rc" = 1 ] && grep -q "$name: changed while it was being read" chg.err && grep -q "nothing was published" chg.err ||
      fail "tq-verify $tool, input $mode while writing: exit $rc: $(cat chg.err)"
    [ "$(cat ms/SHA256SUMS ms/tq-manifest.json ms/model.sig | sha256sum)" = "$earlier" ] ||
      fail "tq-verify $tool, input $mode while writing: the earlier manifest or signature changed"
    kept=$(kept_partial chg.err)
    [[ $kept == ms/*.partial-* ]] && [ -s "$kept" ] || fail "tq-verify $tool, input $mode: no kept partial: $(cat chg.err)"
    rm -f ms/*.partial-*
    echo "tq-verify $tool: input $mode while writing refused, nothing published, partial kept"
  done
done

# tq-rowlayout honours TQ_PAUSE_BEFORE_CHECK like the others (issue 31): stopped before its
# check of the source, a touched source is refused, nothing published, the partial kept.
cp ng/model.safetensors pb.safetensors
PAUSE_ERR=pb.err pause_env TQ_PAUSE_BEFORE_CHECK=1 tq-rowlayout pb.safetensors --out pb.rows --quiet ||
  fail "tq-rowlayout did not stop before its check (TQ_PAUSE_BEFORE_CHECK)"
touch -d '2001-01-01 00:00:00' pb.safetensors
kill -CONT "$PID"; wait "$PID"; rc=$?
[ "$rc" = 1 ] && grep -q "pb.safetensors: changed during the conversion" pb.err && [ ! -e pb.rows ] ||
  fail "tq-rowlayout, source touched before the check: exit $rc: $(cat pb.err)"
echo "tq-rowlayout: stopped before its check, a touched source is refused"

# tq-rowlayout keeps its own MTPLX identity (inode included): a source replaced by rename
cp ng/model.safetensors victim.safetensors
PAUSE_ERR=perr pause_at 50000 tq-rowlayout victim.safetensors --out v.rows --chunk-size 4K --quiet || fail "did not pause"
cp victim.safetensors victim.new && mv victim.new victim.safetensors
kill -CONT "$PID"; wait "$PID"; rc=$?
[ "$rc" = 1 ] || fail "source replaced by rename: exit $rc ($(cat perr))"
grep -q "victim.safetensors: changed during the conversion (.*inode" perr || fail "message: $(cat perr)"
kept=$(sed -n 's/.*incomplete output kept at //p' perr)
[ -f "$kept" ] && [ ! -e v.rows ] || fail "replaced source: kept '$kept', v.rows $(ls v.rows 2>&1)"
echo "tq-rowlayout: a source replaced by rename is refused"
exit 0
