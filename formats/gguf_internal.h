/* formats/gguf_internal.h — what the GGUF files of formats/ share and nothing else does. */
#ifndef TQ_GGUF_INTERNAL_H
#define TQ_GGUF_INTERNAL_H

#include "formats/formats.h"

struct cJSON;

/* ggml type ids used by name. */
enum {
    TQ_GGML_F32 = 0, TQ_GGML_F16 = 1, TQ_GGML_Q8_K = 15, TQ_GGML_I8 = 24, TQ_GGML_I16 = 25,
    TQ_GGML_I32 = 26, TQ_GGML_I64 = 27, TQ_GGML_F64 = 28, TQ_GGML_BF16 = 30, TQ_GGML_MXFP4 = 39
};

/* The i-quant lattices (gguf_iq_tables.c): entry k holds grid point k, element j in byte j. */
extern const uint64_t tq_ggml_iq2xxs_grid[256], tq_ggml_iq2xs_grid[512], tq_ggml_iq2s_grid[1024], tq_ggml_iq1s_grid[2048];
extern const uint32_t tq_ggml_iq3xxs_grid[256], tq_ggml_iq3s_grid[512];

/* What a metadata key must hold where tq reads it. */
typedef enum tq_gguf_want {
    TQ_GGUF_WANT_UINT, /* an integer type, value >= 0 */
    TQ_GGUF_WANT_NUM,  /* an integer or float type */
    TQ_GGUF_WANT_STR,
    TQ_GGUF_WANT_BOOL,
} tq_gguf_want;
/* 0 when key is absent or holds what want says; else -1 with an error naming the file, the
 * key, its type (or value) and what was expected. */
int tq_gguf_check_key(const tq_gguf_file *f, const char *key, tq_gguf_want want, tq_err *e);

/* Architectures with a known HF name mapping (opaque). */
typedef struct tq_gguf_arch tq_gguf_arch;
const tq_gguf_arch *tq_gguf_arch_find(const char *arch);
int tq_gguf_arch_permutes_qk(const tq_gguf_arch *a);
/* The architecture of a file: "llama" with experts is Mixtral. */
const tq_gguf_arch *tq_gguf_arch_of(const tq_gguf_file *f, const char *arch);
int tq_gguf_arch_is_mixtral(const tq_gguf_arch *a);
/* 1 when its tensor names have an HF/MLX mapping (config-only architectures: 0). */
int tq_gguf_arch_maps_names(const tq_gguf_arch *a);

typedef enum tq_gguf_role {
    TQ_GGUF_ROLE_OTHER,
    TQ_GGUF_ROLE_Q,           /* blk.N.attn_q.{weight,bias}: llama's rows permuted */
    TQ_GGUF_ROLE_K,           /* blk.N.attn_k.{weight,bias} */
    TQ_GGUF_ROLE_SHEXP_GATE,  /* 1-D in GGUF, (1, n) in HF */
    TQ_GGUF_ROLE_K_B,         /* deepseek2 blk.N.attn_k_b: with attn_v_b, llama.cpp's split of kv_b_proj */
    TQ_GGUF_ROLE_V_B,
    TQ_GGUF_ROLE_NORM_SHIFT,  /* gemma3 norms: stored as HF's weight + 1 */
    TQ_GGUF_ROLE_ROPE_FREQS,  /* llama rope_freqs: llama 3 rope scaling, a config.json field */
} tq_gguf_role;

/* HF name for a GGUF tensor name of architecture a (malloc'd), or NULL when there is none;
 * Mixtral gets the names of mlx-lm's Mixtral (block_sparse_moe.gate, .switch_mlp.*). */
char *tq_gguf_hf_name(const tq_gguf_arch *a, const char *gguf_name, tq_gguf_role *role);
/* rope_scaling {rope_type llama3, factor, low/high_freq_factor, original_max_position_embeddings}
 * added to config c from llama.cpp's rope_freqs values (n of them, one per rotary pair), the
 * parameters those values were made from (checked by recomputing every value). -1 with why. */
int tq_gguf_llama3_rope(struct cJSON *c, const float *rf, uint64_t n, char *why, size_t cap);
/* Every ARCH.* and tokenizer id key tq reads holds a value of its kind (tq_gguf_check_key);
 * -1 naming the first that does not. */
int tq_gguf_check_arch_keys(const tq_gguf_file *f, const char *arch, tq_err *e);
/* config.json from ARCH.* metadata. */
struct cJSON *tq_gguf_config(const tq_gguf_file *f, const char *arch, uint64_t vocab, int tied, tq_err *e);

/* Source row of HF row r after undoing llama.cpp's Q/K permutation (rows / n_head = D). */
static inline uint64_t tq_gguf_unpermute_row(uint64_t r, uint64_t rows, uint64_t n_head)
{
    uint64_t D = rows / n_head, h = r / D, rem = r % D, half = D / 2;
    return h * D + 2 * (rem % half) + rem / half;
}

#endif
