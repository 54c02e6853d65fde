#!/usr/bin/env bash
# tq-verify manifest on the generated 8 GB MoE against the floor `sha256sum` of the same files,
# measured in the same run: 1 thread (target >= 0.9x sha256sum's throughput) and 2 threads
# (target: faster than sha256sum). The manifest does more work than sha256sum (it also hashes
# every tensor on its own), so 1 thread relies on large reads and libcrypto's SHA-256.
# Each run from a cold page cache when caches can be dropped (root), otherwise all warm.
# Best of two rounds. Also checks that SHA256SUMS equals sha256sum's own output.
# TQ_BENCH_SIZE=tiny uses the tiny preset (checks the script in seconds).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs verify tq-verify tq-mkmodel

if [ "${TQ_BENCH_SIZE:-8g}" = tiny ]; then src=$(moe_model tiny); else src=$(moe_model 8g); fi
# The manifest is written next to a copy-free view of the model: a directory of symlinks
# (manifests follow links to regular files), so the shared 8 GB model is never modified.
view=$TQ_BENCH_DIR/verify-view
rm -rf "$view"; mkdir -p "$view"
(cd "$src" && find . -type f ! -name .complete ! -name SHA256SUMS ! -name tq-manifest.json | sed 's|^\./||' | LC_ALL=C sort) > "$TQ_BENCH_DIR/verify-files"
while IFS= read -r f; do mkdir -p "$view/$(dirname "$f")"; ln -s "$src/$f" "$view/$f"; done < "$TQ_BENCH_DIR/verify-files"
bytes=$(cd "$src" && xargs -d '\n' stat -L -c %s < "$TQ_BENCH_DIR/verify-files" | awk '{s += $1} END {printf "%.0f\n", s}')

mapfile -t files < <(sed "s|^|$src/|" "$TQ_BENCH_DIR/verify-files")
cache=$(cache_mode "${files[@]}")
t_sum="" t1="" t2="" rss1=0 rss2=0
for round in 1 2; do
  drop_caches
  timed sh -c 'cd "$1" && xargs -d "\n" sha256sum < "$2" > "$3"' sh "$src" "$TQ_BENCH_DIR/verify-files" "$TQ_BENCH_DIR/verify-sha256sum.out"
  t_sum=$(best "$t_sum" "$T")
  printf 'verify: round %d: sha256sum %.3f s (user %s s, sys %s s; load %s)\n' $round "$T" "$UT" "$ST" "$(load)"
  drop_caches
  timed "$BIN/tq-verify" manifest --quiet --threads 1 "$view"
  t1=$(best "$t1" "$T"); [ "${RSS:-0}" -gt "$rss1" ] && rss1=$RSS
  printf 'verify: round %d: manifest 1 thread %.3f s (user %s s, sys %s s; load %s)\n' $round "$T" "$UT" "$ST" "$(load)"
  drop_caches
  timed "$BIN/tq-verify" manifest --quiet --threads 2 "$view"
  t2=$(best "$t2" "$T"); [ "${RSS:-0}" -gt "$rss2" ] && rss2=$RSS
  printf 'verify: round %d: manifest 2 threads %.3f s (user %s s, sys %s s; load %s)\n' $round "$T" "$UT" "$ST" "$(load)"
done
cmp -s "$view/SHA256SUMS" "$TQ_BENCH_DIR/verify-sha256sum.out" || { echo "verify: SHA256SUMS differs from sha256sum's output"; exit 1; }
echo "verify: $src: $bytes bytes in $(wc -l < "$TQ_BENCH_DIR/verify-files") files, $cache cache"
printf 'verify: sha256sum %.3f s (%s MiB/s); manifest 1 thread %.3f s (%s MiB/s); 2 threads %.3f s (%s MiB/s)\n' \
  "$t_sum" "$(mib_s "$bytes" "$t_sum")" "$t1" "$(mib_s "$bytes" "$t1")" "$t2" "$(mib_s "$bytes" "$t2")"
echo "verify: throughput ratio manifest/sha256sum: 1 thread $(ratio "$t_sum" "$t1") (target >= 0.9), 2 threads $(ratio "$t_sum" "$t2") (target > 1); peak RSS ${rss1} / ${rss2} KiB"
rm -rf "$view"
