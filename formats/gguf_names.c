/* GGUF tensor names and metadata -> HuggingFace/MLX names and config.json, for the
 * architectures llama.cpp's converter writes for Llama (and Mixtral), Qwen 2/3 (dense and
 * MoE), DeepSeek V2/V3, gpt-oss, Gemma 3 and Gemma 4. */
#include "formats/family.h"
#include "formats/formats.h"
#include "formats/gguf_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What llama.cpp assumes for an architecture where GGUF has no key, as config.json fields. */
enum family { F_LLAMA, F_QWEN2, F_QWEN3, F_QWEN2MOE, F_QWEN3MOE, F_DEEPSEEK2, F_GPTOSS, F_GEMMA3, F_GEMMA4 };

/* The architectures whose names and config keys this file maps. A family of the family table
 * (formats/family.h) gives its general.architecture (the row's gguf_arch), config.json's
 * model_type (its first) and architectures[0] (its first) unless the row here names them; an
 * architecture with no family row (gemma3) names them itself. */
typedef struct arch_info {
    int fam;                   /* tq_family_id, or -1 */
    const char *gguf;          /* fam -1: general.architecture */
    const char *model_type;    /* config.json model_type (fam -1, or other than the family's first) */
    const char *hf_class;      /* config.json architectures[0] (likewise) */
    int permute_qk;            /* llama.cpp permuted Q/K rows for its RoPE layout */
    int family;
    int names;                 /* tensor names map to HF/MLX names (else kept, with a warning) */
} arch_info;

static const arch_info archs[] = {
    {TQ_FAM_LLAMA, NULL, NULL, NULL, 1, F_LLAMA, 1},
    {TQ_FAM_QWEN2, NULL, NULL, NULL, 0, F_QWEN2, 1},
    {TQ_FAM_QWEN3, NULL, NULL, NULL, 0, F_QWEN3, 1},
    {TQ_FAM_QWEN2_MOE, NULL, NULL, NULL, 0, F_QWEN2MOE, 1},
    {TQ_FAM_QWEN3_MOE, NULL, NULL, NULL, 0, F_QWEN3MOE, 1},
    {TQ_FAM_DEEPSEEK_V3, NULL, NULL, NULL, 0, F_DEEPSEEK2, 1},
    {TQ_FAM_GPT_OSS, NULL, NULL, NULL, 0, F_GPTOSS, 1},
    {-1, "gemma3", "gemma3_text", "Gemma3ForCausalLM", 0, F_GEMMA3, 1},
    /* llama.cpp's MODEL_ARCH.GEMMA4 (gguf-py constants.py), written by conversion/gemma.py's
     * Gemma4Model from the text model: read back as transformers' text-only Gemma4ForCausalLM
     * (model.layers.*, a flat gemma4_text config) */
    {TQ_FAM_GEMMA4, NULL, "gemma4_text", "Gemma4ForCausalLM", 0, F_GEMMA4, 1},
};

/* Mixtral is GGUF architecture "llama" with experts (its row's gguf_arch). */
static const arch_info mixtral_arch = {TQ_FAM_MIXTRAL, NULL, NULL, NULL, 1, F_LLAMA, 1};

static const char *gguf_of(const arch_info *a)
{
    return a->fam >= 0 ? tq_family_get((tq_family_id)a->fam)->gguf_arch : a->gguf;
}

static const char *model_type_of(const arch_info *a)
{
    return a->model_type ? a->model_type : tq_family_get((tq_family_id)a->fam)->model_types[0];
}

static const char *class_of(const arch_info *a)
{
    return a->hf_class ? a->hf_class : tq_family_get((tq_family_id)a->fam)->architectures[0];
}

const tq_gguf_arch *tq_gguf_arch_find(const char *arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (arch && gguf_of(&archs[i]) && strcmp(gguf_of(&archs[i]), arch) == 0)
            return (const tq_gguf_arch *)&archs[i];
    return NULL;
}

int tq_gguf_family_unmapped(const char *arch, char *msg, size_t cap)
{
    const tq_family *fam = tq_family_by_gguf(arch);
    if (cap)
        msg[0] = 0;
    if (!fam || tq_gguf_arch_find(arch))
        return 0;
    size_t n = (size_t)snprintf(msg, cap,
                                "GGUF architecture '%s' is the %s family, but tq does not map its llama.cpp tensor "
                                "names to HuggingFace names (tq maps ",
                                arch, fam->name);
    for (size_t i = 0; i < sizeof archs / sizeof *archs && n < cap; i++)
        n += (size_t)snprintf(msg + n, cap - n, "%s%s", i ? ", " : "", gguf_of(&archs[i]));
    if (n < cap)
        snprintf(msg + n, cap - n, "): convert the %s HuggingFace checkpoint instead", fam->name);
    return 1;
}

int tq_gguf_arch_permutes_qk(const tq_gguf_arch *a)
{
    return a && ((const arch_info *)a)->permute_qk;
}

int tq_gguf_arch_maps_names(const tq_gguf_arch *a)
{
    return a && ((const arch_info *)a)->names;
}

const tq_gguf_arch *tq_gguf_arch_of(const tq_gguf_file *f, const char *arch)
{
    uint64_t experts = 0;
    const tq_gguf_arch *a = tq_gguf_arch_find(arch);
    if (a && !strcmp(arch, "llama") && tq_gguf_get_u64(f, "llama.expert_count", &experts) == 0 && experts > 0)
        return (const tq_gguf_arch *)&mixtral_arch;
    return a;
}

int tq_gguf_arch_is_gemma4(const tq_gguf_arch *a)
{
    return a && ((const arch_info *)a)->family == F_GEMMA4;
}

int tq_gguf_arch_is_mixtral(const tq_gguf_arch *a)
{
    return a == (const tq_gguf_arch *)&mixtral_arch;
}

