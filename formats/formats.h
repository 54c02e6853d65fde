/* formats/formats.h — reading and writing model files.
 *
 * safetensors files (hostile-input reader, streaming atomic writer), HuggingFace model
 * directories (single file or index.json + shards), dtype conversion, and GGUF input.
 * All functions follow common/common.h: 0 / -1 + tq_err naming file, tensor, offset. */
#ifndef TQ_FORMATS_H
#define TQ_FORMATS_H

#include "common/common.h"

TQ_BEGIN_DECLS

struct cJSON;

/* ---------------------------------------------------------------- dtypes */
typedef enum tq_dtype {
    TQ_DT_BOOL, TQ_DT_U8, TQ_DT_I8, TQ_DT_F8_E5M2, TQ_DT_F8_E4M3, TQ_DT_I16, TQ_DT_U16,
    TQ_DT_F16, TQ_DT_BF16, TQ_DT_I32, TQ_DT_U32, TQ_DT_F32, TQ_DT_F64, TQ_DT_I64, TQ_DT_U64,
    TQ_DT_COUNT
} tq_dtype;

TQ_API const char *tq_dtype_name(tq_dtype d);        /* "BF16" */
TQ_API int tq_dtype_from_name(const char *s, tq_dtype *out); /* exact safetensors spelling; -1 if unknown */
TQ_API size_t tq_dtype_size(tq_dtype d);              /* bytes per element */
TQ_API int tq_dtype_is_float(tq_dtype d);             /* F16, BF16, F32, F64 */

/* Round-to-nearest-even conversions, NaN/Inf/subnormals handled (NaN stays NaN, quiet). */
TQ_API uint16_t tq_f32_to_f16(float f);
TQ_API uint16_t tq_f32_to_bf16(float f);
TQ_API float tq_f16_to_f32(uint16_t h);
TQ_API float tq_bf16_to_f32(uint16_t h);
/* Bulk: n elements of src (F16/BF16/F32/F64) -> f32, and f32 -> dst (F16/BF16/F32). */
TQ_API int tq_to_f32(tq_dtype src_dt, const void *src, float *dst, size_t n, tq_err *e);
/* 1 when one of the n values at p (F16, BF16, F32, F64, F8_E5M2, F8_E4M3) is NaN or
 * infinite, with its index in *at and "NaN" or "infinite" in *what; 0 otherwise (and for
 * integer dtypes). Reads bit patterns only. */
TQ_API int tq_find_nonfinite(tq_dtype d, const void *p, size_t n, size_t *at, const char **what);
TQ_API int tq_from_f32(tq_dtype dst_dt, const float *src, void *dst, size_t n, tq_err *e);

/* MXFP4 (formats/mxfp4.c), the one decoder for GGUF type 39 and gpt-oss's safetensors
 * <name>_blocks and <name>_scales: 32 FP4 E2M1 values per 16-byte block under one E8M0 exponent e. Every
 * value is exactly ggml's dequantize_row_mxfp4 result: level * 2^(e-128) in one f32 multiply,
 * the levels E2M1 doubled as integers (0 1 2 3 4 6 8 12, codes 8..15 negated, so code 8 is
 * +0, not the -0 of the OCP table), 2^(e-128) built as ggml builds it (e 0 and 1 subnormal,
 * e = 255 is 2^127). A product beyond f32 is +-inf, as in ggml. ggml_order 0: element 2j/2j+1
 * = low/high nibble of byte j (safetensors, gpt-oss release); 1: element j/j+16 = low/high
 * nibble (GGUF block_mxfp4). tq_mxfp4_block / tq_mxfp4_decode always write every value and
 * return -1 (decode: *bad_block = the first such block) when a block's e is 255 (NaN in the
 * MX format; ggml_validate_row_data refuses it) or one of its values is infinite, else 0. */
TQ_API float tq_e8m0_half(uint8_t e);                      /* 2^(e-128) */
TQ_API float tq_mxfp4_value(unsigned nibble, uint8_t e);   /* one element */
TQ_API int tq_mxfp4_block(const uint8_t qs[16], uint8_t e, int ggml_order, float out[32]);
TQ_API int tq_mxfp4_decode(const uint8_t *blocks, const uint8_t *scales, uint64_t n_blocks, int ggml_order, float *out,
                           uint64_t *bad_block);

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

