/* GGUF as a tq_model: names, shapes, config, llama's Q/K un-permutation, split sets, and a
 * generated qwen3_moe model written by the tests' GGUF writer read back unchanged. */
#include "formats/formats.h"
#include "check.h"
#include "gguf_writer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static tq_err err;

static void model_free(tq_model *m)
{
    tq_model_close(m);
}

static tq_model *open_gguf(const char *path, unsigned flags)
{
    tq_model *m = NULL;
    if (tq_model_open_ex(&m, path, flags, &err) != 0) {
        printf("  open %s: %s\n", path, err.msg);
        return NULL;
    }
    return m;
}

static const tq_model_tensor *find(const tq_model *m, const char *name)
{
    return tq_model_find(m, name);
}

/* The whole tensor as f32 (F16/BF16 tensors, presented as stored, widened exactly). */
static float *read_all(const tq_model_tensor *t)
{
    void *raw = malloc(t->info.nbytes ? t->info.nbytes : 4);
    float *v = malloc(t->info.nelem ? t->info.nelem * 4 : 4);
    if (!raw || !v || tq_model_read(t, 0, raw, t->info.nbytes, &err) != 0 ||
        tq_to_f32(t->info.dtype, raw, v, t->info.nelem, &err) != 0) {
        printf("  read %s: %s\n", t->info.name, err.msg);
        free(raw);
        free(v);
        return NULL;
    }
    free(raw);
    return v;
}

static double cfg_num(const tq_model *m, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m->config, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *cfg_str(const tq_model *m, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m->config, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int has_warning(const tq_model *m, const char *needle)
{
    const char *const *w;
    size_t n = tq_gguf_model_warnings(m, &w);
    for (size_t i = 0; i < n; i++)
        if (strstr(w[i], needle))
            return 1;
    return 0;
}

static const char *vectors(void)
{
    static char p[4096];
    const char *root = getenv("TQ_ROOT");
    snprintf(p, sizeof p, "%s/testdata/vectors/ggml-vectors.gguf", root ? root : ".");
    return p;
}

/* Exactly representable values only (tests build them so). */
static uint16_t f16_exact(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) == 0)
        return (uint16_t)(b >> 16);
    uint32_t sign = (b >> 16) & 0x8000u;
    int exp = (int)((b >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | (uint32_t)exp << 10 | ((b >> 13) & 0x3ff));
}

/* A deterministic value in [-2, 2) with 6 fractional bits: exact in F16 and F32. */
static float val(uint32_t seed, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed << 32);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return (float)((int)(x % 256) - 128) / 64.0f;
}

/* --------------------------------------------------------------- vectors */
static void test_vectors_keep_names(void)
{
    tq_model *m = open_gguf(vectors(), TQ_MODEL_KEEP_NAMES);
    CHECK(m != NULL);
    if (!m)
        return;
    CHECK(m->n_tensors == 26);
    const tq_model_tensor *t = find(m, "blk.10.ffn_gate_exps.weight");
    CHECK(t && t->info.dtype == TQ_DT_F32 && t->info.ndim == 3 && t->info.shape[0] == 4 && t->info.shape[1] == 6 &&
          t->info.shape[2] == 512 && t->info.nbytes == 4 * 6 * 512 * 4);
    CHECK(t && t->was_quantized && t->src_type == 12);
    t = find(m, "blk.2.attn_q.weight");
    CHECK(t && t->info.ndim == 2 && t->info.shape[0] == 6 && t->info.shape[1] == 512 && !t->was_quantized);
    CHECK(find(m, "model.layers.0.self_attn.q_proj.weight") == NULL);
    /* Byte reads at odd offsets agree with a whole read. */
    t = find(m, "blk.9.attn_q.weight");
    float *all = t ? read_all(t) : NULL;
    CHECK(all != NULL);
    if (all) {
        unsigned char part[1001];
        CHECK_OK(tq_model_read(t, 1027, part, sizeof part, &err));
        CHECK(memcmp(part, (unsigned char *)all + 1027, sizeof part) == 0);
        CHECK(tq_model_read(t, t->info.nbytes - 3, part, 4, &err) == -1);
    }
    free(all);
    model_free(m);
}

static void test_vectors_hf_names_and_config(void)
{
    tq_model *m = open_gguf(vectors(), 0);
    CHECK(m != NULL);
    if (!m)
        return;
    CHECK(find(m, "model.layers.12.self_attn.q_proj.weight") != NULL);
    const tq_model_tensor *t = find(m, "model.layers.3.mlp.switch_mlp.gate_proj.weight");
    CHECK(t && t->info.ndim == 3 && t->info.shape[0] == 4);
    CHECK(strcmp(cfg_str(m, "model_type"), "qwen3_moe") == 0);
    CHECK(cfg_num(m, "num_hidden_layers") == 2);
    CHECK(cfg_num(m, "rope_theta") == 1000000.0);
    CHECK(cfg_num(m, "vocab_size") == 5);
    CHECK(has_warning(m, "20 tensors are stored quantized"));
    model_free(m);
}

/* ------------------------------------------------------ llama Q/K permutation */

static void write_attn_model(const char *path, const char *arch, const float *q, const float *k, uint64_t nq,
                             uint64_t nk, uint64_t in, uint32_t heads, uint32_t kv_heads, int as_f16)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", arch);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    gw_kv_u32(&w, key, heads);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    gw_kv_u32(&w, key, kv_heads);
    snprintf(key, sizeof key, "%s.block_count", arch);
    gw_kv_u32(&w, key, 1);
    uint64_t neq[2] = {in, nq}, nek[2] = {in, nk};
    if (as_f16) {
        uint16_t *hq = malloc(nq * in * 2), *hk = malloc(nk * in * 2);
        for (uint64_t i = 0; i < nq * in; i++)
            hq[i] = f16_exact(q[i]);
        for (uint64_t i = 0; i < nk * in; i++)
            hk[i] = f16_exact(k[i]);
        gw_tensor_add(&w, "blk.0.attn_q.weight", 2, neq, 1, hq, nq * in * 2);
        gw_tensor_add(&w, "blk.0.attn_k.weight", 2, nek, 1, hk, nk * in * 2);
        free(hq);
        free(hk);
    } else {
        gw_tensor_add(&w, "blk.0.attn_q.weight", 2, neq, 0, q, nq * in * 4);
        gw_tensor_add(&w, "blk.0.attn_k.weight", 2, nek, 0, k, nk * in * 4);
    }
    uint64_t neb[1] = {nq};
    float *bias = malloc(nq * sizeof(float)), *pb = malloc(nq * sizeof(float));
    for (uint64_t i = 0; i < nq; i++)
        bias[i] = (float)i;
    gw_llama_permute(bias, pb, nq, sizeof(float), strcmp(arch, "llama") == 0 ? heads : 1);
    gw_tensor_add(&w, "blk.0.attn_q.bias", 1, neb, 0, strcmp(arch, "llama") == 0 ? pb : bias, nq * 4);
    free(bias);
    free(pb);
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
}

