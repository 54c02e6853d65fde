# quantization.rotation honoured end to end: tq-convert --rotation none quantizes unrotated
# (all-ones signs, config rotation "none"); tq-run then skips the activation Hadamard and
# agrees with the model tq-convert --dequantize writes (also unrotated) to 1e-4 relative with
# the same greedy tokens, while decoding it as if rotated (config edited to "hadamard") does
# not. QJL and ternary-expert configs are refused naming the feature.
set -eu
tq-mkmodel --arch qwen3 --size tiny --seed 9 m >/dev/null
tq-convert --quiet --bits 4 --rotation none m q
grep -q '"rotation": "none"' q/config.json
tq-verify ls q/model.safetensors | grep -q $'^model.layers.0.self_attn.q_proj.signs\tF16'
tq-convert --quiet --dequantize --dtype f32 q dq
tq-run q --tokens 1,2,3 --max-tokens 6 --quiet --logits q.f32 > q.txt
tq-run dq --tokens 1,2,3 --max-tokens 6 --quiet --logits dq.f32 > dq.txt
cmp q.txt dq.txt
tq-run --compare-logits dq.f32 q.f32 --vocab 512 > cmp.txt
grep -qx 'steps: 6' cmp.txt
awk '/^max relative difference:/ { exit !($4 > 0 && $4 <= 1e-4) }' cmp.txt
# the same file read as rotated is a different model
cp -r q qh
sed -i 's/"rotation": "none"/"rotation": "hadamard"/' qh/config.json
tq-run qh --tokens 1,2,3 --max-tokens 6 --quiet --logits qh.f32 >/dev/null
tq-run --compare-logits dq.f32 qh.f32 --vocab 512 > cmph.txt
awk '/^max relative difference:/ { exit !($4 > 1e-2) }' cmph.txt
# refused: QJL residual correction, ternary experts, an unknown rotation
for edit in 's/"rotation": "none"/"rotation": "none", "use_qjl": true/|QJL' \
            's/"rotation": "none"/"rotation": "none", "ternary_experts": true/|ternary' \
            's/"rotation": "none"/"rotation": "givens"/|givens'; do
  rm -rf qx; cp -r q qx
  sed -i "${edit%%|*}" qx/config.json
  set +e; tq-run qx --tokens 1,2 --max-tokens 1 --quiet >/dev/null 2>err.txt; rc=$?; set -e
  [ $rc -eq 1 ] || { echo "tq-run exit $rc for ${edit##*|}"; exit 1; }
  grep -q "${edit##*|}" err.txt || { cat err.txt; exit 1; }
  set +e; tq-convert --quiet --dequantize qx dx 2>err.txt; rc=$?; set -e
  [ $rc -eq 1 ] || { echo "tq-convert exit $rc for ${edit##*|}"; exit 1; }
  grep -q "${edit##*|}" err.txt || { cat err.txt; exit 1; }
done
