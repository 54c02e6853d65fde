/* tq_mkmodel end to end: generated directories read back through formats/, determinism
 * across runs and thread counts, HF/MLX names and shapes, config values, recipe statistics
 * measured on file contents, affine quantization, ngram tables. */
#include "testdata/mkmodel/mkmodel.h"
#include "quant/quant.h"
#include "tests/unit/check.h"

#include <cjson/cJSON.h>

static tq_mk_opts tiny(tq_mk_arch arch)
{
    tq_mk_opts o;
    tq_err err;
    tq_mk_preset(&o, arch, "tiny", &err);
    o.quiet = 1;
    return o;
}

/* 1 if every file of a is byte-identical in b and both list the same names. */
static int dirs_equal(const char *a, const char *b)
{
    tq_err err;
    char **na, **nb;
    size_t ca, cb;
    if (tq_list_dir(a, &na, &ca, &err) || tq_list_dir(b, &nb, &cb, &err))
        return 0;
    int eq = ca == cb && ca > 0;
    for (size_t i = 0; eq && i < ca; i++) {
        eq = !strcmp(na[i], nb[i]);
        char *pa = tq_path_join(a, na[i], &err), *pb = tq_path_join(b, nb[i], &err);
        char *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        if (eq && (tq_read_small_file(pa, 1 << 28, &x, &nx, &err) || tq_read_small_file(pb, 1 << 28, &y, &ny, &err)))
            eq = 0;
        if (eq)
            eq = nx == ny && !memcmp(x, y, nx);
        free(x);
        free(y);
        free(pa);
        free(pb);
    }
    tq_free_strv(na, ca);
    tq_free_strv(nb, cb);
    return eq;
}

static int file_equal(const char *da, const char *db, const char *name)
{
    tq_err err;
    char *pa = tq_path_join(da, name, &err), *pb = tq_path_join(db, name, &err);
    int eq = pa && pb && t_files_equal(pa, pb);
    free(pa);
    free(pb);
    return eq;
}

static void test_determinism(void)
{
    tq_err err = {0};
    tq_mk_opts o = tiny(TQ_MK_QWEN3_MOE);
    o.seed = 11;
    o.shard_size = 300000; /* several shards + index */
    o.threads = 1;
    CHECK_OK(tq_mkmodel(t_path("det-a"), &o, &err));
    o.threads = 2;
    CHECK_OK(tq_mkmodel(t_path("det-b"), &o, &err));
    o.threads = 7;
    CHECK_OK(tq_mkmodel(t_path("det-c"), &o, &err));
    CHECK(tq_exists(t_path("det-a/model.safetensors.index.json")));
    CHECK(tq_exists(t_path("det-a/model-00001-of-00007.safetensors")));
    CHECK(dirs_equal(t_path("det-a"), t_path("det-b")));
    CHECK(dirs_equal(t_path("det-a"), t_path("det-c")));
    o.seed = 12;
    CHECK_OK(tq_mkmodel(t_path("det-d"), &o, &err));
    CHECK(!file_equal(t_path("det-a"), t_path("det-d"), "model-00001-of-00007.safetensors"));
    CHECK(!file_equal(t_path("det-a"), t_path("det-d"), "model-00007-of-00007.safetensors"));
    CHECK(file_equal(t_path("det-a"), t_path("det-d"), "tokenizer.json"));
    /* without force a non-empty OUTPUT_DIR, even an earlier output, is refused and left alone */
    CHECK(tq_mkmodel(t_path("det-a"), &o, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, "--force"));
    CHECK(dirs_equal(t_path("det-a"), t_path("det-b")));
    /* with force an earlier output is replaced in place: stale partial files go, other shard
     * counts go */
    o.force = 1;
    tq_write_file_atomic(t_path("det-a/model-00002-of-00007.safetensors.partial-Xy12ab"), "x", 1, &err);
    CHECK_OK(tq_mkmodel(t_path("det-a"), &o, &err)); /* seed 12 now */
    CHECK(dirs_equal(t_path("det-a"), t_path("det-d")));
    o.seed = 11;
    o.shard_size = 5000000000ull;
    CHECK_OK(tq_mkmodel(t_path("det-a"), &o, &err));
    CHECK(tq_exists(t_path("det-a/model.safetensors")) && !tq_exists(t_path("det-a/model-00001-of-00007.safetensors")));
    o.shard_size = 300000;
    CHECK_OK(tq_mkmodel(t_path("det-a"), &o, &err));
    CHECK(dirs_equal(t_path("det-a"), t_path("det-b")));
    /* a directory holding anything else is refused and left alone */
    tq_write_file_atomic(t_path("det-b/notes.txt"), "mine", 4, &err);
    o.seed = 12;
    CHECK(tq_mkmodel(t_path("det-b"), &o, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, "notes.txt"));
    CHECK(tq_exists(t_path("det-b/notes.txt")));
    CHECK(file_equal(t_path("det-a"), t_path("det-b"), "model-00001-of-00007.safetensors"));
}

