/* Which tensors are routed experts (or dense FFN weights), which stay pinned, and how every
 * layer file is laid out. Pure planning: reads tensor metadata only. */
#include "layout/split/split_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint32_t layer;
    int routed;            /* 1 = routed expert (naming says how), 0 = dense FFN */
    int naming;
    uint64_t expert;       /* HF only */
    int rank;
    size_t prefix_len;
    const tq_model_tensor *t;
} entry;

/* A rank of the gate, up and down tensors every form has (not fused gate_up, not MXFP4
 * blocks, which only a family's fused layers hold). */
static int plain_rank(int rank)
{
    return rank >= 0 && rank / TQ_FLASH_NSUFFIX != TQ_FLASH_GATE_UP && TQ_FLASH_SUFFIX(rank) != tq_flash_suffixes[1]
               ? rank
               : -1;
}

/* "PROJ.SUFFIX" (nothing after) -> rank, or -1. */
static int tail_rank(const char *s)
{
    const char *dot = strchr(s, '.');
    if (!dot || strchr(dot + 1, '.') || dot - s >= 16)
        return -1;
    char proj[16];
    memcpy(proj, s, (size_t)(dot - s));
    proj[dot - s] = 0;
    return plain_rank(tq_flash_slot_rank(proj, dot + 1));
}

/* Classify one name without a family (the layout tq has always read: mlp.experts.E.*,
 * mlp.switch_mlp.*, mlp.* under any "layers.N." path); 0 = an FFN/expert tensor (filled),
 * 1 = pinned. */
static int classify_generic(const char *name, entry *en)
{
    const char *p = name;
    for (;;) {
        const char *l = strstr(p, "layers.");
        if (!l)
            return 1;
        if (l == name || l[-1] == '.') {
            uint64_t layer;
            const char *r = tq_parse_udec(l + 7, 1000000, &layer);
            if (r && *r == '.') {
                r++;
                en->layer = (uint32_t)layer;
                en->prefix_len = (size_t)(r - name);
                if (strncmp(r, "mlp.experts.", 12) == 0) {
                    const char *q = tq_parse_udec(r + 12, TQ_FLASH_MAX_EXPERTS - 1, &en->expert);
                    if (!q || *q != '.' || (en->rank = tail_rank(q + 1)) < 0)
                        return 1;
                    en->routed = 1;
                    en->naming = TQ_NAMING_HF;
                    return 0;
                }
                if (strncmp(r, "mlp.switch_mlp.", 15) == 0) {
                    if ((en->rank = tail_rank(r + 15)) < 0)
                        return 1;
                    en->routed = 1;
                    en->naming = TQ_NAMING_MLX;
                    en->expert = 0;
                    return 0;
                }
                if (strncmp(r, "mlp.", 4) == 0) {
                    if ((en->rank = tail_rank(r + 4)) < 0)
                        return 1;
                    en->routed = 0;
                    en->naming = TQ_NAMING_HF;
                    en->expert = 0;
                    return 0;
                }
                return 1;
            }
        }
        p = l + 7;
    }
}

/* Classify one name through the family table (formats/family.h): 0 = an FFN/expert tensor
 * (filled), 1 = pinned. Fused experts (HF gate_up_proj / down_proj, gpt-oss MXFP4 parts) are
 * stacked tensors like MLX's and keep their form: naming TQ_NAMING_FUSED, each expert's
 * slice one tensor of its block. MTP heads, routers, shared experts and their gates are
 * pinned; names the family does not explain fall back to the generic rules. */
static int classify(const tq_family *f, uint64_t n_layers, const char *name, entry *en)
{
    tq_name_info ni;
    tq_family_name(f, n_layers, name, &ni);
    switch (ni.role) {
    case TQ_ROLE_EXPERT:
    {
        int fused = ni.form == TQ_FORM_FUSED || ni.form == TQ_FORM_MXFP4 || ni.form == TQ_FORM_FUSED_XW;
        if (ni.layer > 1000000 || ni.expert >= TQ_FLASH_MAX_EXPERTS)
            return 1;
        /* a fused float tensor has no suffix: its expert slices are ".weight" in the block */
        en->rank = tq_flash_slot_rank(tq_family_proj_name(ni.proj), *ni.suffix ? ni.suffix : "weight");
        if (!fused)
            en->rank = plain_rank(en->rank);
        if (en->rank < 0) /* a stacked module's shared codebook / signs */
            return 1;
        en->layer = (uint32_t)ni.layer;
        en->prefix_len = ni.layer_len;
        en->routed = 1;
        en->naming = ni.form == TQ_FORM_FUSED_XW ? TQ_NAMING_FUSED_XW
                     : fused                  ? TQ_NAMING_FUSED
                     : ni.form == TQ_FORM_SEPARATE ? TQ_NAMING_HF
                                                   : TQ_NAMING_MLX;
        en->expert = ni.form == TQ_FORM_SEPARATE ? ni.expert : 0;
        return 0;
    }
    case TQ_ROLE_MTP:
    case TQ_ROLE_ROUTER:
    case TQ_ROLE_SHARED:
    case TQ_ROLE_SHARED_GATE:
        return 1;
    default: {
        int c = classify_generic(name, en);
        /* a MoE family's experts are only where the family keeps them */
        return c == 0 && en->routed && f && f->store != TQ_EXP_NONE ? 1 : c;
    }
    }
}

