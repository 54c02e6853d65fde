/* runtime/backend.c — the two kinds of rt_backend (rt_internal.h): the CPU's, which is the
 * reference decoder's own functions, and a device's, which queues the same operations as the
 * kernels of runtime/metal/ (on the Metal GPU, or through the C shim) with the runner's
 * buffers. forward.c, attention.c and deltanet.c call one or the other through r->be. */
#include "runtime/rt_internal.h"
#include "runtime/metal/rtm_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the CPU */

static float *cpu_alloc(tq_runner *r, uint64_t n, tq_err *e)
{
    (void)r;
    return tq_calloc(n ? n : 1, sizeof(float), e);
}

static void cpu_free(tq_runner *r, float *p)
{
    (void)r;
    free(p);
}

static int cpu_sync(tq_runner *r, tq_err *e)
{
    (void)r;
    (void)e;
    return 0;
}

static int cpu_matvec(tq_runner *r, const rt_linear *l, const float *x, float *y, tq_err *e)
{
    return rt_matvec(r->pool, l, x, y, &r->scr, e);
}

static int cpu_matvec_n(tq_runner *r, size_t n, const rt_linear *ls, const float *const *xs, float *const *ys,
                        tq_err *e)
{
    return rt_matvec_n(r->pool, n, ls, xs, ys, &r->scr, e);
}

static int cpu_rmsnorm(tq_runner *r, float *out, const float *x, const float *w, uint64_t n, uint64_t count, double eps,
                       tq_err *e)
{
    (void)r;
    (void)e;
    for (uint64_t v = 0; v < count; v++)
        rt_rmsnorm(out + v * n, x + v * n, w, n, eps);
    return 0;
}

static int cpu_rope(tq_runner *r, float *v, uint64_t count, uint64_t stride, tq_err *e)
{
    (void)e;
    for (uint64_t i = 0; i < count; i++)
        rt_rope_apply(r, v + i * stride);
    return 0;
}

static int cpu_rope_full(tq_runner *r, float *v, uint64_t count, uint64_t stride, tq_err *e)
{
    (void)e;
    for (uint64_t i = 0; i < count; i++)
        rt_rope_apply_full(r, v + i * stride);
    return 0;
}

/* silu(g)·u, or gpt-oss's min(g, L)·sigmoid(α·min(g, L))·(clamp(u, -L, L) + 1). */
static int cpu_act(tq_runner *r, uint64_t n, tq_err *e)
{
    (void)e;
    if (r->c.clamped_swiglu) {
        float lim = (float)r->c.swiglu_limit, alpha = (float)r->c.swiglu_alpha;
        for (uint64_t i = 0; i < n; i++) {
            float gv = r->g[i] < lim ? r->g[i] : lim;
            float uv = r->u[i] < -lim ? -lim : r->u[i] > lim ? lim : r->u[i];
            r->g[i] = gv * rt_sigmoid(alpha * gv) * (uv + 1.0f);
        }
    } else if (r->c.gelu) { /* gemma4: act_fn(gate_proj(x)) * up_proj(x), GELUTanh */
        for (uint64_t i = 0; i < n; i++)
            r->g[i] = rt_gelu_tanh(r->g[i]) * r->u[i];
    } else {
        for (uint64_t i = 0; i < n; i++)
            r->g[i] = rt_silu(r->g[i]) * r->u[i];
    }
    return 0;
}

static int cpu_axpy(tq_runner *r, float *y, const float *x, float a, const float *s, uint64_t n, tq_err *e)
{
    (void)r;
    (void)e;
    if (s)
        a = rt_sigmoid(s[0]);
    for (uint64_t i = 0; i < n; i++)
        y[i] += a * x[i];
    return 0;
}

static int cpu_gate(tq_runner *r, float *y, const float *g, uint64_t n, int kind, tq_err *e)
{
    (void)r;
    (void)e;
    if (kind == RT_GATE_ZERO)
        memset(y, 0, n * sizeof *y);
    else
        for (uint64_t i = 0; i < n; i++)
            y[i] *= rt_sigmoid(g[i]);
    return 0;
}

