/* Greedy decoding loop, logits output (file + SHA-256), statistics. */
#include "runtime/rt_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tq_run_opts_default(tq_run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->cache_budget = 1ull << 30;
    o->logits_fd = 1;
}

int tq_runner_open(tq_runner **out, const char *model_dir, const tq_run_opts *o, tq_err *e)
{
    rt_kernels_init();
    double t0 = tq_now();
    tq_runner *r = tq_calloc(1, sizeof *r, e);
    if (!r)
        return -1;
    if (o)
        r->o = *o;
    else
        tq_run_opts_default(&r->o);
    r->logits_out.fd = -1;
    r->dir = tq_strdup(model_dir, e);
    /* --logits may not overwrite the model or write into its directory; what is there now is
     * what the file may replace at the end (the one rule of outputs) */
    int to_fd = r->o.logits_path && !strcmp(r->o.logits_path, "-");
    if (!r->dir ||
        (r->o.logits_path && !to_fd &&
         (tq_check_out_in(r->o.logits_path, model_dir, e) != 0 ||
          tq_afile_check(&r->logits_out, r->o.logits_path, r->o.logits_force ? TQ_AFILE_REPLACE : 0, e) != 0)) ||
        rt_config_load(&r->c, model_dir, &r->cfg, e) != 0) {
        tq_runner_close(r);
        return -1;
    }
    if (r->o.resident && r->o.map_experts) {
        tq_fail(e, TQ_EUSAGE, "resident and map_experts go one at a time");
        tq_runner_close(r);
        return -1;
    }
    int threads = r->o.threads > 0 ? r->o.threads : tq_default_threads();
    if (rt_pool_create(&r->pool, threads, e) != 0 || rt_model_load(r, e) != 0) {
        tq_runner_close(r);
        return -1;
    }
    int streamed = 0;
    for (uint64_t l = 0; l < r->c.layers; l++)
        streamed |= r->L[l].streamed && !r->L[l].resident_blocks;
    if (streamed) {
        int io = r->o.io_threads > 0 ? r->o.io_threads : (int)(r->c.top_k < 16 ? r->c.top_k : 16);
        if (rt_cache_create(&r->cache, r->o.cache_budget, r->c.layers, r->c.experts, io, e) != 0) {
            tq_runner_close(r);
            return -1;
        }
    }
    /* the CPU backend's packed layout (the runtime's copy of the weights; files untouched) */
    if (rt_backend_open(r, e) != 0 || (!r->bctx && rt_model_pack(r, e) != 0)) {
        tq_runner_close(r);
        return -1;
    }
    r->load_s = tq_now() - t0;
    *out = r;
    return 0;
}

uint64_t tq_runner_vocab(const tq_runner *r)
{
    return r->c.vocab;
}

/* The decoding state: the backend's memory (what its operations write), and the CPU's
 * rotary table. */
static void free_state(tq_runner *r)
{
    float **bufs[] = {&r->x, &r->h, &r->q, &r->k, &r->v, &r->qg, &r->att, &r->ao, &r->mo, &r->eo, &r->g,
                      &r->u, &r->rl, &r->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) {
        if (r->be)
            r->be->free(r, *bufs[i]);
        *bufs[i] = NULL;
    }
    for (uint64_t l = 0; r->L && l < r->c.layers; l++) {
        rt_layer *L = &r->L[l];
        float **lb[] = {&L->kc, &L->vc, &L->conv_state, &L->ssm};
        for (size_t i = 0; i < sizeof lb / sizeof *lb; i++) {
            if (r->be)
                r->be->free(r, *lb[i]);
            *lb[i] = NULL;
        }
    }
    if (r->be) {
        r->be->free(r, r->rcos);
        r->be->free(r, r->rsin);
        r->be->free(r, r->rcos_full);
        r->be->free(r, r->rsin_full);
    }
    r->rcos = r->rsin = r->rcos_full = r->rsin_full = NULL;
    free(r->scr.xr);
    r->scr.xr = NULL;
    r->scr.cap = 0;
}

