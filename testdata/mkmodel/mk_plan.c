/* Which tensors a generated checkpoint has: names and shapes exactly as HuggingFace's
 * Llama / Qwen3 / Qwen3-MoE checkpoints (or MLX's stacked experts), optionally with MLX
 * affine quantization of the linear layers. */
#include "testdata/mkmodel/mk_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct builder {
    tq_mk_plan *p;
    mk_plan_priv *pv;
    size_t cap_decls;
    const tq_mk_opts *o;
    tq_err *e;
} builder;

char *mk_item_key(const mk_item *it, uint64_t expert, tq_err *e)
{
    if (!it->key_suf)
        return tq_strdup(it->key_pre, e);
    return tq_asprintf(e, "%s%llu%s", it->key_pre, (unsigned long long)expert, it->key_suf);
}

static int add_decl(builder *b, const char *name, tq_dtype dt, int ndim, const uint64_t *shape)
{
    tq_mk_plan *p = b->p;
    if (p->n == b->cap_decls) {
        size_t cap = b->cap_decls ? 2 * b->cap_decls : 64;
        tq_st_decl *d = realloc(p->decls, cap * sizeof *d);
        if (!d)
            return tq_fail(b->e, TQ_ENOMEM, "out of memory");
        p->decls = d;
        b->cap_decls = cap;
    }
    tq_st_decl *d = &p->decls[p->n];
    memset(d, 0, sizeof *d);
    d->name = name; /* owned by the item */
    d->dtype = dt;
    d->ndim = ndim;
    uint64_t bytes = tq_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        d->shape[i] = shape[i];
        if (tq_mul_u64(bytes, shape[i], &bytes))
            return tq_fail(b->e, TQ_EUSAGE, "tensor '%s': size overflows", name);
    }
    if (tq_add_u64(p->total_bytes, bytes, &p->total_bytes))
        return tq_fail(b->e, TQ_EUSAGE, "model size overflows");
    p->n++;
    return 0;
}