static int cpu_copy(tq_runner *r, float *dst, const float *src, uint64_t blocks, uint64_t len, uint64_t stride,
                    tq_err *e)
{
    (void)r;
    (void)e;
    for (uint64_t b = 0; b < blocks; b++)
        memcpy(dst + b * len, src + b * stride, len * sizeof *dst);
    return 0;
}

static const rt_backend cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .sync = cpu_sync,
    .matvec = cpu_matvec,
    .matvec_n = cpu_matvec_n,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .rope_full = cpu_rope_full,
    .attention = rt_attention_core,
    .route = rt_route,
    .act = cpu_act,
    .axpy = cpu_axpy,
    .gate = cpu_gate,
    .copy = cpu_copy,
};

/* ------------------------------------------------------------ a device */
#define BE(r) ((rtm_be *)(r)->bctx)

static float *dev_alloc(tq_runner *r, uint64_t n, tq_err *e)
{
    uint64_t bytes;
    if (tq_mul_u64(n ? n : 1, sizeof(float), &bytes)) {
        tq_fail(e, TQ_EUSAGE, "%llu floats do not fit in memory", (unsigned long long)n);
        return NULL;
    }
    return rtm_be_alloc(BE(r), bytes, e);
}

static void dev_free(tq_runner *r, float *p)
{
    rtm_be_free(BE(r), p);
}

static int dev_sync(tq_runner *r, tq_err *e)
{
    return rtm_be_sync(BE(r), e);
}

static int dev_matvec(tq_runner *r, const rt_linear *l, const float *x, float *y, tq_err *e)
{
    return rtm_be_matvec(BE(r), l, x, y, e);
}

static int dev_rmsnorm(tq_runner *r, float *out, const float *x, const float *w, uint64_t n, uint64_t count, double eps,
                       tq_err *e)
{
    return rtm_be_rmsnorm(BE(r), out, x, w, n, count, eps, e);
}

static int dev_rope(tq_runner *r, float *v, uint64_t count, uint64_t stride, tq_err *e)
{
    return rtm_be_rope(BE(r), v, count, stride, 0, &r->c.rope, r->rcos, r->rsin, e);
}

static int dev_attention(tq_runner *r, const rt_layer *L, uint64_t pos, uint64_t t0, tq_err *e)
{
    const rt_config *c = &r->c;
    rtm_att a = {.q = r->q,
                 .kc = L->kc,
                 .vc = L->vc,
                 .sinks = L->sinks,
                 .att = r->att,
                 .out = r->ao,
                 .heads = c->heads,
                 .hd = c->head_dim,
                 .kvd = c->kv_heads * c->head_dim,
                 .group = c->heads / c->kv_heads,
                 .t0 = t0,
                 .pos = pos,
                 .att_stride = r->ctx + 1,
                 .scale = (float)c->att_scale};
    return rtm_be_attention(BE(r), &a, e);
}

/* The route of layer L (enum rt_route) as the route kernel's arguments. */
static void route_args(tq_runner *r, const rt_layer *L, rtm_route *out)
{
    const rt_config *c = &r->c;
    *out = (rtm_route){.logits = r->rl,
                       .bias = c->route == RT_ROUTE_SIGMOID_GROUP ? L->score_bias : NULL,
                       .E = c->experts,
                       .K = c->top_k,
                       .n_group = c->route == RT_ROUTE_SIGMOID_GROUP ? c->n_group : 1,
                       .topk_group = c->topk_group,
                       .mode = c->route == RT_ROUTE_SIGMOID_GROUP  ? (int)RTM_ROUTE_SIGMOID_GROUP
                               : c->route == RT_ROUTE_TOPK_SOFTMAX ? (int)RTM_ROUTE_TOPK_SOFTMAX
                                                                   : (int)RTM_ROUTE_SOFTMAX,
                       .norm_topk = c->norm_topk,
                       .route_scale = (float)c->route_scale};
}

static int dev_route(tq_runner *r, const rt_layer *L, uint64_t *ids, float *w, tq_err *e)
{
    rtm_route a;
    route_args(r, L, &a);
    return rtm_be_route(BE(r), &a, ids, w, e);
}

static int dev_act(tq_runner *r, uint64_t n, tq_err *e)
{
    return rtm_be_act(BE(r), r->g, r->u, n, r->c.clamped_swiglu, (float)r->c.swiglu_alpha, (float)r->c.swiglu_limit, e);
}

