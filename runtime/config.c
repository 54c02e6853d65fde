/* config.json → model dimensions for the reference decoder: per family, which keys hold what,
 * each layer's token mixer and MLP kind, the rotary embedding table (default, linear, llama3,
 * YaRN) and the routing rule. Every value is checked before use; an error names the key.
 * The facts per family are in docs/runtime.md. */
#include "runtime/rt_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Keys are looked up in the text part (text_config of a multimodal checkpoint) first, then at
 * the top level. */
typedef struct cfgsrc {
    const cJSON *src, *top;
    const char *path;
} cfgsrc;

static const cJSON *item(const cfgsrc *s, const char *key)
{
    return tq_family_cfg_item(s->top, key);
}

static int u64_of(const cJSON *v, const char *key, uint64_t *out, uint64_t max, const char *path, tq_err *e)
{
    uint64_t x;
    if (tq_json_u64(v, &x) != 0 || x > max)
        return tq_fail(e, TQ_EDATA, "%s: \"%s\" must be an integer in [0, %llu]", path, key,
                       (unsigned long long)max);
    *out = x;
    return 0;
}

static int get_u64(const cfgsrc *s, const char *key, uint64_t *out, int required, uint64_t max, tq_err *e)
{
    const cJSON *v = item(s, key);
    if (!v) {
        if (required)
            return tq_fail(e, TQ_EDATA, "%s: missing \"%s\"", s->path, key);
        return 0;
    }
    return u64_of(v, key, out, max, s->path, e);
}

/* A positive number (0 < v <= 1e12; with zero_ok 0 too); absent leaves *out. */
static int num_in(const cJSON *v, const char *key, double *out, int zero_ok, const char *path, tq_err *e)
{
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 || (zero_ok && v->valuedouble == 0)) || v->valuedouble > 1e12)
        return tq_fail(e, TQ_EDATA, "%s: \"%s\" must be a %s number", path, key, zero_ok ? "non-negative" : "positive");
    *out = v->valuedouble;
    return 0;
}

static int num_of(const cJSON *v, const char *key, double *out, const char *path, tq_err *e)
{
    return num_in(v, key, out, 0, path, e);
}

static int get_f64(const cfgsrc *s, const char *key, double *out, tq_err *e)
{
    return num_of(item(s, key), key, out, s->path, e);
}

