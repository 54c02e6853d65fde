#!/usr/bin/env bash
# tq-run streaming the hybrid family (qwen3_5_moe: Gated DeltaNet and gated attention layers,
# routed + shared experts; the 8 GB preset, MLX form, split with tq-split) at a cache budget
# below its expert bytes: tokens/s and bytes read per token beside the cat floor of the same
# expert files measured in the same run (bench/run.sh with TQ_BENCH_ARCH=qwen3_5_moe).
# TQ_BENCH_SIZE, TQ_BENCH_BUDGET, TQ_BENCH_TOKENS as for run.sh.
set -euo pipefail
export TQ_BENCH_ARCH=${TQ_BENCH_ARCH:-qwen3_5_moe} TQ_BENCH_QUALITY=${TQ_BENCH_QUALITY:-0}
exec bash "$(dirname "$0")/run.sh"
