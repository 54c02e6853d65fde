/* tq-convert for every family of formats/family.h, from a generated HF checkpoint:
 *  - the output's tensor set equals, name for name, shape for shape and dtype for dtype, what
 *    the family's mlx-lm model class holds after its sanitize() (the tables below are written
 *    from mlx_lm/models/<family>.py: the modules each class builds, which of them are
 *    nn.Linear / SwitchLinear and therefore TurboQuant modules, which stay float);
 *  - routers, gates, norms and every other float copy are bit-identical to the source (Qwen3-
 *    Next's zero-centred norms: exactly round(w + 1), mlx-lm's own sanitize arithmetic);
 *  - converting the MLX form gives the same bytes as converting the HF form;
 *  - --dequantize gives back the HF tensors (names, shapes, dtypes) within the quantization
 *    error, float copies exact (gpt-oss: the MLX float form, its HF experts being MXFP4);
 *  - malformed family checkpoints (missing expert, expert count != config, fused tensor of the
 *    wrong width, MXFP4 blocks without scales) fail with exit status 1 naming the tensor. */
#include "quant/convert/convert.h"
#include "quant/quant.h"
#include "testdata/mkmodel/mkmodel.h"
#include "tests/unit/check.h"

#include <cjson/cJSON.h>

#define BITS 4
#define GS 64

typedef struct xt {
    char name[200];
    tq_dtype dt;
    int nd;
    uint64_t s[4];
} xt;

typedef struct xset {
    xt t[2048];
    size_t n;
} xset;

static xset X;

