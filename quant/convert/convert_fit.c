/* Fitted codebooks and byte budgets (docs/quantization.md, Fitted codebooks and Byte budgets):
 * before anything is written, each TurboQuant module's rows are sampled (evenly spaced rows,
 * at most FIT_VALUES values, chosen from the shape alone), rotated as the quantizer rotates
 * them, and
 *   1. with --codebook fitted, their group-normalised magnitudes histogrammed, a symmetric
 *      codebook fitted by Lloyd iterations from the Gaussian table (tq_codebook_fit), and kept
 *      only where it beats the Gaussian codebook on the sample;
 *   2. with --target-bpw / --target-size, quantized at every setting (bits 2, 3, 4 x group 32,
 *      64, 128) to measure each setting's error, and one setting per module chosen to minimise
 *      Σ importance · weights · relative error under the byte budget (importance: the
 *      module's role factor, times k/E for routed experts).
 * Jobs are fixed runs of sample rows; histograms add integers (any order gives the same bits)
 * and error sums go to per-job slots added in job order, so nothing depends on the threads. */
#include "quant/convert/convert_internal.h"
#include "quant/quant_internal.h"
#include "formats/family.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIT_VALUES (1u << 22)     /* values sampled per module at most */
#define FIT_JOB_VALUES (1u << 18) /* values per job */
#define MAX_GROUPS 3
#define MAX_CHOICES 9

static const int budget_bits[3] = {2, 3, 4};
static const size_t budget_groups[MAX_GROUPS] = {32, 64, 128};

uint64_t cv_quant_bytes(const cv_item *it, int bits, size_t group)
{
    return it->E * it->rows * (tq_pack_words(it->cols, bits) * 4 + it->cols / group * 2) + ((uint64_t)2 << bits) +
           it->cols * 2;
}

typedef struct fit_worker {
    cv_buf in, scratch, raw, x, idx, sc;
    tq_fit_hist *hist; /* [MAX_GROUPS] */
} fit_worker;

typedef struct fit_ctx {
    cv_plan *p;
    cv_item *it;
    uint64_t R, n_sample, per_job, n_jobs;
    int phase;                       /* 0: histograms, 1: errors */
    size_t n_groups, groups[MAX_GROUPS];
    size_t n_cand;                   /* phase 1: codebook/group/bits per candidate */
    const tq_codebook *cand_cb[2 * MAX_CHOICES];
    size_t cand_group[2 * MAX_CHOICES];
    double *err2, *sum2;             /* [n_jobs][n_cand] */
    fit_worker *wk;
} fit_ctx;

/* Global row of sample row i: evenly spaced over the E·rows rows. */
static uint64_t sample_row(const fit_ctx *c, uint64_t i)
{
    return (uint64_t)((unsigned __int128)i * c->R / c->n_sample);
}

static int fit_job(tq_work *w, void *ctx, int worker, uint64_t k, tq_err *e)
{
    (void)w;
    fit_ctx *c = ctx;
    cv_item *it = c->it;
    fit_worker *wk = &c->wk[worker];
    size_t cols = (size_t)it->cols;
    float *raw = cv_grow(&wk->raw, cols * sizeof(float), e);
    float *x = raw ? cv_grow(&wk->x, cols * sizeof(float), e) : NULL;
    uint8_t *idx = x ? cv_grow(&wk->idx, cols, e) : NULL;
    uint16_t *sc = idx ? cv_grow(&wk->sc, cols / 32 * 2 + 2, e) : NULL;
    if (!sc)
        return -1;
    uint64_t i0 = k * c->per_job, i1 = i0 + c->per_job < c->n_sample ? i0 + c->per_job : c->n_sample;
    double *e2 = c->err2 ? c->err2 + k * c->n_cand : NULL, *s2 = c->sum2 ? c->sum2 + k * c->n_cand : NULL;
    for (uint64_t i = i0; i < i1; i++) {
        uint64_t g = sample_row(c, i), part = g / it->rows, r = g % it->rows;
        if (cv_read_rows_f32(&wk->in, &wk->scratch, it, &it->parts[part], r, 1, raw, e))
            return -1;
        if (tq_q_rotate_row(TQ_DT_F32, raw, it->signs, cols, it->block, !it->norot, x, e))
            return tq_err_prefix(e, "tensor '%s' row %llu", it->source, (unsigned long long)r);
        if (c->phase == 0) {
            for (size_t gi = 0; gi < c->n_groups; gi++)
                if (tq_fit_hist_add(&wk->hist[gi], x, cols, c->groups[gi], e))
                    return tq_err_prefix(e, "tensor '%s' row %llu", it->source, (unsigned long long)r);
            continue;
        }
        for (size_t ci = 0; ci < c->n_cand; ci++) {
            double a, b;
            if (tq_quantize_groups(c->cand_cb[ci], it->scale_method, c->cand_group[ci], x, cols, idx, sc, &a, &b, e))
                return tq_err_prefix(e, "tensor '%s' row %llu", it->source, (unsigned long long)r);
            e2[ci] += a;
            s2[ci] += b;
        }
    }
    return 0;
}

