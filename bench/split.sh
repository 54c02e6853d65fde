#!/usr/bin/env bash
# tq-split of the generated 8 GB MoE against the floor `cp -r` of the same directory followed
# by `sync` (tq-split's output is fsynced, so the floor's must reach the disk too), measured in
# the same run, each from a cold page cache when caches can be dropped (root) and otherwise
# both from a warm one. Best of two rounds each. Targets: time ratio <= 1.3, peak RSS <= 256 MiB.
# TQ_BENCH_SIZE=tiny uses the tiny preset (checks the script in seconds); small: the 8g preset
# cut to 2 layers (~2.3 GB, a quicker look at the same shapes).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs split tq-split tq-mkmodel

case "${TQ_BENCH_SIZE:-8g}" in
  tiny | small) src=$(moe_model "$TQ_BENCH_SIZE") ;;
  *) src=$(moe_model 8g) ;;
esac
S=$TQ_BENCH_DIR/split-out
C=$TQ_BENCH_DIR/split-cp
rm -rf "$S" "$C"
cache=$(cache_mode "$src"/*)

t_cp="" t_split="" rss=0
for round in 1 2; do
  drop_caches
  timed sh -c 'cp -r "$1" "$2" && sync' sh "$src" "$C"
  t_cp=$(best "$t_cp" "$T")
  t_cp_round=$T
  printf 'split: round %d: cp -r + sync %.3f s (user %s s, sys %s s; load %s)\n' $round "$T" "$UT" "$ST" "$(load)"
  rm -rf "$C"
  drop_caches
  timed "$BIN/tq-split" --quiet --json "$src" "$S" > "$TQ_BENCH_DIR/split-report.json"
  t_split=$(best "$t_split" "$T")
  printf 'split: round %d: tq-split %.3f s (user %s s, sys %s s; load %s); ratio this round %s\n' $round "$T" "$UT" "$ST" "$(load)" "$(ratio "$T" "$t_cp_round")"
  r=$(sed -n 's/.*"peak_rss_bytes": \([0-9]*\).*/\1/p' "$TQ_BENCH_DIR/split-report.json")
  [ -n "$r" ] && [ $((r / 1024)) -gt "$rss" ] && rss=$((r / 1024))
  rm -rf "$S"
done
bytes=$(total_bytes "$src"/*.safetensors)
echo "split: $src: $bytes bytes of safetensors, $(nproc) thread(s), $cache cache"
printf 'split: tq-split %.3f s; cp -r + sync %.3f s\n' "$t_split" "$t_cp"
echo "split: time ratio tq-split/cp = $(ratio "$t_split" "$t_cp") (target <= 1.3); peak RSS ${rss} KiB (target <= 262144)"
