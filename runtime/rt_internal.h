/* runtime/rt_internal.h — pieces of the reference decoder shared between its files. */
#ifndef TQ_RT_INTERNAL_H
#define TQ_RT_INTERNAL_H

#include "formats/family.h"
#include "formats/formats.h"
#include "runtime/runtime.h"

#include <pthread.h>

/* ------------------------------------------------------------ config */
/* Families the decoder runs: the family table's decoder (formats/family.h tq_decoder; a
 * family's row says which one runs it; docs/runtime.md walks through one layer of each). */
enum rt_arch {
    RT_LLAMA = TQ_DEC_LLAMA,           /* llama, mistral */
    RT_QWEN3 = TQ_DEC_QWEN3,
    RT_QWEN3_MOE = TQ_DEC_QWEN3_MOE,
    RT_MIXTRAL = TQ_DEC_MIXTRAL,
    RT_DEEPSEEK = TQ_DEC_DEEPSEEK,     /* deepseek_v3, kimi_k2 */
    RT_GPT_OSS = TQ_DEC_GPT_OSS,
    RT_QWEN3_NEXT = TQ_DEC_QWEN3_NEXT, /* qwen3_next, qwen3_5, qwen3_5_moe: hybrid linear / gated full attention */
    RT_QWEN2 = TQ_DEC_QWEN2,           /* qwen2 (Qwen2, Qwen2.5): llama with q/k/v biases, sliding layers by max_window_layers */
    RT_QWEN2_MOE = TQ_DEC_QWEN2_MOE,   /* qwen2_moe: qwen2 attention, softmax top-k experts + a sigmoid-gated shared expert */
    RT_GEMMA4 = TQ_DEC_GEMMA4,         /* gemma4 (Gemma 4 text): sandwich norms, q/k/v norms, sliding and
                                        * full layers of their own head size and rope, k = v on full
                                        * layers, a GELU MLP beside the routed experts, layer_scalar,
                                        * soft-capped logits */
};

/* What a layer's token mixer is. */
enum rt_mixer {
    RT_MIX_FULL,    /* softmax attention over every earlier position */
    RT_MIX_SLIDING, /* softmax attention over the last `window` positions */
    RT_MIX_LINEAR,  /* Gated DeltaNet: conv state + recurrent state, no KV cache */
    RT_MIX_MLA,     /* multi-head latent attention: cache of the compressed kv */
};

/* How the router's logits become expert weights (formats/family.h tq_route). */
enum rt_route {
    RT_ROUTE_SOFTMAX = TQ_ROUTE_SOFTMAX,             /* softmax over all experts, top-k, renormalised when norm_topk */
    RT_ROUTE_TOPK_SOFTMAX = TQ_ROUTE_TOPK_SOFTMAX,   /* top-k logits, softmax over those k (gpt-oss) */
    RT_ROUTE_SIGMOID_GROUP = TQ_ROUTE_SIGMOID_GROUP, /* sigmoid, + correction bias for choosing, group-limited
                                                      * top-k, renormalised when norm_topk, times route_scale
                                                      * (DeepSeek-V3) */
};

/* Rotary embedding of one layer kind: `dim` leading dims of each head rotated, pair i turned
 * by pos * inv_freq[i], cos and sin multiplied by `factor` (YaRN attention factor). */
typedef struct rt_rope {
    uint64_t dim;
    int interleaved;  /* pairs (2i, 2i+1) (DeepSeek) instead of (i, i + dim/2) */
    double factor;
    double *inv_freq; /* [dim / 2] */
} rt_rope;