/* A pinned tensor that nonetheless holds routed-expert bytes: named like an expert by some
 * family, and neither a stacked module's shared codebook / signs nor part of the MTP head. */
static int expert_left_pinned(const tq_family *f, uint64_t n_layers, const char *name)
{
    tq_name_info ni;
    tq_family_name(f, n_layers, name, &ni);
    if (ni.role == TQ_ROLE_MTP || ni.role == TQ_ROLE_SHARED || ni.role == TQ_ROLE_ROUTER ||
        ni.role == TQ_ROLE_SHARED_GATE || !tq_family_looks_like_expert(name))
        return 0;
    const char *dot = strrchr(name, '.');
    return !(dot && (!strcmp(dot, ".codebook") || !strcmp(dot, ".signs")));
}

/* The source name of expert x's tensor of slot rank in layer L (HF per-expert naming). */
static void hf_expert_name(const split_plan *p, const split_layer *L, uint64_t x, int rank, char *buf, size_t cap)
{
    const tq_family *f = p->names;
    const char *proj = f->hf_proj[rank / TQ_FLASH_NSUFFIX] ? f->hf_proj[rank / TQ_FLASH_NSUFFIX] : TQ_FLASH_PROJ(rank);
    const char *blk = f->moe_block && *f->moe_block ? f->moe_block : "";
    snprintf(buf, cap, "%s%s%sexperts.%llu.%s.%s", L->prefix, blk, *blk ? "." : "", (unsigned long long)x, proj,
             TQ_FLASH_SUFFIX(rank));
}

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->expert != y->expert)
        return x->expert < y->expert ? -1 : 1;
    return strcmp(x->t->info.name, y->t->info.name);
}

static void shape_str(const tq_tensor_info *t, char *buf, size_t cap)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "%s [", tq_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* Build one slot of one layer from its entries [a, b) (same layer, same rank). */
static int build_slot(split_plan *p, split_layer *L, entry *en, size_t a, size_t b, uint64_t *n_exp, tq_err *e)
{
    split_slot *s = &L->slots[L->n_slots++];
    s->rank = en[a].rank;
    const tq_tensor_info *t0 = &en[a].t->info;
    if (p->kind == TQ_FLASH_DENSE || L->naming != TQ_NAMING_HF) {
        if (b - a != 1) /* impossible with unique names, but keep the invariant explicit */
            return tq_fail(e, TQ_EDATA, "%s: layer %u: tensor '%s' appears twice", p->m->path, L->layer, t0->name);
        if (p->kind == TQ_FLASH_MOE) {
            s->stacked = en[a].t;
            if (t0->ndim < 1 || t0->shape[0] == 0)
                return tq_fail(e, TQ_EDATA, "%s: tensor '%s': a stacked expert tensor needs a non-empty expert axis first",
                               p->m->path, t0->name);
            *n_exp = t0->shape[0];
            if (t0->nbytes % t0->shape[0])
                return tq_fail(e, TQ_EDATA, "%s: tensor '%s': %llu bytes do not split into %llu experts", p->m->path,
                               t0->name, (unsigned long long)t0->nbytes, (unsigned long long)t0->shape[0]);
            s->expert_bytes = t0->nbytes / t0->shape[0];
        } else {
            s->per_expert = tq_calloc(1, sizeof *s->per_expert, e);
            if (!s->per_expert)
                return -1;
            s->per_expert[0] = en[a].t;
            s->expert_bytes = t0->nbytes;
            *n_exp = 1;
        }
        return 0;
    }
    /* HF per-expert names: experts 0..E-1 each exactly once, identical dtype and shape. */
    uint64_t top = en[b - 1].expert + 1;
    if (top > TQ_FLASH_MAX_EXPERTS)
        return tq_fail(e, TQ_EDATA, "%s: layer %u: too many experts", p->m->path, L->layer);
    s->per_expert = tq_calloc((size_t)top, sizeof *s->per_expert, e);
    if (!s->per_expert)
        return -1;
    for (size_t i = a; i < b; i++)
        s->per_expert[en[i].expert] = en[i].t;
    for (uint64_t x = 0; x < top; x++) {
        if (!s->per_expert[x]) {
            char miss[400];
            hf_expert_name(p, L, x, s->rank, miss, sizeof miss);
            return tq_fail(e, TQ_EDATA, "%s: layer %u: expert %llu has no %s.%s tensor ('%s' is missing)", p->m->path,
                           L->layer, (unsigned long long)x, TQ_FLASH_PROJ(s->rank), TQ_FLASH_SUFFIX(s->rank),
                           miss);
        }
        const tq_tensor_info *t = &s->per_expert[x]->info;
        int same = t->dtype == t0->dtype && t->ndim == t0->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = t->shape[d] == t0->shape[d];
        if (!same) {
            char s1[160], s2[160];
            shape_str(t, s1, sizeof s1);
            shape_str(t0, s2, sizeof s2);
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s but '%s' is %s: experts of one layer must have identical shapes",
                           p->m->path, t->name, s1, t0->name, s2);
        }
    }
    s->expert_bytes = t0->nbytes;
    *n_exp = top;
    return 0;
}

