/* tokenizer/ on hostile tokenizer.json files (issue 31): bytes after the JSON value,
 * PCRE2-only regex syntax, and normalizer and decoder chains that grow the text without
 * bound. */
#include "check.h"
#include "tokenizer/tokenizer.h"
#include <cjson/cJSON.h>

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

/* GPT-2's byte -> character map, written out here independently of the library. */
static void byte_char(unsigned b, char *out)
{
    unsigned c = b, k = 0;
    int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
        for (unsigned x = 0; x < b; x++)
            k += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
        c = 256 + k;
    }
    if (c < 0x80) {
        out[0] = (char)c, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (c >> 6)), out[1] = (char)(0x80 | (c & 0x3F)), out[2] = 0;
    }
}

/* A byte-level BPE without merges: id b is byte b's character, so text that is not an added
 * token encodes to its bytes. The caller adds what else it needs and frees. */
static cJSON *base_json(void)
{
    cJSON *j = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(j, "model"), *v = cJSON_AddObjectToObject(m, "vocab");
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddArrayToObject(m, "merges");
    for (unsigned b = 0; b < 256; b++) {
        char c[4];
        byte_char(b, c);
        cJSON_AddNumberToObject(v, c, b);
    }
    cJSON *pre = cJSON_AddObjectToObject(j, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
    cJSON_AddBoolToObject(pre, "use_regex", 1);
    return j;
}

/* Loads j (and deletes it); NULL with err set on failure. */
static tq_tok *load_json(cJSON *j, tq_err *err)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    tq_tok *t = NULL;
    if (s && tq_tok_load_mem(s, strlen(s), NULL, 0, "t.json", &t, err))
        t = NULL;
    free(s);
    return t;
}

/* A Sequence of n steps {Replace "a" -> "aaaa"} as the normalizer or the decoder. */
static cJSON *replace_chain(int n, const char *key, const char *seq_key)
{
    cJSON *j = base_json(), *seq = cJSON_AddObjectToObject(j, key);
    cJSON_AddStringToObject(seq, "type", "Sequence");
    cJSON *arr = cJSON_AddArrayToObject(seq, seq_key);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_Parse("{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"aaaa\"}"));
    return j;
}

/* Chained Replace a -> aaaa steps multiply the text by 4 each: 12 of them made 16 MiB of one
 * byte (485 MB of scratch), 30 grew until the process died. Each step may now make at most
 * 32 times the chain's input plus 4096 bytes, and the step past it is named: the seventh
 * (4^7 = 16384 > 32 + 4096), normalizers[6]. Ordinary growth (Replace ' ' -> U+2581, three
 * times the bytes, then back to two spaces and to U+2581 again: six times) still encodes. */
static void test_growth_bounded(void)
{
    tq_err err = {0};
    tq_tok *t = load_json(replace_chain(12, "normalizer", "normalizers"), &err);
    CHECKF(t, "load: %s", err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    if (t) {
        int rc = tq_tok_encode(t, "a", 1, 0, &ids, &n, &err);
        CHECKF(rc == -1 && strstr(err.msg, "normalizer.normalizers[6] (Replace): grows 1 bytes of text past 4128 bytes"),
               "encode of 'a' through 12 Replace a -> aaaa: rc %d, %zu ids, '%s'", rc, n, rc ? err.msg : "");
        CHECK(rc == 0 || tq_exit_code(&err) == 1);
        if (!rc)
            free(ids);
        /* text without an 'a' goes through unchanged */
        char a1000[1001];
        memset(a1000, 'b', 1000), a1000[1000] = 0;
        CHECK(tq_tok_encode(t, a1000, 1000, 0, &ids, &n, &err) == 0 && n == 1000);
        free(ids);
    }
    tq_tok_free(t);
    /* the bound is relative to the input: 1000 bytes may grow to 36096 (two steps: 16000),
     * so of three steps the third (64000) is refused */
    t = load_json(replace_chain(3, "normalizer", "normalizers"), &err);
    CHECKF(t, "load: %s", err.msg);
    if (t) {
        char a1000[1001];
        memset(a1000, 'a', 1000), a1000[1000] = 0;
        int rc = tq_tok_encode(t, a1000, 1000, 0, &ids, &n, &err);
        CHECKF(rc == -1 && strstr(err.msg, "normalizer.normalizers[2] (Replace): grows 1000 bytes of text past 36096"),
               "1000 a: '%s'", rc ? err.msg : "encoded");
        if (!rc)
            free(ids);
        CHECK(tq_tok_encode(t, a1000, 100, 0, &ids, &n, &err) == 0 && n == 6400); /* 6400 <= 7296 */
        free(ids);
    }
    tq_tok_free(t);

    t = load_json(replace_chain(12, "decoder", "decoders"), &err);
    CHECKF(t, "load: %s", err.msg);
    if (t) {
        char *text = NULL;
        size_t len = 0;
        int rc = tq_tok_decode(t, (const int32_t[]){'a'}, 1, &text, &len, &err);
        CHECKF(rc == -1 && strstr(err.msg, "decoder.decoders[6] (Replace): grows 1 bytes of text past 4128 bytes"),
               "decode of 'a' through 12 Replace a -> aaaa: rc %d, %zu bytes, '%s'", rc, len, rc ? err.msg : "");
        free(text);
        CHECK(tq_tok_decode(t, (const int32_t[]){'b', 'c'}, 2, &text, &len, &err) == 0 && len == 2);
        free(text);
    }
    tq_tok_free(t);

    cJSON *j = base_json(), *seq = cJSON_AddObjectToObject(j, "normalizer");
    cJSON_AddStringToObject(seq, "type", "Sequence");
    cJSON *arr = cJSON_AddArrayToObject(seq, "normalizers");
    cJSON_AddItemToArray(arr, cJSON_Parse("{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"}"));
    cJSON_AddItemToArray(arr, cJSON_Parse("{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xE2\x96\x81\"},\"content\":\"  \"}"));
    cJSON_AddItemToArray(arr, cJSON_Parse("{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"}"));
    t = load_json(j, &err);
    CHECKF(t, "load: %s", err.msg);
    if (t) {
        /* 5000 spaces -> 5000 U+2581 -> 10000 spaces -> 10000 U+2581 (30000 bytes, 6 times) */
        char *sp = malloc(5001);
        memset(sp, ' ', 5000), sp[5000] = 0;
        CHECKF(tq_tok_encode(t, sp, 5000, 0, &ids, &n, &err) == 0 && n == 30000, "spaces: %s", err.msg);
        free(ids);
        free(sp);
    }
    tq_tok_free(t);
}

int main(void)
{
    RUN(test_trailing_bytes);
    RUN(test_pcre2_only);
    RUN(test_growth_bounded);
    TEST_MAIN_END();
}
