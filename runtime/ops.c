/* runtime/ops.c — the per-vector operations every mixer and MLP uses: RMSNorm, the rotary
 * embedding of one position, silu and sigmoid (from rt_math.c's platform-independent exp). */
#include "runtime/rt_internal.h"

#include <math.h>

void rt_rmsnorm(float *out, const float *x, const float *w, uint64_t n, double eps)
{
    double ss = 0;
    for (uint64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (uint64_t i = 0; i < n; i++)
        out[i] = w ? w[i] * (x[i] * inv) : x[i] * inv;
}

/* This position's rotation: angle pos · inv_freq[i], cos and sin times the YaRN factor. */
void rt_rope_angles(tq_runner *r, uint64_t pos)
{
    const rt_rope *rp = &r->c.rope;
    for (uint64_t i = 0; i < rp->dim / 2; i++) {
        double a = (double)pos * rp->inv_freq[i], sd, cd;
        rt_sincos(a, &sd, &cd);
        r->rcos[i] = (float)(cd * rp->factor);
        r->rsin[i] = (float)(sd * rp->factor);
    }
}

/* NeoX rotate-half pairs (i, i + dim/2), or interleaved pairs (2i, 2i+1); dims past `dim`
 * pass through. */
void rt_rope_apply(const tq_runner *r, float *v)
{
    const rt_rope *rp = &r->c.rope;
    uint64_t h = rp->dim / 2, step = rp->interleaved ? 2 : 1, off = rp->interleaved ? 1 : h;
    for (uint64_t i = 0; i < h; i++) {
        float c = r->rcos[i], s = r->rsin[i];
        float *a = v + i * step, *b = a + off;
        float x1 = *a, x2 = *b;
        *a = x1 * c - x2 * s;
        *b = x2 * c + x1 * s;
    }
}

float rt_silu(float x)
{
    return x / (1.0f + rt_expf(-x));
}

float rt_sigmoid(float x)
{
    return 1.0f / (1.0f + rt_expf(-x));
}

