# Quantization quality on trained weights (testdata/models, trained by train.py on the Python
# documentation; not synthetic): on the first 3000 bytes of the held-out text (window 128 =
# the training context, stride 64), the bf16 models are far better than chance (a trained
# model, not noise), tq-convert's 4-bit models stay within MARGIN4 of bf16's perplexity with
# a small KL (measured with tq-verify quality, whose bf16 figure must be tq-run's), and the
# dense model at 2 bits does worse than at 4. Full figures: make bench
# (bench/quality.sh), bench/RESULTS.md.
set -u
. "$ROOT/tests/lib/common.sh"
head -c 3000 "$ROOT/testdata/models/eval/python-doc-eval.txt" > eval.txt
# perplexity MODEL NAME: writes NAME.json, prints the perplexity
perplexity() {
  tq-run "$1" --eval eval.txt --window 128 --stride 64 --threads 2 --json > "$2.json" ||
    fail "$1: --eval failed"
  jget "$2.json" perplexity
}
# within A B PERCENT: A <= B * (1 + PERCENT/100)
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { exit !(a <= b * (1 + p / 100)) }'; }
CHANCE_MAX=300 # bf16 perplexity must be below this (uniform guessing: 2048; measured 136 and 173 here)
MARGIN4=1.5    # percent: 4-bit perplexity within this of bf16's (measured +0.43% dense, +0.15% MoE)
KL4_MAX=0.01   # nats/token: mean KL(bf16 || 4-bit) (measured 0.0016 both)
MSE4_MAX=0.008 # relative MSE of the quantized tensors at 4 bits (measured 0.0074)

for m in qwen3-tiny qwen3-moe-tiny; do
  M=$ROOT/testdata/models/$m
  ref=$(perplexity "$M" $m-ref)
  within "$ref" $CHANCE_MAX 0 || fail "$m: bf16 perplexity $ref is not that of a trained model (>= $CHANCE_MAX)"
  tq-convert --quiet --bits 4 "$M" $m-b4 || fail "$m: tq-convert --bits 4"
  # tq-verify quality: both models over the same tokens, KL and top-1 agreement, tensor error
  tq-verify quality --json --eval eval.txt --window 128 --stride 64 --threads 2 "$M" $m-b4 > $m-b4.json ||
    fail "$m: tq-verify quality"
  read -r qref p4 kl agree mse < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); e = r["eval"]
print(e["ref"]["perplexity"], e["test"]["perplexity"], e["mean_kl"], e["top1_agreement"], r["rel_mse"])' $m-b4.json)
  awk -v a="$qref" -v b="$ref" 'BEGIN { exit !(a == b) }' || fail "$m: tq-verify quality's bf16 perplexity $qref is not tq-run --eval's $ref"
  within "$p4" "$ref" $MARGIN4 || fail "$m: 4-bit perplexity $p4 is more than $MARGIN4% above bf16's $ref"
  within "$kl" $KL4_MAX 0 || fail "$m: 4-bit mean KL $kl > $KL4_MAX"
  within "$mse" $MSE4_MAX 0 || fail "$m: 4-bit relative MSE $mse > $MSE4_MAX"
  echo "$m: bf16 $ref, 4-bit $p4 (KL $kl, top-1 agreement $agree, relative MSE $mse)"
done
# the dense model at 2 bits: fewer bits cost perplexity
tq-convert --quiet --bits 2 "$ROOT/testdata/models/qwen3-tiny" b2 || fail "tq-convert --bits 2"
p2=$(perplexity b2 b2)
p4=$(python3 -c 'import json; print(json.load(open("qwen3-tiny-b4.json"))["eval"]["test"]["perplexity"])')
within "$p4" "$p2" 0 || fail "qwen3-tiny: 2-bit perplexity $p2 is below 4-bit's $p4"
echo "qwen3-tiny: 2-bit $p2"
exit 0
