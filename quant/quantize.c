/* The rms recipe (per-group scales, nearest-centroid indices), packing, dequantization;
 * --scale lsq lives in quantize_lsq.c.
 *
 * Every sum runs in a fixed order (8 float lanes combined in a fixed tree, in double), so
 * results never depend on threads or vector width. The error is Σ(w - c·s)² =
 * Σw² - 2sΣwc + s²Σc², with s the f16-rounded scale the file stores. */
#include "quant/quant.h"
#include "quant/quant_internal.h"
#include "formats/formats.h"

#include <math.h>
#include <string.h>


TQ_INLINE double sumsq(const float *w, size_t g)
{
    size_t i = 0;
    double s = 0;
    if (g >= 8) {
        tq_v8f a = {0, 0, 0, 0, 0, 0, 0, 0};
        for (; i + 8 <= g; i += 8) {
            tq_v8f v = tq_ld8(w + i);
            a += v * v;
        }
        s = tq_hsum8(a);
    }
    for (; i < g; i++)
        s += (double)w[i] * w[i];
    return s;
}

/* idx = #{k : w/s >= bnd[k]}, and the moments Σ w·c[idx], Σ c[idx]² for those indices. */
TQ_INLINE void assign_moments(const tq_codebook *cb, const int nb, const float *w, size_t g, float s, uint8_t *idx,
                              double *num, double *den)
{
    size_t i = 0;
    double sn = 0, sd = 0;
    if (g >= 8) {
        tq_v8f sv = {s, s, s, s, s, s, s, s}, an = {0, 0, 0, 0, 0, 0, 0, 0}, ad = an;
#if defined(__GNUC__) && !defined(__clang__)
        tq_v8i clo, chi; /* the codebook as lanes, for a lane-wise table lookup */
        for (int l = 0; l < 8; l++) {
            float a = l < cb->n ? cb->c[l] : 0.0f, b = l + 8 < cb->n ? cb->c[l + 8] : 0.0f;
            int32_t ai, bi;
            memcpy(&ai, &a, 4);
            memcpy(&bi, &b, 4);
            clo[l] = ai;
            chi[l] = bi;
        }
#else
        float step[15]; /* c[k+1] - c[k], exact in f32 (f16 centroids) */
        for (int k = 0; k + 1 < cb->n; k++)
            step[k] = cb->c[k + 1] - cb->c[k];
#endif
        for (; i + 8 <= g; i += 8) {
            tq_v8f x = tq_ld8(w + i), v = x / sv;
            tq_v8i cnt = {0, 0, 0, 0, 0, 0, 0, 0};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 16
            for (int k = 0; k < nb; k++)
                cnt -= (tq_v8i)(v >= cb->bnd[k]);
            tq_v8f q = (tq_v8f)(nb < 8 ? __builtin_shuffle(clo, cnt) : __builtin_shuffle(clo, chi, cnt));
#else
            /* no variable lane shuffle: c[cnt] as c[0] plus the steps passed, the same value
             * exactly since every partial sum is a centroid */
            tq_v8f q = (tq_v8f){0, 0, 0, 0, 0, 0, 0, 0} + cb->c[0];
#pragma GCC unroll 16
            for (int k = 0; k < nb; k++) {
                tq_v8i ge = v >= cb->bnd[k];
                cnt -= ge;
                q += (tq_v8f)(ge & (tq_v8i)((tq_v8f){0, 0, 0, 0, 0, 0, 0, 0} + step[k]));
            }
#endif
            an += x * q;
            ad += q * q;
            /* the lanes' low bytes are the indices (counts are < 16) */
#if defined(__GNUC__) && !defined(__clang__)
            const tq_v32u8 pick = {0, 4, 8, 12, 16, 20, 24, 28};
            tq_v32u8 by = __builtin_shuffle((tq_v32u8)cnt, pick);
#else
            tq_v32u8 by = __builtin_shufflevector((tq_v32u8)cnt, (tq_v32u8)cnt, 0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0,
                                                  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#endif
            memcpy(idx + i, &by, 8);
        }
        sn = tq_hsum8(an);
        sd = tq_hsum8(ad);
    }
    for (; i < g; i++) {
        float v = w[i] / s;
        int c = 0;
        for (int k = 0; k < nb; k++)
            c += v >= cb->bnd[k];
        idx[i] = (uint8_t)c;
        sn += (double)w[i] * cb->c[c];
        sd += (double)cb->c[c] * cb->c[c];
    }
    *num = sn;
    *den = sd;
}

void tq_quantize_assign(const tq_codebook *cb, const float *v, size_t n, uint8_t *idx)
{
    for (size_t i = 0; i < n; i++) {
        int c = 0;
        for (int k = 0; k + 1 < cb->n; k++)
            c += v[i] >= cb->bnd[k];
        idx[i] = (uint8_t)c;
    }
}

/* nb = number of boundaries, a constant in each instantiation below so the compare chain
 * unrolls and its broadcasts stay in registers. */
TQ_INLINE int quantize_rms_k(const tq_codebook *cb, const int nb, size_t group, const float *w, size_t n,
                             uint8_t *idx, uint16_t *scales, double *err2, double *sum2, tq_err *e)
{
    double tot_err = 0, tot_ss = 0;
    for (size_t g0 = 0, gi = 0; g0 < n; g0 += group, gi++) {
        const float *x = w + g0;
        uint8_t *q = idx + g0;
        double ss = sumsq(x, group);
        if (!isfinite(ss))
            return tq_fail(e, TQ_EDATA, "quantize: non-finite or huge value in group %zu", gi);
        float rms = sqrtf((float)ss / (float)group);
        if (!(rms >= 1e-7f))
            rms = 1e-7f;
        uint16_t hs = tq_q_f16(rms);
        if ((hs & 0x7C00u) == 0x7C00u)
            return tq_fail(e, TQ_EDATA, "quantize: group %zu has RMS %g, beyond the f16 scale range", gi, (double)rms);
        double num, den;
        assign_moments(cb, nb, x, group, rms, q, &num, &den);
        scales[gi] = hs;
        double r = ss - 2 * (double)tq_q_f32(hs) * num + (double)tq_q_f32(hs) * tq_q_f32(hs) * den;
        tot_err += r > 0 ? r : 0;
        tot_ss += ss;
    }
    if (err2)
        *err2 = tot_err;
    if (sum2)
        *sum2 = tot_ss;
    return 0;
}

/* 8 indices (each < 2^bits, one per byte) -> 8·bits contiguous bits, LSB first: pairs, then
 * quads, then all eight are merged by shift-or-mask on one 64-bit word. */
TQ_INLINE uint64_t compact8(const uint8_t *q, const int bits)
{
    uint64_t x;
    memcpy(&x, q, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    const uint64_t m1 = 0x0001000100010001ull * ((1ull << 2 * bits) - 1);
    const uint64_t m2 = 0x0000000100000001ull * ((1ull << 4 * bits) - 1);
    x = (x | x >> (8 - bits)) & m1;
    x = (x | x >> (16 - 2 * bits)) & m2;
    return (x | x >> (32 - 4 * bits)) & ((1ull << 8 * bits) - 1);
}

TQ_INLINE void pack_k(const uint8_t *idx, size_t n, const int bits, const size_t epw, uint32_t *out)
{
    size_t full = n / epw, wi = 0;
    for (; wi < full; wi++) {
        const uint8_t *q = idx + wi * epw;
        uint64_t v = 0;
        size_t j = 0;
        for (; j + 8 <= epw; j += 8)
            v |= compact8(q + j, bits) << (j * (size_t)bits);
        for (; j < epw; j++)
            v |= (uint64_t)q[j] << (j * (size_t)bits);
        out[wi] = (uint32_t)v;
    }
    if (full * epw < n) {
        uint32_t v = 0;
        for (size_t j = 0; full * epw + j < n; j++)
            v |= (uint32_t)idx[full * epw + j] << (j * (size_t)bits);
        out[wi] = v;
    }
}

TQ_CLONES
int tq_quantize_groups(const tq_codebook *cb, int method, size_t group, const float *w, size_t n,
                       uint8_t *idx, uint16_t *scales, double *err2, double *sum2, tq_err *e)
{
    if (group == 0 || n % group)
        return tq_fail(e, TQ_EUSAGE, "quantize: %zu values are not a multiple of group size %zu", n, group);
    if (method == TQ_SCALE_LSQ)
        return tq_quantize_lsq(cb, group, w, n, idx, scales, err2, sum2, e);
    switch (cb->n) {
    case 2: return quantize_rms_k(cb, 1, group, w, n, idx, scales, err2, sum2, e);
    case 4: return quantize_rms_k(cb, 3, group, w, n, idx, scales, err2, sum2, e);
    case 8: return quantize_rms_k(cb, 7, group, w, n, idx, scales, err2, sum2, e);
    default: return quantize_rms_k(cb, 15, group, w, n, idx, scales, err2, sum2, e);
    }
}

void tq_pack(const uint8_t *idx, size_t n, int bits, uint32_t *out)
{
    switch (bits) { /* constant epw per case: the inner loop unrolls */
    case 1: pack_k(idx, n, 1, 32, out); break;
    case 2: pack_k(idx, n, 2, 16, out); break;
    case 3: pack_k(idx, n, 3, 10, out); break;
    default: pack_k(idx, n, 4, 8, out); break;
    }
}

void tq_unpack(const uint32_t *in, size_t n, int bits, uint8_t *idx)
{
    size_t epw = tq_pack_epw(bits);
    uint32_t mask = (1u << bits) - 1;
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint8_t)((in[i / epw] >> ((i % epw) * (size_t)bits)) & mask);
}

void tq_dequantize_row(const uint32_t *packed, const uint16_t *scales, const float *codebook,
                       int bits, size_t group, size_t n, float *out)
{
    size_t epw = tq_pack_epw(bits);
    uint32_t mask = (1u << bits) - 1;
    for (size_t i = 0; i < n; i++) {
        uint32_t q = (packed[i / epw] >> ((i % epw) * (size_t)bits)) & mask;
        out[i] = codebook[q] * tq_q_f32(scales[i / group]);
    }
}

/* dst[i] = f32(src[i]) * signs[i] for src of tq_dtype BF16, F16, F32 or F64 (the first
 * step of rotating a weight row, fused with the dtype conversion). */
TQ_CLONES
static void load_signed(int dtype, const void *src, const float *signs, size_t n, float *dst)
{
    const unsigned char *p = src;
    size_t i = 0;
    if (dtype == TQ_DT_BF16) { /* bf16 is the top half of an f32 */
        for (; i + 8 <= n; i += 8) {
            tq_v8u16 h;
            memcpy(&h, p + 2 * i, sizeof h);
            tq_v8i x = __builtin_convertvector(h, tq_v8i) << 16;
            tq_st8(dst + i, (tq_v8f)x * tq_ld8(signs + i));
        }
        for (; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            uint32_t x = (uint32_t)h << 16;
            float f;
            memcpy(&f, &x, 4);
            dst[i] = f * signs[i];
        }
    } else if (dtype == TQ_DT_F16) {
        for (; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = tq_q_f32(h) * signs[i];
        }
    } else if (dtype == TQ_DT_F64) {
        for (; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            dst[i] = (float)d * signs[i];
        }
    } else {
        for (; i + 8 <= n; i += 8)
            tq_st8(dst + i, tq_ld8((const float *)(const void *)(p + 4 * i)) * tq_ld8(signs + i));
        for (; i < n; i++) {
            float f;
            memcpy(&f, p + 4 * i, 4);
            dst[i] = f * signs[i];
        }
    }
}

int tq_q_rotate_row(int dtype, const void *src, const float *signs, size_t n, size_t block, int rotate, float *x,
                    tq_err *e)
{
    if (signs)
        load_signed(dtype, src, signs, n, x);
    else if (tq_to_f32((tq_dtype)dtype, src, x, n, e))
        return -1;
    if (rotate && tq_hadamard(x, n, block, 0))
        return tq_fail(e, TQ_EUSAGE, "quantize: Hadamard block %zu is not valid for a row of %zu", block, n);
    return 0;
}

int tq_q_quantize_row(const tq_qspec *q, int dtype, int rotate, const void *src, size_t n, void *scratch,
                      uint32_t *packed, uint16_t *scales, double *err2, double *sum2, tq_err *e)
{
    float *x = scratch;
    uint8_t *idx = (uint8_t *)(x + n);
    if (tq_q_rotate_row(dtype, src, q->signs, n, q->block, rotate, x, e) ||
        tq_quantize_groups(q->cb, q->method, q->group, x, n, idx, scales, err2, sum2, e))
        return -1;
    tq_pack(idx, n, q->cb->bits, packed);
    return 0;
}

int tq_quantize_row(const tq_qspec *q, const float *w, size_t n, void *scratch, uint32_t *packed,
                    uint16_t *scales, double *err2, double *sum2, tq_err *e)
{
    return tq_q_quantize_row(q, TQ_DT_F32, 1, w, n, scratch, packed, scales, err2, sum2, e);
}

int tq_fit_hist_add(tq_fit_hist *h, const float *x, size_t n, size_t group, tq_err *e)
{
    if (group == 0 || n % group)
        return tq_fail(e, TQ_EUSAGE, "fit: %zu values are not a multiple of group size %zu", n, group);
    for (size_t g0 = 0; g0 < n; g0 += group) {
        const float *w = x + g0;
        double ss = sumsq(w, group);
        if (!isfinite(ss))
            return tq_fail(e, TQ_EDATA, "fit: non-finite or huge value in group %zu", g0 / group);
        /* the RMS exactly as quantize_rms_k computes it */
        float rms = sqrtf((float)ss / (float)group);
        if (!(rms >= 1e-7f))
            rms = 1e-7f;
        for (size_t i = 0; i < group; i++) {
            float v = fabsf(w[i] / rms);
            size_t b = v < (float)(TQ_FIT_BINS / TQ_FIT_BIN_SCALE) ? (size_t)(v * (float)TQ_FIT_BIN_SCALE) : TQ_FIT_BINS - 1;
            if (b >= TQ_FIT_BINS)
                b = TQ_FIT_BINS - 1;
            h->n[b]++;
            h->s[b] += (uint64_t)((double)v * 4294967296.0);
        }
    }
    return 0;
}

void tq_fit_hist_merge(tq_fit_hist *dst, const tq_fit_hist *src)
{
    for (size_t b = 0; b < TQ_FIT_BINS; b++) {
        dst->n[b] += src->n[b];
        dst->s[b] += src->s[b];
    }
}
