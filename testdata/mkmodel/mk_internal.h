/* testdata/mkmodel/mk_internal.h — the generation plan shared by mk_plan.c, mk_values.c and mk_write.c. */
#ifndef TQ_MK_INTERNAL_H
#define TQ_MK_INTERNAL_H

#include "testdata/mkmodel/mkmodel.h"

enum { MK_LINEAR, MK_NORM, MK_VEC };
/* How the rows of a matrix (elements of a vector) come from its two value keys. */
enum { MK_ROWS_PLAIN, MK_ROWS_HALVES, MK_ROWS_INTERLEAVE };
/* How the values are stored. */
enum { MK_ENC_DTYPE, MK_ENC_AFFINE, MK_ENC_MXFP4 };

/* One source of values written to one tensor (or, quantized, to .weight/.scales/.biases, or
 * MXFP4 _blocks/_scales). A stacked expert tensor (E, rows, cols) holds E matrices whose
 * values are keyed by their per-expert HF names, so --naming hf and --naming mlx carry the
 * same numbers; a fused gate_up matrix takes its halves (or even/odd rows) from the gate and
 * up keys for the same reason. */
typedef struct mk_item {
    int kind;
    uint64_t n_exp;          /* matrices stacked along the first axis (1 = plain 2-D/1-D) */
    uint64_t rows, cols;     /* per matrix as written; norms/vectors: rows = 1 */
    char *key_pre, *key_suf; /* value key = key_pre [+ expert + key_suf when stacked] */
    char *key_suf2;          /* second key (rowmap != PLAIN): key_pre + expert + key_suf2 */
    int rowmap;              /* MK_ROWS_*: which rows (vector elements) come from which key */
    double mean, sigma;      /* MK_NORM / MK_VEC: mean + sigma N(0,1) */
    int add_one;             /* MLX form of a zero-centred norm: round(round(v) + 1) */
    int mxfp4_round;         /* values pass through MXFP4 first (gpt-oss experts, MLX form) */
    int enc;                 /* MK_ENC_* */
    tq_dtype dt;             /* dtype of the values (MK_ENC_DTYPE, affine scales/biases) */
    int bits, group;         /* MK_ENC_AFFINE */
    int nparts;              /* tensors written: 1, 2 (MXFP4) or 3 (affine) */
    char *names[3];          /* weight [, scales, biases] / blocks, scales */
    long widx[3];            /* writer indices, filled after the writer is open */
    uint64_t out_row_bytes[3];
} mk_item;

typedef struct mk_plan_priv {
    size_t n_items, cap_items;
    mk_item *items;
} mk_plan_priv;

/* Value key of matrix `expert` of item it, half h (0, or 1 for key_suf2); caller frees. */
char *mk_item_key(const mk_item *it, uint64_t expert, int h, tq_err *e);

/* Values of rows [row0, row0+n) of matrix `expert` of it (vectors: elements), as f32 before
 * rounding to the stored dtype. The cache keeps the recipe matrices of the last item. */
typedef struct mk_cache {
    int have[2];
    size_t item;
    uint64_t expert;
    tq_mk_matrix m[2];
} mk_cache;
int mk_item_values(const mk_item *it, size_t item_index, uint64_t seed, uint64_t expert,
                   uint64_t row0, uint64_t n, float *out, mk_cache *c, tq_err *e);
void mk_cache_free(mk_cache *c);

#endif
