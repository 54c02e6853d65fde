# Output bytes do not depend on how the tools were built: the pipeline run by tools built
# with -O0 and -funsigned-char (plain char is signed on x86-64 and Apple's arm64, unsigned on
# Linux's arm64: the one build covers both without a third compile), and by tools built with
# the other compiler (clang when cc is gcc, gcc when it is
# clang; they take different vector code paths), gives the same files and logits as the
# tools under test (-O2, or the sanitizer build). Without a second compiler that part is
# skipped with a note; .ci/run installs clang so CI always runs it.
. "$ROOT/tests/lib/safety.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL
build() { # DIR MAKE-ARGS...
  local d=$1; shift
  make -s -C "$ROOT" BUILD="$PWD/$d" BIN="$PWD/$d/bin" EXTRA_CFLAGS= EXTRA_LDFLAGS= "$@" tools >/dev/null \
    || fail "building the tools with: $*"
}
pipeline() { # BIN_DIR OUT_DIR (run inside OUT_DIR: split.json records source paths as given)
  local b=$1
  mkdir -p "$2" && cd "$2" || fail "mkdir $2"
  "$b/tq-mkmodel" --quiet --seed 21 --naming hf m || fail "$b mkmodel"
  "$b/tq-convert" --quiet m c3 || fail "$b convert"
  "$b/tq-convert" --quiet --bits 2 m c2 || fail "$b convert 2"
  "$b/tq-convert" --quiet --bits 4 --group-size 128 m c4l || fail "$b convert 4 lsq"
  "$b/tq-convert" --quiet --bits 4 --group-size 32 --scale rms m c4 || fail "$b convert 4 rms"
  "$b/tq-convert" --quiet --bits 3 --scale rms m c3r || fail "$b convert 3 rms"
  "$b/tq-convert" --quiet --dequantize c3 d3 || fail "$b dequantize"
  "$b/tq-split" --quiet c3 s3 || fail "$b split"
  "$b/tq-run" --quiet s3 --tokens 5,6,7 --max-tokens 4 --logits logits.f32 > tokens || fail "$b run"
  cd ..
}
same() { # DIR LABEL
  for x in m c3 c2 c4l c4 c3r d3 s3 logits.f32 tokens; do
    [ "$(tree_hash "$1/$x")" = "$(tree_hash "tested/$x")" ] || fail "$x differs between $2 and the tested build"
  done
  echo "$2 and tested build agree on every output"
}
pipeline "$BIN" tested
build b0 OPT=-O0 EXTRA_CFLAGS=-funsigned-char
pipeline "$PWD/b0/bin" o0
same o0 "-O0 -funsigned-char"
# The same build against every golden output (testdata/golden, made by the default signed-char
# build): the tokenizer and chat templates, which read text bytes, are covered there too.
BIN="$PWD/b0/bin" "$ROOT/scripts/verify" >verify.log 2>&1 || { cat verify.log; fail "the -funsigned-char build does not give testdata/golden (make verify)"; }
echo "-O0 -funsigned-char build gives testdata/golden"
case "$(${CC:-cc} --version 2>/dev/null | head -n1)" in
  *clang*) other=gcc ;;
  *) other=clang ;;
esac
if command -v "$other" >/dev/null; then
  build bc CC="$other"
  pipeline "$PWD/bc/bin" oc
  same oc "$other"
else
  echo "no $other: the second-compiler comparison was skipped"
fi
