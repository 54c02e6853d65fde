/* tokenizer/: small hand-checked tokenizers (byte-level and SentencePiece-style), added-token
 * flags, streaming, the post-processor, and malformed tokenizer.json files naming the field. */
#include "check.h"
#include "formats/formats.h"
#include "gguf_writer.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>

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

static void add_tok(cJSON *added, int id, const char *content, int lstrip, int rstrip, int single, int normalized)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", id);
    cJSON_AddStringToObject(a, "content", content);
    cJSON_AddBoolToObject(a, "single_word", single);
    cJSON_AddBoolToObject(a, "lstrip", lstrip);
    cJSON_AddBoolToObject(a, "rstrip", rstrip);
    cJSON_AddBoolToObject(a, "normalized", normalized);
    cJSON_AddBoolToObject(a, "special", 1);
    cJSON_AddItemToArray(added, a);
}

/* Byte-level: ids 0..255 are the bytes' characters; 256.. merges; GPT-2 split regex. */
static char *bytelevel_json(void)
{
    cJSON *j = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(j, "model"), *v = cJSON_AddObjectToObject(m, "vocab");
    cJSON_AddStringToObject(m, "type", "BPE");
    for (unsigned b = 0; b < 256; b++) {
        char c[4];
        byte_char(b, c);
        cJSON_AddNumberToObject(v, c, b);
    }
    static const char *const merged[] = {"he", "ll", "hell", "hello", "\xC4\xA0w", "or"};
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r"};
    cJSON *mg = cJSON_AddArrayToObject(m, "merges");
    for (int i = 0; i < 6; i++) {
        cJSON_AddNumberToObject(v, merged[i], 256 + i);
        cJSON_AddItemToArray(mg, cJSON_CreateString(merges[i]));
    }
    cJSON *added = cJSON_AddArrayToObject(j, "added_tokens");
    add_tok(added, 300, "<|end|>", 0, 0, 0, 0);
    add_tok(added, 301, "<L>", 1, 0, 0, 0);
    add_tok(added, 302, "<R>", 0, 1, 0, 0);
    add_tok(added, 303, "<W>", 0, 0, 1, 0);
    cJSON_AddItemToObject(j, "normalizer", cJSON_CreateNull());
    cJSON *pre = cJSON_AddObjectToObject(j, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
    cJSON_AddBoolToObject(pre, "use_regex", 1);
    cJSON *dec = cJSON_AddObjectToObject(j, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON_AddItemToObject(j, "post_processor",
                          cJSON_Parse("{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|end|>\","
                                      "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":"
                                      "{\"id\":\"<|end|>\",\"type_id\":0}}],\"special_tokens\":{}}"));
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

/* SentencePiece-style: <unk> <s> </s>, 256 byte tokens (3..258), then pieces. */
static char *sp_json(int byte_fallback, const char *pre)
{
    cJSON *j = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(j, "model"), *v = cJSON_AddObjectToObject(m, "vocab");
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddStringToObject(m, "unk_token", "<unk>");
    cJSON_AddBoolToObject(m, "byte_fallback", byte_fallback);
    cJSON_AddBoolToObject(m, "fuse_unk", 1);
    cJSON_AddNumberToObject(v, "<unk>", 0);
    cJSON_AddNumberToObject(v, "<s>", 1);
    cJSON_AddNumberToObject(v, "</s>", 2);
    for (unsigned b = 0; b < 256; b++) {
        char h[8];
        snprintf(h, sizeof h, "<0x%02X>", b);
        cJSON_AddNumberToObject(v, h, 3 + b);
    }
    static const char *const piece[] = {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab"};
    for (int i = 0; i < 6; i++)
        cJSON_AddNumberToObject(v, piece[i], 259 + i);
    cJSON_AddItemToObject(m, "merges",
                          cJSON_Parse("[[\"\xE2\x96\x81\", \"a\"], [\"a\", \"b\"], [\"\xE2\x96\x81" "a\", \"b\"]]"));
    cJSON *added = cJSON_AddArrayToObject(j, "added_tokens");
    add_tok(added, 0, "<unk>", 0, 0, 0, 0);
    add_tok(added, 1, "<s>", 0, 0, 0, 0);
    add_tok(added, 2, "</s>", 0, 0, 0, 0);
    if (pre) {
        cJSON_AddItemToObject(j, "normalizer", cJSON_CreateNull());
        cJSON_AddItemToObject(j, "pre_tokenizer", cJSON_Parse(pre));
    } else {
        cJSON_AddItemToObject(j, "normalizer",
                              cJSON_Parse("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":"
                                          "\"\xE2\x96\x81\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
                                          "\"content\":\"\xE2\x96\x81\"}]}"));
        cJSON_AddItemToObject(j, "pre_tokenizer", cJSON_CreateNull());
    }
    cJSON_AddItemToObject(j, "decoder",
                          cJSON_Parse("{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":"
                                      "\"\xE2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
                                      "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}"));
    cJSON_AddItemToObject(j, "post_processor",
                          cJSON_Parse("{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\","
                                      "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":"
                                      "{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}}"));
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static tq_tok *load(const char *json)
{
    tq_err err = {0};
    tq_tok *t = NULL;
    CHECK_OK(tq_tok_load_mem(json, strlen(json), NULL, 0, "t.json", &t, &err));
    return t;
}

/* encode(text) == want[0..n) (n < 0 ends the list) */
static int enc_is(const tq_tok *t, const char *text, int special, const int32_t *want, size_t n)
{
    tq_err err = {0};
    int32_t *ids;
    size_t k;
    if (tq_tok_encode(t, text, strlen(text), special, &ids, &k, &err)) {
        printf("  encode '%s': %s\n", text, err.msg);
        return 0;
    }
    int ok = k == n && !memcmp(ids, want, n * sizeof *ids);
    if (!ok) {
        printf("  encode '%s' gave", text);
        for (size_t i = 0; i < k; i++)
            printf(" %d", ids[i]);
        printf("\n");
    }
    free(ids);
    return ok;
}

static int dec_is(const tq_tok *t, const int32_t *ids, size_t n, const char *want)
{
    tq_err err = {0};
    char *s;
    size_t len;
    if (tq_tok_decode(t, ids, n, &s, &len, &err)) {
        printf("  decode: %s\n", err.msg);
        return 0;
    }
    int ok = len == strlen(want) && !memcmp(s, want, len);
    if (!ok)
        printf("  decode gave '%s'\n", s);
    free(s);
    return ok;
}

#define ENC(t, text, ...) enc_is(t, text, 0, (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define ENC_SPECIAL(t, text, ...) enc_is(t, text, 1, (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define DEC(t, want, ...) dec_is(t, (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t), want)

static tq_tok *bytelevel_tok(void)
{
    char *j = bytelevel_json();
    tq_tok *t = load(j);
    free(j);
    return t;
}

static void test_bytelevel_merges(void)
{
    tq_tok *t = bytelevel_tok();
    if (!t)
        return;
    CHECK(ENC(t, "hello", 259));
    CHECK(ENC(t, "hello world", 259, 260, 261, 'l', 'd'));
    CHECK(ENC(t, "hel", 256, 'l'));
    CHECK(DEC(t, "hello world", 259, 260, 261, 'l', 'd'));
    /* a byte that is not a character on its own: U+00E9 as two byte tokens */
    CHECK(ENC(t, "\xC3\xA9", 0xC3, 0xA9));
    CHECK(DEC(t, "\xC3\xA9", 0xC3, 0xA9));
    /* half a character decodes to U+FFFD */
    CHECK(DEC(t, "\xEF\xBF\xBD" "a", 0xC3, 'a'));
    tq_err err = {0};
    int32_t *ids = NULL;
    size_t n;
    CHECK(tq_tok_encode(t, "ab\xFF", 3, 0, &ids, &n, &err) == -1 && strstr(err.msg, "byte 2"));
    CHECK(tq_tok_decode(t, (const int32_t[]){5000}, 1, (char **)&ids, &n, &err) == -1 && strstr(err.msg, "5000"));
    CHECK(tq_tok_vocab_size(t) == 304 && tq_tok_token_id(t, "hello") == 259 && tq_tok_token_id(t, "<|end|>") == 300);
    tq_tok_free(t);
}

static void test_added_flags(void)
{
    tq_tok *t = bytelevel_tok();
    if (!t)
        return;
    CHECK(ENC(t, "a<|end|>b", 'a', 300, 'b'));
    CHECK(ENC(t, "<|end|><|end|>", 300, 300));
    CHECK(ENC(t, "<|end", '<', '|', 'e', 'n', 'd'));
    CHECK(ENC(t, "a  <L>b", 'a', 301, 'b'));        /* lstrip: the spaces before belong to <L> */
    CHECK(ENC(t, "a  <R>b", 'a', 32, 32, 302, 'b')); /* no lstrip: the spaces stay */
    CHECK(ENC(t, "a<R> \t b", 'a', 302, 'b'));      /* rstrip: the white space after goes */
    CHECK(ENC(t, "x<W>", 'x', '<', 'W', '>'));      /* single_word: not inside a word */
    CHECK(ENC(t, " <W> ", 32, 303, 32));
    CHECK(ENC_SPECIAL(t, "hello", 300, 259, 300));
    CHECK(DEC(t, "a<|end|>b", 'a', 300, 'b'));
    tq_tok_free(t);
}

static void test_sentencepiece(void)
{
    char *j = sp_json(1, NULL);
    tq_tok *t = load(j);
    free(j);
    if (!t)
        return;
    CHECK(ENC(t, "ab", 264));
    CHECK(ENC(t, "ab ab", 264, 264));
    CHECK(ENC(t, "ba", 259, 261, 260));
    CHECK(ENC(t, "\xC3\xA9", 259, 3 + 0xC3, 3 + 0xA9)); /* byte fallback */
    CHECK(ENC_SPECIAL(t, "ab", 1, 264));
    CHECK(DEC(t, "ab ab", 264, 264));
    CHECK(DEC(t, "\xC3\xA9", 259, 3 + 0xC3, 3 + 0xA9)); /* Strip drops the prepended space */
    CHECK(DEC(t, " ab", 259, 264));
    tq_tok_free(t);
    /* Without byte fallback, unknown characters become one fused <unk>. */
    j = sp_json(0, NULL);
    t = load(j);
    free(j);
    if (!t)
        return;
    CHECK(ENC(t, "\xC3\xA9\xC3\xA9x", 259, 0));
    CHECK(ENC(t, "\xC3\xA9 ab", 259, 0, 264));
    tq_tok_free(t);
}

static void test_metaspace_pretokenizer(void)
{
    char *j = sp_json(1, "{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\",\"prepend_scheme\":\"first\","
                         "\"split\":true}");
    tq_tok *t = load(j);
    free(j);
    if (!t)
        return;
    CHECK(ENC(t, "ab ab", 264, 264));
    CHECK(ENC(t, "<s>ab", 1, 263)); /* "first": no ▁ after an added token */
    tq_tok_free(t);
}

static void test_stream_holds_partial_utf8(void)
{
    tq_tok *t = bytelevel_tok();
    tq_err err = {0};
    tq_tok_stream *s = NULL;
    if (!t || tq_tok_stream_new(t, &s, &err)) {
        CHECK(0);
        tq_tok_free(t);
        return;
    }
    const char *out;
    size_t n;
    /* "é€" as bytes C3 A9 E2 82 AC, one token each, after "hello" */
    CHECK_OK(tq_tok_stream_push(s, 259, &out, &n, &err));
    CHECK(n == 5 && !memcmp(out, "hello", 5));
    CHECK_OK(tq_tok_stream_push(s, 0xC3, &out, &n, &err));
    CHECK(n == 0);
    CHECK_OK(tq_tok_stream_push(s, 0xA9, &out, &n, &err));
    CHECK(n == 2 && !memcmp(out, "\xC3\xA9", 2));
    CHECK_OK(tq_tok_stream_push(s, 0xE2, &out, &n, &err));
    CHECK(n == 0);
    CHECK_OK(tq_tok_stream_push(s, 0x82, &out, &n, &err));
    CHECK(n == 0);
    CHECK_OK(tq_tok_stream_push(s, 0xAC, &out, &n, &err));
    CHECK(n == 3 && !memcmp(out, "\xE2\x82\xAC", 3));
    /* an unfinished character at the end comes out as U+FFFD */
    CHECK_OK(tq_tok_stream_push(s, 0xE2, &out, &n, &err));
    CHECK(n == 0);
    CHECK_OK(tq_tok_stream_finish(s, &out, &n, &err));
    CHECK(n == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(tq_tok_stream_push(s, 99999, &out, &n, &err) == -1);
    tq_tok_stream_free(s);
    tq_tok_free(t);
}

/* Each malformed file fails with a message naming the field. */
static void test_malformed(void)
{
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", "model.type: model type 'WordPiece' is not supported"},
        {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "model.type"},
        {"{\"model\":{\"vocab\":{\"a\":0}}}", "model.type: missing"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\",\"a zz\"]}}",
         "model.merges[1]: 'zz' is not in model.vocab"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
         "model.merges[0]: the merged token 'ab' is not in model.vocab"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a  a\"]}}", "model.merges[0]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[7]}}", "model.merges[0]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0}}}", "model.vocab: id 0 is given to both"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1}}}", "model.vocab: token 'a' has id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1.5}}}", "model.vocab: token 'a' has id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999999}}}", "model.vocab"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":[]}}", "model.vocab"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"unk_token\":\"<unk>\"}}", "model.unk_token: '<unk>'"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"dropout\":0.1}}", "model.dropout"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":"
         "{\"Regex\":\"(unclosed\"},\"behavior\":\"Isolated\",\"invert\":false}}",
         "pre_tokenizer.pattern.Regex: invalid regex"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":"
         "[{\"type\":\"Digits\"},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[a-\"},\"behavior\":\"Isolated\"}]}}",
         "pre_tokenizer.pretokenizers[1].pattern.Regex: invalid regex"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":"
         "{\"Regex\":\"a\"},\"behavior\":\"Sideways\"}}",
         "pre_tokenizer.behavior: split behavior 'Sideways'"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{}}}",
         "pre_tokenizer.behavior"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Precompiled\"}}",
         "normalizer.type: normalizer type 'Precompiled'"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"CTC\"}]}}",
         "decoder.decoders[0].type: decoder type 'CTC'"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":-1,\"stop\":0}}",
         "decoder: start and stop"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,\"content\":\"<x>\"},"
         "{\"id\":2,\"content\":\"<x>\"}]}",
         "added_tokens[1]: content '<x>' is already added_tokens[0]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,\"content\":\"<x>\"},"
         "{\"id\":1,\"content\":\"<y>\"}]}",
         "added_tokens[1]: id 1 is already added_tokens[0]"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,\"content\":\"\"}]}",
         "added_tokens[0]: content is empty"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":1,\"content\":\"x\",\"lstrip\":3}]}",
         "added_tokens[0].lstrip: must be true or false"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"added_tokens\":{}}", "added_tokens: must be an array"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"post_processor\":{\"type\":\"TemplateProcessing\","
         "\"single\":[{\"SpecialToken\":{\"id\":\"<nope>\"}},{\"Sequence\":{\"id\":\"A\"}}]}}",
         "post_processor.single[0]: '<nope>' is neither"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"truncation\":{\"max_length\":5}}", "truncation"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}},\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":"
         "[[[[[[[[[[[]]]]]]]]]]]}}",
         "normalizer.normalizers[0]: must be an object"},
        {"{\"model\":", "not valid JSON"},
        {"[1,2]", "not a JSON object"},
        {"{}", "model: missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tq_err err = {0};
        tq_tok *t = NULL;
        int rc = tq_tok_load_mem(cases[i].json, strlen(cases[i].json), NULL, 0, "bad.json", &t, &err);
        CHECKF(rc == -1 && !t && strstr(err.msg, cases[i].want) && !strncmp(err.msg, "bad.json: ", 10),
               "case %zu: got '%s', want '%s'", i, err.msg, cases[i].want);
        CHECKF(rc != -1 || tq_exit_code(&err) == 1, "case %zu: exit code %d", i, tq_exit_code(&err));
        tq_tok_free(t);
    }
}

