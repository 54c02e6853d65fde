# libtq.so exports the public API and nothing else: every defined dynamic symbol is a tq_ name
# declared with TQ_API in a public header, every TQ_API name is exported, and every function a
# public header declares carries TQ_API (a declaration without it would be hidden by
# -fvisibility=hidden). Before hidden visibility, libtq.so exported 159 internal symbols (cv_,
# rt_, rtm_, split_, rows_, tok_; issue 32): any internal rename would have broken its ABI.
# The tools and tests link libtq.a, where internal symbols stay linkable.
. "$ROOT/tests/lib/common.sh"
mkvar() { make -s --no-print-directory -C "$ROOT" BUILD="$BUILD" BIN="$BIN" "print-$1"; }
so=$BUILD/$(mkvar SO_REAL)
[ -f "$so" ] || fail "no $so"
if [ "$(uname -s)" = Darwin ]; then
  nm -gU "$so" | awk '{print $3}' | sed 's/^_//' | LC_ALL=C sort -u >exported
else
  # ASan's instrumentation of a global (check-asan) exports __odr_asan.NAME beside it
  nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^__odr_asan[._]' | LC_ALL=C sort -u >exported
fi
[ "$(wc -l <exported)" -gt 100 ] || fail "only $(wc -l <exported) exported symbols: is nm's output read right?"
if grep -vE '^tq_[A-Za-z0-9_]+$' exported >bad; then
  fail "libtq.so exports $(wc -l <bad) symbols that are not public tq_ functions: $(head -20 bad | tr '\n' ' ')"
fi
# The public headers: those make install installs (Makefile LIB_HDR).
hdrs=$(mkvar LIB_HDR)
(cd "$ROOT" && cat $hdrs) | tr '\n' ' ' | grep -oE 'TQ_API [^;(]*' | grep -oE 'tq_[a-z0-9_]+ *(\[[^]]*\])? *$' |
  sed 's/ *\[.*//; s/ *$//' | LC_ALL=C sort -u >declared
[ "$(wc -l <declared)" -gt 100 ] || fail "only $(wc -l <declared) TQ_API declarations found"
comm -23 declared exported >missing
[ ! -s missing ] || fail "declared with TQ_API but not exported (not defined?): $(tr '\n' ' ' <missing)"
comm -13 declared exported >extra
[ ! -s extra ] || fail "exported but not declared with TQ_API in a public header: $(tr '\n' ' ' <extra)"
# A function declared at file scope in a public header without TQ_API: a line that starts a
# declaration (a type at column 0) of a tq_ name followed by "(".
(cd "$ROOT" && grep -nE '^[a-z_][a-zA-Z0-9_ *]*[ *]tq_[a-z0-9_]+\(' $hdrs | grep -vE ':(TQ_API|typedef|static|return) ') >untagged
[ ! -s untagged ] || fail "public declarations without TQ_API: $(head -10 untagged)"
# tq.h, the one header, includes every public header, and its Stability paragraph names each
# in exactly one of its tiers (stable, experimental, internal).
sed -n '/^ \* Stability\./,/^ \* The conventions/p' "$ROOT/tq.h" >tiers
for t in stable experimental internal; do grep -q "^ \*   $t:" tiers || fail "tq.h has no '$t:' tier"; done
for h in $hdrs; do
  grep -qx "#include \"$h\"" "$ROOT/tq.h" || fail "tq.h does not include $h"
  n=$(grep -oE "(^|[ ,])$h([ ,]|\$)" tiers | wc -l)
  [ "$n" -eq 1 ] || fail "tq.h's stability tiers name $h $n times, not once"
done
echo "libtq.so exports $(wc -l <exported) symbols, all tq_ and declared with TQ_API: ok"