/* What a file is, from its first bytes (sniff.c), for errors that say what was given in
 * place of what was expected: GGUF magic, zstd magic, a safetensors frame (a header length
 * that fits the file, then '{'), a tq-split layer file's header page, other JSON. */
typedef enum tq_content_kind {
    TQ_CONTENT_UNKNOWN, TQ_CONTENT_SAFETENSORS, TQ_CONTENT_GGUF, TQ_CONTENT_JSON, TQ_CONTENT_LAYER, TQ_CONTENT_ZSTD,
} tq_content_kind;
TQ_API tq_content_kind tq_sniff(const void *head, size_t n, uint64_t file_size);
TQ_API tq_content_kind tq_sniff_fd(int fd, uint64_t file_size); /* reads the first 64 bytes */
TQ_API const char *tq_content_name(tq_content_kind k); /* "a GGUF file" */
TQ_API const char *tq_content_hint(tq_content_kind k); /* what to give instead, for a tool that wanted another kind */

/* An input as given on a command line, with HuggingFace cache entries resolved offline
 * (hf_cache.c): a cache directory models--ORG--NAME becomes its snapshots/REV (REV from
 * refs/main); a repo id ORG/NAME that is not a path is looked up in $HF_HUB_CACHE, else
 * $HF_HOME/hub, else ~/.cache/huggingface/hub. Anything else comes back as given. A new
 * string (free it), or NULL with e naming what is missing. */
TQ_API char *tq_hf_resolve(const char *arg, tq_err *e);

/* Open and validate every reading rule of man tq-formats(5), SAFETENSORS. */
TQ_API int tq_st_open(tq_st_file **out, const char *path, tq_err *e);
TQ_API void tq_st_close(tq_st_file *f);
/* The framing of a safetensors file: the little-endian u64 header length N at byte 0 (at
 * most TQ_ST_MAX_HEADER, and 8 + N within file_size) and the N header bytes after it, read
 * from fd into a new NUL-terminated buffer *json (caller frees). Checks the frame only, not
 * the header; errors name path. tq_st_open and the row-file code both read headers so. */
TQ_API int tq_st_read_header(int fd, uint64_t file_size, const char *path, char **json, uint64_t *len, tq_err *e);
/* Validate a header given as bytes (used by tq_st_open and the fuzzers). file_size is the
 * size the data buffer must fill exactly. Fills f (path used only in messages). */
TQ_API int tq_st_parse_header(tq_st_file *f, const char *json, size_t len, uint64_t file_size, tq_err *e);
TQ_API const tq_tensor_info *tq_st_find(const tq_st_file *f, const char *name);
TQ_API const char *tq_st_meta(const tq_st_file *f, const char *key);
/* Read [off, off+len) of a tensor's bytes into buf (bounds-checked). */
TQ_API int tq_st_read(const tq_st_file *f, const tq_tensor_info *t, uint64_t off, void *buf, size_t len, tq_err *e);
/* Free what tq_st_parse_header filled (tensors, metadata, header copy); leaves path and fd.
 * For callers of tq_st_parse_header on a caller-owned struct (fuzzers). */
TQ_API void tq_st_free_header(tq_st_file *f);

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
TQ_API int tq_st_writer_open(tq_st_writer **w, const char *path, const tq_st_decl *decls, size_t n,
                             const char *const *meta_keys, const char *const *meta_vals, size_t n_meta,
                             uint64_t align, tq_err *e);
/* The size of the file tq_st_writer_open would write for the same arguments (the same
 * checks; path only names it in messages), writing nothing: dry runs. */
TQ_API int tq_st_file_size(const char *path, const tq_st_decl *decls, size_t n, const char *const *meta_keys,
                           const char *const *meta_vals, size_t n_meta, uint64_t align, uint64_t *size, tq_err *e);
/* Index of a declared tensor by name (-1 if absent) and its absolute offset/size. */
TQ_API long tq_st_writer_index(const tq_st_writer *w, const char *name);
TQ_API const tq_tensor_info *tq_st_writer_tensor(const tq_st_writer *w, size_t index);
/* Write bytes of tensor `index` at byte offset `off` within it (pwrite; any order, thread-safe
 * for disjoint ranges). */
TQ_API int tq_st_writer_write(tq_st_writer *w, size_t index, uint64_t off, const void *data, size_t len, tq_err *e);
TQ_API size_t tq_st_writer_count(const tq_st_writer *w);
/* 0 if every declared byte has been written (and no write failed), else -1 naming the
 * first incomplete tensor. finish does this check itself. */
