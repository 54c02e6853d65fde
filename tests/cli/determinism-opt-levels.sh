# Output bytes do not depend on the optimization level: the pipeline run by tools built with
# -O0 gives the same files and logits as the tools under test (-O2, or the sanitizer build).
. "$ROOT/tests/lib/safety.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL
make -s -C "$ROOT" BUILD="$PWD/b0" BIN="$PWD/b0/bin" OPT=-O0 EXTRA_CFLAGS= EXTRA_LDFLAGS= tools >/dev/null \
  || fail "building the -O0 tools"
pipeline() { # BIN_DIR OUT_DIR (run inside OUT_DIR: split.json records source paths as given)
  local b=$1
  mkdir -p "$2" && cd "$2" || fail "mkdir $2"
  "$b/tq-mkmodel" --quiet --seed 21 --naming hf m || fail "$b mkmodel"
  "$b/tq-convert" --quiet m c3 || fail "$b convert"
  "$b/tq-convert" --quiet --bits 4 --group-size 32 --scale rms m c4 || fail "$b convert 4"
  "$b/tq-convert" --quiet --dequantize c3 d3 || fail "$b dequantize"
  "$b/tq-split" --quiet c3 s3 || fail "$b split"
  "$b/tq-run" --quiet s3 --tokens 5,6,7 --max-tokens 4 --logits logits.f32 > tokens || fail "$b run"
  cd ..
}
pipeline "$PWD/b0/bin" o0
pipeline "$BIN" o2
for x in m c3 c4 d3 s3 logits.f32 tokens; do
  [ "$(tree_hash o0/$x)" = "$(tree_hash o2/$x)" ] || fail "$x differs between -O0 and the tested build"
done
echo "-O0 and tested build agree on every output"
