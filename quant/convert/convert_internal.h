/* quant/convert/convert_internal.h — the converter's plan, shared by quant/convert/convert*.c only.
 *
 * A conversion is planned completely before anything is written: every output tensor is
 * declared up front (the model writer lays out shards from the declarations), and the work
 * is cut into jobs of bounded size that any thread may run in any order. Each job writes a
 * disjoint byte range and keeps its own error sums; sums are reduced in job order, so the
 * output and the report never depend on the thread count. */
#ifndef TQ_CONVERT_INTERNAL_H
#define TQ_CONVERT_INTERNAL_H

#include "formats/family.h"
#include "formats/formats.h"
#include "quant/convert/convert.h"

enum cv_kind { CV_COPY, CV_QUANT, CV_DEQUANT, CV_AFFINE, CV_AFFINE_DEQUANT };

/* Part p of an item (an expert, or the whole tensor when E == 1). */
typedef struct cv_part {
    const tq_model_tensor *src;  /* COPY/QUANT/AFFINE: the values (MXFP4: the blocks);
                                  * DEQUANT: the packed weight */
    uint64_t src_off;            /* element offset of the part in src (MXFP4: decoded elements) */
    uint64_t stride;             /* elements from one row (rowwise COPY: one element) to the
                                  * next in src; 0 = contiguous (gpt-oss's interleaved rows) */
    uint64_t cstride;            /* elements from one column to the next in src; 0 = 1. Set
                                  * (with stride) for a transposed read: transformers' gpt-oss
                                  * experts [H, 2I] / [I, H] read as [I, H] / [H, I] rows */
    const tq_model_tensor *scales; /* DEQUANT, AFFINE_DEQUANT: the module's scales; MXFP4
                                  * sources: the E8M0 scales (one per 32 decoded elements) */
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
    uint64_t rows, cols;         /* per part; COPY: rows = 1, cols = elements, unless rowwise */
    tq_dtype src_dtype, out_dtype; /* src_dtype F32 for MXFP4 sources (decoded exactly) */
    int mxfp4;                   /* parts read MXFP4 blocks + scales */
    int rowwise;                 /* COPY in rows of `cols` (strided or MXFP4 sources) */
    float add;                   /* COPY: value + add, rounded to out_dtype (norm shift, +-1) */
    /* QUANT / DEQUANT */
    int bits;
    size_t group, block;
    const tq_codebook *cb;       /* QUANT */
    int scale_method;            /* QUANT: enum tq_scale_method */
    float codebook[16];          /* DEQUANT: the file's codebook */
    float *signs;                /* cols signs */
    int norot;                   /* rotation "none" (all-ones signs): no Hadamard */
    long out_scales, out_codebook, out_signs; /* QUANT outputs (weight is parts[].out) */
    /* AFFINE / AFFINE_DEQUANT: scales and biases dtype, MLX rule; AFFINE also writes biases */
    tq_dtype qdtype;
    int affine_rule;
    long out_biases;
    const char *note;            /* why a candidate stayed unquantized */
    /* QUANT with --codebook fitted or a byte budget (convert_fit.c): the settings measured
     * on the module's row sample, and the one used (it->cb points to its codebook) */
    struct cv_choice *choices;
    int n_choices, chosen;
    double importance;           /* budget: weight of the module's squared error */
    int bias_of_quant;           /* COPY of a TurboQuant module's bias (counted in its bytes) */
    /* results */
    double err2, sum2;
    uint64_t out_bytes;
} cv_item;

/* One setting of a quantized module, measured on its row sample (convert_fit.c). */
typedef struct cv_choice {
    int bits;
    size_t group;
    uint64_t bytes;              /* stored bytes: weight words, scales, codebook, signs */
    double err2, sum2;           /* Σ(w-ŵ)², Σw² on the sample with the codebook used */
    double err2_gauss;           /* Σ(w-ŵ)² on the sample with the Gaussian codebook */
    int fitted;                  /* cb is fitted and beat the Gaussian codebook */
    int fit_iters;               /* Lloyd iterations of the fit */
    tq_codebook cb;              /* the fitted codebook */
} cv_choice;

typedef struct cv_decl {
    char *name;
    tq_dtype dtype;
    int ndim;
    uint64_t shape[TQ_MAX_DIMS];
} cv_decl;

/* One output tensor of quantize / plain mode before planning: where its values come from. */
typedef struct cv_src {
    const tq_model_tensor *t;    /* values (MXFP4: blocks) */
    const tq_model_tensor *scales; /* MXFP4 scales, else NULL */
    uint64_t off, stride, cstride; /* as cv_part's src_off, stride and cstride */
} cv_src;

typedef struct cv_group {
    char *out_name;
    size_t n;                    /* pieces: one per expert when `experts`, else 1 */
    cv_src *src;
    int experts;                 /* pieces stacked on a new leading expert axis */
    uint64_t rows, cols;         /* one piece as a matrix (vectors: rows 1) */
    int ndim;
    uint64_t shape[TQ_MAX_DIMS]; /* the output tensor's shape */
    tq_dtype dtype;              /* the values' dtype (F32 for MXFP4) */
    int mxfp4;
    float add;                   /* value shift (a zero-centred norm in the MLX form: +1) */
    int planned;                 /* consumed (a quantized module's bias) */
} cv_group;

