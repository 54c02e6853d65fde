#!/usr/bin/env bash
# tq-rowlayout of a >= 4 GB generated n-gram table (width 160, 4 bits, group 32: 100-byte
# records, 42,949,673 rows = 4 GiB of records) against the floor `cp` of the source followed
# by `sync` of the copy (tq-rowlayout fsyncs its output, so the floor's bytes must reach the
# disk too), measured in the same run, cold page cache when caches can be dropped (root),
# best of two rounds each. Also reported: plain `cp` without sync, --check against
# `cat SOURCE OUT`, and peak RSS (bounded by the chunk size, ~3 x 8 MiB, not the table).
# Target: throughput >= 0.7 x cp + sync.
# TQ_BENCH_SIZE=tiny uses 100,000 rows (10 MB; checks the script in seconds);
# TQ_BENCH_ROWS=N any other row count.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs rowlayout tq-rowlayout tq-mkmodel

if [ -n "${TQ_BENCH_ROWS:-}" ]; then rows=$TQ_BENCH_ROWS name=ngram-$rows
elif [ "${TQ_BENCH_SIZE:-}" = tiny ]; then rows=100000 name=ngram-tiny
else rows=42949673 name=ngram-4g; fi
d=$TQ_BENCH_DIR/$name
made "$d" "$BIN/tq-mkmodel" --quiet --arch ngram --rows "$rows" --width 160 --bits 4 --seed 1 "$d"
src=$d/model.safetensors
out=$TQ_BENCH_DIR/rowlayout-out.safetensors
cpy=$TQ_BENCH_DIR/rowlayout-cp.safetensors
rm -f "$out" "$cpy" "$out".partial-* "$cpy".partial-*
cache=$(cache_mode "$src")

# a reflink clone copies no bytes: the floor must be a real copy
cpf=(); cp --help 2>/dev/null | grep -- --reflink >/dev/null && cpf=(--reflink=never)
t_cps="" t_cp="" t_rl="" t_cat="" t_chk="" rss=0 rss_chk=0
for round in 1 2; do
  drop_caches
  timed sh -c 'd=$1; shift; cp "$@" "$d" && sync "$d"' sh "$cpy" "${cpf[@]}" "$src"
  t_cps=$(best "$t_cps" "$T")
  rm -f "$cpy"
  drop_caches
  timed cp "${cpf[@]}" "$src" "$cpy"
  t_cp=$(best "$t_cp" "$T")
  rm -f "$cpy"
  drop_caches
  timed "$BIN/tq-rowlayout" "$src" --out "$out" --quiet --json > "$TQ_BENCH_DIR/rowlayout-receipt.json"
  t_rl=$(best "$t_rl" "$T")
  [ "$RSS" -gt "$rss" ] && rss=$RSS
  grep -q '"all_rows_bit_exact": true' "$TQ_BENCH_DIR/rowlayout-receipt.json" || { echo "rowlayout: no bit-exact receipt"; exit 1; }
  drop_caches
  timed sh -c 'cat "$1" "$2" > /dev/null' sh "$src" "$out"
  t_cat=$(best "$t_cat" "$T")
  drop_caches
  timed "$BIN/tq-rowlayout" --check "$out" --quiet
  t_chk=$(best "$t_chk" "$T")
  [ "$RSS" -gt "$rss_chk" ] && rss_chk=$RSS
  rm -f "$out"
done
bytes=$(stat -c %s "$src")
mbs() { echo "scale=1; $bytes / $1 / 1000000" | bc -l; }
echo "rowlayout: $src: $bytes bytes, $rows rows of 100 bytes, $cache cache"
printf 'rowlayout: tq-rowlayout %.3f s (%s MB/s); cp + sync %.3f s (%s MB/s); cp alone %.3f s\n' \
  "$t_rl" "$(mbs "$t_rl")" "$t_cps" "$(mbs "$t_cps")" "$t_cp"
echo "rowlayout: throughput ratio tq-rowlayout / (cp + sync) = $(ratio "$t_cps" "$t_rl") (target >= 0.7); vs cp alone $(ratio "$t_cp" "$t_rl")"
echo "rowlayout: --check $(printf %.3f "$t_chk") s vs cat source+output $(printf %.3f "$t_cat") s: ratio $(ratio "$t_cat" "$t_chk")"
echo "rowlayout: peak RSS convert ${rss} KiB, check ${rss_chk} KiB (bounded by --chunk-size, not the table)"
