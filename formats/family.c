/* The model-family table (formats/family.h): one entry per family, written from mlx-lm's
 * model file named in it, and the name analysis every pipeline shares. */
#include "formats/family.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#define L(...) ((const char *const[]){__VA_ARGS__, ""})

/* Attention and dense-MLP linears most families share (mlx-lm: nn.Linear in Attention/MLP). */
#define ATTN "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"
#define MLP "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"
#define SWITCH(c) c ".gate_proj", c ".up_proj", c ".down_proj"
#define HF_GUD {"gate_proj", "up_proj", NULL, "down_proj"}
/* The Qwen MoE block: mlp.gate router, mlp.switch_mlp experts, mlp.shared_expert + gate. */
#define QWEN_MOE .moe_block = "mlp", .hf_proj = HF_GUD, .mlx_container = "mlp.switch_mlp", .experts_key = "num_experts", \
                 .topk_key = "num_experts_per_tok", .moe_inter_key = "moe_intermediate_size", .routers = L("mlp.gate"), \
                 .shared = "mlp.shared_expert", .shared_gate = "mlp.shared_expert_gate"
#define QWEN_MOE_LINEARS SWITCH("mlp.switch_mlp"), SWITCH("mlp.shared_expert"), "mlp.gate", "mlp.shared_expert_gate"

/* tq-run's reading of the Qwen MoE configs: softmax top-k, renormalised only when the config
 * says norm_topk_prob (the default is each transformers config class's), a shared expert of
 * width shared_expert_intermediate_size. */
#define QWEN_MOE_DECODE(norm) .route = TQ_ROUTE_SOFTMAX, .norm_topk = norm, .norm_topk_key = "norm_topk_prob", \
                              .shared_key = "shared_expert_intermediate_size"
/* Qwen3-Next / Qwen3.5: Gated DeltaNet layers, gated full attention with q/k norms, top-k
 * renormalised unless norm_topk_prob says otherwise (Qwen3NextConfig's default: true). */
#define QWEN3_NEXT_DECODE {.decoder = TQ_DEC_QWEN3_NEXT, .kinds = TQ_KIND_LINEAR, .qk_norm = 1, .att_gate = 1, \
                           QWEN_MOE_DECODE(1)}
/* Qwen3.5-MoE: the same, but always renormalised. transformers'
 * models/qwen3_5_moe/modular_qwen3_5_moe.py: Qwen3_5MoeTopKRouter is Qwen3VLMoeTextTopKRouter,
 * whose forward divides the top-k probabilities by their sum unconditionally, and
 * Qwen3_5MoeTextConfig has no norm_topk_prob (norm_topk_prob = AttributeError()), so a config
 * that carries one (from Qwen3-Next) is not read. */
#define QWEN3_5_MOE_DECODE {.decoder = TQ_DEC_QWEN3_NEXT, .kinds = TQ_KIND_LINEAR, .qk_norm = 1, .att_gate = 1, \
                            .route = TQ_ROUTE_SOFTMAX, .norm_topk = 1, .shared_key = "shared_expert_intermediate_size"}