/* Input tensors -> output tensors for quantize and plain modes, through the family table
 * (formats/family.h): per-expert, fused and MXFP4 experts stacked or split into the MLX
 * container, wrapped roots renamed, the transforms mlx-lm's sanitize would apply, MTP heads
 * kept or left out as the family says. Checks the experts against config.json (count, fused
 * widths) and names the offending tensor. keep_names: every tensor as it is. */
int cv_groups_build(const tq_model *m, int keep_names, cv_group **out, size_t *n_out, size_t *n_dropped,
                    tq_err *e);
void cv_groups_free(cv_group *g, size_t n);

typedef struct cv_plan {
    const tq_model *m;
    const tq_convert_opts *o;
    const tq_family *family;     /* from config.json, or NULL */
    tq_codebook cbs[TQ_MAX_BITS + 1];
    size_t n_items, cap_items;
    cv_item *items;
    size_t n_decls, cap_decls;
    cv_decl *decls;
    struct cJSON *qconfig;       /* per-module overrides for config.json */
    size_t n_dropped;            /* input tensors left out (MTP heads mlx-lm drops) */
    int q_bits;                  /* config.json's top-level bits and group size (cv_fit) */
    size_t q_group;
    uint64_t budget_bytes;       /* --target-*: bytes allowed for the TurboQuant modules */
} cv_plan;

/* A growable buffer (convert_run.c): cv_grow returns it with room for n bytes, or NULL. */
typedef struct cv_buf {
    void *p;
    size_t cap;
} cv_buf;
void *cv_grow(cv_buf *b, size_t n, tq_err *e);
/* Rows [r0, r0+n) of part pt (it->cols values each) as f32, whatever the source (a plain,
 * strided or MXFP4 tensor); inb and scratch are the caller's buffers. */
int cv_read_rows_f32(cv_buf *inb, cv_buf *scratch, const cv_item *it, const cv_part *pt, uint64_t r0, uint64_t n,
                     float *out, tq_err *e);

/* --codebook fitted and --target-bpw / --target-size (convert_fit.c): sample each quantized
 * module's rows, fit codebooks, measure the error of each setting, choose settings under the
 * budget and reshape the declarations accordingly. Before the writer is opened. */
int cv_fit(cv_plan *p, tq_err *e);
/* Stored bytes of a TurboQuant module at (bits, group). */
uint64_t cv_quant_bytes(const cv_item *it, int bits, size_t group);

int cv_plan_build(cv_plan *p, const tq_model *m, const tq_convert_opts *o, tq_err *e);
/* Dequantize mode (convert_dequant.c): TurboQuant and MLX affine modules back to floats under
 * the family's HF names. */
int cv_plan_dequant(cv_plan *p, tq_err *e);
/* Plan building blocks shared by convert_plan.c and convert_dequant.c. */
cv_item *cv_new_item(cv_plan *p, int kind, tq_err *e);
/* Declare an output tensor; its declaration index, or -1. */
long cv_declare(cv_plan *p, const char *name, tq_dtype dt, int ndim, const uint64_t *shape, tq_err *e);
/* Index of an already declared output, or -1. */
long cv_find_decl(const cv_plan *p, const char *name);
void cv_plan_free(cv_plan *p);
/* After the writer exists: resolve output indices of every part. */
int cv_plan_resolve(cv_plan *p, tq_model_writer *w, tq_err *e);
/* --resume (convert_resume.c): the writer opened with the shards the journal kept; a tracker
 * that skips the items whose every shard was kept (their error sums from the journal) and,
 * once the last item writing into a shard is done, finishes and journals that shard. Every
 * cv_track_* call takes a NULL tracker as "not resuming". */
typedef struct cv_track cv_track;
int cv_track_writer_open(tq_model_writer **w, const char *dir, const tq_st_decl *decls, size_t n, uint64_t shard_size,
                         const char *const *mk, const char *const *mv, size_t n_meta, tq_resume *res, tq_err *e);
int cv_track_open(cv_track **t, cv_plan *p, tq_model_writer *w, tq_resume *res, tq_err *e);
void cv_track_free(cv_track *t);
int cv_track_skip(const cv_track *t, size_t item);
void cv_track_jobs(cv_track *t, size_t item, uint64_t n_jobs);
/* Before the jobs run: shards nothing is left to write into. */
int cv_track_start(cv_track *t, tq_err *e);
/* 1 when this was the item's last job (the caller then sets its sums and calls item_done). */
int cv_track_job_done(cv_track *t, size_t item);
int cv_track_item_done(cv_track *t, size_t item, tq_err *e);
/* Run every job on o->threads threads, writing through w (track: NULL or --resume's). */
int cv_run(cv_plan *p, tq_model_writer *w, cv_track *track, tq_err *e);
uint64_t cv_decl_bytes(const cv_decl *d);

#endif
