/* One decoder step: embedding → layers (RMSNorm, GQA attention with NeoX RoPE and an f32
 * KV cache, SwiGLU MLP or routed experts + shared expert) → final norm → logits.
 * Every sum has a fixed order; experts are combined in routing-rank order.
 *
 * Read it bottom up from rt_forward, or top down as the pieces it calls. The activation
 * buffers live in tq_runner (rt_internal.h, one shape comment each); hd = head_dim,
 * kvd = kv_heads * hd, H = hidden, E = experts, K = experts_per_tok. */
#include "runtime/rt_internal.h"

#include <math.h>
#include <string.h>

/* out[n] = w[n] * x[n] / sqrt(mean(x²) + eps); the sum of squares in double, in order.
 * out may be x. */
static void rmsnorm(float *out, const float *x, const float *w, uint64_t n, double eps)
{
    double ss = 0;
    for (uint64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (uint64_t i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * inv);
}

/* NeoX rotate-half RoPE on one head v[d], in place: pairs (i, i + d/2) turned by
 * pos · theta^(-2i/d). */
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

/* Heads [b, en) of one layer's attention at position pos: for head h (query group
 * kh = h / (heads / kv_heads)), softmax over t <= pos of q·k_t / sqrt(hd), then the
 * weighted sum of v_t into ao. Each head is computed whole by one thread. */
static void att_task(void *vctx, uint64_t b, uint64_t en)
{
    struct att_ctx *a = vctx;
    tq_runner *r = a->r;
    const rt_config *c = &r->c;
    uint64_t hd = c->head_dim, kvd = c->kv_heads * hd, group = c->heads / c->kv_heads;
    const float *kc = r->kc + a->l * r->ctx * kvd, *vc = r->vc + a->l * r->ctx * kvd; /* [ctx][kvd] */
    float scale = (float)(1.0 / sqrt((double)hd));
    for (uint64_t h = b; h < en; h++) {
        const float *q = r->q + h * hd; /* [hd] */
        uint64_t kh = h / group;
        float *sc = r->att + h * r->ctx; /* [pos + 1] used */
        float mx = -INFINITY;
        for (uint64_t t = 0; t <= a->pos; t++) {
            const float *k = kc + t * kvd + kh * hd; /* [hd] */
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
        float *o = r->ao + h * hd; /* [hd] */
        memset(o, 0, hd * sizeof *o);
        for (uint64_t t = 0; t <= a->pos; t++) {
            const float *v = vc + t * kvd + kh * hd; /* [hd] */
            float p = sc[t] / sum;
            for (uint64_t i = 0; i < hd; i++)
                o[i] += p * v[i];
        }
    }
}

/* Self-attention of layer l at position pos: h [H] → q [heads·hd], k, v [kvd] (q_norm /
 * k_norm per head when the model has them, then RoPE) → KV cache row pos → ao [heads·hd]
 * → o_proj → mo [H]. */
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

/* SwiGLU: out [down->rows] = down(silu(gate x) * up x), x [gate->cols]; the product goes
 * through g and u [gate->rows]. */
static int swiglu(tq_runner *r, const rt_linear *g, const rt_linear *u, const rt_linear *d, const float *x,
                  float *out, tq_err *e)
{
    if (rt_matvec(r->pool, g, x, r->g, &r->scr, e) || rt_matvec(r->pool, u, x, r->u, &r->scr, e))
        return -1;
    for (uint64_t i = 0; i < g->rows; i++)
        r->g[i] = silu(r->g[i]) * r->u[i];
    return rt_matvec(r->pool, d, r->g, out, &r->scr, e);
}

/* Routed experts of layer l: h [H] → router logits rl [E] → softmax → the K most probable
 * experts (weights renormalised to sum 1 when norm_topk_prob) → mo [H] = Σ_k w_k ·
 * expert_k(h), in rank order, each expert's output through eo [H]; plus, when the layer has
 * one, sigmoid(shared_expert_gate · h) · shared_expert(h). Streamed experts are read (or
 * found in the cache) as one block each before any of them runs. */
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
    uint64_t ids[64]; /* [K] chosen experts, by rank */
    float w[64];      /* [K] their weights */
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
    const uint8_t *blocks[64] = {0}; /* [K] streamed: each expert's whole block */
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

/* One token at position pos through the whole model: logits [vocab] for the next token.
 * The KV cache rows 0..pos-1 must hold the earlier positions. */
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
    if (rt_linear_row(&r->embed, (uint64_t)token, r->x, e) != 0) /* x [H] = embedding row */
        return -1;
    for (uint64_t l = 0; l < c->layers; l++) {
        rt_layer *L = &r->L[l];
        rmsnorm(r->h, r->x, L->in_norm, H, c->eps); /* h = input_layernorm(x) */
        if (attention(r, l, pos, e) != 0)          /* mo = attention(h) */
            return -1;
        for (uint64_t i = 0; i < H; i++)
            r->x[i] += r->mo[i];
        rmsnorm(r->h, r->x, L->post_norm, H, c->eps); /* h = post_attention_layernorm(x) */
        if (L->moe) {                                 /* mo = MLP(h): routed experts ... */
            if (moe(r, l, e) != 0)
                return -1;
        } else if (swiglu(r, &L->gate, &L->up, &L->down, r->h, r->mo, e) != 0) { /* ... or dense */
            return -1;
        }
        for (uint64_t i = 0; i < H; i++)
            r->x[i] += r->mo[i];
    }
    rmsnorm(r->h, r->x, r->final_norm, H, c->eps); /* h = model.norm(x) */
    return rt_matvec(r->pool, &r->lm_head, r->h, r->logits, &r->scr, e); /* logits [vocab] */
}
