/* Test fixtures for the runtime tests (rt_fixture.c): tiny llama / qwen3 / qwen3_moe models
 * written from a seed in f32, bf16, f16, MLX affine (4/8 bit) or TurboQuant form, together
 * with the same weights as dense f64 matrices, and a naive f64 reference forward pass written
 * independently of runtime/. */
#ifndef TQ_RT_FIXTURE_H
#define TQ_RT_FIXTURE_H

#include <stdint.h>

enum fx_kind { FX_F32, FX_BF16, FX_F16, FX_AFF4, FX_AFF8, FX_TQ3, FX_TQ4, FX_TQ2 };
enum fx_arch { FX_LLAMA, FX_QWEN3, FX_QWEN3_MOE };

typedef struct fx_cfg {
    int arch, kind;
    int hidden, inter, layers, heads, kv_heads, head_dim, vocab;
    int experts, top_k, moe_inter, shared_inter, norm_topk;
    int hf_expert_names; /* per-expert HF names instead of stacked switch_mlp */
    int tied;
    double theta, eps;
    uint64_t seed;
} fx_cfg;

typedef struct dmat {
    int rows, cols;
    double *w;
} dmat;

typedef struct fx_layer {
    double *in_norm, *post_norm, *qn, *kn;
    dmat q, k, v, o, gate, up, down, router, sg, su, sd, sgate;
    dmat *eg, *eu, *ed;
} fx_layer;

typedef struct fx_model {
    fx_cfg c;
    dmat embed, lm;
    double *norm;
    fx_layer *L;
} fx_model;

typedef struct fx_state {
    double *kc, *vc; /* layers x ctx x kv_dim */
    int ctx;
} fx_state;

/* The fixture's random generator (xorshift64): fx_generate seeds it from c->seed; tests may
 * seed it themselves and draw uniforms in [0, 1) with fx_uniform. */
extern uint64_t fx_rng;
double fx_uniform(void);

/* Writes model directory `dir` (config.json + model.safetensors) for c, and its dense twin
 * m (free with fx_free). Returns 0, or -1 when a file cannot be written. */
int fx_generate(const fx_cfg *c, const char *dir, fx_model *m);
/* Logits (vocab) for `token` at position pos, appending to the KV cache in s. */
void fx_forward(const fx_model *m, fx_state *s, int token, int pos, double *logits);
void fx_free(fx_model *m);

/* The logits of a decode, collected through tq_run_opts.on_logits = fx_collect with user =
 * an fx_logits whose v holds cap steps: steps must arrive in order, from 0, and fit. */
typedef struct fx_logits {
    float *v;
    uint64_t steps, vocab, cap;
} fx_logits;
int fx_collect(void *user, uint64_t step, const float *l, uint64_t vocab);

#endif
