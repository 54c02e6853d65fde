# tq-convert --target-bpw / --target-size: bits (2, 3, 4) and group size (32, 64, 128) chosen
# per module under the byte budget from each module's measured error; the report lists every
# setting's error and the choice; config.json carries per-module bits and group sizes that
# match the stored tensors (what TurboQuant-MLX >= 0.8 reads from them); tq-run and
# --dequantize read the mix; byte-identical for any thread count.
set -u
. "$ROOT/tests/lib/common.sh"
same() { [ "$(tree_hash "$1")" = "$(tree_hash "$2")" ] || fail "$1 and $2 differ"; }
. "$ROOT/tests/lib/safety.sh"
run tq-mkmodel --arch qwen3 --layers 2 --hidden 256 --intermediate 512 --heads 4 --kv-heads 2 --head-dim 64 \
  --vocab 1000 --dtype f16 --seed 11 m
tq-convert --quiet --json --bits 2 --group-size 64 m u2 > u2.json || fail "uniform 2-bit"
tq-convert --json --target-bpw 2.5 m b > b.json || fail "budget 2.5"
python3 - b.json u2.json b/config.json "$ROOT" <<'PY' || fail "budget report or config"
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[4], "tests/consumers"))
from consumers import Model
b, u, cfg = (json.load(open(p)) for p in sys.argv[1:4])
# the role factors of docs/quantization.md (Byte budgets), restated: by leaf name, the first
# layer x1.5, the last x0.9
ROLE = {"lm_head": 6.2, "v_proj": 2.4, "down_proj": 1.25, "k_proj": 1.2, "o_proj": 1.2, "gate_proj": 1.0,
        "up_proj": 0.55, "q_proj": 0.5}
def role(name, layers):
    parts = name[: -len(".weight")].split(".")
    f = ROLE.get(parts[-1], 1)
    if "layers" in parts:
        l = int(parts[parts.index("layers") + 1])
        f *= 1.5 if l == 0 else 0.9 if l == layers - 1 else 1
    return f
assert 2.45 < b["bits_per_weight_quantized"] <= 2.5, b["bits_per_weight_quantized"]
assert b["budget"]["target_bpw"] == 2.5 and b["quantized_bytes"] <= b["budget"]["bytes"], b["budget"]
# better than every module at 2 bits group 64 (which fits the budget): the error estimates
# are exact here (every row is sampled), so the allocation cannot lose to it
assert b["rel_mse"] < u["rel_mse"], (b["rel_mse"], u["rel_mse"])
q = cfg["quantization"]
m = Model("b")
seen = set()
for t in b["tensors"]:
    if not t["quantized"]:
        continue
    s = t["settings"]
    assert len(s) == 9 and sum(x["chosen"] for x in s) == 1, t["name"]
    c = [x for x in s if x["chosen"]][0]
    assert (c["bits"], c["group_size"]) == (t["bits"], t["group_size"]), t["name"]
    assert all(x["rel_mse_sample"] > 0 for x in s) and abs(t["importance"] - role(t["name"], 2)) <= 1e-12 * t["importance"], t
    P = t["name"][: -len(".weight")]
    entry = q.get(P, {"bits": q["bits"], "group_size": q["group_size"]})
    assert (entry["bits"], entry["group_size"]) == (t["bits"], t["group_size"]), (P, entry)
    # the stored tensors say the same (TurboQuant-MLX's loader reads them: codebook length,
    # in / scales' last axis)
    cb, sc, sg = m.t[P + ".codebook"][2], m.t[P + ".scales"][2], m.t[P + ".signs"][2]
    assert cb == [2 ** t["bits"]] and sg[0] // sc[-1] == t["group_size"], (P, cb, sc, sg)
    seen.add((t["bits"], t["group_size"]))
assert len(seen) >= 2, seen  # a mix, not one setting
PY
grep -q '^budget: ' <(tq-convert --target-bpw 2.5 --force m b2) || fail "no budget line in the summary"
grep -q 'settings (rel. MSE on the row sample):.*(chosen)' <(tq-convert --target-bpw 2.5 --force m b2) || fail "no settings in the summary"
# the same bytes for any thread count, fitted codebooks too; an MoE model
run tq-mkmodel --arch qwen3_moe --seed 5 --shared-expert e
for t in 1 2 7; do
  run tq-convert --quiet --threads $t --target-bpw 3.2 --codebook fitted m t$t
  run tq-convert --quiet --threads $t --target-bpw 2.75 e v$t
done
same t1 t2; same t1 t7; same v1 v2; same v1 v7
tq-convert --quiet --json --target-bpw 2.75 e v > v.json || fail "moe budget"
python3 - v.json e/config.json <<'PY' || fail "expert importance"
import json, sys
v, c = (json.load(open(p)) for p in sys.argv[1:])
k, n, L = c["num_experts_per_tok"], c["num_experts"], c["num_hidden_layers"]
ROLE = {"lm_head": 6.2, "v_proj": 2.4, "down_proj": 1.25, "k_proj": 1.2, "o_proj": 1.2, "gate_proj": 1.0,
        "up_proj": 0.55, "q_proj": 0.5}
imp = {t["name"]: t["importance"] for t in v["tensors"] if t["quantized"]}
assert any("switch_mlp" in x for x in imp), imp
for name, i in imp.items():
    parts = name[: -len(".weight")].split(".")
    f = ROLE.get(parts[-1], 1) * (k / n if "switch_mlp" in name else 1)
    l = int(parts[parts.index("layers") + 1]) if "layers" in parts else -1
    f *= 1.5 if l == 0 else 0.9 if l == L - 1 else 1
    assert abs(i - f) <= 1e-12 * f, (name, i, f)
PY
# --target-size: every output tensor byte counts
sz=$(jget b.json bytes)
tq-convert --quiet --json --target-size "${sz}B" m s > s.json || fail "target-size"
[ "$(jget s.json bytes)" -le "$sz" ] || fail "target-size exceeded: $(jget s.json bytes) > $sz"
# tq-run reads the mix (bits from each codebook, group size from each scales tensor) and
# agrees with --dequantize
run tq-convert --quiet --dequantize --dtype f32 b dq
tq-run b --tokens 1,2,3 --max-tokens 4 --quiet --logits q.f32 > q.txt || fail "tq-run budget"
tq-run dq --tokens 1,2,3 --max-tokens 4 --quiet --logits d.f32 > d.txt || fail "tq-run dequantized"
cmp -s q.txt d.txt || fail "tokens differ"
tq-run --compare-logits d.f32 q.f32 --vocab 1000 > cmp.txt || fail "compare"
awk '/^max relative difference:/ { exit !($4 <= 1e-4) }' cmp.txt || fail "$(cat cmp.txt)"
# a budget below every module at 2 bits group 128, and usage errors
expect_msg 2 "below the smallest setting" tq-convert --quiet --target-bpw 1.5 m x
expect_msg 2 "not with --bits" tq-convert --quiet --target-bpw 3 --bits 3 m x
expect_msg 2 "not with --bits" tq-convert --quiet --target-size 1M --group-size 64 m x
expect_msg 2 "exclude each other" tq-convert --quiet --target-bpw 3 --target-size 1M m x
expect_msg 2 "TurboQuant options" tq-convert --quiet --method affine --target-bpw 4 m x
expect_msg 2 "between 1 and 16" tq-convert --quiet --target-bpw 3x m x
expect_msg 2 "leaves nothing" tq-convert --quiet --target-size 1000B m x
[ ! -e x ] || fail "x was written"
echo "budgets: under the budget, better than uniform, reported, loadable, deterministic"
