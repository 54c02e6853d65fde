# tq-verify quality on synthetic models (tq-mkmodel): per-tensor relative MSE of a quantized
# model against its source agrees with tq-convert's own figure (computed while quantizing, in
# the rotated domain), a model against itself is exact, the evaluation agrees with tq-run's,
# reports and plots are the same bytes for any thread count, the plot is well-formed XML with
# one point per layer, the token-level standard errors agree with a recomputation from tq-run's
# logits, --noise is deterministic per seed and leaves TEST's figures alone, and models that do
# not match are refused naming what differs.
set -u
. "$ROOT/tests/lib/common.sh"
L=3
run tq-mkmodel --arch qwen3 --size tiny --layers $L --seed 21 --quiet ref
run tq-mkmodel --arch qwen3_moe --size tiny --layers 2 --seed 22 --quiet moe
tq-convert --quiet --bits 3 --json ref q3 > q3.convert.json || fail "tq-convert --bits 3"
printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 40) > eval.txt

# approx A B REL: |A - B| <= REL * |B|
approx() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= r * m) }'; }

# ---- a quantized model against its source
tq-verify quality --json --threads 1 --plot q3-t1.svg ref q3 > q3-t1.json || fail "quality ref q3"
tq-verify quality --json --threads 3 --plot q3-t3.svg ref q3 > q3-t3.json || fail "quality ref q3 --threads 3"
cmp -s q3-t1.json q3-t3.json || fail "--json report depends on the thread count"
cmp -s q3-t1.svg q3-t3.svg || fail "the plot depends on the thread count"
mse=$(jget q3-t1.json rel_mse) cmse=$(jget q3.convert.json rel_mse)
approx "$mse" "$cmse" 0.001 || fail "relative MSE $mse is not tq-convert's $cmse"
[ "$(jget q3-t1.json tensors_differ)" -gt $((7 * L)) ] || fail "fewer differing tensors than q/k/v/o/gate/up/down per layer"
# every quantized tensor is in the report with an error below 3-bit Lloyd-Max on N(0,1) (0.0345)
python3 - q3-t1.json <<'PY' || fail "per-tensor report"
import json, sys
r = json.load(open(sys.argv[1]))
names = [t["name"] for t in r["tensors"]]
assert names == sorted(names), "tensors not sorted by name"
q = [t for t in r["tensors"] if t["rel_mse"] > 0]
assert len(q) >= 21 and all(0.001 < t["rel_mse"] < 0.0345 for t in q), [(t["name"], t["rel_mse"]) for t in q]
assert all(t["rel_mse"] == 0 for t in r["tensors"] if "norm" in t["name"]), "norms changed"
assert len(r["layers"]) == 3 and [l["layer"] for l in r["layers"]] == [0, 1, 2]
assert set(r["classes"]) >= {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, r["classes"]
PY
# the plot: well-formed XML, one point of the total per layer, at layers 0..L-1
xmllint --noout q3-t1.svg || fail "the plot is not well-formed XML"
[ "$(grep -c 'class="point-all"' q3-t1.svg)" = $L ] || fail "the plot has not one point per layer"
[ "$(grep -o 'class="point-all" data-layer="[0-9]*"' q3-t1.svg | sed 's/.*="//; s/"//' | tr '\n' ' ')" = "0 1 2 " ] ||
  fail "the plot's points are not layers 0..2"
grep -q 'data-class="q_proj"' q3-t1.svg || fail "the plot has no q_proj series"
# human output: the summary line and a line per differing tensor
tq-verify quality ref q3 > q3.txt || fail "quality (text)"
grep -q "^tensors: [0-9]* compared, [0-9]* differ ([0-9]* weights): relative MSE " q3.txt || fail "no summary line"
grep -q " model.layers.2.mlp.down_proj.weight$" q3.txt || fail "no per-tensor line"

# ---- a model against itself: nothing differs, the evaluation agrees exactly
tq-verify quality --json --eval eval.txt --window 32 --stride 16 ref ref > self.json || fail "quality ref ref"
[ "$(jget self.json tensors_differ)" = 0 ] && [ "$(jget self.json rel_mse)" = 0 ] || fail "a model differs from itself"
python3 - self.json <<'PY' || fail "self evaluation"
import json, sys
e = json.load(open(sys.argv[1]))["eval"]
assert e["mean_kl"] == 0 and e["top1_agreement"] == 1 and e["ref"] == e["test"], e
assert e["steps"] == e["scored"] and e["window"] == 32 and e["stride"] == 16, e
PY

# ---- the evaluation is tq-run's: same perplexities, same KL and agreement as --compare-logits
tq-verify quality --json --eval eval.txt --window 32 --stride 16 ref q3 > q3-eval.json || fail "quality --eval"
tq-run ref --eval eval.txt --window 32 --stride 16 --logits ref.f32 --json > ref.eval || fail "tq-run --eval ref"
tq-run q3 --eval eval.txt --window 32 --stride 16 --logits q3.f32 --json > q3.eval || fail "tq-run --eval q3"
tq-run --compare-logits ref.f32 q3.f32 --vocab "$(python3 -c 'import json; print(json.load(open("ref/config.json"))["vocab_size"])')" \
  --json > cmp.json || fail "compare-logits"
python3 - q3-eval.json ref.eval q3.eval cmp.json <<'PY' || fail "quality --eval disagrees with tq-run"
import json, sys
q, a, b, c = (json.load(open(p)) for p in sys.argv[1:])
e = q["eval"]
assert e["ref"]["perplexity"] == a["perplexity"] and e["test"]["perplexity"] == b["perplexity"], (e, a, b)
assert e["ref"]["top1_rate"] == a["top1_rate"] and e["scored"] == a["scored"] == c["steps"]
assert e["mean_kl"] == c["mean_kl"] and e["top1_agreement"] == c["top1_rate"] and e["max_kl"] == c["max_kl"]
assert e["mean_kl"] > 0
PY

# ---- the standard errors, recomputed here from tq-run's logits files (standard-library
# Python: per-step KL and the NLL of the next token, then sd / sqrt(n) of each)
tq-run --tokenizer ref --encode < eval.txt > ids.txt || fail "tq-run --encode"
python3 - q3-eval.json ref.f32 q3.f32 ids.txt <<'PY' || fail "quality --eval standard errors"
import array, json, math, sys
e = json.load(open(sys.argv[1]))["eval"]
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[2], "rb").read()); b.frombytes(open(sys.argv[3], "rb").read())
ids = [int(t) for t in open(sys.argv[4]).read().replace(",", " ").split()]
n = e["steps"]; V = len(a) // n
assert len(ids) == n + 1, (len(ids), n)
def logsm(x):
    m = max(x); z = math.log(sum(math.exp(v - m) for v in x)); return [v - m - z for v in x]
