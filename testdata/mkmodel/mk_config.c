/* config.json and tokenizer_config.json as transformers / mlx-lm loaders expect them. */
#include "testdata/mkmodel/mkmodel.h"

#include <cjson/cJSON.h>

static const char *torch_dtype(tq_dtype d)
{
    return d == TQ_DT_F16 ? "float16" : d == TQ_DT_F32 ? "float32" : "bfloat16";
}

static int num(cJSON *j, const char *k, double v)
{
    return cJSON_AddNumberToObject(j, k, v) ? 0 : -1;
}

static int str(cJSON *j, const char *k, const char *v)
{
    return cJSON_AddStringToObject(j, k, v) ? 0 : -1;
}

static int boolean(cJSON *j, const char *k, int v)
{
    return cJSON_AddBoolToObject(j, k, v) ? 0 : -1;
}

/* as a string: a u64 seed does not survive a JSON double */
static int seed_str(cJSON *j, uint64_t seed)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
    return str(j, "tq_mkmodel_seed", buf);
}

static int ngram_config(const tq_mk_opts *o, cJSON *j)
{
    return str(j, "model_type", "ngram") | str(j, "prefix", o->prefix) |
           num(j, "rows", (double)o->rows) | num(j, "width", (double)o->width) |
           num(j, "bits", o->bits) | num(j, "group_size", o->group_size) |
           str(j, "torch_dtype", torch_dtype(o->dtype)) | seed_str(j, o->seed);
}


static int ints(cJSON *j, const char *k, const long *v, size_t n)
{
    cJSON *a = cJSON_AddArrayToObject(j, k);
    for (size_t i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i])))
            return -1;
    return a ? 0 : -1;
}

/* layer_types: the family's pattern written out, as Qwen3.5, gpt-oss and Gemma 4 ship it */
static int layer_types(const tq_mk_opts *o, cJSON *j)
{
    cJSON *a = cJSON_AddArrayToObject(j, "layer_types");
    for (long l = 0; a && l < o->layers; l++) {
        const char *t;
        if (o->arch == TQ_MK_GPT_OSS)
            t = l % 2 ? "full_attention" : "sliding_attention";
        else if (o->arch == TQ_MK_GEMMA4) /* 5 sliding : 1 full, the last layer full */
            t = (l + 1) % 6 && l + 1 < o->layers ? "sliding_attention" : "full_attention";
        else
            t = (l + 1) % o->full_attn_interval ? "linear_attention" : "full_attention";
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(t)))
            return -1;
    }
    return a ? 0 : -1;
}

/* The keys every HF text config of these families has. Gemma numbers its special tokens pad
 * 0, eos 1, bos 2 (Gemma 4's text_config: bos_token_id 2, eos_token_id 1, pad_token_id 0, as the
 * 26B-A4B and 31B releases' config.json have them); the others' generated tokenizer has <s> 1
 * and </s> 2 (mk_tokenizer.c). */
static int common_keys(const tq_mk_opts *o, cJSON *j)
{
    int gem = o->arch == TQ_MK_GEMMA4;
    return num(j, "hidden_size", (double)o->hidden) | num(j, "num_hidden_layers", (double)o->layers) |
           num(j, "num_attention_heads", (double)o->heads) | num(j, "num_key_value_heads", (double)o->kv_heads) |
           num(j, "vocab_size", (double)o->vocab) | num(j, "initializer_range", 0.02) |
           num(j, "attention_dropout", 0.0) | boolean(j, "use_cache", 1) | num(j, "bos_token_id", gem ? 2 : 1) |
           num(j, "eos_token_id", gem ? 1 : 2);
}

static int moe_keys(const tq_mk_opts *o, cJSON *j)
{
    return num(j, "num_experts", (double)o->experts) | num(j, "num_experts_per_tok", (double)o->top_k) |
           num(j, "moe_intermediate_size", (double)o->moe_intermediate) | boolean(j, "output_router_logits", 0) |
           num(j, "router_aux_loss_coef", 0.001);
}

