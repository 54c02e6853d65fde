# The malformed-input check shared by the CLI tests of each parser (sourced, not a test).
#
#   ls_corpus DIR EXT   runs tq-verify ls --read on every DIR/*.EXT (DIR is a fuzz seed corpus,
#                       tests/fuzz/corpus/TARGET, the one home of the malformed files that the
#                       fuzz replay reads too). A valid-* file must exit 0; every other file
#                       must exit 1 with nothing on stdout, and its one error line is printed
#                       on stdout, for the test's .stdout.exact golden to pin. Files are named
#                       relative to DIR so that the messages do not depend on the checkout.
#                       Returns 1 at the first file that breaks this.

ls_corpus() {
  local dir=$1 ext=$2 f rc
  local out=$TQ_TMP/ls-corpus.out err=$TQ_TMP/ls-corpus.err
  (
    export LC_ALL=C # glob order
    cd "$dir" || exit 1
    for f in *."$ext"; do
      tq-verify ls --read --quiet "$f" >"$out" 2>"$err"; rc=$?
      if [[ $f == valid-* ]]; then
        [ "$rc" -eq 0 ] || { echo "$f: exit status $rc, expected 0" >&2; cat "$err" >&2; exit 1; }
        continue
      fi
      [ "$rc" -eq 1 ] || { echo "$f: exit status $rc, expected 1" >&2; cat "$err" >&2; exit 1; }
      [ -s "$out" ] && { echo "$f: unexpected stdout" >&2; exit 1; }
      cat "$err"
    done
  )
}
