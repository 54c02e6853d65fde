/* layout/layout.h — streaming layouts: moe_flash_v1 expert files, flash_aligned_v1 dense
 * FFN files, split/join, interleaved row files. */
#ifndef TQ_LAYOUT_H
#define TQ_LAYOUT_H

#include "common/common.h"
#include "formats/formats.h"

struct cJSON;

/* ================================================================ split (tq-split)
 * Layer files (REFERENCE §4; man tq-formats(5), MOE_FLASH_V1 AND FLASH_ALIGNED_V1):
 *   moe_flash_v1      experts/layer_LL.bin: JSON header NUL-padded to page_size, then
 *                     num_experts blocks of expert_block_size bytes each (a multiple of
 *                     page_size); expert e starts at data_start + e * expert_block_size.
 *   flash_aligned_v1  ffn_aligned/layer_LL.bin: JSON header page, then every tensor at its
 *                     own page-aligned absolute offset.
 * All parsers treat their input as hostile (bounded, overflow-checked, fuzzed). */

#define TQ_FLASH_DEFAULT_ALIGN 16384u
#define TQ_FLASH_MIN_ALIGN 4096u
#define TQ_FLASH_MAX_ALIGN (1u << 30)
#define TQ_FLASH_MAX_EXPERTS (1u << 20)

enum tq_flash_kind { TQ_FLASH_MOE = 1, TQ_FLASH_DENSE = 2 };

typedef struct tq_flash_tensor {
    char *name;                  /* as in the header, e.g. "mlp.switch_mlp.gate_proj.weight" */
    tq_dtype dtype;
    int ndim;
    uint64_t shape[TQ_MAX_DIMS]; /* shape_per_expert (moe) or shape (dense) */
    uint64_t offset;             /* moe: inner_offset within an expert block; dense: absolute */
    uint64_t nbytes;
} tq_flash_tensor;

typedef struct tq_flash_header {
    int kind;                    /* TQ_FLASH_MOE or TQ_FLASH_DENSE */
    uint64_t page_size;
    uint64_t layer_idx;
    uint64_t total_size;         /* == file size */
    uint64_t num_experts;        /* moe only (0 for dense) */
    uint64_t expert_block_size;  /* moe only */
    uint64_t data_start;         /* moe: first block; dense: page_size */
    size_t n_tensors;
    tq_flash_tensor *tensors;    /* in file/block order (ascending offset) */
} tq_flash_header;

/* Parse a layer-file header from the first bytes of the file (buf, len ≥ the JSON text and
 * ideally the whole header page; bytes after the JSON up to page_size must be NUL).
 * file_size: the real file size, checked against total_size (UINT64_MAX: don't check).
 * Either format is accepted; h->kind says which. path is used only in messages. */
int tq_flash_parse(tq_flash_header *h, const void *buf, size_t len, uint64_t file_size,
                   const char *path, tq_err *e);
/* Open PATH, read and parse its header page. */
int tq_flash_read(tq_flash_header *h, const char *path, tq_err *e);
void tq_flash_header_free(tq_flash_header *h);
/* Find a tensor; "mlp.switch_mlp.X" and "switch_mlp.X" (and "mlp.X"/"X") name the same one. */
const tq_flash_tensor *tq_flash_find(const tq_flash_header *h, const char *name);
/* Byte range of expert e's block in a moe_flash_v1 file (one pread reads it all). */
int tq_flash_expert_range(const tq_flash_header *h, uint64_t expert, uint64_t *offset,
                          uint64_t *length, tq_err *e);
/* The header JSON text (sorted keys, compact) for h; fails with TQ_EDATA naming path when it
 * does not fit in h->page_size - 1 bytes (the page keeps at least one NUL). Caller frees. */
char *tq_flash_header_json(const tq_flash_header *h, const char *path, tq_err *e);
/* Fill offsets, nbytes, expert_block_size/data_start/total_size for h->tensors (name, dtype,
 * shape filled) laid out in their order at page_size alignment. */
