# tq-run text generation as users expect it (issue 32): the generated text alone on standard
# output and the report on standard error (--quiet: no report; --json: the object alone);
# ids in, ids out with --tokens, which pipe into --decode; sampling with --temperature,
# --top-k, --top-p and --seed (top-k 1 and a tiny top-p are greedy; a seed gives the same
# tokens for any --threads; pinned tokens for one seed); the eos token ends text generation
# unless --ignore-eos; usage errors. On the trained testdata/models/qwen3-tiny, which answers
# with real text. The pinned outputs are consistency goldens (this decoder's own), the rest
# checks properties stated in man tq-run(1).
set -u
. "$ROOT/tests/lib/common.sh"
M=$ROOT/testdata/models/qwen3-tiny

# greedy text: on stdout alone, with a final newline; the report on stderr
tq-run "$M" --prompt "The module" --max-tokens 40 > out1 2> err1 || fail "--prompt: $(cat err1)"
printf ' is not available in the\n   module-level module.\n\n   3.3\n   3.3\n      The *policy* parameter was added.\n\n   3.3\n     \n' > want
cmp out1 want || fail "greedy text of qwen3-tiny: '$(cat out1)'"
for k in tokens model speed memory "logits sha256"; do
  grep -q "^$k: " err1 || fail "no '$k:' line in the report: $(cat err1)"
  ! grep -q "^$k: " out1 || fail "'$k:' on standard output"
done
# --quiet: the same text and nothing else anywhere
tq-run "$M" --prompt "The module" --max-tokens 40 --quiet > out2 2> err2 || fail "--quiet"
cmp out1 out2 && [ ! -s err2 ] || fail "--quiet: '$(cat out2)' / '$(cat err2)'"
# --json: the object alone on stdout, the text inside it
tq-run "$M" --prompt "The module" --max-tokens 40 --json > j 2> je || fail "--json"
[ ! -s je ] || fail "--json wrote to stderr: $(cat je)"
python3 - j out1 <<'PY' || fail "--json text"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["text"] + "\n" == open(sys.argv[2]).read(), j["text"]
assert j["stopped"] is False and j["sampling"] is None and j["generated_tokens"] == 40, j
PY

# ids in, ids out: one line on stdout (the report on stderr), which --decode turns into the text
ids=$(printf 'The module' | tq-run --tokenizer "$M" --encode)
tq-run "$M" --tokens "$ids" --max-tokens 40 > gen 2> gerr || fail "--tokens"
grep -Eqx '[0-9]+(,[0-9]+){39}' gen || fail "--tokens output is not one line of 40 ids: $(cat gen)"
grep -q '^model: ' gerr && ! grep -q '^tokens: ' gerr || fail "--tokens report: $(cat gerr)"
tq-run "$M" --tokens "$ids" --max-tokens 40 --quiet 2> qerr | tq-run --tokenizer "$M" --decode > dec ||
  fail "--tokens | --decode"
[ ! -s qerr ] || fail "--tokens --quiet printed a report: $(cat qerr)"
[ "$(cat dec)" = "$(cat out1)" ] || fail "--tokens | --decode gave '$(cat dec)'"
# --tokens with --tokenizer: text out, as --prompt
tq-run "$M" --tokenizer "$M" --tokens "$ids" --max-tokens 40 --quiet > out3 || fail "--tokens --tokenizer"
cmp out1 out3 || fail "--tokens --tokenizer: '$(cat out3)'"

# sampling: top-k 1 and a tiny top-p give the greedy tokens whatever the temperature and seed
tq-run "$M" --prompt "The module" --max-tokens 40 --temperature 1.3 --top-k 1 --seed 99 --quiet > k1 ||
  fail "--top-k 1"
cmp out1 k1 || fail "--top-k 1 is not greedy: '$(cat k1)'"
tq-run "$M" --prompt "The module" --max-tokens 40 --temperature 0.7 --top-p 1e-9 --seed 5 --quiet > p0 ||
  fail "--top-p 1e-9"