/* Per-layer names: GGUF "blk.N.<k>" -> HF "model.layers.N.<v>" (v ending in '=': the HF name
 * has no .weight/.bias suffix, as gpt-oss's sinks and DeepSeek's score-correction bias). */
typedef struct name_map { const char *gguf, *hf; tq_gguf_role role; } name_map;

static const name_map llama_qwen_map[] = {
    {"attn_norm", "input_layernorm", 0},
    {"attn_q", "self_attn.q_proj", TQ_GGUF_ROLE_Q},
    {"attn_k", "self_attn.k_proj", TQ_GGUF_ROLE_K},
    {"attn_v", "self_attn.v_proj", 0},
    {"attn_output", "self_attn.o_proj", 0},
    {"attn_q_norm", "self_attn.q_norm", 0},
    {"attn_k_norm", "self_attn.k_norm", 0},
    {"ffn_norm", "post_attention_layernorm", 0},
    {"ffn_gate", "mlp.gate_proj", 0},
    {"ffn_up", "mlp.up_proj", 0},
    {"ffn_down", "mlp.down_proj", 0},
    {"ffn_gate_inp", "mlp.gate", 0},
    {"ffn_gate_exps", "mlp.switch_mlp.gate_proj", 0},
    {"ffn_up_exps", "mlp.switch_mlp.up_proj", 0},
    {"ffn_down_exps", "mlp.switch_mlp.down_proj", 0},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj", 0},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj", 0},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj", 0},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate", TQ_GGUF_ROLE_SHEXP_GATE},
    {NULL, NULL, 0},
};

/* DeepSeek V2/V3 (llama.cpp "deepseek2"): MLA projections, mlx-lm's stacked switch_mlp
 * experts, shared_experts (plural). attn_k_b and attn_v_b are llama.cpp's split of kv_b_proj
 * and are joined back into it (gguf_model.c). */
