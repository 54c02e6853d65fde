/* ggml tensor types, one row each (the table at the end): name, geometry, the decoder to f32
 * that reproduces ggml's reference dequantize_row_* bit for bit, and the checks of
 * ggml_validate_row_data. The arithmetic below keeps ggml's exact
 * operation order and types (products of a float with an int converted to float, the
 * scale product formed before the quant multiply, subtraction of the min last); the build
 * uses -ffp-contract=off, so no multiply-add is fused where ggml's does not fuse either. */
#include "formats/formats.h"
#include "formats/gguf_internal.h"

#include <stdio.h>
#include <string.h>

/* The kernels are elementwise (no reductions), so vectorizing them cannot change a single
 * result; GCC's -O2 cost model leaves them scalar at a third of the speed. Clang vectorizes
 * them at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

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

/* ------------------------------------------------------------- i-quants */
static inline uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Sign byte of a 7-bit sign index: bit 7 makes the number of minus signs even. */
static inline unsigned iq_signs(unsigned s7) { return s7 | (unsigned)__builtin_parity(s7) << 7; }

/* Byte j of a grid entry (entries are little-endian packed, whatever the host). */
static inline unsigned gbyte(uint64_t g, int j) { return (unsigned)(g >> (8 * j)) & 0xff; }

/* 8 outputs of the 8-wide grids: db * value, negated where the sign byte has a 1; ggml forms
 * db * value first and multiplies by +-1 after, which is exact either way. */
static inline void grid8(float *y, float db, uint64_t g, unsigned signs)
{
    for (int j = 0; j < 8; j++) {
        const float v = db * (float)gbyte(g, j);
        y[j] = (signs >> j) & 1 ? -v : v;
    }
}

/* IQ2_XXS: d, then 8 groups of 32 of 8 bytes: 4 grid indices, and a u32 of four 7-bit sign
 * indices (bits 0..27) and a 4-bit scale (bits 28..31). */
static void deq_iq2_xxs(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 66) {
        const float d = h2f(x);
        for (int ib = 0; ib < 8; ib++) {
            const unsigned char *q = x + 2 + 8 * ib;
            const uint32_t aux = le32(q + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8)
                grid8(y, db, tq_ggml_iq2xxs_grid[q[l]], iq_signs((aux >> (7 * l)) & 127));
        }
    }
}

/* IQ2_XS: d, 32 u16 (9-bit grid index, 7-bit sign index), 8 bytes of two 4-bit scales. */
static void deq_iq2_xs(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 74) {
        const float d = h2f(x);
        for (int ib = 0; ib < 8; ib++) {
            const unsigned sc = x[66 + ib];
            const float db[2] = {d * (0.5f + (float)(sc & 0xf)) * 0.25f, d * (0.5f + (float)(sc >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned q = le16(x + 2 + 2 * (4 * ib + l));
                grid8(y, db[l / 2], tq_ggml_iq2xs_grid[q & 511], iq_signs(q >> 9));
            }
        }
    }
}

/* IQ2_S: d, 32 low index bytes, 32 sign bytes, 8 bytes of 2-bit high index parts, 8 scales. */
static void deq_iq2_s(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 82) {
        const float d = h2f(x);
        const unsigned char *qs = x + 2, *sg = x + 34, *qh = x + 66, *sc = x + 74;
        for (int ib = 0; ib < 8; ib++, qs += 4, sg += 4) {
            const float db[2] = {d * (0.5f + (float)(sc[ib] & 0xf)) * 0.25f, d * (0.5f + (float)(sc[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8)
                grid8(y, db[l / 2], tq_ggml_iq2s_grid[qs[l] | ((qh[ib] << (8 - 2 * l)) & 0x300)], sg[l]);
        }
    }
}

/* 4 + 4 outputs of the 4-wide grids under one sign byte. */
static inline void grid4x2(float *y, float db, uint32_t g1, uint32_t g2, unsigned signs)
{
    for (int j = 0; j < 4; j++) {
        const float a = db * (float)gbyte(g1, j), b = db * (float)gbyte(g2, j);
        y[j] = (signs >> j) & 1 ? -a : a;
        y[j + 4] = (signs >> (j + 4)) & 1 ? -b : b;
    }
}

/* IQ3_XXS: d, 64 grid index bytes, 8 u32 of four 7-bit sign indices and a 4-bit scale. */
static void deq_iq3_xxs(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 98) {
        const float d = h2f(x);
        const unsigned char *qs = x + 2;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint32_t aux = le32(x + 66 + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8)
                grid4x2(y, db, tq_ggml_iq3xxs_grid[qs[2 * l]], tq_ggml_iq3xxs_grid[qs[2 * l + 1]],
                        iq_signs((aux >> (7 * l)) & 127));
        }
    }
}

/* IQ3_S: d, 64 low index bytes, 8 bytes of 9th index bits, 32 sign bytes, 4 bytes of two
 * 4-bit scales (odd scales 1..31). */
static void deq_iq3_s(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 110) {
        const float d = h2f(x);
        const unsigned char *qs = x + 2, *qh = x + 66, *sg = x + 74, *sc = x + 106;
        for (int ib = 0; ib < 8; ib++, qs += 8, sg += 4) {
            const unsigned s = ib % 2 ? sc[ib / 2] >> 4 : sc[ib / 2] & 0xf;
            const float db = d * (float)(1 + 2 * (int)s);
            for (int l = 0; l < 4; l++, y += 8)
                grid4x2(y, db, tq_ggml_iq3s_grid[qs[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256)],
                        tq_ggml_iq3s_grid[qs[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256)], sg[l]);
        }
    }
}

