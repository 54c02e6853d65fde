/* runtime/rt_internal.h — pieces of the reference decoder shared between its files. */
#ifndef TQ_RT_INTERNAL_H
#define TQ_RT_INTERNAL_H

#include "formats/formats.h"
#include "runtime/runtime.h"

#include <pthread.h>

/* ------------------------------------------------------------ config */
enum rt_arch { RT_LLAMA, RT_QWEN3, RT_QWEN3_MOE };

typedef struct rt_config {
    int arch;
    char arch_name[32];
    uint64_t hidden, inter, layers, heads, kv_heads, head_dim, vocab;
    double rope_theta, eps;
    int tied;
    int qk_norm;
    /* MoE */
    uint64_t experts, top_k, moe_inter, shared_inter;
    int norm_topk;
    uint64_t sparse_step;
    unsigned char *mlp_only; /* per layer: 1 = dense MLP in a MoE model */
    /* MLX affine defaults from the "quantization" block */
    uint64_t q_bits, q_group;
    /* split directory */
    int split;
    char pinned_file[256];
    char expert_dir[256];
    char ffn_dir[256];
} rt_config;

int rt_config_load(rt_config *c, const char *dir, struct cJSON **json_out, tq_err *e);
int rt_layer_is_moe(const rt_config *c, uint64_t l);
/* Affine bits/group for a module: per-module override in the quantization block, else default. */
void rt_config_affine(const struct cJSON *cfg, const char *module, uint64_t *bits, uint64_t *group,
                      const rt_config *c);

/* ------------------------------------------------------------ linear layers */
enum rt_kind { RT_DENSE, RT_AFFINE, RT_TQ };

/* y = W x for one weight matrix (rows = out, cols = in). Pointers refer to raw file bytes. */
typedef struct rt_linear {
    int kind;
    uint64_t rows, cols;
    tq_dtype wdt;          /* dense: F32/F16/BF16 */
    const void *w;         /* dense: rows x cols; quantized: rows x wpr u32 */
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

/* ------------------------------------------------------------ kernels */
/* Scratch of rt_matvec, grown on demand and reused by every call. */
typedef struct rt_scratch {
    float *xr;             /* TurboQuant: [cols] signs ⊙ x, block-Hadamard rotated;
                              affine: [ngroups] per-group sums of x */
    uint64_t cap;          /* floats allocated */
} rt_scratch;

float rt_f16(uint16_t h);
void rt_kernels_init(void);
float rt_load_f(tq_dtype dt, const void *p, uint64_t i);
/* y[0..rows) = W x. x has cols entries. */
int rt_matvec(rt_pool *p, const rt_linear *l, const float *x, float *y, rt_scratch *s, tq_err *e);
/* Dequantize row r of a dense or affine matrix (embedding lookup). */
int rt_linear_row(const rt_linear *l, uint64_t r, float *out, tq_err *e);

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
int rt_cache_create(rt_cache **c, uint64_t budget, uint64_t layers, uint64_t experts,
                    int io_threads, tq_err *e);
void rt_cache_destroy(rt_cache *c);
/* Make the n blocks of layer l available (hits or parallel reads); bufs[i] stays valid
 * until rt_cache_release. */
int rt_cache_acquire(rt_cache *c, rt_block_src *src, uint64_t layer, const uint64_t *ids, size_t n,
                     int check, const uint8_t **bufs, tq_err *e);
void rt_cache_release(rt_cache *c, uint64_t layer, const uint64_t *ids, size_t n);
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
/* Once everything resident is loaded: drop the files' pages from the OS page cache (the
 * data now lives in our buffers; a streaming engine should not hold it twice). */
void rt_store_drop_cache(rt_store *s);
const char *rt_store_prefix(const rt_store *s);

/* One matrix described by its parts (shapes without an expert axis). */
typedef struct rt_parts {
    const rt_tensor *w, *scales, *biases, *codebook, *signs, *bias; /* NULL = absent */
} rt_parts;
int rt_linear_from_parts(const char *what, const rt_parts *p, uint64_t rows, uint64_t cols,
                         uint64_t affine_bits, uint64_t affine_group, rt_linear *out, tq_err *e);

/* A routed expert matrix: template + where each part lives for expert e. Part i (0 weight,
 * 1 scales, 2 biases, 3 bias) of expert e is at base[i] + e * stride[i], or, when base[i] is
 * NULL (split layer files), at block + off[i]. */
typedef struct rt_emat {
    rt_linear t;
    const uint8_t *base[4];
    uint64_t off[4], stride[4];
    rt_linear *per_expert; /* HF per-expert tensors: one matrix each */
} rt_emat;
void rt_emat_bind(const rt_emat *m, uint64_t e, const uint8_t *block, rt_linear *out);

/* ------------------------------------------------------------ model */
typedef struct rt_layer {
    float *in_norm, *post_norm, *q_norm, *k_norm;
    rt_linear q, k, v, o;
    int moe;
    rt_linear gate, up, down;        /* dense MLP */
    rt_linear router;
    rt_emat eg, eu, ed;              /* routed experts */
    int has_shared;
    rt_linear sg, su, sd, sgate;     /* shared expert and its sigmoid gate (rows 1) */
    int streamed;
    rt_block_src src;
    uint8_t *resident_blocks;        /* split dir with --resident: all blocks of the layer */
} rt_layer;

struct tq_runner {
    rt_config c;
    struct cJSON *cfg;
    tq_run_opts o;
    char *dir;
    rt_store *store;
    rt_pool *pool;
    rt_cache *cache;
    rt_linear embed, lm_head;
    float *final_norm;
    rt_layer *L;
    int weights_mask;                /* bit per kind seen: 1 dense, 2 affine, 4 tq */
    tq_dtype dense_dt;
    uint64_t resident_extra;         /* bytes of resident expert blocks */
    double load_s;
    int used;
    /* Decoding state (decode.c alloc_state). hd = head_dim, ffn = the largest of
     * intermediate_size, moe_intermediate_size and the shared expert's; x, h, mo and eo are
     * allocated max(hidden, heads * hd) floats, of which [hidden] are used. */
    float *kc;                       /* [layers][ctx][kv_heads * hd] keys, after norm and RoPE */
    float *vc;                       /* [layers][ctx][kv_heads * hd] values */
    uint64_t ctx;                    /* KV cache positions */
    float *x;                        /* [hidden] the residual stream */
    float *h;                        /* [hidden] RMSNorm(x): the input of attention, MLP, head */
    float *q;                        /* [heads * hd] queries of this position, head-major */
    float *k;                        /* [kv_heads * hd] keys of this position */
    float *v;                        /* [kv_heads * hd] values of this position */
    float *att;                      /* [heads][ctx] scores, then softmax weights (first pos+1) */
    float *ao;                       /* [heads * hd] attention output, the input of o_proj */
    float *mo;                       /* [hidden] a block's output (o_proj, MLP or MoE), added to x */
    float *eo;                       /* [hidden] one expert's (or the shared expert's) output */
    float *g;                        /* [ffn] gate projection, then silu(gate) * up */
    float *u;                        /* [ffn] up projection */
    float *rl;                       /* [experts] router logits, then probabilities */
    float *logits;                   /* [vocab] */
    rt_scratch scr;                  /* rt_matvec's transformed activation */
};

int rt_model_load(struct tq_runner *r, tq_err *e);
/* --check-blocks: each streamed layer's per-expert SHA-256 from split.json. */
int rt_load_block_hashes(struct tq_runner *r, tq_err *e);
void rt_model_free(struct tq_runner *r);
int rt_forward(struct tq_runner *r, int32_t token, uint64_t pos, tq_err *e);

#endif
