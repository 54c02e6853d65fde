/* tests/unit/ggml_ref.c — see ggml_grids.h. Every value is computed for one element at a time
 * from the block layout, with ggml's own float operation order (scale products first, the
 * quant multiply last) so that the results are comparable bit for bit. */
#include "ggml_grids.h"

#include <math.h>
#include <string.h>

uint64_t gg_rng(uint64_t *s)
{
    uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

int gg_level_iq2(unsigned c) { static const int v[4] = {8, 25, 43, -1000}; return v[c & 3]; }
int gg_level_iq1(unsigned c) { static const int v[4] = {-1, 0, 1, -1000}; return v[c & 3]; }
int gg_level_iq3xxs(unsigned c) { static const int v[8] = {4, 12, 20, 28, 36, 44, 52, 62}; return v[c & 7]; }
int gg_level_iq3s(unsigned c) { return 2 * (int)(c & 7) + 1; }

int gg_grid_value(const uint16_t *compact, int bits, int (*level)(unsigned), unsigned k, int j)
{
    return level((compact[k] >> (bits * j)) & ((1u << bits) - 1));
}

static const struct { uint32_t id; const char *name; uint32_t elems, bytes; } geo[] = {
    {0, "F32", 1, 4}, {1, "F16", 1, 2}, {30, "BF16", 1, 2}, {2, "Q4_0", 32, 18}, {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22}, {7, "Q5_1", 32, 24}, {8, "Q8_0", 32, 34}, {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210},
    {15, "Q8_K", 256, 292}, {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98},
    {19, "IQ1_S", 256, 50}, {20, "IQ4_NL", 32, 18}, {21, "IQ3_S", 256, 110}, {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {29, "IQ1_M", 256, 56}, {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66},
    {39, "MXFP4", 32, 17},
};

int gg_type_geometry(uint32_t type, uint32_t *elems, uint32_t *bytes)
{
    for (size_t i = 0; i < sizeof geo / sizeof *geo; i++)
        if (geo[i].id == type) {
            *elems = geo[i].elems;
            *bytes = geo[i].bytes;
            return 0;
        }
    return -1;
}

const char *gg_type_name(uint32_t type)
{
    for (size_t i = 0; i < sizeof geo / sizeof *geo; i++)
        if (geo[i].id == type)
            return geo[i].name;
    return "?";
}

static unsigned u16at(const unsigned char *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }
static uint32_t u32at(const unsigned char *p) { return u16at(p) | (uint32_t)u16at(p + 2) << 16; }

/* IEEE binary16 by its definition: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m when e = 0. */
static float half(unsigned h)
{
    int s = (h >> 15) & 1, ex = (h >> 10) & 31, m = h & 1023;
    double v = ex == 0 ? ldexp(m, -24) : ex == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, ex - 25);
    return (float)(s ? -v : v);
}

static float f32of(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* The sign byte of a 7-bit sign index: an 8th sign that makes the count of minus signs even. */
static unsigned signs_of(unsigned s7)
{
    unsigned n = 0;
    for (int i = 0; i < 7; i++)
        n += (s7 >> i) & 1;
    return s7 | (n & 1) << 7;
}

static float signed_mul(float db, int v, int neg) { return db * (float)v * (neg ? -1.f : 1.f); }

/* K-quant 6-bit scale and min of sub-block j (12 packed bytes). */
static void k_scale_min(const unsigned char *q, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
        *mn = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

static const int iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

float gg_ref_element(uint32_t type, const unsigned char *b, uint32_t e)
{
    switch (type) {
    case 0: return f32of(u32at(b));
    case 1: return half(u16at(b));
    case 30: return f32of((uint32_t)u16at(b) << 16);
    case 2: case 3: { /* Q4_0 / Q4_1: element e < 16 in the low nibble of byte e, else high */
        int q = e < 16 ? b[(type == 2 ? 2 : 4) + e] & 15 : b[(type == 2 ? 2 : 4) + e - 16] >> 4;
        float d = half(u16at(b));
        return type == 2 ? (float)(q - 8) * d : (float)q * d + half(u16at(b + 2));
    }
    case 6: case 7: { /* Q5_0 / Q5_1: bit e of the u32 qh is the fifth bit of element e */
        const unsigned char *qs = b + (type == 6 ? 6 : 8);
        uint32_t qh = u32at(b + (type == 6 ? 2 : 4));
        int q = (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
        float d = half(u16at(b));
        return type == 6 ? (float)(q - 16) * d : (float)q * d + half(u16at(b + 2));
    }
    case 8: return (float)(int8_t)b[2 + e] * half(u16at(b));
    case 10: { /* Q2_K: scales[16], qs[64], d, dmin; 2 halves of 128 = 4 shifts x 2 x 16 */
        uint32_t n = e / 128, r = e % 128, j = r / 32, part = (r % 32) / 16, l = r % 16;
        unsigned sc = b[n * 8 + j * 2 + part];
        int q = (b[16 + n * 32 + part * 16 + l] >> (2 * j)) & 3;
        float dl = half(u16at(b + 80)) * (float)(sc & 15), ml = half(u16at(b + 82)) * (float)(sc >> 4);
        return dl * (float)q - ml;
    }
    case 11: { /* Q3_K: hmask[32], qs[64], scales[12], d */
        uint32_t n = e / 128, r = e % 128, j = r / 32, part = (r % 32) / 16, l = r % 16, k = n * 8 + j * 2 + part;
        int low = k < 8 ? b[96 + k] & 15 : b[96 + k - 8] >> 4, high = (b[104 + k % 4] >> (2 * (k / 4))) & 3;
        int q = (b[32 + n * 32 + part * 16 + l] >> (2 * j)) & 3;
        int hbit = (b[part * 16 + l] >> (n * 4 + j)) & 1;
        return half(u16at(b + 108)) * (float)((low | high << 4) - 32) * (float)(q - (hbit ? 0 : 4));
    }
    case 12: case 13: { /* Q4_K / Q5_K: d, dmin, scales[12], (qh[32]), qs[128] */
        uint32_t j = e / 64, r = e % 64, sub = j * 2 + r / 32, l = r % 32;
        const unsigned char *qs = b + (type == 12 ? 16 : 48);
        int q = r < 32 ? qs[32 * j + l] & 15 : qs[32 * j + l] >> 4;
        if (type == 13)
            q += ((b[16 + l] >> sub) & 1) * 16;
        int sc, mn;
        k_scale_min(b + 4, (int)sub, &sc, &mn);
        return half(u16at(b)) * (float)sc * (float)q - half(u16at(b + 2)) * (float)mn;
    }
    case 14: { /* Q6_K: ql[128], qh[64], scales[16], d; halves of 128 in 4 quarters of 32 */
        uint32_t n = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const unsigned char *ql = b + 64 * n, *qh = b + 128 + 32 * n;
        int lo = quarter % 2 ? ql[l + 32] : ql[l];
        lo = quarter < 2 ? lo & 15 : lo >> 4;
        int q = lo | ((qh[l] >> (2 * quarter)) & 3) << 4;
        return half(u16at(b + 208)) * (float)(int8_t)b[192 + 8 * n + l / 16 + 2 * quarter] * (float)(q - 32);
    }
    case 15: return f32of(u32at(b)) * (float)(int8_t)b[4 + e];
    case 16: { /* IQ2_XXS */
        uint32_t ib = e / 32, l = (e % 32) / 8, j = e % 8;
        uint32_t aux = u32at(b + 2 + 8 * ib + 4);
        float db = half(u16at(b)) * (0.5f + (float)(aux >> 28)) * 0.25f;
        int v = gg_grid_value(gg_compact_2bit_256, 2, gg_level_iq2, b[2 + 8 * ib + l], (int)j);
        return signed_mul(db, v, (signs_of((aux >> (7 * l)) & 127) >> j) & 1);
    }
    case 17: { /* IQ2_XS */
        uint32_t ib = e / 32, l = (e % 32) / 8, j = e % 8;
        unsigned q = u16at(b + 2 + 2 * (4 * ib + l)), sc = b[66 + ib];
        float db = half(u16at(b)) * (0.5f + (float)(l < 2 ? sc & 15 : sc >> 4)) * 0.25f;
        int v = gg_grid_value(gg_compact_2bit_512, 2, gg_level_iq2, q & 511, (int)j);
        return signed_mul(db, v, (signs_of(q >> 9) >> j) & 1);
    }
    case 22: { /* IQ2_S */
        uint32_t ib = e / 32, l = (e % 32) / 8, j = e % 8;
        unsigned idx = b[2 + 4 * ib + l] | ((b[66 + ib] >> (2 * l)) & 3) << 8, sc = b[74 + ib];
        float db = half(u16at(b)) * (0.5f + (float)(l < 2 ? sc & 15 : sc >> 4)) * 0.25f;
        int v = gg_grid_value(gg_compact_2bit_1024, 2, gg_level_iq2, idx, (int)j);
        return signed_mul(db, v, (b[34 + 4 * ib + l] >> j) & 1);
    }
    case 18: { /* IQ3_XXS */
        uint32_t ib = e / 32, l = (e % 32) / 8, k = e % 8;
        uint32_t aux = u32at(b + 66 + 4 * ib);
        float db = half(u16at(b)) * (0.5f + (float)(aux >> 28)) * 0.5f;
        int v = gg_grid_value(gg_compact_3bit_256, 3, gg_level_iq3xxs, b[2 + 8 * ib + 2 * l + k / 4], (int)(k % 4));
        return signed_mul(db, v, (signs_of((aux >> (7 * l)) & 127) >> k) & 1);
    }
    case 21: { /* IQ3_S */
        uint32_t ib = e / 32, l = (e % 32) / 8, k = e % 8;
        unsigned idx = b[2 + 8 * ib + 2 * l + k / 4] | ((b[66 + ib] >> (2 * l + k / 4)) & 1) << 8;
        unsigned s = ib % 2 ? b[106 + ib / 2] >> 4 : b[106 + ib / 2] & 15;
        float db = half(u16at(b)) * (float)(1 + 2 * (int)s);
        int v = gg_grid_value(gg_compact_3bit_512, 3, gg_level_iq3s, idx, (int)(k % 4));
        return signed_mul(db, v, (b[74 + 4 * ib + l] >> k) & 1);
    }
    case 19: { /* IQ1_S */
        uint32_t ib = e / 32, l = (e % 32) / 8, j = e % 8;
        unsigned qh = u16at(b + 34 + 2 * ib), idx = b[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7) << 8;
        float dl = half(u16at(b)) * (float)(2 * (int)((qh >> 12) & 7) + 1);
        float delta = qh & 0x8000 ? -0.125f : 0.125f;
        return dl * ((float)gg_grid_value(gg_compact_1bit_2048, 2, gg_level_iq1, idx, (int)j) + delta);
    }
    case 29: { /* IQ1_M */
        uint32_t ib = e / 32, l = (e % 32) / 8, j = e % 8;
        unsigned hb = b[32 + 2 * ib + l / 2], nib = l % 2 ? hb >> 4 : hb & 15;
        unsigned idx = b[4 * ib + l] | (nib & 7) << 8;
        unsigned sup = 0;
        for (int w = 0; w < 4; w++)
            sup |= (u16at(b + 48 + 2 * w) >> 12) << (4 * w);
        unsigned s = (u16at(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
        float dl = half(sup) * (float)(2 * (int)s + 1);
        float delta = nib & 8 ? -0.125f : 0.125f;
        return dl * ((float)gg_grid_value(gg_compact_1bit_2048, 2, gg_level_iq1, idx, (int)j) + delta);
    }
    case 20: return half(u16at(b)) * (float)iq4_levels[e < 16 ? b[2 + e] & 15 : b[2 + e - 16] >> 4];
    case 23: { /* IQ4_XS */
        uint32_t ib = e / 32, r = e % 32;
        unsigned byte = b[8 + 16 * ib + r % 16], lo = ib % 2 ? b[4 + ib / 2] >> 4 : b[4 + ib / 2] & 15;
        int ls = (int)(lo | ((u16at(b + 2) >> (2 * ib)) & 3) << 4);
        return half(u16at(b)) * (float)(ls - 32) * (float)iq4_levels[r < 16 ? byte & 15 : byte >> 4];
    }
    case 34: { /* TQ1_0: a byte holds ceil(v * 256 / 243) for 5 trits v; trit n is the n-th from the top */
        unsigned byte, n;
        if (e < 160)
            byte = b[e % 32], n = e / 32;
        else if (e < 240)
            byte = b[32 + (e - 160) % 16], n = (e - 160) / 16;
        else
            byte = b[48 + (e - 240) % 4], n = (e - 240) / 4;
        unsigned p = 1;
        for (unsigned k = 0; k < n; k++)
            p *= 3;
        int t = (int)((((byte * p) & 255) * 3) >> 8);
        return (float)(t - 1) * half(u16at(b + 52));
    }
    case 35: { /* TQ2_0 */
        uint32_t g = e / 128, r = e % 128, l = r / 32, m = r % 32;
        return (float)((int)((b[32 * g + m] >> (2 * l)) & 3) - 1) * half(u16at(b + 64));
    }
    case 39: { /* MXFP4: E2M1 (sign, 2 exponent bits, 1 mantissa bit) times 2^(E8M0 - 127) */
        unsigned nib = e < 16 ? b[1 + e] & 15 : b[1 + e - 16] >> 4, ex = (nib >> 1) & 3, man = nib & 1;
        double mag = ex == 0 ? 0.5 * man : ldexp(1.0 + 0.5 * man, (int)ex - 1);
        if (mag == 0)
            return 0.0f; /* ggml's level table has +0 for the "negative zero" code as well */
        return (float)ldexp(nib & 8 ? -mag : mag, (int)b[0] - 127);
    }
    default: return NAN;
    }
}

int gg_scale_field(uint32_t type, uint32_t *off, uint32_t *width)
{
    *width = 2;
    switch (type) {
    case 10: *off = 80; return 0;
    case 11: *off = 108; return 0;
    case 14: *off = 208; return 0;
    case 34: *off = 52; return 0;
    case 35: *off = 64; return 0;
    case 15: *off = 0; *width = 4; return 0;
    case 39: *off = 0; *width = 1; return 0;
    case 29: case 0: case 1: case 30: return -1;
    default: *off = 0; return 0;
    }
}

/* A finite f16 of varied kind: mostly small positive/negative normals, some zero, subnormal
 * and large values. */
static unsigned rand_half(uint64_t *s)
{
    uint64_t r = gg_rng(s);
    unsigned sign = (unsigned)(r & 1) << 15, kind = (unsigned)(r >> 1) % 16, man = (unsigned)(r >> 8) & 1023;
    if (kind == 0)
        return sign;
    if (kind == 1)
        return sign | (man ? man : 1);                    /* subnormal */
    if (kind == 2)
        return sign | (30u << 10) | man;                  /* large */
    return sign | ((unsigned)(5 + (r >> 20) % 12) << 10) | man; /* 2^-10 .. 2^1 */
}

void gg_random_block(uint32_t type, uint64_t *rng, int variant, unsigned char *b)
{
    uint32_t be, bb;
    if (gg_type_geometry(type, &be, &bb) != 0)
        return;
    for (uint32_t i = 0; i < bb; i++)
        b[i] = variant ? 0xff : (unsigned char)gg_rng(rng);
    uint32_t off, w;
    unsigned h = rand_half(rng);
    if (type == 0) { /* a finite f32 */
        float f = (float)((double)(int64_t)gg_rng(rng) / 9.3e18) * 3.0f;
        memcpy(b, &f, 4);
    } else if (type == 1) {
        b[0] = (unsigned char)h, b[1] = (unsigned char)(h >> 8);
    } else if (type == 30) {
        b[1] = (unsigned char)((b[1] & 0x80) | (0x3c + gg_rng(rng) % 8)); /* exponent field 2^-7..2^0 */
    } else if (type == 29) { /* the super-block scale lives in the top nibble of each scale word */
        for (int k = 0; k < 4; k++)
            b[48 + 2 * k + 1] = (unsigned char)((b[48 + 2 * k + 1] & 0x0f) | ((h >> (4 * k)) & 15) << 4);
    } else if (gg_scale_field(type, &off, &w) == 0) {
        if (w == 2) {
            b[off] = (unsigned char)h, b[off + 1] = (unsigned char)(h >> 8);
            /* a second f16 (min / dmin) right after the first in these types */
            if (type == 3 || type == 7 || type == 10 || type == 12 || type == 13) {
                unsigned m = rand_half(rng);
                b[off + 2] = (unsigned char)m, b[off + 3] = (unsigned char)(m >> 8);
            }
        } else if (w == 4) {
            float f = (float)((double)(int64_t)gg_rng(rng) / 9.3e18) / 127.0f;
            memcpy(b, &f, 4);
        } else {
            b[0] = (unsigned char)(gg_rng(rng) % 251); /* 0xff is NaN in E8M0; 12 * 2^(e-128) overflows past 250 */
        }
    }
}
