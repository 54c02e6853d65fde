/* MLX affine quantization (quant/affine.c) against vectors written from MLX's algorithm: the
 * expected words, scales and biases below were printed by tests/consumers/mlx_affine.py
 * (`vectors`), a standard-library Python restatement of mlx.core.quantize's Metal kernel and
 * CPU path that shares no code with tq. Inputs are f32; each case lists the GPU rule's result,
 * then the CPU rule's. */
#include "quant/quant.h"
#include "tests/unit/check.h"

#include <math.h>
#include <string.h>

typedef struct expect {
    uint32_t words[8];
    uint32_t scale, bias; /* f32 bits */
} expect;

typedef struct vec {
    int bits, group;
    float x[32];
    expect gpu, cpu;
} vec;

static const vec vecs[] = {
    /* all_equal_pos */
    {4, 32, {0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f},
     {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, 0xb3d6bf95u, 0x3f400000u},
     {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, 0xb3d6bf95u, 0x3f400000u},
    },
    /* all_equal_neg */
    {4, 32, {-0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f, -0.75f},
     {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, 0x3d4ccccdu, 0xbf400000u},
     {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, 0xb3d6bf95u, 0xbf400000u},
    },
    /* all_zero */
    {4, 32, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
     {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, 0xb3d6bf95u, 0x00000000u},
     {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}, 0xb3d6bf95u, 0x00000000u},
    },
    /* one_outlier */
    {4, 32, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 100.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
     {{0x0fffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xc0d55555u, 0x42c80000u},
     {{0x0fffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xc0d55555u, 0x42c80000u},
    },
    /* negative_only */
    {4, 32, {-1.0f, -1.03125f, -1.0625f, -1.09375f, -1.125f, -1.15625f, -1.1875f, -1.21875f, -1.25f, -1.28125f, -1.3125f, -1.34375f, -1.375f, -1.40625f, -1.4375f, -1.46875f, -1.5f, -1.53125f, -1.5625f, -1.59375f, -1.625f, -1.65625f, -1.6875f, -1.71875f, -1.75f, -1.78125f, -1.8125f, -1.84375f, -1.875f, -1.90625f, -1.9375f, -1.96875f},
     {{0x66667777u, 0x44455555u, 0x22233334u, 0x00011112u}, 0x3e066666u, 0xbffc0000u},
     {{0xbccddeefu, 0x8899aaabu, 0x44556677u, 0x00112233u}, 0x3d866666u, 0xbffc0000u},
    },
    /* halfway */
    {4, 32, {15.0f, 0.0f, 0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f, 8.5f, 9.5f, 10.5f, 11.5f, 12.5f, 13.5f, 14.5f, 0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f},
     {{0xabcdeff0u, 0x23456789u, 0x9abcdef1u, 0x12345678u}, 0xbf800000u, 0x41700000u},
     {{0xaacceef0u, 0x22446688u, 0x9abcdef0u, 0x12345678u}, 0xbf800000u, 0x41700000u},
    },
    /* mixed_8bit */
    {8, 32, {-0.18199999630451202f, -0.07800000160932541f, 0.026000000536441803f, 0.12999999523162842f, -0.14300000667572021f, -0.039000000804662704f, 0.06499999761581421f, 0.16899999976158142f, -0.10400000214576721f, 0.0f, 0.10400000214576721f, -0.16899999976158142f, -0.06499999761581421f, 0.039000000804662704f, 0.14300000667572021f, -0.12999999523162842f, -0.026000000536441803f, 0.07800000160932541f, 0.18199999630451202f, -0.09099999815225601f, 0.013000000268220901f, 0.11699999868869781f, -0.15600000321865082f, -0.052000001072883606f, 0.052000001072883606f, 0.15600000321865082f, -0.11699999868869781f, -0.013000000268220901f, 0.09099999815225601f, -0.18199999630451202f, -0.07800000160932541f, 0.026000000536441803f},
     {{0x256eb7ffu, 0x09529be5u, 0xf73780c9u, 0xdb1b65aeu, 0xc0004992u, 0xa5ee2e77u, 0x89d2125bu, 0x6eb7ff40u}, 0xbaba5e35u, 0x3e3a5e35u},
     {{0x256eb7ffu, 0x09529be5u, 0xf73780c9u, 0xdb1b65aeu, 0xc0004992u, 0xa5ee2e77u, 0x89d2125bu, 0x6eb7ff40u}, 0xbaba5e35u, 0x3e3a5e35u},
    },
};

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void check_case(size_t i, int rule, const expect *x)
{
    const vec *v = &vecs[i];
    uint32_t w[8] = {0};
    float s, b;
    uint64_t bad = 99;
    CHECK(tq_affine_quantize_row_rule(v->x, 32, v->bits, v->group, rule, w, &s, &b, &bad) == 0);
    int nw = 32 * v->bits / 32;
    CHECKF(!memcmp(w, x->words, (size_t)nw * 4), "case %zu rule %d: words differ (first %08x, expected %08x)", i, rule,
           w[0], x->words[0]);
    CHECKF(fbits(s) == x->scale && fbits(b) == x->bias, "case %zu rule %d: scale %08x bias %08x, expected %08x %08x", i,
           rule, fbits(s), fbits(b), x->scale, x->bias);
    /* dequantization is the affine formula scale * q + bias (f32) */
    float back[32];
    tq_affine_dequantize_row(w, &s, &b, 32, v->bits, v->group, back);
    for (int j = 0; j < 32; j++) {
        uint32_t q = (w[j / (32 / v->bits)] >> ((j % (32 / v->bits)) * v->bits)) & ((1u << v->bits) - 1);
        CHECK(fbits(back[j]) == fbits(s * (float)q + b));
    }
}

static void test_vectors(void)
{
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        check_case(i, TQ_AFFINE_GPU, &vecs[i].gpu);
        check_case(i, TQ_AFFINE_CPU, &vecs[i].cpu);
    }
    /* the rules differ exactly where the vectors say: the negative-only group and halfway q */
    CHECK(vecs[4].gpu.scale != vecs[4].cpu.scale && vecs[5].gpu.words[0] != vecs[5].cpu.words[0]);
}

static void test_non_finite(void)
{
    float x[64];
    for (int j = 0; j < 64; j++)
        x[j] = (float)j * 0.01f;
    uint32_t w[8];
    float s[2], b[2];
    const float bad_vals[3] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        x[37] = bad_vals[k];
        uint64_t bad = 0;
        CHECK(tq_affine_quantize_row_rule(x, 64, 4, 32, TQ_AFFINE_GPU, w, s, b, &bad) == -1 && bad == 37);
        CHECK(tq_affine_quantize_row_rule(x, 64, 4, 32, TQ_AFFINE_CPU, w, s, b, &bad) == -1 && bad == 37);
    }
}

int main(void)
{
    RUN(test_vectors);
    RUN(test_non_finite);
    TEST_MAIN_END();
}