int tq_flash_layout(tq_flash_header *h, tq_err *e);
/* dtype spellings in layer headers: written as MLX names ("uint32", "bfloat16"), read as
 * MLX names, "mlx.core."-prefixed MLX names, or safetensors names ("U32"). */
const char *tq_flash_dtype_name(tq_dtype d);
int tq_flash_dtype_parse(const char *s, tq_dtype *out);
/* x rounded up to a power-of-two a, overflow-checked. */
int tq_align_up(uint64_t x, uint64_t a, uint64_t *out);

/* ---------------------------------------------------------------- split.json */
typedef struct tq_split_block {
    uint32_t layer, expert;
    uint64_t offset, length;        /* in the layer file */
    unsigned char sha256[32];       /* of the whole block, padding included */
} tq_split_block;

typedef struct tq_split_file {
    char *name;                     /* relative to the split dir: "experts/layer_00.bin" */
    uint64_t size;
    unsigned char sha256[32];
} tq_split_file;

typedef struct tq_split_layer {
    uint32_t layer;
    char *file;                     /* "experts/layer_00.bin" or "ffn_aligned/layer_00.bin" */
    char *prefix;                   /* source name prefix, e.g. "model.layers.0." */
    int naming;                     /* TQ_NAMING_HF or TQ_NAMING_MLX (moe); TQ_NAMING_HF dense */
} tq_split_layer;

enum tq_naming { TQ_NAMING_SOURCE = 0, TQ_NAMING_HF = 1, TQ_NAMING_MLX = 2 };

typedef struct tq_split_manifest {
    int kind;                       /* TQ_FLASH_MOE or TQ_FLASH_DENSE */
    uint64_t align;
    uint64_t num_experts, experts_per_tok; /* moe */
    size_t n_layers;
    tq_split_layer *layers;         /* ascending layer */
    size_t n_blocks;
    tq_split_block *blocks;         /* layer-major: blocks[i * num_experts + e] is layers[i] */
    size_t n_files;
    tq_split_file *files;           /* sorted by name */
    struct cJSON *json;             /* the whole document (source identity etc.) */
} tq_split_manifest;

/* Load and validate DIR/split.json. */
int tq_split_manifest_load(tq_split_manifest **out, const char *split_dir, tq_err *e);
void tq_split_manifest_free(tq_split_manifest *m);
/* Block of (layer, expert), or NULL. */
const tq_split_block *tq_split_manifest_block(const tq_split_manifest *m, uint32_t layer,
                                              uint64_t expert);
const tq_split_file *tq_split_manifest_file(const tq_split_manifest *m, const char *name);

/* ---------------------------------------------------------------- split / join / plan */
typedef struct tq_split_opts {
    uint64_t align;                 /* 0 = TQ_FLASH_DEFAULT_ALIGN */
    int threads;                    /* 0 = tq_default_threads() */
    uint64_t top_k;                 /* 0 = config num_experts_per_tok */
    int quiet;
    const char *source_label;       /* recorded as source.path; NULL = the model path */
    uint64_t test_header_pad;       /* test hook: bytes added to every header's size check */
} tq_split_opts;

typedef struct tq_split_result {
    int kind;
    uint64_t pinned_bytes;          /* tensor bytes in pinned.safetensors */
    uint64_t n_layers, num_experts, experts_per_tok;
    uint64_t max_block_size;        /* largest expert_block_size (moe) */
    uint64_t ffn_bytes;             /* all layer-file bytes (moe and dense) */
    uint64_t bytes_written;
} tq_split_result;

/* Split MODEL (directory or .safetensors) into OUT_DIR, which must not exist or be empty.
 * Everything is built in OUT_DIR.partial-XXXXXX and renamed at the end: on failure nothing
 * is left behind. */
int tq_split(const char *model, const char *out_dir, const tq_split_opts *o,
             tq_split_result *res, tq_err *e);

