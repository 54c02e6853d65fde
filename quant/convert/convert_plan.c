/* What becomes of every input tensor: which linears are quantized (docs/quantization.md,
 * Which tensors are quantized: the loader's "left unquantized" rules plus --keep /
 * --bits-for), how HF per-expert tensors are stacked into
 * switch_mlp (and unstacked again by --dequantize), and the declarations of every output
 * tensor. Nothing here reads tensor data except a TurboQuant model's small codebook and
 * signs tensors. */
#include "quant/convert/convert_internal.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static char *fmt(tq_err *e, const char *f, const char *a, const char *b, const char *c)
{
    size_t n = strlen(f) + strlen(a) + (b ? strlen(b) : 0) + (c ? strlen(c) : 0) + 1;
    char *s = tq_malloc(n, e);
    if (s)
        snprintf(s, n, f, a, b ? b : "", c ? c : "");
    return s;
}

/* ------------------------------------------------------------------ growth helpers */
static cv_item *new_item(cv_plan *p, int kind, tq_err *e)
{
    if (p->n_items == p->cap_items) {
        size_t nc = p->cap_items ? 2 * p->cap_items : 64;
        cv_item *ni = realloc(p->items, nc * sizeof *ni);
        if (!ni)
            return tq_fail(e, TQ_ENOMEM, "out of memory"), NULL;
        p->items = ni;
        p->cap_items = nc;
    }
    cv_item *it = &p->items[p->n_items++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->out_scales = it->out_codebook = it->out_signs = it->out_biases = -1;
    return it;
}

/* Declare an output tensor; returns its declaration index or -1. */
static long declare(cv_plan *p, const char *name, tq_dtype dt, int ndim, const uint64_t *shape, tq_err *e)
{
    /* duplicates (two inputs mapping to one output) are refused by the model writer */
    if (p->n_decls == p->cap_decls) {
        size_t nc = p->cap_decls ? 2 * p->cap_decls : 64;
        cv_decl *nd = realloc(p->decls, nc * sizeof *nd);
        if (!nd)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        p->decls = nd;
        p->cap_decls = nc;
    }
    cv_decl *d = &p->decls[p->n_decls];
    memset(d, 0, sizeof *d);
    if (!(d->name = tq_strdup(name, e)))
        return -1;
    d->dtype = dt;
    d->ndim = ndim;
    for (int k = 0; k < ndim; k++)
        d->shape[k] = shape[k];
    return (long)p->n_decls++;
}

uint64_t cv_decl_bytes(const cv_decl *d)
{
    uint64_t v = tq_dtype_size(d->dtype);
    for (int k = 0; k < d->ndim; k++)
        v *= d->shape[k]; /* checked when planned */
    return v;
}

/* ------------------------------------------------------------------ expert names */
/* "X.experts.N.PROJ.KIND" -> prefix "X", N, "PROJ.KIND"; KIND is weight or bias. */
static int parse_expert(const char *name, size_t *prefix_len, uint64_t *idx, const char **rest)
{
    const char *k = strstr(name, ".experts.");
    if (!k)
        return 0;
    const char *d = k + 9, *q = d;
    uint64_t v = 0;
    while (isdigit((unsigned char)*q)) {
        if (v > 100000000)
            return 0;
        v = v * 10 + (uint64_t)(*q++ - '0');
    }
    if (q == d || *q != '.' || (q - d > 1 && *d == '0'))
        return 0;
    const char *r = q + 1, *dot = strchr(r, '.');
    if (!dot || strchr(dot + 1, '.') || dot == r || (strcmp(dot + 1, "weight") && strcmp(dot + 1, "bias")))
        return 0;
    *prefix_len = (size_t)(k - name);
    *idx = v;
    *rest = r;
    return 1;
}

/* A group of tensors that becomes one output: one input, or E experts in expert order. */
typedef struct cv_group {
    char *out_name;
    size_t n;
    const tq_model_tensor **t;
    int experts; /* stacked from HF per-expert tensors (even when E == 1) */
} cv_group;

static int cmp_group(const void *a, const void *b)
{
    return strcmp(((const cv_group *)a)->out_name, ((const cv_group *)b)->out_name);
}

static void free_groups(cv_group *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(g[i].out_name);
        free(g[i].t);
    }
    free(g);
}

/* Group input tensors: experts stacked under PREFIX.switch_mlp.PROJ.KIND (quantize mode,
 * unless keep_names), everything else alone under its own name. */
