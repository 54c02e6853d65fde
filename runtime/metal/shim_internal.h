/* runtime/metal/shim_internal.h — the bridge that lets kernels.metal be one source for two
 * compilers: Apple's Metal compiler (xcrun metal, __METAL_VERSION__ defined) and a C11
 * compiler on any machine (the "shim"), so the same kernel text runs on the GPU and in
 * make check on Linux (docs/metal.md, The shim).
 *
 * The restricted form every kernel is written in:
 *  - A kernel is one function per threadgroup of RTM_TG threads, written as phases:
 *      RTM_PHASE(lid) { ... }       the body runs once for each thread lid of the group
 *      RTM_BARRIER() / RTM_BARRIER_DEV()   between phases (threadgroup / device memory)
 *    A phase is the plain body of the thread whose index is lid, on the GPU and in C, where
 *    each thread runs on its own fiber and a barrier waits for the whole group (shim.c); the
 *    threads run between barriers in order 0 .. RTM_TG-1, or RTM_TG-1 .. 0 when
 *    rtm_shim_reverse is set: a kernel whose result depends on that order reads, between two
 *    barriers, what another thread writes — a data race on the GPU; the tests run both ways).
 *  - Threadgroup arrays are declared with RTM_TG_ARRAY(type, name, count) at kernel scope.
 *  - A value a thread needs in a later phase lives in threadgroup memory (RTM_TGMEM arrays
 *    indexed by lid) or device memory, never in a local variable.
 *  - Control flow around phases, barriers and collectives is uniform (the same for every
 *    thread: loops over groups or heads, never over lid). Inside a phase, `continue` ends the
 *    phase for that thread.
 *  - Simd-group reductions are collectives between phases on a threadgroup array of one
 *    value per thread: RTM_SIMD_SUM(buf, w) replaces buf[lid] by the sum over its aligned
 *    cluster of w lanes (w = 2, 4, 8, 16, 32), as an xor butterfly: at mask m = 1, 2, 4, ...
 *    lane l adds lane l^m's value to its own (own + other); every lane of a cluster ends with
 *    the same bits. RTM_SIMD_MAX(buf) and RTM_SIMD_ARGMAX(vals, idx) likewise over 32 lanes.
 *    On the GPU these are simd_shuffle_xor steps; in C they are emulated lane by lane in the
 *    same order, so both give the same bits.
 *  - Helper functions that contain phases take RTM_TGFN_PARAMS last and are called with
 *    RTM_TGFN_ARGS.
 *  - Arithmetic: float only (Metal has no double), + - * / and RTM_SQRT, integer and bit
 *    operations, RTM_AS_FLOAT / RTM_AS_UINT bit casts, RTM_H2F for f16 bits. No library
 *    transcendental: exp is rtm_exp in kernels.metal, from those operations only.
 *  - No recursion, function pointers, static locals, malloc, 64-bit floats. */
#ifndef TQ_RTM_SHIM_INTERNAL_H
#define TQ_RTM_SHIM_INTERNAL_H

#ifdef __METAL_VERSION__
/* ------------------------------------------------------------ Metal */
#include <metal_stdlib>
using namespace metal;
/* No fused multiply-add where the source writes a product and a sum (the build passes
 * -ffp-contract=off as well; docs/metal.md, Numerics). */
#pragma clang fp contract(off)

#define RTM_KERNEL kernel void
#define RTM_FN inline
#define RTM_DEV device
#define RTM_CONST constant
#define RTM_TGMEM threadgroup
#define RTM_TG_ARRAY(T, name, n) threadgroup T name[n]
#define RTM_TABLE constant
#define RTM_BUF(n) [[buffer(n)]]
#define RTM_GROUP_ARGS uint rtm_tgid [[threadgroup_position_in_grid]], uint rtm_lid [[thread_position_in_threadgroup]]
#define RTM_TGFN_PARAMS , uint rtm_lid
#define RTM_TGFN_ARGS , rtm_lid
#define RTM_PHASE(lid) for (uint lid = rtm_lid, rtm_once_ = 1u; rtm_once_; rtm_once_ = 0u)
#define RTM_BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)
#define RTM_BARRIER_DEV() threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup)
#define RTM_AS_FLOAT(u) as_type<float>((uint)(u))
#define RTM_AS_UINT(f) as_type<uint>((float)(f))
#define RTM_H2F(h) ((float)as_type<half>((ushort)(h)))
#define RTM_SQRT(x) precise::sqrt(x)
/* Floats 4i .. 4i+3 of p (16-byte aligned) as one 128-bit load, and 16-bit values 4i .. 4i+3
 * of p (8-byte aligned) as one 64-bit load, into the thread array out. */
