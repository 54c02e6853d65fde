/* Every family tq-run decodes, laid out as transformers saves it and configured with the keys
 * and ratios of one real published config.json (scaled down; the values and their source are
 * below, with each case), through every path: unsplit, split (streamed), converted with every
 * tensor kept float (tq_convert), converted then split; each against the independent f64
 * oracle (rt_oracle.c, written from the transformers modeling files) with relative logit
 * error <= 1e-4 and the same greedy token at all 16 teacher-forced positions: correctness, not
 * consistency. Each family also runs a square case (hidden = intermediate = expert width =
 * heads * head_dim) where a transposed [out, in] read passes every shape check and only the
 * logits can catch it. The tensor layouts the fixture writes (rt_fixture.c) are restated from
 * transformers' modeling_<family>.py; docs/compatibility.md holds the audit table (issue 33).
 *
 * Where a published config spells a key differently from what the fixture writes (no
 * head_dim, rope_scaling "type" instead of "rope_type", no yarn "truncate"), the config is
 * rewritten here to the published spelling so the key tq reads is the one the world writes. */
#include "formats/flash.h"
#include "layout/split/split.h"
#include "quant/convert/convert.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/rt_fixture.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#define NSEQ 16

static void dir_of(char *buf, size_t cap, const char *what, const char *suffix)
{
    snprintf(buf, cap, "%s/rtp-%s-%d%s", t_tmpdir(), what, (int)getpid(), suffix);
}

/* config.json of dir rewritten: keys in drop removed (a "a.b.c" path removes c inside a.b), then
 * every member of the JSON object `set` put in place (replacing one of that name; a member
 * "text_config" that is an object is merged into the config's text_config instead). */
static void patch_config(const char *dir, const char *const *drop, const char *set)
{
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *txt = NULL;
    size_t n = 0;
    tq_err err = {0};
    CHECK_OK(tq_read_small_file(path, 1u << 20, &txt, &n, &err));
    cJSON *root = txt ? cJSON_ParseWithLength(txt, n) : NULL;
    free(txt);
    CHECK(root != NULL);
    if (!root)
        return;
    for (int i = 0; drop && drop[i]; i++) {
        cJSON *o = root;
        const char *k = drop[i], *dot;
        while (o && (dot = strchr(k, '.'))) {
            char outer[64];
            snprintf(outer, sizeof outer, "%.*s", (int)(dot - k), k);
            o = cJSON_GetObjectItemCaseSensitive(o, outer);
            CHECKF(cJSON_IsObject(o), "no object %s in %s (dropping %s)", outer, path, drop[i]);
            k = dot + 1;
        }
        if (o)
            cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    }
    cJSON *add = set ? cJSON_Parse(set) : NULL;
    CHECK(!set || add);
    for (cJSON *it = add ? add->child : NULL; it; it = it->next) {
        cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
        cJSON *into = !strcmp(it->string, "text_config") && cJSON_IsObject(tc) && cJSON_IsObject(it) ? tc : root;
        for (cJSON *m = into == tc ? it->child : it; m; m = into == tc ? m->next : NULL) {
            cJSON_DeleteItemFromObjectCaseSensitive(into, m->string);
            cJSON_AddItemToObject(into, m->string, cJSON_Duplicate(m, 1));
        }
    }
    cJSON_Delete(add);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    FILE *fp = fopen(path, "w");
    CHECK(fp && out && fputs(out, fp) >= 0);
    if (fp)
        fclose(fp);
    free(out);
}

/* Decode dir teacher-forced against the oracle m (fx_oracle_compare). */
static void against(const fx_model *m, const char *dir, int resident, const char *what)
{
    fx_check_oracle(m, dir, resident, NSEQ, what, NULL);
}

/* c (HF layout) with its config rewritten by drop/set, through every path. */
static void every_path(fx_cfg c, const char *what, const char *const *drop, const char *set)
{
    char src[512], sp[600], cv[600], cvs[600], name[200];
    dir_of(src, sizeof src, what, "");
    dir_of(sp, sizeof sp, what, ".split");
    dir_of(cv, sizeof cv, what, ".conv");
    dir_of(cvs, sizeof cvs, what, ".conv.split");
    fx_model m;
    CHECK(fx_generate(&c, src, &m) == 0);
    if (drop || set)
        patch_config(src, drop, set);
    tq_err err = {0};
    int moe = c.experts > 0 && c.arch != FX_LLAMA && c.arch != FX_QWEN3 && c.arch != FX_QWEN2;
    const char *dirs[4] = {src, sp, cv, cvs};
    const char *how[4] = {"unsplit", "split", "converted", "converted, split"};
    int have[4] = {1, 0, 0, 0};
    if (moe) { /* tq-split takes MoE models only */
        have[1] = fx_split_dir(src, sp, &err) == 0;
        CHECKF(have[1], "%s: split: %s", what, err.msg);
    }
    have[2] = fx_convert_keep(src, cv, &err) == 0;
    CHECKF(have[2], "%s: convert: %s", what, err.msg);
    if (moe && have[2]) {
        have[3] = fx_split_dir(cv, cvs, &err) == 0;
        CHECKF(have[3], "%s: split of converted: %s", what, err.msg);
    }
    for (int i = 0; i < 4; i++) {
        if (!have[i])
            continue;
        snprintf(name, sizeof name, "%s %s", what, how[i]);
        against(&m, dirs[i], i == 0 || i == 2, name);
    }
    fx_free(&m);
}

