/* Reference decoder: logits against an independent naive f64 forward pass (fixtures in
 * rt_fixture.h), determinism across thread counts, logits file and hash, errors. */
#include "runtime/rt_internal.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/rt_fixture.h"
#include "formats/formats.h"
#include "quant/convert/convert.h"

#include <cjson/cJSON.h>
#include <string.h>

#include <unistd.h>

static const int32_t prompt[] = {3, 17, 5};
#define NP 3
#define NGEN 5

static fx_cfg base_cfg(int arch, int kind)
{
    return fx_small_cfg(arch, kind);
}

static void model_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/rt-%s-%d", t_tmpdir(), name, (int)getpid());
}

/* Decode with the runtime; logits into b (NGEN x vocab). */
static int run_model(const char *dir, int threads, fx_logits *b, int32_t *toks, unsigned char sha[32],
                     const char *logits_path, tq_err *err)
{
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.threads = threads;
    o.on_logits = fx_collect;
    o.user = b;
    o.logits_path = logits_path;
    b->steps = 0;
    return tq_run_validate(dir, prompt, NP, NGEN, &o, toks, sha, err);
}

/* Runtime on dir vs the naive forward of m: max |a - b| / max |b| per step ≤ 1e-4, greedy
 * tokens equal. */
static void compare_naive(const fx_model *pm, const char *dir, const char *name)
{
    const fx_model m_ = *pm, *mp = &m_;
#define m (*mp)
    fx_cfg c = m.c;
    tq_err err = {0};
    fx_logits b = {calloc((size_t)NGEN * (size_t)c.vocab, sizeof(float)), 0, 0, NGEN};
    int32_t toks[NGEN];
    unsigned char sha[32];
    CHECK_OK(run_model(dir, 2, &b, toks, sha, NULL, &err));
    CHECK(b.steps == NGEN);
    fx_state s = {.kc = calloc((size_t)c.layers * 16 * (size_t)c.kv_heads * (size_t)c.head_dim, 8),
                  .vc = calloc((size_t)c.layers * 16 * (size_t)c.kv_heads * (size_t)c.head_dim, 8),
                  .ctx = 16};
    double *ref = malloc((size_t)c.vocab * sizeof *ref);
    double worst = 0;
    int pos = 0;
    for (int i = 0; i < NP - 1; i++)
        fx_forward(&m, &s, prompt[i], pos++, ref);
    int tok = prompt[NP - 1];
    for (int st = 0; st < NGEN && b.steps == NGEN; st++) {
        fx_forward(&m, &s, tok, pos++, ref);
        int am;
        worst = fmax(worst, fx_rel_err(ref, b.v + (size_t)st * c.vocab, c.vocab, &am));
        CHECKF(am == toks[st], "%s step %d: naive argmax %d, runtime %d", name, st, am, toks[st]);
        tok = toks[st]; /* teacher-force the runtime's tokens */
    }
    CHECKF(worst <= 1e-4, "%s: relative logits error %.3g", name, worst);
    CHECKF(worst > 0 || c.kind == FX_F32, "%s: suspiciously exact (%.3g)", name, worst);
    printf("  %s: max relative logits error %.3g, tokens", name, worst);
    for (int i = 0; i < NGEN; i++)
        printf(" %d", toks[i]);
    printf("\n");
    free(ref);
    free(s.kc);
    free(s.vc);
    free(b.v);
#undef m
}

static void check_against_naive(fx_cfg c, const char *name)
{
    char dir[512];
    model_dir(dir, sizeof dir, name);
    fx_model m;
    CHECK(fx_generate(&c, dir, &m) == 0);
    compare_naive(&m, dir, name);
    fx_free(&m);
}

/* ---- models written by tq-convert --method affine, against the naive forward of their
 * dequantized weights: w = scale·q + bias in f64 from the stored words, scales and biases
 * (man tq-formats(5), MLX AFFINE WEIGHTS), bits and group size from config.json. */
