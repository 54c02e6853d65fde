#!/usr/bin/env bash
# Generating a model with tq-mkmodel against the floor `cp` of the same bytes (page cache to
# disk), plus peak RSS (target < 256 MiB whatever the size). Generation is compute-bound
# (~25-30 ns per value per thread), so the ratio mostly shows the thread count and CPU.
# Default size: one layer of the 8g preset with a 32000-token vocabulary (~0.9 GB);
# TQ_BENCH_SIZE=tiny checks the script in a second; TQ_BENCH_SIZE=8g generates the full preset.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs mkmodel tq-mkmodel

case "${TQ_BENCH_SIZE:-}" in
  tiny) args=(--size tiny) ;;
  8g) args=(--size 8g) ;;
  *) args=(--size 8g --layers 1 --vocab 32000) ;;
esac
M=$TQ_BENCH_DIR/mkmodel-gen
C=$TQ_BENCH_DIR/mkmodel-copy
rm -rf "$M" "$C"
timed "$BIN/tq-mkmodel" --quiet --seed 1 "${args[@]}" "$M"
t_gen=$T rss=$RSS
shards=("$M"/*.safetensors)
bytes=$(total_bytes "${shards[@]}")
mkdir -p "$C"
timed sh -c 'cp "$@" "'"$C"'/" && sync' cp "${shards[@]}"
t_cp=$T
rm -rf "$M" "$C"

echo "mkmodel: ${args[*]}: $bytes bytes in ${#shards[@]} shard(s), $(nproc) thread(s)"
printf 'mkmodel: tq-mkmodel %.3f s (%s MiB/s); cp+sync %.3f s (%s MiB/s)\n' "$t_gen" "$(mib_s "$bytes" "$t_gen")" "$t_cp" "$(mib_s "$bytes" "$t_cp")"
echo "mkmodel: speed ratio tq/cp = $(ratio "$t_cp" "$t_gen"); peak RSS ${rss} KiB (target < 262144)"
