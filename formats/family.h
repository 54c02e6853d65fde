/* formats/family.h — the one table of model families: how a checkpoint is recognised, where a
 * layer keeps its routed experts (separate, stacked, fused gate_up, gpt-oss MXFP4), routers and
 * shared experts, which layers are dense, which modules are linear layers in mlx-lm's model
 * class (the only ones TurboQuant quantizes) and the names that class expects after its own
 * sanitize(). tq-convert, tq-split, tq-mkmodel and the runtime all read this table; nothing
 * else in tq spells a family's tensor names (HACKING.md: "adding a model family").
 *
 * Facts come from mlx-lm's model files (mlx_lm/models/<family>.py, their sanitize() and the
 * modules they build) and from the HuggingFace checkpoints those files load; each entry in
 * family.c names the file it was written from. */
#ifndef TQ_FAMILY_H
#define TQ_FAMILY_H

#include "common/common.h"

TQ_BEGIN_DECLS

struct cJSON;

typedef enum tq_family_id {
    TQ_FAM_LLAMA, TQ_FAM_QWEN2, TQ_FAM_QWEN3, TQ_FAM_QWEN2_MOE, TQ_FAM_QWEN3_MOE,
    TQ_FAM_QWEN3_NEXT, TQ_FAM_QWEN3_5, TQ_FAM_QWEN3_5_MOE, TQ_FAM_MIXTRAL, TQ_FAM_DEEPSEEK_V3,
    TQ_FAM_GPT_OSS, TQ_FAM_GEMMA4, TQ_FAM_COUNT
} tq_family_id;

/* How a HuggingFace checkpoint stores one layer's routed experts (B = the MoE block path
 * inside the layer, e.g. "mlp" or "block_sparse_moe"; E experts, I = expert width, H = hidden). */
typedef enum tq_expert_store {
    TQ_EXP_NONE,     /* dense family */
    TQ_EXP_SEPARATE, /* B.experts.<e>.<proj>.weight, one [out, in] matrix per expert */
    TQ_EXP_FUSED,    /* B.experts.gate_up_proj [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up) and
                      * B.experts.down_proj [E, H, I]; no ".weight" suffix */
    TQ_EXP_MXFP4     /* gpt-oss release: B.experts.{gate_up,down}_proj_{blocks,scales,bias};
                      * blocks U8 [E, out, in/32, 16], scales U8 (E8M0) [E, out, in/32],
                      * bias [E, out]; gate_up rows interleaved: even rows gate, odd rows up.
                      * The same family saved by transformers in float (bf16 checkpoints on
                      * the hub): tq_family.xw_fused below */
} tq_expert_store;

/* Which layers of a MoE family have routed experts (the rest have a dense MLP). */
typedef enum tq_dense_rule {
    TQ_DENSE_NONE,        /* dense family: no layer has experts */
    TQ_DENSE_ALL,         /* every layer is MoE */
    TQ_DENSE_SPARSE_STEP, /* MoE unless L is in mlp_only_layers or (L+1) % decoder_sparse_step != 0 */
    TQ_DENSE_FIRST_K      /* MoE iff L >= first_k_dense_replace and L % moe_layer_freq == 0 */
} tq_dense_rule;

/* Projections of one expert, in layer-file block order. */
enum tq_proj { TQ_PROJ_GATE, TQ_PROJ_UP, TQ_PROJ_GATE_UP, TQ_PROJ_DOWN, TQ_PROJ_COUNT };

/* Transforms mlx-lm's sanitize() applies that tq-convert must apply itself when it writes the
 * MLX form (because the renamed output no longer triggers them; see family.c). */
#define TQ_FT_NORM_SHIFT 1u /* HF stores some RMSNorm weights as offsets from 1; MLX as 1 + w */
#define TQ_FT_CONV_KLAST 2u /* depthwise conv1d weight [C, 1, K] becomes [C, K, 1] (same bytes) */

/* Where mlx-lm's class looks for the multi-token-prediction head, and what it does with it. */
typedef enum tq_mtp_form {
    TQ_MTP_NONE,       /* no MTP head in this family's checkpoints */
    TQ_MTP_PREFIX,     /* tensors under "mtp." (Qwen3-Next, Qwen3.5) */
    TQ_MTP_EXTRA_LAYER /* layers numbered >= num_hidden_layers (DeepSeek-V3: layer 61) */
} tq_mtp_form;