static int dev_axpy(tq_runner *r, float *y, const float *x, float a, const float *s, uint64_t n, tq_err *e)
{
    return rtm_be_axpy(BE(r), y, x, a, s, n, e);
}

static int dev_gate(tq_runner *r, float *y, const float *g, uint64_t n, int kind, tq_err *e)
{
    return rtm_be_gate(BE(r), y, g, n, kind == RT_GATE_ZERO ? 2 : 0, e);
}

static int dev_copy(tq_runner *r, float *dst, const float *src, uint64_t blocks, uint64_t len, uint64_t stride,
                    tq_err *e)
{
    return rtm_be_gather(BE(r), dst, src, blocks, len, stride, 0, e);
}

static int dev_route_keep(tq_runner *r, const rt_layer *L, tq_err *e)
{
    rtm_route a;
    route_args(r, L, &a);
    return rtm_be_route_keep(BE(r), &a, e);
}

/* Expert id's part i: at base[i] + id·stride[i] (stacked tensors) or in its resident block,
 * resident_blocks + id·block_size + off[i] (rt_experts_indexed). */
static int dev_expert_matvec(tq_runner *r, const rt_layer *L, const rt_emat *m, uint64_t k, const float *x, float *y,
                             tq_err *e)
{
    rtm_expert ex = {.t = &m->t, .E = r->c.experts};
    const void *has[4] = {m->t.w, m->t.scales, m->t.biases, m->t.bias};
    for (int i = 0; i < 4; i++) {
        if (!has[i])
            continue;
        if (m->base[i]) {
            ex.part[i] = m->base[i];
            ex.stride[i] = m->stride[i];
        } else if (L->resident_blocks) {
            ex.part[i] = L->resident_blocks + m->off[i];
            ex.stride[i] = L->src.block_size;
        } else {
            return tq_fail(e, TQ_EUSAGE, "GPU backend: a streamed expert matrix indexed on the device");
        }
    }
    if (m->t.kind == RT_TQ && m->base[4] && m->base[5]) { /* stacked per-expert TurboQuant */
        ex.cb = m->base[4];
        ex.cb_stride = m->stride[4];
        ex.sg = m->base[5];
        ex.sg_stride = m->stride[5];
    }
    return rtm_be_matvec_ex(BE(r), &ex, k, x, y, e);
}

static int dev_axpy_rank(tq_runner *r, float *y, const float *x, uint64_t k, uint64_t n, tq_err *e)
{
    return rtm_be_axpy_rank(BE(r), y, x, k, n, e);
}

static int dev_mla(tq_runner *r, const rt_layer *L, uint64_t pos, tq_err *e)
{
    const rt_config *c = &r->c;
    rtm_mla m = {.q = r->q,
                 .kc = L->kc,
                 .kvb = &L->kv_b,
                 .att = r->att,
                 .ao = r->ao,
                 .heads = c->heads,
                 .nope = c->qk_nope,
                 .rope = c->qk_rope,
                 .vh = c->v_head,
                 .kvl = c->kv_lora,
                 .pos = pos,
                 .att_stride = r->ctx + 1,
                 .scale = (float)c->att_scale};
    return rtm_be_mla(BE(r), &m, e);
}

static int dev_deltanet(tq_runner *r, const rt_dn_step *d, tq_err *e)
{
    return rtm_be_deltanet(BE(r), d, e);
}

static const rt_backend dev_backend = {
    .name = "device",
    .alloc = dev_alloc,
    .free = dev_free,
    .sync = dev_sync,
    .matvec = dev_matvec,
    .rmsnorm = dev_rmsnorm,
    .rope = dev_rope,
    .attention = dev_attention,
    .route = dev_route,
    .act = dev_act,
    .axpy = dev_axpy,
    .gate = dev_gate,
    .copy = dev_copy,
    .route_keep = dev_route_keep,
    .expert_matvec = dev_expert_matvec,
    .axpy_rank = dev_axpy_rank,
    .mla = dev_mla,
    .deltanet = dev_deltanet,
};

/* Stable weights the device may map once: the store's tensors, the model's float vectors,
 * resident expert blocks and mapped layer files (map_experts). */
