/* testdata/mkmodel/mk_internal.h — the generation plan shared by mk_plan.c and mk_write.c. */
#ifndef TQ_MK_INTERNAL_H
#define TQ_MK_INTERNAL_H

#include "testdata/mkmodel/mkmodel.h"

enum { MK_LINEAR, MK_NORM };

/* One source of values written to one tensor (or, quantized, to .weight/.scales/.biases).
 * A stacked expert tensor (E, rows, cols) holds E matrices whose values are keyed by their
 * per-expert HF names, so --naming hf and --naming mlx carry the same numbers. */
typedef struct mk_item {
    int kind;
    uint64_t n_exp;          /* matrices stacked along the first axis (1 = plain 2-D/1-D) */
    uint64_t rows, cols;     /* per matrix; norms: rows = 1 */
    char *key_pre, *key_suf; /* value key = key_pre [+ expert + key_suf when stacked] */
    int bits, group;         /* bits > 0: affine-quantized */
    char *names[3];          /* weight [, scales, biases] */
    long widx[3];            /* writer indices, filled after the writer is open */
    uint64_t out_row_bytes[3];
} mk_item;

typedef struct mk_plan_priv {
    size_t n_items, cap_items;
    mk_item *items;
} mk_plan_priv;

/* Value key of matrix `expert` of item it (caller frees). */
char *mk_item_key(const mk_item *it, uint64_t expert, tq_err *e);

#endif