static void add(const char *name, tq_dtype dt, int nd, uint64_t a, uint64_t b, uint64_t c)
{
    if (X.n >= sizeof X.t / sizeof *X.t)
        return;
    xt *t = &X.t[X.n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dt = dt;
    t->nd = nd;
    t->s[0] = a;
    t->s[1] = b;
    t->s[2] = c;
}

static char nb[256];
#define NM(...) (snprintf(nb, sizeof nb, __VA_ARGS__), nb)

/* Float tensor kept as the source stores it (bf16). */
static void F(const char *name, uint64_t a) { add(name, TQ_DT_BF16, 1, a, 0, 0); }
static void F2(const char *name, uint64_t a, uint64_t b) { add(name, TQ_DT_BF16, 2, a, b, 0); }
static void F3(const char *name, uint64_t a, uint64_t b, uint64_t c) { add(name, TQ_DT_BF16, 3, a, b, c); }

/* A TurboQuant module P (mlx-lm: a Linear, or a SwitchLinear when E > 0): weight, scales,
 * codebook, signs; a bias when the module has one (stored F16). */
static void Q(const char *P, uint64_t E, uint64_t out, uint64_t in, int bias)
{
    char n[256];
    uint64_t words = (in + 32 / BITS - 1) / (32 / BITS);
    int nd = E ? 3 : 2;
    snprintf(n, sizeof n, "%s.weight", P);
    add(n, TQ_DT_U32, nd, E ? E : out, E ? out : words, E ? words : 0);
    snprintf(n, sizeof n, "%s.scales", P);
    add(n, TQ_DT_F16, nd, E ? E : out, E ? out : in / GS, E ? in / GS : 0);
    snprintf(n, sizeof n, "%s.codebook", P);
    add(n, TQ_DT_F16, 1, 1u << BITS, 0, 0);
    snprintf(n, sizeof n, "%s.signs", P);
    add(n, TQ_DT_F16, 1, in, 0, 0);
    if (bias) {
        snprintf(n, sizeof n, "%s.bias", P);
        add(n, TQ_DT_F16, E ? 2 : 1, E ? E : out, E ? out : 0, 0);
    }
}

/* ---------------------------------------------------------------- expected sets
 * tiny presets: hidden H 128, vocabulary V 512, 4 heads, 8 experts (see tq-mkmodel(1)). */
enum { H = 128, V = 512, E8 = 8 };

/* llama.py / qwen2.py / qwen3.py Attention + MLP */
static void attn(const char *L, uint64_t q, uint64_t kv, int bias)
{
    Q(NM("%sself_attn.q_proj", L), 0, q, H, bias);
    Q(NM("%sself_attn.k_proj", L), 0, kv, H, bias);
    Q(NM("%sself_attn.v_proj", L), 0, kv, H, bias);
    Q(NM("%sself_attn.o_proj", L), 0, H, q, 0);
}

static void mlp(const char *L, const char *m, uint64_t I)
{
    Q(NM("%s%s.gate_proj", L, m), 0, I, H, 0);
    Q(NM("%s%s.up_proj", L, m), 0, I, H, 0);
    Q(NM("%s%s.down_proj", L, m), 0, H, I, 0);
}

/* switch_layers.py SwitchGLU: gate_proj / up_proj / down_proj, experts first */
static void switch_glu(const char *container, uint64_t I, int bias)
{
    char c[200];
    snprintf(c, sizeof c, "%s", container);
    Q(NM("%s.gate_proj", c), E8, I, H, bias);
    Q(NM("%s.up_proj", c), E8, I, H, bias);
    Q(NM("%s.down_proj", c), E8, H, I, bias);
}

static void norms2(const char *L)
{
    F(NM("%sinput_layernorm.weight", L), H);
    F(NM("%spost_attention_layernorm.weight", L), H);
}

static void top(const char *root, const char *head)
{
    F2(NM("%sembed_tokens.weight", root), V, H);
    F(NM("%snorm.weight", root), H);
    if (head)
        Q(head, 0, V, H, 0);
}

/* The Qwen MoE block: gate (Linear, kept: router), switch_mlp, shared_expert (MLP),
 * shared_expert_gate (Linear with 1 output, kept) */
static void qwen_moe_block(const char *L, uint64_t shared)
{
    F2(NM("%smlp.gate.weight", L), E8, H);
    switch_glu(NM("%smlp.switch_mlp", L), 128, 0);
    mlp(L, "mlp.shared_expert", shared);
    F2(NM("%smlp.shared_expert_gate.weight", L), 1, H);
}

/* qwen2.py (q/k/v with bias) / qwen2_moe.py (Qwen2MoeSparseMoeBlock on every layer) */
static void qwen2_family(int moe)
{
    top("model.", "lm_head");
    for (int l = 0; l < 2; l++) {
        char L[64];
        snprintf(L, sizeof L, "model.layers.%d.", l);
        norms2(L);
        attn(L, 128, 64, 1);
        if (moe)
            qwen_moe_block(L, 256);
        else
            mlp(L, "mlp", 256);
    }
}

static void exp_qwen2_moe(void) { qwen2_family(1); }
static void exp_qwen2(void) { qwen2_family(0); }

/* llama.py / qwen3.py (q_norm, k_norm: RMSNorm, kept) / qwen3_moe.py (Qwen3MoeSparseMoeBlock:
 * gate router kept, switch_mlp stacked; no shared expert) */
static void llama_family(int qk_norm, int moe)
{
    top("model.", "lm_head");
    for (int l = 0; l < 2; l++) {
        char L[64];
        snprintf(L, sizeof L, "model.layers.%d.", l);
        norms2(L);
        attn(L, 128, 64, 0);
        if (qk_norm) {
            F(NM("%sself_attn.q_norm.weight", L), 32);
            F(NM("%sself_attn.k_norm.weight", L), 32);
        }
        if (moe) {
            F2(NM("%smlp.gate.weight", L), E8, H);
            switch_glu(NM("%smlp.switch_mlp", L), 128, 0);
        } else {
            mlp(L, "mlp", 256);
        }
    }
}

static void exp_llama(void) { llama_family(0, 0); }
static void exp_qwen3(void) { llama_family(1, 0); }
static void exp_qwen3_moe(void) { llama_family(1, 1); }

/* qwen3_next.py / qwen3_5.py: GatedDeltaNet on layers 0-2 (in_proj_*, out_proj Linear;
 * conv1d, A_log, dt_bias, norm not), gated Attention on layer 3 (q_proj 2 x 4 x 64, q/k norm). */
static void hybrid_layer(const char *L, int l, int next)
{
    norms2(L);
    if (l < 3) {
        if (next) {
            Q(NM("%slinear_attn.in_proj_qkvz", L), 0, 384, H, 0);
            F2(NM("%slinear_attn.in_proj_ba.weight", L), 8, H); /* 8 outputs: below the size rule */
            F3(NM("%slinear_attn.conv1d.weight", L), 256, 4, 1); /* sanitize's [C, K, 1] */
        } else {
            Q(NM("%slinear_attn.in_proj_qkv", L), 0, 256, H, 0);
            Q(NM("%slinear_attn.in_proj_z", L), 0, 128, H, 0);
            F2(NM("%slinear_attn.in_proj_b.weight", L), 4, H);
            F2(NM("%slinear_attn.in_proj_a.weight", L), 4, H);
            F3(NM("%slinear_attn.conv1d.weight", L), 256, 1, 4); /* sanitize moves it on load */
        }
        F(NM("%slinear_attn.A_log", L), 4);
        F(NM("%slinear_attn.dt_bias", L), 4);
        F(NM("%slinear_attn.norm.weight", L), 32);
        Q(NM("%slinear_attn.out_proj", L), 0, H, 128, 0);
    } else {
        Q(NM("%sself_attn.q_proj", L), 0, 512, H, 0);
        Q(NM("%sself_attn.k_proj", L), 0, 128, H, 0);
        Q(NM("%sself_attn.v_proj", L), 0, 128, H, 0);
        Q(NM("%sself_attn.o_proj", L), 0, H, 256, 0);
        F(NM("%sself_attn.q_norm.weight", L), 64);
        F(NM("%sself_attn.k_norm.weight", L), 64);
    }
}

static void exp_qwen3_next(void)
{
    top("model.", "lm_head");
    for (int l = 0; l < 4; l++) {
        char L[64];
        snprintf(L, sizeof L, "model.layers.%d.", l);
        hybrid_layer(L, l, 1);
        qwen_moe_block(L, 128);
    }
}

/* The MTP head, copied as the source holds it (mlx-lm's sanitize drops "mtp." on load). */
static void mtp_head(int moe)
{
    F2("mtp.fc.weight", H, 2 * H);
    F("mtp.pre_fc_norm_embedding.weight", H);
    F("mtp.pre_fc_norm_hidden.weight", H);
    F("mtp.norm.weight", H);
    const char *L = "mtp.layers.0.";
    norms2(L);
    F2(NM("%sself_attn.q_proj.weight", L), 512, H);
    F2(NM("%sself_attn.k_proj.weight", L), 128, H);
    F2(NM("%sself_attn.v_proj.weight", L), 128, H);
    F2(NM("%sself_attn.o_proj.weight", L), H, 256);
    F(NM("%sself_attn.q_norm.weight", L), 64);
    F(NM("%sself_attn.k_norm.weight", L), 64);
    if (moe) {
        F2(NM("%smlp.gate.weight", L), E8, H);
        F3(NM("%smlp.experts.gate_up_proj", L), E8, 256, H);
        F3(NM("%smlp.experts.down_proj", L), E8, H, 128);
        F2(NM("%smlp.shared_expert.gate_proj.weight", L), 128, H);
        F2(NM("%smlp.shared_expert.up_proj.weight", L), 128, H);
        F2(NM("%smlp.shared_expert.down_proj.weight", L), H, 128);
        F2(NM("%smlp.shared_expert_gate.weight", L), 1, H);
    } else {
        F2(NM("%smlp.gate_proj.weight", L), 256, H);
        F2(NM("%smlp.up_proj.weight", L), 256, H);
        F2(NM("%smlp.down_proj.weight", L), H, 256);
    }
}

/* qwen3_5.py / qwen3_5_moe.py: the language model under language_model.model (sanitize renames
 * model.language_model); the MoE's fused experts split into switch_mlp gate/up. */
static void qwen3_5_family(int moe)
{
    top("language_model.model.", "language_model.lm_head");
    for (int l = 0; l < 4; l++) {
        char L[64];
        snprintf(L, sizeof L, "language_model.model.layers.%d.", l);
        hybrid_layer(L, l, 0);
        if (moe)
            qwen_moe_block(L, 128);
        else
            mlp(L, "mlp", 256);
    }
    mtp_head(moe);
}

static void exp_qwen3_5_moe(void) { qwen3_5_family(1); }
static void exp_qwen3_5(void) { qwen3_5_family(0); }

/* mixtral.py: block_sparse_moe.gate (Linear router, kept) and .switch_mlp (w1/w3/w2 stacked) */
static void exp_mixtral(void)
{
    top("model.", "lm_head");
    for (int l = 0; l < 2; l++) {
        char L[64];
        snprintf(L, sizeof L, "model.layers.%d.", l);
        norms2(L);
        attn(L, 128, 64, 0);
        F2(NM("%sblock_sparse_moe.gate.weight", L), E8, H);
        switch_glu(NM("%sblock_sparse_moe.switch_mlp", L), 128, 0);
    }
}

/* deepseek_v3.py: MLA (q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm,
 * o_proj; kv_b_proj stays float: sanitize turns it into embed_q / unembed_out), layer 0 a dense
 * MLP (first_k_dense_replace 1), MoEGate (weight + F32 e_score_correction_bias), SwitchGLU,
 * shared_experts; the MTP layer 3 left out as sanitize leaves out layer 61. */
static void exp_deepseek_v3(void)
{
    top("model.", "lm_head");
    for (int l = 0; l < 3; l++) {
        char L[64];
        snprintf(L, sizeof L, "model.layers.%d.", l);
        norms2(L);
        Q(NM("%sself_attn.q_a_proj", L), 0, 64, H, 0);
        F(NM("%sself_attn.q_a_layernorm.weight", L), 64);
        Q(NM("%sself_attn.q_b_proj", L), 0, 256, 64, 0);
        Q(NM("%sself_attn.kv_a_proj_with_mqa", L), 0, 96, H, 0);
        F(NM("%sself_attn.kv_a_layernorm.weight", L), 64);
        F2(NM("%sself_attn.kv_b_proj.weight", L), 256, 64);
        Q(NM("%sself_attn.o_proj", L), 0, H, 128, 0);
        if (l == 0) {
            mlp(L, "mlp", 256);
            continue;
        }
        F2(NM("%smlp.gate.weight", L), E8, H);
        add(NM("%smlp.gate.e_score_correction_bias", L), TQ_DT_F32, 1, E8, 0, 0);
        switch_glu(NM("%smlp.switch_mlp", L), 64, 0);
        mlp(L, "mlp.shared_experts", 64);
    }
}

/* gpt_oss.py: AttentionBlock (q/k/v/o Linear with bias, sinks), MLPBlock router (Linear with
 * bias, kept), experts = SwitchGLU with bias (sanitize's split of gate_up rows) */
static void exp_gpt_oss(void)
{
    top("model.", "lm_head");
    for (int l = 0; l < 2; l++) {
        char L[64];
        snprintf(L, sizeof L, "model.layers.%d.", l);
        norms2(L);
        Q(NM("%sself_attn.q_proj", L), 0, 256, H, 1);
        Q(NM("%sself_attn.k_proj", L), 0, 128, H, 1);
        Q(NM("%sself_attn.v_proj", L), 0, 128, H, 1);
        Q(NM("%sself_attn.o_proj", L), 0, H, 256, 1);
        F(NM("%sself_attn.sinks", L), 4);
        F2(NM("%smlp.router.weight", L), E8, H);
        F(NM("%smlp.router.bias", L), E8);
        switch_glu(NM("%smlp.experts", L), 128, 1);
    }
}

/* gemma4_text.py (+ gemma4.py's language_model.model): attention with q/k norms, a dense mlp,
 * Router (proj Linear kept, scale, per_expert_scale), Experts.switch_glu; sandwich norms and
 * layer_scalar; tied embeddings (no lm_head). Layer 0 sliding (head_dim 32, 2 kv heads);
 * layer 1, the last, full: global_head_dim 64, attention_k_eq_v (no v_proj), one
 * num_global_key_value_heads head (google/gemma-4-26B-A4B-it's config, scaled). */
static void exp_gemma4(void)
{
    top("language_model.model.", NULL);
    static const char *const ln[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                     "post_feedforward_layernorm", "pre_feedforward_layernorm_2",
                                     "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"};
    for (int l = 0; l < 2; l++) {
        char L[64];
        snprintf(L, sizeof L, "language_model.model.layers.%d.", l);
        for (int k = 0; k < 7; k++)
            F(NM("%s%s.weight", L, ln[k]), H);
        F(NM("%slayer_scalar", L), 1);
        uint64_t D = l ? 64 : 32, kv = l ? 1 : 2;
        Q(NM("%sself_attn.q_proj", L), 0, 4 * D, H, 0);
        Q(NM("%sself_attn.k_proj", L), 0, kv * D, H, 0);
        if (!l)
            Q(NM("%sself_attn.v_proj", L), 0, kv * D, H, 0);
        Q(NM("%sself_attn.o_proj", L), 0, H, 4 * D, 0);
        F(NM("%sself_attn.q_norm.weight", L), D);
        F(NM("%sself_attn.k_norm.weight", L), D);
        mlp(L, "mlp", 256);
        F2(NM("%srouter.proj.weight", L), E8, H);
        F(NM("%srouter.scale", L), H);
        F(NM("%srouter.per_expert_scale", L), E8);
        switch_glu(NM("%sexperts.switch_glu", L), 64, 0);
    }
}

/* ---------------------------------------------------------------- checks */
static tq_convert_opts opts(int mode)
{
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    o.mode = mode;
    o.bits = BITS;
    o.group_size = GS;
    o.threads = 2;
    o.quiet = 1;
    o.force = 1;
    return o;
}

/* tq_convert without the report */
static int conv(const char *in, const char *out, const tq_convert_opts *o, tq_err *e)
{
    tq_convert_report r;
    int rc = tq_convert(in, out, o, &r, e);
    if (!rc)
        tq_convert_report_free(&r);
    return rc;
}

static const char *gen(tq_mk_arch a, int mlx, const char *tag)
{
    tq_err err = {0};
    tq_mk_opts o;
    tq_mk_preset(&o, a, "tiny", &err);
    o.quiet = 1;
    o.seed = 11;
    o.naming_mlx = mlx;
    char n[96];
    snprintf(n, sizeof n, "cvf-%s-%s", tq_mk_arch_name(a), tag);
    const char *d = t_path(n);
    if (tq_mkmodel(d, &o, &err)) {
        printf("# mkmodel %s: %s\n", n, err.msg);
        return NULL;
    }
    return d;
}

static int cmp_xt(const void *a, const void *b)
{
    return strcmp(((const xt *)a)->name, ((const xt *)b)->name);
}

/* The model's tensors are exactly X (names sorted both sides). */
static int same_set(const tq_model *m, const char *what)
{
    qsort(X.t, X.n, sizeof *X.t, cmp_xt);
    int ok = 1;
    size_t i = 0, j = 0;
    while (i < X.n || j < m->n_tensors) {
        int c = i >= X.n ? 1 : j >= m->n_tensors ? -1 : strcmp(X.t[i].name, m->tensors[j].info.name);
        if (c < 0) {
            printf("# %s: missing %s\n", what, X.t[i++].name);
            ok = 0;
            continue;
        }
        if (c > 0) {
            printf("# %s: unexpected %s\n", what, m->tensors[j++].info.name);
            ok = 0;
            continue;
        }
        const xt *x = &X.t[i++];
        const tq_tensor_info *t = &m->tensors[j++].info;
        int same = x->dt == t->dtype && x->nd == t->ndim;
        for (int d = 0; same && d < x->nd; d++)
            same = x->s[d] == t->shape[d];
        if (!same) {
            printf("# %s: %s is %s ndim %d [%llu, %llu, %llu], expected %s [%llu, %llu, %llu]\n", what, t->name,
                   tq_dtype_name(t->dtype), t->ndim, (unsigned long long)t->shape[0], (unsigned long long)t->shape[1],
                   (unsigned long long)t->shape[2], tq_dtype_name(x->dt), (unsigned long long)x->s[0],
                   (unsigned long long)x->s[1], (unsigned long long)x->s[2]);
            ok = 0;
        }
    }
    return ok;
}


static float f_at(const tq_tensor_info *t, const void *b, uint64_t i)
{
    if (t->dtype == TQ_DT_BF16)
        return tq_bf16_to_f32(((const uint16_t *)b)[i]);
    if (t->dtype == TQ_DT_F16)
        return tq_f16_to_f32(((const uint16_t *)b)[i]);
    return ((const float *)b)[i];
}

/* Every float tensor of the converted model Q that has the same name in the source S holds
 * the source's bytes (routers, gates, norms, conv1d, A_log, sinks...), except Qwen3-Next's
 * shifted norms, which hold exactly round(w + 1). Returns the number of tensors compared. */
static int floats_exact(const tq_model *S, const tq_model *Qm, int shifted)
{
    const tq_family *f = tq_family_detect(S->config);
    int n = 0;
    for (size_t i = 0; i < Qm->n_tensors; i++) {
        const tq_tensor_info *q = &Qm->tensors[i].info;
        if (q->dtype == TQ_DT_U32 || strstr(q->name, ".codebook") || strstr(q->name, ".signs") || strstr(q->name, ".scales"))
            continue;
        char hf[256];
        tq_family_hf_name(f, q->name, hf, sizeof hf);
        const tq_model_tensor *s = tq_model_find(S, hf);
        if (!s || s->info.dtype != q->dtype)
            continue; /* F16 biases of quantized modules, stacked experts */
        uint64_t na, nb2;
        uint8_t *a = t_read_tensor(S, hf, &na), *b = t_read_tensor(Qm, q->name, &nb2);
        int ok = a && b && na == nb2;
        if (ok && shifted && tq_family_norm_is_shifted(f, hf)) {
            for (uint64_t k = 0; ok && k < q->nelem; k++)
                ok = tq_f32_to_bf16(f_at(&s->info, a, k) + 1.0f) == ((uint16_t *)b)[k];
        } else if (ok) {
            ok = !memcmp(a, b, na);
        }
        CHECKF(ok, "%s is not the source's %s", q->name, hf);
        free(a), free(b);
        n++;
    }
    return n;
}

/* Σ(w-ŵ)²/Σw² between two float tensors of the same element count. */
static double rel_err(const tq_model *A, const char *an, const tq_model *B, const char *bn)
{
    uint64_t na, nb2;
    uint8_t *a = t_read_tensor(A, an, &na), *b = t_read_tensor(B, bn, &nb2);
    const tq_tensor_info *ta = &tq_model_find(A, an)->info, *tb = &tq_model_find(B, bn)->info;
    double e2 = 0, s2 = 0;
    for (uint64_t k = 0; a && b && k < ta->nelem && ta->nelem == tb->nelem; k++) {
        double x = f_at(ta, a, k), y = f_at(tb, b, k);
        e2 += (x - y) * (x - y);
        s2 += x * x;
    }
    free(a), free(b);
    return a && b && s2 > 0 ? e2 / s2 : 1e9;
}

static void family_case(tq_mk_arch arch, void (*expect)(void), int shifted)
{
    tq_err err = {0};
    /* a dense family without a wrapper has one form for both namings */
    const char *hf = gen(arch, 0, "hf");
    const char *mlx = arch == TQ_MK_QWEN2 || arch == TQ_MK_LLAMA || arch == TQ_MK_QWEN3 ? hf : gen(arch, 1, "mlx");
    CHECK(hf && mlx);
    if (!hf || !mlx)
        return;
    char q1[512], q2[512], d1[512];
    snprintf(q1, sizeof q1, "%s-q", hf);
    snprintf(q2, sizeof q2, "%s-q", mlx);
    snprintf(d1, sizeof d1, "%s-d", hf);
    tq_convert_opts o = opts(TQ_CONVERT_QUANTIZE), dq = opts(TQ_CONVERT_DEQUANTIZE);
    CHECK_OK(conv(hf, q1, &o, &err));
    CHECK_OK(conv(mlx, q2, &o, &err));
    CHECK_OK(conv(q1, d1, &dq, &err));
    tq_model *S = NULL, *Qm = NULL, *Q2 = NULL, *D = NULL, *M = NULL;
    CHECK_OK(tq_model_open(&S, hf, &err));
    CHECK_OK(tq_model_open(&Qm, q1, &err));
    CHECK_OK(tq_model_open(&Q2, q2, &err));
    CHECK_OK(tq_model_open(&D, d1, &err));
    CHECK_OK(tq_model_open(&M, mlx, &err));
    if (!S || !Qm || !Q2 || !D || !M)
        goto out;
    /* the mlx-lm class's tensor set */
    X.n = 0;
    expect();
    CHECK(same_set(Qm, tq_mk_arch_name(arch)));
    /* float copies bit for bit */
    CHECK(floats_exact(S, Qm, shifted) > 4);
    /* the MLX form converts to the same bytes */
    CHECK(Qm->n_tensors == Q2->n_tensors);
    for (size_t i = 0; i < Qm->n_tensors && i < Q2->n_tensors; i++) {
        uint64_t na, nb2;
        uint8_t *a = t_read_tensor(Qm, Qm->tensors[i].info.name, &na), *b = t_read_tensor(Q2, Qm->tensors[i].info.name, &nb2);
        CHECKF(a && b && na == nb2 && !memcmp(a, b, na), "%s differs between the HF and MLX sources", Qm->tensors[i].info.name);
        free(a), free(b);
    }
    /* --dequantize: the HF tensors back (gpt-oss: the MLX float form) within the error */
    const tq_model *want = arch == TQ_MK_GPT_OSS ? M : S;
    size_t nq = 0;
    int extra = 0;
    for (size_t i = 0; i < want->n_tensors; i++) {
        const tq_tensor_info *w = &want->tensors[i].info;
        if ((arch == TQ_MK_DEEPSEEK_V3 || arch == TQ_MK_KIMI_K2) && strstr(w->name, "layers.3."))
            continue; /* the MTP layer convert left out */
        const tq_model_tensor *dt = tq_model_find(D, w->name);
        CHECKF(dt != NULL, "dequantized model lacks %s", w->name);
        if (!dt)
            continue;
        const tq_tensor_info *d = &dt->info;
        int same = d->dtype == w->dtype && d->ndim == w->ndim;
        for (int k = 0; same && k < d->ndim; k++)
            same = d->shape[k] == w->shape[k];
        CHECKF(same, "%s: dtype or shape differs after --dequantize", w->name);
        if (!same || d->dtype == TQ_DT_U8 || w->nelem < 1024)
            continue;
        double re = rel_err(want, w->name, D, w->name);
        CHECKF(re < 0.02, "%s: relative error %g after a 4-bit round trip", w->name, re);
        nq += re > 0;
    }
    for (size_t i = 0; i < D->n_tensors; i++)
        extra += !tq_model_find(want, D->tensors[i].info.name);
    CHECKF(extra == 0, "%d tensors in the dequantized model are not in the source", extra);
    CHECK(nq > 4);
out:
    tq_model_close(S);
    tq_model_close(Qm);
    tq_model_close(Q2);
    tq_model_close(D);
    tq_model_close(M);
}

static void test_llama(void) { family_case(TQ_MK_LLAMA, exp_llama, 0); }
static void test_qwen3(void) { family_case(TQ_MK_QWEN3, exp_qwen3, 0); }
static void test_qwen3_moe(void) { family_case(TQ_MK_QWEN3_MOE, exp_qwen3_moe, 0); }
static void test_kimi_k2(void) { family_case(TQ_MK_KIMI_K2, exp_deepseek_v3, 0); }
static void test_qwen2(void) { family_case(TQ_MK_QWEN2, exp_qwen2, 0); }
static void test_qwen2_moe(void) { family_case(TQ_MK_QWEN2_MOE, exp_qwen2_moe, 0); }
static void test_qwen3_next(void) { family_case(TQ_MK_QWEN3_NEXT, exp_qwen3_next, 1); }
static void test_qwen3_5(void) { family_case(TQ_MK_QWEN3_5, exp_qwen3_5, 0); }
static void test_qwen3_5_moe(void) { family_case(TQ_MK_QWEN3_5_MOE, exp_qwen3_5_moe, 0); }
static void test_mixtral(void) { family_case(TQ_MK_MIXTRAL, exp_mixtral, 0); }
static void test_deepseek_v3(void) { family_case(TQ_MK_DEEPSEEK_V3, exp_deepseek_v3, 0); }
static void test_gpt_oss(void) { family_case(TQ_MK_GPT_OSS, exp_gpt_oss, 0); }
static void test_gemma4(void) { family_case(TQ_MK_GEMMA4, exp_gemma4, 0); }

/* The config the output carries: TurboQuant block; the source's mxfp4 quantization_config
 * gone; for the dropped MTP head a warning-free conversion that names nothing it lost. */
static void test_configs(void)
{
    tq_err err = {0};
    const char *hf = gen(TQ_MK_GPT_OSS, 0, "cfg");
    char q[512];
    snprintf(q, sizeof q, "%s-q", hf ? hf : "x");
    tq_convert_opts o = opts(TQ_CONVERT_QUANTIZE);
    CHECK(hf && conv(hf, q, &o, &err) == 0);
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, q, &err));
    CHECK(m && !cJSON_GetObjectItem(m->config, "quantization_config"));
    const cJSON *qb = m ? cJSON_GetObjectItem(m->config, "quantization") : NULL;
    CHECK(qb && !strcmp(cJSON_GetObjectItem(qb, "mode")->valuestring, "turboquant"));
    tq_model_close(m);
}

