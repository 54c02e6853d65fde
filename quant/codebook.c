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

/* ------------------------------------------------------------ fitted codebooks */
int tq_codebook_fit(const tq_codebook *start, const tq_fit_hist *h, tq_codebook *out, int *iters)
{
    *out = *start;
    if (iters)
        *iters = 0;
    int half = start->n / 2;
    if (half < 1 || half > (1 << TQ_MAX_BITS) / 2)
        return 1;
    double p[(1 << TQ_MAX_BITS) / 2], mean[TQ_FIT_BINS];
    static const double unit = 4294967296.0; /* fixed-point sums: units of 2^-32 */
    uint64_t total = 0;
    for (size_t b = 0; b < TQ_FIT_BINS; b++) {
        mean[b] = h->n[b] ? (double)h->s[b] / unit / (double)h->n[b] : 0;
        total += h->n[b];
    }
    if (total < (uint64_t)start->n)
        return 1;
    for (int k = 0; k < half; k++)
        p[k] = start->exact[half + k];
    unsigned char cell[TQ_FIT_BINS], prev[TQ_FIT_BINS];
    memset(prev, 0xFF, sizeof prev);
    int it = 0;
    for (; it < TQ_FIT_MAX_ITERS; it++) {
        /* boundaries at midpoints; bins are ordered, so their means are too */
        int k = 0, changed = 0;
        for (size_t b = 0; b < TQ_FIT_BINS; b++) {
            if (!h->n[b]) {
                cell[b] = prev[b];
                continue;
            }
            while (k + 1 < half && mean[b] >= 0.5 * (p[k] + p[k + 1]))
                k++;
            cell[b] = (unsigned char)k;
            changed |= cell[b] != prev[b];
        }
        if (!changed)
            break;
        uint64_t cn[(1 << TQ_MAX_BITS) / 2] = {0}, cs[(1 << TQ_MAX_BITS) / 2] = {0};
        for (size_t b = 0; b < TQ_FIT_BINS; b++)
            if (h->n[b]) {
                cn[cell[b]] += h->n[b];
                cs[cell[b]] += h->s[b];
            }
        for (int c = 0; c < half; c++)
            if (cn[c])
                p[c] = (double)cs[c] / unit / (double)cn[c];
        memcpy(prev, cell, sizeof prev);
    }
    if (iters)
        *iters = it;
    tq_codebook cb = *start;
    double mse = 0;
    for (size_t b = 0; b < TQ_FIT_BINS; b++)
        if (h->n[b]) {
            double d = mean[b] - p[cell[b]];
            mse += (double)h->n[b] * d * d;
        }
    cb.mse = mse / (double)total;
    for (int k = 0; k < half; k++) {
        if (!(p[k] > 0) || !isfinite(p[k]))
            return 1;
        cb.exact[half + k] = p[k];
        cb.exact[half - 1 - k] = -p[k];
        cb.f16[half + k] = tq_q_f16((float)p[k]);
        cb.f16[half - 1 - k] = (uint16_t)(cb.f16[half + k] | 0x8000u);
    }
    for (int i = 0; i < cb.n; i++) {
        cb.c[i] = tq_q_f32(cb.f16[i]);
        if (!isfinite(cb.c[i]) || (i > 0 && !(cb.c[i] > cb.c[i - 1])))
            return 1;
    }
    if (!(cb.c[half] > 0))
        return 1;
    for (int i = 0; i + 1 < cb.n; i++)
        cb.bnd[i] = (cb.c[i] + cb.c[i + 1]) * 0.5f;
    *out = cb;
    return 0;
}

int tq_codebook_check(const float *c, size_t n, size_t *at, const char **why)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(c[i])) {
            *at = i;
            *why = "not finite";
            return -1;
        }
        if (i && !(c[i] > c[i - 1])) {
            *at = i;
            *why = "not above the previous value";
            return -1;
        }
    }
    return 0;
}