static int run_phase(fit_ctx *c, int phase, tq_err *e)
{
    c->phase = phase;
    if (phase == 0)
        for (int t = 0; t < c->p->o->threads; t++)
            memset(c->wk[t].hist, 0, MAX_GROUPS * sizeof *c->wk[t].hist);
    return tq_work_run(c->n_jobs, c->p->o->threads, fit_job, c, NULL, e);
}

/* The settings module `it` may take: its own (bits, group) unless budgeting, else every bits
 * and every group size that divides its rows. */
static int make_choices(cv_plan *p, cv_item *it, int budget, tq_err *e)
{
    int n = 0;
    cv_choice ch[MAX_CHOICES];
    for (int bi = 0; bi < 3; bi++)
        for (int gi = 0; gi < MAX_GROUPS; gi++) {
            int bits = budget ? budget_bits[bi] : it->bits;
            size_t g = budget ? budget_groups[gi] : it->group;
            if (it->cols % g || (!budget && (bi || gi)))
                continue;
            memset(&ch[n], 0, sizeof ch[n]);
            ch[n].bits = bits;
            ch[n].group = g;
            ch[n].bytes = cv_quant_bytes(it, bits, g);
            ch[n].cb = p->cbs[bits];
            n++;
        }
    if (!n)
        return tq_fail(e, TQ_EUSAGE, "internal: no setting for '%s'", it->name);
    if (!(it->choices = tq_malloc((size_t)n * sizeof *it->choices, e)))
        return -1;
    memcpy(it->choices, ch, (size_t)n * sizeof *ch);
    it->n_choices = n;
    it->chosen = 0;
    return 0;
}

static int fit_item(cv_plan *p, cv_item *it, fit_ctx *c, tq_err *e)
{
    int fitted = p->o->codebook == TQ_CODEBOOK_FITTED;
    c->it = it;
    c->R = it->E * it->rows;
    uint64_t want = FIT_VALUES / it->cols;
    c->n_sample = want < 1 ? 1 : want < c->R ? want : c->R;
    c->per_job = FIT_JOB_VALUES / it->cols < 1 ? 1 : FIT_JOB_VALUES / it->cols;
    c->n_jobs = (c->n_sample + c->per_job - 1) / c->per_job;
    c->n_groups = 0;
    for (int k = 0; k < it->n_choices; k++) {
        size_t g = it->choices[k].group, j = 0;
        while (j < c->n_groups && c->groups[j] != g)
            j++;
        if (j == c->n_groups)
            c->groups[c->n_groups++] = g;
    }
    if (fitted) {
        c->err2 = c->sum2 = NULL;
        if (run_phase(c, 0, e))
            return -1;
        for (size_t gi = 0; gi < c->n_groups; gi++) {
            tq_fit_hist *h = &c->wk[0].hist[gi];
            for (int t = 1; t < p->o->threads; t++)
                tq_fit_hist_merge(h, &c->wk[t].hist[gi]);
            for (int k = 0; k < it->n_choices; k++) {
                cv_choice *ch = &it->choices[k];
                if (ch->group == c->groups[gi])
                    ch->fitted = tq_codebook_fit(&p->cbs[ch->bits], h, &ch->cb, &ch->fit_iters) == 0;
            }
        }
    }
    /* candidates: every choice with the Gaussian codebook, and with its fitted one */
    c->n_cand = 0;
    for (int k = 0; k < it->n_choices; k++) {
        cv_choice *ch = &it->choices[k];
        c->cand_cb[c->n_cand] = &p->cbs[ch->bits];
        c->cand_group[c->n_cand++] = ch->group;
        if (ch->fitted) {
            c->cand_cb[c->n_cand] = &ch->cb;
            c->cand_group[c->n_cand++] = ch->group;
        }
    }
    if (!(c->err2 = tq_calloc(c->n_jobs * c->n_cand, sizeof *c->err2, e)) ||
        !(c->sum2 = tq_calloc(c->n_jobs * c->n_cand, sizeof *c->sum2, e)))
        return -1;
    int rc = run_phase(c, 1, e);
    if (rc == 0) {
        size_t ci = 0;
        for (int k = 0; k < it->n_choices; k++) {
            cv_choice *ch = &it->choices[k];
            double eg = 0, sg = 0, ef = 0;
            for (uint64_t j = 0; j < c->n_jobs; j++) { /* job order */
                eg += c->err2[j * c->n_cand + ci];
                sg += c->sum2[j * c->n_cand + ci];
                if (ch->fitted)
                    ef += c->err2[j * c->n_cand + ci + 1];
            }
            ci += ch->fitted ? 2 : 1;
            double scale = (double)c->R / (double)c->n_sample; /* the sample stands for every row */
            ch->err2_gauss = eg * scale;
            ch->sum2 = sg * scale;
            ch->fitted = ch->fitted && ef < eg;
            ch->err2 = (ch->fitted ? ef : eg) * scale;
        }
    }
    free(c->err2), free(c->sum2);
    c->err2 = c->sum2 = NULL;
    return rc;
}

