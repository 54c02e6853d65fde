/* Matrix-vector kernels for every weight kind. One output row is always computed whole by
 * one thread with a fixed summation order, so y is identical for any thread count and for
 * resident and streamed weights (same bytes, same code). */
#include "runtime/rt_internal.h"
#include "quant/quant.h"

#include <math.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

/* Which matvec kernels run: 0 the portable C ones; 1 AVX2 (x86-64) or NEON (arm64); 2 AVX2
 * and AVX-512F. The best the CPU has, unless TQ_NO_SIMD is set (not empty and not 0: the
 * portable path) or TQ_NO_AVX512 is (at most AVX2). Every level gives the same bits. */
static int simd_level, simd_hw;

static void f16_init(void)
{
    for (uint32_t i = 0; i < 65536; i++)
        f16_table[i] = tq_f16_to_f32((uint16_t)i);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    /* F16C by CPUID leaf 1, ECX bit 29 (bit_F16C of <cpuid.h>): clang 14's
     * __builtin_cpu_supports does not know "f16c". */
    unsigned int c1a = 0, c1b = 0, c1c = 0, c1d = 0;
    int f16c = __get_cpuid(1, &c1a, &c1b, &c1c, &c1d) && (c1c & bit_F16C);
    if (__builtin_cpu_supports("avx2") && f16c)
        simd_hw = __builtin_cpu_supports("avx512f") ? 2 : 1;
#elif defined(__aarch64__) && defined(__ARM_NEON)
    simd_hw = 1;
#endif
    const char *v = getenv("TQ_NO_SIMD"), *v5 = getenv("TQ_NO_AVX512");
    simd_level = simd_hw;
    if (v5 && *v5 && strcmp(v5, "0") != 0 && simd_level > 1)
        simd_level = 1;
    if (v && *v && strcmp(v, "0") != 0)
        simd_level = 0;
}

int rt_kernels_simd(int max)
{
    rt_kernels_init();
    if (max >= 0)
        simd_level = max < simd_hw ? max : simd_hw;
    return simd_level;
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

#if (defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))) || (defined(__aarch64__) && defined(__ARM_NEON))
/* ---- shared by the SIMD paths below */
#define INL inline __attribute__((always_inline))

/* rt_load_f inlined (the same values: f16 through the same table). */
static INL float load_f_inl(tq_dtype dt, const void *p, uint64_t i)
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

/* One row's term of group gi, from s, its sum of weight x activation over the group, in the
 * order every path uses (docs/runtime.md, matvec summation orders): TurboQuant s * scale;
 * affine scale * s + bias * auxg (auxg: the group's activation sum). */
static INL float group1(const rt_linear *l, uint64_t gi, float s, float auxg, int tq)
{
    return tq ? s * load_f_inl(l->sdt, l->scales, gi)
              : load_f_inl(l->sdt, l->scales, gi) * s + load_f_inl(l->zdt, l->biases, gi) * auxg;
}
#endif

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

/* ---- the x86-64 paths (AVX2, and AVX-512F where the CPU has it; chosen at run time): the
 * same operations in the same order as the portable path above, so y is bit-identical
 * (tests/unit/test_kernels.c compares every path with the portable one on random rows, and
 * tests/cli/run-simd.sh the logits of whole decodes). Per group, lane k (k = 0..7) of one
 * 8-float accumulator holds exactly the portable a[k] (Σ over j ≡ k mod 8 of w·x, a multiply
 * then an add: no FMA), the lanes are combined in lanes_sum's tree, and the groups are
 * accumulated in order with the same expressions as row_tq/row_affine. What is new is only how
 * the work is scheduled: the indices are decoded in registers (codebook lookup by permutes, or
 * the integer itself) instead of through the scratch row, several rows are advanced together
 * so that their independent chains of adds overlap (AVX-512: two rows per 16-float register,
 * row A in lanes 0-7 and row B in lanes 8-15), and the lane trees of four rows are summed
 * together by horizontal adds that pair the same lanes as lanes_sum. Each row's own order is
 * unchanged. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RT_AVX2 1
#define RT_SIMD 1
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))
#define AVX512 __attribute__((target("avx512f,avx2,f16c")))
#define RB 4
/* Each row's words are prefetched one block of 8 rows ahead (the same place in row r+8): the
 * rows of a block are read side by side, so the next block's rows are the next bytes the
 * kernel needs. A hint only: no effect on results. Measured on the benchmark's model
 * (docs/runtime.md): 14 ms of CPU per token against 16-17 ms with 1 KiB ahead, 19 ms with none. */
#define PF_AHEAD(l) (8 * (l)->wpr * 4)

AVX2 static INL float hsum8_avx2(__m256 v)
{
    /* hadd pairs neighbours: (a0+a1, a2+a3, a4+a5, a6+a7), then ((a0+a1)+(a2+a3), (a4+a5)+(a6+a7)) */
    __m128 p = _mm_hadd_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    p = _mm_hadd_ps(p, p);
    return _mm_cvtss_f32(p) + _mm_cvtss_f32(_mm_shuffle_ps(p, p, 1));
}

/* lanes_sum of four rows' accumulators at once: hadd(hadd(v0, v1), hadd(v2, v3)) holds
 * ((a0+a1)+(a2+a3)) of rows 0..3 in its low half and ((a4+a5)+(a6+a7)) in its high half. */
AVX2 static INL __m128 hsum8x4_avx2(__m256 v0, __m256 v1, __m256 v2, __m256 v3)
{
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* Which kernel takes l: 0 none (portable), else one of these. */
enum { K_NONE, K_DENSE, K_FUSED, K_TQ3, K_MXFP4 };
static int x86_kernel(const rt_linear *l)
{
    if (l->kind == RT_DENSE)
        return l->wdt == TQ_DT_F32 || l->wdt == TQ_DT_BF16 || l->wdt == TQ_DT_F16 ? K_DENSE : K_NONE;
    if (l->kind == RT_MXFP4)
        return l->cols % 32 == 0 ? K_MXFP4 : K_NONE;
    if ((l->kind != RT_TQ && l->kind != RT_AFFINE) || l->group % 8 != 0)
        return K_NONE;
    if (l->bits == 2 || l->bits == 4 || l->bits == 8)
        return K_FUSED;
    return l->kind == RT_TQ && l->bits == 3 ? K_TQ3 : K_NONE;
}

/* The 8 values of row w at columns j..j+7 (j a multiple of 8). The TurboQuant lookups need no
 * mask: vpermps reads only the index's low 3 bits, and the 4-bit blend only bit 3 (moved to the
 * sign by the shift left); the 2-bit codebook is repeated twice so bit 2 does not matter. */
#define DECODE(w, j, out)                                                                      \
    do {                                                                                       \
        __m256i ix_;                                                                           \
        if (bits == 4)                                                                         \
            ix_ = _mm256_srlv_epi32(_mm256_set1_epi32((int)(w)[(j) >> 3]), sh4);               \
        else if (bits == 2)                                                                    \
            ix_ = _mm256_srlv_epi32(_mm256_set1_epi32((int)((w)[(j) >> 4] >> (((j) & 8) ? 16 : 0))), sh2); \
        else {                                                                                 \
            __m128i b_;                                                                        \
            memcpy(&b_, (const uint8_t *)(w) + (j), 8); /* 8 bytes; the upper half unused */    \
            ix_ = _mm256_cvtepu8_epi32(b_);                                                    \
        }                                                                                      \
        if (!tq)                                                                               \
            (out) = _mm256_cvtepi32_ps(bits == 8 ? ix_ : _mm256_and_si256(ix_, bits == 4 ? m4 : m2)); \
        else if (bits == 4)                                                                    \
            (out) = _mm256_blendv_ps(_mm256_permutevar8x32_ps(cb0, ix_), _mm256_permutevar8x32_ps(cb1, ix_), \
                                     _mm256_castsi256_ps(_mm256_slli_epi32(ix_, 28)));        \
        else if (bits == 2)                                                                    \
            (out) = _mm256_permutevar8x32_ps(cb0, ix_);                                        \
        else                                                                                   \
            (out) = _mm256_i32gather_ps(cb, ix_, 4);                                           \
    } while (0)


/* Group g's scale (and bias) of rows r..r+3 as one vector, and acc += the group's terms
 * exactly as row_tq (acc + s·scale) and row_affine (acc + (scale·s + bias·gsum)) write them. */
AVX2 static INL __m128 group4_avx2(const rt_linear *l, uint64_t r, uint64_t g, __m128 acc, __m128 s,
                                   const float *aux, int tq)
{
    const uint64_t ng = l->ngroups;
    __m128 sc = _mm_setr_ps(load_f_inl(l->sdt, l->scales, r * ng + g), load_f_inl(l->sdt, l->scales, (r + 1) * ng + g),
                            load_f_inl(l->sdt, l->scales, (r + 2) * ng + g), load_f_inl(l->sdt, l->scales, (r + 3) * ng + g));
    if (tq)
        return _mm_add_ps(acc, _mm_mul_ps(s, sc));
    __m128 bi = _mm_setr_ps(load_f_inl(l->zdt, l->biases, r * ng + g), load_f_inl(l->zdt, l->biases, (r + 1) * ng + g),
                            load_f_inl(l->zdt, l->biases, (r + 2) * ng + g), load_f_inl(l->zdt, l->biases, (r + 3) * ng + g));
    return _mm_add_ps(acc, _mm_add_ps(_mm_mul_ps(sc, s), _mm_mul_ps(bi, _mm_set1_ps(aux[g]))));
}

/* Rows r..r+nr-1 (nr 1 or RB) of a K_FUSED matrix into y. nr, tq and bits are constants in the
 * always-inlined copies below, so each copy has a straight inner loop. */
AVX2 static INL void rows_fused(const rt_linear *l, uint64_t r, int nr, const float *x, const float *aux,
                                float *y, const int tq, const int bits)
{
    const float *cb = aux; /* TQ: codebook */
    __m256 cb0 = _mm256_setzero_ps(), cb1 = _mm256_setzero_ps();
    if (tq && bits == 4) {
        cb0 = _mm256_loadu_ps(cb);
        cb1 = _mm256_loadu_ps(cb + 8);
    } else if (tq && bits == 2) {
        cb0 = _mm256_setr_ps(cb[0], cb[1], cb[2], cb[3], cb[0], cb[1], cb[2], cb[3]);
    }
    const __m256i sh4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), m4 = _mm256_set1_epi32(15);
    const __m256i sh2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), m2 = _mm256_set1_epi32(3);
    const uint32_t *w[RB];
    float acc1 = 0;
    __m128 acc4 = _mm_setzero_ps();
    for (int i = 0; i < nr; i++)
        w[i] = (const uint32_t *)l->w + (r + (uint64_t)i) * l->wpr;
    const uint64_t G = l->group, ng = l->ngroups;
    for (uint64_t g = 0; g < ng; g++) {
        __m256 a[RB];
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++)
            a[i] = _mm256_setzero_ps();
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++)
            _mm_prefetch((const char *)w[i] + (g * G * (uint64_t)bits) / 8 + PF_AHEAD(l), _MM_HINT_T0);
        for (uint64_t j = g * G; j < (g + 1) * G; j += 8) {
            __m256 xv = _mm256_loadu_ps(x + j);
            _Pragma("GCC unroll 4")
            for (int i = 0; i < nr; i++) {
                __m256 wv;
                DECODE(w[i], j, wv);
                a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(wv, xv));
            }
        }
        if (nr == RB) {
            acc4 = group4_avx2(l, r, g, acc4, hsum8x4_avx2(a[0], a[1], a[2], a[3]), aux, tq);
        } else {
            float s = hsum8_avx2(a[0]);
            acc1 += group1(l, r * ng + g, s, tq ? 0.0f : aux[g], tq);
        }
    }
    if (nr == RB)
        _mm_storeu_ps(y, acc4);
    else
        y[0] = acc1;
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

