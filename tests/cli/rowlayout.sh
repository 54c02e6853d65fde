# tq-rowlayout: generated tables of several widths -> rows -> check -> extract byte-identical;
# paged layout; any prefix; receipts; usage and data errors with their exit codes.
set -u
. "$ROOT/tests/lib/safety.sh"
expect() { expect_msg "$1" "$2" tq-rowlayout "${@:3}"; } # expect STATUS MESSAGE-SUBSTRING ARGS...

# width 160, 4 bits, group 32: weight 20 u32 + 5 bf16 scales + 5 bf16 biases = 100-byte records
tq-mkmodel --arch ngram --quiet t100 || fail mkmodel
tq-mkmodel --arch ngram --width 96 --bits 8 --dtype f16 --rows 300 --prefix emb --quiet t108 || fail mkmodel
tq-mkmodel --arch ngram --width 64 --bits 2 --rows 5000 --quiet t24 || fail mkmodel
before=$(snapshot t100/model.safetensors t108/model.safetensors t24/model.safetensors)

for t in "t100 ngram 100 1024" "t108 emb 108 300" "t24 ngram 24 5000"; do
  set -- $t; d=$1 prefix=$2 stride=$3 rows=$4
  tq-rowlayout $d/model.safetensors --out $d.rows --prefix $prefix > $d.txt 2>err || fail "$d: $(cat err)"
  # one line by default, as every tool (issue 32: it was the 20-line receipt); --json has it
  [ "$(cat $d.txt)" = "$d.rows: $rows rows of $stride bytes (mtplx_ngram_rows_v1) from $d/model.safetensors, every row read back bit-exact" ] ||
    fail "$d: default report: $(cat $d.txt)"
  rm $d.rows
  tq-rowlayout $d/model.safetensors --out $d.rows --prefix $prefix --json > $d.json 2>err || fail "$d --json: $(cat err)"
  # a prefix other than ngram is warned about (MTPLX cannot load it); nothing else is said
  [ "$prefix" = ngram ] || grep -q "^tq-rowlayout: warning: prefix '$prefix'" err || fail "$d: no prefix warning"
  [ -z "$(grep -v "^tq-rowlayout: warning: prefix '$prefix'" err)" ] || fail "$d: stderr not empty: $(cat err)"
  grep -q "\"row_bytes\": $stride," $d.json || fail "$d: row_bytes: $(cat $d.json)"
  grep -q "\"rows\": $rows," $d.json || fail "$d: rows: $(cat $d.json)"
  grep -q "\"all_rows_bit_exact\": true" $d.json || fail "$d: bit exact"
  grep -q "\"format\": \"mtplx_ngram_rows_v1\"" $d.json || fail "$d: format"
  grep -q "\"header_sha256\": \"[0-9a-f]\{64\}\"" $d.json || fail "$d: identity"
  grep -q "\"output\": \"/.*/$d.rows\"" $d.json || fail "$d: output path"
  size=$(stat -c %s $d.rows); ds=$(( size - stride * rows ))
  [ $(( ds % 8 )) = 0 ] || fail "$d: data start $ds"
  tq-rowlayout --check $d.rows > out 2>err || fail "$d check: $(cat err)"
  grep -q "^$d.rows: OK: $rows rows of $stride bytes bit-exact" out || fail "$d check output: $(cat out)"
  tq-rowlayout --extract $d.rows --to ex-$d > out 2>err || fail "$d extract: $(cat err)"
  grep -q "byte-identical to the source file" out || fail "$d extract output: $(cat out)"
  cmp ex-$d/model.safetensors $d/model.safetensors || fail "$d: extracted file differs"
  # paged: no record straddles a 4 KiB page; check and extract read the layout from the file
  tq-rowlayout $d/model.safetensors --out $d.paged --prefix $prefix --page-align 4096 --json --quiet > p.json 2>err ||
    fail "$d paged: $(cat err)"
  grep -q '"paged": 0' p.json || fail "$d paged: straddles $(cat p.json)"
  grep -q '"format": "tq_rows_paged_v1"' p.json || fail "$d paged: format"
  [ $(( $(stat -c %s $d.paged) % 4096 )) = 0 ] || fail "$d paged: size not page multiple"
  tq-rowlayout --check $d.paged --quiet || fail "$d paged check"
  tq-rowlayout --extract $d.paged --to exp-$d --quiet || fail "$d paged extract"
  cmp exp-$d/model.safetensors $d/model.safetensors || fail "$d paged: extracted file differs"
done

# 100-byte records: many straddle a 4 KiB page in the plain layout, none in the paged one
tq-rowlayout t100/model.safetensors --out s.paged --page-align 4096 --json --quiet > s.json
ds=$(( $(stat -c %s t100.rows) - 102400 )) want=0
for ((r = 0; r < 1024; r++)); do
  a=$(( ds + r * 100 )); [ $(( a / 4096 )) != $(( (a + 99) / 4096 )) ] && want=$((want + 1))
