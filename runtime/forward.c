/* One decoder step: embedding → layers (RMSNorm, a token mixer — softmax attention, latent
 * attention or Gated DeltaNet —, then a SwiGLU MLP or routed experts + shared experts) → final
 * norm → logits. Every sum has a fixed order; experts are combined in routing-rank order.
 *
 * Read it bottom up from rt_forward, or top down as the pieces it calls; the mixers are in
 * attention.c and deltanet.c, the walk through one layer of each family in docs/runtime.md.
 * The activation buffers live in tq_runner (rt_internal.h, one shape comment each);
 * H = hidden, E = experts, K = experts_per_tok. */
#include "runtime/rt_internal.h"

#include <math.h>
#include <string.h>

/* SwiGLU: out [down->rows] = down(act(gate x, up x)), x [gate->cols]; the product goes
 * through g and u [gate->rows]. act is silu(g) * u, or gpt-oss's clamped form
 * min(g, L) · sigmoid(α min(g, L)) · (clamp(u, -L, L) + 1) (the backend's act). */
static int swiglu(tq_runner *r, const rt_linear *g, const rt_linear *u, const rt_linear *d, const float *x,
                  float *out, tq_err *e)
{
    const rt_backend *be = r->be;
    if (be->matvec_n) { /* gate and up as one job */
        rt_linear m[2] = {*g, *u};
        const float *xs[2] = {x, x};
        float *ys[2] = {r->g, r->u};
        if (be->matvec_n(r, 2, m, xs, ys, e))
            return -1;
    } else if (be->matvec(r, g, x, r->g, e) || be->matvec(r, u, x, r->u, e)) {
        return -1;
    }
    if (be->act(r, g->rows, e))
        return -1;
    return be->matvec(r, d, r->g, out, e);
}

/* Routed experts k < nk (nk <= r->ebatch) of blocks blk [nk] as two jobs of the threads: every
 * gate and up product into g, u [nk][I], then every down product into eo [nk][H] (each row
 * computed as one expert at a time computes it); then out += w_k eo_k in rank order, the adds
 * of the one-at-a-time loop. The experts' gates (and ups) share their signs, so xin is rotated
 * once for each (rt_matvec_n). */
static int experts_job(tq_runner *r, const rt_layer *L, const uint64_t *ids, const float *w,
                       const uint8_t *const *blk, uint64_t nk, const float *xin, float *out, tq_err *e)
{
    const rt_backend *be = r->be;
    uint64_t H = r->c.hidden, I = 0;
    rt_linear m[RT_MATVEC_BATCH];
    const float *xs[RT_MATVEC_BATCH];
    float *ys[RT_MATVEC_BATCH];
    for (uint64_t k = 0; k < nk; k++) {
        rt_emat_bind(&L->eg, ids[k], blk[k], &m[k]);
        rt_emat_bind(&L->eu, ids[k], blk[k], &m[nk + k]);
        I = m[k].rows;
        xs[k] = xs[nk + k] = xin;
        ys[k] = r->g + k * I;
        ys[nk + k] = r->u + k * I;
    }
    if (be->matvec_n(r, 2 * nk, m, xs, ys, e) || be->act(r, nk * I, e))
        return -1;
    for (uint64_t k = 0; k < nk; k++) {
        rt_emat_bind(&L->ed, ids[k], blk[k], &m[k]);
        xs[k] = r->g + k * I;
        ys[k] = r->eo + k * H;
    }
    if (be->matvec_n(r, nk, m, xs, ys, e))
        return -1;
    for (uint64_t k = 0; k < nk; k++)
        if (be->axpy(r, out, r->eo + k * H, w[k], NULL, H, e)) /* out += w_k eo_k */
            return -1;
    return 0;
}

