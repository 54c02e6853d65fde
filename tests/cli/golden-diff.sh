# scripts/golden-diff names the first output whose hash differs from make verify's golden
# listing, or that is on one side only; scripts/verify refuses to update goldens when
# TQ_NO_GOLDEN_UPDATE=1 (make mutate).
set -euo pipefail
. "$ROOT/tests/lib/common.sh"
h() { printf '%064d' "$1"; }
printf '%s  a/x.json\n%s  b dir/model.safetensors\n%s  c\n' "$(h 1)" "$(h 2)" "$(h 3)" > golden
cp golden now
"$ROOT/scripts/golden-diff" golden now > out || fail "equal listings differ: $(cat out)"
[ ! -s out ] || fail "output for equal listings: $(cat out)"
expect() { # NOW-CONTENT EXPECTED-LINE
  printf "$1" > now
  set +e; "$ROOT/scripts/golden-diff" golden now > out; rc=$?; set -e
  [ "$rc" = 1 ] || fail "exit $rc for: $2"
  [ "$(cat out)" = "first differing output: $2" ] || fail "got '$(cat out)', expected '$2'"
}
expect "$(h 1)  a/x.json\n$(h 9)  b dir/model.safetensors\n$(h 8)  c\n" \
  "b dir/model.safetensors (golden $(h 2), now $(h 9))"
expect "$(h 1)  a/x.json\n$(h 3)  c\n" "b dir/model.safetensors (in the golden, not made now)"
expect "$(h 1)  a/x.json\n$(h 4)  a/y\n$(h 2)  b dir/model.safetensors\n$(h 3)  c\n" "a/y (made now, not in the golden)"
expect "$(h 1)  a/x.json\n$(h 2)  b dir/model.safetensors\n" "c (in the golden, not made now)"
expect "$(h 1)  a/x.json\n$(h 2)  b dir/model.safetensors\n$(h 3)  c\n$(h 4)  d\n" "d (made now, not in the golden)"
set +e; "$ROOT/scripts/golden-diff" golden > out 2>&1; rc=$?; set -e
[ "$rc" = 2 ] || fail "usage exit $rc"
# no golden update where updates are disabled, whichever way it is asked for
for how in "UPDATE=1" "--update"; do
  set +e
  if [ "$how" = --update ]; then TQ_NO_GOLDEN_UPDATE=1 "$ROOT/scripts/verify" --update > out 2>&1
  else TQ_NO_GOLDEN_UPDATE=1 UPDATE=1 "$ROOT/scripts/verify" > out 2>&1; fi
  rc=$?; set -e
  [ "$rc" = 2 ] && grep -q "golden updates are disabled" out || fail "$how with TQ_NO_GOLDEN_UPDATE=1: exit $rc: $(cat out)"
done