static const tq_model_tensor *expect(const tq_model *m, const char *name, tq_dtype dt, int ndim,
                                     uint64_t d0, uint64_t d1, uint64_t d2)
{
    const tq_model_tensor *t = tq_model_find(m, name);
    CHECKF(t != NULL, "missing %s", name);
    if (!t)
        return NULL;
    uint64_t d[3] = {d0, d1, d2};
    int ok = t->info.dtype == dt && t->info.ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->info.shape[i] == d[i];
    CHECKF(ok, "%s: dtype %s ndim %d shape [%llu,%llu,%llu]", name, tq_dtype_name(t->info.dtype),
           t->info.ndim, (unsigned long long)t->info.shape[0], (unsigned long long)t->info.shape[1],
           (unsigned long long)t->info.shape[2]);
    return t;
}

/* non-square dimensions so that a swapped axis cannot pass */
static tq_mk_opts shaped(tq_mk_arch arch)
{
    tq_mk_opts o = tiny(arch);
    o.hidden = 128;
    o.heads = 4;
    o.kv_heads = 2;
    o.head_dim = 48;
    o.intermediate = 192;
    o.moe_intermediate = 64;
    o.experts = arch == TQ_MK_QWEN3_MOE ? 6 : 0;
    o.vocab = 320;
    o.layers = 2;
    return o;
}

static void test_shapes_llama_qwen3(void)
{
    tq_err err = {0};
    for (int a = 0; a < 2; a++) {
        tq_mk_opts o = shaped(a ? TQ_MK_QWEN3 : TQ_MK_LLAMA);
        o.dtype = a ? TQ_DT_F16 : TQ_DT_F32;
        const char *d = t_path(a ? "shape-qwen3" : "shape-llama");
        CHECK_OK(tq_mkmodel(d, &o, &err));
        tq_model *m = NULL;
        CHECK_OK(tq_model_open(&m, d, &err));
        if (!m)
            return;
        tq_dtype dt = o.dtype;
        expect(m, "model.embed_tokens.weight", dt, 2, 320, 128, 0);
        expect(m, "lm_head.weight", dt, 2, 320, 128, 0);
        expect(m, "model.norm.weight", dt, 1, 128, 0, 0);
        expect(m, "model.layers.1.input_layernorm.weight", dt, 1, 128, 0, 0);
        expect(m, "model.layers.1.post_attention_layernorm.weight", dt, 1, 128, 0, 0);
        expect(m, "model.layers.1.self_attn.q_proj.weight", dt, 2, 192, 128, 0);
        expect(m, "model.layers.1.self_attn.k_proj.weight", dt, 2, 96, 128, 0);
        expect(m, "model.layers.1.self_attn.v_proj.weight", dt, 2, 96, 128, 0);
        expect(m, "model.layers.1.self_attn.o_proj.weight", dt, 2, 128, 192, 0);
        expect(m, "model.layers.0.mlp.gate_proj.weight", dt, 2, 192, 128, 0);
        expect(m, "model.layers.0.mlp.up_proj.weight", dt, 2, 192, 128, 0);
        expect(m, "model.layers.0.mlp.down_proj.weight", dt, 2, 128, 192, 0);
        if (a) {
            expect(m, "model.layers.0.self_attn.q_norm.weight", dt, 1, 48, 0, 0);
            expect(m, "model.layers.0.self_attn.k_norm.weight", dt, 1, 48, 0, 0);
        }
        /* per layer: 2 norms + 4 attention + 3 mlp (+ 2 qk norms); embed, norm, lm_head */
        CHECK(m->n_tensors == 3 + 2 * (size_t)(9 + 2 * a));
        CHECK(tq_model_find(m, "model.layers.2.input_layernorm.weight") == NULL);
        cJSON *c = m->config;
        CHECK(c && !strcmp(cJSON_GetObjectItem(c, "model_type")->valuestring, a ? "qwen3" : "llama"));
        CHECK(c && cJSON_GetObjectItem(c, "intermediate_size")->valuedouble == 192);
        CHECK(c && cJSON_GetObjectItem(c, "head_dim")->valuedouble == 48);
        CHECK(c && cJSON_GetObjectItem(c, "hidden_size")->valuedouble == 128);
        CHECK(c && cJSON_GetObjectItem(c, "num_hidden_layers")->valuedouble == 2);
        CHECK(c && cJSON_GetObjectItem(c, "num_attention_heads")->valuedouble == 4);
        CHECK(c && cJSON_GetObjectItem(c, "num_key_value_heads")->valuedouble == 2);
        CHECK(c && cJSON_GetObjectItem(c, "vocab_size")->valuedouble == 320);
        CHECK(c && cJSON_GetObjectItem(c, "rope_theta")->valuedouble == (a ? 1e6 : 5e5));
        CHECK(c && cJSON_GetObjectItem(c, "rms_norm_eps")->valuedouble == (a ? 1e-6 : 1e-5));
        CHECK(c && cJSON_GetObjectItem(c, "max_position_embeddings")->valuedouble > 0);
        CHECK(c && !strcmp(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "architectures"), 0)->valuestring,
                           a ? "Qwen3ForCausalLM" : "LlamaForCausalLM"));
        CHECK(c && !strcmp(cJSON_GetObjectItem(c, "torch_dtype")->valuestring, a ? "float16" : "float32"));
        CHECK(c && cJSON_IsFalse(cJSON_GetObjectItem(c, "tie_word_embeddings")));
        CHECK(tq_exists(t_path(a ? "shape-qwen3/tokenizer_config.json" : "shape-llama/tokenizer_config.json")));
        tq_model_close(m);
    }
}