#define IQ1_DELTA 0.125f

/* 8 outputs of the ternary IQ1 grid: dl * (value + delta). */
static inline void grid1(float *y, float dl, uint64_t g, float delta)
{
    for (int j = 0; j < 8; j++)
        y[j] = dl * ((float)(int8_t)gbyte(g, j) + delta);
}

/* IQ1_S: d, 32 low index bytes, 8 u16: four 3-bit high index parts, a 3-bit scale, and the
 * sign of the delta (bit 15). */
static void deq_iq1_s(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 50) {
        const float d = h2f(x);
        const unsigned char *qs = x + 2;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            const unsigned qh = le16(x + 34 + 2 * ib);
            const float dl = d * (float)(2 * (int)((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++, y += 8)
                grid1(y, dl, tq_ggml_iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)], delta);
        }
    }
}

/* IQ1_M's f16 super-block scale: the top nibbles of its four u16 scale words. */
static inline uint16_t iq1m_scale(const unsigned char *sc)
{
    const unsigned s0 = le16(sc), s1 = le16(sc + 2), s2 = le16(sc + 4), s3 = le16(sc + 6);
    return (uint16_t)((s0 >> 12) | ((s1 >> 8) & 0x00f0) | ((s2 >> 4) & 0x0f00) | (s3 & 0xf000));
}

/* IQ1_M: 32 low index bytes, 16 bytes of (3-bit high index part + delta sign) nibbles, 4 u16
 * of four 3-bit scales each (and a nibble of the super-block scale). */
static void deq_iq1_m(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 56) {
        const uint16_t sb = iq1m_scale(x + 48);
        unsigned char hb[2] = {(unsigned char)sb, (unsigned char)(sb >> 8)};
        const float d = h2f(hb);
        const unsigned char *qs = x, *qh = x + 32;
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
            const unsigned s = le16(x + 48 + 2 * (ib / 2)) >> (6 * (ib % 2));
            const float dl1 = d * (float)(2 * (int)(s & 7) + 1), dl2 = d * (float)(2 * (int)((s >> 3) & 7) + 1);
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned h = l < 2 ? qh[0] : qh[1], nib = l % 2 ? h >> 4 : h & 0xf;
                grid1(y, l < 2 ? dl1 : dl2, tq_ggml_iq1s_grid[qs[l] | ((nib & 7) << 8)], nib & 8 ? -IQ1_DELTA : IQ1_DELTA);
            }
        }
    }
}

/* The non-linear 4-bit levels of IQ4_NL / IQ4_XS (ggml's int8 levels, held as the floats they
 * convert to exactly). */
