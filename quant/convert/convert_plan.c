/* What becomes of every output group in quantize and plain modes (convert_names.c made the
 * groups): which modules are quantized (the family's linear layers, less the never-quantize
 * modules, the size rules, --keep; --bits-for widths), how copies are stored, and the
 * declarations of every output tensor. Nothing here reads tensor data. */
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

/* Why module P (out x in) is not quantized by the size rules, or NULL. */
static const char *size_note(uint64_t out, uint64_t in, size_t gs)
{
    if (in < 32 || out < 32)
        return "dimension below 32";
    if (in % gs)
        return "input dimension not divisible by the group size";
    return NULL;
}

/* Why weight NAME (module P) stays float: never-quantize modules and the size rules; with a
 * family, also anything that is not one of its mlx-lm class's linear layers. */
static const char *rule_note(const tq_family *f, const char *name, const char *P, uint64_t out, uint64_t in, size_t gs)
{
    if (!f && (strstr(P, "embed") || strstr(P, "wte")))
        return "embedding";
    if (f && f->mtp == TQ_MTP_PREFIX && !strncmp(name, "mtp.", 4))
        return "MTP head (kept as the source)";
    const char *why = tq_family_keep_reason(f, name);
    if (why)
        return why;
    if ((why = size_note(out, in, gs)))
        return why;
    if (f && !tq_family_is_linear(f, P))
        return "not a linear layer of the model class";
    return NULL;
}

/* Output dtype of a group left unquantized: --dtype for floats; else the stored dtype, except
 * GGUF block types and MXFP4 experts (presented as exact F32) become BF16 like a dequantized
 * module. */
static tq_dtype copy_dtype(const tq_convert_opts *o, const cv_group *g)
{
    tq_dtype in = g->dtype;
    if (o->dtype >= 0 && tq_dtype_is_float(in))
        return (tq_dtype)o->dtype;
    return (g->src[0].t->was_quantized || g->mxfp4) && in == TQ_DT_F32 ? TQ_DT_BF16 : in;
}

static int convertible(tq_dtype d) { return d == TQ_DT_F16 || d == TQ_DT_BF16 || d == TQ_DT_F32 || d == TQ_DT_F64; }

/* A copy of group g under name `name`, dtype out_dt. */
static cv_item *plan_copy(cv_plan *p, const cv_group *g, const char *name, tq_dtype out_dt, tq_err *e)
{
    const tq_tensor_info *t0 = &g->src[0].t->info;
    if ((out_dt != g->dtype || g->add != 0.0f) && !convertible(g->dtype))
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': cannot convert dtype %s to %s", p->m->path, t0->name,
                       tq_dtype_name(g->dtype), tq_dtype_name(out_dt)), NULL;
    uint64_t total = 1;
    for (int k = 0; k < g->ndim; k++)
        if (tq_mul_u64(total, g->shape[k], &total))
            return tq_fail(e, TQ_EDATA, "%s: '%s': size overflows", p->m->path, name), NULL;
    long d = cv_declare(p, name, out_dt, g->ndim, g->shape, e);
    if (d < 0)
        return NULL;
    cv_item *it = cv_new_item(p, CV_COPY, e);
    if (!it || !(it->name = tq_strdup(name, e)) || !(it->source = tq_strdup(t0->name, e)) ||
        !(it->parts = tq_calloc(g->n, sizeof *it->parts, e)))
        return NULL;
    int rowwise = g->mxfp4;
    for (size_t k = 0; k < g->n; k++)
        rowwise |= g->src[k].stride != 0 || g->src[k].cstride != 0;
    uint64_t per = total / g->n; /* elements of one piece */
    it->E = g->n;
    it->rowwise = rowwise;
    it->rows = rowwise ? g->rows : 1;
    it->cols = rowwise ? g->cols : per;
    it->src_dtype = g->dtype;
    it->out_dtype = out_dt;
    it->mxfp4 = g->mxfp4;
    it->add = g->add;
    for (size_t k = 0; k < g->n; k++) {
        it->parts[k].src = g->src[k].t;
        it->parts[k].scales = g->src[k].scales;
        it->parts[k].src_off = g->src[k].off;
        it->parts[k].stride = g->src[k].stride;
        it->parts[k].cstride = g->src[k].cstride;
        it->parts[k].out = d;
        it->parts[k].out_off = k * per;
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
    char *bname = tq_asprintf(e, "%s.bias", P);
    if (!bname)
        return -1;
    for (size_t k = 0; k < ng; k++)
        if (!groups[k].planned && !strcmp(groups[k].out_name, bname)) {
            cv_item *b = plan_copy(p, &groups[k], bname, dt, e);
            if (!b) {
                free(bname);
                return -1;
            }
            b->bias_of_quant = 1;
            groups[k].planned = 1;
        }
    free(bname);
    return 0;
}

