/* --dequantize: TurboQuant and MLX affine modules back to floats, every tensor back under the name the
 * family's HuggingFace checkpoints use (stacked experts unstacked per expert, or into the fused
 * gate_up_proj / down_proj tensors; wrapped roots renamed back; Qwen3-Next's norms and conv1d
 * as HF stores them), honouring the quantization block's rotation and refusing what tq cannot
 * decode (QJL-corrected modules, ternary experts). Reads only the small codebook and signs. */
#include "quant/convert/convert_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

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

/* What the model's quantization block lets tq decode. */
typedef struct qinfo {
    int rotation;          /* 1 hadamard (or its alias blockwise_hadamard), 0 none */
} qinfo;

static int read_qinfo(const tq_model *m, qinfo *qi, tq_err *e)
{
    qi->rotation = 1;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(m->config, "quantization");
    if (!cJSON_IsObject(q) && m->config)
        q = cJSON_GetObjectItemCaseSensitive(tq_family_text_config(m->config), "quantization");
    const cJSON *rot = cJSON_GetObjectItemCaseSensitive(q, "rotation");
    if (rot && !cJSON_IsNull(rot)) {
        if (!cJSON_IsString(rot))
            return tq_fail(e, TQ_EDATA, "%s: config.json: quantization.rotation must be a string", m->path);
        if (!strcmp(rot->valuestring, "none"))
            qi->rotation = 0;
        else if (strcmp(rot->valuestring, "hadamard") && strcmp(rot->valuestring, "blockwise_hadamard"))
            return tq_fail(e, TQ_EUNSUP, "%s: config.json: quantization.rotation \"%s\" is not one tq can undo "
                           "(hadamard, blockwise_hadamard, none)", m->path, rot->valuestring);
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "use_qjl")))
        return tq_fail(e, TQ_EUNSUP, "%s: config.json: quantization.use_qjl is true: QJL residual correction is not "
                       "supported by tq (it cannot dequantize or run such modules)", m->path);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "ternary_experts")))
        return tq_fail(e, TQ_EUNSUP, "%s: config.json: quantization.ternary_experts is true: ternary (trit) experts "
                       "are not supported by tq", m->path);
    for (size_t i = 0; i < m->n_tensors; i++)
        if (strstr(m->tensors[i].info.name, ".qjl_"))
            return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': QJL residual correction is not supported by tq", m->path,
                           m->tensors[i].info.name);
    return 0;
}

/* Where the stacked expert tensor NAME goes in the HF checkpoint: per expert (SEPARATE), into
 * a fused tensor (FUSED), or nowhere (0: keep it stacked). */
typedef struct hf_dest {
    int kind;              /* 0 keep, 1 per expert, 2 fused */
    char layer[512];       /* HF layer prefix */
    const char *block;     /* "mlp." / "block_sparse_moe." / "" */
    int proj;
    const char *suffix;
} hf_dest;

static void dest_of(const cv_plan *p, const char *name, hf_dest *d)
{
    const tq_family *f = p->family ? p->family : tq_family_get(TQ_FAM_QWEN3_MOE);
    tq_name_info ni;
    memset(d, 0, sizeof *d);
    if (p->o->keep_names)
        return;
    tq_family_name(f, 0, name, &ni);
    if (ni.role != TQ_ROLE_EXPERT || ni.form != TQ_FORM_STACKED || ni.layer_len >= sizeof d->layer)
        return;
    if (f->store != TQ_EXP_SEPARATE && f->store != TQ_EXP_FUSED)
        return; /* gpt-oss: its HF experts are MXFP4; the floats stay in the MLX form */
    if (f->store == TQ_EXP_FUSED && strcmp(ni.suffix, "weight"))
        return;
    char mlx[512];
    snprintf(mlx, sizeof mlx, "%.*s", (int)ni.layer_len, name);
    if (tq_family_hf_name(f, mlx, d->layer, sizeof d->layer))
        return;
    d->kind = f->store == TQ_EXP_SEPARATE ? 1 : 2;
    d->block = *f->moe_block ? f->moe_block : NULL;
    d->proj = ni.proj;
    d->suffix = ni.suffix;
}

