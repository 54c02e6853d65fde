/* Test fixtures for the runtime tests (rt_fixture.h): tiny llama / qwen3 / qwen3_moe models
 * written from a seed with this file's own safetensors writer, in f32, bf16, f16, MLX affine
 * (4/8 bit) or TurboQuant form, together with the same weights as dense f64 matrices
 * (dequantized up front, rotation undone by the O(n²) Hadamard definition) for a naive
 * reference forward pass written independently of runtime/. */
#include "rt_fixture.h"
#include "check.h"
#include "layout/split/split.h"
#include "quant/convert/convert.h"
#include "runtime/runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- numbers */
uint64_t fx_rng;
double fx_uniform(void)
{
    fx_rng ^= fx_rng << 13;
    fx_rng ^= fx_rng >> 7;
    fx_rng ^= fx_rng << 17;
    return (double)(fx_rng >> 11) * (1.0 / 9007199254740992.0);
}

void fx_sequence(int vocab, uint64_t seed, int n, int32_t *seq)
{
    fx_rng = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; i++)
        seq[i] = (int32_t)(fx_uniform() * vocab) % vocab;
}
static double fx_gauss(void)
{
    return (fx_uniform() + fx_uniform() + fx_uniform() + fx_uniform() - 2.0) * 1.7320508;
}

static uint16_t fx_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
static double fx_bf16_d(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* f16 for moderate normal values (fixture values stay in [2^-14, 60000]) */
static uint16_t fx_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int ex = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffff;
    if (f == 0.0f)
        return (uint16_t)sign;
    if (ex <= 0 || ex >= 31)
        abort();
    uint32_t h = ((uint32_t)ex << 10) | (man >> 13);
    uint32_t rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}
static double fx_f16_d(uint16_t h)
{
    int ex = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v = ex == 0 ? ldexp(man, -24) : ldexp(1024 + man, ex - 25);
    return (h & 0x8000) ? -v : v;
}

/* ---------------------------------------------------------------- safetensors writer */
typedef struct fx_tensor {
    char name[160];
    const char *dtype;
    int ndim;
    uint64_t shape[4];
    unsigned char *data;
    uint64_t nbytes;
} fx_tensor;

typedef struct fx_file {
    fx_tensor *t;
    int n, cap;
} fx_file;

static void *fx_add_shape(fx_file *f, const char *name, const char *dtype, int ndim, const uint64_t *shape,
                          uint64_t elsize)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->t = realloc(f->t, (size_t)f->cap * sizeof *f->t);
    }
    fx_tensor *t = &f->t[f->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= t->shape[d] = shape[d];
    t->nbytes = n * elsize;
    t->data = calloc(1, t->nbytes ? t->nbytes : 1);
    return t->data;
}

static void *fx_add(fx_file *f, const char *name, const char *dtype, int ndim, uint64_t d0, uint64_t d1,
                    uint64_t d2, uint64_t elsize)
{
    uint64_t shape[3] = {d0, d1, d2};
    return fx_add_shape(f, name, dtype, ndim, shape, elsize);
}

/* rows x cols matrix, or E of them stacked (E, rows, cols) when E > 0. */
static void *fx_add_mat(fx_file *f, const char *name, const char *dtype, int E, int rows, uint64_t cols,
                               uint64_t elsize)
{
    return E ? fx_add(f, name, dtype, 3, (uint64_t)E, (uint64_t)rows, cols, elsize)
             : fx_add(f, name, dtype, 2, (uint64_t)rows, cols, 0, elsize);
}

static int fx_cmp(const void *a, const void *b)
{
    return strcmp(((const fx_tensor *)a)->name, ((const fx_tensor *)b)->name);
}

static int fx_write(fx_file *f, const char *path)
{
    qsort(f->t, (size_t)f->n, sizeof *f->t, fx_cmp);
    size_t cap = 256 + (size_t)f->n * 256, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{");
    uint64_t off = 0;
    for (int i = 0; i < f->n; i++) {
        fx_tensor *t = &f->t[i];
        len += (size_t)snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                                t->name, t->dtype);
        for (int d = 0; d < t->ndim; d++)
            len += (size_t)snprintf(h + len, cap - len, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + t->nbytes));
        off += t->nbytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8)
        h[len++] = ' ';
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    uint64_t n = len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(n >> (8 * i));
    fwrite(le, 1, 8, fp);
    fwrite(h, 1, len, fp);
    for (int i = 0; i < f->n; i++) {
        fwrite(f->t[i].data, 1, f->t[i].nbytes, fp);
        free(f->t[i].data);
    }
    free(h);
    free(f->t);
    f->t = NULL;
    f->n = f->cap = 0;
    return fclose(fp);
}

/* ---------------------------------------------------------------- matrices */
static dmat fx_dmat(int rows, int cols)
{
    dmat m = {rows, cols, calloc((size_t)rows * (size_t)cols, sizeof(double))};
    return m;
}

/* Block transform T = (H_m ⊗ H_N) / sqrt(m·N) by definition (docs/quantization.md, Hadamard
 * blocks): the block is the largest m·2^k dividing n with m in {1, 12} here (fixture dims
 * never need 20 or 28). */
static const char *fx_h12[12] = {
    "+-++++++++++", "--+-+-+-+-+-", "+++-++----++", "+---+--+-++-", "+++++-++----", "+-+---+--+-+",
    "++--+++-++--", "+--++---+--+", "++----+++-++", "+--+-++---+-", "++++----+++-", "+-+--+-++---"};

static int fx_block(int n, int *m)
{
    int best = 0;
    for (int mm = 1; mm <= 12; mm += 11)
        for (int N = 1; mm * N <= n; N *= 2)
            if (n % (mm * N) == 0 && mm * N > best) {
                best = mm * N;
                *m = mm;
            }
    return best;
}

/* T[row][col] within one block of length b = m·N */
static double fx_T(int b, int m, int row, int col)
{
    int N = b / m;
    int r = row / N, i = row % N, c = col / N, j = col % N;
    double hm = m == 1 ? 1.0 : (fx_h12[r][c] == '+' ? 1.0 : -1.0);
    double hn = __builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0;
    return hm * hn / sqrt((double)b);
}

/* Write a matrix (rows x cols, values from the generator) in `kind` under NAME.* at expert
 * slot ex of E (E = 0: plain 2-D tensor). Returns the dequantized dense f64 matrix. Shared
 * TQ codebook/signs are created when ex == 0. */
typedef struct fx_slot {
    void *w, *s, *b, *cb, *sg;
} fx_slot;

/* The TurboQuant codebook written next is the usual one times this (fx_experts, own_codebooks). */
static double fx_cb_scale = 1.0;

static const float fx_cb3[8] = {-2.1519453f, -1.3439091f, -0.7560052f, -0.2450941f,
                                0.2450941f,  0.7560052f,  1.3439091f,  2.1519453f};

/* rows x cols values of the recipe written at base in float kind k (F32/BF16/F16), returned
 * as the f64 values the file holds. */
static dmat fx_fill_float(unsigned char *base, int k, int rows, int cols)
{
    dmat m = fx_dmat(rows, cols);
    double sd = 1.0 / sqrt((double)cols);
    for (int i = 0; i < rows * cols; i++) {
        float v = (float)(fx_gauss() * sd);
        if (fx_uniform() < 0.003)
            v *= 12.0f; /* a few heavy-tailed entries */
        if (k == FX_F32) {
            memcpy(base + 4 * (size_t)i, &v, 4);
            m.w[i] = v;
        } else if (k == FX_BF16) {
            uint16_t h = fx_bf16(v);
            memcpy(base + 2 * (size_t)i, &h, 2);
            m.w[i] = fx_bf16_d(h);
        } else {
            if (fabsf(v) < 1e-4f)
                v = 1e-4f;
            uint16_t h = fx_f16(v);
            memcpy(base + 2 * (size_t)i, &h, 2);
            m.w[i] = fx_f16_d(h);
        }
    }
    return m;
}

static const char *fx_float_dtype(int k)
{
    return k == FX_F32 ? "F32" : k == FX_BF16 ? "BF16" : "F16";
}

