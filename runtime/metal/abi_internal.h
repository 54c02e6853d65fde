/* runtime/metal/abi_internal.h — what the kernels and the host code that dispatches them
 * agree on: threadgroup size, dtype codes, the argument block of every kernel and the table of
 * kernels with their buffer slots. Included by kernels.metal (Metal and C) and by the host C
 * and Objective-C code, so one definition serves the GPU and the shim. Every argument field is
 * 32 bits wide, so the blocks have the same layout in both languages. */
#ifndef TQ_RTM_ABI_INTERNAL_H
#define TQ_RTM_ABI_INTERNAL_H

#ifndef __METAL_VERSION__
typedef unsigned int uint;
#endif

/* Threads per threadgroup of every kernel (a multiple of the simd width 32), and the matrix
 * rows of one threadgroup in the matvec kernels. */
#define RTM_TG 256u
#define RTM_SIMD 32u
#define RTM_MV_ROWS 32u
/* The simd-group matvecs (docs/metal.md, mv_*): each simd group of 32 lanes takes RTM_MV_RPS of
 * the threadgroup's RTM_MV_ROWS rows; in mv_tq and mv_affine a lane reads RTM_MV_CW packed
 * words (one 64-bit load) per step. */
#define RTM_MV_RPS (RTM_MV_ROWS / (RTM_TG / RTM_SIMD))
#define RTM_MV_CW 2u
/* rtm_mv_args.flags of mv_tq: the rows' words may be read RTM_MV_CW at a time as one vector
 * (whole chunks, 8-byte aligned), and every chunk lies inside one group (group a multiple of
 * the chunk's codes, group / codes = 2^gshift). */
#define RTM_MV_WIDE 1u
#define RTM_MV_INGROUP 2u
/* Most experts a route chooses (forward.c keeps ids[64]). */
#define RTM_MAX_TOPK 64u
#define RTM_MAX_GROUPS 64u

/* Element types of weight parts (tq_dtype F32 / F16 / BF16). */
#define RTM_F32 0u
#define RTM_F16 1u
#define RTM_BF16 2u

/* y[rows] = W x (+ bias): dense rows, TurboQuant rows (x already rotated), MLX affine rows
 * (gsum = per-group sums of x), MXFP4 rows (gpt-oss experts). */
typedef struct rtm_mv_args {
    uint rows, cols;
    uint wdt;            /* dense weight type */
    uint bits, group, ngroups, wpr;
    uint sdt, zdt, cdt;  /* scales, affine biases, TurboQuant codebook types */
    uint has_bias, biasdt;
    uint rstep;          /* bias entry (and MXFP4 weight row) of row r: r·rstep */
    /* mv_tq, precomputed by the host so the kernel divides by nothing: RTM_MV_* flags,
     * log2(group / codes per chunk) when RTM_MV_INGROUP, and a lane's step of RTM_SIMD chunks
     * (RTM_SIMD·RTM_MV_CW·32/bits codes) as whole groups and a remainder. */
    uint flags, gshift, gstep_q, gstep_r;
} rtm_mv_args;

/* A routed expert's product (the _ex matvec kernels): mv for the matrix of expert
 * id = ids[rank] (id < E), whose part i (0 weights, 1 scales, 2 affine biases, 3 output bias)
 * starts id·stride[i] bytes after expert 0's in its buffer slot; stride 0 for an absent part. */
typedef struct rtm_mvx_args {
    rtm_mv_args mv;
    uint rank, E;
    uint stride[4];
    uint cstride; /* TurboQuant: the codebook's per expert (0: one shared by all) */
} rtm_mvx_args;

/* out = blockwise Hadamard(x ⊙ signs): one threadgroup per block of b = m·N, in threadgroup
 * memory up to RTM_HAD_TG floats (32 KiB, Metal's limit), else in the tmp buffer */
#define RTM_HAD_TG 8192u
typedef struct rtm_had_args {
    uint cols, m, N, gdt;
    float s;             /* f32(1 / sqrt(b)) */
    uint rank, E, sstride; /* sstride > 0: the signs of expert ids[rank], sstride bytes apart */
} rtm_had_args;

/* out[v][i] = w[i]·(x[v][i]·inv_v) for count vectors of n, one threadgroup each */
typedef struct rtm_rms_args {
    uint n, has_w;
    float eps;
} rtm_rms_args;

