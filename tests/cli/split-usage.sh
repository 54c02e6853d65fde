# tq-split: usage errors exit 2, bad data exits 1 with a specific message, and a failed run
# leaves no output (not even OUT.partial-*) behind.
set -u
. "$ROOT/tests/lib/common.sh"
expect() { expect_msg "$1" "$2" tq-split "${@:3}"; } # expect STATUS MESSAGE-SUBSTRING ARGS...
nothing_left() { [ ! -e "$1" ] && ! ls -d "$1".partial-* >/dev/null 2>&1 || fail "output left behind: $(ls -d "$1"*)"; }
expect 2 "expected MODEL OUTPUT_DIR"
expect 2 "expected a power of two in \[4K, 1G\] bytes" --align 1000 m o
expect 2 "invalid value .2048. for --align" --align 2048 m o
expect 2 "invalid size" --align x m o
expect 2 "--plan needs --ram" --plan m
expect 2 "--ram goes with --plan" --ram 16G m o
expect 2 "expected source, hf or mlx" --join --naming foo s o
expect 2 "do not go together" --join --plan --ram 1G m
expect 2 "unknown option .--frobnicate." --frobnicate m o
nothing_left o
expect 1 "cannot" no-such-model o
nothing_left o
tq-mkmodel --quiet --arch ngram ng || fail "mkmodel ngram"
expect 1 "no expert or FFN tensors" ng o
nothing_left o
tq-mkmodel --quiet --arch qwen3_moe m || fail "mkmodel"
mkdir full && echo keep > full/file
expect 1 "exists and is not empty" m full
[ "$(ls full)" = file ] || fail "non-empty output was modified"
expect 1 "split.json" --join m o
nothing_left o
tq-split --quiet m s || fail "split"
cp -r s s-bad && printf 'x' | dd of=s-bad/experts/layer_01.bin bs=1 seek=5 conv=notrunc 2>/dev/null
expect 1 "experts/layer_01.bin" --join s-bad o
nothing_left o
tq-split --help | grep -q "Usage: tq-split" || fail "--help"
tq-split --version | grep -q "^tq-split (tq) " || fail "--version"
tq-split --json --quiet m js > report.json 2>err || fail "--json run failed"
[ ! -s err ] || fail "stderr not empty: $(cat err)"
grep -q '"num_experts": 8' report.json || fail "json report: $(cat report.json)"
exit 0
