#!/usr/bin/env bash
# GGUF input: single-thread dequantization speed of every ggml block type tq reads (Q4_K first,
# as the reference row; TQ_BENCH_GGUF_TYPES="Q4_K IQ2_XS" picks some), (1) the kernel alone with
# its data in cache and (2) end to end through tq_model (what tq-convert reads: pread of the
# blocks + dequantization into 8 MiB F32 requests, `tq-verify ls --read`), as G weights/s per
# thread and as a time ratio to `cat` of the same file, plus peak RSS. Rates are given per
# wall second and per CPU second (user+sys; robust when the machine is shared). The synthetic
# files (random quants, finite scales) come from the tests' GGUF writer.
# Size: TQ_BENCH_SIZE=tiny (16 MiB per type), small (64 MiB), or a size such as 1G
# (default 384M).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
size=${TQ_BENCH_SIZE:-384M}
[ "$size" = tiny ] && size=16M
[ "$size" = small ] && size=64M
make -s -C "$ROOT" "$BUILD/tests/test_gguf_bench" BUILD="$BUILD" >&2
types=${TQ_BENCH_GGUF_TYPES:-Q4_K Q6_K Q8_0 Q8_K IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ4_NL IQ4_XS TQ1_0 TQ2_0 MXFP4}
for type in $types; do
  f="$TQ_BENCH_DIR/gguf-bench-$type-$size.gguf"
  weights=$("$BUILD/tests/test_gguf_bench" --make "$f" "$type" "$size")
  bytes=$(stat -c %s "$f")
  read -r k_wall k_cpu < <("$BUILD/tests/test_gguf_bench" --kernel "$type")
  drop_caches
  timed cat "$f" >/dev/null
  t_cat=$T
  drop_caches
  timed "$BIN/tq-verify" ls --read --quiet "$f"
  t_deq=$T; c_deq=$CPU; rss=$RSS
  timed "$BIN/tq-verify" ls --read --quiet "$f" # warm page cache
  t_warm=$T; c_warm=$CPU
  # G weights/s for a time; "nan" when GNU time measured no CPU time at all (tiny files)
  rate() { if [ "$(echo "$1 > 0" | bc -l)" = 1 ]; then echo "scale=6; $weights / $1 / 1000000000" | bc -l; else echo nan; fi; }
  printf 'gguf %s kernel: %.3f G weights/s/thread (%.3f per CPU s)\n' "$type" "$k_wall" "$k_cpu"
  printf 'gguf %s read+dequant %d MiB (%s weights): %.3f s = %.3f G weights/s/thread (%.3f per CPU s); warm %.3f (%.3f per CPU s); cat %.3f s; time ratio to cat %s; peak RSS %s KiB\n' \
    "$type" $((bytes >> 20)) "$weights" "$t_deq" "$(rate "$t_deq")" "$(rate "$c_deq")" "$(rate "$t_warm")" \
    "$(rate "$c_warm")" "$t_cat" "$(ratio "$t_deq" "$t_cat")" "$rss"
  rm -f "$f"
done
