# tq-convert that quantizes no weight (here: --keep '.*') says so on stderr and in --json
# ("nothing_quantized": true); an ordinary conversion reports false and warns nothing.
set -eu
tq-mkmodel --arch qwen3 --size tiny --seed 2 m >/dev/null
tq-convert --keep '.*' m k > k.out 2> k.err
grep -q 'tq-convert: warning: 0 weights were quantized' k.err || { cat k.err; exit 1; }
tq-convert --json --keep '.*' m kj > kj.json 2>/dev/null
grep -q '"nothing_quantized": true' kj.json
grep -q '"0 weights were quantized' kj.json
tq-convert --json m q > q.json 2> q.err
grep -q '"nothing_quantized": false' q.json
[ ! -s q.err ] || { cat q.err; exit 1; }
echo ok