static int make_groups(const tq_model *m, int stack, cv_group **out, size_t *n_out, tq_err *e)
{
    cv_group *g = tq_calloc(m->n_tensors ? m->n_tensors : 1, sizeof *g, e);
    if (!g)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        size_t pl;
        uint64_t idx;
        const char *rest;
        char *on;
        int ex = stack && parse_expert(t->info.name, &pl, &idx, &rest);
        if (ex) {
            char *prefix = tq_malloc(pl + 1, e);
            if (!prefix)
                goto fail;
            memcpy(prefix, t->info.name, pl);
            prefix[pl] = 0;
            on = fmt(e, "%s.switch_mlp.%s", prefix, rest, NULL);
            free(prefix);
        } else {
            on = tq_strdup(t->info.name, e);
        }
        if (!on)
            goto fail;
        g[n].out_name = on;
        g[n].n = 1;
        g[n].experts = ex;
        if (!(g[n].t = tq_calloc(1, sizeof *g[n].t, e)))
            goto fail_n;
        g[n].t[0] = t;
        n++;
    }
    qsort(g, n, sizeof *g, cmp_group); /* stable enough: ties are resolved below */
    /* merge runs with the same output name: they must be experts 0..E-1 exactly once */
    size_t w = 0;
    size_t cur = 0;
    for (size_t i = 0; i < n;) {
        cur = i;
        size_t j = i + 1;
        while (j < n && !strcmp(g[j].out_name, g[i].out_name))
            j++;
        size_t cnt = j - i;
        int any_ex = 0;
        for (size_t k = i; k < j; k++)
            any_ex |= g[k].experts;
        if (any_ex) {
            const tq_model_tensor **ts = tq_calloc(cnt, sizeof *ts, e);
            if (!ts)
                goto fail_merge;
            for (size_t k = i; k < j; k++) {
                const tq_model_tensor *t = g[k].t[0];
                size_t pl;
                uint64_t idx;
                const char *rest;
                if (!parse_expert(t->info.name, &pl, &idx, &rest)) {
                    free(ts);
                    tq_fail(e, TQ_EDATA, "%s: tensor '%s' collides with stacked experts '%s'", m->path, t->info.name, g[i].out_name);
                    goto fail_merge;
                }
                if (idx >= cnt || ts[idx]) {
                    free(ts);
                    tq_fail(e, TQ_EDATA, "%s: experts of '%s' are not numbered 0..%zu exactly once (tensor '%s')",
                            m->path, g[i].out_name, cnt - 1, t->info.name);
                    goto fail_merge;
                }
                ts[idx] = t;
            }
            for (size_t k = 1; k < cnt; k++) {
                const tq_tensor_info *a = &ts[0]->info, *b = &ts[k]->info;
                int same = a->dtype == b->dtype && a->ndim == b->ndim;
                for (int d = 0; same && d < a->ndim; d++)
                    same = a->shape[d] == b->shape[d];
                if (!same) {
                    free(ts);
                    tq_fail(e, TQ_EDATA, "%s: expert tensors '%s' and '%s' differ in dtype or shape", m->path, a->name, b->name);
                    goto fail_merge;
                }
            }
            for (size_t k = i + 1; k < j; k++) {
                free(g[k].out_name);
                free(g[k].t);
            }
            free(g[i].t);
            g[i].t = ts;
            g[i].n = cnt;
            g[i].experts = 1;
        }
        if (w != i)
            g[w] = g[i];
        w++;
        i = j;
    }
    *out = g;
    *n_out = w;
    return 0;
fail_merge: /* [0, w) compacted, [i, n) untouched, between them moved or freed */
    for (size_t k = 0; k < w; k++) {
        free(g[k].out_name);
        free(g[k].t);
    }
    for (size_t k = cur; k < n; k++) {
        free(g[k].out_name);
        free(g[k].t);
    }
    free(g);
    return -1;
fail_n:
    free(g[n].out_name);
fail:
    free_groups(g, n);
    return -1;
}

/* ------------------------------------------------------------------ rules */
static int regex_any(const char *const *re, size_t n, const char *a, const char *b, tq_err *e, int *hit)
{
    *hit = -1;
    for (size_t i = 0; i < n; i++) {
        regex_t r;
        int rc = regcomp(&r, re[i], REG_EXTENDED | REG_NOSUB);
        if (rc)
            return tq_fail(e, TQ_EUSAGE, "bad regular expression '%s'", re[i]);
        if (!regexec(&r, a, 0, NULL, 0) || (b && !regexec(&r, b, 0, NULL, 0)))
            *hit = (int)i;
        regfree(&r);
    }
    return 0;
}

/* Why module P (weight tensor `w`, out × in) is not quantized by rule, or NULL. */
static const char *rule_note(const char *P, uint64_t out, uint64_t in, size_t gs)
{
    if (strstr(P, "embed") || strstr(P, "wte"))
        return "embedding";
    if (strstr(P, "norm"))
        return "norm";
    if (ends_with(P, "mlp.gate") || strstr(P, "router") || ends_with(P, "shared_expert_gate"))
        return "router";
    if (in < 32 || out < 32)
        return "dimension below 32";
    if (in % gs)
        return "input dimension not divisible by the group size";
    return NULL;
}

static int shape_elems(const tq_model *m, const tq_tensor_info *t, uint64_t *n, tq_err *e)
{
    uint64_t v = 1;
    for (int k = 0; k < t->ndim; k++)
        if (tq_mul_u64(v, t->shape[k], &v))
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s': shape overflows", m->path, t->name);
    *n = v;
    return 0;
}

/* Output dtype of a tensor left unquantized: --dtype for floats; else the stored dtype, except
 * a GGUF block-type tensor (presented as exact F32) becomes BF16 like a dequantized module. */
static tq_dtype copy_dtype(const tq_convert_opts *o, const tq_model_tensor *t)
{
    tq_dtype in = t->info.dtype;
    if (o->dtype >= 0 && tq_dtype_is_float(in))
        return (tq_dtype)o->dtype;
    return t->was_quantized && in == TQ_DT_F32 ? TQ_DT_BF16 : in;
}

static int convertible(tq_dtype d) { return d == TQ_DT_F16 || d == TQ_DT_BF16 || d == TQ_DT_F32 || d == TQ_DT_F64; }

