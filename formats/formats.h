/* formats/formats.h — reading and writing model files.
 *
 * safetensors files (hostile-input reader, streaming atomic writer), HuggingFace model
 * directories (single file or index.json + shards), dtype conversion, and GGUF input.
 * All functions follow common/common.h: 0 / -1 + tq_err naming file, tensor, offset. */
#ifndef TQ_FORMATS_H
#define TQ_FORMATS_H

#include "common/common.h"

struct cJSON;

/* ---------------------------------------------------------------- dtypes */
typedef enum tq_dtype {
    TQ_DT_BOOL, TQ_DT_U8, TQ_DT_I8, TQ_DT_F8_E5M2, TQ_DT_F8_E4M3, TQ_DT_I16, TQ_DT_U16,
    TQ_DT_F16, TQ_DT_BF16, TQ_DT_I32, TQ_DT_U32, TQ_DT_F32, TQ_DT_F64, TQ_DT_I64, TQ_DT_U64,
    TQ_DT_COUNT
} tq_dtype;

const char *tq_dtype_name(tq_dtype d);        /* "BF16" */
int tq_dtype_from_name(const char *s, tq_dtype *out); /* exact safetensors spelling; -1 if unknown */
size_t tq_dtype_size(tq_dtype d);              /* bytes per element */
int tq_dtype_is_float(tq_dtype d);             /* F16, BF16, F32, F64 */

/* Round-to-nearest-even conversions, NaN/Inf/subnormals handled (NaN stays NaN, quiet). */
uint16_t tq_f32_to_f16(float f);
uint16_t tq_f32_to_bf16(float f);
float tq_f16_to_f32(uint16_t h);
float tq_bf16_to_f32(uint16_t h);
/* Bulk: n elements of src (F16/BF16/F32/F64) -> f32, and f32 -> dst (F16/BF16/F32). */
int tq_to_f32(tq_dtype src_dt, const void *src, float *dst, size_t n, tq_err *e);
int tq_from_f32(tq_dtype dst_dt, const float *src, void *dst, size_t n, tq_err *e);

/* ------------------------------------------------------- safetensors read */
#define TQ_MAX_DIMS 8
#define TQ_ST_MAX_HEADER 100000000ull

typedef struct tq_tensor_info {
    char *name;
    tq_dtype dtype;
    int ndim;
    uint64_t shape[TQ_MAX_DIMS];
    uint64_t nelem;
    uint64_t offset;  /* absolute byte offset in the file */
    uint64_t nbytes;
} tq_tensor_info;

typedef struct tq_st_file {
    char *path;
    int fd;
    uint64_t file_size;
    uint64_t header_len;   /* N */
    uint64_t data_start;   /* 8 + N */
    char *header_json;     /* the N header bytes, NUL-terminated */
    size_t n_tensors;
    tq_tensor_info *tensors; /* sorted by name (strcmp) */
    size_t n_meta;
    char **meta_keys, **meta_vals; /* __metadata__, sorted by key */
} tq_st_file;

/* Open and validate every rule of REFERENCE §1. */
int tq_st_open(tq_st_file **out, const char *path, tq_err *e);
void tq_st_close(tq_st_file *f);
/* Validate a header given as bytes (used by tq_st_open and the fuzzers). file_size is the
 * size the data buffer must fill exactly. Fills f (path used only in messages). */
int tq_st_parse_header(tq_st_file *f, const char *json, size_t len, uint64_t file_size, tq_err *e);
const tq_tensor_info *tq_st_find(const tq_st_file *f, const char *name);
const char *tq_st_meta(const tq_st_file *f, const char *key);
/* Read [off, off+len) of a tensor's bytes into buf (bounds-checked). */
int tq_st_read(const tq_st_file *f, const tq_tensor_info *t, uint64_t off, void *buf, size_t len, tq_err *e);

/* ------------------------------------------------------ safetensors write */
typedef struct tq_st_decl {
    const char *name;
    tq_dtype dtype;
    int ndim;
    uint64_t shape[TQ_MAX_DIMS];
} tq_st_decl;

typedef struct tq_st_writer tq_st_writer;