typedef struct rt_config {
    int arch;
    const tq_family *fam;  /* formats/family.h: where the family keeps its tensors */
    char arch_name[32];
    uint64_t hidden, inter, layers, heads, kv_heads, head_dim, vocab;
    double rope_theta, eps;
    int tied;
    int tied_explicit; /* config.json has tie_word_embeddings (else the family's default) */
    int qk_norm;
    unsigned char *mixer;  /* [layers] enum rt_mixer */
    unsigned char *moe;    /* [layers] 1 = routed experts, 0 = dense MLP */
    /* attention */
    rt_rope rope;
    double att_scale;      /* softmax scale of q.k */
    uint64_t window;       /* sliding-window layers: positions attended (the current one included) */
    uint64_t max_pos;      /* config.json's max_position_embeddings: positions the model takes (0: not stated) */
    int att_gate;          /* qwen3_next: q_proj gives query and gate per head; out *= sigmoid(gate) */
    int sinks;             /* gpt-oss: a learned per-head logit joins every softmax */
    /* multi-head latent attention (DeepSeek-V3) */
    uint64_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
    /* Gated DeltaNet (qwen3_next) */
    uint64_t lk_heads, lv_heads, lk_dim, lv_dim, conv_k;
    /* MoE */
    uint64_t experts, top_k, moe_inter, shared_inter;
    int norm_topk;
    int route;             /* enum rt_route */
    double route_scale;    /* routed_scaling_factor (1 = none) */
    uint64_t n_group, topk_group;
    int clamped_swiglu;    /* gpt-oss: min(g, limit), clamp(u, -limit, limit), g*sigmoid(alpha g)*(u+1) */
    double swiglu_alpha, swiglu_limit;
    /* gemma4 (transformers' models/gemma4/modeling_gemma4.py; config.c says which keys) */
    uint64_t g_head_dim, g_kv_heads; /* full_attention layers: global_head_dim, and
                                      * num_global_key_value_heads when attention_k_eq_v */
    int k_eq_v;            /* attention_k_eq_v: full layers have no v_proj, v = k_proj(h) */
    rt_rope rope_full;     /* full_attention layers' rope (proportional); c->rope: sliding */
    double softcap;        /* final_logit_softcapping: logits = softcap·tanh(logits/softcap) (0: none) */
    int gelu;              /* MLP activation gelu_pytorch_tanh(g)·u instead of silu(g)·u */
    /* MLX affine defaults from the "quantization" block */
    uint64_t q_bits, q_group;
    int tq_norot;            /* TurboQuant quantization.rotation "none" */
    /* split directory */
    int split;
    char pinned_file[256];
    char expert_dir[256];
    char ffn_dir[256];
} rt_config;

int rt_config_load(rt_config *c, const char *dir, struct cJSON **json_out, tq_err *e);
void rt_config_free(rt_config *c);
int rt_layer_is_moe(const rt_config *c, uint64_t l);
/* Affine bits/group for a module: per-module override in the quantization block, else default. */
void rt_config_affine(const struct cJSON *cfg, const char *module, uint64_t *bits, uint64_t *group,
                      const rt_config *c);

/* ------------------------------------------------------------ linear layers */
enum rt_kind { RT_DENSE, RT_AFFINE, RT_TQ, RT_MXFP4 };

/* y = W x for one weight matrix (rows = out, cols = in). Pointers refer to raw file bytes. */
typedef struct rt_linear {
    int kind;
    uint64_t rows, cols;
    tq_dtype wdt;          /* dense: F32/F16/BF16 */
    const void *w;         /* dense: rows x cols; quantized: rows x wpr u32; MXFP4: rows x cols/2
                            * bytes (16 per block of 32), scales rows x cols/32 E8M0 bytes */
    uint64_t wpr;          /* u32 words per row */
    uint64_t bits, group, ngroups;
    const void *scales;    /* rows x ngroups */
    tq_dtype sdt;
    const void *biases;    /* affine: rows x ngroups */
    tq_dtype zdt;
    const void *codebook;  /* tq: 2^bits entries */
    tq_dtype cdt;
    const void *signs;     /* tq: cols entries */
    tq_dtype gdt;
    const void *bias;      /* optional output bias (rows) */
    tq_dtype biasdt;
    uint64_t rstep;        /* MXFP4 weight rows and bias entries: row r is stored row r * rstep
                            * (2 for gpt-oss's interleaved gate/up; 0 or 1 otherwise) */
    int norot;             /* tq: quantized unrotated (rotation "none", all-ones signs) */
    int packed;            /* the first rows - rows mod 16 rows are in the packed layout of the
                            * AVX-512 4-bit kernel (rt_linear_pack; docs/runtime.md) */
} rt_linear;

/* Byte sizes of one matrix's parts, for stacked experts and block templates. */
uint64_t rt_linear_wbytes(const rt_linear *l);
uint64_t rt_linear_sbytes(const rt_linear *l);

/* ------------------------------------------------------------ thread pool */
typedef struct rt_pool rt_pool;
typedef void (*rt_task_fn)(void *ctx, uint64_t begin, uint64_t end);
int rt_pool_create(rt_pool **p, int threads, tq_err *e);
void rt_pool_destroy(rt_pool *p);
int rt_pool_threads(const rt_pool *p);
/* Split [0, n) in contiguous chunks over the threads and wait. Results must not depend on
 * the chunking (each item computed whole by one thread). */