static const name_map deepseek2_map[] = {
    {"attn_norm", "input_layernorm", 0},
    {"attn_q", "self_attn.q_proj", 0},
    {"attn_q_a", "self_attn.q_a_proj", 0},
    {"attn_q_a_norm", "self_attn.q_a_layernorm", 0},
    {"attn_q_b", "self_attn.q_b_proj", 0},
    {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa", 0},
    {"attn_kv_a_norm", "self_attn.kv_a_layernorm", 0},
    {"attn_kv_b", "self_attn.kv_b_proj", 0},
    {"attn_k_b", "self_attn.kv_b_proj", TQ_GGUF_ROLE_K_B},
    {"attn_v_b", "self_attn.kv_b_proj", TQ_GGUF_ROLE_V_B},
    {"attn_output", "self_attn.o_proj", 0},
    {"ffn_norm", "post_attention_layernorm", 0},
    {"ffn_gate", "mlp.gate_proj", 0},
    {"ffn_up", "mlp.up_proj", 0},
    {"ffn_down", "mlp.down_proj", 0},
    {"ffn_gate_inp", "mlp.gate", 0},
    {"exp_probs_b", "mlp.gate.e_score_correction_bias=", 0},
    {"ffn_gate_exps", "mlp.switch_mlp.gate_proj", 0},
    {"ffn_up_exps", "mlp.switch_mlp.up_proj", 0},
    {"ffn_down_exps", "mlp.switch_mlp.down_proj", 0},
    {"ffn_gate_shexp", "mlp.shared_experts.gate_proj", 0},
    {"ffn_up_shexp", "mlp.shared_experts.up_proj", 0},
    {"ffn_down_shexp", "mlp.shared_experts.down_proj", 0},
    {NULL, NULL, 0},
};

/* gpt-oss: llama.cpp splits HF's interleaved gate_up into ffn_gate_exps / ffn_up_exps (weights
 * and biases), which are mlx-lm's mlp.experts.{gate,up}_proj; the router is ffn_gate_inp. */
static const name_map gptoss_map[] = {
    {"attn_norm", "input_layernorm", 0},
    {"post_attention_norm", "post_attention_layernorm", 0},
    {"attn_q", "self_attn.q_proj", 0},
    {"attn_k", "self_attn.k_proj", 0},
    {"attn_v", "self_attn.v_proj", 0},
    {"attn_output", "self_attn.o_proj", 0},
    {"attn_sinks", "self_attn.sinks=", 0},
    {"ffn_gate_inp", "mlp.router", 0},
    {"ffn_gate_exps", "mlp.experts.gate_proj", 0},
    {"ffn_up_exps", "mlp.experts.up_proj", 0},
    {"ffn_down_exps", "mlp.experts.down_proj", 0},
    {NULL, NULL, 0},
};

/* Gemma 3: four norms per layer; llama.cpp stored every norm weight plus 1 (gguf_model.c
 * subtracts it again). */
static const name_map gemma3_map[] = {
    {"attn_norm", "input_layernorm", TQ_GGUF_ROLE_NORM_SHIFT},
    {"post_attention_norm", "post_attention_layernorm", TQ_GGUF_ROLE_NORM_SHIFT},
    {"ffn_norm", "pre_feedforward_layernorm", TQ_GGUF_ROLE_NORM_SHIFT},
    {"post_ffw_norm", "post_feedforward_layernorm", TQ_GGUF_ROLE_NORM_SHIFT},
    {"attn_q_norm", "self_attn.q_norm", TQ_GGUF_ROLE_NORM_SHIFT},
    {"attn_k_norm", "self_attn.k_norm", TQ_GGUF_ROLE_NORM_SHIFT},
    {"attn_q", "self_attn.q_proj", 0},
    {"attn_k", "self_attn.k_proj", 0},
    {"attn_v", "self_attn.v_proj", 0},
    {"attn_output", "self_attn.o_proj", 0},
    {"ffn_gate", "mlp.gate_proj", 0},
    {"ffn_up", "mlp.up_proj", 0},
    {"ffn_down", "mlp.down_proj", 0},
    {NULL, NULL, 0},
};

/* Gemma 4: gguf-py's TENSOR_NAMES (constants.py: FFN_PRE_NORM "ffn_norm", FFN_PRE_NORM_2
 * "pre_ffw_norm_2", FFN_POST_NORM_1 / _2, FFN_GATE_UP_EXP "ffn_gate_up_exps", LAYER_OUT_SCALE
 * "layer_output_scale") for the HF modules conversion/gemma.py's Gemma4Model maps (router.proj is
 * FFN_GATE_INP; filter_tensors gives the bare experts.gate_up_proj / down_proj and layer_scalar a
 * ".weight"). Norms are stored as they are (norm_shift 0.0), the experts fused as in HF. */
static const name_map gemma4_map[] = {
    {"attn_norm", "input_layernorm", 0},
    {"post_attention_norm", "post_attention_layernorm", 0},
    {"ffn_norm", "pre_feedforward_layernorm", 0},
    {"post_ffw_norm", "post_feedforward_layernorm", 0},
    {"pre_ffw_norm_2", "pre_feedforward_layernorm_2", 0},
    {"post_ffw_norm_1", "post_feedforward_layernorm_1", 0},
    {"post_ffw_norm_2", "post_feedforward_layernorm_2", 0},
    {"attn_q_norm", "self_attn.q_norm", 0},
    {"attn_k_norm", "self_attn.k_norm", 0},
    {"attn_q", "self_attn.q_proj", 0},
    {"attn_k", "self_attn.k_proj", 0},
    {"attn_v", "self_attn.v_proj", 0},
    {"attn_output", "self_attn.o_proj", 0},
    {"ffn_gate", "mlp.gate_proj", 0},
    {"ffn_up", "mlp.up_proj", 0},
    {"ffn_down", "mlp.down_proj", 0},
    {"ffn_gate_inp", "router.proj", 0},
    {"ffn_gate_up_exps", "experts.gate_up_proj=", 0},
    {"ffn_down_exps", "experts.down_proj=", 0},
    {"layer_output_scale", "layer_scalar=", 0},
    {NULL, NULL, 0},
};

/* Gemma4Model.modify_tensors writes router.scale as FFN_GATE_INP with suffix ".scale" and
 * router.per_expert_scale as FFN_DOWN_EXP with ".scale": blk.N.<stem>.scale -> HF (no suffix). */
static const struct { const char *gguf, *hf; } gemma4_scales[] = {
    {"ffn_gate_inp", "router.scale"},
    {"ffn_down_exps", "router.per_expert_scale"},
};

static const struct { const char *gguf, *hf; } global_map[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

/* Splits "STEM.SUFFIX" with SUFFIX weight or bias. */
static int split_suffix(const char *name, char *stem, size_t cap, const char **suffix)
{
    const char *dot = strrchr(name, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0))
        return -1;
    size_t n = (size_t)(dot - name);
    if (n >= cap)
        return -1;
    memcpy(stem, name, n);
    stem[n] = 0;
    *suffix = dot + 1;
    return 0;
}

static const name_map *layer_map_of(const arch_info *a)
{
    switch (a ? a->family : F_LLAMA) {
    case F_DEEPSEEK2: return deepseek2_map;
    case F_GPTOSS: return gptoss_map;
    case F_GEMMA3: return gemma3_map;
    case F_GEMMA4: return gemma4_map;
    default: return llama_qwen_map;
    }
}

char *tq_gguf_hf_name(const tq_gguf_arch *arch, const char *gguf_name, tq_gguf_role *role)
{
    const arch_info *a = (const arch_info *)arch;
    int mixtral = a == &mixtral_arch;
    char stem[TQ_GGUF_MAX_NAME + 1], out[2 * TQ_GGUF_MAX_NAME + 64];
    const char *suffix;
    *role = TQ_GGUF_ROLE_OTHER;
    if (a && (a->family == F_LLAMA || a->family == F_GEMMA4) && !strcmp(gguf_name, "rope_freqs.weight")) {
        /* llama 3's rope scaling, or Gemma 4's proportional rope (Gemma4Model.generate_extra_tensors:
         * 1.0 for the turned pairs of the full layers, 1e30 for the others): config.json carries both */
        *role = TQ_GGUF_ROLE_ROPE_FREQS;
        return strdup("rope_freqs.weight");
    }
    const char *sc = strrchr(gguf_name, '.');
    if (a && a->family == F_GEMMA4 && sc && !strcmp(sc, ".scale") && !strncmp(gguf_name, "blk.", 4)) {
        uint64_t bl;
        const char *r = tq_parse_udec(gguf_name + 4, 999999999, &bl);
        for (size_t i = 0; r && *r == '.' && i < sizeof gemma4_scales / sizeof *gemma4_scales; i++)
            if (strlen(gemma4_scales[i].gguf) == (size_t)(sc - r - 1) && !strncmp(r + 1, gemma4_scales[i].gguf, (size_t)(sc - r - 1))) {
                snprintf(out, sizeof out, "model.layers.%lu.%s", (unsigned long)bl, gemma4_scales[i].hf);
                return strdup(out);
            }
        return NULL;
    }
    if (split_suffix(gguf_name, stem, sizeof stem, &suffix) != 0)
        return NULL;
    for (size_t i = 0; i < sizeof global_map / sizeof *global_map; i++)
        if (strcmp(stem, global_map[i].gguf) == 0) {
            if (a && a->family == F_GEMMA3 && !strcmp(stem, "output_norm") && !strcmp(suffix, "weight"))
                *role = TQ_GGUF_ROLE_NORM_SHIFT;
            snprintf(out, sizeof out, "%s.%s", global_map[i].hf, suffix);
            return strdup(out);
        }
    /* "blk.N." with N decimal, no sign, no leading zero: one HF name, one GGUF spelling. */
    if (strncmp(stem, "blk.", 4) != 0)
        return NULL;
    uint64_t n;
    const char *rest = tq_parse_udec(stem + 4, 999999999, &n);
    if (!rest || *rest++ != '.')
        return NULL;
    const unsigned long layer = (unsigned long)n;
    for (const name_map *m = layer_map_of(a); m->gguf; m++) {
        if (strcmp(rest, m->gguf) != 0)
            continue;
        const char *hf = m->hf;
        size_t hl = strlen(hf);
        int bare = hf[hl - 1] == '=';
        if (bare) /* the HF name has no suffix: only GGUF's .weight (sinks) or .bias (correction) */
            hl--;
        if ((m->role == TQ_GGUF_ROLE_NORM_SHIFT || m->role == TQ_GGUF_ROLE_K_B || m->role == TQ_GGUF_ROLE_V_B) &&
            strcmp(suffix, "weight") != 0)
            return NULL;
        if (mixtral && !strncmp(hf, "mlp.", 4) && (strstr(hf, "switch_mlp") || !strcmp(hf, "mlp.gate")))
            snprintf(out, sizeof out, "model.layers.%lu.block_sparse_moe.%s.%s", layer, hf + 4, suffix);
        else if (bare)
            snprintf(out, sizeof out, "model.layers.%lu.%.*s", layer, (int)hl, hf);
        else
            snprintf(out, sizeof out, "model.layers.%lu.%s.%s", layer, hf, suffix);
        *role = m->role;
        return strdup(out);
    }
    return NULL;
}

/* ------------------------------------------------------------- config.json */
static void put_u64(cJSON *c, const tq_gguf_file *f, const char *arch, const char *gkey, const char *hkey)
{
    char k[512];
    uint64_t v;
    snprintf(k, sizeof k, "%s.%s", arch, gkey);
    if (tq_gguf_get_u64(f, k, &v) == 0)
        cJSON_AddNumberToObject(c, hkey, (double)v);
}

static void put_f64(cJSON *c, const tq_gguf_file *f, const char *arch, const char *gkey, const char *hkey)
{
    char k[512];
    double v;
    snprintf(k, sizeof k, "%s.%s", arch, gkey);
    if (tq_gguf_get_f64(f, k, &v) == 0)
        cJSON_AddNumberToObject(c, hkey, v);
}

static int get_u(const tq_gguf_file *f, const char *arch, const char *gkey, uint64_t *v)
{
    char k[512];
    snprintf(k, sizeof k, "%s.%s", arch, gkey);
    return tq_gguf_get_u64(f, k, v);
}

static int get_d(const tq_gguf_file *f, const char *arch, const char *gkey, double *v)
{
    char k[512];
    snprintf(k, sizeof k, "%s.%s", arch, gkey);
    return tq_gguf_get_f64(f, k, v);
}

/* rope_scaling from ARCH.rope.scaling.* ("none" or absent: no field). */
static void put_rope_scaling(cJSON *c, const tq_gguf_file *f, const char *arch)
{
    char k[512];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    char *type = tq_gguf_get_str(f, k);
    double factor;
    if (type && strcmp(type, "none") != 0 && get_d(f, arch, "rope.scaling.factor", &factor) == 0) {
        cJSON *r = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(r, "rope_type", type);
        cJSON_AddStringToObject(r, "type", type);
        cJSON_AddNumberToObject(r, "factor", factor);
        put_u64(r, f, arch, "rope.scaling.original_context_length", "original_max_position_embeddings");
        put_f64(r, f, arch, "rope.scaling.yarn_beta_fast", "beta_fast");
        put_f64(r, f, arch, "rope.scaling.yarn_beta_slow", "beta_slow");
    }
    free(type);
}

/* "mlp_only_layers": [] and "decoder_sparse_step": 1 — llama.cpp makes every layer of these
 * MoE architectures sparse (it has no key for either). */
static void put_all_sparse(cJSON *c)
{
    cJSON_AddNumberToObject(c, "decoder_sparse_step", 1);
    cJSON_AddArrayToObject(c, "mlp_only_layers");
}

/* Element i of the integer or bool array ARCH.gkey (gguf-py writes Python ints as INT32 and
 * bools as BOOL): 0, or -1 when absent, not such an array, too short or negative. */
static int arr_u(const tq_gguf_file *f, const char *arch, const char *gkey, uint64_t i, uint64_t *v)
{
    char k[512];
    snprintf(k, sizeof k, "%s.%s", arch, gkey);
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, k);
    if (!kv || kv->type != TQ_GGUF_ARRAY || i >= kv->arr_n)
        return -1;
    const unsigned char *p = f->header + kv->off;
    if (kv->arr_type == TQ_GGUF_BOOL || kv->arr_type == TQ_GGUF_U8) {
        *v = p[i];
        return 0;
    }
    if (kv->arr_type != TQ_GGUF_I32 && kv->arr_type != TQ_GGUF_U32)
        return -1;
    uint32_t x = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                 (uint32_t)p[4 * i + 3] << 24;
    if (kv->arr_type == TQ_GGUF_I32 && (int32_t)x < 0)
        return -1;
    *v = x;
    return 0;
}