static int get_bool(const cfgsrc *s, const char *key, int *out, tq_err *e)
{
    const cJSON *v = item(s, key);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return tq_fail(e, TQ_EDATA, "%s: \"%s\" must be true or false", s->path, key);
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

/* ---------------------------------------------------------------- rotary embedding */
static double mscale_of(double factor, double m)
{
    return factor <= 1 ? 1.0 : 0.1 * m * rt_log(factor) + 1.0;
}

#define RT_PI 3.14159265358979323846

/* The rope table: inv_freq[i] = theta^(-2i/dim), changed as the scaling block says. Every
 * angle is computed in double from rt_exp/rt_log, the same bits on every platform. */
static int rope_table(rt_config *c, const cJSON *rs, uint64_t max_pos, const char *path, tq_err *e)
{
    rt_rope *r = &c->rope;
    uint64_t h = r->dim / 2;
    r->factor = 1.0;
    r->inv_freq = calloc(h ? h : 1, sizeof *r->inv_freq);
    if (!r->inv_freq)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    double lt = rt_log(c->rope_theta);
    for (uint64_t i = 0; i < h; i++)
        r->inv_freq[i] = rt_exp(-(double)(2 * i) / (double)r->dim * lt);
    char type[32] = "default";
    if (rs && !cJSON_IsObject(rs))
        return tq_fail(e, TQ_EDATA, "%s: \"rope_scaling\" must be an object or null", path);
    if (rs && (get_str(rs, "rope_type", type, sizeof type, path, e) ||
               (!cJSON_GetObjectItemCaseSensitive(rs, "rope_type") && get_str(rs, "type", type, sizeof type, path, e))))
        return -1;
    if (!strcmp(type, "default") || !strcmp(type, "mrope"))
        return 0;
    double factor = 0;
    if (num_of(cJSON_GetObjectItemCaseSensitive(rs, "factor"), "rope_scaling.factor", &factor, path, e))
        return -1;
    double orig = (double)max_pos;
    if (num_of(cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings"),
               "rope_scaling.original_max_position_embeddings", &orig, path, e))
        return -1;
    if (!strcmp(type, "linear")) {
        for (uint64_t i = 0; i < h; i++)
            r->inv_freq[i] /= factor;
        return 0;
    }
    if (!strcmp(type, "llama3")) {
        double lo = 1.0, hi = 4.0;
        if (num_of(cJSON_GetObjectItemCaseSensitive(rs, "low_freq_factor"), "rope_scaling.low_freq_factor", &lo, path, e) ||
            num_of(cJSON_GetObjectItemCaseSensitive(rs, "high_freq_factor"), "rope_scaling.high_freq_factor", &hi, path, e))
            return -1;
        double low_wl = orig / lo, high_wl = orig / hi;
        for (uint64_t i = 0; i < h; i++) {
            double inv = r->inv_freq[i], wl = 2 * RT_PI / inv;
            if (wl > low_wl) {
                r->inv_freq[i] = inv / factor;
            } else if (!(wl < high_wl)) { /* between the two: blend */
                double sm = (orig / wl - lo) / (hi - lo);
                r->inv_freq[i] = (1 - sm) * inv / factor + sm * inv;
            }
        }
        return 0;
    }
    if (strcmp(type, "yarn"))
        return tq_fail(e, TQ_EUNSUP, "%s: rope_scaling type \"%s\" is not supported (default, linear, llama3, yarn)",
                       path, type);
    double beta_fast = 32, beta_slow = 1, ms = 0, ms_all = 0, af = 0;
    int truncate = 1;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "truncate");
    if (t && !cJSON_IsBool(t))
        return tq_fail(e, TQ_EDATA, "%s: rope_scaling.truncate must be true or false", path);
    if (t)
        truncate = cJSON_IsTrue(t);
    if (num_of(cJSON_GetObjectItemCaseSensitive(rs, "beta_fast"), "rope_scaling.beta_fast", &beta_fast, path, e) ||
        num_of(cJSON_GetObjectItemCaseSensitive(rs, "beta_slow"), "rope_scaling.beta_slow", &beta_slow, path, e) ||
        num_in(cJSON_GetObjectItemCaseSensitive(rs, "mscale"), "rope_scaling.mscale", &ms, 1, path, e) ||
        num_in(cJSON_GetObjectItemCaseSensitive(rs, "mscale_all_dim"), "rope_scaling.mscale_all_dim", &ms_all, 1, path, e) ||
        num_of(cJSON_GetObjectItemCaseSensitive(rs, "attention_factor"), "rope_scaling.attention_factor", &af, path, e))
        return -1;
    if (af > 0)
        r->factor = af;
    else if (ms > 0 && ms_all > 0)
        r->factor = mscale_of(factor, ms) / mscale_of(factor, ms_all);
    else
        r->factor = mscale_of(factor, 1.0);
    /* the dims whose wavelength fits beta_fast (resp. beta_slow) turns in the original
     * context bound the blend between extrapolated and interpolated frequencies */
    double dim = (double)r->dim, lb = 2 * lt;
    double low = dim * rt_log(orig / (beta_fast * 2 * RT_PI)) / lb;
    double high = dim * rt_log(orig / (beta_slow * 2 * RT_PI)) / lb;
    if (truncate) {
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0)
        low = 0;
    if (high > dim - 1)
        high = dim - 1;
    if (low == high)
        high += 0.001;
    for (uint64_t i = 0; i < h; i++) {
        double ramp = ((double)i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double extra = r->inv_freq[i], inter = extra / factor;
        r->inv_freq[i] = inter * ramp + extra * (1 - ramp);
    }
    return 0;
}

/* ---------------------------------------------------------------- per family */
/* Each layer's mixer and MLP kind from the family table (layer_types, full_attention_interval,
 * sliding_window, decoder_sparse_step, mlp_only_layers, first_k_dense_replace,
 * moe_layer_freq); a layer kind the family's decoder does not run (its row's decode.kinds) is
 * refused by name. */
static int layer_kinds(rt_config *c, const tq_family *f, const cJSON *j, const char *dir, const char *path, tq_err *e)
{
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(tq_family_text_config(j), "mlp_only_layers");
    for (const cJSON *it = cJSON_IsArray(mo) ? mo->child : NULL; it; it = it->next) {
        uint64_t L;
        if (tq_json_u64(it, &L) != 0 || L >= c->layers)
            return tq_fail(e, TQ_EDATA, "%s: mlp_only_layers holds a bad layer index", path);
    }
    for (uint64_t l = 0; l < c->layers; l++) {
        int kind = tq_family_attn_kind(f, j, l, e), moe = tq_family_layer_is_moe(f, j, l, e);
        if (kind < 0 || moe < 0) /* family.c names "config.json: KEY" */
            return tq_err_prefix(e, "%s", dir);
        if ((kind == TQ_ATTN_LINEAR && !(f->decode.kinds & TQ_KIND_LINEAR)) ||
            (kind == TQ_ATTN_SLIDING && !(f->decode.kinds & TQ_KIND_SLIDING)))
            return tq_fail(e, TQ_EDATA, "%s: layer %llu is %s, a layer type %s does not have", path,
                           (unsigned long long)l, kind == TQ_ATTN_LINEAR ? "linear_attention" : "sliding_attention",
                           c->arch_name);
        c->mixer[l] = c->arch == RT_DEEPSEEK        ? RT_MIX_MLA
                      : kind == TQ_ATTN_LINEAR      ? RT_MIX_LINEAR
                      : kind == TQ_ATTN_SLIDING     ? RT_MIX_SLIDING
                                                    : RT_MIX_FULL;
        c->moe[l] = (unsigned char)moe;
    }
    return 0;
}

/* Routed experts per layer, experts per token, expert width: under the family's keys. */
static int moe_common(rt_config *c, const tq_family *f, const cfgsrc *s, tq_err *e)
{
    /* gpt-oss configs also spell experts per token "experts_per_token" (GGUF-derived ones only so) */
    const char *topk_key = !item(s, f->topk_key) && item(s, "experts_per_token") ? "experts_per_token" : f->topk_key;
    if (get_u64(s, f->experts_key, &c->experts, 1, 1u << 16, e) || get_u64(s, topk_key, &c->top_k, 1, 1u << 16, e) ||
        get_u64(s, f->moe_inter_key, &c->moe_inter, 1, DIM_MAX, e))
        return -1;
    return 0; /* ranges and top-k <= experts: tq_family_config_check */
}

/* DeepSeek-V3 / Kimi-K2: MLA dims, the sigmoid group router, the YaRN-scaled softmax scale. */
static int cfg_deepseek(rt_config *c, const cfgsrc *s, const cJSON *rs, tq_err *e)
{
    if (get_u64(s, "kv_lora_rank", &c->kv_lora, 1, DIM_MAX, e) || get_u64(s, "q_lora_rank", &c->q_lora, 0, DIM_MAX, e) ||
        get_u64(s, "qk_nope_head_dim", &c->qk_nope, 1, 65536, e) ||
        get_u64(s, "qk_rope_head_dim", &c->qk_rope, 1, 65536, e) || get_u64(s, "v_head_dim", &c->v_head, 1, 65536, e))
        return -1;
    c->head_dim = c->qk_nope + c->qk_rope;
    c->rope.dim = c->qk_rope;
    c->rope.interleaved = 1;
    if (c->experts) { /* the route and norm_topk_prob: the family row */
        uint64_t n_shared = 0;
        c->n_group = c->topk_group = 1;
        if (get_u64(s, "n_shared_experts", &n_shared, 0, 4096, e) ||
            get_f64(s, "routed_scaling_factor", &c->route_scale, e) || get_u64(s, "n_group", &c->n_group, 0, 4096, e) ||
            get_u64(s, "topk_group", &c->topk_group, 0, 4096, e))
            return -1;
        char method[32] = "noaux_tc", scoring[32] = "sigmoid";
        if (get_str(s->src, "topk_method", method, sizeof method, s->path, e) ||
            get_str(s->src, "scoring_func", scoring, sizeof scoring, s->path, e))
            return -1;
        if (strcmp(method, "noaux_tc") || strcmp(scoring, "sigmoid"))
            return tq_fail(e, TQ_EUNSUP, "%s: topk_method \"%s\" with scoring_func \"%s\" is not supported (noaux_tc, sigmoid)",
                           s->path, method, scoring);
        c->shared_inter = n_shared * c->moe_inter;
    }
    /* the softmax scale grows with the YaRN mscale of all dims, squared */
    c->att_scale = 1.0 / sqrt((double)c->head_dim);
    if (rs) {
        double factor = 0, ms_all = 0;
        if (num_of(cJSON_GetObjectItemCaseSensitive(rs, "factor"), "rope_scaling.factor", &factor, s->path, e) ||
            num_in(cJSON_GetObjectItemCaseSensitive(rs, "mscale_all_dim"), "rope_scaling.mscale_all_dim", &ms_all, 1,
                   s->path, e))
            return -1;
        if (ms_all > 0 && factor > 0) {
            double m = mscale_of(factor, ms_all);
            c->att_scale *= m * m;
        }
    }
    return 0;
}

/* Qwen3-Next / Qwen3.5: Gated DeltaNet dims, partial rotary (q/k norms, the attention gate and
 * the MoE keys: the family row). */
static int cfg_qwen3_next(rt_config *c, const cfgsrc *s, tq_err *e)
{
    if (get_u64(s, "linear_num_key_heads", &c->lk_heads, 1, 4096, e) ||
        get_u64(s, "linear_num_value_heads", &c->lv_heads, 1, 4096, e) ||
        get_u64(s, "linear_key_head_dim", &c->lk_dim, 1, 65536, e) ||
        get_u64(s, "linear_value_head_dim", &c->lv_dim, 1, 65536, e) ||
        get_u64(s, "linear_conv_kernel_dim", &c->conv_k, 1, 64, e))
        return -1;
    /* partial rotary: a top-level key (qwen3_next) or inside rope_parameters (qwen3_5); absent,
     * 0.25: transformers' Qwen3NextConfig.__post_init__ (models/qwen3_next/configuration_qwen3_next.py,
     * kwargs.setdefault("partial_rotary_factor", 0.25)), which Qwen3_5TextConfig and
     * Qwen3_5MoeTextConfig inherit */
    double prf = 0.25;
    const cJSON *rp = item(s, "rope_parameters");
    if (rp && !cJSON_IsObject(rp))
        return tq_fail(e, TQ_EDATA, "%s: \"rope_parameters\" must be an object", s->path);
    if (get_f64(s, "partial_rotary_factor", &prf, e) ||
        num_of(cJSON_GetObjectItemCaseSensitive(rp, "partial_rotary_factor"), "rope_parameters.partial_rotary_factor",
               &prf, s->path, e))
        return -1;
    c->rope.dim = (uint64_t)((double)c->head_dim * prf);
    c->rope.dim -= c->rope.dim % 2; /* at least 2: tq_family_config_check */
    return 0;
}

/* Gemma 4's text model as transformers' models/gemma4/modeling_gemma4.py runs it (with the
 * defaults of configuration_gemma4.py, Gemma4TextConfig, for absent keys):
 * - Gemma4TextAttention: head_dim on sliding layers, global_head_dim (default 512) on full
 *   ones; with attention_k_eq_v the full layers have no v_proj (value = key projection) and
 *   num_global_key_value_heads key heads (absent or null: num_key_value_heads, as mlx-lm's
 *   gemma4_text.py Attention does); self.scaling = 1.0 (q_norm and k_norm carry the scale);
 * - Gemma4TextRotaryEmbedding: rope_parameters per layer type; sliding "default" (theta,
 *   head_dim), full "proportional" (_compute_proportional_rope_parameters in
 *   modeling_rope_utils.py: the first int(partial_rotary_factor · D // 2) of the D/2 pairs at
 *   theta^(-2i/D) with D = global_head_dim, the other pairs not turned, all divided by
 *   "factor") or "default" (only when global_head_dim is head_dim: compute_default_rope_parameters
 *   sizes it by head_dim);
 * - Gemma4ForCausalLM.forward: final_logit_softcapping (absent or null: none);
 * - hidden_activation gelu_pytorch_tanh (Gemma4TextMLP, the experts).
 * What tq does not run is refused by name: per-layer embeddings (hidden_size_per_layer_input,
 * default 256: Gemma 4 E2B/E4B), shared KV layers (num_kv_shared_layers), bidirectional
 * attention "all". */
static int cfg_gemma4(rt_config *c, const cfgsrc *s, tq_err *e)
{
    uint64_t ple = 256, shared = 0;
    if (get_u64(s, "hidden_size_per_layer_input", &ple, 0, DIM_MAX, e) ||
        get_u64(s, "num_kv_shared_layers", &shared, 0, 4096, e))
        return -1;
    if (ple)
        return tq_fail(e, TQ_EUNSUP, "%s: hidden_size_per_layer_input is %llu%s: per-layer embeddings (Gemma 4 E2B, E4B) "
                       "are not supported", s->path, (unsigned long long)ple, item(s, "hidden_size_per_layer_input") ? "" :
                       " (absent: Gemma4TextConfig's default)");
    if (shared)
        return tq_fail(e, TQ_EUNSUP, "%s: num_kv_shared_layers is %llu: layers sharing another layer's keys and values "
                       "are not supported", s->path, (unsigned long long)shared);
    char act[32] = "gelu_pytorch_tanh", bidi[16] = "";
    if (get_str(s->src, "hidden_activation", act, sizeof act, s->path, e))
        return -1;
    const cJSON *b = item(s, "use_bidirectional_attention");
    if (cJSON_IsString(b))
        snprintf(bidi, sizeof bidi, "%s", b->valuestring);
    if (strcmp(act, "gelu_pytorch_tanh"))
        return tq_fail(e, TQ_EUNSUP, "%s: hidden_activation \"%s\" is not supported (gelu_pytorch_tanh)", s->path, act);
    if (!strcmp(bidi, "all"))
        return tq_fail(e, TQ_EUNSUP, "%s: use_bidirectional_attention \"all\" (no causal mask) is not supported", s->path);
    c->gelu = 1;
    c->qk_norm = 1;
    c->att_scale = 1.0;
    c->norm_topk = 1; /* Gemma4TextRouter: top-k probabilities divided by their sum */
    c->window = 512;  /* Gemma4TextConfig.sliding_window; the config's value replaces it */
    c->g_head_dim = 512;
    c->g_kv_heads = c->kv_heads;
    /* "global_head_dim": null is not the default 512: the config class keeps None, and
     * Gemma4TextAttention takes `config.global_head_dim if not self.is_sliding and
     * config.global_head_dim else config.head_dim`, so null (like 0) means head_dim */
    int g_null = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(s->src, "global_head_dim"));
    if (get_u64(s, "global_head_dim", &c->g_head_dim, 0, 65536, e) || get_bool(s, "attention_k_eq_v", &c->k_eq_v, e) ||
        (c->k_eq_v && get_u64(s, "num_global_key_value_heads", &c->g_kv_heads, 0, 4096, e)))
        return -1;
    if (g_null)
        c->g_head_dim = 0;
    int g_falsy = c->g_head_dim == 0;
    if (g_falsy) /* falsy: the full layers use head_dim */
        c->g_head_dim = c->head_dim;
    if (c->g_head_dim % 2 || c->g_kv_heads == 0 || c->heads % c->g_kv_heads)
        return tq_fail(e, TQ_EDATA, "%s: global_head_dim %llu must be even and num_global_key_value_heads %llu divide "
                       "num_attention_heads %llu", s->path, (unsigned long long)c->g_head_dim,
                       (unsigned long long)c->g_kv_heads, (unsigned long long)c->heads);
    const cJSON *fs = item(s, "final_logit_softcapping");
    if (fs && !cJSON_IsNull(fs) && num_of(fs, "final_logit_softcapping", &c->softcap, s->path, e))
        return -1;
    /* rope_parameters: {"sliding_attention": {...}, "full_attention": {...}}; absent: the
     * Gemma4TextConfig defaults (10000 default; 1000000 proportional with factor 0.25) */
    const cJSON *rp = item(s, "rope_parameters");
    if (rp && !cJSON_IsObject(rp))
        return tq_fail(e, TQ_EDATA, "%s: \"rope_parameters\" must be an object", s->path);
    const char *kinds[2] = {"sliding_attention", "full_attention"};
    for (int k = 0; k < 2; k++) {
        const cJSON *p = rp ? cJSON_GetObjectItemCaseSensitive(rp, kinds[k]) : NULL;
        if (rp && !cJSON_IsObject(p))
            return tq_fail(e, TQ_EDATA, "%s: \"rope_parameters.%s\" must be an object", s->path, kinds[k]);
        char type[32], key[96];
        snprintf(type, sizeof type, "%s", k ? "proportional" : "default");
        double theta = k ? 1000000.0 : 10000.0, prf = k ? 0.25 : 1.0, factor = 1.0;
        snprintf(key, sizeof key, "rope_parameters.%s.rope_theta", kinds[k]);
        if (p && (get_str(p, "rope_type", type, sizeof type, s->path, e) ||
                  num_of(cJSON_GetObjectItemCaseSensitive(p, "rope_theta"), key, &theta, s->path, e)))
            return -1;
        snprintf(key, sizeof key, "rope_parameters.%s.partial_rotary_factor", kinds[k]);
        if (p && num_of(cJSON_GetObjectItemCaseSensitive(p, "partial_rotary_factor"), key, &prf, s->path, e))
            return -1;
        snprintf(key, sizeof key, "rope_parameters.%s.factor", kinds[k]);
        if (p && num_of(cJSON_GetObjectItemCaseSensitive(p, "factor"), key, &factor, s->path, e))
            return -1;
        int prop = !strcmp(type, "proportional");
        if ((strcmp(type, "default") && !prop) || (prop && !k))
            return tq_fail(e, TQ_EUNSUP, "%s: rope_parameters.%s.rope_type \"%s\" is not supported (%s)", s->path,
                           kinds[k], type, k ? "proportional, default" : "default");
        if (!k) {
            c->rope_theta = theta; /* rope_table (below) builds the sliding layers' table */
            continue;
        }
        if (!prop && c->g_head_dim != c->head_dim)
            return tq_fail(e, TQ_EDATA, "%s: rope_parameters.full_attention.rope_type \"default\" sizes the rotation by "
                           "head_dim %llu, but full_attention layers have global_head_dim %llu", s->path,
                           (unsigned long long)c->head_dim, (unsigned long long)c->g_head_dim);
        /* _compute_proportional_rope_parameters (modeling_rope_utils.py) with head_dim_key
         * "global_head_dim": `getattr(config, head_dim_key, None) or hidden_size //
         * num_attention_heads`, so a falsy global_head_dim sizes the rotation by hidden / heads;
         * cos and sin of that length cannot multiply heads of head_dim unless the two agree */
        if (prop && g_falsy && c->hidden / c->heads != c->head_dim)
            return tq_fail(e, TQ_EDATA, "%s: global_head_dim is %s, so full_attention layers have head_dim %llu, but their "
                           "proportional rotation is sized by hidden_size / num_attention_heads = %llu (transformers' "
                           "_compute_proportional_rope_parameters): the two must agree", s->path,
                           g_null ? "null" : "0", (unsigned long long)c->head_dim,
                           (unsigned long long)(c->hidden / c->heads));
        rt_rope *r = &c->rope_full;
        uint64_t D = c->g_head_dim, h = D / 2;
        uint64_t turned = prop ? (uint64_t)(prf * (double)D / 2) : h; /* int(prf * D // 2) */
        if (turned > h)
            turned = h;
        r->dim = D;
        r->factor = 1.0;
        r->inv_freq = calloc(h ? h : 1, sizeof *r->inv_freq);
        if (!r->inv_freq)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        double lt = rt_log(theta);
        for (uint64_t i = 0; i < turned; i++) /* the rest stay 0: angle 0, cos 1, sin 0 */
            r->inv_freq[i] = rt_exp(-(double)(2 * i) / (double)D * lt) / (prop ? factor : 1.0);
    }
    return 0;
}

