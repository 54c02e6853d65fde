# tq-split --join (and tq-verify pack) checks the data against split.json before writing anything: every file's
# size and SHA-256, every expert block's SHA-256. A byte changed after the split was made (in
# an expert block, in pinned.safetensors' data, in a dense FFN file, in a copied file), a
# truncated or missing file: exit 1 naming the file (and the layer and expert for a block),
# nothing under the output's name. --no-verify joins without the data check (the headers are
# still checked), so the same flip then comes out in the joined model.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 6 m
run tq-split --quiet m s
run tq-mkmodel --quiet --arch llama --size tiny --seed 7 d
run tq-split --quiet d sd
json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); $2" "$1"; }
# flip one byte of DIR/FILE at OFFSET (in a copy X of DIR)
flip() {
  rm -rf x; cp -r "$1" x
  python3 - "x/$2" "$3" <<'PY' || fail "cannot flip $2"
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0x40]))
PY
}

# the untouched splits join, and back to the source bit for bit
run tq-split --quiet --join s j && run tq-verify compare --quiet m j && rm -rf j
run tq-split --quiet --join sd j && run tq-verify compare --quiet d j && rm -rf j

# one byte inside expert 3 of layer 1
read -r off len < <(json s/split.json 'b = [b for b in j["expert_blocks"] if b["layer"] == 1 and b["expert"] == 3][0]; print(b["offset"], b["length"])')
flip s experts/layer_01.bin $((off + len / 2))
expect_refused "x/experts/layer_01.bin: layer 1 expert 3 (bytes $off..$((off + len))) does not match split.json's sha256" \
  j tq-split --join x j
expect_refused "layer 1 expert 3" j tq-split --join --threads 1 --naming hf x j
# --no-verify: the headers are intact, so it joins, and the flipped byte is in the result
run tq-split --quiet --join --no-verify x j
tq-verify compare m j >out 2>&1; rc=$?
[ "$rc" -eq 1 ] && grep -q "model.layers.1.mlp.experts.3.*first difference" out || fail "compare after --no-verify: exit $rc: $(cat out)"
rm -rf j
# the block's last byte (padding after the expert's tensors is inside its block too)
read -r off len < <(json s/split.json 'b = [b for b in j["expert_blocks"] if b["layer"] == 0 and b["expert"] == 5][0]; print(b["offset"], b["length"])')
flip s experts/layer_00.bin $((off + len - 1))
expect_refused "x/experts/layer_00.bin: layer 0 expert 5" j tq-split --join x j
# pinned.safetensors' data (past its header)
plen=$(od -An -tu8 -N8 s/pinned.safetensors | tr -d ' ')
flip s pinned.safetensors $((8 + plen + 5))
expect_refused "x/pinned.safetensors: content does not match split.json's sha256" j tq-split --join x j
# a dense FFN file's data
fsize=$(stat -c %s sd/ffn_aligned/layer_01.bin)
flip sd ffn_aligned/layer_01.bin $((fsize - 3))
expect_refused "x/ffn_aligned/layer_01.bin: content does not match split.json's sha256" j tq-split --join x j
# config.json and tokenizer.json (copied into the output)
flip s tokenizer.json 10
expect_refused "x/tokenizer.json: content does not match" j tq-split --join x j
# a truncated layer file, a missing one
rm -rf x; cp -r s x; truncate -s -16384 x/experts/layer_00.bin
expect_refused "x/experts/layer_00.bin" j tq-split --join x j
rm -rf x; cp -r s x; rm x/tokenizer.json
expect_refused "x/tokenizer.json: cannot open" j tq-split --join x j
# tq-verify pack refuses a split that split.json no longer describes (a bundle would carry it)
rm -rf x; cp -r s x; rm x/experts/layer_01.bin
expect_refused "x/split.json: lists 'experts/layer_01.bin', which is missing" x.tar.zst tq-verify pack x -o x.tar.zst
flip s experts/layer_00.bin $((off + 7))
expect_refused "x/split.json: 'experts/layer_00.bin' has changed since the split was made" x.tar.zst tq-verify pack x -o x.tar.zst
run tq-verify pack --quiet s -o s.tar.zst
# split.json itself: values that contradict the rest of it are refused by every reader
sj() { # EDIT MESSAGE: split.json of a copy of s edited by the python EDIT
  rm -rf x; cp -r s x
  python3 -c "import json, sys; p = 'x/split.json'; j = json.load(open(p)); exec(sys.argv[1]); json.dump(j, open(p, 'w'))" "$1" \
    || fail "cannot edit split.json"
  expect_refused "x/split.json: $2" j tq-split --join x j
  expect_refused "x/split.json: $2" - tq-run x --tokens 1 --max-tokens 1
  tq-verify check x >out 2>err; rc=$?
  [ "$rc" -eq 1 ] && grep -qF "$2" out err || fail "tq-verify check after '$1': exit $rc: $(cat out err)"
}
sj 'j["kind"] = "dense"' "kind is \"dense\" but it has 'num_experts'"
sj 'j["experts_per_tok"] = 0' "experts_per_tok 0 is not in [1, num_experts 8]"
sj 'j["experts_per_tok"] = 9' "experts_per_tok 9 is not in [1, num_experts 8]"
sj 'j["expert_blocks"][15]["length"] += 16384' "expert_blocks[15] (layer 1, expert 7) ends at byte"
# usage
expect_msg 2 "--no-verify goes with --join" tq-split --no-verify m j
echo "every changed split was refused before writing; --no-verify joins it"
