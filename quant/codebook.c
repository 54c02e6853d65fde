/* Lloyd-Max (MSE-optimal) scalar quantizers for N(0,1), computed in double.
 *
 * Iterate boundary = midpoint of adjacent centroids, centroid = conditional mean of the
 * interval, in closed form from the normal pdf/cdf, until the centroids stop moving. The
 * result goes through f16 for storage; a centroid that lies within 1e-6 (relative) of an f16
 * rounding tie is rejected, so libm differences between machines (~1e-16) can never change
 * the stored codebook. */
#include "quant/quant.h"
#include "quant/quant_internal.h"

#include <math.h>

static double pdf(double x) { return isinf(x) ? 0.0 : exp(-0.5 * x * x) * 0.39894228040143267794; }

/* P(a <= X < b), accurate in both tails. */
static double mass(double a, double b)
{
    const double r = 0.70710678118654752440;
    if (a >= 0)
        return 0.5 * (erfc(a * r) - erfc(b * r));
    if (b <= 0)
        return 0.5 * (erfc(-b * r) - erfc(-a * r));
    return 1.0 - 0.5 * (erfc(-a * r) + erfc(b * r));
}

static void bounds(const double *c, int n, int i, double *a, double *b)
{
    *a = i == 0 ? -INFINITY : 0.5 * (c[i - 1] + c[i]);
    *b = i == n - 1 ? INFINITY : 0.5 * (c[i] + c[i + 1]);
}

/* f16 value nearest x must not be near a tie: |x - tie| > 1e-6·|x| for the two ties around x. */
static int f16_robust(double x)
{
    float f = (float)x;
    uint16_t h = tq_q_f16(f);
    double v = tq_q_f32(h);
    double up = tq_q_f32((uint16_t)(h + 1)), dn = tq_q_f32((uint16_t)(h - 1));
    double lim = 1e-6 * fabs(x);
    return fabs(x - 0.5 * (v + up)) > lim && fabs(x - 0.5 * (v + dn)) > lim;
}

int tq_codebook_lloyd_max(int bits, tq_codebook *cb, tq_err *e)
{
    if (bits < 1 || bits > TQ_MAX_BITS)
        return tq_fail(e, TQ_EUSAGE, "codebook: bits must be 1..%d, not %d", TQ_MAX_BITS, bits);
    int n = 1 << bits;
    double c[1 << TQ_MAX_BITS];
    for (int i = 0; i < n; i++) /* start evenly spread over ±2.5 */
        c[i] = -2.5 + 5.0 * (i + 0.5) / n;
    for (int it = 0; it < 200000; it++) {
        double next[1 << TQ_MAX_BITS], moved = 0;
        for (int i = 0; i < n; i++) {
            double a, b;
            bounds(c, n, i, &a, &b);
            next[i] = (pdf(a) - pdf(b)) / mass(a, b);
            moved = fmax(moved, fabs(next[i] - c[i]));
        }
        for (int i = 0; i < n; i++)
            c[i] = next[i];
        if (moved < 1e-15)
            break;
    }
    /* Exact symmetry: average mirrored pairs so ±c are stored identically. */
    for (int i = 0; i < n / 2; i++) {
        double s = 0.5 * (c[n - 1 - i] - c[i]);
        c[i] = -s;
        c[n - 1 - i] = s;
    }
    double mse = 0;
    for (int i = 0; i < n; i++) {
        double a, b;
        bounds(c, n, i, &a, &b);
        double p = mass(a, b), m1 = pdf(a) - pdf(b);
        double m2 = p + (isinf(a) ? 0 : a * pdf(a)) - (isinf(b) ? 0 : b * pdf(b));
        mse += m2 - 2 * c[i] * m1 + c[i] * c[i] * p;
    }
    cb->bits = bits;
    cb->n = n;
    cb->mse = mse;
    for (int i = 0; i < n; i++) {
        if (!f16_robust(c[i]))
            return tq_fail(e, TQ_EDATA, "codebook: %d-bit centroid %.17g is too close to an f16 rounding tie", bits, c[i]);
        cb->exact[i] = c[i];
        cb->f16[i] = tq_q_f16((float)c[i]);
        cb->c[i] = tq_q_f32(cb->f16[i]);
    }
    for (int i = 0; i + 1 < n; i++)
        cb->bnd[i] = (cb->c[i] + cb->c[i + 1]) * 0.5f;
    return 0;
}
