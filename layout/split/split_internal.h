/* layout/split/split_internal.h — the split plan shared by tq_split, --plan and the manifest. */
#ifndef TQ_SPLIT_INTERNAL_H
#define TQ_SPLIT_INTERNAL_H

#include "formats/family.h"
#include "layout/split/split.h"

#include <cjson/cJSON.h>

/* One tensor of an expert block (or of a dense FFN layer file): where its bytes come from. */
typedef struct split_slot {
    int rank;                             /* block order: gate/up/down × weight/scales/biases/bias */
    const tq_model_tensor *stacked;       /* MLX: one tensor, expert axis first */
    const tq_model_tensor **per_expert;   /* HF: [num_experts] tensors (or the dense tensor at [0]) */
    uint64_t expert_bytes;                /* bytes of one expert's slice */
    int xw;                               /* FUSED_XW: 1 + TQ_XW_* when the block tensor is
                                           * gathered from the stacked slice (xwp); 0 = copied */
    tq_xw_part xwp;
} split_slot;

typedef struct split_layer {
    uint32_t layer;
    char *prefix;                         /* "model.layers.3." */
    int naming;                           /* TQ_NAMING_HF / _MLX / _FUSED / _FUSED_XW */
    int n_slots;
    split_slot slots[TQ_FLASH_NSLOTS];
    char *file;                           /* "experts/layer_03.bin" */
    tq_flash_header hdr;                  /* laid out; hdr.tensors[i] is slots[i] */
    unsigned char file_sha[32];
    unsigned char (*block_sha)[32];       /* [num_experts] (moe) */
} split_layer;

typedef struct split_plan {
    tq_model *m;
    const tq_family *fam;                 /* the model's family (formats/family.h) or NULL */
    const tq_family *names;               /* how expert names are spelled: fam when it has
                                             experts, else the qwen3_moe layout */
    int target;                           /* enum tq_split_target */
    int kind;                             /* TQ_FLASH_MOE / TQ_FLASH_DENSE */
    uint64_t align, num_experts, top_k;
    size_t n_layers;
    split_layer *layers;
    size_t n_pinned;
    const tq_model_tensor **pinned;       /* in name order */
    char **pinned_names;                  /* their names in pinned.safetensors (NULL: as in the
                                             source); set by split_profile_names */
    uint64_t pinned_bytes, ffn_bytes, max_file_size;
} split_plan;

/* Classify the model's tensors and lay out every layer file (headers checked to fit). */
int split_plan_build(split_plan *p, tq_model *m, const tq_split_opts *o, tq_err *e);
void split_plan_free(split_plan *p);

/* ---- targets (split_profile.c) */
typedef struct split_profile {
    const char *name;            /* "tq", "mac-code", "mlx-sniper" */
    const char *expert_dir;      /* directory of the MoE layer files */
    const char *file_prefix;     /* layer file: PREFIX + two-digit layer + ".bin" */
    const char *link_prefix;     /* a link LINK_PREFIX+LL.bin -> the layer file, or NULL */
    const char *stream_dir;      /* streaming.expert_dir in config.json */
    int mlp_prefix;              /* expert tensor names start with "mlp." */
    uint64_t min_page;           /* smallest header page the reader can parse */
    int flatten;                 /* text_config lifted, "language_model." dropped from names */
    int needs_affine4;           /* experts / FFN must be MLX affine 4-bit group 64 with biases */
    int moe_only;                /* the reader has no dense (flash_aligned_v1) path */
} split_profile;
const split_profile *split_profile_get(int target);
/* Refusals that depend on options only (--align below the target's page). */
int split_profile_check_opts(const tq_split_opts *o, tq_err *e);
/* MoE: the layers holding routed experts (ascending, distinct); a target that opens one
 * expert file per layer 0..num_hidden_layers-1 refuses any other set. */
int split_profile_check_layers(const split_plan *p, const uint32_t *layers, size_t n, tq_err *e);
/* After layout: what the target cannot compute or read (experts' format, layouts differing
 * from layer 0's, dense splits). */
int split_profile_check(const split_plan *p, tq_err *e);
/* pinned_names for targets that drop the multimodal wrapper (refuses collisions). */
int split_profile_names(split_plan *p, tq_err *e);
/* config.json for the target (c is the source's, changed in place). */
int split_profile_config(const split_plan *p, cJSON *c, tq_err *e);

/* The split.json document for a finished split. files: n output files (name, size, sha). */
struct cJSON *split_manifest_json(const split_plan *p, const char *source_label,
                                  const tq_flash_file *files, size_t n_files, tq_err *e);

/* ---- tq_split internals (split_write.c, split_outfile.c, split_pinned.c, split_layers.c) */
#define SPLIT_CHUNK (4u << 20)

/* An output file in the staging directory, hashed as it is written. */
typedef struct out_file {
    int fd;
    char *path;
    tq_sha256 *sha;
    uint64_t size;
    char *rel;                     /* name relative to the split dir */
} out_file;
int split_of_open(out_file *f, const char *dir, const char *rel, tq_err *e);
int split_of_write(out_file *f, const void *buf, size_t len, tq_err *e);
void split_of_abort(out_file *f);
/* Close and record name/size/sha in rec (takes f->rel). */
int split_of_commit(out_file *f, tq_flash_file *rec, tq_err *e);
/* Switch to O_DIRECT where the filesystem allows; write_direct falls back to buffered. */
void split_of_try_direct(out_file *f);
int split_write_direct(out_file *f, const void *buf, size_t len, uint64_t off, tq_err *e);
void *split_aligned_zeroed(size_t n);
int split_fsync_path(const char *path, int dir, tq_err *e);

typedef struct split_run {
    split_plan plan;
    const tq_split_opts *o;
    tq_adir out;                   /* OUT.partial-XXXXXX while it is built */
    tq_sources src;                /* the model's files, re-checked before publishing */
    const char *stage;             /* out.tmp_path */
    tq_flash_file *files;
    size_t n_files, cap_files;
    tq_progress prog;              /* advanced by the work queue of each part in turn */
    tq_st_writer *pinned_w;        /* written, finished last */
    tq_resume *res;                /* --resume: the journal of OUT.partial-resume */
} split_run;
tq_flash_file *split_add_file(split_run *r, tq_err *e);
int split_write_pinned(split_run *r, tq_err *e);
/* pinned.safetensors' declarations (names as written; free the array only) */
tq_st_decl *split_pinned_decls(const split_plan *p, tq_err *e);
int split_write_header_page(out_file *of, const tq_flash_header *h, tq_err *e);
int split_write_moe_layer(split_run *r, split_layer *L, tq_err *e);
int split_write_dense_layers(split_run *r, tq_err *e);
/* header_bytes and header_sha256 of the written pinned and layer files (split_manifest.c) */
int split_header_hashes(split_run *r, tq_err *e);

#endif
