/* Softmax attention mixers: grouped-query attention (full or sliding window, optional per-head
 * q/k RMSNorm, partial rotary, attention sinks, sigmoid output gate) and DeepSeek's multi-head
 * latent attention over a cache of the compressed kv. Each head is computed whole by one
 * thread with a fixed summation order. docs/runtime.md has the shapes step by step. */
#include "runtime/rt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct att_ctx {
    tq_runner *r;
    const rt_layer *L;
    uint64_t pos, t0; /* attend to positions t0..pos */
};

/* Heads [b, en) at position pos: for head h (kv group kh = h / (heads / kv_heads)), softmax
 * over t in [t0, pos] of scale · q·k_t (with the head's sink logit in the denominator when the
 * model has sinks), then the weighted sum of v_t into ao. */
static void att_task(void *vctx, uint64_t b, uint64_t en)
{
    struct att_ctx *a = vctx;
    tq_runner *r = a->r;
    const rt_config *c = &r->c;
    uint64_t hd = a->L->hd, kvd = a->L->kvh * hd, group = c->heads / a->L->kvh;
    const float *kc = a->L->kc, *vc = a->L->vc; /* [ctx][kvd] */
    float scale = (float)c->att_scale;
    for (uint64_t h = b; h < en; h++) {
        const float *q = r->q + h * hd; /* [hd] */
        uint64_t kh = h / group;
        float *sc = r->att + h * (r->ctx + 1); /* [pos + 1] used */
        /* s_t = Σ_i q[i]·k_t[i] in increasing i, eight positions side by side: eight independent
         * sums instead of one chain of hd dependent adds, each the same bits as alone */
        uint64_t t = a->t0;
        for (; t + 8 <= a->pos + 1; t += 8) {
            const float *k0 = kc + t * kvd + kh * hd, *k1 = k0 + kvd, *k2 = k1 + kvd, *k3 = k2 + kvd,
                        *k4 = k3 + kvd, *k5 = k4 + kvd, *k6 = k5 + kvd, *k7 = k6 + kvd; /* [hd] each */
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
            for (uint64_t i = 0; i < hd; i++) {
                float qi = q[i];
                s0 += qi * k0[i];
                s1 += qi * k1[i];
                s2 += qi * k2[i];
                s3 += qi * k3[i];
                s4 += qi * k4[i];
                s5 += qi * k5[i];
                s6 += qi * k6[i];
                s7 += qi * k7[i];
            }
            sc[t] = s0 * scale, sc[t + 1] = s1 * scale, sc[t + 2] = s2 * scale, sc[t + 3] = s3 * scale;
            sc[t + 4] = s4 * scale, sc[t + 5] = s5 * scale, sc[t + 6] = s6 * scale, sc[t + 7] = s7 * scale;
        }
        for (; t <= a->pos; t++) {
            const float *k = kc + t * kvd + kh * hd; /* [hd] */
            float s = 0;
            for (uint64_t i = 0; i < hd; i++)
                s += q[i] * k[i];
            sc[t] = s * scale;
        }
        float mx = -INFINITY;
        for (t = a->t0; t <= a->pos; t++)
            if (sc[t] > mx)
                mx = sc[t];
        float sink = a->L->sinks ? a->L->sinks[h] : 0.0f;
        if (a->L->sinks && sink > mx)
            mx = sink;
        float sum = 0;
        for (t = a->t0; t <= a->pos; t++) {
            sc[t] = rt_expf(sc[t] - mx);
            sum += sc[t];
        }
        if (a->L->sinks)
            sum += rt_expf(sink - mx);
        float *o = r->ao + h * hd; /* [hd] */
        for (t = a->t0; t <= a->pos; t++)
            sc[t] /= sum; /* p_t */
        /* o[i] = Σ_t p_t·v_t[i] from +0 in increasing t, eight dims at a time kept in registers
         * over all t (the same adds as one position at a time into o) */
        const float *vh = vc + kh * hd; /* v_t of head kh at vh + t·kvd */
        uint64_t i = 0;
        for (; i + 8 <= hd; i += 8) {
            float o0 = 0, o1 = 0, o2 = 0, o3 = 0, o4 = 0, o5 = 0, o6 = 0, o7 = 0;
            for (t = a->t0; t <= a->pos; t++) {
                const float *v = vh + t * kvd + i; /* [8] */
                float p = sc[t];
                o0 += p * v[0];
                o1 += p * v[1];
                o2 += p * v[2];
                o3 += p * v[3];
                o4 += p * v[4];
                o5 += p * v[5];
                o6 += p * v[6];
                o7 += p * v[7];
            }
            o[i] = o0, o[i + 1] = o1, o[i + 2] = o2, o[i + 3] = o3;
            o[i + 4] = o4, o[i + 5] = o5, o[i + 6] = o6, o[i + 7] = o7;
        }
        for (; i < hd; i++) {
            float oi = 0;
            for (t = a->t0; t <= a->pos; t++)
                oi += sc[t] * vh[t * kvd + i];
            o[i] = oi;
        }
    }
}