/* A copy of group g under name `name` (stacked when g->n > 1), dtype out_dt. */
static cv_item *plan_copy(cv_plan *p, const cv_group *g, const char *name, tq_dtype out_dt, tq_err *e)
{
    const tq_tensor_info *t0 = &g->t[0]->info;
    if (out_dt != t0->dtype && !convertible(t0->dtype))
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': cannot convert dtype %s to %s", p->m->path, t0->name,
                       tq_dtype_name(t0->dtype), tq_dtype_name(out_dt)), NULL;
    uint64_t n = 0;
    if (shape_elems(p->m, t0, &n, e))
        return NULL;
    uint64_t shape[TQ_MAX_DIMS];
    int nd = t0->ndim;
    if (g->experts) {
        if (nd + 1 > TQ_MAX_DIMS)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s': too many dimensions to stack", p->m->path, t0->name), NULL;
        shape[0] = g->n;
        for (int k = 0; k < nd; k++)
            shape[k + 1] = t0->shape[k];
        nd++;
        uint64_t tot;
        if (tq_mul_u64(n, g->n, &tot))
            return tq_fail(e, TQ_EDATA, "%s: '%s': stacked size overflows", p->m->path, name), NULL;
    } else {
        for (int k = 0; k < nd; k++)
            shape[k] = t0->shape[k];
    }
    long d = declare(p, name, out_dt, nd, shape, e);
    if (d < 0)
        return NULL;
    cv_item *it = new_item(p, CV_COPY, e);
    if (!it || !(it->name = tq_strdup(name, e)) || !(it->source = tq_strdup(t0->name, e)) ||
        !(it->parts = tq_calloc(g->n, sizeof *it->parts, e)))
        return NULL;
    it->E = g->n;
    it->rows = 1;
    it->cols = n;
    it->src_dtype = t0->dtype;
    it->out_dtype = out_dt;
    for (size_t k = 0; k < g->n; k++) {
        it->parts[k].src = g->t[k];
        it->parts[k].out = d;
        it->parts[k].out_off = k * n;
    }
    return it;
}

