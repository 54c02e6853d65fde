/* Split targets (man tq-split(1), TARGETS): what mac-code's flash-streaming engines and the
 * mlx-sniper command read, restated from their published readers (docs/compatibility.md,
 * mac-code and mlx-sniper), and the refusals that follow from it: a reader that computes only
 * MLX affine 4-bit group-64 experts, uses layer 0's layout for every layer, reads exactly
 * 16384 header bytes and opens an expert file for every layer cannot run a split that
 * breaks any of these, so tq-split refuses it with the reason instead of writing it. */
#include "layout/split/split_internal.h"

#include <stdlib.h>
#include <string.h>

static const split_profile profiles[TQ_TARGET_COUNT] = {
    [TQ_TARGET_TQ] = {"tq", "experts", "layer_", NULL, "experts/", 1, TQ_FLASH_MIN_ALIGN, 0, 0, 0},
    /* research/flash-streaming: split_mlx_model.py writes, expert_io.py reads, flash_moe.py
     * computes with gather_qmm(bits=4, group_size=64) on .weight/.scales/.biases */
    [TQ_TARGET_MAC_CODE] = {"mac-code", "experts", "layer_", NULL, "experts/", 1, 16384, 1, 1, 0},
    /* mlx_expert_sniper: preprocess.py writes bin/moe_layer_LL.bin and links layer_LL.bin to
     * it, its expert_io.py opens EXPERT_DIR/layer_LL.bin, engine.py names tensors without
     * "mlp." and has no dense path */
    [TQ_TARGET_MLX_SNIPER] = {"mlx-sniper", "bin", "moe_layer_", "layer_", "bin", 0, 16384, 1, 1, 1},
};

const char *tq_split_target_name(int target)
{
    return target >= 0 && target < TQ_TARGET_COUNT ? profiles[target].name : "?";
}

const split_profile *split_profile_get(int target)
{
    return &profiles[target >= 0 && target < TQ_TARGET_COUNT ? target : 0];
}

int split_profile_check_opts(const tq_split_opts *o, tq_err *e)
{
    if (o->target < 0 || o->target >= TQ_TARGET_COUNT)
        return tq_fail(e, TQ_EUSAGE, "unknown target %d", o->target);
    const split_profile *pr = split_profile_get(o->target);
    if (o->align && o->align < pr->min_page)
        return tq_fail(e, TQ_EUSAGE, "--align %llu: %s reads exactly %llu header bytes, so its pages cannot be smaller",
                       (unsigned long long)o->align, pr->name, (unsigned long long)pr->min_page);
    return 0;
}

static uint64_t text_u64(const tq_model *m, const char *key, int *have)
{
    *have = 0;
    const cJSON *tc = m->config ? cJSON_GetObjectItemCaseSensitive(m->config, "text_config") : NULL;
    const cJSON *v = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, key) : NULL;
    if (!v && m->config)
        v = cJSON_GetObjectItemCaseSensitive(m->config, key);
    uint64_t x = 0;
    if (v && tq_json_u64(v, &x) == 0)
        *have = 1;
    return x;
}

int split_profile_check_layers(const split_plan *p, const uint32_t *layers, size_t n, tq_err *e)
{
    const split_profile *pr = split_profile_get(p->target);
    if (p->target == TQ_TARGET_TQ || p->kind != TQ_FLASH_MOE)
        return 0;
    int have;
    uint64_t want = text_u64(p->m, "num_hidden_layers", &have);
    if (!have)
        return tq_fail(e, TQ_EDATA, "%s: config.json has no num_hidden_layers, which %s reads to open the layer files",
                       p->m->path, pr->name);
    for (uint64_t l = 0, i = 0; l < want; l++) {
        if (i < n && layers[i] == l) {
            i++;
            continue;
        }
        return tq_fail(e, TQ_EUNSUP,
                       "%s: layer %llu has no routed experts (a dense MLP): %s opens an expert file for every layer "
                       "0..%llu and cannot read this model",
                       p->m->path, (unsigned long long)l, pr->name, (unsigned long long)(want - 1));
    }
    if (n && layers[n - 1] >= want)
        return tq_fail(e, TQ_EDATA, "%s: layer %u has experts but num_hidden_layers is %llu", p->m->path,
                       layers[n - 1], (unsigned long long)want);
    return 0;
}