static void test_llama_unpermute(void)
{
    const uint64_t in = 40, heads = 4, kv_heads = 2, D = 8, nq = heads * D, nk = kv_heads * D;
    float *q = malloc(nq * in * 4), *k = malloc(nk * in * 4), *pq = malloc(nq * in * 4), *pk = malloc(nk * in * 4);
    for (uint64_t i = 0; i < nq * in; i++)
        q[i] = val(1, i);
    for (uint64_t i = 0; i < nk * in; i++)
        k[i] = val(2, i);
    gw_llama_permute(q, pq, nq, in * sizeof(float), heads);
    gw_llama_permute(k, pk, nk, in * sizeof(float), kv_heads);
    CHECK(memcmp(q, pq, nq * in * 4) != 0); /* the permutation does move rows */
    for (int f16 = 0; f16 < 2; f16++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/llama%d.gguf", t_tmpdir(), f16);
        write_attn_model(path, "llama", pq, pk, nq, nk, in, heads, kv_heads, f16);
        tq_model *m = open_gguf(path, 0);
        CHECK(m != NULL);
        if (!m)
            continue;
        const tq_model_tensor *tq = find(m, "model.layers.0.self_attn.q_proj.weight");
        const tq_model_tensor *tk = find(m, "model.layers.0.self_attn.k_proj.weight");
        const tq_model_tensor *tb = find(m, "model.layers.0.self_attn.q_proj.bias");
        CHECK(tq && tk && tb && tq->info.shape[0] == nq && tq->info.shape[1] == in);
        float *gq = tq ? read_all(tq) : NULL, *gk = tk ? read_all(tk) : NULL, *gbias = tb ? read_all(tb) : NULL;
        CHECKF(gq && memcmp(gq, q, nq * in * 4) == 0, "Q rows not restored (f16=%d)", f16);
        CHECKF(gk && memcmp(gk, k, nk * in * 4) == 0, "K rows not restored (f16=%d)", f16);
        for (uint64_t i = 0; gbias && i < nq; i++)
            CHECK(gbias[i] == (float)i);
        /* A read that starts mid-row and spans rows. */
        float part[50];
        unsigned char rawp[200];
        if (tq) {
            size_t es = tq_dtype_size(tq->info.dtype);
            CHECK(tq->info.dtype == (f16 ? TQ_DT_F16 : TQ_DT_F32)); /* stored dtype kept */
            CHECK_OK(tq_model_read(tq, (3 * in + 7) * es, rawp, 50 * es, &err));
            CHECK_OK(tq_to_f32(tq->info.dtype, rawp, part, 50, &err));
            CHECK(memcmp(part, q + 3 * in + 7, sizeof part) == 0);
            /* and an odd byte range, through the scratch path */
            CHECK_OK(tq_model_read(tq, (3 * in + 7) * es + 1, rawp + 1, 50 * es - 3, &err));
            CHECK_OK(tq_to_f32(tq->info.dtype, rawp, part, 49, &err));
            CHECK(memcmp(part + 1, q + 3 * in + 8, 48 * 4) == 0);
        }
        free(gq);
        free(gk);
        free(gbias);
        /* --keep-names leaves the file exactly as stored. */
        model_free(m);
        m = open_gguf(path, TQ_MODEL_KEEP_NAMES);
        tq = m ? find(m, "blk.0.attn_q.weight") : NULL;
        gq = tq ? read_all(tq) : NULL;
        CHECK(gq && memcmp(gq, pq, nq * in * 4) == 0);
        free(gq);
        model_free(m);
    }
    /* qwen2 files are not permuted: rows come back as stored. */
    char path[4096];
    snprintf(path, sizeof path, "%s/qwen2.gguf", t_tmpdir());
    write_attn_model(path, "qwen2", q, k, nq, nk, in, heads, kv_heads, 0);
    tq_model *m = open_gguf(path, 0);
    const tq_model_tensor *tq = m ? find(m, "model.layers.0.self_attn.q_proj.weight") : NULL;
    float *gq = tq ? read_all(tq) : NULL;
    CHECK(gq && memcmp(gq, q, nq * in * 4) == 0);
    free(gq);
    model_free(m);
    free(q);
    free(k);
    free(pq);
    free(pk);
}

static void test_llama_bad_heads(void)
{
    const uint64_t in = 8, nq = 12;
    float q[96] = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/llama-bad.gguf", t_tmpdir());
    write_attn_model(path, "llama", q, q, nq, nq, in, 8, 8, 0);
    tq_model *m = NULL;
    CHECK(tq_model_open_ex(&m, path, 0, &err) == -1 && m == NULL);
    CHECKF(strstr(err.msg, "tensor 'blk.0.attn_q.bias': 12 rows do not split into 8 heads of an even size") ||
               strstr(err.msg, "tensor 'blk.0.attn_q.weight': 12 rows do not split into 8 heads of an even size"),
           "%s", err.msg);
}

/* ------------------------------------------------------- qwen3_moe round trip */
typedef struct gen_tensor {
    const char *gguf, *hf;
    uint32_t n_dims;
    uint64_t ne[3];
    int f16;
} gen_tensor;

