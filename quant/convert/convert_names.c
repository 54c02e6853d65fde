/* Which output tensor each input tensor becomes in quantize and plain modes, through the
 * family table: HF per-expert tensors stacked into the family's MLX container (Mixtral's
 * w1/w3/w2 renamed), fused gate_up experts split at their middle row, gpt-oss's MXFP4 experts
 * decoded with their interleaved gate/up rows separated, gpt-oss's float experts as
 * transformers saves them transposed and de-interleaved, wrapped roots renamed, the transforms
 * mlx-lm's sanitize would have applied (Qwen3-Next's zero-centred norms, conv1d layout), MTP
 * heads kept or left out as mlx-lm does. The experts are checked against config.json. */
#include "quant/convert/convert_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct gbuf {
    cv_group *g;
    size_t n, cap;
} gbuf;

static cv_group *new_group(gbuf *b, const char *name, size_t n_src, tq_err *e)
{
    cv_group *ng = tq_grow(b->g, &b->cap, b->n, sizeof *ng, e);
    if (!ng)
        return NULL;
    b->g = ng;
    cv_group *g = &b->g[b->n];
    memset(g, 0, sizeof *g);
    if (!(g->out_name = tq_strdup(name, e)) || !(g->src = tq_calloc(n_src ? n_src : 1, sizeof *g->src, e))) {
        free(g->out_name);
        return NULL;
    }
    g->n = n_src;
    b->n++;
    return g;
}

void cv_groups_free(cv_group *g, size_t n)
{
    for (size_t i = 0; g && i < n; i++) {
        free(g[i].out_name);
        free(g[i].src);
    }
    free(g);
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

/* A tensor as it is (renamed), shape possibly changed (same bytes). */
static cv_group *plain(gbuf *b, const tq_model_tensor *t, const char *name, tq_err *e)
{
    cv_group *g = new_group(b, name, 1, e);
    if (!g)
        return NULL;
    const tq_tensor_info *ti = &t->info;
    g->src[0].t = t;
    g->ndim = ti->ndim;
    memcpy(g->shape, ti->shape, sizeof g->shape);
    g->rows = ti->ndim >= 2 ? ti->shape[ti->ndim - 2] : 1;
    g->cols = ti->ndim >= 1 ? ti->shape[ti->ndim - 1] : 1;
    g->dtype = ti->dtype;
    return g;
}

/* E pieces of one source (or a blocks/scales pair) laid out [E, rows, cols] in the output. */
static cv_group *stacked(gbuf *b, const char *name, const tq_model_tensor *t, const tq_model_tensor *scales,
                         uint64_t E, uint64_t rows, uint64_t cols, uint64_t expert_elems, uint64_t first,
                         uint64_t stride, tq_err *e)
{
    cv_group *g = new_group(b, name, (size_t)E, e);
    if (!g)
        return NULL;
    for (uint64_t x = 0; x < E; x++)
        g->src[x] = (cv_src){t, scales, x * expert_elems + first, stride, 0};
    g->experts = 1;
    g->rows = rows;
    g->cols = cols;
    g->ndim = cols == 1 && rows != 1 ? 2 : 3;
    g->shape[0] = E;
    g->shape[1] = rows;
    g->shape[2] = cols;
    g->dtype = scales ? TQ_DT_F32 : t->info.dtype;
    g->mxfp4 = scales != NULL;
    return g;
}

static void shape_str(const tq_tensor_info *t, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* Config facts the expert checks need (0 = not in config.json). */
typedef struct facts {
    const tq_family *f;
    uint64_t layers, experts, inter, hidden;
    int hf_form;           /* the experts are stored HF-style: sanitize's transforms are due */
} facts;

static int check_experts(const tq_model *m, const facts *fc, const tq_tensor_info *t, uint64_t E, tq_err *e)
{
    if (fc->experts && E != fc->experts)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' holds %llu experts but config.json says %s = %llu", m->path,
                       t->name, (unsigned long long)E, fc->f->experts_key, (unsigned long long)fc->experts);
    return 0;
}

/* gate_up_proj [E, 2I, H] / down_proj [E, H, I] with no suffix (Qwen3.5-MoE, Gemma 4). */
static int fused(const tq_model *m, const facts *fc, gbuf *b, const tq_model_tensor *t, const tq_name_info *ni,
                 const char *lout, tq_err *e)
{
    const tq_tensor_info *ti = &t->info;
    char sh[96], name[512];
    shape_str(ti, sh, sizeof sh);
    int gu = ni->proj == TQ_PROJ_GATE_UP;
    if (ti->ndim != 3 || !ti->shape[0] || !ti->shape[1] || !ti->shape[2])
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s: fused experts need [experts, rows, columns]", m->path,
                       ti->name, sh);
    uint64_t E = ti->shape[0], R = ti->shape[1], C = ti->shape[2];
    if (check_experts(m, fc, ti, E, e))
        return -1;
    uint64_t want_r = gu ? 2 * fc->inter : fc->hidden, want_c = gu ? fc->hidden : fc->inter;
    if ((gu && R % 2) || (fc->inter && fc->hidden && (R != want_r || C != want_c)))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s but config.json makes it [%llu, %llu, %llu] (%s = %llu, "
                       "hidden_size = %llu)", m->path, ti->name, sh, (unsigned long long)E, (unsigned long long)want_r,
                       (unsigned long long)want_c, fc->f->moe_inter_key, (unsigned long long)fc->inter,
                       (unsigned long long)fc->hidden);
    if (!gu) {
        snprintf(name, sizeof name, "%s%s.down_proj.weight", lout, fc->f->mlx_container);
        return stacked(b, name, t, NULL, E, R, C, R * C, 0, 0, e) ? 0 : -1;
    }
    for (int half = 0; half < 2; half++) {
        snprintf(name, sizeof name, "%s%s.%s.weight", lout, fc->f->mlx_container, half ? "up_proj" : "gate_proj");
        if (!stacked(b, name, t, NULL, E, R / 2, C, R * C, half ? R / 2 * C : 0, 0, e))
            return -1;
    }
    return 0;
}