static const tq_flash_tensor *find_part(const tq_flash_header *h, int proj, int suffix)
{
    for (size_t i = 0; i < h->n_tensors; i++) {
        const char *n = h->tensors[i].name, *dot = strrchr(n, '.');
        size_t pl = strlen(tq_flash_projs[proj]);
        if (dot && !strcmp(dot + 1, tq_flash_suffixes[suffix]) && (size_t)(dot - n) >= pl &&
            !strncmp(dot - pl, tq_flash_projs[proj], pl) && (dot - pl == n || dot[-(long)pl - 1] == '.'))
            return &h->tensors[i];
    }
    return NULL;
}

/* Layer L's FFN (experts or dense) as MLX affine 4-bit group 64 with biases, or why not. */
static int affine4_g64(const split_plan *p, const split_layer *L, tq_err *e)
{
    const split_profile *pr = split_profile_get(p->target);
    const tq_flash_header *h = &L->hdr;
    const char *what = p->kind == TQ_FLASH_MOE ? "experts" : "MLP";
    if (L->naming == TQ_NAMING_FUSED)
        return tq_fail(e, TQ_EUNSUP, "%s: layer %u keeps the %s experts fused as the source stores them (gate_up_proj "
                       "per expert): %s computes separate gate, up and down projections (tq-convert --method affine "
                       "--bits 4 --group-size 64 writes them)", p->m->path, L->layer, p->names->name, pr->name);
    static const int projs[3] = {TQ_FLASH_GATE, TQ_FLASH_UP, TQ_FLASH_DOWN};
    for (int pi = 0; pi < 3; pi++) {
        int k = projs[pi];
        const tq_flash_tensor *w = find_part(h, k, 0), *s = find_part(h, k, 2), *b = find_part(h, k, 3),
                              *bias = find_part(h, k, 4);
        char module[512];
        snprintf(module, sizeof module, "%s%s.%s", L->prefix, p->kind == TQ_FLASH_MOE ? p->names->mlx_container : "mlp",
                 tq_flash_projs[k]);
        if (!w)
            return tq_fail(e, TQ_EUNSUP, "%s: layer %u has no %s %s: %s computes gate, up and down projections",
                           p->m->path, L->layer, what, tq_flash_projs[k], pr->name);
        const char *why = NULL;
        char buf[160];
        uint64_t bits, group;
        if (tq_model_quant_params(p->m->config, module, &bits, &group) == 0) { /* MLX's default */
            bits = 4;
            group = 64;
        }
        if (w->dtype != TQ_DT_U32 || !s) {
            snprintf(buf, sizeof buf, "%s %s", tq_dtype_name(w->dtype), s ? "with scales" : "weights (not quantized)");
            why = buf;
        } else if (bias || !b) {
            why = b ? "with a bias" : "without .biases (TurboQuant or another format, not MLX affine)";
        } else if (w->ndim != 2 || s->ndim != 2 || b->ndim != 2 || s->shape[0] != w->shape[0] || b->shape[0] != w->shape[0] ||
                   s->shape[1] != b->shape[1] || w->shape[1] != s->shape[1] * 8 || bits != 4 || group != 64) {
            snprintf(buf, sizeof buf, "affine %llu-bit group %llu", (unsigned long long)bits, (unsigned long long)group);
            why = buf;
        }
        if (why)
            return tq_fail(e, TQ_EUNSUP,
                           "%s: layer %u %s %s are %s: %s computes only MLX affine 4-bit group-64 weights with .biases "
                           "(tq-convert --method affine --bits 4 --group-size 64 writes them)",
                           p->m->path, L->layer, what, tq_flash_projs[k], why, pr->name);
    }
    return 0;
}

/* The first way layer L's header layout differs from layer 0's, or NULL. */
static const char *layout_differs(const tq_flash_header *a, const tq_flash_header *b, char *buf, size_t cap)
{
    if (a->expert_block_size != b->expert_block_size || a->data_start != b->data_start)
        return snprintf(buf, cap, "expert block %llu bytes at %llu, layer 0's %llu at %llu",
                        (unsigned long long)b->expert_block_size, (unsigned long long)b->data_start,
                        (unsigned long long)a->expert_block_size, (unsigned long long)a->data_start), buf;
    if (a->n_tensors != b->n_tensors)
        return snprintf(buf, cap, "%zu tensors, layer 0 %zu", b->n_tensors, a->n_tensors), buf;
    for (size_t i = 0; i < a->n_tensors; i++) {
        const tq_flash_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        int same = !strcmp(x->name, y->name) && x->offset == y->offset && x->nbytes == y->nbytes &&
                   x->dtype == y->dtype && x->ndim == y->ndim;
        for (int d = 0; same && d < x->ndim; d++)
            same = x->shape[d] == y->shape[d];
        if (!same)
            return snprintf(buf, cap, "tensor %s: %s, %llu bytes at %llu (layer 0: %s, %llu bytes at %llu)", y->name,
                            tq_dtype_name(y->dtype), (unsigned long long)y->nbytes, (unsigned long long)y->offset,
                            tq_dtype_name(x->dtype), (unsigned long long)x->nbytes, (unsigned long long)x->offset),
                   buf;
    }
    return NULL;
}

