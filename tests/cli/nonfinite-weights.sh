# Non-finite weights are refused by every tq-convert path that reads values: a NaN or an
# infinity copied (--no-quantize, with or without a dtype change), quantized (TurboQuant and
# affine) or made by dequantizing (--dequantize with a NaN scale): exit 1 naming the tensor
# and the element, nothing written. --allow-nonfinite lets the copy and dequantize paths write
# them as they are; quantizing still refuses. tq-run stops at the first step whose logits are
# not finite (exit 1 naming the step, no logits file) unless --allow-nonfinite.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch llama --size tiny --seed 1 d
T=model.layers.0.mlp.down_proj.weight
# poke DIR/FILE's tensor NAME: element INDEX gets the little-endian bytes HEX
poke() {
  python3 - "$1" "$2" "$3" "$4" <<'PY' || fail "cannot poke $2"
import json, struct, sys
p, name, idx, val = sys.argv[1], sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4])
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])[name]
off = 8 + n + t["data_offsets"][0] + idx * len(val)
b[off:off + len(val)] = val
open(p, "wb").write(b)
PY
}
rm -rf x; cp -r d x; poke x/model.safetensors $T 300 c07f           # bf16 NaN at element 300
expect_refused "tensor '$T' element 300: a NaN value (--allow-nonfinite copies it anyway)" o tq-convert --no-quantize x o
expect_refused "tensor '$T' element 300: a NaN value" o tq-convert --no-quantize --dtype f32 x o
expect_refused "tensor '$T' row 1" o tq-convert --bits 4 x o
expect_refused "NaN weight" o tq-convert --method affine --bits 4 x o
expect_refused "tensor '$T' row 1" o tq-convert --bits 4 --allow-nonfinite x o
run tq-convert --quiet --no-quantize --allow-nonfinite x o
cmp x/model.safetensors o/model.safetensors || fail "--allow-nonfinite --no-quantize changed the bytes"
rm -rf o
expect_refused "tq-run: step 0: logit" l.f32 tq-run x --tokens 1,2,3 --max-tokens 2 --logits l.f32
grep -q "non-finite weights or values (--allow-nonfinite decodes anyway)" err || fail "tq-run: $(cat err)"
run tq-run --quiet x --tokens 1,2,3 --max-tokens 2 --allow-nonfinite
run tq-run --quiet d --tokens 1,2,3 --max-tokens 2
rm -rf x; cp -r d x; poke x/model.safetensors model.embed_tokens.weight 7 807f   # bf16 +Inf
expect_refused "tensor 'model.embed_tokens.weight' element 7: an infinite value" o tq-convert --no-quantize x o
# dequantizing a TurboQuant model whose first scale of a row is NaN
run tq-convert --quiet --bits 4 d q
s=$(python3 -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; print(next(k for k in json.loads(b[8:8 + n]) if k.endswith("down_proj.scales")))' q/model.safetensors)
rm -rf x; cp -r q x; poke x/model.safetensors "$s" 0 007e               # f16 NaN
expect_refused "dequantized to a NaN value (--allow-nonfinite writes it anyway)" o tq-convert --dequantize x o
run tq-convert --quiet --dequantize --allow-nonfinite x o
echo "non-finite values refused on every path, written only with --allow-nonfinite"