static double dt_value(tq_dtype dt, const unsigned char *p)
{
    float f;
    if (dt == TQ_DT_F32) {
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return dt == TQ_DT_F16 ? tq_f16_to_f32(h) : tq_bf16_to_f32(h);
}

/* Replace d with expert `ex` of module P of the converted model when P is quantized there. */
static void dequant_into(tq_model *mo, const cJSON *cfg, const char *P, int ex, dmat *d, int *n_done)
{
    char nw[256], ns[256], nb[256];
    snprintf(nw, sizeof nw, "%s.weight", P);
    snprintf(ns, sizeof ns, "%s.scales", P);
    snprintf(nb, sizeof nb, "%s.biases", P);
    const tq_model_tensor *w = tq_model_find(mo, nw), *s = tq_model_find(mo, ns), *b = tq_model_find(mo, nb);
    if (!s)
        return;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(cfg, "quantization"), *mq = cJSON_GetObjectItemCaseSensitive(q, P);
    const cJSON *src = cJSON_IsObject(mq) ? mq : q;
    int bits = cJSON_GetObjectItemCaseSensitive(src, "bits")->valueint;
    int group = cJSON_GetObjectItemCaseSensitive(src, "group_size")->valueint;
    int rows = d->rows, cols = d->cols, epw = 32 / bits, ng = cols / group;
    size_t ssz = tq_dtype_size(s->info.dtype);
    uint32_t *words = malloc((size_t)rows * (size_t)(cols / epw) * 4);
    unsigned char *sc = malloc((size_t)rows * (size_t)ng * ssz), *bi = malloc((size_t)rows * (size_t)ng * ssz);
    tq_err err = {0};
    uint64_t base = (uint64_t)ex * (uint64_t)rows;
    CHECK_OK(tq_model_read(w, base * (uint64_t)(cols / epw) * 4, words, (size_t)rows * (size_t)(cols / epw) * 4, &err));
    CHECK_OK(tq_model_read(s, base * (uint64_t)ng * ssz, sc, (size_t)rows * (size_t)ng * ssz, &err));
    CHECK_OK(tq_model_read(b, base * (uint64_t)ng * ssz, bi, (size_t)rows * (size_t)ng * ssz, &err));
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            uint32_t qv = (words[(size_t)r * (size_t)(cols / epw) + (size_t)(j / epw)] >> ((j % epw) * bits)) & ((1u << bits) - 1);
            size_t gi = (size_t)r * (size_t)ng + (size_t)(j / group);
            d->w[(size_t)r * (size_t)cols + (size_t)j] = dt_value(s->info.dtype, sc + gi * ssz) * qv + dt_value(b->info.dtype, bi + gi * ssz);
        }
    free(words);
    free(sc);
    free(bi);
    (*n_done)++;
}

static void check_converted_affine(fx_cfg c, int bits, int rule, const char *name)
{
    char dir[512], out[600];
    model_dir(dir, sizeof dir, name);
    snprintf(out, sizeof out, "%s-affine", dir);
    fx_model m;
    CHECK(fx_generate(&c, dir, &m) == 0);
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    o.method = TQ_METHOD_AFFINE;
    o.bits = bits;
    o.group_size = 32;
    o.affine_rule = rule;
    o.threads = 2;
    o.quiet = 1;
    tq_convert_report r;
    tq_err err = {0};
    CHECK_OK(tq_convert(dir, out, &o, &r, &err));
    tq_convert_report_free(&r);
    tq_model *mo = NULL;
    CHECK_OK(tq_model_open(&mo, out, &err));
    int done = 0;
    if (mo) {
        dequant_into(mo, mo->config, "model.embed_tokens", 0, &m.embed, &done);
        if (m.lm.w != m.embed.w)
            dequant_into(mo, mo->config, "lm_head", 0, &m.lm, &done);
        static const char *const att[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        static const char *const mlp[3] = {"gate_proj", "up_proj", "down_proj"};
        for (int l = 0; l < c.layers; l++) {
            fx_layer *L = &m.L[l];
            char P[200];
            dmat *a[4] = {&L->q, &L->k, &L->v, &L->o}, *f[3] = {&L->gate, &L->up, &L->down}, *sh[3] = {&L->sg, &L->su, &L->sd};
            for (int i = 0; i < 4; i++) {
                snprintf(P, sizeof P, "model.layers.%d.self_attn.%s", l, att[i]);
                dequant_into(mo, mo->config, P, 0, a[i], &done);
            }
            for (int i = 0; i < 3; i++) {
                snprintf(P, sizeof P, "model.layers.%d.mlp.%s", l, mlp[i]);
                if (f[i]->w)
                    dequant_into(mo, mo->config, P, 0, f[i], &done);
                snprintf(P, sizeof P, "model.layers.%d.mlp.shared_expert.%s", l, mlp[i]);
                if (sh[i]->w)
                    dequant_into(mo, mo->config, P, 0, sh[i], &done);
                snprintf(P, sizeof P, "model.layers.%d.mlp.switch_mlp.%s", l, mlp[i]);
                for (int x = 0; L->eg && x < c.experts; x++)
                    dequant_into(mo, mo->config, P, x, i == 0 ? &L->eg[x] : i == 1 ? &L->eu[x] : &L->ed[x], &done);
            }
            snprintf(P, sizeof P, "model.layers.%d.mlp.gate", l);
            if (L->router.w)
                dequant_into(mo, mo->config, P, 0, &L->router, &done);
            snprintf(P, sizeof P, "model.layers.%d.mlp.shared_expert_gate", l);
            if (L->sgate.w)
                dequant_into(mo, mo->config, P, 0, &L->sgate, &done);
        }
        tq_model_close(mo);
    }
    CHECKF(done >= 4 * c.layers + 1, "%s: only %d modules were quantized", name, done);
    compare_naive(&m, out, name);
    fx_free(&m);
}

static void naive_converted_affine(void)
{
    check_converted_affine(base_cfg(FX_LLAMA, FX_BF16), 4, TQ_AFFINE_GPU, "conv-llama-aff4-gpu");
    check_converted_affine(base_cfg(FX_QWEN3, FX_F16), 8, TQ_AFFINE_CPU, "conv-qwen3-aff8-cpu");
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_BF16);
    c.hf_expert_names = 1;
    c.shared_inter = 64;
    check_converted_affine(c, 4, TQ_AFFINE_GPU, "conv-moe-hf-shared-aff4");
}

