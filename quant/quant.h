/* quant/quant.h — the quantization kernels: TurboQuant (block Hadamard rotation, sign draws,
 * Lloyd-Max codebooks, per-group scales, packing) and MLX affine. Pure computation, no file
 * I/O; the converter pipeline that runs these kernels over model files is quant/convert/
 * (convert.h). */
#ifndef TQ_QUANT_H
#define TQ_QUANT_H

#include "common/common.h"

TQ_BEGIN_DECLS

/* ------------------------------------ Hadamard (docs/quantization.md, Hadamard blocks) */
/* Block length for an input axis of n: the largest m·2^k dividing n with m ∈ {1,12,20,28}.
 * Returns 0 when n == 0 (no valid block). Every tensor tq-convert quantizes has n divisible
 * by the group size (≥ 16), so its block is at least 16. */
TQ_API uint64_t tq_hadamard_block(uint64_t n);
/* Decompose a block length b = m·N (N = 2^k, m ∈ {1,12,20,28}); -1 if b is not of that form. */
TQ_API int tq_hadamard_split(uint64_t b, int *m, uint64_t *N);
/* In place over x[0..n), block by block (n % b == 0, b valid):
 * forward y = s·(H_m ⊗ H_N)·x in MLX's operation order (radix-2 butterflies per N chunk,
 * then the m-point product in c order in f32, s = f32(1/sqrt(b)) applied once at the end).
 * inverse != 0 uses H_mᵀ instead of H_m: since s²·b = 1 and H_m·H_mᵀ = m·I, that is T⁻¹ up
 * to f32 rounding. Returns -1 (and leaves x alone) if b is invalid or does not divide n. */
TQ_API int tq_hadamard(float *x, size_t n, size_t b, int inverse);
/* Rotate a row vector as the weights are rotated: x[j] *= signs[j] (signs may be NULL),
 * then the forward block transform. The runtime applies this to activations. */
TQ_API int tq_hadamard_rotate(float *x, size_t n, const float *signs, size_t b);
/* Undo tq_hadamard_rotate: inverse block transform, then x[j] *= signs[j]. */
TQ_API int tq_hadamard_unrotate(float *x, size_t n, const float *signs, size_t b);

/* ------------------------------------------------ signs (docs/quantization.md, Signs) */
/* Threefry-2x32, 20 rounds, as JAX/MLX. */
TQ_API void tq_signs_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]);
/* MLX's random bits for `dim` u32 values from key(seed) = (seed >> 32, seed & 0xffffffff). */
TQ_API void tq_signs_random_bits(uint64_t seed, uint32_t *out, size_t dim);
/* u = min((float)bits·2^-32, 0x1.fffffep-1) */
TQ_API float tq_signs_uniform(uint32_t bits);
/* Per-module seed: base + (CRC-32(module_path) mod 2^31). */
TQ_API uint64_t tq_signs_module_seed(uint64_t base_seed, const char *module_path);
/* signs[j] = -1 where uniform < 0.5, else +1, drawn from key(seed). */
TQ_API void tq_signs(uint64_t seed, float *signs, size_t dim);
/* Both: the signs TurboQuant-MLX uses for module `module_path` (e.g. "model.layers.0.mlp.up_proj"). */
TQ_API void tq_signs_module(uint64_t base_seed, const char *module_path, float *signs, size_t dim);

/* ------------------------------------------------------- Lloyd-Max codebooks */
#define TQ_MAX_BITS 4
typedef struct tq_codebook {
    int bits, n;                 /* n = 2^bits centroids */
    double exact[1 << TQ_MAX_BITS]; /* converged centroids, double (ascending) */
    double mse;                  /* E[(X - Q(X))²] for X ~ N(0,1), double centroids */
    uint16_t f16[1 << TQ_MAX_BITS]; /* stored codebook (P.codebook) */
    float c[1 << TQ_MAX_BITS];   /* f16 centroids as f32: what dequantization uses */
    float bnd[(1 << TQ_MAX_BITS) - 1]; /* decision boundaries: f32 midpoints of c */
} tq_codebook;
/* Lloyd-Max quantizer for N(0,1) with 2^bits levels, bits in 1..4, in double precision.
 * The f16 rounding is checked to be far from a tie, so the stored codebook is identical on
 * every machine whatever its libm. */