static const float iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void deq_iq4_nl(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 18, y += 32) {
        const float d = h2f(x);
        for (int j = 0; j < 16; j++) {
            y[j] = d * iq4_levels[x[2 + j] & 0xf];
            y[j + 16] = d * iq4_levels[x[2 + j] >> 4];
        }
    }
}

/* IQ4_XS: d, u16 of 2-bit high scale parts, 4 bytes of 4-bit low parts, 128 nibble bytes. */
static void deq_iq4_xs(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 136) {
        const float d = h2f(x);
        const unsigned sh = le16(x + 2);
        const unsigned char *qs = x + 8;
        for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
            const int ls = (int)(((x[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4));
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * iq4_levels[qs[j] & 0xf];
                y[j + 16] = dl * iq4_levels[qs[j] >> 4];
            }
        }
    }
}

/* ------------------------------------------------------ ternary, Q8_K, MXFP4 */
/* Trit n (0 = most significant) of a byte holding 5 base-3 digits scaled to 0..255. */
static inline int trit(unsigned char b, int n)
{
    static const unsigned char pow3[5] = {1, 3, 9, 27, 81};
    const unsigned char q = (unsigned char)(b * pow3[n]);
    return (int)(((unsigned)q * 3) >> 8);
}

/* TQ1_0: 48 bytes of 5 trits (32 bytes in 5 rows of 32, then 16 in 5 rows of 16), 4 bytes
 * of 4 trits, d. */
static void deq_tq1_0(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 54) {
        const float d = h2f(x + 52);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 32; m++)
                *y++ = (float)(trit(x[m], n) - 1) * d;
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 16; m++)
                *y++ = (float)(trit(x[32 + m], n) - 1) * d;
        for (int n = 0; n < 4; n++)
            for (int m = 0; m < 4; m++)
                *y++ = (float)(trit(x[48 + m], n) - 1) * d;
    }
}

