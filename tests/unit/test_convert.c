/* tq_convert end to end on small models written here: layout of the TurboQuant output,
 * bytes recomputed independently from the quant primitives, thread-count independence,
 * quantize -> dequantize round trip, the rotated-activation identity on the files,
 * per-tensor overrides, and bad inputs that must leave nothing behind. */
#include "formats/formats.h"
#include "quant/convert/convert.h"
#include "tests/unit/check.h"
#include "tests/unit/gguf_writer.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char dirbuf[8][512];
static const char *tmp(int k, const char *name)
{
    snprintf(dirbuf[k], sizeof dirbuf[k], "%s/conv-%s", t_tmpdir(), name);
    return dirbuf[k];
}

static void rm_rf(const char *p)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0)
        printf("# rm failed\n");
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double urand(void) { return t_urand(&rs); }
static float nrand(void) { return (float)t_nrand(&rs); }

typedef struct spec {
    const char *name;
    tq_dtype dt;
    int ndim;
    uint64_t shape[3];
} spec;

/* The model: attention with a bias, three HF experts, router, norms, embedding, a small
 * linear (kept), lm_head in F32. in = 96 exercises the 12·8 Hadamard block. */
static const spec base_model[] = {
    {"lm_head.weight", TQ_DT_F32, 2, {64, 96}},
    {"model.embed_tokens.weight", TQ_DT_BF16, 2, {64, 96}},
    {"model.layers.0.input_layernorm.weight", TQ_DT_BF16, 1, {96}},
    {"model.layers.0.mlp.experts.0.down_proj.weight", TQ_DT_BF16, 2, {96, 64}},
    {"model.layers.0.mlp.experts.0.gate_proj.weight", TQ_DT_BF16, 2, {64, 96}},
    {"model.layers.0.mlp.experts.0.up_proj.weight", TQ_DT_BF16, 2, {64, 96}},
    {"model.layers.0.mlp.experts.1.down_proj.weight", TQ_DT_BF16, 2, {96, 64}},
    {"model.layers.0.mlp.experts.1.gate_proj.weight", TQ_DT_BF16, 2, {64, 96}},
    {"model.layers.0.mlp.experts.1.up_proj.weight", TQ_DT_BF16, 2, {64, 96}},
    {"model.layers.0.mlp.experts.2.down_proj.weight", TQ_DT_BF16, 2, {96, 64}},
    {"model.layers.0.mlp.experts.2.gate_proj.weight", TQ_DT_BF16, 2, {64, 96}},
    {"model.layers.0.mlp.experts.2.up_proj.weight", TQ_DT_BF16, 2, {64, 96}},
    {"model.layers.0.mlp.gate.weight", TQ_DT_BF16, 2, {3, 96}},
    {"model.layers.0.self_attn.q_proj.bias", TQ_DT_BF16, 1, {96}},
    {"model.layers.0.self_attn.q_proj.weight", TQ_DT_BF16, 2, {96, 96}},
    {"model.layers.0.self_attn.tiny_proj.weight", TQ_DT_BF16, 2, {16, 96}},
    {"model.norm.weight", TQ_DT_BF16, 1, {96}},
};
#define N_BASE (sizeof base_model / sizeof *base_model)

static uint64_t nelem(const spec *s)
{
    uint64_t n = 1;
    for (int k = 0; k < s->ndim; k++)
        n *= s->shape[k];
    return n;
}

/* Values are a function of (tensor index, element) so tests can regenerate them. */
static float value_of(size_t ti, uint64_t i)
{
    uint64_t save = rs;
    rs = 0x9E3779B97F4A7C15ull ^ (ti * 0x100000001B3ull + i * 0x9E3779B1ull + 1);
    for (int k = 0; k < 3; k++)
        urand();
    float v = nrand() * 0.05f;
    rs = save;
    return v;
}