/* Gemma 4 as conversion/gemma.py's Gemma4Model (with Gemma3Model's and TextModel's
 * set_gguf_parameters) writes it -> Gemma4TextConfig's keys: key_length is global_head_dim and
 * key_length_swa head_dim; head_count_kv per layer (num_key_value_heads on sliding layers,
 * num_global_key_value_heads on full ones) and sliding_window_pattern (true: sliding) per
 * layer; rope.freq_base the full layers' theta, freq_base_swa the sliding ones'; the full
 * layers' partial rotary factor comes from rope_freqs (tq_gguf_gemma4_rope) and
 * attention_k_eq_v from the tensors (gguf_model.c). */
static void put_gemma4(cJSON *c, const tq_gguf_file *f, const char *arch)
{
    uint64_t v, n = 0;
    double d;
    cJSON_AddStringToObject(c, "hidden_activation", "gelu_pytorch_tanh");
    cJSON_DeleteItemFromObjectCaseSensitive(c, "head_dim");
    put_u64(c, f, arch, "attention.key_length_swa", "head_dim");
    put_u64(c, f, arch, "attention.key_length", "global_head_dim");
    cJSON_DeleteItemFromObjectCaseSensitive(c, "num_experts");
    cJSON_DeleteItemFromObjectCaseSensitive(c, "num_experts_per_tok");
    cJSON_DeleteItemFromObjectCaseSensitive(c, "rope_theta");
    uint64_t ne = 0;
    (void)get_u(f, arch, "expert_count", &ne);
    cJSON_AddBoolToObject(c, "enable_moe_block", ne > 0);
    if (ne) {
        cJSON_AddNumberToObject(c, "num_experts", (double)ne);
        put_u64(c, f, arch, "expert_used_count", "top_k_experts");
    }
    put_u64(c, f, arch, "embedding_length_per_layer_input", "hidden_size_per_layer_input");
    put_u64(c, f, arch, "attention.shared_kv_layers", "num_kv_shared_layers");
    put_f64(c, f, arch, "final_logit_softcapping", "final_logit_softcapping");
    if (get_u(f, arch, "block_count", &n) == 0 && n <= 4096) {
        cJSON *lt = cJSON_AddArrayToObject(c, "layer_types");
        int have_kv = 0, have_gkv = 0;
        for (uint64_t l = 0; l < n; l++) {
            uint64_t sw = 0;
            int sliding = arr_u(f, arch, "attention.sliding_window_pattern", l, &sw) == 0 && sw;
            cJSON_AddItemToArray(lt, cJSON_CreateString(sliding ? "sliding_attention" : "full_attention"));
            if (arr_u(f, arch, "attention.head_count_kv", l, &v) == 0 && !(sliding ? have_kv : have_gkv)) {
                cJSON_DeleteItemFromObjectCaseSensitive(c, sliding ? "num_key_value_heads" : "num_global_key_value_heads");
                cJSON_AddNumberToObject(c, sliding ? "num_key_value_heads" : "num_global_key_value_heads", (double)v);
                *(sliding ? &have_kv : &have_gkv) = 1;
            }
        }
    }
    cJSON *rp = cJSON_AddObjectToObject(c, "rope_parameters");
    cJSON *fa = cJSON_AddObjectToObject(rp, "full_attention"), *sa = cJSON_AddObjectToObject(rp, "sliding_attention");
    cJSON_AddStringToObject(fa, "rope_type", "proportional");
    if (get_d(f, arch, "rope.freq_base", &d) == 0)
        cJSON_AddNumberToObject(fa, "rope_theta", d);
    cJSON_AddStringToObject(sa, "rope_type", "default");
    if (get_d(f, arch, "rope.freq_base_swa", &d) == 0)
        cJSON_AddNumberToObject(sa, "rope_theta", d);
}

