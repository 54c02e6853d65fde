/* ggml block types: geometry, names, and dequantization to f32 that reproduces ggml's
 * reference dequantize_row_* bit for bit. The arithmetic below keeps ggml's exact
 * operation order and types (products of a float with an int converted to float, the
 * scale product formed before the quant multiply, subtraction of the min last); the build
 * uses -ffp-contract=off, so no multiply-add is fused where ggml's does not fuse either. */
#include "formats/formats.h"

#include <string.h>

/* The kernels are elementwise (no reductions), so vectorizing them cannot change a single
 * result; GCC's -O2 cost model leaves them scalar at a third of the speed. Clang vectorizes
 * them at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

typedef struct ggml_type_info {
    const char *name;
    uint16_t block_elems, block_bytes;
    uint8_t can_dequant, quantized;
} ggml_type_info;

static const ggml_type_info types[] = {
    [0] = {"F32", 1, 4, 1, 0},
    [1] = {"F16", 1, 2, 1, 0},
    [2] = {"Q4_0", 32, 18, 1, 1},
    [3] = {"Q4_1", 32, 20, 1, 1},
    [6] = {"Q5_0", 32, 22, 1, 1},
    [7] = {"Q5_1", 32, 24, 1, 1},
    [8] = {"Q8_0", 32, 34, 1, 1},
    [9] = {"Q8_1", 32, 36, 0, 1},
    [10] = {"Q2_K", 256, 84, 1, 1},
    [11] = {"Q3_K", 256, 110, 1, 1},
    [12] = {"Q4_K", 256, 144, 1, 1},
    [13] = {"Q5_K", 256, 176, 1, 1},
    [14] = {"Q6_K", 256, 210, 1, 1},
    [15] = {"Q8_K", 256, 292, 0, 1},
    [16] = {"IQ2_XXS", 256, 66, 0, 1},
    [17] = {"IQ2_XS", 256, 74, 0, 1},
    [18] = {"IQ3_XXS", 256, 98, 0, 1},
    [19] = {"IQ1_S", 256, 50, 0, 1},
    [20] = {"IQ4_NL", 32, 18, 0, 1},
    [21] = {"IQ3_S", 256, 110, 0, 1},
    [22] = {"IQ2_S", 256, 82, 0, 1},
    [23] = {"IQ4_XS", 256, 136, 0, 1},
    [24] = {"I8", 1, 1, 0, 0},
    [25] = {"I16", 1, 2, 0, 0},
    [26] = {"I32", 1, 4, 0, 0},
    [27] = {"I64", 1, 8, 0, 0},
    [28] = {"F64", 1, 8, 0, 0},
    [29] = {"IQ1_M", 256, 56, 0, 1},
    [30] = {"BF16", 1, 2, 1, 0},
    [34] = {"TQ1_0", 256, 54, 0, 1},
    [35] = {"TQ2_0", 256, 66, 0, 1},
    [39] = {"MXFP4", 32, 17, 0, 1},
};
#define N_TYPES (sizeof types / sizeof types[0])

static const ggml_type_info *info(uint32_t t)
{
    return t < N_TYPES && types[t].name ? &types[t] : NULL;
}

const char *tq_ggml_type_name(uint32_t type)
{
    const ggml_type_info *i = info(type);
    return i ? i->name : NULL;
}

int tq_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    const ggml_type_info *i = info(type);
    if (!i)
        return -1;
    *block_elems = i->block_elems;
    *block_bytes = i->block_bytes;
    return 0;
}

int tq_ggml_type_can_dequant(uint32_t type)
{
    const ggml_type_info *i = info(type);
    return i && i->can_dequant;
}

int tq_ggml_type_is_quantized(uint32_t type)
{
    const ggml_type_info *i = info(type);
    return i && i->quantized;
}

/* IEEE half to float: exact (every half is a float), so any correct conversion matches
 * ggml's table lookup bit for bit, NaN payloads included. */