/* gpt-oss in float as transformers saves it (formats/family.h, xw_fused; transformers
 * models/gpt_oss/modeling_gpt_oss.py, GptOssExperts: gate_up_proj [E, H, 2I] and down_proj
 * [E, I, H], forward computes x @ gate_up_proj, gate = [..., ::2], up = [..., 1::2], then
 * @ down_proj). mlx-lm's SwitchLinear weights are [E, out, in], so each is read transposed:
 * gate_proj.weight[e][i][h] = gate_up_proj[e][h][2i], up_proj.weight[e][i][h] =
 * gate_up_proj[e][h][2i+1], down_proj.weight[e][h][i] = down_proj[e][i][h]. The biases are
 * the *_bias tensors of the MXFP4 form, split there. */
static int fused_xw(const tq_model *m, const facts *fc, gbuf *b, const tq_model_tensor *t, const tq_name_info *ni,
                    const char *lout, tq_err *e)
{
    const tq_tensor_info *ti = &t->info;
    char sh[96], name[512];
    shape_str(ti, sh, sizeof sh);
    int gu = ni->proj == TQ_PROJ_GATE_UP;
    if (ti->ndim != 3 || !ti->shape[0] || !ti->shape[1] || !ti->shape[2])
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s: transformers' gpt-oss experts are [experts, in, out]",
                       m->path, ti->name, sh);
    uint64_t E = ti->shape[0], R = ti->shape[1], C = ti->shape[2];
    if (check_experts(m, fc, ti, E, e))
        return -1;
    uint64_t want_r = gu ? fc->hidden : fc->inter, want_c = gu ? 2 * fc->inter : fc->hidden;
    if ((gu && C % 2) || (fc->inter && fc->hidden && (R != want_r || C != want_c)))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s but config.json makes it [%llu, %llu, %llu] (%s = %llu, "
                       "hidden_size = %llu; transformers' GptOssExperts layout, used as x @ W)", m->path, ti->name, sh,
                       (unsigned long long)E, (unsigned long long)want_r, (unsigned long long)want_c,
                       fc->f->moe_inter_key, (unsigned long long)fc->inter, (unsigned long long)fc->hidden);
    for (int k = 0; k < (gu ? 2 : 1); k++) {
        snprintf(name, sizeof name, "%s%s.%s.weight", lout, fc->f->mlx_container,
                 !gu ? "down_proj" : k ? "up_proj" : "gate_proj");
        /* output [E, C', R]: rows walk the source's columns (gate_up: every second one) */
        cv_group *g = gu ? stacked(b, name, t, NULL, E, C / 2, R, R * C, (uint64_t)k, 2, e)
                         : stacked(b, name, t, NULL, E, C, R, R * C, 0, 1, e);
        if (!g)
            return -1;
        for (uint64_t x = 0; x < E; x++)
            g->src[x].cstride = C;
    }
    return 0;
}