/* TurboQuant-MLX's loaders before it read a module's bits off its codebook length take them
 * from the quantization block by class (TurboQuantConfig.bits_for_path): the first path
 * component self_attn / attention / linear_attn gives attn_bits, mlp / feed_forward gives
 * mlp_bits, either falling back to bits. Written here from that published rule. */
static int loader_bits(const cJSON *q, const char *P)
{
    int bits = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(q, "bits"));
    char buf[256];
    snprintf(buf, sizeof buf, "%s", P);
    for (char *save = NULL, *c = strtok_r(buf, ".", &save); c; c = strtok_r(NULL, ".", &save)) {
        const char *key = !strcmp(c, "self_attn") || !strcmp(c, "attention") || !strcmp(c, "linear_attn") ? "attn_bits"
                          : !strcmp(c, "mlp") || !strcmp(c, "feed_forward")                             ? "mlp_bits"
                                                                                                          : NULL;
        if (key) {
            const cJSON *v = cJSON_GetObjectItem(q, key);
            return cJSON_IsNumber(v) ? (int)cJSON_GetNumberValue(v) : bits;
        }
    }
    return bits;
}

/* --bits-for with one width per class: attn_bits / mlp_bits in the quantization block, and
 * every module's codebook has the 2^bits entries that class rule gives; widths that differ
 * within a class write no class key (only the per-module entries). */
