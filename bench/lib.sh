# Shared helpers for bench/*.sh (sourced). Sourcing sets ROOT, BIN (the tools), BUILD (the
# build tree, for programs built by make: \$BUILD/bench/NAME, \$BUILD/tests/NAME) and
# TQ_BENCH_DIR (scratch space, default ./bench-out, created), and gives jget
# (tests/lib/json.sh) for reading the tools' --json reports.
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=${BIN:-$ROOT/bin}
BUILD=${BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac # as make -C "$ROOT" sees it
TQ_BENCH_DIR=${TQ_BENCH_DIR:-$PWD/bench-out}
mkdir -p "$TQ_BENCH_DIR"
. "$ROOT/tests/lib/json.sh"
# bench_needs NAME TOOL...: ends the benchmark NAME with "skipped" unless every tool is built.
bench_needs() {
  local name=$1 t
  shift
  for t in "$@"; do
    [ -x "$BIN/$t" ] || { echo "$name: skipped (needs $BIN/$t)"; exit 0; }
  done
}
# timed CMD...: runs CMD, sets T (wall seconds), RSS (peak RSS in KiB), UT / ST (user and
# system CPU seconds, so CPU-bound can be told from I/O-bound on a shared machine) and CPU
# (UT + ST), all but T via GNU time (0 without it).
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
  CPU=$(echo "$UT + $ST" | bc -l)
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
# best BEST T: the smaller of two times (BEST may be empty: none yet).
best() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc -l)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
# mib_s BYTES SECONDS: MiB per second, one decimal.
mib_s() { printf '%.1f' "$(echo "$1 / 1048576 / $2" | bc -l)"; }
# made DIR CMD...: runs CMD (its output to stderr) to create DIR unless an earlier run
# finished it (DIR/.complete), so generated inputs are made once and reused.
made() {
  local d=$1
  shift
  if [ ! -f "$d/.complete" ]; then
    rm -rf "$d"
    "$@" >&2
    touch "$d/.complete"
  fi
}
# moe_model SIZE [ARCH]: prints the directory of the generated MoE model (seed 1) that several
# benchmarks share, made once: tiny (the tiny preset, to check a script in seconds), small
# (the 8g preset cut to 2 layers) or 8g (the 8 GB preset). ARCH (default qwen3_moe) may be
# any MoE family with an 8g preset (qwen3_next, qwen3_5_moe: the hybrid), generated in the
# MLX form tq-split lays out.
moe_model() {
  local arch=${2:-qwen3_moe} d gen
  d=$TQ_BENCH_DIR/moe-$1
  [ "$arch" = qwen3_moe ] || d=$TQ_BENCH_DIR/$arch-$1
  case $1 in
    tiny) gen=(--size tiny) ;;
    small) gen=(--size 8g --layers 2) ;;
    8g) gen=(--size 8g) ;;
    *) echo "moe_model: unknown size '$1'" >&2; return 1 ;;
  esac
  [ "$arch" = qwen3_moe ] || gen+=(--naming mlx)
  made "$d" "$BIN/tq-mkmodel" --arch "$arch" "${gen[@]}" --seed 1 "$d"
  echo "$d"
}
# total_bytes FILE...: the sum of the files' sizes (without reading them, unlike cat | wc -c).
total_bytes() { stat -L -c %s "$@" | awk '{s += $1} END {printf "%.0f\n", s}'; }
