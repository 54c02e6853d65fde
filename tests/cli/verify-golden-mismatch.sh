# tq-verify golden compares both halves of a golden file on their own: a logits hash that
# differs while every token agrees is a MISMATCH (exit 1) naming the hash, and a token that
# differs while the hash agrees is a MISMATCH naming the token; an unchanged file matches.
set -euo pipefail
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --arch llama --size tiny --seed 21 --quiet m
run tq-verify golden --quiet --update --tokens 1,2,3 --max-tokens 4 m --golden g.json
tq-verify golden m --golden g.json | grep "g.json: OK (4 tokens" >/dev/null || fail "fresh golden does not match"
edit() { # IN OUT PYTHON-STATEMENT on the dict g
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(g, open(sys.argv[2], "w"), indent=2, sort_keys=True)
PY
}
sha=$(python3 -c 'import json; print(json.load(open("g.json"))["logits_sha256"])')
tok=$(python3 -c 'import json; print(json.load(open("g.json"))["tokens"][2])')
# logits only: the hash's last hex digit changed, the tokens untouched
edit g.json logits.json 'h = g["logits_sha256"]; g["logits_sha256"] = h[:-1] + ("0" if h[-1] != "0" else "1")'
set +e; tq-verify golden m --golden logits.json > out; rc=$?; set -e
[ "$rc" = 1 ] || fail "logits-only mismatch: exit $rc ($(cat out))"
grep -q "MISMATCH" out || fail "logits-only mismatch not reported: $(cat out)"
grep -q "^logits.json: logits sha256 $sha, expected ${sha:0:63}" out || fail "hash not named: $(cat out)"
! grep -q "differs: got" out || fail "a token reported as differing: $(cat out)"
set +e; tq-verify golden --json m --golden logits.json > out.json; rc=$?; set -e
[ "$rc" = 1 ] && [ "$(jget out.json match)" = false ] && [ "$(jget out.json first_token_diff)" = -1 ] ||
  fail "logits-only --json: exit $rc $(cat out.json)"
# tokens only: token 2 changed, the hash untouched
edit g.json tokens.json "g['tokens'][2] = $((tok + 1))"
set +e; tq-verify golden m --golden tokens.json > out; rc=$?; set -e
[ "$rc" = 1 ] && grep -q MISMATCH out || fail "token-only mismatch: exit $rc ($(cat out))"
grep -q "^tokens.json: token 2 differs: got $tok, expected $((tok + 1))" out || fail "token not named: $(cat out)"
! grep -q "^tokens.json: logits sha256 .*, expected" out || fail "the hash reported as differing: $(cat out)"
# the first and the last token alone
for i in 0 3; do
  t=$(python3 -c "import json; print(json.load(open('g.json'))['tokens'][$i])")
  edit g.json t$i.json "g['tokens'][$i] = $((t + 1))"
  set +e; tq-verify golden m --golden t$i.json > out; rc=$?; set -e
  [ "$rc" = 1 ] && grep -q "^t$i.json: token $i differs: got $t, expected $((t + 1))" out ||
    fail "token $i alone: exit $rc ($(cat out))"
done
# the unchanged file still matches (the edits above did not touch the model)
run tq-verify golden --quiet m --golden g.json
