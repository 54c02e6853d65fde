# tq-run on generated models: streamed from tq-split output == --resident == the unsplit
# model, bit for bit, at several cache budgets; affine and shared-expert variants; --json.
set -eu
. "$ROOT/tests/lib/json.sh"
tq-mkmodel --arch qwen3_moe --size tiny --seed 3 --shared-expert m >/dev/null
tq-split --quiet m s
tq-run m --tokens 1,2,3 --max-tokens 6 --quiet --logits ref.f32 > ref.txt
for budget in 1B 200K 1G; do
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
tq-run s4 --tokens 1,2,3 --max-tokens 6 --cache-budget 1B --check-blocks --quiet --logits a4.f32 >/dev/null
cmp ref.f32 a4.f32
# 6 steps x 512 vocab x 4 bytes
[ "$(wc -c < ref.f32)" -eq 12288 ]
# --json: sorted keys, the hash is the hash of the logits file
tq-run s --tokens 1,2,3 --max-tokens 6 --cache-budget 1G --json > run.json
keys=$(sed -n 's/^  "\([a-z_0-9]*\)":.*/\1/p' run.json)
[ "$keys" = "$(printf '%s\n' $keys | LC_ALL=C sort)" ] || { echo "keys not sorted"; exit 1; }
sha() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }
[ "$(jget run.json logits_sha256)" = "$(sha < ref.f32 | cut -d' ' -f1)" ]
[ "$(jget run.json streamed)" = true ] && [ "$(jget run.json generated_tokens)" = 6 ] && [ "$(jget run.json forward_passes)" = 8 ]
[ $(( $(jget run.json expert_hits) + $(jget run.json expert_misses) )) -eq 32 ]
[ "$(jget run.json reads)" = "$(jget run.json expert_misses)" ] && [ "$(jget run.json bytes_read)" -gt 0 ] && [ "$(jget run.json peak_rss)" -gt 0 ]
# MLX affine 4-bit
tq-mkmodel --arch qwen3_moe --size tiny --seed 4 --quant affine4 q >/dev/null
tq-split --quiet q qs
tq-run q --tokens 7 --max-tokens 5 --quiet --logits q.f32 >/dev/null
tq-run qs --tokens 7 --max-tokens 5 --cache-budget 1B --quiet --logits qs.f32 >/dev/null
cmp q.f32 qs.f32
# identical files compare perfectly
tq-run --compare-logits ref.f32 s-1G.f32 --vocab 512 > cmp.txt
grep -qx 'top-1 agreement: 6/6 (1.0000)' cmp.txt
grep -qx 'mean KL: 0 nats/step (max 0)' cmp.txt
grep -qx 'max relative difference: 0' cmp.txt
