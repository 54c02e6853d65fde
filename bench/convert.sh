#!/usr/bin/env bash
# tq-convert: (1) quantization rate per thread at 3 bits (--threads 1 on a mid-size dense
# model held in the page cache; both per wall second and per CPU second, lsq and rms);
# (2) end to end on the 8 GB generated bf16 MoE with 2 threads, as a ratio to `cat` of the
# input read cold in the same run (target <= 2x), and peak RSS (target <= 512 MiB).
# TQ_BENCH_SIZE=tiny runs both parts on tiny models in a few seconds.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs convert tq-convert tq-mkmodel
tiny=0; [ "${TQ_BENCH_SIZE:-}" = tiny ] && tiny=1

# (1) per-thread rate
R=$TQ_BENCH_DIR/convert-rate-in
if [ $tiny = 1 ]; then rate_args=(--arch llama --size tiny); else
  rate_args=(--arch llama --layers 2 --hidden 2048 --intermediate 5632 --heads 16 --kv-heads 4 --vocab 4096); fi
rm -rf "$R"
"$BIN/tq-mkmodel" --quiet --seed 2 "${rate_args[@]}" "$R"
cat "$R"/*.safetensors > /dev/null # warm: this part measures compute
for s in lsq rms; do
  O=$TQ_BENCH_DIR/convert-rate-out
  rm -rf "$O"
  "$BIN/tq-convert" --json --threads 1 --bits 3 --scale $s "$R" "$O" > "$TQ_BENCH_DIR/convert-rate.json"
  J=$TQ_BENCH_DIR/convert-rate.json
  printf 'convert: 3-bit g64 --scale %s, 1 thread: %.1f M weights/s wall, %.1f M weights/s per CPU second (%s weights, rel MSE %.5f)\n' \
    $s "$(jget "$J" quantized_mweights_per_s)" "$(jget "$J" quantized_mweights_per_cpu_s)" \
    "$(jget "$J" quantized_params)" "$(jget "$J" rel_mse)"
  rm -rf "$O"
done
rm -rf "$R" "$TQ_BENCH_DIR/convert-rate.json"

# (2) end to end against cat
if [ $tiny = 1 ]; then M=$(moe_model tiny); else M=$(moe_model 8g); fi
O=$TQ_BENCH_DIR/convert-e2e-out
rm -rf "$O"
cache=$(cache_mode "$M"/*.safetensors)
drop_caches
timed sh -c 'cat "$@" > /dev/null' cat "$M"/*.safetensors
t_cat=$T cpu_cat="user $UT s, sys $ST s"
drop_caches
timed "$BIN/tq-convert" --quiet --threads 2 "$M" "$O"
t_cv=$T rss=$RSS cpu_cv="user $UT s, sys $ST s"
bytes=$(total_bytes "$M"/*.safetensors)
out=$(total_bytes "$O"/*.safetensors)
rm -rf "$O"
echo "convert: $M: $bytes bytes -> $out bytes; tq-convert --threads 2 $(printf '%.3f' "$t_cv") s ($cpu_cv), cat $(printf '%.3f' "$t_cat") s ($cpu_cat); $cache cache, load $(load)"
echo "convert: time ratio tq-convert/cat = $(ratio "$t_cv" "$t_cat") (target <= 2); peak RSS ${rss} KiB (target <= 524288)"
