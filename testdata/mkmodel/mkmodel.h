/* testdata/mkmodel/mkmodel.h — deterministic synthetic models (tq-mkmodel; libtqmk.a, not installed).
 *
 * Every value is a pure function of (seed, tensor key, element index): a counter-based
 * hash feeds a Gaussian transform built only from IEEE basic operations and sqrt, so the
 * same options give byte-identical files on every machine and for any thread count.
 * The weight recipe (documented in man/tq-mkmodel.1, relied on by quantization tests):
 *   w[r][c] = s_r * z * (8 if c is an outlier channel) * (15 if (r,c) is a tail entry) / sqrt(cols)
 *   z ~ N(0,1); s_r = exp(0.3 * N(0,1)) per row; max(1, cols/256) outlier channels per
 *   tensor (same for all rows); each entry is a tail entry with probability 1/512.
 * Norm weights: 1 + 0.05 * N(0,1). */
#ifndef TQ_MKMODEL_H
#define TQ_MKMODEL_H

#include "common/common.h"
#include "formats/family.h"
#include "formats/formats.h"

/* ------------------------------------------------------------ the recipe */
#define TQ_MK_ROW_SIGMA 0.3        /* log-normal sigma of the per-row scale */
#define TQ_MK_OUTLIER_DIV 256      /* one outlier input channel per 256 (at least one) */
#define TQ_MK_OUTLIER_MUL 8.0
#define TQ_MK_TAIL_MUL 15.0
#define TQ_MK_TAIL_THRESHOLD 0x0080000000000000ull /* P(tail) = 2^-9 ~ 0.195% */
#define TQ_MK_NORM_SIGMA 0.05

/* Counter-based randomness: 64-bit key of (seed, name); Gaussian pair number p of a stream. */
uint64_t tq_mk_key(uint64_t seed, const char *name);
uint64_t tq_mk_mix64(uint64_t x);
void tq_mk_gauss_pair(uint64_t stream, uint64_t p, double *z0, double *z1);
double tq_mk_gauss(uint64_t stream, uint64_t i); /* element i: component i&1 of pair i>>1 */
/* Plain-arithmetic ln (x > 0, finite) and exp (|x| < 700): same bits on every machine. */
double tq_mk_log(double x);
double tq_mk_exp(double x);

/* One weight matrix (rows x cols) of the recipe, identified by its key name. */
typedef struct tq_mk_matrix {
    uint64_t key;
    uint64_t rows, cols;
    size_t n_outliers;
    uint32_t *outliers;        /* sorted channel indices */
    unsigned char *is_outlier; /* cols flags */
    double inv_sqrt_cols;
} tq_mk_matrix;

int tq_mk_matrix_init(tq_mk_matrix *m, uint64_t seed, const char *name, uint64_t rows,
                      uint64_t cols, tq_err *e);
void tq_mk_matrix_free(tq_mk_matrix *m);
double tq_mk_matrix_row_scale(const tq_mk_matrix *m, uint64_t row);
int tq_mk_matrix_is_tail(const tq_mk_matrix *m, uint64_t row, uint64_t col);
/* Values of rows [row0, row0+n) as f32 (before rounding to the model dtype), n*cols floats. */
void tq_mk_matrix_rows(const tq_mk_matrix *m, uint64_t row0, uint64_t n, float *out);
/* Norm weights 1 + 0.05 z for the vector NAME, elements [i0, i0+n). */
void tq_mk_norm_values(uint64_t seed, const char *name, uint64_t i0, uint64_t n, float *out);
/* Any other vector (biases, zero-centred norms, A_log, dt_bias, sinks): mean + sigma z. */
void tq_mk_vector_values(uint64_t seed, const char *name, uint64_t i0, uint64_t n, double mean,
                         double sigma, float *out);
/* MXFP4 encoding of 32 values (gpt-oss experts): the smallest power-of-two scale with
 * max|w| / scale <= 6, each value rounded to the nearest FP4 E2M1 (ties to the even code);
 * element 2j in the low nibble of byte j. Decoding is formats.h's tq_mxfp4_decode. */
void tq_mk_mxfp4_encode(const float *w, uint8_t blocks[16], uint8_t *scale);

/* ------------------------------------------------------------- models */
/* One per model family of formats/family.h (kimi_k2 is deepseek_v3 with Kimi's config), plus
 * the ngram row table. The first four keep their old numbers. */
typedef enum tq_mk_arch {
    TQ_MK_LLAMA, TQ_MK_QWEN3, TQ_MK_QWEN3_MOE, TQ_MK_NGRAM, TQ_MK_QWEN2, TQ_MK_QWEN2_MOE,
    TQ_MK_QWEN3_NEXT, TQ_MK_QWEN3_5, TQ_MK_QWEN3_5_MOE, TQ_MK_MIXTRAL, TQ_MK_DEEPSEEK_V3,
    TQ_MK_KIMI_K2, TQ_MK_GPT_OSS, TQ_MK_GEMMA4, TQ_MK_ARCH_COUNT
} tq_mk_arch;