/* TurboQuant 3-bit: ten indices per word (bits 30-31 unused), so the lanes of a block of 8
 * columns come from one or two words, in a pattern that repeats every 40 columns (5 blocks).
 * For block b (b = (j/8) mod 5) lane k reads word (j+k)/10, at bit 3·((j+k) mod 10): the two
 * words j/10 and j/10+1 are broadcast as one 64-bit pair, vpermd picks each lane's word, vpsrlvd
 * its bits, and vpermps the codebook entry (it reads the low 3 bits, so no mask). */
static const int32_t tq3_sel[5][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1, 1},
    {0, 0, 0, 0, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0}};
static const int32_t tq3_sh[5][8] = {
    {0, 3, 6, 9, 12, 15, 18, 21}, {24, 27, 0, 3, 6, 9, 12, 15}, {18, 21, 24, 27, 0, 3, 6, 9},
    {12, 15, 18, 21, 24, 27, 0, 3}, {6, 9, 12, 15, 18, 21, 24, 27}};

AVX2 static INL __m256 tq3_decode(const uint32_t *w, uint64_t wpr, uint64_t j, __m256 cb0)
{
    uint64_t k = j / 10;
    int b = (int)((j / 8) % 5);
    __m256i pair;
    if (k + 1 < wpr) {
        uint64_t two;
        memcpy(&two, w + k, 8);
        pair = _mm256_set1_epi64x((long long)two);
    } else { /* the row's last word: never read past it */
        pair = _mm256_set1_epi32((int)w[k]);
    }
    __m256i ix = _mm256_permutevar8x32_epi32(pair, _mm256_loadu_si256((const __m256i *)tq3_sel[b]));
    ix = _mm256_srlv_epi32(ix, _mm256_loadu_si256((const __m256i *)tq3_sh[b]));
    return _mm256_permutevar8x32_ps(cb0, ix);
}

AVX2 static INL void rows_tq3(const rt_linear *l, uint64_t r, int nr, const float *x, const float *cb, float *y)
{
    const __m256 cb0 = _mm256_loadu_ps(cb);
    const uint32_t *w[RB];
    float acc1 = 0;
    __m128 acc4 = _mm_setzero_ps();
    for (int i = 0; i < nr; i++)
        w[i] = (const uint32_t *)l->w + (r + (uint64_t)i) * l->wpr;
    const uint64_t G = l->group, ng = l->ngroups;
    for (uint64_t g = 0; g < ng; g++) {
        __m256 a[RB];
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++) {
            a[i] = _mm256_setzero_ps();
            _mm_prefetch((const char *)(w[i] + (g * G) / 10) + PF_AHEAD(l), _MM_HINT_T0);
        }
        for (uint64_t j = g * G; j < (g + 1) * G; j += 8) {
            __m256 xv = _mm256_loadu_ps(x + j);
            _Pragma("GCC unroll 4")
            for (int i = 0; i < nr; i++)
                a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(tq3_decode(w[i], l->wpr, j, cb0), xv));
        }
        if (nr == RB) {
            acc4 = group4_avx2(l, r, g, acc4, hsum8x4_avx2(a[0], a[1], a[2], a[3]), NULL, 1);
        } else {
            acc1 += hsum8_avx2(a[0]) * load_f_inl(l->sdt, l->scales, r * ng + g);
        }
    }
    if (nr == RB)
        _mm_storeu_ps(y, acc4);
    else
        y[0] = acc1;
}

AVX2 static void rows_tq3_4(const rt_linear *l, uint64_t r, const float *x, const float *cb, float *y)
{
    rows_tq3(l, r, RB, x, cb, y);
}

AVX2 static void rows_tq3_1(const rt_linear *l, uint64_t r, const float *x, const float *cb, float *y)
{
    rows_tq3(l, r, 1, x, cb, y);
}

/* MXFP4 rows: dot_f32 over the decoded row. Eight values are one 32-bit word of nibbles in
 * order (element 2j in the low nibble of byte j), decoded as TurboQuant 4-bit with ggml's
 * doubled E2M1 levels as the codebook, then multiplied by the block's 2^(e-128): the same
 * exact product as tq_mxfp4_block. A row with a block exponent above 252 (where 12·2^(e-128)
 * may overflow, or e = 255) goes to row_mxfp4, which reports it. */
static const float mx_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

AVX2 static void row_mxfp4_simd(const rt_linear *l, uint64_t r, const float *x, float *out)
{
    uint64_t nb = l->cols / 32, rr = r * (l->rstep ? l->rstep : 1);
    const uint8_t *sc = (const uint8_t *)l->scales + rr * nb;
    const uint32_t *w = (const uint32_t *)((const uint8_t *)l->w + rr * nb * 16);
    const __m256 cb0 = _mm256_loadu_ps(mx_levels), cb1 = _mm256_loadu_ps(mx_levels + 8);
    const __m256i sh4 = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    __m256 a = _mm256_setzero_ps();
    for (uint64_t b = 0; b < nb; b++) {
        const __m256 d = _mm256_set1_ps(tq_e8m0_half(sc[b]));
        _mm_prefetch((const char *)(w + 4 * b) + 1024, _MM_HINT_T0);
        for (int q = 0; q < 4; q++) {
            uint32_t word;
            memcpy(&word, w + 4 * b + q, 4);
            __m256i ix = _mm256_srlv_epi32(_mm256_set1_epi32((int)word), sh4);
            __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(cb0, ix), _mm256_permutevar8x32_ps(cb1, ix),
                                        _mm256_castsi256_ps(_mm256_slli_epi32(ix, 28)));
            a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_mul_ps(v, d), _mm256_loadu_ps(x + 32 * b + 8 * q)));
        }
    }
    *out = hsum8_avx2(a);
}

static int mxfp4_row_plain(const rt_linear *l, uint64_t r)
{
    uint64_t nb = l->cols / 32, rr = r * (l->rstep ? l->rstep : 1);
    const uint8_t *sc = (const uint8_t *)l->scales + rr * nb;
    for (uint64_t b = 0; b < nb; b++)
        if (sc[b] > 252)
            return 0;
    return 1;
}

/* Dense rows: dot_f32/dot_bf16/dot_f16 of RB rows at once, the tail (n mod 8) into lanes 0.. as
 * there. f16 is widened by vcvtph2ps, which gives every one of the 65536 halves the same f32
 * bits as f16_table (tests/unit/test_kernels.c checks all of them). */