/* An item packing E [out, in] matrices of group g into U32 words (declaration dw, `words` per
 * row): its geometry and one part per matrix (expert k's own tensor, or slice k of a stacked one). */
static void packed_parts(cv_item *it, const cv_group *g, uint64_t E, uint64_t out, uint64_t in, long dw,
                         uint64_t words)
{
    it->E = E;
    it->rows = out;
    it->cols = in;
    it->src_dtype = g->dtype;
    it->mxfp4 = g->mxfp4;
    it->out_dtype = TQ_DT_U32;
    for (uint64_t k = 0; k < E; k++) {
        const cv_src *s = &g->src[g->experts ? k : 0];
        it->parts[k].src = s->t;
        it->parts[k].scales = s->scales;
        it->parts[k].src_off = g->experts ? s->off : k * out * in;
        it->parts[k].stride = s->stride;
        it->parts[k].cstride = s->cstride;
        it->parts[k].out = dw;
        it->parts[k].out_off = k * out * words;
    }
}

/* MLX affine module P (man tq-formats(5), MLX AFFINE WEIGHTS): P.weight U32, P.scales and
 * P.biases in the weight's dtype (--dtype, else the input's; f64 becomes f32, which MLX
 * computes in), and its bias as an unquantized tensor. */
static int plan_affine(cv_plan *p, cv_group *groups, size_t ng, size_t gi, const char *P, int bits, size_t gs,
                       tq_err *e)
{
    const cv_group *g = &groups[gi];
    const tq_tensor_info *t0 = &g->src[0].t->info;
    uint64_t E = g->experts ? g->n : g->ndim == 3 ? g->shape[0] : 1;
    uint64_t out = g->shape[g->ndim - 2], in = g->shape[g->ndim - 1];
    tq_dtype qdt = copy_dtype(p->o, g);
    if (qdt == TQ_DT_F64)
        qdt = TQ_DT_F32;
    uint64_t words = in / (32 / (uint64_t)bits), ngr = in / gs;
    uint64_t sw[3] = {E, out, words}, ss[3] = {E, out, ngr};
    int nd = g->ndim == 3 ? 3 : 2;
    char *nm_s = tq_asprintf(e, "%s.scales", P), *nm_b = tq_asprintf(e, "%s.biases", P);
    long dw = nm_s && nm_b ? cv_declare(p, g->out_name, TQ_DT_U32, nd, nd == 3 ? sw : sw + 1, e) : -1;
    long ds = dw >= 0 ? cv_declare(p, nm_s, qdt, nd, nd == 3 ? ss : ss + 1, e) : -1;
    long db = ds >= 0 ? cv_declare(p, nm_b, qdt, nd, nd == 3 ? ss : ss + 1, e) : -1;
    free(nm_s), free(nm_b);
    if (db < 0)
        return -1;
    cv_item *it = cv_new_item(p, CV_AFFINE, e);
    if (!it || !(it->name = tq_strdup(g->out_name, e)) || !(it->source = tq_strdup(t0->name, e)) ||
        !(it->parts = tq_calloc(E, sizeof *it->parts, e)))
        return -1;
    packed_parts(it, g, E, out, in, dw, words);
    it->qdtype = qdt;
    it->affine_rule = p->o->affine_rule;
    it->bits = bits;
    it->group = gs;
    it->out_scales = ds;
    it->out_biases = db;
    return claim_bias(p, groups, ng, P, copy_dtype(p->o, g), e);
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
    const tq_tensor_info *t0 = &g->src[0].t->info;
    uint64_t in = g->shape[g->ndim - 1];
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
    /* with a known family: its class's linear layers, embeddings and routers, nothing else
     * (a conv1d or a MultiLinear is no module mlx-lm's quantize reaches as a Linear) */
    if (!note && p->family && !is_embedding(P) && !is_router(P) && !tq_family_is_linear(p->family, P))
        note = tq_family_keep_reason(p->family, g->out_name) ? tq_family_keep_reason(p->family, g->out_name)
                                                              : "not a linear layer of the model class";
    if (note) {
        cv_item *it = plan_copy(p, g, g->out_name, copy_dtype(o, g), e);
        if (!it)
            return -1;
        it->note = note;
        return keep_hit >= 0 && in % gs == 0 ? add_override(p, P, 0, 0, NULL, e) : 0;
    }
    if (!convertible(g->dtype))
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': dtype %s cannot be quantized (F16, BF16, F32, F64 can; --keep copies it)",
                       p->m->path, t0->name, tq_dtype_name(g->dtype));
    if ((bits != o->bits || gs != o->group_size) && add_override(p, P, bits, gs, NULL, e))
        return -1;
    return plan_affine(p, groups, ng, gi, P, bits, gs, e);
}