/* gpt-oss: PROJ_blocks U8 [E, R, C/32, 16] + PROJ_scales U8 [E, R, C/32] (+ PROJ_bias [E, R]);
 * gate_up rows interleaved. Called for the blocks tensor and the bias tensor. */
static int mxfp4(const tq_model *m, const facts *fc, gbuf *b, const tq_model_tensor *t, const tq_name_info *ni,
                 const char *lout, tq_err *e)
{
    const tq_tensor_info *ti = &t->info;
    char sh[96], name[512], other[512];
    int gu = ni->proj == TQ_PROJ_GATE_UP;
    const char *proj = gu ? "gate_up_proj" : "down_proj";
    shape_str(ti, sh, sizeof sh);
    if (!strcmp(ni->suffix, "scales"))
        return 0; /* consumed with its blocks */
    if (!strcmp(ni->suffix, "bias")) {
        if (ti->ndim != 2 || !ti->shape[0] || (gu && ti->shape[1] % 2))
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s: an expert bias is [experts, rows]", m->path, ti->name, sh);
        if (check_experts(m, fc, ti, ti->shape[0], e))
            return -1;
        uint64_t E = ti->shape[0], R = ti->shape[1];
        if (!gu) {
            snprintf(name, sizeof name, "%s%s.down_proj.bias", lout, fc->f->mlx_container);
            return plain(b, t, name, e) ? 0 : -1;
        }
        for (int odd = 0; odd < 2; odd++) {
            snprintf(name, sizeof name, "%s%s.%s.bias", lout, fc->f->mlx_container, odd ? "up_proj" : "gate_proj");
            if (!stacked(b, name, t, NULL, E, R / 2, 1, R, (uint64_t)odd, 2, e))
                return -1;
        }
        return 0;
    }
    /* blocks: find the scales beside them */
    size_t base = strlen(ti->name) - strlen("_blocks");
    snprintf(other, sizeof other, "%.*s_scales", (int)base, ti->name);
    const tq_model_tensor *s = tq_model_find(m, other);
    if (!s)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' has no '%s' beside it (MXFP4 blocks need their scales)", m->path,
                       ti->name, other);
    const tq_tensor_info *si = &s->info;
    if (ti->dtype != TQ_DT_U8 || ti->ndim != 4 || ti->shape[3] != 16 || !ti->shape[0] || !ti->shape[1] || !ti->shape[2])
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s %s: MXFP4 blocks are U8 [experts, rows, groups, 16]", m->path,
                       ti->name, tq_dtype_name(ti->dtype), sh);
    if (si->dtype != TQ_DT_U8 || si->ndim != 3 || si->shape[0] != ti->shape[0] || si->shape[1] != ti->shape[1] ||
        si->shape[2] != ti->shape[2]) {
        char s2[96];
        shape_str(si, s2, sizeof s2);
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s %s but its blocks '%s' are %s: MXFP4 scales are U8 "
                       "[experts, rows, groups]", m->path, si->name, tq_dtype_name(si->dtype), s2, ti->name, sh);
    }
    uint64_t E = ti->shape[0], R = ti->shape[1], C = ti->shape[2] * 32;
    if (check_experts(m, fc, ti, E, e))
        return -1;
    uint64_t want_r = gu ? 2 * fc->inter : fc->hidden, want_c = gu ? fc->hidden : fc->inter;
    if ((gu && R % 2) || (fc->inter && fc->hidden && (R != want_r || C != want_c)))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s (%llu x %llu values per expert) but config.json makes %s "
                       "%llu x %llu (%s = %llu, hidden_size = %llu)", m->path, ti->name, sh, (unsigned long long)R,
                       (unsigned long long)C, proj, (unsigned long long)want_r, (unsigned long long)want_c,
                       fc->f->moe_inter_key, (unsigned long long)fc->inter, (unsigned long long)fc->hidden);
    if (!gu) {
        snprintf(name, sizeof name, "%s%s.down_proj.weight", lout, fc->f->mlx_container);
        return stacked(b, name, t, s, E, R, C, R * C, 0, 0, e) ? 0 : -1;
    }
    for (int odd = 0; odd < 2; odd++) {
        snprintf(name, sizeof name, "%s%s.%s.weight", lout, fc->f->mlx_container, odd ? "up_proj" : "gate_proj");
        if (!stacked(b, name, t, s, E, R / 2, C, R * C, (uint64_t)odd * C, 2 * C, e))
            return -1;
    }
    return 0;
}

