# make demo's script (scripts/demo) runs to its end with the built tools: every step exits 0,
# the streamed and resident logits are bit-identical, and it says done. .ci/run also runs
# `make demo` itself on the fresh checkout, as a newcomer does (issue 32).
. "$ROOT/tests/lib/common.sh"
TQ_DEMO_DIR=$PWD/demo BIN="$BIN" "$ROOT/scripts/demo" >out 2>err || fail "scripts/demo exited $?: $(tail -5 err)"
grep -x 'demo: streamed and resident logits are bit-identical ([0-9]* bytes)' out >/dev/null || fail "no bit-identical line"
tail -n1 out | grep -x "demo: done; outputs in $PWD/demo" >/dev/null || fail "demo did not finish: $(tail -3 out)"
[ -f demo/model-tq3-split.tar.zst ] || fail "no bundle"
echo "demo: ok"