/* Error of stacked experts counts k/E (each token meets k of the E experts); 1 else. */
static double importance(const cv_plan *p, const cv_item *it)
{
    if (it->E <= 1 || !p->m->config)
        return 1.0;
    const cJSON *tc = tq_family_text_config(p->m->config);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(tc, "num_experts_per_tok");
    if (!cJSON_IsNumber(k))
        k = cJSON_GetObjectItemCaseSensitive(tc, "num_experts_per_token");
    if (!cJSON_IsNumber(k) || !(k->valuedouble >= 1) || k->valuedouble > (double)it->E)
        return 1.0;
    return k->valuedouble / (double)it->E;
}

/* The role factor (docs/quantization.md, Byte budgets): what a unit of relative error in one
 * weight of this module costs in KL, relative to the mean layer module (1), from the module's
 * leaf name and its layer (the first costs more, the last less), data-free. Measured on the
 * trained qwen3-tiny of 6f65413 (2 against 4 bits, one class or one layer at a time, KL per
 * weight and unit of relative MSE, rotation seeds 42, 1, 2; bench/role-factors.sh,
 * docs/quality.md, Byte budgets by role). */
static double role_factor(const cv_plan *p, const cv_item *it)
{
    static const struct {
        const char *leaf;
        double f;
    } roles[] = {
        {"lm_head", 6.2}, {"v_proj", 2.4}, {"down_proj", 1.25}, {"k_proj", 1.2}, {"o_proj", 1.2},
        {"gate_proj", 1.0}, {"up_proj", 0.55}, {"q_proj", 0.5},
    };
    const char *end = strrchr(it->name, '.'), *leaf = it->name;
    if (!end || strcmp(end, ".weight"))
        end = it->name + strlen(it->name);
    for (const char *q = it->name; q < end; q++)
        if (*q == '.')
            leaf = q + 1;
    double f = 1;
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++)
        if ((size_t)(end - leaf) == strlen(roles[i].leaf) && !strncmp(leaf, roles[i].leaf, (size_t)(end - leaf))) {
            f = roles[i].f;
            break;
        }
    uint64_t L = 0;
    const cJSON *tc = p->m->config ? tq_family_text_config(p->m->config) : NULL;
    const cJSON *nl = tc ? cJSON_GetObjectItemCaseSensitive(tc, "num_hidden_layers") : NULL;
    if (cJSON_IsNumber(nl) && nl->valuedouble >= 2 && nl->valuedouble < 1e9)
        L = (uint64_t)nl->valuedouble;
    tq_name_info ni;
    tq_family_name(p->m->config ? tq_family_detect(p->m->config) : NULL, L, it->name, &ni);
    if (L && ni.has_layer && ni.layer == 0)
        f *= 1.5;
    else if (L && ni.has_layer && ni.layer == L - 1)
        f *= 0.9;
    return f;
}

/* A setting's cost: importance · weights · relative error on the sample. */
static double cost(const cv_item *it, int k)
{
    const cv_choice *c = &it->choices[k];
    return c->sum2 > 0 ? it->importance * (double)(it->E * it->rows * it->cols) * (c->err2 / c->sum2) : 0;
}

