# tq-verify ls on every file of the GGUF seed corpus: each malformed file exits 1 with
# exactly its line of gguf_malformed.stdout.exact, nothing crashes.
set -u
. "$ROOT/tests/lib/malformed.sh"
ls_corpus "$ROOT/tests/fuzz/corpus/gguf" gguf
