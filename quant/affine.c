/* MLX affine quantization, bit for bit as `mlx.core.quantize` computes it (docs/quantization.md,
 * MLX affine): the rule of MLX's Metal kernel (what mlx_lm.convert runs on a Mac) or of its CPU
 * path (mlx/backend/cpu/quantized.cpp), in f32 with the operation order of those sources. */
#include "quant/quant.h"

#include <math.h>

int tq_affine_quantize_row_rule(const float *w, uint64_t cols, int bits, int group, int rule,
                                uint32_t *packed, float *scales, float *biases, uint64_t *bad)
{
    const float n_bins = (float)((1 << bits) - 1);
    const float eps = 1e-7f;
    const int per_word = 32 / bits;
    const int gpu = rule == TQ_AFFINE_GPU;
    uint64_t n_groups = cols / (uint64_t)group;
    for (uint64_t i = 0; i < cols; i++)
        if (!isfinite(w[i])) {
            *bad = i;
            return -1;
        }
    for (uint64_t g = 0; g < n_groups; g++) {
        const float *x = w + g * (uint64_t)group;
        /* CPU: min/max from +inf/-inf. GPU: the minimum starts at the dtype's largest finite
         * value (never above a finite input) and the maximum at 0, so a group of negative
         * values keeps 0 as its top edge. */
        float w_min = INFINITY, w_max = gpu ? 0.0f : -INFINITY;
        for (int j = 0; j < group; j++) {
            w_max = w_max < x[j] ? x[j] : w_max;
            w_min = x[j] < w_min ? x[j] : w_min;
        }
        int mask = fabsf(w_min) > fabsf(w_max);
        float scale = (w_max - w_min) / n_bins;
        scale = scale < eps ? eps : scale;
        scale = mask ? scale : -scale;
        float edge = mask ? w_min : w_max;
        /* halfway cases: the GPU's round() goes away from zero, the CPU's rint() to even */
        float q0 = gpu ? roundf(edge / scale) : rintf(edge / scale);
        float bias = 0.0f;
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        uint32_t *out = packed + g * (uint64_t)(group / per_word);
        for (int k = 0; k < group / per_word; k++) {
            uint32_t word = 0;
            for (int i = 0; i < per_word; i++) {
                float v = (x[k * per_word + i] - bias) / scale;
                float q = gpu ? roundf(v) : rintf(v);
                q = q > n_bins ? n_bins : q;
                q = q > 0.0f ? q : 0.0f; /* the CPU clamps; on the GPU q is never below -0 */
                word |= (uint32_t)q << (i * bits);
            }
            out[k] = word;
        }
        scales[g] = scale;
        biases[g] = bias;
    }
    return 0;
}

void tq_affine_quantize_row(const float *w, uint64_t cols, int bits, int group,
                            uint32_t *packed, float *scales, float *biases)
{
    uint64_t bad;
    (void)tq_affine_quantize_row_rule(w, cols, bits, group, TQ_AFFINE_CPU, packed, scales, biases, &bad);
}

void tq_affine_dequantize_row(const uint32_t *packed, const float *scales,
                              const float *biases, uint64_t cols, int bits, int group,
                              float *out)
{
    const int per_word = 32 / bits;
    const uint32_t maskv = (uint32_t)((1u << bits) - 1);
    for (uint64_t c = 0; c < cols; c++) {
        uint32_t q = (packed[c / (uint64_t)per_word] >> ((c % (uint64_t)per_word) * (uint64_t)bits)) & maskv;
        uint64_t g = c / (uint64_t)group;
        out[c] = scales[g] * (float)q + biases[g];
    }
}