void tq_runner_close(tq_runner *r)
{
    if (!r)
        return;
    free_state(r);
    rt_cache_destroy(r->cache); /* its blocks may be the backend's memory */
    rt_backend_close(r);        /* before the weights it may have mapped */
    rt_model_free(r);
    rt_pool_destroy(r->pool);
    cJSON_Delete(r->cfg);
    rt_config_free(&r->c);
    tq_afile_abort(&r->logits_out);
    free(r->dir);
    free(r);
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Floats of a linear-attention layer's two states (at least 1 each): the short convolution's
 * last conv_k - 1 inputs [C] and the recurrent state [Hv][Dv][Dk]. -1 when they overflow. */
static int linear_state_floats(const rt_config *c, uint64_t *conv, uint64_t *ssm)
{
    uint64_t C = 2 * c->lk_heads * c->lk_dim + c->lv_heads * c->lv_dim;
    *conv = c->conv_k > 1 ? (c->conv_k - 1) * C : 1;
    if (tq_mul_u64(c->lv_heads * c->lv_dim, c->lk_dim, ssm) || *ssm > (SIZE_MAX / 8))
        return -1;
    if (*ssm == 0)
        *ssm = 1;
    return 0;
}

/* Back to an empty sequence: the linear-attention states zeroed (attention caches are
 * overwritten position by position and read only below the current one). */
static void reset_state(tq_runner *r)
{
    uint64_t conv, ssm;
    if (linear_state_floats(&r->c, &conv, &ssm) != 0)
        return; /* alloc_state refused these sizes already */
    for (uint64_t l = 0; l < r->c.layers; l++)
        if (r->L[l].mixer == RT_MIX_LINEAR) {
            memset(r->L[l].conv_state, 0, conv * sizeof(float));
            memset(r->L[l].ssm, 0, ssm * sizeof(float));
        }
}

/* The decoding state of tq_runner and of each layer (shapes in rt_internal.h), zeroed. */
static int alloc_state(tq_runner *r, tq_err *e)
{
    const rt_config *c = &r->c;
    uint64_t hd = c->head_dim, qd = c->heads * hd, kvd = c->kv_heads * hd;
    uint64_t Kd = c->lk_heads * c->lk_dim, Vd = c->lv_heads * c->lv_dim;
    uint64_t ff = max_u64(c->inter, c->moe_inter); /* ffn: the widest MLP, dense, routed or shared */
    for (uint64_t l = 0; l < c->layers; l++)
        if (r->L[l].has_shared)
            ff = max_u64(ff, r->L[l].sg.rows);
    /* routed experts run r->ebatch at a time (forward.c, experts_job): g, u [ebatch][moe_inter],
     * eo [ebatch][hidden] */
    r->ebatch = r->be->matvec_n && c->experts ? (c->top_k < RT_MATVEC_BATCH / 2 ? c->top_k : RT_MATVEC_BATCH / 2) : 1;
    if (r->ebatch < 1)
        r->ebatch = 1;
    ff = max_u64(ff, r->ebatch * c->moe_inter);
    /* big: every activation a mixer makes fits */
    uint64_t big = max_u64(c->hidden, 2 * qd);
    big = max_u64(big, c->heads * c->g_head_dim); /* gemma4's full layers */
    big = max_u64(big, c->g_kv_heads * c->g_head_dim);
    big = max_u64(big, max_u64(c->heads * (c->qk_nope + c->qk_rope), c->heads * c->v_head));
    big = max_u64(big, max_u64(c->kv_lora + c->qk_rope, c->q_lora));
    big = max_u64(big, 2 * Kd + 2 * Vd);
    uint64_t att;
    if (tq_mul_u64(c->heads, r->ctx + 1, &att) || att > (SIZE_MAX / 8))
        return tq_fail(e, TQ_EUSAGE, "context of %llu tokens is too large", (unsigned long long)r->ctx);
    struct {
        float **p;
        uint64_t n;
    } a[] = {{&r->x, big}, {&r->h, big}, {&r->q, big}, {&r->k, big}, {&r->v, big}, {&r->qg, big}, {&r->att, att},
             {&r->ao, big}, {&r->mo, big}, {&r->eo, max_u64(big, r->ebatch * c->hidden)}, {&r->g, ff}, {&r->u, ff},
             {&r->rl, 2 * c->experts + 1}, {&r->logits, c->vocab}};
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        if (!(*a[i].p = r->be->alloc(r, a[i].n ? a[i].n : 1, e)))
            return -1;
    /* the rotary table: the backend's memory (a device reads it where the kernels run), written
     * by the CPU at the start of each position, after the previous one's sync */
    if (!(r->rcos = r->be->alloc(r, c->rope.dim / 2 + 1, e)) || !(r->rsin = r->be->alloc(r, c->rope.dim / 2 + 1, e)) ||
        !(r->rcos_full = r->be->alloc(r, c->rope_full.dim / 2 + 1, e)) ||
        !(r->rsin_full = r->be->alloc(r, c->rope_full.dim / 2 + 1, e)))
        return -1;
    for (uint64_t l = 0; l < c->layers; l++) {
        rt_layer *L = &r->L[l];
        uint64_t kv = 0;
        if (L->mixer == RT_MIX_LINEAR) {
            uint64_t conv, ssm;
            if (linear_state_floats(c, &conv, &ssm) != 0)
                return tq_fail(e, TQ_EDATA, "the linear-attention state of layer %llu is too large", (unsigned long long)l);
            if (!(L->conv_state = r->be->alloc(r, conv, e)) || !(L->ssm = r->be->alloc(r, ssm, e)))
                return -1;
            continue;
        }
        L->kw = L->mixer == RT_MIX_MLA ? c->kv_lora + c->qk_rope : L->kvh ? L->kvh * L->hd : kvd;
        if (tq_mul_u64(r->ctx, L->kw, &kv) || kv > (SIZE_MAX / 8))
            return tq_fail(e, TQ_EUSAGE, "KV cache for a context of %llu tokens is too large",
                           (unsigned long long)r->ctx);
        if (!(L->kc = r->be->alloc(r, kv ? kv : 1, e)))
            return -1;
        if (L->mixer != RT_MIX_MLA && !(L->vc = r->be->alloc(r, kv ? kv : 1, e)))
            return -1;
    }
    return 0;
}

static int32_t argmax(const float *v, uint64_t n)
{
    uint64_t b = 0;
    for (uint64_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return (int32_t)b;
}

static const char *weights_name(const tq_runner *r)
{
    switch (r->weights_mask & 14) {
    case 0: return tq_dtype_name(r->dense_dt);
    case 2: return "affine";
    case 4: return "turboquant";
    case 8: return "mxfp4";
    default: return "mixed";
    }
}

/* Where every step's logits go: the SHA-256 of the stream, the --logits file (raw
 * little-endian f32, committed only when the whole run succeeds) and the on_logits callback. */
typedef struct logit_sink {
    tq_afile af;
    int have_file; /* 1: the --logits file; 2: the stream o.logits_fd */
    tq_sha256 *hs;
    unsigned char *le; /* [vocab * 4] logits as little-endian bytes (big-endian hosts) */
} logit_sink;

static int sink_open(logit_sink *k, const tq_runner *r, tq_err *e)
{
    memset(k, 0, sizeof *k);
    k->af.fd = -1;
    if (r->o.logits_path && !strcmp(r->o.logits_path, "-")) {
        k->af.fd = r->o.logits_fd; /* a stream: written as computed, nothing to commit */
        k->af.tmp_path = (char *)"standard output";
        k->have_file = 2;
    } else if (r->o.logits_path) {
        k->af = r->logits_out; /* the file checked at open, with its own copy of the name */
        if (!(k->af.final_path = tq_strdup(r->logits_out.final_path, e)) || tq_afile_create(&k->af, e) != 0)
            return -1;
        k->have_file = 1;
    }
    if (!(k->hs = tq_sha256_new())) {
        if (k->have_file == 1)
            tq_afile_abort(&k->af);
        k->have_file = 0;
        return tq_fail(e, TQ_ENOMEM, "cannot create a SHA-256 context");
    }
    return 0;
}

static int sink_emit(logit_sink *k, tq_runner *r, uint64_t step, tq_err *e)
{
    const uint64_t V = r->c.vocab;
    /* a NaN anywhere upstream (a weight, a config value) ends as a NaN logit: greedy
     * decoding would pick garbage without a word */
    size_t bad;
    const char *what;
    if (!r->o.allow_nonfinite && tq_find_nonfinite(TQ_DT_F32, r->logits, V, &bad, &what))
        return tq_fail(e, TQ_EDATA, "step %llu: logit %zu is %s: the model holds non-finite weights or values "
                       "(--allow-nonfinite decodes anyway)", (unsigned long long)step, bad, what);
    const void *bytes = r->logits;
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    if (!k->le && !(k->le = tq_malloc(V * 4, e)))
        return -1;
    for (uint64_t i = 0; i < V; i++) {
        uint32_t u;
        memcpy(&u, &r->logits[i], 4);
        u = __builtin_bswap32(u);
        memcpy(k->le + 4 * i, &u, 4);
    }
    bytes = k->le;
#endif
    tq_sha256_update(k->hs, bytes, V * 4);
    if (k->have_file && tq_write_full(k->af.fd, bytes, V * 4, k->af.tmp_path, e) != 0)
        return -1;
    if (r->o.on_logits && r->o.on_logits(r->o.user, step, r->logits, V) != 0)
        return tq_fail(e, TQ_EUSAGE, "decoding stopped by the caller at step %llu", (unsigned long long)step);
    return 0;
}

/* ok: commit the file; otherwise drop it. The digest goes to sha256 either way. */
static int sink_close(logit_sink *k, int ok, unsigned char sha256[32], tq_err *e)
{
    int rc = ok ? 0 : -1;
    if (k->hs)
        tq_sha256_final(k->hs, sha256);
    free(k->le);
    if (k->have_file == 1) {
        if (ok)
            rc = tq_afile_commit(&k->af, e);
        else
            tq_afile_abort(&k->af);
    }
    return rc;
}

/* Fills what every run reports: names, sizes, expert cache and memory. */
static void fill_stats(const tq_runner *r, tq_run_stats *st)
{
    snprintf(st->arch, sizeof st->arch, "%s", r->c.arch_name);
    snprintf(st->weights, sizeof st->weights, "%s", weights_name(r));
    st->vocab = r->c.vocab;
    st->load_s = r->load_s;
    st->tokens_per_s = st->decode_s > 0 ? (double)st->forward_passes / st->decode_s : 0;
    st->resident_bytes = rt_store_bytes(r->store) + r->resident_extra;
    st->cache_budget = r->o.cache_budget;
    st->streamed = r->cache != NULL;
    snprintf(st->io, sizeof st->io, "none");
    for (uint64_t l = 0; l < r->c.layers; l++)
        if (r->L[l].map) { /* map_experts: the OS reads the pages; nothing here counts them */
            st->streamed = 1;
            st->cache_budget = 0; /* no cache */
            snprintf(st->io, sizeof st->io, "map");
            break;
        }
    if (r->cache) {
        rt_cache_stats(r->cache, &st->expert_hits, &st->expert_misses, &st->bytes_read, &st->reads,
                       &st->cache_bytes, &st->cache_peak_bytes, &st->io_s);
        for (uint64_t l = 0; l < r->c.layers; l++)
            if (r->L[l].streamed) {
                snprintf(st->io, sizeof st->io, "%s", rt_io_name(r->L[l].src.io));
                break;
            }
    }
    uint64_t acc = st->expert_hits + st->expert_misses;
    st->hit_rate = acc ? (double)st->expert_hits / (double)acc : 0;
    st->bytes_per_token = st->forward_passes ? st->bytes_read / st->forward_passes : 0;
    st->peak_rss = tq_peak_rss();
    rt_backend_stats(r, st);
}

int tq_runner_generate(tq_runner *r, const int32_t *prompt, size_t n_prompt, size_t max_tokens,
                       int32_t *out_tokens, tq_run_stats *st, tq_err *e)
{
    tq_run_stats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    if (r->used)
        return tq_fail(e, TQ_EUSAGE, "a runner decodes once");
    r->used = 1;
    if (n_prompt == 0)
        return tq_fail(e, TQ_EUSAGE, "the prompt needs at least one token");
    if (max_tokens == 0)
        return tq_fail(e, TQ_EUSAGE, "max_tokens must be at least 1");
    uint64_t need = n_prompt + max_tokens - 1; /* positions fed: the prompt, then all generated but the last */
    if (r->c.max_pos && n_prompt > r->c.max_pos)
        return tq_fail(e, TQ_EUSAGE, "%s: the prompt has %zu tokens, more than the model's max_position_embeddings %llu",
                       r->dir, n_prompt, (unsigned long long)r->c.max_pos);
    if (r->c.max_pos && need > r->c.max_pos)
        return tq_fail(e, TQ_EUSAGE, "%s: %zu prompt + %zu generated tokens take %llu positions, more than the model's "
                       "max_position_embeddings %llu (generate at most %llu)",
                       r->dir, n_prompt, max_tokens, (unsigned long long)need, (unsigned long long)r->c.max_pos,
                       (unsigned long long)(r->c.max_pos - n_prompt + 1));
    r->ctx = r->o.ctx ? r->o.ctx : need;
    if (r->ctx < need)
        return tq_fail(e, TQ_EUSAGE, "context of %llu tokens is too small for %zu prompt + %zu generated tokens",
                       (unsigned long long)r->ctx, n_prompt, max_tokens);
    tq_run_sampler *smp;
    if (tq_run_sampler_new(&r->o.sampling, r->c.vocab, &smp, e) != 0)
        return -1;
    logit_sink sink;
    if (alloc_state(r, e) != 0 || sink_open(&sink, r, e) != 0) {
        tq_run_sampler_free(smp);
        return -1;
    }
    int ok = 0;
    double t0 = tq_now();
    /* pos: the position tok is fed at; step: generated tokens so far. The prompt's tokens
     * go in one by one; the logits after the last of them choose generated token 0. */
    uint64_t pos = 0, step = 0;
    int32_t tok = prompt[0];
    for (;;) {
        if (rt_forward(r, tok, pos, e) != 0)
            goto out;
        st->forward_passes++;
        pos++;
        if (pos < n_prompt) {
            tok = prompt[pos];
            continue;
        }
        if (sink_emit(&sink, r, step, e) != 0)
            goto out;
        tok = tq_run_sampler_next(smp, r->logits); /* greedy: the argmax */
        out_tokens[step] = tok;
        if (r->o.on_token && r->o.on_token(r->o.user, step, tok) != 0) {
            tq_fail(e, TQ_EIO, "decoding stopped by the caller at step %llu", (unsigned long long)step);
            goto out;
        }
        int stop = 0;
        for (size_t i = 0; i < r->o.n_stop && r->o.stop_tokens; i++)
            stop |= tok == r->o.stop_tokens[i];
        if (step < r->o.n_force && r->o.force_tokens)
            tok = r->o.force_tokens[step];
        step++;
        if (step == max_tokens)
            break;
        if (stop) {
            st->stopped = 1;
            break;
        }
    }
    st->decode_s = tq_now() - t0;
    ok = 1;
out:;
    int rc = sink_close(&sink, ok, st->logits_sha256, e);
    tq_run_sampler_free(smp);
    st->sampling = r->o.sampling;
    st->prompt_tokens = n_prompt;
    st->generated_tokens = step;
    fill_stats(r, st);
    return rc;
}

int tq_runner_eval(tq_runner *r, const int32_t *ids, size_t n, uint64_t window, uint64_t stride,
                   tq_run_eval *ev, tq_run_stats *st, tq_err *e)
{
    tq_run_stats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    memset(ev, 0, sizeof *ev);
    if (r->used)
        return tq_fail(e, TQ_EUSAGE, "a runner decodes once");
    r->used = 1;
    const uint64_t V = r->c.vocab;
    if (n < 2)
        return tq_fail(e, TQ_EDATA, "the evaluation text needs at least 2 tokens (it has %zu)", n);
    if (window < 2 || stride < 1 || stride > window - 1)
        return tq_fail(e, TQ_EUSAGE, "window %llu and stride %llu: the window needs 2 tokens or more and "
                       "the stride 1 to window - 1", (unsigned long long)window, (unsigned long long)stride);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= V)
            return tq_fail(e, TQ_EDATA, "token %zu: id %ld is outside the vocabulary [0, %llu)", i, (long)ids[i],
                           (unsigned long long)V);
    r->ctx = window < n ? window : n;
    if (r->c.max_pos && r->ctx - 1 > r->c.max_pos) /* a window feeds its tokens but the last */
        return tq_fail(e, TQ_EUSAGE, "%s: an evaluation window of %llu tokens takes %llu positions, more than the "
                       "model's max_position_embeddings %llu (use --window %llu or less)",
                       r->dir, (unsigned long long)r->ctx, (unsigned long long)(r->ctx - 1),
                       (unsigned long long)r->c.max_pos, (unsigned long long)(r->c.max_pos + 1));
    logit_sink sink;
    if (alloc_state(r, e) != 0 || sink_open(&sink, r, e) != 0)
        return -1;
    ev->tokens = n;
    ev->window = window;
    ev->stride = stride;
    int ok = 0;
    double t0 = tq_now(), nll = 0;
    /* Windows start every stride tokens; each scores only the targets no earlier window
     * scored, so every target but the first token is scored once, with at least
     * window - stride tokens of context once the first window is past. */
    uint64_t scored_to = 1; /* targets [1, scored_to) are scored */
    for (uint64_t b = 0;; b += stride) {
        uint64_t end = b + window < n ? b + window : n;
        reset_state(r);
        for (uint64_t p = b; p + 1 < end; p++) {
            if (rt_forward(r, ids[p], p - b, e) != 0)
                goto out;
            st->forward_passes++;
            uint64_t t = p + 1; /* the target these logits predict */
            if (t < scored_to)
                continue;
            if (sink_emit(&sink, r, ev->scored, e) != 0)
                goto out;
            const float *lg = r->logits;
            double m = lg[0], z = 0;
            for (uint64_t i = 1; i < V; i++)
                m = lg[i] > m ? lg[i] : m;
            for (uint64_t i = 0; i < V; i++)
                z += exp((double)lg[i] - m);
            double l = log(z) + m - (double)lg[ids[t]];
            if (!isfinite(l)) {
                tq_fail(e, TQ_EDATA, "target %llu: non-finite logits", (unsigned long long)t);
                goto out;
            }
            nll += l;
            ev->top1 += argmax(lg, V) == ids[t];
            ev->scored++;
        }
        scored_to = end;
        if (end == n)
            break;
    }
    st->decode_s = tq_now() - t0;
    ev->mean_nll = nll / (double)ev->scored;
    ev->perplexity = exp(ev->mean_nll);
    ev->top1_rate = (double)ev->top1 / (double)ev->scored;
    ok = 1;
out:;
    int rc = sink_close(&sink, ok, st->logits_sha256, e);
    st->prompt_tokens = n;
    fill_stats(r, st);
    return rc;
}

int tq_run_validate(const char *model_dir, const int32_t *prompt, size_t n_prompt, size_t max_tokens,
                    const tq_run_opts *o, int32_t *out_tokens, unsigned char logits_sha256[32], tq_err *e)
{
    tq_runner *r;
    if (tq_runner_open(&r, model_dir, o, e) != 0)
        return -1;
    tq_run_stats st;
    int rc = tq_runner_generate(r, prompt, n_prompt, max_tokens, out_tokens, &st, e);
    tq_runner_close(r);
    if (rc == 0 && logits_sha256)
        memcpy(logits_sha256, st.logits_sha256, 32);
    return rc;
}

cJSON *tq_run_stats_json(const tq_run_stats *st, const int32_t *tokens, size_t n)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON *t = cJSON_AddArrayToObject(j, "tokens");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(t, cJSON_CreateNumber(tokens[i]));
    char hex[65];
    tq_hex(st->logits_sha256, 32, hex);
    cJSON_AddStringToObject(j, "logits_sha256", hex);
    cJSON_AddStringToObject(j, "arch", st->arch);
    cJSON_AddStringToObject(j, "weights", st->weights);
    cJSON_AddStringToObject(j, "io", st->io);
    cJSON_AddBoolToObject(j, "streamed", st->streamed);
    cJSON_AddBoolToObject(j, "stopped", st->stopped);
    if (st->sampling.temperature > 0) { /* how the tokens were sampled; null: greedy */
        cJSON *sm = cJSON_AddObjectToObject(j, "sampling");
        cJSON_AddNumberToObject(sm, "temperature", st->sampling.temperature);
        cJSON_AddNumberToObject(sm, "top_k", (double)st->sampling.top_k);
        cJSON_AddNumberToObject(sm, "top_p", st->sampling.top_p > 0 ? st->sampling.top_p : 1.0);
        cJSON_AddNumberToObject(sm, "seed", (double)st->sampling.seed);
    } else {
        cJSON_AddNullToObject(j, "sampling");
    }
    struct {
        const char *k;
        double v;
    } nums[] = {
        {"vocab", (double)st->vocab},
        {"prompt_tokens", (double)st->prompt_tokens},
        {"generated_tokens", (double)st->generated_tokens},
        {"forward_passes", (double)st->forward_passes},
        {"load_s", st->load_s},
        {"decode_s", st->decode_s},
        {"io_s", st->io_s},
        {"tokens_per_s", st->tokens_per_s},
        {"expert_hits", (double)st->expert_hits},
        {"expert_misses", (double)st->expert_misses},
        {"hit_rate", st->hit_rate},
        {"bytes_read", (double)st->bytes_read},
        {"reads", (double)st->reads},
        {"bytes_per_token", (double)st->bytes_per_token},
        {"resident_bytes", (double)st->resident_bytes},
        {"cache_bytes", (double)st->cache_bytes},
        {"cache_peak_bytes", (double)st->cache_peak_bytes},
        {"cache_budget", (double)st->cache_budget},
        {"peak_rss", (double)st->peak_rss},
    };
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
        cJSON_AddNumberToObject(j, nums[i].k, nums[i].v);
    if (st->gpu) { /* a device backend: its counters (docs/metal.md, Counters) */
        struct {
            const char *k;
            double v;
        } gpu[] = {
            {"gpu_dispatches_per_token", st->gpu_dispatches_per_token},
            {"gpu_waits_per_token", st->gpu_waits_per_token},
            {"gpu_staged_bytes_per_token", st->gpu_staged_bytes_per_token},
            {"gpu_staged_weight_bytes_per_token", st->gpu_staged_weight_bytes_per_token},
            {"gpu_wrap_copies", (double)st->gpu_wrap_copies},
            {"gpu_wrap_copy_bytes", (double)st->gpu_wrap_copy_bytes},
        };
        for (size_t i = 0; i < sizeof gpu / sizeof *gpu; i++)
            cJSON_AddNumberToObject(j, gpu[i].k, gpu[i].v);
    }
    return j;
}