TQ_API int tq_codebook_lloyd_max(int bits, tq_codebook *cb, tq_err *e);

/* Fitted codebooks (docs/quantization.md, Fitted codebooks): a histogram of the magnitudes
 |v| = |x| / rms of rotated values x, each divided by its group's RMS (computed exactly as
 * the rms recipe computes it), in TQ_FIT_BINS bins of width 1/TQ_FIT_BIN_SCALE over [0, 12)
 * (|v| <= sqrt(group) <= 11.4). Per bin: the count and the sum of |v| in fixed point (units of
 * 2^-32); both are integers, so adding histograms in any order gives the same bits. */
#define TQ_FIT_BIN_SCALE 512
#define TQ_FIT_BINS (12 * TQ_FIT_BIN_SCALE)
typedef struct tq_fit_hist {
    uint64_t n[TQ_FIT_BINS];
    uint64_t s[TQ_FIT_BINS];
} tq_fit_hist;
/* Adds the n values of x (n % group == 0) to h; -1 (TQ_EDATA) on non-finite values. */
TQ_API int tq_fit_hist_add(tq_fit_hist *h, const float *x, size_t n, size_t group, tq_err *e);
TQ_API void tq_fit_hist_merge(tq_fit_hist *dst, const tq_fit_hist *src);
/* Lloyd iterations on the histogram's bins (each bin a point mass at the mean of its values),
 * from the positive half of `start` (the Gaussian table), keeping the codebook symmetric:
 * boundaries at midpoints, each centroid the mean of its cell; stops when no bin changes cell
 * (the centroids are then fixed points), at most TQ_FIT_MAX_ITERS iterations. Integer sums and
 * double divisions in a fixed order: the same bits on every machine. Returns 0 with *out the
 * fitted codebook (f16-rounded like the Gaussian one), 1 when the fit is unusable (no values,
 * centroids that collapse or are not strictly ascending after f16 rounding): *out is then
 * a copy of start. *iters (may be NULL): iterations run. */
/* A stored codebook as readers accept it: n values, all finite and strictly ascending (what
 * every TurboQuant writer stores). Returns 0, or -1 with *at the first offending index and
 * *why "not finite" or "not above the previous value". */
TQ_API int tq_codebook_check(const float *c, size_t n, size_t *at, const char **why);
#define TQ_FIT_MAX_ITERS 1000
TQ_API int tq_codebook_fit(const tq_codebook *start, const tq_fit_hist *h, tq_codebook *out, int *iters);

/* ------------------------------------------------------- per-group quantization */
enum tq_scale_method { TQ_SCALE_RMS = 0, TQ_SCALE_LSQ = 1 };

/* Indices for v values: idx = number of boundaries b with v >= b. */
TQ_API void tq_quantize_assign(const tq_codebook *cb, const float *v, size_t n, uint8_t *idx);
/* Quantize n rotated values (n % group == 0): idx[n], scales[n/group] (f16 bits).
 * rms: scale = max(sqrt(mean(w²)), 1e-7), v = w / scale (the reference recipe).
 * lsq: the RMS and a grid of scales around it, each stored as is or refitted (least-squares
 *      scale for its indices, rounded to f16); then the nearest-centroid indices for the best
 *      stored scale, stored with the scale Σx²/Σx·c[idx] (no shrinkage: Σx·ŵ = Σx²) where
 *      that is a finite positive f16, else as is or refitted.
 * err2 / sum2 (may be NULL) receive Σ(w - ŵ)² and Σw² in double, fixed order.
 * Fails (TQ_EDATA) on non-finite values or a scale that overflows f16. */