static void test_class_bits(void)
{
    tq_err err = {0};
    const char *hf = gen(TQ_MK_QWEN3_MOE, 0, "cls");
    CHECK(hf != NULL);
    if (!hf)
        return;
    static const struct {
        const char *re;
        int bits, attn, mlp; /* expected keys, 0 = absent */
    } cases[] = {{"self_attn", 2, 2, 0}, {"mlp\\.", 3, 0, 3}, {"down_proj", 2, 0, 0}, {"self_attn", 4, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char q[512];
        snprintf(q, sizeof q, "%s-q%zu", hf, c);
        tq_convert_opts o = opts(TQ_CONVERT_QUANTIZE);
        const char *re[1] = {cases[c].re};
        int bb[1] = {cases[c].bits};
        o.n_bits_for = 1, o.bits_for_re = re, o.bits_for_bits = bb;
        CHECK_OK(conv(hf, q, &o, &err));
        tq_model *m = NULL;
        CHECK_OK(tq_model_open(&m, q, &err));
        const cJSON *qb = m ? cJSON_GetObjectItem(m->config, "quantization") : NULL;
        CHECK(qb != NULL);
        if (!qb) {
            tq_model_close(m);
            continue;
        }
        const cJSON *a = cJSON_GetObjectItem(qb, "attn_bits"), *ml = cJSON_GetObjectItem(qb, "mlp_bits");
        CHECKF(cases[c].attn ? cJSON_GetNumberValue(a) == cases[c].attn : a == NULL, "case %zu: attn_bits", c);
        CHECKF(cases[c].mlp ? cJSON_GetNumberValue(ml) == cases[c].mlp : ml == NULL, "case %zu: mlp_bits", c);
        int n = 0;
        for (size_t i = 0; i < m->n_tensors; i++) {
            const tq_tensor_info *t = &m->tensors[i].info;
            size_t len = strlen(t->name);
            if (len < 9 || strcmp(t->name + len - 9, ".codebook"))
                continue;
            char P[256];
            snprintf(P, sizeof P, "%.*s", (int)(len - 9), t->name);
            if (c == 2 && strstr(P, "down_proj"))
                continue; /* mixed within its class: the class rule cannot say it */
            CHECKF(t->shape[0] == 1ull << loader_bits(qb, P), "case %zu: %s has %llu centroids, the class rule says %d bits",
                   c, P, (unsigned long long)t->shape[0], loader_bits(qb, P));
            n++;
        }
        CHECK(n > 4);
        tq_model_close(m);
    }
}

/* ---------------------------------------------------------------- malformed checkpoints */
/* Copy model SRC to DST without tensor `drop`, with config key `key` of (text_)config set to
 * `val` (NULL: unchanged), and tensor `resize` (if any) given `rows` rows (zeros). */
static const char *resize;
static uint64_t resize_rows;
static const char *poke; /* rewrite: byte poke_at of this tensor becomes poke_byte */
static uint64_t poke_at;
static uint8_t poke_byte;
static int rewrite(const char *src, const char *dst, const char *drop, const char *key, double val)
{
    tq_err err = {0};
    tq_model *m = NULL;
    if (tq_model_open(&m, src, &err))
        return -1;
    tq_st_decl *d = calloc(m->n_tensors, sizeof *d);
    size_t n = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_tensor_info *t = &m->tensors[i].info;
        if (drop && !strcmp(t->name, drop))
            continue;
        d[n].name = t->name;
        d[n].dtype = t->dtype;
        d[n].ndim = t->ndim;
        memcpy(d[n].shape, t->shape, sizeof d[n].shape);
        if (resize && !strcmp(t->name, resize))
            d[n].shape[1] = resize_rows;
        n++;
    }
    tq_rm_tree(dst);
    tq_mkdir_p(dst, &err);
    tq_model_writer *w = NULL;
    int rc = tq_model_writer_open(&w, dst, d, n, 1ull << 40, NULL, NULL, 0, &err);
    for (size_t i = 0; !rc && i < m->n_tensors; i++) {
        const tq_tensor_info *t = &m->tensors[i].info;
        long wi = tq_model_writer_index(w, t->name);
        if (wi < 0)
            continue;
        uint64_t nb2;
        void *b = t_read_tensor(m, t->name, &nb2);
        if (b && resize && !strcmp(t->name, resize)) {
            free(b);
            nb2 = nb2 / t->shape[1] * resize_rows;
            b = calloc(1, nb2);
        }
        if (b && poke && !strcmp(t->name, poke) && poke_at < nb2)
            ((uint8_t *)b)[poke_at] = poke_byte;
        rc = !b || tq_model_writer_write(w, (size_t)wi, 0, b, nb2, &err);
        free(b);
    }
    rc = rc || tq_model_writer_finish(w, &err);
    cJSON *c = cJSON_Duplicate(m->config, 1);
    if (key) {
        cJSON *tc = cJSON_GetObjectItem(c, "text_config");
        cJSON *o = tc ? tc : c;
        cJSON_DeleteItemFromObject(o, key);
        cJSON_AddNumberToObject(o, key, val);
    }
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dst);
    rc = rc || tq_json_write_file(p, c, &err);
    cJSON_Delete(c);
    free(d);
    tq_model_close(m);
    return rc ? -1 : 0;
}