static int runner_region(void *user, const void *p, const void **base, uint64_t *n)
{
    const tq_runner *r = user;
    if (r->store && rt_store_region(r->store, p, base, n))
        return 1;
    if (rt_vec_region(r, p, base, n))
        return 1;
    for (uint64_t l = 0; r->L && l < r->c.layers; l++) {
        const rt_layer *L = &r->L[l];
        if (L->map && (const uint8_t *)p >= L->map && (const uint8_t *)p < L->map + L->map_len) {
            *base = L->map; /* the whole mapped file, from its RT_MAP_PAGE-aligned start (model.c, map_layer) */
            *n = L->map_len;
            return 1;
        }
        uint64_t size = L->src.block_size * L->src.n_experts;
        if (L->resident_blocks && (const uint8_t *)p >= L->resident_blocks && (const uint8_t *)p < L->resident_blocks + size) {
            *base = L->resident_blocks;
            *n = rt_map_round(size); /* the allocation: whole pages (model.c, load_blocks_resident) */
            return 1;
        }
    }
    return 0;
}

/* The expert cache's block buffers in the device's memory: the kernels read a block where
 * io read it (no staging copy, none on a hit). Safe while every rt_cache_acquire follows a
 * sync (the route's: forward.c), so no queued kernel reads a buffer the cache refills; a
 * buffer it evicts while kernels are queued is released at the next sync (rtm_be_free). */
static void *cache_alloc(void *user, uint64_t n, uint64_t align, tq_err *e)
{
    void *p = rtm_be_alloc(user, n, e);
    if (p && align && (uintptr_t)p % align) {
        rtm_be_free(user, p);
        tq_fail(e, TQ_EUNSUP, "GPU backend: device memory is not aligned to %llu bytes for expert reads",
                (unsigned long long)align);
        return NULL;
    }
    return p;
}

static void cache_free(void *user, void *p)
{
    rtm_be_free(user, p);
}

int rt_backend_open(tq_runner *r, tq_err *e)
{
    rtm_dev *d = NULL;
    /* runtime/metal/ has neither gemma4's second rope table, its per-layer head sizes nor
     * its GELU: that family runs on the CPU only */
    if (r->c.arch == RT_GEMMA4 && r->o.backend != TQ_RUN_BACKEND_CPU)
        return tq_fail(e, TQ_EUNSUP, "%s: %s decodes on the cpu backend only (--backend cpu)", r->dir, r->c.arch_name);
    switch (r->o.backend) {
    case TQ_RUN_BACKEND_CPU:
        r->be = &cpu_backend;
        return 0;
    case TQ_RUN_BACKEND_METAL:
        if (rtm_metal_open(&d, e) != 0)
            return -1;
        break;
    case TQ_RUN_BACKEND_SHIM:
        if (rtm_shim_open(&d, e) != 0)
            return -1;
        break;
    default:
        return tq_fail(e, TQ_EUSAGE, "unknown backend %d", r->o.backend);
    }
    rtm_be *b;
    if (rtm_be_open(&b, d, runner_region, r, e) != 0)
        return -1;
    r->bctx = b;
    r->be = &dev_backend;
    if (r->cache)
        rt_cache_set_mem(r->cache, &(rt_cache_mem){cache_alloc, cache_free, b});
    return 0;
}

void rt_backend_stats(const tq_runner *r, tq_run_stats *st)
{
    if (!r->bctx)
        return;
    rtm_counts c;
    rtm_be_counts(BE(r), &c);
    double n = st->forward_passes ? (double)st->forward_passes : 1.0;
    st->gpu = 1;
    st->gpu_dispatches_per_token = (double)c.dispatches / n;
    st->gpu_waits_per_token = (double)c.waits / n;
    st->gpu_staged_bytes_per_token = (double)c.staged_bytes / n;
    st->gpu_staged_weight_bytes_per_token = (double)c.staged_weight_bytes / n;
    st->gpu_wrap_copies = c.wrap_copies;
    st->gpu_wrap_copy_bytes = c.wrap_copy_bytes;
}

void rt_backend_close(tq_runner *r)
{
    rtm_be_close(BE(r));
    r->bctx = NULL;
}