static fx_cfg base(int arch)
{
    fx_cfg c = fx_family_cfg(arch, FX_BF16);
    c.hf_expert_names = 1;
    return c;
}

/* ---- llama: meta-llama/Llama-3.1-8B, config.json
 * (https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json): LlamaForCausalLM,
 * hidden_size 4096, intermediate_size 14336 (3.5x), num_attention_heads 32,
 * num_key_value_heads 8, no head_dim key (4096 / 32 = 128), rms_norm_eps 1e-05, rope_theta
 * 500000.0, rope_scaling {factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0,
 * original_max_position_embeddings 8192, rope_type "llama3"}, tie_word_embeddings false.
 * Scaled: hidden 128, intermediate 448, 8 heads : 2 kv heads of 16. */
static const char *const no_head_dim[] = {"head_dim", NULL};
static void llama31_8b(void)
{
    fx_cfg c = fx_small_cfg(FX_LLAMA, FX_BF16);
    c.hidden = 128;
    c.inter = 448;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.eps = 1e-5;
    c.theta = 500000;
    c.tied = 0;
    c.rope_llama3 = 1;
    c.rs_factor = 8;
    c.rs_low_freq = 1;
    c.rs_high_freq = 4;
    c.rs_orig = 8192;
    every_path(c, "llama-3.1-8b", no_head_dim, NULL);
}
/* The same as transformers 5 saves it: its config classes take rope_parameters in place of
 * rope_theta and rope_scaling (models/mixtral/configuration_mixtral.py's MixtralConfig, read
 * for the Mixtral case below, has no rope_theta or rope_scaling argument; the rope utils
 * standardise the dict to rope_type + rope_theta + the type's keys), so Llama 3.1's llama3
 * scaling sits in rope_parameters and config.json has no rope_scaling. tq read only
 * rope_parameters.rope_theta there and ran plain RoPE. */
static const char *const v5_rope_drop[] = {"head_dim", "rope_theta", "rope_scaling", NULL};
static void llama31_8b_v5(void)
{
    fx_cfg c = fx_small_cfg(FX_LLAMA, FX_BF16);
    c.hidden = 128;
    c.inter = 448;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.eps = 1e-5;
    c.theta = 500000;
    c.tied = 0;
    c.rope_llama3 = 1;
    c.rs_factor = 8;
    c.rs_low_freq = 1;
    c.rs_high_freq = 4;
    c.rs_orig = 8192;
    every_path(c, "llama-3.1-8b-v5", v5_rope_drop,
               "{\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, "
               "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
               "\"original_max_position_embeddings\": 8192}}");
}
static void llama_square(void)
{
    fx_cfg c = fx_small_cfg(FX_LLAMA, FX_BF16);
    c.inter = 64;
    c.heads = 4;
    c.kv_heads = 4;
    every_path(c, "llama-square", no_head_dim, NULL);
}

/* ---- mistral: mistralai/Mistral-7B-v0.1, config.json
 * (https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json): MistralForCausalLM,
 * model_type mistral, hidden_size 4096, intermediate_size 14336, 32 heads, 8 kv heads, no
 * head_dim key, rms_norm_eps 1e-05, rope_theta 10000.0, sliding_window 4096,
 * tie_word_embeddings false. Scaled as llama above; the window scaled to 6 of 16 positions
 * so it acts (4096 of 32768 positions in the release). */
static void mistral_7b(void)
{
    fx_cfg c = fx_small_cfg(FX_LLAMA, FX_BF16);
    c.hidden = 128;
    c.inter = 448;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.eps = 1e-5;
    c.theta = 10000;
    c.tied = 0;
    c.window = 6;
    every_path(c, "mistral-7b-v0.1", no_head_dim, NULL);
}

