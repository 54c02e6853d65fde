#!/usr/bin/env bash
# Byte budgets against llama.cpp's K-quants on the benchmark tensors of ANCHORS (issue 17):
# tq-mkmodel --arch qwen3 --layers 8 --hidden 1536 --intermediate 4096 --heads 12 --kv-heads 4
# --head-dim 128 --vocab 32000 --dtype f16 --seed 11 (synthetic weights), every q/k/v/o and
# gate/up/down weight (lm_head and embeddings kept, so tq-convert's own totals are over exactly
# these tensors): relative MSE = Σ(w-ŵ)²/Σw² over all of them, bits/weight = their stored bytes
# (indices, scales, codebooks, signs) / weights. For --target-bpw 2.5, 3.5, 4.5, with the Gaussian
# and the fitted codebooks, prints tq's figures beside the K-quant at the next equal-or-higher
# bits/weight in ANCHORS (llama.cpp 82bb48500, measured there, not here) and MET / NOT MET.
# TQ_BUDGETS (default "2.5 3.5 4.5"), TQ_BUDGET_THREADS (default 2).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs quality-budget tq-mkmodel tq-convert
D=$TQ_BENCH_DIR/quality-budget
M=$D/model
mkdir -p "$D"
if [ ! -f "$M/.complete" ]; then
  rm -rf "$M"
  "$BIN/tq-mkmodel" --quiet --arch qwen3 --layers 8 --hidden 1536 --intermediate 4096 --heads 12 --kv-heads 4 \
    --head-dim 128 --vocab 32000 --dtype f16 --seed 11 "$M"
  touch "$M/.complete"
fi
# the K-quant of ANCHORS at the next equal-or-higher bits/weight: name bpw rel_mse
anchor() {
  awk -v b="$1" 'BEGIN {
    n = split("Q2_K(pure) 2.625 0.090|Q2_K(mix) 2.930 0.07452|Q3_K_S 3.438 0.02922|Q3_K_M 3.844 0.02355|Q4_K_S 4.547 0.00737|Q4_K_M 4.790 0.00704", r, "|")
    for (i = 1; i <= n; i++) { split(r[i], f, " "); if (f[2] + 0 >= b + 0) { print f[1], f[2], f[3]; exit } }
  }'
}
echo "quality-budget: tq at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), synthetic weights (tq-mkmodel seed 11), load $(load)"
echo
echo "| budget | codebook | tq bits/weight | tq rel. MSE | K-quant (ANCHORS) | its bits/weight | its rel. MSE | target | seconds |"
echo "|---|---|---|---|---|---|---|---|---|"
for b in ${TQ_BUDGETS:-2.5 3.5 4.5}; do
  read -r an ab am < <(anchor "$b")
  for cb in gaussian fitted; do
    O=$D/q-$b-$cb
    timed "$BIN/tq-convert" --quiet --json --force --threads "${TQ_BUDGET_THREADS:-2}" --keep lm_head --codebook "$cb" \
      --target-bpw "$b" "$M" "$O" > "$O.json"
    bpw=$(jget "$O.json" bits_per_weight_quantized)
    mse=$(jget "$O.json" rel_mse)
    met=$(awk -v m="$mse" -v a="$am" 'BEGIN { print (m <= a ? "MET" : "NOT MET") }')
    printf '| %s | %s | %.4f | %.5f | %s | %s | %s | %s | %.1f |\n' "$b" "$cb" "$bpw" "$mse" "$an" "$ab" "$am" "$met" "$T"
    rm -rf "$O"
  done
done