static const split_slot *slot_of(const split_layer *L, int proj, int suffix)
{
    for (int i = 0; i < L->n_slots; i++)
        if (L->slots[i].rank == proj * TQ_FLASH_NSUFFIX + suffix)
            return &L->slots[i];
    return NULL;
}

/* A layer of fused experts holds exactly the family's fused tensors with the shapes the
 * config gives: gate_up [E, 2I, H] and down [E, H, I] (floats), or for gpt-oss MXFP4 blocks
 * [E, out, in/32, 16], scales [E, out, in/32] and biases [E, out] of gate_up (out 2I, in H)
 * and down (out H, in I). I and H come from config.json (the family's expert-width key and
 * hidden_size), else from down_proj. */
static int check_fused(const split_plan *p, const split_layer *L, uint64_t n_exp, tq_err *e)
{
    const tq_family *f = p->names;
    const int mx = f->store == TQ_EXP_MXFP4;
    /* suffixes present per projection: weight (float) or blocks, scales, bias (MXFP4) */
    static const int sfx_float[] = {0}, sfx_mx[] = {1, 2, 4};
    const int *sfx = mx ? sfx_mx : sfx_float;
    int n_sfx = mx ? 3 : 1;
    const split_slot *down0 = slot_of(L, TQ_FLASH_DOWN, sfx[0]);
    uint64_t H = 0, I = 0;
    if (down0 && down0->stacked->info.ndim >= 3) {
        H = down0->stacked->info.shape[1];
        I = down0->stacked->info.shape[2] * (mx ? 32 : 1);
    }
    int have_i = f->moe_inter_key && tq_family_cfg_u64(p->m->config, f->moe_inter_key, &I, e) == 0;
    int have_h = tq_family_cfg_u64(p->m->config, "hidden_size", &H, e) == 0;
    for (int k = 0; k < 2; k++) {
        int proj = k ? TQ_FLASH_DOWN : TQ_FLASH_GATE_UP;
        uint64_t out = k ? H : 2 * I, in = k ? I : H;
        for (int j = 0; j < n_sfx; j++) {
            const split_slot *sl = slot_of(L, proj, sfx[j]);
            char want[160], got[160], src[96] = "from down_proj";
            uint64_t shape[4] = {n_exp, out, sfx[j] == 0 ? in : in / 32, 16};
            int nd = sfx[j] == 0 ? 3 : sfx[j] == 1 ? 4 : sfx[j] == 2 ? 3 : 2;
            if (!sl) {
                const char *blk = tq_family_fused_block(f);
                return tq_fail(e, TQ_EDATA, "%s: layer %u: '%s%s%sexperts.%s%s%s' is missing (the %s experts are fused)",
                               p->m->path, L->layer, L->prefix, blk, *blk ? "." : "", tq_flash_projs[proj], mx ? "_" : "",
                               mx ? tq_flash_suffixes[sfx[j]] : "", f->name);
            }
            const tq_tensor_info *t = &sl->stacked->info;
            int ok = t->ndim == nd && (!mx || in % 32 == 0);
            for (int d = 0; ok && d < nd; d++)
                ok = t->shape[d] == shape[d];
            if (ok)
                continue;
            size_t o = (size_t)snprintf(want, sizeof want, "[");
            for (int d = 0; d < nd && o < sizeof want; d++)
                o += (size_t)snprintf(want + o, sizeof want - o, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
            if (o < sizeof want)
                snprintf(want + o, sizeof want - o, "]");
            shape_str(t, got, sizeof got);
            if (have_i || have_h)
                snprintf(src, sizeof src, "%s%s%s%s", have_i ? f->moe_inter_key : "", have_i && have_h ? " and " : "",
                         have_h ? "hidden_size" : "", " of config.json");
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s but %llu fused experts of width %llu and hidden size %llu "
                           "(%s) need %s", p->m->path, t->name, got, (unsigned long long)n_exp, (unsigned long long)I,
                           (unsigned long long)H, src, want);
        }
    }
    return 0;
}

