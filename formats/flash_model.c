/* A split directory presented as the model it came from: pinned.safetensors' tensors as they
 * are, and every expert / FFN tensor under its source name, read straight out of the layer
 * files. tq_split_join writes this model back out; tq-verify compares it with the source. */
#include "formats/family.h"
#include "formats/flash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct vtensor {
    size_t layer;                  /* index into layers */
    size_t tensor;                 /* index into that header's tensors */
    int64_t expert;                /* HF per-expert: the expert; -1: stacked (moe) or dense */
    /* naming fused_xw under the source names: per expert [A, B] (a bias: A = 1), element
     * (a, b) is element col * A + a of layer tensor `tensor` (b even or not interleaved) or
     * `tensor2` (b odd, interleaved), col = b / 2 interleaved, else b (formats/flash.h,
     * tq_flash_xw_part inverted) */
    int xw, interleaved;
    size_t tensor2;
    uint64_t A, B;
} vtensor;

typedef struct split_src {
    tq_tensor_source base;
    size_t n_layers;
    tq_flash_header *hdrs;
    int *fds;
    char **paths;
    size_t n_vt;
    vtensor *vt;
    char **names;
} split_src;

/* A fused_xw tensor under its source name (vtensor): expert x's slice rebuilt from its block
 * (both layer tensors read whole), bytes [within, within + n) of it copied to p. */
static int xw_read(const split_src *s, const vtensor *v, uint64_t x, uint64_t within, size_t n, char *p, tq_err *e)
{
    const tq_flash_header *h = &s->hdrs[v->layer];
    const tq_flash_tensor *t[2] = {&h->tensors[v->tensor], &h->tensors[v->interleaved ? v->tensor2 : v->tensor]};
    size_t esz = tq_dtype_size(t[0]->dtype);
    uint64_t j0 = within / esz, j1 = (within + n + esz - 1) / esz;
    unsigned char *src[2] = {tq_malloc((size_t)t[0]->nbytes, e), NULL}, *tmp = NULL;
    int rc = -1;
    if (!src[0] || !(src[1] = tq_malloc((size_t)t[1]->nbytes, e)) || !(tmp = tq_malloc((size_t)((j1 - j0) * esz), e)))
        goto out;
    for (int k = 0; k < 2; k++)
        if (tq_pread_full(s->fds[v->layer], src[k], (size_t)t[k]->nbytes,
                          h->data_start + x * h->expert_block_size + t[k]->offset, s->paths[v->layer], e) != 0)
            goto out;
    for (uint64_t j = j0; j < j1; j++) {
        uint64_t a = j / v->B, b = j % v->B, k = v->interleaved ? b & 1 : 0, col = v->interleaved ? b >> 1 : b;
        memcpy(tmp + (j - j0) * esz, src[k] + (col * v->A + a) * esz, esz);
    }
    memcpy(p, tmp + (within - j0 * esz), n);
    rc = 0;
out:
    free(src[0]);
    free(src[1]);
    free(tmp);
    return rc;
}

static int src_read(const tq_tensor_source *s_, uint64_t index, uint64_t off, void *buf, size_t len, tq_err *e)
{
    const split_src *s = (const split_src *)s_;
    if (index >= s->n_vt)
        return tq_fail(e, TQ_EUSAGE, "split: tensor index %llu out of range", (unsigned long long)index);
    const vtensor *v = &s->vt[index];
    const tq_flash_header *h = &s->hdrs[v->layer];
    const tq_flash_tensor *t = &h->tensors[v->tensor];
    int fd = s->fds[v->layer];
    const char *path = s->paths[v->layer];
    uint64_t total = v->xw ? v->A * v->B * tq_dtype_size(t->dtype) : t->nbytes, per = total, end;
    if (h->kind == TQ_FLASH_MOE && v->expert < 0 && tq_mul_u64(total, h->num_experts, &total) != 0)
        return tq_fail(e, TQ_EDATA, "%s: size overflows", path);
    if (tq_add_u64(off, len, &end) != 0 || end > total)
        return tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': read [%llu, +%zu) past its %llu bytes", path,
                       s->names[index], (unsigned long long)off, len, (unsigned long long)total);
    if (h->kind == TQ_FLASH_DENSE)
        return tq_pread_full(fd, buf, len, t->offset + off, path, e);
    if (v->expert >= 0)
        return tq_pread_full(fd, buf, len, h->data_start + (uint64_t)v->expert * h->expert_block_size + t->offset + off,
                             path, e);
    /* stacked: expert x's slice of the tensor is x's block at the tensor's inner offset */
    char *p = buf;
    while (len) {
        uint64_t x = off / per, within = off % per;
        size_t n = per - within < len ? (size_t)(per - within) : len;
        if (v->xw ? xw_read(s, v, x, within, n, p, e) != 0
                  : tq_pread_full(fd, p, n, h->data_start + x * h->expert_block_size + t->offset + within, path, e) != 0)
            return -1;
        p += n;
        off += n;
        len -= n;
    }
    return 0;
}