/* The decoder tq-run runs a family with (runtime/: the math; families that share one list the
 * same value). TQ_DEC_NONE: tq-run refuses the family, and tq-convert / tq-split warn. */
typedef enum tq_decoder {
    TQ_DEC_NONE,
    TQ_DEC_LLAMA,      /* llama, mistral */
    TQ_DEC_QWEN3,
    TQ_DEC_QWEN3_MOE,
    TQ_DEC_MIXTRAL,
    TQ_DEC_DEEPSEEK,   /* deepseek_v3, kimi_k2: multi-head latent attention */
    TQ_DEC_GPT_OSS,
    TQ_DEC_QWEN3_NEXT, /* qwen3_next, qwen3_5, qwen3_5_moe: hybrid linear / gated full attention */
    TQ_DEC_QWEN2,      /* qwen2 (Qwen2, Qwen2.5): llama with q/k/v biases */
    TQ_DEC_QWEN2_MOE,  /* qwen2_moe: qwen2 attention, softmax top-k + sigmoid-gated shared expert */
    TQ_DEC_GEMMA4,     /* gemma4: Gemma 4's text model (runtime/forward.c gemma4_layer) */
    TQ_DEC_COUNT
} tq_decoder;

/* How the router's logits become expert weights. */
typedef enum tq_route {
    TQ_ROUTE_SOFTMAX,       /* softmax over all experts, top-k, renormalised when norm_topk */
    TQ_ROUTE_TOPK_SOFTMAX,  /* top-k logits, softmax over those k (gpt-oss) */
    TQ_ROUTE_SIGMOID_GROUP  /* sigmoid, + correction bias for choosing, group-limited top-k,
                             * renormalised when norm_topk, times routed_scaling_factor */
} tq_route;

/* Attention kinds a decoder runs besides full attention (tq_family_decode.kinds). */
#define TQ_KIND_SLIDING 1u
#define TQ_KIND_LINEAR 2u

/* What tq-run's config reader (runtime/config.c rt_config_load) takes from the family: the
 * config fields and their defaults, as data. A decoder's dims that are more than a key and a
 * default (MLA, Gated DeltaNet) are read by that decoder's own function in runtime/config.c. */
typedef struct tq_family_decode {
    tq_decoder decoder;            /* TQ_DEC_NONE: not decoded */
    unsigned kinds;                /* TQ_KIND_*: layer kinds (from layer_types or the family's
                                    * pattern) the decoder runs; any other is refused by name */
    int qk_norm;                   /* RMSNorm over each query and key head (q_norm, k_norm) */
    int att_gate;                  /* q_proj gives query and gate; out *= sigmoid(gate) */
    int needs_inter;               /* intermediate_size is required (every layer dense) */
    const char *const *window_all; /* model_types whose sliding_window makes every layer
                                    * sliding (mistral), "" terminated; NULL: none */
    /* routed experts (read only when some layer is MoE) */
    tq_route route;
    int norm_topk;                 /* renormalise the top-k weights: the default */
    const char *norm_topk_key;     /* the config key that overrides it, or NULL */
    const char *shared_key;        /* config key: shared expert width, or NULL */
    /* gpt-oss's MLP and attention */
    int sinks;                     /* a learned per-head logit joins every softmax */
    int clamped_swiglu;            /* min(g, limit), clamp(u, +-limit), g*sigmoid(alpha g)*(u+1) */
    double swiglu_alpha, swiglu_limit; /* the limit's default (config key "swiglu_limit") */
} tq_family_decode;

