/* Building the decoder's view of a model: every matrix as an rt_linear, routed experts as
 * templates bound per expert to resident tensors or to blocks read from layer files. */
#include "runtime/rt_internal.h"

#include <math.h>
#include "formats/flash.h"
#include "common/platform.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Tensors of one module; with E > 0 the leading expert axis is checked and stripped. */
typedef struct mod_parts {
    rt_tensor t[6];
    int have[6];
    rt_parts p;
} mod_parts;

static const char *part_suffix[6] = {"weight", "scales", "biases", "codebook", "signs", "bias"};

/* The parts of t [6] (part_suffix's order) that have[i] says are present. */
static rt_parts parts_of(const rt_tensor t[6], const int have[6])
{
    rt_parts p = {.w = have[0] ? &t[0] : NULL,
                  .scales = have[1] ? &t[1] : NULL,
                  .biases = have[2] ? &t[2] : NULL,
                  .codebook = have[3] ? &t[3] : NULL,
                  .signs = have[4] ? &t[4] : NULL,
                  .bias = have[5] ? &t[5] : NULL};
    return p;
}

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
    mp->p = parts_of(mp->t, mp->have);
    return 0;
}

/* Also: a TurboQuant module of a rotation "none" model is used unrotated when its signs are
 * all +1 (a negative sign means it was rotated whatever the config says: TurboQuant-MLX's rule). */
static void note_kind(tq_runner *r, rt_linear *l)
{
    if (l->kind == RT_TQ && r->c.tq_norot) {
        l->norot = 1;
        for (uint64_t j = 0; j < l->cols && l->norot; j++)
            l->norot = rt_load_f(l->gdt, l->signs, j) > 0;
    }
    r->weights_mask |= l->kind == RT_DENSE ? 1 : l->kind == RT_AFFINE ? 2 : l->kind == RT_TQ ? 4 : 8;
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
    rt_store_name(r->store, module, full, sizeof full);
    uint64_t bits, group;
    rt_config_affine(r->cfg, full, &bits, &group, &r->c);
    if (rt_linear_from_parts(full, &mp.p, rows, cols, bits, group, l, e) != 0)
        return -1;
    note_kind(r, l);
    return 0;
}

/* load_linear when MODULE.weight exists: 1 loaded, 0 absent, -1 error. */
static int load_linear_opt(tq_runner *r, const char *module, uint64_t rows, uint64_t cols, rt_linear *l, tq_err *e)
{
    char w[512];
    rt_tensor t;
    snprintf(w, sizeof w, "%s.weight", module);
    int rc = rt_store_get(r->store, w, &t, e);
    if (rc <= 0)
        return rc;
    return load_linear(r, module, rows, cols, l, e) ? -1 : 1;
}

static int has_tensor(tq_runner *r, const char *name, rt_tensor *t, tq_err *e)
{
    rt_tensor tmp;
    return rt_store_get(r->store, name, t ? t : &tmp, e);
}

/* n zeroed floats, 64-byte aligned, in the runner's vector chunks (tq_runner.vchunk): whole
 * rt_map_page() pages, so a device backend maps a chunk once (runtime/backend.c,
 * runner_region) instead of copying the vector at every use. Freed with the model. */
static float *vec_alloc(tq_runner *r, uint64_t n, tq_err *e)
{
    uint64_t bytes;
    if (tq_mul_u64(n ? n : 1, sizeof(float), &bytes) || bytes > UINT64_MAX - 64) {
        tq_fail(e, TQ_EDATA, "a vector of %llu floats is too large", (unsigned long long)n);
        return NULL;
    }
    bytes = (bytes + 63) / 64 * 64;
    struct rt_vchunk *last = r->n_vchunk ? &r->vchunk[r->n_vchunk - 1] : NULL;
    if (!last || last->size - last->used < bytes) {
        void *grown = tq_grow(r->vchunk, &r->cap_vchunk, r->n_vchunk, sizeof *r->vchunk, e);
        if (!grown)
            return NULL;
        r->vchunk = grown;
        uint64_t size = rt_map_round(bytes > (64u << 10) ? bytes : (64u << 10));
        uint8_t *p = size == UINT64_MAX ? NULL : rt_alloc_aligned(size, rt_map_page(), e);
        if (!p)
            return NULL;
        memset(p, 0, size);
        last = &r->vchunk[r->n_vchunk++];
        *last = (struct rt_vchunk){p, size, 0};
    }
    float *v = (float *)(last->p + last->used);
    last->used += bytes;
    return v;
}

int rt_vec_region(const tq_runner *r, const void *p, const void **base, uint64_t *n)
{
    for (size_t i = 0; i < r->n_vchunk; i++) {
        const struct rt_vchunk *k = &r->vchunk[i];
        if ((const uint8_t *)p >= k->p && (const uint8_t *)p < k->p + k->size) {
            *base = k->p;
            *n = k->size;
            return 1;
        }
    }
    return 0;
}

/* A float vector of n values (a norm's weight + shift: 1 for norms stored as offsets from 1,
 * else 0; A_log, dt_bias, sinks, correction biases with shift 0), in the vector chunks. */
static int load_vec(tq_runner *r, const char *name, uint64_t n, float shift, float **out, tq_err *e)
{
    rt_tensor t;
    char full[512];
    rt_store_name(r->store, name, full, sizeof full);
    int rc = rt_store_get(r->store, name, &t, e);
    if (rc < 0)
        return -1;
    if (rc == 0)
        return tq_fail(e, TQ_EDATA, "tensor '%s' is missing", full);
    if (t.ndim != 1 || t.shape[0] != n ||
        (t.dt != TQ_DT_F32 && t.dt != TQ_DT_F16 && t.dt != TQ_DT_BF16))
        return tq_fail(e, TQ_EDATA, "tensor '%s': expected [%llu] floats", full, (unsigned long long)n);
    float *v = vec_alloc(r, n, e);
    if (!v)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        v[i] = rt_load_f(t.dt, t.data, i) + shift;
    *out = v;
    return 0;
}

static int load_norm(tq_runner *r, const char *name, uint64_t n, float **out, tq_err *e)
{
    return load_vec(r, name, n, r->norm_shift, out, e);
}

static const char *proj_name[3] = {"gate_proj", "up_proj", "down_proj"};

/* Where a family keeps its MoE tensors, relative to the layer, from the family table
 * (formats/family.h). */
typedef struct moe_names {
    const char *router;      /* the router module: logits = router · h (+ bias) */
    const char *stacked;     /* MLX: <stacked>.<gate|up|down>_proj.* with the expert axis first */
    char experts[64];        /* HF: <experts>.<e>.<proj[k]>.*, fused <experts>.gate_up_proj, MXFP4 */
    const char *proj[3];     /* HF per-expert names of gate, up, down (NULL: none) */
    const char *shared;      /* shared expert MLP, or NULL */
    const char *shared_gate; /* its sigmoid gate, or NULL */
    char v5_router[64];      /* the router under the family's v5_block */
} moe_names;

/* The names of layer l's MoE tensors. A family whose MoE block transformers 5 renames
 * (formats/family.h, v5_block: Mixtral's block_sparse_moe is mlp there) is read under the
 * new path when the layer's router is there and not under the hub's path; only the fused
 * experts live beside it (<v5_block>.experts.gate_up_proj / down_proj). */
