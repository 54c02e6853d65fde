/* formats/flash.h — the streaming layouts as file formats: moe_flash_v1 expert files,
 * flash_aligned_v1 dense FFN files, and split.json (tq_split_v1) that lists a split directory.
 * Read by the runtime and tq-verify, written by tq-split (layout/split/). */
#ifndef TQ_FLASH_H
#define TQ_FLASH_H

#include "common/common.h"
#include "formats/formats.h"

TQ_BEGIN_DECLS

struct cJSON;

/* ================================================================ layer files
 * Layer files (man tq-formats(5), MOE_FLASH_V1 AND FLASH_ALIGNED_V1):
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
TQ_API int tq_flash_parse(tq_flash_header *h, const void *buf, size_t len, uint64_t file_size,
                          const char *path, tq_err *e);
/* Open PATH, read and parse its header page. */
TQ_API int tq_flash_read(tq_flash_header *h, const char *path, tq_err *e);
TQ_API void tq_flash_header_free(tq_flash_header *h);
/* Find a tensor; "mlp.switch_mlp.X" and "switch_mlp.X" (and "mlp.X"/"X") name the same one. */
TQ_API const tq_flash_tensor *tq_flash_find(const tq_flash_header *h, const char *name);
/* Byte range of expert e's block in a moe_flash_v1 file (one pread reads it all). */
TQ_API int tq_flash_expert_range(const tq_flash_header *h, uint64_t expert, uint64_t *offset,
                                 uint64_t *length, tq_err *e);
/* The header JSON text (sorted keys, compact) for h; fails with TQ_EDATA naming path when it
 * does not fit in h->page_size - 1 bytes (the page keeps at least one NUL). Caller frees. */
TQ_API char *tq_flash_header_json(const tq_flash_header *h, const char *path, tq_err *e);
/* Fill offsets, nbytes, expert_block_size/data_start/total_size for h->tensors (name, dtype,
 * shape filled) laid out in their order at page_size alignment. */
TQ_API int tq_flash_layout(tq_flash_header *h, tq_err *e);
/* Block order inside an expert block or dense FFN file: gate_proj, up_proj, gate_up_proj,
 * down_proj, each .weight, .blocks, .scales, .biases, .bias (whichever exist). gate_up_proj
 * and .blocks occur only in layers whose source keeps its experts fused (split.json naming
 * "fused": one expert's slice of HF gate_up_proj [E, 2I, H] is one tensor; gpt-oss MXFP4
 * blocks, scales and biases likewise). Rank of "PROJ.SUFFIX" in that order, or -1 when it is
 * not an FFN tensor tail; projection rank / TQ_FLASH_NSUFFIX, suffix rank % TQ_FLASH_NSUFFIX. */
TQ_API int tq_flash_slot_rank(const char *proj, const char *suffix);
#define TQ_FLASH_NPROJ 4
#define TQ_FLASH_NSUFFIX 5
#define TQ_FLASH_NSLOTS (TQ_FLASH_NPROJ * TQ_FLASH_NSUFFIX)
#define TQ_FLASH_PROJ(rank) tq_flash_projs[(rank) / TQ_FLASH_NSUFFIX]
#define TQ_FLASH_SUFFIX(rank) tq_flash_suffixes[(rank) % TQ_FLASH_NSUFFIX]
enum { TQ_FLASH_GATE, TQ_FLASH_UP, TQ_FLASH_GATE_UP, TQ_FLASH_DOWN };
TQ_API extern const char *const tq_flash_projs[TQ_FLASH_NPROJ];
TQ_API extern const char *const tq_flash_suffixes[TQ_FLASH_NSUFFIX];

/* dtype spellings in layer headers: written as MLX names ("uint32", "bfloat16"), read as
 * MLX names, "mlx.core."-prefixed MLX names, or safetensors names ("U32"). */
