#!/usr/bin/env bash
# tq-run on the Apple GPU against the CPU runtime, on a Mac with a Metal build: the same
# generated MoE (TQ_BENCH_ARCH, default qwen3_moe; split with tq-split) decoded with
# --backend cpu and --backend metal, resident, streamed at a cache budget and streamed with the
# layer files mapped (--map-experts): tokens/s of each
# (as tq-run --json reports it), the GPU's speed-up, and the agreement of the two: the same
# generated tokens and the largest relative logit difference (tq-run --compare-logits), which
# must stay below 1e-3 (docs/metal.md) or the benchmark fails.
#
# NOT RUN: this was written without a Mac or a GPU. On a build without Metal it prints
# "metal: skipped" and exits 0, before generating more than the tiny probe model. TQ_BENCH_METAL_AS=shim runs every step with --backend shim in
# place of metal (the Metal kernels compiled as C, on the CPU: slow, and no measure of a GPU),
# which is how the script itself was checked on Linux.
# TQ_BENCH_SIZE tiny | small (the 8g preset cut to 2 layers) | 8g (default), TQ_BENCH_TOKENS
# (default 8), TQ_BENCH_BUDGET (default 512M; 64K with tiny), TQ_BENCH_ARCH.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs metal tq-mkmodel tq-split tq-run
DEV=${TQ_BENCH_METAL_AS:-metal}
case $DEV in metal | shim) ;; *) echo "metal: TQ_BENCH_METAL_AS must be metal or shim" >&2; exit 2 ;; esac
NTOK=${TQ_BENCH_TOKENS:-8}
PROMPT=1,2,3,4
SIZE=${TQ_BENCH_SIZE:-8g}
BUDGET=${TQ_BENCH_BUDGET:-$([ "$SIZE" = tiny ] && echo 64K || echo 512M)}

W=$TQ_BENCH_DIR/metal-work
mkdir -p "$W"

# Is there a GPU backend in this build and a device? Asked first, of the tiny model (a
# second's work), before the 8 GB one is generated: tq-run exits non-zero and says why
# when there is none (issue 32: the answer used to come after the 8 GB model).
P=$(moe_model tiny "${TQ_BENCH_ARCH:-}")
made "$P.split" "$BIN/tq-split" --quiet "$P" "$P.split"
if ! "$BIN/tq-run" "$P.split" --tokens "$PROMPT" --max-tokens 1 --backend "$DEV" --quiet > /dev/null 2> "$W/probe.err"; then
  echo "metal: skipped, no $DEV backend here: $(head -n1 "$W/probe.err")"
  echo "metal: needs a macOS build with Metal (docs/metal.md); no model was generated beyond the tiny probe"
  exit 0
fi

M=$(moe_model "$SIZE" "${TQ_BENCH_ARCH:-}")
S=$M.split
made "$S" "$BIN/tq-split" --quiet "$M" "$S"
[ "$DEV" = metal ] || echo "metal: --backend shim in place of metal: the kernels run on this CPU; no GPU is measured"
printf 'metal: %s (%s), %s tokens after a %s-token prompt, cache budget %s when streamed\n' \
  "$(basename "$M")" "$(jget "$M/config.json" model_type)" "$NTOK" 4 "$BUDGET"

# one MODE BACKEND [options]: a decode; its report in $W/MODE-BACKEND.json, logits in .f32
one() {
  local mode=$1 be=$2
  shift 2
  "$BIN/tq-run" "$S" --tokens "$PROMPT" --max-tokens "$NTOK" --backend "$be" --force --logits "$W/$mode-$be.f32" \
    --json "$@" > "$W/$mode-$be.json"
}

fail=0
for mode in resident streamed mapped; do
  opts=()
  case $mode in
  resident) opts=(--resident) ;;
  streamed) opts=(--cache-budget "$BUDGET") ;;
  mapped) opts=(--map-experts) ;; # the layer files mapped: no wait per MoE layer (docs/metal.md)
  esac
  one "$mode" cpu "${opts[@]}"
  one "$mode" "$DEV" "${opts[@]}"
  tc=$(jget "$W/$mode-cpu.json" tokens_per_s) td=$(jget "$W/$mode-$DEV.json" tokens_per_s)
  vocab=$(jget "$W/$mode-cpu.json" vocab)
  "$BIN/tq-run" --compare-logits "$W/$mode-cpu.f32" "$W/$mode-$DEV.f32" --vocab "$vocab" --json > "$W/$mode-cmp.json"
  rel=$(jget "$W/$mode-cmp.json" max_rel_diff) top=$(jget "$W/$mode-cmp.json" top1_rate)
  same=no
  t_cpu=$(jget "$W/$mode-cpu.json" tokens) t_dev=$(jget "$W/$mode-$DEV.json" tokens)
  [ -n "$t_cpu" ] && [ "$t_cpu" = "$t_dev" ] && same=yes
  printf 'metal: %-9s cpu %.2f tokens/s, %s %.2f tokens/s (%.2fx); max relative logit difference %s, top-1 agreement %s, same tokens: %s\n' \
    "$mode" "$tc" "$DEV" "$td" "$(echo "if ($tc > 0) $td / $tc else 0" | bc -l)" "$rel" "$top" "$same"
  if [ "$same" != yes ] || ! awk -v r="$rel" 'BEGIN { exit !(r < 1e-3) }'; then
    echo "metal: $mode: the $DEV decode disagrees with the CPU's (limit: relative 1e-3, identical tokens)" >&2
    fail=1
  fi
done
exit $fail