static void test_shapes_moe_hf(void)
{
    tq_err err = {0};
    tq_mk_opts o = shaped(TQ_MK_QWEN3_MOE);
    o.top_k = 3;
    o.shared_expert = 1;
    o.tie_embeddings = 1;
    const char *d = t_path("shape-moe-hf");
    CHECK_OK(tq_mkmodel(d, &o, &err));
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, d, &err));
    if (!m)
        return;
    tq_dtype dt = TQ_DT_BF16;
    CHECK(tq_model_find(m, "lm_head.weight") == NULL);
    expect(m, "model.layers.1.mlp.gate.weight", dt, 2, 6, 128, 0);
    expect(m, "model.layers.1.mlp.experts.5.gate_proj.weight", dt, 2, 64, 128, 0);
    expect(m, "model.layers.1.mlp.experts.5.up_proj.weight", dt, 2, 64, 128, 0);
    expect(m, "model.layers.1.mlp.experts.5.down_proj.weight", dt, 2, 128, 64, 0);
    expect(m, "model.layers.1.mlp.shared_expert.gate_proj.weight", dt, 2, 192, 128, 0);
    expect(m, "model.layers.1.mlp.shared_expert.down_proj.weight", dt, 2, 128, 192, 0);
    expect(m, "model.layers.1.mlp.shared_expert_gate.weight", dt, 2, 1, 128, 0);
    expect(m, "model.layers.0.self_attn.q_norm.weight", dt, 1, 48, 0, 0);
    CHECK(tq_model_find(m, "model.layers.0.mlp.experts.6.up_proj.weight") == NULL);
    CHECK(tq_model_find(m, "model.layers.0.mlp.up_proj.weight") == NULL);
    /* embed + norm; per layer 2 norms + 4 attn + 2 qk norms + router + 18 experts + 4 shared */
    CHECK(m->n_tensors == 2 + 2 * 31);
    cJSON *c = m->config;
    CHECK(c && !strcmp(cJSON_GetObjectItem(c, "model_type")->valuestring, "qwen3_moe"));
    CHECK(c && cJSON_GetObjectItem(c, "num_experts")->valuedouble == 6);
    CHECK(c && cJSON_GetObjectItem(c, "num_experts_per_tok")->valuedouble == 3);
    CHECK(c && cJSON_GetObjectItem(c, "moe_intermediate_size")->valuedouble == 64);
    CHECK(c && cJSON_GetObjectItem(c, "shared_expert_intermediate_size")->valuedouble == 192);
    CHECK(c && cJSON_IsTrue(cJSON_GetObjectItem(c, "norm_topk_prob")));
    CHECK(c && cJSON_IsTrue(cJSON_GetObjectItem(c, "tie_word_embeddings")));
    CHECK(c && cJSON_GetObjectItem(c, "decoder_sparse_step")->valuedouble == 1);
    CHECK(c && cJSON_GetArraySize(cJSON_GetObjectItem(c, "mlp_only_layers")) == 0);
    CHECK(c && cJSON_GetObjectItem(c, "rms_norm_eps")->valuedouble == 1e-6);
    CHECK(c && cJSON_GetObjectItem(c, "quantization") == NULL);
    tq_model_close(m);
}