static dmat fx_matrix(fx_file *f, const char *name, int kind, int rows, int cols, int E, int ex, fx_slot *sl,
                      int force_float)
{
    double sd = 1.0 / sqrt((double)cols);
    char nm[200];
    int k = force_float ? FX_F32 : kind;
    if (k == FX_F32 || k == FX_BF16 || k == FX_F16) {
        uint64_t es = k == FX_F32 ? 4 : 2;
        if (ex == 0 || !E) {
            snprintf(nm, sizeof nm, "%s.weight", name);
            sl->w = fx_add_mat(f, nm, fx_float_dtype(k), E, rows, (uint64_t)cols, es);
        }
        return fx_fill_float((unsigned char *)sl->w + (uint64_t)ex * (uint64_t)rows * (uint64_t)cols * es, k, rows, cols);
    }
    dmat m = fx_dmat(rows, cols);
    if (k == FX_AFF4 || k == FX_AFF8) {
        int bits = k == FX_AFF4 ? 4 : 8, group = 32, epw = 32 / bits, wpr = cols / epw, ng = cols / group;
        if (ex == 0 || !E) {
            snprintf(nm, sizeof nm, "%s.weight", name);
            sl->w = fx_add_mat(f, nm, "U32", E, rows, (uint64_t)wpr, 4);
            snprintf(nm, sizeof nm, "%s.scales", name);
            sl->s = fx_add_mat(f, nm, "F16", E, rows, (uint64_t)ng, 2);
            snprintf(nm, sizeof nm, "%s.biases", name);
            sl->b = fx_add_mat(f, nm, "BF16", E, rows, (uint64_t)ng, 2);
        }
        uint32_t *w = (uint32_t *)sl->w + (size_t)ex * (size_t)rows * (size_t)wpr;
        uint16_t *s = (uint16_t *)sl->s + (size_t)ex * (size_t)rows * (size_t)ng;
        uint16_t *b = (uint16_t *)sl->b + (size_t)ex * (size_t)rows * (size_t)ng;
        int qmax = (1 << bits) - 1;
        for (int r = 0; r < rows; r++)
            for (int g = 0; g < ng; g++) {
                s[r * ng + g] = fx_f16((float)(sd * 3.0 / qmax * (0.5 + fx_uniform())));
                b[r * ng + g] = fx_bf16((float)(-sd * 1.5 * (0.5 + fx_uniform())));
            }
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < cols; j++) {
                uint32_t q = (uint32_t)(fx_uniform() * (qmax + 1));
                if (q > (uint32_t)qmax)
                    q = (uint32_t)qmax;
                w[r * wpr + j / epw] |= q << ((j % epw) * bits);
                int gi = r * ng + j / group;
                m.w[r * cols + j] = fx_f16_d(s[gi]) * q + fx_bf16_d(b[gi]);
            }
        return m;
    }
    /* TurboQuant */
    int bits = k == FX_TQ3 ? 3 : k == FX_TQ4 ? 4 : 2, group = 32, epw = 32 / bits, wpr = (cols + epw - 1) / epw, ng = cols / group;
    int ncb = 1 << bits;
    if (ex == 0 || !E) {
        snprintf(nm, sizeof nm, "%s.weight", name);
        sl->w = fx_add_mat(f, nm, "U32", E, rows, (uint64_t)wpr, 4);
        snprintf(nm, sizeof nm, "%s.scales", name);
        sl->s = fx_add_mat(f, nm, "F16", E, rows, (uint64_t)ng, 2);
        snprintf(nm, sizeof nm, "%s.codebook", name);
        sl->cb = fx_add(f, nm, "F16", 1, (uint64_t)ncb, 0, 0, 2);
        for (int i = 0; i < ncb; i++)
            ((uint16_t *)sl->cb)[i] = fx_f16((float)(fx_cb_scale * (bits == 3   ? fx_cb3[i]
                                                                    : bits == 4 ? (i - 7.5) * 0.33
                                                                                : (i - 1.5) * 0.9)));
        snprintf(nm, sizeof nm, "%s.signs", name);
        sl->sg = fx_add(f, nm, "F16", 1, (uint64_t)cols, 0, 0, 2);
        for (int j = 0; j < cols; j++)
            ((uint16_t *)sl->sg)[j] = fx_f16(fx_uniform() < 0.5 ? -1.0f : 1.0f);
    }
    uint32_t *w = (uint32_t *)sl->w + (size_t)ex * (size_t)rows * (size_t)wpr;
    uint16_t *s = (uint16_t *)sl->s + (size_t)ex * (size_t)rows * (size_t)ng;
    double *rot = calloc((size_t)cols, sizeof(double));
    int hm = 1, blk = fx_block(cols, &hm);
    for (int r = 0; r < rows; r++) {
        for (int g = 0; g < ng; g++)
            s[r * ng + g] = fx_f16((float)(sd * (0.6 + 0.8 * fx_uniform())));
        for (int j = 0; j < cols; j++) {
            uint32_t q = (uint32_t)(fx_uniform() * ncb);
            if (q >= (uint32_t)ncb)
                q = (uint32_t)ncb - 1;
            w[r * wpr + j / epw] |= q << ((j % epw) * bits);
            rot[j] = fx_f16_d(((uint16_t *)sl->cb)[q]) * fx_f16_d(s[r * ng + j / group]);
        }
        /* w_rot = T (signs ⊙ w) per block, T orthogonal: w = signs ⊙ (Tᵀ w_rot) */
        for (int c0 = 0; c0 < cols; c0++) {
            int b0 = c0 / blk * blk;
            double acc = 0;
            for (int j = b0; j < b0 + blk; j++)
                acc += fx_T(blk, hm, j - b0, c0 - b0) * rot[j];
            m.w[r * cols + c0] = fx_f16_d(((uint16_t *)sl->sg)[c0]) * acc;
        }
    }
    free(rot);
    return m;
}

/* A float vector: mean + sd * gauss, stored F32 (dtype "F32") under name; its f64 values. */
static double *fx_vec(fx_file *f, const char *name, int n, double mean, double sd)
{
    double *v = malloc((size_t)n * sizeof *v);
    float *d = fx_add(f, name, "F32", 1, (uint64_t)n, 0, 0, 4);
    for (int i = 0; i < n; i++) {
        d[i] = (float)(mean + sd * fx_gauss());
        v[i] = d[i];
    }
    return v;
}

static double *fx_norm(fx_file *f, const char *name, int n)
{
    return fx_vec(f, name, n, 1.0, 0.2);
}

static int fx_write_config(const fx_cfg *c, const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    /* a llama with a window is Mistral (model_type mistral, sliding_window on every layer) */
    const char *mt = c->arch == FX_LLAMA ? (c->window ? "mistral" : "llama") : c->arch == FX_QWEN3 ? "qwen3" : "qwen3_moe";
    fprintf(fp, "{\"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, "
                "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
                "\"head_dim\": %d, \"vocab_size\": %d, \"rope_theta\": %g, \"rms_norm_eps\": %g, "
                "\"tie_word_embeddings\": %s",
            mt, c->hidden, c->inter, c->layers, c->heads, c->kv_heads, c->head_dim, c->vocab, c->theta, c->eps,
            c->tied ? "true" : "false");
    if (c->arch == FX_LLAMA && c->window)
        fprintf(fp, ", \"sliding_window\": %d", c->window);
    if (c->rope_linear)
        fprintf(fp, ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": %g}", c->rs_factor);
    if (c->rope_llama3)
        fprintf(fp, ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %g, \"low_freq_factor\": %g, "
                    "\"high_freq_factor\": %g, \"original_max_position_embeddings\": %g}",
                c->rs_factor, c->rs_low_freq, c->rs_high_freq, c->rs_orig);
    if (c->arch == FX_QWEN3_MOE)
        fprintf(fp, ", \"num_experts\": %d, \"num_experts_per_tok\": %d, \"moe_intermediate_size\": %d, "
                    "\"norm_topk_prob\": %s, \"decoder_sparse_step\": 1, \"mlp_only_layers\": []",
                c->experts, c->top_k, c->moe_inter, c->norm_topk ? "true" : "false");
    if (c->arch == FX_QWEN3_MOE && c->shared_inter)
        fprintf(fp, ", \"shared_expert_intermediate_size\": %d", c->shared_inter);
    if (c->kind == FX_AFF4 || c->kind == FX_AFF8)
        fprintf(fp, ", \"quantization\": {\"group_size\": 32, \"bits\": %d}", c->kind == FX_AFF4 ? 4 : 8);
    if (c->kind == FX_TQ3 || c->kind == FX_TQ4 || c->kind == FX_TQ2)
        fprintf(fp, ", \"quantization\": {\"mode\": \"turboquant\", \"group_size\": 32, \"bits\": %d}",
                c->kind == FX_TQ3 ? 3 : c->kind == FX_TQ4 ? 4 : 2);
    fprintf(fp, "}\n");
    return fclose(fp);
}

/* ---------------------------------------------------------------- the other families */
static int fx_is_aff(int k) { return k == FX_AFF4 || k == FX_AFF8; }
static int fx_is_tq(int k) { return k == FX_TQ3 || k == FX_TQ4 || k == FX_TQ2; }

/* A norm of a model whose HF form stores norms as offsets from 1 (qwen3_next): the effective
 * weight 1 + 0.2 g is stored minus 1 (HF) or as is (MLX). Returns the effective weights. */
static double *fx_norm_maybe_offset(fx_file *f, const char *name, int n, int offset)
{
    if (!offset)
        return fx_norm(f, name, n);
    double *v = malloc((size_t)n * sizeof *v);
    float *d = fx_add(f, name, "F32", 1, (uint64_t)n, 0, 0, 4);
    for (int i = 0; i < n; i++) {
        d[i] = (float)(0.2 * fx_gauss());
        v[i] = (double)d[i] + 1.0;
    }
    return v;
}

/* [E][n] biases of stacked experts, one tensor [E, n]. */
static double **fx_vec_stacked(fx_file *f, const char *name, int E, int n)
{
    double **v = calloc((size_t)E, sizeof *v);
    float *d = fx_add(f, name, "F32", 2, (uint64_t)E, (uint64_t)n, 0, 4);
    for (int x = 0; x < E; x++) {
        v[x] = malloc((size_t)n * sizeof **v);
        for (int i = 0; i < n; i++) {
            d[x * n + i] = (float)(0.05 * fx_gauss());
            v[x][i] = d[x * n + i];
        }
    }
    return v;
}

