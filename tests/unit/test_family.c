/* formats/family.c: recognising a config, the dense/MoE layer rules, tensor-name analysis for
 * every expert form (HF separate, fused, MXFP4, MLX stacked), MLX root renaming, the linear
 * whitelist and never-quantize reasons; formats/mxfp4.c (both layouts, and GGUF type 39 through
 * tq_ggml_dequant) against f32 bit patterns worked out by hand from ggml's published
 * dequantize_row_mxfp4, code 8 and the extreme exponents included. */
#include "formats/family.h"
#include "formats/formats.h"
#include "tests/unit/check.h"

#include <cjson/cJSON.h>

static cJSON *cfg(const char *json)
{
    return cJSON_Parse(json);
}

static void test_detect(void)
{
    static const struct { const char *json, *family; } cases[] = {
        {"{\"model_type\":\"mistral\"}", "llama"},
        {"{\"model_type\":\"kimi_k2\"}", "deepseek_v3"},
        {"{\"model_type\":\"qwen3_5_moe\",\"text_config\":{\"model_type\":\"qwen3_5_moe_text\"}}", "qwen3_5_moe"},
        {"{\"model_type\":\"unknown_vlm\",\"text_config\":{\"model_type\":\"qwen3_5_moe_text\"}}", "qwen3_5_moe"},
        {"{\"architectures\":[\"MixtralForCausalLM\"]}", "mixtral"},
        {"{\"model_type\":\"gemma4_text\"}", "gemma4"},
        {"{\"model_type\":\"gpt_oss\"}", "gpt_oss"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cJSON *c = cfg(cases[i].json);
        const tq_family *f = tq_family_detect(c);
        CHECKF(f && !strcmp(f->name, cases[i].family), "%s", cases[i].json);
        cJSON_Delete(c);
    }
    cJSON *c = cfg("{\"model_type\":\"rwkv7\"}");
    CHECK(tq_family_detect(c) == NULL);
    CHECK(tq_family_detect(NULL) == NULL);
    cJSON_Delete(c);
}

static void test_layer_rules(void)
{
    tq_err err = {0};
    const tq_family *ds = tq_family_get(TQ_FAM_DEEPSEEK_V3), *qm = tq_family_get(TQ_FAM_QWEN3_MOE);
    cJSON *c = cfg("{\"n_routed_experts\":8,\"first_k_dense_replace\":3,\"moe_layer_freq\":2}");
    int want[8] = {0, 0, 0, 0, 1, 0, 1, 0};
    for (int l = 0; l < 8; l++)
        CHECKF(tq_family_layer_is_moe(ds, c, (uint64_t)l, &err) == want[l], "deepseek layer %d", l);
    cJSON_Delete(c);
    c = cfg("{\"num_experts\":8,\"decoder_sparse_step\":2,\"mlp_only_layers\":[3]}");
    int want2[6] = {0, 1, 0, 0, 0, 1};
    for (int l = 0; l < 6; l++)
        CHECKF(tq_family_layer_is_moe(qm, c, (uint64_t)l, &err) == want2[l], "qwen3_moe layer %d", l);
    cJSON_Delete(c);
    c = cfg("{\"num_experts\":0}"); /* mlx-lm builds dense MLPs without experts */
    CHECK(tq_family_layer_is_moe(qm, c, 0, &err) == 0);
    cJSON_Delete(c);
    c = cfg("{\"num_experts\":8,\"mlp_only_layers\":[\"x\"]}");
    CHECK(tq_family_layer_is_moe(qm, c, 0, &err) < 0 && strstr(err.msg, "mlp_only_layers"));
    cJSON_Delete(c);
    c = cfg("{\"num_experts\":-2}");
    CHECK(tq_family_layer_is_moe(qm, c, 0, &err) < 0 && strstr(err.msg, "num_experts"));
    cJSON_Delete(c);
    c = cfg("{\"text_config\":{\"num_experts\":4,\"layer_types\":[\"linear_attention\",\"bogus\"]}}");
    const tq_family *q35 = tq_family_get(TQ_FAM_QWEN3_5_MOE);
    CHECK(tq_family_layer_is_moe(q35, c, 1, &err) == 1);
    CHECK(tq_family_attn_kind(q35, c, 0, &err) == TQ_ATTN_LINEAR);
    CHECK(tq_family_attn_kind(q35, c, 1, &err) < 0 && strstr(err.msg, "layer_types[1]"));
    cJSON_Delete(c);
}

static void name(const tq_family *f, const char *n, tq_name_info *ni)
{
    tq_family_name(f, 4, n, ni);
}

static void test_names(void)
{
    tq_name_info ni;
    const tq_family *mx = tq_family_get(TQ_FAM_MIXTRAL), *q35 = tq_family_get(TQ_FAM_QWEN3_5_MOE);
    const tq_family *oss = tq_family_get(TQ_FAM_GPT_OSS), *ds = tq_family_get(TQ_FAM_DEEPSEEK_V3);
    const tq_family *g4 = tq_family_get(TQ_FAM_GEMMA4);
    name(mx, "model.layers.12.block_sparse_moe.experts.7.w3.weight", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_SEPARATE && ni.layer == 12 && ni.expert == 7 &&
          ni.proj == TQ_PROJ_UP && !strcmp(ni.suffix, "weight"));
    name(mx, "model.layers.1.block_sparse_moe.switch_mlp.down_proj.scales", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_STACKED && ni.proj == TQ_PROJ_DOWN && !strcmp(ni.suffix, "scales"));
    name(mx, "model.layers.1.block_sparse_moe.gate.weight", &ni);
    CHECK(ni.role == TQ_ROLE_ROUTER);
    name(mx, "model.layers.01.block_sparse_moe.gate.weight", &ni); /* leading zero: not a layer */
    CHECK(ni.role == TQ_ROLE_OTHER && !ni.has_layer);
    /* transformers 5 (conversion_mapping.py, "mixtral"): the router at mlp.gate and the experts
     * fused at mlp.experts; nothing else is written there, and the fused form is not spelled
     * under block_sparse_moe */
    name(mx, "model.layers.2.mlp.gate.weight", &ni);
    CHECK(ni.role == TQ_ROLE_ROUTER && ni.v5 && ni.layer == 2);
    name(mx, "model.layers.2.mlp.experts.gate_up_proj", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_FUSED && ni.proj == TQ_PROJ_GATE_UP && ni.v5 &&
          ni.suffix && !*ni.suffix);
    name(mx, "model.layers.2.mlp.experts.down_proj", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_FUSED && ni.proj == TQ_PROJ_DOWN && ni.v5);
    name(mx, "model.layers.2.mlp.experts.0.w1.weight", &ni);
    CHECK(ni.role == TQ_ROLE_OTHER);
    name(mx, "model.layers.2.block_sparse_moe.experts.gate_up_proj", &ni);
    CHECK(ni.role == TQ_ROLE_OTHER);
    name(mx, "model.layers.2.block_sparse_moe.experts.0.w1.weight", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && !ni.v5);
    char v5[64];
    CHECK(tq_family_v5_path(mx, "block_sparse_moe.gate", v5, sizeof v5) == 0 && !strcmp(v5, "mlp.gate"));
    CHECK(tq_family_v5_path(q35, "mlp.gate", v5, sizeof v5) == -1);
    CHECK(!strcmp(tq_family_fused_block(mx), "mlp") && !strcmp(tq_family_fused_block(q35), "mlp"));
    CHECK(tq_family_mlx_name(mx, "model.layers.2.mlp.gate.weight", v5, sizeof v5) == 0 &&
          !strcmp(v5, "model.layers.2.block_sparse_moe.gate.weight"));
    name(q35, "model.language_model.layers.3.mlp.experts.gate_up_proj", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_FUSED && ni.proj == TQ_PROJ_GATE_UP &&
          ni.layer_len == strlen("model.language_model.layers.3."));
    name(q35, "language_model.model.layers.3.mlp.switch_mlp.up_proj.weight", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_STACKED && ni.proj == TQ_PROJ_UP);
    name(q35, "language_model.model.layers.3.mlp.shared_expert_gate.weight", &ni);
    CHECK(ni.role == TQ_ROLE_SHARED_GATE);
    name(q35, "model.language_model.layers.3.mlp.shared_expert.up_proj.weight", &ni);
    CHECK(ni.role == TQ_ROLE_SHARED);
    name(q35, "mtp.layers.0.mlp.experts.gate_up_proj", &ni);
    CHECK(ni.role == TQ_ROLE_MTP && ni.has_layer && ni.layer == 0);
    name(oss, "model.layers.0.mlp.experts.gate_up_proj_blocks", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_MXFP4 && ni.proj == TQ_PROJ_GATE_UP && !strcmp(ni.suffix, "blocks"));
    name(oss, "model.layers.0.mlp.experts.down_proj_bias", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_MXFP4 && ni.proj == TQ_PROJ_DOWN && !strcmp(ni.suffix, "bias"));
    name(oss, "model.layers.0.mlp.experts.gate_proj.bias", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_STACKED && ni.proj == TQ_PROJ_GATE);
    name(oss, "model.layers.0.mlp.router.bias", &ni);
    CHECK(ni.role == TQ_ROLE_ROUTER);
    name(ds, "model.layers.2.mlp.gate.e_score_correction_bias", &ni);
    CHECK(ni.role == TQ_ROLE_ROUTER);
    name(ds, "model.layers.2.mlp.shared_experts.down_proj.weight", &ni);
    CHECK(ni.role == TQ_ROLE_SHARED);
    name(ds, "model.layers.0.mlp.down_proj.weight", &ni);
    CHECK(ni.role == TQ_ROLE_FFN);
    name(ds, "model.layers.4.mlp.experts.0.up_proj.weight", &ni); /* layer 4 of 4: the MTP layer */
    CHECK(ni.role == TQ_ROLE_MTP && ni.layer == 4);
    name(g4, "model.language_model.layers.0.experts.down_proj", &ni);
    CHECK(ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_FUSED && ni.proj == TQ_PROJ_DOWN);
    name(g4, "model.language_model.layers.0.router.per_expert_scale", &ni);
    CHECK(ni.role == TQ_ROLE_ROUTER);
    name(g4, "model.language_model.layers.0.mlp.gate_proj.weight", &ni);
    CHECK(ni.role == TQ_ROLE_FFN);
    CHECK(tq_family_looks_like_expert("model.layers.0.mlp.experts.3.gate_proj.weight"));
    CHECK(tq_family_looks_like_expert("layers.0.switch_glu.gate_proj.weight"));
    CHECK(!tq_family_looks_like_expert("model.layers.0.mlp.shared_experts.gate_proj.weight"));
}

static void test_mlx_names_and_rules(void)
{
    char b[256];
    const tq_family *q35 = tq_family_get(TQ_FAM_QWEN3_5_MOE), *ds = tq_family_get(TQ_FAM_DEEPSEEK_V3);
    const tq_family *qn = tq_family_get(TQ_FAM_QWEN3_NEXT), *oss = tq_family_get(TQ_FAM_GPT_OSS);
    CHECK(tq_family_mlx_name(q35, "model.language_model.layers.0.mlp.gate.weight", b, sizeof b) == 0 &&
          !strcmp(b, "language_model.model.layers.0.mlp.gate.weight"));
    CHECK(tq_family_mlx_name(q35, "lm_head.weight", b, sizeof b) == 0 && !strcmp(b, "language_model.lm_head.weight"));
    CHECK(tq_family_mlx_name(q35, "mtp.fc.weight", b, sizeof b) == 0 && !strcmp(b, "mtp.fc.weight"));
    CHECK(tq_family_hf_name(q35, "language_model.model.norm.weight", b, sizeof b) == 0 &&
          !strcmp(b, "model.language_model.norm.weight"));
    CHECK(tq_family_mlx_name(ds, "lm_head.weight", b, sizeof b) == 0 && !strcmp(b, "lm_head.weight"));
    CHECK(tq_family_mlx_name(q35, "model.language_model.x", b, 8) != 0);
    CHECK(tq_family_is_linear(q35, "language_model.model.layers.2.linear_attn.in_proj_qkv"));
    CHECK(tq_family_is_linear(q35, "language_model.lm_head"));
    CHECK(!tq_family_is_linear(q35, "language_model.model.layers.2.linear_attn.conv1d"));
    CHECK(!tq_family_is_linear(ds, "model.layers.2.self_attn.kv_b_proj"));
    CHECK(tq_family_is_linear(ds, "model.layers.2.self_attn.kv_a_proj_with_mqa"));
    CHECK(tq_family_is_linear(oss, "model.layers.2.mlp.experts.down_proj"));
    CHECK(!tq_family_is_linear(oss, "model.layers.2.self_attn.sinks"));
    CHECK(tq_family_keep_reason(ds, "model.layers.2.self_attn.kv_b_proj.weight") != NULL);
    CHECK(tq_family_keep_reason(oss, "model.layers.2.mlp.router.weight") != NULL);
    CHECK(tq_family_keep_reason(q35, "language_model.model.layers.2.mlp.gate.weight") != NULL);
    CHECK(tq_family_keep_reason(NULL, "model.layers.2.self_attn.indexer.wk.weight") != NULL);
    CHECK(tq_family_keep_reason(q35, "language_model.model.layers.2.mlp.switch_mlp.gate_proj.weight") == NULL);
    CHECK(tq_family_norm_is_shifted(qn, "model.layers.0.input_layernorm.weight"));
    CHECK(tq_family_norm_is_shifted(qn, "model.norm.weight"));
    CHECK(!tq_family_norm_is_shifted(qn, "model.layers.0.linear_attn.norm.weight"));
    CHECK(!tq_family_norm_is_shifted(qn, "mtp.layers.0.input_layernorm.weight"));
    CHECK(!tq_family_norm_is_shifted(q35, "model.norm.weight"));
    /* layer-file order: gate < up < gate_up < down; weight < blocks < scales < biases < bias */
    CHECK(tq_family_slot_rank(TQ_PROJ_GATE, "bias") < tq_family_slot_rank(TQ_PROJ_UP, "weight"));
    CHECK(tq_family_slot_rank(TQ_PROJ_GATE_UP, "") < tq_family_slot_rank(TQ_PROJ_DOWN, "weight"));
    CHECK(tq_family_slot_rank(TQ_PROJ_DOWN, "scales") < tq_family_slot_rank(TQ_PROJ_DOWN, "biases"));
    CHECK(tq_family_slot_rank(TQ_PROJ_DOWN, "codebook") < 0);
}

/* MXFP4 against ggml's dequantize_row_mxfp4 (ggml-quants.c) and its E8M0 helper
 * (ggml-impl.h), worked by hand into f32 bit patterns: level table {0,1,2,3,4,6,8,12} (codes
 * 8..15 negated, code 8 the integer 0) times 2^(e-128), built as 0x00200000 << e for e < 2 and
 * (e-1) << 23 otherwise, in one f32 multiply. */
static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_mxfp4(void)
{
    static const struct {
        unsigned nib;
        uint8_t e;
        uint32_t bits;
    } v[] = {
        {0, 127, 0x00000000},  {8, 127, 0x00000000},  /* code 8 is +0 (OCP's table says -0) */
        {8, 0, 0x00000000},    {8, 255, 0x00000000},  {1, 127, 0x3f000000}, /* 0.5 */
        {9, 127, 0xbf000000},  {7, 127, 0x40c00000},  /* 6 */
        {15, 130, 0xc2400000}, /* -48 */
        {1, 0, 0x00200000},    {1, 1, 0x00400000},    {1, 2, 0x00800000},   /* 2^-128, 2^-127, 2^-126 */
        {3, 0, 0x00600000},    /* 3 * 2^-128, subnormal */
        {7, 0, 0x01400000},    /* 12 * 2^-128 = 1.5 * 2^-125 */
        {3, 254, 0x7f400000},  /* 3 * 2^126, the largest finite */
        {4, 254, 0x7f800000},  {15, 254, 0xff800000}, /* 4 * 2^126 = 2^128: inf */
        {1, 255, 0x7f000000},  /* ggml's helper has no NaN: 2^127 */
        {2, 255, 0x7f800000},  {10, 255, 0xff800000},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        float got = tq_mxfp4_value(v[i].nib, v[i].e);
        CHECKF(f32_bits(got) == v[i].bits, "code %u e %u: 0x%08x, ggml 0x%08x", v[i].nib, v[i].e, f32_bits(got),
               v[i].bits);
        /* the same value through both block layouts: safetensors (2j, 2j+1) and GGUF (j, j+16) */
        uint8_t blk[17] = {v[i].e}, q[16] = {0};
        blk[1 + 5] = (uint8_t)(v[i].nib << 4);
        q[5] = (uint8_t)(v[i].nib << 4);
        float g[32], s[32];
        uint64_t bad = 99;
        tq_ggml_dequant(39, blk, g, 1);
        int rc = tq_mxfp4_decode(q, &v[i].e, 1, 0, s, &bad);
        CHECKF(f32_bits(g[21]) == v[i].bits && f32_bits(s[11]) == v[i].bits, "code %u e %u in a block", v[i].nib, v[i].e);
        CHECKF(f32_bits(g[0]) == 0 && f32_bits(s[0]) == 0, "code 0 e %u", v[i].e);
        int refused = v[i].e == 255 || (v[i].bits & 0x7fffffffu) == 0x7f800000u;
        CHECKF(rc == (refused ? -1 : 0) && (!refused || bad == 0), "code %u e %u: rc %d", v[i].nib, v[i].e, rc);
    }
    /* layouts: byte j holds (low, high) = elements (2j, 2j+1) or (j, j+16) */
    uint8_t blocks[32], scales[2] = {127, 130};
    for (int j = 0; j < 16; j++) {
        blocks[j] = (uint8_t)(j | (15 - j) << 4);
        blocks[16 + j] = 0x7F; /* low 15 (-6), high 7 (6) */
    }
    float out[64];
    uint64_t bad = 99;
    CHECK(tq_mxfp4_decode(blocks, scales, 2, 0, out, &bad) == 0 && bad == 99);
    for (int j = 0; j < 16; j++) {
        CHECK(out[2 * j] == tq_mxfp4_value((unsigned)j, 127) && out[2 * j + 1] == tq_mxfp4_value(15u - j, 127));
        CHECK(out[32 + 2 * j] == -48.0f && out[32 + 2 * j + 1] == 48.0f);
    }
    CHECK(tq_mxfp4_decode(blocks, scales, 1, 1, out, &bad) == 0);
    CHECK(out[1] == .5f && out[17] == -4.0f);
    /* the first refused block is named; every block is still written */
    uint8_t sc3[3] = {127, 255, 254};
    uint8_t b3[48];
    memcpy(b3, blocks, 32);
    memcpy(b3 + 32, blocks + 16, 16);
    float o3[96];
    CHECK(tq_mxfp4_decode(b3, sc3, 3, 0, o3, &bad) == -1 && bad == 1);
    CHECK(o3[0] == 0.0f && o3[32] == -INFINITY && o3[33] == INFINITY && o3[64] == -INFINITY && o3[65] == INFINITY);
}

int main(void)
{
    RUN(test_detect);
    RUN(test_layer_rules);
    RUN(test_names);
    RUN(test_mlx_names_and_rules);
    RUN(test_mxfp4);
    TEST_MAIN_END();
}
