# tq-run --eval / --eval-ids: every scored step's logits are the ones a plain teacher-forced
# decode of the same window gives (the window's tokens fed from an empty state, linear-attention
# state included), the perplexity is the one computed from those logits outside tq, the report
# does not depend on the thread count, text and ids give the same result, and bad input exits
# 1 (data) or 2 (usage) with a message.
set -u
. "$ROOT/tests/lib/common.sh"

# n ids in [0, 200), deterministic
python3 -c "print(','.join(str((i * 37 + 11) % 197) for i in range(29)))" > ids.txt

check_model() { # ARCH: window 12, stride 5 over 29 tokens -> windows at 0, 5, 10, 15 (ends 12, 17, 22, 27), 20 (ends 29)
  local arch=$1 W=12 S=5
  rm -rf m && tq-mkmodel --arch "$arch" --size tiny --seed 3 --quiet m || fail "$arch: mkmodel"
  tq-run m --eval-ids ids.txt --window $W --stride $S --force --logits e.f32 --threads 1 --json > r1 || fail "$arch: eval"
  tq-run m --eval-ids ids.txt --window $W --stride $S --threads 3 --json > r3 || fail "$arch: eval, 3 threads"
  for k in logits_sha256 mean_nll perplexity top1 scored; do
    [ "$(jget r1 $k)" = "$(jget r3 $k)" ] || fail "$arch: $k differs between 1 and 3 threads"
  done
  [ "$(jget r1 tokens)" = 29 ] && [ "$(jget r1 scored)" = 28 ] || fail "$arch: tokens/scored $(jget r1 tokens)/$(jget r1 scored)"
  local V
  V=$(python3 -c "import json; c = json.load(open('m/config.json')); print(c.get('vocab_size') or c['text_config']['vocab_size'])")
  # the same rows from plain decodes: window [b, end) scores targets [prev_end, end)
  : > want.f32
  local b=0 prev=1 end n
  IFS=, read -r -a id < ids.txt
  n=${#id[@]}
  while :; do
    end=$((b + W < n ? b + W : n))
    rest=$(IFS=,; echo "${id[*]:b+1:end-b-2}")
    if [ -n "$rest" ]; then
      tq-run m --tokens "${id[b]}" --force-tokens "$rest" --max-tokens $((end - b - 1)) --force --logits w.f32 --quiet > /dev/null
    else
      tq-run m --tokens "${id[b]}" --max-tokens 1 --force --logits w.f32 --quiet > /dev/null
    fi || fail "$arch: decode of window $b"
    tail -c $(((end - prev) * V * 4)) w.f32 >> want.f32
    prev=$end
    [ "$end" -eq "$n" ] && break
    b=$((b + S))
  done
  cmp e.f32 want.f32 || fail "$arch: eval logits differ from the windows' plain decodes"
  # perplexity from the logits file, computed here
  python3 - "$V" "$(jget r1 mean_nll)" "$(jget r1 top1)" <<'PY' || fail "$arch: perplexity differs from the logits'"
import array, math, sys
V, got, got_top1 = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
ids = [int(x) for x in open("ids.txt").read().split(",")]
a = array.array("f"); a.frombytes(open("e.f32", "rb").read())
if sys.byteorder != "little": a.byteswap()
nll, top1 = 0.0, 0
for s in range(len(ids) - 1):
    row = a[s * V:(s + 1) * V]
    m = max(row)
    nll += math.log(sum(math.exp(x - m) for x in row)) + m - row[ids[s + 1]]
    top1 += row.index(m) == ids[s + 1]
nll /= len(ids) - 1
sys.exit(0 if abs(nll - got) <= 1e-9 * abs(nll) and top1 == got_top1 else "nll %r vs %r, top1 %d vs %d" % (nll, got, top1, got_top1))
PY
}
check_model qwen3
check_model qwen3_5_moe # Gated DeltaNet layers: their state starts empty in every window

# text through the model's tokenizer == its ids
printf 'The quick brown fox jumps over the lazy dog. The dog sleeps.\n' > text.txt
tq-run --tokenizer m --encode < text.txt > tids.txt || fail "encode"
tq-run m --eval text.txt --window 8 --json > rt || fail "--eval text"
tq-run m --eval-ids tids.txt --window 8 --json > ri || fail "--eval-ids"
[ "$(jget rt logits_sha256)" = "$(jget ri logits_sha256)" ] && [ "$(jget rt perplexity)" = "$(jget ri perplexity)" ] ||
  fail "--eval text and --eval-ids of its encoding differ"
[ "$(jget rt stride)" = 4 ] || fail "default stride is not window/2: $(jget rt stride)"
tq-run m --eval text.txt --window 8 > plain || fail "--eval plain report"
grep -q '^perplexity: ' plain || fail "no perplexity line: $(cat plain)"

# bad input
echo 5 > one.txt
expect_msg 1 "at least 2 tokens" tq-run m --eval-ids one.txt
echo 5,100000 > big.txt
expect_msg 1 "big.txt: token 1: id 100000 is outside the vocabulary" tq-run m --eval-ids big.txt
echo 5,x > bad.txt
expect_msg 1 "bad.txt" tq-run m --eval-ids bad.txt
expect_msg 1 "missing.txt" tq-run m --eval missing.txt
expect_msg 2 "--stride must be below --window" tq-run m --eval-ids ids.txt --window 4 --stride 4
expect_msg 2 "go with --eval" tq-run m --tokens 1 --window 4
expect_msg 2 "one at a time" tq-run m --eval text.txt --eval-ids ids.txt
expect_msg 2 "--eval takes no" tq-run m --eval text.txt --tokens 1
cp text.txt text.keep
expect_msg 2 "text.txt" tq-run m --eval text.txt --force --logits text.txt
cmp text.txt text.keep || fail "--force --logits over the --eval file changed it"
[ ! -e e2.f32 ] || fail "stray output"
expect_msg 1 "outside the vocabulary" tq-run m --eval-ids big.txt --force --logits e2.f32
[ -z "$(ls | grep e2.f32)" ] || fail "a failed --eval left a logits file: $(ls)"
exit 0
