# The Metal type check without a Mac (scripts/msl-check: a stub compile as C++ for OpenCL 2021
# with Metal's address-space rules, and a lint for address spaces and barrier placement;
# docs/metal.md, What the checks prove). runtime/metal/kernels.metal must pass it; each case
# below is an invalid edit applied to a scratch copy of runtime/metal/ and must be refused, by
# the layer and with the message named. The first six are the edits issue 34's review showed
# passing the old check (C++ for OpenCL 1.0, generic address space on, as_type and the shuffle
# untyped), all six Metal errors: a pointer without an address space, a table without
# constant, a device-space global, a size-mismatched as_type, a helper parameter missing
# threadgroup, one missing thread. This is a consistency check against a model of Metal's
# rules (the stub, tests/lib/msl-stub/metal_stdlib), not Apple's compiler, which never ran here.
. "$ROOT/tests/lib/common.sh"
command -v clang >/dev/null || fail "clang is needed (scripts/install-deps installs it)"
command -v perl >/dev/null || fail "perl is needed to apply the edits"
CHECK="$ROOT/scripts/msl-check"

out=$("$CHECK" 2>&1) || fail "runtime/metal/kernels.metal fails the Metal type check: $out"

n=0
# case NAME FILE PERL-SUBSTITUTION LAYER MESSAGE: FILE under runtime/metal/ edited by
# perl -0pe (the whole file as one string), then msl-check must exit 1 with MESSAGE (grep -F)
# in the output of LAYER (compile: the stub compile; lint: the lint)
case_() {
  local name=$1 file=$2 expr=$3 layer=$4 msg=$5 rc
  rm -rf "$name" && mkdir -p "$name/runtime/metal" || fail "$name: scratch"
  cp "$ROOT"/runtime/metal/kernels.metal "$ROOT"/runtime/metal/*.h "$name/runtime/metal/"
  perl -0pi -e "$expr" "$name/runtime/metal/$file" || fail "$name: perl"
  cmp -s "$ROOT/runtime/metal/$file" "$name/runtime/metal/$file" && fail "$name: the edit did not apply"
  "$CHECK" "--$layer-only" --root "$name" > "$name.out" 2>&1; rc=$?
  [ "$rc" -eq 1 ] || fail "$name: the $layer check exits $rc on an invalid edit, not 1: $(cat "$name.out")"
  grep -qF -- "$msg" "$name.out" || fail "$name: the $layer check does not say '$msg': $(cat "$name.out")"
  n=$((n + 1))
}

# --- issue 34's six edits
case_ no-address-space kernels.metal \
  's/RTM_FN float rtm_ld\(uint dt, RTM_DEV const uchar \*p/RTM_FN float rtm_ld(uint dt, const uchar *p/' \
  compile "converts between mismatching address spaces"
case_ table-not-constant kernels.metal 's/^RTM_TABLE float rtm_e2m1/const float rtm_e2m1/m' \
  compile "program scope variable must reside in constant address space"
case_ device-global kernels.metal 's/^(RTM_TABLE float rtm_e2m1)/RTM_DEV float rtm_scratch[4];\n$1/m' \
  compile "program scope variable must reside in constant address space"
case_ as-type-size shim_internal.h 's/as_type<half>\(\(ushort\)\(h\)\)/as_type<half>((uint)(h))/' \
  compile "as_type between types of different sizes"
case_ param-not-threadgroup kernels.metal 's/RTM_TGMEM float \*sh RTM_TGFN_PARAMS/float *sh RTM_TGFN_PARAMS/' \
  compile "no matching function for call to 'rtm_softmax_tg'"
case_ param-not-thread kernels.metal 's/RTM_THREAD uint \*ids/uint *ids/' \
  lint "pointer to uint without an address space"
# the same fault in a cast: both layers see it
case_ cast-no-address-space kernels.metal 's/\(\(RTM_DEV const float \*\)p\)\[i\]/((const float *)p)[i]/' \
  lint "pointer to float without an address space"

# --- the old check's cases, kept: a threadgroup pointer passed for a device one, a threadgroup
# array outside a kernel, a double; and a shuffle of a 64-bit value (the stub's typed shuffles)
case_ threadgroup-for-device kernels.metal \
  's/rtm_softmax_tg\(x \+ \(ulong\)rtm_tgid \* a->stride, a->n, red, sh/rtm_softmax_tg(red, a->n, red, sh/' \
  compile "no matching function"
case_ threadgroup-in-helper kernels.metal \
  's/^RTM_FN float rtm_sigmoid\(float x\)$/RTM_FN float rtm_sigmoid2(float x)\n{ RTM_TGMEM float t[2]; t[0] = x; return t[0]; }\nRTM_FN float rtm_sigmoid(float x)/m' \
  compile "local address space"
case_ double kernels.metal 's/float p = 1.98412698412698413e-04f;/double p = 1.98412698412698413e-04;/' \
  compile "double"
case_ shuffle-64-bit shim_internal.h \
  's/uint rtm_oi_ = simd_shuffle_xor\(rtm_i_, rtm_m_\)/uint rtm_oi_ = (uint)simd_shuffle_xor((ulong)rtm_i_, rtm_m_)/' \
  compile "simd-group function on a type it is not declared for"

# --- barrier placement (the lint): GPU hangs or races the compile cannot see
case_ barrier-in-thread-branch kernels.metal \
  's/RTM_SIMD_MAX\(red\);\n    RTM_BARRIER\(\);\n    RTM_PHASE\(lid\) \{\n        if \(lid == 0u\)/RTM_SIMD_MAX(red);\n    if (rtm_lid < RTM_SIMD)\n        RTM_BARRIER();\n    RTM_PHASE(lid) {\n        if (lid == 0u)/' \
  lint "threadgroup barrier under a branch or loop on the thread index"
case_ barrier-in-phase kernels.metal \
  's/        if \(lid == 0u\)\n            sh\[0\] = rtm_groups_max\(red\);\n/        if (lid == 0u) {\n            sh[0] = rtm_groups_max(red);\n            RTM_BARRIER();\n        }\n/' \
  lint "threadgroup barrier inside an RTM_PHASE body"
case_ early-return kernels.metal \
  's/(    const ulong base = \(ulong\)rtm_tgid \* a->n;\n)/$1    if (rtm_lid >= a->n)\n        return;\n/' \
  lint "return under a condition on the thread index in rtm_k_rmsnorm"
case_ collective-in-lane-branch kernels.metal \
  's/    RTM_SIMD_SUM\(part, RTM_SIMD\);\n    RTM_BARRIER\(\);/    if (rtm_lid % 2u == 0u)\n        RTM_SIMD_SUM(part, RTM_SIMD);\n    RTM_BARRIER();/' \
  lint "collective (RTM_SIMD_*: the whole threadgroup in the shim) under a branch"
case_ barrier-on-derived-index kernels.metal \
  's/(    const ulong base = \(ulong\)rtm_tgid \* a->n;\n)/$1    const uint sg = rtm_lid \/ RTM_SIMD;\n    if (sg == 0u)\n        RTM_BARRIER();\n/' \
  lint "threadgroup barrier under a branch or loop on the thread index"
case_ loop-on-thread-index kernels.metal \
  's/    for \(uint j = 0; j < k; j\+\+\) \{\n        RTM_PHASE/    for (uint j = rtm_lid; j < k; j++) {\n        RTM_PHASE/' \
  lint "under a branch or loop on the thread index (line"
case_ break-in-phase kernels.metal \
  's/        if \(lid != 0u\)\n            continue;\n        float mean/        if (lid != 0u)\n            break;\n        float mean/' \
  lint "break directly in an RTM_PHASE body"

# --- the lint on Metal it must accept and refuse: a simd-group function under a branch on
# the simd group's index is uniform within each simd group (valid), one on the lane is not
cat > sg.metal <<'M'
kernel void k(device float *y [[buffer(0)]], uint sg [[simdgroup_index_in_threadgroup]],
              uint lane [[thread_index_in_simdgroup]])
{
    float v = y[lane];
    if (sg == 0u)
        v = simd_sum(v);
    y[lane] = v;
}
M
"$CHECK" --lint-only sg.metal > sg.out 2>&1 || fail "the lint refuses a simd_sum under a branch on the simd group: $(cat sg.out)"
sed 's/if (sg == 0u)/if (lane < 16u)/' sg.metal > lane.metal
"$CHECK" --lint-only lane.metal > lane.out 2>&1 && fail "the lint accepts a simd_sum under a branch on the lane"
grep -qF "simd-group function under a branch or loop on the thread index" lane.out || fail "lane.metal: $(cat lane.out)"
sed 's/if (sg == 0u)/if (sg == 0u) threadgroup_barrier(mem_flags::mem_threadgroup); if (sg == 0u)/' sg.metal > sgb.metal
"$CHECK" --lint-only sgb.metal > sgb.out 2>&1 && fail "the lint accepts a threadgroup barrier under a branch on the simd group"

echo "kernels.metal passes the Metal type check; $n invalid edits are refused, each by the check and with the message named"