AVX2 static INL __m256 dense8(const rt_linear *l, uint64_t row, uint64_t j, int dt)
{
    if (dt == TQ_DT_F32)
        return _mm256_loadu_ps((const float *)l->w + row * l->cols + j);
    __m128i h;
    memcpy(&h, (const uint16_t *)l->w + row * l->cols + j, 16);
    if (dt == TQ_DT_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

AVX2 static INL void rows_dense(const rt_linear *l, uint64_t r, int nr, const float *x, float *y, const int dt)
{
    const uint64_t n = l->cols;
    __m256 a[RB];
    _Pragma("GCC unroll 4")
    for (int i = 0; i < nr; i++)
        a[i] = _mm256_setzero_ps();
    uint64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 xv = _mm256_loadu_ps(x + j);
        _Pragma("GCC unroll 4")
        for (int i = 0; i < nr; i++)
            a[i] = _mm256_add_ps(a[i], _mm256_mul_ps(dense8(l, r + (uint64_t)i, j, dt), xv));
    }
    for (int i = 0; i < nr; i++) {
        float t[8];
        _mm256_storeu_ps(t, a[i]);
        for (uint64_t jj = j, k = 0; jj < n; jj++, k++)
            t[k] += rt_load_f(l->wdt, l->w, (r + (uint64_t)i) * n + jj) * x[jj];
        y[i] = lanes_sum(t);
    }
}

#define DENSE(DT, NAME)                                                                  \
    AVX2 static void rows_dense_##NAME(const rt_linear *l, uint64_t r, int nr, const float *x, float *y) \
    {                                                                                    \
        if (nr == RB)                                                                    \
            rows_dense(l, r, RB, x, y, DT);                                              \
        else                                                                             \
            rows_dense(l, r, 1, x, y, DT);                                               \
    }
DENSE(TQ_DT_F32, f32)
DENSE(TQ_DT_BF16, bf16)
DENSE(TQ_DT_F16, f16)

/* lanes_sum of 8 rows held two per 16-float register (a[p]: row 2p in lanes 0-7, row 2p+1 in
 * lanes 8-15), with in-lane shuffles instead of hadds: vshufps 0x88 / 0xDD take the even and
 * the odd lanes of two registers, so their sum pairs neighbours (a0+a1, a2+a3, ...) of each
 * row; the second level pairs those ((a0+a1)+(a2+a3), (a4+a5)+(a6+a7)), and vshuff32x4 meets
 * the two halves. The result is in the order rows 0, 2, 4, 6, 1, 3, 5, 7 (RT512_LANE). */
#define RT512_LANE(i) (((i) & 1) * 4 + (i) / 2)
AVX512 static INL __m256 hsum8x8_512(const __m512 *a)
{
    __m512 t01 = _mm512_add_ps(_mm512_shuffle_ps(a[0], a[1], 0x88), _mm512_shuffle_ps(a[0], a[1], 0xDD));
    __m512 t23 = _mm512_add_ps(_mm512_shuffle_ps(a[2], a[3], 0x88), _mm512_shuffle_ps(a[2], a[3], 0xDD));
    /* 128-bit lanes of v: rows 0,2,4,6 lanes 0-3 summed | the same rows' lanes 4-7 | rows 1,3,5,7 ... */
    __m512 v = _mm512_add_ps(_mm512_shuffle_ps(t01, t23, 0x88), _mm512_shuffle_ps(t01, t23, 0xDD));
    __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_castps512_ps256(s);
}

/* Group g's scales (or affine biases) of rows r..r+7 in RT512_LANE order. */
AVX512 static INL __m256 scales8(const void *p, tq_dtype dt, uint64_t r, uint64_t ng, uint64_t g)
{
    return _mm256_setr_ps(load_f_inl(dt, p, r * ng + g), load_f_inl(dt, p, (r + 2) * ng + g),
                          load_f_inl(dt, p, (r + 4) * ng + g), load_f_inl(dt, p, (r + 6) * ng + g),
                          load_f_inl(dt, p, (r + 1) * ng + g), load_f_inl(dt, p, (r + 3) * ng + g),
                          load_f_inl(dt, p, (r + 5) * ng + g), load_f_inl(dt, p, (r + 7) * ng + g));
}

/* Group g's terms of rows r..r+7 (s in RT512_LANE order) added to acc as group4_avx2, row_tq
 * and row_affine write them: acc + s·scale, or acc + (scale·s + bias·gsum). */
AVX512 static INL __m256 group8_512(const rt_linear *l, uint64_t r, uint64_t g, __m256 acc, __m256 s,
                                    const float *aux, int tq)
{
    const uint64_t ng = l->ngroups;
    __m256 sc = scales8(l->scales, l->sdt, r, ng, g);
    if (tq)
        return _mm256_add_ps(acc, _mm256_mul_ps(s, sc));
    return _mm256_add_ps(acc, _mm256_add_ps(_mm256_mul_ps(sc, s), _mm256_mul_ps(scales8(l->biases, l->zdt, r, ng, g),
                                                                           _mm256_set1_ps(aux[g]))));
}

AVX512 static INL void store8_512(float *y, __m256 acc)
{
    float t[8];
    _mm256_storeu_ps(t, acc);
    for (int i = 0; i < 8; i++)
        y[i] = t[RT512_LANE(i)];
}

/* AVX-512F: 8 rows of a K_FUSED 2- or 4-bit matrix, two per 16-float register (rows r+2p in
 * lanes 0-7, r+2p+1 in lanes 8-15), each lane the portable a[k] of its row. One vpermps over
 * 16 entries looks up a 4-bit codebook (the 2-bit one repeated four times: only the index's
 * low 4 bits are read), so a block of 8 columns of two rows costs one broadcast, one masked
 * broadcast, one shift, one permute, a multiply and an add. */
AVX512 static INL void rows512(const rt_linear *l, uint64_t r, const float *x, const float *aux, float *y,
                               const int tq, const int bits)
{
    __m512 cbz = _mm512_setzero_ps();
    if (tq && bits == 4)
        cbz = _mm512_loadu_ps(aux);
    else if (tq)
        cbz = _mm512_broadcast_f32x4(_mm_loadu_ps(aux));
    const __m512i sh = bits == 4 ? _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28)
                                 : _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i m = _mm512_set1_epi32(bits == 4 ? 15 : 3);
    const uint32_t *w[8];
    for (int i = 0; i < 8; i++)
        w[i] = (const uint32_t *)l->w + (r + (uint64_t)i) * l->wpr;
    __m256 acc = _mm256_setzero_ps();
    const uint64_t G = l->group, ng = l->ngroups;
    for (uint64_t g = 0; g < ng; g++) {
        __m512 a[4];
        _Pragma("GCC unroll 8")
        for (int i = 0; i < 8; i++)
            _mm_prefetch((const char *)w[i] + (g * G * (uint64_t)bits) / 8 + PF_AHEAD(l), _MM_HINT_T0);
        _Pragma("GCC unroll 4")
        for (int p = 0; p < 4; p++)
            a[p] = _mm512_setzero_ps();
        for (uint64_t j = g * G; j < (g + 1) * G; j += 8) {
            __m512 xv = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(x + j))));
            _Pragma("GCC unroll 4")
            for (int p = 0; p < 4; p++) {
                uint32_t wa, wb;
                if (bits == 4) {
                    wa = w[2 * p][j >> 3];
                    wb = w[2 * p + 1][j >> 3];
                } else {
                    wa = w[2 * p][j >> 4] >> ((j & 8) << 1);
                    wb = w[2 * p + 1][j >> 4] >> ((j & 8) << 1);
                }
                __m512i v = _mm512_mask_set1_epi32(_mm512_set1_epi32((int)wa), 0xFF00, (int)wb);
                v = _mm512_srlv_epi32(v, sh);
                __m512 wv = tq ? _mm512_permutexvar_ps(v, cbz) : _mm512_cvtepi32_ps(_mm512_and_si512(v, m));
                a[p] = _mm512_add_ps(a[p], _mm512_mul_ps(wv, xv));
            }
        }
        acc = group8_512(l, r, g, acc, hsum8x8_512(a), aux, tq);
    }
    store8_512(y, acc);
}

#define FUSED512(TQ, BITS)                                                                        \
    AVX512 static void rows512_##TQ##_##BITS(const rt_linear *l, uint64_t r, const float *x, const float *aux, \
                                             float *y)                                            \
    {                                                                                             \
        rows512(l, r, x, aux, y, TQ, BITS);                                                       \
    }
FUSED512(1, 2)
FUSED512(1, 4)
FUSED512(0, 2)
FUSED512(0, 4)


/* AVX-512F, TurboQuant 3-bit: 8 rows, two per register as above. Each row's word pair
 * (j/10, j/10+1) is broadcast as one 64-bit value (row B's into the upper half by a masked
 * broadcast), vpermd picks each lane's word (tq3_sel, +8 for row B), vpsrlvd its bits, and
 * vpermps over the codebook repeated twice (it reads the low 4 bits) the value. */
static const int32_t tq3_sel16[5][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8}, {0, 0, 1, 1, 1, 1, 1, 1, 8, 8, 9, 9, 9, 9, 9, 9},
    {0, 0, 0, 0, 1, 1, 1, 1, 8, 8, 8, 8, 9, 9, 9, 9}, {0, 0, 0, 0, 0, 0, 1, 1, 8, 8, 8, 8, 8, 8, 9, 9},
    {0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8}};

AVX512 static INL long long tq3_pair(const uint32_t *w, uint64_t k, uint64_t wpr, int last)
{
    uint64_t two = w[k];
    if (!last || k + 1 < wpr) /* the matrix's last word: never read past it */
        memcpy(&two, w + k, 8);
    return (long long)two;
}