/* ---- qwen2: Qwen/Qwen2.5-7B-Instruct, config.json
 * (https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json): Qwen2ForCausalLM,
 * hidden_size 3584, intermediate_size 18944 (37/7 of hidden), 28 heads, 4 kv heads (7 : 1),
 * no head_dim key (128), rms_norm_eps 1e-06, rope_theta 1000000.0, use_sliding_window false,
 * sliding_window 131072, max_window_layers 28 (= num_hidden_layers), tie_word_embeddings
 * false; q/k/v with bias (Qwen2Attention). Scaled: hidden 112, intermediate 592, 7 heads :
 * 1 kv head of 16. */
static void qwen25_7b(void)
{
    fx_cfg c = base(FX_QWEN2);
    c.hidden = 112;
    c.inter = 592;
    c.heads = 7;
    c.kv_heads = 1;
    c.head_dim = 16;
    c.window = 131072;
    c.tied = 0;
    every_path(c, "qwen2.5-7b-instruct", NULL, NULL);
}
static void qwen2_square(void)
{
    fx_cfg c = base(FX_QWEN2);
    c.inter = 64;
    c.kv_heads = 4;
    every_path(c, "qwen2-square", NULL, NULL);
}

/* ---- qwen2_moe: Qwen/Qwen1.5-MoE-A2.7B, config.json
 * (https://huggingface.co/Qwen/Qwen1.5-MoE-A2.7B/blob/main/config.json; the same numbers in
 * Qwen/Qwen1.5-MoE-A2.7B-Chat-GPTQ-Int4's): Qwen2MoeForCausalLM, hidden_size 2048,
 * intermediate_size 5632, 16 heads = 16 kv heads, moe_intermediate_size 1408,
 * shared_expert_intermediate_size 5632, num_experts 60, num_experts_per_tok 4,
 * norm_topk_prob false, decoder_sparse_step 1, rms_norm_eps 1e-06, rope_theta 1000000.0,
 * tie_word_embeddings false; experts as per-expert modules mlp.experts.<e>.{gate,up,down}_proj.
 * Scaled by 1/32: hidden 64, intermediate 176, expert 44, 60 experts top 4. */
static void qwen15_moe_a27b(void)
{
    fx_cfg c = base(FX_QWEN2_MOE);
    c.kv_heads = 4;
    c.inter = 176;
    c.moe_inter = 44;
    c.shared_inter = 176;
    c.experts = 60;
    c.top_k = 4;
    c.norm_topk = 0;
    c.mlp_only = 0;
    c.tied = 0;
    every_path(c, "qwen1.5-moe-a2.7b", NULL, NULL);
}
static void qwen2_moe_square(void)
{
    fx_cfg c = base(FX_QWEN2_MOE);
    c.kv_heads = 4;
    c.inter = 64;
    c.moe_inter = 64;
    c.shared_inter = 64;
    every_path(c, "qwen2_moe-square", NULL, NULL);
}

/* ---- qwen3: Qwen/Qwen3-8B, config.json (https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json):
 * Qwen3ForCausalLM, hidden_size 4096, intermediate_size 12288 (3x), 32 heads, 8 kv heads,
 * head_dim 128, rms_norm_eps 1e-06, rope_theta 1000000, tie_word_embeddings false; q_norm /
 * k_norm over head_dim. Scaled: hidden 128, intermediate 384, 8 : 2 heads of 16. */
static void qwen3_8b(void)
{
    fx_cfg c = fx_small_cfg(FX_QWEN3, FX_BF16);
    c.hidden = 128;
    c.inter = 384;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.theta = 1e6;
    c.tied = 0;
    every_path(c, "qwen3-8b", NULL, NULL);
}
static void qwen3_square(void)
{
    fx_cfg c = fx_small_cfg(FX_QWEN3, FX_BF16);
    c.inter = 64;
    c.kv_heads = 4;
    every_path(c, "qwen3-square", NULL, NULL);
}

/* ---- qwen3_moe: Qwen/Qwen3-30B-A3B, config.json
 * (https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json): Qwen3MoeForCausalLM,
 * hidden_size 2048, intermediate_size 6144, moe_intermediate_size 768, 32 heads, 4 kv heads,
 * head_dim 128 (so q_proj is [4096, 2048]: heads * head_dim = 2 * hidden), num_experts 128,
 * num_experts_per_tok 8, norm_topk_prob true, decoder_sparse_step 1, mlp_only_layers [],
 * rms_norm_eps 1e-06, rope_theta 1000000.0, tie_word_embeddings false; per-expert modules
 * mlp.experts.<e>.{gate,up,down}_proj. Scaled by 1/32: hidden 64, expert 24, 128 experts top
 * 8, 8 : 1 heads of 16 (q 128 = 2 * hidden). */
