/* tokenizer/ on hostile tokenizer.json files (issue 31): bytes after the JSON value and
 * PCRE2-only regex syntax. */
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

/* Regex syntax only PCRE2 reads is refused, naming the field and the pattern; the patterns of
 * real tokenizers (test_tokenizer_golden) and look-alikes that are not PCRE2-only load. */
static void test_pcre2_only(void)
{
    static const struct {
        const char *re, *what;
    } bad[] = {
        {"(*LIMIT_MATCH=1)\\\\w+", "(*VERB) or (*OPTION) at byte 0"},
        {"(*UTF)a", "(*VERB) or (*OPTION) at byte 0"},
        {"a(*SKIP)(*FAIL)|b", "(*VERB) or (*OPTION) at byte 1"},
        {"a(?C1)b", "(?C) callout at byte 1"},
        {"(?C'x')a", "(?C) callout at byte 0"},
        {"(?|(a)|(b))", "branch reset"},
        {"a(?R)?b", "subroutine call"},
        {"(a)(?1)", "subroutine call"},
        {"(?-1)", "subroutine call"},
        {"(?P<n>a)", "Python-style"},
        {"\\\\Qa.b\\\\E", "quoting"},
        {"a\\\\C", "one code unit"},
        {"[a]]*(*ACCEPT)", "(*VERB) or (*OPTION) at byte 5"},
    };
    static const char *const where[] = {
        "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},\"behavior\":\"Isolated\"}",
        "{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"%s\"},\"content\":\"x\"}",
        "{\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Fuse\"},{\"type\":\"Replace\",\"pattern\":"
        "{\"Regex\":\"%s\"},\"content\":\"x\"}]}",
    };
    static const char *const field[] = {"pre_tokenizer.pattern.Regex", "normalizer.pattern.Regex",
                                        "decoder.decoders[1].pattern.Regex"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int w = 0; w < 3; w++) {
            char json[512], head[256];
            snprintf(head, sizeof head, where[w], bad[i].re);
            snprintf(json, sizeof json, "%s,\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", head);
            tq_err err = {0};
            tq_tok *t = NULL;
            int rc = tq_tok_load_mem(json, strlen(json), NULL, 0, "t.json", &t, &err);
            CHECKF(rc == -1 && strstr(err.msg, field[w]) && strstr(err.msg, bad[i].what) &&
                       strstr(err.msg, "PCRE2-only") && tq_exit_code(&err) == 1,
                   "'%s' in %s: '%s'", bad[i].re, field[w], rc ? err.msg : "loaded");
            tq_tok_free(t);
        }
    static const char *const good[] = {
        "[(*]+", "\\\\(\\\\*", "(?i:'s|'t)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+", "[[:alpha:](*]", "(?:a)(?=b)(?!c)(?<=d)",
        "(?<name>a)\\\\k<name>", "a*?b+?", "[\\\\]](a*)?", "(?i)x",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},\"behavior\":\"Isolated\"},"
                 "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}",
                 good[i]);
        tq_err err = {0};
        tq_tok *t = NULL;
        int rc = tq_tok_load_mem(json, strlen(json), NULL, 0, "t.json", &t, &err);
        CHECKF(rc == 0, "'%s': %s", good[i], err.msg);
        tq_tok_free(t);
    }
}

int main(void)
{
    RUN(test_trailing_bytes);
    RUN(test_pcre2_only);
    TEST_MAIN_END();
}
