# tq-run usage errors exit 2, data errors exit 1, with the tool's name in the message.
set -u
. "$ROOT/tests/lib/common.sh"
tq-mkmodel --arch llama --size tiny --seed 1 m >/dev/null || exit 1
expect() { expect_exit "$1" tq-run "${@:2}"; } # expect STATUS ARGS...
expect 2 m
expect 2 --tokens 1,2
expect 2 m --tokens 1,,2
expect 2 m --tokens 1 --max-tokens 0
expect 2 m --tokens 1 --bogus
expect 2 m --tokens 1,999999
expect 2 m --tokens 1,2,3 --max-tokens 4 --ctx 3
expect 2 --compare-logits a b
expect 2 m --tokens 1 --backend gpu
expect 1 nonexistent --tokens 1
mkdir bad && echo '{"model_type": "llama"}' > bad/config.json
expect 1 bad --tokens 1
tq-run --version | grep -q '^tq-run (tq) ' || exit 1
tq-run --help | grep -q -- '--cache-budget' || exit 1