#define RTM_LD_F4(p, i, out)                                                          \
    do {                                                                              \
        float4 rtm_v_ = ((RTM_DEV const float4 *)(p))[(i)];                            \
        (out)[0] = rtm_v_.x;                                                          \
        (out)[1] = rtm_v_.y;                                                          \
        (out)[2] = rtm_v_.z;                                                          \
        (out)[3] = rtm_v_.w;                                                          \
    } while (0)
#define RTM_LD_H4(p, i, out)                                                          \
    do {                                                                              \
        ushort4 rtm_v_ = ((RTM_DEV const ushort4 *)(p))[(i)];                          \
        (out)[0] = rtm_v_.x;                                                          \
        (out)[1] = rtm_v_.y;                                                          \
        (out)[2] = rtm_v_.z;                                                          \
        (out)[3] = rtm_v_.w;                                                          \
    } while (0)
/* Words i·2 and i·2+1 of p (8-byte aligned) as one 64-bit load. */
#define RTM_LD_W2(p, i, a0, a1)                                                       \
    do {                                                                              \
        uint2 rtm_w_ = ((RTM_DEV const uint2 *)(p))[(i)];                              \
        (a0) = rtm_w_.x;                                                              \
        (a1) = rtm_w_.y;                                                              \
    } while (0)

#define RTM_SIMD_SUM(buf, width)                                                      \
    do {                                                                              \
        float rtm_v_ = (buf)[rtm_lid];                                                \
        for (ushort rtm_m_ = 1; rtm_m_ < (ushort)(width); rtm_m_ <<= 1) {             \
            float rtm_o_ = simd_shuffle_xor(rtm_v_, rtm_m_);                          \
            rtm_v_ = rtm_v_ + rtm_o_;                                                 \
        }                                                                             \
        (buf)[rtm_lid] = rtm_v_;                                                      \
    } while (0)
#define RTM_SIMD_MAX(buf)                                                             \
    do {                                                                              \
        float rtm_v_ = (buf)[rtm_lid];                                                \
        for (ushort rtm_m_ = 1; rtm_m_ < 32; rtm_m_ <<= 1) {                          \
            float rtm_o_ = simd_shuffle_xor(rtm_v_, rtm_m_);                          \
            rtm_v_ = rtm_o_ > rtm_v_ ? rtm_o_ : rtm_v_;                               \
        }                                                                             \
        (buf)[rtm_lid] = rtm_v_;                                                      \
    } while (0)
#define RTM_SIMD_ARGMAX(vals, idx)                                                    \
    do {                                                                              \
        float rtm_v_ = (vals)[rtm_lid];                                               \
        uint rtm_i_ = (idx)[rtm_lid];                                                 \
        for (ushort rtm_m_ = 1; rtm_m_ < 32; rtm_m_ <<= 1) {                          \
            float rtm_ov_ = simd_shuffle_xor(rtm_v_, rtm_m_);                         \
            uint rtm_oi_ = simd_shuffle_xor(rtm_i_, rtm_m_);                          \
            if (rtm_better(rtm_ov_, rtm_oi_, rtm_v_, rtm_i_)) {                       \
                rtm_v_ = rtm_ov_;                                                     \
                rtm_i_ = rtm_oi_;                                                     \
            }                                                                         \
        }                                                                             \
        (vals)[rtm_lid] = rtm_v_;                                                     \
        (idx)[rtm_lid] = rtm_i_;                                                      \
    } while (0)

#else
/* ------------------------------------------------------------ C (the shim) */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