static int write_model(const char *dir, const spec *sp, size_t n, const char *config, tq_err *e)
{
    rm_rf(dir);
    tq_st_decl *d = calloc(n, sizeof *d);
    for (size_t i = 0; i < n; i++) {
        d[i].name = sp[i].name;
        d[i].dtype = sp[i].dt;
        d[i].ndim = sp[i].ndim;
        for (int k = 0; k < sp[i].ndim; k++)
            d[i].shape[k] = sp[i].shape[k];
    }
    tq_model_writer *w;
    int rc = tq_model_writer_open(&w, dir, d, n, 0, NULL, NULL, 0, e);
    for (size_t i = 0; !rc && i < n; i++) {
        uint64_t ne = nelem(&sp[i]);
        size_t es = tq_dtype_size(sp[i].dt);
        float *f = malloc(ne * sizeof *f);
        void *b = malloc(ne * es);
        for (uint64_t j = 0; j < ne; j++)
            f[j] = value_of(i, j);
        rc = tq_dtype_is_float(sp[i].dt) ? tq_from_f32(sp[i].dt, f, b, ne, e) : (memset(b, 1, ne * es), 0);
        if (!rc)
            rc = tq_model_writer_write(w, (size_t)tq_model_writer_index(w, sp[i].name), 0, b, ne * es, e);
        free(f);
        free(b);
    }
    if (!rc)
        rc = tq_model_writer_finish(w, e);
    else
        tq_model_writer_abort(w);
    free(d);
    if (!rc && config) {
        char p[600];
        snprintf(p, sizeof p, "%s/config.json", dir);
        rc = tq_write_file_atomic(p, config, strlen(config), e);
        snprintf(p, sizeof p, "%s/tokenizer.json", dir);
        if (!rc)
            rc = tq_write_file_atomic(p, "{\"tok\": 1}\n", 11, e);
    }
    return rc;
}

static const char *CONFIG = "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 96}\n";

static int read_tensor(const tq_model *m, const char *name, void **buf, const tq_tensor_info **ti)
{
    tq_err err;
    const tq_model_tensor *t = tq_model_find(m, name);
    if (!t)
        return -1;
    *buf = malloc(t->info.nbytes ? t->info.nbytes : 1);
    if (ti)
        *ti = &t->info;
    return tq_model_read(t, 0, *buf, t->info.nbytes, &err);
}

static void default_opts(tq_convert_opts *o, int threads)
{
    tq_convert_opts_default(o);
    o->threads = threads;
    o->quiet = 1;
    o->group_size = 32;
}

static int convert(const char *in, const char *out, const tq_convert_opts *o, tq_convert_report *r, tq_err *e)
{
    tq_convert_report tmpr;
    int rc = tq_convert(in, out, o, r ? r : &tmpr, e);
    if (!rc && !r)
        tq_convert_report_free(&tmpr);
    return rc;
}

