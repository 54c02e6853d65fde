# Every file a tool reads is opened non-blocking and must be a regular file: a FIFO (which
# would block an ordinary open forever), a socket, a device or a directory where a file is
# expected is refused at once (exit 1 within 10 s, a message naming the path and what it is),
# and nothing is written under the output's name. A file where a directory is expected is
# refused too. One case per kind of input each tool opens.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
. "$ROOT/tests/lib/keys.sh"
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 3 --shard-size 300k m
[ -e m/model.safetensors.index.json ] || fail "the model should have an index"
run tq-mkmodel --quiet --arch llama --size tiny --seed 4 d
run tq-split --quiet m s
run tq-mkmodel --quiet --arch ngram --size tiny --seed 5 ng
make_key k prime256v1

sock() { python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$1" || fail "no socket $1"; }
# copy DIR NEW and replace NEW/REL by KIND (fifo, socket, dir, null: a link to /dev/null)
swap() {
  rm -rf "$2"; cp -r "$1" "$2"; rm -rf "${2:?}/$3"
  case $4 in
    fifo) mkfifo "$2/$3" ;;
    socket) sock "$2/$3" ;;
    dir) mkdir "$2/$3" ;;
    null) ln -s /dev/null "$2/$3" ;;
  esac
}
shard=$(ls m | grep '^model-0000.-of-.*safetensors$' | sed -n 1p)

