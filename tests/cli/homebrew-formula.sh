# Formula/tq.rb (the Homebrew formula) parses as Ruby (ruby -c, when ruby is installed), and
# its depends_on lines name exactly the build set of scripts/install-deps' BREW_TABLE: a
# consistency check between the two files, not a proof that the names are Homebrew's (those
# were checked by hand against formulae.brew.sh; see the table's comment). Nothing here runs
# brew: the formula has never been run.
. "$ROOT/tests/lib/common.sh"
f=$ROOT/Formula/tq.rb
[ -f "$f" ] || fail "no Formula/tq.rb"

# depends_on "name" (=> :build or not), sorted, against the table's build rows.
sed -n 's/^ *depends_on "\([^"]*\)".*/\1/p' "$f" | LC_ALL=C sort >formula
[ -s formula ] || fail "no depends_on line in Formula/tq.rb"
sed -n "/^BREW_TABLE='/,/'\$/p" "$ROOT/scripts/install-deps" | sed "s/^BREW_TABLE='//" |
  awk -F'|' '$2 == "build" {print $1}' | LC_ALL=C sort >table
[ -s table ] || fail "no build rows found in scripts/install-deps' BREW_TABLE"
cmp -s formula table || fail "Formula/tq.rb depends_on and install-deps' brew build set differ:
$(diff formula table)"
# pkg-config is a build tool only
grep -x '  depends_on "pkgconf" => :build' "$f" >/dev/null || fail "pkgconf is not depends_on ... => :build"

if command -v ruby >/dev/null 2>&1; then
  ruby -c "$f" >/dev/null 2>err || fail "ruby -c Formula/tq.rb: $(cat err)"
  echo "homebrew-formula: depends_on agrees; ruby -c ok"
else
  echo "homebrew-formula: depends_on agrees; ruby -c skipped: no ruby on this machine"
fi
