/* Matrix-vector kernels for every weight kind. One output row is always computed whole by
 * one thread with a fixed summation order, so y is identical for any thread count and for
 * resident and streamed weights (same bytes, same code). */
#include "runtime/rt_internal.h"
#include "quant/quant.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_init(void)
{
    for (uint32_t i = 0; i < 65536; i++)
        f16_table[i] = tq_f16_to_f32((uint16_t)i);
}

void rt_kernels_init(void)
{
    pthread_once(&f16_once, f16_init);
}

float rt_f16(uint16_t h)
{
    return f16_table[h];
}

static inline float bf16f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float rt_load_f(tq_dtype dt, const void *p, uint64_t i)
{
    switch (dt) {
    case TQ_DT_F32: {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    }
    case TQ_DT_F16: {
        uint16_t h;
        memcpy(&h, (const char *)p + 2 * i, 2);
        return f16_table[h];
    }
    case TQ_DT_BF16: {
        uint16_t h;
        memcpy(&h, (const char *)p + 2 * i, 2);
        return bf16f(h);
    }
    default:
        return 0.0f;
    }
}

uint64_t rt_linear_wbytes(const rt_linear *l)
{
    if (l->kind == RT_DENSE)
        return l->rows * l->cols * tq_dtype_size(l->wdt);
    if (l->kind == RT_MXFP4)
        return l->rows * l->cols / 2;
    return l->rows * l->wpr * 4;
}

uint64_t rt_linear_sbytes(const rt_linear *l)
{
    return l->kind == RT_DENSE ? 0 : l->kind == RT_MXFP4 ? l->rows * l->cols / 32 : l->rows * l->ngroups * tq_dtype_size(l->sdt);
}

/* ---- dense rows: eight lanes (j mod 8) combined pairwise in a fixed tree, written so the
 * compiler can keep the lanes in one vector register without reordering any sum. */
#define LANES 8
static inline float lanes_sum(const float *a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static float dot_f32(const float *w, const float *x, uint64_t n)
{
    float a[LANES] = {0};
    uint64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            a[k] += w[j + k] * x[j + k];
    for (int k = 0; j < n; j++, k++)
        a[k] += w[j] * x[j];
    return lanes_sum(a);
}

static float dot_bf16(const uint16_t *w, const float *x, uint64_t n)
{
    float a[LANES] = {0};
    uint64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            a[k] += bf16f(w[j + k]) * x[j + k];
    for (int k = 0; j < n; j++, k++)
        a[k] += bf16f(w[j]) * x[j];
    return lanes_sum(a);
}

static float dot_f16(const uint16_t *w, const float *x, uint64_t n)
{
    float a[LANES] = {0};
    uint64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++)
            a[k] += f16_table[w[j + k]] * x[j + k];
    for (int k = 0; j < n; j++, k++)
        a[k] += f16_table[w[j]] * x[j];
    return lanes_sum(a);
}

/* ---- quantized rows: unpack the row's indices (LSB first, epw per u32) into floats —
 * codebook values for TurboQuant, the integers q for affine — then per group an 8-lane dot
 * product with the activation, and the groups accumulated in order. */
/* Unpacking goes through a table of index pairs (or quadruples): chunks of PER indices
 * (PER·BITS bits) map to PER ready floats, so whole words cost a few loads and stores. */
typedef struct rt_lut {
    uint32_t bits, per;
    float v[1024];
} rt_lut;

static void lut_build(rt_lut *t, uint32_t bits, const float *cb)
{
    t->bits = bits;
    t->per = bits == 2 ? 4 : bits <= 4 ? 2 : 1;
    uint32_t cbits = bits * t->per, n = 1u << cbits, mask = (1u << bits) - 1;
    if (cbits > 8 || (bits != 2 && bits != 3 && bits != 4 && bits != 8)) {
        t->per = 0; /* generic path */
        return;
    }
    for (uint32_t c = 0; c < n; c++)
        for (uint32_t k = 0; k < t->per; k++) {
            uint32_t q = (c >> (k * bits)) & mask;
            t->v[c * t->per + k] = cb ? cb[q] : (float)q;
        }
}

#define UNPACK_WORDS(BITS, PER)                                                   \
    do {                                                                          \
        enum { EPW = 32 / (BITS), CH = EPW / (PER), CB = (BITS) * (PER) };        \
        const uint32_t M = (1u << CB) - 1;                                        \
        for (; j + EPW <= cols; j += EPW) {                                       \
            uint32_t word = *w++;                                                 \
            _Pragma("GCC unroll 16")                                              \
            for (int q = 0; q < CH; q++)                                          \
                memcpy(out + j + q * (PER), t->v + ((word >> (q * CB)) & M) * (PER), \
                       (PER) * sizeof(float));                                    \
        }                                                                         \
    } while (0)

