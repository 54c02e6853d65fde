/* Test fixtures for the runtime tests: tiny models of every family the runtime decodes
 * (llama, qwen3, qwen3_moe, mixtral, deepseek_v3, gpt_oss, qwen3_next, qwen3_5_moe, qwen2,
 * qwen2_moe) written
 * from a seed in f32, bf16, f16, MLX affine (4/8 bit) or TurboQuant form by rt_fixture.c,
 * together with the same weights as dense f64 matrices, and a naive f64 reference forward
 * pass (rt_oracle.c) written from the published equations, independently of runtime/. */
#ifndef TQ_RT_FIXTURE_H
#define TQ_RT_FIXTURE_H

#include <stdint.h>

enum fx_kind { FX_F32, FX_BF16, FX_F16, FX_AFF4, FX_AFF8, FX_TQ3, FX_TQ4, FX_TQ2, FX_NKINDS };
enum fx_arch { FX_LLAMA, FX_QWEN3, FX_QWEN3_MOE, FX_MIXTRAL, FX_DEEPSEEK, FX_GPT_OSS, FX_QWEN3_NEXT, FX_QWEN3_5_MOE,
               FX_QWEN2, FX_QWEN2_MOE, FX_GEMMA4 };

typedef struct fx_cfg {
    int arch, kind;
    int hidden, inter, layers, heads, kv_heads, head_dim, vocab;
    int experts, top_k, moe_inter, shared_inter, norm_topk;
    int own_codebooks;   /* with hf_expert_names 1 and TurboQuant: expert x's codebook is the
                          * usual one times 1 + x/16 (each expert its own, as per-expert
                          * tensors allow); else every expert's is the same */
    int hf_expert_names; /* HF names: per-expert tensors (qwen3_5_moe: fused gate_up, wrapped
                          * "model.language_model." root; gpt_oss: MXFP4 as released, or with 2
                          * the float layout transformers saves, x @ W); else the MLX form
                          * (stacked experts; qwen3_next/qwen3_5: norms stored as 1 + w);
                          * 3 (qwen2_moe, qwen3_moe, qwen3_next, deepseek_v3, mixtral): experts
                          * fused as transformers 5 holds them, gate_up_proj [E, 2I, H] +
                          * down_proj (mixtral: under mlp, its router mlp.gate) */
    int tied;
    double theta, eps;
    uint64_t seed;
    /* attention */
    int window;           /* sliding window (mixtral and llama as mistral: every layer; gpt_oss: even layers) */
    int yarn;             /* rope_scaling yarn with the values below */
    double rs_factor, rs_orig, rs_beta_fast, rs_beta_slow, rs_mscale, rs_mscale_all;
    int rs_truncate;
    int rope_linear, rope_llama3; /* llama / qwen3 / qwen3_moe: rope_scaling linear (rs_factor) or
                                   * llama3 (rs_factor, rs_orig and the two below) */
    double rs_low_freq, rs_high_freq;
    /* deepseek_v3 */
    int q_lora, kv_lora, qk_nope, qk_rope, v_head, n_shared, first_dense, n_group, topk_group;
    double route_scale;
    /* gpt_oss */
    double swiglu_limit;
    /* qwen3_next / qwen3_5_moe */
    int lk_heads, lv_heads, lk_dim, lv_dim, conv_k, full_interval;
    int layer_types;      /* write layer_types instead of full_attention_interval */
    int dense35;          /* with FX_QWEN3_5_MOE and experts 0: the dense qwen3_5 family (model_type
                           * qwen3_5 / qwen3_5_text, an MLP of inter on every layer) */
    int mlp_only;         /* qwen3_next: layer index + 1 of a dense layer (0: none) */
    double prf;           /* partial_rotary_factor */
    /* qwen2 / qwen2_moe (mlp_only above: a dense layer of qwen2_moe too) */
    int use_sliding;      /* use_sliding_window: layers >= max_window_layers slide by window */
    int max_window_layers, sparse_step; /* decoder_sparse_step */
    /* gemma4 (window above: sliding layers; theta: sliding layers; prf: full layers) */
    int g_head_dim, g_kv_heads, k_eq_v; /* global_head_dim, num_global_key_value_heads, attention_k_eq_v */
    int g_head_dim_null;  /* write "global_head_dim": null (g_head_dim is then what the model uses) */
    int full_every;       /* layer_types: full_attention every full_every-th layer and the last */
    double theta_full, softcap;        /* full layers' rope_theta; final_logit_softcapping (0: null) */
} fx_cfg;

typedef struct dmat {
    int rows, cols;
    double *w;
} dmat;