/* A layer of gpt-oss experts as transformers saves them in float (formats/family.h, xw_fused;
 * transformers models/gpt_oss/modeling_gpt_oss.py, GptOssExperts: gate_up_proj [E, H, 2I],
 * gate_up_proj_bias [E, 2I], down_proj [E, I, H], down_proj_bias [E, H], float) becomes the
 * blocks a split of mlx-lm's form has: gate_proj, up_proj, down_proj .weight [out, in] and
 * .bias, gathered per expert (tq_flash_xw_part), so the streaming engines see the same bytes.
 * I and H come from config.json (the family's expert-width key and hidden_size). */
static int xw_slots(split_plan *p, split_layer *L, uint64_t n_exp, tq_err *e)
{
    const tq_family *f = p->names;
    uint64_t H = 0, I = 0;
    if (tq_family_cfg_u64(p->m->config, f->moe_inter_key, &I, e) != 0 ||
        tq_family_cfg_u64(p->m->config, "hidden_size", &H, e) != 0)
        return tq_fail(e, TQ_EDATA, "%s: config.json needs %s and hidden_size for the %s experts in transformers' "
                       "float layout", p->m->path, f->moe_inter_key, f->name);
    static const char *const what[4] = {"gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"};
    const int proj[4] = {TQ_FLASH_GATE_UP, TQ_FLASH_GATE_UP, TQ_FLASH_DOWN, TQ_FLASH_DOWN}, sfx[4] = {0, 4, 0, 4};
    const uint64_t shape[4][3] = {{n_exp, H, 2 * I}, {n_exp, 2 * I, 0}, {n_exp, I, H}, {n_exp, H, 0}};
    const split_slot *src[4];
    for (int k = 0; k < 4; k++) {
        src[k] = slot_of(L, proj[k], sfx[k]);
        const char *blk = *f->moe_block ? f->moe_block : "";
        if (!src[k])
            return tq_fail(e, TQ_EDATA, "%s: layer %u: '%s%s%sexperts.%s' is missing (the %s experts in transformers' "
                           "float layout)", p->m->path, L->layer, L->prefix, blk, *blk ? "." : "", what[k], f->name);
        const tq_tensor_info *t = &src[k]->stacked->info;
        int nd = shape[k][2] ? 3 : 2, ok = t->ndim == nd && (t->dtype == TQ_DT_F32 || t->dtype == TQ_DT_F16 ||
                                                               t->dtype == TQ_DT_BF16);
        for (int d = 0; ok && d < nd; d++)
            ok = t->shape[d] == shape[k][d];
        if (!ok) {
            char got[160], want[96];
            shape_str(t, got, sizeof got);
            int o = snprintf(want, sizeof want, "[%llu, %llu", (unsigned long long)n_exp, (unsigned long long)shape[k][1]);
            snprintf(want + o, sizeof want - (size_t)o, nd == 3 ? ", %llu]" : "]", (unsigned long long)shape[k][2]);
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %s but %llu experts of width %llu and hidden size %llu "
                           "(%s and hidden_size of config.json; transformers' GptOssExperts, used as x @ W) need "
                           "floats %s", p->m->path, t->name, got, (unsigned long long)n_exp, (unsigned long long)I,
                           (unsigned long long)H, f->moe_inter_key, want);
        }
    }
    for (int k = 0; k < L->n_slots; k++) /* anything else named like these experts */
        if (&L->slots[k] != src[0] && &L->slots[k] != src[1] && &L->slots[k] != src[2] && &L->slots[k] != src[3])
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' sits with the %s experts in transformers' float layout, which "
                           "are exactly %s, %s, %s and %s", p->m->path, L->slots[k].stacked->info.name, f->name,
                           what[0], what[1], what[2], what[3]);
    /* block order (tq_flash_slot_rank): gate .weight .bias, up .weight .bias, down .weight .bias */
    const split_slot gu = *src[0], gub = *src[1], dn = *src[2], dnb = *src[3];
    const struct { const split_slot *s; int proj, sfx, xw; } out[6] = {
        {&gu, TQ_FLASH_GATE, 0, 1 + TQ_XW_GATE_W}, {&gub, TQ_FLASH_GATE, 4, 1 + TQ_XW_GATE_B},
        {&gu, TQ_FLASH_UP, 0, 1 + TQ_XW_UP_W},     {&gub, TQ_FLASH_UP, 4, 1 + TQ_XW_UP_B},
        {&dn, TQ_FLASH_DOWN, 0, 1 + TQ_XW_DOWN_W}, {&dnb, TQ_FLASH_DOWN, 4, 0}};
    for (int k = 0; k < 6; k++) {
        split_slot *s = &L->slots[k];
        *s = *out[k].s;
        s->rank = out[k].proj * TQ_FLASH_NSUFFIX + out[k].sfx;
        s->xw = out[k].xw;
        if (s->xw)
            s->xwp = tq_flash_xw_part(s->xw - 1, I, H);
    }
    L->n_slots = 6;
    return 0;
}

