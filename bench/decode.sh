#!/usr/bin/env bash
# Decode speed of tq-run (issue 35), in one run:
# 1. --resident on a 4-bit TurboQuant dense model (141 M weights): tokens/s (forward passes per
#    second, as tq-run reports them) at --threads 1, 2 and all cores, for the best SIMD kernels
#    the CPU has, AVX2 alone where it also has AVX-512 (TQ_NO_AVX512=1), and the portable ones
#    (TQ_NO_SIMD=1); every path must give the same logits. The bytes of weights each token
#    reads (every matrix; of the embedding only one row), and that rate as a fraction of a
#    single-thread read loop over the same number of bytes in memory, measured in the same run
#    ($BUILD/bench/read_loop: as many passes over those bytes as the decode makes forward
#    passes, their mean, so that on a shared machine floor and decode meet the same
#    contention; the best pass is printed too). tq-run's CPU use (CPU seconds / wall seconds of
#    the whole process) says how much of a core it got. Target: >= 0.5 of the floor at 1 thread.
# 2. A 4-bit qwen3_moe model (16 experts, 4 per token) split by tq-split and streamed with the
#    expert cache (default budget, O_DIRECT reads), after a warm-up run, at the same thread
#    counts: tokens/s, the expert-cache hit rate, and the weights each token touches (pinned
#    matrices, one embedding row, 4 experts per layer) against a read loop over that many
#    bytes; the same model --resident for comparison, with the same logits. Also printed: the
#    read loop's passes cycling through every expert's bytes, the working set a decode meets.
# TQ_BENCH_SIZE=tiny checks the script on small models; TQ_BENCH_TOKENS (default 16 dense,
# 4x that for the MoE model, so that its expert cache warms up).
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
kinds="simd portable"
grep -qw avx512f /proc/cpuinfo 2>/dev/null && kinds="simd avx2 portable"
for t in $threads; do
  run1 "$t" "$TQ_BENCH_DIR/decode-simd.json"
  use_simd=$(awk -v c="$CPU" -v t="$T" 'BEGIN {printf "%.2f", c / t}')
  if [ "$kinds" != "simd portable" ]; then
    run1 "$t" "$TQ_BENCH_DIR/decode-avx2.json" TQ_NO_AVX512=1
    use_avx2=$(awk -v c="$CPU" -v t="$T" 'BEGIN {printf "%.2f", c / t}')
  fi
  run1 "$t" "$TQ_BENCH_DIR/decode-portable.json" TQ_NO_SIMD=1
  use_portable=$(awk -v c="$CPU" -v t="$T" 'BEGIN {printf "%.2f", c / t}')
  same=identical
  for k in $kinds; do
    [ "$(jget "$TQ_BENCH_DIR/decode-$k.json" logits_sha256)" = "$(jget "$TQ_BENCH_DIR/decode-portable.json" logits_sha256)" ] || same=DIFFER
  done
  for k in $kinds; do
    tps=$(jget "$TQ_BENCH_DIR/decode-$k.json" tokens_per_s) use=use_$k
    awk -v t="$t" -v k="$k" -v tps="$tps" -v b="$bpt" -v f="$floor" -v u="${!use}" 'BEGIN {
      printf "decode: --threads %s %-8s %7.2f tokens/s, weights at %.2f GB/s = %.3f x the 1-thread read loop (tq-run used %s CPUs)\n", t, k, tps, tps * b / 1e9, tps * b / f, u }'
  done
  echo "decode: --threads $t logits SIMD vs portable: $same"
done

# ---- 2. the MoE model, streamed from its split
if [ "${TQ_BENCH_SIZE:-}" = tiny ]; then
  M=$TQ_BENCH_DIR/decode-moe-tiny mgen=(--layers 2 --hidden 256 --intermediate 512 --moe-intermediate 128 --heads 4 --kv-heads 2 --head-dim 64 --vocab 1024)
else # 268 M weights: 8 layers of 16 experts [512, 1024] x3, attention, lm_head 32.8 M
  M=$TQ_BENCH_DIR/decode-moe mgen=(--layers 8 --hidden 1024 --intermediate 2816 --moe-intermediate 512 --heads 8 --kv-heads 4 --head-dim 128 --vocab 32000)
