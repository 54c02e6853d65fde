# Shared helpers for bench/*.sh (sourced).
# timed CMD...: runs CMD, sets T (wall seconds), RSS (peak RSS in KiB) and UT / ST (user and
# system CPU seconds, so CPU-bound can be told from I/O-bound on a shared machine), the last
# three via GNU time (0 without it).
timed() {
  local t0 t1 tf
  tf=$(mktemp)
  t0=$(date +%s.%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%U %S %M' -o "$tf" "$@"
  else
    "$@"
  fi
  t1=$(date +%s.%N)
  T=$(echo "$t1 - $t0" | bc -l)
  UT=0 ST=0 RSS=0
  if [ -s "$tf" ]; then read -r UT ST RSS < <(tail -n1 "$tf"); fi
  rm -f "$tf"
}
# load: the 1-minute load average, to print next to numbers measured on a shared machine.
load() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?'; }
# drop_caches: best effort, so floors and tools both read cold (needs root).
drop_caches() { sync; { echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null || true; }
# cache_mode FILE...: prints "cold" when caches can be dropped; otherwise reads FILEs once so
# floor and tool both start from the same warm page cache, and prints "warm".
cache_mode() {
  if { echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then echo cold; else cat "$@" > /dev/null; echo warm; fi
}
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
# total_bytes FILE...: the sum of the files' sizes (without reading them, unlike cat | wc -c).
total_bytes() { stat -L -c %s "$@" | awk '{s += $1} END {printf "%.0f\n", s}'; }