int split_profile_check(const split_plan *p, tq_err *e)
{
    const split_profile *pr = split_profile_get(p->target);
    if (p->target == TQ_TARGET_TQ)
        return 0;
    if (pr->moe_only && p->kind != TQ_FLASH_MOE)
        return tq_fail(e, TQ_EUNSUP, "%s: a dense model (no routed experts): %s reads only MoE splits", p->m->path, pr->name);
    if (p->kind == TQ_FLASH_MOE)
        for (size_t i = 1; i < p->n_layers; i++) {
            char buf[600];
            const char *d = layout_differs(&p->layers[0].hdr, &p->layers[i].hdr, buf, sizeof buf);
            if (d)
                return tq_fail(e, TQ_EUNSUP, "%s: layer %u's experts are laid out differently from layer 0's (%s): %s "
                               "reads layer 0's layout for every layer",
                               p->m->path, p->layers[i].layer, d, pr->name);
        }
    for (size_t i = 0; pr->needs_affine4 && i < p->n_layers; i++)
        if (affine4_g64(p, &p->layers[i], e) != 0)
            return -1;
    return 0;
}

/* "language_model.X" -> "X", "model.language_model.X" -> "model.X"; NULL when unwrapped. */
static const char *unwrapped(const char *n, const char **keep)
{
    *keep = "";
    if (!strncmp(n, "language_model.", 15))
        return n + 15;
    if (!strncmp(n, "model.language_model.", 21)) {
        *keep = "model.";
        return n + 21;
    }
    return NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int split_profile_names(split_plan *p, tq_err *e)
{
    if (!split_profile_get(p->target)->flatten)
        return 0;
    p->pinned_names = tq_calloc(p->n_pinned ? p->n_pinned : 1, sizeof *p->pinned_names, e);
    char **sorted = tq_calloc(p->n_pinned ? p->n_pinned : 1, sizeof *sorted, e);
    if (!p->pinned_names || !sorted) {
        free(sorted);
        return -1;
    }
    for (size_t i = 0; i < p->n_pinned; i++) {
        const char *keep, *rest = unwrapped(p->pinned[i]->info.name, &keep);
        size_t n = strlen(keep) + strlen(rest ? rest : p->pinned[i]->info.name) + 1;
        if (!(p->pinned_names[i] = tq_malloc(n, e))) {
            free(sorted);
            return -1;
        }
        snprintf(p->pinned_names[i], n, "%s%s", keep, rest ? rest : p->pinned[i]->info.name);
        sorted[i] = p->pinned_names[i];
    }
    qsort(sorted, p->n_pinned, sizeof *sorted, cmp_str);
    for (size_t i = 1; i < p->n_pinned; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            tq_fail(e, TQ_EDATA, "%s: two tensors become '%s' without the language_model. wrapper", p->m->path, sorted[i]);
            free(sorted);
            return -1;
        }
    free(sorted);
    /* layer prefixes likewise, so that split.json and --join name the same model */
    for (size_t i = 0; i < p->n_layers; i++) {
        const char *keep, *rest = unwrapped(p->layers[i].prefix, &keep);
        if (!rest)
            continue;
        size_t n = strlen(keep) + strlen(rest) + 1;
        char *np = tq_malloc(n, e);
        if (!np)
            return -1;
        snprintf(np, n, "%s%s", keep, rest);
        free(p->layers[i].prefix);
        p->layers[i].prefix = np;
    }
    return 0;
}

int split_profile_config(const split_plan *p, cJSON *c, tq_err *e)
{
    if (!split_profile_get(p->target)->flatten)
        return 0;
    /* the engines read num_hidden_layers, hidden_size, num_experts... at the top level */
    cJSON *tc = cJSON_DetachItemFromObjectCaseSensitive(c, "text_config");
    if (cJSON_IsObject(tc))
        for (cJSON *k = tc->child; k;) {
            cJSON *next = k->next;
            cJSON *v = cJSON_DetachItemViaPointer(tc, k);
            cJSON_DeleteItemFromObjectCaseSensitive(c, v->string);
            cJSON_AddItemToObject(c, v->string, v);
            k = next;
        }
    cJSON_Delete(tc);
    (void)e;
    return 0;
}
