/* formats/family_config.c — the one validation pass over a config.json: every value tq-run,
 * tq-split and tq-convert read (dimensions, head counts, expert counts, rotary settings, norm
 * epsilon, layer kinds, sliding window, quantization block) checked for type, range,
 * finiteness and consistency before any of them is used; an error names the key and value. */
#include "formats/family.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM_MAX (1ull << 24)
#define HEADS_MAX 4096ull
#define HEAD_DIM_MAX 65536ull

typedef struct ck {
    const cJSON *top; /* the config */
    const char *path;
    tq_err *e;
} ck;

static const cJSON *look(const ck *c, const char *key)
{
    return tq_family_cfg_item(c->top, key);
}

static const cJSON *in(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* "PATH: "KEY" is VALUE: WHY" with VALUE as the JSON text (cut at 40 bytes). */
static int bad(const ck *c, const char *key, const cJSON *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(const ck *c, const char *key, const cJSON *v, const char *fmt, ...)
{
    char why[160], val[48] = "?";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    /* cJSON prints a non-finite number as null: say what it is */
    char *txt = !v ? NULL
                : cJSON_IsNumber(v) && isnan(v->valuedouble) ? strdup("NaN")
                : cJSON_IsNumber(v) && isinf(v->valuedouble) ? strdup(v->valuedouble > 0 ? "Infinity" : "-Infinity")
                                                             : cJSON_PrintUnformatted(v);
    if (txt) {
        size_t n = strlen(txt);
        if (n >= sizeof val)
            snprintf(val, sizeof val, "%.36s...", txt);
        else
            memcpy(val, txt, n + 1);
        free(txt);
    }
    return tq_fail(c->e, TQ_EDATA, "%s: \"%s\" is %s: %s", c->path, key, val, why);
}

/* An integer in [lo, hi] under KEY of OBJ (NULL: looked up as look() does). Returns 1 and
 * sets *out when present, 0 when absent (*out untouched), -1 when malformed. */
static int int_at(const ck *c, const cJSON *obj, const char *key, const char *name, uint64_t lo, uint64_t hi,
                  uint64_t *out)
{
    const cJSON *v = obj ? in(obj, key) : look(c, key);
    if (!v)
        return 0;
    uint64_t x;
    if (tq_json_u64(v, &x) != 0 || x < lo || x > hi)
        return bad(c, name, v, "must be an integer in [%llu, %llu]", (unsigned long long)lo, (unsigned long long)hi);
    *out = x;
    return 1;
}

static int int_key(const ck *c, const char *key, uint64_t lo, uint64_t hi, uint64_t *out)
{
    return int_at(c, NULL, key, key, lo, hi, out);
}

/* A finite number in (lo, hi] (lo_closed: [lo, hi]) under NAME (key KEY of OBJ, or looked up
 * as look() does when OBJ is NULL). Same returns as int_at. */
static int num_at(const ck *c, const cJSON *obj, const char *key, const char *name, double lo, int lo_closed, double hi,
                  double *out)
{
    const cJSON *v = obj ? in(obj, key) : look(c, key);
    if (!v)
        return 0;
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(x) || x > hi || x < lo || (!lo_closed && x == lo))
        return bad(c, name, v, "must be a finite number in %c%g, %g]", lo_closed ? '[' : '(', lo, hi);
    *out = x;
    return 1;
}

static int bool_at(const ck *c, const cJSON *obj, const char *key, const char *name)
{
    const cJSON *v = obj ? in(obj, key) : look(c, key);
    if (v && !cJSON_IsBool(v))
        return bad(c, name, v, "must be true or false");
    return 0;
}

static int obj_at(const ck *c, const cJSON *v, const char *name)
{
    if (v && !cJSON_IsObject(v))
        return bad(c, name, v, "must be an object or null");
    return 0;
}

/* rope_scaling (or the scaling part of rope_parameters): the type and its numbers. */
static int rope_scaling(const ck *c, const cJSON *rs, const char *name)
{
    char k[96];
#define NAME(key) (snprintf(k, sizeof k, "%s.%s", name, key), k)
    const char *tkey = in(rs, "rope_type") ? "rope_type" : "type";
    const cJSON *t = in(rs, tkey);
    if (t && (!cJSON_IsString(t) || !*t->valuestring))
        return bad(c, NAME(tkey), t, "must be a non-empty string");
    const char *type = t ? t->valuestring : "default";
    double x, lo = 1, hi = 4, bf = 32, bs = 1; /* the runtime's llama3 / YaRN defaults */
    uint64_t u;
    int has_f = num_at(c, rs, "factor", NAME("factor"), 0, 0, 1e6, &x);
    if (has_f < 0)
        return -1;
    if (!has_f && (!strcmp(type, "linear") || !strcmp(type, "llama3") || !strcmp(type, "yarn") ||
                   !strcmp(type, "dynamic")))
        return bad(c, NAME(tkey), t, "needs a positive \"factor\"");
    if (int_at(c, rs, "original_max_position_embeddings", NAME("original_max_position_embeddings"), 1, 1ull << 40, &u) < 0 ||
        num_at(c, rs, "low_freq_factor", NAME("low_freq_factor"), 0, 0, 1e6, &lo) < 0 ||
        num_at(c, rs, "high_freq_factor", NAME("high_freq_factor"), 0, 0, 1e6, &hi) < 0 ||
        num_at(c, rs, "beta_fast", NAME("beta_fast"), 0, 0, 1e6, &bf) < 0 ||
        num_at(c, rs, "beta_slow", NAME("beta_slow"), 0, 0, 1e6, &bs) < 0 ||
        num_at(c, rs, "mscale", NAME("mscale"), 0, 1, 1e6, &x) < 0 ||
        num_at(c, rs, "mscale_all_dim", NAME("mscale_all_dim"), 0, 1, 1e6, &x) < 0 ||
        num_at(c, rs, "attention_factor", NAME("attention_factor"), 0, 0, 1e6, &x) < 0 ||
        bool_at(c, rs, "truncate", NAME("truncate")))
        return -1;
    if (!strcmp(type, "llama3") && !(hi > lo))
        return bad(c, NAME(in(rs, "high_freq_factor") ? "high_freq_factor" : "low_freq_factor"),
                   in(rs, "high_freq_factor") ? in(rs, "high_freq_factor") : in(rs, "low_freq_factor"),
                   "high_freq_factor %g must exceed low_freq_factor %g", hi, lo);
#undef NAME
    return 0;
}

/* The kind of every layer the family's rules give (layer_types, the family's pattern):
 * checked through tq_family_attn_kind / tq_family_layer_is_moe so both readers agree. */
static int layer_rules(const ck *c, const tq_family *f, uint64_t layers, int *any_sliding, int *any_moe)
{
    for (uint64_t l = 0; f && l < layers; l++) {
        int kind = tq_family_attn_kind(f, c->top, l, c->e), moe = tq_family_layer_is_moe(f, c->top, l, c->e);
        if (kind < 0 || moe < 0)
            return -1;
        *any_sliding |= kind == TQ_ATTN_SLIDING;
        *any_moe |= moe;
    }
    return 0;
}

static int check(const tq_family *f, const cJSON *config, tq_err *e)
{
    if (!cJSON_IsObject(config))
        return tq_fail(e, TQ_EDATA, "config.json: not a JSON object");
    ck c = {config, "config.json", e};
    ck *C = &c;
    /* what selects the family and where the keys are: a text_config that is not an object,
     * or a model_type that is not a string, was read as absent */
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(config, "text_config"), *mt;
    if (tc && !cJSON_IsNull(tc) && !cJSON_IsObject(tc))
        return bad(C, "text_config", tc, "must be an object or null");
    if ((mt = cJSON_GetObjectItemCaseSensitive(config, "model_type")) && (!cJSON_IsString(mt) || !*mt->valuestring))
        return bad(C, "model_type", mt, "must be a non-empty string");
    if ((mt = in(tc, "model_type")) && (!cJSON_IsString(mt) || !*mt->valuestring))
        return bad(C, "text_config.model_type", mt, "must be a non-empty string");
    int mla = f && f->id == TQ_FAM_DEEPSEEK_V3;
    uint64_t hidden = 0, layers = 0, heads = 0, kv = 0, hd = 0, u = 0;
    double x;
    if (int_key(C, "hidden_size", 1, DIM_MAX, &hidden) < 0 || int_key(C, "num_hidden_layers", 1, 4096, &layers) < 0 ||
        int_key(C, "num_attention_heads", 1, HEADS_MAX, &heads) < 0 || int_key(C, "vocab_size", 1, 1ull << 26, &u) < 0 ||
        int_key(C, "intermediate_size", 0, DIM_MAX, &u) < 0 ||
        int_key(C, "max_position_embeddings", 1, 1ull << 40, &u) < 0)
        return -1;
    int r = int_key(C, "num_key_value_heads", 1, HEADS_MAX, &kv);
    if (r < 0)
        return -1;
    if (r && heads && heads % kv)
        return bad(C, "num_key_value_heads", look(C, "num_key_value_heads"),
                   "must divide num_attention_heads %llu", (unsigned long long)heads);
    r = int_key(C, "head_dim", mla ? 1 : 2, HEAD_DIM_MAX, &hd);
    if (r < 0)
        return -1;
    if (r && !mla && hd % 2)
        return bad(C, "head_dim", look(C, "head_dim"), "must be even (rotary embedding turns pairs of dims)");
    if (!r && !mla && f && hidden && heads) { /* head_dim = hidden_size / num_attention_heads */
        hd = hidden / heads;
        if (hidden % heads || hd % 2 || hd == 0)
            return bad(C, "num_attention_heads", look(C, "num_attention_heads"),
                       "hidden_size %llu / num_attention_heads is not an even whole head_dim (and no head_dim given)",
                       (unsigned long long)hidden);
    }
    /* norms and the rotary embedding */
    if (num_at(C, NULL, "rms_norm_eps", "rms_norm_eps", 0, 0, 1, &x) < 0 ||
        num_at(C, NULL, "rope_theta", "rope_theta", 1, 0, 1e12, &x) < 0 ||
        num_at(C, NULL, "routed_scaling_factor", "routed_scaling_factor", 0, 0, 1e6, &x) < 0 ||
        num_at(C, NULL, "swiglu_limit", "swiglu_limit", 0, 0, 1e6, &x) < 0 ||
        bool_at(C, NULL, "tie_word_embeddings", "tie_word_embeddings") ||
        bool_at(C, NULL, "norm_topk_prob", "norm_topk_prob"))
        return -1;
    const cJSON *rs = look(C, "rope_scaling"), *rp = look(C, "rope_parameters");
    if (obj_at(C, rs, "rope_scaling") || obj_at(C, rp, "rope_parameters") ||
        (rs && rope_scaling(C, rs, "rope_scaling")) || (rp && rope_scaling(C, rp, "rope_parameters")) ||
        num_at(C, rp, "rope_theta", "rope_parameters.rope_theta", 1, 0, 1e12, &x) < 0)
        return -1;
    /* absent: 1, or 0.25 for the Qwen3-Next decoder (runtime/config.c, cfg_qwen3_next) */
    double prf = f && f->decode.decoder == TQ_DEC_QWEN3_NEXT ? 0.25 : 1;
    if (num_at(C, NULL, "partial_rotary_factor", "partial_rotary_factor", 0, 0, 1, &prf) < 0 ||
        num_at(C, rp, "partial_rotary_factor", "rope_parameters.partial_rotary_factor", 0, 0, 1, &prf) < 0)
        return -1;
    if (hd && prf < 1 && (uint64_t)((double)hd * prf) < 2)
        return bad(C, in(rp, "partial_rotary_factor") ? "rope_parameters.partial_rotary_factor" : "partial_rotary_factor",
                   in(rp, "partial_rotary_factor") ? in(rp, "partial_rotary_factor") : look(C, "partial_rotary_factor"),
                   "leaves no rotary dims of head_dim %llu", (unsigned long long)hd);
    /* layer lists and rules */
    const cJSON *lt = look(C, "layer_types");
    if (lt) {
        if (!cJSON_IsArray(lt))
            return bad(C, "layer_types", lt, "must be a list of layer kinds");
        uint64_t n = (uint64_t)cJSON_GetArraySize(lt);
        if (layers && n != layers)
            return bad(C, "layer_types", lt, "lists %llu layers, num_hidden_layers is %llu", (unsigned long long)n,
                       (unsigned long long)layers);
    }
    const cJSON *mo = look(C, "mlp_only_layers");
    if (mo && !cJSON_IsArray(mo))
        return bad(C, "mlp_only_layers", mo, "must be a list of layer numbers");
    for (const cJSON *it = mo ? mo->child : NULL; it; it = it->next)
        if (tq_json_u64(it, &u) != 0 || (layers && u >= layers))
            return bad(C, "mlp_only_layers", it, "is not a layer number below num_hidden_layers %llu",
                       (unsigned long long)layers);
    if (int_key(C, "decoder_sparse_step", 1, 4096, &u) < 0 || int_key(C, "moe_layer_freq", 1, 4096, &u) < 0 ||
        int_key(C, "first_k_dense_replace", 0, layers ? layers : 4096, &u) < 0 ||
        int_key(C, "full_attention_interval", 1, 4096, &u) < 0 ||
        int_key(C, "sliding_window_pattern", 1, 4096, &u) < 0)
        return -1;
    uint64_t window = 0;
    int has_window = int_key(C, "sliding_window", 0, 1ull << 40, &window);
    if (has_window < 0)
        return -1;
    int any_sliding = 0, any_moe = 0;
    if (layer_rules(C, f, layers, &any_sliding, &any_moe) != 0)
        return -1;
    if (any_sliding && window == 0)
        return bad(C, "sliding_window", look(C, "sliding_window"), "sliding_attention layers need a positive window");
    /* routed experts */
    uint64_t experts = 0, topk = 0;
    if (f && f->experts_key) {
        if (int_key(C, f->experts_key, 0, 1u << 16, &experts) < 0)
            return -1;
        const char *tk = f->topk_key && !look(C, f->topk_key) && look(C, "experts_per_token") ? "experts_per_token"
                                                                                                : f->topk_key;
        if (experts && tk) {
            uint64_t cap = experts < 64 ? experts : 64;
            r = int_key(C, tk, 0, 1u << 16, &topk);
            if (r < 0)
                return -1;
            if (r && (topk < 1 || topk > cap))
                return bad(C, tk, look(C, tk), "must be in [1, %llu] (%s is %llu; at most 64 per token)",
                           (unsigned long long)cap, f->experts_key, (unsigned long long)experts);
            if (!r && any_moe)
                return tq_fail(e, TQ_EDATA, "%s: missing \"%s\" (%s is %llu)", C->path, tk, f->experts_key,
                               (unsigned long long)experts);
        }
        if (experts && f->moe_inter_key && int_key(C, f->moe_inter_key, 1, DIM_MAX, &u) < 0)
            return -1;
    }
    if (int_key(C, "shared_expert_intermediate_size", 0, DIM_MAX, &u) < 0 ||
        int_key(C, "n_shared_experts", 0, 4096, &u) < 0)
        return -1;
    /* DeepSeek-V3 / Kimi-K2: multi-head latent attention and the group router */
    if (int_key(C, "kv_lora_rank", 1, DIM_MAX, &u) < 0 || int_key(C, "q_lora_rank", 0, DIM_MAX, &u) < 0 ||
        int_key(C, "qk_nope_head_dim", 1, HEAD_DIM_MAX, &u) < 0 || int_key(C, "v_head_dim", 1, HEAD_DIM_MAX, &u) < 0)
        return -1;
    r = int_key(C, "qk_rope_head_dim", 2, HEAD_DIM_MAX, &u);
    if (r < 0)
        return -1;
    if (r && u % 2)
        return bad(C, "qk_rope_head_dim", look(C, "qk_rope_head_dim"), "must be even (rotary embedding turns pairs of dims)");
    uint64_t ng = 1, tg = 1;
    int has_ng = int_key(C, "n_group", 1, 64, &ng), has_tg = int_key(C, "topk_group", 1, 64, &tg);
    if (has_ng < 0 || has_tg < 0)
        return -1;
    if (mla && experts) {
        if (experts % ng || (ng > 1 && experts / ng < 2))
            return bad(C, "n_group", look(C, "n_group"), "must divide %s %llu into groups of at least 2",
                       f->experts_key, (unsigned long long)experts);
        if (tg > ng)
            return bad(C, "topk_group", look(C, "topk_group"), "must not exceed n_group %llu", (unsigned long long)ng);
        if (topk && tg * (experts / ng) < topk)
            return bad(C, "topk_group", look(C, "topk_group"), "groups hold fewer experts than %s %llu",
                       f->topk_key, (unsigned long long)topk);
    }
    /* Qwen3-Next / Qwen3.5: Gated DeltaNet */
    uint64_t lk = 0, lv = 0;
    if (int_key(C, "linear_num_key_heads", 1, HEADS_MAX, &lk) < 0 ||
        int_key(C, "linear_num_value_heads", 1, HEADS_MAX, &lv) < 0 ||
        int_key(C, "linear_key_head_dim", 1, HEAD_DIM_MAX, &u) < 0 ||
        int_key(C, "linear_value_head_dim", 1, HEAD_DIM_MAX, &u) < 0 ||
        int_key(C, "linear_conv_kernel_dim", 1, 64, &u) < 0)
        return -1;
    if (lk && lv && lv % lk)
        return bad(C, "linear_num_value_heads", look(C, "linear_num_value_heads"),
                   "must be a multiple of linear_num_key_heads %llu", (unsigned long long)lk);
    /* the quantization block's defaults (per-module entries are checked where read) */
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization");
    const char *qn = "quantization";
    if (!cJSON_IsObject(q)) {
        q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
        qn = "quantization_config";
    }
    if (cJSON_IsObject(q)) {
        char k[64];
        snprintf(k, sizeof k, "%s.bits", qn);
        const cJSON *b = in(q, "bits");
        if (b && (tq_json_u64(b, &u) != 0 || u < 1 || u > 8))
            return bad(C, k, b, "must be an integer in [1, 8]");
        snprintf(k, sizeof k, "%s.group_size", qn);
        const cJSON *g = in(q, "group_size");
        if (g && (tq_json_u64(g, &u) != 0 || u < 1 || u > (1u << 20)))
            return bad(C, k, g, "must be an integer in [1, 1048576]");
    }
    return 0;
}

int tq_family_config_check(const tq_family *f, const cJSON *config, const char *dir, tq_err *e)
{
    if (check(f, config, e) == 0)
        return 0;
    return dir ? tq_err_prefix(e, "%s", dir) : -1;
}