static void test_qwen3_moe_roundtrip(void)
{
    /* hidden 64, 2 layers, 4 experts of 32, 4 heads x 16 (kv 2), vocab 96. */
    char names[64][2][96];
    gen_tensor ts[64];
    size_t n = 0;
#define T(G, H, ND, A, B, C, F) \
    do { \
        snprintf(names[n][0], 96, "%s", G); \
        snprintf(names[n][1], 96, "%s", H); \
        ts[n] = (gen_tensor){names[n][0], names[n][1], ND, {A, B, C}, F}; \
        n++; \
    } while (0)
    T("token_embd.weight", "model.embed_tokens.weight", 2, 64, 96, 1, 1);
    T("output_norm.weight", "model.norm.weight", 1, 64, 1, 1, 0);
    T("output.weight", "lm_head.weight", 2, 64, 96, 1, 1);
    for (int l = 0; l < 2; l++) {
        char g[96], h[96];
#define L(GS, HS, ND, A, B, C, F) \
    do { \
        snprintf(g, sizeof g, "blk.%d.%s", l, GS); \
        snprintf(h, sizeof h, "model.layers.%d.%s", l, HS); \
        T(g, h, ND, A, B, C, F); \
    } while (0)
        L("attn_norm.weight", "input_layernorm.weight", 1, 64, 1, 1, 0);
        L("attn_q.weight", "self_attn.q_proj.weight", 2, 64, 64, 1, 1);
        L("attn_k.weight", "self_attn.k_proj.weight", 2, 64, 32, 1, 1);
        L("attn_v.weight", "self_attn.v_proj.weight", 2, 64, 32, 1, 0);
        L("attn_output.weight", "self_attn.o_proj.weight", 2, 64, 64, 1, 1);
        L("attn_q_norm.weight", "self_attn.q_norm.weight", 1, 16, 1, 1, 0);
        L("attn_k_norm.weight", "self_attn.k_norm.weight", 1, 16, 1, 1, 0);
        L("ffn_norm.weight", "post_attention_layernorm.weight", 1, 64, 1, 1, 0);
        L("ffn_gate_inp.weight", "mlp.gate.weight", 2, 64, 4, 1, 0);
        L("ffn_gate_exps.weight", "mlp.switch_mlp.gate_proj.weight", 3, 64, 32, 4, 1);
        L("ffn_up_exps.weight", "mlp.switch_mlp.up_proj.weight", 3, 64, 32, 4, 1);
        L("ffn_down_exps.weight", "mlp.switch_mlp.down_proj.weight", 3, 32, 64, 4, 0);
    }
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen3moe");
    gw_kv_u32(&w, "qwen3moe.block_count", 2);
    gw_kv_u32(&w, "qwen3moe.context_length", 4096);
    gw_kv_u32(&w, "qwen3moe.embedding_length", 64);
    gw_kv_u32(&w, "qwen3moe.feed_forward_length", 128);
    gw_kv_u32(&w, "qwen3moe.expert_feed_forward_length", 32);
    gw_kv_u32(&w, "qwen3moe.attention.head_count", 4);
    gw_kv_u32(&w, "qwen3moe.attention.head_count_kv", 2);
    gw_kv_u32(&w, "qwen3moe.attention.key_length", 16);
    gw_kv_f32(&w, "qwen3moe.rope.freq_base", 1000000.0f);
    gw_kv_f32(&w, "qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    gw_kv_u32(&w, "qwen3moe.expert_count", 4);
    gw_kv_u32(&w, "qwen3moe.expert_used_count", 2);
    const char *toks[96];
    char tokbuf[96][8];
    for (int i = 0; i < 96; i++) {
        snprintf(tokbuf[i], sizeof tokbuf[i], "t%d", i);
        toks[i] = tokbuf[i];
    }
    gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, 96);
    float *orig[64];
    for (size_t i = 0; i < n; i++) {
        uint64_t ne = ts[i].ne[0] * ts[i].ne[1] * ts[i].ne[2];
        orig[i] = malloc(ne * 4);
        for (uint64_t j = 0; j < ne; j++)
            orig[i][j] = val((uint32_t)i + 100, j);
        if (ts[i].f16) {
            uint16_t *h = malloc(ne * 2);
            for (uint64_t j = 0; j < ne; j++)
                h[j] = f16_exact(orig[i][j]);
            gw_tensor_add(&w, ts[i].gguf, ts[i].n_dims, ts[i].ne, 1, h, ne * 2);
            free(h);
        } else {
            gw_tensor_add(&w, ts[i].gguf, ts[i].n_dims, ts[i].ne, 0, orig[i], ne * 4);
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/qwen3moe.gguf", t_tmpdir());
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
    tq_model *m = open_gguf(path, 0);
    CHECK(m != NULL);
    if (m) {
        CHECK(m->n_tensors == n);
        for (size_t i = 0; i < n; i++) {
            const tq_model_tensor *t = find(m, ts[i].hf);
            CHECKF(t != NULL, "missing %s", ts[i].hf);
            if (!t)
                continue;
            CHECK(t->info.ndim == (int)ts[i].n_dims && t->info.dtype == (ts[i].f16 ? TQ_DT_F16 : TQ_DT_F32) &&
                  !t->was_quantized);
            for (uint32_t d = 0; d < ts[i].n_dims; d++)
                CHECKF(t->info.shape[d] == ts[i].ne[ts[i].n_dims - 1 - d], "%s: shape", ts[i].hf);
            float *got = read_all(t);
            CHECKF(got && memcmp(got, orig[i], t->info.nelem * 4) == 0, "%s: values differ", ts[i].hf);
            free(got);
        }
        CHECK(strcmp(cfg_str(m, "model_type"), "qwen3_moe") == 0);
        const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m->config, "architectures"), 0);
        CHECK(arch && strcmp(arch->valuestring, "Qwen3MoeForCausalLM") == 0);
        CHECK(cfg_num(m, "num_hidden_layers") == 2);
        CHECK(cfg_num(m, "hidden_size") == 64);
        CHECK(cfg_num(m, "intermediate_size") == 128);
        CHECK(cfg_num(m, "moe_intermediate_size") == 32);
        CHECK(cfg_num(m, "num_attention_heads") == 4);
        CHECK(cfg_num(m, "num_key_value_heads") == 2);
        CHECK(cfg_num(m, "head_dim") == 16);
        CHECK(cfg_num(m, "rope_theta") == 1000000.0);
        CHECK(cfg_num(m, "rms_norm_eps") == (double)1e-6f);
        CHECK(cfg_num(m, "num_experts") == 4);
        CHECK(cfg_num(m, "num_experts_per_tok") == 2);
        CHECK(cfg_num(m, "max_position_embeddings") == 4096);
        CHECK(cfg_num(m, "vocab_size") == 96);
        CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m->config, "tie_word_embeddings")));
        /* what llama.cpp assumes for qwen3moe and mlx-lm's qwen3_moe loader requires */
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m->config, "norm_topk_prob")));
        CHECK(cfg_num(m, "decoder_sparse_step") == 1);
        const cJSON *mo = cJSON_GetObjectItemCaseSensitive(m->config, "mlp_only_layers");
        CHECK(cJSON_IsArray(mo) && cJSON_GetArraySize(mo) == 0);
        const char *const *wv;
        CHECK(tq_gguf_model_warnings(m, &wv) == 0);
        model_free(m);
    }
    for (size_t i = 0; i < n; i++)
        free(orig[i]);
}