static const char *fx_model_type(int arch)
{
    static const char *const n[] = {"llama", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "gpt_oss", "qwen3_next",
                                    "qwen3_5_moe", "qwen2", "qwen2_moe", "gemma4"};
    return n[arch];
}

/* config.json of the families after qwen3_moe, with the keys their released configs use. */
static int fx_write_family_config(const fx_cfg *c, const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    int wrapped = c->arch == FX_QWEN3_5_MOE;
    fprintf(fp, "{\"model_type\": \"%s\", \"tie_word_embeddings\": %s", c->dense35 ? "qwen3_5" : fx_model_type(c->arch),
            c->tied ? "true" : "false");
    if (wrapped)
        fprintf(fp, ", \"text_config\": {\"model_type\": \"%s\"", c->dense35 ? "qwen3_5_text" : "qwen3_5_moe_text");
    fprintf(fp, ", \"hidden_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
                "\"num_key_value_heads\": %d, \"vocab_size\": %d, \"rms_norm_eps\": %g, \"max_position_embeddings\": 4096",
            c->hidden, c->layers, c->heads, c->kv_heads, c->vocab, c->eps);
    int qwen2 = c->arch == FX_QWEN2 || c->arch == FX_QWEN2_MOE;
    if (c->arch != FX_DEEPSEEK && !qwen2) /* Qwen2 configs have none: hidden_size / heads */
        fprintf(fp, ", \"head_dim\": %d", c->head_dim);
    if (c->arch != FX_QWEN3_5_MOE)
        fprintf(fp, ", \"rope_theta\": %g", c->theta);
    if (c->inter)
        fprintf(fp, ", \"intermediate_size\": %d", c->inter);
    if (c->yarn)
        fprintf(fp, ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": %g, \"original_max_position_embeddings\": %g, "
                    "\"beta_fast\": %g, \"beta_slow\": %g, \"mscale\": %g, \"mscale_all_dim\": %g, \"truncate\": %s}",
                c->rs_factor, c->rs_orig, c->rs_beta_fast, c->rs_beta_slow, c->rs_mscale, c->rs_mscale_all,
                c->rs_truncate ? "true" : "false");
    else
        fprintf(fp, ", \"rope_scaling\": null");
    switch (c->arch) {
    case FX_MIXTRAL:
        fprintf(fp, ", \"num_local_experts\": %d, \"num_experts_per_tok\": %d", c->experts, c->top_k);
        if (c->window)
            fprintf(fp, ", \"sliding_window\": %d", c->window);
        else
            fprintf(fp, ", \"sliding_window\": null");
        break;
    case FX_DEEPSEEK:
        fprintf(fp, ", \"kv_lora_rank\": %d, \"qk_nope_head_dim\": %d, \"qk_rope_head_dim\": %d, \"v_head_dim\": %d, "
                    "\"n_routed_experts\": %d, \"num_experts_per_tok\": %d, \"moe_intermediate_size\": %d, "
                    "\"n_shared_experts\": %d, \"first_k_dense_replace\": %d, \"moe_layer_freq\": 1, \"n_group\": %d, "
                    "\"topk_group\": %d, \"norm_topk_prob\": %s, \"routed_scaling_factor\": %g, \"topk_method\": \"noaux_tc\", "
                    "\"scoring_func\": \"sigmoid\"",
                c->kv_lora, c->qk_nope, c->qk_rope, c->v_head, c->experts, c->top_k, c->moe_inter, c->n_shared,
                c->first_dense, c->n_group, c->topk_group, c->norm_topk ? "true" : "false", c->route_scale);
        if (c->q_lora)
            fprintf(fp, ", \"q_lora_rank\": %d", c->q_lora);
        else
            fprintf(fp, ", \"q_lora_rank\": null");
        break;
    case FX_GPT_OSS:
        fprintf(fp, ", \"num_local_experts\": %d, \"num_experts_per_tok\": %d, \"sliding_window\": %d, "
                    "\"swiglu_limit\": %g, \"attention_bias\": true, \"layer_types\": [",
                c->experts, c->top_k, c->window, c->swiglu_limit);
        for (int l = 0; l < c->layers; l++)
            fprintf(fp, "%s\"%s\"", l ? ", " : "", l % 2 ? "full_attention" : "sliding_attention");
        fprintf(fp, "]");
        break;
    case FX_QWEN2:
    case FX_QWEN2_MOE: /* the keys of Qwen2.5-0.5B's / Qwen1.5-MoE-A2.7B's config.json */
        fprintf(fp, ", \"use_sliding_window\": %s, \"sliding_window\": %d, \"max_window_layers\": %d",
                c->use_sliding ? "true" : "false", c->window, c->max_window_layers);
        if (c->arch == FX_QWEN2_MOE) {
            fprintf(fp, ", \"num_experts\": %d, \"num_experts_per_tok\": %d, \"moe_intermediate_size\": %d, "
                        "\"shared_expert_intermediate_size\": %d, \"norm_topk_prob\": %s, \"decoder_sparse_step\": %d",
                    c->experts, c->top_k, c->moe_inter, c->shared_inter, c->norm_topk ? "true" : "false", c->sparse_step);
            if (c->mlp_only)
                fprintf(fp, ", \"mlp_only_layers\": [%d]", c->mlp_only - 1);
        }
        break;
    default: /* qwen3_next, qwen3_5_moe (qwen3_5 with dense35: no MoE keys) */
        fprintf(fp, ", \"linear_num_key_heads\": %d, \"linear_num_value_heads\": %d, \"linear_key_head_dim\": %d, "
                    "\"linear_value_head_dim\": %d, \"linear_conv_kernel_dim\": %d",
                c->lk_heads, c->lv_heads, c->lk_dim, c->lv_dim, c->conv_k);
        if (!c->dense35)
            fprintf(fp, ", \"num_experts\": %d, \"num_experts_per_tok\": %d, \"moe_intermediate_size\": %d, "
                        "\"shared_expert_intermediate_size\": %d, \"norm_topk_prob\": %s, \"decoder_sparse_step\": 1",
                    c->experts, c->top_k, c->moe_inter, c->shared_inter, c->norm_topk ? "true" : "false");
        if (c->dense35)
            ;
        else if (c->mlp_only)
            fprintf(fp, ", \"mlp_only_layers\": [%d]", c->mlp_only - 1);
        else
            fprintf(fp, ", \"mlp_only_layers\": []");
        if (c->layer_types) {
            fprintf(fp, ", \"layer_types\": [");
            for (int l = 0; l < c->layers; l++)
                fprintf(fp, "%s\"%s\"", l ? ", " : "", (l + 1) % c->full_interval ? "linear_attention" : "full_attention");
            fprintf(fp, "]");
        } else {
            fprintf(fp, ", \"full_attention_interval\": %d", c->full_interval);
        }
        if (wrapped)
            fprintf(fp, ", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": %g, \"partial_rotary_factor\": %g, "
                        "\"mrope_section\": [1, 1, 2], \"mrope_interleaved\": true}}",
                    c->theta, c->prf);
        else
            fprintf(fp, ", \"partial_rotary_factor\": %g", c->prf);
        break;
    }
    if (fx_is_aff(c->kind))
        fprintf(fp, ", \"quantization\": {\"group_size\": 32, \"bits\": %d}", c->kind == FX_AFF4 ? 4 : 8);
    if (fx_is_tq(c->kind))
        fprintf(fp, ", \"quantization\": {\"mode\": \"turboquant\", \"group_size\": 32, \"bits\": %d}",
                c->kind == FX_TQ3 ? 3 : c->kind == FX_TQ4 ? 4 : 2);
    fprintf(fp, "}\n");
    return fclose(fp);
}

/* FP4 E2M1 by its definition: sign, 2 exponent bits, 1 mantissa bit, no infinities. */
static double fx_fp4(unsigned nib)
{
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (nib & 8 ? -1 : 1) * mag[nib & 7];
}

/* gpt-oss's released expert tensors: <exp>.{gate_up,down}_proj_{blocks,scales,bias}, MXFP4
 * (32 values per 16-byte block, value 2j in the low nibble of byte j, one E8M0 scale
 * 2^(s-127) per block); gate_up's row 2i is gate row i, row 2i+1 up row i (biases too). */
