# tq-verify: usage errors exit 2, --help/--version work for every subcommand.
set -uo pipefail
. "$ROOT/tests/lib/common.sh"
expect() { expect_exit "$1" tq-verify "${@:2}" >/dev/null; } # expect STATUS ARGS...
run tq-verify --version >/dev/null
# --list-commands is the command table, and --help's Commands section lists the same names
# in the same order
cmds=$(tq-verify --list-commands) || fail "tq-verify --list-commands: exit $?"
[ "$(wc -l <<<"$cmds")" -ge 11 ] || fail "tq-verify --list-commands: only $(wc -l <<<"$cmds") commands"
listed=$(tq-verify --help | sed -n '/^Commands:/,/^$/{/^  [a-z]/s/^  \([a-z-]*\) .*/\1/p}')
[ "$cmds" = "$listed" ] || fail "--list-commands and --help differ: $cmds / $listed"
for c in $cmds; do
  run tq-verify $c --help >/dev/null
done
expect 2 --list-commands ls
expect 2 manifest
expect 2 manifest --threads 0 .
expect 2 check a b
expect 2 compare a
expect 2 pack .
expect 2 pack --level 99 . -o x.tar.zst
expect 2 unpack x.tar.zst
expect 2 golden m
expect 2 golden m --golden g.json --tokens 1,2
expect 2 golden m --golden g.json --update --tokens 1,,x
expect 2 sign
expect 2 sign m
expect 2 sign --key k.pem
expect 2 sign --key k.pem a b
expect 2 verify m
expect 2 verify --pubkey k.pub
expect 2 sign --threads 0 --key k.pem m
expect 1 sign /nonexistent --key k.pem
expect 1 verify /nonexistent --pubkey k.pub
expect 1 manifest /nonexistent
expect 1 compare /nonexistent /nonexistent2
exit 0
