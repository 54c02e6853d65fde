# README runs as written: every line of "A typical run", in order, on a generated stand-in
# named as the README names it (Qwen3-30B-A3B/), exits 0; the first-run line answers with
# English text from testdata/models/qwen3-tiny; the lists of model families are the family
# table's (formats/family.c) and say which ones the decoder runs (the rows' decoders, as tq-run
# names them). Issue 32:
# the block's sign line failed for want of a key and the check --pubkey line with it.
. "$ROOT/tests/lib/common.sh"
readme=$ROOT/README.md

# --- the block: the first indented block after the "## A typical run" heading.
awk '/^## A typical run/ {f = 1; next} f && /^    / {b = 1; sub(/^    /, ""); print; next} f && b {exit}' "$readme" >block
[ "$(wc -l <block)" -ge 10 ] || fail "README's typical-run block not found (or shorter than 10 lines): $(cat block)"
grep -F 'Qwen3-30B-A3B/' block >/dev/null || fail "the block no longer names Qwen3-30B-A3B/: update the stand-in"
mkdir run && cd run || exit 1
run tq-mkmodel --quiet --arch qwen3_moe --seed 3 Qwen3-30B-A3B
n=0
while IFS= read -r line; do
  n=$((n + 1))
  bash -o pipefail -c "$line" >"out.$n" 2>"err.$n" ||
    fail "README typical run, line $n exits $?: $line
$(tail -3 "err.$n")"
done <../block
# What the lines promise: bit-identical logits (cmp ran), a signed bundle checked with the key.
[ -s s.f32 ] && cmp -s s.f32 r.f32 || fail "s.f32 and r.f32 differ or are missing"
grep -l 'a valid signature by the ecdsa-p256 key' out.* >/dev/null || fail "no line checked a signature"
cd .. || exit 1

# --- the first run: qwen3-tiny answers a prompt with text (the line run as written from the
# tree's root: bin/ and testdata/ are links to the build's tools and the tree's models).
awk '/^## Quick start/ {f = 1} /^## A typical run/ {f = 0} f && /^    bin\/tq-run / {sub(/^    /, ""); print}' "$readme" >first
[ "$(wc -l <first)" = 1 ] || fail "README's first-run line (bin/tq-run testdata/models/qwen3-tiny ...) not found"
mkdir root && ln -s "$BIN" root/bin && ln -s "$ROOT/testdata" root/testdata
(cd root && bash -o pipefail -c "$(cat ../first)") >answer 2>answer.err || fail "first run exits $?: $(tail -3 answer.err)"
# Text, not ids or a report: mostly letters and spaces, and some of the commonest English words.
words=$(tr -cs 'A-Za-z' '\n' <answer | grep -cxE 'the|a|an|is|are|of|to|in|and|or|used|value|object|string')
[ "$words" -ge 3 ] || fail "qwen3-tiny's answer has $words common English words: $(head -c 300 answer)"
grep -E '^(tokens|model|speed|memory|logits sha256): ' answer >/dev/null && fail "the report is on stdout: $(cat answer)"

# --- the families: README's two lists against the family table and what tq-run decodes.
grep -o 'model_types = L([^)]*)' "$ROOT/formats/family.c" | grep -o '"[a-z0-9_]*"' | tr -d '"' | LC_ALL=C sort >table
[ "$(wc -l <table)" -ge 10 ] || fail "model types not found in formats/family.c"
# The model types tq-run decodes: the list it names when it refuses a family (the family
# table's rows with a decoder, formats/family.h decode.decoder).
mkdir phi3 && echo '{"model_type": "phi3"}' >phi3/config.json
tq-run phi3 --tokens 1 >/dev/null 2>phi3.err && fail "tq-run decoded a phi3 config"
sed -n 's/.*model_type "phi3" is not supported (\(.*\))$/\1/p' phi3.err | tr -d ' ' | tr ',' '\n' | LC_ALL=C sort >decoded
[ -s decoded ] || fail "tq-run names no decoded model types: $(cat phi3.err)"
section() { awk -v k="$1" 'index($0, "- " k) == 1 {f = 1} f && /^$/ {exit} f && index($0, "- ") == 1 && index($0, "- " k) != 1 {exit} f' "$readme" |
  grep -o '`[a-z0-9_]*`' | tr -d '`' | LC_ALL=C sort; }
section 'converted, split and decoded by tq-run:' >readme-decoded
section 'converted and split, not decoded by tq-run:' >readme-other
comm -23 table decoded >not-decoded
cmp -s readme-decoded decoded || fail "README's decoded families differ from tq-run's: $(diff readme-decoded decoded | grep '^[<>]' | tr '\n' ' ')"
cmp -s readme-other not-decoded || fail "README's other families differ from formats/family.c: $(diff readme-other not-decoded | grep '^[<>]' | tr '\n' ' ')"
echo "README: $n lines of the typical run, the first run and $(wc -l <table) model types: ok"