void rt_pool_for(rt_pool *p, uint64_t n, rt_task_fn fn, void *ctx);
/* The same in chunks of grain items (the last may be shorter); n <= grain runs in the caller. */
void rt_pool_for_grain(rt_pool *p, uint64_t n, uint64_t grain, rt_task_fn fn, void *ctx);

/* ------------------------------------------------------------ kernels */
/* Scratch of rt_matvec, grown on demand and reused by every call. */
typedef struct rt_scratch {
    float *xr;             /* TurboQuant: [cols] signs ⊙ x, block-Hadamard rotated;
                              affine: [ngroups] per-group sums of x */
    uint64_t cap;          /* floats allocated */
} rt_scratch;

float rt_f16(uint16_t h);
void rt_kernels_init(void);
/* The matvec kernels' SIMD level: 0 portable, 1 AVX2 or NEON, 2 AVX-512F (x86-64). max >= 0
 * sets it to min(max, what the CPU has), for tests comparing the paths; returns the level. */
int rt_kernels_simd(int max);
float rt_load_f(tq_dtype dt, const void *p, uint64_t i);
/* y[0..rows) = W x. x has cols entries. */
int rt_matvec(rt_pool *p, const rt_linear *l, const float *x, float *y, rt_scratch *s, tq_err *e);
/* ys[i] = ls[i] xs[i] for i < n, up to RT_MATVEC_BATCH matrices as one job of the pool (their
 * row chunks one after another), so that the threads split all of them at once; each row is
 * computed as rt_matvec computes it (the same bits). A TurboQuant x shared by matrices with the
 * same signs is rotated once. No ys[i] may overlap any xs[j]. */
#define RT_MATVEC_BATCH 16
int rt_matvec_n(rt_pool *p, size_t n, const rt_linear *ls, const float *const *xs, float *const *ys, rt_scratch *s,
                tq_err *e);
/* Row r of a matrix as floats, any kind (embedding lookup, MLA up-projection rows). */
int rt_linear_row(const rt_linear *l, uint64_t r, float *out, tq_err *e);
/* 1 when rt_linear_pack would pack l: the AVX-512 kernels are in use (the level when asked),
 * 4-bit TurboQuant or affine, columns and group multiples of 8, at least 16 rows, not packed. */
int rt_linear_packable(const rt_linear *l);
/* Rewrite l's indices, scales and biases in place into the packed layout (docs/runtime.md,
 * The packed layout) and set l->packed; nothing unless l has that shape and the CPU has
 * AVX-512F (at any level: the caller decides by rt_linear_packable). The memory must
 * be writable and not read through another rt_linear that is not packed too (the runtime's
 * own copy of the weights: files are never touched). y = W x keeps every bit. -1: no memory. */
int rt_linear_pack(rt_linear *l, tq_err *e);

/* ------------------------------------------------------------ math (rt_math.c) */
/* Platform-independent exp/log/sin/cos: same bits on every IEEE-754 system. */
double rt_exp(double x);
float rt_expf(float x);
double rt_log(double x);
void rt_sincos(double a, double *s, double *c);

/* ------------------------------------------------------------ expert cache / IO */
typedef struct rt_block_src {
    char *path;
    int fd;
    int io;                /* enum tq_run_io in effect: DIRECT, FADVISE or BUFFERED */
    uint64_t data_start, block_size, n_experts, align;
    unsigned char (*sha)[32]; /* per expert, when --check-blocks */
    int have_sha;
} rt_block_src;

typedef struct rt_cache rt_cache;
/* Where the cache's block buffers come from: rt_alloc_aligned and free unless set. A device
 * backend sets its own memory (runtime/backend.c), so kernels read the blocks where they were
 * read, with no staging copy. free may defer the release until queued work has run. */
typedef struct rt_cache_mem {
    void *(*alloc)(void *user, uint64_t n, uint64_t align, tq_err *e);
    void (*free)(void *user, void *p);
    void *user;
} rt_cache_mem;
/* Before the first acquire. */
void rt_cache_set_mem(rt_cache *c, const rt_cache_mem *m);
int rt_cache_create(rt_cache **c, uint64_t budget, uint64_t layers, uint64_t experts,
                    int io_threads, tq_err *e);
void rt_cache_destroy(rt_cache *c);
/* Make the n blocks of layer l available (hits or parallel reads); bufs[i] stays valid
 * until rt_cache_release. */
int rt_cache_acquire(rt_cache *c, rt_block_src *src, uint64_t layer, const uint64_t *ids, size_t n,
                     int check, const uint8_t **bufs, tq_err *e);