TQ_API int tq_st_writer_complete(const tq_st_writer *w, tq_err *e);
/* Check every declared byte was written, fsync, rename to the final name. Frees w. */
TQ_API int tq_st_writer_finish(tq_st_writer *w, tq_err *e);
/* Remove the partial file. Frees w. */
TQ_API void tq_st_writer_abort(tq_st_writer *w);

/* -------------------------------------------------------- model directory */
/* A source of tensors that is not a safetensors shard (GGUF: float tensors as stored, block
 * types as F32 after dequantization, under HF names). read() gets bytes [off, off+len) of the presented data. */
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
    uint32_t src_type;         /* GGUF: ggml type id of the stored tensor (0 = F32) */
    int was_quantized;         /* stored in a lossy block type (GGUF Q*_K...): quantizing it
                                * again compounds the error; tq-convert warns */
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
    size_t n_generated;
    char **generated_names;    /* files synthesized from the input (GGUF: tokenizer.json, ...) */
    struct cJSON **generated;  /* their JSON; written unless extra_files has the same name */
    tq_tensor_source *source;  /* GGUF input, else NULL */
    unsigned flags;            /* TQ_MODEL_* given to tq_model_open_ex */
} tq_model;

/* Open a model directory (model.safetensors, or index.json + shards, or every *.safetensors
 * file when there is no index) or a single .safetensors file. Checks that the index names
 * only present shards, that every tensor is in the shard the index says, no duplicates
 * across shards. */
TQ_API int tq_model_open(tq_model **out, const char *path, tq_err *e);
/* tq_model_open with flags: TQ_MODEL_KEEP_NAMES keeps GGUF tensor names (tq-convert
 * --keep-names) instead of mapping them to HF/MLX names. */
#define TQ_MODEL_KEEP_NAMES 1u
/* TQ_MODEL_NO_SPLIT refuses a tq-split output directory (one with split.json), naming it,
 * for the tools that want the model it was made from (tq-convert, tq-split). */
#define TQ_MODEL_NO_SPLIT 2u
TQ_API int tq_model_open_ex(tq_model **out, const char *path, unsigned flags, tq_err *e);
TQ_API void tq_model_close(tq_model *m);
TQ_API const tq_model_tensor *tq_model_find(const tq_model *m, const char *name);
/* Bits and group size config.json gives quantized module P (MLX affine, man tq-formats(5)):
 * P's own entry in the "quantization" (else "quantization_config") block, else the block's.
 * 1 found, 0 no block or no bits/group_size there (outputs untouched). */
TQ_API int tq_model_quant_params(const struct cJSON *config, const char *P, uint64_t *bits, uint64_t *group);
TQ_API int tq_model_read(const tq_model_tensor *t, uint64_t off, void *buf, size_t len, tq_err *e);
/* Copy config-free extra files (tokenizer etc.) byte-identically into dir, and write the
 * generated ones (sorted JSON) that no extra file of the same name replaces. */
TQ_API int tq_model_copy_extras(const tq_model *m, const char *dir, tq_err *e);
/* What tq_model_copy_extras would write into a directory: names and sizes added to files. */
TQ_API int tq_model_extras_plan(const tq_model *m, tq_out_plan *files, tq_err *e);
/* Generated file i (its JSON, and its name in *name) when it is to be written: present and not
 * replaced by an extra file of the same name; else NULL. The one rule tq-convert and tq-split
 * share. */
TQ_API struct cJSON *tq_model_generated_file(const tq_model *m, size_t i, const char **name);
/* GGUF input (formats/gguf_model.c). Called by tq_model_open for a path ending in .gguf, or
 * a directory whose only model files are .gguf: m is zeroed except m->path (and m->flags);
 * it fills source, tensors (src set, names owned by the source), n_tensors and optionally
 * config. tq_model_close frees the tensors array and calls source->close. */
TQ_API int tq_model_open_gguf(tq_model *m, const char *path, tq_err *e);
/* Base name of the file holding t ("model-00001-of-00002.safetensors"), or of m->path
 * for a non-safetensors source. */
TQ_API const char *tq_model_tensor_file(const tq_model *m, const tq_model_tensor *t);

/* ------------------------------------------------------------ provenance (provenance.c)
 * tq-provenance.json in every output directory a tool makes (man tq-formats(5), PROVENANCE):
 * {"format": "tq_provenance_v1", "tool", "version", "command": [...], "source": {...}}.
 * Readers of model and split directories pass over it (it is the output's, never copied). */