TQ_API const char *tq_flash_dtype_name(tq_dtype d);
TQ_API int tq_flash_dtype_parse(const char *s, tq_dtype *out);

/* ---------------------------------------------------------------- split.json */
typedef struct tq_flash_block {
    uint32_t layer, expert;
    uint64_t offset, length;        /* in the layer file */
    unsigned char sha256[32];       /* of the whole block, padding included */
} tq_flash_block;

typedef struct tq_flash_file {
    char *name;                     /* relative to the split dir: "experts/layer_00.bin" */
    uint64_t size;
    unsigned char sha256[32];
    uint64_t header_bytes;          /* pinned.safetensors and layer files: the header's length
                                     * (8 + N; the header page); 0 when none is recorded */
    unsigned char header_sha256[32]; /* of the file's first header_bytes bytes */
} tq_flash_file;

typedef struct tq_flash_layer {
    uint32_t layer;
    char *file;                     /* "experts/layer_00.bin" or "ffn_aligned/layer_00.bin" */
    char *prefix;                   /* source name prefix, e.g. "model.layers.0." */
    int naming;                     /* TQ_NAMING_HF, TQ_NAMING_MLX or TQ_NAMING_FUSED (moe);
                                     * TQ_NAMING_HF dense */
} tq_flash_layer;

/* FUSED: the source stacked its experts in the family's fused tensors (HF gate_up_proj /
 * down_proj, gpt-oss MXFP4 _blocks/_scales/_bias); they come back only under those names.
 * FUSED_XW ("fused_xw"): the source held them as transformers saves gpt-oss in float
 * (formats/family.h, xw_fused); the layer file holds mlx-lm's per-expert gate_proj, up_proj
 * and down_proj (.weight, .bias), made with tq_flash_xw_part, and they come back under the
 * source names (the inverse gather) or mlx-lm's (--naming mlx). */
enum tq_naming { TQ_NAMING_SOURCE = 0, TQ_NAMING_HF = 1, TQ_NAMING_MLX = 2, TQ_NAMING_FUSED = 3, TQ_NAMING_FUSED_XW = 4 };

/* One expert of an xw_fused family (transformers' GptOssExperts, models/gpt_oss/
 * modeling_gpt_oss.py: gate_up_proj [E, H, 2I] and down_proj [E, I, H] used as x @ W, gate =
 * gate_up[..., ::2], up = gate_up[..., 1::2]; gate_up_proj_bias [E, 2I] likewise) in mlx-lm's
 * per-expert layout: part k (TQ_XW_GATE_W ...) is [rows, cols] (cols 1 for a bias) and its
 * element (r, c) is element first + r * rstep + c * cstride of the stored expert slice
 * (gate_up_proj[e] for the gate and up parts, down_proj[e] for the down weight). */
enum { TQ_XW_GATE_W, TQ_XW_UP_W, TQ_XW_DOWN_W, TQ_XW_GATE_B, TQ_XW_UP_B, TQ_XW_NPARTS };
typedef struct tq_xw_part {
    uint64_t rows, cols, first, rstep, cstride;
} tq_xw_part;
TQ_API tq_xw_part tq_flash_xw_part(int k, uint64_t I, uint64_t H);
/* out[r * cols + c] = src[first + r * rstep + c * cstride], elements of esz bytes. */
TQ_API void tq_flash_xw_gather(const tq_xw_part *p, const void *src, size_t esz, void *out);

typedef struct tq_flash_manifest {
    int kind;                       /* TQ_FLASH_MOE or TQ_FLASH_DENSE */
    uint64_t align;
    uint64_t num_experts, experts_per_tok; /* moe */
    size_t n_layers;
    tq_flash_layer *layers;         /* ascending layer */
    size_t n_blocks;
    tq_flash_block *blocks;         /* layer-major: blocks[i * num_experts + e] is layers[i] */
    size_t n_files;
    tq_flash_file *files;           /* sorted by name */
    struct cJSON *json;             /* the whole document (source identity etc.) */
} tq_flash_manifest;

