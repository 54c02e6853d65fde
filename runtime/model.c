/* Building the decoder's view of a model: every matrix as an rt_linear, routed experts as
 * templates bound per expert to resident tensors or to blocks read from layer files. */
#include "runtime/rt_internal.h"
#include "formats/flash.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tensors of one module; with E > 0 the leading expert axis is checked and stripped. */
typedef struct mod_parts {
    rt_tensor t[6];
    int have[6];
    rt_parts p;
} mod_parts;

static const char *part_suffix[6] = {"weight", "scales", "biases", "codebook", "signs", "bias"};

static int get_parts(rt_store *s, const char *module, uint64_t E, mod_parts *mp, tq_err *e)
{
    memset(mp, 0, sizeof *mp);
    for (int i = 0; i < 6; i++) {
        char name[512];
        snprintf(name, sizeof name, "%s.%s", module, part_suffix[i]);
        int rc = rt_store_get(s, name, &mp->t[i], e);
        if (rc < 0)
            return -1;
        mp->have[i] = rc;
        /* codebook and signs are shared by all experts: no expert axis */
        if (rc && E && i != 3 && i != 4) {
            rt_tensor *t = &mp->t[i];
            if (t->ndim < 2 || t->shape[0] != E)
                return tq_fail(e, TQ_EDATA, "tensor '%s': first axis is not the %llu experts", name,
                               (unsigned long long)E);
            for (int d = 1; d < t->ndim; d++)
                t->shape[d - 1] = t->shape[d];
            t->ndim--;
            t->nbytes /= E;
        }
    }
    mp->p.w = mp->have[0] ? &mp->t[0] : NULL;
    mp->p.scales = mp->have[1] ? &mp->t[1] : NULL;
    mp->p.biases = mp->have[2] ? &mp->t[2] : NULL;
    mp->p.codebook = mp->have[3] ? &mp->t[3] : NULL;
    mp->p.signs = mp->have[4] ? &mp->t[4] : NULL;
    mp->p.bias = mp->have[5] ? &mp->t[5] : NULL;
    return 0;
}

static void note_kind(tq_runner *r, const rt_linear *l)
{
    r->weights_mask |= l->kind == RT_DENSE ? 1 : l->kind == RT_AFFINE ? 2 : 4;
    if (l->kind == RT_DENSE)
        r->dense_dt = l->wdt;
}

static int load_linear(tq_runner *r, const char *module, uint64_t rows, uint64_t cols, rt_linear *l,
                       tq_err *e)
{
    mod_parts mp;
    if (get_parts(r->store, module, 0, &mp, e) != 0)
        return -1;
    char full[512];
    snprintf(full, sizeof full, "%s%s", rt_store_prefix(r->store), module);
    uint64_t bits, group;
    rt_config_affine(r->cfg, full, &bits, &group, &r->c);
    if (rt_linear_from_parts(full, &mp.p, rows, cols, bits, group, l, e) != 0)
        return -1;
    note_kind(r, l);
    return 0;
}

static int has_tensor(tq_runner *r, const char *name, rt_tensor *t, tq_err *e)
{
    rt_tensor tmp;
    return rt_store_get(r->store, name, t ? t : &tmp, e);
}

static int load_norm(tq_runner *r, const char *name, uint64_t n, float **out, tq_err *e)
{
    rt_tensor t;
    int rc = rt_store_get(r->store, name, &t, e);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return tq_fail(e, TQ_EDATA, "tensor '%s%s' is missing", rt_store_prefix(r->store), name);
    if (t.ndim != 1 || t.shape[0] != n ||
        (t.dt != TQ_DT_F32 && t.dt != TQ_DT_F16 && t.dt != TQ_DT_BF16))
        return tq_fail(e, TQ_EDATA, "tensor '%s%s': expected [%llu] floats", rt_store_prefix(r->store),
                       name, (unsigned long long)n);
    float *v = tq_malloc(n * sizeof *v, e);
    if (!v)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        v[i] = rt_load_f(t.dt, t.data, i);
    *out = v;
    return 0;
}

static const char *proj_name[3] = {"gate_proj", "up_proj", "down_proj"};