done
[ "$want" -gt 20 ] || fail "expected straddles in the plain layout, computed $want"
grep -q "\"plain\": $want$" s.json || fail "straddle count, want $want: $(cat s.json)"
grep -q '"records_per_group": 40,' s.json || fail "records per page: $(cat s.json)"
tq-rowlayout t100/model.safetensors --out s2.paged --page-align 4096 --pad-stride --json --quiet > s2.json
grep -q '"slot_bytes": 128,' s2.json || fail "--pad-stride slot: $(cat s2.json)"

# any prefix: a quantized linear layer of a generated llama
tq-mkmodel --arch llama --quant affine4 --quiet ll || fail mkmodel llama
tq-rowlayout ll/model.safetensors --out lm.rows --prefix lm_head --quiet || fail "lm_head prefix"
tq-rowlayout --check lm.rows --json > c.json || fail "lm_head check"
grep -q '"row_bytes": 72,' c.json || fail "lm_head: 16 u32 + 2 + 2 bf16 = 72 bytes: $(cat c.json)"
tq-rowlayout --check lm.rows --prefix other >/dev/null 2>err; [ $? = 2 ] || fail "--check with a wrong prefix"

# explicit SOURCE for --check (also when the row file is moved elsewhere)
mkdir moved && cp t24.rows moved/ && tq-rowlayout t24/model.safetensors --check moved/t24.rows --quiet || fail "check with SOURCE"

# data errors: exit 1 with a message naming the problem; nothing written
expect 1 "has 1 dimensions; a row table needs 2-D parts" ll/model.safetensors --out e1 --prefix model.norm
# (a BF16 embedding table is a raw-row table now: tests/cli/rowlayout-tables.sh)
expect 1 "no tensor 'ngram.weight' (U32 2-D tables present: 'lm_head'" ll/model.safetensors --out e2
expect 1 "t100.rows: exists and is not empty (use --force to replace it)" t100/model.safetensors --out t100.rows
ln t100/model.safetensors hard.safetensors
expect 2 "hard.safetensors: the output is the input t100/model.safetensors itself" t100/model.safetensors --out hard.safetensors
expect 2 "the output is the input t100/model.safetensors itself" t100/model.safetensors --out ./t100/../t100/model.safetensors
expect 1 "missing.safetensors: No such file or directory" missing.safetensors --out e3
expect 1 "not a row file" --check t100/model.safetensors
head -c 1000 t24.rows > trunc.rows
expect 1 "runs past the end of the file (1000 bytes)" --check trunc.rows
expect 1 "source changed" t24/model.safetensors --check t100.rows
# a source path that is not UTF-8 by the one rule set (common/utf8.c: here a UTF-16 surrogate,
# which a laxer check once let into the header, where the canonical JSON then refused it): the
# row file is written without source_path, and checked against the source named again
sd=$(printf 'src\355\240\200'); mkdir "$sd" && cp t100/model.safetensors "$sd/" || fail "surrogate dir"
tq-rowlayout "$sd/model.safetensors" --out sur.rows --quiet 2>err || fail "surrogate path: $(cat err)"
expect 2 "does not record its source path" --check sur.rows
tq-rowlayout "$sd/model.safetensors" --check sur.rows >out 2>err || fail "surrogate check: $(cat err)"
grep -q "^sur.rows: OK: 1024 rows" out || fail "surrogate check output: $(cat out)"
ls e1 e2 e3 e1.partial-* e2.partial-* 2>/dev/null && fail "a failed run left output"

# usage errors: exit 2
expect 2 "give exactly one of --out, --check, --extract" t100/model.safetensors
expect 2 "give exactly one of" t100/model.safetensors --out a --check b
expect 2 "missing SOURCE" --out x
expect 2 "--extract needs --to" --extract t100.rows
expect 2 "invalid value .100. for --page-align (expected a multiple of 8 in \[8, 64M\] bytes)" t100/model.safetensors --out x --page-align 100
expect 2 "--pad-stride needs --page-align" t100/model.safetensors --out x --pad-stride
expect 2 "unknown option .--frobnicate." --frobnicate
expect 2 "invalid size" t100/model.safetensors --out x --chunk-size lots
tq-rowlayout --help | grep -q "^Usage: tq-rowlayout" || fail "--help"
tq-rowlayout --version | grep -q "^tq-rowlayout (tq) " || fail "--version"

after=$(snapshot t100/model.safetensors t108/model.safetensors t24/model.safetensors)
[ "$before" = "$after" ] || fail "an input file changed"
exit 0
