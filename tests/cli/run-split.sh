# tq-run on generated models: streamed from tq-split output == --resident == the unsplit
# model, bit for bit, at several cache budgets; affine and shared-expert variants; --json.
set -eu
tq-mkmodel --arch qwen3_moe --size tiny --seed 3 --shared-expert m >/dev/null
tq-split --quiet m s
tq-run m --tokens 1,2,3 --max-tokens 6 --quiet --logits ref.f32 > ref.txt
for budget in 1 200K 1G; do
  tq-run s --tokens 1,2,3 --max-tokens 6 --cache-budget $budget --check-blocks --quiet --logits s-$budget.f32 > s.txt
  cmp ref.f32 s-$budget.f32
  cmp ref.txt s.txt
done
tq-run s --tokens 1,2,3 --max-tokens 6 --resident --threads 3 --io-threads 2 --quiet --logits r.f32 > r.txt
cmp ref.f32 r.f32
tq-run s --tokens 1,2,3 --max-tokens 6 --no-direct --quiet --logits b.f32 >/dev/null
cmp ref.f32 b.f32
# 4 KiB alignment still satisfies O_DIRECT
tq-split --quiet --align 4096 m s4
tq-run s4 --tokens 1,2,3 --max-tokens 6 --cache-budget 1 --check-blocks --quiet --logits a4.f32 >/dev/null
cmp ref.f32 a4.f32
# 6 steps x 512 vocab x 4 bytes
[ "$(wc -c < ref.f32)" -eq 12288 ]
# --json: sorted keys, the hash is the hash of the logits file
tq-run s --tokens 1,2,3 --max-tokens 6 --cache-budget 1G --json > run.json
python3 - <<'PY'
import json, hashlib
j = json.load(open("run.json"))
assert list(j) == sorted(j), "keys not sorted"
assert j["logits_sha256"] == hashlib.sha256(open("ref.f32", "rb").read()).hexdigest()
assert j["streamed"] is True and j["generated_tokens"] == 6 and j["forward_passes"] == 8
assert j["expert_hits"] + j["expert_misses"] == 2 * 2 * 8
assert j["bytes_read"] > 0 and j["reads"] == j["expert_misses"]
assert 0 <= j["hit_rate"] <= 1 and j["peak_rss"] > 0
PY
# MLX affine 4-bit
tq-mkmodel --arch qwen3_moe --size tiny --seed 4 --quant affine4 q >/dev/null
tq-split --quiet q qs
tq-run q --tokens 7 --max-tokens 5 --quiet --logits q.f32 >/dev/null
tq-run qs --tokens 7 --max-tokens 5 --cache-budget 1 --quiet --logits qs.f32 >/dev/null
cmp q.f32 qs.f32
# identical files compare perfectly
tq-run --compare-logits ref.f32 s-1G.f32 --vocab 512 --json > cmp.json
python3 -c 'import json; j=json.load(open("cmp.json")); assert j["top1_rate"] == 1 and j["mean_kl"] == 0 and j["steps"] == 6, j'