/* Choose one setting per module: start from the cheapest, then take upgrades along each
 * module's lower convex hull of (bytes, cost) by decreasing cost saved per byte while they fit,
 * then spend what is left on the single change that saves most, repeatedly. Ties go to the
 * earlier module, then the earlier setting. */
static int allocate(cv_plan *p, cv_item **q, size_t nq, uint64_t budget, tq_err *e)
{
    uint64_t used = 0, minb = 0;
    for (size_t i = 0; i < nq; i++) {
        cv_item *it = q[i];
        int best = 0;
        for (int k = 1; k < it->n_choices; k++)
            if (it->choices[k].bytes < it->choices[best].bytes ||
                (it->choices[k].bytes == it->choices[best].bytes && cost(it, k) < cost(it, best)))
                best = k;
        it->chosen = best;
        used += it->choices[best].bytes;
    }
    minb = used;
    if (used > budget)
        return tq_fail(e, TQ_EUSAGE, "%s: the byte budget (%llu bytes for the quantized modules) is below the smallest "
                       "setting (%llu bytes: every module at 2 bits, group 128)", p->m->path, (unsigned long long)budget,
                       (unsigned long long)minb);
    unsigned char *frozen = tq_calloc(nq ? nq : 1, 1, e);
    if (!frozen)
        return -1;
    for (;;) { /* hull steps */
        size_t bi = nq;
        int bk = -1;
        double bslope = 0;
        for (size_t i = 0; i < nq; i++) {
            if (frozen[i])
                continue;
            cv_item *it = q[i];
            const cv_choice *cur = &it->choices[it->chosen];
            /* the next hull point: the steepest saving per extra byte */
            int nk = -1;
            double ns = 0;
            for (int k = 0; k < it->n_choices; k++) {
                const cv_choice *c = &it->choices[k];
                if (c->bytes <= cur->bytes || !(cost(it, k) < cost(it, it->chosen)))
                    continue;
                double s = (cost(it, it->chosen) - cost(it, k)) / (double)(c->bytes - cur->bytes);
                if (nk < 0 || s > ns || (s == ns && c->bytes < it->choices[nk].bytes))
                    nk = k, ns = s;
            }
            if (nk < 0) {
                frozen[i] = 1;
                continue;
            }
            if (bk < 0 || ns > bslope)
                bi = i, bk = nk, bslope = ns;
        }
        if (bk < 0)
            break;
        cv_item *it = q[bi];
        uint64_t extra = it->choices[bk].bytes - it->choices[it->chosen].bytes;
        if (used + extra > budget) {
            frozen[bi] = 1;
            continue;
        }
        used += extra;
        it->chosen = bk;
    }
    free(frozen);
    for (;;) { /* what is left: the single change that saves most and fits */
        size_t bi = nq;
        int bk = -1;
        double bsave = 0;
        for (size_t i = 0; i < nq; i++) {
            cv_item *it = q[i];
            uint64_t cur = it->choices[it->chosen].bytes;
            for (int k = 0; k < it->n_choices; k++) {
                double save = cost(it, it->chosen) - cost(it, k);
                if (!(save > 0) || used - cur + it->choices[k].bytes > budget)
                    continue;
                if (bk < 0 || save > bsave)
                    bi = i, bk = k, bsave = save;
            }
        }
        if (bk < 0)
            break;
        used = used - q[bi]->choices[q[bi]->chosen].bytes + q[bi]->choices[bk].bytes;
        q[bi]->chosen = bk;
    }
    return 0;
}

/* Module `it` takes its chosen setting: bits, group, codebook and the shapes declared. */
static void apply_choice(cv_plan *p, cv_item *it)
{
    const cv_choice *ch = &it->choices[it->chosen];
    it->bits = ch->bits;
    it->group = ch->group;
    it->cb = ch->fitted ? &ch->cb : &p->cbs[ch->bits];
    uint64_t words = tq_pack_words(it->cols, ch->bits);
    cv_decl *dw = &p->decls[it->parts[0].out], *ds = &p->decls[it->out_scales], *dc = &p->decls[it->out_codebook];
    dw->shape[dw->ndim - 1] = words;
    ds->shape[ds->ndim - 1] = it->cols / ch->group;
    dc->shape[0] = (uint64_t)1 << ch->bits;
    for (uint64_t k = 0; k < it->E; k++)
        it->parts[k].out_off = k * it->rows * words;
}

/* config.json: the top-level bits and group size are the setting of the most weights (ties:
 * fewer bits, then the smaller group); every module with another setting gets its entry. */
