# tq-verify compare (any sharding, split vs source) and golden decodes.
set -euo pipefail
tq-mkmodel --arch qwen3_moe --size tiny --seed 9 --quiet a
tq-mkmodel --arch qwen3_moe --size tiny --seed 9 --shard-size 300k --quiet b
[ -e b/model.safetensors.index.json ]
tq-verify compare a b | grep -x "IDENTICAL: .* tensors identical (bit-exact)" >/dev/null
tq-verify compare a/model.safetensors b
tq-split --quiet a s
tq-verify compare a s
tq-verify compare --json s b | grep '"equal": true' >/dev/null
# A flipped byte: the tensor and the first differing byte are named.
tq-verify ls a | grep 'layers.1.self_attn.k_proj.weight' | {
  IFS=$'\t' read -r name dtype shape file off nbytes
  b=$(od -An -tu1 -j $((off + 10)) -N1 a/model.safetensors | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 128)))" | dd of=a/model.safetensors bs=1 seek=$((off + 10)) conv=notrunc status=none
}
set +e; tq-verify compare a b >out; rc=$?; set -e
[ "$rc" = 1 ]
grep -q "^tensor 'model.layers.1.self_attn.k_proj.weight': first difference at byte 10 (element 5): A 0x.., B 0x..$" out
[ "$(grep -c '^tensor' out)" = 1 ]
# Different seeds: every tensor differs; a model against a different architecture: only-in lines.
tq-mkmodel --arch llama --size tiny --seed 9 --quiet l
set +e; tq-verify compare l b >out; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "only in B" out
# golden: create, match on the same model split and unsplit, mismatch on another model.
tq-verify golden --quiet b --golden g.json --update --tokens 1,2,3,4 --max-tokens 5
grep -q '"format": "tq_golden_v1"' g.json
tq-verify golden b --golden g.json | grep "g.json: OK (5 tokens" >/dev/null
tq-verify golden --quiet s --golden g.json
cp g.json g0.json
tq-verify golden --quiet --update s --golden g.json
cmp g.json g0.json
tq-mkmodel --arch qwen3_moe --size tiny --seed 10 --quiet c
set +e; tq-verify golden c --golden g.json >out; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "MISMATCH" out && grep -q "logits sha256 .*, expected" out
set +e; tq-verify golden b --golden missing.json 2>err; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "no such golden file" err
echo '{"format":"tq_golden_v1","prompt":[],"max_tokens":1,"tokens":[1],"logits_sha256":"x"}' > bad.json
set +e; tq-verify golden b --golden bad.json 2>err; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "prompt" err
# Row files against their source table (rebuilt by the row-layout extract code).
tq-mkmodel --arch ngram --seed 3 --quiet t
tq-rowlayout --quiet t/model.safetensors --out rows.safetensors >/dev/null
tq-rowlayout --quiet t/model.safetensors --out paged.safetensors --page-align 4096 >/dev/null
tq-verify compare rows.safetensors t/model.safetensors | grep -x "IDENTICAL: 3 of 3 tensors identical (bit-exact)" >/dev/null
tq-verify compare --quiet t paged.safetensors
sz=$(stat -c %s rows.safetensors)
b=$(od -An -tu1 -j $((sz - 1000)) -N1 rows.safetensors | tr -d ' ')
printf "$(printf '\\%03o' $((b ^ 1)))" | dd of=rows.safetensors bs=1 seek=$((sz - 1000)) conv=notrunc status=none
set +e; tq-verify compare rows.safetensors t >out; rc=$?; set -e
[ "$rc" = 1 ] && grep -q "^tensor 'ngram\.[a-z]*': first difference at byte" out
