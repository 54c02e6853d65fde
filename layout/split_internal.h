/* layout/split_internal.h — the split plan shared by tq_split, --plan and the manifest. */
#ifndef TQ_SPLIT_INTERNAL_H
#define TQ_SPLIT_INTERNAL_H

#include "layout/layout_internal.h"

/* One tensor of an expert block (or of a dense FFN layer file): where its bytes come from. */
typedef struct split_slot {
    int rank;                             /* block order: gate/up/down × weight/scales/biases/bias */
    const tq_model_tensor *stacked;       /* MLX: one tensor, expert axis first */
    const tq_model_tensor **per_expert;   /* HF: [num_experts] tensors (or the dense tensor at [0]) */
    uint64_t expert_bytes;                /* bytes of one expert's slice */
} split_slot;

typedef struct split_layer {
    uint32_t layer;
    char *prefix;                         /* "model.layers.3." */
    int naming;                           /* TQ_NAMING_HF / TQ_NAMING_MLX */
    int n_slots;
    split_slot slots[TQ_FFN_NSLOTS];
    char *file;                           /* "experts/layer_03.bin" */
    tq_flash_header hdr;                  /* laid out; hdr.tensors[i] is slots[i] */
    unsigned char file_sha[32];
    unsigned char (*block_sha)[32];       /* [num_experts] (moe) */
} split_layer;

typedef struct split_plan {
    tq_model *m;
    int kind;                             /* TQ_FLASH_MOE / TQ_FLASH_DENSE */
    uint64_t align, num_experts, top_k;
    size_t n_layers;
    split_layer *layers;
    size_t n_pinned;
    const tq_model_tensor **pinned;       /* in name order */
    uint64_t pinned_bytes, ffn_bytes, max_file_size;
} split_plan;

/* Classify the model's tensors and lay out every layer file (headers checked to fit). */
int split_plan_build(split_plan *p, tq_model *m, const tq_split_opts *o, tq_err *e);
void split_plan_free(split_plan *p);

/* The split.json document for a finished split. files: n output files (name, size, sha). */
struct cJSON *split_manifest_json(const split_plan *p, const char *source_label,
                                  const tq_split_file *files, size_t n_files, tq_err *e);

#endif