TQ_API int tq_quantize_groups(const tq_codebook *cb, int method, size_t group, const float *w, size_t n,
                              uint8_t *idx, uint16_t *scales, double *err2, double *sum2, tq_err *e);

/* Packing (docs/quantization.md, Packing): epw = floor(32/bits) indices per u32, LSB first,
 * each row padded with zero indices to a multiple of epw. */
static inline size_t tq_pack_epw(int bits) { return (size_t)(32 / bits); }
static inline size_t tq_pack_words(size_t n, int bits) { return (n + tq_pack_epw(bits) - 1) / tq_pack_epw(bits); }
TQ_API void tq_pack(const uint8_t *idx, size_t n, int bits, uint32_t *out);
TQ_API void tq_unpack(const uint32_t *in, size_t n, int bits, uint8_t *idx);
/* Dequantize one packed row to rotated values: out[j] = codebook[idx] * f16 scale (f32).
 * codebook: 2^bits values as f32. */
TQ_API void tq_dequantize_row(const uint32_t *packed, const uint16_t *scales, const float *codebook,
                              int bits, size_t group, size_t n, float *out);

/* One whole row, from original weights to packed words: copy, rotate with signs and block,
 * quantize, pack. scratch: n floats + n bytes (tq_quantize_row_scratch). This is the recipe
 * tq-convert runs (it reads rows as stored, in their dtype: quant_internal.h's
 * tq_q_quantize_row, which this wraps). */
typedef struct tq_qspec {
    const tq_codebook *cb;
    int method;          /* enum tq_scale_method */
    size_t group;        /* group size */
    size_t block;        /* Hadamard block (tq_hadamard_block(n)) */
    const float *signs;  /* n signs */
} tq_qspec;
static inline size_t tq_quantize_row_scratch(size_t n) { return n * (sizeof(float) + 1); }
TQ_API int tq_quantize_row(const tq_qspec *q, const float *w, size_t n, void *scratch, uint32_t *packed,
                           uint16_t *scales, double *err2, double *sum2, tq_err *e);

/* ------------------------------------------------------- MLX affine (quant/affine.c) */
/* mlx.core.quantize's two rules (docs/quantization.md, MLX affine): its Metal kernels (what
 * mlx_lm.convert runs on a Mac: group maximum starts at 0, halfway cases round away from
 * zero) and its CPU path (min/max of the group, ties to even). */
enum tq_affine_rule { TQ_AFFINE_GPU = 0, TQ_AFFINE_CPU = 1 };
/* One row of `cols` values (already rounded to the weight's dtype, given as f32) quantized per
 * group of `group`: q = clamp(round((w - bias) / scale), 0, 2^bits - 1), packed LSB-first
 * 32/bits per u32 word. scales/biases get cols/group f32 values before the dtype rounding
 * (the caller rounds them to the weight's dtype, as MLX stores them; q was computed with the
 * unrounded scale, as in MLX). bits in {2, 4, 8}; cols % group == 0; group % (32/bits) == 0.
 * Returns -1 with *bad = the column of the first NaN or infinity (nothing is written then). */
TQ_API int tq_affine_quantize_row_rule(const float *w, uint64_t cols, int bits, int group, int rule,
                                       uint32_t *packed, float *scales, float *biases, uint64_t *bad);
/* The CPU rule on finite input (tq-mkmodel's generator). */
TQ_API void tq_affine_quantize_row(const float *w, uint64_t cols, int bits, int group,
                                   uint32_t *packed, float *scales, float *biases);
/* Inverse: w = scale * q + bias (f32), for tests and tools that check dequantization. */
TQ_API void tq_affine_dequantize_row(const uint32_t *packed, const float *scales,
                                     const float *biases, uint64_t cols, int bits, int group,
                                     float *out);

TQ_END_DECLS

#endif