typedef struct tq_family {
    tq_family_id id;
    const char *name;                   /* canonical: the mlx-lm module (mlx_lm/models/NAME.py) */
    const char *const *model_types;     /* config model_type values (top level or text_config) */
    const char *const *architectures;   /* config architectures[0] values */
    const char *source;                 /* the mlx-lm file the facts were written from */
    int wrapped;                        /* HF text weights under "model.language_model." */
    /* ---- routed experts */
    tq_expert_store store;              /* how the HF checkpoint stores them */
    const char *moe_block;              /* "mlp", "block_sparse_moe", "" (gemma4: layer itself) */
    const char *v5_block;               /* where transformers 5 keeps the MoE block when it
                                         * renames moe_block, or NULL. Mixtral: "mlp"
                                         * (transformers' conversion_mapping.py, "mixtral":
                                         * WeightRenaming .block_sparse_moe.gate -> .mlp.gate,
                                         * experts.*.w1 / w3 stacked and concatenated into
                                         * mlp.experts.gate_up_proj [E, 2I, H], w2 into
                                         * mlp.experts.down_proj [E, H, I]). A state dict saved
                                         * without reverting that mapping holds the router
                                         * and the fused experts there; nothing else is read
                                         * under this path */
    const char *hf_proj[TQ_PROJ_COUNT]; /* HF per-expert projection names (SEPARATE) */
    const char *mlx_container;          /* stacked experts in mlx-lm: "mlp.switch_mlp", ... */
    int expert_bias;                    /* experts carry a bias per projection (gpt-oss) */
    int xw_fused;                       /* float experts as transformers' GptOssExperts holds
                                         * them (models/gpt_oss/modeling_gpt_oss.py): B.experts.
                                         * gate_up_proj [E, H, 2I] and down_proj [E, I, H],
                                         * applied as x @ W (not as Linear weights), gate and
                                         * up interleaved along the last axis (gate = columns
                                         * 0, 2, 4..., up = 1, 3, 5...); their biases are the
                                         * MXFP4 form's *_bias tensors */
    const char *experts_key;            /* config key: routed experts per MoE layer */
    const char *topk_key;               /* config key: experts per token */
    const char *moe_inter_key;          /* config key: expert width I */
    tq_dense_rule dense;
    /* ---- other MoE tensors (module paths relative to the layer, "" terminated lists) */
    const char *const *routers;         /* router modules and their extra tensors: never
                                         * quantized, copied bit for bit */
    const char *shared;                 /* shared expert MLP module, or NULL */
    const char *shared_gate;            /* its sigmoid gate, or NULL */
    /* ---- quantization */
    const char *const *linears;         /* modules (relative to the layer, MLX names) that
                                         * mlx-lm builds as nn.Linear / SwitchLinear: the only
                                         * ones quantized. "lm_head" is added by the table. */
    const char *const *keep_float;      /* tensors (relative to the layer) that mlx-lm's
                                         * sanitize reshapes or reads as float: never quantized */
    unsigned transforms;                /* TQ_FT_* tq-convert applies for the MLX form */
    tq_mtp_form mtp;
    int mtp_keep;                       /* 1: convert copies the MTP head unquantized (mlx-lm's
                                         * sanitize drops it on load); 0: convert leaves it out,
                                         * as mlx-lm's sanitize would (named in the summary) */
    int tied_by_default;                /* tie_word_embeddings when config.json has none: the
                                         * default of the family's transformers config class
                                         * (PretrainedConfig says True; LlamaConfig, MistralConfig,
                                         * the Qwen*Config, MixtralConfig, DeepseekV3Config and
                                         * GptOssConfig say False; Gemma4TextConfig and
                                         * Gemma4Config True) */
    /* ---- other tools */
    const char *gguf_arch;              /* general.architecture llama.cpp writes for it
                                         * (formats/gguf_names.c maps the names), or NULL */
    tq_family_decode decode;            /* what tq-run does with it */
} tq_family;

TQ_API const tq_family *tq_family_get(tq_family_id id);
/* The first family whose gguf_arch is ARCH (Mixtral shares "llama"); NULL when none. */
TQ_API const tq_family *tq_family_by_gguf(const char *arch);
/* The model_types of every family tq-run decodes, ", " separated, in table order, into buf
 * (cap bytes, truncated if short); returns buf. */
TQ_API const char *tq_family_decodable(char *buf, size_t cap);
/* By canonical name or any of its model_type values; NULL when unknown. */
TQ_API const tq_family *tq_family_by_name(const char *name);
/* The family of a config.json: model_type (top level, then text_config), then
 * architectures[0]. NULL when the config names no family tq knows. */