#define TQ_PROVENANCE_NAME "tq-provenance.json"
/* An output that is one safetensors file (tq-rowlayout's row file) carries the same document,
 * canonical JSON, as this __metadata__ string instead. */
#define TQ_PROVENANCE_META "tq_provenance"
typedef struct tq_provenance {
    const char *tool;              /* "tq-convert" */
    const char *const *command;    /* the command line as recorded (cmd/cli.h,
                                    * tq_cli_command_line): no output path, no option that
                                    * leaves the output's bytes alone */
    size_t n_command;
} tq_provenance;
/* The document; m is the source (NULL for a generated output: no "source"). */
TQ_API struct cJSON *tq_provenance_json(const tq_provenance *pv, const tq_model *m, tq_err *e);
/* Write it into dir (nothing when pv is NULL). */
TQ_API int tq_provenance_write(const char *dir, const tq_provenance *pv, const tq_model *m, tq_err *e);
/* Its name and size added to files (dry runs; nothing when pv is NULL). */
TQ_API int tq_provenance_plan(const tq_provenance *pv, const tq_model *m, tq_out_plan *files, tq_err *e);
/* Read and check DIR/tq-provenance.json (or the file DIR: a tq-provenance.json, or a
 * safetensors file's __metadata__ tq_provenance): the keys above with their types (errors
 * name the file and the key). */
TQ_API int tq_provenance_read(const char *dir, struct cJSON **out, tq_err *e);
/* A source's identity into the object `into`: "files" (name, size, data_bytes and
 * header_sha256 of each safetensors file; a GGUF file's name, size and first_mib_sha256)
 * and "total_bytes". split.json's "source" holds the same. */
TQ_API int tq_model_identity_json(struct cJSON *into, const tq_model *m, tq_err *e);

/* tq-verify ls: one line per tensor "NAME<TAB>DTYPE<TAB>[SHAPE]<TAB>FILE<TAB>OFFSET<TAB>NBYTES",
 * or with json a document {path, files, n_tensors, total_bytes, tensors: [...]}. */
TQ_API int tq_model_list(const tq_model *m, FILE *out, int json, tq_err *e);
/* Read every tensor's bytes end to end (each shard's data region in file order, in
 * chunk-byte reads; non-safetensors sources tensor by tensor). *bytes = bytes read. */
TQ_API int tq_model_read_all(const tq_model *m, size_t chunk, uint64_t *bytes, tq_err *e);

/* Sharded model writer: declares all tensors, assigns them in name order to shards of at
 * most shard_size bytes of data (a tensor larger than that gets a shard of its own), writes
 * model.safetensors (one shard) or model-XXXXX-of-NNNNN.safetensors + index.json. */
typedef struct tq_model_writer tq_model_writer;
TQ_API int tq_model_writer_open(tq_model_writer **w, const char *dir, const tq_st_decl *decls, size_t n,
                                uint64_t shard_size, const char *const *meta_keys,
                                const char *const *meta_vals, size_t n_meta, tq_err *e);
/* The files tq_model_writer_open + finish would write for the same declarations (shards,
 * the index when there is more than one), appended to files with their exact sizes; writes
 * nothing (dir only names them in messages). */
TQ_API int tq_model_writer_plan(const char *dir, const tq_st_decl *decls, size_t n, uint64_t shard_size,
                                const char *const *meta_keys, const char *const *meta_vals, size_t n_meta,
                                tq_out_plan *files, tq_err *e);
/* The same, for --resume: a shard for which keep(keep_ctx, its file name) says 1 is complete
 * in dir from an earlier run; it is never opened, and writes to it are dropped. */
TQ_API int tq_model_writer_open_keep(tq_model_writer **w, const char *dir, const tq_st_decl *decls, size_t n,
                                     uint64_t shard_size, const char *const *meta_keys, const char *const *meta_vals,
                                     size_t n_meta, int (*keep)(void *ctx, const char *shard), void *keep_ctx, tq_err *e);
TQ_API long tq_model_writer_index(const tq_model_writer *w, const char *name);
/* Shards: their count, file names, the shard of tensor `index`, whether it was kept. */
TQ_API size_t tq_model_writer_shards(const tq_model_writer *w);
TQ_API const char *tq_model_writer_shard_name(const tq_model_writer *w, size_t s);
TQ_API size_t tq_model_writer_shard_of(const tq_model_writer *w, size_t index);
TQ_API int tq_model_writer_shard_kept(const tq_model_writer *w, size_t s);
/* Shard s complete: fsync it and rename it to its name in dir now (a write to it afterwards
 * is an error); tq_model_writer_finish then leaves it as it is. */
