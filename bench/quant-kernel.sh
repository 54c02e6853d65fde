#!/usr/bin/env bash
# The quantizer's kernels alone, in memory, one thread (bench/quant_kernel.c, built by make
# as $BUILD/bench/quant_kernel): Hadamard rotation, and the group search + packing for
# 2/3/4 bits with --scale lsq and rms, per CPU second (best of 20). The end-to-end rate is
# bench/convert.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
make -s -C "$ROOT" "$BUILD/bench/quant_kernel" BUILD="$BUILD" >&2
rows=1024; [ "${TQ_BENCH_SIZE:-}" = tiny ] && rows=16
"$BUILD/bench/quant_kernel" $rows 20
echo "quant-kernel: load $(load)"
