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
    static const char *const archs[] = {"LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"};
    cJSON *a = cJSON_AddArrayToObject(j, "architectures");
    bad |= !a || !cJSON_AddItemToArray(a, cJSON_CreateString(archs[o->arch]));
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
