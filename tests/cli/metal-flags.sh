# The Metal build's flags (scripts/metal-flags, the Makefile's kernels.air rule; docs/metal.md,
# Building), with a fake compiler in place of Apple's, which is not here: the fake accepts
# every flag but those in $REFUSE (refusing like clang, "unknown argument"), writes its output
# file and logs its command lines. Shown: -fmetal-math-mode=safe preferred, -fno-fast-math the
# fallback, the language pinned, and a compiler that accepts neither math flag (or not the
# language, or not -ffp-contract=off) stops make with a message instead of building with fast
# math. What Apple's compiler accepts is not shown here: only the logic that asks it.
. "$ROOT/tests/lib/common.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL

cat > fakemetal <<'SH'
#!/bin/sh
echo "$*" >> "$FAKE_LOG"
out=
while [ $# -gt 0 ]; do
  for r in $REFUSE; do
    [ "$1" = "$r" ] && { echo "error: unknown argument: '$1'" >&2; exit 1; }
  done
  [ "$1" = -o ] && { out=$2; shift; }
  shift
done
[ -n "$out" ] && echo air > "$out"
exit 0
SH
chmod +x fakemetal
export FAKE_LOG="$PWD/log"

# flags REFUSE: what scripts/metal-flags prints with the fake refusing REFUSE
flags() { REFUSE=$1 "$ROOT/scripts/metal-flags" ./fakemetal 2> flags.err; }

got=$(flags "") || fail "metal-flags refuses a compiler that accepts everything: $(cat flags.err)"
[ "$got" = "-std=metal3.0 -fmetal-math-mode=safe -ffp-contract=off" ] || fail "metal-flags with every flag accepted: $got"
got=$(flags "-fmetal-math-mode=safe") || fail "metal-flags without -fmetal-math-mode: $(cat flags.err)"
[ "$got" = "-std=metal3.0 -fno-fast-math -ffp-contract=off" ] || fail "metal-flags without -fmetal-math-mode: $got"
got=$(METAL_STD=metal3.1 flags "") || fail "METAL_STD=metal3.1: $(cat flags.err)"
[ "$got" = "-std=metal3.1 -fmetal-math-mode=safe -ffp-contract=off" ] || fail "METAL_STD=metal3.1: $got"
flags "-fmetal-math-mode=safe -fno-fast-math" > /dev/null && fail "metal-flags passed a compiler with neither math flag"
grep -q "accepts neither -fmetal-math-mode=safe nor -fno-fast-math" flags.err || fail "no reason given: $(cat flags.err)"
flags "-std=metal3.0" > /dev/null && fail "metal-flags passed a compiler that refuses -std=metal3.0"
grep -q "does not accept -std=metal3.0" flags.err || fail "no reason given: $(cat flags.err)"
flags "-ffp-contract=off" > /dev/null && fail "metal-flags passed a compiler that refuses -ffp-contract=off"
grep -q "does not accept -ffp-contract=off" flags.err || fail "no reason given: $(cat flags.err)"

# The Makefile's rule: builds kernels.air with the chosen flags, or stops with the reason
air() { # REFUSE
  rm -rf b log
  REFUSE=$1 make -s --no-print-directory -C "$ROOT" BUILD="$PWD/b" METAL_CC="$PWD/fakemetal" "$PWD/b/runtime/metal/kernels.air" > make.out 2>&1
}
air "" || fail "make kernels.air with the fake compiler: $(cat make.out)"
[ -s b/runtime/metal/kernels.air ] || fail "make did not build kernels.air"
grep -q -- "-std=metal3.0 -fmetal-math-mode=safe -ffp-contract=off -I. -c runtime/metal/kernels.metal" log ||
  fail "make built kernels.air without the chosen flags: $(tail -n 1 log)"
air "-fmetal-math-mode=safe" || fail "make kernels.air without -fmetal-math-mode: $(cat make.out)"
grep -q -- "-std=metal3.0 -fno-fast-math -ffp-contract=off -I. -c runtime/metal/kernels.metal" log ||
  fail "make built kernels.air without the fallback flags: $(tail -n 1 log)"
air "-fmetal-math-mode=safe -fno-fast-math" && fail "make built kernels.air with neither math flag"
[ ! -e b/runtime/metal/kernels.air ] || fail "make left a kernels.air after refusing"
grep -q "accepts neither" make.out || fail "make does not say why: $(cat make.out)"
grep -q "the Metal kernels were not built" make.out || fail "make does not say what it did not build: $(cat make.out)"
grep -q "runtime/metal/kernels.metal" log && fail "make compiled kernels.metal after refusing the flags"
echo "metal-flags: -fmetal-math-mode=safe, else -fno-fast-math, -std pinned; make stops when the compiler accepts neither"
