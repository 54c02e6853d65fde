/* quant/convert/convert.h — tq-convert: a model directory, .safetensors or GGUF file to a
 * TurboQuant model directory (or back, or a plain dtype copy), streamed tensor by tensor over
 * the kernels of quant/quant.h. */
#ifndef TQ_CONVERT_H
#define TQ_CONVERT_H

#include "common/common.h"
#include "quant/quant.h"

TQ_BEGIN_DECLS

/* A model directory (or .safetensors / GGUF file, whatever tq_model_open reads) to a
 * TurboQuant model directory (man tq-formats(5), TURBOQUANT WEIGHTS), or back (dequantize),
 * or a plain dtype copy.
 * Output goes to OUT.partial-XXXXXX and is renamed into place only when complete. */
enum tq_convert_mode { TQ_CONVERT_QUANTIZE = 0, TQ_CONVERT_DEQUANTIZE = 1, TQ_CONVERT_PLAIN = 2 };
/* Quantization method: TurboQuant (man tq-formats(5), TURBOQUANT WEIGHTS) or MLX's own affine
 * format (MLX AFFINE WEIGHTS), bit for bit as mlx.core.quantize writes it. */
enum tq_convert_method { TQ_METHOD_TURBOQUANT = 0, TQ_METHOD_AFFINE = 1 };
/* Embeddings: -1 the method's default (TurboQuant: kept; affine: quantized like every linear,
 * as mlx-lm does), 0 kept as they are, 4 or 8 MLX affine at that many bits. */
enum { TQ_EMBED_DEFAULT = -1, TQ_EMBED_KEEP = 0 };

/* Codebooks: the Lloyd-Max table of N(0,1) (default), or one fitted per module. */
enum tq_codebook_kind { TQ_CODEBOOK_GAUSSIAN = 0, TQ_CODEBOOK_FITTED = 1 };

typedef struct tq_convert_opts {
    int mode;               /* enum tq_convert_mode */
    int method;             /* enum tq_convert_method */
    int affine_rule;        /* enum tq_affine_rule (affine: TQ_AFFINE_GPU, what mlx_lm.convert
                               computes on a Mac) */
    int embed;              /* TQ_EMBED_DEFAULT, TQ_EMBED_KEEP, 4 or 8 */
    int bits;               /* TurboQuant 2, 3, 4; affine 4, 8 */
    size_t group_size;      /* 32, 64, 128 */
    int scale;              /* enum tq_scale_method */
    int codebook;           /* enum tq_codebook_kind */
    double target_bpw;      /* > 0: choose bits and group size per module for this many
                               bits per quantized weight (convert_fit.c) */
    uint64_t target_size;   /* > 0: the same for this many bytes of output tensors */
    uint64_t seed;          /* rotation_seed (42) */
    int rotation_none;      /* quantize unrotated (all-ones signs, no Hadamard); config says
                               rotation "none" */
    size_t n_bits_for;      /* --bits-for REGEX=B, in order (last match wins) */
    const char *const *bits_for_re;
    const int *bits_for_bits;
    size_t n_keep;          /* --keep REGEX */
    const char *const *keep_re;
    int dtype;              /* tq_dtype for unquantized float tensors, -1 = keep the input's
                               (dequantize: dequantized weights default to BF16) */
    uint64_t shard_size;    /* bytes of tensor data per shard (5 GiB) */
    int threads;
    int force;              /* replace an existing non-empty OUTPUT_DIR */
    int keep_names;         /* no expert stacking / unstacking */
    int quiet;              /* no progress */
    int allow_nonfinite;    /* copy or dequantize NaN / infinite values instead of refusing */
    int resume;             /* build in OUTPUT_DIR.partial-resume with a journal; keep the
                               shards a run of the same command finished there */
    const struct tq_provenance *provenance; /* tq-provenance.json to write, or NULL: none */
    int force_space;        /* start without checking that the output fits the free space
                               (checked by default, before anything is written: TQ_EIO) */
} tq_convert_opts;

TQ_API void tq_convert_opts_default(tq_convert_opts *o);

typedef struct tq_convert_tensor {
    char *name;             /* output tensor (quantized: the module's P.weight) */
    char *source;           /* first input tensor it came from */
    int quantized;          /* 1: quantized module (TurboQuant or affine), 0: copied/converted/dequantized */
    int affine;             /* quantized (or dequantized) as MLX affine */
    int bits;
    size_t group_size;
    uint64_t params;        /* weights (elements) in the output tensor(s) */
    uint64_t bytes;         /* output bytes incl. scales, codebook, signs, bias */
    double rel_mse;         /* quantized / dequantized: Σ(w-ŵ)²/Σw², else 0 */
    const char *note;       /* why a candidate stayed unquantized, or NULL */
    int codebook_fitted;    /* TurboQuant: its codebook was fitted */
    size_t n_choices;       /* settings measured (fitted codebooks, budgets), the one used */
    struct tq_convert_choice {
        int bits;
        size_t group_size;
        uint64_t bytes;
        double rel_mse_est; /* on the row sample */
        int fitted;
    } *choices;
    int chosen;
    double importance;      /* budget: weight of its squared error in the objective */
} tq_convert_tensor;

typedef struct tq_convert_report {
    size_t n;
    tq_convert_tensor *t;   /* output order (sorted by name) */
    uint64_t params, bytes;          /* all output tensors */
    uint64_t q_params, q_bytes;      /* TurboQuant modules only */
    uint64_t in_bytes;               /* input tensor bytes */
    double bpw_quantized, bpw_total; /* bits per weight */
    double rel_mse;                  /* over all quantized modules together */
    uint64_t budget_bytes;           /* byte budget for the TurboQuant modules (0: none) */
    int bits;                        /* TurboQuant: config.json's top-level bits, group size */
    size_t group_size;
    double objective, objective_est; /* budget: Σ importance·Σ(w-ŵ)², measured and estimated */
    double seconds;                  /* wall */
    double cpu_seconds;              /* user + system, all threads */
    int threads;
    size_t resume_kept, resume_dropped; /* --resume: shards kept from the earlier run, and
                                        journaled ones redone (missing or changed) */
    size_t n_shards;                 /* output shards */
    size_t n_warnings;
    char **warnings;                 /* about the input (GGUF: unmapped names, tensors stored
                                        quantized, whose error compounds when requantized;
                                        a family tq-run cannot decode) */
    int run_decodes;                 /* tq-run decodes the model's family (runtime/config.c,
                                        tq_run_decodes); when not, a warning says so */
} tq_convert_report;

TQ_API int tq_convert(const char *input, const char *out_dir, const tq_convert_opts *o, tq_convert_report *r, tq_err *e);
/* The dry run (tq-convert --dry-run): every check and the whole plan of tq_convert, then r
 * (as tq_convert's, with rel_mse 0: nothing is quantized) and files (every file the run
 * would write, sorted, with its exact size); nothing is written. */
TQ_API int tq_convert_dry_run(const char *input, const char *out_dir, const tq_convert_opts *o, tq_convert_report *r,
                              tq_out_plan *files, tq_err *e);
TQ_API void tq_convert_report_free(tq_convert_report *r);
/* {"input", "output", "mode", "bits", ..., "tensors": [...]} for --json. */
TQ_API struct cJSON *tq_convert_report_json(const tq_convert_report *r, const tq_convert_opts *o);

TQ_END_DECLS

#endif
