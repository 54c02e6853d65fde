# split.json's header hashes, against the files themselves: source.files[].header_sha256 is
# the SHA-256 of each source shard's first 8 + N bytes, and files[].header_sha256 that of the
# first header_bytes bytes of pinned.safetensors (8 + N) and of every layer file (its header
# page). A header changed after the split was made (a same-length edit that still parses) is
# refused by tq-run, tq-split --join and tq-verify compare, naming the file; tq-verify check
# names it too. A split.json without the file header hashes (older) is still read.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 4 --shard-size 300k m
[ -e m/model.safetensors.index.json ] || fail "the source should have several shards"
run tq-split --quiet m s
run tq-mkmodel --quiet --arch llama --size tiny --seed 5 d
run tq-split --quiet d sd

hlen() { od -An -tu8 -N8 "$1" | tr -d ' '; }                  # N of a safetensors file
head_sha() { head -c "$2" "$1" | sha256sum | cut -d' ' -f1; }  # SHA-256 of the first $2 bytes
json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); $2" "$1"; }

# source shards: 8 + N bytes, computed here from the files
n=0
while IFS=$'\t' read -r name sha; do
  want=$(head_sha "m/$name" $((8 + $(hlen "m/$name"))))
  [ "$sha" = "$want" ] || fail "source $name: header_sha256 $sha, its first 8 + N bytes hash to $want"
  n=$((n + 1))
done < <(json s/split.json 'print("\n".join(f["name"] + "\t" + f["header_sha256"] for f in j["source"]["files"]))')
[ "$n" -ge 2 ] || fail "only $n source shards listed"