static void test_load_dir_config(void)
{
    char *j = sp_json(1, NULL);
    const char *dir = t_path("tokdir");
    tq_err err = {0};
    CHECK_OK(tq_mkdir_p(dir, &err));
    char p[1200];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    CHECK_OK(tq_write_file_atomic(p, j, strlen(j), &err));
    free(j);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    const char *cfg = "{\"bos_token\":{\"__type\":\"AddedToken\",\"content\":\"<s>\"},\"eos_token\":\"</s>\"}";
    CHECK_OK(tq_write_file_atomic(p, cfg, strlen(cfg), &err));
    tq_tok *t = NULL;
    CHECK_OK(tq_tok_load(dir, &t, &err));
    CHECK(t && tq_tok_bos(t) == 1 && tq_tok_eos(t) == 2 && tq_tok_n_added(t) == 3);
    int32_t id;
    CHECK(t && !strcmp(tq_tok_added(t, 1, &id), "<s>") && id == 1);
    tq_tok_free(t);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    CHECK_OK(tq_tok_load(p, &t, &err)); /* the file itself works too */
    tq_tok_free(t);
    CHECK(tq_tok_load(t_path("no-such-dir"), &t, &err) == -1 && strstr(err.msg, "no-such-dir"));
}

/* tokenizer.json as formats/ writes it from a GGUF vocabulary (tokenizer.ggml.*) loads and
 * encodes: byte-level (gpt2, qwen2 pre-tokenizer) and SentencePiece (llama, merges from scores,
 * byte fallback). */
