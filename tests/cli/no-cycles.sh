# No two source files call each other around a loop, no headers include each other around
# one, and no file calls or includes one of a higher layer (scripts/check-cycles, over this
# build's objects and a copy of the tree); first shown to catch each kind.
set -u
mkdir -p src/common obj/common
cat > src/common/a.c <<'C'
int b_fn(void);
int a_fn(void) { return 1; }
int a_use(void) { return b_fn(); }
C
cat > src/common/b.c <<'C'
int a_fn(void);
int b_fn(void) { return a_fn(); }
C
printf '#include "common/y.h"\n' > src/common/x.h
printf '#include "common/x.h"\n' > src/common/y.h
for f in a b; do cc -c src/common/$f.c -o obj/common/$f.o || exit 1; done
"$ROOT/scripts/check-cycles" obj src > out.txt 2>&1 && { echo "a circle went unnoticed"; cat out.txt; exit 1; }
grep -q 'calls circle among common/a.c, common/b.c' out.txt || { echo "call circle not reported"; cat out.txt; exit 1; }
grep -q 'includes circle among common/x.h, common/y.h' out.txt || { echo "include circle not reported"; cat out.txt; exit 1; }
grep -q 'up the layers' out.txt && { echo "an edge inside common/ was called upward"; cat out.txt; exit 1; }

# Direction: a copy of the tree's sources, with the object of a verify/ file, passes; add a
# common/ file that calls that verify/ function, or a common/ header that includes
# verify/verify.h, and it fails naming the edge (HACKING.md: cmd -> pipelines -> quant ->
# formats -> common).
mkdir tree tobj tobj/verify tobj/common
here=$PWD
(cd "$ROOT" && find cmd common formats layout quant runtime testdata/mkmodel tokenizer verify tq.h \
   -name '*.[chm]' -exec cp --parents -t "$here/tree" {} +) || exit 1
ln -s "$BUILD/verify/check.o" tobj/verify/check.o
sym=$(nm -P --defined-only tobj/verify/check.o | awk '$2 == "T" && $1 ~ /^tq_/ { print $1; exit }')
[ -n "$sym" ] || { echo "no tq_ function defined in verify/check.o"; exit 1; }
"$ROOT/scripts/check-cycles" tobj tree > out.txt 2>&1 || { echo "the copied tree fails as it is"; cat out.txt; exit 1; }
printf 'void %s(void);\nvoid tq_up(void) { %s(); }\n' "$sym" "$sym" > tree/common/zz_up.c
cc -c tree/common/zz_up.c -o tobj/common/zz_up.o || exit 1
"$ROOT/scripts/check-cycles" tobj tree > out.txt 2>&1 && { echo "a call from common/ up into verify/ went unnoticed"; cat out.txt; exit 1; }
grep -q "call up the layers: common/zz_up.c -($sym)-> verify/check.c: verify/check.c (pipelines) is above common/zz_up.c (common)" out.txt ||
  { echo "upward call not reported"; cat out.txt; exit 1; }
rm tree/common/zz_up.c tobj/common/zz_up.o
printf '#include "verify/verify.h"\n' > tree/common/zz_up.h
"$ROOT/scripts/check-cycles" tobj tree > out.txt 2>&1 && { echo "an include from common/ of verify/ went unnoticed"; cat out.txt; exit 1; }
grep -q 'include up the layers: common/zz_up.h -(#include)-> verify/verify.h' out.txt ||
  { echo "upward include not reported"; cat out.txt; exit 1; }
# a file in no layer is refused too (a new folder is placed in RANKS first)
rm tree/common/zz_up.h; mkdir tree/newroom
printf '#include "common/common.h"\n' > tree/newroom/n.c
"$ROOT/scripts/check-cycles" tobj tree > out.txt 2>&1 && { echo "a file in no layer went unnoticed"; cat out.txt; exit 1; }
grep -q 'newroom/n.c is in no layer of RANKS' out.txt || { echo "unranked file not reported"; cat out.txt; exit 1; }

"$ROOT/scripts/check-cycles" "$BUILD" || exit 1