/* HF name of expert k of a per-expert destination (suffix: the MLX one) */
static char *expert_name(const cv_plan *p, const hf_dest *d, uint64_t k, tq_err *e)
{
    const tq_family *f = p->family ? p->family : tq_family_get(TQ_FAM_QWEN3_MOE);
    return tq_asprintf(e, "%s%s%sexperts.%llu.%s.%s", d->layer, d->block ? d->block : "", d->block ? "." : "",
                       (unsigned long long)k, f->hf_proj[d->proj], d->suffix);
}

/* The fused tensor of a FUSED destination, declared once: gate_up [E, 2R, C] or down [E, R, C]. */
static long fused_decl(cv_plan *p, const hf_dest *d, tq_dtype dt, uint64_t E, uint64_t R, uint64_t C, tq_err *e)
{
    int gu = d->proj != TQ_PROJ_DOWN;
    char *nm = tq_asprintf(e, "%s%s%sexperts.%s", d->layer, d->block ? d->block : "", d->block ? "." : "",
                           gu ? "gate_up_proj" : "down_proj");
    if (!nm)
        return -1;
    long i = cv_find_decl(p, nm);
    if (i < 0) {
        uint64_t sh[3] = {E, gu ? 2 * R : R, C};
        i = cv_declare(p, nm, dt, 3, sh, e);
    } else if (p->decls[i].ndim != 3 || p->decls[i].shape[0] != E || p->decls[i].shape[2] != C ||
               p->decls[i].shape[1] != (gu ? 2 * R : R)) {
        i = tq_fail(e, TQ_EDATA, "%s: the gate and up stacks of '%s' differ in shape", p->m->path, nm);
    }
    free(nm);
    return i;
}

/* Element offset of expert k's rows in a FUSED destination */
static uint64_t fused_off(const hf_dest *d, uint64_t k, uint64_t R, uint64_t C)
{
    if (d->proj == TQ_PROJ_DOWN)
        return k * R * C;
    return k * 2 * R * C + (d->proj == TQ_PROJ_UP ? R * C : 0);
}

/* The parts of a dequantize item (E, rows, cols, bits, group, out_dtype set): each expert's
 * packed rows and scales (and affine biases), written under the family's HF name: per expert,
 * into the fused tensor, or as the stack / matrix it is. Sets it->name. */