# the split's own headers, for a MoE and a dense split
for dir in s sd; do
  json $dir/split.json 'print("\n".join("%s\t%s\t%s" % (k, v.get("header_bytes", ""), v.get("header_sha256", "")) for k, v in sorted(j["files"].items())))' > heads
  while IFS=$'\t' read -r name bytes sha; do
    case "$name" in
      pinned.safetensors) want=$((8 + $(hlen "$dir/$name"))) ;;
      experts/*|ffn_aligned/*) want=$(json $dir/split.json 'print(j["align"])') ;;
      *) [ -z "$bytes$sha" ] || fail "$dir: $name has a header hash"; continue ;;
    esac
    [ "$bytes" = "$want" ] || fail "$dir: $name header_bytes $bytes, expected $want"
    [ "$sha" = "$(head_sha "$dir/$name" "$bytes")" ] || fail "$dir: $name header_sha256 is not its first $bytes bytes' hash"
  done < heads
  grep -q "^pinned.safetensors	" heads && grep -q "layer_01.bin	" heads || fail "$dir: files missing: $(cat heads)"
done

# an edit that keeps the header valid: the numbers of the first 2-D shape [a, b] with a != b
# of the same length swapped in place, or else two inner_offset values of the same length
swap_shape() {
  python3 - "$1" <<'PY' || fail "nothing to swap in $1"
import re, sys
p = sys.argv[1]
b = bytes(open(p, "rb").read(1 << 20))
def put(at, new):
    with open(p, "r+b") as f:
        f.seek(at)
        f.write(new)
for m in re.finditer(rb'\[(\d+), ?(\d+)\]', b):
    x, y = m.group(1), m.group(2)
    if x != y and len(x) == len(y):
        put(m.start(1), y)
        put(m.start(2), x)
        sys.exit(0)
offs = list(re.finditer(rb'"inner_offset":(\d+)', b))
for i in range(len(offs)):
    for k in range(i + 1, len(offs)):
        x, y = offs[i].group(1), offs[k].group(1)
        if x != y and len(x) == len(y):
            put(offs[i].start(1), y)
            put(offs[k].start(1), x)
            sys.exit(0)
sys.exit(1)
PY
}
cp -r s s-pin
swap_shape s-pin/pinned.safetensors
expect_msg 1 "s-pin/pinned.safetensors: header (its first $((8 + $(hlen s-pin/pinned.safetensors))) bytes) does not match split.json's header_sha256" \
  tq-run --quiet --tokens 1,2 --max-tokens 2 s-pin
expect_msg 1 "s-pin/pinned.safetensors: header" tq-split --quiet --join s-pin j
[ ! -e j ] || fail "a join of an edited split left output"
expect_msg 1 "s-pin/pinned.safetensors: header" tq-verify compare m s-pin
tq-verify check s-pin > out 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q "pinned.safetensors" out || fail "check of the edited split: exit $rc $(cat out)"

cp -r s s-layer
swap_shape s-layer/experts/layer_01.bin
expect_msg 1 "s-layer/experts/layer_01.bin: header (its first 16384 bytes) does not match" \
  tq-run --quiet --tokens 1,2 --max-tokens 2 s-layer
expect_msg 1 "s-layer/experts/layer_01.bin: header" tq-split --quiet --join s-layer j
cp -r sd sd-layer
swap_shape sd-layer/ffn_aligned/layer_00.bin
expect_msg 1 "sd-layer/ffn_aligned/layer_00.bin: header" tq-run --quiet --tokens 1,2 --max-tokens 2 sd-layer

# a split.json edited to another header hash is refused the same way (the hash is read)
cp -r s s-json
json s/split.json 'f = j["files"]["experts/layer_00.bin"]; f["header_sha256"] = "0" * 64; json.dump(j, open(sys.argv[1] + ".new", "w"), indent=2, sort_keys=True)'
mv s/split.json.new s-json/split.json
expect_msg 1 "s-json/experts/layer_00.bin: header" tq-run --quiet --tokens 1,2 --max-tokens 2 s-json
# malformed header entries are refused at load
json s/split.json 'del j["files"]["pinned.safetensors"]["header_sha256"]; json.dump(j, open(sys.argv[1] + ".new", "w"))'
cp -r s s-half; mv s/split.json.new s-half/split.json
expect_msg 1 "header_bytes (in \[1, size\]) and header_sha256" tq-run --quiet --tokens 1,2 --max-tokens 2 s-half

# every sha256 and header_sha256 is 64 lowercase hex digits (man tq-formats(5), split.json):
# upper case, 63 digits or a non-hex digit are refused at load, naming the entry
bad_hex() { # PYTHON-EXPR-SETTING-ONE-HASH NEEDLE
  rm -rf s-hex; cp -r s s-hex
  json s/split.json "$1; json.dump(j, open(sys.argv[1] + '.new', 'w'), indent=2, sort_keys=True)"
  mv s/split.json.new s-hex/split.json
  expect_msg 1 "$2" tq-run --quiet --tokens 1,2 --max-tokens 2 s-hex
}
bad_hex 'b = j["expert_blocks"][0]; b["sha256"] = b["sha256"].upper()' "expert_blocks\[0\]: no valid sha256"
bad_hex 'b = j["expert_blocks"][1]; b["sha256"] = b["sha256"][:63]' "expert_blocks\[1\]: no valid sha256"
bad_hex 'f = j["files"]["pinned.safetensors"]; f["sha256"] = "g" + f["sha256"][1:]' "pinned.safetensors"
bad_hex 'f = j["files"]["pinned.safetensors"]; f["header_sha256"] = f["header_sha256"].upper()' "header_sha256"
# an older split.json (no file header hashes) is read as before
cp -r s s-old
json s/split.json '[f.pop(k, None) for f in j["files"].values() for k in ("header_bytes", "header_sha256")]; json.dump(j, open(sys.argv[1] + ".new", "w"), indent=2, sort_keys=True)'
mv s/split.json.new s-old/split.json
run tq-run --quiet --tokens 1,2 --max-tokens 2 s-old > /dev/null
run tq-verify compare --quiet m s-old