static void unpack_row(const uint32_t *w, uint64_t cols, const rt_lut *t, const float *cb, float *out)
{
    uint64_t j = 0;
    const uint32_t bits = t->bits;
    if (t->per) {
        switch (bits) {
        case 2: UNPACK_WORDS(2, 4); break;
        case 3: UNPACK_WORDS(3, 2); break;
        case 4: UNPACK_WORDS(4, 2); break;
        case 8: UNPACK_WORDS(8, 1); break;
        default: break;
        }
    }
    const uint32_t epw = 32 / bits, mask = (1u << bits) - 1;
    while (j < cols) {
        uint32_t word = *w++;
        uint32_t n = cols - j < epw ? (uint32_t)(cols - j) : epw;
        for (uint32_t k = 0; k < n; k++)
            out[j + k] = cb ? cb[(word >> (k * bits)) & mask] : (float)((word >> (k * bits)) & mask);
        j += n;
    }
}

/* TurboQuant: Σ_g scale_g · Σ_{j in g} codebook[idx_j] · x_rot[j]. xr [cols] is the rotated
 * activation, cb [2^bits] the codebook, wv [cols] scratch for the row's centroids. */
static float row_tq(const rt_linear *l, uint64_t r, const float *xr, const float *cb, const rt_lut *t,
                    float *wv)
{
    unpack_row((const uint32_t *)l->w + r * l->wpr, l->cols, t, cb, wv);
    float acc = 0;
    for (uint64_t g = 0; g < l->ngroups; g++)
        acc += dot_f32(wv + g * l->group, xr + g * l->group, l->group) *
               rt_load_f(l->sdt, l->scales, r * l->ngroups + g);
    return acc;
}

/* MLX affine: w = scale·q + bias per group, so Σ_g scale_g·Σ q·x + bias_g·Σ x. x [cols],
 * gsum [ngroups] the per-group sums of x, wv [cols] scratch for the row's integers q. */
static float row_affine(const rt_linear *l, uint64_t r, const float *x, const float *gsum, const rt_lut *t,
                        float *wv)
{
    unpack_row((const uint32_t *)l->w + r * l->wpr, l->cols, t, NULL, wv);
    float acc = 0;
    for (uint64_t g = 0; g < l->ngroups; g++) {
        uint64_t gi = r * l->ngroups + g;
        float s = dot_f32(wv + g * l->group, x + g * l->group, l->group);
        acc += rt_load_f(l->sdt, l->scales, gi) * s + rt_load_f(l->zdt, l->biases, gi) * gsum[g];
    }
    return acc;
}

/* MXFP4 (gpt-oss experts): the row's 32-value blocks decoded exactly (formats/mxfp4.c), then
 * one 8-lane dot product. -1 when a block's scale is 255 (E8M0 NaN) or a value is beyond f32. */
static int row_mxfp4(const rt_linear *l, uint64_t r, const float *x, float *wv, float *out)
{
    uint64_t nb = l->cols / 32, rr = r * (l->rstep ? l->rstep : 1), bad;
    if (tq_mxfp4_decode((const uint8_t *)l->w + rr * nb * 16, (const uint8_t *)l->scales + rr * nb, nb, 0, wv, &bad))
        return -1;
    *out = dot_f32(wv, x, l->cols);
    return 0;
}

struct mv_ctx {
    const rt_linear *l;
    const float *x;   /* [cols] activation (rotated for TQ) */
    const float *aux; /* TQ: [2^bits] codebook as f32; affine: [ngroups] per-group sums of x */
    const rt_lut *lut;
    float *y;         /* [rows] */
    int nomem;
    int bad_scale;    /* MXFP4: a NaN block scale was met */
};

static void mv_task(void *vctx, uint64_t b, uint64_t en)
{
    struct mv_ctx *c = vctx;
    const rt_linear *l = c->l;
    float *wv = NULL; /* [cols] one unpacked row (quantized kinds) */
    if (l->kind != RT_DENSE && !(wv = malloc(l->cols * sizeof *wv))) {
        c->nomem = 1; /* benign race: every writer stores 1 */
        return;
    }
    for (uint64_t r = b; r < en; r++) {
        float v;
        if (l->kind == RT_TQ)
            v = row_tq(l, r, c->x, c->aux, c->lut, wv);
        else if (l->kind == RT_AFFINE)
            v = row_affine(l, r, c->x, c->aux, c->lut, wv);
        else if (l->kind == RT_MXFP4) {
            if (row_mxfp4(l, r, c->x, wv, &v) != 0)
                c->bad_scale = 1, v = 0; /* benign race: every writer stores 1 */
        }
        else if (l->wdt == TQ_DT_F32)
            v = dot_f32((const float *)l->w + r * l->cols, c->x, l->cols);
        else if (l->wdt == TQ_DT_BF16)
            v = dot_bf16((const uint16_t *)l->w + r * l->cols, c->x, l->cols);
        else
            v = dot_f16((const uint16_t *)l->w + r * l->cols, c->x, l->cols);
        if (l->bias)
            v += rt_load_f(l->biasdt, l->bias, r * (l->rstep ? l->rstep : 1));
        c->y[r] = v;
    }
    free(wv);
}