static int layout_layer(split_plan *p, split_layer *L, uint64_t n_exp, const tq_split_opts *o, tq_err *e)
{
    const int moe = p->kind == TQ_FLASH_MOE;
    const split_profile *pr = split_profile_get(p->target);
    if (!(L->file = tq_asprintf(e, "%s/%s%02u.bin", moe ? pr->expert_dir : "ffn_aligned", moe ? pr->file_prefix : "layer_",
                                L->layer)))
        return -1;
    tq_flash_header *h = &L->hdr;
    h->kind = p->kind;
    h->page_size = p->align;
    h->layer_idx = L->layer;
    h->num_experts = moe ? n_exp : 0;
    h->tensors = tq_calloc((size_t)L->n_slots, sizeof *h->tensors, e);
    if (!h->tensors)
        return -1;
    h->n_tensors = (size_t)L->n_slots;
    for (int i = 0; i < L->n_slots; i++) {
        const split_slot *s = &L->slots[i];
        tq_flash_tensor *t = &h->tensors[i];
        const tq_tensor_info *src = s->stacked ? &s->stacked->info : &s->per_expert[0]->info;
        if (!(t->name = tq_asprintf(e, "%s%s%s.%s", !moe || pr->mlp_prefix ? "mlp." : "", moe ? "switch_mlp." : "",
                                    TQ_FLASH_PROJ(s->rank), TQ_FLASH_SUFFIX(s->rank))))
            return -1;
        t->dtype = src->dtype;
        int skip = s->stacked ? 1 : 0;
        t->ndim = src->ndim - skip;
        for (int d = 0; d < t->ndim; d++)
            t->shape[d] = src->shape[d + skip];
        if (s->xw) { /* gathered: mlx-lm's [out, in] weight or [out] bias */
            t->ndim = s->xwp.cols == 1 && s->xw > TQ_XW_DOWN_W ? 1 : 2;
            t->shape[0] = s->xwp.rows;
            t->shape[1] = s->xwp.cols;
        }
    }
    if (tq_flash_layout(h, e) != 0)
        return tq_err_prefix(e, "%s", L->file);
    char *json = tq_flash_header_json(h, L->file, e);
    if (!json)
        return -1;
    size_t n = strlen(json) + 1;
    free(json);
    if (o->test_header_pad && n + o->test_header_pad > h->page_size)
        return tq_fail(e, TQ_EDATA, "%s: header is %llu bytes and does not fit in its %llu-byte page (use a larger --align)",
                       L->file, (unsigned long long)(n + o->test_header_pad), (unsigned long long)h->page_size);
    return 0;
}

static uint64_t config_u64(const tq_model *m, const char *key, int *present)
{
    uint64_t v = 0;
    *present = 0;
    if (!m->config)
        return 0;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m->config, key);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m->config, "text_config");
    if (!c && cJSON_IsObject(tc))
        c = cJSON_GetObjectItemCaseSensitive(tc, key);
    if (c && tq_json_u64(c, &v) == 0)
        *present = 1;
    return v;
}

/* Which layers get a layer file. A model of a known MoE family whose config states its
 * expert count: exactly the layers its config makes MoE (first_k_dense_replace, mlp_only_layers, decoder_sparse_step...), wherever the
 * dense ones are; their dense MLPs, like shared experts, stay pinned. Without a family (or a
 * dense model): every layer 0..N-1, none skipped. en is sorted by layer. */
