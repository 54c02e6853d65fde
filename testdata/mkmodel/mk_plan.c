/* Which tensors a generated checkpoint has: names and shapes exactly as the family's
 * HuggingFace checkpoints hold them (per-expert, fused gate_up or gpt-oss MXFP4 experts,
 * language_model-wrapped roots, MTP heads), or the MLX form tq-convert writes (--naming mlx:
 * stacked experts, MLX roots), optionally with MLX affine quantization of the linear layers.
 * Every value is keyed by its HF name, so both namings carry the same numbers. */
#include "testdata/mkmodel/mk_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

typedef struct builder {
    tq_mk_plan *p;
    mk_plan_priv *pv;
    size_t cap_decls;
    const tq_mk_opts *o;
    const tq_family *f;
    int mlx;               /* MLX naming */
    int zero_norms;        /* HF norms are offsets from 1 (qwen3_next, qwen3_5) */
    char root[32];         /* HF text root: "model." or "model.language_model." */
    tq_err *e;
} builder;

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

/* What one item is; the fields mk_item documents. name is the tensor name (part 0); base the
 * module path for affine (.weight/.scales/.biases) and MXFP4 (_blocks/_scales) parts. */
typedef struct spec {
    int kind;
    const char *name, *base;
    const char *key_pre, *key_suf, *key_suf2; /* key_suf NULL: the key is key_pre */
    uint64_t n_exp;                           /* > 0: stacked with the expert axis first */
    uint64_t rows, cols;
    int rowmap, quantizable, enc, add_one, mxfp4_round;
    double mean, sigma;
    int dt_set;
    tq_dtype dt;
    int ndim;                                 /* > 0: declared shape instead of [E,] rows, cols */
    uint64_t shape[4];
} spec;

static int add(builder *b, const spec *s)
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
    it->kind = s->kind;
    it->n_exp = s->n_exp ? s->n_exp : 1;
    it->rows = s->kind == MK_LINEAR ? s->rows : 1;
    it->cols = s->cols;
    it->rowmap = s->rowmap;
    it->mean = s->mean;
    it->sigma = s->sigma;
    it->add_one = s->add_one;
    it->mxfp4_round = s->mxfp4_round;
    it->enc = s->enc;
    it->dt = s->dt_set ? s->dt : o->dtype;
    it->widx[0] = it->widx[1] = it->widx[2] = -1;
    it->key_pre = tq_strdup(s->key_pre, b->e);
    if (!it->key_pre || (s->key_suf && !(it->key_suf = tq_strdup(s->key_suf, b->e))) ||
        (s->key_suf2 && !(it->key_suf2 = tq_strdup(s->key_suf2, b->e))))
        return -1;
    if (o->arch == TQ_MK_NGRAM && o->bits) { /* --bits 0: raw rows in --dtype */
        it->enc = MK_ENC_AFFINE;
        it->bits = o->bits;
        it->group = o->group_size;
    } else if (s->quantizable && o->quant_bits && s->cols % (uint64_t)o->group_size == 0) {
        it->enc = MK_ENC_AFFINE;
        it->bits = o->quant_bits;
        it->group = o->group_size;
    }
    it->nparts = it->enc == MK_ENC_AFFINE ? 3 : it->enc == MK_ENC_MXFP4 ? 2 : 1;
    static const char *const affine_sfx[3] = {"weight", "scales", "biases"};
    static const char *const mxfp4_sfx[2] = {"_blocks", "_scales"};
    for (int k = 0; k < it->nparts; k++) {
        if (it->enc == MK_ENC_AFFINE)
            it->names[k] = tq_asprintf(b->e, "%s.%s", s->base, affine_sfx[k]);
        else if (it->enc == MK_ENC_MXFP4)
            it->names[k] = tq_asprintf(b->e, "%s%s", s->base, mxfp4_sfx[k]);
        else
            it->names[k] = tq_strdup(s->name, b->e);
        if (!it->names[k])
            return -1;
        uint64_t shape[5];
        int nd = 0;
        if (s->n_exp)
            shape[nd++] = s->n_exp;
        tq_dtype dt = it->dt;
        uint64_t inner = it->cols;
        if (it->enc == MK_ENC_MXFP4) {
            dt = TQ_DT_U8;
            shape[nd++] = it->rows;
            shape[nd++] = it->cols / 32;
            if (k == 0)
                shape[nd++] = 16;
            it->out_row_bytes[k] = k == 0 ? it->cols / 2 : it->cols / 32;
        } else {
            if (it->enc == MK_ENC_AFFINE && k == 0) {
                dt = TQ_DT_U32;
                inner = it->cols * (uint64_t)it->bits / 32;
            } else if (it->enc == MK_ENC_AFFINE) {
                inner = it->cols / (uint64_t)it->group;
            }
            if (s->ndim) {
                nd = s->ndim;
                memcpy(shape, s->shape, sizeof s->shape);
            } else {
                if (s->kind == MK_LINEAR)
                    shape[nd++] = it->rows;
                shape[nd++] = inner;
            }
            it->out_row_bytes[k] = inner * tq_dtype_size(dt);
        }
        if (add_decl(b, it->names[k], dt, nd, shape))
            return -1;
    }
    return 0;
}

