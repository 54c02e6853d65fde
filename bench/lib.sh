# Shared helpers for bench/*.sh (sourced).
# timed CMD...: runs CMD, sets T (wall seconds) and RSS (peak RSS in KiB, via GNU time or /proc).
timed() {
  local t0 t1 tf
  tf=$(mktemp)
  t0=$(date +%s.%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$tf" "$@"
  else
    "$@"
  fi
  t1=$(date +%s.%N)
  T=$(echo "$t1 - $t0" | bc -l)
  RSS=$(tail -n1 "$tf" 2>/dev/null || echo 0)
  rm -f "$tf"
}
# drop_caches: best effort, so floors and tools both read cold (needs root).
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
ratio() { echo "scale=3; $1 / $2" | bc -l; }
# The 8 GB generated MoE used by several benchmarks, made once.
big_moe() {
  local d="$TQ_BENCH_DIR/moe-8g"
  if [ ! -f "$d/.complete" ]; then
    rm -rf "$d"
    "$BIN/tq-mkmodel" --arch qwen3_moe --size 8g --seed 1 "$d" >&2
    touch "$d/.complete"
  fi
  echo "$d"
}