/* ------------------------------------------------------------ split sets etc */
static void write_piece(const char *path, int no, int count, const char *name, float base)
{
    gw w;
    gw_init(&w);
    if (no == 0) {
        gw_kv_str(&w, "general.architecture", "qwen3");
        gw_kv_u32(&w, "qwen3.block_count", 1);
    }
    w.kv.len += 0;
    gb *b = &w.kv;
    /* split.no / split.count are u16 in llama.cpp's gguf-split. */
    gb_str(b, "split.no");
    gb_u32(b, 2);
    gb_u16(b, (uint16_t)no);
    gb_str(b, "split.count");
    gb_u32(b, 2);
    gb_u16(b, (uint16_t)count);
    w.n_kv += 2;
    float v[64];
    for (int i = 0; i < 64; i++)
        v[i] = base + (float)i;
    uint64_t ne[2] = {16, 4};
    gw_tensor_add(&w, name, 2, ne, 0, v, sizeof v);
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
}

static void test_split_set_and_dirs(void)
{
    char dir[4096], p1[4200], p2[4200];
    snprintf(dir, sizeof dir, "%s/split", t_tmpdir());
    mkdir(dir, 0777);
    snprintf(p1, sizeof p1, "%s/m-00001-of-00002.gguf", dir);
    snprintf(p2, sizeof p2, "%s/m-00002-of-00002.gguf", dir);
    write_piece(p1, 0, 2, "blk.0.attn_q.weight", 0);
    write_piece(p2, 1, 2, "blk.0.attn_k.weight", 1000);
    const char *paths[] = {p1, p2, dir};
    for (int i = 0; i < 3; i++) {
        tq_model *m = open_gguf(paths[i], 0);
        CHECKF(m != NULL, "%s", paths[i]);
        if (!m)
            continue;
        CHECK(m->n_tensors == 2);
        const tq_model_tensor *t = find(m, "model.layers.0.self_attn.k_proj.weight");
        float *v = t ? read_all(t) : NULL;
        CHECK(v && v[0] == 1000 && v[63] == 1063);
        free(v);
        CHECK(strcmp(cfg_str(m, "model_type"), "qwen3") == 0);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m->config, "tie_word_embeddings")));
        model_free(m);
    }
    /* A missing piece, or a piece that lies about its place, is an error. */
    remove(p2);
    tq_model *m = NULL;
    CHECK(tq_model_open_ex(&m, p1, 0, &err) == -1);
    CHECKF(strstr(err.msg, "split set of 2 files is missing") != NULL, "%s", err.msg);
    write_piece(p2, 0, 2, "blk.0.attn_k.weight", 1000);
    CHECK(tq_model_open_ex(&m, dir, 0, &err) == -1);
    CHECKF(strstr(err.msg, "m-00002-of-00002.gguf: split.no is 0, expected 1") != NULL, "%s", err.msg);
    remove(p1);
    remove(p2);
    /* A directory with one .gguf file of any name. */
    snprintf(p1, sizeof p1, "%s/single.gguf", dir);
    write_piece(p1, 0, 1, "blk.0.attn_q.weight", 5);
    m = open_gguf(dir, 0);
    CHECK(m && m->n_tensors == 1);
    model_free(m);
    remove(p1);
    rmdir(dir);
}

static void test_unknown_arch(void)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "mamba9");
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t ne[1] = {8};
    gw_tensor_add(&w, "blk.0.ssm_x.weight", 1, ne, 0, v, sizeof v);
    gw_tensor_add(&w, "token_embd.weight", 1, ne, 0, v, sizeof v);
    char path[4096];
    snprintf(path, sizeof path, "%s/mamba.gguf", t_tmpdir());
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
    tq_model *m = open_gguf(path, 0);
    CHECK(m && find(m, "blk.0.ssm_x.weight") && find(m, "token_embd.weight"));
    CHECK(m && has_warning(m, "architecture 'mamba9' has no HF name mapping; tensors keep their GGUF names"));
    CHECK(m && strcmp(cfg_str(m, "gguf_architecture"), "mamba9") == 0);
    model_free(m);
    remove(path);
}

static void test_unsupported_type_warns_then_fails(void)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen3");
    uint64_t ne[2] = {256, 2};
    unsigned char blocks[16 * 36] = {0};
    gw_tensor_add(&w, "blk.0.ffn_up.weight", 2, ne, 9 /* Q8_1: ggml has no dequantization */, blocks, sizeof blocks);
    char path[4096];
    snprintf(path, sizeof path, "%s/q81.gguf", t_tmpdir());
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
    tq_model *m = open_gguf(path, 0);
    CHECK(m && has_warning(m, "tensor 'blk.0.ffn_up.weight': ggml type Q8_1 cannot be dequantized"));
    const tq_model_tensor *t = m ? find(m, "model.layers.0.mlp.up_proj.weight") : NULL;
    float v[4];
    CHECK(t && t->was_quantized && tq_model_read(t, 0, v, sizeof v, &err) == -1 && err.code == TQ_EUNSUP &&
          strstr(err.msg, "tensor 'blk.0.ffn_up.weight': ggml type Q8_1 (9) cannot be dequantized"));
    model_free(m);
    remove(path);
}

/* A head count near 2^64 (2 * h would wrap to 0) is an error, not a division by zero. */
static void test_llama_huge_heads(void)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "llama");
    gw_kv_u64(&w, "llama.attention.head_count", 1ull << 63);
    float q[64] = {0};
    uint64_t ne[2] = {8, 8};
    gw_tensor_add(&w, "blk.0.attn_q.weight", 2, ne, 0, q, sizeof q);
    char path[4096];
    snprintf(path, sizeof path, "%s/llama-huge.gguf", t_tmpdir());
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
    tq_model *m = NULL;
    CHECK(tq_model_open_ex(&m, path, 0, &err) == -1 && m == NULL);
    CHECKF(strstr(err.msg, "8 rows do not split into 9223372036854775808 heads of an even size") != NULL, "%s",
           err.msg);
    remove(path);
}

/* An architecture's config.json from a header with the given u32 keys (ARCH.KEY) and tensors. */
static tq_model *arch_model(const char *arch, const char *const *keys, const uint32_t *vals, size_t n,
                            const char *const *tensors, size_t nt)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", arch);
    for (size_t i = 0; i < n; i++) {
        char k[256];
        snprintf(k, sizeof k, "%s.%s", arch, keys[i]);
        gw_kv_u32(&w, k, vals[i]);
    }
    float v[512] = {0};
    for (size_t i = 0; i < nt; i++) {
        uint64_t ne[3] = {8, 8, 4};
        gw_tensor_add(&w, tensors[i], strstr(tensors[i], "_exps") ? 3 : 2, ne, 0, v,
                      strstr(tensors[i], "_exps") ? 1024 : 256);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/arch-%s.gguf", t_tmpdir(), arch);
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
    tq_model *m = open_gguf(path, 0);
    remove(path);
    return m;
}