static void fx_mxfp4_experts(fx_file *f, const fx_cfg *c, fx_layer *L, const char *P)
{
    int E = c->experts, I = c->moe_inter, H = c->hidden;
    const char *nm[2] = {"gate_up_proj", "down_proj"};
    L->egb = calloc((size_t)E, sizeof *L->egb);
    L->eub = calloc((size_t)E, sizeof *L->eub);
    L->edb = calloc((size_t)E, sizeof *L->edb);
    for (int p = 0; p < 2; p++) {
        int rows = p ? H : 2 * I, cols = p ? I : H, nb = cols / 32;
        char b[300];
        snprintf(b, sizeof b, "%smlp.experts.%s_blocks", P, nm[p]);
        uint64_t bshape[4] = {(uint64_t)E, (uint64_t)rows, (uint64_t)nb, 16};
        uint8_t *blk = fx_add_shape(f, b, "U8", 4, bshape, 1);
        snprintf(b, sizeof b, "%smlp.experts.%s_scales", P, nm[p]);
        uint8_t *sc = fx_add(f, b, "U8", 3, (uint64_t)E, (uint64_t)rows, (uint64_t)nb, 1);
        snprintf(b, sizeof b, "%smlp.experts.%s_bias", P, nm[p]);
        float *bias = fx_add(f, b, "F32", 2, (uint64_t)E, (uint64_t)rows, 0, 4);
        for (int x = 0; x < E; x++) {
            dmat m = fx_dmat(rows, cols);
            double *bv = malloc((size_t)rows * sizeof *bv);
            for (int r = 0; r < rows; r++) {
                bias[(size_t)x * rows + r] = (float)(0.05 * fx_gauss());
                bv[r] = bias[(size_t)x * rows + r];
                for (int g = 0; g < nb; g++) {
                    uint8_t e = (uint8_t)(122 + (fx_uniform() < 0.5));
                    sc[((size_t)x * rows + r) * nb + g] = e;
                    for (int j = 0; j < 16; j++) {
                        uint8_t byte = (uint8_t)(fx_uniform() * 256);
                        blk[(((size_t)x * rows + r) * nb + g) * 16 + j] = byte;
                        m.w[(size_t)r * cols + g * 32 + 2 * j] = fx_fp4(byte & 15) * ldexp(1.0, e - 127);
                        m.w[(size_t)r * cols + g * 32 + 2 * j + 1] = fx_fp4(byte >> 4) * ldexp(1.0, e - 127);
                    }
                }
            }
            if (p) {
                L->ed[x] = m;
                L->edb[x] = bv;
                continue;
            }
            L->eg[x] = fx_dmat(I, H);
            L->eu[x] = fx_dmat(I, H);
            L->egb[x] = malloc((size_t)I * sizeof(double));
            L->eub[x] = malloc((size_t)I * sizeof(double));
            for (int i = 0; i < I; i++) {
                memcpy(L->eg[x].w + (size_t)i * H, m.w + (size_t)(2 * i) * H, (size_t)H * sizeof(double));
                memcpy(L->eu[x].w + (size_t)i * H, m.w + (size_t)(2 * i + 1) * H, (size_t)H * sizeof(double));
                L->egb[x][i] = bv[2 * i];
                L->eub[x][i] = bv[2 * i + 1];
            }
            free(m.w);
            free(bv);
        }
    }
}

/* gpt-oss in float as transformers saves it (hf_expert_names 2), restated from transformers
 * src/transformers/models/gpt_oss/modeling_gpt_oss.py, GptOssExperts: __init__ makes
 * gate_up_proj [E, hidden, 2 * expert_dim], gate_up_proj_bias [E, 2 * expert_dim], down_proj
 * [E, expert_dim, hidden], down_proj_bias [E, hidden]; forward computes gate_up = x @
 * gate_up_proj[e] + gate_up_proj_bias[e], gate = gate_up[..., ::2], up = gate_up[..., 1::2],
 * then ((up + 1) * glu) @ down_proj[e] + down_proj_bias[e]. So the oracle's gate row i is
 * column 2i of gate_up_proj[e], up row i column 2i + 1, and down row h column h of
 * down_proj[e] (its entry [i][h]). */
static void fx_xw_experts(fx_file *f, const fx_cfg *c, fx_layer *L, const char *P)
{
    int E = c->experts, I = c->moe_inter, H = c->hidden, k = c->kind;
    size_t es = k == FX_F32 ? 4 : 2;
    char b[300];
    snprintf(b, sizeof b, "%smlp.experts.gate_up_proj", P);
    unsigned char *gu = fx_add(f, b, fx_float_dtype(k), 3, (uint64_t)E, (uint64_t)H, 2 * (uint64_t)I, es);
    snprintf(b, sizeof b, "%smlp.experts.down_proj", P);
    unsigned char *dn = fx_add(f, b, fx_float_dtype(k), 3, (uint64_t)E, (uint64_t)I, (uint64_t)H, es);
    snprintf(b, sizeof b, "%smlp.experts.gate_up_proj_bias", P);
    float *gub = fx_add(f, b, "F32", 2, (uint64_t)E, 2 * (uint64_t)I, 0, 4);
    snprintf(b, sizeof b, "%smlp.experts.down_proj_bias", P);
    float *dnb = fx_add(f, b, "F32", 2, (uint64_t)E, (uint64_t)H, 0, 4);
    L->eg = calloc((size_t)E, sizeof(dmat));
    L->eu = calloc((size_t)E, sizeof(dmat));
    L->ed = calloc((size_t)E, sizeof(dmat));
    L->egb = calloc((size_t)E, sizeof *L->egb);
    L->eub = calloc((size_t)E, sizeof *L->eub);
    L->edb = calloc((size_t)E, sizeof *L->edb);
    unsigned char *tmp = malloc((size_t)2 * I * H * es);
    for (int x = 0; x < E; x++) {
        /* values drawn as the oracle's [out, in] matrices, then stored where x @ W reads them */
        L->eg[x] = fx_fill_float(tmp, k, I, H);
        L->eu[x] = fx_fill_float(tmp + (size_t)I * H * es, k, I, H);
        for (int i = 0; i < I; i++)
            for (int h = 0; h < H; h++) {
                unsigned char *row = gu + ((size_t)x * H + h) * 2 * I * es;
                memcpy(row + (size_t)(2 * i) * es, tmp + ((size_t)i * H + h) * es, es);
                memcpy(row + (size_t)(2 * i + 1) * es, tmp + ((size_t)(I + i) * H + h) * es, es);
            }
        L->ed[x] = fx_fill_float(tmp, k, H, I);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < I; i++)
                memcpy(dn + (((size_t)x * I + i) * H + h) * es, tmp + ((size_t)h * I + i) * es, es);
        L->egb[x] = malloc((size_t)I * sizeof(double));
        L->eub[x] = malloc((size_t)I * sizeof(double));
        L->edb[x] = malloc((size_t)H * sizeof(double));
        for (int i = 0; i < I; i++) {
            gub[(size_t)x * 2 * I + 2 * i] = (float)(0.05 * fx_gauss());
            gub[(size_t)x * 2 * I + 2 * i + 1] = (float)(0.05 * fx_gauss());
            L->egb[x][i] = gub[(size_t)x * 2 * I + 2 * i];
            L->eub[x][i] = gub[(size_t)x * 2 * I + 2 * i + 1];
        }
        for (int h = 0; h < H; h++) {
            dnb[(size_t)x * H + h] = (float)(0.05 * fx_gauss());
            L->edb[x][h] = dnb[(size_t)x * H + h];
        }
    }
    free(tmp);
}

/* Routed experts of layer L (prefix P = "<root>layers.L."): HF per-expert names (PROJ[k]
 * under EXP.<e>.), HF fused (EXP.gate_up_proj / EXP.down_proj, float kinds) or MLX stacked
 * (STK.<gate|up|down>_proj). */
static void fx_experts(fx_file *f, const fx_cfg *c, fx_layer *L, const char *P, const char *exp, const char *stk,
                       const char *const proj[3], int fused, int bias)
{
    int E = c->experts, K = c->kind, I = c->moe_inter, H = c->hidden;
    char b[300];
    L->eg = calloc((size_t)E, sizeof(dmat));
    L->eu = calloc((size_t)E, sizeof(dmat));
    L->ed = calloc((size_t)E, sizeof(dmat));
    if (fused) { /* [E, 2I, H]: rows 0..I-1 gate, I..2I-1 up; [E, H, I] down */
        int k = K == FX_F32 || K == FX_BF16 || K == FX_F16 ? K : FX_BF16;
        uint64_t es = k == FX_F32 ? 4 : 2;
        snprintf(b, sizeof b, "%s%s.gate_up_proj", P, exp);
        unsigned char *gu = fx_add(f, b, fx_float_dtype(k), 3, (uint64_t)E, 2 * (uint64_t)I, (uint64_t)H, es);
        snprintf(b, sizeof b, "%s%s.down_proj", P, exp);
        unsigned char *dn = fx_add(f, b, fx_float_dtype(k), 3, (uint64_t)E, (uint64_t)H, (uint64_t)I, es);
        for (int x = 0; x < E; x++) {
            L->eg[x] = fx_fill_float(gu + (size_t)x * 2 * I * H * es, k, I, H);
            L->eu[x] = fx_fill_float(gu + ((size_t)x * 2 * I + I) * H * es, k, I, H);
            L->ed[x] = fx_fill_float(dn + (size_t)x * H * I * es, k, H, I);
        }
        return;
    }
    if (c->arch == FX_GPT_OSS && c->hf_expert_names == 2) { /* transformers' float layout, x @ W */
        free(L->eg);
        free(L->eu);
        free(L->ed);
        fx_xw_experts(f, c, L, P);
        return;
    }
    if (c->arch == FX_GPT_OSS && c->hf_expert_names) { /* as released: MXFP4, gate/up rows interleaved */
        fx_mxfp4_experts(f, c, L, P);
        return;
    }
    fx_slot sl = {0}, sg = {0}, su = {0}, sdn = {0};
    for (int x = 0; x < E; x++) {
        if (c->hf_expert_names) {
            fx_cb_scale = c->own_codebooks ? 1.0 + x / 16.0 : 1.0;
            snprintf(b, sizeof b, "%s%s.%d.%s", P, exp, x, proj[0]);
            L->eg[x] = fx_matrix(f, b, K, I, H, 0, 0, &sl, 0);
            snprintf(b, sizeof b, "%s%s.%d.%s", P, exp, x, proj[1]);
            L->eu[x] = fx_matrix(f, b, K, I, H, 0, 0, &sl, 0);
            snprintf(b, sizeof b, "%s%s.%d.%s", P, exp, x, proj[2]);
            L->ed[x] = fx_matrix(f, b, K, H, I, 0, 0, &sl, 0);
            fx_cb_scale = 1.0;
        } else {
            snprintf(b, sizeof b, "%s%s.gate_proj", P, stk);
            L->eg[x] = fx_matrix(f, b, K, I, H, E, x, &sg, 0);
            snprintf(b, sizeof b, "%s%s.up_proj", P, stk);
            L->eu[x] = fx_matrix(f, b, K, I, H, E, x, &su, 0);
            snprintf(b, sizeof b, "%s%s.down_proj", P, stk);
            L->ed[x] = fx_matrix(f, b, K, H, I, E, x, &sdn, 0);
        }
    }
    if (bias) {
        snprintf(b, sizeof b, "%s%s.gate_proj.bias", P, stk);
        L->egb = fx_vec_stacked(f, b, E, I);
        snprintf(b, sizeof b, "%s%s.up_proj.bias", P, stk);
        L->eub = fx_vec_stacked(f, b, E, I);
        snprintf(b, sizeof b, "%s%s.down_proj.bias", P, stk);
        L->edb = fx_vec_stacked(f, b, E, H);
    }
}

