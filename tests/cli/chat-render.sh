# tq-run --chat-render and --chat: every chat template of tests/chat/templates.sh applied to every
# case of tests/chat/cases byte-identical to what @huggingface/jinja 0.5.11 rendered
# (testdata/chat/golden, or $TQ_CHAT_GOLDEN from a fresh tests/chat/oracle.sh run), failing where
# it fails (a .err golden); templates not on this machine (npm ci in tests/tokenizer not run) are
# skipped unless TQ_CHAT_REQUIRE_ALL=1, but the six committed ones always run. Then --chat's
# prompt equals the encoding of the rendered text, and bad input exits 1, usage errors 2.
set -u
. "$ROOT/tests/lib/common.sh"
. "$ROOT/tests/chat/templates.sh"
GOLD=${TQ_CHAT_GOLDEN:-$ROOT/testdata/chat/golden}
export SOURCE_DATE_EPOCH=1700000000
compared=0
for n in $CHAT_TEMPLATES; do
  if ! d=$(chat_template_dir "$n"); then
    [ "${TQ_CHAT_REQUIRE_ALL:-0}" = 1 ] && fail "no template for $n"
    echo "chat-render: $n skipped (npm ci in tests/tokenizer brings it)" >&2
    continue
  fi
  for c in "$ROOT"/tests/chat/cases/*.json; do
    b=$(basename "$c" .json)
    tq-run --tokenizer "$d" --chat-render "$c" > got 2> err; rc=$?
    if [[ " $CHAT_REFUSED " == *" $n.$b "* ]]; then
      grep -qF '[object Map]' "$GOLD/$n.$b.txt" || fail "$n $b: @huggingface/jinja no longer prints [object Map]"
      [ "$rc" = 1 ] && grep -q "unsupported: a mapping turned into text" err || fail "$n $b: not refused (exit $rc)"
    elif [ -f "$GOLD/$n.$b.err" ]; then
      [ "$rc" = 1 ] || fail "$n $b: @huggingface/jinja fails ($(cat "$GOLD/$n.$b.err")), tq-run exit $rc"
      grep -q '^tq-run: ' err || fail "$n $b: no message"
    else
      [ -f "$GOLD/$n.$b.txt" ] || fail "$n $b: no golden"
      [ "$rc" = 0 ] || fail "$n $b: exit $rc: $(cat err)"
      cmp -s got "$GOLD/$n.$b.txt" || fail "$n $b differs from @huggingface/jinja: $(diff got "$GOLD/$n.$b.txt" | head -20)"
    fi
    compared=$((compared + 1))
  done
done
[ "$compared" -ge 45 ] || fail "only $compared renderings compared"

# gemma3's raise_exception reaches the user with the template's words (when gemma3 is here)
if d=$(chat_template_dir gemma3); then
  expect_msg 1 "Conversation roles must alternate" tq-run --tokenizer "$d" --chat-render "$ROOT/tests/chat/cases/alternation.json"
fi

# --chat: the prompt is the template's rendering of one user message, encoded as is
tq-mkmodel --arch qwen3 --size tiny --seed 4 --quiet m || exit 1
printf '%s' '{{ bos_token }}[INST] {{ messages[0]["content"] }} [/INST]{% if add_generation_prompt %}>{% endif %}' > m/chat_template.jinja
printf '<s>[INST] hello there [/INST]>' | tq-run --tokenizer m --encode > want || fail "encode"
tq-run m --chat --prompt "hello there" --max-tokens 2 --json > j || fail "--chat --json: $(cat j)"
python3 -c 'import json,sys; print(",".join(map(str, json.load(open("j"))["prompt_ids"])))' > got || fail "no prompt_ids"
cmp -s got want || fail "--chat prompt ids $(cat got), want $(cat want)"
printf '[{"role": "user", "content": "hello there"}]' > one.json
[ "$(tq-run --tokenizer m --chat-render one.json)" = '<s>[INST] hello there [/INST]>' ] || fail "--chat-render on m"
# add_generation_prompt given in the file wins
printf '{"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": false}' > nogen.json
[ "$(tq-run --tokenizer m --chat-render nogen.json)" = '<s>[INST] x [/INST]' ] || fail "add_generation_prompt false"

# --prompt-file: the same prompt ids as --prompt
printf 'hello there' > pf
tq-run m --chat --prompt-file pf --max-tokens 2 --json > j2 || fail "--chat --prompt-file"
python3 -c 'import json,sys; print(",".join(map(str, json.load(open("j2"))["prompt_ids"])))' > got2 || fail "no prompt_ids"
cmp -s got2 want || fail "--chat --prompt-file prompt ids $(cat got2), want $(cat want)"

# tokenizer_config.json forms: chat_template as a list of named templates (the "default" one),
# special tokens as AddedToken objects ({"content": ...}), a null bos_token left undefined
mkdir cfg
cat > cfg/tokenizer_config.json <<'CFG'
{"bos_token": {"__type": "AddedToken", "content": "<B>"}, "eos_token": "<E>", "unk_token": null,
 "chat_template": [{"name": "tool_use", "template": "tools!"},
                   {"name": "default", "template": "{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ messages|length }}"}]}
CFG
[ "$(tq-run --tokenizer cfg --chat-render one.json)" = '<B>|<E>|false|1' ] || fail "config forms: $(tq-run --tokenizer cfg --chat-render one.json)"
printf '{"chat_template": [{"name": "tool_use", "template": "x"}]}' > cfg/tokenizer_config.json
expect_msg 1 'no template named "default"' tq-run --tokenizer cfg --chat-render one.json
printf '{"chat_template": 7}' > cfg/tokenizer_config.json
expect_msg 1 'chat_template is neither a string nor a list' tq-run --tokenizer cfg --chat-render one.json

# bad input: exit 1 naming the file or the template's line; usage: exit 2
printf '{"messages": 3}' > bad.json
expect_msg 1 'no "messages" list' tq-run --tokenizer m --chat-render bad.json
printf 'not json' > bad2.json
expect_msg 1 'bad2.json: messages: not a JSON list' tq-run --tokenizer m --chat-render bad2.json
expect_msg 1 'no-such.json' tq-run --tokenizer m --chat-render no-such.json
printf 'a\n{%% for x in messages %%}{{ x|batch(2) }}{%% endfor %%}' > m/chat_template.jinja
expect_msg 1 "chat_template.jinja: chat_template: line 2, column 29: unsupported: the filter 'batch(...)' on a mapping" \
  tq-run --tokenizer m --chat-render one.json
expect_msg 1 "unsupported: the filter 'batch(...)'" tq-run m --chat --prompt hi
rm m/chat_template.jinja
expect_msg 1 'no chat_template' tq-run --tokenizer m --chat-render one.json
expect_msg 2 '--chat-render needs --tokenizer DIR' tq-run --chat-render one.json
expect_msg 2 '--chat-render takes no model' tq-run m --tokenizer m --chat-render one.json
expect_msg 2 '--chat goes with --prompt or --prompt-file' tq-run m --chat --tokens 1,2
exit 0