static inline float h2f(const unsigned char *p)
{
    uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8;
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13;
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | man << 13;
    } else if (man == 0) {
        bits = sign;
    } else {
        /* Subnormal: normalize the mantissa. */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400));
        bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void deq_f32(const unsigned char *x, float *y, uint64_t n)
{
    memcpy(y, x, n * 4);
}

static void deq_f16(const unsigned char *x, float *y, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        y[i] = h2f(x + 2 * i);
}

static void deq_bf16(const unsigned char *x, float *y, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t b = ((uint32_t)x[2 * i] | (uint32_t)x[2 * i + 1] << 8) << 16;
        memcpy(&y[i], &b, 4);
    }
}

/* Q4_0: d(f16), 16 bytes of nibbles; low nibbles are elements 0..15, high 16..31. */
static void deq_q4_0(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 18, y += 32) {
        const float d = h2f(x);
        const unsigned char *qs = x + 2;
        for (int j = 0; j < 16; j++) {
            const int x0 = (qs[j] & 0x0F) - 8;
            const int x1 = (qs[j] >> 4) - 8;
            y[j] = (float)x0 * d;
            y[j + 16] = (float)x1 * d;
        }
    }
}

static void deq_q4_1(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 20, y += 32) {
        const float d = h2f(x), m = h2f(x + 2);
        const unsigned char *qs = x + 4;
        for (int j = 0; j < 16; j++) {
            const int x0 = qs[j] & 0x0F;
            const int x1 = qs[j] >> 4;
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        }
    }
}

static inline uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q5_0: d, qh (u32, bit j = 5th bit of element j), nibbles as Q4_0. */
static void deq_q5_0(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 22, y += 32) {
        const float d = h2f(x);
        const uint32_t qh = le32(x + 2);
        const unsigned char *qs = x + 6;
        for (int j = 0; j < 16; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = ((qs[j] & 0x0F) | xh0) - 16;
            const int x1 = ((qs[j] >> 4) | xh1) - 16;
            y[j] = (float)x0 * d;
            y[j + 16] = (float)x1 * d;
        }
    }
}

static void deq_q5_1(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 24, y += 32) {
        const float d = h2f(x), m = h2f(x + 2);
        const uint32_t qh = le32(x + 4);
        const unsigned char *qs = x + 8;
        for (int j = 0; j < 16; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = (qs[j] & 0x0F) | xh0;
            const int x1 = (qs[j] >> 4) | xh1;
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        }
    }
}

static void deq_q8_0(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 34, y += 32) {
        const float d = h2f(x);
        const int8_t *qs = (const int8_t *)(x + 2);
        for (int j = 0; j < 32; j++)
            y[j] = (float)qs[j] * d;
    }
}

/* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2-bit), d, dmin. */
static void deq_q2_k(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 84) {
        const unsigned char *sc = x, *q = x + 16;
        const float d = h2f(x + 80), min = h2f(x + 82);
        int is = 0;
        for (int n = 0; n < 256; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const unsigned s = sc[is++];
                    const float dl = d * (float)(s & 0xF), ml = min * (float)(s >> 4);
                    const unsigned char *qq = q + 16 * half;
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((qq[l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* Q3_K: hmask[32], qs[64], 12 bytes of 6-bit signed scales, d. */
static void deq_q3_k(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 110) {
        const unsigned char *hm = x, *q = x + 32, *sp = x + 96;
        const float d_all = h2f(x + 108);
        const uint32_t a0 = le32(sp), a1 = le32(sp + 4), a2 = le32(sp + 8);
        const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
        uint32_t aux[4];
        aux[0] = (a0 & k2) | (((a2 >> 0) & k1) << 4);
        aux[1] = (a1 & k2) | (((a2 >> 2) & k1) << 4);
        aux[2] = ((a0 >> 4) & k2) | (((a2 >> 4) & k1) << 4);
        aux[3] = ((a1 >> 4) & k2) | (((a2 >> 6) & k1) << 4);
        int8_t scales[16];
        for (int k = 0; k < 16; k++)
            scales[k] = (int8_t)(uint8_t)(aux[k / 4] >> (8 * (k % 4)));
        int is = 0;
        unsigned m = 1;
        for (int n = 0; n < 256; n += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (float)(scales[is++] - 32);
                    const unsigned char *qq = q + 16 * half, *hh = hm + 16 * half;
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((int)((qq[l] >> shift) & 3) - ((hh[l] & m) ? 0 : 4));
                }
            }
        }
    }
}

static inline void scale_min_k4(int j, const unsigned char *q, unsigned *d, unsigned *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K: d, dmin, scales[12] (8 6-bit scale/min pairs), qs[128]. */
static void deq_q4_k(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 144) {
        const float d = h2f(x), min = h2f(x + 2);
        const unsigned char *sc = x + 4, *q = x + 16;
        for (int j = 0; j < 8; j += 2, q += 32, y += 64) {
            unsigned s, m;
            scale_min_k4(j, sc, &s, &m);
            const float d1 = d * (float)s, m1 = min * (float)m;
            scale_min_k4(j + 1, sc, &s, &m);
            const float d2 = d * (float)s, m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                y[l] = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                y[l + 32] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K: d, dmin, scales[12], qh[32], qs[128]. */
static void deq_q5_k(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 176) {
        const float d = h2f(x), min = h2f(x + 2);
        const unsigned char *sc = x + 4, *qh = x + 16, *ql = x + 48;
        unsigned u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, y += 64, u1 <<= 2, u2 <<= 2) {
            unsigned s, m;
            scale_min_k4(j, sc, &s, &m);
            const float d1 = d * (float)s, m1 = min * (float)m;
            scale_min_k4(j + 1, sc, &s, &m);
            const float d2 = d * (float)s, m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                y[l] = d1 * (float)((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                y[l + 32] = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K: ql[128], qh[64], scales[16] (int8), d. */
static void deq_q6_k(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 210) {
        const float d = h2f(x + 208);
        const unsigned char *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            /* ggml computes d * sc * q left to right: the scale product first. */
            for (int is = 0; is < 2; is++) {
                const float s1 = d * (float)sc[is], s2 = d * (float)sc[is + 2];
                const float s3 = d * (float)sc[is + 4], s4 = d * (float)sc[is + 6];
                for (int l = 16 * is; l < 16 * is + 16; l++) {
                    const int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    const int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = s1 * (float)q1;
                    y[l + 32] = s2 * (float)q2;
                    y[l + 64] = s3 * (float)q3;
                    y[l + 96] = s4 * (float)q4;
                }
            }
        }
    }
}

void tq_ggml_dequant(uint32_t type, const void *src, float *dst, uint64_t nblocks)
{
    const unsigned char *x = src;
    switch (type) {
    case 0: deq_f32(x, dst, nblocks); break;
    case 1: deq_f16(x, dst, nblocks); break;
    case 30: deq_bf16(x, dst, nblocks); break;
    case 2: deq_q4_0(x, dst, nblocks); break;
    case 3: deq_q4_1(x, dst, nblocks); break;
    case 6: deq_q5_0(x, dst, nblocks); break;
    case 7: deq_q5_1(x, dst, nblocks); break;
    case 8: deq_q8_0(x, dst, nblocks); break;
    case 10: deq_q2_k(x, dst, nblocks); break;
    case 11: deq_q3_k(x, dst, nblocks); break;
    case 12: deq_q4_k(x, dst, nblocks); break;
    case 13: deq_q5_k(x, dst, nblocks); break;
    case 14: deq_q6_k(x, dst, nblocks); break;
    default: break; /* callers check tq_ggml_type_can_dequant first */
    }
}
