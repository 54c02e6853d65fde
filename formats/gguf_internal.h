/* formats/gguf_internal.h — what the GGUF files of formats/ share and nothing else does. */
#ifndef TQ_GGUF_INTERNAL_H
#define TQ_GGUF_INTERNAL_H

#include "formats/formats.h"

struct cJSON;

/* ggml's tensor type ids, as ggml/include/ggml.h numbers them (enum ggml_type; checked against
 * llama.cpp commit 004eaba8, where 4 and 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8)
 * and 36-38 (IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) are removed, and GGML_TYPE_COUNT is 40). The
 * ids are a file format: ggml only ever adds at the end. gguf_dequant.c has one row per id
 * (name, geometry, decoder, checks); tests/cli/ggml-types-named.sh keeps bare numbers out of
 * formats/, and test_gguf_types holds every row's id and name to ggml.h's list. */
enum tq_ggml_type {
    TQ_GGML_F32 = 0,
    TQ_GGML_F16 = 1,
    TQ_GGML_Q4_0 = 2,
    TQ_GGML_Q4_1 = 3,
    TQ_GGML_Q5_0 = 6,
    TQ_GGML_Q5_1 = 7,
    TQ_GGML_Q8_0 = 8,
    TQ_GGML_Q8_1 = 9,
    TQ_GGML_Q2_K = 10,
    TQ_GGML_Q3_K = 11,
    TQ_GGML_Q4_K = 12,
    TQ_GGML_Q5_K = 13,
    TQ_GGML_Q6_K = 14,
    TQ_GGML_Q8_K = 15,
    TQ_GGML_IQ2_XXS = 16,
    TQ_GGML_IQ2_XS = 17,
    TQ_GGML_IQ3_XXS = 18,
    TQ_GGML_IQ1_S = 19,
    TQ_GGML_IQ4_NL = 20,
    TQ_GGML_IQ3_S = 21,
    TQ_GGML_IQ2_S = 22,
    TQ_GGML_IQ4_XS = 23,
    TQ_GGML_I8 = 24,
    TQ_GGML_I16 = 25,
    TQ_GGML_I32 = 26,
    TQ_GGML_I64 = 27,
    TQ_GGML_F64 = 28,
    TQ_GGML_IQ1_M = 29,
    TQ_GGML_BF16 = 30,
    TQ_GGML_TQ1_0 = 34,
    TQ_GGML_TQ2_0 = 35,
    TQ_GGML_MXFP4 = 39,
    TQ_GGML_COUNT = 40,
};

/* The dtype a one-element ggml type is presented in unchanged (F32, F16, BF16, F64, I8..I64):
 * 1 with *dt set; 0 for block types and unknown ids (presented as their F32 dequantization). */
int tq_ggml_type_dtype(uint32_t type, tq_dtype *dt);

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
/* Gemma 4: rope_parameters.full_attention.partial_rotary_factor of config c from the rope_freqs
 * conversion/gemma.py's Gemma4Model.generate_extra_tensors writes (n = global_head_dim / 2
 * values: 1.0 for the turned pairs, then 1e30). -1 with why. */
int tq_gguf_gemma4_rope(struct cJSON *c, const float *rf, uint64_t n, char *why, size_t cap);
/* The architecture is Gemma 4 (its rope_freqs and k_eq_v are read from the tensors). */
int tq_gguf_arch_is_gemma4(const tq_gguf_arch *a);
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
