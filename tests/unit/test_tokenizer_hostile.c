/* tokenizer/ on hostile tokenizer.json files (issue 31): bytes after the JSON value,
 * PCRE2-only regex syntax, normalizer and decoder chains that grow the text without bound,
 * many or long added tokens (matching stays linear); and the added-token split checked
 * against a naive restatement of its rule on random tokens and texts. */
#include "check.h"
#include "tokenizer/tokenizer.h"
#include <cjson/cJSON.h>
#include <time.h>

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
        CHECKF(rc == -1 && strstr(err.msg, "t.json: normalizer.normalizers[6] (Replace): grows 1 bytes of text past 4128 bytes"),
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
        CHECKF(rc == -1 && strstr(err.msg, "t.json: decoder.decoders[6] (Replace): grows 1 bytes of text past 4128 bytes"),
               "decode of 'a' through 12 Replace a -> aaaa: rc %d, %zu bytes, '%s'", rc, len, rc ? err.msg : "");
        free(text);
        CHECK(tq_tok_decode(t, (const int32_t[]){'b', 'c'}, 2, &text, &len, &err) == 0 && len == 2);
        free(text);
    }
    tq_tok_free(t);

    /* a step other than Replace is held to the bound too: Prepend of 5000 bytes to 'a' */
    cJSON *j = base_json(), *pre = cJSON_AddObjectToObject(j, "normalizer");
    char *big = malloc(5001);
    memset(big, 'p', 5000), big[5000] = 0;
    cJSON_AddStringToObject(pre, "type", "Prepend");
    cJSON_AddStringToObject(pre, "prepend", big);
    free(big);
    t = load_json(j, &err);
    CHECKF(t, "load: %s", err.msg);
    if (t) {
        int rc = tq_tok_encode(t, "a", 1, 0, &ids, &n, &err);
        CHECKF(rc == -1 && strstr(err.msg, "t.json: normalizer (Prepend): grows 1 bytes of text past 4128 bytes"), "Prepend: '%s'",
               rc ? err.msg : "encoded");
        if (!rc)
            free(ids);
        /* 200 bytes may take it: 5200 <= 6400 + 4096 */
        char b200[201];
        memset(b200, 'b', 200), b200[200] = 0;
        CHECK(tq_tok_encode(t, b200, 200, 0, &ids, &n, &err) == 0 && n == 5200);
        free(ids);
    }
    tq_tok_free(t);

    j = base_json();
    cJSON *seq = cJSON_AddObjectToObject(j, "normalizer");
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

static void add_tok(cJSON *added, int id, const char *content, int lstrip, int rstrip, int single)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", id);
    cJSON_AddStringToObject(a, "content", content);
    cJSON_AddBoolToObject(a, "single_word", single);
    cJSON_AddBoolToObject(a, "lstrip", lstrip);
    cJSON_AddBoolToObject(a, "rstrip", rstrip);
    cJSON_AddBoolToObject(a, "normalized", 0);
    cJSON_AddBoolToObject(a, "special", 1);
    cJSON_AddItemToArray(added, a);
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 100,000 added tokens made a 3-byte encode take 14-17 s: loading checked each token's id
 * against every one before it. And matching walked the token trie from every position, so a
 * long token that the text keeps almost matching cost its length at every byte. Both are
 * linear now; the CPU-time bound below is some 20 times what they take here (about 0.4 s),
 * and a hundredth of what the quadratic code took (over a minute). */