static int fx_generate_family(const fx_cfg *c, const char *dir, fx_model *m)
{
    if (fx_write_family_config(c, dir) != 0)
        return -1;
    fx_file f = {0};
    fx_slot sl;
    memset(&sl, 0, sizeof sl);
    int K = c->kind, aff = fx_is_aff(K), tq = fx_is_tq(K), H = c->hidden;
    int hybrid = c->arch == FX_QWEN3_NEXT || c->arch == FX_QWEN3_5_MOE;
    /* Norms stored as offsets from 1 and conv1d [C, 1, K] go together: the HF form, and the
     * MLX form of qwen3_5 (mlx-lm's sanitize adds the 1 at load); the MLX form of qwen3_next
     * stores 1 + w and [C, K, 1]. */
    int offsets = hybrid && (c->hf_expert_names || c->arch == FX_QWEN3_5_MOE);
    /* roots: HF multimodal "model.language_model." + "lm_head", MLX "language_model.model." */
    const char *root = "model.", *lm = "lm_head";
    if (c->arch == FX_QWEN3_5_MOE) {
        root = c->hf_expert_names ? "model.language_model." : "language_model.model.";
        lm = c->hf_expert_names ? "lm_head" : "language_model.lm_head";
    }
    char n[300], P[200];
#define NM(s) (snprintf(n, sizeof n, "%s%s", P, s), n)
    snprintf(n, sizeof n, "%sembed_tokens", root);
    m->embed = fx_matrix(&f, n, aff ? K : K == FX_BF16 ? FX_BF16 : FX_F32, c->vocab, H, 0, 0, &sl, tq);
    m->lm = c->tied ? m->embed : fx_matrix(&f, lm, K, c->vocab, H, 0, 0, &sl, 0);
    snprintf(n, sizeof n, "%snorm.weight", root);
    m->norm = fx_norm_maybe_offset(&f, n, H, offsets);
    m->L = calloc((size_t)c->layers, sizeof *m->L);
    int hd = c->head_dim, qd = c->heads * hd, kd = c->kv_heads * hd;
    for (int l = 0; l < c->layers; l++) {
        fx_layer *L = &m->L[l];
        snprintf(P, sizeof P, "%slayers.%d.", root, l);
        L->in_norm = fx_norm_maybe_offset(&f, NM("input_layernorm.weight"), H, offsets);
        L->post_norm = fx_norm_maybe_offset(&f, NM("post_attention_layernorm.weight"), H, offsets);
        L->moe = 1;
        /* ---- mixer */
        if (c->arch == FX_DEEPSEEK) {
            int qh = c->qk_nope + c->qk_rope;
            if (c->q_lora) {
                L->qa = fx_matrix(&f, NM("self_attn.q_a_proj"), K, c->q_lora, H, 0, 0, &sl, 0);
                L->qa_norm = fx_norm(&f, NM("self_attn.q_a_layernorm.weight"), c->q_lora);
                L->qbm = fx_matrix(&f, NM("self_attn.q_b_proj"), K, c->heads * qh, c->q_lora, 0, 0, &sl, 0);
            } else {
                L->q = fx_matrix(&f, NM("self_attn.q_proj"), K, c->heads * qh, H, 0, 0, &sl, 0);
            }
            L->kva = fx_matrix(&f, NM("self_attn.kv_a_proj_with_mqa"), K, c->kv_lora + c->qk_rope, H, 0, 0, &sl, 0);
            L->kva_norm = fx_norm(&f, NM("self_attn.kv_a_layernorm.weight"), c->kv_lora);
            /* tq-convert keeps kv_b_proj float (mlx-lm reshapes it); MLX affine files quantize it */
            L->kvb = fx_matrix(&f, NM("self_attn.kv_b_proj"), K, c->heads * (c->qk_nope + c->v_head), c->kv_lora, 0, 0,
                               &sl, tq);
            L->o = fx_matrix(&f, NM("self_attn.o_proj"), K, H, c->heads * c->v_head, 0, 0, &sl, 0);
            L->moe = l >= c->first_dense;
        } else if (hybrid && (l + 1) % c->full_interval) {
            int Kd = c->lk_heads * c->lk_dim, Vd = c->lv_heads * c->lv_dim, C = 2 * Kd + Vd, nv = c->lv_heads;
            int rep = nv / c->lk_heads, blk = 2 * c->lk_dim + 2 * rep * c->lv_dim;
            L->linear = 1;
            /* small projections (fewer than 32 rows) stay float in TurboQuant files, as tq-convert leaves them */
            if (c->arch == FX_QWEN3_NEXT) {
                /* fused per key head: q [Dk], k [Dk], v [rep Dv], z [rep Dv]; b [rep], a [rep] */
                dmat qkvz = fx_matrix(&f, NM("linear_attn.in_proj_qkvz"), K, 2 * Kd + 2 * Vd, H, 0, 0, &sl, 0);
                dmat ba = fx_matrix(&f, NM("linear_attn.in_proj_ba"), K, 2 * nv, H, 0, 0, &sl, tq && 2 * nv < 32);
                L->pqkv = fx_dmat(C, H);
                L->pz = fx_dmat(Vd, H);
                L->pb = fx_dmat(nv, H);
                L->pa = fx_dmat(nv, H);
                for (int g = 0; g < c->lk_heads; g++) {
                    const double *src = qkvz.w + (size_t)g * blk * H;
                    size_t row = (size_t)H * sizeof(double);
                    memcpy(L->pqkv.w + (size_t)g * c->lk_dim * H, src, c->lk_dim * row);
                    memcpy(L->pqkv.w + ((size_t)Kd + g * c->lk_dim) * H, src + (size_t)c->lk_dim * H, c->lk_dim * row);
                    memcpy(L->pqkv.w + ((size_t)2 * Kd + g * rep * c->lv_dim) * H, src + (size_t)2 * c->lk_dim * H,
                           rep * c->lv_dim * row);
                    memcpy(L->pz.w + (size_t)g * rep * c->lv_dim * H, src + ((size_t)2 * c->lk_dim + rep * c->lv_dim) * H,
                           rep * c->lv_dim * row);
                    memcpy(L->pb.w + (size_t)g * rep * H, ba.w + (size_t)g * 2 * rep * H, rep * row);
                    memcpy(L->pa.w + (size_t)g * rep * H, ba.w + ((size_t)g * 2 * rep + rep) * H, rep * row);
                }
                free(qkvz.w);
                free(ba.w);
            } else {
                L->pqkv = fx_matrix(&f, NM("linear_attn.in_proj_qkv"), K, C, H, 0, 0, &sl, 0);
                L->pz = fx_matrix(&f, NM("linear_attn.in_proj_z"), K, Vd, H, 0, 0, &sl, 0);
                L->pb = fx_matrix(&f, NM("linear_attn.in_proj_b"), K, nv, H, 0, 0, &sl, tq && nv < 32);
                L->pa = fx_matrix(&f, NM("linear_attn.in_proj_a"), K, nv, H, 0, 0, &sl, tq && nv < 32);
            }
            /* conv1d: [C, 1, K] (HF) or [C, K, 1] (the MLX form of qwen3_next) */
            float *cw = offsets
                            ? fx_add(&f, NM("linear_attn.conv1d.weight"), "F32", 3, (uint64_t)C, 1, (uint64_t)c->conv_k, 4)
                            : fx_add(&f, NM("linear_attn.conv1d.weight"), "F32", 3, (uint64_t)C, (uint64_t)c->conv_k, 1, 4);
            L->conv = malloc((size_t)C * c->conv_k * sizeof(double));
            for (int i = 0; i < C * c->conv_k; i++) {
                cw[i] = (float)(0.5 * fx_gauss());
                L->conv[i] = cw[i];
            }
            L->A_log = fx_vec(&f, NM("linear_attn.A_log"), nv, 0.5, 0.5);
            L->dt_bias = fx_vec(&f, NM("linear_attn.dt_bias"), nv, 1.0, 0.3);
            L->gnorm = fx_norm(&f, NM("linear_attn.norm.weight"), c->lv_dim);
            L->o = fx_matrix(&f, NM("linear_attn.out_proj"), K, H, Vd, 0, 0, &sl, 0);
        } else {
            int gated = hybrid;
            L->q = fx_matrix(&f, NM("self_attn.q_proj"), K, gated ? 2 * qd : qd, H, 0, 0, &sl, 0);
            L->k = fx_matrix(&f, NM("self_attn.k_proj"), K, kd, H, 0, 0, &sl, 0);
            L->v = fx_matrix(&f, NM("self_attn.v_proj"), K, kd, H, 0, 0, &sl, 0);
            L->o = fx_matrix(&f, NM("self_attn.o_proj"), K, H, qd, 0, 0, &sl, 0);
            if (hybrid) {
                L->qn = fx_norm_maybe_offset(&f, NM("self_attn.q_norm.weight"), hd, offsets);
                L->kn = fx_norm_maybe_offset(&f, NM("self_attn.k_norm.weight"), hd, offsets);
            }
            if (c->arch == FX_QWEN2 || c->arch == FX_QWEN2_MOE) { /* Qwen2Attention: q/k/v bias=True */
                L->qb = fx_vec(&f, NM("self_attn.q_proj.bias"), qd, 0, 0.5);
                L->kb = fx_vec(&f, NM("self_attn.k_proj.bias"), kd, 0, 0.5);
                L->vb = fx_vec(&f, NM("self_attn.v_proj.bias"), kd, 0, 0.5);
            }
            if (c->arch == FX_GPT_OSS) {
                L->qb = fx_vec(&f, NM("self_attn.q_proj.bias"), qd, 0, 0.1);
                L->kb = fx_vec(&f, NM("self_attn.k_proj.bias"), kd, 0, 0.1);
                L->vb = fx_vec(&f, NM("self_attn.v_proj.bias"), kd, 0, 0.1);
                L->ob = fx_vec(&f, NM("self_attn.o_proj.bias"), H, 0, 0.1);
                L->sinks = fx_vec(&f, NM("self_attn.sinks"), c->heads, 0, 1.0);
            }
        }
        if (hybrid && (c->mlp_only == l + 1 || c->dense35))
            L->moe = 0;
        if (c->arch == FX_QWEN2 || c->arch == FX_QWEN2_MOE)
            L->moe = c->arch == FX_QWEN2_MOE && c->mlp_only != l + 1 && (l + 1) % c->sparse_step == 0;
        /* ---- MLP */
        if (!L->moe) {
            L->gate = fx_matrix(&f, NM("mlp.gate_proj"), K, c->inter, H, 0, 0, &sl, 0);
            L->up = fx_matrix(&f, NM("mlp.up_proj"), K, c->inter, H, 0, 0, &sl, 0);
            L->down = fx_matrix(&f, NM("mlp.down_proj"), K, H, c->inter, 0, 0, &sl, 0);
            continue;
        }
        static const char *const gud[3] = {"gate_proj", "up_proj", "down_proj"};
        static const char *const w132[3] = {"w1", "w3", "w2"};
        switch (c->arch) {
        case FX_MIXTRAL:
            if (c->hf_expert_names == 3) {
                /* as transformers 5 holds it: transformers src/transformers/conversion_mapping.py,
                 * "mixtral": WeightRenaming(".block_sparse_moe.gate", ".mlp.gate"), then
                 * block_sparse_moe.experts.*.w1 / w3 stacked (MergeModulelist(dim=0)) and
                 * concatenated (Concatenate(dim=1)) into mlp.experts.gate_up_proj [E, 2I, H],
                 * gate (w1) rows first, and w2 stacked into mlp.experts.down_proj [E, H, I] */
                L->router = fx_matrix(&f, NM("mlp.gate"), K, c->experts, H, 0, 0, &sl, !aff);
                fx_experts(&f, c, L, P, "mlp.experts", "block_sparse_moe.switch_mlp", w132, 1, 0);
                break;
            }
            L->router = fx_matrix(&f, NM("block_sparse_moe.gate"), K, c->experts, H, 0, 0, &sl, !aff);
            fx_experts(&f, c, L, P, "block_sparse_moe.experts", "block_sparse_moe.switch_mlp", w132, 0, 0);
            break;
        case FX_DEEPSEEK: /* MoEGate is not a linear layer: float in every form */
            L->router = fx_matrix(&f, NM("mlp.gate"), K, c->experts, H, 0, 0, &sl, 1);
            L->ebias = fx_vec(&f, NM("mlp.gate.e_score_correction_bias"), c->experts, 0, 0.1);
            L->sg = fx_matrix(&f, NM("mlp.shared_experts.gate_proj"), K, c->n_shared * c->moe_inter, H, 0, 0, &sl, 0);
            L->su = fx_matrix(&f, NM("mlp.shared_experts.up_proj"), K, c->n_shared * c->moe_inter, H, 0, 0, &sl, 0);
            L->sd = fx_matrix(&f, NM("mlp.shared_experts.down_proj"), K, H, c->n_shared * c->moe_inter, 0, 0, &sl, 0);
            fx_experts(&f, c, L, P, "mlp.experts", "mlp.switch_mlp", gud, c->hf_expert_names == 3, 0);
            break;
        case FX_GPT_OSS: /* the MLX form: stacked mlp.experts.* with biases */
            L->router = fx_matrix(&f, NM("mlp.router"), K, c->experts, H, 0, 0, &sl, !aff);
            L->rb = fx_vec(&f, NM("mlp.router.bias"), c->experts, 0, 0.1);
            fx_experts(&f, c, L, P, "mlp.experts", "mlp.experts", gud, 0, 1);
            break;
        default: /* qwen3_next, qwen3_5_moe, qwen2_moe */
            L->router = fx_matrix(&f, NM("mlp.gate"), K, c->experts, H, 0, 0, &sl, !aff);
            L->sg = fx_matrix(&f, NM("mlp.shared_expert.gate_proj"), K, c->shared_inter, H, 0, 0, &sl, 0);
            L->su = fx_matrix(&f, NM("mlp.shared_expert.up_proj"), K, c->shared_inter, H, 0, 0, &sl, 0);
            L->sd = fx_matrix(&f, NM("mlp.shared_expert.down_proj"), K, H, c->shared_inter, 0, 0, &sl, 0);
            L->sgate = fx_matrix(&f, NM("mlp.shared_expert_gate"), K, 1, H, 0, 0, &sl, 1);
            fx_experts(&f, c, L, P, "mlp.experts", "mlp.switch_mlp", gud,
                       (c->arch == FX_QWEN3_5_MOE && c->hf_expert_names) || c->hf_expert_names == 3, 0);
            break;
        }
    }
#undef NM
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return fx_write(&f, path);
}


