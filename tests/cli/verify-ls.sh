# tq-verify ls on a small hand-made safetensors file: text and JSON listings, --read,
# usage errors.
set -eu
# u64 little-endian length, header, data
st() {
  local h=$1 n=${#1}
  printf "$(printf '\\%03o\\%03o\\%03o\\%03o\\000\\000\\000\\000' $((n & 255)) $((n >> 8 & 255)) $((n >> 16 & 255)) $((n >> 24 & 255)))"
  printf '%s' "$h"
  printf "$2"
}
st '{"__metadata__":{"format":"pt"},"b.weight":{"dtype":"BF16","shape":[2,3],"data_offsets":[4,16]},"a.bias":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"z":{"dtype":"U8","shape":[0],"data_offsets":[16,16]}}  ' \
  '\0\0\200\77\1\2\3\4\5\6\7\10\11\12\13\14' > small.safetensors
tq-verify ls small.safetensors
tq-verify ls --json small.safetensors
tq-verify ls --read --quiet small.safetensors
tq-verify ls --read small.safetensors > /dev/null 2> read.err
grep -q '^tq-verify: read 16 bytes (16 B) in [0-9.]* s: [0-9.]* MiB/s, peak RSS [0-9.]* MiB$' read.err
mkdir d && cp small.safetensors d/model.safetensors && echo '{}' > d/config.json
tq-verify ls d
# a name with control characters is refused, naming the offset (man tq-formats(5)); a
# backslash is listed escaped, so every tensor stays one line of six fields
st '{"a\tb\nc\\d\u0001":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' '\0' > odd.safetensors
tq-verify ls odd.safetensors && exit 1
st '{"c\\d":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' '\0' > backslash.safetensors
tq-verify ls backslash.safetensors
set +e
tq-verify ls; echo "exit $?"
tq-verify ls a b; echo "exit $?"
tq-verify frobnicate; echo "exit $?"
tq-verify ls missing.safetensors; echo "exit $?"
tq-verify --version >/dev/null; echo "exit $?"
tq-verify --help | grep -c '^  ls '