/* Stacked switch_mlp or per-expert HF tensors, resident. */
static int load_experts_resident(tq_runner *r, uint64_t l, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    uint64_t dims[3][2] = {{c->moe_inter, c->hidden}, {c->moe_inter, c->hidden}, {c->hidden, c->moe_inter}};
    for (int k = 0; k < 3; k++) {
        char module[256], wname[300];
        snprintf(module, sizeof module, "model.layers.%llu.mlp.switch_mlp.%s", (unsigned long long)l,
                 proj_name[k]);
        snprintf(wname, sizeof wname, "%s.weight", module);
        int rc = has_tensor(r, wname, NULL, e);
        if (rc < 0)
            return -1;
        if (rc) {
            mod_parts mp;
            if (get_parts(r->store, module, c->experts, &mp, e) != 0)
                return -1;
            char full[512];
            snprintf(full, sizeof full, "%s%s", rt_store_prefix(r->store), module);
            uint64_t bits, group;
            rt_config_affine(r->cfg, full, &bits, &group, c);
            if (rt_linear_from_parts(full, &mp.p, dims[k][0], dims[k][1], bits, group, &em[k]->t, e) != 0)
                return -1;
            note_kind(r, &em[k]->t);
            int idx[4] = {0, 1, 2, 5};
            for (int i = 0; i < 4; i++)
                if (mp.have[idx[i]]) {
                    em[k]->base[i] = mp.t[idx[i]].data;
                    em[k]->stride[i] = mp.t[idx[i]].nbytes;
                }
            continue;
        }
        em[k]->per_expert = tq_calloc(c->experts, sizeof(rt_linear), e);
        if (!em[k]->per_expert)
            return -1;
        for (uint64_t x = 0; x < c->experts; x++) {
            snprintf(module, sizeof module, "model.layers.%llu.mlp.experts.%llu.%s", (unsigned long long)l,
                     (unsigned long long)x, proj_name[k]);
            if (load_linear(r, module, dims[k][0], dims[k][1], &em[k]->per_expert[x], e) != 0)
                return -1;
        }
    }
    return 0;
}

/* Find a per-expert tensor of a moe_flash_v1 header under any of its spellings. */
static const tq_flash_tensor *flash_part(const tq_flash_header *h, int k, const char *suffix)
{
    char name[128];
    snprintf(name, sizeof name, "mlp.switch_mlp.%s.%s", proj_name[k], suffix);
    const tq_flash_tensor *t = tq_flash_find(h, name);
    if (t)
        return t;
    snprintf(name, sizeof name, ".%s.%s", proj_name[k], suffix);
    size_t nl = strlen(name);
    for (size_t i = 0; i < h->n_tensors; i++) {
        size_t tl = strlen(h->tensors[i].name);
        if (tl >= nl && !strcmp(h->tensors[i].name + tl - nl, name))
            return &h->tensors[i];
        if (!strcmp(h->tensors[i].name, name + 1))
            return &h->tensors[i];
    }
    return NULL;
}

/* Experts of a split directory: templates from the layer file header (+ the shared codebook
 * and signs from the pinned file). */