static void naive_llama_f32(void) { check_against_naive(base_cfg(FX_LLAMA, FX_F32), "llama-f32"); }
static void naive_llama_aff4(void) { check_against_naive(base_cfg(FX_LLAMA, FX_AFF4), "llama-aff4"); }
static void naive_llama_tq4(void) { check_against_naive(base_cfg(FX_LLAMA, FX_TQ4), "llama-tq4"); }
static void naive_qwen3_bf16(void) { check_against_naive(base_cfg(FX_QWEN3, FX_BF16), "qwen3-bf16"); }
static void naive_qwen3_f16(void) { check_against_naive(base_cfg(FX_QWEN3, FX_F16), "qwen3-f16"); }
static void naive_qwen3_aff8(void) { check_against_naive(base_cfg(FX_QWEN3, FX_AFF8), "qwen3-aff8"); }
static void naive_qwen3_tq3(void) { check_against_naive(base_cfg(FX_QWEN3, FX_TQ3), "qwen3-tq3"); }
static void naive_llama_tq2(void) { check_against_naive(base_cfg(FX_LLAMA, FX_TQ2), "llama-tq2"); }

static void naive_moe_bf16_hf_shared(void)
{
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_BF16);
    c.hf_expert_names = 1;
    c.shared_inter = 48;
    check_against_naive(c, "moe-bf16-hf-shared");
}

static void naive_moe_tq3(void)
{
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_TQ3);
    check_against_naive(c, "moe-tq3");
}

/* HF per-expert TurboQuant, each expert its own codebook and signs: stacked at load
 * (bind_per_expert_stacked, rt_emat parts 4 and 5), each expert's read by id; against the
 * naive f64 decode of the matrices the fixture wrote (correctness: an expert given another's
 * codebook or signs decodes other weights) */
static void naive_moe_tq3_hf_own(void)
{
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_TQ3);
    c.hf_expert_names = 1;
    c.own_codebooks = 1;
    check_against_naive(c, "moe-tq3-hf-own");
}

static void naive_moe_aff4_nonorm(void)
{
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_AFF4);
    c.norm_topk = 0;
    c.top_k = 3;
    check_against_naive(c, "moe-aff4");
}

