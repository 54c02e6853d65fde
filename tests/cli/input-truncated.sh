# Inputs changing under the tool: tq-convert and tq-split, stopped in the middle of writing
# while every input shard is cut short, must fail naming the shard and leave no output.
. "$ROOT/tests/lib/safety.sh"
mk() { rm -rf "$1"; tq-mkmodel --quiet --arch llama --seed 7 --layers 4 --hidden 256 --intermediate 768 --vocab 2048 --shard-size 1M "$1" || fail "mkmodel"; }
mk src
[ "$(ls src/*.safetensors | wc -l)" -gt 1 ] || fail "expected a sharded model"
input_truncated out src 65536 -- tq-convert --quiet --threads 2 src out
mk src
input_truncated out src 65536 -- tq-convert --quiet --threads 1 --no-quantize --dtype f32 src out
mk src
input_truncated out src 65536 -- tq-split --quiet --threads 2 src out