void rt_cache_release(rt_cache *c, uint64_t layer, const uint64_t *ids, size_t n);
/* Called once for each block read into the cache (after its check), before acquire returns
 * it: the CPU backend packs the block's matrices there (rt_linear_pack). Non-zero: the block
 * is dropped and acquire fails with *e. */
typedef int (*rt_cache_fill_fn)(void *user, uint64_t layer, uint8_t *block, tq_err *e);
void rt_cache_set_fill(rt_cache *c, rt_cache_fill_fn fn, void *user);
void rt_cache_stats(const rt_cache *c, uint64_t *hits, uint64_t *misses, uint64_t *bytes_read,
                    uint64_t *reads, uint64_t *bytes_now, uint64_t *bytes_peak, double *io_s);
/* Open a layer file for block reads in the way io_mode (enum tq_run_io) asks; s->io says
 * which mode it got. */
int rt_block_src_open(rt_block_src *s, const char *path, int io_mode, tq_err *e);
/* "direct", "fadvise", "buffered" ("auto" for TQ_RUN_IO_AUTO). */
const char *rt_io_name(int io);
void rt_block_src_close(rt_block_src *s);
/* Aligned allocation for O_DIRECT buffers. */
void *rt_alloc_aligned(uint64_t n, uint64_t align, tq_err *e);
/* Memory a GPU backend maps in place (Metal's newBufferWithBytesNoCopy) must be whole pages of
 * the GPU host's page size: 16 KiB on Apple silicon. Stable weight memory (the store's
 * tensors, resident expert blocks) is allocated in whole pages of rt_map_page(), the larger of
 * that and this machine's page, on every machine, so the GPU backend wraps the same regions on
 * the shim as on a Mac (runtime/metal/backend.c counts any it must copy). */
#define RT_MAP_PAGE 16384u
uint64_t rt_map_page(void);
/* n rounded up to whole rt_map_page() pages (n = 0: one page; UINT64_MAX on overflow). */
uint64_t rt_map_round(uint64_t n);

/* ------------------------------------------------------------ resident tensors */
typedef struct rt_tensor {
    tq_dtype dt;
    int ndim;
    uint64_t shape[TQ_MAX_DIMS];
    uint64_t nbytes;
    const void *data;
} rt_tensor;

typedef struct rt_store rt_store;
/* Tensors of a model directory (or a split dir's pinned file plus its dense FFN files),
 * read on first use into memory. */
int rt_store_open(rt_store **s, const char *dir, const rt_config *c, tq_err *e);
/* DIR/SUB/layer_LL.bin, whether or not SUB ends with a slash. */
char *rt_split_file(const char *dir, const char *sub, uint64_t layer, tq_err *e);
void rt_store_close(rt_store *s);
/* 1 and *t filled when present, 0 when absent, -1 on error. name is without the prefix. */
int rt_store_get(rt_store *s, const char *name, rt_tensor *t, tq_err *e);
uint64_t rt_store_bytes(const rt_store *s);
/* A gpt-oss expert tensor saved by transformers in float (x @ W, formats/family.h xw_fused),
 * name without the prefix, made into part `part` (TQ_XW_*, formats/flash.h) of mlx-lm's layout
 * for all E experts: [E, rows, cols] (a bias [E, rows]) in the stored dtype, built once at load
 * in the store's memory (the stored tensor itself is read expert by expert, not kept). The
 * caller has checked the stored shape against E, I and H. 1 filled, 0 absent, -1 error. */
/* The n model tensors names[0..n) read one after another into one allocation (tensor x at
 * data + x·nbytes), when all exist with the same dtype and shape: 1 and *t describing one of
 * them (its dtype, shape and nbytes; data the allocation), 0 when one is missing or differs
 * (nothing read), -1 on error. HF checkpoints' per-expert tensors, stacked so that a device
 * backend can find an expert by id (rt_experts_indexed). */
int rt_store_get_stack(rt_store *s, const char *const *names, uint64_t n, rt_tensor *t, tq_err *e);
/* rt_store_get's dtype and shape of a model tensor, without reading it (data NULL). */
int rt_store_get_info(rt_store *s, const char *name, rt_tensor *t, tq_err *e);
int rt_store_get_xw(rt_store *s, const char *name, int part, uint64_t E, uint64_t I, uint64_t H, rt_tensor *t,
                    tq_err *e);
/* Once everything resident is loaded: drop the files' pages from the OS page cache (the
 * data now lives in our buffers; a streaming engine should not hold it twice). */