/* --threads 1/2/7: identical logits bytes; the logits file holds exactly the stream. */
static void threads_identical(void)
{
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_TQ3);
    c.shared_inter = 32;
    char dir[512];
    model_dir(dir, sizeof dir, "threads");
    fx_model m;
    CHECK(fx_generate(&c, dir, &m) == 0);
    fx_free(&m);
    tq_err err = {0};
    size_t n = (size_t)NGEN * (size_t)c.vocab;
    float *first = NULL;
    unsigned char sha0[32];
    int32_t t0[NGEN];
    int threads[] = {1, 2, 7};
    for (int i = 0; i < 3; i++) {
        fx_logits b = {calloc(n, sizeof(float)), 0, 0, NGEN};
        int32_t toks[NGEN];
        unsigned char sha[32];
        char lp[600];
        snprintf(lp, sizeof lp, "%s-logits-%d.f32", dir, threads[i]); /* not inside the model */
        CHECK_OK(run_model(dir, threads[i], &b, toks, sha, lp, &err));
        /* file == collected stream, sha == SHA-256 of the file */
        unsigned char fsha[32];
        uint64_t fsize = 0;
        CHECK_OK(tq_sha256_file(lp, fsha, &fsize, &err));
        CHECK(fsize == n * 4);
        CHECK(memcmp(fsha, sha, 32) == 0);
        unsigned char bsha[32];
        tq_sha256_buf(b.v, n * 4, bsha);
        CHECK(memcmp(bsha, sha, 32) == 0);
        if (!first) {
            first = b.v;
            memcpy(sha0, sha, 32);
            memcpy(t0, toks, sizeof t0);
        } else {
            CHECKF(memcmp(first, b.v, n * 4) == 0, "threads %d: logits differ from threads 1", threads[i]);
            CHECK(memcmp(sha0, sha, 32) == 0);
            CHECK(memcmp(t0, toks, sizeof t0) == 0);
            free(b.v);
        }
    }
    free(first);
}

static void errors(void)
{
    fx_cfg c = base_cfg(FX_LLAMA, FX_F32);
    char dir[512];
    model_dir(dir, sizeof dir, "errors");
    fx_model m;
    CHECK(fx_generate(&c, dir, &m) == 0);
    fx_free(&m);
    tq_err err = {0};
    tq_run_opts o;
    tq_run_opts_default(&o);
    int32_t toks[4];
    int32_t bad[] = {1, 80};
    CHECK(tq_run_validate(dir, bad, 2, 2, &o, toks, NULL, &err) == -1);
    CHECKF(strstr(err.msg, "outside the vocabulary") != NULL, "%s", err.msg);
    o.ctx = 2;
    CHECK(tq_run_validate(dir, prompt, NP, 2, &o, toks, NULL, &err) == -1);
    CHECKF(strstr(err.msg, "context") != NULL, "%s", err.msg);
    /* a logits file is not left behind when decoding fails */
    char lp[600];
    snprintf(lp, sizeof lp, "%s/fail.f32", dir);
    o.ctx = 0;
    o.logits_path = lp;
    CHECK(tq_run_validate(dir, bad, 2, 2, &o, toks, NULL, &err) == -1);
    CHECK(access(lp, F_OK) != 0);
    /* config with an unknown architecture */
    char cp[600];
    snprintf(cp, sizeof cp, "%s/config.json", dir);
    FILE *f = fopen(cp, "w");
    fputs("{\"model_type\": \"gpt2\", \"hidden_size\": 64}\n", f);
    fclose(f);
    o.logits_path = NULL;
    CHECK(tq_run_validate(dir, prompt, NP, 2, &o, toks, NULL, &err) == -1);
    CHECKF(strstr(err.msg, "gpt2") != NULL, "%s", err.msg);
}

/* The platform-independent exp/log/sincos agree with the C library to about an ulp. */
static void math_accuracy(void)
{
    fx_rng = 12345;
    double we = 0, wl = 0, ws = 0;
    for (int i = 0; i < 200000; i++) {
        double x = (fx_uniform() - 0.5) * 160.0;
        we = fmax(we, fabs(rt_exp(x) - exp(x)) / exp(x));
        double y = ldexp(fx_uniform() + 0.01, (int)(fx_uniform() * 200) - 100);
        wl = fmax(wl, fabs(rt_log(y) - log(y)) / fmax(fabs(log(y)), 1e-300));
        double a = (fx_uniform() - 0.2) * (i % 2 ? 1e6 : 10.0), sv, cv;
        rt_sincos(a, &sv, &cv);
        ws = fmax(ws, fmax(fabs(sv - sin(a)), fabs(cv - cos(a))));
    }
    CHECKF(we < 1e-15, "exp rel err %.3g", we);
    CHECKF(wl < 1e-15, "log rel err %.3g", wl);
    CHECKF(ws < 1e-14, "sincos abs err %.3g", ws);
    CHECK(rt_exp(-1000) == 0 && isinf(rt_exp(1000)) && rt_exp(0) == 1.0);
    CHECK(rt_expf(0.0f) == 1.0f && rt_log(1.0) == 0.0);
    printf("  exp %.3g, log %.3g, sincos %.3g\n", we, wl, ws);
}