static int cfg_true(const tq_model *m, const char *k) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m->config, k)); }

/* What llama.cpp assumes per architecture where GGUF has no key, and Mixtral's names. */
static void test_arch_configs(void)
{
    const char *k1[] = {"block_count", "expert_count", "expert_used_count"};
    uint32_t v1[] = {2, 4, 2};
    const char *t1[] = {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight"};
    tq_model *m = arch_model("llama", k1, v1, 3, t1, 3);
    CHECK(m && !strcmp(cfg_str(m, "model_type"), "mixtral") && cfg_num(m, "num_local_experts") == 4);
    CHECK(m && find(m, "model.layers.0.block_sparse_moe.gate.weight") &&
          find(m, "model.layers.0.block_sparse_moe.switch_mlp.gate_proj.weight") &&
          find(m, "model.layers.0.block_sparse_moe.switch_mlp.down_proj.weight"));
    model_free(m);
    m = arch_model("qwen2moe", k1, v1, 3, NULL, 0);
    CHECK(m && !strcmp(cfg_str(m, "model_type"), "qwen2_moe"));
    const cJSON *ntp = m ? cJSON_GetObjectItemCaseSensitive(m->config, "norm_topk_prob") : NULL;
    CHECK(cJSON_IsFalse(ntp) && cfg_num(m, "decoder_sparse_step") == 1 && !cfg_true(m, "use_sliding_window"));
    model_free(m);
    const char *k2[] = {"block_count", "attention.q_lora_rank", "attention.kv_lora_rank", "rope.dimension_count",
                        "attention.key_length", "attention.value_length", "expert_gating_func", "leading_dense_block_count",
                        "expert_shared_count", "expert_count"};
    uint32_t v2[] = {61, 1536, 512, 64, 192, 128, 2, 3, 1, 256};
    m = arch_model("deepseek2", k2, v2, 10, NULL, 0);
    CHECK(m && !strcmp(cfg_str(m, "model_type"), "deepseek_v3") && !strcmp(cfg_str(m, "scoring_func"), "sigmoid"));
    CHECK(m && cfg_num(m, "qk_nope_head_dim") == 128 && cfg_num(m, "qk_rope_head_dim") == 64 &&
          cfg_num(m, "v_head_dim") == 128 && cfg_num(m, "q_lora_rank") == 1536 && cfg_num(m, "kv_lora_rank") == 512 &&
          cfg_num(m, "first_k_dense_replace") == 3 && cfg_num(m, "n_shared_experts") == 1 &&
          cfg_num(m, "n_routed_experts") == 256 && cfg_num(m, "head_dim") == -1);
    model_free(m);
    v2[6] = 1; /* softmax gating: DeepSeek-V2 */
    m = arch_model("deepseek2", k2, v2, 10, NULL, 0);
    CHECK(m && !strcmp(cfg_str(m, "model_type"), "deepseek_v2") && !strcmp(cfg_str(m, "scoring_func"), "softmax"));
    model_free(m);
    v2[1] = 0; /* V2-Lite: no q_lora_rank, a plain q_proj */
    m = arch_model("deepseek2", k2, v2, 10, NULL, 0);
    CHECK(m && cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m->config, "q_lora_rank")));
    model_free(m);
    const char *k3[] = {"block_count", "attention.sliding_window"};
    uint32_t v3[] = {4, 128};
    m = arch_model("gpt-oss", k3, v3, 2, NULL, 0);
    const cJSON *lt = m ? cJSON_GetObjectItemCaseSensitive(m->config, "layer_types") : NULL;
    CHECK(cJSON_GetArraySize(lt) == 4 && !strcmp(cJSON_GetArrayItem(lt, 0)->valuestring, "sliding_attention") &&
          !strcmp(cJSON_GetArrayItem(lt, 1)->valuestring, "full_attention") && cfg_num(m, "sliding_window") == 128);
    model_free(m);
    const char *k4[] = {"block_count", "embedding_length", "attention.head_count", "attention.key_length"};
    uint32_t v4[] = {34, 2560, 8, 256};
    m = arch_model("gemma3", k4, v4, 4, NULL, 0);
    CHECK(m && !strcmp(cfg_str(m, "model_type"), "gemma3_text") && cfg_num(m, "sliding_window_pattern") == 6 &&
          cfg_num(m, "query_pre_attn_scalar") == 256 && cfg_num(m, "rope_local_base_freq") == 10000);
    model_free(m);
    v4[0] = 62;
    v4[1] = 5376;
    v4[2] = 32;
    v4[3] = 128;
    m = arch_model("gemma3", k4, v4, 4, NULL, 0);
    CHECK(m && cfg_num(m, "query_pre_attn_scalar") == 168); /* 27B: hidden / heads */
    model_free(m);
}

static char *write_gw(gw *w, const char *tag)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s.gguf", t_tmpdir(), tag);
    CHECK(gw_write(w, path) == 0);
    gw_free(w);
    return path;
}

/* Gemma 3: HF's names for its four per-layer norms, and llama.cpp's + 1 on every norm weight
 * taken off again (F32 values w + 1 stored, w presented); other tensors as stored. */