static const tq_family families[TQ_FAM_COUNT] = {
    /* mlx_lm/models/llama.py: Attention {q,k,v,o}_proj, MLP {gate,up,down}_proj, all
     * nn.Linear; "mistral" is remapped to llama by mlx_lm/utils.py MODEL_REMAPPING. */
    [TQ_FAM_LLAMA] = {.id = TQ_FAM_LLAMA, .name = "llama", .model_types = L("llama", "mistral"),
                      .architectures = L("LlamaForCausalLM", "MistralForCausalLM"),
                      .source = "mlx_lm/models/llama.py", .store = TQ_EXP_NONE, .dense = TQ_DENSE_NONE,
                      .linears = L(ATTN, MLP),
                      .gguf_arch = "llama",
                      .decode = {.decoder = TQ_DEC_LLAMA, .needs_inter = 1, .window_all = L("mistral")}},
    /* mlx_lm/models/qwen2.py: like llama, q/k/v with bias=True. */
    [TQ_FAM_QWEN2] = {.id = TQ_FAM_QWEN2, .name = "qwen2", .model_types = L("qwen2"),
                      .architectures = L("Qwen2ForCausalLM"), .source = "mlx_lm/models/qwen2.py",
                      .store = TQ_EXP_NONE, .dense = TQ_DENSE_NONE, .linears = L(ATTN, MLP),
                      .gguf_arch = "qwen2",
                      .decode = {.decoder = TQ_DEC_QWEN2, .kinds = TQ_KIND_SLIDING, .needs_inter = 1}},
    /* mlx_lm/models/qwen3.py: like llama plus q_norm/k_norm (RMSNorm, not linear). */
    [TQ_FAM_QWEN3] = {.id = TQ_FAM_QWEN3, .name = "qwen3", .model_types = L("qwen3"),
                      .architectures = L("Qwen3ForCausalLM"), .source = "mlx_lm/models/qwen3.py",
                      .store = TQ_EXP_NONE, .dense = TQ_DENSE_NONE, .linears = L(ATTN, MLP),
                      .gguf_arch = "qwen3",
                      .decode = {.decoder = TQ_DEC_QWEN3, .qk_norm = 1, .needs_inter = 1}},
    /* mlx_lm/models/qwen2_moe.py: mlp.gate (nn.Linear router), mlp.switch_mlp (SwitchGLU),
     * mlp.shared_expert (MLP) and mlp.shared_expert_gate (nn.Linear, 1 output); sanitize()
     * stacks mlp.experts.<e>.<proj>.{weight,scales,biases} into switch_mlp. tq-run follows
     * transformers' models/qwen2_moe/modeling_qwen2_moe.py, Qwen2MoeSparseMoeBlock.forward:
     * softmax over every expert, top-k, divided by their sum only when norm_topk_prob
     * (Qwen2MoeConfig's default: false; Qwen1.5-MoE-A2.7B's config.json says false), then
     * shared_expert(h) * sigmoid(shared_expert_gate(h)) of width
     * shared_expert_intermediate_size added. */
    [TQ_FAM_QWEN2_MOE] = {.id = TQ_FAM_QWEN2_MOE, .name = "qwen2_moe", .model_types = L("qwen2_moe"),
                          .architectures = L("Qwen2MoeForCausalLM"), .source = "mlx_lm/models/qwen2_moe.py",
                          .store = TQ_EXP_SEPARATE, QWEN_MOE, .dense = TQ_DENSE_SPARSE_STEP,
                          .linears = L(ATTN, MLP, QWEN_MOE_LINEARS),
                          .gguf_arch = "qwen2moe",
                          .decode = {.decoder = TQ_DEC_QWEN2_MOE, .kinds = TQ_KIND_SLIDING, QWEN_MOE_DECODE(0)}},
    /* mlx_lm/models/qwen3_moe.py: the qwen2_moe layout without a shared expert (tq also accepts
     * one, as tq-mkmodel --shared-expert writes); dense layers by mlp_only_layers and
     * decoder_sparse_step. */
    [TQ_FAM_QWEN3_MOE] = {.id = TQ_FAM_QWEN3_MOE, .name = "qwen3_moe", .model_types = L("qwen3_moe"),
                          .architectures = L("Qwen3MoeForCausalLM"), .source = "mlx_lm/models/qwen3_moe.py",
                          .store = TQ_EXP_SEPARATE, QWEN_MOE, .dense = TQ_DENSE_SPARSE_STEP,
                          .linears = L(ATTN, MLP, QWEN_MOE_LINEARS),
                          .gguf_arch = "qwen3moe",
                          .decode = {.decoder = TQ_DEC_QWEN3_MOE, .qk_norm = 1, QWEN_MOE_DECODE(0)}},
    /* mlx_lm/models/qwen3_next.py: linear_attn (Gated DeltaNet: in_proj_qkvz, in_proj_ba,
     * out_proj linear; conv1d, A_log, dt_bias, norm not), gated self_attn (q_proj twice as
     * wide), MoE with shared expert and gate. Its sanitize() runs only when
     * model.layers.0.mlp.experts.0.up_proj.weight exists: it drops "mtp." tensors, stacks the
     * experts, moves conv1d [C,1,K] -> [C,K,1] and adds 1 to input_layernorm,
     * post_attention_layernorm, model.norm, q_norm and k_norm. A stacked output no longer
     * triggers it, so tq-convert does those transforms itself. */
    [TQ_FAM_QWEN3_NEXT] = {.id = TQ_FAM_QWEN3_NEXT, .name = "qwen3_next", .model_types = L("qwen3_next"),
                           .architectures = L("Qwen3NextForCausalLM"), .source = "mlx_lm/models/qwen3_next.py",
                           .store = TQ_EXP_SEPARATE, QWEN_MOE, .dense = TQ_DENSE_SPARSE_STEP,
                           .linears = L(ATTN, MLP, QWEN_MOE_LINEARS, "linear_attn.in_proj_qkvz",
                                        "linear_attn.in_proj_ba", "linear_attn.out_proj"),
                           .transforms = TQ_FT_NORM_SHIFT | TQ_FT_CONV_KLAST, .mtp = TQ_MTP_PREFIX,
                           .mtp_keep = 0,
                           .gguf_arch = "qwen3next",
                           .decode = QWEN3_NEXT_DECODE},
    /* mlx_lm/models/qwen3_5.py: the Qwen3-Next layers with linear_attn split into
     * in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; the language model under
     * language_model.model. (sanitize() maps model.language_model -> language_model.model,
     * drops model.visual / vision_tower and "mtp." tensors, and when conv1d is still [C,1,K]
     * moves it and adds 1 to the five norms itself: tq-convert keeps those as the source). */
    [TQ_FAM_QWEN3_5] = {.id = TQ_FAM_QWEN3_5, .name = "qwen3_5", .model_types = L("qwen3_5", "qwen3_5_text"),
                        .architectures = L("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"),
                        .source = "mlx_lm/models/qwen3_5.py", .wrapped = 1, .store = TQ_EXP_NONE,
                        .dense = TQ_DENSE_NONE,
                        .linears = L(ATTN, MLP, "linear_attn.in_proj_qkv", "linear_attn.in_proj_z",
                                     "linear_attn.in_proj_b", "linear_attn.in_proj_a", "linear_attn.out_proj"),
                        .mtp = TQ_MTP_PREFIX, .mtp_keep = 1,
                        .gguf_arch = "qwen35",
                        .decode = QWEN3_NEXT_DECODE},
    /* mlx_lm/models/qwen3_5_moe.py: qwen3_5 with every layer MoE; sanitize() splits the fused
     * mlp.experts.gate_up_proj [E, 2I, H] at row I into switch_mlp.gate_proj / up_proj and
     * renames mlp.experts.down_proj to switch_mlp.down_proj.weight. */
    [TQ_FAM_QWEN3_5_MOE] = {.id = TQ_FAM_QWEN3_5_MOE, .name = "qwen3_5_moe",
                            .model_types = L("qwen3_5_moe", "qwen3_5_moe_text"),
                            .architectures = L("Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"),
                            .source = "mlx_lm/models/qwen3_5_moe.py", .wrapped = 1, .store = TQ_EXP_FUSED,
                            QWEN_MOE, .dense = TQ_DENSE_ALL,
                            .linears = L(ATTN, QWEN_MOE_LINEARS, "linear_attn.in_proj_qkv", "linear_attn.in_proj_z",
                                         "linear_attn.in_proj_b", "linear_attn.in_proj_a", "linear_attn.out_proj"),
                            .mtp = TQ_MTP_PREFIX, .mtp_keep = 1,
                            .gguf_arch = "qwen35moe",
                            .decode = QWEN3_5_MOE_DECODE},
    /* mlx_lm/models/mixtral.py: block_sparse_moe.gate (nn.Linear router) and
     * block_sparse_moe.switch_mlp (SwitchGLU); sanitize() stacks
     * block_sparse_moe.experts.<e>.{w1,w2,w3} as switch_mlp.{gate,down,up}_proj.
     * transformers 5 holds the block as mlp (v5_block, formats/family.h): mlp.gate and
     * mlp.experts.{gate_up_proj,down_proj} fused, which tq reads too and tq-convert writes
     * back under the mlx-lm names above (mlx-lm's sanitize knows only block_sparse_moe). */
    [TQ_FAM_MIXTRAL] = {.id = TQ_FAM_MIXTRAL, .name = "mixtral", .model_types = L("mixtral"),
                        .architectures = L("MixtralForCausalLM"), .source = "mlx_lm/models/mixtral.py",
                        .store = TQ_EXP_SEPARATE, .moe_block = "block_sparse_moe", .v5_block = "mlp",
                        .hf_proj = {"w1", "w3", NULL, "w2"}, .mlx_container = "block_sparse_moe.switch_mlp",
                        .experts_key = "num_local_experts", .topk_key = "num_experts_per_tok",
                        .moe_inter_key = "intermediate_size", .dense = TQ_DENSE_ALL,
                        .routers = L("block_sparse_moe.gate"),
                        .linears = L(ATTN, SWITCH("block_sparse_moe.switch_mlp"), "block_sparse_moe.gate"),
                        .gguf_arch = "llama",
                        .decode = {.decoder = TQ_DEC_MIXTRAL, .kinds = TQ_KIND_SLIDING, .norm_topk = 1}},
    /* mlx_lm/models/deepseek_v3.py ("kimi_k2" is remapped to it in mlx_lm/utils.py):
     * multi-head latent attention (q_proj or q_a_proj + q_a_layernorm + q_b_proj,
     * kv_a_proj_with_mqa + kv_a_layernorm, o_proj linear); sanitize() turns kv_b_proj into
     * embed_q / unembed_out (MultiLinear) and dequantizes it with affine rules if quantized,
     * so kv_b_proj stays float. mlp.gate is MoEGate (weight + e_score_correction_bias, not
     * a linear), mlp.shared_experts an MLP; dense layers before first_k_dense_replace;
     * sanitize() drops layer 61 (the MTP layer of the 61-layer release). */
    [TQ_FAM_DEEPSEEK_V3] = {.id = TQ_FAM_DEEPSEEK_V3, .name = "deepseek_v3",
                            .model_types = L("deepseek_v3", "kimi_k2"), .architectures = L("DeepseekV3ForCausalLM"),
                            .source = "mlx_lm/models/deepseek_v3.py", .store = TQ_EXP_SEPARATE, .moe_block = "mlp",
                            .hf_proj = HF_GUD, .mlx_container = "mlp.switch_mlp", .experts_key = "n_routed_experts",
                            .topk_key = "num_experts_per_tok", .moe_inter_key = "moe_intermediate_size",
                            .dense = TQ_DENSE_FIRST_K, .routers = L("mlp.gate"), .shared = "mlp.shared_experts",
                            .linears = L("self_attn.q_proj", "self_attn.q_a_proj", "self_attn.q_b_proj",
                                         "self_attn.kv_a_proj_with_mqa", "self_attn.o_proj", MLP,
                                         SWITCH("mlp.switch_mlp"), SWITCH("mlp.shared_experts")),
                            .keep_float = L("self_attn.kv_b_proj", "self_attn.embed_q", "self_attn.unembed_out"),
                            .mtp = TQ_MTP_EXTRA_LAYER, .mtp_keep = 0,
                            .gguf_arch = "deepseek2",
                            .decode = {.decoder = TQ_DEC_DEEPSEEK, .route = TQ_ROUTE_SIGMOID_GROUP, .norm_topk_key = "norm_topk_prob"}},
    /* mlx_lm/models/gpt_oss.py: biased attention linears and sinks [heads]; mlp.router
     * (nn.Linear with bias); mlp.experts (SwitchGLU with biases). sanitize() (skipped once any
     * gate_proj.weight exists) views *_blocks as uint32 (mxfp4 mode), renames *_scales, and
     * splits gate_up rows: even rows gate_proj, odd rows up_proj (biases likewise). The
     * clamped SwiGLU's alpha 1.702 and default limit 7.0 are GptOssExperts' (transformers,
     * models/gpt_oss/modeling_gpt_oss.py; config key swiglu_limit). */
    [TQ_FAM_GPT_OSS] = {.id = TQ_FAM_GPT_OSS, .name = "gpt_oss", .model_types = L("gpt_oss"),
                        .architectures = L("GptOssForCausalLM"), .source = "mlx_lm/models/gpt_oss.py",
                        .store = TQ_EXP_MXFP4, .moe_block = "mlp", .hf_proj = {NULL, NULL, "gate_up_proj", "down_proj"},
                        .mlx_container = "mlp.experts", .expert_bias = 1, .xw_fused = 1,
                        .experts_key = "num_local_experts",
                        .topk_key = "num_experts_per_tok", .moe_inter_key = "intermediate_size",
                        .dense = TQ_DENSE_ALL, .routers = L("mlp.router"),
                        .linears = L(ATTN, SWITCH("mlp.experts"), "mlp.router"),
                        .gguf_arch = "gpt-oss",
                        .decode = {.decoder = TQ_DEC_GPT_OSS, .kinds = TQ_KIND_SLIDING, .route = TQ_ROUTE_TOPK_SOFTMAX, .sinks = 1,
                                   .clamped_swiglu = 1, .swiglu_alpha = 1.702, .swiglu_limit = 7.0}},
    /* mlx_lm/models/gemma4_text.py (+ gemma4.py for the model.language_model wrapper): a layer
     * has both a dense mlp and, with enable_moe_block, router (proj linear, scale and
     * per_expert_scale vectors) and experts.switch_glu; sanitize() splits the fused
     * experts.gate_up_proj [E, 2I, H] in two halves and renames experts.down_proj. */
    [TQ_FAM_GEMMA4] = {.id = TQ_FAM_GEMMA4, .name = "gemma4", .model_types = L("gemma4", "gemma4_text"),
                       .architectures = L("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"),
                       .source = "mlx_lm/models/gemma4_text.py", .wrapped = 1, .store = TQ_EXP_FUSED, .moe_block = "",
                       .hf_proj = HF_GUD, .mlx_container = "experts.switch_glu", .experts_key = "num_experts",
                       .topk_key = "top_k_experts", .moe_inter_key = "moe_intermediate_size",
                       .dense = TQ_DENSE_ALL, .routers = L("router"),
                       .linears = L(ATTN, MLP, SWITCH("experts.switch_glu"), "router.proj"),
                       .tied_by_default = 1,
                       .gguf_arch = "gemma4",
                       /* transformers' models/gemma4/modeling_gemma4.py: the dense MLP on every
                        * layer, q/k norms, sliding layers, Gemma4TextRouter's softmax top-k
                        * renormalised (times per_expert_scale); the rest is runtime/config.c
                        * cfg_gemma4 and forward.c gemma4_layer */
                       .decode = {.decoder = TQ_DEC_GEMMA4, .kinds = TQ_KIND_SLIDING, .qk_norm = 1, .needs_inter = 1,
                                  .route = TQ_ROUTE_SOFTMAX, .norm_topk = 1}},
};