/* config.json's entry for module P: {"bits", "group_size"[, "mode"]}, or false (bits 0). */
static int add_override(cv_plan *p, const char *module, int bits, size_t gs, const char *mode, tq_err *e)
{
    if (!p->qconfig && !(p->qconfig = cJSON_CreateObject()))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    cJSON *v = bits ? cJSON_CreateObject() : cJSON_CreateFalse();
    if (!v || (bits && (!cJSON_AddNumberToObject(v, "bits", bits) || !cJSON_AddNumberToObject(v, "group_size", (double)gs) ||
                        (mode && !cJSON_AddStringToObject(v, "mode", mode))))) {
        cJSON_Delete(v);
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    cJSON_AddItemToObject(p->qconfig, module, v);
    return 0;
}

/* The bias of quantized module P, stacked like its weight, planned with it in dtype dt. */
static int claim_bias(cv_plan *p, cv_group *groups, size_t ng, const char *P, tq_dtype dt, tq_err *e)
{
    char *bname = fmt(e, "%s.bias", P, NULL, NULL);
    if (!bname)
        return -1;
    for (size_t k = 0; k < ng; k++)
        if (!strcmp(groups[k].out_name, bname)) {
            cv_item *b = plan_copy(p, &groups[k], bname, dt, e);
            if (!b) {
                free(bname);
                return -1;
            }
            b->bias_of_quant = 1;
            groups[k].n = SIZE_MAX; /* planned */
        }
    free(bname);
    return 0;
}

/* MLX affine module P (man tq-formats(5), MLX AFFINE WEIGHTS): P.weight U32, P.scales and
 * P.biases in the weight's dtype (--dtype, else the input's; f64 becomes f32, which MLX
 * computes in), and its bias as an unquantized tensor. */
static int plan_affine(cv_plan *p, cv_group *groups, size_t ng, size_t gi, const char *P, int bits, size_t gs,
                       tq_err *e)
{
    const cv_group *g = &groups[gi];
    const tq_tensor_info *t0 = &g->t[0]->info;
    uint64_t E = g->experts ? g->n : t0->ndim == 3 ? t0->shape[0] : 1;
    uint64_t out = t0->shape[t0->ndim - 2], in = t0->shape[t0->ndim - 1];
    tq_dtype qdt = copy_dtype(p->o, g->t[0]);
    if (qdt == TQ_DT_F64)
        qdt = TQ_DT_F32;
    uint64_t words = in / (32 / (uint64_t)bits), ngr = in / gs;
    uint64_t sw[3] = {E, out, words}, ss[3] = {E, out, ngr};
    int nd = g->experts || t0->ndim == 3 ? 3 : 2;
    char *nm_s = fmt(e, "%s.scales", P, NULL, NULL), *nm_b = fmt(e, "%s.biases", P, NULL, NULL);
    long dw = nm_s && nm_b ? declare(p, g->out_name, TQ_DT_U32, nd, nd == 3 ? sw : sw + 1, e) : -1;
    long ds = dw >= 0 ? declare(p, nm_s, qdt, nd, nd == 3 ? ss : ss + 1, e) : -1;
    long db = ds >= 0 ? declare(p, nm_b, qdt, nd, nd == 3 ? ss : ss + 1, e) : -1;
    free(nm_s), free(nm_b);
    if (db < 0)
        return -1;
    cv_item *it = new_item(p, CV_AFFINE, e);
    if (!it || !(it->name = tq_strdup(g->out_name, e)) || !(it->source = tq_strdup(t0->name, e)) ||
        !(it->parts = tq_calloc(E, sizeof *it->parts, e)))
        return -1;
    it->E = E;
    it->rows = out;
    it->cols = in;
    it->src_dtype = t0->dtype;
    it->out_dtype = TQ_DT_U32;
    it->qdtype = qdt;
    it->affine_rule = p->o->affine_rule;
    it->bits = bits;
    it->group = gs;
    it->out_scales = ds;
    it->out_biases = db;
    for (uint64_t k = 0; k < E; k++) {
        it->parts[k].src = g->experts ? g->t[k] : g->t[0];
        it->parts[k].src_off = g->experts ? 0 : k * out * in;
        it->parts[k].out = dw;
        it->parts[k].out_off = k * out * words;
    }
    return claim_bias(p, groups, ng, P, copy_dtype(p->o, g->t[0]), e);
}

static int is_embedding(const char *P) { return strstr(P, "embed") || strstr(P, "wte"); }
static int is_router(const char *P)
{
    return ends_with(P, "mlp.gate") || strstr(P, "router") || ends_with(P, "shared_expert_gate");
}

/* --method affine: mlx-lm's choice of modules (docs/quantization.md, MLX affine): every
 * linear layer and embedding whose input dimension the group size divides, routers at 8 bits
 * group 64 as mlx-lm's Qwen MoE classes ask, --embed and --bits-for and --keep on top. */
static int plan_affine_group(cv_plan *p, cv_group *groups, size_t ng, size_t gi, const char *P, int keep_hit,
                             int bits_hit, tq_err *e)
{
    const tq_convert_opts *o = p->o;
    const cv_group *g = &groups[gi];
    const tq_tensor_info *t0 = &g->t[0]->info;
    uint64_t in = t0->shape[t0->ndim - 1];
    int bits = bits_hit >= 0 ? o->bits_for_bits[bits_hit] : o->bits;
    size_t gs = o->group_size;
    const char *note = NULL;
    if (is_embedding(P)) {
        if (o->embed == TQ_EMBED_KEEP)
            note = "--embed keep";
        else if (o->embed > 0)
            bits = o->embed;
    } else if (is_router(P) && bits_hit < 0) {
        bits = 8;
        gs = 64;
    }
    if (!note && keep_hit >= 0)
        note = "--keep";
    if (!note && in % gs)
        note = "input dimension not divisible by the group size";
    if (note) {
        cv_item *it = plan_copy(p, g, g->out_name, copy_dtype(o, g->t[0]), e);
        if (!it)
            return -1;
        it->note = note;
        return keep_hit >= 0 && in % gs == 0 ? add_override(p, P, 0, 0, NULL, e) : 0;
    }
    if (!convertible(t0->dtype))
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': dtype %s cannot be quantized (F16, BF16, F32, F64 can; --keep copies it)",
                       p->m->path, t0->name, tq_dtype_name(t0->dtype));
    if ((bits != o->bits || gs != o->group_size) && add_override(p, P, bits, gs, NULL, e))
        return -1;
    return plan_affine(p, groups, ng, gi, P, bits, gs, e);
}