/* HF per-expert tensors waiting to be stacked. */
typedef struct pending {
    char *out;
    uint64_t expert;
    const tq_model_tensor *t;
    size_t expert_at, expert_len; /* the expert number's place in t's name */
} pending;

static int cmp_pending(const void *a, const void *b)
{
    const pending *x = a, *y = b;
    int c = strcmp(x->out, y->out);
    return c ? c : x->expert < y->expert ? -1 : x->expert > y->expert;
}

static int stack_pending(const tq_model *m, const facts *fc, gbuf *b, pending *pd, size_t np, tq_err *e)
{
    qsort(pd, np, sizeof *pd, cmp_pending);
    for (size_t i = 0; i < np;) {
        size_t j = i;
        while (j < np && !strcmp(pd[j].out, pd[i].out))
            j++;
        const tq_tensor_info *t0 = &pd[i].t->info;
        for (size_t k = i; k < j; k++) {
            if (pd[k].expert != k - i) { /* the first number not there names the missing tensor */
                return tq_fail(e, TQ_EDATA, "%s: tensor '%.*s%llu%s' is missing (its layer has '%s')", m->path,
                               (int)pd[i].expert_at, t0->name, (unsigned long long)(k - i),
                               t0->name + pd[i].expert_at + pd[i].expert_len, pd[k].t->info.name);
            }
            const tq_tensor_info *t = &pd[k].t->info;
            int same = t->dtype == t0->dtype && t->ndim == t0->ndim && t->ndim == 2;
            for (int d = 0; same && d < t->ndim; d++)
                same = t->shape[d] == t0->shape[d];
            if (!same) {
                char s1[96], s2[96];
                shape_str(t, s1, sizeof s1);
                shape_str(t0, s2, sizeof s2);
                return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s %s but '%s' is %s %s: experts of one layer must be "
                               "matrices of one shape", m->path, t->name, tq_dtype_name(t->dtype), s1, t0->name,
                               tq_dtype_name(t0->dtype), s2);
            }
        }
        uint64_t E = j - i;
        if (fc->experts && E < fc->experts)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%.*s%llu%s' is missing (config.json says %s = %llu)", m->path,
                           (int)pd[i].expert_at, t0->name, (unsigned long long)E,
                           t0->name + pd[i].expert_at + pd[i].expert_len, fc->f->experts_key,
                           (unsigned long long)fc->experts);
        if (fc->experts && E > fc->experts)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is expert %llu but config.json says %s = %llu", m->path,
                           pd[j - 1].t->info.name, (unsigned long long)(E - 1), fc->f->experts_key,
                           (unsigned long long)fc->experts);
        cv_group *g = new_group(b, pd[i].out, (size_t)E, e);
        if (!g)
            return -1;
        for (size_t k = i; k < j; k++)
            g->src[k - i].t = pd[k].t;
        g->experts = 1;
        g->rows = t0->shape[0];
        g->cols = t0->shape[1];
        g->ndim = 3;
        g->shape[0] = E;
        g->shape[1] = g->rows;
        g->shape[2] = g->cols;
        g->dtype = t0->dtype;
        i = j;
    }
    return 0;
}

static int cmp_group(const void *a, const void *b)
{
    return strcmp(((const cv_group *)a)->out_name, ((const cv_group *)b)->out_name);
}

static int cfg(const tq_model *m, const char *key, uint64_t *v, tq_err *e)
{
    *v = 0;
    return m->config && key && tq_family_cfg_u64(m->config, key, v, e) < 0 ? tq_err_prefix(e, "%s", m->path) : 0;
}

