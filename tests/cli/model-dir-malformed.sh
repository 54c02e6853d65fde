# tq-verify ls on broken model directories made from a generated sharded model: each must
# exit 1 with the exact message in model-dir-malformed.stderr.exact.
set -u
tq-mkmodel --arch qwen3_moe --size tiny --seed 3 --shard-size 300000B --quiet good >/dev/null || exit 1
tq-verify ls good > good.ls || exit 1
first=$(awk -F'\t' '$4 == "model-00002-of-00007.safetensors" { print $1; exit }' good.ls)
[ -n "$first" ] || { echo "unexpected shard layout" >&2; exit 1; }
fail() { # NAME: run ls on NAME, expect status 1
  tq-verify ls "$1" > /dev/null; rc=$?
  [ "$rc" -eq 1 ] || echo "$1: exit status $rc, expected 1"
}
cp -r good missing-shard && rm missing-shard/model-00003-of-00007.safetensors
fail missing-shard
cp -r good wrong-shard
sed -i "s|\"$first\": \"model-00002-of-00007.safetensors\"|\"$first\": \"model-00001-of-00007.safetensors\"|" wrong-shard/model.safetensors.index.json
fail wrong-shard
cp -r good not-indexed
sed -i "/\"$first\": /d" not-indexed/model.safetensors.index.json
fail not-indexed
cp -r good dup-no-index && rm dup-no-index/model.safetensors.index.json
cp dup-no-index/model-00002-of-00007.safetensors dup-no-index/extra.safetensors
fail dup-no-index
cp -r good bad-json && truncate -s 100 bad-json/model.safetensors.index.json
fail bad-json
cp -r good no-weight-map && echo '{"metadata": {}, "weight_map": []}' > no-weight-map/model.safetensors.index.json
fail no-weight-map
cp -r good escape && echo '{"weight_map": {"x": "../good/model-00001-of-00007.safetensors"}}' > escape/model.safetensors.index.json
fail escape
cp -r good bad-shard && truncate -s 1000 bad-shard/model-00004-of-00007.safetensors
fail bad-shard
cp -r good bad-config && echo '{"model_type": ' > bad-config/config.json
fail bad-config
mkdir empty && fail empty
exit 0