static int load_experts_split(tq_runner *r, uint64_t l, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    char *path = rt_split_file(r->dir, r->c.expert_dir, l, e);
    if (!path)
        return -1;
    tq_flash_header h;
    memset(&h, 0, sizeof h);
    int rc = tq_flash_read(&h, path, e);
    if (rc != 0) {
        free(path);
        return -1;
    }
    rc = -1;
    if (h.kind != TQ_FLASH_MOE || h.num_experts != c->experts || h.layer_idx != l) {
        tq_fail(e, TQ_EDATA, "%s: not the moe_flash_v1 file of layer %llu with %llu experts", path,
                (unsigned long long)l, (unsigned long long)c->experts);
        goto out;
    }
    uint64_t dims[3][2] = {{c->moe_inter, c->hidden}, {c->moe_inter, c->hidden}, {c->hidden, c->moe_inter}};
    static const uint8_t sentinel[1];
    for (int k = 0; k < 3; k++) {
        rt_tensor t[6];
        int idx[6] = {0, 1, 2, -1, -1, 5};
        mod_parts mp;
        memset(&mp, 0, sizeof mp);
        for (int i = 0; i < 6; i++) {
            if (idx[i] < 0)
                continue;
            const tq_flash_tensor *ft = flash_part(&h, k, part_suffix[i]);
            if (!ft)
                continue;
            uint64_t end;
            if (tq_add_u64(ft->offset, ft->nbytes, &end) || end > h.expert_block_size) {
                tq_fail(e, TQ_EDATA, "%s: tensor '%s' lies outside the expert block", path, ft->name);
                goto out;
            }
            t[i].dt = ft->dtype;
            t[i].ndim = ft->ndim;
            memcpy(t[i].shape, ft->shape, sizeof t[i].shape);
            t[i].nbytes = ft->nbytes;
            t[i].data = sentinel;
            mp.t[i] = t[i];
            mp.have[i] = 1;
            (k == 0 ? &L->eg : k == 1 ? &L->eu : &L->ed)->off[i == 5 ? 3 : i] = ft->offset;
        }
        /* codebook and signs are pinned */
        char module[256];
        snprintf(module, sizeof module, "model.layers.%llu.mlp.switch_mlp.%s", (unsigned long long)l,
                 proj_name[k]);
        for (int i = 3; i <= 4; i++) {
            char name[300];
            snprintf(name, sizeof name, "%s.%s", module, part_suffix[i]);
            int g = rt_store_get(r->store, name, &mp.t[i], e);
            if (g < 0)
                goto out;
            mp.have[i] = g;
        }
        mp.p.w = mp.have[0] ? &mp.t[0] : NULL;
        mp.p.scales = mp.have[1] ? &mp.t[1] : NULL;
        mp.p.biases = mp.have[2] ? &mp.t[2] : NULL;
        mp.p.codebook = mp.have[3] ? &mp.t[3] : NULL;
        mp.p.signs = mp.have[4] ? &mp.t[4] : NULL;
        mp.p.bias = mp.have[5] ? &mp.t[5] : NULL;
        char full[512];
        snprintf(full, sizeof full, "%s%s", rt_store_prefix(r->store), module);
        uint64_t bits, group;
        rt_config_affine(r->cfg, full, &bits, &group, c);
        if (rt_linear_from_parts(full, &mp.p, dims[k][0], dims[k][1], bits, group, &em[k]->t, e) != 0) {
            tq_err_prefix(e, "%s", path);
            goto out;
        }
        /* parts' sizes as the kernel will read them must fit in what the header declares */
        uint64_t need[2] = {rt_linear_wbytes(&em[k]->t), rt_linear_sbytes(&em[k]->t)};
        if (need[0] != mp.t[0].nbytes || (mp.have[1] && need[1] != mp.t[1].nbytes) ||
            (mp.have[2] && need[1] != mp.t[2].nbytes)) {
            tq_fail(e, TQ_EDATA, "%s: %s sizes do not match their shapes", path, full);
            goto out;
        }
        /* kernels load elements in place: each part must start on its element size */
        const rt_emat *em_k = em[k];
        int parts[4] = {0, 1, 2, 5};
        for (int i = 0; i < 4; i++)
            if (mp.have[parts[i]] && em_k->off[i] % tq_dtype_size(mp.t[parts[i]].dt)) {
                tq_fail(e, TQ_EUNSUP, "%s: %s.%s at block offset %llu is not aligned to its %s elements", path,
                        full, part_suffix[parts[i]], (unsigned long long)em_k->off[i],
                        tq_dtype_name(mp.t[parts[i]].dt));
                goto out;
            }
        note_kind(r, &em[k]->t);
    }
    L->src.data_start = h.data_start;
    L->src.block_size = h.expert_block_size;
    L->src.n_experts = h.num_experts;
    L->src.align = h.page_size;
    if (rt_block_src_open(&L->src, path, r->o.io_mode, e) != 0)
        goto out;
    rc = 0;
out:
    tq_flash_header_free(&h);
    free(path);
    return rc;
}

/* --resident on a split directory: every block of every layer in memory. */
static int load_blocks_resident(tq_runner *r, uint64_t l, tq_err *e)
{
    rt_layer *L = &r->L[l];
    uint64_t n;
    if (tq_mul_u64(L->src.block_size, L->src.n_experts, &n))
        return tq_fail(e, TQ_EDATA, "%s: expert data size overflows", L->src.path);
    L->resident_blocks = rt_alloc_aligned(n, L->src.align, e);
    if (!L->resident_blocks)
        return -1;
    if (tq_pread_full(L->src.fd, L->resident_blocks, n, L->src.data_start, L->src.path, e) != 0)
        return -1;
    if (L->src.have_sha)
        for (uint64_t x = 0; x < L->src.n_experts; x++) {
            unsigned char d[32];
            tq_sha256_buf(L->resident_blocks + x * L->src.block_size, L->src.block_size, d);
            if (memcmp(d, L->src.sha[x], 32))
                return tq_fail(e, TQ_EDATA, "%s: expert %llu block (offset %llu) does not match split.json's SHA-256",
                               L->src.path, (unsigned long long)x,
                               (unsigned long long)(L->src.data_start + x * L->src.block_size));
        }
    r->resident_extra += n;
    return 0;
}