static void src_close(tq_tensor_source *s_)
{
    split_src *s = (split_src *)s_;
    for (size_t i = 0; i < s->n_layers; i++) {
        tq_flash_header_free(&s->hdrs[i]);
        if (s->fds && s->fds[i] >= 0)
            close(s->fds[i]);
        if (s->paths)
            free(s->paths[i]);
    }
    for (size_t i = 0; i < s->n_vt; i++)
        free(s->names[i]);
    free(s->hdrs);
    free(s->fds);
    free(s->paths);
    free(s->vt);
    free(s->names);
    free(s);
}

/* A layer-file tensor name ("mlp.switch_mlp.gate_proj.weight", "switch_mlp.gate_proj.weight",
 * "mlp.gate_proj.weight", "gate_proj.weight") -> its last two parts, "gate_proj.weight". */
static const char *tail_of(const char *n)
{
    const char *last = strrchr(n, '.');
    if (!last)
        return n;
    for (const char *p = last - 1; p >= n; p--)
        if (*p == '.')
            return p + 1;
    return n;
}

/* The source name of a fused layer's tensor with tail "PROJ.SUFFIX": the family's stacked
 * HF tensor, experts.gate_up_proj / down_proj (".weight" slices, no suffix in the source) or
 * gpt-oss's experts.PROJ_blocks / _scales / _bias. */
static char *fused_name(const tq_family *f, const char *prefix, const char *tail, tq_err *e)
{
    const char *dot = strchr(tail, '.');
    int proj = -1;
    for (int k = TQ_FLASH_GATE_UP; k <= TQ_FLASH_DOWN && dot; k++)
        if (strlen(tq_flash_projs[k]) == (size_t)(dot - tail) && !strncmp(tail, tq_flash_projs[k], (size_t)(dot - tail)))
            proj = k;
    /* float fused experts sit where transformers 5 keeps the block (formats/family.h, v5_block) */
    const char *fb = tq_family_fused_block(f), *blk = *f->moe_block ? f->moe_block : "";
    if ((f->store == TQ_EXP_FUSED || f->store == TQ_EXP_SEPARATE) && proj >= 0 && !strcmp(dot + 1, "weight"))
        return tq_asprintf(e, "%s%s%sexperts.%s", prefix, fb, *fb ? "." : "", tq_flash_projs[proj]);
    if (f->store == TQ_EXP_MXFP4 && proj >= 0 &&
        (!strcmp(dot + 1, "blocks") || !strcmp(dot + 1, "scales") || !strcmp(dot + 1, "bias")))
        return tq_asprintf(e, "%s%s%sexperts.%s_%s", prefix, blk, *blk ? "." : "", tq_flash_projs[proj], dot + 1);
    return tq_fail(e, TQ_EDATA, "split: layer tensor '%s' is not one of the fused expert tensors of %s checkpoints", tail,
                   f->name), NULL;
}

/* The source name of a layer-file tensor with tail "PROJ.SUFFIX" (expert x, or -1 for the
 * stacked / dense tensor), spelled as the model's family spells it (formats/family.h). */
