/* GGUF tensor names and metadata -> HuggingFace/MLX names and config.json, for the
 * architectures llama.cpp's converter writes for Llama and Qwen 2/3 (dense and MoE). */
#include "formats/formats.h"
#include "formats/gguf_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct arch_info {
    const char *gguf;          /* general.architecture */
    const char *model_type;    /* config.json model_type */
    const char *hf_class;      /* config.json architectures[0] */
    int permute_qk;            /* llama.cpp permuted Q/K rows for its RoPE layout */
} arch_info;

static const arch_info archs[] = {
    {"llama", "llama", "LlamaForCausalLM", 1},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", 0},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", 0},
    {"qwen2moe", "qwen2_moe", "Qwen2MoeForCausalLM", 0},
    {"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM", 0},
};

const tq_gguf_arch *tq_gguf_arch_find(const char *arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (arch && strcmp(archs[i].gguf, arch) == 0)
            return (const tq_gguf_arch *)&archs[i];
    return NULL;
}

int tq_gguf_arch_permutes_qk(const tq_gguf_arch *a)
{
    return a && ((const arch_info *)a)->permute_qk;
}

/* Per-layer names: GGUF "blk.N.<k>" -> HF "model.layers.N.<v>". */
static const struct { const char *gguf, *hf; } layer_map[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_exps", "mlp.switch_mlp.gate_proj"},
    {"ffn_up_exps", "mlp.switch_mlp.up_proj"},
    {"ffn_down_exps", "mlp.switch_mlp.down_proj"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
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

char *tq_gguf_hf_name(const char *gguf_name, tq_gguf_role *role)
{
    char stem[TQ_GGUF_MAX_NAME + 1], out[2 * TQ_GGUF_MAX_NAME + 64];
    const char *suffix;
    *role = TQ_GGUF_ROLE_OTHER;
    if (split_suffix(gguf_name, stem, sizeof stem, &suffix) != 0)
        return NULL;
    for (size_t i = 0; i < sizeof global_map / sizeof *global_map; i++)
        if (strcmp(stem, global_map[i].gguf) == 0) {
            snprintf(out, sizeof out, "%s.%s", global_map[i].hf, suffix);
            return strdup(out);
        }
    /* "blk.N." with N decimal, no sign, no leading zero: one HF name, one GGUF spelling. */
    if (strncmp(stem, "blk.", 4) != 0)
        return NULL;
    unsigned long layer = 0;
    int used = 4;
    while (stem[used] >= '0' && stem[used] <= '9' && used < 4 + 9)
        layer = layer * 10 + (unsigned long)(stem[used++] - '0');
    if (used == 4 || stem[used] != '.' || (stem[4] == '0' && used > 5))
        return NULL;
    used++;
    const char *rest = stem + used;
    for (size_t i = 0; i < sizeof layer_map / sizeof *layer_map; i++)
        if (strcmp(rest, layer_map[i].gguf) == 0) {
            snprintf(out, sizeof out, "model.layers.%lu.%s.%s", layer, layer_map[i].hf, suffix);
            if (strcmp(rest, "attn_q") == 0)
                *role = TQ_GGUF_ROLE_Q;
            else if (strcmp(rest, "attn_k") == 0)
                *role = TQ_GGUF_ROLE_K;
            else if (strcmp(rest, "ffn_gate_inp_shexp") == 0)
                *role = TQ_GGUF_ROLE_SHEXP_GATE;
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

cJSON *tq_gguf_config(const tq_gguf_file *f, const char *arch, uint64_t vocab, int tied, tq_err *e)
{
    cJSON *c = cJSON_CreateObject();
    if (!c) {
        tq_fail(e, TQ_ENOMEM, "out of memory building config.json");
        return NULL;
    }
    const arch_info *a = (const arch_info *)tq_gguf_arch_find(arch);
    if (a) {
        cJSON *arr = cJSON_AddArrayToObject(c, "architectures");
        cJSON_AddItemToArray(arr, cJSON_CreateString(a->hf_class));
        cJSON_AddStringToObject(c, "model_type", a->model_type);
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
    if (vocab)
        cJSON_AddNumberToObject(c, "vocab_size", (double)vocab);
    return c;
}