int rt_model_load(tq_runner *r, tq_err *e)
{
    const rt_config *c = &r->c;
    if (rt_store_open(&r->store, r->dir, c, e) != 0)
        return -1;
    if (load_linear(r, "model.embed_tokens", c->vocab, c->hidden, &r->embed, e) != 0)
        return -1;
    if (r->embed.kind == RT_TQ)
        return tq_fail(e, TQ_EUNSUP, "%s: TurboQuant-quantized embeddings are not supported", r->dir);
    int rc = has_tensor(r, "lm_head.weight", NULL, e);
    if (rc < 0)
        return -1;
    if (rc && !c->tied) {
        if (load_linear(r, "lm_head", c->vocab, c->hidden, &r->lm_head, e) != 0)
            return -1;
    } else {
        r->lm_head = r->embed;
    }
    if (load_norm(r, "model.norm.weight", c->hidden, &r->final_norm, e) != 0)
        return -1;
    r->L = tq_calloc(c->layers, sizeof *r->L, e);
    if (!r->L)
        return -1;
    for (uint64_t l = 0; l < c->layers; l++)
        r->L[l].src.fd = -1;
    uint64_t qd = c->heads * c->head_dim, kd = c->kv_heads * c->head_dim;
    for (uint64_t l = 0; l < c->layers; l++) {
        rt_layer *L = &r->L[l];
        char n[256];
#define P(fmt) (snprintf(n, sizeof n, "model.layers.%llu." fmt, (unsigned long long)l), n)
        if (load_norm(r, P("input_layernorm.weight"), c->hidden, &L->in_norm, e) ||
            load_norm(r, P("post_attention_layernorm.weight"), c->hidden, &L->post_norm, e) ||
            load_linear(r, P("self_attn.q_proj"), qd, c->hidden, &L->q, e) ||
            load_linear(r, P("self_attn.k_proj"), kd, c->hidden, &L->k, e) ||
            load_linear(r, P("self_attn.v_proj"), kd, c->hidden, &L->v, e) ||
            load_linear(r, P("self_attn.o_proj"), c->hidden, qd, &L->o, e))
            return -1;
        if (c->qk_norm && (load_norm(r, P("self_attn.q_norm.weight"), c->head_dim, &L->q_norm, e) ||
                           load_norm(r, P("self_attn.k_norm.weight"), c->head_dim, &L->k_norm, e)))
            return -1;
        L->moe = rt_layer_is_moe(c, l);
        if (!L->moe) {
            if (c->inter == 0)
                return tq_fail(e, TQ_EDATA, "%s/config.json: intermediate_size is needed for layer %llu",
                               r->dir, (unsigned long long)l);
            if (load_linear(r, P("mlp.gate_proj"), c->inter, c->hidden, &L->gate, e) ||
                load_linear(r, P("mlp.up_proj"), c->inter, c->hidden, &L->up, e) ||
                load_linear(r, P("mlp.down_proj"), c->hidden, c->inter, &L->down, e))
                return -1;
            continue;
        }
        if (load_linear(r, P("mlp.gate"), c->experts, c->hidden, &L->router, e) != 0)
            return -1;
        rt_tensor sw;
        rc = has_tensor(r, P("mlp.shared_expert.gate_proj.weight"), &sw, e);
        if (rc < 0)
            return -1;
        if (rc) {
            uint64_t si = c->shared_inter ? c->shared_inter : (sw.ndim == 2 ? sw.shape[0] : 0);
            L->has_shared = 1;
            if (load_linear(r, P("mlp.shared_expert.gate_proj"), si, c->hidden, &L->sg, e) ||
                load_linear(r, P("mlp.shared_expert.up_proj"), si, c->hidden, &L->su, e) ||
                load_linear(r, P("mlp.shared_expert.down_proj"), c->hidden, si, &L->sd, e) ||
                load_linear(r, P("mlp.shared_expert_gate"), 1, c->hidden, &L->sgate, e))
                return -1;
        }
#undef P
        rt_emat *em[3] = {&L->eg, &L->eu, &L->ed};
        if (c->split) {
            if (load_experts_split(r, l, em, e) != 0)
                return -1;
            L->streamed = 1;
        } else if (load_experts_resident(r, l, em, e) != 0) {
            return -1;
        }
    }
    int any_streamed = 0;
    for (uint64_t l = 0; l < c->layers; l++)
        any_streamed |= r->L[l].streamed;
    if (any_streamed && r->o.check_blocks && rt_load_block_hashes(r, e) != 0)
        return -1;
    if (any_streamed && r->o.resident)
        for (uint64_t l = 0; l < c->layers; l++)
            if (r->L[l].streamed && load_blocks_resident(r, l, e) != 0)
                return -1;
    if (c->split && r->o.io_mode != TQ_RUN_IO_BUFFERED)
        rt_store_drop_cache(r->store);
    return 0;
}

static void free_emat(rt_emat *m)
{
    free(m->per_expert);
}

void rt_model_free(tq_runner *r)
{
    if (r->L) {
        for (uint64_t l = 0; l < r->c.layers; l++) {
            rt_layer *L = &r->L[l];
            free(L->in_norm);
            free(L->post_norm);
            free(L->q_norm);
            free(L->k_norm);
            free_emat(&L->eg);
            free_emat(&L->eu);
            free_emat(&L->ed);
            free(L->resident_blocks);
            rt_block_src_close(&L->src);
        }
        free(r->L);
    }
    free(r->final_norm);
    rt_store_close(r->store);
}
