# The metal tests in the shim's two GPU-like floating-point modes (docs/metal.md, Assumptions):
# fma — shim.c built with -ffp-contract=fast (and -mfma on x86-64), so products and sums fuse
# as a GPU compiler may (A2 dropped) — and ftz — TQ_SHIM_FTZ=1: subnormals flushed to zero
# during syncs (MXCSR FTZ+DAZ, FPCR.FZ; A4 dropped). In both, test_metal_kernels leaves out
# only the bit-for-bit comparisons that name the dropped assumption and keeps every error
# bound, and test_metal_decode holds the shim to the GPU's tolerance (relative 1e-3, the same
# greedy tokens). A model of a GPU's arithmetic on this CPU, not a GPU run.
. "$ROOT/tests/lib/common.sh"

K="$BUILD/shimvar/test_metal_kernels-fma" D="$BUILD/shimvar/test_metal_decode-fma"
[ -x "$K" ] && [ -x "$D" ] || fail "the fma variants are not built (make tests)"
worst() { sed -n 's/.*max relative logit error \([^ ]*\) over.*/\1/p' "$1" | sort -g | tail -n 1; }

case $(uname -m) in
  x86_64|amd64) fma_cpu=$(grep -m1 -ow fma /proc/cpuinfo 2>/dev/null || sysctl -n machdep.cpu.leaf7_features machdep.cpu.features 2>/dev/null | grep -o FMA) ;;
  aarch64|arm64) fma_cpu=yes ;;
  *) fma_cpu= ;;
esac
if [ -n "$fma_cpu" ]; then
  if command -v objdump >/dev/null; then
    nf=$(objdump -d "$BUILD/shimvar/shim-fma.o" | grep -c -E '\b(vfn?m(add|sub)[0-9a-z]*|fn?m(add|sub)|fml[as])\b')
    [ "$nf" -gt 0 ] || fail "the fma build of shim.c has no fused multiply-add instruction"
    echo "fma: shim.c built with $nf fused multiply-add instructions"
  fi
  "$K" > k.out 2>&1 || { grep -v -E '^(PASS|RUN) ' k.out | tail -n 20; fail "fma: test_metal_kernels fails"; }
  grep -q 'shim mode: fma' k.out || fail "fma: test_metal_kernels does not see the fma build"
  echo "fma: test_metal_kernels: $(tail -n 1 k.out)"
  "$D" > d.out 2>&1 || { grep -v -E '^(PASS|RUN) ' d.out | tail -n 20; fail "fma: test_metal_decode fails"; }
  echo "fma: test_metal_decode: $(tail -n 1 d.out), largest relative logit error $(worst d.out)"
else
  echo "fma: not run: this CPU has no fused multiply-add"
fi

case $(uname -m) in
  x86_64|amd64|aarch64|arm64)
    TQ_SHIM_FTZ=1 "$BUILD/tests/test_metal_kernels" > k.out 2>&1 || { grep -v -E '^(PASS|RUN) ' k.out | tail -n 20; fail "ftz: test_metal_kernels fails"; }
    grep -q 'shim mode: ftz' k.out || fail "ftz: test_metal_kernels does not see TQ_SHIM_FTZ"
    echo "ftz: test_metal_kernels: $(tail -n 1 k.out)"
    TQ_SHIM_FTZ=1 "$BUILD/tests/test_metal_decode" > d.out 2>&1 || { grep -v -E '^(PASS|RUN) ' d.out | tail -n 20; fail "ftz: test_metal_decode fails"; }
    echo "ftz: test_metal_decode: $(tail -n 1 d.out), largest relative logit error $(worst d.out)" ;;
  *) echo "ftz: not run: flush-to-zero is set for x86-64 and arm64 only" ;;
esac