static int names_of(tq_runner *r, uint64_t l, moe_names *n, tq_err *e)
{
    const tq_family *f = r->c.fam;
    n->router = f->routers && *f->routers[0] ? f->routers[0] : "mlp.gate";
    n->stacked = f->mlx_container ? f->mlx_container : "mlp.switch_mlp";
    snprintf(n->experts, sizeof n->experts, "%s%sexperts", f->moe_block ? f->moe_block : "mlp",
             f->moe_block && !*f->moe_block ? "" : ".");
    n->proj[0] = f->hf_proj[TQ_PROJ_GATE];
    n->proj[1] = f->hf_proj[TQ_PROJ_UP];
    n->proj[2] = f->hf_proj[TQ_PROJ_DOWN];
    n->shared = f->shared;
    n->shared_gate = f->shared_gate;
    if (!f->v5_block || tq_family_v5_path(f, n->router, n->v5_router, sizeof n->v5_router) != 0)
        return 0;
    char hub[300], v5[300];
    snprintf(hub, sizeof hub, "model.layers.%llu.%s.weight", (unsigned long long)l, n->router);
    snprintf(v5, sizeof v5, "model.layers.%llu.%s.weight", (unsigned long long)l, n->v5_router);
    int rc = has_tensor(r, hub, NULL, e), rc5 = rc == 0 ? has_tensor(r, v5, NULL, e) : 0;
    if (rc < 0 || rc5 < 0)
        return -1;
    if (rc5) {
        n->router = n->v5_router;
        snprintf(n->experts, sizeof n->experts, "%s.experts", f->v5_block);
        n->proj[0] = n->proj[1] = n->proj[2] = NULL; /* no per-expert tensors there */
    }
    return 0;
}

/* Bind em's template to a stacked tensor set (expert axis first). */
static int bind_stacked(tq_runner *r, const char *module, uint64_t rows, uint64_t cols, rt_emat *em, tq_err *e)
{
    const rt_config *c = &r->c;
    mod_parts mp;
    if (get_parts(r->store, module, c->experts, &mp, e) != 0)
        return -1;
    char full[512];
    rt_store_name(r->store, module, full, sizeof full);
    uint64_t bits, group;
    rt_config_affine(r->cfg, full, &bits, &group, c);
    if (rt_linear_from_parts(full, &mp.p, rows, cols, bits, group, &em->t, e) != 0)
        return -1;
    note_kind(r, &em->t);
    int idx[4] = {0, 1, 2, 5};
    for (int i = 0; i < 4; i++)
        if (mp.have[idx[i]]) {
            em->base[i] = mp.t[idx[i]].data;
            em->stride[i] = mp.t[idx[i]].nbytes;
        }
    return 0;
}

/* Where part i (weight, scales, biases, bias) of a fused expert matrix lies: resident, at
 * data + e * stride (+ off); in a split layer file (data NULL), at the block + off. */
typedef struct fused_part {
    const uint8_t *data;
    uint64_t stride, off;
} fused_part;

static const uint8_t fused_sentinel[1];

static void fused_place(rt_emat *em, int i, const fused_part *src, uint64_t extra, const void **ptr)
{
    *ptr = src->data ? (const void *)src->data : (const void *)fused_sentinel;
    if (src->data) {
        em->base[i] = src->data + src->off + extra;
        em->stride[i] = src->stride;
    } else {
        em->off[i] = src->off + extra;
    }
}

/* Fused float experts (rows 0..I-1 of gate_up are gate, I..2I-1 up; down [H, I]): the gate,
 * up and down templates over the parts gu and dn of dtypes gdt and ddt. */
static void fused_build(tq_runner *r, tq_dtype gdt, tq_dtype ddt, const fused_part *gu, const fused_part *dn,
                        rt_emat *em[3])
{
    const rt_config *c = &r->c;
    uint64_t I = c->moe_inter, H = c->hidden;
    for (int k = 0; k < 3; k++) {
        rt_linear *l = &em[k]->t;
        memset(l, 0, sizeof *l);
        l->kind = RT_DENSE;
        l->wdt = k == 2 ? ddt : gdt;
        l->rows = k == 2 ? H : I;
        l->cols = k == 2 ? I : H;
        fused_place(em[k], 0, k == 2 ? dn : gu, k == 1 ? I * H * tq_dtype_size(gdt) : 0, &l->w);
        note_kind(r, l);
    }
}

/* gpt-oss MXFP4 experts: src[p][k] for p gate_up / down and k blocks, scales, bias; gate_up's
 * even rows are gate, odd rows up, so gate and up read every second stored row. */
static void mxfp4_build(tq_runner *r, const fused_part src[2][3], tq_dtype biasdt[2], rt_emat *em[3])
{
    const rt_config *c = &r->c;
    uint64_t I = c->moe_inter, H = c->hidden;
    for (int k = 0; k < 3; k++) {
        int p = k == 2; /* gate, up: rows of gate_up; down */
        uint64_t cols = p ? I : H, off = k == 1; /* up starts one stored row later */
        rt_linear *lin = &em[k]->t;
        memset(lin, 0, sizeof *lin);
        lin->kind = RT_MXFP4;
        lin->rows = p ? H : I;
        lin->cols = cols;
        lin->ngroups = cols / 32;
        lin->group = 32;
        lin->rstep = p ? 1 : 2;
        lin->sdt = TQ_DT_U8;
        lin->biasdt = biasdt[p];
        fused_place(em[k], 0, &src[p][0], off * (cols / 2), &lin->w);
        fused_place(em[k], 1, &src[p][1], off * (cols / 32), &lin->scales);
        fused_place(em[k], 3, &src[p][2], off * tq_dtype_size(biasdt[p]), &lin->bias);
        note_kind(r, lin);
    }
}

static int is_float(tq_dtype d)
{
    return d == TQ_DT_F32 || d == TQ_DT_F16 || d == TQ_DT_BF16;
}

/* HF fused experts: gate_up_proj [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up) and down_proj
 * [E, H, I], plain float tensors without a ".weight" suffix. */
static int bind_fused(tq_runner *r, const char *gu_name, const char *down_name, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    uint64_t E = c->experts, I = c->moe_inter, H = c->hidden;
    rt_tensor gu, dn;
    char full[512];
    int rc = rt_store_get(r->store, down_name, &dn, e);
    if (rc <= 0)
        return rc < 0 ? -1 : tq_fail(e, TQ_EDATA, "tensor '%s' is missing",
                                     rt_store_name(r->store, down_name, full, sizeof full));
    if (rt_store_get(r->store, gu_name, &gu, e) < 0)
        return -1;
    const rt_tensor *t[2] = {&gu, &dn};
    const char *nm[2] = {gu_name, down_name};
    uint64_t want[2][2] = {{2 * I, H}, {H, I}};
    for (int i = 0; i < 2; i++)
        if (t[i]->ndim != 3 || t[i]->shape[0] != E || t[i]->shape[1] != want[i][0] || t[i]->shape[2] != want[i][1] ||
            !is_float(t[i]->dt))
            return tq_fail(e, TQ_EDATA, "tensor '%s': expected [%llu, %llu, %llu] floats (fused experts)",
                           rt_store_name(r->store, nm[i], full, sizeof full), (unsigned long long)E,
                           (unsigned long long)want[i][0], (unsigned long long)want[i][1]);
    fused_part pg = {gu.data, gu.nbytes / E, 0}, pd = {dn.data, dn.nbytes / E, 0};
    fused_build(r, gu.dt, dn.dt, &pg, &pd, em);
    return 1;
}

/* The shape an MXFP4 part k (blocks, scales, bias) of a matrix [rows, cols] must have, with
 * the expert axis (E > 0) or without it (E = 0, one expert's slice in a layer file). */
static int mxfp4_part_ok(const tq_dtype dt, int ndim, const uint64_t *shape, int k, uint64_t E, uint64_t rows,
                         uint64_t cols)
{
    int x = E ? 1 : 0;
    int ok = cols % 32 == 0 && ndim == (k == 0 ? 4 : k == 1 ? 3 : 2) - !x && (!x || shape[0] == E) && shape[x] == rows;
    if (ok && k == 0)
        ok = dt == TQ_DT_U8 && shape[x + 1] == cols / 32 && shape[x + 2] == 16;
    else if (ok && k == 1)
        ok = dt == TQ_DT_U8 && shape[x + 1] == cols / 32;
    else if (ok)
        ok = is_float(dt);
    return ok;
}

/* gpt-oss as released: <experts>.{gate_up,down}_proj_{blocks,scales,bias}, MXFP4 blocks
 * [E, out, in/32, 16] U8, E8M0 scales [E, out, in/32] U8, biases [E, out]; gate_up's even
 * rows are gate, odd rows up (formats/family.h, TQ_EXP_MXFP4). */