const tq_family *tq_family_get(tq_family_id id)
{
    return (unsigned)id < TQ_FAM_COUNT ? &families[id] : NULL;
}

const tq_family *tq_family_by_gguf(const char *arch)
{
    for (int i = 0; arch && i < TQ_FAM_COUNT; i++)
        if (families[i].gguf_arch && !strcmp(families[i].gguf_arch, arch))
            return &families[i];
    return NULL;
}

const char *tq_family_decodable(char *buf, size_t cap)
{
    size_t n = 0;
    if (cap)
        buf[0] = 0;
    for (int i = 0; i < TQ_FAM_COUNT; i++)
        for (const char *const *t = families[i].model_types; families[i].decode.decoder && t && **t; t++) {
            int w = snprintf(buf + n, cap > n ? cap - n : 0, "%s%s", n ? ", " : "", *t);
            if (w < 0 || (size_t)w >= (cap > n ? cap - n : 0))
                return buf; /* truncated: snprintf kept the string terminated */
            n += (size_t)w;
        }
    return buf;
}

static int in_list(const char *const *l, const char *s)
{
    for (; l && **l; l++)
        if (!strcmp(*l, s))
            return 1;
    return 0;
}

const tq_family *tq_family_by_name(const char *name)
{
    for (int i = 0; name && i < TQ_FAM_COUNT; i++)
        if (!strcmp(families[i].name, name) || in_list(families[i].model_types, name))
            return &families[i];
    return NULL;
}