int tq_gguf_gemma4_rope(cJSON *c, const float *rf, uint64_t n, char *why, size_t cap)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "global_head_dim");
    if (!cJSON_IsNumber(g) || g->valuedouble != 2.0 * (double)n)
        return snprintf(why, cap, "%llu factors, but the full layers' head_dim (key_length) is %g",
                        (unsigned long long)n, cJSON_IsNumber(g) ? g->valuedouble : 0), -1;
    uint64_t turned = 0;
    while (turned < n && rf[turned] == 1.0f)
        turned++;
    for (uint64_t i = turned; i < n; i++)
        if (!(rf[i] >= 1e29f))
            return snprintf(why, cap, "value %llu is %g: Gemma 4's factors are 1 for the turned pairs, then 1e30",
                            (unsigned long long)i, (double)rf[i]), -1;
    cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "rope_parameters");
    cJSON *fa = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
    if (!cJSON_IsObject(fa))
        return snprintf(why, cap, "no rope_parameters.full_attention to complete"), -1;
    /* the converter wrote int(global_head_dim * partial_rotary_factor / 2) ones */
    cJSON_AddNumberToObject(fa, "partial_rotary_factor", (double)turned / (double)n);
    return 0;
}

static void put_family(cJSON *c, const tq_gguf_file *f, const char *arch, const arch_info *a)
{
    uint64_t v, w;
    double d;
    switch (a->family) {
    case F_LLAMA:
        cJSON_AddStringToObject(c, "hidden_act", "silu");
        if (a == &mixtral_arch) {
            put_u64(c, f, arch, "expert_count", "num_local_experts");
            cJSON_AddNumberToObject(c, "router_jitter_noise", 0);
        } else {
            cJSON_AddBoolToObject(c, "attention_bias", 0);
            cJSON_AddBoolToObject(c, "mlp_bias", 0);
        }
        break;
    case F_QWEN2: case F_QWEN3: case F_QWEN2MOE: case F_QWEN3MOE:
        cJSON_AddStringToObject(c, "hidden_act", "silu");
        cJSON_AddBoolToObject(c, "use_sliding_window", 0); /* llama.cpp attends over the full context */
        if (a->family == F_QWEN3 || a->family == F_QWEN3MOE)
            cJSON_AddBoolToObject(c, "attention_bias", 0);
        if (a->family == F_QWEN2MOE || a->family == F_QWEN3MOE) {
            /* llama.cpp renormalises the top-k routing weights for qwen3moe, never for qwen2moe */
            cJSON_AddBoolToObject(c, "norm_topk_prob", a->family == F_QWEN3MOE);
            put_all_sparse(c);
        }
        if (a->family == F_QWEN2MOE && !cJSON_GetObjectItemCaseSensitive(c, "shared_expert_intermediate_size"))
            put_u64(c, f, arch, "feed_forward_length", "shared_expert_intermediate_size");
        break;
    case F_DEEPSEEK2: {
        uint64_t gating = 0;
        (void)get_u(f, arch, "expert_gating_func", &gating);
        if (gating != 2) { /* softmax gating: DeepSeek-V2 */
            cJSON_ReplaceItemInObjectCaseSensitive(c, "model_type", cJSON_CreateString("deepseek_v2"));
            cJSON *ar = cJSON_GetObjectItemCaseSensitive(c, "architectures");
            cJSON_ReplaceItemInArray(ar, 0, cJSON_CreateString("DeepseekV2ForCausalLM"));
        }
        cJSON_AddStringToObject(c, "hidden_act", "silu");
        cJSON_AddStringToObject(c, "scoring_func", gating == 2 ? "sigmoid" : "softmax");
        cJSON_AddStringToObject(c, "topk_method", gating == 2 ? "noaux_tc" : "greedy");
        if (get_u(f, arch, "attention.q_lora_rank", &v) == 0 && v > 0)
            cJSON_AddNumberToObject(c, "q_lora_rank", (double)v);
        else /* V2-Lite: a plain q_proj, which HF and mlx-lm read from a null rank (else 1536) */
            cJSON_AddNullToObject(c, "q_lora_rank");
        put_u64(c, f, arch, "attention.kv_lora_rank", "kv_lora_rank");
        put_u64(c, f, arch, "rope.dimension_count", "qk_rope_head_dim");
        /* llama.cpp runs MLA as MQA: newer files keep the per-head sizes in the *_mla keys (then
         * key_length / value_length are the latent sizes, head_count_kv 1) */
        int mla = get_u(f, arch, "attention.key_length_mla", &v) == 0;
        if (!mla)
            (void)get_u(f, arch, "attention.key_length", &v);
        if (get_u(f, arch, "rope.dimension_count", &w) == 0 && v >= w)
            cJSON_AddNumberToObject(c, "qk_nope_head_dim", (double)(v - w));
        put_u64(c, f, arch, mla ? "attention.value_length_mla" : "attention.value_length", "v_head_dim");
        if (get_u(f, arch, "attention.head_count", &v) == 0) { /* HF: one key/value head per query head */
            cJSON_DeleteItemFromObjectCaseSensitive(c, "num_key_value_heads");
            cJSON_AddNumberToObject(c, "num_key_value_heads", (double)v);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(c, "head_dim"); /* MLA: key_length is nope + rope */
        put_u64(c, f, arch, "expert_count", "n_routed_experts");
        put_u64(c, f, arch, "expert_shared_count", "n_shared_experts");
        put_u64(c, f, arch, "leading_dense_block_count", "first_k_dense_replace");
        put_f64(c, f, arch, "expert_weights_scale", "routed_scaling_factor");
        put_u64(c, f, arch, "expert_group_count", "n_group");
        put_u64(c, f, arch, "expert_group_used_count", "topk_group");
        const tq_gguf_kv *norm = NULL;
        char k[512];
        snprintf(k, sizeof k, "%s.expert_weights_norm", arch);
        norm = tq_gguf_find_kv(f, k);
        cJSON_AddBoolToObject(c, "norm_topk_prob", norm && norm->type == TQ_GGUF_BOOL && norm->num.u);
        cJSON_AddNumberToObject(c, "moe_layer_freq", 1);
        if (get_d(f, arch, "rope.scaling.yarn_log_multiplier", &d) == 0) {
            cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
            if (r) { /* llama.cpp stores 0.1 * mscale_all_dim as f32: the shortest decimal m
                      * whose f32 0.1 * m is the stored value */
                double m = d / 0.1;
                char buf[40];
                for (int p = 1; p <= 17; p++) {
                    snprintf(buf, sizeof buf, "%.*g", p, d / 0.1);
                    if ((float)(0.1 * strtod(buf, NULL)) == (float)d) {
                        m = strtod(buf, NULL);
                        break;
                    }
                }
                cJSON_AddNumberToObject(r, "mscale", m);
                cJSON_AddNumberToObject(r, "mscale_all_dim", m);
            }
        }
        break;
    }
    case F_GPTOSS:
        put_u64(c, f, arch, "expert_count", "num_local_experts");
        put_u64(c, f, arch, "expert_used_count", "experts_per_token");
        cJSON_AddBoolToObject(c, "attention_bias", 1);
        cJSON_AddNumberToObject(c, "swiglu_limit", 7.0);
        if (!cJSON_GetObjectItemCaseSensitive(c, "intermediate_size"))
            put_u64(c, f, arch, "expert_feed_forward_length", "intermediate_size");
        cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
        if (rs) { /* gpt-oss's yarn as released: llama.cpp's default betas, no truncation */
            if (!cJSON_GetObjectItemCaseSensitive(rs, "beta_fast"))
                cJSON_AddNumberToObject(rs, "beta_fast", 32.0);
            if (!cJSON_GetObjectItemCaseSensitive(rs, "beta_slow"))
                cJSON_AddNumberToObject(rs, "beta_slow", 1.0);
            cJSON_AddBoolToObject(rs, "truncate", 0);
            cJSON_DeleteItemFromObjectCaseSensitive(rs, "type");
        }
        if (get_u(f, arch, "block_count", &v) == 0 && v <= 4096) {
            /* llama.cpp: sliding-window attention on even layers, full attention on odd ones */
            cJSON *lt = cJSON_AddArrayToObject(c, "layer_types");
            for (uint64_t l = 0; l < v; l++)
                cJSON_AddItemToArray(lt, cJSON_CreateString(l % 2 ? "full_attention" : "sliding_attention"));
        }
        break;
    case F_GEMMA4:
        put_gemma4(c, f, arch);
        break;
    case F_GEMMA3:
        cJSON_AddStringToObject(c, "hidden_activation", "gelu_pytorch_tanh");
        cJSON_AddNumberToObject(c, "sliding_window_pattern", 6); /* llama.cpp: every 6th layer is global */
        cJSON_AddNumberToObject(c, "rope_local_base_freq", 10000.0); /* llama.cpp's local-layer rope base */
        if (get_u(f, arch, "block_count", &v) == 0 && get_u(f, arch, "embedding_length", &w) == 0) {
            uint64_t h = 0, kl = 0;
            (void)get_u(f, arch, "attention.head_count", &h);
            (void)get_u(f, arch, "attention.key_length", &kl);
            /* llama.cpp scales queries by 1/sqrt(hidden / heads) for the 62-layer (27B) model, by
             * 1/sqrt(head_dim) otherwise */
            if (v == 62 && h)
                cJSON_AddNumberToObject(c, "query_pre_attn_scalar", (double)(w / h));
            else if (kl)
                cJSON_AddNumberToObject(c, "query_pre_attn_scalar", (double)kl);
        }
        break;
    }
}

/* ------------------------------------------------------ llama 3 rope_freqs */
static double cfg_num(const cJSON *c, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* The factor llama.cpp's converter writes for rotary pair i of dim (its llama 3 rule: 1 for
 * wavelengths under L/hi, the full factor over L/lo, a smooth blend between). */
static double llama3_factor(double theta, uint64_t dim, uint64_t i, double factor, double lo, double hi, double L)
{
    double freq = 1.0 / pow(theta, (double)(2 * i) / (double)dim), wavelen = 2 * M_PI / freq;
    if (wavelen < L / hi)
        return 1.0;
    if (wavelen > L / lo)
        return factor;
    double smooth = (L / wavelen - lo) / (hi - lo);
    return 1.0 / ((1 - smooth) / factor + smooth);
}

static int llama3_matches(const float *rf, uint64_t n, double theta, double factor, double lo, double hi, double L)
{
    for (uint64_t i = 0; i < n; i++) {
        double want = llama3_factor(theta, 2 * n, i, factor, lo, hi, L);
        if (fabs((double)rf[i] - want) > 1e-5 * want)
            return 0;
    }
    return 1;
}

int tq_gguf_llama3_rope(cJSON *c, const float *rf, uint64_t n, char *why, size_t cap)
{
    double theta = cfg_num(c, "rope_theta", 10000.0), heads = cfg_num(c, "num_attention_heads", 0);
    double dim = cfg_num(c, "head_dim", heads > 0 ? floor(cfg_num(c, "hidden_size", 0) / heads) : 0);
    if (dim != (double)(2 * n) || !(theta > 1))
        return snprintf(why, cap, "%llu factors, but the rotary dimension is %g (head_dim) with rope_theta %g",
                        (unsigned long long)n, dim, theta), -1;
    double factor = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!isfinite(rf[i]) || !(rf[i] >= 1.0f))
            return snprintf(why, cap, "value %llu is %g: llama 3 factors are finite and at least 1",
                            (unsigned long long)i, (double)rf[i]), -1;
        if (rf[i] > factor)
            factor = rf[i];
    }
    /* Every Llama 3.x release: lo 1, hi 4, L 8192. Else fit the blend: with lo = 1 (only the
     * ratios L/lo, L/hi matter), s = (1/f - 1/F) / (1 - 1/F) = a x + b over x = 1/wavelength
     * gives hi = 1 - 1/b and L = -a/b; L is rounded to an integer, hi to 1e-4. */
    double lo = 1, hi = 4, L = 8192;
    int ok = llama3_matches(rf, n, theta, factor, lo, hi, L);
    if (!ok && factor > 1) {
        double sx = 0, sy = 0, sxx = 0, sxy = 0, k = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (!(rf[i] > 1.0f + 1e-6f) || !(rf[i] < (float)factor * (1 - 1e-6f)))
                continue;
            double x = 1.0 / (2 * M_PI * pow(theta, (double)(2 * i) / (double)(2 * n)));
            double y = (1.0 / rf[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
            sx += x, sy += y, sxx += x * x, sxy += x * y, k++;
        }
        double det = k * sxx - sx * sx;
        if (k >= 2 && det != 0) {
            double a = (k * sxy - sx * sy) / det, b = (sy - a * sx) / k;
            if (b < 0 && a > 0) {
                hi = round((1 - 1 / b) * 1e4) / 1e4;
                L = round(-a / b);
                ok = hi > lo && L > 0 && llama3_matches(rf, n, theta, factor, lo, hi, L);
            }
        }
    }
    if (!ok)
        return snprintf(why, cap, "the %llu values are not llama 3 rope factors (no factor, low/high frequency factors "
                        "and original context length give them back)", (unsigned long long)n), -1;
    cJSON *r = cJSON_AddObjectToObject(c, "rope_scaling");
    if (!r)
        return snprintf(why, cap, "out of memory"), -1;
    cJSON_AddStringToObject(r, "rope_type", "llama3");
    cJSON_AddNumberToObject(r, "factor", factor);
    cJSON_AddNumberToObject(r, "low_freq_factor", lo);
    cJSON_AddNumberToObject(r, "high_freq_factor", hi);
    cJSON_AddNumberToObject(r, "original_max_position_embeddings", L);
    return 0;
}

