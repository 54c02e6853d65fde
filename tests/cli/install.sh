# make install puts every tool, libtq.a, libtq.so (versioned soname), tq.pc, the public
# headers, the man pages and the shell completions under DESTDIR/PREFIX; programs build
# against the installed tree with pkg-config alone, linked statically and dynamically; make
# uninstall removes exactly what install put there.
. "$ROOT/tests/lib/safety.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL
mk() { make -s -C "$ROOT" BUILD="$BUILD" BIN="$BIN" "$@"; }
mkvar() { make -s --no-print-directory -C "$ROOT" BUILD="$BUILD" BIN="$BIN" "print-$1"; }
V=$(mkvar VERSION) SONAME=$(mkvar SO_NAME) REAL=$(mkvar SO_REAL)

# --- DESTDIR staging over a tree that already holds other software: uninstall restores it.
mkdir -p inst/usr/bin inst/usr/lib/pkgconfig inst/usr/share/man/man1
echo other >inst/usr/bin/other-tool; echo other >inst/usr/share/man/man1/other.1
before=$(cd inst && find . | LC_ALL=C sort)
mk install PREFIX=/usr DESTDIR="$PWD/inst" >/dev/null || fail "make install"
P=$PWD/inst/usr
for t in convert mkmodel rowlayout run split verify; do
  "$P/bin/tq-$t" --version | grep -q "^tq-$t (tq) " || fail "tq-$t --version"
  [ -s "$P/share/man/man1/tq-$t.1" ] || fail "man page tq-$t.1 missing"
  [ -s "$P/share/bash-completion/completions/tq-$t" ] || fail "bash completion tq-$t missing"
done
[ -s "$P/share/man/man5/tq-formats.5" ] || fail "tq-formats.5 missing"
[ -s "$P/lib/libtq.a" ] || fail "libtq.a missing"
[ -f "$P/lib/$REAL" ] && [ "$(readlink "$P/lib/$SONAME")" = "$REAL" ] || fail "$REAL / $SONAME missing"
[ "$(readlink "$P/lib/libtq.so")" = "$SONAME" ] || fail "libtq.so link missing"
[ -s "$P/share/zsh/site-functions/_tq" ] || fail "zsh completion missing"
grep -qx "prefix=/usr" "$P/lib/pkgconfig/tq.pc" || fail "tq.pc prefix"
grep -qx "Version: $V" "$P/lib/pkgconfig/tq.pc" || fail "tq.pc version"
# The soname names the major version only.
readelf -d "$P/lib/$REAL" | grep -q "SONAME.*\[$SONAME\]" || fail "soname of $REAL is not $SONAME"
mk uninstall PREFIX=/usr DESTDIR="$PWD/inst" || fail "make uninstall"
after=$(cd inst && find . | LC_ALL=C sort)
[ "$before" = "$after" ] || fail "uninstall left or removed: $(diff <(echo "$before") <(echo "$after"))"
# A second uninstall has nothing to go by and says so.
mk uninstall PREFIX=/usr DESTDIR="$PWD/inst" 2>err && fail "second uninstall succeeded"
grep -q "no record of an installation" err || fail "second uninstall: $(cat err)"

# --- A real prefix: build with pkg-config alone, shared and static.
mk install PREFIX="$PWD/pfx" >/dev/null || fail "make install PREFIX=pfx"
mk install PREFIX="$PWD/pfx" >/dev/null || fail "make install again (over an installed tree)"
export PKG_CONFIG_PATH=$PWD/pfx/lib/pkgconfig
[ "$(pkg-config --modversion tq)" = "$V" ] || fail "pkg-config --modversion tq"
cat > prog.c <<'C'
#include "formats/formats.h"
#include "quant/quant.h"
#include "formats/flash.h"
#include "quant/convert/convert.h"
#include "layout/split/split.h"
#include "layout/rows/rows.h"
#include "verify/verify.h"
#include "runtime/runtime.h"
#include <string.h>
int main(void)
{
    /* SHA-256("abc") of FIPS 180-2, CRC-32 check value of "123456789" */
    static const unsigned char abc[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                                          0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                                          0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    unsigned char d[32];
    tq_sha256_buf("abc", 3, d);
    return tq_dtype_size(TQ_DT_BF16) == 2 && tq_crc32("123456789", 9) == 0xCBF43926u && !memcmp(d, abc, 32) ? 0 : 1;
}
C
# Under check-asan the installed library is instrumented: the program needs the same flags
# and cannot be fully static (the sanitizer runtime is a shared library).
san=(); nm "$PWD/pfx/lib/libtq.a" 2>/dev/null | grep -q __asan_ && san=($(mkvar SAN_LDFLAGS))
cc "${san[@]}" prog.c $(pkg-config --cflags --libs tq) -o prog-shared || fail "shared build with pkg-config"
readelf -d prog-shared | grep -q "NEEDED.*\[$SONAME\]" || fail "prog-shared does not need $SONAME"
LD_LIBRARY_PATH=$PWD/pfx/lib ./prog-shared || fail "shared: wrong answers"
# Static: libtq.a picked by name (-l:libtq.a where -ltq would take the .so) with the private
# requirements pkg-config --static adds; the system libraries stay shared (Debian ships no
# static cJSON).
cc "${san[@]}" prog.c $(pkg-config --static --cflags --libs tq | sed 's/-ltq /-l:libtq.a /') -o prog-static 2>cc.err ||
  fail "static libtq build with pkg-config --static: $(tail -5 cc.err)"
readelf -d prog-static | grep -q "NEEDED.*libtq" && fail "prog-static needs libtq.so"
./prog-static || fail "static: wrong answers"
mk uninstall PREFIX="$PWD/pfx" || fail "make uninstall PREFIX=pfx"
[ -z "$(find pfx -mindepth 1)" ] || fail "uninstall left: $(find pfx -mindepth 1)"
echo "installed, built static and shared with pkg-config, uninstalled: ok"
