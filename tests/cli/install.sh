# make install puts every tool, libtq.a, the public headers and the man pages under
# DESTDIR/PREFIX, and a program builds against the installed headers and library alone.
. "$ROOT/tests/lib/safety.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL
make -s -C "$ROOT" BUILD="$BUILD" BIN="$BIN" install PREFIX=/usr DESTDIR="$PWD/inst" >/dev/null || fail "make install"
P=$PWD/inst/usr
for t in convert mkmodel rowlayout run split verify; do
  "$P/bin/tq-$t" --version | grep -q "^tq-$t (tq) " || fail "tq-$t --version"
  [ -s "$P/share/man/man1/tq-$t.1" ] || fail "man page tq-$t.1 missing"
done
[ -s "$P/share/man/man5/tq-formats.5" ] || fail "tq-formats.5 missing"
[ -s "$P/lib/libtq.a" ] || fail "libtq.a missing"
cat > prog.c <<'C'
#include "formats/formats.h"
#include "quant/quant.h"
#include "formats/flash.h"
#include "quant/convert/convert.h"
#include "layout/split/split.h"
#include "layout/rows/rows.h"
#include "verify/verify.h"
#include "runtime/runtime.h"
int main(void) { return tq_dtype_size(TQ_DT_BF16) == 2 && tq_crc32("123456789", 9) == 0xCBF43926u ? 0 : 1; }
C
# Built as a user would, with the C standard, library flags and link flags the Makefile names
# (plus its sanitizer flags when the installed library is check-asan's).
mkvar() { make -s --no-print-directory -C "$ROOT" "print-$1"; }
san=(); nm "$P/lib/libtq.a" 2>/dev/null | grep -q __asan_ && san=($(mkvar SAN_LDFLAGS))
cc $(mkvar CSTD) "${san[@]}" -I"$P/include/tq" $(mkvar PKG_CFLAGS) prog.c "$P/lib/libtq.a" \
  $(mkvar LDFLAGS) $(mkvar LDLIBS) -o prog || fail "building against the installed headers"
./prog || fail "installed library gives wrong answers"
echo "installed: $(ls "$P/bin" | tr '\n' ' ')"
