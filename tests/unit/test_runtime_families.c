/* The reference decoder on every family after qwen3_moe (mixtral, deepseek_v3, gpt_oss,
 * qwen3_next, qwen3_5_moe, qwen2, qwen2_moe, gemma4), in every weight kind it reads: a 32-token teacher-forced run
 * against the independent f64 oracle (rt_oracle.c) — relative logit error below 1e-4 at every
 * position and the same greedy token —, and --threads 1/2/7 bit for bit. */
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/rt_fixture.h"

#include <math.h>
#include <unistd.h>

#define NSEQ 32

/* The run: prompt = seq[0], then seq[1..] forced, NSEQ steps of logits. */
static void sequence(int vocab, uint64_t seed, int32_t *seq)
{
    fx_sequence(vocab, seed, NSEQ, seq);
}

static int decode(const char *dir, int threads, const int32_t *seq, fx_logits *b, int32_t *toks, tq_err *err)
{
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.threads = threads;
    return fx_decode_forced(dir, &o, seq, NSEQ, b, toks, err);
}

static const char *arch_name(int arch)
{
    static const char *const n[] = {"llama", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "gpt_oss", "qwen3_next",
                                    "qwen3_5_moe", "qwen2", "qwen2_moe", "gemma4"};
    return n[arch];
}

/* Generate c, decode NSEQ teacher-forced steps, compare every step with the oracle. Returns
 * the largest relative error (max |runtime - oracle| / max |oracle| over a step's logits). */
static double against_oracle(fx_cfg c, const char *what)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/rtf-%s-%d", t_tmpdir(), what, (int)getpid());
    fx_model m;
    CHECK(fx_generate(&c, dir, &m) == 0);
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.threads = 2;
    tq_err err = {0};
    double worst;
    int first, bad_tokens = fx_oracle_compare(&m, dir, &o, NSEQ, &worst, &first, NULL, &err);
    CHECKF(bad_tokens >= 0, "%s: %s", what, err.msg);
    CHECKF(bad_tokens == 0, "%s: %d greedy tokens differ from the oracle's, the first at step %d", what, bad_tokens,
           first);
    CHECKF(bad_tokens >= 0 && worst < 1e-4, "%s: relative logits error %.3g", what, worst);
    CHECKF(worst > 0 || c.kind == FX_F32, "%s: suspiciously exact (%.3g)", what, worst);
    printf("  %-28s max relative logit error %.3g over %d positions, %d token mismatches\n", what, worst, NSEQ,
           bad_tokens);
    fx_free(&m);
    return worst;
}

/* Every weight kind; HF names for the float kinds (as released), the MLX form for the
 * quantized ones and once more for bf16. */
static void every_kind(int arch)
{
    double worst = 0;
    for (int k = 0; k < FX_NKINDS; k++) {
        fx_cfg c = fx_family_cfg(arch, k);
        c.hf_expert_names = k == FX_F32 || k == FX_BF16 || k == FX_F16; /* gpt_oss: MXFP4 experts */
        char what[96];
        snprintf(what, sizeof what, "%s-%s-%s", arch_name(arch), fx_kind_name(k), c.hf_expert_names ? "hf" : "mlx");
        worst = fmax(worst, against_oracle(c, what));
    }
    fx_cfg c = fx_family_cfg(arch, FX_BF16);
    char what[96];
    snprintf(what, sizeof what, "%s-bf16-mlx", arch_name(arch));
    worst = fmax(worst, against_oracle(c, what));
    printf("  %s: worst over every kind %.3g\n", arch_name(arch), worst);
}

/* --threads 1/2/7 give the same logits bytes. */
static void threads_equal_cfg(fx_cfg c, const char *what)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/rtf-threads-%s-%d", t_tmpdir(), what, (int)getpid());
    fx_model m;
    CHECK(fx_generate(&c, dir, &m) == 0);
    fx_free(&m);
    int32_t seq[NSEQ], toks[NSEQ];
    sequence(c.vocab, c.seed, seq);
    size_t n = (size_t)NSEQ * (size_t)c.vocab;
    float *first = NULL;
    int threads[] = {1, 2, 7};
    tq_err err = {0};
    for (int i = 0; i < 3; i++) {
        fx_logits b = {calloc(n, sizeof(float)), 0, 0, NSEQ};
        CHECK_OK(decode(dir, threads[i], seq, &b, toks, &err));
        if (!first) {
            first = b.v;
            continue;
        }
        CHECKF(memcmp(first, b.v, n * 4) == 0, "%s: --threads %d differs from --threads 1", what, threads[i]);
        free(b.v);
    }
    free(first);
}