/* The decoder of a table family (formats/family.h, the row's decode.decoder); -1: not decoded. */
static int arch_of(const tq_family *f)
{
    return f && f->decode.decoder != TQ_DEC_NONE ? (int)f->decode.decoder : -1;
}

int tq_run_decodes(const cJSON *config)
{
    return arch_of(tq_family_detect(config)) >= 0;
}

const char *tq_run_decodable(char *buf, size_t cap)
{
    return tq_family_decodable(buf, cap);
}

int tq_run_decode_warning(const cJSON *config, char *buf, size_t cap)
{
    if (cap)
        buf[0] = 0;
    if (config && tq_run_decodes(config))
        return 0;
    const cJSON *mt = tq_family_cfg_item(config, "model_type"), *a = cJSON_GetObjectItemCaseSensitive(config, "architectures");
    const char *what = "model_type", *name = cJSON_IsString(mt) ? mt->valuestring : NULL;
    if (!name && cJSON_IsArray(a) && cJSON_IsString(a->child)) {
        what = "architectures[0]";
        name = a->child->valuestring;
    }
    char can[512];
    tq_run_decodable(can, sizeof can);
    if (!config)
        snprintf(buf, cap, "tq-run cannot decode it: there is no config.json (tq-run decodes %s)", can);
    else if (!name)
        snprintf(buf, cap, "tq-run cannot decode it: config.json names no model_type (tq-run decodes %s)", can);
    else
        snprintf(buf, cap, "tq-run cannot decode %s \"%.64s\" (tq-run decodes %s)", what, name, can);
    return 1;
}