/* last: the block holds the matrix's last row, whose last word has no word after it (in the
 * other rows that word is the next row's first, read but not used). */
AVX512 static INL void rows512_tq3(const rt_linear *l, uint64_t r, const float *x, const float *cb, float *y,
                                   const int last)
{
    const __m512 cbz = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(cb))));
    const uint32_t *w[8];
    for (int i = 0; i < 8; i++)
        w[i] = (const uint32_t *)l->w + (r + (uint64_t)i) * l->wpr;
    __m256 acc = _mm256_setzero_ps();
    const uint64_t G = l->group, ng = l->ngroups, wpr = l->wpr;
    for (uint64_t g = 0; g < ng; g++) {
        __m512 a[4];
        _Pragma("GCC unroll 8")
        for (int i = 0; i < 8; i++)
            _mm_prefetch((const char *)(w[i] + (g * G) / 10) + PF_AHEAD(l), _MM_HINT_T0);
        _Pragma("GCC unroll 4")
        for (int p = 0; p < 4; p++)
            a[p] = _mm512_setzero_ps();
        for (uint64_t j = g * G; j < (g + 1) * G; j += 8) {
            __m512 xv = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(x + j))));
            const uint64_t k = j / 10;
            const int b = (int)((j / 8) % 5);
            const __m512i sel = _mm512_loadu_si512(tq3_sel16[b]);
            const __m256i sh8 = _mm256_loadu_si256((const __m256i *)tq3_sh[b]);
            const __m512i sh = _mm512_inserti64x4(_mm512_castsi256_si512(sh8), sh8, 1);
            _Pragma("GCC unroll 4")
            for (int p = 0; p < 4; p++) {
                __m512i v = _mm512_mask_set1_epi64(_mm512_set1_epi64(tq3_pair(w[2 * p], k, wpr, 0)), 0xF0,
                                                   tq3_pair(w[2 * p + 1], k, wpr, last && p == 3));
                v = _mm512_srlv_epi32(_mm512_permutexvar_epi32(sel, v), sh);
                a[p] = _mm512_add_ps(a[p], _mm512_mul_ps(_mm512_permutexvar_ps(v, cbz), xv));
            }
        }
        acc = group8_512(l, r, g, acc, hsum8x8_512(a), NULL, 1);
    }
    store8_512(y, acc);
}

AVX512 static void rows512_tq3_mid(const rt_linear *l, uint64_t r, const float *x, const float *cb, float *y)
{
    rows512_tq3(l, r, x, cb, y, 0);
}

AVX512 static void rows512_tq3_last(const rt_linear *l, uint64_t r, const float *x, const float *cb, float *y)
{
    rows512_tq3(l, r, x, cb, y, 1);
}

/* Rows [b, en) by the x86 kernels when they take l (then 1, else 0), bias added as mv_task does.
 * AVX-512 takes blocks of 8 rows of 2-, 3- and 4-bit matrices, AVX2 the rest by 4 rows, then 1. */
static int mv_rows_simd(const rt_linear *l, uint64_t b, uint64_t en, const float *x, const float *aux, float *y)
{
    const int k = x86_kernel(l);
    if (k == K_NONE)
        return 0;
    uint64_t r = b;
    if (k == K_FUSED) {
        int tq = l->kind == RT_TQ;
        if (simd_level >= 2 && l->bits != 8) {
            void (*f512)(const rt_linear *, uint64_t, const float *, const float *, float *) =
                l->bits == 2 ? (tq ? rows512_1_2 : rows512_0_2) : (tq ? rows512_1_4 : rows512_0_4);
            for (; r + 8 <= en; r += 8)
                f512(l, r, x, aux, y + r);
        }
        void (*fused)(const rt_linear *, uint64_t, int, const float *, const float *, float *) =
            l->bits == 2 ? (tq ? rows_fused_1_2 : rows_fused_0_2)
            : l->bits == 4 ? (tq ? rows_fused_1_4 : rows_fused_0_4)
                           : (tq ? rows_fused_1_8 : rows_fused_0_8);
        for (; r + RB <= en; r += RB)
            fused(l, r, RB, x, aux, y + r);
        for (; r < en; r++)
            fused(l, r, 1, x, aux, y + r);
    } else if (k == K_TQ3) {
        if (simd_level >= 2)
            for (; r + 8 <= en; r += 8)
                (r + 8 < l->rows ? rows512_tq3_mid : rows512_tq3_last)(l, r, x, aux, y + r);
        for (; r + RB <= en; r += RB)
            rows_tq3_4(l, r, x, aux, y + r);
        for (; r < en; r++)
            rows_tq3_1(l, r, x, aux, y + r);
    } else if (k == K_DENSE) {
        void (*dense)(const rt_linear *, uint64_t, int, const float *, float *) =
            l->wdt == TQ_DT_F32 ? rows_dense_f32 : l->wdt == TQ_DT_BF16 ? rows_dense_bf16 : rows_dense_f16;
        for (; r + RB <= en; r += RB)
            dense(l, r, RB, x, y + r);
        for (; r < en; r++)
            dense(l, r, 1, x, y + r);
    } else {
        return -1; /* MXFP4: mv_task takes it row by row */
    }
    if (l->bias)
        for (r = b; r < en; r++)
            y[r] += rt_load_f(l->biasdt, l->bias, r * (l->rstep ? l->rstep : 1));
    return 1;
}
#endif

/* ---- the NEON path (arm64): the portable order again, with the 8 lanes of lanes_sum in two
 * 4-float registers (lanes 0-3 and 4-7), a multiply then an add per lane (vmulq_f32 and
 * vaddq_f32; the build's -ffp-contract=off keeps them unfused), and the lanes met by pairwise
 * adds: vpaddq(lo, hi) = (a0+a1, a2+a3, a4+a5, a6+a7), and for four rows
 * vpaddq(vpaddq(p0, p1), vpaddq(p2, p3)) = ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7)) of each row,
 * lanes_sum's tree. Indices are decoded by vector shifts and masks; the codebook (or MXFP4's
 * levels) is looked up as bytes by one vqtbl4q_u8 over its 16 floats. Equality with the
 * portable path is tested under qemu-user (make check-arm64, tests/unit/test_kernels.c); its
 * speed was never measured (no arm64 hardware here). */
#if defined(__aarch64__) && defined(__ARM_NEON)
#define RT_SIMD 1
#include <arm_neon.h>

#define RN 4

static INL float hsum8_neon(float32x4_t lo, float32x4_t hi)
{
    float32x4_t p = vpaddq_f32(lo, hi);
    p = vpaddq_f32(p, p);
    return vgetq_lane_f32(p, 0) + vgetq_lane_f32(p, 1);
}

static INL float32x4_t hsum8x4_neon(const float32x4_t *lo, const float32x4_t *hi)
{
    return vpaddq_f32(vpaddq_f32(vpaddq_f32(lo[0], hi[0]), vpaddq_f32(lo[1], hi[1])),
                      vpaddq_f32(vpaddq_f32(lo[2], hi[2]), vpaddq_f32(lo[3], hi[3])));
}

/* 3-bit lanes: word (0 = j/10, 1 = the next) and bit of lane k in block b = (j/8) mod 5 */
static const uint32_t tq3_sel[5][8] = {
    {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1, 1},
    {0, 0, 0, 0, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0}};
static const int32_t tq3_nsh[5][8] = { /* negated: vshlq by a negative count shifts right */
    {0, -3, -6, -9, -12, -15, -18, -21}, {-24, -27, 0, -3, -6, -9, -12, -15}, {-18, -21, -24, -27, 0, -3, -6, -9},
    {-12, -15, -18, -21, -24, -27, 0, -3}, {-6, -9, -12, -15, -18, -21, -24, -27}};

/* Indices of columns j..j+7 of row w (j a multiple of 8) in two registers. */
static INL void decode_idx(const uint32_t *w, uint64_t wpr, uint64_t j, const int bits, uint32x4_t *lo,
                           uint32x4_t *hi)
{
    if (bits == 8) {
        uint16x8_t h = vmovl_u8(vld1_u8((const uint8_t *)w + j));
        *lo = vmovl_u16(vget_low_u16(h));
        *hi = vmovl_u16(vget_high_u16(h));
        return;
    }
    if (bits == 4 || bits == 2) {
        static const int32_t n4[8] = {0, -4, -8, -12, -16, -20, -24, -28}, n2[8] = {0, -2, -4, -6, -8, -10, -12, -14};
        const int32_t *n = bits == 4 ? n4 : n2;
        uint32_t word = bits == 4 ? w[j >> 3] : w[j >> 4] >> ((j & 8) << 1);
        uint32x4_t v = vdupq_n_u32(word), m = vdupq_n_u32(bits == 4 ? 15 : 3);
        *lo = vandq_u32(vshlq_u32(v, vld1q_s32(n)), m);
        *hi = vandq_u32(vshlq_u32(v, vld1q_s32(n + 4)), m);
        return;
    }
    /* 3 */
    uint64_t k = j / 10;
    int b = (int)((j / 8) % 5);
    uint32x4_t w0 = vdupq_n_u32(w[k]), w1 = vdupq_n_u32(k + 1 < wpr ? w[k + 1] : w[k]), m = vdupq_n_u32(7);
    uint32x4_t s0 = vceqq_u32(vld1q_u32(tq3_sel[b]), vdupq_n_u32(1)), s1 = vceqq_u32(vld1q_u32(tq3_sel[b] + 4), vdupq_n_u32(1));
    *lo = vandq_u32(vshlq_u32(vbslq_u32(s0, w1, w0), vld1q_s32(tq3_nsh[b])), m);
    *hi = vandq_u32(vshlq_u32(vbslq_u32(s1, w1, w0), vld1q_s32(tq3_nsh[b] + 4)), m);
}