/* Quantize mode: one group. */
static int plan_quant_group(cv_plan *p, cv_group *groups, size_t ng, size_t gi, tq_err *e)
{
    const tq_convert_opts *o = p->o;
    cv_group *g = &groups[gi];
    const tq_tensor_info *t0 = &g->t[0]->info;
    const char *name = g->out_name;
    int is_linear = ends_with(name, ".weight") && (g->experts ? t0->ndim == 2 : t0->ndim == 2 || t0->ndim == 3);
    if (!is_linear) /* (a quantized module's bias was planned with it) */
        return plan_copy(p, g, name, copy_dtype(o, g->t[0]), e) ? 0 : -1;
    uint64_t E = g->experts ? g->n : t0->ndim == 3 ? t0->shape[0] : 1;
    uint64_t out = t0->shape[t0->ndim - 2], in = t0->shape[t0->ndim - 1];
    size_t plen = strlen(name) - 7;
    char *P = tq_malloc(plen + 1, e);
    if (!P)
        return -1;
    memcpy(P, name, plen);
    P[plen] = 0;
    int rc = -1, keep_hit, bits_hit;
    const char *note = rule_note(P, out, in, o->group_size);
    if (regex_any(o->keep_re, o->n_keep, name, t0->name, e, &keep_hit) ||
        regex_any(o->bits_for_re, o->n_bits_for, name, t0->name, e, &bits_hit))
        goto out;
    if (o->method == TQ_METHOD_AFFINE) {
        rc = plan_affine_group(p, groups, ng, gi, P, keep_hit, bits_hit, e);
        goto out;
    }
    /* --embed affine4|affine8: the embedding table as MLX affine beside TurboQuant linears */
    if (is_embedding(P) && o->embed > 0 && keep_hit < 0 && in % o->group_size == 0 && convertible(t0->dtype)) {
        rc = add_override(p, P, o->embed, o->group_size, "affine", e) ? -1
             : plan_affine(p, groups, ng, gi, P, o->embed, o->group_size, e);
        goto out;
    }
    if (!note && keep_hit >= 0)
        note = "--keep";
    if (note) {
        cv_item *it = plan_copy(p, g, name, copy_dtype(o, g->t[0]), e);
        if (!it)
            goto out;
        it->note = note;
        if (keep_hit >= 0 && !rule_note(P, out, in, o->group_size) && add_override(p, P, 0, 0, NULL, e))
            goto out;
        rc = 0;
        goto out;
    }
    if (!convertible(t0->dtype)) {
        tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': dtype %s cannot be quantized (F16, BF16, F32, F64 can; --keep copies it)",
                p->m->path, t0->name, tq_dtype_name(t0->dtype));
        goto out;
    }
    int bits = bits_hit >= 0 ? o->bits_for_bits[bits_hit] : o->bits;
    if (bits != o->bits && add_override(p, P, bits, o->group_size, NULL, e))
        goto out;
    uint64_t words = tq_pack_words(in, bits), ng_ = in / o->group_size;
    uint64_t sw[3] = {E, out, words}, ss[3] = {E, out, ng_}, sc[1] = {1ull << bits}, sg[1] = {in};
    int nd = g->experts || t0->ndim == 3 ? 3 : 2;
    const uint64_t *wsh = nd == 3 ? sw : sw + 1, *ssh = nd == 3 ? ss : ss + 1;
    uint64_t chk;
    if (tq_mul_u64(E, out, &chk) || tq_mul_u64(chk, in, &chk)) {
        tq_fail(e, TQ_EDATA, "%s: '%s': size overflows", p->m->path, name);
        goto out;
    }
    char *nm_s = fmt(e, "%s.scales", P, NULL, NULL), *nm_c = fmt(e, "%s.codebook", P, NULL, NULL), *nm_g = fmt(e, "%s.signs", P, NULL, NULL);
    long dw = nm_s && nm_c && nm_g ? declare(p, name, TQ_DT_U32, nd, wsh, e) : -1;
    long ds = dw >= 0 ? declare(p, nm_s, TQ_DT_F16, nd, ssh, e) : -1;
    long dc = ds >= 0 ? declare(p, nm_c, TQ_DT_F16, 1, sc, e) : -1;
    long dg = dc >= 0 ? declare(p, nm_g, TQ_DT_F16, 1, sg, e) : -1;
    free(nm_s), free(nm_c), free(nm_g);
    if (dg < 0)
        goto out;
    cv_item *it = new_item(p, CV_QUANT, e);
    if (!it || !(it->name = tq_strdup(name, e)) || !(it->source = tq_strdup(t0->name, e)) ||
        !(it->parts = tq_calloc(E, sizeof *it->parts, e)) || !(it->signs = tq_malloc(in * sizeof *it->signs, e)))
        goto out;
    it->E = E;
    it->rows = out;
    it->cols = in;
    it->src_dtype = t0->dtype;
    it->out_dtype = TQ_DT_U32;
    it->bits = bits;
    it->group = o->group_size;
    it->block = tq_hadamard_block(in);
    it->cb = &p->cbs[bits];
    it->scale_method = o->scale;
    it->out_scales = ds;
    it->out_codebook = dc;
    it->out_signs = dg;
    tq_signs_module(o->seed, P, it->signs, in);
    for (uint64_t k = 0; k < E; k++) {
        it->parts[k].src = g->experts ? g->t[k] : g->t[0];
        it->parts[k].src_off = g->experts ? 0 : k * out * in;
        it->parts[k].out = dw;
        it->parts[k].out_off = k * out * words;
    }
    /* its bias, stacked like the weight, stored F16 (man tq-formats(5), TURBOQUANT WEIGHTS) */
    rc = claim_bias(p, groups, ng, P, TQ_DT_F16, e);
out:
    free(P);
    return rc;
}

/* ------------------------------------------------------------------ dequantize mode */
static int read_f16_vec(const tq_model_tensor *t, float *dst, uint64_t n, tq_err *e)
{
    uint16_t buf[4096];
    for (uint64_t i = 0; i < n; i += 4096) {
        size_t k = (size_t)(n - i < 4096 ? n - i : 4096);
        if (tq_model_read(t, i * 2, buf, k * 2, e))
            return -1;
        for (size_t j = 0; j < k; j++)
            dst[i + j] = tq_f16_to_f32(buf[j]);
    }
    return 0;
}

/* The parts of a dequantize item (it->E, rows, cols, bits, group and out_dtype set): each
 * expert's packed rows and scales (and biases), written under the stacked name or, for
 * switch_mlp stacks unless --keep-names, per-expert HF names. */