/* The "quantization" (or "quantization_config") block: MLX affine defaults (4 bits, groups of
 * 64), TurboQuant's rotation, and the TurboQuant-MLX features tq cannot run. */
static int cfg_quantization(rt_config *c, const cJSON *j, const char *path, tq_err *e)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "quantization");
    if (!cJSON_IsObject(q))
        q = cJSON_GetObjectItemCaseSensitive(j, "quantization_config");
    c->q_bits = 4;
    c->q_group = 64;
    if (cJSON_IsObject(q)) {
        cfgsrc qs = {q, q, path};
        if (get_u64(&qs, "bits", &c->q_bits, 0, 32, e) || get_u64(&qs, "group_size", &c->q_group, 0, 1u << 20, e))
            return -1;
        /* TurboQuant's rotation, and the TurboQuant-MLX features tq cannot run */
        const cJSON *rot = cJSON_GetObjectItemCaseSensitive(q, "rotation");
        if (cJSON_IsString(rot) && !strcmp(rot->valuestring, "none"))
            c->tq_norot = 1;
        else if (rot && !cJSON_IsNull(rot) &&
                 (!cJSON_IsString(rot) || (strcmp(rot->valuestring, "hadamard") && strcmp(rot->valuestring, "blockwise_hadamard")))) {
            tq_fail(e, TQ_EUNSUP, "%s: quantization.rotation %s%s%s is not supported (hadamard, blockwise_hadamard, none)",
                    path, cJSON_IsString(rot) ? "\"" : "", cJSON_IsString(rot) ? rot->valuestring : "(not a string)",
                    cJSON_IsString(rot) ? "\"" : "");
            return -1;
        }
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "use_qjl"))) {
            tq_fail(e, TQ_EUNSUP, "%s: quantization.use_qjl is true: QJL residual correction is not supported", path);
            return -1;
        }
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "ternary_experts"))) {
            tq_fail(e, TQ_EUNSUP, "%s: quantization.ternary_experts is true: ternary (trit) experts are not supported", path);
            return -1;
        }
    }
    return 0;
}

