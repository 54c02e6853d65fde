# tq-run on tq-convert output: streamed split == resident == unsplit, identical for any
# --threads; and the TurboQuant kernels (rotated activations) agree with the model that
# tq-convert --dequantize writes (rotation undone, f32) to 1e-4 relative, same greedy tokens.
set -eu
tq-mkmodel --arch qwen3_moe --size tiny --seed 5 --shared-expert m >/dev/null
tq-convert --quiet --bits 3 --group-size 64 m q
tq-split --quiet q qs
tq-run q --tokens 1,2,3 --max-tokens 6 --threads 1 --quiet --force --logits q1.f32 > q.txt
for t in 2 7; do
  tq-run q --tokens 1,2,3 --max-tokens 6 --threads $t --quiet --force --logits q$t.f32 >/dev/null
  cmp q1.f32 q$t.f32
done
for budget in 1B 100K 1G; do
  tq-run qs --tokens 1,2,3 --max-tokens 6 --cache-budget $budget --io-threads 2 --check-blocks --quiet --force --logits s.f32 > s.txt
  cmp q1.f32 s.f32
  cmp q.txt s.txt
done
tq-run qs --tokens 1,2,3 --max-tokens 6 --resident --quiet --force --logits r.f32 >/dev/null
cmp q1.f32 r.f32
tq-convert --quiet --dequantize --dtype f32 q dq
tq-run dq --tokens 1,2,3 --max-tokens 6 --quiet --force --logits dq.f32 > dq.txt
cmp q.txt dq.txt
# same steps, every step within 1e-4 relative, and not bit-identical (a real check)
tq-run --compare-logits dq.f32 q1.f32 --vocab 512 > cmp.txt
grep -qx 'steps: 6' cmp.txt
awk '/^max relative difference:/ { exit !($4 > 0 && $4 <= 1e-4) }' cmp.txt
