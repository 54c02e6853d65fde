# tq-convert --codebook fitted: per-module codebooks fitted to the rotated, group-normalised
# weights (Lloyd from the Gaussian table), byte-identical for any thread count, never worse
# than the Gaussian codebook here, stored in P.codebook and used from there by --dequantize
# and tq-run (checked against a Python decode of the error and by swapping the stored table);
# the default output is unchanged; malformed stored codebooks are refused, naming the tensor.
set -eu
. "$ROOT/tests/lib/safety.sh"
P="python3 $ROOT/tests/consumers/tq_codebook.py"
same() { [ "$(tree_hash "$1")" = "$(tree_hash "$2")" ] || fail "$1 and $2 differ"; }
num() { awk -v a="$1" -v b="$2" "BEGIN { exit !($3) }"; }
tq-mkmodel --arch qwen3 --layers 2 --hidden 256 --intermediate 512 --heads 4 --kv-heads 2 --head-dim 64 \
  --vocab 1000 --dtype f16 --seed 11 m >/dev/null
# the default is the Gaussian codebook, and says so
tq-convert --quiet m d
tq-convert --quiet --codebook gaussian m g
# (their tq-provenance.json differ: it records the command line)
[ "$(model_hash d)" = "$(model_hash g)" ] || fail "d and g differ"
grep -q '"codebook": *"lloyd_max_gaussian"' g/config.json || fail "config codebook (gaussian)"
for b in 2 3 4; do
  tq-convert --quiet --json --bits $b m g$b > g$b.json
  tq-convert --quiet --json --bits $b --codebook fitted m f$b > f$b.json
  [ "$(jget f$b.json codebook)" = fitted ] || fail "report codebook"
  python3 - g$b.json f$b.json <<'PY' || fail "$b bits: fitted is worse than gaussian"
import json, sys
g, f = (json.load(open(p)) for p in sys.argv[1:])
assert f["rel_mse"] < g["rel_mse"], (f["rel_mse"], g["rel_mse"])
gt = {t["name"]: t for t in g["tensors"] if t["quantized"]}
nf = 0
for t in f["tensors"]:
    if t["quantized"]:
        assert t["rel_mse"] <= gt[t["name"]]["rel_mse"], t["name"]
        nf += t["codebook"] == "fitted"
assert nf >= 3, nf  # kept on 11, 4 and 15 of the 15 modules at 2, 3 and 4 bits (lsq scales)
PY
done
grep -q '"codebook": *"fitted"' f3/config.json || fail "config codebook (fitted)"
# a fitted table is stored: symmetric, ascending, not the Gaussian one
Q=model.layers.0.mlp.up_proj
$P codebook g4 $Q > gc.txt
$P codebook f4 $Q > fc.txt
python3 - gc.txt fc.txt <<'PY' || fail "stored codebooks"
import sys
g, f = (list(map(float, open(p).read().split())) for p in sys.argv[1:])
assert len(f) == 16 and f != g, (g, f)
assert all(a < b for a, b in zip(f, f[1:])) and all(f[i] == -f[15 - i] for i in range(8)), f
PY
# the same bytes for any thread count (a dense and an MoE model)
tq-mkmodel --arch qwen3_moe --seed 5 --shared-expert e >/dev/null
for t in 1 2 7; do
  tq-convert --quiet --threads $t --bits 3 --codebook fitted m t$t
  tq-convert --quiet --threads $t --bits 2 --scale rms --codebook fitted e u$t
done
same t1 t2; same t1 t7; same u1 u2; same u1 u7
# --dequantize decodes with the stored table: its error, computed here from the weights, is what
# tq-convert reported; with the Gaussian table put in its place the same indices decode worse
tq-convert --quiet --dequantize --dtype f32 f4 dq
$P relmse m dq $Q.weight > rm.txt
rep=$(python3 -c "import json, sys; print([t['rel_mse'] for t in json.load(open('f4.json'))['tensors'] if t['name'] == '$Q.weight'][0])")
got=$(awk '$1 == "all" { print $2 }' rm.txt)
num "$got" "$rep" "a / b > 0.999 && a / b < 1.001" || fail "dequantized error $got, reported $rep"
cp -r f4 sw
$P set-codebook sw $Q "$(tr ' ' ',' < gc.txt)"
tq-convert --quiet --dequantize --dtype f32 sw dqs
$P relmse m dqs $Q.weight > rs.txt
worse=$(awk '$1 == "all" { print $2 }' rs.txt)
num "$worse" "$got" "a > b * 1.001" || fail "the stored codebook made no difference ($worse vs $got)"
# tq-run: the kernels use the stored table (the swapped one changes the logits) and agree with
# the dequantized model
tq-run f4 --tokens 1,2,3 --max-tokens 4 --quiet --logits f.f32 > f.txt
tq-run sw --tokens 1,2,3 --max-tokens 4 --quiet --logits s.f32 > /dev/null
if cmp -s f.f32 s.f32; then fail "tq-run ignored the stored codebook"; fi
tq-run dq --tokens 1,2,3 --max-tokens 4 --quiet --logits d.f32 > d.txt
cmp f.txt d.txt
tq-run --compare-logits d.f32 f.f32 --vocab 1000 > cmp.txt
awk '/^max relative difference:/ { exit !($4 <= 1e-4) }' cmp.txt || fail "$(cat cmp.txt)"
# malformed stored codebooks: refused by --dequantize and tq-run, naming the tensor
cb=$(tr ' ' ',' < fc.txt)
bad() {
  rm -rf bad && cp -r f4 bad && $P set-codebook bad $Q "$1"
  set +e # (expect_msg runs the failing command itself)
  expect_msg 1 "'$Q.codebook'" tq-convert --quiet --dequantize bad bdq
  grep -qF "$2" err || fail "dequantize: $(cat err)"
  expect_msg 1 "'$Q.codebook'" tq-run bad --tokens 1 --max-tokens 1 --quiet
  grep -qF "$3" err || fail "run: $(cat err)"
  set -e
}
bad "$(echo "$cb" | awk -F, -v OFS=, '{ $3 = "nan"; print }')" "is not finite" "is not finite"
bad "$(echo "$cb" | awk -F, -v OFS=, '{ t = $3; $3 = $4; $4 = t; print }')" "not above the previous value" \
  "not above the previous value"
bad "-1,0,1" "not a vector of 2, 4, 8 or 16" "is not 2^bits"
bad "$(echo "$cb" | cut -d, -f1-8)" "disagree" "shape is not"
echo "fitted codebooks: deterministic, not worse, stored and used; malformed ones refused"
