# tq-verify golden --update: FILE is written as FILE.partial-XXXXXX and renamed (a hard link to
# the earlier file keeps the earlier bytes; no partial is left), MODEL is never modified;
# --update is itself the consent to replace FILE (golden has no --force) and replaces only
# what it would read: an existing non-empty FILE must be a golden file (anything else: exit
# 1, left as it is), an empty one is taken as absent; a FIFO, a device, a symbolic link or a
# FILE inside MODEL is refused with exit 2 before the decode, untouched.
. "$ROOT/tests/lib/common.sh"
. "$ROOT/tests/lib/safety.sh"
run tq-mkmodel --arch llama --size tiny --seed 21 --quiet m
model_before=$(tree_hash m)
run tq-verify golden --quiet --update --tokens 1,2,3 --max-tokens 3 m --golden g.json
run tq-verify golden --quiet m --golden g.json
# replaced by a rename: the old inode (kept by a hard link) still holds the earlier golden
ln g.json g-old.json
cp g.json g-copy.json
run tq-verify golden --quiet --update --max-tokens 5 m --golden g.json
cmp -s g-old.json g-copy.json || fail "--update wrote into the earlier file instead of replacing it"
! cmp -s g.json g-copy.json || fail "--update did not rewrite g.json"
[ "$(jget g.json max_tokens)" = 5 ] || fail "--update --max-tokens 5: $(cat g.json)"
run tq-verify golden --quiet m --golden g.json
! compgen -G "g.json.partial-*" >/dev/null || fail "--update left a partial file"
[ "$(tree_hash m)" = "$model_before" ] || fail "--update changed the model"
# an existing file that is not a golden file is not replaced
echo '{"note": "mine"}' > notes.json
expect_msg 1 "notes.json: not a tq_golden_v1 file" tq-verify golden --update --tokens 1,2 m --golden notes.json
[ "$(cat notes.json)" = '{"note": "mine"}' ] || fail "--update replaced a file that is not a golden file"
# an empty file is taken as absent
: > empty.json
run tq-verify golden --quiet --update --tokens 1,2 --max-tokens 2 m --golden empty.json
run tq-verify golden --quiet m --golden empty.json
# not regular files, and a FILE inside MODEL: exit 2, untouched, before the decode
mkfifo fifo.json
ln -s g.json link.json
cp g.json g-now.json
expect_refused_2() { # MESSAGE FILE
  timeout 10 tq-verify golden --update --tokens 1,2 m --golden "$2" >out 2>err; rc=$?
  [ "$rc" = 2 ] && grep -q -- "$1" err || fail "--golden $2: exit $rc, expected 2 with '$1' ($(cat err))"
}
expect_refused_2 "fifo.json: a FIFO, not a regular file" fifo.json
expect_refused_2 "link.json: a symbolic link" link.json
expect_refused_2 "/dev/null: a character device" /dev/null
[ -p fifo.json ] && [ -L link.json ] && cmp -s g.json g-now.json || fail "a refused --update touched its target"
expect_refused_2 "inside" m/g.json
[ ! -e m/g.json ] && [ "$(tree_hash m)" = "$model_before" ] || fail "--update wrote into the model"
echo "golden --update: replaced by rename, only golden files, non-regular targets refused, model untouched"
