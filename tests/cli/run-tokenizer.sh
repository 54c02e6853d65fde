# tq-run with a tokenizer: --encode / --decode round trips on tq-mkmodel's tokenizer and on the
# committed Qwen3 one (ids checked against transformers.js' golden for the same text), --prompt
# and --prompt-file give the same decode as the ids they encode to, streamed text equals the
# decode of the ids, and bad input exits 1 (data) or 2 (usage) with a message.
set -u
. "$ROOT/tests/lib/common.sh"
tq-mkmodel --arch qwen3 --size tiny --seed 4 --quiet m || exit 1

# encode / decode round trip, bytes exact (no newline added by --decode)
printf 'Hello, world!\n\tcaf\xc3\xa9 \xf0\x9f\xa7\x91\xe2\x80\x8d\xf0\x9f\x92\xbb  12345\n' > text
tq-run --tokenizer m --encode < text > ids || fail "encode failed"
grep -Eqx '[0-9]+(,[0-9]+)*' ids || fail "encode output is not one line of ids: $(cat ids)"
tq-run --tokenizer m --decode < ids > back || fail "decode failed"
cmp text back || fail "decode(encode(x)) != x"
# the tokenizer file itself works too, and --add-special puts <s> (id 1) first
tq-run --tokenizer m/tokenizer.json --encode --add-special < text > ids2 || fail "encode --add-special failed"
[ "$(cat ids2)" = "1,$(cat ids)" ] || fail "--add-special: $(cat ids2)"
# empty text: an empty line, and back
printf '' | tq-run --tokenizer m --encode > e || fail "empty encode"
[ "$(cat e)" = "" ] && [ "$(wc -c < e)" = 1 ] || fail "empty text gave '$(cat e)'"
tq-run --tokenizer m --decode < e > eb && [ ! -s eb ] || fail "empty decode"

# The committed Qwen3 tokenizer: "Hello world" is [9707, 1879] (transformers.js and HF agree).
mkdir q && zstd -q -d "$ROOT/testdata/tokenizers/qwen3/tokenizer.json.zst" -o q/tokenizer.json || exit 1
[ "$(printf 'Hello world' | tq-run --tokenizer q --encode)" = "9707,1879" ] || fail "qwen3 Hello world"
printf '<|im_start|>user\nhi<|im_end|>' | tq-run --tokenizer q --encode > qi || fail "qwen3 special"
[ "$(cut -d, -f1 qi)" = 151644 ] || fail "qwen3 <|im_start|> is $(cut -d, -f1 qi)"

# --prompt and --prompt-file: the same prompt ids and generated tokens; the text is streamed
# on standard output, alone, and the report (tokens: ...) goes to standard error
tq-run m --prompt "The model streams" --max-tokens 6 --ignore-eos > p1 2> e1 || fail "--prompt failed"
printf 'The model streams' > pf
tq-run m --prompt-file pf --max-tokens 6 --ignore-eos > p2 2> e2 || fail "--prompt-file failed"
cmp p1 p2 || fail "--prompt and --prompt-file printed different text"
grep '^tokens:' e1 > t1 && grep '^tokens:' e2 > t2 && cmp t1 t2 || fail "--prompt and --prompt-file differ"
! grep -q '^tokens:\|^model:\|^speed:\|^logits sha256:' p1 || fail "the report went to standard output: $(cat p1)"
ptoks=$(printf 'The model streams' | tq-run --tokenizer m --encode)
tq-run m --tokens "$ptoks" --max-tokens 6 --quiet > p3 2> e3 || fail "--tokens run failed"
[ ! -s e3 ] || fail "--quiet printed a report: $(cat e3)"
[ "$(sed 's/^tokens: //' t1)" = "$(cat p3)" ] || fail "--prompt did not decode like --tokens of its encoding"
# --quiet: the text alone, nothing on standard error
tq-run m --prompt "The model streams" --max-tokens 6 --ignore-eos --quiet > p4 2> e4 || fail "--prompt --quiet"
cmp p1 p4 && [ ! -s e4 ] || fail "--quiet: '$(cat p4)' / '$(cat e4)'"
# ids out piped into --decode give the text --prompt printed (less its final newline; U+FFFD
# stands for ids the tokenizer lacks: the model's vocabulary is 512, the tokenizer's smaller)
gen=$(cat p3)
tq-run m --prompt "The model streams" --max-tokens 6 --ignore-eos --json > pj || fail "--json failed"
python3 - pj p1 "$gen" <<'PY' || fail "streamed text differs from the decode"
import json, sys
j = json.load(open(sys.argv[1]))
streamed = open(sys.argv[2], encoding="utf-8").read()
assert streamed.endswith("\n"), streamed
streamed = streamed[:-1]
ids = [int(x) for x in sys.argv[3].split(",")]
assert j["tokens"] == ids, (j["tokens"], ids)
assert j["prompt_ids"] and all(isinstance(x, int) for x in j["prompt_ids"])
assert j["text"] == streamed, (streamed, j["text"])
assert j["stopped"] is False and j["sampling"] is None, j
PY

