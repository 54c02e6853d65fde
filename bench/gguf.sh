#!/usr/bin/env bash
# GGUF input: single-thread dequantization speed of Q4_K and Q6_K through tq_model (what
# tq-convert reads), as G weights/s and as a time ratio to `cat` of the same file, plus
# peak RSS. The synthetic files (random quants, finite scales) come from the tests' GGUF
# writer. Size: TQ_BENCH_SIZE=tiny (16 MiB per type) or a size such as 512M (default 384M).
set -euo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${BIN:-$ROOT/bin}
BUILD=${BUILD:-$ROOT/build}
. "$ROOT/bench/lib.sh"
size=${TQ_BENCH_SIZE:-384M}
[ "$size" = tiny ] && size=16M
[ "$size" = small ] && size=64M
dir=${TQ_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
make -s -C "$ROOT" "$BUILD/tests/test_gguf_bench" BUILD="$BUILD" >&2
for type in Q4_K Q6_K; do
  f="$dir/gguf-bench-$type-$size.gguf"
  weights=$("$BUILD/tests/test_gguf_bench" --make "$f" "$type" "$size")
  bytes=$(stat -c %s "$f")
  drop_caches
  timed cat "$f" >/dev/null
  t_cat=$T
  drop_caches
  timed "$BIN/tq-verify" ls --read --quiet "$f"
  t_deq=$T
  rss_deq=$RSS
  # Warm cache: dequantization alone, file already in memory.
  timed "$BIN/tq-verify" ls --read --quiet "$f"
  t_warm=$T
  kernel=$("$BUILD/tests/test_gguf_bench" --kernel "$type")
  gws=$(echo "scale=3; $weights / $t_deq / 1000000000" | bc -l)
  gws_warm=$(echo "scale=3; $weights / $t_warm / 1000000000" | bc -l)
  printf 'gguf %s: kernel %.3f G weights/s/thread (in cache); file %d MiB, %s weights: tq-verify ls --read %.3f s = %.3f G weights/s/thread (warm %.3f), cat %.3f s, time ratio to cat %s, peak RSS %s KiB\n' \
    "$type" "$kernel" $((bytes >> 20)) "$weights" "$t_deq" "$gws" "$gws_warm" "$t_cat" "$(ratio "$t_deq" "$t_cat")" "$rss_deq"
  rm -f "$f"
done
[ -z "${TQ_BENCH_DIR:-}" ] && rmdir "$dir" 2>/dev/null || true