static void test_gemma3_names_and_norms(void)
{
    static const struct { const char *gguf, *hf; } norms[] = {
        {"output_norm.weight", "model.norm.weight"},
        {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
        {"blk.0.post_attention_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
        {"blk.0.ffn_norm.weight", "model.layers.0.pre_feedforward_layernorm.weight"},
        {"blk.0.post_ffw_norm.weight", "model.layers.0.post_feedforward_layernorm.weight"},
        {"blk.0.attn_q_norm.weight", "model.layers.0.self_attn.q_norm.weight"},
        {"blk.0.attn_k_norm.weight", "model.layers.0.self_attn.k_norm.weight"},
    };
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "gemma3");
    gw_kv_u32(&w, "gemma3.block_count", 1);
    float hf[8] = {0.25f, -0.5f, 0.0f, 1.5f, -1.0f, 0.125f, 3.0f, -0.0078125f}, stored[8];
    for (int i = 0; i < 8; i++)
        stored[i] = hf[i] + 1.0f;
    uint64_t ne1[1] = {8}, ne2[2] = {8, 4};
    for (size_t i = 0; i < sizeof norms / sizeof *norms; i++)
        gw_tensor_add(&w, norms[i].gguf, 1, ne1, 0, stored, sizeof stored);
    float proj[32];
    for (int i = 0; i < 32; i++)
        proj[i] = (float)i - 7.5f;
    gw_tensor_add(&w, "blk.0.attn_q.weight", 2, ne2, 0, proj, sizeof proj);
    gw_tensor_add(&w, "blk.0.ffn_gate.weight", 2, ne2, 0, proj, sizeof proj);
    tq_model *m = open_gguf(write_gw(&w, "gemma3-norms"), 0);
    CHECK(m && !has_warning(m, "has no HF name"));
    for (size_t i = 0; m && i < sizeof norms / sizeof *norms; i++) {
        const tq_model_tensor *t = find(m, norms[i].hf);
        CHECKF(t && t->info.dtype == TQ_DT_F32 && t->info.nelem == 8, "%s", norms[i].hf);
        float *v = t ? read_all(t) : NULL;
        CHECKF(v && !memcmp(v, hf, sizeof hf), "%s: the stored weight minus 1", norms[i].hf);
        free(v);
    }
    const tq_model_tensor *q = m ? find(m, "model.layers.0.self_attn.q_proj.weight") : NULL;
    float *v = q ? read_all(q) : NULL;
    CHECK(v && !memcmp(v, proj, sizeof proj) && m && find(m, "model.layers.0.mlp.gate_proj.weight"));
    free(v);
    model_free(m);
}

/* The raw bytes of a whole tensor. */
static unsigned char *read_bytes(const tq_model_tensor *t)
{
    unsigned char *b = malloc(t->info.nbytes ? t->info.nbytes : 1);
    if (b && tq_model_read(t, 0, b, t->info.nbytes, &err) != 0) {
        printf("  read %s: %s\n", t->info.name, err.msg);
        free(b);
        return NULL;
    }
    return b;
}

/* Issue 33: llama.cpp's converter writes an F16 (general.file_type 1) or BF16 (32) GGUF with
 * its 1-D tensors in F32 (llama.h: LLAMA_FTYPE_MOSTLY_F16 = 1, LLAMA_FTYPE_MOSTLY_BF16 = 32,
 * "except 1d tensors"; convert_hf_to_gguf.py keeps n_dims <= 1 tensors F32). A 1-D F32 tensor
 * whose every value is exact in the file's type is presented in that type, giving the bytes
 * the HF original (safetensors) held; one value that is not keeps it F32, and so does a 2-D
 * F32 tensor or a file of another type. The expected bytes are the IEEE encodings written
 * out by hand (bf16: the top half of the f32 bits; f16 of 1, 0.5, -2.25, 2^-10 and 3/32:
 * 3C00, 3800, C080, 1400, 2E00), independent of tq's converters. Gemma 3's
 * norm (stored w + 1) is presented as w in the file's type. */
static tq_model *narrow_model(uint32_t file_type, int with_ft, const char *arch, const char *tag)
{
    static const float exact[5] = {1.0f, 0.5f, -2.25f, 0.0009765625f, 0.09375f};
    static const float inexact[5] = {1.0f, 0.5f, -2.25f, 0.0009765625f, 1.0000001f};
    float gemma[5];
    for (int i = 0; i < 5; i++)
        gemma[i] = exact[i] + 1.0f;
    float proj[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 0.5f};
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", arch);
    if (with_ft)
        gw_kv_u32(&w, "general.file_type", file_type);
    uint64_t ne1[1] = {5}, ne2[2] = {5, 2};
    int g3 = !strcmp(arch, "gemma3");
    gw_tensor_add(&w, "blk.0.attn_norm.weight", 1, ne1, 0, g3 ? gemma : exact, sizeof exact);
    gw_tensor_add(&w, "blk.0.ffn_norm.weight", 1, ne1, 0, inexact, sizeof inexact);
    gw_tensor_add(&w, "blk.0.attn_v.weight", 2, ne2, 0, proj, sizeof proj);
    return open_gguf(write_gw(&w, tag), 0);
}

static void test_f16_bf16_file_norms(void)
{
    static const uint16_t bf[5] = {0x3F80, 0x3F00, 0xC010, 0x3A80, 0x3DC0}, hf[5] = {0x3C00, 0x3800, 0xC080, 0x1400, 0x2E00};
    static const struct { uint32_t ft; int with; const char *arch; tq_dtype want; const uint16_t *bytes; } cases[] = {
        {32, 1, "qwen3", TQ_DT_BF16, bf}, {1, 1, "qwen3", TQ_DT_F16, hf}, {0, 1, "qwen3", TQ_DT_F32, NULL},
        {7, 1, "qwen3", TQ_DT_F32, NULL}, {32, 0, "qwen3", TQ_DT_F32, NULL}, {32, 1, "gemma3", TQ_DT_BF16, bf},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char tag[64];
        snprintf(tag, sizeof tag, "narrow-%zu", c);
        tq_model *m = narrow_model(cases[c].ft, cases[c].with, cases[c].arch, tag);
        const tq_model_tensor *n = m ? find(m, "model.layers.0.input_layernorm.weight") : NULL,
                              *x = m ? find(m, !strcmp(cases[c].arch, "gemma3") ? "model.layers.0.pre_feedforward_layernorm.weight"
                                                                                 : "model.layers.0.post_attention_layernorm.weight")
                                     : NULL,
                              *v = m ? find(m, "model.layers.0.self_attn.v_proj.weight") : NULL;
        CHECKF(n && n->info.dtype == cases[c].want && n->info.nbytes == 5 * tq_dtype_size(cases[c].want),
               "case %zu: norm is %s", c, n ? tq_dtype_name(n->info.dtype) : "missing");
        CHECKF(x && x->info.dtype == TQ_DT_F32, "case %zu: a norm with an inexact value is %s", c,
               x ? tq_dtype_name(x->info.dtype) : "missing");
        CHECKF(v && v->info.dtype == TQ_DT_F32, "case %zu: a 2-D F32 tensor is %s", c, v ? tq_dtype_name(v->info.dtype) : "missing");
        unsigned char *b = n && cases[c].bytes ? read_bytes(n) : NULL;
        for (int i = 0; b && i < 5; i++) {
            uint16_t got = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
            CHECKF(got == cases[c].bytes[i], "case %zu value %d: %04x, expected %04x", c, i, got, cases[c].bytes[i]);
        }
        free(b);
        /* read in odd pieces: an element split across reads still comes out whole */
        unsigned char *whole = n ? read_bytes(n) : NULL, part[40];
        for (uint64_t off = 0; whole && off < n->info.nbytes; off += 3) {
            size_t len = n->info.nbytes - off < 3 ? (size_t)(n->info.nbytes - off) : 3;
            CHECK(tq_model_read(n, off, part, len, &err) == 0 && !memcmp(part, whole + off, len));
        }
        free(whole);
        model_free(m);
    }
}

/* DeepSeek: attn_k_b / attn_v_b joined into kv_b_proj (checked against the same matrix stored
 * whole as attn_kv_b, read whole and in odd pieces, and across mixed stored dtypes); a half
 * without its partner, or halves whose shapes disagree, are refused naming the tensor. */
static void kvb_file(const char *tag, int with_v, int both, uint32_t vtype)
{
    enum { H = 3, K = 4, V = 5, R = 6 };
    float kv[H * (K + V) * R], kb[H * R * K], vb[H * V * R];
    for (int i = 0; i < H * (K + V) * R; i++)
        kv[i] = (float)(i % 97) - 40.0f;
    for (int h = 0; h < H; h++)
        for (int j = 0; j < K + V; j++)
            for (int r = 0; r < R; r++) {
                float x = kv[(h * (K + V) + j) * R + r];
                if (j < K)
                    kb[(h * R + r) * K + j] = x;
                else
                    vb[(h * V + j - K) * R + r] = x;
            }
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "deepseek2");
    gw_kv_u32(&w, "deepseek2.attention.head_count", H);
    gw_kv_u32(&w, "deepseek2.attention.kv_lora_rank", R);
    uint64_t nek[3] = {K, R, H}, nev[3] = {R, V, H}, nekv[2] = {R, H * (K + V)};
    gw_tensor_add(&w, "blk.0.attn_k_b.weight", 3, nek, 0, kb, sizeof kb);
    if (with_v) {
        if (vtype == 1) {
            uint16_t h16[H * V * R];
            for (int i = 0; i < H * V * R; i++)
                h16[i] = f16_exact(vb[i]);
            gw_tensor_add(&w, "blk.0.attn_v_b.weight", 3, nev, 1, h16, sizeof h16);
        } else {
            gw_tensor_add(&w, "blk.0.attn_v_b.weight", 3, nev, 0, vb, sizeof vb);
        }
    }
    gw_tensor_add(&w, "blk.1.attn_kv_b.weight", 2, nekv, 0, kv, sizeof kv);
    if (both) { /* both forms in one layer (llama.cpp forks keep attn_kv_b too) */
        gw_tensor_add(&w, "blk.1.attn_k_b.weight", 3, nek, 0, kb, sizeof kb);
        gw_tensor_add(&w, "blk.1.attn_v_b.weight", 3, nev, 0, vb, sizeof vb);
    }
    write_gw(&w, tag);
}