/* Quantize mode: one group. */
static int plan_quant_group(cv_plan *p, cv_group *groups, size_t ng, size_t gi, tq_err *e)
{
    const tq_convert_opts *o = p->o;
    cv_group *g = &groups[gi];
    const tq_tensor_info *t0 = &g->src[0].t->info;
    const char *name = g->out_name;
    int is_linear = ends_with(name, ".weight") && (g->experts ? g->ndim == 3 : g->ndim == 2 || g->ndim == 3) &&
                    g->add == 0.0f;
    if (!is_linear) /* (a quantized module's bias was planned with it) */
        return plan_copy(p, g, name, copy_dtype(o, g), e) ? 0 : -1;
    uint64_t E = g->experts ? g->n : g->ndim == 3 ? g->shape[0] : 1;
    uint64_t out = g->shape[g->ndim - 2], in = g->shape[g->ndim - 1];
    size_t plen = strlen(name) - 7;
    char *P = tq_malloc(plen + 1, e);
    if (!P)
        return -1;
    memcpy(P, name, plen);
    P[plen] = 0;
    int rc = -1, keep_hit, bits_hit;
    const char *note = rule_note(p->family, name, P, out, in, o->group_size);
    if (regex_any(o->keep_re, o->n_keep, name, t0->name, e, &keep_hit) ||
        regex_any(o->bits_for_re, o->n_bits_for, name, t0->name, e, &bits_hit))
        goto out;
    if (o->method == TQ_METHOD_AFFINE) {
        rc = plan_affine_group(p, groups, ng, gi, P, keep_hit, bits_hit, e);
        goto out;
    }
    /* --embed affine4|affine8: the embedding table as MLX affine beside TurboQuant linears */
    if (is_embedding(P) && o->embed > 0 && keep_hit < 0 && in % o->group_size == 0 && convertible(g->dtype)) {
        rc = add_override(p, P, o->embed, o->group_size, "affine", e) ? -1
             : plan_affine(p, groups, ng, gi, P, o->embed, o->group_size, e);
        goto out;
    }
    if (!note && keep_hit >= 0)
        note = "--keep";
    if (note) {
        cv_item *it = plan_copy(p, g, name, copy_dtype(o, g), e);
        if (!it)
            goto out;
        it->note = note;
        if (keep_hit >= 0 && !rule_note(p->family, name, P, out, in, o->group_size) && add_override(p, P, 0, 0, NULL, e))
            goto out;
        rc = 0;
        goto out;
    }
    if (!convertible(g->dtype)) {
        tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': dtype %s cannot be quantized (F16, BF16, F32, F64 can; --keep copies it)",
                p->m->path, t0->name, tq_dtype_name(g->dtype));
        goto out;
    }
    int bits = bits_hit >= 0 ? o->bits_for_bits[bits_hit] : o->bits;
    if (bits != o->bits && add_override(p, P, bits, o->group_size, NULL, e))
        goto out;
    uint64_t words = tq_pack_words(in, bits), ng_ = in / o->group_size;
    uint64_t sw[3] = {E, out, words}, ss[3] = {E, out, ng_}, sc[1] = {1ull << bits}, sg[1] = {in};
    int nd = g->ndim == 3 ? 3 : 2;
    const uint64_t *wsh = nd == 3 ? sw : sw + 1, *ssh = nd == 3 ? ss : ss + 1;
    uint64_t chk;
    if (tq_mul_u64(E, out, &chk) || tq_mul_u64(chk, in, &chk)) {
        tq_fail(e, TQ_EDATA, "%s: '%s': size overflows", p->m->path, name);
        goto out;
    }
    char *nm_s = tq_asprintf(e, "%s.scales", P), *nm_c = tq_asprintf(e, "%s.codebook", P),
         *nm_g = tq_asprintf(e, "%s.signs", P);
    long dw = nm_s && nm_c && nm_g ? cv_declare(p, name, TQ_DT_U32, nd, wsh, e) : -1;
    long ds = dw >= 0 ? cv_declare(p, nm_s, TQ_DT_F16, nd, ssh, e) : -1;
    long dc = ds >= 0 ? cv_declare(p, nm_c, TQ_DT_F16, 1, sc, e) : -1;
    long dg = dc >= 0 ? cv_declare(p, nm_g, TQ_DT_F16, 1, sg, e) : -1;
    free(nm_s), free(nm_c), free(nm_g);
    if (dg < 0)
        goto out;
    cv_item *it = cv_new_item(p, CV_QUANT, e);
    if (!it || !(it->name = tq_strdup(name, e)) || !(it->source = tq_strdup(t0->name, e)) ||
        !(it->parts = tq_calloc(E, sizeof *it->parts, e)) || !(it->signs = tq_malloc(in * sizeof *it->signs, e)))
        goto out;
    packed_parts(it, g, E, out, in, dw, words);
    it->bits = bits;
    it->group = o->group_size;
    it->block = tq_hadamard_block(in);
    it->cb = &p->cbs[bits];
    it->scale_method = o->scale;
    it->out_scales = ds;
    it->out_codebook = dc;
    it->out_signs = dg;
    if (o->rotation_none) { /* all-ones signs, no Hadamard: what TurboQuant-MLX writes for "none" */
        for (uint64_t j = 0; j < in; j++)
            it->signs[j] = 1.0f;
        it->norot = 1;
    } else {
        tq_signs_module(o->seed, P, it->signs, in);
    }
    /* its bias, stacked like the weight, stored F16 (man tq-formats(5), TURBOQUANT WEIGHTS) */
    rc = claim_bias(p, groups, ng, P, TQ_DT_F16, e);