static void refused(const char *dir, const char *needle)
{
    tq_err err = {0};
    char q[600];
    snprintf(q, sizeof q, "%s-q", dir);
    tq_convert_opts o = opts(TQ_CONVERT_QUANTIZE);
    int rc = conv(dir, q, &o, &err);
    CHECKF(rc == -1 && tq_exit_code(&err) == 1 && strstr(err.msg, needle), "%s: rc %d: %s (wanted '%s')", dir, rc,
           err.msg, needle);
    CHECK(!tq_exists(q));
}

static void test_malformed(void)
{
    const char *mx = gen(TQ_MK_MIXTRAL, 0, "bad"), *q35 = gen(TQ_MK_QWEN3_5_MOE, 0, "bad");
    const char *oss = gen(TQ_MK_GPT_OSS, 0, "bad"), *ds = gen(TQ_MK_DEEPSEEK_V3, 0, "bad");
    CHECK(mx && q35 && oss && ds);
    if (!mx || !q35 || !oss || !ds)
        return;
    const char *b = t_path("cvf-broken");
    /* a missing expert: the missing tensor is named */
    CHECK(rewrite(mx, b, "model.layers.1.block_sparse_moe.experts.3.w2.weight", NULL, 0) == 0);
    refused(b, "'model.layers.1.block_sparse_moe.experts.3.w2.weight' is missing");
    /* the last expert missing: only the config count tells */
    CHECK(rewrite(ds, b, "model.layers.2.mlp.experts.7.up_proj.weight", NULL, 0) == 0);
    refused(b, "'model.layers.2.mlp.experts.7.up_proj.weight' is missing");
    /* expert count != config */
    CHECK(rewrite(mx, b, NULL, "num_local_experts", 6) == 0);
    refused(b, "num_local_experts = 6");
    CHECK(rewrite(q35, b, NULL, "num_experts", 16) == 0);
    refused(b, "model.language_model.layers.0.mlp.experts.");
    /* fused gate_up of the wrong second dimension */
    resize = "model.language_model.layers.2.mlp.experts.gate_up_proj";
    resize_rows = 250;
    CHECK(rewrite(q35, b, NULL, NULL, 0) == 0);
    resize = NULL;
    refused(b, "'model.language_model.layers.2.mlp.experts.gate_up_proj' is [8, 250, 128] but config.json makes it "
               "[8, 256, 128]");
    CHECK(rewrite(q35, b, NULL, "moe_intermediate_size", 96) == 0);
    refused(b, "experts.down_proj' is [8, 128, 128] but config.json makes it [8, 128, 96]");
    /* MXFP4 blocks without their scales */
    CHECK(rewrite(oss, b, "model.layers.1.mlp.experts.down_proj_scales", NULL, 0) == 0);
    refused(b, "'model.layers.1.mlp.experts.down_proj_blocks' has no 'model.layers.1.mlp.experts.down_proj_scales'");
    /* an E8M0 scale 255 (NaN in the MX format; ggml refuses it too), named with its block */
    poke = "model.layers.1.mlp.experts.down_proj_scales", poke_at = 5, poke_byte = 255;
    CHECK(rewrite(oss, b, NULL, NULL, 0) == 0);
    refused(b, "tensor 'model.layers.1.mlp.experts.down_proj_scales': MXFP4 block 5: scale byte 255 is E8M0 NaN");
    /* scale 254 under a level of 6: 6 * 2^127 is ggml's inf, refused as any infinite weight */
    poke_byte = 254, poke_at = 0;
    CHECK(rewrite(oss, b, NULL, NULL, 0) == 0);
    poke = "model.layers.1.mlp.experts.down_proj_blocks", poke_byte = 0x77;
    char b2[600];
    snprintf(b2, sizeof b2, "%s2", b);
    CHECK(rewrite(b, b2, NULL, NULL, 0) == 0);
    poke = NULL;
    refused(b2, "tensor 'model.layers.1.mlp.experts.down_proj_blocks' row 0: quantize: non-finite");
}