/* Every ARCH.* key tq_gguf_config reads, with the kind of value it must hold (gguf-py's
 * GGUFWriter writes the counts and lengths as u32, the rest as f32, strings and a bool). A key
 * of another type is an error naming it, not a field left out of config.json: a string
 * block_count would give a config without num_hidden_layers. */
static const struct { const char *key; tq_gguf_want want; } arch_keys[] = {
    {"block_count", TQ_GGUF_WANT_UINT}, {"embedding_length", TQ_GGUF_WANT_UINT},
    {"feed_forward_length", TQ_GGUF_WANT_UINT}, {"expert_feed_forward_length", TQ_GGUF_WANT_UINT},
    {"expert_shared_feed_forward_length", TQ_GGUF_WANT_UINT}, {"attention.head_count", TQ_GGUF_WANT_UINT},
    {"attention.head_count_kv", TQ_GGUF_WANT_UINT}, {"attention.key_length", TQ_GGUF_WANT_UINT},
    {"attention.value_length", TQ_GGUF_WANT_UINT}, {"attention.key_length_mla", TQ_GGUF_WANT_UINT},
    {"attention.value_length_mla", TQ_GGUF_WANT_UINT}, {"rope.freq_base", TQ_GGUF_WANT_NUM},
    {"attention.layer_norm_rms_epsilon", TQ_GGUF_WANT_NUM}, {"expert_count", TQ_GGUF_WANT_UINT},
    {"expert_used_count", TQ_GGUF_WANT_UINT}, {"context_length", TQ_GGUF_WANT_UINT},
    {"attention.sliding_window", TQ_GGUF_WANT_UINT}, {"vocab_size", TQ_GGUF_WANT_UINT},
    {"rope.scaling.type", TQ_GGUF_WANT_STR}, {"rope.scaling.factor", TQ_GGUF_WANT_NUM},
    {"rope.scaling.original_context_length", TQ_GGUF_WANT_UINT}, {"rope.scaling.yarn_beta_fast", TQ_GGUF_WANT_NUM},
    {"rope.scaling.yarn_beta_slow", TQ_GGUF_WANT_NUM}, {"rope.scaling.yarn_log_multiplier", TQ_GGUF_WANT_NUM},
    {"rope.dimension_count", TQ_GGUF_WANT_UINT}, {"expert_gating_func", TQ_GGUF_WANT_UINT},
    {"attention.q_lora_rank", TQ_GGUF_WANT_UINT}, {"attention.kv_lora_rank", TQ_GGUF_WANT_UINT},
    {"expert_shared_count", TQ_GGUF_WANT_UINT}, {"leading_dense_block_count", TQ_GGUF_WANT_UINT},
    {"expert_weights_scale", TQ_GGUF_WANT_NUM}, {"expert_weights_norm", TQ_GGUF_WANT_BOOL},
    {"expert_group_count", TQ_GGUF_WANT_UINT}, {"expert_group_used_count", TQ_GGUF_WANT_UINT},
    {"attention.key_length_swa", TQ_GGUF_WANT_UINT}, {"rope.freq_base_swa", TQ_GGUF_WANT_NUM},
    {"final_logit_softcapping", TQ_GGUF_WANT_NUM}, {"attention.shared_kv_layers", TQ_GGUF_WANT_UINT},
    {"embedding_length_per_layer_input", TQ_GGUF_WANT_UINT},
};