TQ_API const tq_family *tq_family_detect(const struct cJSON *config);
/* The object holding the language model's keys: text_config when present, else config. */
TQ_API const struct cJSON *tq_family_text_config(const struct cJSON *config);
/* KEY's value, looked up in text_config first, then at the top level; NULL when absent or
 * null. */
TQ_API const struct cJSON *tq_family_cfg_item(const struct cJSON *config, const char *key);
/* An unsigned config key, looked up in text_config first, then at the top level.
 * 0 found, 1 absent (or null), -1 present but not a non-negative integer (e names the key). */
TQ_API int tq_family_cfg_u64(const struct cJSON *config, const char *key, uint64_t *out, tq_err *e);

/* The one validation pass over a config.json, run by every reader (tq-run, tq-split,
 * tq-convert) before it uses a value: each key tq reads is checked when present for its type,
 * range and finiteness (rms_norm_eps and rope_theta finite and positive, head counts that
 * divide, an even head_dim, top-k within the expert count, layer_types as long as
 * num_hidden_layers, a positive sliding window for sliding layers, rotary scaling factors,
 * partial_rotary_factor in (0, 1], the MLA and DeltaNet dims, the quantization block). f may
 * be NULL (generic keys only). An error reads "DIR: config.json: "KEY" is VALUE: why" (DIR
 * NULL: without the prefix). Absent keys are left to the reader (defaults, "missing"). */
TQ_API int tq_family_config_check(const tq_family *f, const struct cJSON *config, const char *dir, tq_err *e);

/* Whether layer L of a model with this config has routed experts: 1 MoE, 0 dense, -1 config
 * error (e names the key). Dense families always answer 0. */
TQ_API int tq_family_layer_is_moe(const tq_family *f, const struct cJSON *config, uint64_t layer, tq_err *e);
/* Routed experts per MoE layer as the config says (0 when the family is dense or the key is
 * absent); -1 on a malformed value. */
TQ_API int tq_family_num_experts(const tq_family *f, const struct cJSON *config, uint64_t *out, tq_err *e);

/* Attention kind of layer L: layer_types when the config lists them, else the family's
 * pattern (qwen3_next/qwen3_5: full every full_attention_interval (4) layers, else linear;
 * gpt_oss: sliding on even layers; gemma4: full every 6th layer and the last (Gemma4TextConfig);
 * mixtral: sliding when sliding_window is set). -1 on a malformed config (e names the key). */
enum tq_attn_kind { TQ_ATTN_FULL, TQ_ATTN_LINEAR, TQ_ATTN_SLIDING };
TQ_API int tq_family_attn_kind(const tq_family *f, const struct cJSON *config, uint64_t layer, tq_err *e);

/* ---- tensor names */
typedef enum tq_name_role {
    TQ_ROLE_OTHER,       /* attention, norms, embeddings, lm_head, ... */
    TQ_ROLE_EXPERT,      /* a routed expert tensor (any form) */
    TQ_ROLE_ROUTER,      /* router / gate and its bias, correction bias, scales */
    TQ_ROLE_SHARED,      /* a shared expert's tensor */
    TQ_ROLE_SHARED_GATE, /* the shared expert's gate */
    TQ_ROLE_FFN,         /* the dense MLP of a layer */
    TQ_ROLE_MTP          /* part of the multi-token-prediction head */
} tq_name_role;

/* Forms of an expert tensor name (TQ_ROLE_EXPERT). */
enum tq_expert_form {
    TQ_FORM_SEPARATE = 1, /* HF: <layer>B.experts.<e>.<proj>.<suffix> */
    TQ_FORM_FUSED,        /* HF: <layer>B.experts.{gate_up_proj,down_proj} */
    TQ_FORM_MXFP4,        /* HF: <layer>B.experts.<proj>_{blocks,scales,bias} */
    TQ_FORM_STACKED,      /* MLX: <layer><mlx_container>.<proj>.<suffix> (expert axis first) */
    TQ_FORM_FUSED_XW      /* HF float, x @ W: <layer>B.experts.{gate_up_proj,down_proj} of a
                           * family with xw_fused (transformers' gpt-oss layout) */
};

