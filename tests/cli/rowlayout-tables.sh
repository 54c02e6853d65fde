# tq-rowlayout on every table form MTPLX serves: packed (U32 + scales + biases) and raw
# BF16/F16 weight rows (ngram_bits 0); the ngram_bits / ngram_group_size metadata tq-mkmodel
# writes is checked against the parts; --extract gives the source back byte for byte in both
# layouts; warnings when MTPLX cannot load the output (a prefix other than ngram, the paged
# layout, a raw table without ngram_bits) or it lands beside the source's shards.
set -u
. "$ROOT/tests/lib/common.sh"
for dt in bf16 f16; do
  run tq-mkmodel --arch ngram --bits 0 --dtype $dt --rows 300 --width 96 --seed 2 raw-$dt >/dev/null
  python3 - raw-$dt/model.safetensors $dt <<'PY' || fail "raw-$dt metadata"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
h = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
assert h["__metadata__"]["ngram_bits"] == "0" and h["__metadata__"]["ngram_group_size"] == "32", h
assert list(k for k in h if k != "__metadata__") == ["ngram.weight"], h
assert h["ngram.weight"]["dtype"] == sys.argv[2].upper() and h["ngram.weight"]["shape"] == [300, 96], h
PY
  for page in 0 4096; do
    out=r-$dt-$page.safetensors
    if [ $page = 0 ]; then run tq-rowlayout --quiet raw-$dt/model.safetensors --out $out
    else run tq-rowlayout --quiet raw-$dt/model.safetensors --out $out --page-align $page; fi
    run tq-rowlayout --quiet --check $out
    run tq-rowlayout --quiet --extract $out --to x-$dt-$page
    cmp x-$dt-$page/model.safetensors raw-$dt/model.safetensors || fail "$dt page $page: extract differs"
  done
done
# packed tables carry their recipe too, and it matches
run tq-mkmodel --arch ngram --bits 4 --rows 64 --seed 1 p4 >/dev/null
grep -q '"ngram_bits":"4","ngram_group_size":"32"' p4/model.safetensors || fail "packed metadata"
run tq-rowlayout --quiet p4/model.safetensors --out p4.rows
# metadata that contradicts the table is refused, naming it
python3 - p4/model.safetensors bad.safetensors <<'PY'
import sys
raw = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(raw.replace(b'"ngram_bits":"4"', b'"ngram_bits":"8"', 1))
PY
expect_msg 1 "__metadata__ says ngram_bits 8, ngram_group_size 32, but table 'ngram' does not match" tq-rowlayout bad.safetensors --out bad.rows
python3 - raw-bf16/model.safetensors raw4.safetensors <<'PY'
import sys
raw = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(raw.replace(b'"ngram_bits":"0"', b'"ngram_bits":"4"', 1))
PY
expect_msg 1 "a packed table needs a U32 weight" tq-rowlayout raw4.safetensors --out raw4.rows
# the numbers are canonical decimals: a leading zero is refused, not read as 8
python3 - p4/model.safetensors zero.safetensors <<'PY'
import sys
raw = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(raw.replace(b'"ngram_group_size":"32"', b'"ngram_group_size":"08"', 1))
PY
expect_msg 1 "__metadata__ ngram_bits '4' / ngram_group_size '08' are not valid numbers" tq-rowlayout zero.safetensors --out zero.rows
[ ! -e bad.rows ] && [ ! -e raw4.rows ] && [ ! -e zero.rows ] || fail "refused tables left output"
# warnings: a prefix other than ngram, the paged layout, an output inside the source's directory
run tq-mkmodel --arch ngram --bits 4 --rows 64 --prefix emb --seed 1 pe >/dev/null
tq-rowlayout pe/model.safetensors --prefix emb --out pe.rows >/dev/null 2>w1 || fail "prefix emb"
grep -q "^tq-rowlayout: warning: prefix 'emb': MTPLX reads only the table 'ngram'" w1 || fail "no prefix warning: $(cat w1)"
tq-rowlayout p4/model.safetensors --page-align 4096 --out paged.rows >/dev/null 2>w2 || fail "paged"
grep -q "^tq-rowlayout: warning: tq_rows_paged_v1 is tq's own layout: MTPLX loads only mtplx_ngram_rows_v1" w2 || fail "no paged warning: $(cat w2)"
tq-rowlayout p4/model.safetensors --out p4/rows.safetensors --json >j 2>w3 || fail "inside"
grep -q "inside the source's directory" w3 || fail "no directory warning: $(cat w3)"
grep -q '"warnings"' j || fail "warnings missing from --json"
tq-rowlayout --quiet p4/model.safetensors --out q.rows 2>w4 && [ ! -s w4 ] || fail "warned without cause: $(cat w4)"
# a raw table without ngram_bits: MTPLX's loader would read it as 4-bit packed rows
python3 - raw-f16/model.safetensors nometa.safetensors <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
del h["__metadata__"]
js = json.dumps(h).encode()
js += b" " * (-len(js) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(js)) + js + raw[8 + n:])
PY
tq-rowlayout nometa.safetensors --out nometa.rows >/dev/null 2>w5 || fail "no metadata: $(cat w5)"
grep -q "^tq-rowlayout: warning: raw F16 rows without __metadata__ ngram_bits \"0\"" w5 || fail "no raw warning: $(cat w5)"
run tq-rowlayout --quiet --extract nometa.rows --to nm
cmp nm/nometa.safetensors nometa.safetensors || fail "no-metadata table: extract differs"
