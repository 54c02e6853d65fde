/* MXFP4 (OCP microscaling FP4), the format of gpt-oss's released expert weights: blocks of 32
 * FP4 E2M1 values sharing one E8M0 scale. Decoding is exact in f32 (every value is a
 * 2-significant-bit number times a power of two). One implementation for every reader:
 * safetensors (*_blocks / *_scales, element 2j in the low nibble of byte j) and GGUF
 * (block_mxfp4, element j in the low nibble and j+16 in the high nibble of byte j). */
#include "formats/formats.h"

#include <math.h>

/* E2M1: sign bit 3, exponent bits 2..1, mantissa bit 0: 0, .5, 1, 1.5, 2, 3, 4, 6. */
static const float e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float tq_fp4_e2m1(unsigned nibble)
{
    return e2m1[nibble & 15];
}

int tq_e8m0_scale(uint8_t s, float *out)
{
    if (s == 255) /* E8M0 NaN */
        return -1;
    *out = ldexpf(1.0f, (int)s - 127); /* 2^-127 is a subnormal f32, still exact */
    return 0;
}

int tq_mxfp4_decode(const uint8_t *blocks, const uint8_t *scales, uint64_t n_blocks, int ggml_order,
                    float *out, uint64_t *bad_block)
{
    for (uint64_t b = 0; b < n_blocks; b++) {
        float s;
        if (tq_e8m0_scale(scales[b], &s) != 0) {
            *bad_block = b;
            return -1;
        }
        const uint8_t *q = blocks + b * 16;
        float *o = out + b * 32;
        for (int j = 0; j < 16; j++) {
            float lo = e2m1[q[j] & 15] * s, hi = e2m1[q[j] >> 4] * s;
            if (ggml_order) {
                o[j] = lo;
                o[j + 16] = hi;
            } else {
                o[2 * j] = lo;
                o[2 * j + 1] = hi;
            }
        }
        for (int j = 0; j < 32; j++)
            if (isinf(o[j])) { /* scale 2^127 times 4 or 6 does not fit an f32 */
                *bad_block = b;
                return -1;
            }
    }
    return 0;
}
