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

/* 1 when the matvec kernels take the AVX2 path: the CPU has AVX2 and TQ_NO_SIMD is unset,
 * empty or 0 (TQ_NO_SIMD=1 forces the portable path; both give the same bits). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) /* = RT_AVX2 below */
static int use_simd;
#endif

static void f16_init(void)
{
    for (uint32_t i = 0; i < 65536; i++)
        f16_table[i] = tq_f16_to_f32((uint16_t)i);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const char *v = getenv("TQ_NO_SIMD");
    __builtin_cpu_init();
    use_simd = __builtin_cpu_supports("avx2") && !(v && *v && strcmp(v, "0") != 0);
#endif
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

/* ---- the AVX2 path (x86-64, chosen at run time): the same operations in the same order as
 * the portable path above, so y is bit-identical (tests/cli/run-simd.sh compares the logits
 * of both paths byte for byte). Per group, lane k (k = 0..7) of one 256-bit accumulator holds
 * exactly the portable a[k] (Σ over j ≡ k mod 8 of w·x, a multiply then an add: no FMA), the
 * lanes are combined in lanes_sum's tree, and the groups are accumulated in order with the
 * same expressions as row_tq/row_affine. What is new is only how the work is scheduled: the
 * indices are decoded in registers (codebook lookup by permutes, or the integer itself) instead
 * of through the scratch row, and RB rows are advanced together so that their independent
 * chains of adds overlap; each row's own order is unchanged. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RT_AVX2 1
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))
#define RB 4

AVX2 static inline float hsum8_avx2(__m256 v)
{
    /* hadd pairs neighbours: (a0+a1, a2+a3, a4+a5, a6+a7), then ((a0+a1)+(a2+a3), (a4+a5)+(a6+a7)) */
    __m128 p = _mm_hadd_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    p = _mm_hadd_ps(p, p);
    return _mm_cvtss_f32(p) + _mm_cvtss_f32(_mm_shuffle_ps(p, p, 1));
}

/* Can the fused kernel take l? Groups whole multiples of 8 lanes, 2-, 4- or 8-bit indices. */
static int fused_ok(const rt_linear *l)
{
    if (l->kind != RT_TQ && l->kind != RT_AFFINE)
        return 0;
    if (l->bits != 2 && l->bits != 4 && l->bits != 8)
        return 0;
    return l->group % 8 == 0;
}

/* The 8 values of row w at columns j..j+7 (j a multiple of 8). */
#define DECODE(w, j, out)                                                                      \
    do {                                                                                       \
        __m256i ix_;                                                                           \
        if (bits == 4)                                                                         \
            ix_ = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)(w)[(j) >> 3]), sh4), m4); \
        else if (bits == 2)                                                                    \
            ix_ = _mm256_and_si256(                                                            \
                _mm256_srlv_epi32(_mm256_set1_epi32((int)((w)[(j) >> 4] >> (((j) & 8) ? 16 : 0))), sh2), m2); \
        else {                                                                                 \
            __m128i b_;                                                                        \
            memcpy(&b_, (const uint8_t *)(w) + (j), 8); /* 8 bytes; the upper half unused */    \
            ix_ = _mm256_cvtepu8_epi32(b_);                                                    \
        }                                                                                      \
        if (!tq)                                                                               \
            (out) = _mm256_cvtepi32_ps(ix_);                                                   \
        else if (bits == 4)                                                                    \
            (out) = _mm256_blendv_ps(_mm256_permutevar8x32_ps(cb0, ix_), _mm256_permutevar8x32_ps(cb1, ix_), \
                                     _mm256_castsi256_ps(_mm256_slli_epi32(ix_, 28)));        \
        else if (bits == 2)                                                                    \
            (out) = _mm256_permutevar8x32_ps(cb0, ix_);                                        \
        else                                                                                   \
            (out) = _mm256_i32gather_ps(cb, ix_, 4);                                           \
    } while (0)

/* rt_load_f inlined (the same values: f16 through the same table). */
static inline __attribute__((always_inline)) float load_f_inl(tq_dtype dt, const void *p, uint64_t i)
{
    if (dt == TQ_DT_F16) {
        uint16_t h;
        memcpy(&h, (const char *)p + 2 * i, 2);
        return f16_table[h];
    }
    if (dt == TQ_DT_BF16) {
        uint16_t h;
        memcpy(&h, (const char *)p + 2 * i, 2);
        return bf16f(h);
    }
    return rt_load_f(dt, p, i);
}

/* Rows r..r+nr-1 (nr <= RB) of a fused-eligible matrix into y. nr, tq and bits are constants
 * in the always-inlined copies below, so each copy has a straight inner loop. */