static void qwen3_30b_a3b(void)
{
    fx_cfg c = fx_small_cfg(FX_QWEN3_MOE, FX_BF16);
    c.hf_expert_names = 1;
    c.inter = 192;
    c.moe_inter = 24;
    c.experts = 128;
    c.top_k = 8;
    c.heads = 8;
    c.kv_heads = 1;
    c.head_dim = 16;
    c.theta = 1e6;
    c.norm_topk = 1;
    every_path(c, "qwen3-30b-a3b", NULL, NULL);
}
static void qwen3_moe_square(void)
{
    fx_cfg c = fx_small_cfg(FX_QWEN3_MOE, FX_BF16);
    c.hf_expert_names = 1;
    c.inter = 64;
    c.moe_inter = 64;
    c.kv_heads = 4;
    every_path(c, "qwen3_moe-square", NULL, NULL);
}

/* ---- mixtral: mistralai/Mixtral-8x7B-v0.1, config.json
 * (https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json):
 * MixtralForCausalLM, hidden_size 4096, intermediate_size 14336, 32 heads, 8 kv heads,
 * num_local_experts 8, num_experts_per_tok 2, rms_norm_eps 1e-05, rope_theta 1000000.0,
 * sliding_window null, tie_word_embeddings false, no head_dim key; per-expert modules
 * block_sparse_moe.experts.<e>.{w1,w2,w3}. Scaled: hidden 128, intermediate 448, 8 : 2 heads
 * of 16. */
static void mixtral_8x7b(void)
{
    fx_cfg c = base(FX_MIXTRAL);
    c.hidden = 128;
    c.inter = 448;
    c.moe_inter = 448;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.window = 0;
    c.tied = 0;
    every_path(c, "mixtral-8x7b", no_head_dim, NULL);
}
static void mixtral_square(void)
{
    fx_cfg c = base(FX_MIXTRAL);
    c.inter = 64;
    c.moe_inter = 64;
    c.kv_heads = 4;
    every_path(c, "mixtral-square", no_head_dim, NULL);
}

/* ---- mixtral as transformers 5 holds and saves it. transformers
 * src/transformers/conversion_mapping.py, _build_checkpoint_conversion_mapping, "mixtral":
 * WeightRenaming(".block_sparse_moe.gate", ".mlp.gate"); WeightConverter of
 * block_sparse_moe.experts.*.w1 / *.w3 -> mlp.experts.gate_up_proj (MergeModulelist(dim=0):
 * torch.stack over experts, then Concatenate(dim=1): w1 rows, then w3 rows: [E, 2I, H]) and of
 * *.w2 -> mlp.experts.down_proj (stacked: [E, H, I]); MixtralExperts computes
 * linear(x, gate_up_proj[e]).chunk(2) as gate, up. A state dict saved without reverting the
 * mapping (core_model_loading.py, revert_weight_conversion) holds exactly mlp.gate.weight and
 * mlp.experts.{gate_up_proj,down_proj}. Its config.json (models/mixtral/configuration_mixtral.py
 * in transformers 5: MixtralConfig takes rope_parameters instead of rope_theta, default_theta
 * 1e6, and keeps head_dim None) has "head_dim": null and rope_parameters {"rope_theta",
 * "rope_type": "default"} and no rope_theta. Before, tq-run refused it ("block_sparse_moe.gate
 * is missing"), tq-split refused the experts and tq-convert kept mlp.* names mlx-lm's
 * Mixtral (sanitize: block_sparse_moe only) cannot load. The values are Mixtral-8x7B's as
 * above. */
static const char *const v5_drop[] = {"head_dim", "rope_theta", NULL};
#define MIXTRAL_V5 "{\"head_dim\": null, \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}}"

/* The bytes of every layer file of split directory d after its header, in layer order. */
static unsigned char *split_data(const char *d, uint64_t *n)
{
    tq_flash_manifest *man = NULL;
    tq_err err = {0};
    unsigned char *all = NULL;
    *n = 0;
    CHECK_OK(tq_flash_manifest_load(&man, d, &err));
    for (size_t i = 0; man && i < man->n_layers; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", d, man->layers[i].file);
        tq_flash_header h;
        memset(&h, 0, sizeof h);
        CHECK_OK(tq_flash_read(&h, path, &err));
        char *txt = NULL;
        size_t len = 0;
        CHECK_OK(tq_read_small_file(path, 1u << 28, &txt, &len, &err));
        if (txt && h.data_start <= len) {
            unsigned char *g = realloc(all, *n + (len - h.data_start) + 1);
            CHECK(g != NULL);
            if (g) {
                all = g;
                memcpy(all + *n, txt + h.data_start, len - h.data_start);
                *n += len - h.data_start;
            }
        }
        free(txt);
        tq_flash_header_free(&h);
    }
    tq_flash_manifest_free(man);
    return all;
}

