/* tokenizer/ on hostile tokenizer.json files (issue 31): bytes after the JSON value. */
#include "check.h"
#include "tokenizer/tokenizer.h"

/* A tokenizer.json is one JSON value: bytes after it were ignored (JSON.parse and serde_json
 * both refuse them). White space after it is fine. */
static void test_trailing_bytes(void)
{
    static const char good[] = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}";
    char buf[128];
    tq_err err = {0};
    tq_tok *t = NULL;
    snprintf(buf, sizeof buf, "%s \n\t\r\n", good);
    CHECK_OK(tq_tok_load_mem(buf, strlen(buf), NULL, 0, "t.json", &t, &err));
    tq_tok_free(t);
    t = NULL;
    static const char *const tails[] = {" x", "{}", "\n{\"model\":null}", " \0"};
    static const size_t at[] = {41, 40, 41, 41};
    for (int i = 0; i < 4; i++) {
        size_t n = sizeof good - 1;
        memcpy(buf, good, n);
        size_t tl = i == 3 ? 2 : strlen(tails[i]);
        memcpy(buf + n, tails[i], tl);
        char want[96];
        snprintf(want, sizeof want, "t.json: bytes after the JSON value at byte %zu", at[i]);
        int rc = tq_tok_load_mem(buf, n + tl, NULL, 0, "t.json", &t, &err);
        CHECKF(rc == -1 && !t && !strcmp(err.msg, want) && tq_exit_code(&err) == 1, "tail %d: '%s'", i,
               rc ? err.msg : "loaded");
        tq_tok_free(t);
        t = NULL;
    }
    static const char cfg[] = "{\"bos_token\":\"a\"} x";
    int rc = tq_tok_load_mem(good, sizeof good - 1, cfg, sizeof cfg - 1, "t.json", &t, &err);
    CHECKF(rc == -1 && strstr(err.msg, "tokenizer_config.json: bytes after the JSON value at byte 18"), "config: '%s'",
           rc ? err.msg : "loaded");
    tq_tok_free(t);
}

int main(void)
{
    RUN(test_trailing_bytes);
    TEST_MAIN_END();
}