static char *source_name(const tq_family *f, const char *prefix, int dense, int nm, int64_t x, const char *tail,
                         tq_err *e)
{
    if (dense)
        return tq_asprintf(e, "%smlp.%s", prefix, tail);
    if (nm == TQ_NAMING_FUSED)
        return fused_name(f, prefix, tail, e);
    if (nm == TQ_NAMING_MLX)
        return tq_asprintf(e, "%s%s.%s", prefix, f->mlx_container, tail);
    const char *dot = strchr(tail, '.');
    const char *proj = NULL;
    static const int fp[3] = {TQ_PROJ_GATE, TQ_PROJ_UP, TQ_PROJ_DOWN};
    for (int k = 0; k < 3 && dot && dot[1] && strcmp(dot + 1, "blocks"); k++)
        if (!strncmp(tail, tq_family_proj_name(fp[k]), (size_t)(dot - tail)) &&
            strlen(tq_family_proj_name(fp[k])) == (size_t)(dot - tail))
            proj = f->hf_proj[fp[k]];
    if (f->store != TQ_EXP_SEPARATE || !proj)
        return tq_fail(e, TQ_EUNSUP, "split: %s checkpoints do not store experts one tensor per expert and "
                       "projection; join them with --naming mlx (or source)", f->name), NULL;
    const char *blk = *f->moe_block ? f->moe_block : "";
    return tq_asprintf(e, "%s%s%sexperts.%lld.%s%s", prefix, blk, *blk ? "." : "", (long long)x, proj, dot);
}

static int cmp_mt(const void *a, const void *b)
{
    return strcmp(((const tq_model_tensor *)a)->info.name, ((const tq_model_tensor *)b)->info.name);
}

static int add_vt(split_src *s, size_t cap, size_t layer, size_t tensor, int64_t expert, char *name, tq_err *e)
{
    if (!name)
        return -1;
    if (strlen(name) >= 1024) {
        free(name);
        return tq_fail(e, TQ_EDATA, "split: tensor name too long");
    }
    if (s->n_vt >= cap) {
        free(name);
        return tq_fail(e, TQ_EDATA, "split: too many tensors");
    }
    s->vt[s->n_vt] = (vtensor){.layer = layer, .tensor = tensor, .expert = expert};
    s->names[s->n_vt++] = name;
    return 0;
}

/* A fused_xw layer (formats/flash.h) under its source names: transformers' gpt-oss
 * experts.gate_up_proj [E, H, 2I], gate_up_proj_bias [E, 2I], down_proj [E, I, H] and
 * down_proj_bias [E, H], rebuilt from the block's mlx-lm gate/up/down tensors, which must be
 * exactly those six with the shapes one I and one H give. */
static int add_xw_layer(split_src *s, size_t cap, size_t i, const char *prefix, const tq_family *f, tq_err *e)
{
    const tq_flash_header *h = &s->hdrs[i];
    static const char *const tails[6] = {"gate_proj.weight", "gate_proj.bias", "up_proj.weight",
                                         "up_proj.bias", "down_proj.weight", "down_proj.bias"};
    size_t at[6];
    for (int k = 0; k < 6; k++) {
        at[k] = h->n_tensors;
        for (size_t j = 0; j < h->n_tensors; j++)
            if (!strcmp(tail_of(h->tensors[j].name), tails[k]))
                at[k] = j;
    }
    const tq_flash_tensor *g = at[0] < h->n_tensors ? &h->tensors[at[0]] : NULL;
    uint64_t I = g ? g->shape[0] : 0, H = g ? g->shape[1] : 0;
    int ok = h->n_tensors == 6 && g && g->ndim == 2;
    for (int k = 0; ok && k < 6; k++) {
        const tq_flash_tensor *t = &h->tensors[at[k]];
        int w = !(k & 1);
        uint64_t rows = k < 4 ? I : H, cols = k < 4 ? H : I;
        ok = at[k] < h->n_tensors && t->ndim == (w ? 2 : 1) && t->shape[0] == rows && (!w || t->shape[1] == cols) &&
             (k < 2 || k > 3 || t->dtype == h->tensors[at[k - 2]].dtype); /* up as gate, interleaved with it */
    }
    if (!ok)
        return tq_fail(e, TQ_EDATA, "%s: a layer of naming fused_xw holds exactly gate_proj, up_proj and down_proj "
                       ".weight and .bias ([I, H], [I], [I, H], [I], [H, I], [H]; up of gate's dtypes)", s->paths[i]);
    const char *blk = *f->moe_block ? f->moe_block : "";
    static const char *const names[4] = {"gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"};
    const vtensor vt[4] = {{i, at[0], -1, 1, 1, at[2], H, 2 * I}, {i, at[1], -1, 1, 1, at[3], 1, 2 * I},
                           {i, at[4], -1, 1, 0, 0, I, H}, {i, at[5], -1, 0, 0, 0, 0, 0}};
    for (int k = 0; k < 4; k++) {
        if (s->n_vt >= cap)
            return tq_fail(e, TQ_EDATA, "split: too many tensors");
        char *name = tq_asprintf(e, "%s%s%sexperts.%s", prefix, blk, *blk ? "." : "", names[k]);
        if (!name)
            return -1;
        s->vt[s->n_vt] = vt[k];
        s->names[s->n_vt++] = name;
    }
    return 0;
}