static void threads_equal(int arch, int kind)
{
    threads_equal_cfg(fx_family_cfg(arch, kind), arch_name(arch));
}

static void mixtral_kinds(void) { every_kind(FX_MIXTRAL); }
static void mixtral_no_window(void)
{
    fx_cfg c = fx_family_cfg(FX_MIXTRAL, FX_TQ4);
    c.window = 0;
    against_oracle(c, "mixtral-tq4-full-attention");
}
static void mixtral_threads(void) { threads_equal(FX_MIXTRAL, FX_TQ3); }

/* Mistral: the llama row's decode.window_all ("mistral"): with sliding_window set, every layer
 * attends over the last `window` positions (a window of 5 in a 32-step run), against the
 * oracle's sliding mask written from transformers' modeling_mistral.py. */
static void mistral_sliding(void)
{
    fx_cfg c = fx_small_cfg(FX_LLAMA, FX_BF16);
    c.window = 5;
    against_oracle(c, "mistral-bf16-window5");
}

static void deepseek_kinds(void) { every_kind(FX_DEEPSEEK); }
static void deepseek_plain_q(void)
{
    /* no q LoRA, one expert group, no mscale on the softmax, top-1 without renormalising */
    fx_cfg c = fx_family_cfg(FX_DEEPSEEK, FX_AFF8);
    c.q_lora = 0;
    c.n_group = 1;
    c.topk_group = 1;
    c.top_k = 1;
    c.norm_topk = 0;
    c.rs_mscale_all = 0;
    c.rs_mscale = 0;
    against_oracle(c, "deepseek-aff8-plain-q");
}
static void deepseek_threads(void) { threads_equal(FX_DEEPSEEK, FX_TQ3); }

static void gpt_oss_kinds(void) { every_kind(FX_GPT_OSS); }
static void gpt_oss_threads(void) { threads_equal(FX_GPT_OSS, FX_AFF4); }
static void gpt_oss_mxfp4_threads(void)
{
    fx_cfg c = fx_family_cfg(FX_GPT_OSS, FX_BF16);
    c.hf_expert_names = 1;
    threads_equal_cfg(c, "gpt_oss-mxfp4");
}

static void qwen3_next_kinds(void) { every_kind(FX_QWEN3_NEXT); }
static void qwen3_next_threads(void) { threads_equal(FX_QWEN3_NEXT, FX_TQ3); }
static void qwen3_5_moe_kinds(void) { every_kind(FX_QWEN3_5_MOE); }
static void qwen3_5_moe_threads(void) { threads_equal(FX_QWEN3_5_MOE, FX_BF16); }

static void qwen2_kinds(void) { every_kind(FX_QWEN2); }
static void qwen2_moe_kinds(void) { every_kind(FX_QWEN2_MOE); }
/* use_sliding_window true: layers >= max_window_layers (1 and 2 here) attend to the last
 * sliding_window (6) positions of the 32; layer 0 to all */
static void qwen2_sliding(void)
{
    for (int a = FX_QWEN2; a <= FX_QWEN2_MOE; a++) {
        fx_cfg c = fx_family_cfg(a, a == FX_QWEN2 ? FX_TQ4 : FX_AFF4);
        c.use_sliding = 1;
        c.max_window_layers = 1;
        c.window = 6;
        against_oracle(c, a == FX_QWEN2 ? "qwen2-tq4-sliding" : "qwen2_moe-aff4-sliding");
    }
}
/* norm_topk_prob true (Qwen2MoeConfig lets a checkpoint ask for it); every layer sparse */
static void qwen2_moe_norm_topk(void)
{
    fx_cfg c = fx_family_cfg(FX_QWEN2_MOE, FX_TQ3);
    c.norm_topk = 1;
    c.mlp_only = 0;
    against_oracle(c, "qwen2_moe-tq3-norm-topk");
}
static void qwen2_moe_threads(void) { threads_equal(FX_QWEN2_MOE, FX_TQ3); }

