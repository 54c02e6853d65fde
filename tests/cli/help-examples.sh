# Every --help has examples (each tool, each tq-verify command and tq-verify itself), declared
# once in the tool's table (tq_cli_spec.examples), and every example runs as written: in one
# scratch directory, tool after tool in the order below, each line through bash, on the
# stand-in models the examples themselves make (tq-mkmodel's come first). The only stand-ins
# made here are what an example's comment says to make with openssl (key.pem, key.pub).
# Issue 32: no --help had an example.
. "$ROOT/tests/lib/common.sh"
command -v openssl >/dev/null || { echo "no openssl: sign and verify examples need its key"; exit 0; }
openssl ecparam -name prime256v1 -genkey -noout -out key.pem 2>/dev/null &&
  openssl pkey -in key.pem -pubout -out key.pub || fail "openssl key"
examples() { "$@" --help | sed -n '/^Examples:$/,/^$/{/^  /s/^  //p}'; }
n=0
for t in "tq-mkmodel" "tq-convert" "tq-split" "tq-run" "tq-rowlayout" \
  "tq-verify ls" "tq-verify manifest" "tq-verify check" "tq-verify sign" "tq-verify verify" \
  "tq-verify compare" "tq-verify golden" "tq-verify pack" "tq-verify unpack" "tq-verify quality" \
  "tq-verify provenance" "tq-verify"; do
  ex=$(examples $t)
  [ -n "$ex" ] || fail "$t --help has no Examples"
  while IFS= read -r line; do
    case $line in *"${t%% *}"*) ;; *) fail "$t: example '$line' does not run $t" ;; esac
    bash -c "$line" >ex.out 2>ex.err </dev/null || fail "$t: example '$line' exited $?: $(tail -n3 ex.err)"
    n=$((n + 1))
  done <<<"$ex"
done
# every tq-verify command is in the list above
cmds=$(tq-verify --list-commands) && [ -n "$cmds" ] || fail "tq-verify --list-commands"
for c in $cmds; do
  examples tq-verify "$c" | grep -q "^tq-verify $c " || fail "tq-verify $c: no example of its own"
done
echo "$n --help examples ran as written"