TQ_API int tq_model_writer_finish_shard(tq_model_writer *w, size_t s, tq_err *e);
TQ_API int tq_model_writer_write(tq_model_writer *w, size_t index, uint64_t off, const void *data, size_t len, tq_err *e);
TQ_API int tq_model_writer_finish(tq_model_writer *w, tq_err *e);
TQ_API void tq_model_writer_abort(tq_model_writer *w);

/* ------------------------------------------------------------ GGUF input */
/* llama.cpp / ggml GGUF files (versions 2 and 3), read as hostile input (man tq-formats(5),
 * GGUF INPUT).
 * Parsing validates every count, length, n_dims, ne product, type id, offset and the
 * alignment before use; tensor data is only ever read by pread in bounded chunks. */
enum tq_gguf_vtype {
    TQ_GGUF_U8 = 0, TQ_GGUF_I8 = 1, TQ_GGUF_U16 = 2, TQ_GGUF_I16 = 3, TQ_GGUF_U32 = 4,
    TQ_GGUF_I32 = 5, TQ_GGUF_F32 = 6, TQ_GGUF_BOOL = 7, TQ_GGUF_STRING = 8,
    TQ_GGUF_ARRAY = 9, TQ_GGUF_U64 = 10, TQ_GGUF_I64 = 11, TQ_GGUF_F64 = 12,
    TQ_GGUF_VTYPE_COUNT
};

#define TQ_GGUF_MAX_DIMS 4
#define TQ_GGUF_MAX_NAME 256          /* longest tensor name / metadata key accepted */
#define TQ_GGUF_MAX_ARRAY_DEPTH 4     /* nested metadata arrays */
#define TQ_GGUF_MAX_ARRAY_ELEMS (1ull << 28) /* all metadata array elements together */
#define TQ_GGUF_MAX_HEADER (1ull << 30) /* metadata + tensor infos */

typedef struct tq_gguf_kv {
    char *key;
    uint32_t type;      /* enum tq_gguf_vtype */
    uint32_t arr_type;  /* element type when type == ARRAY */
    uint64_t arr_n;     /* element count when type == ARRAY */
    uint64_t off;       /* value bytes (after the type / array header) in the header buffer */
    uint64_t len;       /* string length (STRING) */
    union { uint64_t u; int64_t i; double f; } num; /* scalars (bool: u) */
} tq_gguf_kv;

typedef struct tq_gguf_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[TQ_GGUF_MAX_DIMS]; /* ne[0] fastest; unused entries are 1 */
    uint32_t type;                 /* ggml type id */
    uint64_t offset;               /* relative to the data section */
    uint64_t nelem, nbytes;
} tq_gguf_tensor;

typedef struct tq_gguf_file {
    char *path;
    int fd;                        /* -1 for a buffer parse */
    uint64_t file_size;
    uint32_t version;
    uint64_t alignment;
    uint64_t header_len;           /* bytes of header parsed (before the padding) */
    uint64_t data_start;           /* absolute offset of the data section */
    unsigned char *header;         /* the header bytes (owned) */
    size_t n_kv;
    tq_gguf_kv *kv;                /* file order */
    size_t n_tensors;
    tq_gguf_tensor *tensors;       /* file order */
} tq_gguf_file;

TQ_API int tq_gguf_open(tq_gguf_file **out, const char *path, tq_err *e);
TQ_API void tq_gguf_close(tq_gguf_file *f);
/* Parse a header given as the first len bytes of a file of file_size bytes (the fuzzers'
 * entry point). A header running past len (< file_size) is an error too. *out owns a copy. */
TQ_API int tq_gguf_parse(tq_gguf_file **out, const char *name, const void *buf, size_t len,
                         uint64_t file_size, tq_err *e);
TQ_API const tq_gguf_kv *tq_gguf_find_kv(const tq_gguf_file *f, const char *key);
TQ_API const tq_gguf_tensor *tq_gguf_find_tensor(const tq_gguf_file *f, const char *name);
/* Typed metadata access: 0 on success, -1 (no error filled) when absent or of another kind.
 * get_u64 accepts any non-negative integer type, get_f64 any number. */
