/* exp, log, sin/cos for the decoder, from IEEE-754 basic operations only (+, -, *, /,
 * floor, frexp, ldexp, which every conforming platform computes identically). C libraries
 * differ in the last bit of exp/cos/pow, and one bit in a RoPE angle or a softmax changes
 * the logits hash; with these the logits are the same bytes on every IEEE platform
 * (glibc, macOS, musl), not only for every thread count. Accuracy: ~1 ulp in double. */
#include "runtime/rt_internal.h"

#include <math.h>
#include <string.h>

static const double LN2_HI = 6.93147180369123816490e-01; /* 0x3fe62e42 fee00000 */
static const double LN2_LO = 1.90821492927058770002e-10; /* 0x3dea39ef 35793c76 */
static const double INV_LN2 = 1.44269504088896338700e+00;

double rt_exp(double x)
{
    if (x != x)
        return x;
    if (x > 709.78)
        return HUGE_VAL;
    if (x < -745.2)
        return 0.0;
    /* floor(y) without a library call: |y| < 1076 here, so the conversion is exact */
    double y = x * INV_LN2 + 0.5, k = (double)(long long)y;
    if (k > y)
        k -= 1.0;
    double r = (x - k * LN2_HI) - k * LN2_LO; /* |r| <= 0.35 */
    /* Taylor series to r^14/14!: truncation < 1e-19 relative */
    double p = 1.0 / 87178291200.0;
    static const double c[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                 1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                 1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5,
                                 1.0,                1.0};
    for (int i = 0; i < 14; i++)
        p = p * r + c[i];
    /* ldexp(p, k): p is in [0.70, 1.42], so for k in [-1021, 1023] p·2^k is a normal double and
     * the product with 2^k (built from its bits) is exact, as ldexp is; else ldexp itself */
    int ki = (int)k;
    if (ki < -1021 || ki > 1023)
        return ldexp(p, ki);
    uint64_t bits = (uint64_t)(ki + 1023) << 52;
    double two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return p * two_k;
}

float rt_expf(float x)
{
    return (float)rt_exp((double)x);
}

double rt_log(double x)
{
    if (!(x > 0))
        return x == 0 ? -HUGE_VAL : NAN;
    if (x == HUGE_VAL)
        return x;
    int e;
    double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
    if (m < 0.70710678118654752440) {
        m *= 2;
        e--;
    }
    /* log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172 */
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, t = 0;
    for (int k = 25; k >= 1; k -= 2)
        t = t * s2 + 1.0 / k;
    double lm = 2.0 * s * t;
    return ((double)e * LN2_LO + lm) + (double)e * LN2_HI;
}

/* sin and cos of a (|a| < 2^30): Cody-Waite reduction by pi/2 in three parts, then Taylor
 * series on |r| <= pi/4. */
void rt_sincos(double a, double *s_out, double *c_out)
{
    static const double PIO2_1 = 1.57079632673412561417e+00;  /* first 33 bits of pi/2 */
    static const double PIO2_2 = 6.07710050650619224932e-11;  /* next 33 bits */
    static const double PIO2_3 = 2.02226624879595063154e-21;  /* the rest */
    static const double INV_PIO2 = 6.36619772367581382433e-01;
    double k = floor(a * INV_PIO2 + 0.5);
    double r = ((a - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
    double r2 = r * r, s = 0, c = 0;
    /* sin r = r Σ (-1)^n r^2n / (2n+1)!, cos r = Σ (-1)^n r^2n / (2n)!, to n = 11 */
    double fs = 1.0, fc = 1.0;
    double ts[12], tc[12];
    for (int n = 0; n < 12; n++) {
        ts[n] = (n & 1 ? -1.0 : 1.0) / fs;
        tc[n] = (n & 1 ? -1.0 : 1.0) / fc;
        fs *= (double)(2 * n + 2) * (double)(2 * n + 3);
        fc *= (double)(2 * n + 1) * (double)(2 * n + 2);
    }
    for (int n = 11; n >= 0; n--) {
        s = s * r2 + ts[n];
        c = c * r2 + tc[n];
    }
    s *= r;
    long q = (long)fmod(k, 4.0);
    if (q < 0)
        q += 4;
    switch (q) {
    case 0: *s_out = s; *c_out = c; break;
    case 1: *s_out = c; *c_out = -s; break;
    case 2: *s_out = -s; *c_out = -c; break;
    default: *s_out = -c; *c_out = s; break;
    }
}
