#!/usr/bin/env bash
# The quantizer's kernels alone, in memory, one thread (bench/quant_kernel.c, built by make
# as $BUILD/bench/quant_kernel): Hadamard rotation, and the group search + packing for
# 2/3/4 bits with --scale lsq and rms, per CPU second (best of 20). The end-to-end rate is
# bench/convert.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
exe=$BUILD/bench/quant_kernel
make -s -C "$ROOT" "$exe" BUILD="$BUILD" >&2
rows=1024; [ "${TQ_BENCH_SIZE:-}" = tiny ] && rows=16
"$exe" $rows 20
echo "quant-kernel: load $(load)"
