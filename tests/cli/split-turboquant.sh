# tq-split on tq-convert output (TurboQuant, stacked switch_mlp experts, and per-expert names
# with --keep-names): routed expert weight/scales go to the layer files, the shared per-module
# signs and codebooks stay pinned, and --join gives back tq-convert's files byte for byte.
set -u
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch qwen3_moe m
run tq-convert --quiet --bits 4 --group-size 32 m q
run tq-split --quiet q s
tq-verify ls s/pinned.safetensors > pinned.txt || fail "tq-verify ls pinned"
grep -q "^model.layers.1.mlp.switch_mlp.down_proj.signs	" pinned.txt || fail "signs not pinned"
grep -q "^model.layers.0.mlp.switch_mlp.gate_proj.codebook	" pinned.txt || fail "codebook not pinned"
! grep -q "switch_mlp.gate_proj.weight" pinned.txt || fail "expert weights in pinned"
hdr=$(head -c 16384 s/experts/layer_00.bin | tr -d '\000')
for t in gate_proj.weight gate_proj.scales up_proj.weight down_proj.scales; do
  case $hdr in *"\"mlp.switch_mlp.$t\""*) ;; *) fail "layer header lacks $t: $hdr" ;; esac
done
case $hdr in *codebook*|*signs*) fail "shared tensors in the layer file: $hdr" ;; esac
run tq-split --join --quiet s j
diff -r -x tq-provenance.json q j >/dev/null || fail "join of a TurboQuant split differs from tq-convert's output"

run tq-convert --quiet --keep-names --bits 3 m qh
run tq-split --quiet qh sh
tq-verify ls sh/pinned.safetensors | grep -q "^model.layers.0.mlp.experts.7.up_proj.signs	" || fail "per-expert signs not pinned"
run tq-split --join --quiet sh jh
diff -r -x tq-provenance.json qh jh >/dev/null || fail "join of a per-expert TurboQuant split differs"
exit 0