/* The k largest of v[0..n), ties to the lower index, in rank order. */
static void top_k(const float *v, uint64_t n, uint64_t k, uint64_t *ids)
{
    for (uint64_t j = 0; j < k; j++) {
        uint64_t best = n;
        for (uint64_t i = 0; i < n; i++) {
            int taken = 0;
            for (uint64_t t = 0; t < j; t++)
                taken |= ids[t] == i;
            if (!taken && (best == n || v[i] > v[best]))
                best = i;
        }
        ids[j] = best;
    }
}

/* Router logits rl [E] → the K chosen experts ids [K] and their weights w [K] (enum rt_route):
 * the CPU backend's route, and the rule the route kernel (runtime/metal/kernels.metal) keeps.
 * The rules are transformers' (src/transformers/models/):
 *  - softmax: qwen2_moe/modeling_qwen2_moe.py and qwen3_moe/modeling_qwen3_moe.py,
 *    Qwen2MoeSparseMoeBlock / Qwen3MoeSparseMoeBlock.forward (softmax in f32 over all experts,
 *    torch.topk, divided by the top-k sum when norm_topk_prob), mixtral/modeling_mixtral.py,
 *    MixtralSparseMoeBlock.forward (the same, always divided: family.c sets norm_topk);
 *  - top-k then softmax: gpt_oss/modeling_gpt_oss.py, GptOssTopKRouter.forward (F.linear with
 *    the router bias, torch.topk of the logits, softmax over those k);
 *  - sigmoid, group-limited: deepseek_v3/modeling_deepseek_v3.py, DeepseekV3MoE.
 *    route_tokens_to_experts (sigmoid; + e_score_correction_bias for choosing; group score =
 *    the sum of a group's two best; topk_group groups kept, the rest masked to 0; top-k; the
 *    weights are the sigmoids gathered at the chosen ids, divided by their sum + 1e-20 when
 *    norm_topk_prob, times routed_scaling_factor).
 * torch.topk leaves the order of equal values unspecified; tq's top_k breaks ties to the lower
 * index, and so does the route kernel (test_metal_kernels, route_cpu, holds the two equal). */
int rt_route(tq_runner *r, const rt_layer *L, uint64_t *ids, float *w, tq_err *e)
{
    (void)e;
    const rt_config *c = &r->c;
    uint64_t E = c->experts, K = c->top_k;
    float *rl = r->rl;
    if (c->route == RT_ROUTE_TOPK_SOFTMAX) { /* top-k logits, softmax over them */
        top_k(rl, E, K, ids);
        float mx = rl[ids[0]], sum = 0;
        for (uint64_t k = 0; k < K; k++)
            sum += w[k] = rt_expf(rl[ids[k]] - mx);
        for (uint64_t k = 0; k < K; k++)
            w[k] /= sum;
        return 0;
    }
    if (c->route == RT_ROUTE_SIGMOID_GROUP) {
        /* choose by sigmoid + correction bias within the best groups; weigh by the sigmoid */
        float *sg = rl, *choice = rl + E; /* [E] sigmoid scores, [E] scores for choosing */
        uint64_t n = E;
        for (uint64_t i = 0; i < n; i++) {
            sg[i] = rt_sigmoid(rl[i]);
            choice[i] = sg[i] + (L->score_bias ? L->score_bias[i] : 0.0f);
        }
        if (c->n_group > 1) {
            uint64_t per = n / c->n_group, gids[64];
            float gscore[64];
            for (uint64_t gi = 0; gi < c->n_group; gi++) {
                uint64_t two[2];
                top_k(choice + gi * per, per, 2, two);
                gscore[gi] = choice[gi * per + two[0]] + choice[gi * per + two[1]];
            }
            top_k(gscore, c->n_group, c->topk_group, gids);
            for (uint64_t gi = 0; gi < c->n_group; gi++) {
                int keep = 0;
                for (uint64_t t = 0; t < c->topk_group; t++)
                    keep |= gids[t] == gi;
                if (!keep)
                    for (uint64_t i = gi * per; i < (gi + 1) * per; i++)
                        choice[i] = 0.0f;
            }
        }
        top_k(choice, n, K, ids);
        float sum = 0;
        for (uint64_t k = 0; k < K; k++)
            sum += w[k] = sg[ids[k]];
        for (uint64_t k = 0; k < K; k++) {
            if (c->norm_topk)
                w[k] /= sum + 1e-20f;
            w[k] *= (float)c->route_scale;
        }
        return 0;
    }
    /* softmax over all experts, top-k by probability, renormalised when norm_topk */
    float mx = -INFINITY;
    for (uint64_t i = 0; i < E; i++)
        if (rl[i] > mx)
            mx = rl[i];
    float sum = 0;
    for (uint64_t i = 0; i < E; i++) {
        rl[i] = rt_expf(rl[i] - mx);
        sum += rl[i];
    }
    for (uint64_t i = 0; i < E; i++)
        rl[i] /= sum;
    top_k(rl, E, K, ids);
    for (uint64_t k = 0; k < K; k++)
        w[k] = rl[ids[k]];
    if (c->norm_topk) {
        float s = 0;
        for (uint64_t k = 0; k < K; k++)
            s += w[k];
        for (uint64_t k = 0; k < K; k++)
            w[k] /= s;
    }
    /* gemma4 (Gemma4TextRouter.forward): the renormalised weights times per_expert_scale */
    for (uint64_t k = 0; L->expert_scale && k < K; k++)
        w[k] *= L->expert_scale[ids[k]];
    return 0;
}