/* Qwen3-Next / Qwen3.5 text keys (Qwen3-Next-80B-A3B and Qwen3.5-35B-A3B configs, scaled). */
static int hybrid_keys(const tq_mk_opts *o, cJSON *j)
{
    int bad = num(j, "head_dim", (double)o->head_dim) | str(j, "hidden_act", "silu") |
              boolean(j, "attention_bias", 0) | num(j, "rms_norm_eps", 1e-6) |
              num(j, "max_position_embeddings", 262144) | num(j, "full_attention_interval", (double)o->full_attn_interval) |
              num(j, "linear_num_key_heads", (double)o->lin_k_heads) |
              num(j, "linear_num_value_heads", (double)o->lin_v_heads) |
              num(j, "linear_key_head_dim", (double)o->lin_k_dim) | num(j, "linear_value_head_dim", (double)o->lin_v_dim) |
              num(j, "linear_conv_kernel_dim", (double)o->conv_kernel) | num(j, "partial_rotary_factor", 0.25) |
              boolean(j, "tie_word_embeddings", o->tie_embeddings);
    if (o->arch != TQ_MK_QWEN3_5)
        bad |= moe_keys(o, j) | num(j, "shared_expert_intermediate_size", (double)o->shared_inter) |
               boolean(j, "norm_topk_prob", 1);
    if (o->arch == TQ_MK_QWEN3_NEXT) {
        bad |= num(j, "rope_theta", 10000000.0) | !cJSON_AddNullToObject(j, "rope_scaling") |
               num(j, "intermediate_size", (double)o->intermediate) | num(j, "decoder_sparse_step", 1) |
               !cJSON_AddArrayToObject(j, "mlp_only_layers") | boolean(j, "use_sliding_window", 0);
        return bad;
    }
    /* Qwen3.5: explicit layer_types, gated attention output, mRoPE parameters, MTP head */
    cJSON *rp = cJSON_AddObjectToObject(j, "rope_parameters");
    long rot2 = o->head_dim / 8; /* rotary pairs: head_dim x partial_rotary_factor / 2 */
    long sec[3] = {rot2 - 2 * (rot2 * 3 / 8), rot2 * 3 / 8, rot2 * 3 / 8};
    bad |= !rp || str(rp, "rope_type", "default") | num(rp, "rope_theta", 10000000.0) |
           num(rp, "partial_rotary_factor", 0.25) | boolean(rp, "mrope_interleaved", 1) | ints(rp, "mrope_section", sec, 3);
    bad |= layer_types(o, j) | boolean(j, "attn_output_gate", 1) | num(j, "mtp_num_hidden_layers", (double)o->mtp_layers) |
           boolean(j, "mtp_use_dedicated_embeddings", 0) | str(j, "mamba_ssm_dtype", "float32");
    if (o->arch == TQ_MK_QWEN3_5)
        bad |= num(j, "intermediate_size", (double)o->intermediate);
    return bad;
}

/* DeepSeek-V3 / Kimi-K2 (their released config.json, scaled). */
static int deepseek_keys(const tq_mk_opts *o, cJSON *j)
{
    int kimi = o->arch == TQ_MK_KIMI_K2;
    int bad = common_keys(o, j) | str(j, "hidden_act", "silu") | boolean(j, "attention_bias", 0) |
              num(j, "intermediate_size", (double)o->intermediate) |
              num(j, "moe_intermediate_size", (double)o->moe_intermediate) |
              num(j, "n_routed_experts", (double)o->experts) | num(j, "n_shared_experts", (double)o->n_shared_experts) |
              num(j, "num_experts_per_tok", (double)o->top_k) | num(j, "n_group", (double)o->n_group) |
              num(j, "topk_group", (double)o->topk_group) | str(j, "topk_method", "noaux_tc") |
              str(j, "scoring_func", "sigmoid") | boolean(j, "norm_topk_prob", 1) |
              num(j, "routed_scaling_factor", kimi ? 2.827 : 2.5) |
              num(j, "first_k_dense_replace", (double)o->first_dense) | num(j, "moe_layer_freq", 1) |
              num(j, "ep_size", 1) | num(j, "aux_loss_alpha", 0.001) | boolean(j, "seq_aux", 1) |
              num(j, "kv_lora_rank", (double)o->kv_lora_rank) | num(j, "qk_nope_head_dim", (double)o->qk_nope_dim) |
              num(j, "qk_rope_head_dim", (double)o->qk_rope_dim) | num(j, "v_head_dim", (double)o->v_head_dim) |
              num(j, "num_nextn_predict_layers", (double)o->mtp_layers) | num(j, "rms_norm_eps", 1e-6) |
              num(j, "rope_theta", kimi ? 50000.0 : 10000.0) | num(j, "max_position_embeddings", kimi ? 131072 : 163840) |
              num(j, "pretraining_tp", 1) | boolean(j, "tie_word_embeddings", o->tie_embeddings);
    bad |= o->q_lora_rank ? num(j, "q_lora_rank", (double)o->q_lora_rank) : !cJSON_AddNullToObject(j, "q_lora_rank");
    cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
    bad |= !rs || str(rs, "type", "yarn") | num(rs, "factor", kimi ? 32.0 : 40.0) |
           num(rs, "original_max_position_embeddings", 4096) | num(rs, "beta_fast", 32) | num(rs, "beta_slow", 1) |
           num(rs, "mscale", 1.0) | num(rs, "mscale_all_dim", 1.0);
    return bad;
}