static int dequant_parts(cv_plan *p, cv_item *it, const char *P, const tq_model_tensor *w, const tq_model_tensor *s,
                         const tq_model_tensor *b, tq_err *e)
{
    const tq_tensor_info *wi = &w->info;
    int nd = wi->ndim;
    uint64_t E = it->E, out = it->rows, in = it->cols, words = wi->shape[nd - 1], ngr = in / it->group;
    tq_dtype odt = it->out_dtype;
    const char *sw = strstr(P, ".switch_mlp.");
    int unstack = nd == 3 && sw && !p->o->keep_names;
    for (uint64_t k = 0; k < E; k++) {
        cv_part *pt = &it->parts[k];
        pt->src = w;
        pt->src_off = k * out * words;
        pt->scales = s;
        pt->biases = b;
        pt->scales_off = k * out * ngr;
        if (unstack) {
            char num[32];
            snprintf(num, sizeof num, "%llu", (unsigned long long)k);
            size_t pl = (size_t)(sw - P);
            char *prefix = tq_malloc(pl + 1, e);
            if (!prefix)
                return -1;
            memcpy(prefix, P, pl);
            prefix[pl] = 0;
            char *nm = fmt(e, "%s.experts.%s.%s.weight", prefix, num, sw + 12);
            free(prefix);
            uint64_t sh[2] = {out, in};
            long d = nm ? declare(p, nm, odt, 2, sh, e) : -1;
            free(nm);
            if (d < 0)
                return -1;
            pt->out = d;
            pt->out_off = 0;
        } else {
            if (k == 0) {
                uint64_t sh[3] = {E, out, in};
                long d = declare(p, wi->name, odt, nd, nd == 3 ? sh : sh + 1, e);
                if (d < 0)
                    return -1;
                pt->out = d;
            } else {
                pt->out = it->parts[0].out;
            }
            pt->out_off = k * out * in;
        }
    }
    return 0;
}

/* An MLX affine module: P.weight U32, P.scales and P.biases of one float dtype, bits and group
 * size from config.json and checked against the shapes. The weights come out in the scales'
 * dtype (what mx.dequantize gives) unless --dtype. */
static int plan_affine_dequant(cv_plan *p, const char *P, const tq_model_tensor *w, tq_err *e)
{
    const tq_model *m = p->m;
    char *ns = fmt(e, "%s.scales", P, NULL, NULL), *nb = fmt(e, "%s.biases", P, NULL, NULL);
    const tq_model_tensor *s = ns ? tq_model_find(m, ns) : NULL, *b = nb ? tq_model_find(m, nb) : NULL;
    free(ns), free(nb);
    const tq_tensor_info *wi = &w->info;
    int nd = wi->ndim, bits;
    uint64_t group;
    uint64_t b64 = 0;
    if (tq_model_quant_params(m->config, P, &b64, &group) != 1)
        b64 = 0;
    bits = b64 <= 32 ? (int)b64 : 0;
    if (bits != 2 && bits != 4 && bits != 8)
        return tq_fail(e, TQ_EUNSUP, "%s: module '%s': config.json gives no affine bits tq reads (2, 4 or 8; found %d)",
                       m->path, P, bits);
    tq_dtype sdt = s->info.dtype;
    if (!b || (nd != 2 && nd != 3) || s->info.ndim != nd || b->info.ndim != nd || b->info.dtype != sdt ||
        (sdt != TQ_DT_F16 && sdt != TQ_DT_BF16 && sdt != TQ_DT_F32))
        return tq_fail(e, TQ_EDATA, "%s: module '%s': weight/scales/biases have unexpected dtypes or ranks", m->path, P);
    uint64_t E = nd == 3 ? wi->shape[0] : 1, out = wi->shape[nd - 2], ngr = s->info.shape[nd - 1], in;
    int same = 1;
    for (int d = 0; d < nd; d++)
        same &= s->info.shape[d] == b->info.shape[d] && (d == nd - 1 || s->info.shape[d] == wi->shape[d]);
    if (!group || tq_mul_u64(ngr, group, &in) || !same || in % (32 / (uint64_t)bits) ||
        wi->shape[nd - 1] != in / (32 / (uint64_t)bits))
        return tq_fail(e, TQ_EDATA, "%s: module '%s': weight [%llu words], scales [%llu groups] disagree with %d bits group %llu",
                       m->path, P, (unsigned long long)wi->shape[nd - 1], (unsigned long long)ngr, bits,
                       (unsigned long long)group);
    cv_item *it = new_item(p, CV_AFFINE_DEQUANT, e);
    if (!it || !(it->source = tq_strdup(wi->name, e)) || !(it->name = tq_strdup(wi->name, e)) ||
        !(it->parts = tq_calloc(E, sizeof *it->parts, e)))
        return -1;
    it->E = E;
    it->rows = out;
    it->cols = in;
    it->bits = bits;
    it->group = (size_t)group;
    it->src_dtype = TQ_DT_U32;
    it->qdtype = sdt;
    it->out_dtype = p->o->dtype >= 0 ? (tq_dtype)p->o->dtype : sdt;
    return dequant_parts(p, it, P, w, s, b, e);
}

