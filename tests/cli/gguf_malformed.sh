# tq-verify ls on every file of the GGUF seed corpus: each malformed file exits 1 with
# exactly its line of gguf_malformed.stdout.exact (reading every tensor: bad scales of every
# block type too), nothing crashes.
set -u
. "$ROOT/tests/lib/malformed.sh"
ls_corpus "$ROOT/tests/fuzz/corpus/gguf" gguf || exit 1
# tq-convert stops on the blocks ggml refuses too, exit 1, naming the tensor and the block.
cd "$ROOT/tests/fuzz/corpus/gguf" || exit 1
# (valid-no-tensors: a header of no tensors, which cv_groups_build once handed to qsort as a
# NULL array, an error under check-asan's UBSan)
for f in bad-scale-iq2_xxs bad-scale-mxfp4 bad-scale-q8_k truncated-block-iq4_xs valid-no-tensors; do
  tq-convert --quiet "$f.gguf" "$TQ_TMP/out-$f" 2>"$TQ_TMP/convert.err"; rc=$?
  [ "$rc" -eq 1 ] || { echo "$f: tq-convert exit status $rc, expected 1" >&2; exit 1; }
  [ ! -e "$TQ_TMP/out-$f" ] || { echo "$f: output left behind" >&2; exit 1; }
  cat "$TQ_TMP/convert.err"
done
