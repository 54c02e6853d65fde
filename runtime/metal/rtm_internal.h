/* runtime/metal/rtm_internal.h — the GPU backend's host side: a small device interface with
 * two implementations (the Metal one, metal.m, built on macOS only; the shim, shim.c, which
 * runs kernels.metal compiled as C with Metal's memory rules), and the decoder's operations
 * written once on top of it (backend.c). docs/metal.md describes both. */
#ifndef TQ_RTM_INTERNAL_H
#define TQ_RTM_INTERNAL_H

#include "runtime/metal/abi_internal.h"
#include "runtime/rt_internal.h"

/* ------------------------------------------------------------ the device */
/* A buffer slot of a dispatch: a device buffer (an opaque handle) and a byte offset in it. */
typedef struct rtm_bind {
    void *h;
    uint64_t off;
} rtm_bind;

/* Work is queued by dispatch and runs, in order, by sync at the latest; the CPU may read or
 * write memory the kernels use only after sync. */
typedef struct rtm_dev rtm_dev;
struct rtm_dev {
    const char *name;
    /* A device buffer over [p, p + n), stable host memory kernels only read (weights): the
     * memory itself, mapped in place (returns 0), or where the device cannot map it — Metal and
     * the shim map only whole pages, 16 KiB on Apple silicon — a copy made now (returns 1: the
     * backend counts and reports it, rtm_counts); -1 on error. */
    int (*wrap)(rtm_dev *d, const void *p, uint64_t n, void **h, tq_err *e);
    /* n zeroed bytes both sides use (activations, caches); *host is the CPU's view. */
    int (*alloc)(rtm_dev *d, uint64_t n, void **h, void **host, tq_err *e);
    /* A copy of [p, p + n) made now, valid until the next sync (transient bytes: expert
     * blocks from the cache, small vectors). */
    int (*stage)(rtm_dev *d, const void *p, uint64_t n, rtm_bind *out, tq_err *e);
    void (*release)(rtm_dev *d, void *h);
    /* Queue kernel `k` on `groups` threadgroups of RTM_TG threads: b[0..nb) fill the buffer
     * slots 0..nb-1, the argument block (copied now) slot nb. */
    int (*dispatch)(rtm_dev *d, int k, const rtm_bind *b, int nb, const void *args, uint32_t args_n, uint32_t groups,
                    tq_err *e);
    /* Run everything queued and wait; staged copies are dropped. */
    int (*sync)(rtm_dev *d, tq_err *e);
    void (*close)(rtm_dev *d);
};

/* The kernels compiled as C, run on this CPU (shim.c). */
int rtm_shim_open(rtm_dev **d, tq_err *e);
/* 1: the shim runs each threadgroup's threads from the last to the first (tests). */
extern int rtm_shim_reverse;
/* 1: the shim's syncs run with subnormals flushed to zero (FTZ and DAZ; docs/metal.md, A4). */
extern int rtm_shim_ftz;
/* "fma" when shim.c was built with contraction (-ffp-contract=fast -DTQ_SHIM_FMA: products and
 * sums fused as a GPU compiler may; docs/metal.md, A2), else "ieee". */
extern const char *const rtm_shim_fp;
/* The system's default Metal device (metal.m); without Metal in the build, TQ_EUSAGE with a
 * message saying so (backend.c). */
int rtm_metal_open(rtm_dev **d, tq_err *e);
/* Kernel names as the Metal library has them ("rtm_k_" + name), by enum rtm_kernel_id. */
extern const char *const rtm_kernel_names[RTM_K_COUNT];
extern const int rtm_kernel_slots[RTM_K_COUNT];

/* Apple silicon's page (rt_internal.h, RT_MAP_PAGE): memory the backend wraps in place
 * (newBufferWithBytesNoCopy) starts and ends on it; a multiple of every other page size Metal
 * runs with (4 KiB on Intel Macs). */
#define RTM_PAGE RT_MAP_PAGE

/* ------------------------------------------------------------ the operations */
/* Where stable host memory containing p lives (the store's tensors, resident expert blocks):
 * 1 and [*base, *base + *n), or 0 when p is in no such region. */
typedef int (*rtm_region_fn)(void *user, const void *p, const void **base, uint64_t *n);

typedef struct rtm_be rtm_be;
int rtm_be_open(rtm_be **out, rtm_dev *dev, rtm_region_fn region, void *user, tq_err *e);
/* Closes the device too. */
void rtm_be_close(rtm_be *b);
rtm_dev *rtm_be_dev(rtm_be *b);
/* What the backend asked of its device since it opened, counted here rather than in a device
 * so that the shim and Metal give the same numbers for the same decode (docs/metal.md,
 * Counters). */
typedef struct rtm_counts {
    uint64_t dispatches;          /* kernels queued */
    uint64_t waits;               /* syncs with work queued: the CPU waited for the GPU */
    uint64_t staged_bytes;        /* bytes copied into staging memory as work was queued */
    uint64_t staged_weight_bytes; /* of those, weights (matrices, scales, norms, biases, signs) */
    uint64_t wrap_copies;         /* stable regions copied instead of mapped in place */
    uint64_t wrap_copy_bytes;     /* their bytes */
} rtm_counts;
void rtm_be_counts(const rtm_be *b, rtm_counts *out);
/* n zeroed bytes of memory kernels may write (NULL on error). */
void *rtm_be_alloc(rtm_be *b, uint64_t n, tq_err *e);
void rtm_be_free(rtm_be *b, void *p);
int rtm_be_sync(rtm_be *b, tq_err *e);

/* The operations, queued in call order; pointers the kernels write come from rtm_be_alloc.
 * Each computes what the CPU runtime's function of the same job does (docs/metal.md). */