static tq_tok *gguf_tok(gw *w, const char *name)
{
    tq_err err = {0};
    float v[64] = {0};
    uint64_t ne[2] = {8, 8};
    gw_tensor_add(w, "token_embd.weight", 2, ne, 0, v, sizeof v);
    char path[1100];
    snprintf(path, sizeof path, "%s/%s.gguf", t_tmpdir(), name);
    CHECK(gw_write(w, path) == 0);
    gw_free(w);
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, path, &err));
    tq_tok *t = NULL;
    for (size_t i = 0; m && i < m->n_generated; i++)
        if (!strcmp(m->generated_names[i], "tokenizer.json")) {
            char *js = cJSON_PrintUnformatted(m->generated[i]);
            CHECK_OK(tq_tok_load_mem(js, strlen(js), NULL, 0, name, &t, &err));
            free(js);
        }
    CHECKF(t, "%s: no tokenizer.json from the GGUF vocabulary", name);
    tq_model_close(m);
    return t;
}

static void test_gguf_vocabulary(void)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen3");
    const char *toks[] = {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "a", "<|endoftext|>"};
    int32_t types[] = {1, 1, 1, 1, 1, 3};
    const char *merges[] = {"a b", "\xc4\xa0 a"};
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(&w, "tokenizer.ggml.pre", "qwen2");
    gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, 6);
    gw_kv_i32_array(&w, "tokenizer.ggml.token_type", types, 6);
    gw_kv_str_array(&w, "tokenizer.ggml.merges", merges, 2);
    tq_tok *t = gguf_tok(&w, "gguf-bpe");
    if (t) {
        CHECK(ENC(t, "ab a<|endoftext|>b", 2, 4, 5, 1));
        CHECK(DEC(t, "ab a<|endoftext|>b", 2, 4, 5, 1));
    }
    tq_tok_free(t);
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "llama");
    gw_spm_vocab(&w);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    t = gguf_tok(&w, "gguf-spm");
    if (t) {
        CHECK(ENC(t, "ab A", 9, 4, 3));           /* ▁ab ▁ <0x41> */
        CHECK(ENC_SPECIAL(t, "ab", 1, 9));        /* bos first */
        CHECK(DEC(t, "ab A", 9, 4, 3));
    }
    tq_tok_free(t);
}

int main(void)
{
    RUN(test_bytelevel_merges);
    RUN(test_added_flags);
    RUN(test_sentencepiece);
    RUN(test_metaspace_pretokenizer);
    RUN(test_stream_holds_partial_utf8);
    RUN(test_malformed);
    RUN(test_load_dir_config);
    RUN(test_gguf_vocabulary);
    TEST_MAIN_END();
}
