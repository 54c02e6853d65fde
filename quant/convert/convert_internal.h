/* quant/convert/convert_internal.h — the converter's plan, shared by quant/convert/convert*.c only.
 *
 * A conversion is planned completely before anything is written: every output tensor is
 * declared up front (the model writer lays out shards from the declarations), and the work
 * is cut into jobs of bounded size that any thread may run in any order. Each job writes a
 * disjoint byte range and keeps its own error sums; sums are reduced in job order, so the
 * output and the report never depend on the thread count. */
#ifndef TQ_CONVERT_INTERNAL_H
#define TQ_CONVERT_INTERNAL_H

#include "formats/formats.h"
#include "quant/convert/convert.h"

enum cv_kind { CV_COPY, CV_QUANT, CV_DEQUANT, CV_AFFINE, CV_AFFINE_DEQUANT };

/* Part p of an item (an expert, or the whole tensor when E == 1). */
typedef struct cv_part {
    const tq_model_tensor *src;  /* COPY/QUANT: the values; DEQUANT: the packed weight */
    uint64_t src_off;            /* element offset of the part in src */
    const tq_model_tensor *scales; /* DEQUANT, AFFINE_DEQUANT */
    uint64_t scales_off;
    const tq_model_tensor *biases; /* AFFINE_DEQUANT */
    long out;                    /* output tensor (writer index) */
    uint64_t out_off;            /* element offset of the part in it */
} cv_part;

typedef struct cv_item {
    int kind;
    char *name;                  /* report name: output tensor (quantized: P.weight) */
    char *source;                /* first input tensor */
    uint64_t E;
    cv_part *parts;
    uint64_t rows, cols;         /* per part; COPY: rows = 1, cols = elements */
    tq_dtype src_dtype, out_dtype;
    /* QUANT / DEQUANT */
    int bits;
    size_t group, block;
    const tq_codebook *cb;       /* QUANT */
    int scale_method;            /* QUANT: enum tq_scale_method */
    float codebook[16];          /* DEQUANT: the file's codebook */
    float *signs;                /* cols signs */
    long out_scales, out_codebook, out_signs; /* QUANT outputs (weight is parts[].out) */
    /* AFFINE / AFFINE_DEQUANT: scales and biases dtype, MLX rule; AFFINE also writes biases */
    tq_dtype qdtype;
    int affine_rule;
    long out_biases;
    const char *note;            /* why a candidate stayed unquantized */
    int bias_of_quant;           /* COPY of a TurboQuant module's bias (counted in its bytes) */
    /* results */
    double err2, sum2;
    uint64_t out_bytes;
} cv_item;

typedef struct cv_decl {
    char *name;
    tq_dtype dtype;
    int ndim;
    uint64_t shape[TQ_MAX_DIMS];
} cv_decl;

typedef struct cv_plan {
    const tq_model *m;
    const tq_convert_opts *o;
    tq_codebook cbs[TQ_MAX_BITS + 1];
    size_t n_items, cap_items;
    cv_item *items;
    size_t n_decls, cap_decls;
    cv_decl *decls;
    struct cJSON *qconfig;       /* per-module overrides for config.json */
} cv_plan;

int cv_plan_build(cv_plan *p, const tq_model *m, const tq_convert_opts *o, tq_err *e);
void cv_plan_free(cv_plan *p);
/* After the writer exists: resolve output indices of every part. */
int cv_plan_resolve(cv_plan *p, tq_model_writer *w, tq_err *e);
/* Run every job on o->threads threads, writing through w. */
int cv_run(cv_plan *p, tq_model_writer *w, tq_err *e);
uint64_t cv_decl_bytes(const cv_decl *d);

#endif