cmp out1 p0 || fail "--top-p 1e-9 is not greedy: '$(cat p0)'"
# a seed: the same tokens for 1 and 3 threads and run to run; pinned for seed 7 (the same on
# every platform: the sampler uses its own PRNG and exp)
s="--prompt The --max-tokens 12 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 --json"
tq-run "$M" $s --threads 1 > s1 || fail "sampled run"
tq-run "$M" $s --threads 3 > s3 || fail "sampled run, 3 threads"
[ "$(jget s1 tokens)" = "$(jget s3 tokens)" ] || fail "seed 7: $(jget s1 tokens) / $(jget s3 tokens) threads"
tq-run "$M" --prompt "The module" --max-tokens 12 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7 --json > s7 ||
  fail "seed 7"
python3 - s7 <<'PY' || fail "seed 7 tokens"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["tokens"] == [702, 328, 639, 279, 297, 1087, 11, 110, 303, 910, 310, 491], j["tokens"]
assert j["sampling"] == {"seed": 7, "temperature": 0.8, "top_k": 40, "top_p": 0.95}, j["sampling"]
PY
tq-run "$M" --prompt "The module" --max-tokens 12 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 8 --json > s8 ||
  fail "seed 8"
[ "$(jget s7 tokens)" != "$(jget s8 tokens)" ] || fail "seeds 7 and 8 sampled the same tokens"
tq-run "$M" --prompt "The module" --max-tokens 4 --temperature 0.8 --seed 3 2> serr > /dev/null || fail "report"
grep -q '^sampling: temperature 0.8, top-k 0, top-p 1, seed 3$' serr || fail "no sampling line: $(cat serr)"

# the eos token ends text generation: a tokenizer whose eos is ' available' (id 1272), the
# third greedy token, stops after it and does not print it; --ignore-eos goes on
mkdir tk && cp "$M/tokenizer.json" tk/ && printf '{"eos_token": "\\u0120available"}' > tk/tokenizer_config.json
tq-run "$M" --tokenizer tk --prompt "The module" --max-tokens 12 --json > e1 || fail "eos run"
python3 - e1 <<'PY' || fail "eos stop"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["tokens"] == [300, 442, 1272] and j["stopped"] is True and j["text"] == " is not", j
PY
tq-run "$M" --tokenizer tk --prompt "The module" --max-tokens 12 > e2 2> e2err || fail "eos text"
[ "$(cat e2)" = " is not" ] && grep -q '^tokens: 300,442,1272 (ended at the eos token)$' e2err || fail "eos: '$(cat e2)' $(cat e2err)"
tq-run "$M" --tokenizer tk --prompt "The module" --max-tokens 12 --ignore-eos --json > e3 || fail "--ignore-eos"
[ "$(jget e3 generated_tokens)" = 12 ] && [ "$(jget e3 stopped)" = false ] || fail "--ignore-eos: $(cat e3)"

# usage errors
expect_msg 2 "go with --temperature above 0" tq-run "$M" --prompt hi --top-k 5
expect_msg 2 "go with --temperature above 0" tq-run "$M" --prompt hi --seed 1
expect_msg 2 "go with --temperature above 0" tq-run "$M" --prompt hi --temperature 0 --top-p 0.5
expect_msg 2 "for --temperature" tq-run "$M" --prompt hi --temperature -1
expect_msg 2 "for --temperature" tq-run "$M" --prompt hi --temperature x
expect_msg 2 "for --top-p" tq-run "$M" --prompt hi --temperature 1 --top-p 0
expect_msg 2 "for --top-p" tq-run "$M" --prompt hi --temperature 1 --top-p 1.5
expect_msg 2 "--ignore-eos goes with text" tq-run "$M" --tokens 1,2 --ignore-eos
expect_msg 2 "no --temperature" tq-run "$M" --eval-ids /dev/null --temperature 1
echo "text on stdout, report on stderr; sampling, seeds and eos as documented"
