# The Metal backend's build pieces that can be checked without a Mac (docs/metal.md, What ran
# where): the Makefile's line about the host code; make check-metal refusing to pass without
# Metal; scripts/embed-bytes, which embeds the
# metallib, round-trips bytes; and kernels.metal's Metal branch type-checks as C++ for OpenCL
# with Metal's address spaces mapped onto OpenCL's (tests/lib/msl-stub/metal_stdlib), first shown
# to reject a threadgroup pointer passed for a device one, a threadgroup array outside a kernel
# and a double. Where the real Metal compiler is present the build itself compiles the kernels.
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

# kernels.metal's Metal branch as C++ for OpenCL
command -v clang >/dev/null || fail "clang is needed (scripts/install-deps installs it)"
msl() { # FILE
  clang -fsyntax-only -x clcpp -cl-std=clc++1.0 -target spir64 -Xclang -cl-ext=-cl_khr_fp64 \
    -D__METAL_VERSION__=300 -isystem "$ROOT/tests/lib/msl-stub" -I"$ROOT" \
    -Wall -Wextra -Werror -Wno-unknown-attributes -Wno-unused-parameter "$1"
}
K="$ROOT/runtime/metal/kernels.metal"
sed 's/rtm_mv_quant(w, xr, y,/rtm_mv_quant(w, part, y,/' "$K" > bad1.metal
sed 's/^RTM_FN float rtm_sigmoid(float x)$/RTM_FN float rtm_sigmoid(float x)\n{ RTM_TGMEM float t[2]; t[0] = x; return t[0]; }\nRTM_FN float rtm_sigmoid2(float x)/' "$K" > bad2.metal
sed 's/float p = 1.98412698412698413e-04f;/double p = 1.98412698412698413e-04;/' "$K" > bad3.metal
for b in bad1 bad2 bad3; do
  cmp -s "$K" $b.metal && fail "$b: the mutation did not apply"
  msl $b.metal > $b.err 2>&1 && fail "$b.metal type-checks, but must not"
done
grep -q "no matching function" bad1.err || fail "bad1: $(cat bad1.err)"
grep -q "local address space" bad2.err || fail "bad2: $(cat bad2.err)"
grep -q "cl_khr_fp64" bad3.err || fail "bad3: $(cat bad3.err)"
msl "$K" || fail "runtime/metal/kernels.metal does not type-check as Metal"
echo "kernels.metal type-checks with Metal's address spaces"
