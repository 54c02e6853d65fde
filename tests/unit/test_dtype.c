/* dtype conversions over every 16-bit value and against independent oracles:
 * GCC's _Float16 for f16, a round-to-nearest-even computed in double for bf16. */
#include "formats/formats.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdint.h>

static uint32_t fbits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static float bitsf(uint32_t x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void test_names(void)
{
    tq_dtype d;
    for (int i = 0; i < TQ_DT_COUNT; i++) {
        CHECK(tq_dtype_from_name(tq_dtype_name((tq_dtype)i), &d) == 0 && d == (tq_dtype)i);
    }
    CHECK(tq_dtype_from_name("BF16", &d) == 0 && d == TQ_DT_BF16 && tq_dtype_size(d) == 2);
    CHECK(tq_dtype_from_name("F8_E4M3", &d) == 0 && tq_dtype_size(d) == 1);
    CHECK(tq_dtype_from_name("U64", &d) == 0 && tq_dtype_size(d) == 8);
    CHECK(tq_dtype_from_name("bf16", &d) != 0);
    CHECK(tq_dtype_from_name("F4", &d) != 0);
    CHECK(tq_dtype_from_name("", &d) != 0);
    CHECK(tq_dtype_is_float(TQ_DT_F16) && tq_dtype_is_float(TQ_DT_F64) && !tq_dtype_is_float(TQ_DT_I32));
}

static int f16_is_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static void test_f16_all(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_f16_to_f32((uint16_t)h);
        uint16_t back = tq_f32_to_f16(f);
        if (f16_is_nan((uint16_t)h)) {
            /* NaN stays NaN, quiet, sign kept, both ways */
            if (!isnan(f) || !(fbits(f) & 0x400000) || (fbits(f) >> 31) != (h >> 15) || !f16_is_nan(back) ||
                !(back & 0x200) || (back >> 15) != (h >> 15))
                bad++;
            continue;
        }
        if (back != h)
            bad++;
#ifdef __FLT16_MAX__
        _Float16 o;
        uint16_t hh = (uint16_t)h;
        memcpy(&o, &hh, 2);
        if (fbits((float)o) != fbits(f))
            bad++;
#endif
    }
    CHECKF(bad == 0, "%d mismatches", bad);
    CHECK(tq_f16_to_f32(0x3c00) == 1.0f);
    CHECK(tq_f16_to_f32(0x7bff) == 65504.0f);
    CHECK(tq_f16_to_f32(0x0001) == ldexpf(1, -24));
    CHECK(tq_f16_to_f32(0x03ff) == ldexpf(1023, -24));
    CHECK(isinf(tq_f16_to_f32(0xfc00)) && tq_f16_to_f32(0xfc00) < 0);
    CHECK(fbits(tq_f16_to_f32(0x8000)) == 0x80000000u);
}

/* f32 -> f16 checked against an oracle on one input; returns 1 on mismatch. */
static int f16_check(float f)
{
    uint16_t got = tq_f32_to_f16(f);
    if (isnan(f))
        return !(f16_is_nan(got) && (got & 0x200) && (got >> 15) == (fbits(f) >> 31));
#ifdef __FLT16_MAX__
    _Float16 o = (_Float16)f;
    uint16_t want;
    memcpy(&want, &o, 2);
    return got != want;
#else
    /* no _Float16: nearest-even by search in double over the two neighbours */
    double x = fabs((double)f);
    uint16_t best = 0;
    for (uint16_t h = 0; h < 0x7c00; h++) {
        double v = tq_f16_to_f32(h), nv = h + 1 < 0x7c00 ? tq_f16_to_f32(h + 1) : 65536.0;
        if (x >= v && x < nv) {
            double dl = x - v, dh = nv - x;
            best = dl < dh || (dl == dh && !(h & 1)) ? h : (uint16_t)(h + 1);
            break;
        }
        if (h == 0x7bff)
            best = 0x7c00;
    }
    if (x >= 65536.0)
        best = 0x7c00;
    return got != (uint16_t)(best | (fbits(f) >> 31 << 15));
#endif
}