/* The CPU backend's attention core: q [heads·hd] → ao [heads·hd] over cache rows t0..pos. */
int rt_attention_core(tq_runner *r, const rt_layer *L, uint64_t pos, uint64_t t0, tq_err *e)
{
    (void)e;
    struct att_ctx a = {r, L, pos, t0};
    /* a short context is a few microseconds of work for all heads together, less than waking
     * a thread costs: then the caller runs every head */
    uint64_t n = r->c.heads, work = (pos - t0 + 1) * L->hd * n;
    if (work < ((uint64_t)1 << 16))
        rt_pool_for_grain(r->pool, n, n, att_task, &a);
    else
        rt_pool_for(r->pool, n, att_task, &a);
    return 0;
}

/* Grouped-query attention of layer l at position pos: h [H] → q [heads·hd] (with the output
 * gate, q_proj gives [heads][2·hd]: query then gate per head, through ao; the gates go to
 * qg), k, v [kvd] (+ biases) → q_norm / k_norm per head when the model has them → RoPE on the
 * first rope.dim dims of each head → cache row pos → ao [heads·hd] (· sigmoid(gate)) →
 * o_proj → mo [H]. */
int rt_attention(tq_runner *r, uint64_t l, uint64_t pos, tq_err *e)
{
    const rt_config *c = &r->c;
    const rt_backend *be = r->be;
    rt_layer *L = &r->L[l];
    uint64_t hd = L->hd, kvd = L->kvh * hd, t0 = 0;
    if (be->matvec_n && !L->kv_shared) { /* q, k and v as one job */
        rt_linear m[3] = {L->q, L->k, L->v};
        const float *xs[3] = {r->h, r->h, r->h};
        float *ys[3] = {c->att_gate ? r->ao : r->q, r->k, r->v};
        if (be->matvec_n(r, 3, m, xs, ys, e))
            return -1;
    } else if (be->matvec(r, &L->q, r->h, c->att_gate ? r->ao : r->q, e) || be->matvec(r, &L->k, r->h, r->k, e) ||
               (L->kv_shared ? be->copy(r, r->v, r->k, 1, kvd, kvd, e) /* gemma4 k_eq_v: value = key projection */
                             : be->matvec(r, &L->v, r->h, r->v, e))) {
        return -1;
    }
    if (c->att_gate && /* [heads][query | gate] → q [heads·hd], qg [heads·hd] */
        (be->copy(r, r->q, r->ao, c->heads, hd, 2 * hd, e) || be->copy(r, r->qg, r->ao + hd, c->heads, hd, 2 * hd, e)))
        return -1;
    int (*rope)(tq_runner *, float *, uint64_t, uint64_t, tq_err *) = L->full_rope ? be->rope_full : be->rope;
    if ((L->q_norm && be->rmsnorm(r, r->q, r->q, L->q_norm, hd, c->heads, c->eps, e)) ||
        (L->k_norm && be->rmsnorm(r, r->k, r->k, L->k_norm, hd, L->kvh, c->eps, e)) ||
        /* gemma4's v_norm: Gemma4RMSNorm(with_scale=False) per head */
        (c->arch == RT_GEMMA4 && be->rmsnorm(r, r->v, r->v, NULL, hd, L->kvh, c->eps, e)) ||
        rope(r, r->q, c->heads, hd, e) || rope(r, r->k, L->kvh, hd, e) ||
        be->copy(r, L->kc + pos * kvd, r->k, 1, kvd, kvd, e) || be->copy(r, L->vc + pos * kvd, r->v, 1, kvd, kvd, e))
        return -1;
    if (L->mixer == RT_MIX_SLIDING && pos + 1 > c->window)
        t0 = pos + 1 - c->window;
    if (be->attention(r, L, pos, t0, e) ||
        (c->att_gate && be->gate(r, r->ao, r->qg, c->heads * hd, RT_GATE_SIGMOID, e)))
        return -1;
    return be->matvec(r, &L->o, r->ao, r->mo, e);
}

/* ---------------------------------------------------------------- latent attention */
struct mla_ctx {
    tq_runner *r;
    const rt_layer *L;
    uint64_t pos;
    int failed;
};

/* Heads [b, en): the query's no-rope part is taken into the latent space through kv_b's key
 * rows of the head (qa [kv_lora] = Σ_d q_nope[d] · kv_b[h·(nope+v) + d]), so
 * score_t = scale · (qa · latent_t + q_rope · k_rope_t); the softmax-weighted latent
 * ol [kv_lora] = Σ_t p_t latent_t goes out through the head's value rows:
 * ao[h·v + i] = kv_b[h·(nope+v) + nope + i] · ol. Same products as expanding k and v per
 * position, in the other order. */