static int assign_parts(cv_plan *p, cv_item *it, const tq_model_tensor *w, const tq_model_tensor *s,
                        const tq_model_tensor *b, tq_err *e)
{
    const tq_tensor_info *wi = &w->info;
    int nd = wi->ndim;
    uint64_t E = it->E, out = it->rows, in = it->cols, words = wi->shape[nd - 1], ngr = in / it->group;
    tq_dtype odt = it->out_dtype;
    hf_dest d;
    dest_of(p, wi->name, &d);
    if (nd != 3)
        d.kind = 0;
    size_t cap = strlen(wi->name) + 64;
    if (!(it->name = tq_malloc(cap, e)))
        return -1;
    if (tq_family_hf_name(p->family, wi->name, it->name, cap))
        return tq_fail(e, TQ_EDATA, "%s: tensor name '%s' too long", p->m->path, wi->name);
    long d0 = -1;
    if (d.kind == 2 && (d0 = fused_decl(p, &d, odt, E, out, in, e)) < 0)
        return -1;
    for (uint64_t k = 0; k < E; k++) {
        cv_part *pt = &it->parts[k];
        pt->src = w;
        pt->src_off = k * out * words;
        pt->scales = s;
        pt->biases = b;
        pt->scales_off = k * out * ngr;
        if (d.kind == 1) {
            char *nm = expert_name(p, &d, k, e);
            uint64_t sh[2] = {out, in};
            long di = nm ? cv_declare(p, nm, odt, 2, sh, e) : -1;
            free(nm);
            if (di < 0)
                return -1;
            pt->out = di;
            pt->out_off = 0;
        } else if (d.kind == 2) {
            pt->out = d0;
            pt->out_off = fused_off(&d, k, out, in);
        } else {
            if (k == 0) {
                uint64_t sh[3] = {E, out, in};
                long di = cv_declare(p, it->name, odt, nd, nd == 3 ? sh : sh + 1, e);
                if (di < 0)
                    return -1;
                pt->out = di;
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
    char *ns = tq_asprintf(e, "%s.scales", P), *nb = tq_asprintf(e, "%s.biases", P);
    const tq_model_tensor *s = ns ? tq_model_find(m, ns) : NULL, *b = nb ? tq_model_find(m, nb) : NULL;
    free(ns), free(nb);
    const tq_tensor_info *wi = &w->info;
    int nd = wi->ndim, bits;
    uint64_t group = 0, b64 = 0;
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
    cv_item *it = cv_new_item(p, CV_AFFINE_DEQUANT, e);
    if (!it || !(it->source = tq_strdup(wi->name, e)) || !(it->parts = tq_calloc(E, sizeof *it->parts, e)))
        return -1;
    it->E = E;
    it->rows = out;
    it->cols = in;
    it->bits = bits;
    it->group = (size_t)group;
    it->src_dtype = TQ_DT_U32;
    it->qdtype = sdt;
    it->out_dtype = p->o->dtype >= 0 ? (tq_dtype)p->o->dtype : sdt;
    return assign_parts(p, it, w, s, b, e);
}

static int plan_dequant_module(cv_plan *p, const qinfo *qi, const char *P, const tq_model_tensor *w, tq_err *e)
{
    const tq_model *m = p->m;
    char *ns = tq_asprintf(e, "%s.scales", P), *nc = tq_asprintf(e, "%s.codebook", P), *ng = tq_asprintf(e, "%s.signs", P);
    const tq_model_tensor *s = ns ? tq_model_find(m, ns) : NULL, *c = nc ? tq_model_find(m, nc) : NULL,
                          *g = ng ? tq_model_find(m, ng) : NULL;
    free(ns), free(nc), free(ng);
    const tq_tensor_info *wi = &w->info;
    if (!s || !c || !g)
        return tq_fail(e, TQ_EDATA, "%s: '%s' has packed weights but lacks its scales, codebook or signs", m->path, wi->name);
    int nd = wi->ndim;
    uint64_t ncb = c->info.ndim == 1 ? c->info.shape[0] : 0, in = g->info.ndim == 1 ? g->info.shape[0] : 0;
    int bits = ncb == 2 ? 1 : ncb == 4 ? 2 : ncb == 8 ? 3 : ncb == 16 ? 4 : 0;
    if (!bits)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s.codebook': %llu values of rank %d, not a vector of 2, 4, 8 or 16",
                       m->path, P, (unsigned long long)(c->info.ndim ? c->info.shape[0] : 1), c->info.ndim);
    if (wi->dtype != TQ_DT_U32 || (nd != 2 && nd != 3) || s->info.ndim != nd || s->info.dtype != TQ_DT_F16 ||
        c->info.dtype != TQ_DT_F16 || g->info.dtype != TQ_DT_F16 || !bits || !in)
        return tq_fail(e, TQ_EDATA, "%s: module '%s': weight/scales/codebook/signs have unexpected dtypes or ranks", m->path, P);
    uint64_t E = nd == 3 ? wi->shape[0] : 1, out = wi->shape[nd - 2], ngr = s->info.shape[nd - 1];
    int same_lead = nd == 2 || s->info.shape[0] == E;
    if (!ngr || in % ngr || !same_lead || s->info.shape[nd - 2] != out || wi->shape[nd - 1] != tq_pack_words(in, bits))
        return tq_fail(e, TQ_EDATA, "%s: module '%s': shapes of weight [%llu words], scales [%llu groups], signs [%llu] and "
                       "'%s.codebook' [%llu values] disagree", m->path, P, (unsigned long long)wi->shape[nd - 1],
                       (unsigned long long)ngr, (unsigned long long)in, P, (unsigned long long)ncb);
    size_t gsz = (size_t)(in / ngr), block = tq_hadamard_block(in);
    int mm;
    uint64_t NN;
    if (tq_hadamard_split(block, &mm, &NN))
        return tq_fail(e, TQ_EDATA, "%s: module '%s': no Hadamard block for %llu inputs", m->path, P, (unsigned long long)in);
    tq_dtype odt = p->o->dtype >= 0 ? (tq_dtype)p->o->dtype : TQ_DT_BF16;
    cv_item *it = cv_new_item(p, CV_DEQUANT, e);
    if (!it || !(it->source = tq_strdup(wi->name, e)) || !(it->parts = tq_calloc(E, sizeof *it->parts, e)) ||
        !(it->signs = tq_malloc(in * sizeof *it->signs, e)))
        return -1;
    it->E = E;
    it->rows = out;
    it->cols = in;
    it->bits = bits;
    it->group = gsz;
    it->block = block;
    it->src_dtype = TQ_DT_U32;
    it->out_dtype = odt;
    if (read_f16_vec(g, it->signs, in, e) || read_f16_vec(c, it->codebook, ncb, e))
        return -1;
    size_t bad;
    const char *why;
    if (tq_codebook_check(it->codebook, (size_t)ncb, &bad, &why))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s.codebook': value %zu (%g) is %s", m->path, P, bad,
                       (double)it->codebook[bad], why);
    int negative = 0;
    for (uint64_t j = 0; j < in; j++) {
        if (it->signs[j] != 1.0f && it->signs[j] != -1.0f)
            return tq_fail(e, TQ_EDATA, "%s: '%s.signs'[%llu] is not ±1", m->path, P, (unsigned long long)j);
        negative |= it->signs[j] < 0;
    }
    /* rotation "none" writes all-ones signs; a negative sign means the weights were rotated
     * anyway (TurboQuant-MLX before 0.23 ignored --rotation none), so undo the rotation */
    it->norot = !qi->rotation && !negative;
    return assign_parts(p, it, w, s, NULL, e);
}

static int convertible(tq_dtype d) { return d == TQ_DT_F16 || d == TQ_DT_BF16 || d == TQ_DT_F32 || d == TQ_DT_F64; }

/* A tensor that was not quantized: copied under its HF name, unstacked per expert or into a
 * fused tensor when it is a stacked expert tensor, with the inverse of the MLX transforms. */
static int plan_copy_back(cv_plan *p, const tq_model_tensor *t, int hf_out, tq_err *e)
{
    const tq_tensor_info *ti = &t->info;
    const tq_family *f = p->family;
    tq_dtype odt = p->o->dtype >= 0 && tq_dtype_is_float(ti->dtype) ? (tq_dtype)p->o->dtype : ti->dtype;
    if (ends_with(ti->name, ".bias")) { /* a quantized module's bias (stored F16) in the weights' dtype */
        size_t n = strlen(ti->name) - 5;
        char *w = tq_asprintf(e, "%.*s.weight", (int)n, ti->name), *sc = tq_asprintf(e, "%.*s.scales", (int)n, ti->name);
        const tq_model_tensor *wt = w ? tq_model_find(p->m, w) : NULL;
        if (wt && wt->info.dtype == TQ_DT_U32 && sc && tq_model_find(p->m, sc) && tq_dtype_is_float(ti->dtype))
            odt = p->o->dtype >= 0 ? (tq_dtype)p->o->dtype : TQ_DT_BF16;
        free(w), free(sc);
    }
    hf_dest d;
    dest_of(p, ti->name, &d);
    if (ti->ndim < 2)
        d.kind = 0;
    float add = f && hf_out && (f->transforms & TQ_FT_NORM_SHIFT) && ti->ndim == 1 && tq_family_norm_is_shifted(f, ti->name)
                    ? -1.0f
                    : 0.0f;
    if ((odt != ti->dtype || add != 0.0f) && !convertible(ti->dtype))
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': cannot convert dtype %s", p->m->path, ti->name, tq_dtype_name(ti->dtype));
    uint64_t E = d.kind ? ti->shape[0] : 1, per = 1;
    for (int k = d.kind ? 1 : 0; k < ti->ndim; k++)
        per *= ti->shape[k]; /* bounded: the safetensors reader checked the product */
    cv_item *it = cv_new_item(p, CV_COPY, e);
    if (!it || !(it->name = tq_strdup(ti->name, e)) || !(it->source = tq_strdup(ti->name, e)) ||
        !(it->parts = tq_calloc(E ? E : 1, sizeof *it->parts, e)))
        return -1;
    it->E = E;
    it->rows = 1;
    it->cols = per;
    it->src_dtype = ti->dtype;
    it->out_dtype = odt;
    it->add = add;
    if (d.kind == 0) {
        char *hf = tq_malloc(strlen(ti->name) + 64, e);
        if (!hf || tq_family_hf_name(f, ti->name, hf, strlen(ti->name) + 64)) {
            free(hf);
            return hf ? tq_fail(e, TQ_EDATA, "%s: tensor name '%s' too long", p->m->path, ti->name) : -1;
        }
        uint64_t sh[TQ_MAX_DIMS];
        memcpy(sh, ti->shape, sizeof sh);
        if (f && hf_out && (f->transforms & TQ_FT_CONV_KLAST) && ends_with(ti->name, ".conv1d.weight") && ti->ndim == 3 &&
            sh[2] == 1 && sh[1] != 1) {
            sh[2] = sh[1];
            sh[1] = 1;
        }
        long di = cv_declare(p, hf, odt, ti->ndim, sh, e);
        free(it->name);
        it->name = hf;
        if (di < 0)
            return -1;
        it->parts[0] = (cv_part){.src = t, .out = di};
        return 0;
    }
    uint64_t R = ti->ndim >= 3 ? ti->shape[1] : 1, C = ti->shape[ti->ndim - 1];
    long d0 = d.kind == 2 ? fused_decl(p, &d, odt, E, R, C, e) : -1;
    if (d.kind == 2 && d0 < 0)
        return -1;
    for (uint64_t k = 0; k < E; k++) {
        cv_part *pt = &it->parts[k];
        pt->src = t;
        pt->src_off = k * per;
        if (d.kind == 2) {
            pt->out = d0;
            pt->out_off = fused_off(&d, k, R, C);
            continue;
        }
        char *nm = expert_name(p, &d, k, e);
        long di = nm ? cv_declare(p, nm, odt, ti->ndim - 1, ti->shape + 1, e) : -1;
        free(nm);
        if (di < 0)
            return -1;
        pt->out = di;
    }
    return 0;
}

int cv_plan_dequant(cv_plan *p, tq_err *e)
{
    const tq_model *m = p->m;
    qinfo qi;
    if (read_qinfo(m, &qi, e))
        return -1;
    /* the output is the HF form when stacked experts go back to per-expert or fused tensors */
    int hf_out = 0;
    for (size_t i = 0; i < m->n_tensors && !hf_out; i++) {
        hf_dest d;
        dest_of(p, m->tensors[i].info.name, &d);
        hf_out = d.kind != 0;
    }
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
                if (tq_model_find(m, cname) ? plan_dequant_module(p, &qi, P, t, e) : plan_affine_dequant(p, P, t, e))
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
        if (!consumed && plan_copy_back(p, t, hf_out, e))
            return -1;
    }
    if (!found)
        return tq_fail(e, TQ_EDATA, "%s: no quantized modules (P.weight U32 with P.scales) to dequantize", m->path);
    return 0;
}