static int build(tq_model *m, split_src *s, const tq_flash_manifest *man, const char *dir, int naming, tq_err *e)
{
    /* names as the family spells them; without one, the qwen3_moe layout tq has always written */
    const tq_family *f = tq_family_detect(m->config);
    if (!f || f->store == TQ_EXP_NONE)
        f = tq_family_get(TQ_FAM_QWEN3_MOE);
    s->n_layers = man->n_layers;
    s->hdrs = tq_calloc(s->n_layers, sizeof *s->hdrs, e);
    s->fds = tq_malloc(s->n_layers * sizeof *s->fds, e);
    s->paths = tq_calloc(s->n_layers, sizeof *s->paths, e);
    if (!s->hdrs || !s->fds || !s->paths)
        return -1;
    for (size_t i = 0; i < s->n_layers; i++)
        s->fds[i] = -1;
    size_t cap = 0;
    for (size_t i = 0; i < s->n_layers; i++) {
        const tq_flash_layer *L = &man->layers[i];
        if (!(s->paths[i] = tq_path_join(dir, L->file, e)) || tq_flash_read(&s->hdrs[i], s->paths[i], e) != 0)
            return -1;
        const tq_flash_header *h = &s->hdrs[i];
        if (h->kind != man->kind || h->layer_idx != L->layer || (h->kind == TQ_FLASH_MOE && h->num_experts != man->num_experts))
            return tq_fail(e, TQ_EDATA, "%s: header disagrees with split.json (format, layer_idx or num_experts)", s->paths[i]);
        if ((s->fds[i] = tq_open_regular(s->paths[i], NULL, e)) < 0)
            return -1;
        if (L->naming == TQ_NAMING_FUSED && naming != TQ_NAMING_SOURCE && naming != TQ_NAMING_FUSED)
            return tq_fail(e, TQ_EUNSUP, "%s: layer %u keeps the %s experts fused as its source did (gate_up_proj per "
                           "expert); they come back only under their source names (--naming source)", dir, L->layer,
                           f->name);
        int per_expert = h->kind == TQ_FLASH_MOE && (naming == TQ_NAMING_SOURCE ? L->naming : naming) == TQ_NAMING_HF;
        cap += h->n_tensors * (per_expert ? (size_t)h->num_experts : 1);
    }
    s->vt = tq_calloc(cap ? cap : 1, sizeof *s->vt, e);
    s->names = tq_calloc(cap ? cap : 1, sizeof *s->names, e);
    if (!s->vt || !s->names)
        return -1;
    for (size_t i = 0; i < s->n_layers; i++) {
        const tq_flash_layer *L = &man->layers[i];
        const tq_flash_header *h = &s->hdrs[i];
        int nm = naming == TQ_NAMING_SOURCE ? L->naming : naming;
        if (nm == TQ_NAMING_FUSED_XW) {
            if (add_xw_layer(s, cap, i, L->prefix, f, e) != 0)
                return -1;
            continue;
        }
        for (size_t k = 0; k < h->n_tensors; k++) {
            const char *tail = tail_of(h->tensors[k].name);
            int dense = h->kind == TQ_FLASH_DENSE;
            if (dense || nm != TQ_NAMING_HF) {
                if (add_vt(s, cap, i, k, -1, source_name(f, L->prefix, dense, nm, -1, tail, e), e) != 0)
                    return -1;
            } else {
                for (uint64_t x = 0; x < h->num_experts; x++)
                    if (add_vt(s, cap, i, k, (int64_t)x, source_name(f, L->prefix, 0, TQ_NAMING_HF, (int64_t)x, tail, e), e) != 0)
                        return -1;
            }
        }
    }
    const tq_st_file *pin = m->files[0];
    m->n_tensors = pin->n_tensors + s->n_vt;
    if (!(m->tensors = tq_calloc(m->n_tensors ? m->n_tensors : 1, sizeof *m->tensors, e)))
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < pin->n_tensors; i++, n++) {
        m->tensors[n].info = pin->tensors[i];
        m->tensors[n].file = pin;
    }
    for (size_t i = 0; i < s->n_vt; i++, n++) {
        const vtensor *v = &s->vt[i];
        const tq_flash_header *h = &s->hdrs[v->layer];
        const tq_flash_tensor *t = &h->tensors[v->tensor];
        tq_tensor_info *ti = &m->tensors[n].info;
        int stacked = h->kind == TQ_FLASH_MOE && v->expert < 0;
        if (t->ndim + stacked > TQ_MAX_DIMS)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' has too many dimensions", s->paths[v->layer], t->name);
        ti->name = s->names[i];
        ti->dtype = t->dtype;
        ti->ndim = t->ndim + stacked;
        ti->shape[0] = h->num_experts;
        for (int d = 0; d < t->ndim; d++)
            ti->shape[d + stacked] = t->shape[d];
        ti->nelem = 1;
        for (int d = 0; d < ti->ndim; d++)
            ti->nelem *= ti->shape[d]; /* bounded: nbytes * num_experts was overflow-checked */
        ti->nbytes = stacked ? t->nbytes * h->num_experts : t->nbytes;
        if (v->xw) { /* [E, A, B], a bias [E, B] (add_xw_layer) */
            ti->ndim = v->A == 1 ? 2 : 3;
            ti->shape[1] = v->A == 1 ? v->B : v->A;
            ti->shape[2] = v->A == 1 ? 0 : v->B;
            ti->nelem = h->num_experts * v->A * v->B;
            ti->nbytes = ti->nelem * tq_dtype_size(t->dtype);
        }
        m->tensors[n].src = &s->base;
        m->tensors[n].src_index = i;
    }
    qsort(m->tensors, m->n_tensors, sizeof *m->tensors, cmp_mt);
    for (size_t i = 1; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i - 1].info.name, m->tensors[i].info.name))
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is both pinned and in a layer file", dir, m->tensors[i].info.name);
    return 0;
}

