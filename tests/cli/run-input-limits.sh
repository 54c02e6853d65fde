# tq-run's inputs past what they can mean are refused, not cut short: a NUL byte in --decode's
# ids (exit 2 naming its offset), and a prompt, prompt + generated tokens, or --eval window
# that needs more positions than config.json's max_position_embeddings (exit 2 with the
# numbers). Positions: the prompt's tokens and every generated token but the last are fed,
# at positions 0.. (HF transformers' position_ids, which the config's limit bounds).
set -u
. "$ROOT/tests/lib/common.sh"
tq-mkmodel --arch qwen3 --size tiny --seed 4 --quiet m || exit 1

# --decode: everything after a NUL used to be dropped ("1\0002" decoded as "1", exit 0)
printf '1\0002' > nul.txt
expect_msg 2 'standard input: a NUL byte at offset 1' tq-run --tokenizer m --decode < nul.txt
printf '1,2\000' > nul2.txt
expect_msg 2 'offset 3' tq-run --tokenizer m --decode < nul2.txt
printf '1,2' | tq-run --tokenizer m --decode > /dev/null || fail "ids without a NUL are refused"

# max_position_embeddings 4
cp -r m p4 || exit 1
python3 - <<'EOF' || fail "could not edit p4/config.json"
import json
c = json.load(open("p4/config.json"))
c["max_position_embeddings"] = 4
open("p4/config.json", "w").write(json.dumps(c, indent=2, sort_keys=True))
EOF
run tq-run p4 --tokens 1,2,3,4 --max-tokens 1 --quiet
run tq-run p4 --tokens 1,2 --max-tokens 3 --quiet
expect_msg 2 'the prompt has 5 tokens, more than the model.s max_position_embeddings 4' \
  tq-run p4 --tokens 1,2,3,4,5 --max-tokens 1
expect_msg 2 '2 prompt + 4 generated tokens take 5 positions, more than the model.s max_position_embeddings 4 (generate at most 3)' \
  tq-run p4 --tokens 1,2 --max-tokens 4
printf 'hello world, hello world, hello' > long.txt
expect_msg 2 'the prompt has .* tokens, more than the model.s max_position_embeddings 4' \
  tq-run p4 --prompt-file long.txt
printf '1,2,3,4,5,6,7,8' > ids.txt
run tq-run p4 --eval-ids ids.txt --window 5 --quiet
expect_msg 2 'an evaluation window of 6 tokens takes 5 positions, more than the model.s max_position_embeddings 4 (use --window 5 or less)' \
  tq-run p4 --eval-ids ids.txt --window 6
# the same model with its own (40960) limit takes all of these
run tq-run m --tokens 1,2,3,4,5 --max-tokens 4 --quiet
exit 0
