# make install puts every tool, libtq.a, libtq.so (versioned soname), tq.pc, the public
# headers (tq.h and tq/), the man pages and the shell completions under DESTDIR/PREFIX;
# C and C++ programs build against the installed tree with <tq.h> and pkg-config alone,
# linked statically (tq-static.pc) and dynamically; make
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
# One header, found through pkg-config: PREFIX/include holds tq.h and the tq/ directory only,
# so a user's include path gains no generic names ("common/common.h" was one, issue 32).
[ "$(pkg-config --cflags-only-I tq | tr ' ' '\n' | grep "^-I$PWD/pfx")" = "-I$PWD/pfx/include" ] ||
  fail "pkg-config --cflags tq: $(pkg-config --cflags tq)"
[ "$(cd pfx/include && ls)" = "$(printf 'tq\ntq.h')" ] || fail "pfx/include holds: $(ls pfx/include)"
grep -rhE '^#include "' pfx/include | grep -v '^#include "tq/' && fail "an installed header includes a name outside tq/"
cat > prog.c <<'C'
#include <tq.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    /* SHA-256("abc") of FIPS 180-2, CRC-32 check value of "123456789" */
    static const unsigned char abc[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                                          0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                                          0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    unsigned char d[32];
    char v[32];
    tq_sha256_buf("abc", 3, d);
    snprintf(v, sizeof v, "%d.%d.%d", TQ_VERSION_MAJOR, TQ_VERSION_MINOR, TQ_VERSION_PATCH);
    return tq_dtype_size(TQ_DT_BF16) == 2 && tq_crc32("123456789", 9) == 0xCBF43926u && !memcmp(d, abc, 32) &&
                   !strcmp(v, TQ_VERSION) &&
                   TQ_VERSION_NUMBER == TQ_VERSION_MAJOR * 10000 + TQ_VERSION_MINOR * 100 + TQ_VERSION_PATCH
               ? 0
               : 1;
}
C
# A C++ program: the headers compile as C++ (-pedantic, no warnings) and extern "C" lets it link.
cat > prog.cc <<'C'
#include <tq.h>
#include <cstring>
#include <string>
int main()
{
    tq_err e;
    std::memset(&e, 0, sizeof e);
    tq_fail(&e, TQ_EDATA, "x.safetensors: %s", "bad");
    uint64_t sz = 0;
    tq_dtype dt;
    bool ok = tq_parse_size("16G", &sz) == 0 && sz == (uint64_t)16 << 30 && tq_dtype_from_name("BF16", &dt) == 0 &&
              dt == TQ_DT_BF16 && std::string(tq_dtype_name(TQ_DT_F16)) == "F16" && tq_exit_code(&e) == 1 &&
              std::string(TQ_VERSION) == std::to_string(TQ_VERSION_MAJOR) + "." + std::to_string(TQ_VERSION_MINOR) + "." +
                                             std::to_string(TQ_VERSION_PATCH);
    return ok ? 0 : 1;
}
C
# Under check-asan the installed library is instrumented: the program needs the same flags
# and cannot be fully static (the sanitizer runtime is a shared library).
san=(); nm "$PWD/pfx/lib/libtq.a" 2>/dev/null | grep __asan_ >/dev/null && san=($(mkvar SAN_LDFLAGS))
cc -Wall -Wextra -Werror -pedantic "${san[@]}" prog.c $(pkg-config --cflags --libs tq) -o prog-shared 2>cc.err ||
  fail "shared build with pkg-config: $(tail -5 cc.err)"
readelf -d prog-shared | grep "NEEDED.*\[$SONAME\]" >/dev/null || fail "prog-shared does not need $SONAME"
LD_LIBRARY_PATH=$PWD/pfx/lib ./prog-shared || fail "shared: wrong answers"
CXX=${CXX:-c++}
if command -v "$CXX" >/dev/null; then
  "$CXX" -std=c++11 -Wall -Wextra -Werror -pedantic "${san[@]}" prog.cc $(pkg-config --cflags --libs tq) -o prog-cxx 2>cxx.err ||
    fail "C++ build with pkg-config: $(tail -5 cxx.err)"
  LD_LIBRARY_PATH=$PWD/pfx/lib ./prog-cxx || fail "C++: wrong answers"
else
  fail "no C++ compiler ($CXX): scripts/install-deps installs g++ (build-essential)"
fi
# Static, as README says: pkg-config --libs tq-static names libtq.a itself; the system
# libraries stay shared (Debian ships no static cJSON). The program must not need libtq.so.
cc "${san[@]}" prog.c $(pkg-config --cflags --libs tq-static) -o prog-static 2>cc.err ||
  fail "static libtq build with pkg-config tq-static: $(tail -5 cc.err)"
readelf -d prog-static | grep "NEEDED.*libtq" && fail "prog-static needs libtq.so"
ldd ./prog-static | grep libtq && fail "prog-static loads libtq.so"
(unset LD_LIBRARY_PATH; ./prog-static) || fail "static: wrong answers"
mk uninstall PREFIX="$PWD/pfx" || fail "make uninstall PREFIX=pfx"
[ -z "$(find pfx -mindepth 1)" ] || fail "uninstall left: $(find pfx -mindepth 1)"
echo "installed, built C static and shared and C++ with pkg-config and <tq.h>, uninstalled: ok"