static void mla_task(void *vctx, uint64_t b, uint64_t en)
{
    struct mla_ctx *a = vctx;
    tq_runner *r = a->r;
    const rt_config *c = &r->c;
    const rt_layer *L = a->L;
    uint64_t nope = c->qk_nope, rope = c->qk_rope, vh = c->v_head, kvl = c->kv_lora, W = kvl + rope;
    float *row = malloc(kvl * sizeof *row), *qa = malloc(kvl * sizeof *qa), *ol = malloc(kvl * sizeof *ol);
    tq_err err;
    if (!row || !qa || !ol) {
        a->failed = 1; /* benign race: every writer stores 1 */
        goto out;
    }
    float scale = (float)c->att_scale;
    for (uint64_t h = b; h < en; h++) {
        const float *q = r->q + h * (nope + rope); /* [nope | rope] */
        uint64_t base = h * (nope + vh);
        memset(qa, 0, kvl * sizeof *qa);
        for (uint64_t d = 0; d < nope; d++) {
            if (rt_linear_row(&L->kv_b, base + d, row, &err) != 0) {
                a->failed = 1;
                goto out;
            }
            for (uint64_t j = 0; j < kvl; j++)
                qa[j] += q[d] * row[j];
        }
        float *sc = r->att + h * (r->ctx + 1);
        float mx = -INFINITY;
        for (uint64_t t = 0; t <= a->pos; t++) {
            const float *lat = L->kc + t * W; /* [kv_lora | rope] */
            float s = 0, sr = 0;
            for (uint64_t j = 0; j < kvl; j++)
                s += qa[j] * lat[j];
            for (uint64_t j = 0; j < rope; j++)
                sr += q[nope + j] * lat[kvl + j];
            sc[t] = (s + sr) * scale;
            if (sc[t] > mx)
                mx = sc[t];
        }
        float sum = 0;
        for (uint64_t t = 0; t <= a->pos; t++) {
            sc[t] = rt_expf(sc[t] - mx);
            sum += sc[t];
        }
        memset(ol, 0, kvl * sizeof *ol);
        for (uint64_t t = 0; t <= a->pos; t++) {
            const float *lat = L->kc + t * W;
            float p = sc[t] / sum;
            for (uint64_t j = 0; j < kvl; j++)
                ol[j] += p * lat[j];
        }
        for (uint64_t i = 0; i < vh; i++) {
            if (rt_linear_row(&L->kv_b, base + nope + i, row, &err) != 0) {
                a->failed = 1;
                goto out;
            }
            float s = 0;
            for (uint64_t j = 0; j < kvl; j++)
                s += row[j] * ol[j];
            r->ao[h * vh + i] = s;
        }
    }
out:
    free(row);
    free(qa);
    free(ol);
}

/* Latent attention of layer l at position pos: h [H] → q [heads·(nope+rope)] (q_proj, or
 * q_a_proj → q_a_layernorm → q_b_proj) and kv_a_proj_with_mqa → [kv_lora | rope]: the latent
 * is RMS-normalised (kv_a_layernorm), the rope part is one key head shared by all heads; RoPE
 * (interleaved pairs) on every head's q_rope and on k_rope → cache row pos → heads → ao
 * [heads·v_head] → o_proj → mo [H]. */
int rt_mla(tq_runner *r, uint64_t l, uint64_t pos, tq_err *e)
{
    const rt_config *c = &r->c;
    const rt_backend *be = r->be;
    rt_layer *L = &r->L[l];
    uint64_t nope = c->qk_nope, rope = c->qk_rope, kvl = c->kv_lora, W = kvl + rope;
    if (c->q_lora) {
        float *t = r->v; /* [q_lora] */
        if (be->matvec(r, &L->q_a, r->h, t, e) || be->rmsnorm(r, t, t, L->q_a_norm, c->q_lora, 1, 1e-6, e) ||
            be->matvec(r, &L->q_b, t, r->q, e))
            return -1;
    } else if (be->matvec(r, &L->q, r->h, r->q, e)) {
        return -1;
    }
    if (be->matvec(r, &L->kv_a, r->h, r->k, e) || be->rmsnorm(r, r->k, r->k, L->kv_a_norm, kvl, 1, 1e-6, e) ||
        be->rope(r, r->k + kvl, 1, W, e) || be->rope(r, r->q + nope, c->heads, nope + rope, e) ||
        be->copy(r, L->kc + pos * W, r->k, 1, W, W, e))
        return -1;
    /* the heads: on the device where it has them (a dense or affine kv_b_proj), else on the
     * CPU (with a device backend too: its queue runs first) */
    if (be->mla && (L->kv_b.kind == RT_DENSE || L->kv_b.kind == RT_AFFINE))
        return be->mla(r, L, pos, e) || be->matvec(r, &L->o, r->ao, r->mo, e);
    if (be->sync(r, e))
        return -1;
    struct mla_ctx a = {r, L, pos, 0};
    rt_pool_for(r->pool, c->heads, mla_task, &a);
    if (a.failed)
        return tq_fail(e, TQ_ENOMEM, "out of memory in latent attention (kv_lora_rank %llu)", (unsigned long long)kvl);
    return be->matvec(r, &L->o, r->ao, r->mo, e);
}