/* Load and validate DIR/split.json. */
TQ_API int tq_flash_manifest_load(tq_flash_manifest **out, const char *split_dir, tq_err *e);
TQ_API void tq_flash_manifest_free(tq_flash_manifest *m);
/* Block of (layer, expert), or NULL. */
TQ_API const tq_flash_block *tq_flash_manifest_block(const tq_flash_manifest *m, uint32_t layer,
                                                     uint64_t expert);
TQ_API const tq_flash_file *tq_flash_manifest_file(const tq_flash_manifest *m, const char *name);
/* SHA-256 of the first n bytes of path (read in bounded pieces); fails when it is shorter. */
TQ_API int tq_flash_hash_head(const char *path, uint64_t n, unsigned char out[32], tq_err *e);
/* The headers split.json records (pinned.safetensors, every layer file) still hash to their
 * header_sha256: a header edited after the split was made is refused, naming the file. Reads
 * only the headers. Files without a recorded header (older split.json) are not checked. */
TQ_API int tq_flash_manifest_check_headers(const tq_flash_manifest *m, const char *split_dir, tq_err *e);
/* Every file split.json lists has its recorded size and SHA-256, read in full with `threads`
 * workers (progress "verify" unless quiet); a layer file whose header and expert blocks tile
 * it is checked block by block, so a mismatch names the layer and expert. The first mismatch
 * fails it (TQ_EDATA), naming the file. */
TQ_API int tq_flash_manifest_check_data(const tq_flash_manifest *m, const char *split_dir, int threads, int quiet,
                                        tq_err *e);
/* Every file split.json lists other than pinned.safetensors and the layer files (config.json,
 * tokenizer files, tq-provenance.json: small, read whole by readers) has its recorded size and
 * SHA-256; the first that does not fails (TQ_EDATA), naming the file and the split.json key. */
TQ_API int tq_flash_manifest_check_small(const tq_flash_manifest *m, const char *split_dir, tq_err *e);
/* Layer i's parsed header h (of the file path, named in messages) agrees with split.json: its
 * format is the kind, layer_idx, page_size = align (= the recorded header_bytes), total_size =
 * the recorded size, and (MoE) num_experts and every expert block where expert_blocks puts it. */
TQ_API int tq_flash_manifest_check_layer(const tq_flash_manifest *m, size_t i, const tq_flash_header *h, const char *path,
                                         tq_err *e);
/* config's streaming block (config.json of split_dir; cfg_path in messages) agrees with
 * split.json: format, manifest "split.json", pinned_file "pinned.safetensors", page_size =
 * align, num_layers, num_experts and experts_per_tok (MoE), and expert_dir / ffn_dir naming
 * the layer files split.json lists (the same files, links followed). Refusals name the key. */
TQ_API int tq_flash_streaming_check(const struct cJSON *config, const tq_flash_manifest *m, const char *split_dir,
                                    const char *cfg_path, tq_err *e);
/* What every reader checks when it opens split_dir (0 when it has no split.json: a peer's
 * split records nothing to check against): split.json loads, the recorded headers hash as
 * recorded, tq_flash_manifest_check_small, each layer file's header parses and passes
 * tq_flash_manifest_check_layer, and config.json (when present) passes tq_flash_streaming_check. */
TQ_API int tq_flash_split_open_check(const char *split_dir, tq_err *e);

/* The split directory seen as the model it came from: pinned tensors plus every expert / FFN
 * tensor under its source name (naming: TQ_NAMING_SOURCE = as split.json records, or forced
 * per-expert HF / stacked MLX names), each readable with tq_model_read. tq_split_join writes this
 * model out; tq-verify compares it against the source. Close with tq_model_close. */
TQ_API int tq_model_open_split(tq_model **out, const char *split_dir, int naming, tq_err *e);

TQ_END_DECLS

#endif
