/* One decoder step: embedding → layers (RMSNorm, GQA attention with NeoX RoPE and an f32
 * KV cache, SwiGLU MLP or routed experts + shared expert) → final norm → logits.
 * Every sum has a fixed order; experts are combined in routing-rank order. */
#include "runtime/rt_internal.h"

#include <math.h>
#include <string.h>

static void rmsnorm(float *out, const float *x, const float *w, uint64_t n, double eps)
{
    double ss = 0;
    for (uint64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (uint64_t i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * inv);
}

/* NeoX rotate-half: pairs (i, i + d/2). */
static void rope(float *v, uint64_t d, uint64_t pos, double theta)
{
    uint64_t h = d / 2;
    double lt = rt_log(theta);
    for (uint64_t i = 0; i < h; i++) {
        double inv = rt_exp(-(double)(2 * i) / (double)d * lt);
        double a = (double)pos * inv, sd, cd;
        rt_sincos(a, &sd, &cd);
        float c = (float)cd, s = (float)sd;
        float x1 = v[i], x2 = v[i + h];
        v[i] = x1 * c - x2 * s;
        v[i + h] = x2 * c + x1 * s;
    }
}

static float silu(float x)
{
    return x / (1.0f + rt_expf(-x));
}

struct att_ctx {
    tq_runner *r;
    uint64_t l, pos;
};

static void att_task(void *vctx, uint64_t b, uint64_t en)
{
    struct att_ctx *a = vctx;
    tq_runner *r = a->r;
    const rt_config *c = &r->c;
    uint64_t hd = c->head_dim, kvd = c->kv_heads * hd, group = c->heads / c->kv_heads;
    const float *kc = r->kc + a->l * r->ctx * kvd, *vc = r->vc + a->l * r->ctx * kvd;
    float scale = (float)(1.0 / sqrt((double)hd));
    for (uint64_t h = b; h < en; h++) {
        const float *q = r->q + h * hd;
        uint64_t kh = h / group;
        float *sc = r->att + h * r->ctx;
        float mx = -INFINITY;
        for (uint64_t t = 0; t <= a->pos; t++) {
            const float *k = kc + t * kvd + kh * hd;
            float s = 0;
            for (uint64_t i = 0; i < hd; i++)
                s += q[i] * k[i];
            sc[t] = s * scale;
            if (sc[t] > mx)
                mx = sc[t];
        }
        float sum = 0;
        for (uint64_t t = 0; t <= a->pos; t++) {
            sc[t] = rt_expf(sc[t] - mx);
            sum += sc[t];
        }
        float *o = r->ao + h * hd;
        memset(o, 0, hd * sizeof *o);
        for (uint64_t t = 0; t <= a->pos; t++) {
            const float *v = vc + t * kvd + kh * hd;
            float p = sc[t] / sum;
            for (uint64_t i = 0; i < hd; i++)
                o[i] += p * v[i];
        }
    }
}

static int attention(tq_runner *r, uint64_t l, uint64_t pos, tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    uint64_t hd = c->head_dim, kvd = c->kv_heads * hd;
    if (rt_matvec(r->pool, &L->q, r->h, r->q, &r->scr, e) || rt_matvec(r->pool, &L->k, r->h, r->k, &r->scr, e) ||
        rt_matvec(r->pool, &L->v, r->h, r->v, &r->scr, e))
        return -1;
    for (uint64_t h = 0; h < c->heads; h++) {
        if (L->q_norm)
            rmsnorm(r->q + h * hd, r->q + h * hd, L->q_norm, hd, c->eps);
        rope(r->q + h * hd, hd, pos, c->rope_theta);
    }
    for (uint64_t h = 0; h < c->kv_heads; h++) {
        if (L->k_norm)
            rmsnorm(r->k + h * hd, r->k + h * hd, L->k_norm, hd, c->eps);
        rope(r->k + h * hd, hd, pos, c->rope_theta);
    }
    memcpy(r->kc + (l * r->ctx + pos) * kvd, r->k, kvd * sizeof(float));
    memcpy(r->vc + (l * r->ctx + pos) * kvd, r->v, kvd * sizeof(float));
    struct att_ctx a = {r, l, pos};
    rt_pool_for(r->pool, c->heads, att_task, &a);
    return rt_matvec(r->pool, &L->o, r->ao, r->mo, &r->scr, e);
}

/* SwiGLU: out = down(silu(gate x) * up x). */
static int swiglu(tq_runner *r, const rt_linear *g, const rt_linear *u, const rt_linear *d, const float *x,
                  float *out, tq_err *e)
{
    if (rt_matvec(r->pool, g, x, r->g, &r->scr, e) || rt_matvec(r->pool, u, x, r->u, &r->scr, e))
        return -1;
    for (uint64_t i = 0; i < g->rows; i++)
        r->g[i] = silu(r->g[i]) * r->u[i];
    return rt_matvec(r->pool, d, r->g, out, &r->scr, e);
}

static int moe(tq_runner *r, uint64_t l, tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    uint64_t E = c->experts, K = c->top_k, H = c->hidden;
    if (rt_matvec(r->pool, &L->router, r->h, r->rl, &r->scr, e) != 0)
        return -1;
    float mx = -INFINITY;
    for (uint64_t i = 0; i < E; i++)
        if (r->rl[i] > mx)
            mx = r->rl[i];
    float sum = 0;
    for (uint64_t i = 0; i < E; i++) {
        r->rl[i] = rt_expf(r->rl[i] - mx);
        sum += r->rl[i];
    }
    for (uint64_t i = 0; i < E; i++)
        r->rl[i] /= sum;
    /* top-k by probability, ties to the lower expert index */
    uint64_t ids[64];
    float w[64];
    for (uint64_t k = 0; k < K; k++) {
        uint64_t best = E;
        for (uint64_t i = 0; i < E; i++) {
            int taken = 0;
            for (uint64_t j = 0; j < k; j++)
                taken |= ids[j] == i;
            if (!taken && (best == E || r->rl[i] > r->rl[best]))
                best = i;
        }
        ids[k] = best;
        w[k] = r->rl[best];
    }
    if (c->norm_topk) {
        float s = 0;
        for (uint64_t k = 0; k < K; k++)
            s += w[k];
        for (uint64_t k = 0; k < K; k++)
            w[k] /= s;
    }
    const uint8_t *blocks[64] = {0};
    if (L->streamed && !L->resident_blocks &&
        rt_cache_acquire(r->cache, &L->src, l, ids, K, r->o.check_blocks, blocks, e) != 0)
        return -1;
    memset(r->mo, 0, H * sizeof(float));
    int rc = 0;
    for (uint64_t k = 0; k < K && rc == 0; k++) {
        const uint8_t *blk = L->resident_blocks ? L->resident_blocks + ids[k] * L->src.block_size : blocks[k];
        rt_linear g, u, d;
        rt_emat_bind(&L->eg, ids[k], blk, &g);
        rt_emat_bind(&L->eu, ids[k], blk, &u);
        rt_emat_bind(&L->ed, ids[k], blk, &d);
        rc = swiglu(r, &g, &u, &d, r->h, r->eo, e);
        for (uint64_t i = 0; rc == 0 && i < H; i++)
            r->mo[i] += w[k] * r->eo[i];
    }
    if (L->streamed && !L->resident_blocks)
        rt_cache_release(r->cache, l, ids, K);
    if (rc != 0)
        return -1;
    if (L->has_shared) {
        float gl;
        if (swiglu(r, &L->sg, &L->su, &L->sd, r->h, r->eo, e) ||
            rt_matvec(r->pool, &L->sgate, r->h, &gl, &r->scr, e))
            return -1;
        float gate = 1.0f / (1.0f + rt_expf(-gl));
        for (uint64_t i = 0; i < H; i++)
            r->mo[i] += gate * r->eo[i];
    }
    return 0;
}

int rt_forward(tq_runner *r, int32_t token, uint64_t pos, tq_err *e)
{
    const rt_config *c = &r->c;
    uint64_t H = c->hidden;
    if (token < 0 || (uint64_t)token >= c->vocab)
        return tq_fail(e, TQ_EUSAGE, "token id %ld is outside the vocabulary [0, %llu)", (long)token,
                       (unsigned long long)c->vocab);
    if (pos >= r->ctx)
        return tq_fail(e, TQ_EUSAGE, "position %llu exceeds the context of %llu tokens",
                       (unsigned long long)pos, (unsigned long long)r->ctx);
    if (rt_linear_row(&r->embed, (uint64_t)token, r->x, e) != 0)
        return -1;
    for (uint64_t l = 0; l < c->layers; l++) {
        rt_layer *L = &r->L[l];
        rmsnorm(r->h, r->x, L->in_norm, H, c->eps);
        if (attention(r, l, pos, e) != 0)
            return -1;
        for (uint64_t i = 0; i < H; i++)
            r->x[i] += r->mo[i];
        rmsnorm(r->h, r->x, L->post_norm, H, c->eps);
        if (L->moe) {
            if (moe(r, l, e) != 0)
                return -1;
        } else if (swiglu(r, &L->gate, &L->up, &L->down, r->h, r->mo, e) != 0) {
            return -1;
        }
        for (uint64_t i = 0; i < H; i++)
            r->x[i] += r->mo[i];
    }
    rmsnorm(r->h, r->x, r->final_norm, H, c->eps);
    return rt_matvec(r->pool, &r->lm_head, r->h, r->logits, &r->scr, e);
}