static void test_added_linear(void)
{
    enum { N_ADDED = 200000, LONG = 100000, TEXT = 200000 };
    double t0 = cpu_seconds();
    tq_err err = {0};
    cJSON *j = base_json(), *added = cJSON_AddArrayToObject(j, "added_tokens");
    for (int i = 0; i < N_ADDED; i++) {
        char c[32];
        snprintf(c, sizeof c, "<t%d>", i);
        add_tok(added, 1000 + i, c, 0, 0, 0);
    }
    tq_tok *t = load_json(j, &err);
    CHECKF(t, "load: %s", err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    if (t) {
        CHECK(tq_tok_encode(t, "abc", 3, 0, &ids, &n, &err) == 0 && n == 3 && ids[0] == 'a' && ids[2] == 'c');
        free(ids);
        const char *s = "x<t199999><t0><t12345y";
        CHECK(tq_tok_encode(t, s, strlen(s), 0, &ids, &n, &err) == 0 && n == 11 && ids[0] == 'x' &&
              ids[1] == 1000 + 199999 && ids[2] == 1000 && ids[3] == '<' && ids[10] == 'y');
        free(ids);
    }
    tq_tok_free(t);

    /* one token of LONG 'a's and a 'b'; the text is TEXT 'a's then 'b' */
    j = base_json();
    added = cJSON_AddArrayToObject(j, "added_tokens");
    char *lng = malloc(TEXT + 2);
    memset(lng, 'a', LONG), lng[LONG] = 'b', lng[LONG + 1] = 0;
    add_tok(added, 300, lng, 0, 0, 0);
    add_tok(added, 301, "aa", 0, 0, 1); /* a single_word token, never standing alone here */
    t = load_json(j, &err);
    CHECKF(t, "load: %s", err.msg);
    if (t) {
        memset(lng, 'a', TEXT), lng[TEXT] = 'b', lng[TEXT + 1] = 0;
        CHECK(tq_tok_encode(t, lng, TEXT + 1, 0, &ids, &n, &err) == 0);
        /* TEXT - LONG bytes 'a' (each its own id: no merges), then the long token */
        CHECKF(n == TEXT - LONG + 1 && ids[0] == 'a' && ids[n - 2] == 'a' && ids[n - 1] == 300, "%zu ids: %d %d %d", n,
               ids[0], ids[n - 2], ids[n - 1]);
        free(ids);
    }
    free(lng);
    tq_tok_free(t);
    double took = cpu_seconds() - t0;
    printf("  200000 added tokens loaded and a 100000-byte token matched in %.2f s of CPU\n", took);
    CHECKF(took < 10, "took %.1f s of CPU: matching or loading is not linear", took);
}

/* ---- the added-token split against a naive restatement of its rule ----
 * From the left: at each position the longest added token that begins there and may stand
 * there (a single_word token only with no word character, [A-Za-z0-9_] here, right before
 * or after it) is taken, with the white space before it when lstrip (back to the end of the
 * previous token) and after it when rstrip; else the position's byte is plain text. The
 * texts use the alphabet "ab _"; a plain byte is its own id, or the id of the added token
 * that is that one character (an added token's id wins in the vocabulary too). */
typedef struct { const char *s; int lstrip, rstrip, single; } ntok;

static int nword(char c)
{
    return c == 'a' || c == 'b' || c == '_';
}

static int32_t plain_id(const ntok *tk, int nt, char c)
{
    for (int q = 0; q < nt; q++)
        if (tk[q].s[0] == c && !tk[q].s[1])
            return 1000 + q;
    return (unsigned char)c;
}

static size_t naive(const ntok *tk, int nt, const char *s, int32_t *out)
{
    size_t n = strlen(s), k = 0, start = 0;
    for (size_t i = 0; i < n;) {
        int best = -1;
        size_t bl = 0;
        for (int q = 0; q < nt; q++) {
            size_t l = strlen(tk[q].s);
            if (l <= bl || l > n - i || memcmp(s + i, tk[q].s, l))
                continue;
            if (tk[q].single && ((i > 0 && nword(s[i - 1])) || (i + l < n && nword(s[i + l]))))
                continue;
            best = q, bl = l;
        }
        if (best < 0) {
            i++;
            continue;
        }
        size_t a = i, b = i + bl;
        if (tk[best].lstrip)
            while (a > start && s[a - 1] == ' ')
                a--;
        if (tk[best].rstrip)
            while (b < n && s[b] == ' ')
                b++;
        for (size_t x = start; x < a; x++)
            out[k++] = plain_id(tk, nt, s[x]);
        out[k++] = 1000 + best;
        i = start = b;
    }
    for (size_t x = start; x < n; x++)
        out[k++] = plain_id(tk, nt, s[x]);
    return k;
}

static unsigned rnd(unsigned *st)
{
    *st = *st * 1103515245u + 12345u;
    return (*st >> 16) & 0x7fff;
}

static void test_added_split_rule(void)
{
    static const char alpha[] = "ab _";
    unsigned st = 31;
    int bad = 0;
    for (int round = 0; round < 300 && bad < 3; round++) {
        ntok tk[8];
        char store[8][8];
        int nt = 1 + (int)(rnd(&st) % 8);
        cJSON *j = base_json(), *added = cJSON_AddArrayToObject(j, "added_tokens");
        for (int q = 0; q < nt; q++) {
            int l;
        again:
            l = 1 + (int)(rnd(&st) % 5);
            for (int c = 0; c < l; c++)
                store[q][c] = alpha[rnd(&st) % 4];
            store[q][l] = 0;
            if (store[q][0] == ' ' || store[q][l - 1] == ' ')
                goto again; /* white space at a token's edge would make lstrip/rstrip ambiguous */
            for (int p = 0; p < q; p++)
                if (!strcmp(store[p], store[q]))
                    goto again;
            tk[q] = (ntok){store[q], rnd(&st) % 3 == 0, rnd(&st) % 3 == 0, rnd(&st) % 2 == 0};
            add_tok(added, 1000 + q, tk[q].s, tk[q].lstrip, tk[q].rstrip, tk[q].single);
        }
        tq_err err = {0};
        tq_tok *t = load_json(j, &err);
        CHECKF(t, "load: %s", err.msg);
        for (int k = 0; t && k < 20; k++) {
            char text[40];
            int tl = (int)(rnd(&st) % 39);
            for (int c = 0; c < tl; c++)
                text[c] = alpha[rnd(&st) % 4];
            text[tl] = 0;
            int32_t want[64], *ids = NULL;
            size_t nw = naive(tk, nt, text, want), n = 0;
            int ok = tq_tok_encode(t, text, strlen(text), 0, &ids, &n, &err) == 0 && n == nw &&
                     !memcmp(ids, want, n * sizeof *ids);
            CHECKF(ok, "round %d: '%s' gave %zu ids, the rule %zu", round, text, n, nw);
            if (!ok) {
                for (int q = 0; q < nt; q++)
                    printf("  token %d '%s' l%d r%d w%d\n", 1000 + q, tk[q].s, tk[q].lstrip, tk[q].rstrip, tk[q].single);
                for (size_t q = 0; q < n || q < nw; q++)
                    printf("  %zu: %d %d\n", q, q < n ? ids[q] : -1, q < nw ? want[q] : -1);
            }
            bad += !ok;
            free(ids);
        }
        tq_tok_free(t);
    }
}

/* A normalized single_word token at the start of a section that follows a non-normalized
 * added token: the Rust tokenizers library matches normalized tokens on each section alone
 * (tokenizers/src/tokenizer/added_vocabulary.rs, find_matches: "start == 0 ||
 * !ends_with_word(&sentence[..start])" on the section), so the section's start counts as a
 * word boundary. Before, the byte before the section ('Y', a word character) was looked at. */
static void test_single_word_section_start(void)
{
    cJSON *j = base_json(), *added = cJSON_AddArrayToObject(j, "added_tokens");
    add_tok(added, 1000, "XY", 0, 0, 0);
    add_tok(added, 1001, "ab", 0, 0, 1);
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(added, 1), "normalized", cJSON_CreateTrue());
    tq_err err = {0};
    tq_tok *t = load_json(j, &err);
    CHECKF(t, "load: %s", err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    if (t) {
        CHECK(tq_tok_encode(t, "XYab", 4, 0, &ids, &n, &err) == 0);
        CHECKF(n == 2 && ids[0] == 1000 && ids[1] == 1001, "%zu ids: %d %d", n, n ? ids[0] : -1, n > 1 ? ids[1] : -1);
        free(ids);
        CHECK(tq_tok_encode(t, "XYabc", 5, 0, &ids, &n, &err) == 0 && n == 4 && ids[1] == 'a'); /* 'c' follows */
        free(ids);
    }
    tq_tok_free(t);
}

int main(void)
{
    RUN(test_trailing_bytes);
    RUN(test_pcre2_only);
    RUN(test_growth_bounded);
    RUN(test_added_linear);
    RUN(test_added_split_rule);
    RUN(test_single_word_section_start);
    TEST_MAIN_END();
}
