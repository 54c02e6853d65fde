/* Counter-based randomness for the generator: every number is a pure function of
 * (key, counter), so output does not depend on thread count or generation order.
 * Only IEEE basic operations and sqrt are used (libm log/exp differ between versions). */
#include "testdata/mkmodel/mkmodel.h"
#include "testdata/mkmodel/mk_rng_internal.h"

uint64_t tq_mk_mix64(uint64_t z)
{
    return mk_mix64(z);
}

uint64_t tq_mk_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
        h ^= *s;
        h *= 0x100000001B3ull;
    }
    return mk_mix64(mk_mix64(seed * MK_GOLDEN + 0x632BE59BD9B4E019ull) ^ mk_mix64(h));
}

double tq_mk_log(double x)
{
    return mk_log(x);
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

void tq_mk_gauss_pair(uint64_t stream, uint64_t p, double *z0, double *z1)
{
    mk_gauss_pair(stream, p, z0, z1);
}

double tq_mk_gauss(uint64_t stream, uint64_t i)
{
    double z0, z1;
    mk_gauss_pair(stream, i >> 1, &z0, &z1);
    return (i & 1) ? z1 : z0;
}