int rt_matvec(rt_pool *p, const rt_linear *l, const float *x, float *y, rt_scratch *s, tq_err *e)
{
    struct mv_ctx c = {.l = l, .x = x, .y = y};
    float cb[256]; /* [2^bits] TurboQuant codebook as f32 */
    rt_lut lut;
    c.lut = &lut;
    if (l->kind == RT_TQ || l->kind == RT_AFFINE) {
        uint64_t need = l->kind == RT_TQ ? l->cols : l->ngroups;
        if (s->cap < need) {
            float *nx = realloc(s->xr, need * sizeof *nx);
            if (!nx)
                return tq_fail(e, TQ_ENOMEM, "out of memory (%llu activation floats)",
                               (unsigned long long)need);
            s->xr = nx;
            s->cap = need;
        }
    }
    if (l->kind == RT_TQ) {
        /* The activation gets exactly the weights' rotation: signs, then block Hadamard. */
        uint64_t n = (uint64_t)1 << l->bits;
        for (uint64_t i = 0; i < n; i++)
            cb[i] = rt_load_f(l->cdt, l->codebook, i);
        for (uint64_t j = 0; j < l->cols; j++)
            s->xr[j] = x[j] * rt_load_f(l->gdt, l->signs, j);
        if (!l->norot && tq_hadamard_rotate(s->xr, l->cols, NULL, tq_hadamard_block(l->cols)) != 0)
            return tq_fail(e, TQ_EDATA, "no Hadamard block for an input axis of %llu",
                           (unsigned long long)l->cols);
        c.x = s->xr;
        c.aux = cb;
        lut_build(&lut, (uint32_t)l->bits, cb);
    } else if (l->kind == RT_AFFINE) {
        for (uint64_t g = 0; g < l->ngroups; g++) {
            float sum = 0;
            for (uint64_t k = 0; k < l->group; k++)
                sum += x[g * l->group + k];
            s->xr[g] = sum;
        }
        c.aux = s->xr;
        lut_build(&lut, (uint32_t)l->bits, NULL);
    }
    rt_pool_for(p, l->rows, mv_task, &c);
    if (c.nomem)
        return tq_fail(e, TQ_ENOMEM, "out of memory (a row of %llu weights)", (unsigned long long)l->cols);
    if (c.bad_scale)
        return tq_fail(e, TQ_EDATA, "an MXFP4 block of a [%llu, %llu] matrix has scale 255 (E8M0 NaN) or a value beyond f32",
                       (unsigned long long)l->rows, (unsigned long long)l->cols);
    return 0;
}

int rt_linear_row(const rt_linear *l, uint64_t r, float *out, tq_err *e)
{
    if (r >= l->rows)
        return tq_fail(e, TQ_EDATA, "row %llu is outside the matrix (%llu rows)", (unsigned long long)r,
                       (unsigned long long)l->rows);
    if (l->kind == RT_DENSE) {
        const char *base = (const char *)l->w + r * l->cols * tq_dtype_size(l->wdt);
        for (uint64_t j = 0; j < l->cols; j++)
            out[j] = rt_load_f(l->wdt, base, j);
        return 0;
    }
    if (l->kind == RT_MXFP4) {
        uint64_t nb = l->cols / 32, rr = r * (l->rstep ? l->rstep : 1), bad;
        if (tq_mxfp4_decode((const uint8_t *)l->w + rr * nb * 16, (const uint8_t *)l->scales + rr * nb, nb, 0, out, &bad))
            return tq_fail(e, TQ_EDATA, "row %llu: MXFP4 block %llu has scale %u (E8M0 NaN or beyond f32)", (unsigned long long)r,
                           (unsigned long long)bad, (unsigned)((const uint8_t *)l->scales)[rr * nb + bad]);
        return 0;
    }
    const uint32_t *w = (const uint32_t *)l->w + r * l->wpr;
    const uint32_t bits = (uint32_t)l->bits, mask = (1u << bits) - 1, epw = 32 / bits;
    if (l->kind == RT_AFFINE) {
        for (uint64_t j = 0; j < l->cols; j++) {
            uint32_t q = (w[j / epw] >> ((j % epw) * bits)) & mask;
            uint64_t gi = r * l->ngroups + j / l->group;
            out[j] = rt_load_f(l->sdt, l->scales, gi) * (float)q + rt_load_f(l->zdt, l->biases, gi);
        }
        return 0;
    }
    /* TurboQuant: codebook value times the group scale gives the rotated row; the inverse block
     * transform and the signs give the row itself (docs/quantization.md) */
    for (uint64_t j = 0; j < l->cols; j++) {
        uint32_t q = (w[j / epw] >> ((j % epw) * bits)) & mask;
        out[j] = rt_load_f(l->cdt, l->codebook, q) * rt_load_f(l->sdt, l->scales, r * l->ngroups + j / l->group);
    }
    if (tq_hadamard(out, l->cols, tq_hadamard_block(l->cols), 1) != 0)
        return tq_fail(e, TQ_EDATA, "no Hadamard block for an input axis of %llu", (unsigned long long)l->cols);
    for (uint64_t j = 0; j < l->cols; j++)
        out[j] *= rt_load_f(l->gdt, l->signs, j);
    return 0;
}