/* Declare every tensor up front; the header (keys sorted, data laid out in name order,
 * JSON padded with spaces to a multiple of 8 or so that data starts at `align` if non-zero)
 * is written immediately to PATH.partial-XXXXXX. meta: n_meta key/value pairs (may be 0). */
int tq_st_writer_open(tq_st_writer **w, const char *path, const tq_st_decl *decls, size_t n,
                      const char *const *meta_keys, const char *const *meta_vals, size_t n_meta,
                      uint64_t align, tq_err *e);
/* Index of a declared tensor by name (-1 if absent) and its absolute offset/size. */
long tq_st_writer_index(const tq_st_writer *w, const char *name);
const tq_tensor_info *tq_st_writer_tensor(const tq_st_writer *w, size_t index);
/* Write bytes of tensor `index` at byte offset `off` within it (pwrite; any order, thread-safe
 * for disjoint ranges). */
int tq_st_writer_write(tq_st_writer *w, size_t index, uint64_t off, const void *data, size_t len, tq_err *e);
/* Check every declared byte was written, fsync, rename to the final name. Frees w. */
int tq_st_writer_finish(tq_st_writer *w, tq_err *e);
/* Remove the partial file. Frees w. */
void tq_st_writer_abort(tq_st_writer *w);

/* -------------------------------------------------------- model directory */
/* A source of tensors that is not a safetensors shard (GGUF: tensors presented as F32 after
 * dequantization, under HF names). read() gets bytes [off, off+len) of the presented data. */
typedef struct tq_tensor_source {
    int (*read)(const struct tq_tensor_source *s, uint64_t index, uint64_t off, void *buf,
                size_t len, tq_err *e);
    void (*close)(struct tq_tensor_source *s);
} tq_tensor_source;

typedef struct tq_model_tensor {
    tq_tensor_info info;       /* name, dtype, shape; offset within its shard (safetensors) */
    const tq_st_file *file;    /* the shard holding it; NULL when src is set */
    const tq_tensor_source *src; /* non-safetensors source, with src_index */
    uint64_t src_index;
} tq_model_tensor;

typedef struct tq_model {
    char *path;                /* directory (or the single .safetensors file) */
    struct cJSON *config;      /* config.json, or NULL when absent */
    size_t n_files;
    tq_st_file **files;        /* shards, in index/file-name order */
    size_t n_tensors;
    tq_model_tensor *tensors;  /* all tensors across shards, sorted by name */
    size_t n_extra;
    char **extra_files;        /* other regular files to copy through (tokenizer...), sorted */
    tq_tensor_source *source;  /* GGUF input, else NULL */
} tq_model;

/* Open a model directory (model.safetensors, or index.json + shards, or every *.safetensors
 * file when there is no index) or a single .safetensors file. Checks that the index names
 * only present shards, that every tensor is in the shard the index says, no duplicates
 * across shards. */
int tq_model_open(tq_model **out, const char *path, tq_err *e);
void tq_model_close(tq_model *m);
const tq_model_tensor *tq_model_find(const tq_model *m, const char *name);
int tq_model_read(const tq_model_tensor *t, uint64_t off, void *buf, size_t len, tq_err *e);
/* Copy config-free extra files (tokenizer etc.) byte-identically into dir. */
int tq_model_copy_extras(const tq_model *m, const char *dir, tq_err *e);

/* Sharded model writer: declares all tensors, assigns them in name order to shards of at
 * most shard_size bytes of data (a tensor larger than that gets a shard of its own), writes
 * model.safetensors (one shard) or model-XXXXX-of-NNNNN.safetensors + index.json. */
typedef struct tq_model_writer tq_model_writer;
int tq_model_writer_open(tq_model_writer **w, const char *dir, const tq_st_decl *decls, size_t n,
                         uint64_t shard_size, const char *const *meta_keys,
                         const char *const *meta_vals, size_t n_meta, tq_err *e);
long tq_model_writer_index(const tq_model_writer *w, const char *name);
int tq_model_writer_write(tq_model_writer *w, size_t index, uint64_t off, const void *data, size_t len, tq_err *e);
int tq_model_writer_finish(tq_model_writer *w, tq_err *e);
void tq_model_writer_abort(tq_model_writer *w);

#endif