typedef struct fx_layer {
    int linear, moe;      /* qwen3_next: Gated DeltaNet layer; MoE (else dense MLP) */
    double *in_norm, *post_norm, *qn, *kn; /* effective weights (1 + w already added) */
    dmat q, k, v, o, gate, up, down, router, sg, su, sd, sgate;
    double *qb, *kb, *vb, *ob, *rb;        /* gpt_oss biases: q, k, v, o, router */
    double *sinks;
    dmat *eg, *eu, *ed;
    double **egb, **eub, **edb;            /* gpt_oss expert biases [E][rows] */
    double *ebias;                         /* deepseek e_score_correction_bias */
    /* deepseek MLA */
    dmat qa, qbm, kva, kvb;
    double *qa_norm, *kva_norm;
    /* Gated DeltaNet: q|k|v|z|b|a projections in the split form */
    dmat pqkv, pz, pb, pa;
    double *conv;                          /* [C][K] */
    double *A_log, *dt_bias, *gnorm;
    /* gemma4: full_attention layer; the norms around the MLP and experts; router vectors */
    int full;
    double *pre_ff, *post_ff, *pre_ff2, *post_ff1, *post_ff2, *rscale, *pscale, lscalar;
} fx_layer;

typedef struct fx_model {
    fx_cfg c;
    int embed_dtype;      /* gemma4: the dtype the embedding's rows come out in (FX_F32, FX_BF16, FX_F16) */
    dmat embed, lm;
    double *norm;
    fx_layer *L;
} fx_model;

/* Decoding state of the oracle. kc/vc (layers x ctx x kv_dim) serve llama/qwen3/qwen3_moe and
 * are allocated by the caller; the rest (other families) is allocated on first use and
 * released by fx_state_free. */
typedef struct fx_state {
    double *kc, *vc;
    int ctx;
    int nl;               /* layers of the arrays below */
    double **lk, **lv;    /* per layer [ctx][heads or kv heads][dim] */
    double **conv, **ssm; /* per linear layer: [K-1][C], [Hv][Dv][Dk] */
} fx_state;

/* The fixture's random generator (xorshift64): fx_generate seeds it from c->seed; tests may
 * seed it themselves and draw uniforms in [0, 1) with fx_uniform. */
extern uint64_t fx_rng;
double fx_uniform(void);

/* Writes model directory `dir` (config.json + model.safetensors) for c, and its dense twin
 * m (free with fx_free). Returns 0, or -1 when a file cannot be written. */
int fx_generate(const fx_cfg *c, const char *dir, fx_model *m);
/* Logits (vocab) for `token` at position pos, appending to the state s (rt_oracle.c). */
void fx_forward(const fx_model *m, fx_state *s, int token, int pos, double *logits);
void fx_state_free(fx_state *s);
void fx_free(fx_model *m);
/* A small configuration of each family that exercises every branch of it (tests). */
fx_cfg fx_family_cfg(int arch, int kind);
/* llama, qwen3 and qwen3_moe at test_runtime.c's sizes (hidden 64, two layers, 8 experts). */
fx_cfg fx_small_cfg(int arch, int kind);
/* n token ids below vocab drawn from seed (a decode's prompt and forced tokens). */
void fx_sequence(int vocab, uint64_t seed, int n, int32_t *seq);
const char *fx_kind_name(int kind);

/* The logits of a decode, collected through tq_run_opts.on_logits = fx_collect with user =
 * an fx_logits whose v holds cap steps: steps must arrive in order, from 0, and fit. */
typedef struct fx_logits {
    float *v;
    uint64_t steps, vocab, cap;
} fx_logits;
int fx_collect(void *user, uint64_t step, const float *l, uint64_t vocab);
/* The teacher-forced decode the runtime tests compare: prompt seq[0], then seq[1..n) fed
 * after each step, under o (its on_logits, user and forcing set here); n steps of logits into
 * b (steps reset first), the greedy tokens into toks. tq_run_validate's result. */
struct tq_run_opts;
struct tq_err;
int fx_decode_forced(const char *dir, struct tq_run_opts *o, const int32_t *seq, int n, fx_logits *b, int32_t *toks,
                     struct tq_err *e);
/* One step's logits against the oracle's: max |ref - got| / max |ref|, and ref's argmax. */
double fx_rel_err(const double *ref, const float *got, int n, int *ref_argmax);
/* The oracle comparison of the runtime tests: dir decoded teacher-forced under o over the
 * n-step sequence of m's config (fx_sequence), and the oracle m run over the same tokens.
 * *worst: the largest fx_rel_err of a step; returns how many steps' greedy tokens differ from
 * the oracle's argmax (the first at *first_bad, else -1), or -1 when the decode fails (e).
 * The logits (n x vocab, zeros after a failed decode) go to *keep when keep is not NULL
 * (caller frees). */
int fx_oracle_compare(const fx_model *m, const char *dir, struct tq_run_opts *o, int n, double *worst, int *first_bad,
                      float **keep, struct tq_err *e);
/* fx_oracle_compare of dir (2 threads, resident or streamed) as a test: the decode runs, every
 * greedy token is the oracle's, the relative logit error stays below 1e-4 and is not 0 (an
 * exact match would mean the oracle was not consulted); prints one line named what. */
void fx_check_oracle(const fx_model *m, const char *dir, int resident, int n, const char *what, float **keep);
/* tq_split of src into dst (2 threads, quiet), and tq_convert with every tensor kept as it is
 * (--keep '.', 2 threads): the library calls the family tests put a model through. */
int fx_split_dir(const char *src, const char *dst, struct tq_err *e);
int fx_convert_keep(const char *src, const char *dst, struct tq_err *e);

#endif