/* --dequantize honours quantization.rotation and refuses what tq cannot decode. */
static void test_rotation_and_refusals(void)
{
    tq_err err = {0};
    const char *hf = gen(TQ_MK_QWEN2, 0, "rot");
    if (!hf)
        return;
    char q[512], d[512], d2[512];
    snprintf(q, sizeof q, "%s-q", hf);
    snprintf(d, sizeof d, "%s-d", hf);
    snprintf(d2, sizeof d2, "%s-d2", hf);
    tq_convert_opts o = opts(TQ_CONVERT_QUANTIZE), dq = opts(TQ_CONVERT_DEQUANTIZE);
    CHECK_OK(conv(hf, q, &o, &err));
    char cp[600];
    snprintf(cp, sizeof cp, "%s/config.json", q);
    cJSON *c = NULL;
    CHECK_OK(tq_json_read_file(cp, 1 << 20, &c, &err));
    cJSON *qb = cJSON_GetObjectItem(c, "quantization");
    /* "none" with rotated signs: the legacy guard rotates back anyway, same bytes as hadamard */
    cJSON_ReplaceItemInObject(qb, "rotation", cJSON_CreateString("none"));
    CHECK_OK(tq_json_write_file(cp, c, &err));
    CHECK_OK(conv(q, d, &dq, &err));
    /* unknown rotation, QJL, ternary experts: refused, naming the feature */
    cJSON_ReplaceItemInObject(qb, "rotation", cJSON_CreateString("givens"));
    CHECK_OK(tq_json_write_file(cp, c, &err));
    CHECK(conv(q, d2, &dq, &err) == -1 && strstr(err.msg, "\"givens\""));
    cJSON_ReplaceItemInObject(qb, "rotation", cJSON_CreateString("hadamard"));
    cJSON_AddBoolToObject(qb, "use_qjl", 1);
    CHECK_OK(tq_json_write_file(cp, c, &err));
    CHECK(conv(q, d2, &dq, &err) == -1 && strstr(err.msg, "QJL"));
    cJSON_DeleteItemFromObject(qb, "use_qjl");
    cJSON_AddBoolToObject(qb, "ternary_experts", 1);
    CHECK_OK(tq_json_write_file(cp, c, &err));
    CHECK(conv(q, d2, &dq, &err) == -1 && strstr(err.msg, "ternary"));
    cJSON_Delete(c);
    CHECK(!tq_exists(d2));
    /* the legacy guard: "none" with rotated signs dequantizes as "hadamard" does */
    char d3[512];
    snprintf(d3, sizeof d3, "%s-d3", hf);
    CHECK_OK(tq_json_read_file(cp, 1 << 20, &c, &err));
    qb = cJSON_GetObjectItem(c, "quantization");
    cJSON_DeleteItemFromObject(qb, "ternary_experts");
    CHECK_OK(tq_json_write_file(cp, c, &err));
    CHECK_OK(conv(q, d3, &dq, &err));
    char a1[600], a2[600];
    snprintf(a1, sizeof a1, "%s/model.safetensors", d);
    snprintf(a2, sizeof a2, "%s/model.safetensors", d3);
    CHECK(t_files_equal(a1, a2));
    cJSON_Delete(c);
    /* rotation "none" with all-ones signs: no Hadamard at all. A module quantized unrotated by
     * hand (3-bit indices, f16 scales, signs all +1) dequantizes to exactly codebook x scale. */
    enum { OUT = 32, IN = 64 };
    const char *u = t_path("cvf-unrotated"), *ud = t_path("cvf-unrotated-d");
    tq_rm_tree(u);
    CHECK_OK(tq_mkdir_p(u, &err));
    tq_codebook cb;
    CHECK_OK(tq_codebook_lloyd_max(3, &cb, &err));
    static uint8_t idx[OUT][IN];
    static uint32_t packed[OUT][7];
    static uint16_t scales[OUT], signs[IN], book[8];
    for (int i = 0; i < OUT; i++) {
        for (int j = 0; j < IN; j++)
            idx[i][j] = (uint8_t)((i * 7 + j * 3) % 8);
        tq_pack(idx[i], IN, 3, packed[i]);
        scales[i] = tq_f32_to_f16(0.25f + 0.125f * (float)(i % 5));
    }
    for (int j = 0; j < IN; j++)
        signs[j] = 0x3C00;
    for (int k = 0; k < 8; k++)
        book[k] = cb.f16[k];
    tq_st_decl dl[4] = {{"m.lin.codebook", TQ_DT_F16, 1, {8}},
                        {"m.lin.scales", TQ_DT_F16, 2, {OUT, 1}},
                        {"m.lin.signs", TQ_DT_F16, 1, {IN}},
                        {"m.lin.weight", TQ_DT_U32, 2, {OUT, 7}}};
    tq_model_writer *w = NULL;
    CHECK_OK(tq_model_writer_open(&w, u, dl, 4, 1 << 30, NULL, NULL, 0, &err));
    if (!w)
        return;
    CHECK_OK(tq_model_writer_write(w, 0, 0, book, sizeof book, &err));
    CHECK_OK(tq_model_writer_write(w, 1, 0, scales, sizeof scales, &err));
    CHECK_OK(tq_model_writer_write(w, 2, 0, signs, sizeof signs, &err));
    CHECK_OK(tq_model_writer_write(w, 3, 0, packed, sizeof packed, &err));
    CHECK_OK(tq_model_writer_finish(w, &err));
    char ucfg[600];
    snprintf(ucfg, sizeof ucfg, "%s/config.json", u);
    static const char cfg_none[] = "{\"quantization\": {\"mode\": \"turboquant\", \"bits\": 3, \"group_size\": 64, "
                                   "\"rotation\": \"none\"}}";
    CHECK_OK(tq_write_file_atomic(ucfg, cfg_none, strlen(cfg_none), &err));
    tq_convert_opts f32 = dq;
    f32.dtype = TQ_DT_F32;
    CHECK_OK(conv(u, ud, &f32, &err));
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, ud, &err));
    uint64_t n;
    float *v = m ? t_read_tensor(m, "m.lin.weight", &n) : NULL;
    int exact = v && n == sizeof(float) * OUT * IN;
    for (int i = 0; exact && i < OUT; i++)
        for (int j = 0; j < IN; j++)
            exact &= v[i * IN + j] == cb.c[idx[i][j]] * tq_f16_to_f32(scales[i]);
    CHECK(exact);
    free(v);
    tq_model_close(m);
}

int main(void)
{
    RUN(test_llama);
    RUN(test_qwen3);
    RUN(test_qwen3_moe);
    RUN(test_qwen2);
    RUN(test_qwen2_moe);
    RUN(test_qwen3_next);
    RUN(test_qwen3_5);
    RUN(test_qwen3_5_moe);
    RUN(test_mixtral);
    RUN(test_deepseek_v3);
    RUN(test_kimi_k2);
    RUN(test_gpt_oss);
    RUN(test_gemma4);
    RUN(test_configs);
    RUN(test_class_bits);
    RUN(test_malformed);
    RUN(test_rotation_and_refusals);
    TEST_MAIN_END();
}
