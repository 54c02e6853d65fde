# tq-convert --no-quantize --dtype f32 --keep-names on ggml's test vectors writes exactly ggml's
# own dequantization (every tensor byte-compared with the expected safetensors file); without
# --keep-names the names are mapped to HF/MLX and the config synthesized; --quiet drops the
# warning that the quantized source tensors would compound error if quantized again.
set -eu
cp "$ROOT/testdata/vectors/ggml-vectors.gguf" "$ROOT/testdata/vectors/ggml-vectors.expected.safetensors" .
tq-convert --no-quantize --dtype f32 --keep-names ggml-vectors.gguf out >/dev/null
tq-verify ls ggml-vectors.expected.safetensors >want.ls
tq-verify ls out >got.ls
cut -f1-3 want.ls >want.names
cut -f1-3 got.ls >got.names
diff want.names got.names
n=0
while IFS=$'\t' read -r name dt shape file off nbytes && IFS=$'\t' read -r gname gdt gshape gfile goff gnbytes <&3; do
  if [ "$name" != "$gname" ] || [ "$nbytes" != "$gnbytes" ]; then
    echo "listing differs: $name $nbytes vs $gname $gnbytes" >&2
    exit 1
  fi
  cmp -n "$nbytes" -i "$off:$goff" ggml-vectors.expected.safetensors "out/$gfile"
  n=$((n + 1))
done <want.ls 3<got.ls
echo "$n tensors bit-identical to ggml"
tq-convert --no-quantize --dtype f32 --quiet ggml-vectors.gguf mapped
tq-verify ls mapped | cut -f1-3 | head -n 4
grep -E '"(model_type|num_hidden_layers|rope_theta|vocab_size)"' mapped/config.json
