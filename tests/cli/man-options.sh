# Every option a tool's --help lists, long and short form, is described in the tool's man
# page (a tq-verify subcommand's in that command's section), so the option tables of cmd/
# and man/tq-*.1 cannot drift apart.
set -u
bad=0
has() { # has TEXTFILE OPTION: OPTION stands there as a word (--keep is not --keep-names)
  grep -qE -- "(^|[^a-zA-Z0-9-])$2([^a-zA-Z0-9-]|$)" "$1"
}
check() { # check TEXTFILE WHERE COMMAND...
  local text=$1 where=$2; shift 2
  local opts
  opts=$("$@" --help | sed -n 's/^  \(-[a-zA-Z0-9]\), \(--[a-z0-9-]*\).*/\1 \2/p; s/^  \(--[a-z0-9-]*\).*/\1/p')
  [ -n "$opts" ] || { echo "$*: no options found in --help"; bad=1; return; }
  for o in $opts; do
    has "$text" "$o" || { echo "$*: $o is not in $where"; bad=1; }
  done
}
# man pages write a dash as \- and switch fonts with \fB, \fI, \fR, \fP
for t in convert split rowlayout run mkmodel verify; do
  [ -f "$ROOT/man/tq-$t.1" ] || { echo "no man/tq-$t.1"; bad=1; continue; }
  sed 's/\\-/-/g; s/\\f[BIRP]//g' "$ROOT/man/tq-$t.1" > tq-$t.man
done
for t in convert split rowlayout run mkmodel verify; do check tq-$t.man "man/tq-$t.1" tq-$t; done
cmds=$(tq-verify --list-commands) && [ -n "$cmds" ] || { echo "tq-verify --list-commands failed"; bad=1; }
for c in $cmds; do
  sed -n "/^\.SS $c\$/,/^\.S[SH] /p" tq-verify.man > section.man
  [ -s section.man ] || { echo "man/tq-verify.1 has no section '.SS $c'"; bad=1; continue; }
  # options every subcommand has are described once, in DESCRIPTION
  sed -n '/^\.SH DESCRIPTION/,/^\.SH /p' tq-verify.man >> section.man
  check section.man "man/tq-verify.1 section $c" tq-verify "$c"
done
exit $bad