static int layer_set_check(const split_plan *p, const entry *en, size_t n_en, uint64_t n_hidden, tq_err *e)
{
    const tq_model *m = p->m;
    const int moe = p->kind == TQ_FLASH_MOE;
    uint64_t n_exp = 0;
    if (moe && p->fam && tq_family_num_experts(p->fam, m->config, &n_exp, e) != 0)
        return tq_err_prefix(e, "%s", m->path);
    if (moe && p->fam && p->fam->store != TQ_EXP_NONE && n_hidden && n_exp) {
        size_t i = 0;
        for (uint64_t l = 0; l < n_hidden; l++) {
            int want = tq_family_layer_is_moe(p->fam, m->config, l, e);
            if (want < 0)
                return tq_err_prefix(e, "%s", m->path);
            int have = i < n_en && en[i].layer == l;
            if (want && !have) {
                const char *n0 = en[0].t->info.name, *lp = strstr(n0, "layers.");
                return tq_fail(e, TQ_EDATA, "%s: config.json makes layer %llu a MoE layer (%s) but it has no routed "
                               "expert tensors ('%.*slayers.%llu.%s.gate_proj.weight' is missing)", m->path,
                               (unsigned long long)l, p->fam->name, lp ? (int)(lp - n0) : 0, n0,
                               (unsigned long long)l, p->names->mlx_container);
            }
            if (!want && have)
                return tq_fail(e, TQ_EDATA, "%s: tensor '%s': config.json makes layer %llu a dense layer but it has "
                               "routed experts", m->path, en[i].t->info.name, (unsigned long long)l);
            while (i < n_en && en[i].layer == l)
                i++;
        }
        if (i < n_en)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s': layer %u is past num_hidden_layers = %llu", m->path,
                           en[i].t->info.name, en[i].layer, (unsigned long long)n_hidden);
        return 0;
    }
    uint32_t li = 0;
    for (size_t a = 0; a < n_en; a++) {
        if (a && en[a].layer == en[a - 1].layer)
            continue;
        if (en[a].layer != li)
            return tq_fail(e, TQ_EUNSUP, "%s: layer %u has no %s tensors but layer %u has: only layers 0..N-1 all with %s "
                           "are supported", m->path, li, moe ? "routed expert" : "FFN", en[a].layer,
                           moe ? "experts (or a model family whose config.json says which layers are dense)" : "FFN tensors");
        li++;
    }
    return 0;
}

