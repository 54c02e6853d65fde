/* config.json → model dimensions for the reference decoder. */
#include "runtime/rt_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int get_u64(const cJSON *j, const char *key, uint64_t *out, int required, uint64_t max,
                   const char *path, tq_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return tq_fail(e, TQ_EDATA, "%s: missing \"%s\"", path, key);
        return 0;
    }
    uint64_t x;
    if (tq_json_u64(v, &x) != 0 || x > max)
        return tq_fail(e, TQ_EDATA, "%s: \"%s\" must be an integer in [0, %llu]", path, key,
                       (unsigned long long)max);
    *out = x;
    return 0;
}

static int get_f64(const cJSON *j, const char *key, double *out, const char *path, tq_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || v->valuedouble > 1e12)
        return tq_fail(e, TQ_EDATA, "%s: \"%s\" must be a positive number", path, key);
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *j, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (cJSON_IsBool(v))
        *out = cJSON_IsTrue(v);
    return 0;
}

static int get_str(const cJSON *j, const char *key, char *out, size_t cap, const char *path, tq_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v)
        return 0;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap || !*v->valuestring)
        return tq_fail(e, TQ_EDATA, "%s: \"%s\" must be a short non-empty string", path, key);
    strcpy(out, v->valuestring);
    return 0;
}

#define DIM_MAX (1ull << 24)