/* ---------------------------------------------------------------- gemma4 */
/* config.json as google/gemma-4-26B-A4B-it ships it (Gemma4ForConditionalGeneration, the text
 * model's keys in text_config; rope_parameters per layer type), at this file's sizes. */
static int fx_write_gemma4_config(const fx_cfg *c, const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    char gh[24] = "null";
    if (!c->g_head_dim_null)
        snprintf(gh, sizeof gh, "%d", c->g_head_dim);
    fprintf(fp, "{\"architectures\": [\"Gemma4ForConditionalGeneration\"], \"model_type\": \"gemma4\", "
                "\"tie_word_embeddings\": true, \"text_config\": {\"model_type\": \"gemma4_text\", "
                "\"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
                "\"num_key_value_heads\": %d, \"head_dim\": %d, \"global_head_dim\": %s, \"attention_k_eq_v\": %s, "
                "\"vocab_size\": %d, \"rms_norm_eps\": %g, \"sliding_window\": %d, \"hidden_activation\": \"gelu_pytorch_tanh\", "
                "\"hidden_size_per_layer_input\": 0, \"num_kv_shared_layers\": 0, \"use_double_wide_mlp\": false, "
                "\"use_bidirectional_attention\": \"vision\", \"attention_bias\": false, \"tie_word_embeddings\": true, "
                "\"max_position_embeddings\": 262144, \"enable_moe_block\": %s, \"num_experts\": %d, \"top_k_experts\": %d, "
                "\"moe_intermediate_size\": %d",
            c->hidden, c->inter, c->layers, c->heads, c->kv_heads, c->head_dim, gh, c->k_eq_v ? "true" : "false",
            c->vocab, c->eps, c->window, c->experts ? "true" : "false", c->experts, c->top_k, c->moe_inter);
    if (c->k_eq_v)
        fprintf(fp, ", \"num_global_key_value_heads\": %d", c->g_kv_heads);
    else
        fprintf(fp, ", \"num_global_key_value_heads\": null");
    if (c->softcap > 0)
        fprintf(fp, ", \"final_logit_softcapping\": %g", c->softcap);
    else
        fprintf(fp, ", \"final_logit_softcapping\": null");
    fprintf(fp, ", \"rope_parameters\": {\"full_attention\": {\"partial_rotary_factor\": %g, \"rope_theta\": %g, "
                "\"rope_type\": \"proportional\"}, \"sliding_attention\": {\"rope_theta\": %g, \"rope_type\": \"default\"}}",
            c->prf, c->theta_full, c->theta);
    fprintf(fp, ", \"layer_types\": [");
    for (int l = 0; l < c->layers; l++)
        fprintf(fp, "%s\"%s\"", l ? ", " : "",
                (l + 1) % c->full_every && l + 1 < c->layers ? "sliding_attention" : "full_attention");
    fprintf(fp, "]}");
    if (fx_is_aff(c->kind)) { /* mlx-lm's gemma4_text quant_predicate: router.proj at 8 bits */
        fprintf(fp, ", \"quantization\": {\"group_size\": 32, \"bits\": %d", c->kind == FX_AFF4 ? 4 : 8);
        for (int l = 0; c->experts && l < c->layers; l++)
            fprintf(fp, ", \"language_model.model.layers.%d.router.proj\": {\"group_size\": 32, \"bits\": 8}", l);
        fprintf(fp, "}");
    }
    if (fx_is_tq(c->kind))
        fprintf(fp, ", \"quantization\": {\"mode\": \"turboquant\", \"group_size\": 32, \"bits\": %d}",
                c->kind == FX_TQ3 ? 3 : c->kind == FX_TQ4 ? 4 : 2);
    fprintf(fp, "}\n");
    return fclose(fp);
}

