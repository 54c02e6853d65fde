#!/usr/bin/env bash
# The quantizer's kernels alone, in memory, one thread (bench/quant_kernel.c, linked against
# the built library): Hadamard rotation, and the group search + packing for 2/3/4 bits with
# --scale lsq and rms, per CPU second (best of 20). The end-to-end rate is bench/convert.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
TQ_BENCH_DIR=${TQ_BENCH_DIR:-$PWD/bench-out}
LIB=$ROOT/${BUILD:-build}/libtq.a
[ -f "$LIB" ] || { echo "quant-kernel: skipped (no $LIB; run make first)"; exit 0; }
mkdir -p "$TQ_BENCH_DIR"
exe=$TQ_BENCH_DIR/quant-kernel
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -I"$ROOT" -o "$exe" "$ROOT/bench/quant_kernel.c" "$LIB" \
  $(pkg-config --libs libzstd libcrypto libcjson libarchive) -lm -pthread
rows=1024; [ "${TQ_BENCH_SIZE:-}" = tiny ] && rows=16
"$exe" $rows 20
echo "quant-kernel: load $(load)"
rm -f "$exe"