# tq-verify golden records the prompt's and the generated text, and compares the text
run tq-verify golden --quiet --update --prompt "The model streams" --max-tokens 6 m --golden g.json
python3 - g.json <<'PY' || fail "golden text fields"
import json, sys
g = json.load(open(sys.argv[1]))
assert g["prompt_text"] == "The model streams", g
assert isinstance(g.get("text"), str), g
PY
run tq-verify golden --quiet m --golden g.json
sed 's/"text": "/"text": "changed /' g.json > g2.json
tq-verify golden m --golden g2.json > g2.out; [ $? = 1 ] || fail "changed golden text was not a mismatch"
grep -q "decode to other text" g2.out || fail "no text message: $(cat g2.out)"
# an older golden file, without text, is still read and still matches
python3 -c "
import json; g = json.load(open('g.json')); del g['text']; del g['prompt_text']; json.dump(g, open('g3.json', 'w'))"
run tq-verify golden --quiet m --golden g3.json
expect_msg 2 "one at a time" tq-verify golden --update --tokens 1 --prompt hi m --golden g4.json
expect_msg 2 "only go with --update" tq-verify golden --prompt hi m --golden g.json
# golden takes tq-run's spellings: --tokens IDS and --prompt TEXT. The old --prompt-text still
# works, with a note; the old --prompt IDS is refused rather than taken as text.
tq-verify golden --quiet --update --prompt-text "The model streams" --max-tokens 6 m --golden g5.json 2> dep ||
  fail "--prompt-text refused: $(cat dep)"
grep -q "prompt-text is deprecated: use --prompt TEXT" dep || fail "no deprecation note: $(cat dep)"
cmp g.json g5.json || fail "--prompt-text and --prompt wrote different golden files"
expect_msg 2 "token ids go with --tokens" tq-verify golden --update --prompt 1,2,3 m --golden g6.json
[ ! -e g6.json ] || fail "--prompt 1,2,3 wrote a golden file"
run tq-verify golden --quiet --update --tokens "$ptoks" --max-tokens 6 m --golden g7.json
python3 -c "
import json, sys
a, b = json.load(open('g.json')), json.load(open('g7.json'))
assert a['prompt'] == b['prompt'] and a['tokens'] == b['tokens'] and a['logits_sha256'] == b['logits_sha256'], (a, b)
" || fail "--tokens of the encoding and --prompt TEXT differ"

# bad input
expect_msg 1 "token id 99999 is not in the vocabulary" tq-run --tokenizer m --decode <<< "1,99999"
printf 'a\xffb' > badutf8
expect_msg 1 "not valid UTF-8 at byte 1" tq-run --tokenizer m --encode < badutf8
expect_msg 1 "badutf8: input is not valid UTF-8 at byte 1" tq-run m --prompt-file badutf8
expect_msg 1 "nowhere" tq-run --tokenizer nowhere --encode < text
echo '{"model": {"type": "WordPiece", "vocab": {}}}' > bad.json
expect_msg 1 "bad.json: model.type: model type 'WordPiece' is not supported" tq-run --tokenizer bad.json --encode < text
expect_msg 2 "id 2 ('x')" tq-run --tokenizer m --decode <<< "1,x"
expect_msg 2 "--encode needs --tokenizer DIR" tq-run --encode < text
expect_msg 2 "one at a time" tq-run --tokenizer m --encode --decode < text
expect_msg 2 "one at a time" tq-run m --tokens 1 --prompt hi
expect_msg 2 "--add-special goes with --prompt" tq-run m --tokens 1 --add-special
expect_msg 2 "takes no model" tq-run --tokenizer m --encode m < text
exit 0