/* 1: threads run between barriers from the last to the first (race check). */
extern int rtm_shim_reverse;
/* f16 bits to f32, exactly (formats/dtype.c). */
float rtm_shim_h2f(uint16_t h);

#define RTM_KERNEL static void
#define RTM_FN static inline
#define RTM_DEV
#define RTM_CONST const
#define RTM_TGMEM
#define RTM_TABLE static const
#define RTM_BUF(n)
#define RTM_GROUP_ARGS uint rtm_tgid
#define RTM_TGFN_PARAMS
#define RTM_TGFN_ARGS
/* Each thread of a group runs the kernel function on its own fiber (shim.c): a phase is the
 * plain body of the running thread, a barrier a real one (the thread waits until every thread
 * of its group reaches it), threadgroup arrays one poisoned arena shared by the group. */
uint rtm_shim_lid(void);
void rtm_shim_barrier(int line);
void *rtm_shim_tgmem(size_t n);
#define RTM_TG_ARRAY(T, name, n) T *const name = (T *)rtm_shim_tgmem(sizeof(T) * (n))
#define RTM_PHASE(lid) for (uint lid = rtm_shim_lid(), rtm_once_ = 1u; rtm_once_; rtm_once_ = 0u)
#define RTM_BARRIER() rtm_shim_barrier(__LINE__)
#define RTM_BARRIER_DEV() rtm_shim_barrier(__LINE__)

static inline float rtm_shim_as_float(uint u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint rtm_shim_as_uint(float f)
{
    uint u;
    memcpy(&u, &f, 4);
    return u;
}
#define RTM_AS_FLOAT(u) rtm_shim_as_float((uint)(u))
#define RTM_AS_UINT(f) rtm_shim_as_uint((float)(f))
#define RTM_H2F(h) rtm_shim_h2f((uint16_t)(h))
#define RTM_SQRT(x) sqrtf(x) /* IEEE: correctly rounded */
#define RTM_LD_W2(p, i, a0, a1)                                                       \
    do {                                                                              \
        (a0) = (p)[2u * (i)];                                                         \
        (a1) = (p)[2u * (i) + 1u];                                                    \
    } while (0)
#define RTM_LD_F4(p, i, out)                                                          \
    do {                                                                              \
        for (uint rtm_k_ = 0; rtm_k_ < 4u; rtm_k_++)                                  \
            (out)[rtm_k_] = ((const float *)(const void *)(p))[4u * (i) + rtm_k_];    \
    } while (0)
#define RTM_LD_H4(p, i, out)                                                          \
    do {                                                                              \
        for (uint rtm_k_ = 0; rtm_k_ < 4u; rtm_k_++)                                  \
            (out)[rtm_k_] = ((const ushort *)(const void *)(p))[4u * (i) + rtm_k_];   \
    } while (0)

/* The collectives, thread by thread as on the GPU: each lane publishes its value in the
 * shim's own exchange slots (not the kernel's threadgroup memory, so a missing barrier around
 * buf still shows), all threads of the group meet there (line -1: like a barrier, every thread
 * must reach it), then each lane computes its own result from its cluster's published values
 * with the butterfly's steps in order: at mask m lane l's value becomes (own + lane l^m's),
 * the same bits as simd_shuffle_xor (shim.c). */
void rtm_shim_simd(float *buf, uint *idx, int op, uint width);
#define RTM_SIMD_SUM(buf, width) rtm_shim_simd((buf), NULL, 0, (width))
#define RTM_SIMD_MAX(buf) rtm_shim_simd((buf), NULL, 1, 32)
#define RTM_SIMD_ARGMAX(vals, idx) rtm_shim_simd((vals), (idx), 2, 32)
#endif

/* ------------------------------------------------------------ both */
#define RTM_NONE 0xFFFFFFFFu
/* Candidate (v, i) beats (cv, ci): an index over none, then the larger value, then the lower
 * index — a total order on non-NaN values, so any reduction tree picks the same winner. */
RTM_FN int rtm_better(float v, uint i, float cv, uint ci)
{
    if (i == RTM_NONE)
        return 0;
    if (ci == RTM_NONE)
        return 1;
    return v > cv || (v == cv && i < ci);
}


#endif