typedef struct tq_plan {
    int kind;
    uint64_t ram, pinned_bytes, n_layers, num_experts, experts_per_tok;
    uint64_t block_size;            /* largest expert block (moe) / largest FFN layer file */
    uint64_t ffn_bytes;             /* all layer files */
    uint64_t bytes_per_token_cold;  /* layers × top-k × block (moe); all FFN bytes (dense) */
    uint64_t envelope;              /* min(ram, max(8 GiB, 0.75 ram), 192 GiB) */
    uint64_t reserve;               /* 3 GiB */
    uint64_t cache_budget;          /* envelope - pinned - reserve, or 0 */
    uint64_t blocks_total, blocks_cached; /* moe: experts; dense: layers */
    double cached_share;            /* blocks_cached / blocks_total */
} tq_plan;

/* What tq_split would write and what it needs with RAM bytes of memory; writes nothing. */
int tq_split_plan(const char *model, const tq_split_opts *o, uint64_t ram, tq_plan *p, tq_err *e);
/* The arithmetic alone (fills the derived fields of p from kind, ram, pinned_bytes, n_layers,
 * num_experts, experts_per_tok, block_size, ffn_bytes). */
void tq_plan_compute(tq_plan *p);
struct cJSON *tq_plan_json(const tq_plan *p);

typedef struct tq_join_opts {
    int naming;                     /* TQ_NAMING_SOURCE (as split.json says), HF or MLX */
    uint64_t shard_size;            /* 0 = the formats default */
    int threads;
    int quiet;
} tq_join_opts;

/* The split directory seen as the model it came from: pinned tensors plus every expert / FFN
 * tensor under its source name (naming: TQ_NAMING_SOURCE = as split.json records, or forced
 * per-expert HF / stacked MLX names), each readable with tq_model_read. tq_join writes this
 * model out; tq-verify compares it against the source. Close with tq_model_close. */
int tq_split_open_model(tq_model **out, const char *split_dir, int naming, tq_err *e);

/* Rebuild a model directory (stacked switch_mlp names by default for MoE sources written
 * that way, per-expert names for HF-named sources; see naming) from a split directory. */
int tq_join(const char *split_dir, const char *out_dir, const tq_join_opts *o, tq_err *e);

/* ================================================================ row files (tq-rowlayout)
 * Interleaved row files (REFERENCE §5; man tq-formats(5), ROW FILES):
 *   mtplx_ngram_rows_v1  one U8 tensor PREFIX.records [rows, stride]; record r = row r of
 *                        PREFIX.weight, then .scales, then .biases (whichever exist).
 *   tq_rows_paged_v1     the same records placed so that none straddles a page_size page:
 *                        one U8 tensor PREFIX.pages [groups, group_bytes], data start page
 *                        aligned, zero padding. */
#define TQ_ROWS_FORMAT_V1 "mtplx_ngram_rows_v1"
#define TQ_ROWS_FORMAT_PAGED "tq_rows_paged_v1"
#define TQ_ROWS_MAX_PAGE (64ull << 20)

/* Identity of the source file a row file was made from. header_sha256 is the SHA-256 of
 * the source header re-serialized the way Python's json.dumps(h, sort_keys=True) does
 * (tq_json_canonical), so files made by MTPLX and by tq agree. */
typedef struct tq_rows_identity {
    uint64_t size;
    int64_t mtime_ns, ctime_ns;
    uint64_t device, inode;
    char header_sha256[65];
} tq_rows_identity;

/* Canonical JSON = Python json.dumps(v, sort_keys=True): keys sorted by code point, ", " and
 * ": " separators, non-ASCII and control characters as lowercase \uXXXX escapes. Refuses
 * (TQ_EUNSUP) what cJSON cannot carry exactly: non-integer numbers, |n| >= 2^53, duplicate
 * keys, invalid UTF-8, U+0000. cJSON_Raw nodes are copied verbatim. Caller frees. */
char *tq_json_canonical(const struct cJSON *j, tq_err *e);
/* Lexical pre-check of JSON text for tq_json_canonical: every number token is a plain
 * integer and no string holds \u0000 (cJSON would silently change both). */
int tq_json_canonical_text_ok(const char *json, size_t len, tq_err *e);
/* hex SHA-256 of the canonical form of the JSON header text. */
int tq_rows_header_sha256(const char *json, size_t len, const char *path, char hex[65], tq_err *e);

