/* runtime/metal/shim_internal.h — the bridge that lets kernels.metal be one source for two
 * compilers: Apple's Metal compiler (xcrun metal, __METAL_VERSION__ defined) and a C11
 * compiler on any machine (the "shim"), so the same kernel text runs on the GPU and in
 * make check on Linux (docs/metal.md, The shim).
 *
 * The restricted form every kernel is written in:
 *  - A kernel is one function per threadgroup of RTM_TG threads, written as phases:
 *      RTM_PHASE(lid) { ... }       the body runs once for each thread lid of the group
 *      RTM_BARRIER() / RTM_BARRIER_DEV()   between phases (threadgroup / device memory)
 *    On the GPU a phase is the plain body of the thread whose index is lid; in C it is a loop
 *    over lid = 0 .. RTM_TG-1 (or RTM_TG-1 .. 0 when rtm_shim_reverse is set: a kernel whose
 *    result depends on that order reads, inside one phase, what another thread writes — a
 *    data race on the GPU; the tests run every kernel both ways).
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

/* 1: phases run their threads from the last to the first (race check). */
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
#define RTM_PHASE(lid)                                                                \
    for (uint rtm_t_ = 0, lid = 0;                                                    \
         rtm_t_ < RTM_TG && ((lid = rtm_shim_reverse ? RTM_TG - 1 - rtm_t_ : rtm_t_), 1); rtm_t_++)
#define RTM_BARRIER() ((void)0)
#define RTM_BARRIER_DEV() ((void)0)

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

/* The collectives, lane by lane: at each mask every lane reads the values all lanes held
 * before that step (what simd_shuffle_xor returns), then all lanes update. */
static inline void rtm_shim_simd_sum(float *buf, uint n, uint width)
{
    for (uint s = 0; s < n; s += 32)
        for (uint m = 1; m < width; m <<= 1) {
            float t[32];
            for (uint l = 0; l < 32; l++)
                t[l] = buf[s + l] + buf[s + (l ^ m)];
            memcpy(buf + s, t, sizeof t);
        }
}
static inline void rtm_shim_simd_max(float *buf, uint n)
{
    for (uint s = 0; s < n; s += 32)
        for (uint m = 1; m < 32; m <<= 1) {
            float t[32];
            for (uint l = 0; l < 32; l++) {
                float v = buf[s + l], o = buf[s + (l ^ m)];
                t[l] = o > v ? o : v;
            }
            memcpy(buf + s, t, sizeof t);
        }
}
#define RTM_SIMD_SUM(buf, width) rtm_shim_simd_sum((buf), RTM_TG, (width))
#define RTM_SIMD_MAX(buf) rtm_shim_simd_max((buf), RTM_TG)
#define RTM_SIMD_ARGMAX(vals, idx) rtm_shim_simd_argmax((vals), (idx), RTM_TG)
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

#ifndef __METAL_VERSION__
static inline void rtm_shim_simd_argmax(float *vals, uint *idx, uint n)
{
    for (uint s = 0; s < n; s += 32)
        for (uint m = 1; m < 32; m <<= 1) {
            float tv[32];
            uint ti[32];
            for (uint l = 0; l < 32; l++) {
                uint o = s + (l ^ m);
                int take = rtm_better(vals[o], idx[o], vals[s + l], idx[s + l]);
                tv[l] = take ? vals[o] : vals[s + l];
                ti[l] = take ? idx[o] : idx[s + l];
            }
            memcpy(vals + s, tv, sizeof tv);
            memcpy(idx + s, ti, sizeof ti);
        }
}
#endif

#endif
