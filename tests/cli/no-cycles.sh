# No two source files call each other around a loop, and no headers include each other around
# one (scripts/check-cycles, over this build's objects); first shown to catch both kinds.
set -u
mkdir -p src/lib obj/lib
cat > src/lib/a.c <<'C'
int b_fn(void);
int a_fn(void) { return 1; }
int a_use(void) { return b_fn(); }
C
cat > src/lib/b.c <<'C'
int a_fn(void);
int b_fn(void) { return a_fn(); }
C
printf '#include "lib/y.h"\n' > src/lib/x.h
printf '#include "lib/x.h"\n' > src/lib/y.h
for f in a b; do cc -c src/lib/$f.c -o obj/lib/$f.o || exit 1; done
"$ROOT/scripts/check-cycles" obj src > out.txt 2>&1 && { echo "a circle went unnoticed"; cat out.txt; exit 1; }
grep -q 'calls circle among lib/a.c, lib/b.c' out.txt || { echo "call circle not reported"; cat out.txt; exit 1; }
grep -q 'includes circle among lib/x.h, lib/y.h' out.txt || { echo "include circle not reported"; cat out.txt; exit 1; }
"$ROOT/scripts/check-cycles" "$BUILD" || exit 1
