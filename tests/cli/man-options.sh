# Every option a tool's --help lists (each tq-verify subcommand's too) is described in the
# tool's man page, so the option tables of cmd/ and man/tq-*.1 cannot drift apart.
set -u
bad=0
check() { # check MANPAGE COMMAND...
  local page=$ROOT/man/$1; shift
  [ -f "$page" ] || { echo "no man page $page"; bad=1; return; }
  local opts
  opts=$("$@" --help | sed -n 's/^  \(-[a-zA-Z0-9], \)\{0,1\}\(--[a-z0-9-]*\).*/\2/p')
  [ -n "$opts" ] || { echo "$*: no options found in --help"; bad=1; return; }
  for o in $opts; do
    # man pages write a dash as \- ; an option must not merely be a prefix (--keep, --keep-names)
    sed 's/\\-/-/g' "$page" | grep -qE -- "$o([^a-z0-9-]|$)" || { echo "$*: $o is not in man/$(basename "$page")"; bad=1; }
  done
}
for t in convert split rowlayout run mkmodel; do check tq-$t.1 tq-$t; done
check tq-verify.1 tq-verify
for c in $(tq-verify --help | sed -n 's/^  \([a-z]*\) .*/\1/p'); do check tq-verify.1 tq-verify "$c"; done
exit $bad
