/* testdata/mkmodel/mk_rng_internal.h — the generator's arithmetic as static inline functions, so
 * the per-element loops inline them; mk_rng.c wraps them as the public tq_mk_* functions.
 * Only IEEE basic operations and sqrt: same bits on every machine. */
#ifndef TQ_MK_RNG_INTERNAL_H
#define TQ_MK_RNG_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "tq-mkmodel needs FLT_EVAL_METHOD == 0 (no excess precision) for identical output"
#endif

#define MK_GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t mk_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ln x = k ln2 + 2 atanh((m-1)/(m+1)), m in [sqrt(1/2), sqrt(2)): |t| <= 0.1716, so the
 * odd series to t^17 is accurate to ~1e-16 relative. */
static inline double mk_log(double x)
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

/* Marsaglia's polar method; attempt a of pair p uses its own hash, so the number of
 * rejections never shifts other elements. */
static inline void mk_gauss_pair(uint64_t stream, uint64_t p, double *z0, double *z1)
{
    uint64_t base = mk_mix64(stream + p * MK_GOLDEN);
    for (uint64_t a = 0;; a++) {
        uint64_t h = mk_mix64(base ^ (a * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull));
        double u = ((double)(h >> 32) + 0.5) * (1.0 / 2147483648.0) - 1.0;
        double v = ((double)(h & 0xFFFFFFFFu) + 0.5) * (1.0 / 2147483648.0) - 1.0;
        double s = u * u + v * v;
        if (s >= 1.0 || s == 0.0)
            continue;
        double f = sqrt(-2.0 * mk_log(s) / s);
        *z0 = u * f;
        *z1 = v * f;
        return;
    }
}

#endif