void rt_store_drop_cache(rt_store *s);
/* The checkpoint's name of a tensor or module the decoder calls "model.X" / "lm_head.X": the
 * roots of multimodal checkpoints put the language model under "language_model.model." (MLX)
 * or "model.language_model." (HF). Written into buf, returned. */
const char *rt_store_name(const rt_store *s, const char *name, char *buf, size_t cap);

/* One matrix described by its parts (shapes without an expert axis). */
typedef struct rt_parts {
    const rt_tensor *w, *scales, *biases, *codebook, *signs, *bias; /* NULL = absent */
} rt_parts;
int rt_linear_from_parts(const char *what, const rt_parts *p, uint64_t rows, uint64_t cols,
                         uint64_t affine_bits, uint64_t affine_group, rt_linear *out, tq_err *e);

/* A routed expert matrix: template + where each part lives for expert e. Part i (0 weight,
 * 1 scales, 2 biases, 3 bias) of expert e is at base[i] + e * stride[i], or, when base[i] is
 * NULL (split layer files), at block + off[i]. Parts 4 (codebook) and 5 (signs) are only
 * ever stacked (HF per-expert TurboQuant: base set, each expert its own); with base NULL
 * every expert reads t's. */
typedef struct rt_emat {
    rt_linear t;
    const uint8_t *base[6];
    uint64_t off[6], stride[6];
    rt_linear *per_expert; /* HF per-expert tensors: one matrix each */
} rt_emat;
void rt_emat_bind(const rt_emat *m, uint64_t e, const uint8_t *block, rt_linear *out);

/* ------------------------------------------------------------ backends (backend.c) */
/* Where forward's operations run: on the CPU (the functions of kernels.c, ops.c, attention.c,
 * forward.c), or queued on a device of runtime/metal/ (the Metal GPU, or its kernels on the CPU
 * through the shim; docs/metal.md). Buffers an operation writes come from alloc; the CPU reads
 * or writes them only after sync (a no-op on the CPU). */
struct tq_runner;
struct rt_layer;
enum rt_gate { RT_GATE_SIGMOID, RT_GATE_ZERO };
/* One token of a Gated DeltaNet core (runtime/deltanet.c): the conv over (conv_state [K-1][C],
 * mix [C = q nk·dk | k nk·dk | v nv·dv]) and silu into co [C], the q/k L2 norms, the gated
 * delta rule on ssm [nv][dv][dk] with z [nv·dv], the b and a inputs bb, aa [nv], then the
 * gated RMSNorm into ao [nv·dv]. conv_state and ssm are updated in place. */
typedef struct rt_dn_step {
    uint64_t nk, dk, nv, dv, K;
    double eps;
    const float *conv_w, *A_log, *dt_bias, *gnorm; /* [C][K], [nv], [nv], [dv] */
    float *conv_state, *ssm;
    const float *mix, *z, *bb, *aa;
    float *co, *ao;
} rt_dn_step;
/* The CPU's step (the reference of the device kernels: test_metal_kernels). */
void rt_deltanet_step(const rt_dn_step *d, struct rt_pool *pool);