/* Gemma 4 text weights (transformers' Gemma4TextDecoderLayer's modules): HF names under
 * "model.language_model." with fused experts.gate_up_proj / down_proj (hf_expert_names), or
 * the MLX form under "language_model.model." with experts.switch_glu stacked. Full layers
 * have global_head_dim heads, and with attention_k_eq_v no v_proj. The router's proj stays
 * float (tq-convert keeps routers), or is 8-bit affine in the MLX affine form. */
#define NMG(s) (snprintf(n, sizeof n, "%s%s", P, s), n)
static int fx_generate_gemma4(const fx_cfg *c, const char *dir, fx_model *m)
{
    if (fx_write_gemma4_config(c, dir) != 0)
        return -1;
    fx_file f = {0};
    fx_slot sl;
    memset(&sl, 0, sizeof sl);
    int K = c->kind, aff = fx_is_aff(K), tq = fx_is_tq(K), H = c->hidden;
    const char *root = c->hf_expert_names ? "model.language_model." : "language_model.model.";
    char n[300], P[200];
    snprintf(n, sizeof n, "%sembed_tokens", root);
    int ek = aff ? K : K == FX_BF16 ? FX_BF16 : K == FX_F16 ? FX_F16 : FX_F32;
    m->embed_dtype = aff ? FX_F16 : ek; /* affine rows come out in the scales' dtype (F16 here) */
    m->embed = fx_matrix(&f, n, ek, c->vocab, H, 0, 0, &sl, tq);
    m->lm = m->embed;
    snprintf(n, sizeof n, "%snorm.weight", root);
    m->norm = fx_norm(&f, n, H);
    m->L = calloc((size_t)c->layers, sizeof *m->L);
    for (int l = 0; l < c->layers; l++) {
        fx_layer *L = &m->L[l];
        snprintf(P, sizeof P, "%slayers.%d.", root, l);
        L->full = !((l + 1) % c->full_every && l + 1 < c->layers);
        int hd = L->full ? c->g_head_dim : c->head_dim;
        int kvh = L->full && c->k_eq_v ? c->g_kv_heads : c->kv_heads, qd = c->heads * hd, kd = kvh * hd;
        L->in_norm = fx_norm(&f, NMG("input_layernorm.weight"), H);
        L->post_norm = fx_norm(&f, NMG("post_attention_layernorm.weight"), H);
        L->pre_ff = fx_norm(&f, NMG("pre_feedforward_layernorm.weight"), H);
        L->post_ff = fx_norm(&f, NMG("post_feedforward_layernorm.weight"), H);
        double *ls = fx_vec(&f, NMG("layer_scalar"), 1, 0.8, 0.1);
        L->lscalar = ls[0];
        free(ls);
        L->q = fx_matrix(&f, NMG("self_attn.q_proj"), K, qd, H, 0, 0, &sl, 0);
        L->k = fx_matrix(&f, NMG("self_attn.k_proj"), K, kd, H, 0, 0, &sl, 0);
        if (!(L->full && c->k_eq_v))
            L->v = fx_matrix(&f, NMG("self_attn.v_proj"), K, kd, H, 0, 0, &sl, 0);
        L->o = fx_matrix(&f, NMG("self_attn.o_proj"), K, H, qd, 0, 0, &sl, 0);
        L->qn = fx_norm(&f, NMG("self_attn.q_norm.weight"), hd);
        L->kn = fx_norm(&f, NMG("self_attn.k_norm.weight"), hd);
        L->gate = fx_matrix(&f, NMG("mlp.gate_proj"), K, c->inter, H, 0, 0, &sl, 0);
        L->up = fx_matrix(&f, NMG("mlp.up_proj"), K, c->inter, H, 0, 0, &sl, 0);
        L->down = fx_matrix(&f, NMG("mlp.down_proj"), K, H, c->inter, 0, 0, &sl, 0);
        L->moe = c->experts > 0;
        if (!L->moe)
            continue;
        /* float, or in the MLX affine form at 8 bits whatever the other layers' bits, as
         * mlx-lm's quant_predicate quantizes it (the config's per-module entry says so) */
        L->router = fx_matrix(&f, NMG("router.proj"), aff ? FX_AFF8 : K, c->experts, H, 0, 0, &sl, !aff);
        L->rscale = fx_vec(&f, NMG("router.scale"), H, 1.0, 0.2);
        L->pscale = fx_vec(&f, NMG("router.per_expert_scale"), c->experts, 1.0, 0.2);
        L->pre_ff2 = fx_norm(&f, NMG("pre_feedforward_layernorm_2.weight"), H);
        L->post_ff1 = fx_norm(&f, NMG("post_feedforward_layernorm_1.weight"), H);
        L->post_ff2 = fx_norm(&f, NMG("post_feedforward_layernorm_2.weight"), H);
        static const char *const gud[3] = {"gate_proj", "up_proj", "down_proj"};
        fx_experts(&f, c, L, P, "experts", "experts.switch_glu", gud, c->hf_expert_names, 0);
    }
    snprintf(n, sizeof n, "%s/model.safetensors", dir);
    return fx_write(&f, n);
}
#undef NMG