/* gemma4 (rt_oracle.c's fx_forward_gemma4, from transformers' modeling_gemma4.py; the
 * config of google/gemma-4-26B-A4B-it at fx_family_cfg's sizes): every kind, HF fused experts
 * in float, the MLX form quantized */
static void gemma4_kinds(void) { every_kind(FX_GEMMA4); }
/* attention_k_eq_v false: the full layer has a v_proj and num_key_value_heads key heads of
 * global_head_dim; no logit softcapping (final_logit_softcapping null); full attention on
 * every layer but the first (layer_types full every 2nd, and the last) */
static void gemma4_variants(void)
{
    fx_cfg c = fx_family_cfg(FX_GEMMA4, FX_AFF8);
    c.k_eq_v = 0;
    c.softcap = 0;
    c.full_every = 2;
    c.layers = 4;
    against_oracle(c, "gemma4-aff8-kv-nocap");
    c = fx_family_cfg(FX_GEMMA4, FX_BF16); /* the window past every position: sliding == full */
    c.hf_expert_names = 1;
    c.window = 1024;
    against_oracle(c, "gemma4-bf16-hf-window1024");
}
/* "global_head_dim": null. transformers keeps None (the dataclass default 512 applies only
 * when the key is absent) and models/gemma4/modeling_gemma4.py, Gemma4TextAttention, sizes
 * full layers by `config.global_head_dim if not self.is_sliding and config.global_head_dim
 * else config.head_dim`; _compute_proportional_rope_parameters (modeling_rope_utils.py) then
 * sizes their rotation by `getattr(config, "global_head_dim", None) or hidden_size //
 * num_attention_heads`. With hidden = heads * head_dim the two agree and the model decodes
 * like the oracle with head_dim on every layer (tq took null for absent: 512, and refused the
 * model's shapes); when they disagree transformers' cos/sin cannot multiply the heads, and tq
 * refuses by name. */
static void gemma4_global_head_dim_null(void)
{
    fx_cfg c = fx_family_cfg(FX_GEMMA4, FX_BF16);
    c.hf_expert_names = 1;
    c.hidden = c.heads * c.head_dim;
    c.g_head_dim = c.head_dim;
    c.g_head_dim_null = 1;
    against_oracle(c, "gemma4-bf16-global-head-dim-null");
    c = fx_family_cfg(FX_GEMMA4, FX_BF16);
    c.g_head_dim = c.head_dim;
    c.g_head_dim_null = 1;
    CHECK(c.hidden / c.heads != c.head_dim);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/rtf-gemma4-ghd-null-%d", t_tmpdir(), (int)getpid());
    fx_model m;
    CHECK(fx_generate(&c, dir, &m) == 0);
    tq_run_opts o;
    tq_run_opts_default(&o);
    tq_err err = {0};
    double worst;
    int first;
    CHECKF(fx_oracle_compare(&m, dir, &o, 2, &worst, &first, NULL, &err) < 0 && strstr(err.msg, "global_head_dim is null"),
           "got: %s", err.msg);
    fx_free(&m);
}
static void gemma4_threads(void) { threads_equal(FX_GEMMA4, FX_TQ3); }

int main(void)
{
    RUN(mixtral_kinds);
    RUN(mixtral_no_window);
    RUN(mistral_sliding);
    RUN(mixtral_threads);
    RUN(deepseek_kinds);
    RUN(deepseek_plain_q);
    RUN(deepseek_threads);
    RUN(gpt_oss_kinds);
    RUN(gpt_oss_threads);
    RUN(gpt_oss_mxfp4_threads);
    RUN(qwen3_next_kinds);
    RUN(qwen3_next_threads);
    RUN(qwen3_5_moe_kinds);
    RUN(qwen3_5_moe_threads);
    RUN(qwen2_kinds);
    RUN(qwen2_moe_kinds);
    RUN(qwen2_sliding);
    RUN(qwen2_moe_norm_topk);
    RUN(qwen2_moe_threads);
    RUN(gemma4_kinds);
    RUN(gemma4_variants);
    RUN(gemma4_global_head_dim_null);
    RUN(gemma4_threads);
    TEST_MAIN_END();
}
