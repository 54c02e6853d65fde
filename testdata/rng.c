/* Counter-based randomness for the generator: every number is a pure function of
 * (key, counter), so output does not depend on thread count or generation order.
 * Only IEEE basic operations and sqrt are used (libm log/exp differ between versions). */
#include "testdata/testdata.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "tq-mkmodel needs FLT_EVAL_METHOD == 0 (no excess precision) for identical output"
#endif

#define GOLDEN 0x9E3779B97F4A7C15ull

uint64_t tq_mk_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t tq_mk_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
        h ^= *s;
        h *= 0x100000001B3ull;
    }
    return tq_mk_mix64(tq_mk_mix64(seed * GOLDEN + 0x632BE59BD9B4E019ull) ^ tq_mk_mix64(h));
}

/* ln x = k ln2 + 2 atanh((m-1)/(m+1)), m in [sqrt(1/2), sqrt(2)): |t| <= 0.1716, so the
 * odd series to t^17 is accurate to ~1e-16 relative. */
double tq_mk_log(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int k = (int)((b >> 52) & 0x7FF);
    if (k == 0) { /* subnormal: scale up by 2^64 */
        x *= 18446744073709551616.0;
        memcpy(&b, &x, sizeof b);
        k = (int)((b >> 52) & 0x7FF) - 64;
    }
    k -= 1023;
    b = (b & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
    double m;
    memcpy(&m, &b, sizeof m);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        k++;
    }
    double t = (m - 1.0) / (m + 1.0);
    double t2 = t * t;
    double s = 1.0 / 17.0;
    s = s * t2 + 1.0 / 15.0;
    s = s * t2 + 1.0 / 13.0;
    s = s * t2 + 1.0 / 11.0;
    s = s * t2 + 1.0 / 9.0;
    s = s * t2 + 1.0 / 7.0;
    s = s * t2 + 1.0 / 5.0;
    s = s * t2 + 1.0 / 3.0;
    s = s * t2 + 1.0;
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    return (double)k * ln2_hi + (2.0 * t * s + (double)k * ln2_lo);
}

/* exp x = 2^k e^r, |r| <= ln2/2, Taylor series to r^14 (error < 1e-17 relative). */
double tq_mk_exp(double x)
{
    const double inv_ln2 = 1.44269504088896338700e+00;
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double kf = x * inv_ln2;
    int k = (int)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double r = (x - (double)k * ln2_hi) - (double)k * ln2_lo;
    double p = 1.0;
    for (int i = 14; i >= 1; i--)
        p = 1.0 + p * r / (double)i;
    /* 2^k as a double built from bits (k is within the normal range for |x| < 700) */
    uint64_t bits = (uint64_t)(k + 1023) << 52;
    double two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return p * two_k;
}

/* Marsaglia's polar method; attempt a of pair p uses its own hash, so the number of
 * rejections never shifts other elements. */
void tq_mk_gauss_pair(uint64_t stream, uint64_t p, double *z0, double *z1)
{
    uint64_t base = tq_mk_mix64(stream + p * GOLDEN);
    for (uint64_t a = 0;; a++) {
        uint64_t h = tq_mk_mix64(base ^ (a * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull));
        double u = ((double)(h >> 32) + 0.5) * (1.0 / 2147483648.0) - 1.0;
        double v = ((double)(h & 0xFFFFFFFFu) + 0.5) * (1.0 / 2147483648.0) - 1.0;
        double s = u * u + v * v;
        if (s >= 1.0 || s == 0.0)
            continue;
        double f = sqrt(-2.0 * tq_mk_log(s) / s);
        *z0 = u * f;
        *z1 = v * f;
        return;
    }
}

double tq_mk_gauss(uint64_t stream, uint64_t i)
{
    double z0, z1;
    tq_mk_gauss_pair(stream, i >> 1, &z0, &z1);
    return (i & 1) ? z1 : z0;
}
