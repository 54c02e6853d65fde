/* MXFP4 (OCP microscaling FP4), the format of gpt-oss's released expert weights and of GGUF
 * type 39: blocks of 32 FP4 E2M1 values sharing one E8M0 exponent. The one decoder of both
 * layouts: safetensors (*_blocks / *_scales, element 2j in the low nibble of byte j) and GGUF
 * (block_mxfp4, element j in the low nibble and j+16 in the high nibble of byte j). Values are
 * exactly what ggml's dequantize_row_mxfp4 writes (see formats.h). */
#include "formats/formats.h"

#include <math.h>
#include <string.h>

/* ggml keeps the E2M1 levels doubled, as integers: 0, .5, 1, 1.5, 2, 3, 4, 6 become 0..12.
 * Code 8 (E2M1's negative zero) is the integer 0 like code 0, so it decodes to +0. */
static const int8_t levels2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float tq_e8m0_half(uint8_t e)
{
    /* 2^(e-128): e 0 and 1 are the f32 subnormals 2^-128 and 2^-127, the others the normal
     * with biased exponent e-1 (e = 255 gives 2^127: ggml gives it no special meaning here) */
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float tq_mxfp4_value(unsigned nibble, uint8_t e)
{
    return (float)levels2[nibble & 15] * tq_e8m0_half(e);
}

int tq_mxfp4_block(const uint8_t qs[16], uint8_t e, int ggml_order, float out[32])
{
    const float d = tq_e8m0_half(e);
    int finite = 1;
    for (int j = 0; j < 16; j++) {
        float lo = (float)levels2[qs[j] & 15] * d, hi = (float)levels2[qs[j] >> 4] * d;
        out[ggml_order ? j : 2 * j] = lo;
        out[ggml_order ? j + 16 : 2 * j + 1] = hi;
        finite &= isfinite(lo) && isfinite(hi);
    }
    return e == 255 || !finite ? -1 : 0;
}

int tq_mxfp4_decode(const uint8_t *blocks, const uint8_t *scales, uint64_t n_blocks, int ggml_order, float *out,
                    uint64_t *bad_block)
{
    int rc = 0;
    for (uint64_t b = 0; b < n_blocks; b++)
        if (tq_mxfp4_block(blocks + b * 16, scales[b], ggml_order, out + b * 32) && rc == 0) {
            *bad_block = b;
            rc = -1;
        }
    return rc;
}