long tq_mk_gemma4_global_kv(const tq_mk_opts *o)
{
    return o->kv_heads / 4 > 1 ? o->kv_heads / 4 : 1;
}

static int family_config(const tq_mk_opts *o, cJSON *top)
{
    const tq_family *f = tq_mk_family(o->arch);
    cJSON *a = cJSON_AddArrayToObject(top, "architectures"); /* the family row's first class */
    int bad = !a || !cJSON_AddItemToArray(a, cJSON_CreateString(f->architectures[0]));
    bad |= str(top, "model_type", tq_mk_arch_name(o->arch)) | str(top, "torch_dtype", torch_dtype(o->dtype)) |
           str(top, "transformers_version", "4.57.1") | seed_str(top, o->seed);
    cJSON *j = top;
    if (f->wrapped) { /* the language model's keys live in text_config */
        j = cJSON_AddObjectToObject(top, "text_config");
        char mt[64];
        snprintf(mt, sizeof mt, "%s_text", tq_mk_arch_name(o->arch));
        bad |= !j || str(j, "model_type", mt) | str(j, "dtype", torch_dtype(o->dtype)) |
               boolean(top, "tie_word_embeddings", o->tie_embeddings || f->tied_by_default);
        if (bad)
            return bad;
    }
    switch (o->arch) {
    case TQ_MK_QWEN2:
    case TQ_MK_QWEN2_MOE:
        /* Qwen2.5-7B / Qwen1.5-MoE-A2.7B configs, scaled */
        bad |= common_keys(o, j) | str(j, "hidden_act", "silu") | num(j, "intermediate_size", (double)o->intermediate) |
               num(j, "rms_norm_eps", 1e-6) | num(j, "rope_theta", 1000000.0) | !cJSON_AddNullToObject(j, "rope_scaling") |
               num(j, "max_position_embeddings", 32768) | boolean(j, "use_sliding_window", 0) |
               num(j, "sliding_window", 32768) | num(j, "max_window_layers", (double)o->layers) |
               boolean(j, "tie_word_embeddings", o->tie_embeddings);
        if (o->arch == TQ_MK_QWEN2_MOE)
            bad |= moe_keys(o, j) | num(j, "shared_expert_intermediate_size", (double)o->shared_inter) |
                   boolean(j, "norm_topk_prob", 0) | num(j, "decoder_sparse_step", 1) |
                   !cJSON_AddArrayToObject(j, "mlp_only_layers");
        break;
    case TQ_MK_QWEN3_NEXT:
    case TQ_MK_QWEN3_5:
    case TQ_MK_QWEN3_5_MOE:
        bad |= common_keys(o, j) | hybrid_keys(o, j);
        break;
    case TQ_MK_MIXTRAL:
        /* Mixtral-8x7B-v0.1's config, scaled */
        bad |= common_keys(o, j) | str(j, "hidden_act", "silu") | num(j, "intermediate_size", (double)o->intermediate) |
               num(j, "num_local_experts", (double)o->experts) | num(j, "num_experts_per_tok", (double)o->top_k) |
               num(j, "rms_norm_eps", 1e-5) | num(j, "rope_theta", 1000000.0) | num(j, "max_position_embeddings", 32768) |
               !cJSON_AddNullToObject(j, "sliding_window") | boolean(j, "output_router_logits", 0) |
               num(j, "router_aux_loss_coef", 0.02) | num(j, "router_jitter_noise", 0.0) |
               boolean(j, "tie_word_embeddings", o->tie_embeddings);
        break;
    case TQ_MK_DEEPSEEK_V3:
    case TQ_MK_KIMI_K2:
        bad |= deepseek_keys(o, j);
        break;
    case TQ_MK_GPT_OSS: {
        /* gpt-oss-20b's config, scaled; the HF release's experts are MXFP4 */
        bad |= common_keys(o, j) | str(j, "hidden_act", "silu") | boolean(j, "attention_bias", 1) |
               num(j, "head_dim", (double)o->head_dim) | num(j, "intermediate_size", (double)o->intermediate) |
               num(j, "num_local_experts", (double)o->experts) | num(j, "num_experts_per_tok", (double)o->top_k) |
               num(j, "experts_per_token", (double)o->top_k) | num(j, "rms_norm_eps", 1e-5) |
               num(j, "rope_theta", 150000.0) | num(j, "sliding_window", (double)o->sliding_window) |
               num(j, "initial_context_length", 4096) | num(j, "max_position_embeddings", 131072) |
               num(j, "swiglu_limit", 7.0) | boolean(j, "output_router_logits", 0) | num(j, "router_aux_loss_coef", 0.9) |
               boolean(j, "tie_word_embeddings", o->tie_embeddings) | layer_types(o, j);
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        bad |= !rs || str(rs, "rope_type", "yarn") | num(rs, "factor", 32.0) |
               num(rs, "original_max_position_embeddings", 4096) | num(rs, "beta_fast", 32.0) |
               num(rs, "beta_slow", 1.0) | boolean(rs, "truncate", 0);
        if (!o->naming_mlx && !o->quant_bits) {
            cJSON *q = cJSON_AddObjectToObject(j, "quantization_config");
            cJSON *m = q ? cJSON_AddArrayToObject(q, "modules_to_not_convert") : NULL;
            static const char *const keep[] = {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                               "model.embed_tokens", "lm_head"};
            for (size_t i = 0; m && i < 4; i++)
                bad |= !cJSON_AddItemToArray(m, cJSON_CreateString(keep[i]));
            bad |= !m || str(q, "quant_method", "mxfp4");
        }
        break;
    }
    case TQ_MK_GEMMA4: {
        /* google/gemma-4-26B-A4B-it's text_config (config.json on the Hub), scaled: head_dim 256
         * and global_head_dim 512 (twice), num_key_value_heads 8 and num_global_key_value_heads
         * 2 (tq_mk_gemma4_global_kv), attention_k_eq_v true, layer_types 5 sliding : 1 full
         * (layer_types above; no sliding_window_pattern key), no per-layer inputs, no shared KV */
        bad |= common_keys(o, j) | str(j, "hidden_activation", "gelu_pytorch_tanh") |
               num(j, "head_dim", (double)o->head_dim) | num(j, "global_head_dim", 2.0 * (double)o->head_dim) |
               num(j, "intermediate_size", (double)o->intermediate) | boolean(j, "enable_moe_block", 1) |
               num(j, "num_experts", (double)o->experts) | num(j, "top_k_experts", (double)o->top_k) |
               num(j, "moe_intermediate_size", (double)o->moe_intermediate) | num(j, "rms_norm_eps", 1e-6) |
               num(j, "sliding_window", (double)o->sliding_window) | boolean(j, "attention_bias", 0) |
               num(j, "final_logit_softcapping", 30.0) | boolean(j, "attention_k_eq_v", 1) |
               str(j, "use_bidirectional_attention", "vision") | num(j, "pad_token_id", 0) |
               num(j, "num_global_key_value_heads", (double)tq_mk_gemma4_global_kv(o)) | num(j, "num_kv_shared_layers", 0) |
               num(j, "hidden_size_per_layer_input", 0) | num(j, "vocab_size_per_layer_input", (double)o->vocab) |
               boolean(j, "use_double_wide_mlp", 0) | num(j, "max_position_embeddings", 262144) |
               boolean(j, "tie_word_embeddings", 1) | layer_types(o, j);
        cJSON *rp = cJSON_AddObjectToObject(j, "rope_parameters");
        cJSON *fa = rp ? cJSON_AddObjectToObject(rp, "full_attention") : NULL;
        cJSON *sa = rp ? cJSON_AddObjectToObject(rp, "sliding_attention") : NULL;
        bad |= !fa || !sa || str(fa, "rope_type", "proportional") | num(fa, "rope_theta", 1000000.0) |
               num(fa, "partial_rotary_factor", 0.25) | str(sa, "rope_type", "default") | num(sa, "rope_theta", 10000.0);
        break;
    }
    default:
        bad = 1;
        break;
    }
    if (o->quant_bits) {
        cJSON *q = cJSON_AddObjectToObject(top, "quantization");
        bad |= !q || num(q, "group_size", o->group_size) || num(q, "bits", o->quant_bits);
    }
    return bad;
}

