# tq-verify ls on every file of the safetensors seed corpus: each malformed file exits 1 with
# exactly its line of safetensors-malformed.stdout.exact, nothing crashes.
set -u
. "$ROOT/tests/lib/malformed.sh"
ls_corpus "$ROOT/tests/fuzz/corpus/safetensors" safetensors