static void test_deepseek2_kv_b_join(void)
{
    char path[4096];
    for (uint32_t vt = 0; vt < 3; vt++) {
        kvb_file("ds-kvb", 1, vt == 2, vt == 1 ? 1 : 0);
        snprintf(path, sizeof path, "%s/ds-kvb.gguf", t_tmpdir());
        tq_model *m = open_gguf(path, 0);
        const tq_model_tensor *j = m ? find(m, "model.layers.0.self_attn.kv_b_proj.weight") : NULL;
        const tq_model_tensor *whole = m ? find(m, "model.layers.1.self_attn.kv_b_proj.weight") : NULL;
        CHECK(j && whole && j->info.ndim == 2 && j->info.shape[0] == 27 && j->info.shape[1] == 6 &&
              j->info.dtype == TQ_DT_F32 && m->n_tensors == 2);
        CHECK(vt != 2 || (m && has_warning(m, "'blk.1.attn_k_b.weight' and 'blk.1.attn_v_b.weight' are kv_b_proj split; "
                                              "the layer's attn_kv_b is kept instead")));
        float *a = j ? read_all(j) : NULL, *b = whole ? read_all(whole) : NULL;
        CHECK(a && b && !memcmp(a, b, 27 * 6 * 4));
        /* odd pieces: starting mid-row, spanning key and value rows and heads */
        float piece[27 * 6];
        for (uint64_t step = 1; j && a && step <= 13; step += 4)
            for (uint64_t at = 0; at < 27 * 6; at += step) {
                uint64_t n = at + step <= 27 * 6 ? step : 27 * 6 - at;
                CHECK_OK(tq_model_read(j, at * 4, piece, n * 4, &err));
                CHECKF(!memcmp(piece, a + at, n * 4), "piece [%llu, +%llu)", (unsigned long long)at,
                       (unsigned long long)n);
            }
        free(a);
        free(b);
        model_free(m);
    }
    tq_model *m = NULL;
    kvb_file("ds-kvb-lone", 0, 0, 0);
    snprintf(path, sizeof path, "%s/ds-kvb-lone.gguf", t_tmpdir());
    CHECK(tq_model_open_ex(&m, path, 0, &err) == -1 && err.code == TQ_EDATA &&
          strstr(err.msg, "tensor 'blk.0.attn_k_b.weight' has no attn_v_b beside it"));
    /* R of k_b disagreeing with kv_lora_rank: rewrite with a 3-row k_b */
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "deepseek2");
    gw_kv_u32(&w, "deepseek2.attention.kv_lora_rank", 6);
    float z[3 * 4 * 3 * 5] = {0};
    uint64_t nek[3] = {4, 3, 3}, nev[3] = {3, 5, 3};
    gw_tensor_add(&w, "blk.2.attn_k_b.weight", 3, nek, 0, z, 4 * 3 * 3 * 4);
    gw_tensor_add(&w, "blk.2.attn_v_b.weight", 3, nev, 0, z, 3 * 5 * 3 * 4);
    CHECK(tq_model_open_ex(&m, write_gw(&w, "ds-kvb-rank"), 0, &err) == -1 && err.code == TQ_EDATA &&
          strstr(err.msg, "tensor 'blk.2.attn_k_b.weight' is 3-D ne [4, 3, 3]") &&
          strstr(err.msg, "R = kv_lora_rank (6)"));
}

/* rope_freqs: the llama 3 parameters they were made from, standard or fitted; values that no
 * parameters give (or of the wrong count) are refused naming the tensor. */
static void llama3_freqs(float *f, int n, double theta, double F, double lo, double hi, double L)
{
    for (int i = 0; i < n; i++) { /* llama.cpp's converter's rule, as in test_gguf_roundtrip.c */
        double wl = 2 * M_PI * pow(theta, 2.0 * i / (2.0 * n)), s = (L / wl - lo) / (hi - lo);
        f[i] = wl < L / hi ? 1.0f : wl > L / lo ? (float)F : (float)(1 / ((1 - s) / F + s));
    }
}