/* rotate `dim` leading dims of count vectors spaced `stride` floats apart, starting at `off` */
typedef struct rtm_rope_args {
    uint count, stride, off, dim, interleaved;
} rtm_rope_args;

/* one query position, one threadgroup per head */
typedef struct rtm_att_args {
    uint hd, kvd, group, t0, pos, att_stride, has_sinks;
    float scale;
} rtm_att_args;

/* DeepSeek-V3's latent attention core at one position, one threadgroup per head (on the CPU:
 * runtime/attention.c, mla_task). kv_b: rows of kvl values, dense of type kvb_dt (affine 0),
 * or MLX affine (affine 1: bits, group, ngroups, wpr, scales and biases of types sdt, zdt). */
typedef struct rtm_mla_args {
    uint nope, rope, vh, kvl, pos, att_stride, kvb_dt;
    uint affine, bits, group, ngroups, wpr, sdt, zdt;
    float scale;
} rtm_mla_args;

/* in place softmax of count rows of n floats spaced `stride` apart */
typedef struct rtm_softmax_args {
    uint n, stride;
} rtm_softmax_args;

/* Routing modes (enum rt_route). */
#define RTM_ROUTE_SOFTMAX 0u
#define RTM_ROUTE_TOPK_SOFTMAX 1u
#define RTM_ROUTE_SIGMOID_GROUP 2u
typedef struct rtm_route_args {
    uint E, K, mode, norm_topk, n_group, topk_group, has_bias;
    float route_scale;
} rtm_route_args;

/* g[i] = act(g[i], u[i]) */
typedef struct rtm_act_args {
    uint n, clamped;
    float alpha, limit;
} rtm_act_args;

/* y[i] += a·x[i]: a from the block (a_mode 0), sigmoid(sa[0]) (1) or sa[0] (2) */
typedef struct rtm_axpy_args {
    uint n, a_mode;
    float a;
} rtm_axpy_args;

/* y[i] *= sigmoid(g[i]) (kind 0) or silu(g[i]) (kind 1); y[i] = 0 (kind 2) */
typedef struct rtm_gate_args {
    uint n, kind;
} rtm_gate_args;

/* dst[b·len + i] = src[b·stride + off + i] for b < blocks, i < len */
typedef struct rtm_gather_args {
    uint blocks, len, stride, off;
} rtm_gather_args;

/* Gated DeltaNet (on the CPU: runtime/deltanet.c, rt_deltanet_step): dn_conv, one thread per
 * channel of C = 2·nk·dk + nv·dv, the causal conv of K taps and its state; dn_core, one
 * threadgroup per value head, q/k L2 norms, the gate, the delta rule on the head's [dv][dk]
 * state and the gated RMSNorm. dk, dv ≤ RTM_DN_MAXD (threadgroup memory). */
#define RTM_DN_MAXD 256u
typedef struct rtm_dn_args {
    uint C, K, nk, dk, nv, dv, rep;
    float qs, eps; /* f32(1 / sqrt(dk)), the norm's eps */
} rtm_dn_args;

/* The kernels: X(name, buffer slots including the argument block, which is the last slot). */
#define RTM_KERNELS(X)      \
    X(mv_dense, 5)          \
    X(mv_tq, 7)             \
    X(mv_affine, 8)         \
    X(mv_mxfp4, 6)          \
    X(hadamard, 6)          \
    X(rmsnorm, 4)           \
    X(rope, 4)              \
    X(attention, 7)         \
    X(softmax, 2)           \
    X(route, 6)             \
    X(act, 3)               \
    X(axpy, 4)              \
    X(gate, 3)              \
    X(gather, 3)            \
    X(unary, 3)             \
    X(mv_dense_ex, 6)       \
    X(mv_mxfp4_ex, 7)       \
    X(mv_tq_ex, 8)          \
    X(mv_affine_ex, 9)      \
    X(mla, 10)              \
    X(dn_conv, 5)           \
    X(dn_core, 10)

#define RTM_KERNEL_ENUM_(name, nbuf) RTM_K_##name,
enum rtm_kernel_id { RTM_KERNELS(RTM_KERNEL_ENUM_) RTM_K_COUNT };

#endif
