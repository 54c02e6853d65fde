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

static void angles(const rt_rope *rp, uint64_t pos, float *rc, float *rs)
{
    for (uint64_t i = 0; i < rp->dim / 2; i++) {
        double a = (double)pos * rp->inv_freq[i], sd, cd;
        rt_sincos(a, &sd, &cd);
        rc[i] = (float)(cd * rp->factor);
        rs[i] = (float)(sd * rp->factor);
    }
}

/* This position's rotation: angle pos · inv_freq[i], cos and sin times the YaRN factor (and
 * gemma4's full layers' rotation from their own table). */
void rt_rope_angles(tq_runner *r, uint64_t pos)
{
    angles(&r->c.rope, pos, r->rcos, r->rsin);
    if (r->c.rope_full.inv_freq)
        angles(&r->c.rope_full, pos, r->rcos_full, r->rsin_full);
}

/* NeoX rotate-half pairs (i, i + dim/2), or interleaved pairs (2i, 2i+1); dims past `dim`
 * pass through. */
static void apply(const rt_rope *rp, const float *rc, const float *rs, float *v)
{
    uint64_t h = rp->dim / 2, step = rp->interleaved ? 2 : 1, off = rp->interleaved ? 1 : h;
    for (uint64_t i = 0; i < h; i++) {
        float c = rc[i], s = rs[i];
        float *a = v + i * step, *b = a + off;
        float x1 = *a, x2 = *b;
        *a = x1 * c - x2 * s;
        *b = x2 * c + x1 * s;
    }
}

void rt_rope_apply(const tq_runner *r, float *v)
{
    apply(&r->c.rope, r->rcos, r->rsin, v);
}

void rt_rope_apply_full(const tq_runner *r, float *v)
{
    apply(&r->c.rope_full, r->rcos_full, r->rsin_full, v);
}

/* tanh(x) = 1 - 2 / (exp(2x) + 1): exp overflowing to infinity gives 1, underflowing -1 */
float rt_tanhf(float x)
{
    return 1.0f - 2.0f / (rt_expf(2.0f * x) + 1.0f);
}

/* transformers' GELUTanh ("gelu_pytorch_tanh", activations.py; mlx-lm's nn.gelu_approx):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
float rt_gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + rt_tanhf(k * (x + 0.044715f * x * x * x)));
}

float rt_silu(float x)
{
    return x / (1.0f + rt_expf(-x));
}

float rt_sigmoid(float x)
{
    return 1.0f / (1.0f + rt_expf(-x));
}