kl, d = [], []
for s in range(n):  # step s predicts ids[s + 1]
    la, lb = logsm(a[s * V:(s + 1) * V]), logsm(b[s * V:(s + 1) * V])
    kl.append(max(0.0, sum(math.exp(p) * (p - q) for p, q in zip(la, lb))))
    d.append(la[ids[s + 1]] - lb[ids[s + 1]])
def se(v):
    m = sum(v) / len(v); return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v))
assert abs(se(kl) - e["kl_stderr"]) <= 1e-6 * se(kl), (se(kl), e["kl_stderr"])
assert abs(se(d) - e["nll_diff_stderr"]) <= 1e-6 * se(d), (se(d), e["nll_diff_stderr"])
assert abs(sum(d) / n - (e["test"]["mean_nll"] - e["ref"]["mean_nll"])) < 1e-9, "the NLL steps are not the scored tokens"
PY

# ---- --noise: the baseline of Gaussian noise with TEST's error energy, deterministic per seed
tq-verify quality --json --eval eval.txt --window 32 --stride 16 --noise ref q3 > n0.json || fail "quality --noise"
tq-verify quality --json --eval eval.txt --window 32 --stride 16 --noise --threads 3 ref q3 > n0b.json ||
  fail "quality --noise --threads 3"
tq-verify quality --json --eval eval.txt --window 32 --stride 16 --noise --noise-seed 7 ref q3 > n7.json ||
  fail "quality --noise --noise-seed 7"
cmp -s n0.json n0b.json || fail "--noise depends on the thread count"
python3 - n0.json n7.json q3-eval.json <<'PY' || fail "--noise report"
import json, sys
a, b, q = (json.load(open(p))["eval"] for p in sys.argv[1:])
na, nb = a["noise"], b["noise"]
assert na["seed"] == 0 and nb["seed"] == 7, (na, nb)
assert 0 < na["mean_kl"] and 0 < nb["mean_kl"] and na["mean_kl"] != nb["mean_kl"], (na, nb)
assert {k: v for k, v in a.items() if k != "noise"} == q, "--noise changed the TEST figures"
assert 0 < na["kl_stderr"] < na["mean_kl"] and 0 < na["top1_agreement"] <= 1, na
PY
expect_exit 2 tq-verify quality --noise ref q3 >/dev/null
expect_exit 2 tq-verify quality --eval eval.txt --noise-seed 3 ref q3 >/dev/null

# ---- an MoE model at 4 bits: per-expert tensors, an experts class
tq-convert --quiet --bits 4 moe moe4 || fail "tq-convert moe"
tq-verify quality --json moe moe4 > moe4.json || fail "quality moe"
grep -q '"experts.down_proj"' moe4.json || fail "no experts.down_proj class"
grep -q '"model.layers.1.mlp.experts.3.up_proj.weight"' moe4.json || fail "no per-expert tensor"

# ---- models that do not match: exit 1 naming what differs
run tq-mkmodel --arch qwen3 --size tiny --layers 2 --seed 21 --quiet ref2
expect_msg 1 "tensor 'model\.layers\.2\.[a-z_.]*weight' is in REF (ref) but not in TEST (ref2)" tq-verify quality ref ref2
expect_msg 1 "tensor 'model\.layers\.2\.[a-z_.]*weight' is in TEST (ref) but not in REF (ref2)" tq-verify quality ref2 ref
run tq-mkmodel --arch qwen3 --size tiny --layers $L --vocab 384 --seed 21 --quiet v384
expect_msg 1 "REF (ref) has a vocabulary of" tq-verify quality ref v384
run tq-mkmodel --arch qwen3 --size tiny --layers $L --intermediate 128 --seed 21 --quiet i128
expect_msg 1 "tensor 'model.layers.0.mlp.down_proj.weight': BF16 \[" tq-verify quality ref i128
run tq-split --quiet q3 q3-split
expect_msg 1 "q3-split: a tq-split directory" tq-verify quality ref q3-split
expect_msg 1 "missing-dir" tq-verify quality --plot missing.svg ref missing-dir
[ ! -e missing.svg ] || fail "a plot was written for a refused comparison"
# ---- usage
expect_exit 2 tq-verify quality ref >/dev/null
expect_exit 2 tq-verify quality --window 16 ref q3 >/dev/null
expect_exit 2 tq-verify quality --eval eval.txt --window 16 --stride 16 ref q3 >/dev/null
expect_exit 2 tq-verify quality --plot ref/config.json ref q3 >/dev/null
exit 0