out:
    free(P);
    return rc;
}

/* ------------------------------------------------------------------ entry */
/* The input must be unquantized float, except what this converter decodes exactly itself
 * (gpt-oss's MXFP4 experts, whose config carries quant_method "mxfp4"). */
static int already_quantized(const tq_model *m, tq_err *e)
{
    const cJSON *c = m->config, *tc = c ? tq_family_text_config(c) : NULL;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(c, "quantization");
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(c, "quantization_config");
    if (!q && !qc && tc != c) {
        q = cJSON_GetObjectItemCaseSensitive(tc, "quantization");
        qc = cJSON_GetObjectItemCaseSensitive(tc, "quantization_config");
    }
    const cJSON *meth = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
    int mxfp4 = !q && cJSON_IsString(meth) && !strcmp(meth->valuestring, "mxfp4") && tq_family_detect(c) &&
                tq_family_detect(c)->store == TQ_EXP_MXFP4;
    if ((q || qc) && !mxfp4)
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
    p->family = o->keep_names ? NULL : tq_family_detect(m->config);
    if (m->config && tq_family_config_check(tq_family_detect(m->config), m->config, m->path, e) != 0)
        return -1;
    if (o->mode == TQ_CONVERT_DEQUANTIZE)
        return cv_plan_dequant(p, e);
    if (o->mode == TQ_CONVERT_QUANTIZE && already_quantized(m, e))
        return -1;
    cv_group *g;
    size_t ng;
    if (cv_groups_build(m, o->keep_names || o->mode == TQ_CONVERT_PLAIN, &g, &ng, &p->n_dropped, e))
        return -1;
    int rc = 0;
    if (o->mode == TQ_CONVERT_PLAIN) {
        for (size_t i = 0; i < ng && !rc; i++)
            rc = plan_copy(p, &g[i], g[i].out_name, copy_dtype(o, &g[i]), e) ? 0 : -1;
        cv_groups_free(g, ng);
        return rc;
    }
    for (int b = 1; b <= TQ_MAX_BITS && !rc; b++)
        rc = tq_codebook_lloyd_max(b, &p->cbs[b], e);
    /* weights before biases so a quantized module claims its bias first */
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (size_t i = 0; i < ng && !rc; i++) {
            if (g[i].planned || ends_with(g[i].out_name, ".bias") != pass)
                continue;
            rc = plan_quant_group(p, g, ng, i, e);
        }
    cv_groups_free(g, ng);
    return rc;
}

void cv_plan_free(cv_plan *p)
{
    for (size_t i = 0; i < p->n_items; i++) {
        free(p->items[i].name);
        free(p->items[i].source);
        free(p->items[i].parts);
        free(p->items[i].signs);
        free(p->items[i].choices);
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