typedef struct tq_mk_opts {
    tq_mk_arch arch;
    long layers, hidden, intermediate, moe_intermediate, experts, top_k;
    long heads, kv_heads, head_dim, vocab;
    int shared_expert;         /* qwen2_moe-style shared expert (intermediate = `intermediate`) */
    /* family dimensions (presets; see tq-mkmodel(1)) */
    long shared_inter;         /* shared expert width (qwen2_moe, qwen3_next, qwen3_5_moe) */
    long mtp_layers;           /* MTP head layers (qwen3_next, qwen3_5*: mtp.*; deepseek: extra layer) */
    long lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_kernel, full_attn_interval;
    long q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    long n_shared_experts, first_dense, n_group, topk_group;
    long sliding_window;       /* gpt_oss, gemma4 */
    int naming_mlx;            /* stacked mlp.switch_mlp.* experts instead of per-expert names */
    int tie_embeddings;
    tq_dtype dtype;            /* BF16, F16 or F32 */
    uint64_t shard_size;
    uint64_t seed;
    int quant_bits;            /* 0 (none), 4 or 8: MLX affine quantization of linear layers */
    int group_size;            /* affine group size (models: 64, ngram: 32) */
    /* --arch ngram */
    uint64_t rows;
    long width;
    int bits;
    const char *prefix;
    int threads;               /* 0 = tq_default_threads() */
    int quiet;
    const tq_provenance *provenance; /* tq-provenance.json to write, or NULL: none */
    int force;                 /* replace an earlier tq-mkmodel output (else a non-empty
                                * OUTPUT_DIR is refused) */
} tq_mk_opts;

int tq_mk_arch_from_name(const char *s, tq_mk_arch *out);
const char *tq_mk_arch_name(tq_mk_arch a);
/* The I-th arch in --arch order: the family table's order (formats/family.h; a family's
 * archs in enum order, kimi_k2 after deepseek_v3), then ngram. */
tq_mk_arch tq_mk_arch_at(int i);
/* "llama, qwen2, ..., qwen3_moe (default), ... or ngram" in that order, for --help */
const char *tq_mk_arch_list(void);
/* The family an arch generates (NULL for ngram). */
const tq_family *tq_mk_family(tq_mk_arch a);
/* An arch whose routed experts tq-mkmodel writes (any MoE family). */
int tq_mk_is_moe(tq_mk_arch a);
/* Defaults for arch at preset size ("tiny" or "8g"). */
int tq_mk_preset(tq_mk_opts *o, tq_mk_arch arch, const char *size, tq_err *e);
/* Check option consistency (usage errors: TQ_EUSAGE). */
int tq_mk_validate(const tq_mk_opts *o, tq_err *e);

/* What tq_mkmodel writes: one entry per safetensors tensor, sorted by name. */
typedef struct tq_mk_plan {
    size_t n;
    tq_st_decl *decls;         /* names owned by the plan */
    uint64_t total_bytes;
    void *priv;                /* generation items */
} tq_mk_plan;
int tq_mk_plan_build(tq_mk_plan *p, const tq_mk_opts *o, tq_err *e);
void tq_mk_plan_free(tq_mk_plan *p);

/* config.json of the model (caller frees with cJSON_Delete). */
/* Gemma 4's num_global_key_value_heads: a quarter of num_key_value_heads, at least 1
 * (google/gemma-4-26B-A4B-it: 8 and 2) */
long tq_mk_gemma4_global_kv(const tq_mk_opts *o);
int tq_mk_config(const tq_mk_opts *o, struct cJSON **out, tq_err *e);
/* tokenizer.json: a byte-level BPE tokenizer (NFC, Qwen2 split regex) with o->vocab ids at
 * most: <unk> <s> </s>, the 256 bytes, then merges learnt from a built-in text. */
int tq_mk_tokenizer_json(const tq_mk_opts *o, struct cJSON **out, tq_err *e);

/* Write the model directory DIR: weights (sharded per shard_size), config.json,
 * tokenizer_config.json, tokenizer.json; for ngram DIR/model.safetensors and config.json.
 * DIR is created, or must be empty or hold only an earlier tq-mkmodel output (replaced in
 * place, partial files of an interrupted run removed); anything else: TQ_EEXIST.
 * On failure nothing is left under a final weight-file name. */
int tq_mkmodel(const char *dir, const tq_mk_opts *o, tq_err *e);

#endif