/* The quantized module P recomputed from the source rows with the primitives. */
static void check_module(const tq_model *src, const tq_model *q, const char *P, const char *const *srcnames, size_t E,
                         int bits, int method)
{
    tq_err err;
    char nm[256];
    void *w = NULL, *sc = NULL, *cb = NULL, *sg = NULL;
    const tq_tensor_info *wi, *si, *ci, *gi;
    snprintf(nm, sizeof nm, "%s.weight", P);
    CHECKF(read_tensor(q, nm, &w, &wi) == 0, "%s", nm);
    snprintf(nm, sizeof nm, "%s.scales", P);
    CHECK(read_tensor(q, nm, &sc, &si) == 0);
    snprintf(nm, sizeof nm, "%s.codebook", P);
    CHECK(read_tensor(q, nm, &cb, &ci) == 0);
    snprintf(nm, sizeof nm, "%s.signs", P);
    CHECK(read_tensor(q, nm, &sg, &gi) == 0);
    if (t_failed_here)
        goto out;
    const tq_model_tensor *s0 = tq_model_find(src, srcnames[0]);
    uint64_t out = s0->info.shape[0], in = s0->info.shape[1], words = tq_pack_words(in, bits), g = 32;
    CHECK(wi->dtype == TQ_DT_U32 && si->dtype == TQ_DT_F16 && ci->dtype == TQ_DT_F16 && gi->dtype == TQ_DT_F16);
    CHECK(wi->ndim == (E > 1 ? 3 : 2) && wi->shape[wi->ndim - 1] == words && wi->shape[wi->ndim - 2] == out);
    CHECK(si->shape[si->ndim - 1] == in / g && ci->shape[0] == (1u << bits) && gi->shape[0] == in);
    if (E > 1)
        CHECK(wi->shape[0] == E && si->shape[0] == E);
    tq_codebook book;
    CHECK_OK(tq_codebook_lloyd_max(bits, &book, &err));
    CHECK(memcmp(cb, book.f16, (size_t)book.n * 2) == 0);
    float *signs = malloc(in * sizeof *signs);
    tq_signs_module(42, P, signs, in);
    for (uint64_t j = 0; j < in; j++)
        CHECK(((uint16_t *)sg)[j] == (signs[j] < 0 ? 0xBC00 : 0x3C00));
    float *row = malloc(in * sizeof *row);
    uint8_t *idx = malloc(in), *got = malloc(in);
    uint16_t *scales = malloc(in / g * 2);
    void *raw = NULL;
    size_t diff = 0;
    for (size_t e = 0; e < E; e++) {
        const tq_tensor_info *ri = NULL;
        CHECK(read_tensor(src, srcnames[e], &raw, &ri) == 0);
        if (!ri)
            break;
        for (uint64_t r = 0; r < out; r++) {
            CHECK_OK(tq_to_f32(ri->dtype, (char *)raw + r * in * tq_dtype_size(ri->dtype), row, in, &err));
            CHECK(tq_hadamard_rotate(row, in, signs, tq_hadamard_block(in)) == 0);
            CHECK_OK(tq_quantize_groups(&book, method, g, row, in, idx, scales, NULL, NULL, &err));
            const uint32_t *pw = (const uint32_t *)w + (e * out + r) * words;
            tq_unpack(pw, in, bits, got);
            diff += memcmp(idx, got, in) != 0;
            diff += memcmp(scales, (const uint16_t *)sc + (e * out + r) * (in / g), in / g * 2) != 0;
            /* padding bits are zero */
            size_t epw = tq_pack_epw(bits), last = (in - 1) / epw, used = in - last * epw;
            if (used * (size_t)bits < 32)
                CHECK((pw[last] >> (used * (size_t)bits)) == 0);
        }
        free(raw);
        raw = NULL;
    }
    CHECKF(diff == 0, "%s: %zu rows differ from the recomputation", P, diff);
    free(signs), free(row), free(idx), free(got), free(scales);
out:
    free(w), free(sc), free(cb), free(sg);
}

static const char *const EXPERT_GATE[] = {"model.layers.0.mlp.experts.0.gate_proj.weight",
                                          "model.layers.0.mlp.experts.1.gate_proj.weight",
                                          "model.layers.0.mlp.experts.2.gate_proj.weight"};
static const char *const EXPERT_DOWN[] = {"model.layers.0.mlp.experts.0.down_proj.weight",
                                          "model.layers.0.mlp.experts.1.down_proj.weight",
                                          "model.layers.0.mlp.experts.2.down_proj.weight"};

