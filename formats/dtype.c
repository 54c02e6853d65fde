/* dtype names and sizes, and f32 <-> f16 / bf16 conversion (round to nearest even). */
#include "formats/formats.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[TQ_DT_COUNT] = {
    [TQ_DT_BOOL] = {"BOOL", 1},       [TQ_DT_U8] = {"U8", 1},     [TQ_DT_I8] = {"I8", 1},
    [TQ_DT_F8_E5M2] = {"F8_E5M2", 1}, [TQ_DT_F8_E4M3] = {"F8_E4M3", 1},
    [TQ_DT_I16] = {"I16", 2},         [TQ_DT_U16] = {"U16", 2},   [TQ_DT_F16] = {"F16", 2},
    [TQ_DT_BF16] = {"BF16", 2},       [TQ_DT_I32] = {"I32", 4},   [TQ_DT_U32] = {"U32", 4},
    [TQ_DT_F32] = {"F32", 4},         [TQ_DT_F64] = {"F64", 8},   [TQ_DT_I64] = {"I64", 8},
    [TQ_DT_U64] = {"U64", 8},
};

const char *tq_dtype_name(tq_dtype d)
{
    return (unsigned)d < TQ_DT_COUNT ? dtypes[d].name : "?";
}

int tq_dtype_from_name(const char *s, tq_dtype *out)
{
    for (int i = 0; i < TQ_DT_COUNT; i++) {
        if (!strcmp(s, dtypes[i].name)) {
            *out = (tq_dtype)i;
            return 0;
        }
    }
    return -1;
}

size_t tq_dtype_size(tq_dtype d)
{
    return (unsigned)d < TQ_DT_COUNT ? dtypes[d].size : 0;
}

int tq_dtype_is_float(tq_dtype d)
{
    return d == TQ_DT_F16 || d == TQ_DT_BF16 || d == TQ_DT_F32 || d == TQ_DT_F64;
}

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Shift a value right by s bits, rounding to nearest, ties to even. s in [1, 31]. */
static uint32_t shift_rne(uint32_t v, unsigned s)
{
    uint32_t q = v >> s, rem = v & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return q;
}

uint16_t tq_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
        return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff);
    if (ax >= 0x477ff000u) /* >= 65520 (halfway past 65504, which is odd): Inf */
        return sign | 0x7c00;
    uint32_t e = ax >> 23, m = ax & 0x7fffffu;
    if (e >= 113) /* normal f16: rebias, round 13 bits away; a carry into the exponent is right */
        return sign | (uint16_t)shift_rne(((e - 112) << 23 | m) >> 0, 13);
    if (e < 102) /* below half the smallest subnormal (2^-25): zero */
        return sign;
    /* subnormal f16 in units of 2^-24: (m | 2^23) * 2^(e - 126) */
    return sign | (uint16_t)shift_rne(m | 0x800000u, 126 - e);
}

float tq_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) /* Inf or NaN (quieted) */
        return bits_f32(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
    if (e == 0) {
        if (!m)
            return bits_f32(sign);
        /* subnormal: normalize */
        e = 113;
        while (!(m & 0x400)) {
            m <<= 1;
            e--;
        }
        return bits_f32(sign | (e << 23) | ((m & 0x3ff) << 13));
    }
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t tq_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    /* round to nearest even on the low 16 bits; overflow of the max finite goes to Inf */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

float tq_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    if ((x & 0x7fffffffu) > 0x7f800000u)
        x |= 0x400000u;
    return bits_f32(x);
}

int tq_find_nonfinite(tq_dtype d, const void *p, size_t n, size_t *at, const char **what)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0, exp, man;
        switch (d) {
        case TQ_DT_F8_E5M2: v = b[i]; exp = 0x7c; man = 0x03; break;
        case TQ_DT_F8_E4M3: v = b[i]; exp = 0x7f; man = 0x7f; break; /* only S.1111.111 is NaN; no Inf */
        case TQ_DT_F16: v = (uint64_t)b[2 * i] | (uint64_t)b[2 * i + 1] << 8; exp = 0x7c00; man = 0x3ff; break;
        case TQ_DT_BF16: v = (uint64_t)b[2 * i] | (uint64_t)b[2 * i + 1] << 8; exp = 0x7f80; man = 0x7f; break;
        case TQ_DT_F32: {
            uint32_t x;
            memcpy(&x, b + 4 * i, 4);
            v = x;
            exp = 0x7f800000u;
            man = 0x7fffffu;
            break;
        }
        case TQ_DT_F64:
            memcpy(&v, b + 8 * i, 8);
            exp = 0x7ff0000000000000ull;
            man = 0xfffffffffffffull;
            break;
        default: return 0;
        }
        if ((v & exp) == exp) {
            *at = i;
            *what = d == TQ_DT_F8_E4M3 || (v & man) ? "NaN" : "infinite";
            return 1;
        }
    }
    return 0;
}

int tq_to_f32(tq_dtype src_dt, const void *src, float *dst, size_t n, tq_err *e)
{
    const unsigned char *p = src;
    switch (src_dt) {
    case TQ_DT_F32:
        memmove(dst, src, n * 4);
        return 0;
    case TQ_DT_F16:
    case TQ_DT_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = src_dt == TQ_DT_F16 ? tq_f16_to_f32(h) : tq_bf16_to_f32(h);
        }
        return 0;
    case TQ_DT_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            dst[i] = (float)d;
        }
        return 0;
    default:
        return tq_fail(e, TQ_EUNSUP, "cannot convert %s to F32", tq_dtype_name(src_dt));
    }
}

int tq_from_f32(tq_dtype dst_dt, const float *src, void *dst, size_t n, tq_err *e)
{
    unsigned char *p = dst;
    switch (dst_dt) {
    case TQ_DT_F32:
        memmove(dst, src, n * 4);
        return 0;
    case TQ_DT_F16:
    case TQ_DT_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = dst_dt == TQ_DT_F16 ? tq_f32_to_f16(src[i]) : tq_f32_to_bf16(src[i]);
            memcpy(p + 2 * i, &h, 2);
        }
        return 0;
    default:
        return tq_fail(e, TQ_EUNSUP, "cannot convert F32 to %s", tq_dtype_name(dst_dt));
    }
}
