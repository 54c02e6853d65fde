# tq-verify: usage errors exit 2, --help/--version work for every subcommand.
set -uo pipefail
st() { "$@" >/dev/null 2>&1; echo $?; }
[ "$(st tq-verify --version)" = 0 ] || exit 1
for c in manifest check compare golden pack unpack; do
  [ "$(st tq-verify $c --help)" = 0 ] || { echo "$c --help"; exit 1; }
  tq-verify --help | grep -q "^  $c " || { echo "$c not in --help"; exit 1; }
done
[ "$(st tq-verify manifest)" = 2 ] || exit 1
[ "$(st tq-verify manifest --threads 0 .)" = 2 ] || exit 1
[ "$(st tq-verify check a b)" = 2 ] || exit 1
[ "$(st tq-verify compare a)" = 2 ] || exit 1
[ "$(st tq-verify pack .)" = 2 ] || exit 1
[ "$(st tq-verify pack --level 99 . -o x.tar.zst)" = 2 ] || exit 1
[ "$(st tq-verify unpack x.tar.zst)" = 2 ] || exit 1
[ "$(st tq-verify golden m)" = 2 ] || exit 1
[ "$(st tq-verify golden m --golden g.json --prompt 1,2)" = 2 ] || exit 1
[ "$(st tq-verify golden m --golden g.json --update --prompt 1,,x)" = 2 ] || exit 1
[ "$(st tq-verify manifest /nonexistent)" = 1 ] || exit 1
[ "$(st tq-verify compare /nonexistent /nonexistent2)" = 1 ] || exit 1
exit 0
