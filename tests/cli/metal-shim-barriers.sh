# The shim sees barriers (docs/metal.md, The shim): the metal kernel tests, built against a copy
# of runtime/metal/kernels.metal whose barriers can be switched off (scripts/shim-barriers,
# Makefile shimvar/), must pass with every barrier kept, fail with every barrier deleted, and
# fail — with the shim's "on a GPU this hangs" message, not a hang — when any one barrier is
# moved into the divergent branch `if (lid == 0)`. This tests the shim (a consistency check of
# the test tool), not a GPU: on a GPU a missing barrier is a race and a divergent one a hang.
. "$ROOT/tests/lib/common.sh"

V="$BUILD/shimvar/test_metal_kernels-mut"
[ -x "$V" ] || fail "$V is not built (make tests)"
n=$(cat "$BUILD/shimvar/barriers.count") || fail "no $BUILD/shimvar/barriers.count"
[ "$n" -ge 1 ] || fail "scripts/shim-barriers found no barrier"
# the kernels with barriers (or simd collectives) and the cases that run them
export TQ_METAL_CASES="hadamard_bits matvec_tq matvec_affine unpack_bits rmsnorm softmax attention route mla deltanet"

TQ_SHIM_MUT=0 "$V" > keep.out 2>&1 || { tail -n 20 keep.out; fail "every barrier kept: the tests fail"; }
echo "all $n barriers kept: $(tail -n 1 keep.out)"

TQ_SHIM_MUT=-1 "$V" > none.out 2>&1 && fail "every barrier deleted: the tests still pass"
nf=$(grep -c '^FAIL ' none.out)
[ "$nf" -ge 1 ] || { tail -n 20 none.out; fail "every barrier deleted: the test died without a FAIL line"; }
grep -q 'this hangs' none.out && fail "every barrier deleted: reported as a divergent barrier"
echo "all $n barriers deleted: $nf cases fail:$(sed -n 's/^FAIL shim\/\([a-z_]*\):.*/\1/p' none.out | sort -u | tr '\n' ' ' | sed 's/^/ /')"

k=1
while [ "$k" -le "$n" ]; do
  TQ_SHIM_MUT=$k timeout 60 "$V" > div.out 2>&1; rc=$?
  [ "$rc" -eq 124 ] && fail "barrier $k in a divergent branch: the tests hang"
  [ "$rc" -ne 0 ] || fail "barrier $k in a divergent branch: the tests pass"
  grep -q 'on a GPU this hangs' div.out || { tail -n 20 div.out; fail "barrier $k in a divergent branch: no divergence message"; }
  k=$((k + 1))
done
echo "each of the $n barriers alone in a divergent branch: the shim reports it, e.g."
grep -o 'shim: kernel .*' div.out | sed -n 1p