fi
made "$M" "$BIN/tq-mkmodel" --quiet --arch qwen3_moe "${mgen[@]}" --experts 16 --top-k 4 --dtype bf16 --seed 12 "$M"
made "$M.tq4" "$BIN/tq-convert" --quiet --bits 4 "$M" "$M.tq4"
bench_needs decode tq-split
made "$M.tq4s" "$BIN/tq-split" --quiet "$M.tq4" "$M.tq4s"
MTOK=$((NTOK * 4))
runm() { # runm THREADS OUT [tq-run options...]
  local t=$1 out=$2; shift 2
  timed "$BIN/tq-run" "$M.tq4s" "$@" --threads "$t" --tokens 1,2,3,4 --max-tokens "$MTOK" --json > "$out"
}
runm 1 "$TQ_BENCH_DIR/decode-moe-warm.json" # warms the page cache for the pinned part
mv=$(jget "$M.tq4/config.json" vocab_size) mh=$(jget "$M.tq4/config.json" hidden_size)
ml=$(jget "$M.tq4/config.json" num_hidden_layers) mk=$(jget "$M.tq4/config.json" num_experts_per_tok)
pinned=$(stat -c %s "$M.tq4s/pinned.safetensors")
eblock=$(awk 'match($0, /"length": *[0-9]+/) { s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s); print s; exit }' "$M.tq4s/split.json")
# weights per token: the pinned file (all but the embedding; safetensors header included)
# and one embedding row, and mk experts in each layer (one expert block of the split each)
mbpt=$((pinned - mv * mh * 2 + mh * 2 + ml * mk * eblock))
mpasses=$(jget "$TQ_BENCH_DIR/decode-moe-warm.json" forward_passes)
read -r mrl_bytes mrl_best mrl_mean < <("$RL" "$mbpt" "$mpasses")
mfloor=$(awk -v b="$mrl_bytes" -v s="$mrl_mean" 'BEGIN {printf "%.0f", b / s}')
# The same passes cycling over every expert's bytes (all of the model's weights but the
# embedding): the chosen experts change from token to token, so a decode's working set is the
# whole model, where one token's bytes alone may fit a large last-level cache (this machine's
# read loop falls from ~25 to ~11 GB/s between 80 and 120 MB). Reported beside the floor above,
# which stays the figure the ratios are taken against.
mspan=$((pinned - mv * mh * 2 + ml * $(jget "$M.tq4/config.json" num_experts) * eblock))
read -r _ _ mspan_mean < <("$RL" "$mbpt" "$mpasses" "$mspan")
printf 'decode: %s (qwen3_moe, 4-bit TurboQuant, %s of %s experts per token, tq-split), %s bytes of weights per token; read loop %.2f GB/s (1 thread, mean of %s passes; best pass %.2f GB/s); load %s\n' \
  "$(basename "$M.tq4s")" "$mk" "$(jget "$M.tq4/config.json" num_experts)" "$mbpt" \
  "$(awk -v f="$mfloor" 'BEGIN {print f / 1e9}')" "$mpasses" \
  "$(awk -v b="$mrl_bytes" -v s="$mrl_best" 'BEGIN {print b / s / 1e9}')" "$(load)"
awk -v b="$mrl_bytes" -v s="$mspan_mean" -v n="$mspan" 'BEGIN {
  printf "decode: moe read loop over the same bytes a pass, cycling through all experts (%d bytes, the decode'"'"'s working set): %.2f GB/s (mean)\n", n, b / s / 1e9 }'
for t in $threads; do
  runm "$t" "$TQ_BENCH_DIR/decode-moe-streamed.json"
  use_s=$(awk -v c="$CPU" -v t="$T" 'BEGIN {printf "%.2f", c / t}')
  runm "$t" "$TQ_BENCH_DIR/decode-moe-resident.json" --resident
  use_r=$(awk -v c="$CPU" -v t="$T" 'BEGIN {printf "%.2f", c / t}')
  same=identical
  [ "$(jget "$TQ_BENCH_DIR/decode-moe-streamed.json" logits_sha256)" = "$(jget "$TQ_BENCH_DIR/decode-moe-resident.json" logits_sha256)" ] || same=DIFFER
  for k in streamed resident; do
    f=$TQ_BENCH_DIR/decode-moe-$k.json u=$use_s
    [ $k = resident ] && u=$use_r
    awk -v t="$t" -v k="$k" -v tps="$(jget "$f" tokens_per_s)" -v b="$mbpt" -v f="$mfloor" -v u="$u" \
      -v h="$(jget "$f" hit_rate)" -v rd="$(jget "$f" bytes_per_token)" 'BEGIN {
      printf "decode: moe --threads %s %-8s %7.2f tokens/s, weights at %.2f GB/s = %.3f x the 1-thread read loop (expert-cache hit rate %.3f, %d bytes read per token; tq-run used %s CPUs)\n", t, k, tps, tps * b / 1e9, tps * b / f, h, rd, u }'
  done
  echo "decode: moe --threads $t logits streamed vs resident: $same"
done