/* out [H] += the shared expert of L on xin [H]: sigmoid(shared_expert_gate · xin) ·
 * shared_expert(xin) (qwen) or shared_experts(xin) (DeepSeek); nothing without one. */
static int shared_expert(tq_runner *r, const rt_layer *L, const float *xin, float *out, tq_err *e)
{
    const rt_backend *be = r->be;
    uint64_t H = r->c.hidden;
    if (!L->has_shared)
        return 0;
    float *gl = r->rl + 2 * r->c.experts; /* [1] the shared expert's gate logit */
    if (swiglu(r, &L->sg, &L->su, &L->sd, xin, r->eo, e))
        return -1;
    if (L->has_sgate)
        return be->matvec(r, &L->sgate, xin, gl, e) || be->axpy(r, out, r->eo, 0.0f, gl, H, e); /* sigmoid(gl) eo */
    return be->axpy(r, out, r->eo, 1.0f, NULL, H, e);
}

int rt_experts_indexed(const rt_layer *L)
{
    if (L->eg.per_expert || L->eu.per_expert || L->ed.per_expert)
        return 0;
    return !L->streamed || L->resident_blocks != NULL;
}

/* Routed experts of layer l: rin [H] → router logits rl [E] → route() → out [H] = Σ_k w_k ·
 * expert_k(xin), in rank order, each expert's output through eo [H]; plus the shared expert:
 * sigmoid(shared_expert_gate · xin) · shared_expert(xin) (qwen) or shared_experts(xin)
 * (DeepSeek). Every family but gemma4 routes the experts' own input (rin = xin = h, out = mo).
 * Streamed experts are read (or found in the cache) as one block each before any runs. */