static void mixtral_v5_case(fx_cfg c, const char *what)
{
    c.theta = 1e6;
    c.hf_expert_names = 3;
    every_path(c, what, v5_drop, MIXTRAL_V5);
    char src[512], sp[600], cv[600], hub[600], hubsp[600], j[600];
    dir_of(src, sizeof src, what, "");
    dir_of(sp, sizeof sp, what, ".split");
    dir_of(cv, sizeof cv, what, ".conv");
    dir_of(hub, sizeof hub, what, ".hub");
    dir_of(hubsp, sizeof hubsp, what, ".hub.split");
    dir_of(j, sizeof j, what, ".joined");
    tq_err err = {0};
    /* converted: mlx-lm's Mixtral names (mlx_lm/models/mixtral.py: block_sparse_moe.gate and
     * block_sparse_moe.switch_mlp.*), nothing left under mlp */
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, cv, &err));
    int stacked = 0, router = 0, v5 = 0;
    for (size_t i = 0; m && i < m->n_tensors; i++) {
        const char *n = m->tensors[i].info.name;
        stacked += strstr(n, ".block_sparse_moe.switch_mlp.gate_proj.weight") != NULL;
        router += strstr(n, ".block_sparse_moe.gate.weight") != NULL;
        v5 += strstr(n, ".mlp.") != NULL;
    }
    CHECKF(stacked == c.layers && router == c.layers && v5 == 0,
           "%s: converted holds %d switch_mlp gate stacks, %d block_sparse_moe routers, %d mlp.* tensors", what, stacked,
           router, v5);
    tq_model_close(m);
    /* split: the same weights saved the hub's way (block_sparse_moe.experts.<e>.w1/w3/w2) give
     * byte-identical expert blocks (each expert's gate rows, up rows, down) */
    fx_cfg h = c;
    h.hf_expert_names = 1;
    fx_model hm;
    CHECK(fx_generate(&h, hub, &hm) == 0);
    fx_free(&hm);
    CHECK_OK(fx_split_dir(hub, hubsp, &err));
    uint64_t na = 0, nb = 0;
    unsigned char *a = split_data(sp, &na), *b = split_data(hubsp, &nb);
    CHECKF(a && b && na == nb && na > 0 && memcmp(a, b, na) == 0,
           "%s: split expert data (%llu bytes) differs from the hub layout's split (%llu bytes)", what,
           (unsigned long long)na, (unsigned long long)nb);
    free(a);
    free(b);
    /* --join gives the source names and bytes back */
    tq_split_join_opts jo = {.quiet = 1, .threads = 2};
    CHECK_OK(tq_split_join(sp, j, &jo, &err));
    tq_model *x = NULL, *y = NULL;
    CHECK_OK(tq_model_open(&x, src, &err));
    CHECK_OK(tq_model_open(&y, j, &err));
    CHECKF(x && y && x->n_tensors == y->n_tensors, "%s: joined has %zu tensors, source %zu", what,
           y ? y->n_tensors : 0, x ? x->n_tensors : 0);
    for (size_t i = 0; x && y && i < x->n_tensors; i++) {
        const char *n = x->tensors[i].info.name;
        uint64_t la = 0, lb = 0;
        void *p = t_read_tensor(x, n, &la), *q = t_read_tensor(y, n, &lb);
        CHECKF(p && q && la == lb && memcmp(p, q, la) == 0, "%s: joined tensor '%s' differs from the source", what, n);
        free(p);
        free(q);
    }
    tq_model_close(x);
    tq_model_close(y);
}
static void mixtral_v5(void)
{
    fx_cfg c = base(FX_MIXTRAL);
    c.hidden = 128;
    c.inter = 448;
    c.moe_inter = 448;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.window = 0;
    c.tied = 0;
    mixtral_v5_case(c, "mixtral-v5");
}
static void mixtral_v5_square(void)
{
    fx_cfg c = base(FX_MIXTRAL);
    c.inter = 64;
    c.moe_inter = 64;
    c.kv_heads = 4;
    mixtral_v5_case(c, "mixtral-v5-square");
}

/* ---- deepseek_v3: deepseek-ai/DeepSeek-V3, config.json
 * (https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json):
 * DeepseekV3ForCausalLM, hidden_size 7168, intermediate_size 18432, moe_intermediate_size
 * 2048, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128,
 * qk_rope_head_dim 64, v_head_dim 128, n_routed_experts 256, num_experts_per_tok 8,
 * n_shared_experts 1, first_k_dense_replace 3, n_group 8, topk_group 4, routed_scaling_factor
 * 2.5, norm_topk_prob true, scoring_func sigmoid, topk_method noaux_tc, rms_norm_eps 1e-06,
 * rope_theta 10000, rope_scaling {beta_fast 32, beta_slow 1, factor 40, mscale 1.0,
 * mscale_all_dim 1.0, original_max_position_embeddings 4096, "type": "yarn"} (the old key
 * "type", and no "truncate": transformers' default, true), tie_word_embeddings false.
 * Scaled: 4 layers, 3 dense; 2 heads; q_lora 48, kv_lora 16, nope 16, rope 8, v 16; 32 experts
 * in 8 groups, top 4 groups, top 8. */