/* File values are the recipe rounded to the dtype; MLX stacks carry the HF experts' bytes. */
static void test_values_and_mlx_stacking(void)
{
    tq_err err = {0};
    tq_mk_opts o = shaped(TQ_MK_QWEN3_MOE);
    o.seed = 5;
    const char *dh = t_path("val-hf"), *dm = t_path("val-mlx");
    CHECK_OK(tq_mkmodel(dh, &o, &err));
    o.naming_mlx = 1;
    CHECK_OK(tq_mkmodel(dm, &o, &err));
    tq_model *h = NULL, *m = NULL;
    CHECK_OK(tq_model_open(&h, dh, &err));
    CHECK_OK(tq_model_open(&m, dm, &err));
    if (!h || !m)
        return;
    const tq_model_tensor *st = expect(m, "model.layers.1.mlp.switch_mlp.down_proj.weight", TQ_DT_BF16, 3, 6, 128, 64);
    expect(m, "model.layers.1.mlp.switch_mlp.gate_proj.weight", TQ_DT_BF16, 3, 6, 64, 128);
    CHECK(tq_model_find(m, "model.layers.1.mlp.experts.0.down_proj.weight") == NULL);
    unsigned char *stack = st ? t_read_tensor(m, st->info.name, NULL) : NULL;
    for (int x = 0; stack && x < 6; x++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.1.mlp.experts.%d.down_proj.weight", x);
        unsigned char *one = t_read_tensor(h, name, NULL);
        CHECKF(one && !memcmp(one, stack + (size_t)x * 128 * 64 * 2, 128 * 64 * 2), "expert %d", x);
        free(one);
    }
    free(stack);
    /* the recipe, rounded to bf16 */
    const char *nm = "model.layers.0.self_attn.k_proj.weight";
    uint16_t *kb = t_read_tensor(h, nm, NULL);
    tq_mk_matrix mat;
    CHECK_OK(tq_mk_matrix_init(&mat, 5, nm, 96, 128, &err));
    float *v = malloc(96 * 128 * sizeof *v);
    uint16_t *want = malloc(96 * 128 * 2);
    tq_mk_matrix_rows(&mat, 0, 96, v);
    CHECK_OK(tq_from_f32(TQ_DT_BF16, v, want, 96 * 128, &err));
    CHECK(kb && !memcmp(kb, want, 96 * 128 * 2));
    tq_mk_matrix_free(&mat);
    free(kb);
    uint16_t *nb = t_read_tensor(h, "model.layers.1.self_attn.q_norm.weight", NULL);
    tq_mk_norm_values(5, "model.layers.1.self_attn.q_norm.weight", 0, 48, v);
    CHECK_OK(tq_from_f32(TQ_DT_BF16, v, want, 48, &err));
    CHECK(nb && !memcmp(nb, want, 48 * 2));
    free(nb);
    free(v);
    free(want);
    tq_model_close(h);
    tq_model_close(m);
}