/* TQ2_0: 64 bytes of four 2-bit codes (value code - 1), d. */
static void deq_tq2_0(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 66) {
        const float d = h2f(x + 64);
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++)
                    *y++ = (float)((int)((x[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

static inline float f32_at(const unsigned char *p)
{
    uint32_t b = le32(p);
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Q8_K: f32 d, 256 int8, 16 int16 block sums (not needed to dequantize). */
static void deq_q8_k(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 292) {
        const float d = f32_at(x);
        for (int j = 0; j < 256; j++)
            *y++ = d * (float)(int8_t)x[4 + j];
    }
}

/* MXFP4: an E8M0 exponent, then 16 bytes of E2M1 nibbles (low nibble elements 0..15): the
 * one decoder of formats/mxfp4.c. Its refusal (e = 255, checked by tq_ggml_check_blocks, or a
 * value past f32, which ggml writes as inf and callers see as non-finite) is not ours to make. */
static void deq_mxfp4(const unsigned char *x, float *y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++, x += 17, y += 32)
        (void)tq_mxfp4_block(x + 1, x[0], 1, y);
}

/* ------------------------------------------------------------ validation */
/* Extra per-block checks of ggml_validate_row_data beyond the f16 scales at scale_at: -1 with
 * why. */
static int f16_finite(const unsigned char *p) { return (le16(p) & 0x7c00) != 0x7c00; }

static int f16_refused(const char *what, unsigned v, char *why, size_t cap)
{
    snprintf(why, cap, "%s is %s (f16 0x%04x)", what, (v & 0x3ff) ? "NaN" : "infinite", v);
    return -1;
}

/* IQ1_M: the f16 super-block scale assembled from four nibbles. */
static int check_iq1_m(const unsigned char *x, char *why, size_t cap)
{
    const uint16_t sb = iq1m_scale(x + 48);
    const unsigned char hb[2] = {(unsigned char)sb, (unsigned char)(sb >> 8)};
    return f16_finite(hb) ? 0 : f16_refused("scale", sb, why, cap);
}

/* Q8_K: an f32 scale. */
static int check_q8_k(const unsigned char *x, char *why, size_t cap)
{
    if ((le32(x) & 0x7f800000u) != 0x7f800000u)
        return 0;
    snprintf(why, cap, "scale is %s (f32 0x%08x)", (le32(x) & 0x7fffff) ? "NaN" : "infinite", le32(x));
    return -1;
}

/* MXFP4: the E8M0 exponent 0xff is NaN. */
static int check_mxfp4(const unsigned char *x, char *why, size_t cap)
{
    if (x[0] != 0xff)
        return 0;
    snprintf(why, cap, "E8M0 scale 0xff is NaN");
    return -1;
}

/* ------------------------------------------------------------ the types */
/* One row per ggml type (ggml's type_traits[] in ggml.c: blck_size, type_size, is_quantized,
 * to_float). block_elems values of block_bytes bytes each; a tensor's ne[0] must be a multiple
 * of block_elems (gguf.c). quantized: lossy (ggml_is_quantized, less F32/F16/BF16 which are
 * not). dtype: a one-element type presented unchanged in this tq_dtype (raw), else presented
 * as F32 (to_float's output). to_float: NULL where ggml has no dequantization (Q8_1) or tq
 * presents the bytes as they are (the integers, F64). scale_at: byte offsets of the f16 scales
 * ggml_validate_row_data requires to be finite (NO: none); check: its other refusals. Adding a
 * type is one row and its functions. */
typedef struct ggml_type_row {
    const char *name;
    uint16_t block_elems, block_bytes;
    uint8_t quantized, raw;
    tq_dtype dtype;
    uint8_t scale_at[2];
    void (*to_float)(const unsigned char *x, float *y, uint64_t nblocks);
    int (*check)(const unsigned char *block, char *why, size_t cap);
} ggml_type_row;

#define NO 0xff
#define RAW(NAME, BYTES, DT, DEQ) {NAME, 1, BYTES, 0, 1, DT, {NO, NO}, DEQ, NULL}
#define BLOCK(NAME, ELEMS, BYTES, S0, S1, DEQ, CHECK) {NAME, ELEMS, BYTES, 1, 0, TQ_DT_F32, {S0, S1}, DEQ, CHECK}
static const ggml_type_row types[TQ_GGML_COUNT] = {
    [TQ_GGML_F32] = RAW("F32", 4, TQ_DT_F32, deq_f32),
    [TQ_GGML_F16] = RAW("F16", 2, TQ_DT_F16, deq_f16),
    [TQ_GGML_Q4_0] = BLOCK("Q4_0", 32, 18, 0, NO, deq_q4_0, NULL),
    [TQ_GGML_Q4_1] = BLOCK("Q4_1", 32, 20, 0, 2, deq_q4_1, NULL),
    [TQ_GGML_Q5_0] = BLOCK("Q5_0", 32, 22, 0, NO, deq_q5_0, NULL),
    [TQ_GGML_Q5_1] = BLOCK("Q5_1", 32, 24, 0, 2, deq_q5_1, NULL),
    [TQ_GGML_Q8_0] = BLOCK("Q8_0", 32, 34, 0, NO, deq_q8_0, NULL),
    [TQ_GGML_Q8_1] = BLOCK("Q8_1", 32, 36, NO, NO, NULL, NULL),
    [TQ_GGML_Q2_K] = BLOCK("Q2_K", 256, 84, 80, 82, deq_q2_k, NULL),
    [TQ_GGML_Q3_K] = BLOCK("Q3_K", 256, 110, 108, NO, deq_q3_k, NULL),
    [TQ_GGML_Q4_K] = BLOCK("Q4_K", 256, 144, 0, 2, deq_q4_k, NULL),
    [TQ_GGML_Q5_K] = BLOCK("Q5_K", 256, 176, 0, 2, deq_q5_k, NULL),
    [TQ_GGML_Q6_K] = BLOCK("Q6_K", 256, 210, 208, NO, deq_q6_k, NULL),
    [TQ_GGML_Q8_K] = BLOCK("Q8_K", 256, 292, NO, NO, deq_q8_k, check_q8_k),
    [TQ_GGML_IQ2_XXS] = BLOCK("IQ2_XXS", 256, 66, 0, NO, deq_iq2_xxs, NULL),
    [TQ_GGML_IQ2_XS] = BLOCK("IQ2_XS", 256, 74, 0, NO, deq_iq2_xs, NULL),
    [TQ_GGML_IQ3_XXS] = BLOCK("IQ3_XXS", 256, 98, 0, NO, deq_iq3_xxs, NULL),
    [TQ_GGML_IQ1_S] = BLOCK("IQ1_S", 256, 50, 0, NO, deq_iq1_s, NULL),
    [TQ_GGML_IQ4_NL] = BLOCK("IQ4_NL", 32, 18, 0, NO, deq_iq4_nl, NULL),
    [TQ_GGML_IQ3_S] = BLOCK("IQ3_S", 256, 110, 0, NO, deq_iq3_s, NULL),
    [TQ_GGML_IQ2_S] = BLOCK("IQ2_S", 256, 82, 0, NO, deq_iq2_s, NULL),
    [TQ_GGML_IQ4_XS] = BLOCK("IQ4_XS", 256, 136, 0, NO, deq_iq4_xs, NULL),
    [TQ_GGML_I8] = RAW("I8", 1, TQ_DT_I8, NULL),
    [TQ_GGML_I16] = RAW("I16", 2, TQ_DT_I16, NULL),
    [TQ_GGML_I32] = RAW("I32", 4, TQ_DT_I32, NULL),
    [TQ_GGML_I64] = RAW("I64", 8, TQ_DT_I64, NULL),
    [TQ_GGML_F64] = RAW("F64", 8, TQ_DT_F64, NULL),
    [TQ_GGML_IQ1_M] = BLOCK("IQ1_M", 256, 56, NO, NO, deq_iq1_m, check_iq1_m),
    [TQ_GGML_BF16] = RAW("BF16", 2, TQ_DT_BF16, deq_bf16),
    [TQ_GGML_TQ1_0] = BLOCK("TQ1_0", 256, 54, 52, NO, deq_tq1_0, NULL),
    [TQ_GGML_TQ2_0] = BLOCK("TQ2_0", 256, 66, 64, NO, deq_tq2_0, NULL),
    [TQ_GGML_MXFP4] = BLOCK("MXFP4", 32, 17, NO, NO, deq_mxfp4, check_mxfp4),
};
#undef RAW
#undef BLOCK

static const ggml_type_row *row_of(uint32_t t)
{
    return t < TQ_GGML_COUNT && types[t].name ? &types[t] : NULL;
}

const char *tq_ggml_type_name(uint32_t type)
{
    const ggml_type_row *r = row_of(type);
    return r ? r->name : NULL;
}

int tq_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    const ggml_type_row *r = row_of(type);
    if (!r)
        return -1;
    *block_elems = r->block_elems;
    *block_bytes = r->block_bytes;
    return 0;
}

int tq_ggml_type_can_dequant(uint32_t type)
{
    const ggml_type_row *r = row_of(type);
    return r && r->to_float;
}

int tq_ggml_type_is_quantized(uint32_t type)
{
    const ggml_type_row *r = row_of(type);
    return r && r->quantized;
}

int tq_ggml_type_dtype(uint32_t type, tq_dtype *dt)
{
    const ggml_type_row *r = row_of(type);
    if (!r || !r->raw)
        return 0;
    *dt = r->dtype;
    return 1;
}

int tq_ggml_check_blocks(uint32_t type, const void *src, uint64_t nblocks, uint64_t *bad, char *why, size_t cap)
{
    const ggml_type_row *r = row_of(type);
    const unsigned char *x = src;
    if (!r || r->raw)
        return 0;
    for (uint64_t b = 0; b < nblocks; b++, x += r->block_bytes) {
        int rc = 0;
        for (int k = 0; k < 2 && !rc; k++)
            if (r->scale_at[k] != NO && !f16_finite(x + r->scale_at[k]))
                rc = f16_refused(k ? "second scale (min)" : "scale", le16(x + r->scale_at[k]), why, cap);
        if (!rc && r->check)
            rc = r->check(x, why, cap);
        if (rc) {
            *bad = b;
            return -1;
        }
    }
    return 0;
}

void tq_ggml_dequant(uint32_t type, const void *src, float *dst, uint64_t nblocks)
{
    const ggml_type_row *r = row_of(type);
    if (r && r->to_float) /* callers check tq_ggml_type_can_dequant first */
        r->to_float(src, dst, nblocks);
}