static tq_model *llama3_model(const float *f, uint64_t n, const char *tag)
{
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "llama");
    gw_kv_u32(&w, "llama.embedding_length", 512);
    gw_kv_u32(&w, "llama.attention.head_count", 4);
    gw_kv_f32(&w, "llama.rope.freq_base", 500000.0f);
    uint64_t ne[1] = {n};
    gw_tensor_add(&w, "rope_freqs.weight", 1, ne, 0, f, n * 4);
    float e[8] = {0};
    uint64_t ne2[2] = {4, 2};
    gw_tensor_add(&w, "token_embd.weight", 2, ne2, 0, e, sizeof e);
    tq_model *m = NULL;
    if (tq_model_open_ex(&m, write_gw(&w, tag), 0, &err) != 0)
        m = NULL;
    return m;
}

static void test_llama3_rope_freqs(void)
{
    static const double sets[][4] = {{8, 1, 4, 8192}, {32, 1, 4, 8192}, {16, 1, 2.5, 4096}};
    float f[64];
    for (int k = 0; k < 3; k++) {
        llama3_freqs(f, 64, 500000, sets[k][0], sets[k][1], sets[k][2], sets[k][3]);
        tq_model *m = llama3_model(f, 64, "llama3");
        const cJSON *r = m ? cJSON_GetObjectItemCaseSensitive(m->config, "rope_scaling") : NULL;
        CHECKF(r && !strcmp(cJSON_GetObjectItemCaseSensitive(r, "rope_type")->valuestring, "llama3") &&
                   cJSON_GetObjectItemCaseSensitive(r, "factor")->valuedouble == sets[k][0] &&
                   cJSON_GetObjectItemCaseSensitive(r, "low_freq_factor")->valuedouble == sets[k][1] &&
                   cJSON_GetObjectItemCaseSensitive(r, "high_freq_factor")->valuedouble == sets[k][2] &&
                   cJSON_GetObjectItemCaseSensitive(r, "original_max_position_embeddings")->valuedouble == sets[k][3],
               "set %d: %s", k, m ? "wrong rope_scaling" : err.msg);
        CHECK(m && !find(m, "rope_freqs.weight") && find(m, "model.embed_tokens.weight"));
        model_free(m);
    }
    llama3_freqs(f, 64, 500000, 8, 1, 4, 8192);
    f[40] = 0.5f;
    CHECK(!llama3_model(f, 64, "llama3-bad") && err.code == TQ_EDATA &&
          strstr(err.msg, "tensor 'rope_freqs.weight': value 40 is 0.5"));
    f[40] = f[39] * 1.01f; /* not on any llama 3 curve */
    CHECK(!llama3_model(f, 64, "llama3-bad") && strstr(err.msg, "tensor 'rope_freqs.weight': the 64 values are not llama 3"));
    llama3_freqs(f, 64, 500000, 8, 1, 4, 8192);
    CHECK(!llama3_model(f, 32, "llama3-short") && strstr(err.msg, "tensor 'rope_freqs.weight': 32 factors, but the rotary "
                                                                    "dimension is 128"));
}

/* Metadata of the wrong type is refused naming the key and the kind expected, instead of
 * being left out (a string block_count gave a config.json without num_hidden_layers, a u32
 * general.architecture an 'unknown' model). The kinds are those gguf-py's GGUFWriter writes
 * (add_block_count: u32, add_rope_freq_base: f32, add_architecture: string, ...); integer
 * widths other than u32 stay accepted. TQ_GGUF_WRITE_MALFORMED=DIR also writes the files there
 * (that is how tests/fuzz/corpus/gguf/meta-*.gguf were made). */
static void test_metadata_types(void)
{
    static const struct {
        const char *file, *msg;
    } cases[] = {
        {"meta-architecture-u32", "key 'general.architecture' has type uint32, expected a string"},
        {"meta-block-count-string", "key 'qwen3.block_count' has type string, expected a non-negative integer"},
        {"meta-block-count-negative", "key 'qwen3.block_count' is -2, expected a non-negative integer"},
        {"meta-head-count-array", "key 'qwen3.attention.head_count' has type array, expected a non-negative integer"},
        {"meta-rope-base-string", "key 'qwen3.rope.freq_base' has type string, expected a number"},
        {"meta-bos-float", "key 'tokenizer.ggml.bos_token_id' has type float32, expected a non-negative integer"},
    };
    const char *dir = getenv("TQ_GGUF_WRITE_MALFORMED");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gw w;
        gw_init(&w);
        if (i == 0)
            gw_kv_u32(&w, "general.architecture", 3);
        else
            gw_kv_str(&w, "general.architecture", "qwen3");
        if (i == 1)
            gw_kv_str(&w, "qwen3.block_count", "2");
        else if (i == 2)
            gw_kv_i32(&w, "qwen3.block_count", -2);
        else
            gw_kv_u32(&w, "qwen3.block_count", 1);
        if (i == 3) {
            int32_t heads[1] = {2};
            gw_kv_i32_array(&w, "qwen3.attention.head_count", heads, 1);
        }
        if (i == 4)
            gw_kv_str(&w, "qwen3.rope.freq_base", "10000");
        if (i == 5)
            gw_kv_f32(&w, "tokenizer.ggml.bos_token_id", 1.0f);
        float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        uint64_t ne[1] = {8};
        gw_tensor_add(&w, "output_norm.weight", 1, ne, 0, v, sizeof v);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.gguf", dir && *dir ? dir : t_tmpdir(), cases[i].file);
        CHECK(gw_write(&w, path) == 0);
        gw_free(&w);
        tq_model *m = NULL;
        CHECK(tq_model_open_ex(&m, path, 0, &err) == -1 && m == NULL && err.code == TQ_EDATA);
        char want[8192];
        snprintf(want, sizeof want, "%s: %s", path, cases[i].msg);
        CHECKF(strcmp(err.msg, want) == 0, "%s: got '%s'", cases[i].file, err.msg);
        if (!dir || !*dir)
            remove(path);
    }
}

int main(void)
{
    RUN(test_vectors_keep_names);
    RUN(test_vectors_hf_names_and_config);
    RUN(test_llama_unpermute);
    RUN(test_llama_bad_heads);
    RUN(test_llama_huge_heads);
    RUN(test_qwen3_moe_roundtrip);
    RUN(test_split_set_and_dirs);
    RUN(test_unknown_arch);
    RUN(test_unsupported_type_warns_then_fails);
    RUN(test_arch_configs);
    RUN(test_gemma3_names_and_norms);
    RUN(test_f16_bf16_file_norms);
    RUN(test_deepseek2_kv_b_join);
    RUN(test_llama3_rope_freqs);
    RUN(test_metadata_types);
    TEST_MAIN_END();
}