int tq_mk_config(const tq_mk_opts *o, cJSON **out, tq_err *e)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    int bad = 0;
    if (o->arch == TQ_MK_NGRAM) {
        bad = ngram_config(o, j);
        goto done;
    }
    if (o->arch != TQ_MK_LLAMA && o->arch != TQ_MK_QWEN3 && o->arch != TQ_MK_QWEN3_MOE) {
        bad = family_config(o, j);
        goto done;
    }
    cJSON *a = cJSON_AddArrayToObject(j, "architectures");
    bad |= !a || !cJSON_AddItemToArray(a, cJSON_CreateString(tq_mk_family(o->arch)->architectures[0]));
    bad |= str(j, "model_type", tq_mk_arch_name(o->arch));
    bad |= num(j, "hidden_size", (double)o->hidden);
    bad |= num(j, "num_hidden_layers", (double)o->layers);
    bad |= num(j, "num_attention_heads", (double)o->heads);
    bad |= num(j, "num_key_value_heads", (double)o->kv_heads);
    bad |= num(j, "head_dim", (double)o->head_dim);
    bad |= num(j, "vocab_size", (double)o->vocab);
    bad |= str(j, "hidden_act", "silu");
    bad |= boolean(j, "attention_bias", 0);
    bad |= num(j, "attention_dropout", 0.0);
    bad |= num(j, "initializer_range", 0.02);
    bad |= boolean(j, "tie_word_embeddings", o->tie_embeddings);
    bad |= str(j, "torch_dtype", torch_dtype(o->dtype));
    bad |= boolean(j, "use_cache", 1);
    bad |= num(j, "bos_token_id", 1);
    bad |= num(j, "eos_token_id", 2);
    bad |= !cJSON_AddNullToObject(j, "rope_scaling");
    bad |= str(j, "transformers_version", "4.51.0");
    bad |= seed_str(j, o->seed);
    if (o->arch == TQ_MK_LLAMA) {
        bad |= num(j, "intermediate_size", (double)o->intermediate);
        bad |= num(j, "rope_theta", 500000.0);
        bad |= num(j, "rms_norm_eps", 1e-5);
        bad |= num(j, "max_position_embeddings", 8192);
        bad |= boolean(j, "mlp_bias", 0);
        bad |= num(j, "pretraining_tp", 1);
    } else {
        bad |= num(j, "rope_theta", 1000000.0);
        bad |= num(j, "rms_norm_eps", 1e-6);
        bad |= num(j, "max_position_embeddings", 40960);
        bad |= boolean(j, "use_sliding_window", 0);
        bad |= !cJSON_AddNullToObject(j, "sliding_window");
        bad |= num(j, "max_window_layers", (double)o->layers);
        bad |= num(j, "intermediate_size", (double)o->intermediate);
    }
    if (o->arch == TQ_MK_QWEN3_MOE) {
        bad |= num(j, "moe_intermediate_size", (double)o->moe_intermediate);
        bad |= num(j, "num_experts", (double)o->experts);
        bad |= num(j, "num_experts_per_tok", (double)o->top_k);
        bad |= boolean(j, "norm_topk_prob", 1);
        bad |= num(j, "decoder_sparse_step", 1);
        bad |= !cJSON_AddArrayToObject(j, "mlp_only_layers");
        bad |= boolean(j, "output_router_logits", 0);
        bad |= num(j, "router_aux_loss_coef", 0.001);
        if (o->shared_expert)
            bad |= num(j, "shared_expert_intermediate_size", (double)o->intermediate);
    }
    if (o->quant_bits) {
        cJSON *q = cJSON_AddObjectToObject(j, "quantization");
        bad |= !q || num(q, "group_size", o->group_size) || num(q, "bits", o->quant_bits);
    }
done:
    if (bad) {
        cJSON_Delete(j);
        return tq_fail(e, TQ_ENOMEM, "out of memory building config.json");
    }
    *out = j;
    return 0;
}
