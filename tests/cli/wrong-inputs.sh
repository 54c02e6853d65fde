# Common wrong inputs are named for what they are, with what the tool expected instead: a
# JSON file, GGUF given where safetensors is read and the other way round, a tq-split
# directory or layer file where a model is expected, a bundle where a model is expected,
# something that is not a bundle given to tq-verify check, a missing path.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --seed 3 m
run tq-convert --quiet m c
run tq-split --quiet c s
run tq-verify pack --quiet c -o c.tar.zst
cp "$ROOT/testdata/vectors/ggml-vectors.gguf" gguf-named.safetensors
cp m/model.safetensors st-named.gguf
printf '{}\n' >tiny.safetensors
layer=$(cd s && ls experts/*.bin | head -n 1)
echo "# a JSON file"
expect_exit 1 tq-verify ls m/config.json
expect_exit 1 tq-convert m/config.json newdir
expect_exit 1 tq-split c/config.json newdir
expect_exit 1 tq-convert tiny.safetensors newdir
expect_exit 1 tq-run m/config.json --tokens 1
echo "# GGUF where safetensors is read, safetensors where GGUF is read"
expect_exit 1 tq-verify ls gguf-named.safetensors
expect_exit 1 tq-convert st-named.gguf newdir
cp "$ROOT/testdata/vectors/ggml-vectors.gguf" .
expect_exit 1 tq-rowlayout ggml-vectors.gguf --out r.rows
echo "# a split directory or one of its layer files where a model is expected"
expect_exit 1 tq-convert s newdir
expect_exit 1 tq-split s newdir
expect_exit 1 tq-verify ls "s/$layer"
echo "# a bundle where a model is expected; not a bundle where one is checked"
expect_exit 1 tq-verify ls c.tar.zst
expect_exit 1 tq-verify check m/config.json
expect_exit 1 tq-verify check nothere
[ ! -e newdir ] || fail "an output was written"
