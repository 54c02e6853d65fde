# tq-convert on a generated MoE: TurboQuant layout, identical bytes for 1/2/7 threads,
# sharding, per-tensor overrides, dequantize back to HF names, plain dtype conversion.
set -eu
tq-mkmodel --arch qwen3_moe --size tiny --seed 5 m >/dev/null
tq-convert --json --threads 1 --shard-size 300k m q1 > r.json
for t in 2 7; do tq-convert --quiet --threads $t --shard-size 300k m q$t; done
n=$(ls q1 | grep -c '^model-0000.-of-0000.\.safetensors$')
[ "$n" -ge 2 ] || { echo "expected several shards, got $n"; exit 1; }
for f in $(ls q1); do cmp q1/$f q2/$f; cmp q1/$f q7/$f; done
[ "$(ls q1 | wc -l)" -eq "$(ls q7 | wc -l)" ]
cmp m/tokenizer.json q1/tokenizer.json
grep -q '"mode": "turboquant"' q1/config.json
grep -q '"rotation_seed": 42' q1/config.json
for k in '"mode": "quantize"' '"bits": 3' '"group_size": 64' '"bits_per_weight_quantized"' '"rel_mse"' \
         '"name": "model.layers.0.mlp.switch_mlp.down_proj.weight"' '"note": "router"' '"note": "embedding"'; do
  grep -q "$k" r.json || { echo "report lacks $k"; exit 1; }
done
tq-verify ls q1 > ls.txt
grep -q $'^model.layers.0.mlp.switch_mlp.gate_proj.weight\tU32\t\\[' ls.txt
grep -q $'^model.layers.0.mlp.switch_mlp.gate_proj.codebook\tF16\t\\[8\\]' ls.txt
grep -q $'^model.layers.0.mlp.gate.weight\tBF16' ls.txt
! grep -q 'experts\.' ls.txt
# overrides
tq-convert --quiet --bits 4 --group-size 32 --bits-for 'down_proj=2' --keep 'q_proj' m o
tq-verify ls o > lo.txt
grep -q $'^model.layers.0.mlp.switch_mlp.down_proj.codebook\tF16\t\\[4\\]' lo.txt
grep -q $'^model.layers.0.mlp.switch_mlp.up_proj.codebook\tF16\t\\[16\\]' lo.txt
grep -q $'^model.layers.0.self_attn.q_proj.weight\tBF16' lo.txt
grep -q '"model.layers.0.self_attn.q_proj": false' o/config.json
# dequantize: HF names again, no quantization block
tq-convert --quiet --dequantize q1 d
tq-verify ls d | cut -f1,2,3 | sort > ld.txt
tq-verify ls m | cut -f1,2,3 | sort > lm.txt
diff lm.txt ld.txt
! grep -q quantization d/config.json
# plain conversion keeps names and changes float dtypes
tq-convert --quiet --no-quantize --dtype f32 m p
tq-verify ls p | cut -f1,2 | grep -v $'\tF32$' && exit 1
[ "$(tq-verify ls p | wc -l)" -eq "$(tq-verify ls m | wc -l)" ]
# --force replaces, output holds exactly the new files
touch q1/stale
tq-convert --quiet --force m q1
[ ! -e q1/stale ]
exit 0