static int budget_config(cv_plan *p, cv_item **q, size_t nq, tq_err *e)
{
    uint64_t w[3][MAX_GROUPS] = {{0}};
    for (size_t i = 0; i < nq; i++)
        for (int gi = 0; gi < MAX_GROUPS; gi++)
            if (q[i]->group == budget_groups[gi])
                w[q[i]->bits - 2][gi] += q[i]->E * q[i]->rows * q[i]->cols;
    int bb = 0, bg = 0;
    for (int b = 0; b < 3; b++)
        for (int g = 0; g < MAX_GROUPS; g++)
            if (w[b][g] > w[bb][bg])
                bb = b, bg = g;
    p->q_bits = budget_bits[bb];
    p->q_group = budget_groups[bg];
    if (!p->qconfig && !(p->qconfig = cJSON_CreateObject()))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    for (size_t i = 0; i < nq; i++) {
        cv_item *it = q[i];
        if (it->bits == p->q_bits && it->group == p->q_group)
            continue;
        size_t n = strlen(it->name);
        char *P = tq_asprintf(e, "%.*s", (int)(n > 7 ? n - 7 : n), it->name); /* less ".weight" */
        cJSON *v = cJSON_CreateObject();
        if (!P || !v || !cJSON_AddNumberToObject(v, "bits", it->bits) ||
            !cJSON_AddNumberToObject(v, "group_size", (double)it->group)) {
            free(P);
            cJSON_Delete(v);
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(p->qconfig, P);
        cJSON_AddItemToObject(p->qconfig, P, v);
        free(P);
    }
    return 0;
}

int cv_fit(cv_plan *p, tq_err *e)
{
    const tq_convert_opts *o = p->o;
    int budget = o->target_bpw > 0 || o->target_size > 0;
    p->q_bits = o->bits;
    p->q_group = o->group_size;
    if (o->mode != TQ_CONVERT_QUANTIZE || (!budget && o->codebook != TQ_CODEBOOK_FITTED))
        return 0;
    size_t nq = 0;
    for (size_t i = 0; i < p->n_items; i++)
        nq += p->items[i].kind == CV_QUANT;
    cv_item **q = tq_calloc(nq ? nq : 1, sizeof *q, e);
    fit_ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.wk = q ? tq_calloc((size_t)o->threads, sizeof *c.wk, e) : NULL;
    int rc = c.wk ? 0 : -1;
    for (int t = 0; rc == 0 && t < o->threads; t++)
        if (!(c.wk[t].hist = tq_calloc(MAX_GROUPS, sizeof *c.wk[t].hist, e)))
            rc = -1;
    nq = 0;
    uint64_t qparams = 0, qbytes = 0;
    for (size_t i = 0; rc == 0 && i < p->n_items; i++) {
        cv_item *it = &p->items[i];
        if (it->kind != CV_QUANT)
            continue;
        q[nq++] = it;
        qparams += it->E * it->rows * it->cols;
        qbytes += cv_quant_bytes(it, it->bits, it->group);
        it->importance = importance(p, it) * role_factor(p, it);
        rc = make_choices(p, it, budget, e) || fit_item(p, it, &c, e) ? -1 : 0;
    }
    if (rc == 0 && budget) {
        uint64_t all = 0, b;
        for (size_t i = 0; i < p->n_decls; i++)
            all += cv_decl_bytes(&p->decls[i]);
        if (o->target_bpw > 0) {
            b = (uint64_t)floor(o->target_bpw * (double)qparams / 8.0);
        } else if (o->target_size <= all - qbytes) {
            rc = tq_fail(e, TQ_EUSAGE, "%s: --target-size %llu bytes leaves nothing for the quantized modules: the other "
                         "tensors take %llu bytes", p->m->path, (unsigned long long)o->target_size,
                         (unsigned long long)(all - qbytes));
            b = 0;
        } else {
            b = o->target_size - (all - qbytes);
        }
        p->budget_bytes = b;
        if (rc == 0 && nq)
            rc = allocate(p, q, nq, b, e);
    }
    for (size_t i = 0; rc == 0 && i < nq; i++)
        apply_choice(p, q[i]);
    if (rc == 0 && budget && nq)
        rc = budget_config(p, q, nq, e);
    for (int t = 0; c.wk && t < o->threads; t++) {
        fit_worker *w = &c.wk[t];
        free(w->in.p), free(w->scratch.p), free(w->raw.p), free(w->x.p), free(w->idx.p), free(w->sc.p);
        free(w->hist);
    }
    free(c.wk);
    free(q);
    return rc;
}