/* Generate model directory `dir` and its dense twin m. */
int fx_generate(const fx_cfg *c, const char *dir, fx_model *m)
{
    memset(m, 0, sizeof *m);
    m->c = *c;
    fx_rng = c->seed * 2654435761u + 88172645463325252ull;
    mkdir(dir, 0755);
    if (c->arch == FX_GEMMA4)
        return fx_generate_gemma4(c, dir, m);
    if (c->arch >= FX_MIXTRAL)
        return fx_generate_family(c, dir, m);
    if (fx_write_config(c, dir) != 0)
        return -1;
    fx_file f = {0};
    fx_slot sl;
    int K = c->kind;
    int aff = K == FX_AFF4 || K == FX_AFF8, tq = K == FX_TQ3 || K == FX_TQ4 || K == FX_TQ2;
    /* embeddings: affine models quantize them too (MLX), TQ keeps them float */
    memset(&sl, 0, sizeof sl);
    m->embed = fx_matrix(&f, "model.embed_tokens", aff ? K : K == FX_BF16 ? FX_BF16 : FX_F32, c->vocab, c->hidden,
                         0, 0, &sl, tq);
    if (c->tied)
        m->lm = m->embed;
    else
        m->lm = fx_matrix(&f, "lm_head", K, c->vocab, c->hidden, 0, 0, &sl, 0);
    m->norm = fx_norm(&f, "model.norm.weight", c->hidden);
    m->L = calloc((size_t)c->layers, sizeof *m->L);
    int qd = c->heads * c->head_dim, kd = c->kv_heads * c->head_dim;
    char n[256];
    for (int l = 0; l < c->layers; l++) {
        fx_layer *L = &m->L[l];
#define NM(s) (snprintf(n, sizeof n, "model.layers.%d.%s", l, s), n)
        L->in_norm = fx_norm(&f, NM("input_layernorm.weight"), c->hidden);
        L->post_norm = fx_norm(&f, NM("post_attention_layernorm.weight"), c->hidden);
        if (c->arch != FX_LLAMA) {
            L->qn = fx_norm(&f, NM("self_attn.q_norm.weight"), c->head_dim);
            L->kn = fx_norm(&f, NM("self_attn.k_norm.weight"), c->head_dim);
        }
        L->q = fx_matrix(&f, NM("self_attn.q_proj"), K, qd, c->hidden, 0, 0, &sl, 0);
        L->k = fx_matrix(&f, NM("self_attn.k_proj"), K, kd, c->hidden, 0, 0, &sl, 0);
        L->v = fx_matrix(&f, NM("self_attn.v_proj"), K, kd, c->hidden, 0, 0, &sl, 0);
        L->o = fx_matrix(&f, NM("self_attn.o_proj"), K, c->hidden, qd, 0, 0, &sl, 0);
        if (c->arch != FX_QWEN3_MOE) {
            L->gate = fx_matrix(&f, NM("mlp.gate_proj"), K, c->inter, c->hidden, 0, 0, &sl, 0);
            L->up = fx_matrix(&f, NM("mlp.up_proj"), K, c->inter, c->hidden, 0, 0, &sl, 0);
            L->down = fx_matrix(&f, NM("mlp.down_proj"), K, c->hidden, c->inter, 0, 0, &sl, 0);
            continue;
        }
        L->router = fx_matrix(&f, NM("mlp.gate"), K, c->experts, c->hidden, 0, 0, &sl, !aff);
        if (c->shared_inter) {
            L->sg = fx_matrix(&f, NM("mlp.shared_expert.gate_proj"), K, c->shared_inter, c->hidden, 0, 0, &sl, 0);
            L->su = fx_matrix(&f, NM("mlp.shared_expert.up_proj"), K, c->shared_inter, c->hidden, 0, 0, &sl, 0);
            L->sd = fx_matrix(&f, NM("mlp.shared_expert.down_proj"), K, c->hidden, c->shared_inter, 0, 0, &sl, 0);
            L->sgate = fx_matrix(&f, NM("mlp.shared_expert_gate"), K, 1, c->hidden, 0, 0, &sl, 1);
        }
        if (c->hf_expert_names == 3) { /* fused, as transformers 5 holds Qwen3MoeExperts */
            static const char *const gud[3] = {"gate_proj", "up_proj", "down_proj"};
            char P[64];
            snprintf(P, sizeof P, "model.layers.%d.", l);
            fx_experts(&f, c, L, P, "mlp.experts", "mlp.switch_mlp", gud, 1, 0);
            continue;
        }
        L->eg = calloc((size_t)c->experts, sizeof(dmat));
        L->eu = calloc((size_t)c->experts, sizeof(dmat));
        L->ed = calloc((size_t)c->experts, sizeof(dmat));
        fx_slot sg = {0}, su = {0}, sdn = {0};
        for (int x = 0; x < c->experts; x++) {
            if (c->hf_expert_names) {
                char b[256];
                fx_cb_scale = c->own_codebooks ? 1.0 + x / 16.0 : 1.0;
                snprintf(b, sizeof b, "model.layers.%d.mlp.experts.%d.gate_proj", l, x);
                L->eg[x] = fx_matrix(&f, b, K, c->moe_inter, c->hidden, 0, 0, &sl, 0);
                snprintf(b, sizeof b, "model.layers.%d.mlp.experts.%d.up_proj", l, x);
                L->eu[x] = fx_matrix(&f, b, K, c->moe_inter, c->hidden, 0, 0, &sl, 0);
                snprintf(b, sizeof b, "model.layers.%d.mlp.experts.%d.down_proj", l, x);
                L->ed[x] = fx_matrix(&f, b, K, c->hidden, c->moe_inter, 0, 0, &sl, 0);
                fx_cb_scale = 1.0;
            } else {
                L->eg[x] = fx_matrix(&f, NM("mlp.switch_mlp.gate_proj"), K, c->moe_inter, c->hidden, c->experts, x, &sg, 0);
                L->eu[x] = fx_matrix(&f, NM("mlp.switch_mlp.up_proj"), K, c->moe_inter, c->hidden, c->experts, x, &su, 0);
                L->ed[x] = fx_matrix(&f, NM("mlp.switch_mlp.down_proj"), K, c->hidden, c->moe_inter, c->experts, x, &sdn, 0);
            }
        }
#undef NM
    }
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return fx_write(&f, path);
}

void fx_free(fx_model *m)
{
    const fx_cfg *c = &m->c;
    if (m->lm.w != m->embed.w)
        free(m->lm.w);
    free(m->embed.w);
    free(m->norm);
    for (int l = 0; l < c->layers; l++) {
        fx_layer *L = &m->L[l];
        double *vs[] = {L->in_norm, L->post_norm, L->qn, L->kn, L->qb, L->kb, L->vb, L->ob, L->rb, L->sinks,
                        L->ebias, L->qa_norm, L->kva_norm, L->conv, L->A_log, L->dt_bias, L->gnorm,
                        L->pre_ff, L->post_ff, L->pre_ff2, L->post_ff1, L->post_ff2, L->rscale, L->pscale};
        for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
            free(vs[i]);
        dmat *ms[] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down, &L->router, &L->sg, &L->su, &L->sd,
                      &L->sgate, &L->qa, &L->qbm, &L->kva, &L->kvb, &L->pqkv, &L->pz, &L->pb, &L->pa};
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
            free(ms[i]->w);
        for (int x = 0; L->eg && x < c->experts; x++) {
            free(L->eg[x].w); free(L->eu[x].w); free(L->ed[x].w);
            if (L->egb) {
                free(L->egb[x]); free(L->eub[x]); free(L->edb[x]);
            }
        }
        free(L->eg); free(L->eu); free(L->ed); free(L->egb); free(L->eub); free(L->edb);
    }
    free(m->L);
}

double fx_rel_err(const double *ref, const float *got, int n, int *ref_argmax)
{
    double mx = 0, diff = 0;
    int am = 0;
    for (int i = 0; i < n; i++) {
        mx = fmax(mx, fabs(ref[i]));
        diff = fmax(diff, fabs(ref[i] - got[i]));
        if (ref[i] > ref[am])
            am = i;
    }
    *ref_argmax = am;
    return diff / mx;
}

int fx_decode_forced(const char *dir, tq_run_opts *o, const int32_t *seq, int n, fx_logits *b, int32_t *toks,
                     tq_err *e)
{
    o->on_logits = fx_collect;
    o->user = b;
    o->force_tokens = seq + 1;
    o->n_force = n - 1;
    b->steps = 0;
    return tq_run_validate(dir, seq, 1, n, o, toks, NULL, e);
}

int fx_oracle_compare(const fx_model *m, const char *dir, tq_run_opts *o, int n, double *worst, int *first_bad,
                      float **keep, tq_err *e)
{
    const fx_cfg *c = &m->c;
    int32_t *seq = malloc((size_t)n * sizeof *seq), *toks = malloc((size_t)n * sizeof *toks);
    fx_logits b = {calloc((size_t)n * (size_t)c->vocab, sizeof(float)), 0, 0, (uint64_t)n};
    /* the classic oracle (llama, mistral, qwen3) keeps its k/v in caller-given caches */
    size_t kv = (size_t)c->layers * (size_t)n * (size_t)c->kv_heads * (size_t)c->head_dim;
    fx_state s = {.kc = calloc(kv ? kv : 1, 8), .vc = calloc(kv ? kv : 1, 8), .ctx = n};
    double *ref = malloc((size_t)c->vocab * sizeof *ref);
    int bad = -1;
    *worst = 0;
    *first_bad = -1;
    if (seq && toks && b.v && s.kc && s.vc && ref) {
        fx_sequence(c->vocab, c->seed, n, seq);
        if (fx_decode_forced(dir, o, seq, n, &b, toks, e) == 0 && b.steps == (uint64_t)n) {
            bad = 0;
            for (int st = 0; st < n; st++) {
                fx_forward(m, &s, seq[st], st, ref);
                int am;
                *worst = fmax(*worst, fx_rel_err(ref, b.v + (size_t)st * c->vocab, c->vocab, &am));
                if (am != toks[st] && bad++ == 0)
                    *first_bad = st;
            }
        }
    }
    free(ref);
    free(s.kc);
    free(s.vc);
    fx_state_free(&s);
    free(seq);
    free(toks);
    if (keep) /* zeros where the decode failed */
        *keep = b.v;
    else
        free(b.v);
    return bad;
}

int fx_split_dir(const char *src, const char *dst, tq_err *e)
{
    tq_split_opts so = {0};
    so.threads = 2;
    so.quiet = 1;
    tq_split_result res;
    return tq_split(src, dst, &so, &res, e);
}

int fx_convert_keep(const char *src, const char *dst, tq_err *e)
{
    static const char *const all[] = {"."};
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    o.n_keep = 1;
    o.keep_re = all;
    o.quiet = 1;
    o.threads = 2;
    tq_convert_report r;
    memset(&r, 0, sizeof r);
    int rc = tq_convert(src, dst, &o, &r, e);
    tq_convert_report_free(&r);
    return rc;
}

int fx_collect(void *user, uint64_t step, const float *l, uint64_t vocab)
{
    fx_logits *b = user;
    if (step != b->steps || step >= b->cap)
        return -1;
    b->vocab = vocab;
    memcpy(b->v + step * vocab, l, vocab * sizeof(float));
    b->steps++;
    return 0;
}

void fx_check_oracle(const fx_model *m, const char *dir, int resident, int n, const char *what, float **keep)
{
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.threads = 2;
    o.resident = resident;
    tq_err err = {0};
    double worst;
    int first, bad = fx_oracle_compare(m, dir, &o, n, &worst, &first, keep, &err);
    CHECKF(bad >= 0, "%s: %s", what, err.msg);
    CHECKF(bad == 0, "%s: %d greedy tokens differ from the oracle's, the first at step %d", what, bad, first);
    CHECKF(bad >= 0 && worst < 1e-4, "%s: relative logit error %.3g", what, worst);
    CHECKF(bad < 0 || worst > 0, "%s: suspiciously exact", what);
    printf("  %-40s max relative logit error %.3g over %d positions, %d token mismatches\n", what, worst, n, bad);
}