typedef struct tq_name_info {
    tq_name_role role;
    int form;             /* enum tq_expert_form for TQ_ROLE_EXPERT, else 0 */
    int has_layer;
    uint64_t layer;       /* "layers.<L>." index (MTP head layers: their own index) */
    size_t root_len;      /* "model." / "model.language_model." / "language_model.model." /
                           * "mtp." (MTP head) */
    size_t layer_len;     /* length of "<root>layers.<L>." (0 without a layer) */
    int v5;               /* the router or fused experts under the family's v5_block */
    uint64_t expert;      /* TQ_FORM_SEPARATE */
    int proj;             /* enum tq_proj for expert tensors, else -1 */
    const char *suffix;   /* into name: "weight", "scales", "biases", "bias", "codebook",
                           * "signs", "blocks" (MXFP4 blocks), "" (fused, no suffix) */
} tq_name_info;

/* Analyse a tensor name of a checkpoint of family f (HF or MLX naming; f NULL: the qwen3_moe
 * layout). n_layers = num_hidden_layers (0: unknown), which places DeepSeek-style MTP layers.
 * Never fails: a name the family does not explain is TQ_ROLE_OTHER. */
TQ_API void tq_family_name(const tq_family *f, uint64_t n_layers, const char *name, tq_name_info *out);
/* A name that looks like a routed expert tensor of some family ("experts.<n>.", ".experts."
 * + a projection, "switch_mlp.", "switch_glu."): tq-split refuses to leave such a tensor
 * pinned when the family does not explain it. */
TQ_API int tq_family_looks_like_expert(const char *name);

/* The block that holds the family's fused experts (<block>.experts.gate_up_proj): v5_block
 * when the family has one, else moe_block. */
TQ_API const char *tq_family_fused_block(const tq_family *f);
/* The transformers 5 path (v5_block) of a module path relative to the layer under moe_block
 * ("block_sparse_moe.gate" -> "mlp.gate"), into out (cap bytes): 0, or -1 when the family
 * renames nothing there or it does not fit. */
TQ_API int tq_family_v5_path(const tq_family *f, const char *rel, char *out, size_t cap);

/* The MLX (post-sanitize) name of a non-expert tensor name: the wrapped root
 * "model.language_model." becomes "language_model.model.", "lm_head." becomes
 * "language_model.lm_head." (wrapped families only), a router under v5_block goes back under
 * moe_block (mlx-lm's model classes have the hub's module paths); everything else is
 * unchanged.
 * Writes at most cap bytes; returns 0 or -1 when it does not fit. */
TQ_API int tq_family_mlx_name(const tq_family *f, const char *name, char *out, size_t cap);
/* The inverse (HF name of an MLX name), for --dequantize. */
TQ_API int tq_family_hf_name(const tq_family *f, const char *name, char *out, size_t cap);
/* Module path P (a tensor name without ".weight") is a linear layer of the family's mlx-lm
 * class: 1 yes (quantizable), 0 no. P is in MLX naming. */
TQ_API int tq_family_is_linear(const tq_family *f, const char *P);
/* Tensor (MLX naming) must stay float and bit-identical: routers, shared-expert gates, the
 * family's keep_float list, and generic never-quantize modules (norms, conv1d, A_log,
 * dt_bias, sinks, indexers). Returns a short reason or NULL. */
TQ_API const char *tq_family_keep_reason(const tq_family *f, const char *name);
/* HF norm weights stored as offsets from 1 that the MLX form stores as 1 + w (families with
 * TQ_FT_NORM_SHIFT): 1 when NAME (1-D) is one of them. */
TQ_API int tq_family_norm_is_shifted(const tq_family *f, const char *name);
/* Layer-file order of expert tensor kinds: rank of (proj, suffix), or -1. Gate, up, gate_up,
 * down; within one: weight/blocks, scales, biases, bias. */
TQ_API int tq_family_slot_rank(int proj, const char *suffix);
/* "gate_proj" etc. (MLX projection names) */
TQ_API const char *tq_family_proj_name(int proj);

TQ_END_DECLS

#endif