static void test_layout_and_bytes(void)
{
    tq_err err;
    const char *in = tmp(0, "in"), *out = tmp(1, "out");
    CHECK_OK(write_model(in, base_model, N_BASE, CONFIG, &err));
    rm_rf(out);
    tq_convert_opts o;
    default_opts(&o, 2);
    o.scale = TQ_SCALE_RMS;
    tq_convert_report r;
    CHECK_OK(convert(in, out, &o, &r, &err));
    if (t_failed_here)
        return;
    tq_model *src, *q;
    CHECK_OK(tq_model_open(&src, in, &err));
    CHECK_OK(tq_model_open(&q, out, &err));
    if (t_failed_here)
        return;
    const char *q1[] = {"model.layers.0.self_attn.q_proj.weight"}, *lm[] = {"lm_head.weight"};
    check_module(src, q, "model.layers.0.self_attn.q_proj", q1, 1, 3, TQ_SCALE_RMS);
    check_module(src, q, "lm_head", lm, 1, 3, TQ_SCALE_RMS);
    check_module(src, q, "model.layers.0.mlp.switch_mlp.gate_proj", EXPERT_GATE, 3, 3, TQ_SCALE_RMS);
    check_module(src, q, "model.layers.0.mlp.switch_mlp.down_proj", EXPERT_DOWN, 3, 3, TQ_SCALE_RMS);
    /* kept as they were */
    static const char *kept[] = {"model.embed_tokens.weight", "model.layers.0.mlp.gate.weight",
                                 "model.layers.0.input_layernorm.weight", "model.norm.weight",
                                 "model.layers.0.self_attn.tiny_proj.weight"};
    for (int k = 0; k < 5; k++) {
        void *a = NULL, *b = NULL;
        const tq_tensor_info *ai, *bi;
        CHECK(read_tensor(src, kept[k], &a, &ai) == 0 && read_tensor(q, kept[k], &b, &bi) == 0);
        CHECKF(a && b && ai->nbytes == bi->nbytes && ai->dtype == bi->dtype && !memcmp(a, b, ai->nbytes), "%s", kept[k]);
        free(a), free(b);
    }
    /* the bias goes F16 */
    void *bb = NULL;
    const tq_tensor_info *bi;
    CHECK(read_tensor(q, "model.layers.0.self_attn.q_proj.bias", &bb, &bi) == 0 && bi->dtype == TQ_DT_F16);
    free(bb);
    CHECK(tq_model_find(q, "model.layers.0.mlp.experts.0.gate_proj.weight") == NULL);
    CHECK(tq_model_find(q, "model.layers.0.mlp.gate.scales") == NULL);
    /* config block, extras, metadata */
    cJSON *qc = q->config ? cJSON_GetObjectItem(q->config, "quantization") : NULL;
    CHECK(qc && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(qc, "mode")), "turboquant"));
    CHECK(qc && cJSON_GetNumberValue(cJSON_GetObjectItem(qc, "bits")) == 3);
    CHECK(qc && cJSON_GetNumberValue(cJSON_GetObjectItem(qc, "group_size")) == 32);
    CHECK(qc && cJSON_GetNumberValue(cJSON_GetObjectItem(qc, "rotation_seed")) == 42);
    CHECK(qc && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(qc, "rotation")), "hadamard"));
    CHECK(q->config && cJSON_GetNumberValue(cJSON_GetObjectItem(q->config, "hidden_size")) == 96);
    CHECK(q->n_extra == 1 && !strcmp(q->extra_files[0], "tokenizer.json"));
    CHECK(q->n_files == 1 && tq_st_meta(q->files[0], "format") && !strcmp(tq_st_meta(q->files[0], "format"), "mlx"));
    /* report */
    int seen_note = 0;
    for (size_t i = 0; i < r.n; i++)
        if (!strcmp(r.t[i].name, "model.layers.0.self_attn.tiny_proj.weight"))
            seen_note = r.t[i].note && strstr(r.t[i].note, "32");
    CHECK(seen_note);
    CHECK(r.q_params == 64 * 96 + 96 * 96 + 3 * (64 * 96 * 2 + 96 * 64));
    CHECK(r.rel_mse > 0.02 && r.rel_mse < 0.04);
    /* rows·(words·4 + groups·2) + codebook + signs, per module, by hand */
    uint64_t qb = 64 * (10 * 4 + 3 * 2) + 16 + 96 * 2         /* lm_head */
                  + 96 * (10 * 4 + 3 * 2) + 16 + 96 * 2       /* q_proj */
                  + 2 * (192 * (10 * 4 + 3 * 2) + 16 + 96 * 2) /* gate, up */
                  + 288 * (7 * 4 + 2 * 2) + 16 + 64 * 2;      /* down */
    CHECKF(r.q_bytes == qb, "%llu vs %llu", (unsigned long long)r.q_bytes, (unsigned long long)qb);
    CHECK(fabs(r.bpw_quantized - 8.0 * (double)qb / (double)r.q_params) < 1e-12);
    tq_convert_report_free(&r);
    tq_model_close(src);
    tq_model_close(q);
}