static int plan_dequant_module(cv_plan *p, const char *P, const tq_model_tensor *w, tq_err *e)
{
    const tq_model *m = p->m;
    char *ns = fmt(e, "%s.scales", P, NULL, NULL), *nc = fmt(e, "%s.codebook", P, NULL, NULL), *ng = fmt(e, "%s.signs", P, NULL, NULL);
    const tq_model_tensor *s = ns ? tq_model_find(m, ns) : NULL, *c = nc ? tq_model_find(m, nc) : NULL,
                          *g = ng ? tq_model_find(m, ng) : NULL;
    free(ns), free(nc), free(ng);
    const tq_tensor_info *wi = &w->info;
    if (!s || !c || !g)
        return tq_fail(e, TQ_EDATA, "%s: '%s' has packed weights but lacks its scales, codebook or signs", m->path, wi->name);
    int nd = wi->ndim;
    uint64_t ncb = c->info.ndim == 1 ? c->info.shape[0] : 0, in = g->info.ndim == 1 ? g->info.shape[0] : 0;
    int bits = ncb == 2 ? 1 : ncb == 4 ? 2 : ncb == 8 ? 3 : ncb == 16 ? 4 : 0;
    if (wi->dtype != TQ_DT_U32 || (nd != 2 && nd != 3) || s->info.ndim != nd || s->info.dtype != TQ_DT_F16 ||
        c->info.dtype != TQ_DT_F16 || g->info.dtype != TQ_DT_F16 || !bits || !in)
        return tq_fail(e, TQ_EDATA, "%s: module '%s': weight/scales/codebook/signs have unexpected dtypes or ranks", m->path, P);
    uint64_t E = nd == 3 ? wi->shape[0] : 1, out = wi->shape[nd - 2], ngr = s->info.shape[nd - 1];
    int same_lead = nd == 2 || s->info.shape[0] == E;
    if (!ngr || in % ngr || !same_lead || s->info.shape[nd - 2] != out || wi->shape[nd - 1] != tq_pack_words(in, bits))
        return tq_fail(e, TQ_EDATA, "%s: module '%s': shapes of weight [%llu words], scales [%llu groups] and signs [%llu] disagree",
                       m->path, P, (unsigned long long)wi->shape[nd - 1], (unsigned long long)ngr, (unsigned long long)in);
    size_t gsz = (size_t)(in / ngr), block = tq_hadamard_block(in);
    int mm;
    uint64_t NN;
    if (tq_hadamard_split(block, &mm, &NN))
        return tq_fail(e, TQ_EDATA, "%s: module '%s': no Hadamard block for %llu inputs", m->path, P, (unsigned long long)in);
    tq_dtype odt = p->o->dtype >= 0 ? (tq_dtype)p->o->dtype : TQ_DT_BF16;
    cv_item *it = new_item(p, CV_DEQUANT, e);
    if (!it || !(it->source = tq_strdup(wi->name, e)) || !(it->name = tq_strdup(wi->name, e)) ||
        !(it->parts = tq_calloc(E, sizeof *it->parts, e)) || !(it->signs = tq_malloc(in * sizeof *it->signs, e)))
        return -1;
    it->E = E;
    it->rows = out;
    it->cols = in;
    it->bits = bits;
    it->group = gsz;
    it->block = block;
    it->src_dtype = TQ_DT_U32;
    it->out_dtype = odt;
    if (read_f16_vec(g, it->signs, in, e))
        return -1;
    for (uint64_t j = 0; j < in; j++)
        if (it->signs[j] != 1.0f && it->signs[j] != -1.0f)
            return tq_fail(e, TQ_EDATA, "%s: '%s.signs'[%llu] is not ±1", m->path, P, (unsigned long long)j);
    if (read_f16_vec(c, it->codebook, ncb, e))
        return -1;
    return dequant_parts(p, it, P, w, s, NULL, e);
}

/* A stacked tensor (bias) of a dequantized stack, unstacked to per-expert names. */
static int plan_unstack_copy(cv_plan *p, const tq_model_tensor *t, const char *sw, tq_err *e)
{
    const tq_tensor_info *ti = &t->info;
    uint64_t E = ti->shape[0], per = 1;
    for (int k = 1; k < ti->ndim; k++)
        per *= ti->shape[k];
    tq_dtype odt = copy_dtype(p->o, t);
    if (odt != ti->dtype && !convertible(ti->dtype))
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': cannot convert dtype %s", p->m->path, ti->name, tq_dtype_name(ti->dtype));
    cv_item *it = new_item(p, CV_COPY, e);
    if (!it || !(it->name = tq_strdup(ti->name, e)) || !(it->source = tq_strdup(ti->name, e)) ||
        !(it->parts = tq_calloc(E ? E : 1, sizeof *it->parts, e)))
        return -1;
    it->E = E;
    it->rows = 1;
    it->cols = per;
    it->src_dtype = ti->dtype;
    it->out_dtype = odt;
    size_t pl = (size_t)(sw - ti->name);
    for (uint64_t k = 0; k < E; k++) {
        char num[32], *prefix = tq_malloc(pl + 1, e);
        if (!prefix)
            return -1;
        memcpy(prefix, ti->name, pl);
        prefix[pl] = 0;
        snprintf(num, sizeof num, "%llu", (unsigned long long)k);
        char *nm = fmt(e, "%s.experts.%s.%s", prefix, num, sw + 12);
        free(prefix);
        long d = nm ? declare(p, nm, odt, ti->ndim - 1, ti->shape + 1, e) : -1;
        free(nm);
        if (d < 0)
            return -1;
        it->parts[k].src = t;
        it->parts[k].src_off = k * per;
        it->parts[k].out = d;
    }
    return 0;
}