int tq_gguf_check_arch_keys(const tq_gguf_file *f, const char *arch, tq_err *e)
{
    char k[512];
    for (size_t i = 0; i < sizeof arch_keys / sizeof *arch_keys; i++) {
        snprintf(k, sizeof k, "%s.%s", arch, arch_keys[i].key);
        /* Gemma4Model writes head_count_kv per layer (and feed_forward_length per layer with
         * use_double_wide_mlp): arrays, read element by element (put_gemma4) */
        const tq_gguf_kv *kv = tq_gguf_find_kv(f, k);
        if (!strcmp(arch, "gemma4") && kv && kv->type == TQ_GGUF_ARRAY &&
            (!strcmp(arch_keys[i].key, "attention.head_count_kv") || !strcmp(arch_keys[i].key, "feed_forward_length")))
            continue;
        if (tq_gguf_check_key(f, k, arch_keys[i].want, e))
            return -1;
    }
    if (tq_gguf_check_key(f, "tokenizer.ggml.bos_token_id", TQ_GGUF_WANT_UINT, e) ||
        tq_gguf_check_key(f, "tokenizer.ggml.eos_token_id", TQ_GGUF_WANT_UINT, e))
        return -1;
    return 0;
}

cJSON *tq_gguf_config(const tq_gguf_file *f, const char *arch, uint64_t vocab, int tied, tq_err *e)
{
    cJSON *c = cJSON_CreateObject();
    if (!c) {
        tq_fail(e, TQ_ENOMEM, "out of memory building config.json");
        return NULL;
    }
    const arch_info *a = (const arch_info *)tq_gguf_arch_of(f, arch);
    if (a) {
        cJSON *arr = cJSON_AddArrayToObject(c, "architectures");
        cJSON_AddItemToArray(arr, cJSON_CreateString(class_of(a)));
        cJSON_AddStringToObject(c, "model_type", model_type_of(a));
        cJSON_AddBoolToObject(c, "tie_word_embeddings", tied);
    }
    cJSON_AddStringToObject(c, "gguf_architecture", arch);
    put_u64(c, f, arch, "block_count", "num_hidden_layers");
    put_u64(c, f, arch, "embedding_length", "hidden_size");
    put_u64(c, f, arch, "feed_forward_length", "intermediate_size");
    put_u64(c, f, arch, "expert_feed_forward_length", "moe_intermediate_size");
    put_u64(c, f, arch, "expert_shared_feed_forward_length", "shared_expert_intermediate_size");
    put_u64(c, f, arch, "attention.head_count", "num_attention_heads");
    put_u64(c, f, arch, "attention.head_count_kv", "num_key_value_heads");
    put_u64(c, f, arch, "attention.key_length", "head_dim");
    put_f64(c, f, arch, "rope.freq_base", "rope_theta");
    put_f64(c, f, arch, "attention.layer_norm_rms_epsilon", "rms_norm_eps");
    put_u64(c, f, arch, "expert_count", "num_experts");
    put_u64(c, f, arch, "expert_used_count", "num_experts_per_tok");
    put_u64(c, f, arch, "context_length", "max_position_embeddings");
    put_u64(c, f, arch, "attention.sliding_window", "sliding_window");
    put_u64(c, f, "tokenizer.ggml", "bos_token_id", "bos_token_id");
    put_u64(c, f, "tokenizer.ggml", "eos_token_id", "eos_token_id");
    put_rope_scaling(c, f, arch);
    if (vocab)
        cJSON_AddNumberToObject(c, "vocab_size", (double)vocab);
    if (a)
        put_family(c, f, arch, a);
    return c;
}