/* stat + header hash of PATH (follows symlinks, as os.stat does). */
int tq_rows_identity_read(const char *path, tq_rows_identity *id, tq_err *e);
/* Canonical JSON text of the identity (exact 64-bit integers). Caller frees. */
char *tq_rows_identity_json(const tq_rows_identity *id, tq_err *e);
/* Parse the metadata string `source` (any key order/spacing; exact integers). */
int tq_rows_identity_parse(const char *text, tq_rows_identity *id, tq_err *e);
/* Empty string when equal, else "size 10 -> 12, mtime_ns ..., header_sha256 differs". */
void tq_rows_identity_diff(const tq_rows_identity *was, const tq_rows_identity *now, char *buf, size_t cap);

#define TQ_ROWS_MAX_PARTS 3
typedef struct tq_rows_part {
    char name[8];        /* "weight", "scales", "biases" */
    tq_dtype dtype;
    uint64_t cols;       /* elements per row */
    uint64_t row_bytes;
    uint64_t pos;        /* byte offset of this part inside a record */
    uint64_t begin, end; /* data_offsets in the source header */
} tq_rows_part;

/* Where records live in the records tensor: record r starts at
 * (r / per_group) * group_bytes + (r % per_group) * slot. v1: per_group 1, slot = group
 * = stride. Paged: group_bytes a multiple of page, per_group * slot <= group_bytes. */
typedef struct tq_rows_geom {
    uint64_t rows, stride;
    int n_parts;
    tq_rows_part parts[TQ_ROWS_MAX_PARTS];
    uint64_t page;        /* 0: mtplx_ngram_rows_v1 */
    int pad_stride;       /* paged: slot = smallest divisor of page >= stride */
    uint64_t slot, per_group, group_bytes, groups;
    uint64_t data_bytes;  /* bytes of the records tensor */
} tq_rows_geom;

/* Fill the layout fields from rows/stride/page/pad_stride (page 0 = v1). */
int tq_rows_geom_layout(tq_rows_geom *g, tq_err *e);
uint64_t tq_rows_record_offset(const tq_rows_geom *g, uint64_t r);
/* Records that touch more pages of `page` bytes than ceil(stride / page) when the records
 * tensor starts at file offset data_start. */
uint64_t tq_rows_count_straddles(const tq_rows_geom *g, uint64_t data_start, uint64_t page);

typedef struct tq_rows_opts {
    const char *prefix;   /* NULL: "ngram" (convert) / taken from the rows file */
    uint64_t page_align;  /* 0: mtplx_ngram_rows_v1 */
    int pad_stride;
    uint64_t chunk_bytes; /* 0: 8 MiB */
    int quiet;            /* no progress */
} tq_rows_opts;

typedef struct tq_rows_report {
    char *format, *prefix, *output, *source_path, *kept_partial;
    uint64_t rows, row_bytes, bytes, file_bytes, data_start;
    uint64_t page_size, slot_bytes, per_group, group_bytes;
    uint64_t straddle_plain, straddle_paged;
    double elapsed_s;
    int all_rows_bit_exact;
    int byte_identical;   /* extract: the rebuilt file is the source file byte for byte */
    int have_source;
    tq_rows_identity source;
} tq_rows_report;

/* SOURCE -> OUT (refuses an existing OUT or OUT == SOURCE). On a source that changed during
 * the copy the partial file is kept and r->kept_partial names it. */
int tq_rows_convert(const char *source, const char *out, const tq_rows_opts *o, tq_rows_report *r, tq_err *e);
/* Re-verify ROWS against SOURCE (NULL: the source_path recorded in ROWS); writes nothing. */
int tq_rows_check(const char *rows, const char *source, const tq_rows_opts *o, tq_rows_report *r, tq_err *e);
/* Rebuild the source tensors from ROWS into DIR/<source file name>. */
int tq_rows_extract(const char *rows, const char *dir, const tq_rows_opts *o, tq_rows_report *r, tq_err *e);
/* JSON object for a report (mode: "convert", "check", "extract"). */
struct cJSON *tq_rows_report_json(const tq_rows_report *r, const char *mode);
void tq_rows_report_free(tq_rows_report *r);

#endif