static int moe(tq_runner *r, uint64_t l, const float *rin, const float *xin, float *out, tq_err *e)
{
    const rt_config *c = &r->c;
    const rt_backend *be = r->be;
    rt_layer *L = &r->L[l];
    uint64_t K = c->top_k, H = c->hidden;
    if (be->matvec(r, &L->router, rin, r->rl, e) != 0)
        return -1;
    if (be->route_keep && rt_experts_indexed(L)) {
        /* a device backend with the experts in memory: the choice stays on the device, each
         * expert kernel reads its id there (runtime/backend.c; no CPU wait) */
        if (be->route_keep(r, L, e) || be->gate(r, out, NULL, H, RT_GATE_ZERO, e))
            return -1;
        for (uint64_t k = 0; k < K; k++)
            if (be->expert_matvec(r, L, &L->eg, k, xin, r->g, e) || be->expert_matvec(r, L, &L->eu, k, xin, r->u, e) ||
                be->act(r, L->eg.t.rows, e) || be->expert_matvec(r, L, &L->ed, k, r->g, r->eo, e) ||
                be->axpy_rank(r, out, r->eo, k, H, e)) /* out += w_k eo */
                return -1;
        return shared_expert(r, L, xin, out, e);
    }
    uint64_t ids[64]; /* [K] chosen experts, by rank */
    float w[64];      /* [K] their weights */
    if (be->route(r, L, ids, w, e) != 0)
        return -1;
    const uint8_t *blocks[64] = {0}; /* [K] streamed: each expert's whole block */
    if (L->streamed && !L->resident_blocks &&
        rt_cache_acquire(r->cache, &L->src, l, ids, K, r->o.check_blocks, blocks, e) != 0)
        return -1;
    int rc = be->gate(r, out, NULL, H, RT_GATE_ZERO, e); /* out = 0 */
    for (uint64_t k = 0; k < K && L->resident_blocks; k++)
        blocks[k] = L->resident_blocks + ids[k] * L->src.block_size;
    for (uint64_t k = 0; k < K && rc == 0 && be->matvec_n; k += r->ebatch)
        rc = experts_job(r, L, ids + k, w + k, blocks + k, K - k < r->ebatch ? K - k : r->ebatch, xin, out, e);
    for (uint64_t k = 0; k < K && rc == 0 && !be->matvec_n; k++) {
        const uint8_t *blk = blocks[k];
        rt_linear g, u, d;
        rt_emat_bind(&L->eg, ids[k], blk, &g);
        rt_emat_bind(&L->eu, ids[k], blk, &u);
        rt_emat_bind(&L->ed, ids[k], blk, &d);
        rc = swiglu(r, &g, &u, &d, xin, r->eo, e) || be->axpy(r, out, r->eo, w[k], NULL, H, e); /* out += w_k eo */
    }
    /* a device backend reads the blocks in its own memory: a block evicted now is released
     * only after the queued products ran (runtime/backend.c, cache_alloc) */
    if (L->streamed && !L->resident_blocks)
        rt_cache_release(r->cache, l, ids, K);
    if (rc != 0)
        return -1;
    return shared_expert(r, L, xin, out, e);
}

/* One gemma4 decoder layer (transformers' models/gemma4/modeling_gemma4.py,
 * Gemma4TextDecoderLayer.forward, without per-layer inputs): norms sandwich each block,
 *   x += post_attention_layernorm(attn(input_layernorm(x)))
 *   m  = mlp(pre_feedforward_layernorm(x))                     (GELU-tanh MLP)
 *   with experts: m = post_feedforward_layernorm_1(m)
 *                   + post_feedforward_layernorm_2(experts(pre_feedforward_layernorm_2(x)))
 *                 routed by Gemma4TextRouter on x itself: proj(rmsnorm(x) · scale · H^-1/2)
 *   x += post_feedforward_layernorm(m);  x *= layer_scalar
 * Buffers: h [H] block inputs, mo [H] block outputs; with experts k [H] the router's input,
 * v [H] the experts' input, ao [H] their sum (attention has finished with all three). The
 * family runs on the CPU backend only (backend.c), so the few element-wise steps without a
 * backend operation are plain loops. */