/* rt_exp as first written, with the C library's floor and ldexp (both exact by C11 7.12.9.2
 * and 7.12.6.6): rt_exp now rounds to the integer and scales by 2^k without those calls, and
 * must give the same bits everywhere (every decode's softmax and SiLU go through it). */
static double exp_libm(double x)
{
    if (x != x)
        return x;
    if (x > 709.78)
        return HUGE_VAL;
    if (x < -745.2)
        return 0.0;
    double k = floor(x * 1.44269504088896338700e+00 + 0.5);
    double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    double p = 1.0 / 87178291200.0;
    static const double c[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                 1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                 1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5,
                                 1.0,                1.0};
    for (int i = 0; i < 14; i++)
        p = p * r + c[i];
    return ldexp(p, (int)k);
}

/* Consistency (same bits as exp_libm), over the whole domain and at its edges: the integer
 * rounding near halves and negative values, subnormal and near-overflow results. */
static void exp_same_bits(void)
{
    fx_rng = 777;
    int bad = 0;
    double worst = 0;
    static const double edge[] = {0.0, -0.0, 0.5, -0.5, 0.34657359027997264, -0.34657359027997264,
                                  708.0, 709.0, 709.78, -708.0, -708.4, -708.5, -709.0, -720.0,
                                  -744.0, -745.1, -745.2, 1e-300, -1e-300, 3.0, -3.0};
    for (int i = 0; i < 2000000 + (int)(sizeof edge / sizeof *edge); i++) {
        double x = i < (int)(sizeof edge / sizeof *edge) ? edge[i]
                   : i % 4 == 0 ? (fx_uniform() - 0.5) * 1500.0        /* everything, both ends */
                   : i % 4 == 1 ? -700.0 - fx_uniform() * 46.0         /* subnormal results */
                   : i % 4 == 2 ? (fx_uniform() - 0.5) * 40.0          /* softmax and SiLU range */
                                : ((int)(fx_uniform() * 200) - 100 + 0.5) * 0.6931471805599453; /* k + 1/2 */
        double a = rt_exp(x), b = exp_libm(x);
        if (memcmp(&a, &b, sizeof a) != 0 && bad++ == 0)
            worst = x;
    }
    CHECKF(bad == 0, "rt_exp differs from the libm-built form at %d inputs, first %a", bad, worst);
}

/* Naive logits after the prompt and tokens 1..4 (eight positions) at the model's theta. */
static void naive_last_logits(const fx_model *m, double *out)
{
    const fx_cfg *c = &m->c;
    size_t kv = (size_t)c->layers * 16 * (size_t)c->kv_heads * (size_t)c->head_dim;
    fx_state s = {.kc = calloc(kv, 8), .vc = calloc(kv, 8), .ctx = 16};
    int pos = 0;
    for (int i = 0; i < NP; i++)
        fx_forward(m, &s, prompt[i], pos++, out);
    for (int t = 1; t <= 4; t++)
        fx_forward(m, &s, t, pos++, out);
    free(s.kc);
    free(s.vc);
    fx_state_free(&s);
}

/* The naive logits of m and of the same weights under config d differ by more than 1e-2
 * relative: the fixture can tell the two configurations apart. */
static void sensitive(const fx_model *m, fx_cfg d, const char *what)
{
    int V = m->c.vocab;
    double *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b), mx = 0, diff = 0;
    naive_last_logits(m, a);
    fx_model md = *m;
    md.c = d;
    naive_last_logits(&md, b);
    for (int i = 0; i < V; i++) {
        mx = fmax(mx, fabs(a[i]));
        diff = fmax(diff, fabs(a[i] - b[i]));
    }
    CHECKF(diff / mx > 1e-2, "%s barely matters in this fixture (%.3g)", what, diff / mx);
    free(a);
    free(b);
}

/* Model `name` of configuration c in dir: the runtime against the oracle, and the oracle
 * shown sensitive to the change from c to d. 0 with m open (fx_free it), -1 on failure. */
static int rope_case(fx_cfg c, fx_cfg d, const char *name, const char *what, char *dir, size_t cap, fx_model *m)
{
    model_dir(dir, cap, name);
    CHECK(fx_generate(&c, dir, m) == 0);
    if (t_failed_here)
        return -1;
    compare_naive(m, dir, name);
    sensitive(m, d, what);
    return 0;
}