/* The "streaming" block of a tq-split directory: its files, each inside the model directory,
 * and its layer and expert counts, which must agree with the model's. */
static int cfg_streaming(rt_config *c, const cJSON *j, const char *path, tq_err *e)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "streaming");
    if (cJSON_IsObject(st)) {
        c->split = 1;
        strcpy(c->pinned_file, "pinned.safetensors");
        strcpy(c->expert_dir, "experts/");
        strcpy(c->ffn_dir, "ffn_aligned/");
        if (get_str(st, "pinned_file", c->pinned_file, sizeof c->pinned_file, path, e) ||
            get_str(st, "expert_dir", c->expert_dir, sizeof c->expert_dir, path, e) ||
            get_str(st, "ffn_dir", c->ffn_dir, sizeof c->ffn_dir, path, e))
            return -1;
        if (strstr(c->pinned_file, "..") || c->pinned_file[0] == '/' || strstr(c->expert_dir, "..") ||
            c->expert_dir[0] == '/' || strstr(c->ffn_dir, "..") || c->ffn_dir[0] == '/') {
            tq_fail(e, TQ_EDATA, "%s: streaming paths must stay inside the model directory", path);
            return -1;
        }
        cfgsrc ss = {st, st, path};
        uint64_t v = 0;
        if (get_u64(&ss, "num_layers", &v, 0, 4096, e))
            return -1;
        if (v && v != c->layers) {
            tq_fail(e, TQ_EDATA, "%s: streaming.num_layers %llu != num_hidden_layers %llu", path,
                    (unsigned long long)v, (unsigned long long)c->layers);
            return -1;
        }
        v = 0;
        if (get_u64(&ss, "num_experts", &v, 0, 1u << 16, e))
            return -1;
        if (v && v != c->experts) {
            tq_fail(e, TQ_EDATA, "%s: streaming.num_experts %llu != num_experts %llu", path,
                    (unsigned long long)v, (unsigned long long)c->experts);
            return -1;
        }
    }
    return 0;
}