/* Table lookup of 4 indices (< 16) in 16 floats held as 64 bytes: byte 4·idx + (0..3). */
static INL float32x4_t lookup16(uint8x16x4_t t, uint32x4_t idx)
{
    uint32x4_t bi = vorrq_u32(vmulq_n_u32(idx, 0x04040404u), vdupq_n_u32(0x03020100u));
    return vreinterpretq_f32_u8(vqtbl4q_u8(t, vreinterpretq_u8_u32(bi)));
}

static INL uint8x16x4_t table16(const float *v)
{
    uint8x16x4_t t;
    t.val[0] = vreinterpretq_u8_f32(vld1q_f32(v));
    t.val[1] = vreinterpretq_u8_f32(vld1q_f32(v + 4));
    t.val[2] = vreinterpretq_u8_f32(vld1q_f32(v + 8));
    t.val[3] = vreinterpretq_u8_f32(vld1q_f32(v + 12));
    return t;
}

/* Rows r..r+nr-1 (nr 1 or RN) of a TurboQuant or affine matrix (group a multiple of 8). */
static INL void rows_q_neon(const rt_linear *l, uint64_t r, int nr, const float *x, const float *aux, float *y,
                            const int tq, const int bits)
{
    float cbp[16] = {0};
    if (tq && bits <= 4)
        for (int i = 0; i < (1 << bits); i++)
            cbp[i] = aux[i];
    const uint8x16x4_t tbl = table16(cbp);
    const uint32_t *w[RN];
    for (int i = 0; i < nr; i++)
        w[i] = (const uint32_t *)l->w + (r + (uint64_t)i) * l->wpr;
    const uint64_t G = l->group, ng = l->ngroups;
    float acc1 = 0;
    float32x4_t acc4 = vdupq_n_f32(0);
    for (uint64_t g = 0; g < ng; g++) {
        float32x4_t lo[RN], hi[RN];
        for (int i = 0; i < nr; i++)
            lo[i] = hi[i] = vdupq_n_f32(0);
        for (uint64_t j = g * G; j < (g + 1) * G; j += 8) {
            float32x4_t xl = vld1q_f32(x + j), xh = vld1q_f32(x + j + 4);
            for (int i = 0; i < nr; i++) {
                uint32x4_t il, ih;
                decode_idx(w[i], l->wpr, j, bits, &il, &ih);
                float32x4_t vl, vh;
                if (!tq) {
                    vl = vcvtq_f32_u32(il);
                    vh = vcvtq_f32_u32(ih);
                } else if (bits <= 4) {
                    vl = lookup16(tbl, il);
                    vh = lookup16(tbl, ih);
                } else {
                    float t[8];
                    for (int k = 0; k < 4; k++) {
                        t[k] = aux[vgetq_lane_u32(il, 0)];
                        t[k + 4] = aux[vgetq_lane_u32(ih, 0)];
                        il = vextq_u32(il, il, 1);
                        ih = vextq_u32(ih, ih, 1);
                    }
                    vl = vld1q_f32(t);
                    vh = vld1q_f32(t + 4);
                }
                lo[i] = vaddq_f32(lo[i], vmulq_f32(vl, xl));
                hi[i] = vaddq_f32(hi[i], vmulq_f32(vh, xh));
            }
        }
        if (nr == RN) {
            float32x4_t s = hsum8x4_neon(lo, hi);
            float sc[4], bi[4];
            for (int i = 0; i < 4; i++) {
                sc[i] = load_f_inl(l->sdt, l->scales, (r + (uint64_t)i) * ng + g);
                bi[i] = tq ? 0 : load_f_inl(l->zdt, l->biases, (r + (uint64_t)i) * ng + g);
            }
            if (tq)
                acc4 = vaddq_f32(acc4, vmulq_f32(s, vld1q_f32(sc)));
            else
                acc4 = vaddq_f32(acc4, vaddq_f32(vmulq_f32(vld1q_f32(sc), s), vmulq_f32(vld1q_f32(bi), vdupq_n_f32(aux[g]))));
        } else {
            float s = hsum8_neon(lo[0], hi[0]);
            acc1 += group1(l, r * ng + g, s, tq ? 0.0f : aux[g], tq);
        }
    }
    if (nr == RN)
        vst1q_f32(y, acc4);
    else
        y[0] = acc1;
}

#define QNEON(TQ, BITS)                                                                              \
    static void rows_q_neon_##TQ##_##BITS(const rt_linear *l, uint64_t r, int nr, const float *x,   \
                                          const float *aux, float *y)                               \
    {                                                                                               \
        if (nr == RN)                                                                               \
            rows_q_neon(l, r, RN, x, aux, y, TQ, BITS);                                             \
        else                                                                                        \
            rows_q_neon(l, r, 1, x, aux, y, TQ, BITS);                                              \
    }
QNEON(1, 2)
QNEON(1, 3)
QNEON(1, 4)
QNEON(1, 8)
QNEON(0, 2)
QNEON(0, 4)
QNEON(0, 8)

/* Dense rows, the tail (n mod 8) into lanes 0.. as dot_f32 does. f16 is widened by fcvtl. */
static INL void dense8_neon(const rt_linear *l, uint64_t row, uint64_t j, int dt, float32x4_t *lo, float32x4_t *hi)
{
    if (dt == TQ_DT_F32) {
        *lo = vld1q_f32((const float *)l->w + row * l->cols + j);
        *hi = vld1q_f32((const float *)l->w + row * l->cols + j + 4);
        return;
    }
    uint16x8_t h = vld1q_u16((const uint16_t *)l->w + row * l->cols + j);
    if (dt == TQ_DT_BF16) {
        *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        *hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16));
    } else {
        *lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
        *hi = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)));
    }
}

static INL void rows_dense_neon(const rt_linear *l, uint64_t r, int nr, const float *x, float *y, const int dt)
{
    const uint64_t n = l->cols;
    float32x4_t lo[RN], hi[RN];
    for (int i = 0; i < nr; i++)
        lo[i] = hi[i] = vdupq_n_f32(0);
    uint64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        float32x4_t xl = vld1q_f32(x + j), xh = vld1q_f32(x + j + 4);
        for (int i = 0; i < nr; i++) {
            float32x4_t wl, wh;
            dense8_neon(l, r + (uint64_t)i, j, dt, &wl, &wh);
            lo[i] = vaddq_f32(lo[i], vmulq_f32(wl, xl));
            hi[i] = vaddq_f32(hi[i], vmulq_f32(wh, xh));
        }
    }
    for (int i = 0; i < nr; i++) {
        float t[8];
        vst1q_f32(t, lo[i]);
        vst1q_f32(t + 4, hi[i]);
        for (uint64_t jj = j, k = 0; jj < n; jj++, k++)
            t[k] += rt_load_f(l->wdt, l->w, (r + (uint64_t)i) * n + jj) * x[jj];
        y[i] = lanes_sum(t);
    }
}

#define DNEON(DT, NAME)                                                                          \
    static void rows_dense_neon_##NAME(const rt_linear *l, uint64_t r, int nr, const float *x, float *y) \
    {                                                                                            \
        if (nr == RN)                                                                            \
            rows_dense_neon(l, r, RN, x, y, DT);                                                 \
        else                                                                                     \
            rows_dense_neon(l, r, 1, x, y, DT);                                                  \
    }
DNEON(TQ_DT_F32, f32)
DNEON(TQ_DT_BF16, bf16)
DNEON(TQ_DT_F16, f16)

/* MXFP4 as on x86: the nibble word decoded as 4-bit indices into ggml's doubled levels, times
 * the block's 2^(e-128) (exact), then multiplied by x and added per lane. */
static const float mx_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void row_mxfp4_simd(const rt_linear *l, uint64_t r, const float *x, float *out)
{
    uint64_t nb = l->cols / 32, rr = r * (l->rstep ? l->rstep : 1);
    const uint8_t *sc = (const uint8_t *)l->scales + rr * nb;
    const uint32_t *w = (const uint32_t *)((const uint8_t *)l->w + rr * nb * 16);
    const uint8x16x4_t tbl = table16(mx_levels);
    float32x4_t lo = vdupq_n_f32(0), hi = vdupq_n_f32(0);
    for (uint64_t b = 0; b < nb; b++) {
        const float32x4_t d = vdupq_n_f32(tq_e8m0_half(sc[b]));
        for (int q = 0; q < 4; q++) {
            uint32x4_t il, ih;
            decode_idx(w + 4 * b + q, 1, 0, 4, &il, &ih);
            const float *xp = x + 32 * b + 8 * q;
            lo = vaddq_f32(lo, vmulq_f32(vmulq_f32(lookup16(tbl, il), d), vld1q_f32(xp)));
            hi = vaddq_f32(hi, vmulq_f32(vmulq_f32(lookup16(tbl, ih), d), vld1q_f32(xp + 4)));
        }
    }
    *out = hsum8_neon(lo, hi);
}