static const char *const mxfp4_proj[2] = {"gate_up_proj", "down_proj"};
static const char *const mxfp4_sfx[3] = {"blocks", "scales", "bias"};

static int bind_mxfp4(tq_runner *r, uint64_t l, const char *experts, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    uint64_t E = c->experts, I = c->moe_inter, H = c->hidden;
    fused_part src[2][3];
    tq_dtype biasdt[2];
    for (int p = 0; p < 2; p++) {
        uint64_t rows = p ? H : 2 * I, cols = p ? I : H;
        for (int k = 0; k < 3; k++) {
            char name[300], full[512];
            rt_tensor x;
            snprintf(name, sizeof name, "model.layers.%llu.%s.%s_%s", (unsigned long long)l, experts, mxfp4_proj[p],
                     mxfp4_sfx[k]);
            rt_store_name(r->store, name, full, sizeof full);
            int rc = rt_store_get(r->store, name, &x, e);
            if (rc <= 0)
                return rc < 0 ? -1 : tq_fail(e, TQ_EDATA, "tensor '%s' is missing", full);
            if (!mxfp4_part_ok(x.dt, x.ndim, x.shape, k, E, rows, cols))
                return tq_fail(e, TQ_EDATA, "tensor '%s': expected %s [%llu, %llu%s] for %llu experts of [%llu, %llu]",
                               full, k == 2 ? "floats" : "U8", (unsigned long long)E, (unsigned long long)rows,
                               k == 0 ? ", in/32, 16" : k == 1 ? ", in/32" : "", (unsigned long long)E,
                               (unsigned long long)rows, (unsigned long long)cols);
            src[p][k] = (fused_part){x.data, x.nbytes / E, 0};
            if (k == 2)
                biasdt[p] = x.dt;
        }
    }
    mxfp4_build(r, src, biasdt, em);
    return 0;
}

/* gpt-oss as transformers saves it in float (formats/family.h, xw_fused; transformers
 * models/gpt_oss/modeling_gpt_oss.py, GptOssExperts: gate_up_proj [E, H, 2I] and down_proj
 * [E, I, H] used as x @ W, gate = [..., ::2], up = [..., 1::2], biases gate_up_proj_bias
 * [E, 2I] interleaved the same way and down_proj_bias [E, H]): made at load into mlx-lm's
 * stacked gate/up/down [E, out, in] (rt_store_get_xw), the layout bind_stacked reads, so the
 * matvecs are the ones a converted or split model runs. */
static int bind_xw(tq_runner *r, const char *gu_name, const char *down_name, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    uint64_t E = c->experts, I = c->moe_inter, H = c->hidden;
    char bname[2][320], full[512];
    const char *nm[4] = {gu_name, bname[0], down_name, bname[1]};
    const uint64_t want[4][3] = {{E, H, 2 * I}, {E, 2 * I, 0}, {E, I, H}, {E, H, 0}};
    snprintf(bname[0], sizeof bname[0], "%s_bias", gu_name);
    snprintf(bname[1], sizeof bname[1], "%s_bias", down_name);
    rt_tensor raw[4];
    for (int k = 0; k < 4; k++) {
        int rc = rt_store_get_info(r->store, nm[k], &raw[k], e);
        int nd = want[k][2] ? 3 : 2, ok = rc > 0 && raw[k].ndim == nd && is_float(raw[k].dt);
        for (int d = 0; ok && d < nd; d++)
            ok = raw[k].shape[d] == want[k][d];
        if (rc < 0)
            return -1;
        if (!ok) {
            char ws[96];
            int o = snprintf(ws, sizeof ws, "[%llu, %llu", (unsigned long long)want[k][0], (unsigned long long)want[k][1]);
            snprintf(ws + o, sizeof ws - (size_t)o, nd == 3 ? ", %llu]" : "]", (unsigned long long)want[k][2]);
            return tq_fail(e, TQ_EDATA, "tensor '%s': %s floats %s (%s experts as transformers saves them, used as "
                           "x @ W; num_local_experts, hidden_size and intermediate_size of config.json)",
                           rt_store_name(r->store, nm[k], full, sizeof full), rc ? "expected" : "missing; expected", ws,
                           c->fam->name);
        }
    }
    static const int wpart[3] = {TQ_XW_GATE_W, TQ_XW_UP_W, TQ_XW_DOWN_W}, bpart[2] = {TQ_XW_GATE_B, TQ_XW_UP_B};
    for (int k = 0; k < 3; k++) {
        rt_tensor w, b;
        if (rt_store_get_xw(r->store, k == 2 ? down_name : gu_name, wpart[k], E, I, H, &w, e) < 0 ||
            (k < 2 ? rt_store_get_xw(r->store, bname[0], bpart[k], E, I, H, &b, e)
                   : rt_store_get(r->store, bname[1], &b, e)) < 0)
            return -1;
        rt_tensor w1 = w, b1 = b; /* one expert's slice */
        w1.ndim = 2, w1.shape[0] = w.shape[1], w1.shape[1] = w.shape[2], w1.nbytes = w.nbytes / E;
        b1.ndim = 1, b1.shape[0] = b.shape[1], b1.nbytes = b.nbytes / E;
        rt_parts pp = {.w = &w1, .bias = &b1};
        char module[320];
        snprintf(module, sizeof module, "%s.%s", k == 2 ? down_name : gu_name, proj_name[k]);
        if (rt_linear_from_parts(rt_store_name(r->store, module, full, sizeof full), &pp, k == 2 ? H : I,
                                 k == 2 ? I : H, 0, 0, &em[k]->t, e) != 0)
            return -1;
        note_kind(r, &em[k]->t);
        em[k]->base[0] = w.data;
        em[k]->stride[0] = w1.nbytes;
        em[k]->base[3] = b.data;
        em[k]->stride[3] = b1.nbytes;
    }
    return 0;
}

/* HF per-expert tensors (<experts>.<e>.<proj>.weight, and for MLX affine experts .scales and
 * .biases, for TurboQuant experts .scales, .codebook and .signs, with or without an output
 * .bias), each part of one dtype and shape in every expert: each part read into one allocation
 * per projection (expert e at e · its bytes) and bound as stacked experts, so that a device
 * backend finds an expert's matrix by id on the GPU (rt_experts_indexed; docs/metal.md, One
 * wait per token). A TurboQuant expert's own codebook and signs are found by id the same way
 * (rt_emat parts 4 and 5), and each expert's are checked as its own matrix would be. The bytes
 * and so every product are those of one matrix per expert. Not stacked: TurboQuant of a
 * rotation "none" model (whether an expert runs unrotated is decided per matrix, note_kind).
 * 1 bound, 0 not that form (bind one matrix each), -1 error. */