TQ_API int tq_gguf_get_u64(const tq_gguf_file *f, const char *key, uint64_t *out);
TQ_API int tq_gguf_get_f64(const tq_gguf_file *f, const char *key, double *out);
/* A string value as a NUL-terminated copy (caller frees); NULL when absent/not a string. */
TQ_API char *tq_gguf_get_str(const tq_gguf_file *f, const char *key);
TQ_API const char *tq_gguf_vtype_name(uint32_t t);

/* ggml tensor types. */
TQ_API const char *tq_ggml_type_name(uint32_t type);  /* "Q4_K", or NULL for an unknown id */
/* Block geometry of a known type; -1 for an unknown id. */
TQ_API int tq_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
/* F32 F16 BF16, Q4_0 Q4_1 Q5_0 Q5_1 Q8_0, Q2_K..Q6_K Q8_K, IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S
 * IQ3_XXS IQ3_S IQ4_NL IQ4_XS, TQ1_0 TQ2_0, MXFP4: every type ggml can dequantize. */
TQ_API int tq_ggml_type_can_dequant(uint32_t type);
TQ_API int tq_ggml_type_is_quantized(uint32_t type);  /* lossy block types (not F32/F16/BF16) */
/* Dequantize nblocks whole blocks of `type` from src to dst (bit-exact with ggml). */
TQ_API void tq_ggml_dequant(uint32_t type, const void *src, float *dst, uint64_t nblocks);
/* The blocks ggml's own ggml_validate_row_data refuses: a NaN or infinite f16 (f32 for Q8_K)
 * scale or min, an MXFP4 E8M0 exponent 0xff (NaN in the MX format). -1 with *bad = the block
 * index and why = "scale is NaN (f16 0x7e01)" for the first such block, else 0. */
TQ_API int tq_ggml_check_blocks(uint32_t type, const void *src, uint64_t nblocks, uint64_t *bad, char *why, size_t cap);
/* Elements [first, first+n) of tensor t as f32 (any alignment: covering blocks are read in
 * bounded chunks and dequantized). Unsupported types fail naming tensor and type. */
TQ_API int tq_gguf_read_f32(const tq_gguf_file *f, const tq_gguf_tensor *t, uint64_t first,
                            uint64_t n, float *dst, tq_err *e);

/* Elements [first, first+n) of a tensor of a one-element type (F32 F16 BF16 F64 I8..I64) as
 * the stored bytes (little-endian). */
TQ_API int tq_gguf_read_raw(const tq_gguf_file *f, const tq_gguf_tensor *t, uint64_t first, uint64_t n, void *dst,
                            tq_err *e);

/* GGUF as a tq_model is tq_model_open_gguf (above): every tensor with the row-major shape (ne
 * reversed), F32/F16/BF16/F64/I8..I64 in their stored dtype and block types (was_quantized) as
 * the exact F32 of ggml's dequantization, HF/MLX names for llama/qwen2/qwen3/qwen2moe/qwen3moe (GGUF
 * names kept for other architectures with a warning, or always with TQ_MODEL_KEEP_NAMES),
 * llama's Q/K rows un-permuted, config.json synthesized from the metadata unless the
 * directory has one. Warnings collected while opening (unknown architecture or tensor
 * names, quantized source tensors) live as long as the model; 0 for a non-GGUF model. */
TQ_API size_t tq_gguf_model_warnings(const tq_model *m, const char *const **out);
/* A GGUF architecture that is a family of the family table (formats/family.h gguf_arch) whose
 * llama.cpp tensor names tq does not map to HuggingFace names (qwen3next, qwen35, qwen35moe,
 * gemma4): 1, with why in msg (the family, the architectures tq does map); 0 otherwise (mapped,
 * or no family: an unknown architecture keeps its names with a warning). */
TQ_API int tq_gguf_family_unmapped(const char *arch, char *msg, size_t cap);
/* A GGUF vocabulary as out[0] tokenizer.json, out[1] tokenizer_config.json, out[2]
 * generation_config.json (NULL where the file has nothing for it). A vocabulary tq cannot
 * describe (not gpt2/llama, or malformed metadata) gives NULLs and a warning in warn. -1 only
 * when out of memory. */
TQ_API int tq_gguf_tokenizer_files(const tq_gguf_file *f, struct cJSON *out[3], char *warn, size_t cap, tq_err *e);

TQ_END_DECLS

#endif
