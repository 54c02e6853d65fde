# ggml tensor types are named (enum tq_ggml_type, formats/gguf_internal.h, ggml.h's numbers)
# and each lives in one row of formats/gguf_dequant.c (name, geometry, decoder, checks): no
# library file compares a type with a bare number or passes one to tq_ggml_*, and the rows are
# neither indexed nor switched on by number (issue 38). First shown to catch each on a copy.
# (The tests' reference, tests/unit/ggml_ref.c, keeps ggml.h's numbers on purpose: it is the
# oracle the enum is checked against, so it must not use the enum.)
. "$ROOT/tests/lib/common.sh"
set -u
lib="cmd common formats layout quant runtime tokenizer verify testdata/mkmodel"

# bare_numbers DIR: every offending line under DIR (a copy of the library's sources)
bare_numbers() {
  (cd "$1" &&
    grep -rnE '(^|[^a-zA-Z0-9_])(type|src_type|ggml_type)[[:space:]]*(==|!=)[[:space:]]*[0-9]' --include='*.[ch]' . ;
    grep -rnE 'tq_ggml_[a-z_]+\([[:space:]]*[0-9]' --include='*.[ch]' . ;
    grep -nE '(^|[^a-zA-Z0-9_])case[[:space:]]+[0-9]+[[:space:]]*:|^[[:space:]]*\[[0-9]+\][[:space:]]*=' formats/gguf_dequant.c
  ) || true
}

mkdir tree
here=$PWD
(cd "$ROOT" && find $lib -name '*.[chm]' -exec cp --parents -t "$here/tree" {} +) || fail "copying the sources"
grep -q 'types\[TQ_GGML_COUNT\]' tree/formats/gguf_dequant.c || fail "gguf_dequant.c has no types[TQ_GGML_COUNT] table"
out=$(bare_numbers tree)
[ -z "$out" ] || fail "bare ggml type numbers (use the TQ_GGML_ names and the type's row): $out"

# each kind of bare number, added to the copy, is caught
for add in 'static int z1(unsigned type) { return type == 29; }' \
           'static int z2(void) { return tq_ggml_type_can_dequant(39); }' \
           'static int z3(unsigned t) { switch (t) { case 30: return 1; } return 0; }' \
           'static const int z4[] = {
    [29] = 1};'; do
  cp "$ROOT/formats/gguf_dequant.c" tree/formats/gguf_dequant.c
  printf '%s\n' "$add" >> tree/formats/gguf_dequant.c
  [ -n "$(bare_numbers tree)" ] || fail "not caught: $add"
done
