/* Fuzz target: a chat template on arbitrary bytes (the whole input is the template), rendered with
 * fixed messages and tools. A render either fails with a message and no output, or gives valid
 * UTF-8; the bounds (steps, depth, memory) keep every input short of a hang or a crash. */
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "\"Hi {{ x }} \\u00e9\\ud83d\\ude00\\n\"}, {\"role\": \"assistant\", \"content\": \"<think>a</think>b\", "
    "\"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, null]}}}]}, "
    "{\"role\": \"tool\", \"content\": \"ok\"}, {\"role\": \"user\", \"content\": \"\"}], \"tools\": [{\"type\": "
    "\"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"a\": {\"type\": \"array\", \"items\": {\"type\": \"number\"}}}, \"required\": [\"a\"]}}}], "
    "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e = {0};
    char *out = (char *)"unset";
    size_t n = 0;
    if (tq_chat_render((const char *)data, size, vars, sizeof vars - 1, 1700000000, &out, &n, &e) != 0) {
        if (out || !e.msg[0])
            abort();
        return 0;
    }
    if (!out || tq_utf8_check(out, n, NULL) != 0 || out[n] != 0)
        abort();
    free(out);
    return 0;
}