/* RoPE with a theta other than the default 10000 reaches every layer: the runtime against
 * the naive forward at theta 5e5 (three layers), read from config.json's "rope_theta" and,
 * when that key is absent, from "rope_parameters". The fixture is sensitive to theta: the
 * naive logits at 5e5 and at 10000 differ by far more than the tolerance. */
static void naive_rope_theta(void)
{
    fx_cfg c = base_cfg(FX_LLAMA, FX_F32);
    c.theta = 500000.0;
    c.layers = 3;
    fx_cfg d = c;
    d.theta = 10000.0;
    char dir[512];
    fx_model m;
    if (rope_case(c, d, "llama-theta5e5", "theta", dir, sizeof dir, &m) != 0)
        return;

    /* the same model with theta only under rope_parameters */
    char cfgp[600];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
    tq_err err = {0};
    cJSON *j = NULL;
    CHECK_OK(tq_json_read_file(cfgp, 1 << 20, &j, &err));
    if (j) {
        CHECK(cJSON_GetObjectItemCaseSensitive(j, "rope_theta") != NULL);
        cJSON_DeleteItemFromObjectCaseSensitive(j, "rope_theta");
        cJSON *rp = cJSON_AddObjectToObject(j, "rope_parameters");
        cJSON_AddStringToObject(rp, "rope_type", "default");
        cJSON_AddNumberToObject(rp, "rope_theta", 500000.0);
        char *txt = cJSON_Print(j);
        FILE *f = fopen(cfgp, "w");
        CHECK(txt && f && fputs(txt, f) >= 0);
        if (f)
            CHECK(fclose(f) == 0);
        free(txt);
        cJSON_Delete(j);
        compare_naive(&m, dir, "llama-rope-parameters");
    }
    fx_free(&m);
}

/* rope_scaling against the oracle's own reading of it: "linear" (factor 4) and "llama3"
 * (factor 8, original context 256, low/high frequency factors 1 and 4: with head_dim 16 and
 * theta 1e4 the pairs' wavelengths 2π·1e4^(i/8) fall in all three of its ranges). */
static void naive_rope_scaling(void)
{
    fx_cfg c = base_cfg(FX_LLAMA, FX_F32);
    c.rope_linear = 1;
    c.rs_factor = 4;
    fx_cfg d = c;
    d.rope_linear = 0;
    char dir[512];
    fx_model m;
    if (rope_case(c, d, "llama-rope-linear", "linear rope_scaling", dir, sizeof dir, &m) != 0)
        return;
    fx_free(&m);

    c = base_cfg(FX_QWEN3, FX_BF16);
    c.rope_llama3 = 1;
    c.rs_factor = 8;
    c.rs_orig = 256;
    c.rs_low_freq = 1;
    c.rs_high_freq = 4;
    int ranges[3] = {0, 0, 0};
    for (int i = 0; i < c.head_dim / 2; i++) {
        double wl = 2 * M_PI * pow(c.theta, 2.0 * i / c.head_dim);
        ranges[wl > c.rs_orig / c.rs_low_freq ? 2 : wl < c.rs_orig / c.rs_high_freq ? 0 : 1]++;
    }
    CHECKF(ranges[0] && ranges[1] && ranges[2], "llama3 ranges %d %d %d", ranges[0], ranges[1], ranges[2]);
    d = c;
    d.rope_llama3 = 0;
    d.rope_linear = 1; /* every pair divided: differs from llama3 where pairs are kept or mixed */
    if (rope_case(c, d, "qwen3-rope-llama3", "llama3 rope_scaling (against linear)", dir, sizeof dir, &m) != 0)
        return;
    fx_free(&m);
}

int main(void)
{
    RUN(math_accuracy);
    RUN(exp_same_bits);
    RUN(naive_llama_f32);
    RUN(naive_llama_aff4);
    RUN(naive_llama_tq4);
    RUN(naive_qwen3_bf16);
    RUN(naive_qwen3_f16);
    RUN(naive_qwen3_aff8);
    RUN(naive_qwen3_tq3);
    RUN(naive_llama_tq2);
    RUN(naive_moe_bf16_hf_shared);
    RUN(naive_moe_tq3);
    RUN(naive_moe_tq3_hf_own);
    RUN(naive_moe_aff4_nonorm);
    RUN(naive_converted_affine);
    RUN(threads_identical);
    RUN(errors);
    RUN(naive_rope_theta);
    RUN(naive_rope_scaling);
    TEST_MAIN_END();
}
