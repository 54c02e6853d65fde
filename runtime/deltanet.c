/* Gated DeltaNet, the linear-attention mixer of Qwen3-Next and Qwen3.5: input projections,
 * a causal depthwise conv1d over the last K inputs (its state: the K-1 inputs before this
 * one), L2-normalised q/k, and per value head the gated delta rule on a [Dv][Dk] state
 * matrix, then a gated RMSNorm and out_proj. No KV cache: the two states are all the past.
 * Each value head is computed whole by one thread. docs/runtime.md has the shapes. */
#include "runtime/rt_internal.h"

#include <math.h>
#include <string.h>

struct dn_ctx {
    tq_runner *r;
    const rt_layer *L;
    const float *q, *k, *v; /* [Hk·Dk], [Hk·Dk], [Hv·Dv] after conv, silu and the q/k norms */
    const float *z, *bb, *aa; /* [Hv·Dv] output gate, [Hv] beta logits, [Hv] decay inputs */
};

static double softplus(double x)
{
    return x > 20 ? x : rt_log(1.0 + rt_exp(x));
}

/* Value heads [b, en): decay g = exp(-exp(A_log) · softplus(a + dt_bias)), write strength
 * beta = sigmoid(b); with key head kh = hv / (Hv / Hk):
 *   S ← g·S;  delta = beta · (v - S k);  S ← S + delta ⊗ k;  y = S q
 * then y ← RMSNorm(y) · w · silu(z) into ao. */
static void dn_task(void *vctx, uint64_t b, uint64_t en)
{
    struct dn_ctx *a = vctx;
    tq_runner *r = a->r;
    const rt_config *c = &r->c;
    const rt_layer *L = a->L;
    uint64_t dk = c->lk_dim, dv = c->lv_dim, rep = c->lv_heads / c->lk_heads;
    for (uint64_t hv = b; hv < en; hv++) {
        const float *q = a->q + hv / rep * dk, *k = a->k + hv / rep * dk, *v = a->v + hv * dv;
        float beta = rt_sigmoid(a->bb[hv]);
        float g = (float)rt_exp(-rt_exp((double)L->A_log[hv]) * softplus((double)a->aa[hv] + (double)L->dt_bias[hv]));
        float *S = L->ssm + hv * dv * dk; /* [Dv][Dk] */
        float *y = r->ao + hv * dv;        /* [Dv] */
        for (uint64_t i = 0; i < dv; i++) {
            float *row = S + i * dk, kv = 0;
            for (uint64_t j = 0; j < dk; j++) {
                row[j] *= g;
                kv += row[j] * k[j];
            }
            float delta = (v[i] - kv) * beta, out = 0;
            for (uint64_t j = 0; j < dk; j++) {
                row[j] += k[j] * delta;
                out += row[j] * q[j];
            }
            y[i] = out;
        }
        rt_rmsnorm(y, y, L->gnorm, dv, c->eps);
        for (uint64_t i = 0; i < dv; i++)
            y[i] *= rt_silu(a->z[hv * dv + i]);
    }
}

/* x[0..n) /= sqrt(Σx² + 1e-6), then times `scale` (the L2 norm of the fla kernels). */
static void l2norm(float *x, uint64_t n, float scale)
{
    double ss = 0;
    for (uint64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss + 1e-6));
    for (uint64_t i = 0; i < n; i++)
        x[i] = x[i] * inv * scale;
}

/* Gated DeltaNet of layer l: h [H] → mixed [C = q Hk·Dk | k Hk·Dk | v Hv·Dv], z [Hv·Dv],
 * b, a [Hv] (qwen3_next fuses them per key head: in_proj_qkvz rows are, per key head,
 * q [Dk], k [Dk], v [rep·Dv], z [rep·Dv]; in_proj_ba rows b [rep], a [rep]) → conv over
 * (state, mixed), silu → q, k L2-normalised (q also / sqrt(Dk)) → dn_task → ao [Hv·Dv] →
 * out_proj → mo [H]. */
int rt_deltanet(tq_runner *r, uint64_t l, tq_err *e)
{
    const rt_config *c = &r->c;
    const rt_backend *be = r->be;
    rt_layer *L = &r->L[l];
    uint64_t nk = c->lk_heads, dk = c->lk_dim, nv = c->lv_heads, dv = c->lv_dim, rep = nv / nk;
    uint64_t Kd = nk * dk, Vd = nv * dv, C = 2 * Kd + Vd, K = c->conv_k;
    float *mix = r->q, *z = r->v, *bb = r->qg, *aa = r->qg + nv, *tmp = r->k;
    /* The projections, and the fused ones' split into q | k | v, z, b and a, go through the
     * backend; the conv and the delta rule run on the CPU (with a device backend too, after
     * its queue has run: one sync). */
    if (L->fused_in) {
        uint64_t blk = 2 * dk + 2 * rep * dv; /* per key head */
        if (be->matvec(r, &L->qkvz, r->h, tmp, e) || be->copy(r, mix, tmp, nk, dk, blk, e) ||
            be->copy(r, mix + Kd, tmp + dk, nk, dk, blk, e) || be->copy(r, mix + 2 * Kd, tmp + 2 * dk, nk, rep * dv, blk, e) ||
            be->copy(r, z, tmp + 2 * dk + rep * dv, nk, rep * dv, blk, e) ||
            be->matvec(r, &L->ba, r->h, tmp, e) || /* after the copies have read tmp: the queue is in order */
            be->copy(r, bb, tmp, nk, rep, 2 * rep, e) || be->copy(r, aa, tmp + rep, nk, rep, 2 * rep, e) || be->sync(r, e))
            return -1;
    } else if (be->matvec(r, &L->qkv, r->h, mix, e) || be->matvec(r, &L->z, r->h, z, e) || be->matvec(r, &L->b, r->h, bb, e) ||
               be->matvec(r, &L->a, r->h, aa, e) || be->sync(r, e)) {
        return -1;
    }
    /* causal depthwise conv: out[c] = Σ_j w[c][j] · in[j][c] over in = (state rows, mixed) */
    float *co = tmp; /* [C] */
    for (uint64_t ch = 0; ch < C; ch++) {
        const float *w = L->conv_w + ch * K;
        float acc = 0;
        for (uint64_t j = 0; j + 1 < K; j++)
            acc += w[j] * L->conv_state[j * C + ch];
        acc += w[K - 1] * mix[ch];
        co[ch] = rt_silu(acc);
    }
    if (K > 1) {
        memmove(L->conv_state, L->conv_state + C, (K - 2) * C * sizeof(float));
        memcpy(L->conv_state + (K - 2) * C, mix, C * sizeof(float));
    }
    float qs = (float)(1.0 / sqrt((double)dk));
    for (uint64_t h = 0; h < nk; h++) {
        l2norm(co + h * dk, dk, qs);
        l2norm(co + Kd + h * dk, dk, 1.0f);
    }
    struct dn_ctx a = {r, L, co, co + Kd, co + 2 * Kd, z, bb, aa};
    rt_pool_for(r->pool, nv, dn_task, &a);
    return be->matvec(r, &L->o, r->ao, r->mo, e);
}