int cv_groups_build(const tq_model *m, int keep_names, cv_group **out, size_t *n_out, size_t *n_dropped, tq_err *e)
{
    gbuf b = {0};
    pending *pd = tq_calloc(m->n_tensors ? m->n_tensors : 1, sizeof *pd, e);
    size_t np = 0;
    *n_dropped = 0;
    facts fc = {.f = tq_family_detect(m->config)};
    int rc = -1;
    if (!pd)
        return -1;
    if (!keep_names && fc.f &&
        (cfg(m, "num_hidden_layers", &fc.layers, e) || cfg(m, fc.f->experts_key, &fc.experts, e) ||
         cfg(m, fc.f->moe_inter_key, &fc.inter, e) || cfg(m, "hidden_size", &fc.hidden, e)))
        goto out;
    const tq_family *f = fc.f;
    tq_name_info ni;
    for (size_t i = 0; !keep_names && i < m->n_tensors; i++) {
        tq_family_name(f, fc.layers, m->tensors[i].info.name, &ni);
        fc.hf_form |= ni.role == TQ_ROLE_EXPERT && ni.form != TQ_FORM_STACKED;
    }
    if (!f) /* no family: the qwen3_moe layout, without config checks */
        fc.f = tq_family_get(TQ_FAM_QWEN3_MOE);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        const tq_tensor_info *ti = &t->info;
        char name[600], lout[600], lhf[600];
        if (keep_names) {
            if (!plain(&b, t, ti->name, e))
                goto out;
            continue;
        }
        tq_family_name(f, fc.layers, ti->name, &ni);
        if (ni.role == TQ_ROLE_MTP && f && !f->mtp_keep) {
            (*n_dropped)++;
            continue;
        }
        if (tq_family_mlx_name(f, ti->name, name, sizeof name) ||
            (ni.layer_len && (ni.layer_len >= sizeof lhf ||
                              (snprintf(lhf, sizeof lhf, "%.*s", (int)ni.layer_len, ti->name),
                               tq_family_mlx_name(f, lhf, lout, sizeof lout))))) {
            tq_fail(e, TQ_EDATA, "%s: tensor name '%s' is too long", m->path, ti->name);
            goto out;
        }
        if (ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_SEPARATE) {
            const char *x = ti->name + ni.layer_len;
            const char *at = strstr(x, "experts.") + 8;
            pd[np].expert_at = (size_t)(at - ti->name);
            pd[np].expert_len = strspn(at, "0123456789");
            pd[np].expert = ni.expert;
            pd[np].t = t;
            char sn[700];
            snprintf(sn, sizeof sn, "%s%s.%s.%s", lout, fc.f->mlx_container, tq_family_proj_name(ni.proj), ni.suffix);
            if (!(pd[np].out = tq_strdup(sn, e)))
                goto out;
            np++;
            continue;
        }
        if (ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_FUSED) {
            if (fused(m, &fc, &b, t, &ni, lout, e))
                goto out;
            continue;
        }
        if (ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_FUSED_XW) {
            if (fused_xw(m, &fc, &b, t, &ni, lout, e))
                goto out;
            continue;
        }
        if (ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_MXFP4) {
            if (mxfp4(m, &fc, &b, t, &ni, lout, e))
                goto out;
            continue;
        }
        if (ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_STACKED && !strcmp(ni.suffix, "weight") &&
            (ti->ndim != 3 || check_experts(m, &fc, ti, ti->shape[0], e))) {
            if (ti->ndim != 3) {
                char sh[96];
                shape_str(ti, sh, sizeof sh);
                tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s: stacked experts are [experts, out, in]", m->path,
                        ti->name, sh);
            }
            goto out;
        }
        cv_group *g = plain(&b, t, ni.role == TQ_ROLE_MTP ? ti->name : name, e);
        if (!g)
            goto out;
        if (f && fc.hf_form && (f->transforms & TQ_FT_NORM_SHIFT) && ti->ndim == 1 && tq_family_norm_is_shifted(f, ti->name))
            g->add = 1.0f;
        if (f && fc.hf_form && (f->transforms & TQ_FT_CONV_KLAST) && ends_with(ti->name, ".conv1d.weight") &&
            ti->ndim == 3 && ti->shape[1] == 1 && ti->shape[2] != 1) {
            g->shape[1] = ti->shape[2];
            g->shape[2] = 1;
        }
    }
    if (stack_pending(m, &fc, &b, pd, np, e))
        goto out;
    if (b.n > 1) /* b.g is NULL for a model of no tensors: qsort's base must not be */
        qsort(b.g, b.n, sizeof *b.g, cmp_group);
    for (size_t i = 1; i < b.n; i++)
        if (!strcmp(b.g[i - 1].out_name, b.g[i].out_name)) {
            tq_fail(e, TQ_EDATA, "%s: tensors '%s' and '%s' would both become '%s'", m->path, b.g[i - 1].src[0].t->info.name,
                    b.g[i].src[0].t->info.name, b.g[i].out_name);
            goto out;
        }
    rc = 0;
out:
    for (size_t i = 0; i < np; i++)
        free(pd[i].out);
    free(pd);
    if (rc) {
        cv_groups_free(b.g, b.n);
        return -1;
    }
    *out = b.g;
    *n_out = b.n;
    return 0;
}