static int bind_per_expert_stacked(tq_runner *r, uint64_t l, const moe_names *nm, const uint64_t dims[3][2],
                                   rt_emat *em[3], tq_err *e)
{
    /* the rt_emat part of each of part_suffix's: weight, scales, biases 0..2, bias 3,
     * codebook 4, signs 5 */
    static const int emat_part[6] = {0, 1, 2, 4, 5, 3};
    const rt_config *c = &r->c;
    char module[256], name[320];
    rt_tensor t;
    int have[3][6] = {{0}};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 6; i++) {
            snprintf(name, sizeof name, "model.layers.%llu.%s.0.%s.%s", (unsigned long long)l, nm->experts, nm->proj[k],
                     part_suffix[i]);
            int rc = rt_store_get_info(r->store, name, &t, e);
            if (rc < 0)
                return -1;
            if (rc && (i == 3 || i == 4) && c->tq_norot)
                return 0;
            have[k][i] = rc;
        }
    char **names = tq_calloc(c->experts ? c->experts : 1, sizeof *names, e);
    if (!names)
        return -1;
    int rc = 1;
    /* every part of every expert present with expert 0's dtype and shape, so that nothing is
     * read unless all of them stack */
    for (int k = 0; k < 3 && rc == 1; k++)
        for (int i = 0; i < 6 && rc == 1; i++) {
            rt_tensor first;
            for (uint64_t x = 0; x < c->experts && rc == 1; x++) {
                rt_tensor a;
                snprintf(name, sizeof name, "model.layers.%llu.%s.%llu.%s.%s", (unsigned long long)l, nm->experts,
                         (unsigned long long)x, nm->proj[k], part_suffix[i]);
                int got = rt_store_get_info(r->store, name, &a, e);
                if (got < 0)
                    rc = -1;
                else if (got != have[k][i])
                    rc = 0;
                else if (got && x == 0)
                    first = a;
                else if (got && (a.dt != first.dt || a.ndim != first.ndim || memcmp(a.shape, first.shape, sizeof a.shape)))
                    rc = 0;
            }
        }
    for (int k = 0; k < 3 && rc == 1; k++) {
        rt_tensor st[6]; /* part_suffix's order */
        for (int i = 0; i < 6 && rc == 1; i++) {
            if (!have[k][i])
                continue;
            for (uint64_t x = 0; x < c->experts && rc == 1; x++)
                if (!(names[x] = tq_asprintf(e, "model.layers.%llu.%s.%llu.%s.%s", (unsigned long long)l, nm->experts,
                                             (unsigned long long)x, nm->proj[k], part_suffix[i])))
                    rc = -1;
            if (rc == 1 && (rc = rt_store_get_stack(r->store, (const char *const *)names, c->experts, &st[i], e)) == 0)
                rc = tq_fail(e, TQ_EDATA, "layer %llu: the experts' tensors changed while stacked", (unsigned long long)l);
            for (uint64_t x = 0; x < c->experts; x++) {
                free(names[x]);
                names[x] = NULL;
            }
        }
        if (rc != 1)
            break;
        rt_parts pp = parts_of(st, have[k]);
        char full[512];
        uint64_t bits, group;
        snprintf(module, sizeof module, "model.layers.%llu.%s.0.%s", (unsigned long long)l, nm->experts, nm->proj[k]);
        rt_store_name(r->store, module, full, sizeof full);
        rt_config_affine(r->cfg, full, &bits, &group, c);
        if (rt_linear_from_parts(full, &pp, dims[k][0], dims[k][1], bits, group, &em[k]->t, e) != 0) {
            rc = -1;
            break;
        }
        /* every other expert's codebook and signs checked as its own matrix's would be */
        for (uint64_t x = 1; x < c->experts && (have[k][3] || have[k][4]); x++) {
            rt_tensor ex[6];
            rt_linear chk;
            for (int i = 0; i < 6; i++)
                if (have[k][i]) {
                    ex[i] = st[i];
                    ex[i].data = (const uint8_t *)st[i].data + x * st[i].nbytes;
                }
            rt_parts px = parts_of(ex, have[k]);
            if (rt_linear_from_parts(full, &px, dims[k][0], dims[k][1], bits, group, &chk, e) != 0) {
                rc = -1;
                break;
            }
        }
        if (rc != 1)
            break;
        note_kind(r, &em[k]->t);
        for (int i = 0; i < 6; i++)
            if (have[k][i]) {
                em[k]->base[emat_part[i]] = st[i].data;
                em[k]->stride[emat_part[i]] = st[i].nbytes;
            }
    }
    free(names);
    return rc;
}

/* Routed experts, resident: stacked (MLX), fused (HF qwen3_5_moe), MXFP4 (HF gpt-oss) or one
 * tensor set per expert (HF; stacked at load where each part has one dtype and shape). */
static int load_experts_resident(tq_runner *r, uint64_t l, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    moe_names names, *nm = &names;
    if (names_of(r, l, nm, e) != 0)
        return -1;
    uint64_t dims[3][2] = {{c->moe_inter, c->hidden}, {c->moe_inter, c->hidden}, {c->hidden, c->moe_inter}};
    char module[256], wname[300], down[300];
    snprintf(module, sizeof module, "model.layers.%llu.%s.%s", (unsigned long long)l, nm->stacked, proj_name[0]);
    snprintf(wname, sizeof wname, "%s.weight", module);
    int rc = has_tensor(r, wname, NULL, e);
    if (rc < 0)
        return -1;
    if (rc) {
        for (int k = 0; k < 3; k++) {
            snprintf(module, sizeof module, "model.layers.%llu.%s.%s", (unsigned long long)l, nm->stacked, proj_name[k]);
            if (bind_stacked(r, module, dims[k][0], dims[k][1], em[k], e) != 0)
                return -1;
        }
        return 0;
    }
    snprintf(wname, sizeof wname, "model.layers.%llu.%s.gate_up_proj", (unsigned long long)l, nm->experts);
    snprintf(down, sizeof down, "model.layers.%llu.%s.down_proj", (unsigned long long)l, nm->experts);
    if ((rc = has_tensor(r, wname, NULL, e)) != 0 && c->fam->xw_fused) /* formats/family.h: x @ W */
        return rc < 0 ? -1 : bind_xw(r, wname, down, em, e);
    if (rc != 0)
        return rc < 0 || bind_fused(r, wname, down, em, e) < 0 ? -1 : 0;
    if (c->fam->store == TQ_EXP_MXFP4) {
        snprintf(wname, sizeof wname, "model.layers.%llu.%s.gate_up_proj_blocks", (unsigned long long)l, nm->experts);
        if ((rc = has_tensor(r, wname, NULL, e)) != 0)
            return rc < 0 ? -1 : bind_mxfp4(r, l, nm->experts, em, e);
    }
    if (!nm->proj[0] || !nm->proj[1] || !nm->proj[2]) {
        char full[512];
        snprintf(module, sizeof module, "model.layers.%llu.%s.%s.weight", (unsigned long long)l, nm->stacked, proj_name[0]);
        return tq_fail(e, TQ_EDATA, "tensor '%s' is missing (no routed experts of layer %llu in a form the runtime reads)",
                       rt_store_name(r->store, module, full, sizeof full), (unsigned long long)l);
    }
    if ((rc = bind_per_expert_stacked(r, l, nm, dims, em, e)) != 0)
        return rc < 0 ? -1 : 0;
    for (int k = 0; k < 3; k++) {
        em[k]->per_expert = tq_calloc(c->experts, sizeof(rt_linear), e);
        if (!em[k]->per_expert)
            return -1;
        for (uint64_t x = 0; x < c->experts; x++) {
            snprintf(module, sizeof module, "model.layers.%llu.%s.%llu.%s", (unsigned long long)l, nm->experts,
                     (unsigned long long)x, nm->proj[k]);
            if (load_linear(r, module, dims[k][0], dims[k][1], &em[k]->per_expert[x], e) != 0)
                return -1;
        }
    }
    return 0;
}

/* Find a per-expert tensor of a moe_flash_v1 header under any of its spellings. */
static const tq_flash_tensor *flash_part(const tq_flash_header *h, const moe_names *nm, int k, const char *suffix)
{
    char name[160];
    snprintf(name, sizeof name, "%s.%s.%s", nm->stacked, proj_name[k], suffix);
    const tq_flash_tensor *t = tq_flash_find(h, name);
    if (t)
        return t;
    const char *projs[2] = {proj_name[k], nm->proj[k]};
    for (int p = 0; p < 2 && projs[p]; p++) {
        snprintf(name, sizeof name, ".%s.%s", projs[p], suffix);
        size_t nl = strlen(name);
        for (size_t i = 0; i < h->n_tensors; i++) {
            size_t tl = strlen(h->tensors[i].name);
            if (tl >= nl && !strcmp(h->tensors[i].name + tl - nl, name))
                return &h->tensors[i];
            if (!strcmp(h->tensors[i].name, name + 1))
                return &h->tensors[i];
        }
    }
    return NULL;
}

/* One fused part of a layer file ("mlp.switch_mlp.PROJ.SUFFIX"): inside the expert block and
 * starting on its element size, or NULL (absent). -1 when it is there but misplaced. */
