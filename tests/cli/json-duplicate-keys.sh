# A JSON file tq reads whose objects repeat a key is refused naming the key and its object's
# path: RFC 8259 leaves such a document's meaning open (Python's json, and so transformers and
# mlx-lm, take the last value, cJSON's lookups the first), so it is never read one way while
# another program reads it the other. config.json (tq-run, tq-split, tq-convert), split.json
# (tq-run, tq-verify check) and model.safetensors.index.json.
set -u
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --seed 1 --layers 2 m
run tq-split --quiet m s
# dup FILE SED: a copy of FILE's directory whose FILE has the edit (which must change it)
dup() {
  local src=$1 dir
  dir=$(dirname "$src")
  rm -rf d && cp -r "$dir" d
  sed "$2" "$src" > "d/$(basename "$src")"
  cmp -s "$src" "d/$(basename "$src")" && fail "edit '$2' did not change $src"
  return 0
}
# config.json: a top-level key given twice, the second value different
dup m/config.json '0,/"hidden_size": \([0-9]*\),/s//"hidden_size": \1, "hidden_size": 7,/'
for tool in run split convert; do
  rm -rf o
  case $tool in
  run) expect_refused 'd/config.json: key "hidden_size" appears twice' - tq-run d --tokens 1,2 --max-tokens 1 ;;
  split) expect_refused 'd/config.json: key "hidden_size" appears twice' o tq-split --quiet d o ;;
  convert) expect_refused 'd/config.json: key "hidden_size" appears twice' o tq-convert --quiet --dry-run d o ;;
  esac
done
# split.json: at the top level, and inside the streaming block
dup s/split.json '0,/"align": \([0-9]*\),/s//"align": \1, "align": 4096,/'
expect_refused 'd/split.json: key "align" appears twice' - tq-run d --tokens 1,2 --max-tokens 1
expect_refused 'd/split.json: key "align" appears twice' - tq-verify check d
dup s/config.json '0,/"page_size": \([0-9]*\),/s//"page_size": \1, "page_size": 4096,/'
expect_refused 'd/config.json: key "streaming.page_size" appears twice' - tq-run d --tokens 1,2 --max-tokens 1
# the weight map of a sharded model's index
run tq-mkmodel --quiet --seed 1 --layers 2 --shard-size 100K sh
[ -f sh/model.safetensors.index.json ] || fail "no index written"
dup sh/model.safetensors.index.json '0,/"weight_map": {/s//"weight_map": {"lm_head.weight": "x.safetensors", /'
expect_refused 'key "weight_map.lm_head.weight" appears twice' - tq-verify ls d
# the unedited ones are read
run tq-run --quiet s --tokens 1,2 --max-tokens 1 >/dev/null
run tq-verify ls sh >/dev/null