/* The name written for HF name `hf`: itself, or its MLX form. Static buffer per call site. */
static const char *out_name(builder *b, const char *hf, char *buf, size_t cap)
{
    if (!b->mlx || tq_family_mlx_name(b->f, hf, buf, cap) != 0)
        return hf;
    return buf;
}

/* A weight matrix: quantizable linear (q = 1) or kept float (embeddings, routers, kv_b_proj). */
static int mat(builder *b, const char *hf_base, uint64_t rows, uint64_t cols, int q)
{
    char key[400], on[400];
    snprintf(key, sizeof key, "%s.weight", hf_base);
    const char *name = out_name(b, key, on, sizeof on);
    char base[400];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(name) - 7), name);
    spec s = {.kind = MK_LINEAR, .name = name, .base = base, .key_pre = key, .rows = rows, .cols = cols,
              .quantizable = q};
    return add(b, &s);
}

static int lin(builder *b, const char *hf_base, uint64_t rows, uint64_t cols) { return mat(b, hf_base, rows, cols, 1); }
static int plain(builder *b, const char *hf_base, uint64_t rows, uint64_t cols) { return mat(b, hf_base, rows, cols, 0); }

static int vec(builder *b, const char *hf_name, uint64_t n, double mean, double sigma, int add_one, int dt_set, tq_dtype dt)
{
    char on[400];
    const char *name = out_name(b, hf_name, on, sizeof on);
    spec s = {.kind = MK_VEC, .name = name, .key_pre = hf_name, .cols = n, .mean = mean, .sigma = sigma,
              .add_one = add_one, .dt_set = dt_set, .dt = dt};
    return add(b, &s);
}

/* A norm: 1 + 0.05 z, or (zero-centred families) 0.05 z, which the MLX form stores as 1 + w
 * where mlx-lm's sanitize would have added the 1 (tq_family_norm_is_shifted). */
static int norm(builder *b, const char *hf_name, uint64_t n)
{
    if (!b->zero_norms) {
        char on[400];
        spec s = {.kind = MK_NORM, .name = out_name(b, hf_name, on, sizeof on), .key_pre = hf_name, .cols = n,
                  .mean = 1.0, .sigma = TQ_MK_NORM_SIGMA};
        return add(b, &s);
    }
    int shift = b->mlx && tq_family_norm_is_shifted(b->f, hf_name) && (b->f->transforms & TQ_FT_NORM_SHIFT);
    return vec(b, hf_name, n, 0.0, TQ_MK_NORM_SIGMA, shift, 0, 0);
}

static int bias(builder *b, const char *hf_base, uint64_t n)
{
    char name[400];
    snprintf(name, sizeof name, "%s.bias", hf_base);
    return vec(b, name, n, 0.0, 0.02, 0, 0, 0);
}

/* ------------------------------------------------------------------ routed experts */
/* Projection k (gate, up, down) of expert e as a [rows, cols] matrix; HF per-expert key. */
static void dims(const builder *b, int k, uint64_t I, uint64_t *rows, uint64_t *cols)
{
    uint64_t H = (uint64_t)b->o->hidden;
    *rows = k == TQ_PROJ_DOWN ? H : I;
    *cols = k == TQ_PROJ_DOWN ? I : H;
}