int rt_config_load(rt_config *c, const char *dir, cJSON **json_out, tq_err *e)
{
    memset(c, 0, sizeof *c);
    char *path = tq_path_join(dir, "config.json", e);
    if (!path)
        return -1;
    cJSON *j = NULL;
    int rc = -1;
    if (tq_json_read_file(path, 16u << 20, &j, e) != 0)
        goto out;
    if (!cJSON_IsObject(j)) {
        tq_fail(e, TQ_EDATA, "%s: not a JSON object", path);
        goto out;
    }
    /* Multimodal checkpoints keep the language model's fields in text_config. */
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "text_config");
    const cJSON *src = cJSON_IsObject(tc) ? tc : j;
    char mt[64] = "";
    if (get_str(src, "model_type", mt, sizeof mt, path, e) != 0)
        goto out;
    if (!strcmp(mt, "llama") || !strcmp(mt, "mistral"))
        c->arch = RT_LLAMA;
    else if (!strcmp(mt, "qwen3"))
        c->arch = RT_QWEN3;
    else if (!strcmp(mt, "qwen3_moe"))
        c->arch = RT_QWEN3_MOE;
    else {
        tq_fail(e, TQ_EUNSUP, "%s: model_type \"%s\" is not supported (llama, qwen3, qwen3_moe)",
                path, mt);
        goto out;
    }
    snprintf(c->arch_name, sizeof c->arch_name, "%s", mt);
    c->qk_norm = c->arch != RT_LLAMA;
    c->rope_theta = 10000.0;
    c->eps = 1e-6;
    c->sparse_step = 1;
    if (get_u64(src, "hidden_size", &c->hidden, 1, DIM_MAX, path, e) ||
        get_u64(src, "num_hidden_layers", &c->layers, 1, 4096, path, e) ||
        get_u64(src, "num_attention_heads", &c->heads, 1, 4096, path, e) ||
        get_u64(src, "vocab_size", &c->vocab, 1, 1ull << 26, path, e) ||
        get_u64(src, "intermediate_size", &c->inter, c->arch != RT_QWEN3_MOE, DIM_MAX, path, e))
        goto out;
    c->kv_heads = c->heads;
    if (get_u64(src, "num_key_value_heads", &c->kv_heads, 0, 4096, path, e))
        goto out;
    if (c->heads == 0 || c->hidden == 0 || c->layers == 0 || c->vocab == 0 || c->kv_heads == 0 ||
        c->heads % c->kv_heads) {
        tq_fail(e, TQ_EDATA, "%s: inconsistent dims (hidden %llu, layers %llu, heads %llu, kv heads %llu)",
                path, (unsigned long long)c->hidden, (unsigned long long)c->layers,
                (unsigned long long)c->heads, (unsigned long long)c->kv_heads);
        goto out;
    }
    c->head_dim = c->hidden / c->heads;
    if (get_u64(src, "head_dim", &c->head_dim, 0, 65536, path, e))
        goto out;
    if (c->head_dim == 0 || c->head_dim % 2) {
        tq_fail(e, TQ_EDATA, "%s: head_dim %llu must be even and non-zero", path,
                (unsigned long long)c->head_dim);
        goto out;
    }
    if (get_f64(src, "rope_theta", &c->rope_theta, path, e) ||
        get_f64(src, "rms_norm_eps", &c->eps, path, e))
        goto out;
    /* newer configs (Qwen3.5, and the flattened ones mlx-sniper writes) keep it in
     * rope_parameters */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(src, "rope_parameters");
    if (!cJSON_GetObjectItemCaseSensitive(src, "rope_theta") && cJSON_IsObject(rp) &&
        get_f64(rp, "rope_theta", &c->rope_theta, path, e))
        goto out;
    c->tied = 0;
    get_bool(src, "tie_word_embeddings", &c->tied);
    if (c->arch == RT_QWEN3_MOE) {
        c->norm_topk = 0;
        if (get_u64(src, "num_experts", &c->experts, 1, 1u << 16, path, e) ||
            get_u64(src, "num_experts_per_tok", &c->top_k, 1, 1u << 16, path, e) ||
            get_u64(src, "moe_intermediate_size", &c->moe_inter, 1, DIM_MAX, path, e) ||
            get_u64(src, "shared_expert_intermediate_size", &c->shared_inter, 0, DIM_MAX, path, e) ||
            get_u64(src, "decoder_sparse_step", &c->sparse_step, 0, 4096, path, e))
            goto out;
        get_bool(src, "norm_topk_prob", &c->norm_topk);
        if (c->top_k == 0 || c->experts == 0 || c->top_k > c->experts || c->moe_inter == 0 ||
            c->sparse_step == 0) {
            tq_fail(e, TQ_EDATA, "%s: inconsistent MoE dims (experts %llu, top-k %llu)", path,
                    (unsigned long long)c->experts, (unsigned long long)c->top_k);
            goto out;
        }
        c->mlp_only = calloc(c->layers, 1);
        if (!c->mlp_only) {
            tq_fail(e, TQ_ENOMEM, "out of memory");
            goto out;
        }
        const cJSON *mo = cJSON_GetObjectItemCaseSensitive(src, "mlp_only_layers");
        for (const cJSON *it = cJSON_IsArray(mo) ? mo->child : NULL; it; it = it->next) {
            uint64_t L;
            if (tq_json_u64(it, &L) != 0 || L >= c->layers) {
                tq_fail(e, TQ_EDATA, "%s: mlp_only_layers holds a bad layer index", path);
                goto out;
            }
            c->mlp_only[L] = 1;
        }
    }
    /* MLX affine defaults. */
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "quantization");
    if (!cJSON_IsObject(q))
        q = cJSON_GetObjectItemCaseSensitive(j, "quantization_config");
    c->q_bits = 4;
    c->q_group = 64;
    if (cJSON_IsObject(q)) {
        if (get_u64(q, "bits", &c->q_bits, 0, 32, path, e) ||
            get_u64(q, "group_size", &c->q_group, 0, 1u << 20, path, e))
            goto out;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "streaming");
    if (cJSON_IsObject(st)) {
        c->split = 1;
        strcpy(c->pinned_file, "pinned.safetensors");
        strcpy(c->expert_dir, "experts/");
        strcpy(c->ffn_dir, "ffn_aligned/");
        if (get_str(st, "pinned_file", c->pinned_file, sizeof c->pinned_file, path, e) ||
            get_str(st, "expert_dir", c->expert_dir, sizeof c->expert_dir, path, e) ||
            get_str(st, "ffn_dir", c->ffn_dir, sizeof c->ffn_dir, path, e))
            goto out;
        if (strstr(c->pinned_file, "..") || c->pinned_file[0] == '/' || strstr(c->expert_dir, "..") ||
            c->expert_dir[0] == '/' || strstr(c->ffn_dir, "..") || c->ffn_dir[0] == '/') {
            tq_fail(e, TQ_EDATA, "%s: streaming paths must stay inside the model directory", path);
            goto out;
        }
        uint64_t v = 0;
        if (get_u64(st, "num_layers", &v, 0, 4096, path, e))
            goto out;
        if (v && v != c->layers) {
            tq_fail(e, TQ_EDATA, "%s: streaming.num_layers %llu != num_hidden_layers %llu", path,
                    (unsigned long long)v, (unsigned long long)c->layers);
            goto out;
        }
        v = 0;
        if (get_u64(st, "num_experts", &v, 0, 1u << 16, path, e))
            goto out;
        if (v && v != c->experts) {
            tq_fail(e, TQ_EDATA, "%s: streaming.num_experts %llu != num_experts %llu", path,
                    (unsigned long long)v, (unsigned long long)c->experts);
            goto out;
        }
    }
    rc = 0;
out:
    free(path);
    if (rc == 0 && json_out)
        *json_out = j;
    else {
        cJSON_Delete(j);
        if (rc != 0) {
            free(c->mlp_only);
            c->mlp_only = NULL;
        }
    }
    return rc;
}

int rt_layer_is_moe(const rt_config *c, uint64_t l)
{
    if (c->arch != RT_QWEN3_MOE)
        return 0;
    return !c->mlp_only[l] && (l + 1) % c->sparse_step == 0;
}

void rt_config_affine(const cJSON *cfg, const char *module, uint64_t *bits, uint64_t *group,
                      const rt_config *c)
{
    *bits = c->q_bits;
    *group = c->q_group;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(cfg, "quantization");
    if (!cJSON_IsObject(q))
        q = cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config");
    const cJSON *m = cJSON_IsObject(q) ? cJSON_GetObjectItemCaseSensitive(q, module) : NULL;
    if (cJSON_IsObject(m)) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(m, "bits");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(m, "group_size");
        if (cJSON_IsNumber(b) && b->valuedouble > 0 && b->valuedouble <= 32)
            *bits = (uint64_t)b->valuedouble;
        if (cJSON_IsNumber(g) && g->valuedouble > 0 && g->valuedouble <= (1 << 20))
            *group = (uint64_t)g->valuedouble;
    }
}