static int fused_part_of(const tq_flash_header *h, const char *path, const char *proj, const char *sfx,
                         const tq_flash_tensor **out, tq_err *e)
{
    char name[96];
    snprintf(name, sizeof name, "mlp.switch_mlp.%s.%s", proj, sfx);
    const tq_flash_tensor *t = tq_flash_find(h, name);
    *out = t;
    uint64_t end;
    if (t && (tq_add_u64(t->offset, t->nbytes, &end) || end > h->expert_block_size))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' lies outside the expert block", path, t->name);
    if (t && t->offset % tq_dtype_size(t->dtype))
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s' at block offset %llu is not aligned to its %s elements", path,
                       t->name, (unsigned long long)t->offset, tq_dtype_name(t->dtype));
    return 0;
}

/* A layer file of fused experts (split.json naming "fused", man tq-formats(5)): one expert's
 * gate_up_proj.weight [2I, H] and down_proj.weight [H, I] floats, or gpt-oss's MXFP4
 * gate_up_proj / down_proj .blocks, .scales and .bias. 1 bound, 0 not a fused layer file. */
static int load_split_fused(tq_runner *r, const tq_flash_header *h, const char *path, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    uint64_t I = c->moe_inter, H = c->hidden;
    const tq_flash_tensor *gu, *dn, *mx[2][3];
    if (fused_part_of(h, path, "gate_up_proj", "weight", &gu, e) || fused_part_of(h, path, "down_proj", "weight", &dn, e))
        return -1;
    if (gu) {
        const tq_flash_tensor *t[2] = {gu, dn};
        uint64_t want[2][2] = {{2 * I, H}, {H, I}};
        for (int i = 0; i < 2; i++)
            if (!t[i] || t[i]->ndim != 2 || t[i]->shape[0] != want[i][0] || t[i]->shape[1] != want[i][1] ||
                !is_float(t[i]->dtype))
                return tq_fail(e, TQ_EDATA, "%s: expected mlp.switch_mlp.%s.weight [%llu, %llu] floats per expert (fused "
                               "experts)", path, i ? "down_proj" : "gate_up_proj", (unsigned long long)want[i][0],
                               (unsigned long long)want[i][1]);
        fused_part pg = {NULL, 0, gu->offset}, pd = {NULL, 0, dn->offset};
        fused_build(r, gu->dtype, dn->dtype, &pg, &pd, em);
        return 1;
    }
    if (fused_part_of(h, path, "gate_up_proj", "blocks", &mx[0][0], e))
        return -1;
    if (!mx[0][0])
        return 0;
    fused_part src[2][3];
    tq_dtype biasdt[2];
    for (int p = 0; p < 2; p++) {
        uint64_t rows = p ? H : 2 * I, cols = p ? I : H;
        for (int k = 0; k < 3; k++) {
            if (fused_part_of(h, path, mxfp4_proj[p], mxfp4_sfx[k], &mx[p][k], e))
                return -1;
            const tq_flash_tensor *t = mx[p][k];
            if (!t || !mxfp4_part_ok(t->dtype, t->ndim, t->shape, k, 0, rows, cols))
                return tq_fail(e, TQ_EDATA, "%s: expected mlp.switch_mlp.%s.%s %s [%llu%s] per expert (MXFP4 experts of "
                               "[%llu, %llu])", path, mxfp4_proj[p], mxfp4_sfx[k], k == 2 ? "floats" : "U8",
                               (unsigned long long)rows, k == 0 ? ", in/32, 16" : k == 1 ? ", in/32" : "",
                               (unsigned long long)rows, (unsigned long long)cols);
            src[p][k] = (fused_part){NULL, 0, t->offset};
            if (k == 2)
                biasdt[p] = t->dtype;
        }
    }
    mxfp4_build(r, src, biasdt, em);
    return 1;
}

/* Experts of a split directory: templates from the layer file header (+ the shared codebook
 * and signs from the pinned file). */