/* The recipe seen from file contents alone (no access to the generator's internals). */
static void test_file_statistics(void)
{
    tq_err err = {0};
    tq_mk_opts o = tiny(TQ_MK_LLAMA);
    o.layers = 1;
    o.hidden = 512;
    o.intermediate = 2048;
    o.heads = 8;
    o.kv_heads = 8;
    o.head_dim = 64;
    o.vocab = 64;
    o.dtype = TQ_DT_F32;
    o.seed = 77;
    const char *d = t_path("stats");
    CHECK_OK(tq_mkmodel(d, &o, &err));
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, d, &err));
    if (!m)
        return;
    const uint64_t R = 512, C = 2048; /* down_proj: in = 2048 */
    float *w = expect(m, "model.layers.0.mlp.down_proj.weight", TQ_DT_F32, 2, R, C, 0) ? t_read_tensor(m, "model.layers.0.mlp.down_proj.weight", NULL) : NULL;
    CHECK(w != NULL);
    if (!w) {
        tq_model_close(m);
        return;
    }
    /* outlier channels: column RMS far above the rest; exactly C/256 of them */
    double *col = calloc(C, sizeof *col);
    for (uint64_t r = 0; r < R; r++)
        for (uint64_t c = 0; c < C; c++)
            col[c] += (double)w[r * C + c] * w[r * C + c];
    double all = 0;
    for (uint64_t c = 0; c < C; c++)
        all += col[c];
    int n_out = 0;
    unsigned char *is_out = calloc(C, 1);
    for (uint64_t c = 0; c < C; c++)
        if (col[c] > 16 * all / C) /* an x8 channel has ~64x the mean square */
            is_out[c] = 1, n_out++;
    CHECKF(n_out == (int)(C / 256), "outlier channels %d", n_out);
    /* per row: the scale estimated from the median |w| of normal channels; after removing
     * it the bulk is N(0, 1/in), with a heavy tail of x15 entries */
    double s1 = 0, s2 = 0, lr1 = 0, lr2 = 0;
    uint64_t n = 0, big = 0;
    float *absr = malloc(C * sizeof *absr);
    for (uint64_t r = 0; r < R; r++) {
        int k = 0;
        for (uint64_t c = 0; c < C; c++)
            if (!is_out[c])
                absr[k++] = fabsf(w[r * C + c]);
        /* median by counting (k is small) */
        float lo = 0, hi = 1;
        for (int it = 0; it < 40; it++) {
            float mid = (lo + hi) / 2;
            int below = 0;
            for (int i = 0; i < k; i++)
                below += absr[i] < mid;
            if (below < k / 2)
                lo = mid;
            else
                hi = mid;
        }
        double sigma = lo / 0.6744897501960817; /* median |N(0,s)| = 0.6745 s */
        double row_scale = sigma * sqrt((double)C);
        double l = log(row_scale);
        lr1 += l;
        lr2 += l * l;
        for (uint64_t c = 0; c < C; c++) {
            if (is_out[c])
                continue;
            double x = w[r * C + c] / sigma;
            if (fabs(x) > 7) {
                big++;
                continue;
            }
            s1 += x;
            s2 += x * x;
            n++;
        }
    }
    double mean = s1 / n, sd = sqrt(s2 / n - mean * mean);
    CHECKF(fabs(mean) < 0.01, "mean %g", mean);
    /* within 7 sigma: the Gaussian bulk plus the small tail entries (|15 z| < 7) */
    CHECKF(sd > 0.99 && sd < 1.03, "std after removing the row scale %g", sd);
    double lm = lr1 / R, lsd = sqrt(lr2 / R - lm * lm);
    CHECKF(fabs(lsd - 0.3) < 0.04, "log row scale sd %g", lsd);
    double tail = (double)big / (double)(R * (C - C / 256));
    CHECKF(tail > 0.0010 && tail < 0.0016, "fraction beyond 7 sigma %g (expect ~0.0013)", tail);
    free(absr);
    free(is_out);
    free(col);
    free(w);
    tq_model_close(m);
}