AVX2 static inline __attribute__((always_inline)) void rows_fused(const rt_linear *l, uint64_t r, int nr,
                                                                   const float *x, const float *aux,
                                                                   float *y, const int tq, const int bits)
{
    const float *cb = aux; /* TQ: codebook */
    __m256 cb0 = _mm256_setzero_ps(), cb1 = _mm256_setzero_ps();
    if (tq && bits == 4) {
        cb0 = _mm256_loadu_ps(cb);
        cb1 = _mm256_loadu_ps(cb + 8);
    } else if (tq && bits == 2) {
        cb0 = _mm256_setr_ps(cb[0], cb[1], cb[2], cb[3], 0, 0, 0, 0);
    }
    const __m256i sh4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), m4 = _mm256_set1_epi32(15);
    const __m256i sh2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), m2 = _mm256_set1_epi32(3);
    const uint32_t *w[RB];
    float acc[RB];
    for (int i = 0; i < nr; i++) {
        w[i] = (const uint32_t *)l->w + (r + (uint64_t)i) * l->wpr;
        acc[i] = 0;
    }
    const uint64_t G = l->group, ng = l->ngroups;
    const tq_dtype sdt = l->sdt, zdt = l->zdt;
    for (uint64_t g = 0; g < ng; g++) {
        __m256 a[RB];
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++)
            a[i] = _mm256_setzero_ps();
        /* a prefetch of each row's words 1 KiB ahead (a hint only: no effect on results) */
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++)
            _mm_prefetch((const char *)w[i] + (g * G * (uint64_t)bits) / 8 + 1024, _MM_HINT_T0);
        for (uint64_t j = g * G; j < (g + 1) * G; j += 8) {
            __m256 xv = _mm256_loadu_ps(x + j);
            _Pragma("GCC unroll 4")
            for (int i = 0; i < nr; i++) {
                __m256 wv;
                DECODE(w[i], j, wv);
                a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(wv, xv));
            }
        }
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++) {
            float s = hsum8_avx2(a[i]);
            uint64_t gi = (r + (uint64_t)i) * ng + g;
            if (tq)
                acc[i] += s * load_f_inl(sdt, l->scales, gi);
            else
                acc[i] += load_f_inl(sdt, l->scales, gi) * s + load_f_inl(zdt, l->biases, gi) * aux[g];
        }
    }
    for (int i = 0; i < nr; i++)
        y[i] = acc[i];
}

#define FUSED(TQ, BITS)                                                                          \
    AVX2 static void rows_fused_##TQ##_##BITS(const rt_linear *l, uint64_t r, int nr, const float *x, \
                                              const float *aux, float *y)                        \
    {                                                                                            \
        if (nr == RB)                                                                            \
            rows_fused(l, r, RB, x, aux, y, TQ, BITS);                                           \
        else                                                                                     \
            rows_fused(l, r, 1, x, aux, y, TQ, BITS);                                            \
    }
FUSED(1, 2)
FUSED(1, 4)
FUSED(1, 8)
FUSED(0, 2)
FUSED(0, 4)
FUSED(0, 8)

/* Dense rows: dot_f32/dot_bf16 of RB rows at once, the tail (n mod 8) into lanes 0.. as there. */
AVX2 static inline __attribute__((always_inline)) void rows_dense(const rt_linear *l, uint64_t r, int nr,
                                                                   const float *x, float *y)
{
    const uint64_t n = l->cols;
    const int bf = l->wdt == TQ_DT_BF16;
    __m256 a[RB];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < nr; i++)
        a[i] = _mm256_setzero_ps();
    uint64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 xv = _mm256_loadu_ps(x + j);
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++) {
            __m256 wv;
            if (bf) {
                __m128i h;
                memcpy(&h, (const uint16_t *)l->w + (r + (uint64_t)i) * n + j, 16);
                wv = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
            } else {
                wv = _mm256_loadu_ps((const float *)l->w + (r + (uint64_t)i) * n + j);
            }
            a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(wv, xv));
        }
    }
    for (int i = 0; i < nr; i++) {
        float t[8];
        _mm256_storeu_ps(t, a[i]);
        for (uint64_t jj = j, k = 0; jj < n; jj++, k++)
            t[k] += (bf ? bf16f(((const uint16_t *)l->w)[(r + (uint64_t)i) * n + jj])
                        : ((const float *)l->w)[(r + (uint64_t)i) * n + jj]) * x[jj];
        y[i] = lanes_sum(t);
    }
}

AVX2 static void rows_dense_4(const rt_linear *l, uint64_t r, const float *x, float *y)
{
    rows_dense(l, r, 4, x, y);
}

AVX2 static void rows_dense_1(const rt_linear *l, uint64_t r, const float *x, float *y)
{
    rows_dense(l, r, 1, x, y);
}

/* Rows [b, en) by the AVX2 kernels when they take l (then 1, else 0), bias added as mv_task does. */
static int mv_rows_avx2(const rt_linear *l, uint64_t b, uint64_t en, const float *x, const float *aux, float *y)
{
    int dense = l->kind == RT_DENSE && (l->wdt == TQ_DT_F32 || l->wdt == TQ_DT_BF16);
    if (!dense && !fused_ok(l))
        return 0;
    void (*fused)(const rt_linear *, uint64_t, int, const float *, const float *, float *) = NULL;
    if (!dense) {
        int tq = l->kind == RT_TQ;
        fused = l->bits == 2 ? (tq ? rows_fused_1_2 : rows_fused_0_2)
                : l->bits == 4 ? (tq ? rows_fused_1_4 : rows_fused_0_4)
                               : (tq ? rows_fused_1_8 : rows_fused_0_8);
    }
    uint64_t r = b;
    for (; r + RB <= en; r += RB)
        dense ? rows_dense_4(l, r, x, y + r) : fused(l, r, RB, x, aux, y + r);
    for (; r < en; r++)
        dense ? rows_dense_1(l, r, x, y + r) : fused(l, r, 1, x, aux, y + r);
    if (l->bias)
        for (r = b; r < en; r++)
            y[r] += rt_load_f(l->biasdt, l->bias, r * (l->rstep ? l->rstep : 1));
    return 1;
}
#endif

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
#ifdef RT_AVX2
    if (use_simd && mv_rows_avx2(l, b, en, c->x, c->aux, c->y))
        return;
#endif
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
