#!/usr/bin/env bash
# Decode speed of tq-run --resident on a 4-bit TurboQuant dense model (issue 35): tokens/s
# (forward passes per second, as tq-run reports them) at --threads 1, 2 and all cores, for the
# SIMD kernels and the portable ones (TQ_NO_SIMD=1, which must give the same logits), the bytes
# of weights each token reads (every matrix; of the embedding only one row), and that rate as
# a fraction of a single-thread read loop over the same number of bytes in memory, measured in
# the same run ($BUILD/bench/read_loop: as many passes over those bytes as the decode makes
# forward passes, their mean, so that on a shared machine floor and decode meet the same
# contention; the best pass is printed too). tq-run's CPU use (CPU seconds / wall seconds of
# the whole process) says how much of a core it got. Target (issue 35): >= 0.5 of the floor
# at 1 thread.
# TQ_BENCH_SIZE=tiny checks the script on a small model; TQ_BENCH_TOKENS (default 16).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs decode tq-mkmodel tq-convert tq-run
RL=$BUILD/bench/read_loop
[ -x "$RL" ] || { echo "decode: skipped (needs $RL: make bench-build)"; exit 0; }
NTOK=${TQ_BENCH_TOKENS:-16}
if [ "${TQ_BENCH_SIZE:-}" = tiny ]; then
  D=$TQ_BENCH_DIR/decode-dense-tiny gen=(--layers 2 --hidden 256 --intermediate 512 --heads 4 --kv-heads 2 --head-dim 64 --vocab 1024)
else # 141 M weights: 10 layers of 11.8 M, lm_head 32.8 M
  D=$TQ_BENCH_DIR/decode-dense gen=(--layers 10 --hidden 1024 --intermediate 2816 --heads 8 --kv-heads 4 --head-dim 128 --vocab 32000)
fi
made "$D" "$BIN/tq-mkmodel" --quiet --arch qwen3 "${gen[@]}" --dtype bf16 --seed 11 "$D"
Q=$D.tq4
made "$Q" "$BIN/tq-convert" --quiet --bits 4 "$D" "$Q"

vocab=$(jget "$Q/config.json" vocab_size) hidden=$(jget "$Q/config.json" hidden_size)
run1() { # run1 THREADS OUT [env...]: one resident decode, JSON to OUT; sets T and CPU (timed)
  local t=$1 out=$2; shift 2
  timed env "$@" "$BIN/tq-run" "$Q" --resident --threads "$t" --tokens 1,2,3,4 --max-tokens "$NTOK" --json > "$out"
}
run1 1 "$TQ_BENCH_DIR/decode-warm.json" # warms the page cache for the resident load
resident=$(jget "$TQ_BENCH_DIR/decode-warm.json" resident_bytes)
# the embedding (bf16, kept by tq-convert) is read one row per token; everything else whole
bpt=$((resident - vocab * hidden * 2 + hidden * 2))
passes=$(jget "$TQ_BENCH_DIR/decode-warm.json" forward_passes)
read -r rl_bytes rl_best rl_mean < <("$RL" "$bpt" "$passes")
floor=$(awk -v b="$rl_bytes" -v s="$rl_mean" 'BEGIN {printf "%.0f", b / s}')
printf 'decode: %s (4-bit TurboQuant, %s bytes resident), %s bytes of weights per token; read loop %.2f GB/s (1 thread, mean of %s passes; best pass %.2f GB/s); %s cores, load %s\n' \
  "$(basename "$Q")" "$resident" "$bpt" "$(awk -v f="$floor" 'BEGIN {print f / 1e9}')" "$passes" \
  "$(awk -v b="$rl_bytes" -v s="$rl_best" 'BEGIN {print b / s / 1e9}')" "$(nproc)" "$(load)"
threads="1 2"
[ "$(nproc)" -gt 2 ] && threads="$threads $(nproc)"
for t in $threads; do
  run1 "$t" "$TQ_BENCH_DIR/decode-simd.json"
  use_simd=$(awk -v c="$CPU" -v t="$T" 'BEGIN {printf "%.2f", c / t}')
  run1 "$t" "$TQ_BENCH_DIR/decode-portable.json" TQ_NO_SIMD=1
  use_portable=$(awk -v c="$CPU" -v t="$T" 'BEGIN {printf "%.2f", c / t}')
  same=identical
  [ "$(jget "$TQ_BENCH_DIR/decode-simd.json" logits_sha256)" = "$(jget "$TQ_BENCH_DIR/decode-portable.json" logits_sha256)" ] || same=DIFFER
  for k in simd portable; do
    tps=$(jget "$TQ_BENCH_DIR/decode-$k.json" tokens_per_s) use=use_$k
    awk -v t="$t" -v k="$k" -v tps="$tps" -v b="$bpt" -v f="$floor" -v u="${!use}" 'BEGIN {
      printf "decode: --threads %s %-8s %7.2f tokens/s, weights at %.2f GB/s = %.3f x the 1-thread read loop (tq-run used %s CPUs)\n", t, k, tps, tps * b / 1e9, tps * b / f, u }'
  done
  echo "decode: --threads $t logits SIMD vs portable: $same"
done