int rtm_be_matvec(rtm_be *b, const rt_linear *l, const float *x, float *y, tq_err *e);
/* The TurboQuant parts of it: out = blockwise Hadamard(x ⊙ signs) (quant/hadamard.c's order),
 * and y = W xr for an activation already rotated. */
int rtm_be_rotate(rtm_be *b, const float *x, const void *signs, tq_dtype gdt, uint64_t cols, float *out, tq_err *e);
int rtm_be_matvec_rotated(rtm_be *b, const rt_linear *l, const float *xr, float *y, tq_err *e);
/* How many TurboQuant matvecs reused a rotation of their input already queued (rtm_be_matvec
 * rotates each input vector once per set of signs until something may write it). */
uint64_t rtm_be_rotations_reused(const rtm_be *b);
int rtm_be_rmsnorm(rtm_be *b, float *out, const float *x, const float *w, uint64_t n, uint64_t count, double eps,
                   tq_err *e);
int rtm_be_rope(rtm_be *b, float *v, uint64_t count, uint64_t stride, uint64_t off, const rt_rope *rp, const float *cs,
                const float *sn, tq_err *e);
typedef struct rtm_att {
    const float *q, *kc, *vc, *sinks; /* sinks may be NULL */
    float *att, *out;
    uint64_t heads, hd, kvd, group, t0, pos, att_stride;
    float scale;
} rtm_att;
int rtm_be_attention(rtm_be *b, const rtm_att *a, tq_err *e);
/* DeepSeek-V3's latent attention core of every head at position pos (runtime/attention.c,
 * mla_task): q [heads][nope + rope], kc [pos + 1][kvl + rope] → att's rows (scores, then
 * weights) and ao [heads][vh]; kvb the dense kv_b_proj, [heads·(nope + vh)][kvl]. */
typedef struct rtm_mla {
    const float *q, *kc;
    const rt_linear *kvb;
    float *att, *ao;
    uint64_t heads, nope, rope, vh, kvl, pos, att_stride;
    float scale;
} rtm_mla;
int rtm_be_mla(rtm_be *b, const rtm_mla *m, tq_err *e);
/* A Gated DeltaNet step (rt_dn_step, runtime/rt_internal.h) as dn_conv then dn_core: queued,
 * no sync. 1 (nothing queued) when dk or dv exceeds RTM_DN_MAXD or nv is not a multiple of
 * nk: the caller runs the CPU's step. */
int rtm_be_deltanet(rtm_be *b, const rt_dn_step *d, tq_err *e);
int rtm_be_softmax(rtm_be *b, float *x, uint64_t n, uint64_t count, uint64_t stride, tq_err *e);
typedef struct rtm_route {
    const float *logits, *bias; /* bias may be NULL */
    uint64_t E, K, n_group, topk_group;
    int mode, norm_topk;        /* RTM_ROUTE_* */
    float route_scale;
} rtm_route;
/* Runs the queue: ids [K] and weights [K] come back to the CPU (the experts to read). */
int rtm_be_route(rtm_be *b, const rtm_route *r, uint64_t *ids, float *w, tq_err *e);
/* The same route, queued without waiting: ids and weights stay in device memory, where
 * rtm_be_matvec_ex and rtm_be_axpy_rank read them (docs/metal.md, One wait per token). */
int rtm_be_route_keep(rtm_be *b, const rtm_route *r, tq_err *e);
/* The experts of one matrix of a layer, all in stable memory: expert id's part i (0 weights,
 * 1 scales, 2 affine biases, 3 output bias) at part[i] + id·stride[i]; t gives the shapes,
 * kinds and the parts the experts share (codebook, signs). */
typedef struct rtm_expert {
    const rt_linear *t;
    const void *part[4];
    uint64_t stride[4];
    uint64_t E;
    /* TurboQuant experts with their own (HF per-expert names): expert id's codebook at
     * cb + id·cb_stride, its signs at sg + id·sg_stride; NULL: t's, shared */
    const void *cb, *sg;
    uint64_t cb_stride, sg_stride;
} rtm_expert;
/* y = W_id in, W_id the expert the last rtm_be_route_keep chose at rank `rank`: the GPU reads
 * id from the route's output. */
int rtm_be_matvec_ex(rtm_be *b, const rtm_expert *x, uint64_t rank, const float *in, float *y, tq_err *e);
/* y += w_rank · x, w_rank the last rtm_be_route_keep's weight at rank `rank`, read on the GPU. */
int rtm_be_axpy_rank(rtm_be *b, float *y, const float *x, uint64_t rank, uint64_t n, tq_err *e);
int rtm_be_act(rtm_be *b, float *g, const float *u, uint64_t n, int clamped, float alpha, float limit, tq_err *e);
/* y += a·x; with sa (one device float), a = sigmoid(sa[0]) instead. */
int rtm_be_axpy(rtm_be *b, float *y, const float *x, float a, const float *sa, uint64_t n, tq_err *e);
/* kind 0: y *= sigmoid(g), 1: y *= silu(g), 2: y = 0 (g unused). */
int rtm_be_gate(rtm_be *b, float *y, const float *g, uint64_t n, int kind, tq_err *e);
/* kind 0: y = exp(x), 1: sigmoid(x), 2: silu(x), 3: ln x, 4: ln(1 + x), the kernels' own functions (tests). */
int rtm_be_unary(rtm_be *b, float *y, const float *x, uint64_t n, int kind, tq_err *e);
int rtm_be_gather(rtm_be *b, float *dst, const float *src, uint64_t blocks, uint64_t len, uint64_t stride, uint64_t off,
                  tq_err *e);

#endif