static const char *const ds_drop[] = {"rope_scaling", NULL};
#define DS_ROPE                                                                                                        \
    "{\"rope_scaling\": {\"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, " \
    "\"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}}"
static void deepseek_v3(void)
{
    fx_cfg c = base(FX_DEEPSEEK);
    c.hidden = 112;
    c.inter = 288;
    c.moe_inter = 32;
    c.layers = 4;
    c.first_dense = 3;
    c.heads = 2;
    c.kv_heads = 2;
    c.q_lora = 48;
    c.kv_lora = 16;
    c.experts = 32;
    c.n_group = 8;
    c.topk_group = 4;
    c.top_k = 8;
    c.norm_topk = 1;
    c.route_scale = 2.5;
    c.rs_truncate = 1;
    every_path(c, "deepseek-v3", ds_drop, DS_ROPE);
}
static void deepseek_square(void)
{
    fx_cfg c = base(FX_DEEPSEEK);
    c.inter = 64;
    c.moe_inter = 64;
    c.q_lora = 64;
    c.rs_truncate = 1;
    every_path(c, "deepseek-square", ds_drop, DS_ROPE);
}

/* ---- qwen3_next: Qwen/Qwen3-Next-80B-A3B-Instruct, config.json
 * (https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json):
 * Qwen3NextForCausalLM, hidden_size 2048, intermediate_size 5120, 16 heads, 2 kv heads,
 * head_dim 256 (q_proj 2 * 16 * 256 rows: query and gate), linear_num_key_heads 16,
 * linear_num_value_heads 32, linear_key_head_dim 128, linear_value_head_dim 128,
 * linear_conv_kernel_dim 4, full_attention_interval 4, num_experts 512, num_experts_per_tok
 * 10, moe_intermediate_size 512, shared_expert_intermediate_size 512, norm_topk_prob true,
 * decoder_sparse_step 1, mlp_only_layers [], partial_rotary_factor 0.25, rope_theta 10000000,
 * rms_norm_eps 1e-06, tie_word_embeddings false. Scaled by 1/32: hidden 64, 8 : 1 heads of 16,
 * linear 4 key heads and 8 value heads of 16, 64 experts top 10 of 16, shared 16. */
static void qwen3_next_80b(void)
{
    fx_cfg c = base(FX_QWEN3_NEXT);
    c.heads = 8;
    c.kv_heads = 1;
    c.head_dim = 16;
    c.inter = 160;
    c.lk_heads = 4;
    c.lv_heads = 8;
    c.lk_dim = 16;
    c.lv_dim = 16;
    c.conv_k = 4;
    c.full_interval = 4;
    c.experts = 64;
    c.top_k = 10;
    c.moe_inter = 16;
    c.shared_inter = 16;
    c.norm_topk = 1;
    c.mlp_only = 0;
    c.prf = 0.25;
    c.theta = 1e7;
    c.tied = 0;
    every_path(c, "qwen3-next-80b-a3b", NULL, NULL);
}
static void qwen3_next_square(void)
{
    fx_cfg c = base(FX_QWEN3_NEXT);
    c.moe_inter = 64;
    c.shared_inter = 64;
    c.inter = 64;
    every_path(c, "qwen3_next-square", NULL, NULL);
}

/* ---- qwen3_5_moe: Qwen/Qwen3.5-35B-A3B. The values: transformers' Qwen3_5MoeTextConfig
 * (src/transformers/models/qwen3_5_moe/modular_qwen3_5_moe.py, auto_docstring checkpoint
 * "Qwen/Qwen3.5-35B-A3B": vocab_size 248320, hidden_size 2048, num_hidden_layers 40,
 * num_experts 256, num_experts_per_tok 8; intermediate_size, decoder_sparse_step,
 * norm_topk_prob and mlp_only_layers removed) with what it inherits from Qwen3NextConfig
 * (models/qwen3_next/configuration_qwen3_next.py: 16 heads, 2 kv heads, head_dim 256, linear
 * 16 key and 32 value heads of 128, conv kernel 4, moe_intermediate_size 512,
 * shared_expert_intermediate_size 512, rms_norm_eps 1e-6, partial_rotary_factor 0.25,
 * tie_word_embeddings false). The hub config.json itself was not read here: its remaining
 * values are as a third-party inventory of snapshot ec2d4ece1ffb563322cbee9a48fe0e3fcbce0307
 * records them (layer_types 3 linear + 1 full, full_attention_interval 4, rope_parameters
 * {rope_theta 1e7, partial_rotary_factor 0.25, mrope_section [11, 11, 10], mrope_interleaved
 * true}; no norm_topk_prob, decoder_sparse_step or mlp_only_layers). Experts fused
 * (mlp.experts.gate_up_proj / down_proj) under model.language_model., the router
 * Qwen3_5MoeTopKRouter (softmax, top-k, always renormalised), the shared expert with its
 * sigmoid gate. Scaled: hidden 64; 8 : 1 heads of 16 (q_proj 2 * 8 * 16 = 4 * hidden, as
 * 2 * 16 * 256 = 4 * 2048); linear 4 : 8 heads of 16 (key dim = hidden, as 16 * 128 = 2048);
 * 64 experts top 8; expert and shared width 16 (hidden / 4, as 512 / 2048). */