static int plan_dequant(cv_plan *p, tq_err *e)
{
    const tq_model *m = p->m;
    size_t found = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        const char *nm = t->info.name;
        size_t n = strlen(nm);
        char P[4096];
        if (n >= sizeof P)
            return tq_fail(e, TQ_EDATA, "%s: tensor name too long", m->path);
        if (ends_with(nm, ".weight") && t->info.dtype == TQ_DT_U32) {
            memcpy(P, nm, n - 7);
            P[n - 7] = 0;
            char sname[4200];
            snprintf(sname, sizeof sname, "%s.scales", P);
            if (tq_model_find(m, sname)) {
                char cname[4200];
                snprintf(cname, sizeof cname, "%s.codebook", P);
                if (tq_model_find(m, cname) ? plan_dequant_module(p, P, t, e) : plan_affine_dequant(p, P, t, e))
                    return -1;
                found++;
                continue;
            }
        }
        /* the module's other tensors were consumed above */
        int consumed = 0;
        static const char *sfx[] = {".scales", ".codebook", ".signs", ".biases"};
        for (int k = 0; k < 4 && !consumed; k++)
            if (ends_with(nm, sfx[k])) {
                size_t pl = n - strlen(sfx[k]);
                memcpy(P, nm, pl);
                P[pl] = 0;
                char wname[4200];
                snprintf(wname, sizeof wname, "%s.weight", P);
                const tq_model_tensor *w = tq_model_find(m, wname);
                consumed = w && w->info.dtype == TQ_DT_U32;
            }
        if (consumed)
            continue;
        const char *sw = strstr(nm, ".switch_mlp.");
        if (sw && !p->o->keep_names && t->info.ndim >= 2) {
            if (plan_unstack_copy(p, t, sw, e))
                return -1;
            continue;
        }
        cv_group g = {(char *)nm, 1, &t, 0};
        if (!plan_copy(p, &g, nm, copy_dtype(p->o, t), e))
            return -1;
    }
    if (!found)
        return tq_fail(e, TQ_EDATA, "%s: no quantized modules (P.weight U32 with P.scales) to dequantize", m->path);
    return 0;
}

/* ------------------------------------------------------------------ entry */
static int already_quantized(const tq_model *m, tq_err *e)
{
    if (m->config && (cJSON_GetObjectItemCaseSensitive(m->config, "quantization") ||
                      cJSON_GetObjectItemCaseSensitive(m->config, "quantization_config")))
        return tq_fail(e, TQ_EUNSUP, "%s: config.json has a quantization block: the model is already quantized", m->path);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const char *nm = m->tensors[i].info.name;
        if (ends_with(nm, ".scales") || ends_with(nm, ".codebook"))
            return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': the model is already quantized (use --dequantize first)", m->path, nm);
    }
    return 0;
}

int cv_plan_build(cv_plan *p, const tq_model *m, const tq_convert_opts *o, tq_err *e)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    p->o = o;
    if (o->mode == TQ_CONVERT_DEQUANTIZE)
        return plan_dequant(p, e);
    if (o->mode == TQ_CONVERT_PLAIN) {
        for (size_t i = 0; i < m->n_tensors; i++) {
            const tq_model_tensor *t = &m->tensors[i];
            cv_group g = {(char *)t->info.name, 1, &t, 0};
            if (!plan_copy(p, &g, t->info.name, copy_dtype(o, t), e))
                return -1;
        }
        return 0;
    }
    if (already_quantized(m, e))
        return -1;
    for (int b = 1; b <= TQ_MAX_BITS; b++)
        if (tq_codebook_lloyd_max(b, &p->cbs[b], e))
            return -1;
    cv_group *g;
    size_t ng;
    if (make_groups(m, !o->keep_names, &g, &ng, e))
        return -1;
    int rc = 0;
    /* weights before biases so a quantized module claims its bias first */
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (size_t i = 0; i < ng && !rc; i++) {
            if (g[i].n == SIZE_MAX || ends_with(g[i].out_name, ".bias") != pass)
                continue;
            rc = plan_quant_group(p, g, ng, i, e);
        }
    for (size_t i = 0; i < ng; i++)
        if (g[i].n == SIZE_MAX)
            g[i].n = 0;
    free_groups(g, ng);
    return rc;
}

void cv_plan_free(cv_plan *p)
{
    for (size_t i = 0; i < p->n_items; i++) {
        free(p->items[i].name);
        free(p->items[i].source);
        free(p->items[i].parts);
        free(p->items[i].signs);
    }
    free(p->items);
    for (size_t i = 0; i < p->n_decls; i++)
        free(p->decls[i].name);
    free(p->decls);
    cJSON_Delete(p->qconfig);
    memset(p, 0, sizeof *p);
}

int cv_plan_resolve(cv_plan *p, tq_model_writer *w, tq_err *e)
{
    long *map = tq_calloc(p->n_decls ? p->n_decls : 1, sizeof *map, e);
    if (!map)
        return -1;
    for (size_t i = 0; i < p->n_decls; i++)
        if ((map[i] = tq_model_writer_index(w, p->decls[i].name)) < 0) {
            free(map);
            return tq_fail(e, TQ_EUSAGE, "internal: output '%s' not declared", p->decls[i].name);
        }
    for (size_t i = 0; i < p->n_items; i++) {
        cv_item *it = &p->items[i];
        for (uint64_t k = 0; k < it->E; k++)
            it->parts[k].out = map[it->parts[k].out];
        if (it->out_scales >= 0)
            it->out_scales = map[it->out_scales];
        if (it->out_codebook >= 0)
            it->out_codebook = map[it->out_codebook];
        if (it->out_signs >= 0)
            it->out_signs = map[it->out_signs];
        if (it->out_biases >= 0)
            it->out_biases = map[it->out_biases];
    }
    free(map);
    return 0;
}
