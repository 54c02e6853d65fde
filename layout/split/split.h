/* layout/split/split.h — tq-split: a model split into a pinned part and per-layer
 * moe_flash_v1 / flash_aligned_v1 files (formats/flash.h), the --plan arithmetic, and the
 * join back into a model directory. */
#ifndef TQ_SPLIT_H
#define TQ_SPLIT_H

#include "common/common.h"
#include "formats/flash.h"

TQ_BEGIN_DECLS

struct cJSON;

/* ---------------------------------------------------------------- targets
 * Who reads the split (man tq-split(1), TARGETS; docs/compatibility.md): tq (tq-run and its
 * tools), mac-code's flash-streaming engines, or the mlx-sniper command. A target fixes the
 * names, directories and files, the smallest header page, the config.json form, and what
 * the split must contain for that reader to compute with it. */
enum tq_split_target { TQ_TARGET_TQ = 0, TQ_TARGET_MAC_CODE = 1, TQ_TARGET_MLX_SNIPER = 2, TQ_TARGET_COUNT = 3 };
TQ_API const char *tq_split_target_name(int target);

/* ---------------------------------------------------------------- split / join / plan */
typedef struct tq_split_opts {
    int target;                     /* enum tq_split_target */
    uint64_t align;                 /* 0 = TQ_FLASH_DEFAULT_ALIGN */
    int threads;                    /* 0 = tq_default_threads() */
    uint64_t top_k;                 /* 0 = config num_experts_per_tok */
    int quiet;
    const char *source_label;       /* recorded as source.path; NULL = the model path */
    uint64_t test_header_pad;       /* test hook: bytes added to every header's size check */
    int resume;                     /* build in OUT.partial-resume with a journal; keep the
                                       layer files a run of the same command finished there */
    const struct tq_provenance *provenance; /* tq-provenance.json to write (listed in
                                             * split.json), or NULL: none */
    int force;                      /* replace a non-empty OUT_DIR (else refused) */
} tq_split_opts;

typedef struct tq_split_result {
    int kind;
    uint64_t pinned_bytes;          /* tensor bytes in pinned.safetensors */
    uint64_t n_layers, num_experts, experts_per_tok;
    uint64_t max_block_size;        /* largest expert_block_size (moe) */
    uint64_t ffn_bytes;             /* all layer-file bytes (moe and dense) */
    size_t resume_kept, resume_dropped; /* --resume: layer files kept, journaled ones redone */
    uint64_t bytes_written;
    char run_warning[768];          /* "" when tq-run decodes the model's family; else why not
                                     * (runtime/runtime.h tq_run_decode_warning): tq-split
                                     * prints it as a warning and --json as tq_run_decodes false */
} tq_split_result;

/* Split MODEL (directory or .safetensors) into OUT_DIR, which must not exist or be empty.
 * Everything is built in OUT_DIR.partial-XXXXXX and renamed at the end: on failure nothing
 * is left behind. */
TQ_API int tq_split(const char *model, const char *out_dir, const tq_split_opts *o,
                    tq_split_result *res, tq_err *e);

/* The dry run (tq-split --dry-run): every check and the whole layout of tq_split, then res
 * (bytes_written: the files below but split.json) and files (every file it would write,
 * sorted, with its exact size; mlx-sniper's links are not files); nothing is written. */
TQ_API int tq_split_dry_run(const char *model, const char *out_dir, const tq_split_opts *o, tq_split_result *res,
                            tq_out_plan *files, tq_err *e);

typedef struct tq_split_ram_plan {
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
    /* per target: whether it can read the split (else why not) and whether it fits ram:
     * pinned + reserve + 2 x top-k blocks (a layer in use and the next one read ahead;
     * dense: 2 layer files) within the envelope */
    struct {
        int readable, fits;
        uint64_t min_ram_bytes;
        char reason[400];
    } targets[TQ_TARGET_COUNT];
} tq_split_ram_plan;

/* What tq_split would write and what it needs with RAM bytes of memory; writes nothing. */
TQ_API int tq_split_plan(const char *model, const tq_split_opts *o, uint64_t ram, tq_split_ram_plan *p, tq_err *e);
/* The arithmetic alone (fills the derived fields of p from kind, ram, pinned_bytes, n_layers,
 * num_experts, experts_per_tok, block_size, ffn_bytes). */
TQ_API void tq_split_plan_compute(tq_split_ram_plan *p);
TQ_API struct cJSON *tq_split_plan_json(const tq_split_ram_plan *p);

typedef struct tq_split_join_opts {
    int naming;                     /* TQ_NAMING_SOURCE (as split.json says), HF or MLX */
    uint64_t shard_size;            /* 0 = the formats default */
    int threads;
    int quiet;
    int no_verify;                  /* skip checking every file and expert block against
                                     * split.json's SHA-256 before joining */
    const struct tq_provenance *provenance; /* the joined directory's, or NULL: none */
    int force;                      /* replace a non-empty OUT_DIR (else refused) */
} tq_split_join_opts;


/* Rebuild a model directory (stacked switch_mlp names by default for MoE sources written
 * that way, per-expert names for HF-named sources; see naming) from a split directory. */
TQ_API int tq_split_join(const char *split_dir, const char *out_dir, const tq_split_join_opts *o, tq_err *e);

TQ_END_DECLS

#endif