static void test_threads_identical(void)
{
    tq_err err;
    const char *in = tmp(0, "in");
    CHECK_OK(write_model(in, base_model, N_BASE, CONFIG, &err));
    static const int th[] = {1, 2, 7};
    for (int k = 0; k < 3; k++) {
        const char *out = tmp(1 + k, k == 0 ? "t1" : k == 1 ? "t2" : "t7");
        rm_rf(out);
        tq_convert_opts o;
        default_opts(&o, th[k]);
        o.shard_size = 40000; /* several shards + index */
        CHECK_OK(convert(in, out, &o, NULL, &err));
    }
    DIR *d = opendir(tmp(1, "t1"));
    int files = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        files++;
        char a[600], b[600], c[600];
        snprintf(a, sizeof a, "%s/%s", tmp(1, "t1"), de->d_name);
        snprintf(b, sizeof b, "%s/%s", tmp(2, "t2"), de->d_name);
        snprintf(c, sizeof c, "%s/%s", tmp(3, "t7"), de->d_name);
        CHECKF(t_files_equal(a, b) && t_files_equal(a, c), "%s differs between thread counts", de->d_name);
    }
    if (d)
        closedir(d);
    char idx[600];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", tmp(1, "t1"));
    CHECK(files > 4 && tq_exists(idx));
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return e / s;
}

/* quantize (lsq) -> dequantize f32: names come back, errors equal the reported ones, and
 * x_rot · dequantized rotated rows == dequantized weights · x. */