static int mxfp4_row_plain(const rt_linear *l, uint64_t r)
{
    uint64_t nb = l->cols / 32, rr = r * (l->rstep ? l->rstep : 1);
    const uint8_t *sc = (const uint8_t *)l->scales + rr * nb;
    for (uint64_t b = 0; b < nb; b++)
        if (sc[b] > 252)
            return 0;
    return 1;
}

/* Rows [b, en) by the NEON kernels when they take l (1), MXFP4 row by row in mv_task (-1),
 * else 0; bias added as mv_task does. */
static int mv_rows_simd(const rt_linear *l, uint64_t b, uint64_t en, const float *x, const float *aux, float *y)
{
    uint64_t r = b;
    if (l->kind == RT_DENSE) {
        void (*dense)(const rt_linear *, uint64_t, int, const float *, float *) =
            l->wdt == TQ_DT_F32 ? rows_dense_neon_f32 : l->wdt == TQ_DT_BF16 ? rows_dense_neon_bf16
            : l->wdt == TQ_DT_F16 ? rows_dense_neon_f16 : NULL;
        if (!dense)
            return 0;
        for (; r + RN <= en; r += RN)
            dense(l, r, RN, x, y + r);
        for (; r < en; r++)
            dense(l, r, 1, x, y + r);
    } else if (l->kind == RT_MXFP4) {
        return l->cols % 32 == 0 ? -1 : 0;
    } else {
        if ((l->kind != RT_TQ && l->kind != RT_AFFINE) || l->group % 8 != 0)
            return 0;
        int tq = l->kind == RT_TQ;
        void (*f)(const rt_linear *, uint64_t, int, const float *, const float *, float *) =
            l->bits == 2 ? (tq ? rows_q_neon_1_2 : rows_q_neon_0_2)
            : l->bits == 4 ? (tq ? rows_q_neon_1_4 : rows_q_neon_0_4)
            : l->bits == 8 ? (tq ? rows_q_neon_1_8 : rows_q_neon_0_8)
            : l->bits == 3 && tq ? rows_q_neon_1_3 : NULL;
        if (!f)
            return 0;
        for (; r + RN <= en; r += RN)
            f(l, r, RN, x, aux, y + r);
        for (; r < en; r++)
            f(l, r, 1, x, aux, y + r);
    }
    if (l->bias)
        for (r = b; r < en; r++)
            y[r] += rt_load_f(l->biasdt, l->bias, r * (l->rstep ? l->rstep : 1));
    return 1;
}
#endif

/* ---- the packed layout (AVX-512F, 4-bit TurboQuant and affine; rt_linear_pack at load):
 * blocks of 16 rows, one row per lane. Block b's indices (16 rows x cols/8 words) are
 * rewritten as cols 64-bit words, word j holding the 16 rows' indices of column j, row i at bit
 * 32·(i & 1) + 4·(i >> 1): broadcast as a 64-bit value, lane i finds its row's index in its own
 * 32 bits at 4·(i >> 1), so one shift (vpsrlvd) makes the 16 lookup indices. The lookup is into
 * a table of products built once per matvec, T[j][q] = value(q)·x[j] (value: the codebook
 * entry, or q itself for affine): exactly the product w_j·x_j the portable path rounds, so a
 * column of 16 rows costs a shift, a vpermps and an add, and the lane sets a[k] (k = j mod 8)
 * are 8 registers of 16 rows each, summed in lanes_sum's tree by vertical adds. Block b's scales
 * (and biases) become [group][16] in their own dtype, so a group's 16 are one load. Rows past
 * the last whole block stay as they were. The same bytes as before, rearranged. */
#ifdef RT_AVX2 /* its only callers are the AVX-512 ones: elsewhere (arm64) unused, and -Werror */
static int pack_ok(const rt_linear *l)
{
    return (l->kind == RT_TQ || l->kind == RT_AFFINE) && l->bits == 4 && l->cols % 8 == 0 && l->group % 8 == 0 &&
           l->rows >= 16 && l->wpr == l->cols / 8 && (l->rstep == 0 || l->rstep == 1) && !l->packed;
}
#endif

/* l's index of row r, column j, and the entry of its group-g scale (bias), in either layout. */
static uint32_t pk_index(const rt_linear *l, uint64_t r, uint64_t j)
{
    const uint64_t epw = 32 / l->bits;
    const uint32_t mask = (1u << l->bits) - 1;
    if (l->packed && r < l->rows - l->rows % 16) {
        uint64_t q;
        memcpy(&q, (const uint64_t *)l->w + (r / 16) * l->cols + j, 8);
        return (uint32_t)(q >> (32 * (r & 1) + 4 * ((r % 16) >> 1))) & 15;
    }
    return (((const uint32_t *)l->w)[r * l->wpr + j / epw] >> ((j % epw) * l->bits)) & mask;
}

static uint64_t pk_group(const rt_linear *l, uint64_t r, uint64_t g)
{
    if (l->packed && r < l->rows - l->rows % 16)
        return (r / 16) * 16 * l->ngroups + g * 16 + r % 16;
    return r * l->ngroups + g;
}

int rt_linear_packable(const rt_linear *l)
{
#ifdef RT_AVX2
    rt_kernels_init();
    return simd_level >= 2 && pack_ok(l);
#else
    return 0;
#endif
}

#ifdef RT_AVX2
/* r[i] lane j <- r[j] lane i: a 16 x 16 transpose of 32-bit lanes (unpack by 32 and 64 bits
 * within 128-bit lanes, then two rounds of 128-bit lane shuffles). */
AVX512 static INL void pk_transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; i++) {
            t[h + i] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_i32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    }
}

/* One block of 16 rows' indices, w [16][wpr] words, into the packed words q [8·wpr]. Sixteen
 * words of each row at a time, R[i] lane c = row i's word c0 + c; the packed word 8c + k holds
 * in its 32-bit half h the nibble k of rows h, h + 2, ..., h + 14 at nibbles 0..7, so
 * O[2k + h] = OR over p of nibble k of R[2p + h] moved to nibble p, lane c; transposed, lane
 * 2k + h of O[c] is that half for column word c0 + c, and O[c] is q's 64 bytes at 8·(c0 + c). */
AVX512 static void pk_block(const uint32_t *w, uint64_t wpr, uint64_t *q)
{
    for (uint64_t c0 = 0; c0 < wpr; c0 += 16) {
        const uint64_t n = wpr - c0 < 16 ? wpr - c0 : 16;
        const __mmask16 m = (__mmask16)((1u << n) - 1);
        __m512i R[16], O[16];
        for (int i = 0; i < 16; i++)
            R[i] = _mm512_maskz_loadu_epi32(m, w + (uint64_t)i * wpr + c0);
        _Pragma("GCC unroll 16")
        for (int o = 0; o < 16; o++) {
            const int k = o >> 1, h = o & 1;
            __m512i acc = _mm512_setzero_si512();
            _Pragma("GCC unroll 8")
            for (int p = 0; p < 8; p++) {
                __m512i t = p >= k ? _mm512_slli_epi32(R[2 * p + h], 4 * (p - k))
                                   : _mm512_srli_epi32(R[2 * p + h], 4 * (k - p));
                /* acc | (t & mask): 0xF0 | (0xCC & 0xAA) */
                acc = _mm512_ternarylogic_epi32(acc, t, _mm512_set1_epi32((int)(15u << (4 * p))), 0xF8);
            }
            O[o] = acc;
        }
        pk_transpose16(O);
        for (uint64_t c = 0; c < n; c++)
            _mm512_storeu_si512(q + 8 * (c0 + c), O[c]);
    }
}

/* [16][n] entries of dtsize bytes at p (row-major) into [n][16], through tmp. */
static void transpose16(void *p, uint64_t n, size_t dtsize, unsigned char *tmp)
{
    if (dtsize == 2) {
        const uint16_t *s = p;
        uint16_t *t = (uint16_t *)tmp;
        for (uint64_t i = 0; i < 16; i++)
            for (uint64_t g = 0; g < n; g++)
                t[g * 16 + i] = s[i * n + g];
    } else if (dtsize == 4) {
        const uint32_t *s = p;
        uint32_t *t = (uint32_t *)tmp;
        for (uint64_t i = 0; i < 16; i++)
            for (uint64_t g = 0; g < n; g++)
                t[g * 16 + i] = s[i * n + g];
    } else {
        const unsigned char *s = p;
        for (uint64_t i = 0; i < 16; i++)
            for (uint64_t g = 0; g < n; g++)
                memcpy(tmp + (g * 16 + i) * dtsize, s + (i * n + g) * dtsize, dtsize);
    }
    memcpy(p, tmp, 16 * n * dtsize);
}
#endif