static int is_split_file(const char *n)
{
    return !strcmp(n, "pinned.safetensors") || !strcmp(n, "config.json") || !strcmp(n, "split.json") ||
           !strcmp(n, TQ_PROVENANCE_NAME) || strchr(n, '/') != NULL;
}

int tq_model_open_split(tq_model **out, const char *dir, int naming, tq_err *e)
{
    *out = NULL;
    tq_flash_manifest *man = NULL;
    tq_model *m = tq_calloc(1, sizeof *m, e);
    split_src *s = tq_calloc(1, sizeof *s, e);
    char *pinned = NULL, *cfg = NULL;
    if (!m || !s) {
        free(m);
        free(s);
        return -1;
    }
    s->base.read = src_read;
    s->base.close = src_close;
    m->source = &s->base;
    int rc = -1;
    if (!(m->path = tq_strdup(dir, e)) || tq_flash_split_open_check(dir, e) != 0 ||
        tq_flash_manifest_load(&man, dir, e) != 0)
        goto out;
    if (!(m->files = tq_calloc(1, sizeof *m->files, e)) || !(pinned = tq_path_join(dir, "pinned.safetensors", e)) ||
        tq_st_open(&m->files[0], pinned, e) != 0)
        goto out;
    m->n_files = 1;
    if (!(cfg = tq_path_join(dir, "config.json", e)))
        goto out;
    if (tq_exists(cfg)) {
        if (tq_json_read_file(cfg, 64u << 20, &m->config, e) != 0)
            goto out;
        cJSON_DeleteItemFromObjectCaseSensitive(m->config, "streaming");
    }
    if (build(m, s, man, dir, naming, e) != 0)
        goto out;
    if (!(m->extra_files = tq_calloc(man->n_files ? man->n_files : 1, sizeof *m->extra_files, e)))
        goto out;
    for (size_t i = 0; i < man->n_files; i++)
        if (!is_split_file(man->files[i].name)) {
            if (!(m->extra_files[m->n_extra] = tq_strdup(man->files[i].name, e)))
                goto out;
            m->n_extra++;
        }
    rc = 0;
out:
    free(pinned);
    free(cfg);
    tq_flash_manifest_free(man);
    if (rc != 0)
        tq_model_close(m);
    else
        *out = m;
    return rc;
}