typedef struct rt_backend {
    const char *name;
    float *(*alloc)(struct tq_runner *r, uint64_t n, tq_err *e); /* n zeroed floats */
    void (*free)(struct tq_runner *r, float *p);
    int (*sync)(struct tq_runner *r, tq_err *e);
    int (*matvec)(struct tq_runner *r, const rt_linear *l, const float *x, float *y, tq_err *e);
    /* Optional (NULL on a device): ys[i] = ls[i] xs[i] for i < n (n <= RT_MATVEC_BATCH) as one
     * job, the same bits as n matvecs (rt_matvec_n); no ys[i] overlaps an xs[j] */
    int (*matvec_n)(struct tq_runner *r, size_t n, const rt_linear *ls, const float *const *xs, float *const *ys,
                    tq_err *e);
    /* count vectors of n one after another (rt_rmsnorm each); out may be x */
    int (*rmsnorm)(struct tq_runner *r, float *out, const float *x, const float *w, uint64_t n, uint64_t count,
                   double eps, tq_err *e);
    /* this position's rotation (rcos, rsin) on count vectors v + i·stride (rt_rope_apply each) */
    int (*rope)(struct tq_runner *r, float *v, uint64_t count, uint64_t stride, tq_err *e);
    /* the same with the full_attention layers' rope (gemma4: c->rope_full, rcos_full/rsin_full);
     * NULL on a backend that does not have it */
    int (*rope_full)(struct tq_runner *r, float *v, uint64_t count, uint64_t stride, tq_err *e);
    /* softmax attention of layer L's heads at pos over cached positions [t0, pos]: q → ao */
    int (*attention)(struct tq_runner *r, const struct rt_layer *L, uint64_t pos, uint64_t t0, tq_err *e);
    /* router logits rl → the K chosen experts (rank order) and their weights, on the CPU */
    int (*route)(struct tq_runner *r, const struct rt_layer *L, uint64_t *ids, float *w, tq_err *e);
    /* the SwiGLU activation g[i] = act(g[i], u[i]) for i < n */
    int (*act)(struct tq_runner *r, uint64_t n, tq_err *e);
    /* y += a·x; with s non-NULL, y += sigmoid(s[0])·x */
    int (*axpy)(struct tq_runner *r, float *y, const float *x, float a, const float *s, uint64_t n, tq_err *e);
    /* y *= sigmoid(g) (RT_GATE_SIGMOID) or y = 0 (RT_GATE_ZERO, g unused) */
    int (*gate)(struct tq_runner *r, float *y, const float *g, uint64_t n, int kind, tq_err *e);
    /* dst[b·len + i] = src[b·stride + i] for b < blocks, i < len (dst and src do not overlap) */
    int (*copy)(struct tq_runner *r, float *dst, const float *src, uint64_t blocks, uint64_t len, uint64_t stride,
                tq_err *e);
    /* Optional (NULL on the CPU): routed experts whose choice never leaves the device, for a
     * layer whose experts rt_experts_indexed accepts. route_keep routes layer L as route does
     * but keeps ids and weights on the device; expert_matvec computes y = W x for the expert it
     * chose at rank k of matrix m; axpy_rank does y += w_k·x with its weight at rank k. */
    int (*route_keep)(struct tq_runner *r, const struct rt_layer *L, tq_err *e);
    int (*expert_matvec)(struct tq_runner *r, const struct rt_layer *L, const rt_emat *m, uint64_t k, const float *x,
                         float *y, tq_err *e);
    int (*axpy_rank)(struct tq_runner *r, float *y, const float *x, uint64_t k, uint64_t n, tq_err *e);
    /* Optional (NULL on the CPU, which runs attention.c's own heads): latent attention's heads
     * at pos, q and layer L's latent cache → ao, for a dense or affine kv_b_proj. */
    int (*mla)(struct tq_runner *r, const struct rt_layer *L, uint64_t pos, tq_err *e);
    /* Optional (NULL on the CPU): a Gated DeltaNet step queued on the device, no sync; 1 when
     * its shapes are beyond the device's kernels (the caller syncs and runs the CPU's). */
    int (*deltanet)(struct tq_runner *r, const rt_dn_step *d, tq_err *e);
} rt_backend;
/* 1 when every routed expert matrix of L lies in memory at a fixed stride per expert
 * (stacked tensors, the resident blocks of a split, or its mapped layer file: map_experts),
 * so that a kernel can find an expert's weights from its id; 0 for HF per-expert tensors that
 * did not stack (one allocation each) and blocks read into the cache (read from disk by id,
 * so the CPU must learn the ids). */
int rt_experts_indexed(const struct rt_layer *L);
/* r->o.backend's operations into r->be (and r->bctx). */
int rt_backend_open(struct tq_runner *r, tq_err *e);
void rt_backend_close(struct tq_runner *r);
/* The device backend's counters into st (st->gpu and the gpu_ fields; per forward pass, so
 * st->forward_passes must be set); nothing with the CPU backend. */
void rt_backend_stats(const struct tq_runner *r, tq_run_stats *st);
/* The CPU's attention core and routing (attention.c, forward.c), for the CPU backend. */
int rt_attention_core(struct tq_runner *r, const struct rt_layer *L, uint64_t pos, uint64_t t0, tq_err *e);
int rt_route(struct tq_runner *r, const struct rt_layer *L, uint64_t *ids, float *w, tq_err *e);
/* The allocation of the store (a tensor, a dense FFN tensor) that holds p: 1, 0 when none. */
int rt_store_region(const rt_store *s, const void *p, const void **base, uint64_t *n);
/* The chunk of the runner's float vectors (tq_runner.vchunk) that holds p: 1, 0 when none. */
int rt_vec_region(const struct tq_runner *r, const void *p, const void **base, uint64_t *n);