# a shard named by model.safetensors.index.json
swap m x "$shard" fifo
expect_refused "x/$shard: not a regular file (a FIFO)" res tq-convert --bits 4 x res
expect_refused "x/$shard: not a regular file (a FIFO)" res tq-split x res
expect_refused "x/$shard: not a regular file (a FIFO)" - tq-verify ls x
swap m x "$shard" socket
expect_refused "x/$shard: not a regular file (a socket)" res tq-convert --bits 4 x res
swap m x "$shard" dir
expect_refused "x/$shard: not a regular file (a directory)" res tq-split x res
swap m x "$shard" null
expect_refused "x/$shard: not a regular file (a character device)" res tq-convert --no-quantize x res
# config.json
swap d x config.json fifo
expect_refused "x/config.json: not a regular file (a FIFO)" res tq-convert --bits 4 x res
expect_refused "x/config.json: not a regular file (a FIFO)" - tq-run x --tokens 1 --max-tokens 1
swap d x config.json dir
expect_refused "x/config.json: not a regular file (a directory)" res tq-split x res
swap s x config.json fifo
expect_refused "x/config.json: not a regular file (a FIFO)" - tq-run x --tokens 1 --max-tokens 1
expect_refused "x/config.json: not a regular file (a FIFO)" res tq-split --join x res
# any other special file in a model directory (it would be an extra file to copy)
swap d x tokenizer_config.json fifo
expect_refused "x/tokenizer_config.json: not a regular file (a FIFO)" res tq-convert --bits 4 x res
# the model itself
mkfifo f.safetensors
expect_refused "f.safetensors: not a regular file (a FIFO)" res tq-convert --bits 4 f.safetensors res
expect_refused "f.safetensors: not a regular file (a FIFO)" - tq-verify ls f.safetensors
expect_refused "/dev/null: not a regular file (a character device)" res tq-split /dev/null res
# GGUF: the file, and a split set with one piece a FIFO
mkfifo f.gguf
expect_refused "f.gguf: not a regular file (a FIFO)" res tq-convert --no-quantize f.gguf res
mkdir g && cp "$ROOT/testdata/vectors/ggml-vectors.gguf" g/v-00002-of-00002.gguf && mkfifo g/v-00001-of-00002.gguf
expect_refused "g/v-00001-of-00002.gguf: not a regular file (a FIFO)" res tq-convert --no-quantize g res
expect_refused "v-00001-of-00002.gguf: not a regular file (a FIFO)" res tq-convert --no-quantize g/v-00002-of-00002.gguf res
# split directories: split.json, pinned.safetensors, a layer file split.json names
swap s x split.json fifo
expect_refused "x/split.json: not a regular file (a FIFO)" res tq-split --join x res
expect_refused "x/split.json: not a regular file (a FIFO)" - tq-run x --tokens 1 --max-tokens 1
expect_refused "x/split.json: not a regular file (a FIFO)" - tq-verify check x
swap s x pinned.safetensors fifo
expect_refused "x/pinned.safetensors: not a regular file (a FIFO)" - tq-run x --tokens 1 --max-tokens 1
swap s x experts/layer_01.bin fifo
expect_refused "x/experts/layer_01.bin: not a regular file (a FIFO)" - tq-run x --tokens 1 --max-tokens 1
expect_refused "x/experts/layer_01.bin: not a regular file (a FIFO)" - tq-run x --resident --tokens 1 --max-tokens 1
expect_refused "x/experts/layer_01.bin: not a regular file (a FIFO)" res tq-split --join x res
expect_refused "x/experts/layer_01.bin" - tq-verify check x
expect_refused "x/experts/layer_01.bin" - tq-verify compare m x
expect_refused "x/experts/layer_01.bin" res.tar.zst tq-verify pack x -o res.tar.zst
swap s x experts/layer_01.bin socket
expect_refused "x/experts/layer_01.bin: not a regular file (a socket)" - tq-run x --tokens 1 --max-tokens 1
expect_refused "x/experts/layer_01.bin: not a regular file (a socket)" res tq-split --join x res
swap s x experts/layer_01.bin dir
expect_refused "x/experts/layer_01.bin: not a regular file (a directory)" - tq-run x --tokens 1 --max-tokens 1
expect_refused "x/experts/layer_01.bin: not a regular file (a directory)" res tq-split --join x res
# manifests, signatures, keys
run cp -r s v && run tq-verify manifest --quiet v
swap v x SHA256SUMS fifo
expect_refused "x/SHA256SUMS: not a regular file (a FIFO)" - tq-verify check x
swap v x tq-manifest.json fifo
expect_refused "x/tq-manifest.json: not a regular file (a FIFO)" - tq-verify check x
expect_refused "x/tq-manifest.json" res.tar.zst tq-verify pack x -o res.tar.zst
mkfifo key.fifo
expect_refused "key.fifo: not a regular file (a FIFO)" v/model.sig tq-verify sign v --key key.fifo
run tq-verify sign --quiet v --key k.pem
expect_refused "key.fifo: not a regular file (a FIFO)" - tq-verify verify v --pubkey key.fifo
swap v x model.sig fifo
expect_refused "x/model.sig: not a regular file (a FIFO)" - tq-verify verify x --pubkey k.pub
# bundles
mkfifo b.tar.zst
expect_refused "b.tar.zst: not a regular file (a FIFO)" - tq-verify check b.tar.zst
expect_refused "b.tar.zst: not a regular file (a FIFO)" res tq-verify unpack b.tar.zst -o res
expect_refused "/dev/null: not a regular file (a character device)" res tq-verify unpack /dev/null -o res
# tokenizer.json, prompt files, golden files, logits
swap d x tokenizer.json fifo
expect_refused "x/tokenizer.json: not a regular file (a FIFO)" - tq-run --tokenizer x --encode
expect_refused "x/tokenizer.json: not a regular file (a FIFO)" - tq-run d --tokenizer x --prompt hi --max-tokens 1
mkfifo prompt.txt
expect_refused "prompt.txt: not a regular file (a FIFO)" - tq-run d --prompt-file prompt.txt --max-tokens 1
mkfifo golden.json
expect_refused "golden.json: not a regular file (a FIFO)" - tq-verify golden d --golden golden.json
mkdir golden.d
expect_refused "golden.d: not a regular file (a directory)" - tq-verify golden d --golden golden.d
run tq-run --quiet d --tokens 1 --max-tokens 1 --logits a.f32
mkfifo b.f32
expect_refused "b.f32: not a regular file (a FIFO)" - tq-run --compare-logits a.f32 b.f32 --vocab 256
# row files
mkfifo rows.safetensors
expect_refused "rows.safetensors: not a regular file (a FIFO)" out.safetensors tq-rowlayout rows.safetensors --out out.safetensors
run tq-rowlayout --quiet ng/model.safetensors --out r.safetensors
expect_refused "rows.safetensors: not a regular file (a FIFO)" - tq-rowlayout --check rows.safetensors
expect_refused "rows.safetensors: not a regular file (a FIFO)" - tq-rowlayout ng/model.safetensors --check rows.safetensors
expect_refused "rows.safetensors: not a regular file (a FIFO)" outdir tq-rowlayout --extract rows.safetensors --to outdir
# a file where a directory is expected
expect_refused "a.f32" - tq-verify check a.f32
expect_refused "a.f32" res tq-split --join a.f32 res
expect_refused "a.f32" - tq-verify manifest a.f32
expect_refused "a.f32" - tq-run a.f32 --tokens 1 --max-tokens 1
expect_refused "a.f32" - tq-run --tokenizer a.f32 --encode
expect_refused "a.f32" res.tar.zst tq-verify pack a.f32 -o res.tar.zst
echo "every FIFO, socket, device and directory was refused at once"
