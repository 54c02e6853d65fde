# Splits written the way other programs write them (tests/consumers/consumers.py, ported from
# mlx-sniper's preprocess.py and mac-code's split_mlx_model.py) decode in tq-run exactly like
# the unsplit model, streamed and resident; tq-split's own bytes after the header page equal
# the mac-code writer's.
set -eu
C="python3 $ROOT/tests/consumers/consumers.py"
tq-mkmodel --arch qwen3_moe --size tiny --seed 5 --naming mlx --quant affine4 --shared-expert m >/dev/null
tq-run m --tokens 1,2,3 --max-tokens 6 --quiet --logits ref.f32 >/dev/null
# mlx-sniper: bin/moe_layer_LL.bin + layer_LL.bin links, expert_dir "bin", no 'format' key,
# names without "mlp."
$C write mlx-sniper m sn
[ -L sn/bin/layer_00.bin ] && [ -f sn/bin/moe_layer_01.bin ]
head -c 200 sn/bin/moe_layer_00.bin | grep -q '"format"' && { echo "the writer port wrote a format key"; exit 1; }
for budget in 1B 1G; do
  tq-run sn --tokens 1,2,3 --max-tokens 6 --cache-budget $budget --quiet --logits sn-$budget.f32 >/dev/null
  cmp ref.f32 sn-$budget.f32
done
tq-run sn --tokens 1,2,3 --max-tokens 6 --resident --quiet --logits snr.f32 >/dev/null
cmp ref.f32 snr.f32
# mac-code (flash-streaming): experts/layer_LL.bin, flattened config
$C write mac-code m mc
tq-run mc --tokens 1,2,3 --max-tokens 6 --cache-budget 1B --quiet --logits mc.f32 >/dev/null
cmp ref.f32 mc.f32
tq-split --quiet m s
for l in 00 01; do
  cmp <(tail -c +16385 s/experts/layer_$l.bin) <(tail -c +16385 mc/experts/layer_$l.bin)
done
# tq-verify validates a peer's split by decoding it against the source's golden decode
tq-verify golden --update --tokens 1,2,3 --quiet m --golden g.json
tq-verify golden --quiet sn --golden g.json
tq-verify golden --quiet mc --golden g.json
