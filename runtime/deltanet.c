/* Gated DeltaNet, the linear-attention mixer of Qwen3-Next and Qwen3.5: input projections,
 * a causal depthwise conv1d over the last K inputs (its state: the K-1 inputs before this
 * one), L2-normalised q/k, and per value head the gated delta rule on a [Dv][Dk] state
 * matrix, then a gated RMSNorm and out_proj. No KV cache: the two states are all the past.
 * Each value head is computed whole by one thread. docs/runtime.md has the shapes. */
#include "runtime/rt_internal.h"

#include <math.h>
#include <string.h>

static double softplus(double x)
{
    return x > 20 ? x : rt_log(1.0 + rt_exp(x));
}

/* Value heads [b, en): decay g = exp(-exp(A_log) · softplus(a + dt_bias)), write strength
 * beta = sigmoid(b); with key head kh = hv / (Hv / Hk):
 *   S ← g·S;  delta = beta · (v - S k);  S ← S + delta ⊗ k;  y = S q
 * then y ← RMSNorm(y) · w · silu(z) into ao. q, k, v: co's parts after the conv, silu and
 * the q/k norms. */
static void dn_task(void *vctx, uint64_t b, uint64_t en)
{
    const rt_dn_step *a = vctx;
    uint64_t dk = a->dk, dv = a->dv, rep = a->nv / a->nk, Kd = a->nk * dk;
    const float *cq = a->co, *ck = a->co + Kd, *cv = a->co + 2 * Kd;
    for (uint64_t hv = b; hv < en; hv++) {
        const float *q = cq + hv / rep * dk, *k = ck + hv / rep * dk, *v = cv + hv * dv;
        float beta = rt_sigmoid(a->bb[hv]);
        float g = (float)rt_exp(-rt_exp((double)a->A_log[hv]) * softplus((double)a->aa[hv] + (double)a->dt_bias[hv]));
        float *S = a->ssm + hv * dv * dk; /* [Dv][Dk] */
        float *y = a->ao + hv * dv;       /* [Dv] */
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
        rt_rmsnorm(y, y, a->gnorm, dv, a->eps);
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

void rt_deltanet_step(const rt_dn_step *d, rt_pool *pool)
{
    uint64_t nk = d->nk, dk = d->dk, Kd = nk * dk, C = 2 * Kd + d->nv * d->dv, K = d->K;
    /* causal depthwise conv: out[c] = Σ_j w[c][j] · in[j][c] over in = (state rows, mixed) */
    for (uint64_t ch = 0; ch < C; ch++) {
        const float *w = d->conv_w + ch * K;
        float acc = 0;
        for (uint64_t j = 0; j + 1 < K; j++)
            acc += w[j] * d->conv_state[j * C + ch];
        acc += w[K - 1] * d->mix[ch];
        d->co[ch] = rt_silu(acc);
    }
    if (K > 1) {
        memmove(d->conv_state, d->conv_state + C, (K - 2) * C * sizeof(float));
        memcpy(d->conv_state + (K - 2) * C, d->mix, C * sizeof(float));
    }
    float qs = (float)(1.0 / sqrt((double)dk));
    for (uint64_t h = 0; h < nk; h++) {
        l2norm(d->co + h * dk, dk, qs);
        l2norm(d->co + Kd + h * dk, dk, 1.0f);
    }
    rt_pool_for(pool, d->nv, dn_task, (void *)d);
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
    uint64_t Kd = nk * dk;
    float *mix = r->q, *z = r->v, *bb = r->qg, *aa = r->qg + nv, *tmp = r->k;
    /* The projections, and the fused ones' split into q | k | v, z, b and a, go through the
     * backend; so do the conv and the delta rule where it has them (be->deltanet: no sync),
     * else they run on the CPU after the queue has run (one sync). */
    if (L->fused_in) {
        uint64_t blk = 2 * dk + 2 * rep * dv; /* per key head */
        if (be->matvec(r, &L->qkvz, r->h, tmp, e) || be->copy(r, mix, tmp, nk, dk, blk, e) ||
            be->copy(r, mix + Kd, tmp + dk, nk, dk, blk, e) || be->copy(r, mix + 2 * Kd, tmp + 2 * dk, nk, rep * dv, blk, e) ||
            be->copy(r, z, tmp + 2 * dk + rep * dv, nk, rep * dv, blk, e) ||
            be->matvec(r, &L->ba, r->h, tmp, e) || /* after the copies have read tmp: the queue is in order */
            be->copy(r, bb, tmp, nk, rep, 2 * rep, e) || be->copy(r, aa, tmp + rep, nk, rep, 2 * rep, e))
            return -1;
    } else if (be->matvec(r, &L->qkv, r->h, mix, e) || be->matvec(r, &L->z, r->h, z, e) || be->matvec(r, &L->b, r->h, bb, e) ||
               be->matvec(r, &L->a, r->h, aa, e)) {
        return -1;
    }
    rt_dn_step d = {nk, dk, nv, dv, c->conv_k, c->eps, L->conv_w, L->A_log, L->dt_bias, L->gnorm,
                    L->conv_state, L->ssm, mix, z, bb, aa, tmp, r->ao};
    if (be->deltanet) {
        int rc = be->deltanet(r, &d, e); /* 1: beyond the device's kernels, on the CPU after a sync */
        if (rc < 0 || (rc == 1 && be->sync(r, e)))
            return -1;
        if (rc == 1)
            rt_deltanet_step(&d, r->pool);
    } else if (be->sync(r, e)) {
        return -1;
    } else {
        rt_deltanet_step(&d, r->pool);
    }
    return be->matvec(r, &L->o, r->ao, r->mo, e);
}