/* ------------------------------------------------------------ model */
typedef struct rt_layer {
    int mixer;                       /* enum rt_mixer */
    float *in_norm, *post_norm;      /* [H] */
    /* softmax attention: q [heads * hd] (x2 with the output gate), k, v [kv_heads * hd], o */
    rt_linear q, k, v, o;
    float *q_norm, *k_norm;          /* [hd] per-head RMSNorm weights (qwen3, qwen3_next) */
    float *sinks;                    /* [heads] gpt-oss */
    uint64_t hd, kvh;                /* this layer's head size and key/value heads (gemma4's
                                      * full layers differ from c->head_dim, c->kv_heads) */
    int full_rope;                   /* 1: c->rope_full (gemma4 full layers), 0: c->rope */
    int kv_shared;                   /* gemma4 attention_k_eq_v full layer: v = k_proj(h), no v_proj */
    /* gemma4: sandwich norms around the MLP / experts, router vectors, the layer's scale */
    float *pre_ff, *post_ff, *pre_ff2, *post_ff1, *post_ff2; /* [H] */
    float *router_scale;             /* [H] router.scale */
    float *expert_scale;             /* [E] router.per_expert_scale: times the routed weights */
    float layer_scalar;              /* the layer's output times this (1 when absent) */
    /* multi-head latent attention: q (or q_a -> q_a_norm -> q_b), kv_a -> kv_a_norm, kv_b, o */
    rt_linear q_a, q_b, kv_a, kv_b;
    float *q_a_norm, *kv_a_norm;     /* [q_lora], [kv_lora] */
    /* Gated DeltaNet: fused (qkvz, ba) or split (qkv, z, b, a) input projections, out in o */
    rt_linear qkvz, ba, qkv, z, b, a;
    int fused_in;
    float *conv_w;                   /* [C][K] depthwise causal conv, C = 2 * Hk * Dk + Hv * Dv */
    float *A_log, *dt_bias;          /* [Hv] */
    float *gnorm;                    /* [Dv] the gated RMSNorm's weight */
    /* MLP */
    int moe;
    rt_linear gate, up, down;        /* dense MLP */
    rt_linear router;                /* [E] logits (+ bias for gpt-oss) */
    float *score_bias;               /* [E] DeepSeek e_score_correction_bias */
    rt_emat eg, eu, ed;              /* routed experts */
    int has_shared;
    rt_linear sg, su, sd, sgate;     /* shared expert(s) and, qwen-style, its sigmoid gate (rows 1) */
    int has_sgate;
    int streamed;
    rt_block_src src;
    uint8_t *resident_blocks;        /* split dir with --resident: all blocks of the layer; with
                                      * map_experts: map + data_start, read-only (model.c) */
    uint8_t *map;                    /* map_experts: the layer file mapped read-only from offset 0,
                                      * at a 16 KiB (RT_MAP_PAGE) boundary, map_len bytes: the file
                                      * rounded up to whole RT_MAP_PAGE pages, so that a device wraps
                                      * it in place (runtime/backend.c, runner_region) */
    uint64_t map_len;
    /* Decoding state of this layer (decode.c alloc_state), zeroed at the start. */
    float *kc;                       /* [ctx][kw] keys after norm and RoPE; MLA: [ctx][kv_lora + qk_rope]
                                      * normalised latent then the rotated shared key */
    float *vc;                       /* [ctx][kw] values (not used by MLA) */
    uint64_t kw;                     /* floats per cached position */
    float *conv_state;               /* [K - 1][C] the last inputs of the conv (linear layers) */
    float *ssm;                      /* [Hv][Dv][Dk] the recurrent state (linear layers) */
} rt_layer;