static void test_f16_rounding(void)
{
    int bad = 0;
    long n = 0;
    /* every f16 value, the midpoints to its neighbour, and one f32 ulp either side */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double a = tq_f16_to_f32((uint16_t)h);
        double b = h + 1 < 0x7c00 ? tq_f16_to_f32((uint16_t)(h + 1)) : 65536.0;
        float mid = (float)((a + b) / 2); /* exact: 12 significant bits */
        float cand[] = {(float)a, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), nextafterf((float)a, INFINITY)};
        for (size_t k = 0; k < sizeof cand / sizeof *cand; k++) {
            bad += f16_check(cand[k]);
            bad += f16_check(-cand[k]);
            n += 2;
        }
    }
    /* every upper half of the f32 space with characteristic low halves, and random bits */
    static const uint32_t lows[] = {0, 1, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0xffff};
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (size_t k = 0; k < sizeof lows / sizeof *lows; k++) {
            bad += f16_check(bitsf(hi << 16 | lows[k]));
            n++;
        }
        bad += f16_check(bitsf(hi << 16 | (next_rand() & 0xffff)));
        n++;
    }
    for (int i = 0; i < 1000000; i++, n++)
        bad += f16_check(bitsf(next_rand() ^ next_rand() << 16));
    CHECKF(bad == 0, "%d of %ld mismatches", bad, n);
    /* near overflow and underflow */
    CHECK(tq_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(tq_f32_to_f16(nextafterf(65520.0f, 0)) == 0x7bff);
    CHECK(tq_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(tq_f32_to_f16(-65520.0f) == 0xfc00);
    CHECK(tq_f32_to_f16(INFINITY) == 0x7c00);
    CHECK(tq_f32_to_f16(ldexpf(1, -25)) == 0x0000);                    /* tie to even: 0 */
    CHECK(tq_f32_to_f16(nextafterf(ldexpf(1, -25), 1)) == 0x0001);
    CHECK(tq_f32_to_f16(ldexpf(3, -25)) == 0x0002);                    /* 1.5 units: tie to even 2 */
    CHECK(tq_f32_to_f16(ldexpf(1, -14)) == 0x0400);
    CHECK(tq_f32_to_f16(-0.0f) == 0x8000);
    CHECK(tq_f32_to_f16(1e-30f) == 0 && tq_f32_to_f16(-1e-30f) == 0x8000);
    CHECK(tq_f32_to_f16(bitsf(0x7f800001)) == 0x7e00); /* signalling NaN comes out quiet */
}

static int bf16_is_nan(uint16_t h)
{
    return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

static void test_bf16_all(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_bf16_to_f32((uint16_t)h);
        uint16_t back = tq_f32_to_bf16(f);
        if (bf16_is_nan((uint16_t)h)) {
            if (!isnan(f) || !(fbits(f) & 0x400000) || !bf16_is_nan(back) || !(back & 0x40) || (back >> 15) != (h >> 15))
                bad++;
            continue;
        }
        if (fbits(f) != h << 16 || back != h)
            bad++;
    }
    CHECKF(bad == 0, "%d mismatches", bad);
}

/* Nearest-even in double: the two bf16 values around x, compared by distance. */
static int bf16_check(float f)
{
    uint16_t got = tq_f32_to_bf16(f);
    uint32_t x = fbits(f);
    if (isnan(f))
        return !(bf16_is_nan(got) && (got & 0x40) && (got >> 15) == (x >> 31));
    uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u;
    double dx = fabs((double)f), dlo = fabs((double)bitsf(lo));
    double dhi = (hi & 0x7fffffffu) >= 0x7f800000u ? ldexp(1, 128) : fabs((double)bitsf(hi));
    if (isinf(f))
        return got != (uint16_t)(x >> 16);
    uint32_t want;
    if (dx - dlo < dhi - dx)
        want = lo;
    else if (dx - dlo > dhi - dx)
        want = hi;
    else
        want = (lo >> 16) & 1 ? hi : lo;
    return got != (uint16_t)(want >> 16);
}

static void test_bf16_rounding(void)
{
    int bad = 0;
    long n = 0;
    static const uint32_t lows[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (size_t k = 0; k < sizeof lows / sizeof *lows; k++, n++)
            bad += bf16_check(bitsf(hi << 16 | lows[k]));
        bad += bf16_check(bitsf(hi << 16 | (next_rand() & 0xffff)));
        n++;
    }
    for (int i = 0; i < 1000000; i++, n++)
        bad += bf16_check(bitsf(next_rand() ^ next_rand() << 16));
    CHECKF(bad == 0, "%d of %ld mismatches", bad, n);
    CHECK(tq_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(tq_f32_to_bf16(bitsf(0x3f808000)) == 0x3f80); /* tie, even stays */
    CHECK(tq_f32_to_bf16(bitsf(0x3f818000)) == 0x3f82); /* tie, odd rounds up */
    CHECK(tq_f32_to_bf16(bitsf(0x7f7fffff)) == 0x7f80); /* max f32 rounds to Inf */
    CHECK(tq_f32_to_bf16(bitsf(0x7f7f7fff)) == 0x7f7f);
    CHECK(tq_f32_to_bf16(bitsf(0x00008000)) == 0x0000); /* subnormal tie to even */
    CHECK(tq_f32_to_bf16(bitsf(0x00018000)) == 0x0002);
    CHECK(tq_f32_to_bf16(bitsf(0xff800000)) == 0xff80);
    CHECK(tq_f32_to_bf16(bitsf(0x7f800001)) == 0x7fc0);
}

static void test_bulk(void)
{
    tq_err err = {0};
    float src[5] = {1.0f, -2.5f, 65504.0f, 1e-8f, NAN}, back[5];
    uint16_t h[5];
    double d[5] = {1.0, -2.5, 1e300, 0.1, -0.0};
    CHECK_OK(tq_from_f32(TQ_DT_F16, src, h, 5, &err));
    CHECK(h[0] == 0x3c00 && h[1] == 0xc100 && h[2] == 0x7bff && h[3] == tq_f32_to_f16(1e-8f) && f16_is_nan(h[4]));
    CHECK_OK(tq_to_f32(TQ_DT_F16, h, back, 5, &err));
    CHECK(back[0] == 1.0f && back[1] == -2.5f && back[2] == 65504.0f && isnan(back[4]));
    CHECK_OK(tq_from_f32(TQ_DT_BF16, src, h, 5, &err));
    CHECK(h[0] == 0x3f80 && h[1] == 0xc020);
    CHECK_OK(tq_to_f32(TQ_DT_BF16, h, back, 5, &err));
    CHECK(back[1] == -2.5f);
    CHECK_OK(tq_to_f32(TQ_DT_F64, d, back, 5, &err));
    CHECK(back[0] == 1.0f && isinf(back[2]) && back[3] == 0.1f && fbits(back[4]) == 0x80000000u);
    CHECK_OK(tq_from_f32(TQ_DT_F32, src, back, 4, &err));
    CHECK(!memcmp(back, src, 16));
    CHECK(tq_to_f32(TQ_DT_I32, d, back, 1, &err) != 0 && err.code == TQ_EUNSUP);
    CHECK(tq_from_f32(TQ_DT_F64, src, d, 1, &err) != 0 && err.code == TQ_EUNSUP);
}

int main(void)
{
    RUN(test_names);
    RUN(test_f16_all);
    RUN(test_f16_rounding);
    RUN(test_bf16_all);
    RUN(test_bf16_rounding);
    RUN(test_bulk);
    TEST_MAIN_END();
}
