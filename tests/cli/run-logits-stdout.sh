# tq-run --logits - : the logits stream to standard output, byte for byte what --logits FILE
# writes, and what tq-run prints there (the tokens, the --json report) goes to standard error.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --seed 5 m
tq-run m --tokens 1,2,3 --max-tokens 4 --logits l.f32 > tok 2>/dev/null || fail "--logits FILE"
tq-run m --tokens 1,2,3 --max-tokens 4 --logits - > s.f32 2> tok-err || fail "--logits -"
cmp l.f32 s.f32 || fail "--logits - differs from --logits FILE"
[ -s tok ] && grep -qF "$(head -1 tok)" tok-err || fail "the tokens did not go to stderr: $(cat tok-err)"
tq-run m --tokens 1,2,3 --max-tokens 4 --json --logits - > j.f32 2> j.err || fail "--json --logits -"
cmp l.f32 j.f32 || fail "--json: --logits - differs"
grep -q '"logits_sha256": "'"$(sha256sum < l.f32 | cut -d' ' -f1)"'"' j.err || fail "--json report not on stderr: $(cat j.err)"
printf '1,2,3,4,5,6,7,8,9' > ids
tq-run m --eval-ids ids --window 4 --quiet --logits le.f32 > /dev/null || fail "--eval-ids --logits FILE"
tq-run m --eval-ids ids --window 4 --quiet --logits - > se.f32 || fail "--eval-ids --logits -"
cmp le.f32 se.f32 || fail "--eval-ids: --logits - differs"
echo "--logits - streams the logits to standard output"