static const char *const q35moe_drop[] = {"text_config.norm_topk_prob", "text_config.decoder_sparse_step",
                                          "text_config.mlp_only_layers", "text_config.intermediate_size", NULL};
#define Q35_SET "{\"text_config\": {\"full_attention_interval\": 4}}"
static fx_cfg q35moe_cfg(void)
{
    fx_cfg c = base(FX_QWEN3_5_MOE);
    c.layers = 4;
    c.full_interval = 4;
    c.layer_types = 1;
    c.mlp_only = 0;
    c.prf = 0.25;
    c.theta = 1e7;
    c.eps = 1e-6;
    c.tied = 0;
    c.norm_topk = 1;
    c.conv_k = 4;
    return c;
}
static void qwen35_35b_a3b(void)
{
    fx_cfg c = q35moe_cfg();
    c.hidden = 64;
    c.heads = 8;
    c.kv_heads = 1;
    c.head_dim = 16;
    c.lk_heads = 4;
    c.lv_heads = 8;
    c.lk_dim = 16;
    c.lv_dim = 16;
    c.experts = 64;
    c.top_k = 8;
    c.moe_inter = 16;
    c.shared_inter = 16;
    every_path(c, "qwen3.5-35b-a3b", q35moe_drop, Q35_SET);
}
static void qwen3_5_moe_square(void)
{
    fx_cfg c = q35moe_cfg();
    c.moe_inter = 64;
    c.shared_inter = 64;
    every_path(c, "qwen3_5_moe-square", q35moe_drop, Q35_SET);
}
/* Qwen3_5MoeTextConfig has no norm_topk_prob and Qwen3_5MoeTopKRouter (Qwen3VLMoeTextTopKRouter,
 * models/qwen3_vl_moe) renormalises the top-k weights unconditionally, so a config that carries
 * "norm_topk_prob": false (as Qwen3-Next's may) decodes renormalised; tq read the key and did
 * not renormalise. */
static void qwen3_5_moe_norm_topk_ignored(void)
{
    fx_cfg c = q35moe_cfg();
    every_path(c, "qwen3_5_moe-norm-topk", q35moe_drop,
               "{\"text_config\": {\"full_attention_interval\": 4, \"norm_topk_prob\": false}}");
}

/* ---- qwen3_5 (dense): transformers' Qwen3_5TextConfig (models/qwen3_5/modular_qwen3_5.py,
 * auto_docstring checkpoint "Qwen/Qwen3.5-27B", its example "Qwen3.5-9B style"): vocab_size
 * 248320, hidden_size 4096, intermediate_size 12288, num_hidden_layers 32, num_key_value_heads
 * 4, and from Qwen3NextConfig 16 heads of head_dim 256, linear 16 key and 32 value heads of 128,
 * partial_rotary_factor 0.25 (no MoE keys: removed from the class). These are the class's
 * defaults, not a hub config.json read here. Qwen3_5GatedDeltaNet: in_proj_qkv [2 Kd + Vd, H]
 * split q | k | v (not grouped per head as Qwen3-Next's in_proj_qkvz), in_proj_z [Vd, H],
 * in_proj_b and in_proj_a [Hv, H]; Qwen3_5MLP of intermediate_size on every layer. Scaled:
 * hidden 64, intermediate 192 (3x), 4 : 1 heads of 16 (heads * head_dim = hidden, as
 * 16 * 256 = 4096), linear 2 : 4 heads of 16 (key dim hidden / 2, value dim hidden). */