static int gemma4_layer(tq_runner *r, uint64_t l, uint64_t pos, tq_err *e)
{
    const rt_config *c = &r->c;
    const rt_backend *be = r->be;
    rt_layer *L = &r->L[l];
    uint64_t H = c->hidden;
    double eps = c->eps;
    if (be->rmsnorm(r, r->h, r->x, L->in_norm, H, 1, eps, e) || rt_attention(r, l, pos, e) ||
        be->rmsnorm(r, r->mo, r->mo, L->post_norm, H, 1, eps, e) || be->axpy(r, r->x, r->mo, 1.0f, NULL, H, e) ||
        be->rmsnorm(r, r->h, r->x, L->pre_ff, H, 1, eps, e) || swiglu(r, &L->gate, &L->up, &L->down, r->h, r->mo, e))
        return -1;
    if (L->moe) {
        float root = (float)(1.0 / sqrt((double)H)); /* Gemma4TextRouter.scalar_root_size */
        if (be->rmsnorm(r, r->mo, r->mo, L->post_ff1, H, 1, eps, e) ||
            be->rmsnorm(r, r->k, r->x, NULL, H, 1, eps, e) || be->sync(r, e))
            return -1;
        for (uint64_t i = 0; i < H; i++)
            r->k[i] = r->k[i] * L->router_scale[i] * root;
        if (be->rmsnorm(r, r->v, r->x, L->pre_ff2, H, 1, eps, e) || moe(r, l, r->k, r->v, r->ao, e) ||
            be->rmsnorm(r, r->ao, r->ao, L->post_ff2, H, 1, eps, e) || be->axpy(r, r->mo, r->ao, 1.0f, NULL, H, e))
            return -1;
    }
    if (be->rmsnorm(r, r->mo, r->mo, L->post_ff, H, 1, eps, e) || be->axpy(r, r->x, r->mo, 1.0f, NULL, H, e) ||
        be->sync(r, e))
        return -1;
    for (uint64_t i = 0; i < H; i++)
        r->x[i] *= L->layer_scalar;
    return 0;
}

/* One token at position pos through the whole model: logits [vocab] for the next token.
 * The layers' caches and states must hold positions 0..pos-1. */
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
    const rt_backend *be = r->be;
    /* x [H] = embedding row, written here: the previous position ended with the backend's sync */
    if (rt_linear_row(&r->embed, (uint64_t)token, r->x, e) != 0)
        return -1;
    if (c->arch == RT_GEMMA4) /* gemma4: times sqrt(hidden) in the embedding's dtype (model.c) */
        for (uint64_t i = 0; i < H; i++)
            r->x[i] *= r->embed_scale;
    rt_rope_angles(r, pos);
    for (uint64_t l = 0; l < c->layers; l++) {
        rt_layer *L = &r->L[l];
        if (c->arch == RT_GEMMA4) {
            if (gemma4_layer(r, l, pos, e) != 0)
                return -1;
            continue;
        }
        if (be->rmsnorm(r, r->h, r->x, L->in_norm, H, 1, c->eps, e)) /* h = input_layernorm(x) */
            return -1;
        int rc = L->mixer == RT_MIX_LINEAR ? rt_deltanet(r, l, e)      /* mo = mixer(h) */
                 : L->mixer == RT_MIX_MLA  ? rt_mla(r, l, pos, e)
                                           : rt_attention(r, l, pos, e);
        if (rc != 0 || be->axpy(r, r->x, r->mo, 1.0f, NULL, H, e) ||           /* x += mo */
            be->rmsnorm(r, r->h, r->x, L->post_norm, H, 1, c->eps, e))        /* h = post_attention_layernorm(x) */
            return -1;
        if (L->moe) {                                    /* mo = MLP(h): routed experts ... */
            if (moe(r, l, r->h, r->h, r->mo, e) != 0)
                return -1;
        } else if (swiglu(r, &L->gate, &L->up, &L->down, r->h, r->mo, e) != 0) { /* ... or dense */
            return -1;
        }
        if (be->axpy(r, r->x, r->mo, 1.0f, NULL, H, e))
            return -1;
    }
    if (be->rmsnorm(r, r->h, r->x, r->final_norm, H, 1, c->eps, e) || /* h = model.norm(x) */
        be->matvec(r, &r->lm_head, r->h, r->logits, e) ||              /* logits [vocab] */
        be->sync(r, e))
        return -1;
    /* Gemma4ForCausalLM.forward: logits = tanh(logits / cap) · cap */
    if (c->softcap > 0)
        for (uint64_t i = 0; i < c->vocab; i++)
            r->logits[i] = rt_tanhf(r->logits[i] / (float)c->softcap) * (float)c->softcap;
    return 0;
}