/* ---------------------------------------------------------------- logits comparison */
static int read_step(int fd, const char *path, uint64_t step, uint64_t V, float *buf, tq_err *e)
{
    return tq_pread_full(fd, buf, V * 4, step * V * 4, path, e);
}

int tq_run_logits_compare(const char *ref_path, const char *test_path, uint64_t V, tq_run_logits_cmp *out,
                      tq_err *e)
{
    memset(out, 0, sizeof *out);
    uint64_t sa, sb;
    if (V == 0 || V > (1ull << 26))
        return tq_fail(e, TQ_EUSAGE, "vocabulary size %llu out of range", (unsigned long long)V);
    int fa = tq_open_regular(ref_path, &sa, e), fb = fa < 0 ? -1 : tq_open_regular(test_path, &sb, e);
    float *a = NULL, *b = NULL;
    int rc = -1;
    if (fa < 0 || fb < 0)
        goto out;
    if (sa % (V * 4) || sb != sa) {
        tq_fail(e, TQ_EDATA, "%s (%llu bytes) and %s (%llu bytes) are not the same whole number of %llu-float steps",
                ref_path, (unsigned long long)sa, test_path, (unsigned long long)sb, (unsigned long long)V);
        goto out;
    }
    if (!(a = tq_malloc(V * 4, e)) || !(b = tq_malloc(V * 4, e)))
        goto out;
    out->steps = sa / (V * 4);
    double kl_sum = 0, kl_sq = 0;
    for (uint64_t s = 0; s < out->steps; s++) {
        if (read_step(fa, ref_path, s, V, a, e) || read_step(fb, test_path, s, V, b, e))
            goto out;
        if (argmax(a, V) == argmax(b, V))
            out->top1_agree++;
        double ma = -INFINITY, mb = -INFINITY, amax = 0, dmax = 0;
        for (uint64_t i = 0; i < V; i++) {
            if (!isfinite(a[i]) || !isfinite(b[i])) {
                tq_fail(e, TQ_EDATA, "step %llu: non-finite logit at %llu", (unsigned long long)s,
                        (unsigned long long)i);
                goto out;
            }
            ma = fmax(ma, a[i]);
            mb = fmax(mb, b[i]);
            amax = fmax(amax, fabs((double)a[i]));
            dmax = fmax(dmax, fabs((double)a[i] - (double)b[i]));
        }
        double rel = amax > 0 ? dmax / amax : dmax;
        if (rel > out->max_rel_diff)
            out->max_rel_diff = rel;
        double za = 0, zb = 0;
        for (uint64_t i = 0; i < V; i++) {
            za += exp(a[i] - ma);
            zb += exp(b[i] - mb);
        }
        double lza = log(za), lzb = log(zb), kl = 0;
        for (uint64_t i = 0; i < V; i++) {
            double lpa = a[i] - ma - lza, lpb = b[i] - mb - lzb;
            kl += exp(lpa) * (lpa - lpb);
        }
        if (kl < 0)
            kl = 0;
        kl_sum += kl;
        kl_sq += kl * kl;
        if (kl > out->max_kl)
            out->max_kl = kl;
    }
    out->top1_rate = out->steps ? (double)out->top1_agree / (double)out->steps : 0;
    out->mean_kl = out->steps ? kl_sum / (double)out->steps : 0;
    if (out->steps > 1) {
        double n = (double)out->steps, var = (kl_sq - n * out->mean_kl * out->mean_kl) / (n - 1);
        out->kl_stderr = var > 0 ? sqrt(var / n) : 0;
    }
    rc = 0;
out:
    if (fa >= 0)
        close(fa);
    if (fb >= 0)
        close(fb);
    free(a);
    free(b);
    return rc;
}