static fx_cfg q35_cfg(void)
{
    fx_cfg c = q35moe_cfg();
    c.dense35 = 1;
    c.experts = 0;
    c.top_k = 0;
    return c;
}
static void qwen35_dense(void)
{
    fx_cfg c = q35_cfg();
    c.inter = 192;
    c.heads = 4;
    c.kv_heads = 1;
    c.head_dim = 16;
    c.lk_heads = 2;
    c.lv_heads = 4;
    c.lk_dim = 16;
    c.lv_dim = 16;
    every_path(c, "qwen3.5-dense", NULL, Q35_SET);
}
static void qwen3_5_square(void)
{
    fx_cfg c = q35_cfg();
    c.inter = 64;
    every_path(c, "qwen3_5-square", NULL, Q35_SET);
}
/* partial_rotary_factor absent: 0.25 (Qwen3NextConfig.__post_init__,
 * kwargs.setdefault("partial_rotary_factor", 0.25), inherited by the Qwen3.5 configs); tq took
 * 1.0 and rotated every dim. */
static const char *const no_prf[] = {"text_config.rope_parameters.partial_rotary_factor", NULL};
static void qwen3_5_prf_default(void)
{
    fx_cfg c = q35_cfg();
    every_path(c, "qwen3_5-prf-default", no_prf, Q35_SET);
}

/* ---- transformers 5's in-memory expert layout. MixtralExperts
 * (transformers/models/mixtral/modeling_mixtral.py) and the classes built on it
 * (Qwen2MoeExperts, Qwen3MoeExperts, Qwen3NextExperts, DeepseekV3's experts) hold gate_up_proj [E, 2I, H]
 * (gate rows first, .chunk(2)) and down_proj [E, H, I] as bare parameters; loading fuses the
 * hub's per-expert tensors into them and save_pretrained reverts that (core_model_loading.py,
 * revert_weight_conversion), but a state dict saved without the revert holds the fused form.
 * tq-run and tq-convert --keep read it; tq-split refused it ("named like a routed expert but
 * not one tq-split can place") and tq-convert kept it under the HF name, where mlx-lm's
 * sanitize (which stacks experts.<e>.*) cannot load it. Now split keeps it fused and convert
 * writes mlx-lm's switch_mlp stack. */
static void fused_case(int arch, const char *what)
{
    fx_cfg c = arch == FX_QWEN3_MOE ? fx_small_cfg(arch, FX_BF16) : base(arch);
    c.hf_expert_names = 3;
    if (arch == FX_DEEPSEEK)
        c.rs_truncate = 1;
    every_path(c, what, arch == FX_DEEPSEEK ? ds_drop : NULL, arch == FX_DEEPSEEK ? DS_ROPE : NULL);
    char cv[600];
    dir_of(cv, sizeof cv, what, ".conv");
    tq_model *m = NULL;
    tq_err err = {0};
    CHECK_OK(tq_model_open(&m, cv, &err));
    int stacked = 0, fused = 0;
    for (size_t i = 0; m && i < m->n_tensors; i++) {
        stacked += strstr(m->tensors[i].info.name, "mlp.switch_mlp.gate_proj.weight") != NULL;
        fused += strstr(m->tensors[i].info.name, "experts.gate_up_proj") != NULL;
    }
    CHECKF(stacked > 0 && fused == 0, "%s: converted holds %d switch_mlp gate stacks and %d fused tensors", what,
           stacked, fused);
    tq_model_close(m);
}
static void qwen2_moe_fused(void) { fused_case(FX_QWEN2_MOE, "qwen2_moe-fused"); }
static void qwen3_next_fused(void) { fused_case(FX_QWEN3_NEXT, "qwen3_next-fused"); }
static void deepseek_fused(void) { fused_case(FX_DEEPSEEK, "deepseek-fused"); }
static void qwen3_moe_fused(void) { fused_case(FX_QWEN3_MOE, "qwen3_moe-fused"); }

int main(void)
{
    RUN(llama31_8b);
    RUN(llama31_8b_v5);
    RUN(llama_square);
    RUN(mistral_7b);
    RUN(qwen25_7b);
    RUN(qwen2_square);
    RUN(qwen15_moe_a27b);
    RUN(qwen2_moe_square);
    RUN(qwen3_8b);
    RUN(qwen3_square);
    RUN(qwen3_30b_a3b);
    RUN(qwen3_moe_square);
    RUN(mixtral_8x7b);
    RUN(mixtral_square);
    RUN(mixtral_v5);
    RUN(mixtral_v5_square);
    RUN(deepseek_v3);
    RUN(deepseek_square);
    RUN(qwen3_next_80b);
    RUN(qwen3_next_square);
    RUN(qwen35_35b_a3b);
    RUN(qwen3_5_moe_square);
    RUN(qwen3_5_moe_norm_topk_ignored);
    RUN(qwen35_dense);
    RUN(qwen3_5_square);
    RUN(qwen3_5_prf_default);
    RUN(qwen2_moe_fused);
    RUN(qwen3_next_fused);
    RUN(deepseek_fused);
    RUN(qwen3_moe_fused);
    TEST_MAIN_END();
}