int rt_linear_pack(rt_linear *l, tq_err *e)
{
#ifdef RT_AVX2
    rt_kernels_init();
    if (simd_hw < 2 || !pack_ok(l)) /* whatever the level now: the CPU must have the kernel */
        return 0;
    const uint64_t cols = l->cols, wpr = l->wpr, ng = l->ngroups, nb = l->rows / 16;
    size_t ssz = tq_dtype_size(l->sdt), zsz = l->kind == RT_AFFINE ? tq_dtype_size(l->zdt) : 0;
    size_t tsz = 16 * ng * (ssz > zsz ? ssz : zsz);
    uint64_t *q = malloc(cols * 8 > tsz ? cols * 8 : tsz);
    if (!q)
        return tq_fail(e, TQ_ENOMEM, "out of memory (packing a [%llu, %llu] matrix)", (unsigned long long)l->rows,
                       (unsigned long long)cols);
    for (uint64_t b = 0; b < nb; b++) {
        uint32_t *w = (uint32_t *)l->w + b * 16 * wpr; /* the runtime's copy: writable */
        pk_block(w, wpr, q);
        memcpy(w, q, cols * 8);
        transpose16((unsigned char *)l->scales + b * 16 * ng * ssz, ng, ssz, (unsigned char *)q);
        if (zsz)
            transpose16((unsigned char *)l->biases + b * 16 * ng * zsz, ng, zsz, (unsigned char *)q);
    }
    free(q);
    l->packed = 1;
    return 0;
#else
    (void)l;
    (void)e;
    return 0;
#endif
}

#ifdef RT_AVX2
/* T [cols][16]: value(q)·x[j] for the 16 index values q (v: the codebook, or 0..15). */
AVX512 static void pk_table(const float *v, const float *x, uint64_t cols, float *T)
{
    const __m512 vz = _mm512_loadu_ps(v);
    for (uint64_t j = 0; j < cols; j++)
        _mm512_storeu_ps(T + 16 * j, _mm512_mul_ps(vz, _mm512_set1_ps(x[j])));
}

/* 16 consecutive scales (biases) from entry i, widened exactly (vcvtph2ps: f16_table's bits). */
AVX512 static INL __m512 pk_load16(const void *p, tq_dtype dt, uint64_t i)
{
    if (dt == TQ_DT_F32)
        return _mm512_loadu_ps((const float *)p + i);
    __m256i h;
    memcpy(&h, (const uint16_t *)p + i, 32);
    if (dt == TQ_DT_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* nb (1 or 2) packed blocks from block b into y [16·nb]: per group the lane sets a[k] of the
 * 16 rows, lanes_sum's tree by vertical adds, then acc + s·scale (TurboQuant) or
 * acc + (scale·s + bias·gsum) (affine), as row_tq and row_affine. Two blocks share each load of
 * T[j]. */
AVX512 static INL void pk_rows(const rt_linear *l, uint64_t b, const float *T, const float *gsum, float *y,
                               const int nb, const int tq)
{
    const uint64_t cols = l->cols, G = l->group, ng = l->ngroups;
    const __m512i sh = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
    const uint64_t *w[2];
    __m512 acc[2];
    for (int q = 0; q < nb; q++) {
        w[q] = (const uint64_t *)l->w + (b + (uint64_t)q) * cols;
        acc[q] = _mm512_setzero_ps();
    }
    for (uint64_t g = 0; g < ng; g++) {
        __m512 a[2][8];
        _Pragma("GCC unroll 2")
        for (int q = 0; q < nb; q++) {
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++)
                a[q][k] = _mm512_setzero_ps();
            for (uint64_t o = 0; o < G * 8; o += 64) /* the next blocks' same group */
                _mm_prefetch((const char *)(w[q] + g * G) + nb * cols * 8 + o, _MM_HINT_T0);
        }
        for (uint64_t j = g * G; j < (g + 1) * G; j += 8) {
            _Pragma("GCC unroll 8")
            for (int k = 0; k < 8; k++) {
                const __m512 t = _mm512_loadu_ps(T + 16 * (j + k));
                _Pragma("GCC unroll 2")
                for (int q = 0; q < nb; q++) {
                    uint64_t word;
                    memcpy(&word, w[q] + j + k, 8);
                    __m512i v = _mm512_srlv_epi32(_mm512_set1_epi64((long long)word), sh);
                    a[q][k] = _mm512_add_ps(a[q][k], _mm512_permutexvar_ps(v, t));
                }
            }
        }
        _Pragma("GCC unroll 2")
        for (int q = 0; q < nb; q++) {
            __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[q][0], a[q][1]), _mm512_add_ps(a[q][2], a[q][3])),
                                     _mm512_add_ps(_mm512_add_ps(a[q][4], a[q][5]), _mm512_add_ps(a[q][6], a[q][7])));
            const uint64_t gi = (b + (uint64_t)q) * 16 * ng + g * 16;
            __m512 sc = pk_load16(l->scales, l->sdt, gi);
            if (tq)
                acc[q] = _mm512_add_ps(acc[q], _mm512_mul_ps(s, sc));
            else
                acc[q] = _mm512_add_ps(acc[q], _mm512_add_ps(_mm512_mul_ps(sc, s),
                                                             _mm512_mul_ps(pk_load16(l->biases, l->zdt, gi),
                                                                           _mm512_set1_ps(gsum[g]))));
        }
    }
    for (int q = 0; q < nb; q++)
        _mm512_storeu_ps(y + 16 * q, acc[q]);
}

AVX512 static void pk_rows_tq2(const rt_linear *l, uint64_t b, const float *T, const float *gsum, float *y)
{
    pk_rows(l, b, T, gsum, y, 2, 1);
}
AVX512 static void pk_rows_tq1(const rt_linear *l, uint64_t b, const float *T, const float *gsum, float *y)
{
    pk_rows(l, b, T, gsum, y, 1, 1);
}
AVX512 static void pk_rows_af2(const rt_linear *l, uint64_t b, const float *T, const float *gsum, float *y)
{
    pk_rows(l, b, T, gsum, y, 2, 0);
}
AVX512 static void pk_rows_af1(const rt_linear *l, uint64_t b, const float *T, const float *gsum, float *y)
{
    pk_rows(l, b, T, gsum, y, 1, 0);
}

/* The packed rows of [b, en) (b a multiple of 16) into y, bias added as mv_task does; returns
 * the first row left (the unpacked tail, or en). */
static uint64_t pk_task(const rt_linear *l, uint64_t b, uint64_t en, const float *T, const float *gsum, float *y)
{
    const uint64_t P = l->rows - l->rows % 16, end = en < P ? en : P;
    const int tq = l->kind == RT_TQ;
    uint64_t r = b;
    for (; r + 32 <= end; r += 32)
        (tq ? pk_rows_tq2 : pk_rows_af2)(l, r / 16, T, gsum, y + r);
    for (; r + 16 <= end; r += 16)
        (tq ? pk_rows_tq1 : pk_rows_af1)(l, r / 16, T, gsum, y + r);
    if (l->bias)
        for (uint64_t i = b; i < r; i++)
            y[i] += rt_load_f(l->biasdt, l->bias, i * (l->rstep ? l->rstep : 1));
    return r;
}
#endif

struct mv_ctx {
    const rt_linear *l;
    const float *x;   /* [cols] activation (rotated for TQ) */
    const float *aux; /* TQ: [2^bits] codebook as f32; affine: [ngroups] per-group sums of x */
    float *y;         /* [rows] */
    const float *in;  /* TQ: the x that x is the rotation of */
    const float *T;   /* packed l: [cols][16] the products value(q)·x[j] (pk_table) */
    int nomem;
    int bad_scale;    /* MXFP4: a NaN block scale was met */
};