/* Add an item; base = tensor path without ".weight". key_suf != NULL: stacked experts. */
static int add_item(builder *b, int kind, const char *base, uint64_t n_exp, uint64_t rows,
                    uint64_t cols, const char *key_pre, const char *key_suf, int quantizable)
{
    mk_plan_priv *pv = b->pv;
    const tq_mk_opts *o = b->o;
    if (pv->n_items == pv->cap_items) {
        size_t cap = pv->cap_items ? 2 * pv->cap_items : 64;
        mk_item *it = realloc(pv->items, cap * sizeof *it);
        if (!it)
            return tq_fail(b->e, TQ_ENOMEM, "out of memory");
        pv->items = it;
        pv->cap_items = cap;
    }
    mk_item *it = &pv->items[pv->n_items++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->n_exp = n_exp;
    it->rows = rows;
    it->cols = cols;
    it->widx[0] = it->widx[1] = it->widx[2] = -1;
    it->key_pre = tq_strdup(key_pre, b->e);
    if (!it->key_pre || (key_suf && !(it->key_suf = tq_strdup(key_suf, b->e))))
        return -1;
    if (quantizable && o->quant_bits && cols % (uint64_t)o->group_size == 0) {
        it->bits = o->quant_bits;
        it->group = o->group_size;
    }
    if (o->arch == TQ_MK_NGRAM) {
        it->bits = o->bits;
        it->group = o->group_size;
    }
    static const char *const sfx[3] = {"weight", "scales", "biases"};
    int nparts = it->bits ? 3 : 1;
    for (int k = 0; k < nparts; k++) {
        if (!(it->names[k] = tq_asprintf(b->e, "%s.%s", base, sfx[k])))
            return -1;
        uint64_t shape[3];
        int nd = 0;
        if (n_exp > 1 || key_suf)
            shape[nd++] = n_exp;
        if (kind == MK_LINEAR)
            shape[nd++] = rows;
        tq_dtype dt = o->dtype;
        uint64_t inner = cols;
        if (it->bits && k == 0) {
            dt = TQ_DT_U32;
            inner = cols * (uint64_t)it->bits / 32;
        } else if (it->bits) {
            inner = cols / (uint64_t)it->group;
        }
        shape[nd++] = inner;
        it->out_row_bytes[k] = inner * tq_dtype_size(dt);
        if (add_decl(b, it->names[k], dt, nd, shape))
            return -1;
    }
    return 0;
}

static int linear(builder *b, const char *base, uint64_t rows, uint64_t cols)
{
    char *key = tq_asprintf(b->e, "%s.weight", base);
    if (!key)
        return -1;
    int rc = add_item(b, MK_LINEAR, base, 1, rows, cols, key, NULL, 1);
    free(key);
    return rc;
}

/* Embeddings, routers: the recipe, never quantized. */
static int plain(builder *b, const char *base, uint64_t rows, uint64_t cols)
{
    char *key = tq_asprintf(b->e, "%s.weight", base);
    if (!key)
        return -1;
    int rc = add_item(b, MK_LINEAR, base, 1, rows, cols, key, NULL, 0);
    free(key);
    return rc;
}

static int norm(builder *b, const char *base, uint64_t n)
{
    char *key = tq_asprintf(b->e, "%s.weight", base);
    if (!key)
        return -1;
    int rc = add_item(b, MK_NORM, base, 1, 1, n, key, NULL, 0);
    free(key);
    return rc;
}

static int experts(builder *b, long L)
{
    const tq_mk_opts *o = b->o;
    static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
    uint64_t H = (uint64_t)o->hidden, I = (uint64_t)o->moe_intermediate, E = (uint64_t)o->experts;
    char base[256], pre[256], suf[64];
    for (int k = 0; k < 3; k++) {
        uint64_t rows = k == 2 ? H : I, cols = k == 2 ? I : H;
        if (o->naming_mlx) {
            snprintf(base, sizeof base, "model.layers.%ld.mlp.switch_mlp.%s", L, proj[k]);
            snprintf(pre, sizeof pre, "model.layers.%ld.mlp.experts.", L);
            snprintf(suf, sizeof suf, ".%s.weight", proj[k]);
            if (add_item(b, MK_LINEAR, base, E, rows, cols, pre, suf, 1))
                return -1;
        } else {
            for (uint64_t x = 0; x < E; x++) {
                snprintf(base, sizeof base, "model.layers.%ld.mlp.experts.%llu.%s", L,
                         (unsigned long long)x, proj[k]);
                if (linear(b, base, rows, cols))
                    return -1;
            }
        }
    }
    return 0;
}

static int layer(builder *b, long L)
{
    const tq_mk_opts *o = b->o;
    uint64_t H = (uint64_t)o->hidden, D = (uint64_t)o->head_dim;
    uint64_t Q = (uint64_t)o->heads * D, KV = (uint64_t)o->kv_heads * D;
    char p[256];
#define B(...) (snprintf(p, sizeof p, __VA_ARGS__), p)
    if (norm(b, B("model.layers.%ld.input_layernorm", L), H) ||
        norm(b, B("model.layers.%ld.post_attention_layernorm", L), H) ||
        linear(b, B("model.layers.%ld.self_attn.q_proj", L), Q, H) ||
        linear(b, B("model.layers.%ld.self_attn.k_proj", L), KV, H) ||
        linear(b, B("model.layers.%ld.self_attn.v_proj", L), KV, H) ||
        linear(b, B("model.layers.%ld.self_attn.o_proj", L), H, Q))
        return -1;
    if (o->arch != TQ_MK_LLAMA &&
        (norm(b, B("model.layers.%ld.self_attn.q_norm", L), D) ||
         norm(b, B("model.layers.%ld.self_attn.k_norm", L), D)))
        return -1;
    if (o->arch != TQ_MK_QWEN3_MOE) {
        uint64_t I = (uint64_t)o->intermediate;
        return linear(b, B("model.layers.%ld.mlp.gate_proj", L), I, H) ||
               linear(b, B("model.layers.%ld.mlp.up_proj", L), I, H) ||
               linear(b, B("model.layers.%ld.mlp.down_proj", L), H, I) ? -1 : 0;
    }
    if (plain(b, B("model.layers.%ld.mlp.gate", L), (uint64_t)o->experts, H) || experts(b, L))
        return -1;
    if (o->shared_expert) {
        uint64_t I = (uint64_t)o->intermediate;
        if (linear(b, B("model.layers.%ld.mlp.shared_expert.gate_proj", L), I, H) ||
            linear(b, B("model.layers.%ld.mlp.shared_expert.up_proj", L), I, H) ||
            linear(b, B("model.layers.%ld.mlp.shared_expert.down_proj", L), H, I) ||
            plain(b, B("model.layers.%ld.mlp.shared_expert_gate", L), 1, H))
            return -1;
    }
#undef B
    return 0;
}

/* Items in file order (tensors are laid out by name) so generation writes mostly forward. */
static int cmp_item(const void *a, const void *b)
{
    return strcmp(((const mk_item *)a)->names[0], ((const mk_item *)b)->names[0]);
}

static int cmp_decl(const void *a, const void *b)
{
    return strcmp(((const tq_st_decl *)a)->name, ((const tq_st_decl *)b)->name);
}

int tq_mk_plan_build(tq_mk_plan *p, const tq_mk_opts *o, tq_err *e)
{
    memset(p, 0, sizeof *p);
    if (tq_mk_validate(o, e))
        return -1;
    mk_plan_priv *pv = tq_calloc(1, sizeof *pv, e);
    if (!pv)
        return -1;
    p->priv = pv;
    builder b = {p, pv, 0, o, e};
    int rc = 0;
    if (o->arch == TQ_MK_NGRAM) {
        char *key = tq_asprintf(e, "%s.weight", o->prefix);
        rc = !key || add_item(&b, MK_LINEAR, o->prefix, 1, o->rows, (uint64_t)o->width, key, NULL, 1);
        free(key);
    } else {
        uint64_t H = (uint64_t)o->hidden, V = (uint64_t)o->vocab;
        rc = plain(&b, "model.embed_tokens", V, H) || norm(&b, "model.norm", H);
        for (long L = 0; !rc && L < o->layers; L++)
            rc = layer(&b, L);
        if (!rc && !o->tie_embeddings)
            rc = linear(&b, "lm_head", V, H);
    }
    if (rc) {
        tq_mk_plan_free(p);
        return -1;
    }
    qsort(p->decls, p->n, sizeof *p->decls, cmp_decl);
    qsort(pv->items, pv->n_items, sizeof *pv->items, cmp_item);
    return 0;
}

void tq_mk_plan_free(tq_mk_plan *p)
{
    mk_plan_priv *pv = p->priv;
    if (pv) {
        for (size_t i = 0; i < pv->n_items; i++) {
            mk_item *it = &pv->items[i];
            free(it->key_pre);
            free(it->key_suf);
            for (int k = 0; k < 3; k++)
                free(it->names[k]);
        }
        free(pv->items);
        free(pv);
    }
    free(p->decls);
    memset(p, 0, sizeof *p);
}