static void test_affine_quantized_model(void)
{
    tq_err err = {0};
    tq_mk_opts o = shaped(TQ_MK_QWEN3_MOE);
    o.moe_intermediate = 128;
    o.naming_mlx = 1;
    o.quant_bits = 4;
    o.group_size = 64;
    o.seed = 3;
    const char *d = t_path("affine4");
    CHECK_OK(tq_mkmodel(d, &o, &err));
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, d, &err));
    if (!m)
        return;
    expect(m, "model.layers.0.self_attn.q_proj.weight", TQ_DT_U32, 2, 192, 16, 0);
    expect(m, "model.layers.0.self_attn.q_proj.scales", TQ_DT_BF16, 2, 192, 2, 0);
    expect(m, "model.layers.0.self_attn.q_proj.biases", TQ_DT_BF16, 2, 192, 2, 0);
    expect(m, "model.layers.0.self_attn.o_proj.weight", TQ_DT_U32, 2, 128, 24, 0);
    expect(m, "lm_head.weight", TQ_DT_U32, 2, 320, 16, 0);
    expect(m, "model.embed_tokens.weight", TQ_DT_BF16, 2, 320, 128, 0);
    expect(m, "model.layers.0.mlp.gate.weight", TQ_DT_BF16, 2, 6, 128, 0);
    expect(m, "model.layers.0.input_layernorm.weight", TQ_DT_BF16, 1, 128, 0, 0);
    CHECK(tq_model_find(m, "model.embed_tokens.scales") == NULL);
    const tq_model_tensor *tw = expect(m, "model.layers.1.mlp.switch_mlp.down_proj.weight", TQ_DT_U32, 3, 6, 128, 16);
    const tq_model_tensor *ts = expect(m, "model.layers.1.mlp.switch_mlp.down_proj.scales", TQ_DT_BF16, 3, 6, 128, 2);
    const tq_model_tensor *tb = expect(m, "model.layers.1.mlp.switch_mlp.down_proj.biases", TQ_DT_BF16, 3, 6, 128, 2);
    cJSON *q = m->config ? cJSON_GetObjectItem(m->config, "quantization") : NULL;
    CHECK(q && cJSON_GetObjectItem(q, "bits")->valuedouble == 4 &&
          cJSON_GetObjectItem(q, "group_size")->valuedouble == 64);
    uint32_t *pw = tw ? t_read_tensor(m, tw->info.name, NULL) : NULL;
    uint16_t *ps = ts ? t_read_tensor(m, ts->info.name, NULL) : NULL, *pb = tb ? t_read_tensor(m, tb->info.name, NULL) : NULL;
    if (pw && ps && pb) {
        /* expert 4 dequantized vs the float recipe of the HF-named expert */
        tq_mk_matrix mat;
        CHECK_OK(tq_mk_matrix_init(&mat, 3, "model.layers.1.mlp.experts.4.down_proj.weight", 128, 128, &err));
        float v[128], back[128], sc[2], bi[2];
        double num = 0, den = 0;
        for (uint64_t r = 0; r < 128; r++) {
            tq_mk_matrix_rows(&mat, r, 1, v);
            size_t row = 4 * 128 + r;
            for (int g = 0; g < 2; g++) {
                sc[g] = tq_bf16_to_f32(ps[row * 2 + g]);
                bi[g] = tq_bf16_to_f32(pb[row * 2 + g]);
            }
            tq_affine_dequantize_row(pw + row * 16, sc, bi, 128, 4, 64, back);
            for (int c = 0; c < 128; c++) {
                num += ((double)back[c] - v[c]) * ((double)back[c] - v[c]);
                den += (double)v[c] * v[c];
            }
        }
        CHECKF(num / den < 0.03, "affine4 relative MSE %g", num / den);
        CHECKF(num / den > 1e-4, "affine4 relative MSE %g is implausibly small", num / den);
        tq_mk_matrix_free(&mat);
    }
    free(pw);
    free(ps);
    free(pb);
    tq_model_close(m);
}