/* L: HF layer prefix "model.layers.3." (keys); Lout: the written layer prefix. */
static int experts(builder *b, const char *L, const char *Lout, uint64_t E, uint64_t I)
{
    const tq_family *f = b->f;
    static const int projs[3] = {TQ_PROJ_GATE, TQ_PROJ_UP, TQ_PROJ_DOWN};
    const char *blk = f->moe_block, *dot = *blk ? "." : "";
    char pre[400], suf[64], suf2[64], name[480], base[480];
    snprintf(pre, sizeof pre, "%s%s%sexperts.", L, blk, dot);
    uint64_t H = (uint64_t)b->o->hidden;
    if (b->mlx) { /* stacked: <container>.<proj>.weight [E, rows, cols] (+ .bias for gpt-oss) */
        for (int i = 0; i < 3; i++) {
            uint64_t rows, cols;
            dims(b, projs[i], I, &rows, &cols);
            const char *hp = f->hf_proj[projs[i]] ? f->hf_proj[projs[i]] : tq_family_proj_name(projs[i]);
            snprintf(suf, sizeof suf, ".%s.weight", hp);
            snprintf(base, sizeof base, "%s%s.%s", Lout, f->mlx_container, tq_family_proj_name(projs[i]));
            snprintf(name, sizeof name, "%s.weight", base);
            spec s = {.kind = MK_LINEAR, .name = name, .base = base, .key_pre = pre, .key_suf = suf, .n_exp = E,
                      .rows = rows, .cols = cols, .quantizable = 1, .mxfp4_round = f->store == TQ_EXP_MXFP4};
            if (add(b, &s))
                return -1;
            if (f->expert_bias) {
                snprintf(suf, sizeof suf, ".%s.bias", hp);
                snprintf(name, sizeof name, "%s.bias", base);
                spec v = {.kind = MK_VEC, .name = name, .key_pre = pre, .key_suf = suf, .n_exp = E, .cols = rows,
                          .sigma = 0.02};
                if (add(b, &v))
                    return -1;
            }
        }
        return 0;
    }
    if (f->store == TQ_EXP_SEPARATE) {
        for (int i = 0; i < 3; i++)
            for (uint64_t x = 0; x < E; x++) {
                uint64_t rows, cols;
                dims(b, projs[i], I, &rows, &cols);
                snprintf(base, sizeof base, "%s%llu.%s", pre, (unsigned long long)x, f->hf_proj[projs[i]]);
                if (lin(b, base, rows, cols))
                    return -1;
            }
        return 0;
    }
    /* fused: gate_up_proj [E, 2I, H] (halves, or gpt-oss's interleaved rows), down_proj [E, H, I] */
    int mx = f->store == TQ_EXP_MXFP4;
    for (int i = 0; i < 2; i++) {
        int up = i == 0;
        snprintf(base, sizeof base, "%s%s%s%sexperts.%s", Lout, blk, dot, "", up ? "gate_up_proj" : "down_proj");
        snprintf(suf, sizeof suf, up ? ".gate_proj.weight" : ".down_proj.weight");
        snprintf(suf2, sizeof suf2, ".up_proj.weight");
        spec s = {.kind = MK_LINEAR, .name = base, .base = base, .key_pre = pre, .key_suf = suf,
                  .key_suf2 = up ? suf2 : NULL, .n_exp = E, .rows = up ? 2 * I : H, .cols = up ? H : I,
                  .rowmap = up ? (mx ? MK_ROWS_INTERLEAVE : MK_ROWS_HALVES) : MK_ROWS_PLAIN,
                  .enc = mx ? MK_ENC_MXFP4 : MK_ENC_DTYPE};
        if (add(b, &s))
            return -1;
        if (mx) {
            snprintf(name, sizeof name, "%s_bias", base);
            snprintf(suf, sizeof suf, up ? ".gate_proj.bias" : ".down_proj.bias");
            snprintf(suf2, sizeof suf2, ".up_proj.bias");
            spec v = {.kind = MK_VEC, .name = name, .key_pre = pre, .key_suf = suf, .key_suf2 = up ? suf2 : NULL,
                      .n_exp = E, .cols = up ? 2 * I : H, .rowmap = up ? MK_ROWS_INTERLEAVE : MK_ROWS_PLAIN,
                      .sigma = 0.02};
            if (add(b, &v))
                return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ layers */
#define B(...) (snprintf(p, sizeof p, __VA_ARGS__), p)

static int std_attention(builder *b, const char *L, int q_gate, int qk_norm, int biases)
{
    const tq_mk_opts *o = b->o;
    uint64_t H = (uint64_t)o->hidden, D = (uint64_t)o->head_dim;
    uint64_t Q = (uint64_t)o->heads * D, KV = (uint64_t)o->kv_heads * D;
    char p[400];
    if (lin(b, B("%sself_attn.q_proj", L), q_gate ? 2 * Q : Q, H) || lin(b, B("%sself_attn.k_proj", L), KV, H) ||
        lin(b, B("%sself_attn.v_proj", L), KV, H) || lin(b, B("%sself_attn.o_proj", L), H, Q))
        return -1;
    if (qk_norm && (norm(b, B("%sself_attn.q_norm.weight", L), D) || norm(b, B("%sself_attn.k_norm.weight", L), D)))
        return -1;
    if (biases >= 1 && (bias(b, B("%sself_attn.q_proj", L), q_gate ? 2 * Q : Q) ||
                        bias(b, B("%sself_attn.k_proj", L), KV) || bias(b, B("%sself_attn.v_proj", L), KV)))
        return -1;
    if (biases >= 2 && bias(b, B("%sself_attn.o_proj", L), H))
        return -1;
    return 0;
}

/* Gemma 4 attention (transformers' Gemma4TextAttention, config as google/gemma-4-26B-A4B-it
 * ships it: attention_k_eq_v true): sliding layers q/k/v of head_dim with num_key_value_heads,
 * full layers of global_head_dim with num_global_key_value_heads and no v_proj (the key
 * projection is the value); q_norm and k_norm of the layer's head size. */
static int gemma4_attention(builder *b, const char *L, int full)
{
    const tq_mk_opts *o = b->o;
    uint64_t H = (uint64_t)o->hidden, D = full ? 2 * (uint64_t)o->head_dim : (uint64_t)o->head_dim;
    uint64_t Q = (uint64_t)o->heads * D, KV = (uint64_t)(full ? tq_mk_gemma4_global_kv(o) : o->kv_heads) * D;
    char p[400];
    if (lin(b, B("%sself_attn.q_proj", L), Q, H) || lin(b, B("%sself_attn.k_proj", L), KV, H) ||
        (!full && lin(b, B("%sself_attn.v_proj", L), KV, H)) || lin(b, B("%sself_attn.o_proj", L), H, Q))
        return -1;
    return norm(b, B("%sself_attn.q_norm.weight", L), D) || norm(b, B("%sself_attn.k_norm.weight", L), D) ? -1 : 0;
}

/* Gated DeltaNet (qwen3_next: fused qkvz / ba projections; qwen3_5: split). */
static int linear_attention(builder *b, const char *L)
{
    const tq_mk_opts *o = b->o;
    uint64_t H = (uint64_t)o->hidden, Kd = (uint64_t)(o->lin_k_heads * o->lin_k_dim);
    uint64_t Vd = (uint64_t)(o->lin_v_heads * o->lin_v_dim), Nv = (uint64_t)o->lin_v_heads;
    uint64_t C = 2 * Kd + Vd, K = (uint64_t)o->conv_kernel;
    char p[400];
    if (b->f->id == TQ_FAM_QWEN3_NEXT) {
        if (lin(b, B("%slinear_attn.in_proj_qkvz", L), 2 * Kd + 2 * Vd, H) || lin(b, B("%slinear_attn.in_proj_ba", L), 2 * Nv, H))
            return -1;
    } else if (lin(b, B("%slinear_attn.in_proj_qkv", L), C, H) || lin(b, B("%slinear_attn.in_proj_z", L), Vd, H) ||
               lin(b, B("%slinear_attn.in_proj_b", L), Nv, H) || lin(b, B("%slinear_attn.in_proj_a", L), Nv, H)) {
        return -1;
    }
    /* conv1d: depthwise [C, 1, K] in HF; the MLX form qwen3_next's convert writes is [C, K, 1] */
    char key[400], on[400];
    snprintf(key, sizeof key, "%slinear_attn.conv1d.weight", L);
    int klast = b->mlx && (b->f->transforms & TQ_FT_CONV_KLAST);
    spec s = {.kind = MK_LINEAR, .name = out_name(b, key, on, sizeof on), .key_pre = key, .rows = C, .cols = K,
              .ndim = 3, .shape = {C, klast ? K : 1, klast ? 1 : K}};
    if (add(b, &s))
        return -1;
    /* A_log = log(A), A in (0, 16]: around log 8; dt_bias around 1 */
    if (vec(b, B("%slinear_attn.A_log", L), Nv, 2.0, 0.5, 0, 0, 0) ||
        vec(b, B("%slinear_attn.dt_bias", L), Nv, 1.0, 0.1, 0, 0, 0))
        return -1;
    int z = b->zero_norms;
    b->zero_norms = 0; /* the gated norm multiplies by its weight: not zero-centred */
    int rc = norm(b, B("%slinear_attn.norm.weight", L), (uint64_t)o->lin_v_dim);
    b->zero_norms = z;
    return rc || lin(b, B("%slinear_attn.out_proj", L), H, Vd) ? -1 : 0;
}

static int mla_attention(builder *b, const char *L)
{
    const tq_mk_opts *o = b->o;
    uint64_t H = (uint64_t)o->hidden, h = (uint64_t)o->heads, qd = (uint64_t)(o->qk_nope_dim + o->qk_rope_dim);
    uint64_t kvl = (uint64_t)o->kv_lora_rank, ql = (uint64_t)o->q_lora_rank;
    char p[400];
    if (ql) {
        if (lin(b, B("%sself_attn.q_a_proj", L), ql, H) || norm(b, B("%sself_attn.q_a_layernorm.weight", L), ql) ||
            lin(b, B("%sself_attn.q_b_proj", L), h * qd, ql))
            return -1;
    } else if (lin(b, B("%sself_attn.q_proj", L), h * qd, H)) {
        return -1;
    }
    return lin(b, B("%sself_attn.kv_a_proj_with_mqa", L), kvl + (uint64_t)o->qk_rope_dim, H) ||
                   norm(b, B("%sself_attn.kv_a_layernorm.weight", L), kvl) ||
                   plain(b, B("%sself_attn.kv_b_proj", L), h * (uint64_t)(o->qk_nope_dim + o->v_head_dim), kvl) ||
                   lin(b, B("%sself_attn.o_proj", L), H, h * (uint64_t)o->v_head_dim)
               ? -1
               : 0;
}

static int dense_mlp(builder *b, const char *L, const char *m, uint64_t I)
{
    uint64_t H = (uint64_t)b->o->hidden;
    char p[400];
    return lin(b, B("%s%s.gate_proj", L, m), I, H) || lin(b, B("%s%s.up_proj", L, m), I, H) ||
                   lin(b, B("%s%s.down_proj", L, m), H, I)
               ? -1
               : 0;
}

/* The MoE block of layer L (HF prefix) written under Lout. */
static int moe_block(builder *b, const char *L, const char *Lout)
{
    const tq_mk_opts *o = b->o;
    const tq_family *f = b->f;
    uint64_t H = (uint64_t)o->hidden, E = (uint64_t)o->experts;
    uint64_t I = f->id == TQ_FAM_MIXTRAL || f->id == TQ_FAM_GPT_OSS ? (uint64_t)o->intermediate : (uint64_t)o->moe_intermediate;
    char p[400];
    switch (f->id) {
    case TQ_FAM_MIXTRAL:
        if (plain(b, B("%sblock_sparse_moe.gate", L), E, H))
            return -1;
        break;
    case TQ_FAM_GPT_OSS:
        if (plain(b, B("%smlp.router", L), E, H) || bias(b, B("%smlp.router", L), E))
            return -1;
        break;
    case TQ_FAM_GEMMA4:
        if (plain(b, B("%srouter.proj", L), E, H) || vec(b, B("%srouter.scale", L), H, 1.0, 0.05, 0, 0, 0) ||
            vec(b, B("%srouter.per_expert_scale", L), E, 1.0, 0.05, 0, 0, 0))
            return -1;
        break;
    case TQ_FAM_DEEPSEEK_V3:
        /* DeepSeek-V3 ships e_score_correction_bias in F32 (mlx-lm's cast_predicate keeps it) */
        if (plain(b, B("%smlp.gate", L), E, H) ||
            vec(b, B("%smlp.gate.e_score_correction_bias", L), E, 0.0, 0.01, 0, 1, TQ_DT_F32) ||
            dense_mlp(b, L, "mlp.shared_experts", I * (uint64_t)o->n_shared_experts))
            return -1;
        break;
    default: /* qwen */
        if (plain(b, B("%smlp.gate", L), E, H))
            return -1;
        uint64_t S = f->id == TQ_FAM_QWEN3_MOE ? (o->shared_expert ? (uint64_t)o->intermediate : 0) : (uint64_t)o->shared_inter;
        if (S && (dense_mlp(b, L, "mlp.shared_expert", S) || plain(b, B("%smlp.shared_expert_gate", L), 1, H)))
            return -1;
        break;
    }
    return experts(b, L, Lout, E, I);
}

/* Decoder layer L of the language model (mtp = 0) or of the MTP head. L: the HF prefix. */
static int layer(builder *b, const char *L, uint64_t idx, int mtp)
{
    const tq_mk_opts *o = b->o;
    const tq_family *f = b->f;
    uint64_t H = (uint64_t)o->hidden;
    char p[400], Lout[400];
    if (out_name(b, L, Lout, sizeof Lout) == L)
        snprintf(Lout, sizeof Lout, "%s", L);
    if (norm(b, B("%sinput_layernorm.weight", L), H) || norm(b, B("%spost_attention_layernorm.weight", L), H))
        return -1;
    cJSON *cfg = NULL;
    if (tq_mk_config(o, &cfg, b->e))
        return -1;
    int kind = mtp ? TQ_ATTN_FULL : tq_family_attn_kind(f, cfg, idx, b->e);
    int moe = f->store == TQ_EXP_NONE ? 0 : mtp ? 1 : tq_family_layer_is_moe(f, cfg, idx, b->e);
    cJSON_Delete(cfg);
    if (kind < 0 || moe < 0)
        return -1;
    int rc = 0;
    switch (f->id) {
    case TQ_FAM_LLAMA:
    case TQ_FAM_MIXTRAL:
        rc = std_attention(b, L, 0, 0, 0);
        break;
    case TQ_FAM_QWEN2:
    case TQ_FAM_QWEN2_MOE:
        rc = std_attention(b, L, 0, 0, 1);
        break;
    case TQ_FAM_QWEN3_NEXT:
    case TQ_FAM_QWEN3_5:
    case TQ_FAM_QWEN3_5_MOE:
        rc = kind == TQ_ATTN_LINEAR ? linear_attention(b, L) : std_attention(b, L, 1, 1, 0);
        break;
    case TQ_FAM_DEEPSEEK_V3:
        rc = mla_attention(b, L);
        break;
    case TQ_FAM_GPT_OSS:
        rc = std_attention(b, L, 0, 0, 2) || vec(b, B("%sself_attn.sinks", L), (uint64_t)o->heads, 0.0, 0.5, 0, 0, 0);
        break;
    case TQ_FAM_GEMMA4:
        rc = gemma4_attention(b, L, kind == TQ_ATTN_FULL) || norm(b, B("%spre_feedforward_layernorm.weight", L), H) ||
             norm(b, B("%spost_feedforward_layernorm.weight", L), H) ||
             vec(b, B("%slayer_scalar", L), 1, 1.0, 0.0, 0, 0, 0) || dense_mlp(b, L, "mlp", (uint64_t)o->intermediate);
        if (!rc && moe)
            rc = norm(b, B("%spre_feedforward_layernorm_2.weight", L), H) ||
                 norm(b, B("%spost_feedforward_layernorm_1.weight", L), H) ||
                 norm(b, B("%spost_feedforward_layernorm_2.weight", L), H);
        break;
    default: /* qwen3, qwen3_moe */
        rc = std_attention(b, L, 0, 1, 0);
        break;
    }
    if (rc)
        return -1;
    if (moe)
        return moe_block(b, L, Lout);
    if (f->id == TQ_FAM_GEMMA4)
        return 0;
    return dense_mlp(b, L, "mlp", (uint64_t)o->intermediate);
}

/* Multi-token prediction head: mtp.* (Qwen3-Next, Qwen3.5) or DeepSeek's extra layer. */
static int mtp_head(builder *b)
{
    const tq_mk_opts *o = b->o;
    uint64_t H = (uint64_t)o->hidden, V = (uint64_t)o->vocab;
    char p[400], L[400];
    int mlx = b->mlx;
    b->mlx = 0; /* tq-convert keeps the head under its source names */
    int rc = 0;
    if (b->f->mtp == TQ_MTP_PREFIX) {
        rc = plain(b, "mtp.fc", H, 2 * H) || norm(b, "mtp.pre_fc_norm_embedding.weight", H) ||
             norm(b, "mtp.pre_fc_norm_hidden.weight", H) || norm(b, "mtp.norm.weight", H);
        for (long k = 0; !rc && k < o->mtp_layers; k++) {
            snprintf(L, sizeof L, "mtp.layers.%ld.", k);
            rc = layer(b, L, (uint64_t)k, 1);
        }
    } else {
        for (long k = 0; !rc && k < o->mtp_layers; k++) {
            snprintf(L, sizeof L, "%slayers.%ld.", b->root, o->layers + k);
            rc = layer(b, L, (uint64_t)(o->layers + k), 1) || norm(b, B("%senorm.weight", L), H) ||
                 norm(b, B("%shnorm.weight", L), H) || lin(b, B("%seh_proj", L), H, 2 * H) ||
                 norm(b, B("%sshared_head.norm.weight", L), H) || plain(b, B("%sshared_head.head", L), V, H) ||
                 plain(b, B("%sembed_tokens", L), V, H);
        }
    }
    b->mlx = mlx;
    return rc;
}
#undef B

static int model(builder *b)
{
    const tq_mk_opts *o = b->o;
    uint64_t H = (uint64_t)o->hidden, V = (uint64_t)o->vocab;
    char p[400];
    snprintf(p, sizeof p, "%sembed_tokens", b->root);
    if (plain(b, p, V, H))
        return -1;
    snprintf(p, sizeof p, "%snorm.weight", b->root);
    if (norm(b, p, H))
        return -1;
    for (long l = 0; l < o->layers; l++) {
        snprintf(p, sizeof p, "%slayers.%ld.", b->root, l);
        if (layer(b, p, (uint64_t)l, 0))
            return -1;
    }
    /* the MLX form is what tq-convert writes: without the heads mlx-lm's sanitize drops */
    if (o->mtp_layers && (!b->mlx || b->f->mtp_keep) && mtp_head(b))
        return -1;
    return o->tie_embeddings || b->f->id == TQ_FAM_GEMMA4 ? 0 : lin(b, "lm_head", V, H);
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
    builder b = {p, pv, 0, o, tq_mk_family(o->arch), 0, 0, "model.", e};
    int rc = 0;
    if (o->arch == TQ_MK_NGRAM) {
        char *key = tq_asprintf(e, "%s.weight", o->prefix);
        spec s = {.kind = MK_LINEAR, .name = key, .base = o->prefix, .key_pre = key, .rows = o->rows,
                  .cols = (uint64_t)o->width, .quantizable = 1};
        rc = !key || add(&b, &s);
        free(key);
    } else {
        b.mlx = o->naming_mlx || (o->quant_bits && o->arch != TQ_MK_QWEN3_MOE && o->arch != TQ_MK_QWEN3 &&
                                  o->arch != TQ_MK_LLAMA);
        b.zero_norms = (b.f->id == TQ_FAM_QWEN3_NEXT || b.f->id == TQ_FAM_QWEN3_5 || b.f->id == TQ_FAM_QWEN3_5_MOE);
        if (b.f->wrapped)
            snprintf(b.root, sizeof b.root, "model.language_model.");
        rc = model(&b);
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
            free(it->key_suf2);
            for (int k = 0; k < 3; k++)
                free(it->names[k]);
        }
        free(pv->items);
        free(pv);
    }
    free(p->decls);
    memset(p, 0, sizeof *p);
}
