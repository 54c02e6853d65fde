/* MLX affine quantization (mlx/backend/cpu/quantized.cpp `quantize`), reproduced in f32 so
 * generated quantized checkpoints match what `mlx.core.quantize` would write. */
#include "quant/quant.h"

#include <math.h>

void tq_affine_quantize_row(const float *w, uint64_t cols, int bits, int group,
                            uint32_t *packed, float *scales, float *biases)
{
    const float n_bins = (float)((1 << bits) - 1);
    const float eps = 1e-7f;
    const int per_word = 32 / bits;
    uint64_t n_groups = cols / (uint64_t)group;
    for (uint64_t g = 0; g < n_groups; g++) {
        const float *x = w + g * (uint64_t)group;
        float w_min = INFINITY, w_max = -INFINITY;
        for (int j = 0; j < group; j++) {
            w_max = fmaxf(w_max, x[j]);
            w_min = fminf(w_min, x[j]);
        }
        int mask = fabsf(w_min) > fabsf(w_max);
        float scale = fmaxf((w_max - w_min) / n_bins, eps);
        scale = mask ? scale : -scale;
        float edge = mask ? w_min : w_max;
        float q0 = rintf(edge / scale);
        float bias = 0.0f;
        if (q0 != 0.0f) {
            scale = edge / q0;
            bias = edge;
        }
        uint32_t *out = packed + g * (uint64_t)(group / per_word);
        for (int k = 0; k < group / per_word; k++) {
            uint32_t word = 0;
            for (int i = 0; i < per_word; i++) {
                float q = rintf((x[k * per_word + i] - bias) / scale);
                q = fminf(fmaxf(q, 0.0f), n_bins);
                word |= (uint32_t)q << (i * bits);
            }
            out[k] = word;
        }
        scales[g] = scale;
        biases[g] = bias;
    }
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