int split_plan_build(split_plan *p, tq_model *m, const tq_split_opts *o, tq_err *e)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    p->target = o->target;
    if (split_profile_check_opts(o, e) != 0)
        return -1;
    p->align = o->align ? o->align : TQ_FLASH_DEFAULT_ALIGN;
    if (p->align < TQ_FLASH_MIN_ALIGN || p->align > TQ_FLASH_MAX_ALIGN || (p->align & (p->align - 1)))
        return tq_fail(e, TQ_EUSAGE, "--align %llu is not a power of two in [%u, %u]",
                       (unsigned long long)p->align, TQ_FLASH_MIN_ALIGN, TQ_FLASH_MAX_ALIGN);
    entry *en = tq_calloc(m->n_tensors ? m->n_tensors : 1, sizeof *en, e);
    p->pinned = tq_calloc(m->n_tensors ? m->n_tensors : 1, sizeof *p->pinned, e);
    if (!en || !p->pinned) {
        free(en);
        return -1;
    }
    p->fam = tq_family_detect(m->config);
    if (m->config && tq_family_config_check(p->fam, m->config, m->path, e) != 0) {
        free(en);
        return -1;
    }
    p->names = p->fam && p->fam->store != TQ_EXP_NONE ? p->fam : tq_family_get(TQ_FAM_QWEN3_MOE);
    uint64_t n_hidden = 0;
    if (p->fam && tq_family_cfg_u64(m->config, "num_hidden_layers", &n_hidden, e) < 0) {
        free(en);
        return tq_err_prefix(e, "%s", m->path);
    }
    size_t n_en = 0, n_routed = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        entry x = {0};
        x.t = &m->tensors[i];
        int c = classify(p->fam, n_hidden, x.t->info.name, &x);
        if (c == 0) {
            en[n_en++] = x;
            n_routed += x.routed;
        } else {
            p->pinned[p->n_pinned++] = x.t;
        }
    }
    p->kind = n_routed ? TQ_FLASH_MOE : TQ_FLASH_DENSE;
    /* nothing named like a routed expert may stay in pinned.safetensors */
    for (size_t i = 0; i < p->n_pinned; i++)
        if (expert_left_pinned(p->fam, n_hidden, p->pinned[i]->info.name)) {
            tq_fail(e, TQ_EUNSUP, "%s: tensor '%s' is named like a routed expert but is not one tq-split can place in "
                    "a layer file (%s); it would stay in pinned.safetensors", m->path, p->pinned[i]->info.name,
                    p->fam ? p->fam->name : "no model family in config.json");
            free(en);
            return -1;
        }
    /* gpt-oss in transformers' float layout: its *_bias tensors, named like the MXFP4 form's,
     * belong to the x @ W experts of their layer (formats/family.h, xw_fused) */
    for (size_t i = 0; i < n_en; i++)
        for (size_t j = 0; en[i].naming == TQ_NAMING_FUSED_XW && j < n_en; j++)
            if (en[j].naming == TQ_NAMING_FUSED && en[j].layer == en[i].layer &&
                TQ_FLASH_SUFFIX(en[j].rank) == tq_flash_suffixes[4])
                en[j].naming = TQ_NAMING_FUSED_XW;
    /* In a MoE model, dense FFN layers (if any) stay pinned. */
    size_t k = 0;
    for (size_t i = 0; i < n_en; i++) {
        if (en[i].routed || p->kind == TQ_FLASH_DENSE)
            en[k++] = en[i];
        else
            p->pinned[p->n_pinned++] = en[i].t;
    }
    n_en = k;
    int rc = -1;
    if (n_en == 0) {
        tq_fail(e, TQ_EUNSUP, "%s: no expert or FFN tensors (model.layers.N.mlp.*) to split", m->path);
        goto out;
    }
    qsort(en, n_en, sizeof *en, cmp_entry);
    if (p->kind == TQ_FLASH_MOE) { /* the layers with experts, for targets that need them all */
        uint32_t *ls = tq_calloc(n_en, sizeof *ls, e);
        size_t nl = 0;
        if (!ls)
            goto out;
        for (size_t i = 0; i < n_en; i++)
            if (!nl || ls[nl - 1] != en[i].layer)
                ls[nl++] = en[i].layer;
        int bad = split_profile_check_layers(p, ls, nl, e);
        free(ls);
        if (bad)
            goto out;
    }
    /* pinned stays in name order (model tensors are name-sorted) */
    for (size_t i = 1; i < p->n_pinned; i++)
        for (size_t j = i; j > 0 && strcmp(p->pinned[j - 1]->info.name, p->pinned[j]->info.name) > 0; j--) {
            const tq_model_tensor *t = p->pinned[j];
            p->pinned[j] = p->pinned[j - 1];
            p->pinned[j - 1] = t;
        }
    for (size_t i = 0; i < p->n_pinned; i++)
        if (tq_add_u64(p->pinned_bytes, p->pinned[i]->info.nbytes, &p->pinned_bytes) != 0) {
            tq_fail(e, TQ_EDATA, "%s: pinned size overflows", m->path);
            goto out;
        }
    if (layer_set_check(p, en, n_en, n_hidden, e) != 0)
        goto out;
    p->layers = tq_calloc(en[n_en - 1].layer + 1u, sizeof *p->layers, e);
    if (!p->layers)
        goto out;
    for (size_t a = 0; a < n_en;) {
        size_t b = a;
        while (b < n_en && en[b].layer == en[a].layer)
            b++;
        split_layer *L = &p->layers[p->n_layers++];
        L->layer = en[a].layer;
        L->naming = en[a].naming;
        if (!(L->prefix = tq_malloc(en[a].prefix_len + 1, e)))
            goto out;
        memcpy(L->prefix, en[a].t->info.name, en[a].prefix_len);
        L->prefix[en[a].prefix_len] = 0;
        for (size_t i = a; i < b; i++) {
            if (en[i].prefix_len != en[a].prefix_len || strncmp(en[i].t->info.name, L->prefix, en[a].prefix_len)) {
                tq_fail(e, TQ_EDATA, "%s: layer %u: tensors '%s' and '%s' disagree on the name prefix", m->path,
                        L->layer, en[a].t->info.name, en[i].t->info.name);
                goto out;
            }
            if (en[i].naming != L->naming) {
                tq_fail(e, TQ_EDATA, "%s: layer %u mixes per-expert (experts.E.*) and stacked tensors ('%s', '%s')",
                        m->path, L->layer, en[a].t->info.name, en[i].t->info.name);
                goto out;
            }
        }
        uint64_t layer_exp = 0;
        for (size_t s = a; s < b;) {
            size_t t = s;
            while (t < b && en[t].rank == en[s].rank)
                t++;
            uint64_t n_exp = 0;
            if (build_slot(p, L, en, s, t, &n_exp, e) != 0)
                goto out;
            if (p->kind == TQ_FLASH_MOE && layer_exp && n_exp != layer_exp) {
                const split_slot *s0 = &L->slots[0], *s1 = &L->slots[L->n_slots - 1];
                if (L->naming == TQ_NAMING_HF) {
                    /* the slot with fewer experts lacks the first expert the other has */
                    const split_slot *sm = n_exp < layer_exp ? s1 : s0;
                    uint64_t x = n_exp < layer_exp ? n_exp : layer_exp;
                    char miss[400];
                    hf_expert_name(p, L, x, sm->rank, miss, sizeof miss);
                    tq_fail(e, TQ_EDATA, "%s: layer %u: expert %llu has no %s.%s tensor ('%s' is missing)", m->path,
                            L->layer, (unsigned long long)x, TQ_FLASH_PROJ(sm->rank),
                            TQ_FLASH_SUFFIX(sm->rank), miss);
                } else {
                    tq_fail(e, TQ_EDATA, "%s: layer %u: '%s' stacks %llu experts but '%s' stacks %llu", m->path,
                            L->layer, s1->stacked->info.name, (unsigned long long)n_exp, s0->stacked->info.name,
                            (unsigned long long)layer_exp);
                }
                goto out;
            }
            layer_exp = n_exp;
            s = t;
        }
        if (p->kind == TQ_FLASH_MOE) {
            if (p->num_experts && layer_exp != p->num_experts) {
                tq_fail(e, TQ_EDATA, "%s: expert count mismatch between layers: layer %u has %llu experts, layer %u has %llu",
                        m->path, p->layers[0].layer, (unsigned long long)p->num_experts, L->layer,
                        (unsigned long long)layer_exp);
                goto out;
            }
            p->num_experts = layer_exp;
        }
        if (L->naming == TQ_NAMING_FUSED && check_fused(p, L, layer_exp, e) != 0)
            goto out;
        if (L->naming == TQ_NAMING_FUSED_XW && xw_slots(p, L, layer_exp, e) != 0)
            goto out;
        if (layout_layer(p, L, layer_exp, o, e) != 0)
            goto out;
        if (tq_add_u64(p->ffn_bytes, L->hdr.total_size, &p->ffn_bytes) != 0) {
            tq_fail(e, TQ_EDATA, "%s: split size overflows", m->path);
            goto out;
        }
        if (L->hdr.total_size > p->max_file_size)
            p->max_file_size = L->hdr.total_size;
        a = b;
    }
    if (p->kind == TQ_FLASH_MOE) {
        int have;
        const char *ekey = p->fam && p->fam->experts_key ? p->fam->experts_key : "num_experts";
        uint64_t cfg_e = config_u64(m, ekey, &have);
        if (!have && !p->fam)
            cfg_e = config_u64(m, ekey = "num_local_experts", &have);
        if (have && cfg_e != p->num_experts) {
            const split_slot *s0 = &p->layers[0].slots[0];
            tq_fail(e, TQ_EDATA, "%s: config.json says %s = %llu but the layers have %llu experts (tensor '%s')", m->path,
                    ekey, (unsigned long long)cfg_e, (unsigned long long)p->num_experts,
                    s0->stacked ? s0->stacked->info.name : s0->per_expert[p->num_experts - 1]->info.name);
            goto out;
        }
        const char *topk_key = p->fam && p->fam->topk_key ? p->fam->topk_key : "num_experts_per_tok";
        p->top_k = o->top_k ? o->top_k : config_u64(m, topk_key, &have);
        if (!p->top_k) {
            if (m->source) /* GGUF: the config is made from its metadata */
                tq_fail(e, TQ_EDATA, "%s: the GGUF metadata has no ARCH.expert_used_count (%s); pass --top-k",
                        m->path, topk_key);
            else
                tq_fail(e, TQ_EDATA, "%s: config.json has no %s; pass --top-k", m->path, topk_key);
            goto out;
        }
        if (p->top_k > p->num_experts) {
            tq_fail(e, TQ_EDATA, "%s: top-k %llu is more than the %llu experts", m->path,
                    (unsigned long long)p->top_k, (unsigned long long)p->num_experts);
            goto out;
        }
    }
    if (split_profile_check(p, e) != 0 || split_profile_names(p, e) != 0)
        goto out;
    rc = 0;
out:
    free(en);
    return rc;
}

void split_plan_free(split_plan *p)
{
    for (size_t i = 0; i < p->n_layers; i++) {
        split_layer *L = &p->layers[i];
        for (int s = 0; s < L->n_slots; s++)
            free(L->slots[s].per_expert);
        free(L->prefix);
        free(L->file);
        free(L->block_sha);
        tq_flash_header_free(&L->hdr);
    }
    free(p->layers);
    for (size_t i = 0; p->pinned_names && i < p->n_pinned; i++)
        free(p->pinned_names[i]);
    free(p->pinned_names);
    free(p->pinned);
    memset(p, 0, sizeof *p);
}