static void test_roundtrip_and_identity(void)
{
    tq_err err;
    const char *in = tmp(0, "in"), *q = tmp(1, "rq"), *d = tmp(2, "rd");
    CHECK_OK(write_model(in, base_model, N_BASE, CONFIG, &err));
    rm_rf(q), rm_rf(d);
    tq_convert_opts o;
    default_opts(&o, 2);
    tq_convert_report r;
    CHECK_OK(convert(in, q, &o, &r, &err));
    tq_convert_opts od;
    default_opts(&od, 2);
    od.mode = TQ_CONVERT_DEQUANTIZE;
    od.dtype = TQ_DT_F32;
    CHECK_OK(convert(q, d, &od, NULL, &err));
    tq_model *ms, *mq, *md;
    CHECK_OK(tq_model_open(&ms, in, &err));
    CHECK_OK(tq_model_open(&mq, q, &err));
    CHECK_OK(tq_model_open(&md, d, &err));
    if (t_failed_here)
        return;
    CHECK(md->n_tensors == ms->n_tensors);
    for (size_t i = 0; i < ms->n_tensors; i++)
        CHECKF(tq_model_find(md, ms->tensors[i].info.name) != NULL, "%s", ms->tensors[i].info.name);
    CHECK(md->config && !cJSON_GetObjectItem(md->config, "quantization"));
    /* errors */
    static const char *qs[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.experts.1.up_proj.weight"};
    for (int k = 0; k < 2; k++) {
        void *a = NULL, *b = NULL;
        const tq_tensor_info *ai, *bi;
        CHECK(read_tensor(ms, qs[k], &a, &ai) == 0 && read_tensor(md, qs[k], &b, &bi) == 0);
        if (t_failed_here)
            return;
        float *fa = malloc(ai->nelem * 4);
        CHECK_OK(tq_to_f32(ai->dtype, a, fa, ai->nelem, &err));
        double e = rel_err((float *)b, fa, ai->nelem);
        CHECKF(e > 0.015 && e < 0.035, "%s: %g", qs[k], e);
        if (k == 0)
            for (size_t i = 0; i < r.n; i++)
                if (!strcmp(r.t[i].name, qs[0]))
                    CHECKF(fabs(r.t[i].rel_mse - e) < 1e-3 * e, "reported %g, measured %g", r.t[i].rel_mse, e);
        free(fa), free(a), free(b);
    }
    /* identity on dense and expert modules, from the files */
    static const char *P[] = {"model.layers.0.self_attn.q_proj", "model.layers.0.mlp.switch_mlp.down_proj"};
    static const char *D[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.experts.2.down_proj.weight"};
    static const uint64_t expert[] = {0, 2};
    for (int k = 0; k < 2; k++) {
        char nm[200];
        void *w = NULL, *s = NULL, *c = NULL, *g = NULL, *dq = NULL;
        const tq_tensor_info *wi, *di;
        snprintf(nm, sizeof nm, "%s.weight", P[k]);
        CHECK(read_tensor(mq, nm, &w, &wi) == 0);
        snprintf(nm, sizeof nm, "%s.scales", P[k]);
        CHECK(read_tensor(mq, nm, &s, NULL) == 0);
        snprintf(nm, sizeof nm, "%s.codebook", P[k]);
        CHECK(read_tensor(mq, nm, &c, NULL) == 0);
        snprintf(nm, sizeof nm, "%s.signs", P[k]);
        CHECK(read_tensor(mq, nm, &g, NULL) == 0);
        CHECK(read_tensor(md, D[k], &dq, &di) == 0);
        if (t_failed_here)
            return;
        uint64_t out = di->shape[0], n = di->shape[1], words = tq_pack_words(n, 3), ng = n / 32;
        float cb[8], *signs = malloc(n * 4), *x = malloc(n * 4), *xr = malloc(n * 4), *row = malloc(n * 4);
        for (int i = 0; i < 8; i++)
            cb[i] = tq_f16_to_f32(((uint16_t *)c)[i]);
        for (uint64_t j = 0; j < n; j++) {
            signs[j] = tq_f16_to_f32(((uint16_t *)g)[j]);
            x[j] = nrand();
        }
        memcpy(xr, x, n * 4);
        CHECK(tq_hadamard_rotate(xr, n, signs, tq_hadamard_block(n)) == 0);
        double d2 = 0, y2 = 0;
        for (uint64_t rr = 0; rr < out; rr++) {
            uint64_t grow = expert[k] * out + rr;
            tq_dequantize_row((uint32_t *)w + grow * words, (uint16_t *)s + grow * ng, cb, 3, 32, n, row);
            double fast = 0, slow = 0;
            for (uint64_t j = 0; j < n; j++) {
                fast += (double)xr[j] * row[j];
                slow += (double)((float *)dq)[rr * n + j] * x[j];
            }
            d2 += (fast - slow) * (fast - slow);
            y2 += slow * slow;
        }
        CHECKF(sqrt(d2 / y2) <= 1e-5, "%s: %g", P[k], sqrt(d2 / y2));
        free(signs), free(x), free(xr), free(row), free(w), free(s), free(c), free(g), free(dq);
    }
    tq_convert_report_free(&r);
    tq_model_close(ms), tq_model_close(mq), tq_model_close(md);
}

static void test_overrides(void)
{
    tq_err err;
    const char *in = tmp(0, "in"), *out = tmp(1, "ov");
    CHECK_OK(write_model(in, base_model, N_BASE, CONFIG, &err));
    rm_rf(out);
    tq_convert_opts o;
    default_opts(&o, 2);
    const char *bre[] = {"proj", "down_proj\\.weight$"};
    int bb[] = {4, 2};
    const char *keep[] = {"q_proj"};
    o.n_bits_for = 2, o.bits_for_re = bre, o.bits_for_bits = bb;
    o.n_keep = 1, o.keep_re = keep;
    o.dtype = TQ_DT_F16;
    CHECK_OK(convert(in, out, &o, NULL, &err));
    tq_model *q;
    CHECK_OK(tq_model_open(&q, out, &err));
    if (t_failed_here)
        return;
    const tq_model_tensor *t;
    CHECK((t = tq_model_find(q, "model.layers.0.mlp.switch_mlp.down_proj.codebook")) && t->info.shape[0] == 4);
    CHECK((t = tq_model_find(q, "model.layers.0.mlp.switch_mlp.up_proj.codebook")) && t->info.shape[0] == 16);
    CHECK((t = tq_model_find(q, "lm_head.codebook")) && t->info.shape[0] == 8);
    CHECK((t = tq_model_find(q, "model.layers.0.self_attn.q_proj.weight")) && t->info.dtype == TQ_DT_F16);
    CHECK((t = tq_model_find(q, "model.embed_tokens.weight")) && t->info.dtype == TQ_DT_F16);
    CHECK(!tq_model_find(q, "model.layers.0.self_attn.q_proj.scales"));
    cJSON *qc = cJSON_GetObjectItem(q->config, "quantization");
    cJSON *dn = qc ? cJSON_GetObjectItem(qc, "model.layers.0.mlp.switch_mlp.down_proj") : NULL;
    CHECK(dn && cJSON_GetNumberValue(cJSON_GetObjectItem(dn, "bits")) == 2);
    CHECK(qc && cJSON_IsFalse(cJSON_GetObjectItem(qc, "model.layers.0.self_attn.q_proj")));
    tq_model_close(q);
    /* a bad regular expression is a usage error */
    const char *bad[] = {"("};
    o.keep_re = bad;
    rm_rf(out);
    CHECK(convert(in, out, &o, NULL, &err) == -1 && err.code == TQ_EUSAGE);
}

static int no_leftovers(void)
{
    DIR *d = opendir(t_tmpdir());
    struct dirent *de;
    int ok = 1;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".partial-") || strstr(de->d_name, ".old-"))
            ok = 0;
    if (d)
        closedir(d);
    return ok;
}