static void test_ngram_table(void)
{
    tq_err err = {0};
    tq_mk_opts o = tiny(TQ_MK_NGRAM);
    o.rows = 3000;
    o.dtype = TQ_DT_F16;
    o.seed = 9;
    const char *d = t_path("ngram");
    CHECK_OK(tq_mkmodel(d, &o, &err));
    CHECK(tq_exists(t_path("ngram/model.safetensors")));
    tq_st_file *f = NULL;
    CHECK_OK(tq_st_open(&f, t_path("ngram/model.safetensors"), &err));
    if (!f)
        return;
    CHECK(f->n_tensors == 3);
    const tq_tensor_info *w = tq_st_find(f, "ngram.weight"), *s = tq_st_find(f, "ngram.scales"),
                         *b = tq_st_find(f, "ngram.biases");
    CHECK(w && w->dtype == TQ_DT_U32 && w->ndim == 2 && w->shape[0] == 3000 && w->shape[1] == 20);
    CHECK(s && s->dtype == TQ_DT_F16 && s->ndim == 2 && s->shape[0] == 3000 && s->shape[1] == 5);
    CHECK(b && b->dtype == TQ_DT_F16 && b->ndim == 2 && b->shape[0] == 3000 && b->shape[1] == 5);
    if (w && s && b) {
        CHECK(w->nbytes / 3000 + s->nbytes / 3000 + b->nbytes / 3000 == 100); /* 100-byte records */
        uint32_t q[20];
        uint16_t hs[5], hb[5];
        float v[160], back[160], sc[5], bi[5];
        tq_mk_matrix mat;
        CHECK_OK(tq_mk_matrix_init(&mat, 9, "ngram.weight", 3000, 160, &err));
        double worst = 0;
        for (uint64_t r = 0; r < 3000; r += 599) {
            CHECK_OK(tq_st_read(f, w, r * 80, q, 80, &err));
            CHECK_OK(tq_st_read(f, s, r * 10, hs, 10, &err));
            CHECK_OK(tq_st_read(f, b, r * 10, hb, 10, &err));
            for (int g = 0; g < 5; g++)
                sc[g] = tq_f16_to_f32(hs[g]), bi[g] = tq_f16_to_f32(hb[g]);
            tq_affine_dequantize_row(q, sc, bi, 160, 4, 32, back);
            tq_mk_matrix_rows(&mat, r, 1, v);
            for (int c = 0; c < 160; c++) {
                double step = fabs(sc[c / 32]);
                double e = fabs((double)back[c] - v[c]) / step;
                if (e > worst)
                    worst = e;
            }
        }
        CHECKF(worst < 1.01, "ngram dequant error %g steps", worst);
        tq_mk_matrix_free(&mat);
    }
    tq_st_close(f);
    cJSON *c = NULL;
    CHECK_OK(tq_json_read_file(t_path("ngram/config.json"), 1 << 20, &c, &err));
    CHECK(c && cJSON_GetObjectItem(c, "width")->valuedouble == 160 && cJSON_GetObjectItem(c, "bits")->valuedouble == 4);
    cJSON_Delete(c);
}

static void test_plan_and_validation(void)
{
    tq_err err = {0};
    tq_mk_opts o;
    CHECK_OK(tq_mk_preset(&o, TQ_MK_QWEN3_MOE, "8g", &err));
    tq_mk_plan p;
    CHECK_OK(tq_mk_plan_build(&p, &o, &err));
    /* "about 8 GB" */
    CHECKF(p.total_bytes > 7500000000ull && p.total_bytes < 9000000000ull, "8g preset is %llu bytes",
           (unsigned long long)p.total_bytes);
    tq_mk_plan_free(&p);
    CHECK_OK(tq_mk_preset(&o, TQ_MK_QWEN3_MOE, "tiny", &err));
    CHECK_OK(tq_mk_plan_build(&p, &o, &err));
    CHECKF(p.total_bytes > 1000000 && p.total_bytes < 8000000, "tiny is %llu bytes", (unsigned long long)p.total_bytes);
    for (size_t i = 1; i < p.n; i++)
        CHECK(strcmp(p.decls[i - 1].name, p.decls[i].name) < 0);
    tq_mk_plan_free(&p);
    CHECK(tq_mk_preset(&o, TQ_MK_LLAMA, "huge", &err) != 0 && err.code == TQ_EUSAGE);
    CHECK_OK(tq_mk_preset(&o, TQ_MK_QWEN3_MOE, "tiny", &err));
    o.top_k = 9;
    CHECK(tq_mk_validate(&o, &err) != 0 && strstr(err.msg, "top-k"));
    o.top_k = 2;
    o.kv_heads = 3;
    CHECK(tq_mk_validate(&o, &err) != 0 && strstr(err.msg, "kv-heads"));
    CHECK_OK(tq_mk_preset(&o, TQ_MK_LLAMA, "tiny", &err));
    o.naming_mlx = 1;
    CHECK(tq_mk_validate(&o, &err) != 0);
    CHECK_OK(tq_mk_preset(&o, TQ_MK_NGRAM, "tiny", &err));
    o.width = 100;
    CHECK(tq_mk_validate(&o, &err) != 0 && strstr(err.msg, "multiple"));
}

int main(void)
{
    RUN(test_determinism);
    RUN(test_shapes_llama_qwen3);
    RUN(test_shapes_moe_hf);
    RUN(test_values_and_mlx_stacking);
    RUN(test_file_statistics);
    RUN(test_affine_quantized_model);
    RUN(test_ngram_table);
    RUN(test_plan_and_validation);
    TEST_MAIN_END();
}
