/* quant/quant_internal.h — helpers shared by the quant folder only. */
#ifndef TQ_QUANT_INTERNAL_H
#define TQ_QUANT_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* f32 -> f16 bits, round to nearest even (the conversion stored scales and codebooks go
 * through); inlined because it sits in the per-group hot path. */
static inline uint16_t tq_q_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u)
        return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0));
    if (ax >= 0x477FF000u) /* >= 65520 rounds to infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (ax < 0x38800000u) { /* below 2^-14: subnormal, units of 2^-24 */
        float v;
        memcpy(&v, &ax, 4);
        return (uint16_t)(sign | (uint16_t)rintf(v * 0x1p24f));
    }
    uint32_t h = ((ax >> 23) - 112u) << 10 | (ax & 0x7FFFFFu) >> 13;
    uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

static inline float tq_q_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, x;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        memcpy(&x, &v, 4);
        x |= sign;
    } else if (e == 31) {
        x = sign | 0x7F800000u | m << 13;
    } else {
        x = sign | (e + 112u) << 23 | m << 13;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* 8-lane vectors (GCC/Clang extensions): lane-wise IEEE operations give the same bits as
 * scalar code, and the lane count is fixed, so results do not depend on the machine's
 * vector width. Helpers are always inlined: 32-byte vectors never cross a call boundary. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float tq_v8f __attribute__((vector_size(32)));
typedef int32_t tq_v8i __attribute__((vector_size(32)));
typedef uint32_t tq_v8u __attribute__((vector_size(32)));
typedef uint16_t tq_v8u16 __attribute__((vector_size(16)));
typedef uint8_t tq_v32u8 __attribute__((vector_size(32)));
#define TQ_INLINE static inline __attribute__((always_inline))

TQ_INLINE tq_v8f tq_ld8(const float *p)
{
    tq_v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* (macros: a 32-byte vector passed by value trips GCC's ABI notes without AVX) */
#define tq_st8(p, v) \
    do { \
        tq_v8f tq_st8_v = (v); \
        memcpy((p), &tq_st8_v, sizeof tq_st8_v); \
    } while (0)

/* Sum of 8 lanes in a fixed order, in double. */
#define tq_hsum8(v) \
    ((((double)(v)[0] + (v)[1]) + ((double)(v)[2] + (v)[3])) + (((double)(v)[4] + (v)[5]) + ((double)(v)[6] + (v)[7])))

/* Two-vector shuffles with constant lane indices (GCC before 12 lacks __builtin_shufflevector). */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define TQ_SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define TQ_SHUF8(a, b, ...) __builtin_shuffle(a, b, (tq_v8i){__VA_ARGS__})
#endif

/* Lane-wise select: m is all ones or all zeros per lane. */
TQ_INLINE tq_v8u tq_vsel(tq_v8i m, tq_v8u a, tq_v8u b) { return ((tq_v8u)m & a) | (~(tq_v8u)m & b); }
TQ_INLINE tq_v8f tq_vself(tq_v8i m, tq_v8f a, tq_v8f b) { return (tq_v8f)tq_vsel(m, (tq_v8u)a, (tq_v8u)b); }

/* tq_q_f16 on 8 lanes, the same bits lane by lane (the subnormal rounding by adding and
 * removing 2^23, which rounds to the nearest integer, ties to even, for 0 <= v < 2^23). */
TQ_INLINE tq_v8u tq_v_f16(tq_v8f f)
{
    const tq_v8u z = {0, 0, 0, 0, 0, 0, 0, 0};
    tq_v8u x = (tq_v8u)f, ax = x & 0x7FFFFFFFu, sign = (x >> 16) & 0x8000u;
    tq_v8i sub = ax < 0x38800000u;
    tq_v8u an = tq_vsel(sub, z + 0x38800000u, ax);
    tq_v8u h = ((an >> 23) - 112u) << 10 | (an & 0x7FFFFFu) >> 13, rem = an & 0x1FFFu;
    h += (tq_v8u)((rem > 0x1000u) | ((rem == 0x1000u) & ((h & 1u) != 0))) & 1u;
    tq_v8f v = tq_vself(sub, (tq_v8f)ax * 0x1p24f, (tq_v8f)z);
    h = tq_vsel(sub, (tq_v8u)__builtin_convertvector((v + 0x1p23f) - 0x1p23f, tq_v8i), h);
    h = tq_vsel(ax >= 0x477FF000u, tq_vsel(ax > 0x7F800000u, z + 0x7E00u, z + 0x7C00u), h);
    return sign | h;
}

/* tq_q_f32 on 8 lanes (f16 bits in the low half of each lane). */
TQ_INLINE tq_v8f tq_v_f32(tq_v8u h)
{
    tq_v8u sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    tq_v8u x = (e + 112u) << 23 | m << 13;
    x = tq_vsel(e == 31u, 0x7F800000u | m << 13, x);
    x = tq_vsel(e == 0u, (tq_v8u)(__builtin_convertvector((tq_v8i)m, tq_v8f) * 0x1p-24f), x);
    return (tq_v8f)(sign | x);
}

/* Hot loops get AVX2 and AVX-512 (x86-64-v4: twice the vector registers, so fewer spills)
 * clones on x86-64 Linux (ifunc); results are identical to the default clone because the
 * operations are the same lane-wise IEEE operations (tests/cli/determinism-builds.sh). Not
 * under ASan or ThreadSanitizer: the instrumented resolvers run before the sanitizer starts. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#if __GNUC__ >= 11
#define TQ_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TQ_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#else
#define TQ_CLONES
#endif
/* gcc gives the ifunc symbol of a target_clones function default visibility whatever
 * -fvisibility says, so an internal one says hidden itself (tests/cli/exports.sh). */
#define TQ_HIDDEN __attribute__((visibility("hidden")))

/* tq_quantize_groups for TQ_SCALE_LSQ (quantize_lsq.c); n is a multiple of group > 0. */
TQ_HIDDEN int tq_quantize_lsq(const struct tq_codebook *cb, size_t group, const float *w, size_t n, uint8_t *idx,
                    uint16_t *scales, double *err2, double *sum2, struct tq_err *e);


/* The TurboQuant row recipe (docs/quantization.md), the one copy tq_quantize_row (F32 rows),
 * tq-convert's jobs (rows as stored, any of the four float dtypes) and its codebook fit run.
 * tq_q_rotate_row: x[n] = f32(src[j]) * signs[j] (signs NULL: no signs), then the forward
 * block Hadamard transform with `block` unless rotate == 0 (--rotation none). -1 (TQ_EUSAGE)
 * if block is not valid for n, TQ_EUNSUP for a dtype other than BF16, F16, F32, F64 when
 * signs is NULL (with signs, other dtypes are read as F32: callers pass only those four). */
struct tq_qspec;
TQ_HIDDEN int tq_q_rotate_row(int dtype, const void *src, const float *signs, size_t n, size_t block, int rotate,
                              float *x, struct tq_err *e);
/* ...then quantized per group (tq_quantize_groups) and packed (tq_pack): q's signs and block,
 * scratch of tq_quantize_row_scratch(n) bytes (n floats, then n index bytes). */
TQ_HIDDEN int tq_q_quantize_row(const struct tq_qspec *q, int dtype, int rotate, const void *src, size_t n,
                                void *scratch, uint32_t *packed, uint16_t *scales, double *err2, double *sum2,
                                struct tq_err *e);

#endif