static void mv_task(void *vctx, uint64_t b, uint64_t en)
{
    struct mv_ctx *c = vctx;
    const rt_linear *l = c->l;
#ifdef RT_AVX2
    if (l->packed && (b = pk_task(l, b, en, c->T, c->aux, c->y)) == en)
        return;
#endif
#ifdef RT_SIMD
    int mx = 0; /* MXFP4 rows by row_mxfp4_simd where their exponents allow */
    if (simd_level >= 1) {
        int k = mv_rows_simd(l, b, en, c->x, c->aux, c->y);
        if (k > 0)
            return;
        mx = k < 0;
    }
#endif
    float *wv = NULL; /* [cols] one unpacked row (quantized kinds) */
    if (l->kind != RT_DENSE && !(wv = malloc(l->cols * sizeof *wv))) {
        c->nomem = 1; /* benign race: every writer stores 1 */
        return;
    }
    rt_lut lut; /* the portable unpacking table, only where the portable path runs */
    if (l->kind == RT_TQ || l->kind == RT_AFFINE)
        lut_build(&lut, (uint32_t)l->bits, l->kind == RT_TQ ? c->aux : NULL);
    for (uint64_t r = b; r < en; r++) {
        float v;
        if (l->kind == RT_TQ)
            v = row_tq(l, r, c->x, c->aux, &lut, wv);
        else if (l->kind == RT_AFFINE)
            v = row_affine(l, r, c->x, c->aux, &lut, wv);
        else if (l->kind == RT_MXFP4) {
#ifdef RT_SIMD
            if (mx && mxfp4_row_plain(l, r))
                row_mxfp4_simd(l, r, c->x, &v);
            else
#endif
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

/* xr[j] = x[j] · signs[j], the signs' dtype dispatched once for the whole row. */
static void sign_mul(const rt_linear *l, const float *x, float *xr)
{
    const uint64_t n = l->cols;
    if (l->gdt == TQ_DT_F16) {
        const uint16_t *g = l->signs;
        for (uint64_t j = 0; j < n; j++)
            xr[j] = x[j] * f16_table[g[j]];
    } else if (l->gdt == TQ_DT_BF16) {
        const uint16_t *g = l->signs;
        for (uint64_t j = 0; j < n; j++)
            xr[j] = x[j] * bf16f(g[j]);
    } else {
        for (uint64_t j = 0; j < n; j++)
            xr[j] = x[j] * rt_load_f(l->gdt, l->signs, j);
    }
}

#ifdef RT_AVX2
/* A packed matrix's table of products T [cols][16] (pk_table) in the slot after its activation
 * floats, or an earlier matrix's of the batch where it is the same table: the same kind and
 * columns, the same activation (c->x: the same rotated buffer, or the same x for affine) and,
 * for TurboQuant, the same 16 codebook floats bit for bit. */
static void mv_table(const rt_linear *l, float *slot, const struct mv_ctx *done, size_t ndone, struct mv_ctx *c)
{
    float v[16];
    for (int q = 0; q < 16; q++)
        v[q] = l->kind == RT_TQ ? c->aux[q] : (float)q;
    for (size_t i = 0; i < ndone; i++) {
        const rt_linear *o = done[i].l;
        if (done[i].T && o->kind == l->kind && o->cols == l->cols && done[i].x == c->x &&
            (l->kind == RT_AFFINE || memcmp(done[i].aux, c->aux, sizeof v) == 0)) {
            c->T = done[i].T;
            return;
        }
    }
    float *T = slot + 256 + (l->kind == RT_TQ ? l->cols : l->ngroups);
    pk_table(v, c->x, l->cols, T);
    c->T = T;
}
#endif

/* One matrix of a batch, made ready to run (mv_prepare): its activation, transformed once per
 * batch where matrices share it, in slot [256 | need | packed: 16·cols] floats of the scratch. */
static int mv_prepare(const rt_linear *l, const float *x, float *slot, const struct mv_ctx *done, size_t ndone,
                      struct mv_ctx *c, tq_err *e)
{
    *c = (struct mv_ctx){.l = l, .x = x};
    if (l->kind == RT_TQ) {
        /* The activation gets exactly the weights' rotation: signs, then block Hadamard. */
        float *cb = slot, *xr = slot + 256; /* [2^bits] codebook as f32, [cols] rotated x */
        uint64_t n = (uint64_t)1 << l->bits;
        for (uint64_t i = 0; i < n; i++)
            cb[i] = rt_load_f(l->cdt, l->codebook, i);
        c->aux = cb;
        /* an earlier matrix of the batch on the same x with the same signs (the experts of a
         * layer share theirs): its rotated x, the same bits */
        for (size_t i = 0; i < ndone; i++) {
            const rt_linear *o = done[i].l;
            if (o->kind == RT_TQ && done[i].in == x && o->cols == l->cols && o->norot == l->norot &&
                o->gdt == l->gdt &&
                (o->signs == l->signs || memcmp(o->signs, l->signs, l->cols * tq_dtype_size(l->gdt)) == 0)) {
                c->x = done[i].x;
                c->in = x;
                break;
            }
        }
        if (!c->in) {
            sign_mul(l, x, xr);
            if (!l->norot && tq_hadamard_rotate(xr, l->cols, NULL, tq_hadamard_block(l->cols)) != 0)
                return tq_fail(e, TQ_EDATA, "no Hadamard block for an input axis of %llu",
                               (unsigned long long)l->cols);
            c->x = xr;
            c->in = x;
        }
    } else if (l->kind == RT_AFFINE) {
        float *gs = slot + 256; /* [ngroups] */
        for (uint64_t g = 0; g < l->ngroups; g++) {
            float sum = 0;
            for (uint64_t k = 0; k < l->group; k++)
                sum += x[g * l->group + k];
            gs[g] = sum;
        }
        c->aux = gs;
    }
#ifdef RT_AVX2
    if (l->packed)
        mv_table(l, slot, done, ndone, c);
#endif
    return 0;
}

/* Chunks of whole 8-row blocks (the SIMD kernels' unit) of at least ~64 KiB of weights:
 * smaller ones cost more in hand-over than a second thread saves. */
static uint64_t mv_grain(const rt_linear *l)
{
    uint64_t rowbytes = l->kind == RT_DENSE ? l->cols * tq_dtype_size(l->wdt)
                      : l->kind == RT_MXFP4 ? l->cols / 2 : l->wpr * 4;
    uint64_t grain = rowbytes ? ((65536 / rowbytes + 7) & ~(uint64_t)7) : l->rows;
    if (l->packed) /* whole pairs of packed 16-row blocks */
        grain = (grain + 31) & ~(uint64_t)31;
    return grain ? grain : 8;
}

/* A batch as one job: item i is chunk i of the matrices' chunks one after another; a range of
 * items runs each matrix's rows of it in one mv_task call. */
struct mvn_ctx {
    struct mv_ctx *m;
    size_t n;
    uint64_t first[RT_MATVEC_BATCH + 1]; /* matrix i's chunks are items [first[i], first[i+1]) */
    uint64_t grain[RT_MATVEC_BATCH];
};

static void mvn_task(void *vctx, uint64_t b, uint64_t en)
{
    struct mvn_ctx *c = vctx;
    for (size_t i = 0; i < c->n && b < en; i++) {
        if (b >= c->first[i + 1])
            continue;
        uint64_t e1 = en < c->first[i + 1] ? en : c->first[i + 1], rows = c->m[i].l->rows;
        uint64_t r0 = (b - c->first[i]) * c->grain[i], r1 = (e1 - c->first[i]) * c->grain[i];
        mv_task(&c->m[i], r0, r1 < rows ? r1 : rows);
        b = e1;
    }
}

int rt_matvec_n(rt_pool *p, size_t n, const rt_linear *ls, const float *const *xs, float *const *ys, rt_scratch *s,
                tq_err *e)
{
    for (size_t b0 = 0; b0 < n; b0 += RT_MATVEC_BATCH) {
        size_t nb = n - b0 < RT_MATVEC_BATCH ? n - b0 : RT_MATVEC_BATCH;
        uint64_t need = 0, off[RT_MATVEC_BATCH];
        for (size_t i = 0; i < nb; i++) {
            const rt_linear *l = &ls[b0 + i];
            off[i] = need;
            if (l->kind == RT_TQ || l->kind == RT_AFFINE)
                need += 256 + (l->kind == RT_TQ ? l->cols : l->ngroups) + (l->packed ? 16 * l->cols : 0);
        }
        if (s->cap < need) {
            float *nx = realloc(s->xr, need * sizeof *nx);
            if (!nx)
                return tq_fail(e, TQ_ENOMEM, "out of memory (%llu activation floats)", (unsigned long long)need);
            s->xr = nx;
            s->cap = need;
        }
        struct mv_ctx m[RT_MATVEC_BATCH];
        struct mvn_ctx c = {.m = m, .n = nb};
        for (size_t i = 0; i < nb; i++) {
            const rt_linear *l = &ls[b0 + i];
            if (mv_prepare(l, xs[b0 + i], s->xr + off[i], m, i, &m[i], e) != 0)
                return -1;
            m[i].y = ys[b0 + i];
            c.grain[i] = mv_grain(l);
            c.first[i + 1] = c.first[i] + (l->rows + c.grain[i] - 1) / c.grain[i];
        }
        rt_pool_for_grain(p, c.first[nb], 1, mvn_task, &c);
        for (size_t i = 0; i < nb; i++) {
            const rt_linear *l = m[i].l;
            if (m[i].nomem)
                return tq_fail(e, TQ_ENOMEM, "out of memory (a row of %llu weights)", (unsigned long long)l->cols);
            if (m[i].bad_scale)
                return tq_fail(e, TQ_EDATA,
                               "an MXFP4 block of a [%llu, %llu] matrix has scale 255 (E8M0 NaN) or a value beyond f32",
                               (unsigned long long)l->rows, (unsigned long long)l->cols);
        }
    }
    return 0;
}

int rt_matvec(rt_pool *p, const rt_linear *l, const float *x, float *y, rt_scratch *s, tq_err *e)
{
    return rt_matvec_n(p, 1, l, &x, &y, s, e);
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
    /* either layout (pk_index, pk_group: a packed matrix's rows read where the packing put them) */
    if (l->kind == RT_AFFINE) {
        for (uint64_t j = 0; j < l->cols; j++) {
            uint32_t q = pk_index(l, r, j);
            uint64_t gi = pk_group(l, r, j / l->group);
            out[j] = rt_load_f(l->sdt, l->scales, gi) * (float)q + rt_load_f(l->zdt, l->biases, gi);
        }
        return 0;
    }
    /* TurboQuant: codebook value times the group scale gives the rotated row; the inverse block
     * transform and the signs give the row itself (docs/quantization.md) */
    for (uint64_t j = 0; j < l->cols; j++) {
        uint32_t q = pk_index(l, r, j);
        out[j] = rt_load_f(l->cdt, l->codebook, q) * rt_load_f(l->sdt, l->scales, pk_group(l, r, j / l->group));
    }
    if (tq_hadamard(out, l->cols, tq_hadamard_block(l->cols), 1) != 0)
        return tq_fail(e, TQ_EDATA, "no Hadamard block for an input axis of %llu", (unsigned long long)l->cols);
    for (uint64_t j = 0; j < l->cols; j++)
        out[j] *= rt_load_f(l->gdt, l->signs, j);
    return 0;
}