struct tq_runner {
    rt_config c;
    struct cJSON *cfg;
    tq_run_opts o;
    tq_afile logits_out;             /* o.logits_path as it was at open (tq_afile_check): what a
                                      * decode's logits file may replace */
    char *dir;
    rt_store *store;
    rt_pool *pool;
    rt_cache *cache;
    rt_linear embed, lm_head;
    float *final_norm;
    float norm_shift;                /* 1: decoder norms are stored as offsets from 1 (qwen3_next HF) */
    rt_layer *L;
    int weights_mask;                /* bit per kind seen: 1 dense, 2 affine, 4 tq, 8 mxfp4 */
    tq_dtype dense_dt;
    uint64_t resident_extra;         /* bytes of resident expert blocks */
    /* The model's float vectors (norm weights, sinks, biases: model.c, load_vec), packed in
     * chunks of whole rt_map_page() pages that a device backend maps once (runner_region). */
    struct rt_vchunk {
        uint8_t *p;
        uint64_t size, used;
    } *vchunk;
    size_t n_vchunk, cap_vchunk;
    double load_s;
    int used;
    /* Decoding state (decode.c alloc_state). hd = head_dim; ffn = the largest MLP width
     * (dense, routed or shared); big = the largest of hidden, heads * hd and every
     * projection a mixer makes (the buffers below are allocated that long). */
    uint64_t ctx;                    /* cached positions */
    float *x;                        /* [hidden] the residual stream */
    float *h;                        /* [hidden] RMSNorm(x): the input of a mixer, MLP, head */
    float *q;                        /* attention: [heads * hd] queries (MLA: heads * (nope + rope));
                                      * linear: the fused projection, then [C] mixed q|k|v */
    float *k;                        /* attention: [kv_heads * hd] keys; MLA: [kv_lora + rope];
                                      * linear: [C] conv output */
    float *v;                        /* attention: [kv_heads * hd] values; linear: [Hv * Dv] z */
    float *qg;                       /* [heads * hd] the output gate (qwen3_next); linear: b, a */
    float *att;                      /* [heads][ctx + 1] scores, then softmax weights */
    float *ao;                       /* [heads * hd] (MLA: heads * v_head; linear: Hv * Dv) the
                                      * mixer output, the input of o_proj / out_proj */
    float *mo;                       /* [hidden] a block's output (mixer, MLP or MoE), added to x */
    float *eo;                       /* [ebatch][hidden] routed experts' outputs (or the shared expert's) */
    float *g;                        /* [ffn] gate projection, then act(gate) * up; ffn >= ebatch·moe_inter */
    float *u;                        /* [ffn] up projection */
    uint64_t ebatch;                 /* routed experts computed together (forward.c): 1 without matvec_n */
    float *rl;                       /* [2 * experts] router logits, then probabilities (sigmoid
                                      * routing: scores, then the scores it chooses by) */
    float *logits;                   /* [vocab] */
    float *rcos, *rsin;              /* [rope dim / 2] this position's rotation */
    float *rcos_full, *rsin_full;    /* [rope_full dim / 2] gemma4's full layers' rotation */
    float embed_scale;               /* gemma4: embedding rows times sqrt(hidden) in the
                                      * embedding's dtype (1 otherwise) */
    rt_scratch scr;                  /* rt_matvec's transformed activation */
    const rt_backend *be;            /* where the operations run (backend.c) */
    void *bctx;                      /* a device backend's state (runtime/metal/: rtm_be) */
};

int rt_model_load(struct tq_runner *r, tq_err *e);
/* The CPU backend, once the model is loaded: every 4-bit matrix that rt_linear_packable takes
 * rewritten in the packed layout in the runtime's own memory (resident experts included, not
 * the read-only pages of --map-experts), and the expert cache set to pack each block it reads
 * (docs/runtime.md, The packed layout). */
int rt_model_pack(struct tq_runner *r, tq_err *e);
/* --check-blocks: each streamed layer's per-expert SHA-256 from split.json. */
int rt_load_block_hashes(struct tq_runner *r, tq_err *e);
void rt_model_free(struct tq_runner *r);
int rt_forward(struct tq_runner *r, int32_t token, uint64_t pos, tq_err *e);

/* ------------------------------------------------------------ forward pieces */
/* out[n] = w[n] * x[n] / sqrt(mean(x²) + eps) (w NULL: 1), sum of squares in double; out may be x. */
void rt_rmsnorm(float *out, const float *x, const float *w, uint64_t n, double eps);
/* This position's rotation into r->rcos / r->rsin. */
void rt_rope_angles(struct tq_runner *r, uint64_t pos);
/* Turn the first r->c.rope.dim dims of one head v by this position's rcos/rsin. */
void rt_rope_apply(const struct tq_runner *r, float *v);
/* The same with c->rope_full and rcos_full / rsin_full (gemma4's full layers). */
void rt_rope_apply_full(const struct tq_runner *r, float *v);
/* gelu_pytorch_tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), from rt_math.c's exp. */
float rt_gelu_tanh(float x);
float rt_tanhf(float x);
float rt_silu(float x);
float rt_sigmoid(float x);
/* Mixers of layer l at position pos: r->h -> r->mo (attention.c, deltanet.c). */
int rt_attention(struct tq_runner *r, uint64_t l, uint64_t pos, tq_err *e);
int rt_mla(struct tq_runner *r, uint64_t l, uint64_t pos, tq_err *e);
int rt_deltanet(struct tq_runner *r, uint64_t l, tq_err *e);

#endif
