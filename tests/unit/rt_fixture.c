/* Test fixtures for the runtime tests (rt_fixture.h): tiny llama / qwen3 / qwen3_moe models
 * written from a seed with this file's own safetensors writer, in f32, bf16, f16, MLX affine
 * (4/8 bit) or TurboQuant form, together with the same weights as dense f64 matrices
 * (dequantized up front, rotation undone by the O(n²) Hadamard definition) for a naive
 * reference forward pass written independently of runtime/. */
#include "rt_fixture.h"

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
    uint64_t shape[3];
    unsigned char *data;
    uint64_t nbytes;
} fx_tensor;

typedef struct fx_file {
    fx_tensor *t;
    int n, cap;
} fx_file;

static void *fx_add(fx_file *f, const char *name, const char *dtype, int ndim, uint64_t d0, uint64_t d1,
                    uint64_t d2, uint64_t elsize)
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
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
    uint64_t n = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
    t->nbytes = n * elsize;
    t->data = calloc(1, t->nbytes ? t->nbytes : 1);
    return t->data;
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

static const float fx_cb3[8] = {-2.1519453f, -1.3439091f, -0.7560052f, -0.2450941f,
                                0.2450941f,  0.7560052f,  1.3439091f,  2.1519453f};

static dmat fx_matrix(fx_file *f, const char *name, int kind, int rows, int cols, int E, int ex, fx_slot *sl,
                      int force_float)
{
    dmat m = fx_dmat(rows, cols);
    double sd = 1.0 / sqrt((double)cols);
    char nm[200];
    int k = force_float ? FX_F32 : kind;
    if (k == FX_F32 || k == FX_BF16 || k == FX_F16) {
        const char *dt = k == FX_F32 ? "F32" : k == FX_BF16 ? "BF16" : "F16";
        uint64_t es = k == FX_F32 ? 4 : 2;
        if (ex == 0 || !E) {
            snprintf(nm, sizeof nm, "%s.weight", name);
            sl->w = fx_add_mat(f, nm, dt, E, rows, (uint64_t)cols, es);
        }
        unsigned char *base = (unsigned char *)sl->w + (uint64_t)ex * (uint64_t)rows * (uint64_t)cols * es;
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
            ((uint16_t *)sl->cb)[i] = fx_f16(bits == 3 ? fx_cb3[i] : bits == 4 ? (float)((i - 7.5) * 0.33) : (float)((i - 1.5) * 0.9));
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

static double *fx_norm(fx_file *f, const char *name, int n)
{
    double *v = malloc((size_t)n * sizeof *v);
    float *d = fx_add(f, name, "F32", 1, (uint64_t)n, 0, 0, 4);
    for (int i = 0; i < n; i++) {
        d[i] = (float)(1.0 + 0.2 * fx_gauss());
        v[i] = d[i];
    }
    return v;
}

static int fx_write_config(const fx_cfg *c, const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    const char *mt = c->arch == FX_LLAMA ? "llama" : c->arch == FX_QWEN3 ? "qwen3" : "qwen3_moe";
    fprintf(fp, "{\"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, "
                "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
                "\"head_dim\": %d, \"vocab_size\": %d, \"rope_theta\": %g, \"rms_norm_eps\": %g, "
                "\"tie_word_embeddings\": %s",
            mt, c->hidden, c->inter, c->layers, c->heads, c->kv_heads, c->head_dim, c->vocab, c->theta, c->eps,
            c->tied ? "true" : "false");
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

/* Generate model directory `dir` and its dense twin m. */
int fx_generate(const fx_cfg *c, const char *dir, fx_model *m)
{
    memset(m, 0, sizeof *m);
    m->c = *c;
    fx_rng = c->seed * 2654435761u + 88172645463325252ull;
    mkdir(dir, 0755);
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
        L->eg = calloc((size_t)c->experts, sizeof(dmat));
        L->eu = calloc((size_t)c->experts, sizeof(dmat));
        L->ed = calloc((size_t)c->experts, sizeof(dmat));
        fx_slot sg = {0}, su = {0}, sdn = {0};
        for (int x = 0; x < c->experts; x++) {
            if (c->hf_expert_names) {
                char b[256];
                snprintf(b, sizeof b, "model.layers.%d.mlp.experts.%d.gate_proj", l, x);
                L->eg[x] = fx_matrix(&f, b, K, c->moe_inter, c->hidden, 0, 0, &sl, 0);
                snprintf(b, sizeof b, "model.layers.%d.mlp.experts.%d.up_proj", l, x);
                L->eu[x] = fx_matrix(&f, b, K, c->moe_inter, c->hidden, 0, 0, &sl, 0);
                snprintf(b, sizeof b, "model.layers.%d.mlp.experts.%d.down_proj", l, x);
                L->ed[x] = fx_matrix(&f, b, K, c->hidden, c->moe_inter, 0, 0, &sl, 0);
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

/* ---------------------------------------------------------------- naive forward (f64) */

static void fx_mv(const dmat *m, const double *x, double *y)
{
    for (int r = 0; r < m->rows; r++) {
        double s = 0;
        for (int j = 0; j < m->cols; j++)
            s += m->w[(size_t)r * m->cols + j] * x[j];
        y[r] = s;
    }
}

static void fx_rms(double *o, const double *x, const double *w, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        o[i] = w[i] * x[i] * inv;
}

static void fx_rope(double *v, int d, int pos, double theta)
{
    for (int i = 0; i < d / 2; i++) {
        double a = pos * pow(theta, -2.0 * i / d);
        double x1 = v[i], x2 = v[i + d / 2];
        v[i] = x1 * cos(a) - x2 * sin(a);
        v[i + d / 2] = x2 * cos(a) + x1 * sin(a);
    }
}

static void fx_mlp(const dmat *g, const dmat *u, const dmat *d, const double *x, double *out)
{
    double *a = malloc((size_t)g->rows * sizeof *a), *b = malloc((size_t)g->rows * sizeof *b);
    fx_mv(g, x, a);
    fx_mv(u, x, b);
    for (int i = 0; i < g->rows; i++)
        a[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
    fx_mv(d, a, out);
    free(a);
    free(b);
}

/* logits (vocab) for token at pos */
void fx_forward(const fx_model *m, fx_state *s, int token, int pos, double *logits)
{
    const fx_cfg *c = &m->c;
    int H = c->hidden, hd = c->head_dim, qd = c->heads * hd, kd = c->kv_heads * hd;
    double *x = malloc((size_t)H * 8), *h = malloc((size_t)H * 8), *q = malloc((size_t)qd * 8),
           *k = malloc((size_t)kd * 8), *v = malloc((size_t)kd * 8), *ao = malloc((size_t)qd * 8),
           *t = malloc((size_t)H * 8), *t2 = malloc((size_t)H * 8), *sc = malloc((size_t)(pos + 1) * 8);
    for (int i = 0; i < H; i++)
        x[i] = m->embed.w[(size_t)token * H + i];
    for (int l = 0; l < c->layers; l++) {
        const fx_layer *L = &m->L[l];
        fx_rms(h, x, L->in_norm, H, c->eps);
        fx_mv(&L->q, h, q);
        fx_mv(&L->k, h, k);
        fx_mv(&L->v, h, v);
        for (int hh = 0; hh < c->heads; hh++) {
            if (L->qn)
                fx_rms(q + hh * hd, q + hh * hd, L->qn, hd, c->eps);
            fx_rope(q + hh * hd, hd, pos, c->theta);
        }
        for (int hh = 0; hh < c->kv_heads; hh++) {
            if (L->kn)
                fx_rms(k + hh * hd, k + hh * hd, L->kn, hd, c->eps);
            fx_rope(k + hh * hd, hd, pos, c->theta);
        }
        memcpy(s->kc + ((size_t)l * s->ctx + pos) * kd, k, (size_t)kd * 8);
        memcpy(s->vc + ((size_t)l * s->ctx + pos) * kd, v, (size_t)kd * 8);
        for (int hh = 0; hh < c->heads; hh++) {
            int kh = hh / (c->heads / c->kv_heads);
            double mx = -1e300, sum = 0;
            for (int p = 0; p <= pos; p++) {
                const double *kk = s->kc + ((size_t)l * s->ctx + p) * kd + kh * hd;
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += q[hh * hd + i] * kk[i];
                sc[p] = d / sqrt((double)hd);
                if (sc[p] > mx)
                    mx = sc[p];
            }
            for (int p = 0; p <= pos; p++)
                sum += (sc[p] = exp(sc[p] - mx));
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int p = 0; p <= pos; p++)
                    o += sc[p] / sum * s->vc[((size_t)l * s->ctx + p) * kd + kh * hd + i];
                ao[hh * hd + i] = o;
            }
        }
        fx_mv(&L->o, ao, t);
        for (int i = 0; i < H; i++)
            x[i] += t[i];
        fx_rms(h, x, L->post_norm, H, c->eps);
        if (c->arch != FX_QWEN3_MOE) {
            fx_mlp(&L->gate, &L->up, &L->down, h, t);
        } else {
            double *pr = malloc((size_t)c->experts * 8);
            fx_mv(&L->router, h, pr);
            double mx = -1e300, sum = 0;
            for (int i = 0; i < c->experts; i++)
                mx = pr[i] > mx ? pr[i] : mx;
            for (int i = 0; i < c->experts; i++)
                sum += (pr[i] = exp(pr[i] - mx));
            for (int i = 0; i < c->experts; i++)
                pr[i] /= sum;
            int *sel = calloc((size_t)c->experts, sizeof(int));
            double wsum = 0;
            int ids[64];
            for (int kk = 0; kk < c->top_k; kk++) {
                int b = -1;
                for (int i = 0; i < c->experts; i++)
                    if (!sel[i] && (b < 0 || pr[i] > pr[b]))
                        b = i;
                sel[b] = 1;
                ids[kk] = b;
                wsum += pr[b];
            }
            memset(t, 0, (size_t)H * 8);
            for (int kk = 0; kk < c->top_k; kk++) {
                double w = pr[ids[kk]] / (c->norm_topk ? wsum : 1.0);
                fx_mlp(&L->eg[ids[kk]], &L->eu[ids[kk]], &L->ed[ids[kk]], h, t2);
                for (int i = 0; i < H; i++)
                    t[i] += w * t2[i];
            }
            if (c->shared_inter) {
                double gl;
                fx_mlp(&L->sg, &L->su, &L->sd, h, t2);
                fx_mv(&L->sgate, h, &gl);
                for (int i = 0; i < H; i++)
                    t[i] += t2[i] / (1.0 + exp(-gl));
            }
            free(sel);
            free(pr);
        }
        for (int i = 0; i < H; i++)
            x[i] += t[i];
    }
    fx_rms(h, x, m->norm, H, c->eps);
    fx_mv(&m->lm, h, logits);
    free(x); free(h); free(q); free(k); free(v); free(ao); free(t); free(t2); free(sc);
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
        free(L->in_norm); free(L->post_norm); free(L->qn); free(L->kn);
        dmat *ms[] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down, &L->router,
                      &L->sg, &L->su, &L->sd, &L->sgate};
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
            free(ms[i]->w);
        for (int x = 0; L->eg && x < c->experts; x++) {
            free(L->eg[x].w); free(L->eu[x].w); free(L->ed[x].w);
        }
        free(L->eg); free(L->eu); free(L->ed);
    }
    free(m->L);
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
