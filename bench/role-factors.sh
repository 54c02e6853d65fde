#!/usr/bin/env bash
# The byte budget's role factors (quant/convert/convert_fit.c role_factor; docs/quantization.md,
# Byte budgets) measured again: on a trained model (testdata/models/qwen3-tiny by default; trained
# weights, not synthetic), every quantized module at 4 bits (group 64, lsq: tq-convert's
# defaults) and then each class alone (one leaf name: lm_head, v_proj, ...) and layer 0 and the
# last layer alone at 2 bits (--bits-for), each measured by tq-verify quality against bf16 on the
# first TQ_ROLE_BYTES (default 3000) bytes of the held-out text, window 128, stride 64. Per
# class: the KL it adds over all-4-bit (± the token s.e. of its KL), its weights, the change of
# its relative MSE, the KL added per weight per unit of relative MSE, that over a mean layer
# module's (every layer class's added KL summed, over all their weights and their mean change
# of relative MSE: the scale of convert_fit.c's factors, where anything unnamed is 1) and the
# factor tq-convert uses now. For the two layers, the same figure over the mean layer module's,
# against the multipliers tq-convert uses. At every
# rotation seed of TQ_ROLE_SEEDS (default "42 1 2"); TQ_ROLE_MODEL picks the model.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_needs role-factors tq-convert tq-verify
D=$TQ_BENCH_DIR/role-factors
rm -rf "$D" && mkdir -p "$D"
m=${TQ_ROLE_MODEL:-qwen3-tiny}
M=$ROOT/testdata/models/$m
EVAL=$D/eval.txt
head -c "${TQ_ROLE_BYTES:-3000}" "$ROOT/testdata/models/eval/python-doc-eval.txt" > "$EVAL"
L=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['num_hidden_layers'])" "$M/config.json")
# NAME:REGEX (the modules at 2 bits; the rest at 4)
PARTS=(all4:)
for c in lm_head v_proj k_proj o_proj q_proj down_proj gate_proj up_proj; do PARTS+=("$c:(^|\\.)$c\\.weight\$"); done
PARTS+=("layer0:\\.layers\\.0\\." "layer$((L - 1)):\\.layers\\.$((L - 1))\\.")
echo "role-factors: tq at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $m (models at $(git -C "$ROOT" log -1 --format=%h -- "testdata/models/$m" 2>/dev/null || echo '?')), eval text $(wc -c < "$EVAL") bytes, seeds ${TQ_ROLE_SEEDS:-42 1 2}; load $(load)"
for s in ${TQ_ROLE_SEEDS:-42 1 2}; do
  for p in "${PARTS[@]}"; do
    name=${p%%:*} re=${p#*:}
    args=(--bits 4)
    [ -z "$re" ] || args+=(--bits-for "$re=2")
    "$BIN/tq-convert" --quiet "${args[@]}" --seed "$s" "$M" "$D/$name-s$s"
    "$BIN/tq-verify" quality --json --eval "$EVAL" --window 128 --stride 64 "$M" "$D/$name-s$s" > "$D/$name-s$s.json"
    rm -rf "${D:?}/$name-s$s"
  done
  echo
  python3 - "$D" "$s" "$L" <<'PY'
import json, sys
D, s, L = sys.argv[1], sys.argv[2], int(sys.argv[3])
now = {"lm_head": 6.2, "v_proj": 2.4, "down_proj": 1.25, "k_proj": 1.2, "o_proj": 1.2, "gate_proj": 1.0,
       "up_proj": 0.55, "q_proj": 0.5}
rep = lambda n: json.load(open("%s/%s-s%s.json" % (D, n, s)))
base = rep("all4")
kl4 = base["eval"]["mean_kl"]
t4 = {t["name"]: t for t in base["tensors"] if t["rel_mse"] > 0}
def part(n, pick):
    r = rep(n)
    ts = [t for t in r["tensors"] if t["name"] in t4 and pick(t)]
    w = sum(t["params"] for t in ts)
    d = sum(t["params"] * (t["rel_mse"] - t4[t["name"]]["rel_mse"]) for t in ts) / w
    return r["eval"]["mean_kl"] - kl4, r["eval"]["kl_stderr"], w, d
print("#### seed %s: all at 4 bits, KL %.5f ± %.5f" % (s, kl4, base["eval"]["kl_stderr"]))
print()
rows = {c: part(c, lambda t, c=c: t["class"] == c) for c in now}
lay = [r for c, r in rows.items() if c != "lm_head"]
mean = sum(a for a, se, w, d in lay) / sum(d * w for a, se, w, d in lay)
print("| 2 bits on | weights | added KL (± token s.e.) | rel. MSE change | KL per weight per unit rel. MSE | over a mean layer module (%.2e) | factor now |" % mean)
print("|---|---|---|---|---|---|---|")
for c, (a, se, w, d) in rows.items():
    print("| %s | %d | %.5f ± %.5f | %.4f | %.2e | %.2f | %g |" % (c, w, a, se, d, a / w / d, a / w / d / mean, now[c]))
for n, layer, f in (("layer0", 0, 1.5), ("layer%d" % (L - 1), L - 1, 0.9)):
    a, se, w, d = part(n, lambda t, layer=layer: t["layer"] == layer)
    print("| layer %d (all its modules) | %d | %.5f ± %.5f | %.4f | %.2e | ×%.2f | ×%g |" % (layer, w, a, se, d, a / w / d, a / w / d / mean, f))
PY
done
