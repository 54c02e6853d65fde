#!/usr/bin/env bash
# Reading every tensor of the generated 8 GB MoE with `tq-verify ls --read` against the floor
# `cat SHARDS > /dev/null`, both from a cold page cache, alternately, best of two rounds each.
# Target: ratio >= 0.9, peak RSS < 256 MiB.
# TQ_BENCH_SIZE=tiny uses a tiny generated model (to check the script); TQ_BENCH_MODEL=DIR
# uses an existing model directory.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if [ -n "${TQ_BENCH_MODEL:-}" ]; then
  M=$TQ_BENCH_MODEL
elif [ ! -x "$BIN/tq-mkmodel" ]; then
  echo "read: skipped (needs $BIN/tq-mkmodel)"; exit 0
elif [ "${TQ_BENCH_SIZE:-}" = tiny ]; then
  M=$(moe_model tiny)
else
  M=$(moe_model 8g)
fi
shards=("$M"/*.safetensors)
bytes=$(total_bytes "${shards[@]}")
cache=$(cache_mode "${shards[@]}")

# Floor and tool alternately, two rounds, best of each: other processes' I/O on a shared
# machine makes single timings noisy.
t_cat="" t_tq="" rss_tq=0
for round in 1 2; do
  drop_caches
  timed sh -c 'cat "$@" > /dev/null' cat "${shards[@]}"
  if [ -z "$t_cat" ] || [ "$(echo "$T < $t_cat" | bc -l)" = 1 ]; then t_cat=$T cpu_cat="user $UT s, sys $ST s"; fi
  printf 'read: round %d: cat %.3f s (user %s s, sys %s s; load %s)\n' $round "$T" "$UT" "$ST" "$(load)"
  drop_caches
  timed "$BIN/tq-verify" ls --read --quiet "$M"
  if [ -z "$t_tq" ] || [ "$(echo "$T < $t_tq" | bc -l)" = 1 ]; then t_tq=$T cpu_tq="user $UT s, sys $ST s"; fi
  [ "$RSS" -gt "$rss_tq" ] && rss_tq=$RSS
  printf 'read: round %d: tq-verify ls --read %.3f s (user %s s, sys %s s; load %s)\n' $round "$T" "$UT" "$ST" "$(load)"
done

echo "read: ${#shards[@]} shard(s), $bytes bytes, $cache cache, load $(load)"
printf 'read: cat %.3f s (%s MiB/s; %s); tq-verify ls --read %.3f s (%s MiB/s; %s)\n' "$t_cat" "$(mib_s "$bytes" "$t_cat")" "$cpu_cat" "$t_tq" "$(mib_s "$bytes" "$t_tq")" "$cpu_tq"
printf "read: speed ratio tq/cat = %.3f (target >= 0.9); peak RSS %s KiB (target < 262144)\n" "$(ratio "$t_cat" "$t_tq")" "$rss_tq"