static void test_bad_inputs(void)
{
    tq_err err;
    const char *in = tmp(0, "in"), *out = tmp(1, "bad"), *q = tmp(2, "bq");
    CHECK_OK(write_model(in, base_model, N_BASE, CONFIG, &err));
    rm_rf(out), rm_rf(q);
    tq_convert_opts o;
    default_opts(&o, 2);
    CHECK_OK(convert(in, q, &o, NULL, &err));
    /* already quantized */
    CHECK(convert(q, out, &o, NULL, &err) == -1 && tq_exit_code(&err) == 1 && strstr(err.msg, "already quantized"));
    CHECK(!tq_exists(out));
    /* the output exists: refused without --force, replaced with it */
    CHECK(convert(in, q, &o, NULL, &err) == -1 && err.code == TQ_EEXIST);
    char marker[600];
    snprintf(marker, sizeof marker, "%s/stale.txt", q);
    CHECK_OK(tq_write_file_atomic(marker, "x", 1, &err));
    o.force = 1;
    CHECK_OK(convert(in, q, &o, NULL, &err));
    CHECK(!tq_exists(marker));
    /* the output may not hold the input */
    CHECK(convert(q, q, &o, NULL, &err) == -1);
    o.force = 0;
    /* unsupported dtype for a linear */
    spec s8[N_BASE];
    memcpy(s8, base_model, sizeof s8);
    s8[14].dt = TQ_DT_I8; /* q_proj.weight */
    CHECK_OK(write_model(in, s8, N_BASE, CONFIG, &err));
    CHECK(convert(in, out, &o, NULL, &err) == -1 && err.code == TQ_EUNSUP && strstr(err.msg, "q_proj"));
    CHECK(!tq_exists(out));
    /* expert shape mismatch */
    spec sm[N_BASE];
    memcpy(sm, base_model, sizeof sm);
    sm[7].shape[0] = 32; /* expert 1 gate_proj */
    CHECK_OK(write_model(in, sm, N_BASE, CONFIG, &err));
    CHECK(convert(in, out, &o, NULL, &err) == -1 && err.code == TQ_EDATA && strstr(err.msg, "expert"));
    /* missing expert */
    spec mx[N_BASE - 1];
    memcpy(mx, base_model, 4 * sizeof *mx);
    memcpy(mx + 4, base_model + 5, (N_BASE - 5) * sizeof *mx); /* drop expert 0 gate_proj */
    CHECK_OK(write_model(in, mx, N_BASE - 1, CONFIG, &err));
    CHECK(convert(in, out, &o, NULL, &err) == -1 && strstr(err.msg, "'model.layers.0.mlp.experts.0.gate_proj.weight' is missing"));
    /* missing shard named in the index */
    CHECK_OK(write_model(in, base_model, N_BASE, CONFIG, &err));
    tq_convert_opts p;
    default_opts(&p, 1);
    p.mode = TQ_CONVERT_PLAIN;
    p.shard_size = 40000;
    const char *sh = tmp(3, "sharded");
    rm_rf(sh);
    CHECK_OK(convert(in, sh, &p, NULL, &err));
    char shard[600];
    snprintf(shard, sizeof shard, "%s/model-00002-of-00005.safetensors", sh);
    CHECKF(unlink(shard) == 0, "%s", shard);
    CHECK(convert(sh, out, &o, NULL, &err) == -1 && tq_exit_code(&err) == 1);
    CHECK(!tq_exists(out));
    /* a truncated shard */
    CHECK_OK(convert(in, sh, &(tq_convert_opts){.mode = TQ_CONVERT_PLAIN, .bits = 3, .group_size = 64, .dtype = -1,
                                                .shard_size = 40000, .threads = 1, .force = 1, .quiet = 1},
                     NULL, &err));
    snprintf(shard, sizeof shard, "%s/model-00003-of-00005.safetensors", sh);
    CHECK(truncate(shard, 1000) == 0);
    CHECK(convert(sh, out, &o, NULL, &err) == -1 && tq_exit_code(&err) == 1);
    CHECK(!tq_exists(out));
    CHECK(no_leftovers());
    /* dequantize something that is not quantized */
    o.mode = TQ_CONVERT_DEQUANTIZE;
    CHECK(convert(in, out, &o, NULL, &err) == -1 && strstr(err.msg, "no quantized modules"));
}