int rt_config_load(rt_config *c, const char *dir, cJSON **json_out, tq_err *e)
{
    memset(c, 0, sizeof *c);
    if (!tq_is_dir(dir)) { /* a file given for the directory: say what it is */
        uint64_t size;
        int fd = tq_open_regular(dir, &size, NULL);
        if (fd >= 0) {
            tq_content_kind k = tq_sniff_fd(fd, size);
            close(fd);
            return tq_fail(e, TQ_EDATA, "%s: %s, not a model directory (expected a model directory or a tq-split "
                           "directory)", dir, tq_content_name(k));
        }
    }
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
    /* the keys common to every family (model_type and text_config among them) first, with
     * the messages tq-split and tq-convert give; the family's own once it is known */
    if (tq_family_config_check(NULL, j, dir, e) != 0)
        goto out;
    /* Multimodal checkpoints keep the language model's fields in text_config. */
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "text_config");
    cfgsrc s = {cJSON_IsObject(tc) ? tc : j, j, path};
    char mt[64] = "";
    if (get_str(s.src, "model_type", mt, sizeof mt, path, e) != 0)
        goto out;
    if (!*mt && s.src != j && get_str(j, "model_type", mt, sizeof mt, path, e) != 0)
        goto out;
    const tq_family *fam = tq_family_detect(j);
    c->arch = arch_of(fam);
    if (c->arch < 0) {
        char can[512];
        tq_fail(e, TQ_EUNSUP, "%s: model_type \"%s\" is not supported (%s)", path, mt,
                tq_run_decodable(can, sizeof can));
        goto out;
    }
    c->fam = fam;
    if (tq_family_config_check(fam, j, dir, e) != 0) /* every value checked once, by key */
        goto out;
    snprintf(c->arch_name, sizeof c->arch_name, "%s", *mt ? mt : fam->name);
    const tq_family_decode *fd = &fam->decode; /* the family row's fields and defaults */
    c->qk_norm = fd->qk_norm;
    c->att_gate = fd->att_gate;
    c->rope_theta = 10000.0;
    c->eps = 1e-6;
    c->route = (int)fd->route;
    c->norm_topk = fd->norm_topk;
    c->route_scale = 1.0;
    c->sinks = fd->sinks;
    c->clamped_swiglu = fd->clamped_swiglu;
    c->swiglu_alpha = fd->swiglu_alpha;
    c->swiglu_limit = fd->swiglu_limit;
    uint64_t max_pos = 2048;
    int dense_only = fd->needs_inter;
    if (get_u64(&s, "hidden_size", &c->hidden, 1, DIM_MAX, e) ||
        get_u64(&s, "num_hidden_layers", &c->layers, 1, 4096, e) ||
        get_u64(&s, "num_attention_heads", &c->heads, 1, 4096, e) ||
        get_u64(&s, "vocab_size", &c->vocab, 1, 1ull << 26, e) ||
        get_u64(&s, "intermediate_size", &c->inter, dense_only, DIM_MAX, e) ||
        get_u64(&s, "max_position_embeddings", &max_pos, 0, 1ull << 40, e))
        goto out;
    if (item(&s, "max_position_embeddings"))
        c->max_pos = max_pos;
    c->kv_heads = c->heads;
    if (get_u64(&s, "num_key_value_heads", &c->kv_heads, 0, 4096, e))
        goto out;
    if (c->heads == 0 || c->hidden == 0 || c->layers == 0 || c->vocab == 0 || c->kv_heads == 0) {
        tq_fail(e, TQ_EDATA, "%s: hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads and "
                "vocab_size must be positive", path);
        goto out;
    }
    c->head_dim = c->hidden / c->heads;
    if (get_u64(&s, "head_dim", &c->head_dim, 0, 65536, e))
        goto out;
    c->tied = fam->tied_by_default; /* absent: the family's transformers default */
    c->tied_explicit = item(&s, "tie_word_embeddings") != NULL;
    if (get_f64(&s, "rope_theta", &c->rope_theta, e) || get_f64(&s, "rms_norm_eps", &c->eps, e) ||
        get_bool(&s, "tie_word_embeddings", &c->tied, e))
        goto out;
    /* newer configs (Qwen3.5, and the flattened ones mlx-sniper writes) keep the base in
     * rope_parameters */
    const cJSON *rpar = item(&s, "rope_parameters");
    if (!item(&s, "rope_theta") && cJSON_IsObject(rpar) &&
        num_of(cJSON_GetObjectItemCaseSensitive(rpar, "rope_theta"), "rope_parameters.rope_theta", &c->rope_theta, path, e))
        goto out;
    c->mixer = calloc(c->layers, 1);
    c->moe = calloc(c->layers, 1);
    if (!c->mixer || !c->moe) {
        tq_fail(e, TQ_ENOMEM, "out of memory");
        goto out;
    }
    const cJSON *rs = item(&s, "rope_scaling");
    /* transformers 5's config classes take rope_parameters in place of rope_theta and
     * rope_scaling (models/mixtral/configuration_mixtral.py: MixtralConfig(rope_parameters=...),
     * standardised to {"rope_type", "rope_theta", and the type's keys}), so a config it saves
     * carries e.g. Llama 3.1's {"rope_type": "llama3", "factor": 8.0, ...} there and no
     * rope_scaling: read as the scaling when it names a type (gemma4's per-layer-type object
     * names none and is read by cfg_gemma4) */
    const cJSON *rp5 = item(&s, "rope_parameters");
    if (!rs && cJSON_IsObject(rp5) &&
        (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rp5, "rope_type")) ||
         cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rp5, "type"))))
        rs = rp5;
    c->rope.dim = c->head_dim;
    if (layer_kinds(c, fam, j, dir, path, e))
        goto out;
    int any_moe = 0;
    for (uint64_t l = 0; l < c->layers; l++) {
        any_moe |= c->moe[l];
    }
    if (any_moe && (moe_common(c, fam, &s, e) ||
                    (fd->norm_topk_key && get_bool(&s, fd->norm_topk_key, &c->norm_topk, e)) ||
                    (fd->shared_key && get_u64(&s, fd->shared_key, &c->shared_inter, 0, DIM_MAX, e))))
        goto out;
    if (fd->clamped_swiglu && get_f64(&s, "swiglu_limit", &c->swiglu_limit, e))
        goto out;
    /* the decoders whose dims are more than a key and a default */
    switch (c->arch) {
    case RT_GEMMA4:
        if (cfg_gemma4(c, &s, e))
            goto out;
        rs = NULL; /* rope_parameters read above */
        break;
    case RT_DEEPSEEK:
        if (cfg_deepseek(c, &s, rs, e))
            goto out;
        break;
    case RT_QWEN3_NEXT:
        if (cfg_qwen3_next(c, &s, e))
            goto out;
        /* qwen3_5 keeps rope settings in rope_parameters (the text part needs only theta and
         * the partial factor: mRoPE's three position axes are one axis for text) */
        if (!rs && cJSON_IsObject(item(&s, "rope_parameters")))
            rs = item(&s, "rope_parameters");
        break;
    default:
        break;
    }
    /* sliding windows: gpt-oss's sliding layers, mixtral's and mistral's (the row's window_all)
     * every layer when set */
    if (get_u64(&s, "sliding_window", &c->window, 0, 1ull << 40, e))
        goto out;
    for (const char *const *t = fd->window_all; t && **t && c->window; t++)
        if (!strcmp(mt, *t)) {
            memset(c->mixer, RT_MIX_SLIDING, c->layers);
            break;
        }
    for (uint64_t l = 0; l < c->layers; l++)
        if (!c->moe[l] && c->inter == 0) {
            tq_fail(e, TQ_EDATA, "%s: missing \"intermediate_size\" (layer %llu has a dense MLP)", path,
                    (unsigned long long)l);
            goto out;
        }
    if (c->att_scale == 0)
        c->att_scale = 1.0 / sqrt((double)c->head_dim);
    if (rope_table(c, rs, max_pos, path, e))
        goto out;
    if (cfg_quantization(c, j, path, e) || cfg_streaming(c, j, path, e))
        goto out;
    rc = 0;
out:
    free(path);
    if (rc == 0 && json_out)
        *json_out = j;
    else
        cJSON_Delete(j);
    if (rc != 0)
        rt_config_free(c);
    return rc;
}

void rt_config_free(rt_config *c)
{
    free(c->mixer);
    free(c->moe);
    free(c->rope.inv_freq);
    free(c->rope_full.inv_freq);
    c->mixer = c->moe = NULL;
    c->rope.inv_freq = c->rope_full.inv_freq = NULL;
}

int rt_layer_is_moe(const rt_config *c, uint64_t l)
{
    return l < c->layers && c->moe[l];
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