const cJSON *tq_family_text_config(const cJSON *config)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(config, "text_config");
    return cJSON_IsObject(tc) ? tc : config;
}

static const char *str_key(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

const tq_family *tq_family_detect(const cJSON *config)
{
    if (!cJSON_IsObject(config))
        return NULL;
    const tq_family *f = tq_family_by_name(str_key(config, "model_type"));
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(config, "text_config");
    if (!f && cJSON_IsObject(tc))
        f = tq_family_by_name(str_key(tc, "model_type"));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(config, "architectures");
    const char *arch = cJSON_IsArray(a) && cJSON_IsString(a->child) ? a->child->valuestring : NULL;
    for (int i = 0; !f && arch && i < TQ_FAM_COUNT; i++)
        if (in_list(families[i].architectures, arch))
            f = &families[i];
    return f;
}

const cJSON *tq_family_cfg_item(const cJSON *config, const char *key)
{
    const cJSON *tc = tq_family_text_config(config);
    const cJSON *v = tc ? cJSON_GetObjectItemCaseSensitive(tc, key) : NULL;
    if ((!v || cJSON_IsNull(v)) && tc != config)
        v = cJSON_GetObjectItemCaseSensitive(config, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

int tq_family_cfg_u64(const cJSON *config, const char *key, uint64_t *out, tq_err *e)
{
    const cJSON *v = tq_family_cfg_item(config, key);
    if (!v)
        return 1;
    if (tq_json_u64(v, out) != 0)
        return tq_fail(e, TQ_EDATA, "config.json: \"%s\" must be a non-negative integer", key);
    return 0;
}

int tq_family_num_experts(const tq_family *f, const cJSON *config, uint64_t *out, tq_err *e)
{
    *out = 0;
    if (!f || f->store == TQ_EXP_NONE || !f->experts_key)
        return 0;
    return tq_family_cfg_u64(config, f->experts_key, out, e) < 0 ? -1 : 0;
}

static int cfg_or(const cJSON *config, const char *key, uint64_t dflt, uint64_t *out, tq_err *e)
{
    int rc = tq_family_cfg_u64(config, key, out, e);
    if (rc > 0)
        *out = dflt;
    return rc < 0 ? -1 : 0;
}

int tq_family_layer_is_moe(const tq_family *f, const cJSON *config, uint64_t layer, tq_err *e)
{
    uint64_t ne;
    if (!f || f->dense == TQ_DENSE_NONE)
        return 0;
    if (tq_family_num_experts(f, config, &ne, e) != 0)
        return -1;
    if (ne == 0) /* mlx-lm builds a dense MLP when the config has no experts */
        return 0;
    if (f->id == TQ_FAM_GEMMA4) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(tq_family_text_config(config), "enable_moe_block");
        return cJSON_IsTrue(v);
    }
    if (f->dense == TQ_DENSE_ALL)
        return 1;
    if (f->dense == TQ_DENSE_FIRST_K) {
        uint64_t k, freq;
        if (cfg_or(config, "first_k_dense_replace", 0, &k, e) || cfg_or(config, "moe_layer_freq", 1, &freq, e))
            return -1;
        if (freq == 0)
            return tq_fail(e, TQ_EDATA, "config.json: \"moe_layer_freq\" must be at least 1");
        return layer >= k && layer % freq == 0;
    }
    uint64_t step;
    if (cfg_or(config, "decoder_sparse_step", 1, &step, e))
        return -1;
    if (step == 0)
        return tq_fail(e, TQ_EDATA, "config.json: \"decoder_sparse_step\" must be at least 1");
    const cJSON *tc = tq_family_text_config(config);
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(tc, "mlp_only_layers");
    if (mo && !cJSON_IsArray(mo) && !cJSON_IsNull(mo))
        return tq_fail(e, TQ_EDATA, "config.json: \"mlp_only_layers\" must be a list of layer numbers");
    const cJSON *it;
    const cJSON *list = cJSON_IsArray(mo) ? mo : NULL;
    cJSON_ArrayForEach(it, list)
    {
        uint64_t v;
        if (tq_json_u64(it, &v) != 0)
            return tq_fail(e, TQ_EDATA, "config.json: \"mlp_only_layers\" holds a value that is not a layer number");
        if (v == layer)
            return 0;
    }
    return (layer + 1) % step == 0;
}

/* ------------------------------------------------------------------ names */
static const char *skip_prefix(const char *s, const char *p)
{
    size_t n = strlen(p);
    return strncmp(s, p, n) ? NULL : s + n;
}

/* "<digits>." (a canonical decimal up to 10^9: no checkpoint numbers its layers or experts
 * beyond) -> the value and the text after the dot. */
static const char *parse_index(const char *s, uint64_t *v)
{
    const char *r = tq_parse_udec(s, 1000000000, v);
    return r && *r == '.' ? r + 1 : NULL;
}

static const char *const mlx_proj[TQ_PROJ_COUNT] = {"gate_proj", "up_proj", "gate_up_proj", "down_proj"};

const char *tq_family_proj_name(int proj)
{
    return proj >= 0 && proj < TQ_PROJ_COUNT ? mlx_proj[proj] : "?";
}

/* "PROJ.SUFFIX" (one dot, nothing after) with PROJ in names[] -> proj index and suffix. */
static int proj_suffix(const char *s, const char *const *names, int *proj, const char **suffix)
{
    const char *dot = strchr(s, '.');
    if (!dot || dot == s || !dot[1] || strchr(dot + 1, '.'))
        return 0;
    for (int p = 0; p < TQ_PROJ_COUNT; p++)
        if (names[p] && strlen(names[p]) == (size_t)(dot - s) && !strncmp(s, names[p], (size_t)(dot - s))) {
            *proj = p;
            *suffix = dot + 1;
            return 1;
        }
    return 0;
}

/* rel starts with module m followed by '.' (a tensor of module m). */
static int in_module(const char *rel, const char *m)
{
    size_t n = strlen(m);
    return n && !strncmp(rel, m, n) && rel[n] == '.';
}

static const char *const roots[] = {"model.language_model.", "language_model.model.", "model."};

/* The role of R, a tensor name relative to its layer, in family f's MoE block or dense MLP
 * (o's layer fields already set). v5: R is a name under v5_block rewritten to moe_block; a
 * family with a v5_block keeps its fused experts only there. */
static void block_name(const tq_family *f, const char *r, int v5, tq_name_info *o)
{
    /* routed experts, HF forms: <B>experts. */
    if (f->store != TQ_EXP_NONE) {
        char blk[64];
        snprintf(blk, sizeof blk, "%s%sexperts.", f->moe_block, *f->moe_block ? "." : "");
        const char *x = skip_prefix(r, blk);
        if (x) {
            uint64_t ex;
            const char *y = parse_index(x, &ex);
            if (y && f->store == TQ_EXP_SEPARATE && proj_suffix(y, f->hf_proj, &o->proj, &o->suffix)) {
                o->role = TQ_ROLE_EXPERT;
                o->form = TQ_FORM_SEPARATE;
                o->expert = ex;
                return;
            }
            /* fused: the families stored so, and the per-expert families too, whose modules
             * transformers 5 holds fused in memory (MixtralExperts and the classes built on it:
             * gate_up_proj [E, 2I, H], down_proj [E, H, I]), which is what a state dict saved
             * without reverting its conversion mapping holds */
            if ((f->store == TQ_EXP_FUSED || f->store == TQ_EXP_SEPARATE || f->xw_fused) && (!f->v5_block || v5) &&
                (!strcmp(x, "gate_up_proj") || !strcmp(x, "down_proj"))) {
                o->role = TQ_ROLE_EXPERT;
                o->form = f->xw_fused ? TQ_FORM_FUSED_XW : TQ_FORM_FUSED;
                o->proj = x[0] == 'g' ? TQ_PROJ_GATE_UP : TQ_PROJ_DOWN;
                o->suffix = x + strlen(x);
                return;
            }
            if (f->store == TQ_EXP_MXFP4) {
                static const char *const sfx[3] = {"_blocks", "_scales", "_bias"};
                for (int p = TQ_PROJ_GATE_UP; p <= TQ_PROJ_DOWN; p++)
                    for (int s = 0; s < 3; s++) {
                        const char *z = skip_prefix(x, mlx_proj[p]);
                        if (z && !strcmp(z, sfx[s])) {
                            o->role = TQ_ROLE_EXPERT;
                            o->form = TQ_FORM_MXFP4;
                            o->proj = p;
                            o->suffix = z + 1;
                            return;
                        }
                    }
            }
        }
        /* MLX stacked: <container>.<proj>.<suffix> */
        char cont[96];
        snprintf(cont, sizeof cont, "%s.", f->mlx_container);
        static const char *const stacked[TQ_PROJ_COUNT] = {"gate_proj", "up_proj", NULL, "down_proj"};
        const char *s = skip_prefix(r, cont);
        if (s && proj_suffix(s, stacked, &o->proj, &o->suffix)) {
            o->role = TQ_ROLE_EXPERT;
            o->form = TQ_FORM_STACKED;
            return;
        }
        o->proj = -1;
        for (const char *const *m = f->routers; m && **m; m++)
            if (in_module(r, *m)) {
                o->role = TQ_ROLE_ROUTER;
                return;
            }
        if (f->shared_gate && in_module(r, f->shared_gate)) {
            o->role = TQ_ROLE_SHARED_GATE;
            return;
        }
        if (f->shared && in_module(r, f->shared)) {
            o->role = TQ_ROLE_SHARED;
            return;
        }
    }
    static const char *const dense[TQ_PROJ_COUNT] = {"gate_proj", "up_proj", NULL, "down_proj"};
    const char *m = skip_prefix(r, "mlp.");
    int p;
    const char *sfx;
    if (m && proj_suffix(m, dense, &p, &sfx))
        o->role = TQ_ROLE_FFN;
}

void tq_family_name(const tq_family *f, uint64_t n_layers, const char *name, tq_name_info *o)
{
    if (!f)
        f = &families[TQ_FAM_QWEN3_MOE]; /* no config: the layout tq has always read */
    memset(o, 0, sizeof *o);
    o->proj = -1;
    const char *rest = NULL;
    if (f->mtp == TQ_MTP_PREFIX && (rest = skip_prefix(name, "mtp."))) {
        o->role = TQ_ROLE_MTP;
        o->root_len = 4;
    } else {
        for (size_t i = 0; i < sizeof roots / sizeof *roots && !rest; i++)
            if ((rest = skip_prefix(name, roots[i])))
                o->root_len = strlen(roots[i]);
        if (!rest)
            return;
    }
    const char *r = skip_prefix(rest, "layers.");
    uint64_t layer;
    if (!r || !(r = parse_index(r, &layer)))
        return;
    o->has_layer = 1;
    o->layer = layer;
    o->layer_len = (size_t)(r - name);
    if (o->role == TQ_ROLE_MTP)
        return;
    if (f->mtp == TQ_MTP_EXTRA_LAYER && n_layers && layer >= n_layers) {
        o->role = TQ_ROLE_MTP;
        return;
    }
    if (f->v5_block && f->store != TQ_EXP_NONE) {
        /* transformers 5's block path (formats/family.h, v5_block): only the router and the
         * fused experts live there; anything else under it is left to the generic rules */
        const char *t = skip_prefix(r, f->v5_block);
        char buf[256];
        int n = t && *t == '.' ? snprintf(buf, sizeof buf, "%s%s", f->moe_block, t) : -1;
        if (n > 0 && (size_t)n < sizeof buf) {
            tq_name_info v = *o;
            block_name(f, buf, 1, &v);
            if (v.role == TQ_ROLE_ROUTER || (v.role == TQ_ROLE_EXPERT && v.form == TQ_FORM_FUSED)) {
                v.v5 = 1;
                v.suffix = v.role == TQ_ROLE_EXPERT ? name + strlen(name) : NULL; /* fused: no suffix */
                *o = v;
                return;
            }
        }
    }
    block_name(f, r, 0, o);
}

int tq_family_looks_like_expert(const char *name)
{
    static const char *const marks[] = {".experts.", ".switch_mlp.", ".switch_glu."};
    for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
        if (strstr(name, marks[i]) || !strncmp(name, marks[i] + 1, strlen(marks[i]) - 1))
            return 1;
    return 0;
}

static int put(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s%s", a, b);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

const char *tq_family_fused_block(const tq_family *f)
{
    return f->v5_block ? f->v5_block : f->moe_block;
}

int tq_family_v5_path(const tq_family *f, const char *rel, char *out, size_t cap)
{
    const char *t = f && f->v5_block ? skip_prefix(rel, f->moe_block) : NULL;
    return t && *t == '.' ? put(out, cap, f->v5_block, t) : -1;
}

int tq_family_mlx_name(const tq_family *f, const char *name, char *out, size_t cap)
{
    const char *r;
    tq_name_info ni;
    if (f && f->v5_block) { /* the router goes back where mlx-lm's model class has it */
        tq_family_name(f, 0, name, &ni);
        if (ni.v5 && ni.role == TQ_ROLE_ROUTER) {
            int n = snprintf(out, cap, "%.*s%s%s", (int)ni.layer_len, name, f->moe_block,
                             name + ni.layer_len + strlen(f->v5_block));
            return n < 0 || (size_t)n >= cap ? -1 : 0;
        }
    }
    if (f && f->wrapped) {
        if ((r = skip_prefix(name, "model.language_model.")))
            return put(out, cap, "language_model.model.", r);
        if ((r = skip_prefix(name, "lm_head.")))
            return put(out, cap, "language_model.lm_head.", r);
    }
    return put(out, cap, "", name);
}

int tq_family_hf_name(const tq_family *f, const char *name, char *out, size_t cap)
{
    const char *r;
    if (f && f->wrapped) {
        if ((r = skip_prefix(name, "language_model.model.")))
            return put(out, cap, "model.language_model.", r);
        if ((r = skip_prefix(name, "language_model.lm_head.")))
            return put(out, cap, "lm_head.", r);
    }
    return put(out, cap, "", name);
}

/* P relative to its layer ("self_attn.q_proj"), or NULL when P is not inside a layer. */
static const char *layer_rel(const char *P)
{
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        const char *r = skip_prefix(P, roots[i]);
        uint64_t l;
        if (r && (r = skip_prefix(r, "layers.")) && (r = parse_index(r, &l)))
            return r;
    }
    return NULL;
}

int tq_family_is_linear(const tq_family *f, const char *P)
{
    if (!strcmp(P, "lm_head") || !strcmp(P, "language_model.lm_head"))
        return 1;
    const char *rel = layer_rel(P);
    return f && rel && in_list(f->linears, rel);
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

const char *tq_family_keep_reason(const tq_family *f, const char *name)
{
    tq_name_info ni;
    tq_family_name(f, 0, name, &ni);
    if (ni.role == TQ_ROLE_ROUTER || ni.role == TQ_ROLE_SHARED_GATE)
        return "router";
    const char *rel = ni.layer_len ? name + ni.layer_len : NULL;
    for (const char *const *k = f ? f->keep_float : NULL; rel && k && **k; k++)
        if (in_module(rel, *k))
            return "reshaped by mlx-lm";
    static const struct { const char *mark, *why; } generic[] = {
        {"norm", "norm"}, {"embed", "embedding"}, {"conv1d", "conv1d"}, {"A_log", "A_log"},
        {"dt_bias", "dt_bias"}, {"sinks", "attention sinks"}, {"indexer", "indexer"},
        {"router", "router"}, {"e_score_correction_bias", "router"},
    };
    for (size_t i = 0; i < sizeof generic / sizeof *generic; i++)
        if (strstr(name, generic[i].mark))
            return generic[i].why;
    if (ends_with(name, "mlp.gate.weight") || ends_with(name, "shared_expert_gate.weight"))
        return "router";
    return NULL;
}

int tq_family_norm_is_shifted(const tq_family *f, const char *name)
{
    if (!f || !(f->transforms & TQ_FT_NORM_SHIFT))
        return 0;
    static const char *const keys[] = {".input_layernorm.weight", ".post_attention_layernorm.weight",
                                       ".q_norm.weight", ".k_norm.weight"};
    if (!strncmp(name, "mtp.", 4))
        return 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (ends_with(name, keys[i]))
            return 1;
    return !strcmp(name, "model.norm.weight") || !strcmp(name, "language_model.model.norm.weight");
}

int tq_family_slot_rank(int proj, const char *suffix)
{
    static const char *const sfx[] = {"weight", "blocks", "scales", "biases", "bias", ""};
    if (proj < 0 || proj >= TQ_PROJ_COUNT || !suffix)
        return -1;
    for (int s = 0; s < (int)(sizeof sfx / sizeof *sfx); s++)
        if (!strcmp(suffix, sfx[s]))
            return proj * 8 + s;
    return -1;
}

int tq_family_attn_kind(const tq_family *f, const cJSON *config, uint64_t layer, tq_err *e)
{
    if (!f)
        return TQ_ATTN_FULL;
    const cJSON *tc = tq_family_text_config(config);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(tc, "layer_types");
    uint64_t nl;
    /* transformers' Gemma4TextConfig.__post_init__ (models/gemma4/configuration_gemma4.py):
     * "Last layer must use full_attention", forced so whatever layer_types says */
    if (f->id == TQ_FAM_GEMMA4 && tq_family_cfg_u64(config, "num_hidden_layers", &nl, NULL) == 0 && layer + 1 == nl)
        return TQ_ATTN_FULL;
    if (cJSON_IsArray(lt)) {
        const cJSON *v = cJSON_GetArrayItem(lt, (int)(layer < 1u << 30 ? layer : 1u << 30));
        if (!cJSON_IsString(v))
            return tq_fail(e, TQ_EDATA, "config.json: \"layer_types\" has no string for layer %llu",
                           (unsigned long long)layer);
        if (!strcmp(v->valuestring, "full_attention"))
            return TQ_ATTN_FULL;
        if (!strcmp(v->valuestring, "linear_attention"))
            return TQ_ATTN_LINEAR;
        if (!strcmp(v->valuestring, "sliding_attention"))
            return TQ_ATTN_SLIDING;
        return tq_fail(e, TQ_EDATA, "config.json: layer_types[%llu] is \"%s\" (expected full_attention, "
                       "linear_attention or sliding_attention)", (unsigned long long)layer, v->valuestring);
    }
    uint64_t n;
    switch (f->id) {
    case TQ_FAM_QWEN3_NEXT:
    case TQ_FAM_QWEN3_5:
    case TQ_FAM_QWEN3_5_MOE:
        if (cfg_or(config, "full_attention_interval", 4, &n, e))
            return -1;
        if (n == 0)
            return tq_fail(e, TQ_EDATA, "config.json: \"full_attention_interval\" must be at least 1");
        return (layer + 1) % n ? TQ_ATTN_LINEAR : TQ_ATTN_FULL;
    case TQ_FAM_GPT_OSS:
        return layer % 2 ? TQ_ATTN_FULL : TQ_ATTN_SLIDING;
    case TQ_FAM_QWEN2:
    case TQ_FAM_QWEN2_MOE: {
        /* transformers' models/qwen2/configuration_qwen2.py, Qwen2Config.__post_init__: the
         * window only with use_sliding_window (default false; false in Qwen2.5-0.5B's and
         * Qwen1.5-MoE-A2.7B's config.json, which still name sliding_window 32768), then
         * sliding_attention for layers i >= max_window_layers (default 28). An explicit null
         * window means none; an absent one is left to the check (a sliding layer needs one). */
        const cJSON *u = tq_family_cfg_item(config, "use_sliding_window");
        if (u && !cJSON_IsBool(u))
            return tq_fail(e, TQ_EDATA, "config.json: \"use_sliding_window\" must be true or false");
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(tc, "sliding_window");
        if (!cJSON_IsTrue(u) || cJSON_IsNull(w))
            return TQ_ATTN_FULL;
        if (cfg_or(config, "max_window_layers", 28, &n, e))
            return -1;
        return layer >= n ? TQ_ATTN_SLIDING : TQ_ATTN_FULL;
    }
    case TQ_FAM_GEMMA4:
        /* Gemma4TextConfig.__post_init__ without layer_types: sliding_window_pattern = 6 ("by
         * default 5:1"), a constant there, not a config key */
        return (layer + 1) % 6 ? TQ_ATTN_SLIDING : TQ_ATTN_FULL;
    case TQ_FAM_MIXTRAL: {
        int rc = tq_family_cfg_u64(config, "sliding_window", &n, e);
        return rc < 0 ? -1 : rc == 0 ? TQ_ATTN_SLIDING : TQ_ATTN_FULL;
    }
    default:
        return TQ_ATTN_FULL;
    }
}