static int load_experts_split(tq_runner *r, uint64_t l, rt_emat *em[3], tq_err *e)
{
    const rt_config *c = &r->c;
    moe_names names, *nm = &names;
    if (names_of(r, l, nm, e) != 0)
        return -1;
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
    int fused = load_split_fused(r, &h, path, em, e);
    if (fused < 0)
        goto out;
    for (int k = 0; k < 3 && !fused; k++) {
        rt_tensor t[6];
        int idx[6] = {0, 1, 2, -1, -1, 5};
        mod_parts mp;
        memset(&mp, 0, sizeof mp);
        for (int i = 0; i < 6; i++) {
            if (idx[i] < 0)
                continue;
            const tq_flash_tensor *ft = flash_part(&h, nm, k, part_suffix[i]);
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
        snprintf(module, sizeof module, "model.layers.%llu.%s.%s", (unsigned long long)l, nm->stacked, proj_name[k]);
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
        rt_store_name(r->store, module, full, sizeof full);
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

/* --check-blocks on blocks held whole (--resident's copy, or the mapped file): each expert's
 * block against split.json's SHA-256, once. */
static int check_layer_blocks(const rt_layer *L, const uint8_t *blocks, tq_err *e)
{
    for (uint64_t x = 0; L->src.have_sha && x < L->src.n_experts; x++) {
        unsigned char d[32];
        tq_sha256_buf(blocks + x * L->src.block_size, L->src.block_size, d);
        if (memcmp(d, L->src.sha[x], 32))
            return tq_fail(e, TQ_EDATA, "%s: expert %llu block (offset %llu) does not match split.json's SHA-256",
                           L->src.path, (unsigned long long)x,
                           (unsigned long long)(L->src.data_start + x * L->src.block_size));
    }
    return 0;
}

/* map_experts: layer l's file mapped read-only, whole, from offset 0, at an RT_MAP_PAGE
 * boundary, in a region rounded up to whole RT_MAP_PAGE pages (zeros past the end of the file
 * where its size is not a multiple), so that a device backend wraps it in place.
 * This is how llama.cpp runs a model on Metal: it maps the file (llama.cpp src/llama-mmap.cpp,
 * llama_mmap's POSIX impl: mmap(NULL, file->size(), PROT_READ, MAP_SHARED, fd, 0)) and ggml's
 * Metal backend wraps the mapping (ggml src/ggml-metal/ggml-metal-device.m,
 * ggml_metal_buffer_map: the pointer aligned down and the length up to the page, then
 * newBufferWithBytesNoCopy ... MTLResourceStorageModeShared). mmap's address is on the OS
 * page, 4 KiB on x86-64 Linux: a reservation one RT_MAP_PAGE longer is made first and the file
 * mapped over it at its first 16 KiB boundary, so the shim wraps what a Mac would. The blocks
 * are then found by id like --resident's (resident_blocks), but the OS reads their pages. */
static int map_layer(tq_runner *r, uint64_t l, tq_err *e)
{
    rt_layer *L = &r->L[l];
    uint64_t size, need, len, pg = rt_map_page();
    int fd = tq_open_regular(L->src.path, &size, e);
    if (fd < 0)
        return -1;
    if (tq_mul_u64(L->src.block_size, L->src.n_experts, &need) || tq_add_u64(need, L->src.data_start, &need) ||
        need > size) {
        close(fd);
        return tq_fail(e, TQ_EDATA, "%s: file is %llu bytes, its %llu expert blocks need more", L->src.path,
                       (unsigned long long)size, (unsigned long long)L->src.n_experts);
    }
    len = rt_map_round(need);
    if (len == UINT64_MAX || len > SIZE_MAX - pg) {
        close(fd);
        return tq_fail(e, TQ_ENOMEM, "%s: %llu bytes do not fit in the address space", L->src.path,
                       (unsigned long long)need);
    }
    size_t span = (size_t)(len + pg);
    uint8_t *res = tq_plat_map_anon(span);
    if (!res) {
        close(fd);
        return tq_fail(e, TQ_ENOMEM, "%s: cannot reserve %llu bytes of address space to map it", L->src.path,
                       (unsigned long long)span);
    }
    /* the file over its own pages only: a page wholly past its end would fault (SIGBUS) when
     * read, by a copy a device falls back to included; the rest of the 16 KiB-rounded length
     * stays the reservation's zeros, made read-only */
    uint64_t ospg = tq_plat_page_size(), flen = (need + ospg - 1) / ospg * ospg;
    uint8_t *at = res + (pg - (uintptr_t)res % pg) % pg;
    void *m = mmap(at, (size_t)flen, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    int err = errno;
    close(fd);
    if (m == MAP_FAILED || (flen < len && mprotect(at + flen, (size_t)(len - flen), PROT_READ) != 0)) {
        err = m == MAP_FAILED ? err : errno;
        munmap(res, span);
        return tq_fail(e, TQ_EIO, "%s: cannot map the layer file: %s", L->src.path, strerror(err));
    }
    if (at > res)
        munmap(res, (size_t)(at - res));
    if (res + span > at + len)
        munmap(at + len, (size_t)(res + span - (at + len)));
    L->map = m;
    L->map_len = len;
    L->resident_blocks = L->map + L->src.data_start;
    /* --check-blocks: every block once, now (the CPU never learns which ones a device reads) */
    return check_layer_blocks(L, L->resident_blocks, e);
}

/* --resident on a split directory: every block of every layer in memory. */
static int load_blocks_resident(tq_runner *r, uint64_t l, tq_err *e)
{
    rt_layer *L = &r->L[l];
    uint64_t n;
    if (tq_mul_u64(L->src.block_size, L->src.n_experts, &n))
        return tq_fail(e, TQ_EDATA, "%s: expert data size overflows", L->src.path);
    /* whole GPU-mappable pages (rt_map_page), as the store's tensors: a device backend maps
     * them in place (runtime/backend.c, runner_region) */
    uint64_t pg = rt_map_page(), sz = rt_map_round(n);
    L->resident_blocks = rt_alloc_aligned(sz, L->src.align > pg ? L->src.align : pg, e);
    if (!L->resident_blocks)
        return -1;
    memset(L->resident_blocks + n, 0, sz - n);
    if (tq_pread_full(L->src.fd, L->resident_blocks, n, L->src.data_start, L->src.path, e) != 0)
        return -1;
    if (check_layer_blocks(L, L->resident_blocks, e) != 0)
        return -1;
    r->resident_extra += n;
    return 0;
}

/* Softmax attention of layer L (std names): q (x2 with the output gate), k, v (+ biases
 * when the checkpoint has them), per-head norms, sinks; the layer's head size L->hd and key
 * heads L->kvh (gemma4's full layers have their own; with attention_k_eq_v no v_proj). */
static int load_attention(tq_runner *r, uint64_t l, tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    uint64_t hd = L->hd, qd = c->heads * hd, kd = L->kvh * hd;
    char n[256];
#define P(fmt) (snprintf(n, sizeof n, "model.layers.%llu." fmt, (unsigned long long)l), n)
    if (load_linear(r, P("self_attn.q_proj"), c->att_gate ? 2 * qd : qd, c->hidden, &L->q, e) ||
        load_linear(r, P("self_attn.k_proj"), kd, c->hidden, &L->k, e) ||
        (!L->kv_shared && load_linear(r, P("self_attn.v_proj"), kd, c->hidden, &L->v, e)) ||
        load_linear(r, P("self_attn.o_proj"), c->hidden, qd, &L->o, e))
        return -1;
    if (c->qk_norm && (load_norm(r, P("self_attn.q_norm.weight"), hd, &L->q_norm, e) ||
                       load_norm(r, P("self_attn.k_norm.weight"), hd, &L->k_norm, e)))
        return -1;
    if (c->sinks && load_vec(r, P("self_attn.sinks"), c->heads, 0, &L->sinks, e))
        return -1;
    return 0;
}

/* gemma4's layer beyond attention (transformers' Gemma4TextDecoderLayer, Gemma4TextRouter):
 * pre/post_feedforward_layernorm around the dense MLP, layer_scalar [1] (absent: 1, its
 * initial value); with experts, router.scale [H], router.per_expert_scale [E] and
 * pre_feedforward_layernorm_2, post_feedforward_layernorm_1 and _2. Gemma4RMSNorm multiplies
 * by its weight as stored (not 1 + w as Gemma 3 did). */
static int load_gemma4_extra(tq_runner *r, uint64_t l, tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    char n[256];
    rt_tensor t;
    if (load_norm(r, P("pre_feedforward_layernorm.weight"), c->hidden, &L->pre_ff, e) ||
        load_norm(r, P("post_feedforward_layernorm.weight"), c->hidden, &L->post_ff, e))
        return -1;
    L->layer_scalar = 1.0f;
    int rc = rt_store_get(r->store, P("layer_scalar"), &t, e);
    if (rc < 0)
        return -1;
    if (rc) {
        char full[512];
        if (t.ndim != 1 || t.shape[0] != 1 || (t.dt != TQ_DT_F32 && t.dt != TQ_DT_F16 && t.dt != TQ_DT_BF16))
            return tq_fail(e, TQ_EDATA, "tensor '%s': expected [1] float", rt_store_name(r->store, n, full, sizeof full));
        L->layer_scalar = rt_load_f(t.dt, t.data, 0);
    }
    if (!rt_layer_is_moe(c, l))
        return 0;
    return load_vec(r, P("router.scale"), c->hidden, 0, &L->router_scale, e) ||
                   load_vec(r, P("router.per_expert_scale"), c->experts, 0, &L->expert_scale, e) ||
                   load_norm(r, P("pre_feedforward_layernorm_2.weight"), c->hidden, &L->pre_ff2, e) ||
                   load_norm(r, P("post_feedforward_layernorm_1.weight"), c->hidden, &L->post_ff1, e) ||
                   load_norm(r, P("post_feedforward_layernorm_2.weight"), c->hidden, &L->post_ff2, e)
               ? -1
               : 0;
}

/* Multi-head latent attention: q_proj or q_a_proj + q_a_layernorm + q_b_proj,
 * kv_a_proj_with_mqa + kv_a_layernorm, kv_b_proj (any kind: its rows are read one by one),
 * o_proj. */
static int load_mla(tq_runner *r, uint64_t l, tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    uint64_t qh = c->qk_nope + c->qk_rope;
    char n[256];
    if (c->q_lora) {
        if (load_linear(r, P("self_attn.q_a_proj"), c->q_lora, c->hidden, &L->q_a, e) ||
            load_vec(r, P("self_attn.q_a_layernorm.weight"), c->q_lora, 0, &L->q_a_norm, e) ||
            load_linear(r, P("self_attn.q_b_proj"), c->heads * qh, c->q_lora, &L->q_b, e))
            return -1;
    } else if (load_linear(r, P("self_attn.q_proj"), c->heads * qh, c->hidden, &L->q, e)) {
        return -1;
    }
    return load_linear(r, P("self_attn.kv_a_proj_with_mqa"), c->kv_lora + c->qk_rope, c->hidden, &L->kv_a, e) ||
                   load_vec(r, P("self_attn.kv_a_layernorm.weight"), c->kv_lora, 0, &L->kv_a_norm, e) ||
                   load_linear(r, P("self_attn.kv_b_proj"), c->heads * (c->qk_nope + c->v_head), c->kv_lora, &L->kv_b, e) ||
                   load_linear(r, P("self_attn.o_proj"), c->hidden, c->heads * c->v_head, &L->o, e)
               ? -1
               : 0;
}

/* The depthwise conv weight: HF stores [C, 1, K], the MLX form [C, K, 1]; the same bytes in
 * either case, read as [C][K]. *hf says which layout it was. */
static int load_conv(tq_runner *r, const char *name, uint64_t C, uint64_t K, float **out, int *hf, tq_err *e)
{
    rt_tensor t;
    char full[512];
    rt_store_name(r->store, name, full, sizeof full);
    int rc = rt_store_get(r->store, name, &t, e);
    if (rc <= 0)
        return rc < 0 ? -1 : tq_fail(e, TQ_EDATA, "tensor '%s' (the conv state's weights) is missing", full);
    int ok = t.ndim == 3 && t.shape[0] == C && ((t.shape[1] == 1 && t.shape[2] == K) || (t.shape[1] == K && t.shape[2] == 1));
    if (!ok || (t.dt != TQ_DT_F32 && t.dt != TQ_DT_F16 && t.dt != TQ_DT_BF16))
        return tq_fail(e, TQ_EDATA, "tensor '%s': expected [%llu, 1, %llu] or [%llu, %llu, 1] floats "
                       "(linear_conv_kernel_dim %llu)", full, (unsigned long long)C, (unsigned long long)K,
                       (unsigned long long)C, (unsigned long long)K, (unsigned long long)K);
    *hf = t.shape[2] != 1;
    float *v = vec_alloc(r, C * K, e); /* whole pages: a device maps it (the conv kernel) */
    if (!v)
        return -1;
    for (uint64_t i = 0; i < C * K; i++)
        v[i] = rt_load_f(t.dt, t.data, i);
    *out = v;
    return 0;
}

/* Gated DeltaNet: in_proj_qkvz + in_proj_ba (qwen3_next) or in_proj_qkv, _z, _b, _a
 * (qwen3_5); conv1d, A_log, dt_bias, the gated norm, out_proj. */
static int load_deltanet(tq_runner *r, uint64_t l, tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    uint64_t Kd = c->lk_heads * c->lk_dim, Vd = c->lv_heads * c->lv_dim, C = 2 * Kd + Vd, nv = c->lv_heads;
    char n[256];
    int rc = load_linear_opt(r, P("linear_attn.in_proj_qkvz"), 2 * Kd + 2 * Vd, c->hidden, &L->qkvz, e);
    if (rc < 0)
        return -1;
    L->fused_in = rc;
    if (rc ? load_linear(r, P("linear_attn.in_proj_ba"), 2 * nv, c->hidden, &L->ba, e)
           : load_linear(r, P("linear_attn.in_proj_qkv"), C, c->hidden, &L->qkv, e) ||
                 load_linear(r, P("linear_attn.in_proj_z"), Vd, c->hidden, &L->z, e) ||
                 load_linear(r, P("linear_attn.in_proj_b"), nv, c->hidden, &L->b, e) ||
                 load_linear(r, P("linear_attn.in_proj_a"), nv, c->hidden, &L->a, e))
        return -1;
    int hf;
    return load_conv(r, P("linear_attn.conv1d.weight"), C, c->conv_k, &L->conv_w, &hf, e) ||
                   load_vec(r, P("linear_attn.A_log"), nv, 0, &L->A_log, e) ||
                   load_vec(r, P("linear_attn.dt_bias"), nv, 0, &L->dt_bias, e) ||
                   load_vec(r, P("linear_attn.norm.weight"), c->lv_dim, 0, &L->gnorm, e) ||
                   load_linear(r, P("linear_attn.out_proj"), c->hidden, Vd, &L->o, e)
               ? -1
               : 0;
}

/* Qwen3-Next / Qwen3.5 HF checkpoints store the decoder norms as offsets from 1; their MLX
 * form (mlx-lm's sanitize, tq-convert) stores 1 + w. mlx-lm tells them apart by the conv1d
 * layout ([C, 1, K] is HF): so does this, from the first linear-attention layer. */
static int norms_are_offsets(tq_runner *r, tq_err *e)
{
    const rt_config *c = &r->c;
    if (c->arch != RT_QWEN3_NEXT)
        return 0;
    for (uint64_t l = 0; l < c->layers; l++)
        if (c->mixer[l] == RT_MIX_LINEAR) {
            char n[256];
            rt_tensor t;
            int rc = rt_store_get(r->store, P("linear_attn.conv1d.weight"), &t, e);
            if (rc < 0)
                return -1;
            return rc == 0 || (t.ndim == 3 && t.shape[2] != 1);
        }
    return 1; /* no linear layer to tell by: the HF convention */
}

/* Dense MLP, or the router, the shared expert(s) and the routed experts of layer l. */
static int load_mlp(tq_runner *r, uint64_t l, tq_err *e)
{
    const rt_config *c = &r->c;
    rt_layer *L = &r->L[l];
    moe_names names, *nm = &names;
    char n[256];
    L->moe = rt_layer_is_moe(c, l);
    if ((!L->moe || c->arch == RT_GEMMA4) && /* gemma4: the dense MLP beside the experts */
        (load_linear(r, P("mlp.gate_proj"), c->inter, c->hidden, &L->gate, e) ||
         load_linear(r, P("mlp.up_proj"), c->inter, c->hidden, &L->up, e) ||
         load_linear(r, P("mlp.down_proj"), c->hidden, c->inter, &L->down, e)))
        return -1;
    if (!L->moe)
        return 0;
    if (names_of(r, l, nm, e) != 0)
        return -1;
    /* gemma4's router is a module whose linear layer is router.proj */
    snprintf(n, sizeof n, "model.layers.%llu.%s%s", (unsigned long long)l, nm->router, c->arch == RT_GEMMA4 ? ".proj" : "");
    if (load_linear(r, n, c->experts, c->hidden, &L->router, e) != 0)
        return -1;
    if (c->route == RT_ROUTE_SIGMOID_GROUP) {
        snprintf(n, sizeof n, "model.layers.%llu.%s.e_score_correction_bias", (unsigned long long)l, nm->router);
        if (load_vec(r, n, c->experts, 0, &L->score_bias, e))
            return -1;
    }
    if (nm->shared) {
        char sh[300];
        rt_tensor sw;
        snprintf(sh, sizeof sh, "model.layers.%llu.%s.gate_proj.weight", (unsigned long long)l, nm->shared);
        int rc = has_tensor(r, sh, &sw, e);
        if (rc < 0)
            return -1;
        if (rc) {
            uint64_t si = c->shared_inter ? c->shared_inter : (sw.ndim == 2 ? sw.shape[0] : 0);
            char m[3][300];
            for (int k = 0; k < 3; k++)
                snprintf(m[k], sizeof m[k], "model.layers.%llu.%s.%s", (unsigned long long)l, nm->shared, proj_name[k]);
            L->has_shared = 1;
            if (load_linear(r, m[0], si, c->hidden, &L->sg, e) || load_linear(r, m[1], si, c->hidden, &L->su, e) ||
                load_linear(r, m[2], c->hidden, si, &L->sd, e))
                return -1;
            if (nm->shared_gate) {
                snprintf(n, sizeof n, "model.layers.%llu.%s", (unsigned long long)l, nm->shared_gate);
                if (load_linear(r, n, 1, c->hidden, &L->sgate, e))
                    return -1;
                L->has_sgate = 1;
            }
        } else if (c->shared_inter && c->arch == RT_DEEPSEEK) {
            char full[512];
            return tq_fail(e, TQ_EDATA, "tensor '%s' is missing (n_shared_experts is set)",
                           rt_store_name(r->store, sh, full, sizeof full));
        }
    }
#undef P
    rt_emat *em[3] = {&L->eg, &L->eu, &L->ed};
    if (c->split) {
        if (load_experts_split(r, l, em, e) != 0)
            return -1;
        L->streamed = 1;
        return 0;
    }
    return load_experts_resident(r, l, em, e);
}

int rt_model_load(tq_runner *r, tq_err *e)
{
    const rt_config *c = &r->c;
    if (rt_store_open(&r->store, r->dir, c, e) != 0)
        return -1;
    if (load_linear(r, "model.embed_tokens", c->vocab, c->hidden, &r->embed, e) != 0)
        return -1;
    r->embed_scale = 1.0f;
    if (c->arch == RT_GEMMA4) {
        /* Gemma4TextScaledWordEmbedding.forward: rows times embed_scale.to(weight.dtype), i.e.
         * sqrt(hidden_size) rounded to the embedding's dtype (mlx-lm: the scalar takes the
         * dequantized rows' dtype, the scales' one) */
        float sc = (float)sqrt((double)c->hidden);
        tq_dtype dt = r->embed.kind == RT_DENSE ? r->embed.wdt : r->embed.sdt;
        r->embed_scale = dt == TQ_DT_BF16 ? tq_bf16_to_f32(tq_f32_to_bf16(sc))
                         : dt == TQ_DT_F16 ? tq_f16_to_f32(tq_f32_to_f16(sc))
                                           : sc;
    }
    int rc = has_tensor(r, "lm_head.weight", NULL, e);
    if (rc < 0)
        return -1;
    if (rc && !c->tied) {
        if (load_linear(r, "lm_head", c->vocab, c->hidden, &r->lm_head, e) != 0)
            return -1;
    } else if (!c->tied) {
        /* transformers would leave an untied lm_head at its random initialization: never
         * decode with the embedding in its place */
        char full[512];
        rt_store_name(r->store, "lm_head.weight", full, sizeof full);
        if (c->tied_explicit)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is missing and config.json says tie_word_embeddings false",
                           r->dir, full);
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is missing and tie_word_embeddings is false (config.json has "
                       "none; the %s default)", r->dir, full, c->arch_name);
    } else {
        r->lm_head = r->embed; /* tied: a stored lm_head is ignored, as transformers ties it */
    }
    if ((rc = norms_are_offsets(r, e)) < 0)
        return -1;
    r->norm_shift = rc ? 1.0f : 0.0f;
    if (load_norm(r, "model.norm.weight", c->hidden, &r->final_norm, e) != 0)
        return -1;
    r->L = tq_calloc(c->layers, sizeof *r->L, e);
    if (!r->L)
        return -1;
    for (uint64_t l = 0; l < c->layers; l++)
        r->L[l].src.fd = -1;
    for (uint64_t l = 0; l < c->layers; l++) {
        rt_layer *L = &r->L[l];
        char n[256];
        L->mixer = c->mixer[l];
        L->hd = c->head_dim;
        L->kvh = c->kv_heads;
        if (c->arch == RT_GEMMA4 && L->mixer == RT_MIX_FULL) { /* Gemma4TextAttention.__init__ */
            L->hd = c->g_head_dim;
            L->full_rope = 1;
            L->kv_shared = c->k_eq_v;
            L->kvh = c->k_eq_v ? c->g_kv_heads : c->kv_heads;
        }
        snprintf(n, sizeof n, "model.layers.%llu.input_layernorm.weight", (unsigned long long)l);
        if (load_norm(r, n, c->hidden, &L->in_norm, e))
            return -1;
        snprintf(n, sizeof n, "model.layers.%llu.post_attention_layernorm.weight", (unsigned long long)l);
        if (load_norm(r, n, c->hidden, &L->post_norm, e))
            return -1;
        rc = L->mixer == RT_MIX_LINEAR ? load_deltanet(r, l, e) : L->mixer == RT_MIX_MLA ? load_mla(r, l, e)
                                                                                        : load_attention(r, l, e);
        if (rc || load_mlp(r, l, e) || (c->arch == RT_GEMMA4 && load_gemma4_extra(r, l, e)))
            return -1;
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
    if (any_streamed && !r->o.resident && r->o.map_experts)
        for (uint64_t l = 0; l < c->layers; l++)
            if (r->L[l].streamed && map_layer(r, l, e) != 0)
                return -1;
    if (c->split && r->o.io_mode != TQ_RUN_IO_BUFFERED)
        rt_store_drop_cache(r->store);
    return 0;
}

/* ---- the packed layout (rt_model_pack). A matrix is packed once: two rt_linears over the same
 * memory (the tied lm_head and the embedding) get the flag without a second packing. */
typedef struct pack_seen {
    const void **w;
    size_t n, cap;
} pack_seen;

static int pack_lin(pack_seen *s, rt_linear *l, tq_err *e)
{
    if (!rt_linear_packable(l))
        return 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->w[i] == l->w) {
            l->packed = 1;
            return 0;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        const void **nw = realloc(s->w, cap * sizeof *nw);
        if (!nw)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        s->w = nw;
        s->cap = cap;
    }
    s->w[s->n++] = l->w;
    return rt_linear_pack(l, e);
}

/* An expert matrix whose packed parts (indices, scales, biases) all come from the block
 * (streamed, or the layer's resident blocks): 1; all from memory indexed by expert: 2; else 0. */
static int emat_where(const rt_emat *m)
{
    int affine = m->t.kind == RT_AFFINE;
    if (!m->base[0] && !m->base[1] && (!affine || !m->base[2]))
        return 1;
    if (m->base[0] && m->base[1] && (!affine || m->base[2]))
        return 2;
    return 0;
}

static int pack_block(void *user, uint64_t l, uint8_t *block, tq_err *e)
{
    tq_runner *r = user;
    rt_emat *m[3] = {&r->L[l].eg, &r->L[l].eu, &r->L[l].ed};
    for (int k = 0; k < 3; k++) {
        if (!m[k]->t.packed)
            continue;
        rt_linear x;
        rt_emat_bind(m[k], 0, block, &x);
        x.packed = 0;
        if (rt_linear_pack(&x, e) != 0)
            return -1;
    }
    return 0;
}

int rt_model_pack(tq_runner *r, tq_err *e)
{
    const rt_config *c = &r->c;
    pack_seen s = {0};
    int rc = pack_lin(&s, &r->embed, e) || pack_lin(&s, &r->lm_head, e);
    int fill = 0;
    for (uint64_t l = 0; l < c->layers && !rc; l++) {
        rt_layer *L = &r->L[l];
        rt_linear *lin[] = {&L->q, &L->k, &L->v, &L->o, &L->q_a, &L->q_b, &L->kv_a, &L->kv_b, &L->qkvz, &L->ba,
                            &L->qkv, &L->z, &L->b, &L->a, &L->gate, &L->up, &L->down, &L->router, &L->sg,
                            &L->su, &L->sd, &L->sgate};
        for (size_t i = 0; i < sizeof lin / sizeof *lin && !rc; i++)
            rc = pack_lin(&s, lin[i], e);
        rt_emat *m[3] = {&L->eg, &L->eu, &L->ed};
        for (int k = 0; k < 3 && !rc && L->moe; k++) {
            if (m[k]->per_expert) {
                for (uint64_t x = 0; x < c->experts && !rc; x++)
                    rc = pack_lin(&s, &m[k]->per_expert[x], e);
                continue;
            }
            int where = emat_where(m[k]);
            /* map_experts: the blocks are the layer file's pages, mapped read-only; they stay in
             * the file's layout (the unpacked kernels), as a device backend reads them */
            if (!rt_linear_packable(&m[k]->t) || !where || (where == 1 && !L->resident_blocks && !r->cache) ||
                (where == 1 && L->map))
                continue;
            if (where == 2 || L->resident_blocks) {
                for (uint64_t x = 0; x < c->experts && !rc; x++) {
                    rt_linear one;
                    rt_emat_bind(m[k], x, L->resident_blocks ? L->resident_blocks + x * L->src.block_size : NULL, &one);
                    rc = rt_linear_pack(&one, e);
                }
            } else {
                fill = 1; /* each block as the cache reads it */
            }
            m[k]->t.packed = !rc;
        }
    }
    free(s.w);
    if (!rc && fill && r->cache)
        rt_cache_set_fill(r->cache, pack_block, r);
    return rc ? -1 : 0;
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
            /* conv_w and the other float vectors live in r->vchunk */
            free_emat(&L->eg);
            free_emat(&L->eu);
            free_emat(&L->ed);
            if (L->map)
                munmap(L->map, (size_t)L->map_len);
            else
                free(L->resident_blocks);
            rt_block_src_close(&L->src);
        }
        free(r->L);
    }
    for (size_t i = 0; i < r->n_vchunk; i++)
        free(r->vchunk[i].p);
    free(r->vchunk);
    rt_store_close(r->store);
}
