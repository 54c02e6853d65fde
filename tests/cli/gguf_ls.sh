# tq-verify ls on ggml's test vectors: GGUF names (--keep-names), HF/MLX names, every
# tensor read through the dequantizing source, and the requantization warning.
set -eu
cp "$ROOT/testdata/vectors/ggml-vectors.gguf" .
tq-verify ls --keep-names ggml-vectors.gguf
tq-verify ls ggml-vectors.gguf
tq-verify ls --read --quiet ggml-vectors.gguf
