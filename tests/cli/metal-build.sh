# The Metal backend's build pieces that can be checked without a Mac (docs/metal.md, What ran
# where): the Makefile's line about the host code; make check-metal refusing to pass without
# Metal; scripts/embed-bytes, which embeds the
# metallib, round-trips bytes. Where the real Metal compiler is present the build itself compiles
# the kernels; without it, tests/cli/metal-typecheck.sh type-checks them against a model of
# Metal's rules.
. "$ROOT/tests/lib/common.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL

note=$(make -s --no-print-directory -C "$ROOT" metal-note) || fail "make metal-note"
if [ "$(uname -s)" = Darwin ] && xcrun -sdk macosx -f metal >/dev/null 2>&1; then
  case $note in *"Metal backend: "*) ;; *) fail "make on a Mac with the Metal compiler says: $note" ;; esac
  echo "the Metal compiler builds runtime/metal/kernels.metal in this build"
  exit 0
fi
case $note in *"Metal host code (runtime/metal/metal.m) skipped: "*"tested through the C shim"*) ;;
  *) fail "the build does not say the Metal host code is skipped: $note" ;; esac
# make check-metal without Metal: stops at once, exit 2, saying it did not run and why
make -s --no-print-directory -C "$ROOT" check-metal > cm.out 2> cm.err && fail "make check-metal passed without Metal"
grep -q "check-metal: not run: .*skipped" cm.err || fail "make check-metal: $(cat cm.err)"
grep -q "needs macOS" cm.err || fail "make check-metal does not say what it needs: $(cat cm.err)"

# embed-bytes: every byte value, through a C compiler and back
awk 'BEGIN { for (r = 0; r < 3; r++) for (i = 0; i < 256; i++) printf "%c", i }' > bytes.bin
[ "$(wc -c < bytes.bin)" -eq 768 ] || fail "could not write the 768 test bytes"
run "$ROOT/scripts/embed-bytes" blob bytes.bin > blob.c
cat > main.c <<'C'
#include <stddef.h>
#include <stdio.h>
extern const unsigned char blob[];
extern const size_t blob_len;
int main(void) { return fwrite(blob, 1, blob_len, stdout) == blob_len ? 0 : 1; }
C
run cc -Wall -Werror -o embed blob.c main.c
./embed > back.bin || fail "the embedded bytes could not be written back"
cmp -s bytes.bin back.bin || fail "scripts/embed-bytes changed the bytes"
: > empty.bin
"$ROOT/scripts/embed-bytes" blob empty.bin > /dev/null 2> err && fail "embed-bytes accepted an empty file"
grep -q "missing or empty" err || fail "embed-bytes: no message for an empty file ($(cat err))"
