/* Random signs drawn exactly as TurboQuant-MLX draws them (docs/quantization.md, Signs):
 * Threefry-2x32 (20 rounds, JAX's schedule) keyed by the module seed, MLX's bit layout for
 * `dim` values, MLX's bits-to-uniform conversion, and sign = -1 where u < 0.5. Reproducing
 * the reference converter's signs lets a module's signs be re-derived from its name alone. */
#include "quant/quant.h"

#include <string.h>

static inline uint32_t rotl32(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

void tq_signs_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2])
{
    static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    uint32_t ks[3] = {key[0], key[1], key[0] ^ key[1] ^ 0x1BD11BDAu};
    uint32_t x0 = ctr[0] + ks[0], x1 = ctr[1] + ks[1];
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 4; k++) {
            x0 += x1;
            x1 = rotl32(x1, rot[i & 1][k]);
            x1 ^= x0;
        }
        x0 += ks[(i + 1) % 3];
        x1 += ks[(i + 2) % 3] + (uint32_t)i + 1u;
    }
    out[0] = x0;
    out[1] = x1;
}

void tq_signs_random_bits(uint64_t seed, uint32_t *out, size_t dim)
{
    const uint32_t key[2] = {(uint32_t)(seed >> 32), (uint32_t)seed};
    size_t h = dim / 2, odd = dim % 2;
    for (size_t c = 0; c < h; c++) {
        uint32_t ctr[2] = {(uint32_t)c, (uint32_t)(c + h + odd)}, r[2];
        tq_signs_threefry2x32(key, ctr, r);
        out[c] = r[0];
        out[c + h + odd] = r[1];
    }
    if (odd) {
        uint32_t ctr[2] = {(uint32_t)h, 0}, r[2];
        tq_signs_threefry2x32(key, ctr, r);
        out[h] = r[0];
    }
}

float tq_signs_uniform(uint32_t bits)
{
    const float top = 0x1.fffffep-1f;
    float u = (float)bits * 0x1p-32f;
    return u < top ? u : top;
}

uint64_t tq_signs_module_seed(uint64_t base_seed, const char *module_path)
{
    uint32_t crc = tq_crc32(module_path, strlen(module_path));
    return base_seed + (crc & 0x7FFFFFFFu);
}

void tq_signs(uint64_t seed, float *signs, size_t dim)
{
    /* Draw in chunks so no buffer proportional to dim is needed: tq_signs_random_bits's layout
     * pairs index c with c + h + odd, so compute pairs directly. */
    const uint32_t key[2] = {(uint32_t)(seed >> 32), (uint32_t)seed};
    size_t h = dim / 2, odd = dim % 2;
    for (size_t c = 0; c < h; c++) {
        uint32_t ctr[2] = {(uint32_t)c, (uint32_t)(c + h + odd)}, r[2];
        tq_signs_threefry2x32(key, ctr, r);
        signs[c] = tq_signs_uniform(r[0]) < 0.5f ? -1.0f : 1.0f;
        signs[c + h + odd] = tq_signs_uniform(r[1]) < 0.5f ? -1.0f : 1.0f;
    }
    if (odd) {
        uint32_t ctr[2] = {(uint32_t)h, 0}, r[2];
        tq_signs_threefry2x32(key, ctr, r);
        signs[h] = tq_signs_uniform(r[0]) < 0.5f ? -1.0f : 1.0f;
    }
}

void tq_signs_module(uint64_t base_seed, const char *module_path, float *signs, size_t dim)
{
    tq_signs(tq_signs_module_seed(base_seed, module_path), signs, dim);
}