/* GGUF input (tensors presented as F32, experts already stacked 3-D): quantizing it gives
 * the same module bytes as quantizing its plain safetensors conversion. */
static void test_gguf_input(void)
{
    tq_err err;
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen3moe");
    gw_kv_u32(&w, "qwen3moe.block_count", 1);
    gw_kv_u32(&w, "qwen3moe.embedding_length", 64);
    gw_kv_u32(&w, "qwen3moe.attention.head_count", 4);
    gw_kv_u32(&w, "qwen3moe.attention.head_count_kv", 2);
    gw_kv_u32(&w, "qwen3moe.expert_count", 2);
    gw_kv_u32(&w, "qwen3moe.expert_used_count", 1);
    float *q = malloc(64 * 64 * 4);
    uint16_t *ex = malloc(2 * 96 * 64 * 2);
    for (int i = 0; i < 64 * 64; i++)
        q[i] = value_of(100, (uint64_t)i);
    for (int i = 0; i < 2 * 96 * 64; i++)
        ex[i] = tq_f32_to_f16(value_of(101, (uint64_t)i));
    uint64_t neq[2] = {64, 64}, nee[3] = {64, 96, 2};
    gw_tensor_add(&w, "blk.0.attn_q.weight", 2, neq, 0 /* F32 */, q, 64 * 64 * 4);
    gw_tensor_add(&w, "blk.0.ffn_gate_exps.weight", 3, nee, 1 /* F16 */, ex, 2 * 96 * 64 * 2);
    char path[600];
    snprintf(path, sizeof path, "%s/conv-model.gguf", t_tmpdir());
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
    free(q), free(ex);
    const char *plain = tmp(1, "gplain"), *qa = tmp(2, "gqa"), *qb = tmp(3, "gqb");
    rm_rf(plain), rm_rf(qa), rm_rf(qb);
    tq_convert_opts o;
    default_opts(&o, 2);
    CHECK_OK(convert(path, qa, &o, NULL, &err));
    tq_convert_opts p;
    default_opts(&p, 1);
    p.mode = TQ_CONVERT_PLAIN;
    CHECK_OK(convert(path, plain, &p, NULL, &err));
    CHECK_OK(convert(plain, qb, &o, NULL, &err));
    tq_model *a, *b;
    CHECK_OK(tq_model_open(&a, qa, &err));
    CHECK_OK(tq_model_open(&b, qb, &err));
    if (t_failed_here)
        return;
    static const char *names[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.scales",
                                  "model.layers.0.mlp.switch_mlp.gate_proj.weight",
                                  "model.layers.0.mlp.switch_mlp.gate_proj.scales",
                                  "model.layers.0.mlp.switch_mlp.gate_proj.signs"};
    for (int k = 0; k < 5; k++) {
        void *x = NULL, *y = NULL;
        const tq_tensor_info *xi, *yi;
        CHECKF(read_tensor(a, names[k], &x, &xi) == 0 && read_tensor(b, names[k], &y, &yi) == 0, "%s", names[k]);
        CHECKF(x && y && xi->nbytes == yi->nbytes && !memcmp(x, y, xi->nbytes), "%s", names[k]);
        free(x), free(y);
    }
    const tq_model_tensor *t = tq_model_find(a, "model.layers.0.mlp.switch_mlp.gate_proj.weight");
    CHECK(t && t->info.ndim == 3 && t->info.shape[0] == 2 && t->info.shape[1] == 96 && t->info.shape[2] == 7);
    tq_model_close(a), tq_model_close(b);
}

int main(void)
{
    RUN(test_layout_and_bytes);
    RUN(test_threads_identical);
    RUN(test_roundtrip_and_identity);
    RUN(test_overrides);
    RUN(test_bad_inputs);
    RUN(test_gguf_input);
    TEST_MAIN_END();
}
