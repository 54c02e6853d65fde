# tq-convert: usage errors exit 2, data errors exit 1, each with a 'tq-convert:' message,
# and a failed conversion leaves no output directory behind.
set -u
. "$ROOT/tests/lib/common.sh"
tq-mkmodel --arch qwen3_moe --size tiny --seed 3 m >/dev/null || exit 1
expect() { expect_exit "$1" tq-convert "${@:2}"; } # expect STATUS ARGS...
expect 2 m
expect 2 --bits 5 m o
expect 2 --group-size 48 m o
expect 2 --scale max m o
expect 2 --bits-for down_proj m o
expect 2 --bits-for down_proj=8 m o
expect 2 --dtype f8 m o
expect 2 --threads 0 m o
expect 2 --dequantize --no-quantize m o
expect 2 --keep '(' m o
expect 2 --bogus m o
expect 1 nonexistent o
[ ! -e o ] || { echo "output left behind"; exit 1; }
tq-convert --quiet m q || exit 1
expect 1 m q                 # not empty, no --force
expect 1 q o                 # already quantized
expect 1 --dequantize m o    # nothing to dequantize
[ ! -e o ] || { echo "output left behind"; exit 1; }
ls -a | grep -q partial && { echo "partial directory left behind"; exit 1; }
tq-convert --version | grep -q '^tq-convert (tq) ' || exit 1
tq-convert --help | grep -q -- '--bits-for REGEX=B' || exit 1
exit 0
