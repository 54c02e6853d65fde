/* tq-mkmodel's randomness, weight recipe and MLX affine quantization, without files. */
#include "tests/unit/check.h"
#include "testdata/mkmodel/mkmodel.h"
#include "quant/quant.h"

#include <stdint.h>

/* Pinned values: the generator must give these bits on every machine, compiler and
 * optimization level (they were the same with gcc -O0/-O2/-O3 -march=native and clang). */
static void test_golden_values(void)
{
    tq_err err = {0};
    CHECK(tq_mk_key(0, "model.embed_tokens.weight") == 0x14d5cc5e2cabe884ull);
    CHECK(tq_mk_key(42, "model.embed_tokens.weight") == 0x25b859d3b18e4023ull);
    double z0, z1;
    tq_mk_gauss_pair(1, 0, &z0, &z1);
    CHECK(z0 == -0.58213670505154957 && z1 == 0.80016114967430019);
    tq_mk_matrix m;
    CHECK_OK(tq_mk_matrix_init(&m, 7, "golden", 64, 256, &err));
    float *v = malloc(64 * 256 * sizeof *v);
    tq_mk_matrix_rows(&m, 0, 64, v);
    unsigned char h[32];
    char hex[65];
    tq_sha256_buf(v, 64 * 256 * sizeof *v, h);
    tq_hex(h, 32, hex);
    CHECKF(!strcmp(hex, "b42f0c73cd897cf486b94ed73bf14b612f957fbbd47e1da173654dd67a454a4c"), "%s", hex);
    CHECK(m.n_outliers == 1 && m.outliers[0] == 245);
    CHECK(tq_mk_matrix_row_scale(&m, 5) == 1.6314708450445865);
    free(v);
    tq_mk_matrix_free(&m);
}

/* Own log/exp agree with libm to ~1 ulp over the ranges the generator uses and beyond. */
static void test_log_exp(void)
{
    double worst_l = 0, worst_e = 0;
    for (int i = 1; i <= 200000; i++) {
        double x = (double)i / 200001.0;
        double d = fabs(tq_mk_log(x) - log(x)) / (fabs(log(x)) + 1e-300);
        if (d > worst_l)
            worst_l = d;
        double y = -20.0 + 40.0 * (double)i / 200000.0;
        double de = fabs(tq_mk_exp(y) - exp(y)) / exp(y);
        if (de > worst_e)
            worst_e = de;
    }
    CHECKF(worst_l < 1e-14, "log rel err %g", worst_l);
    CHECKF(worst_e < 1e-14, "exp rel err %g", worst_e);
    CHECK(fabs(tq_mk_log(1e-310) - log(1e-310)) < 1e-12); /* subnormal input */
    CHECK(tq_mk_log(1.0) == 0.0);
}

static void test_gauss_moments(void)
{
    double s1 = 0, s2 = 0, s4 = 0;
    const int n = 1 << 20;
    for (int i = 0; i < n; i++) {
        double z = tq_mk_gauss(12345, (uint64_t)i);
        s1 += z;
        s2 += z * z;
        s4 += z * z * z * z;
    }
    double mean = s1 / n, var = s2 / n - mean * mean, kurt = s4 / n / (var * var);
    CHECKF(fabs(mean) < 0.005, "mean %g", mean);
    CHECKF(fabs(var - 1) < 0.01, "var %g", var);
    CHECKF(fabs(kurt - 3) < 0.05, "kurtosis %g", kurt);
    /* different streams are different */
    CHECK(tq_mk_gauss(1, 0) != tq_mk_gauss(2, 0));
}

/* The documented recipe, measured on the LLM-like anchor shape (docs/compatibility.md, Quality
 * anchors). */
static void test_recipe_statistics(void)
{
    tq_err err = {0};
    const uint64_t R = 1024, C = 4096;
    tq_mk_matrix m;
    CHECK_OK(tq_mk_matrix_init(&m, 3, "model.layers.0.mlp.down_proj.weight", R, C, &err));
    CHECK(m.n_outliers == C / 256);
    for (size_t i = 1; i < m.n_outliers; i++)
        CHECK(m.outliers[i - 1] < m.outliers[i]);
    float *v = malloc(R * C * sizeof *v);
    tq_mk_matrix_rows(&m, 0, R, v);
    /* rows computed in pieces are the same as all at once */
    float *piece = malloc(3 * C * sizeof *piece);
    tq_mk_matrix_rows(&m, 517, 3, piece);
    CHECK(memcmp(piece, v + 517 * C, 3 * C * sizeof *piece) == 0);
    free(piece);

    double s1 = 0, s2 = 0, so2 = 0, st2 = 0, lrs1 = 0, lrs2 = 0;
    uint64_t nb = 0, no = 0, nt = 0;
    for (uint64_t r = 0; r < R; r++) {
        double rs = tq_mk_matrix_row_scale(&m, r);
        double lr = log(rs);
        lrs1 += lr;
        lrs2 += lr * lr;
        for (uint64_t c = 0; c < C; c++) {
            double x = v[r * C + c] / rs * sqrt((double)C); /* row scale and 1/sqrt(in) removed */
            int tail = tq_mk_matrix_is_tail(&m, r, c);
            nt += tail;
            if (tail && !m.is_outlier[c])
                st2 += x * x;
            else if (m.is_outlier[c] && !tail)
                so2 += x * x, no++;
            else if (!tail) {
                s1 += x;
                s2 += x * x;
                nb++;
            }
        }
    }
    double mean = s1 / nb, sd = sqrt(s2 / nb - mean * mean);
    CHECKF(fabs(mean) < 0.01, "bulk mean %g", mean);
    CHECKF(fabs(sd - 1) < 0.01, "bulk std %g (after removing row scale and 1/sqrt(in))", sd);
    double out_rms = sqrt(so2 / no);
    CHECKF(fabs(out_rms / TQ_MK_OUTLIER_MUL - 1) < 0.05, "outlier channel rms %g", out_rms);
    double tail_frac = (double)nt / (double)(R * C);
    CHECKF(fabs(tail_frac - 0.001953125) < 0.0002, "tail fraction %g", tail_frac);
    double tail_rms = sqrt(st2 / (double)(nt - nt * m.n_outliers / C));
    CHECKF(fabs(tail_rms / TQ_MK_TAIL_MUL - 1) < 0.1, "tail rms %g", tail_rms);
    double lm = lrs1 / R, lsd = sqrt(lrs2 / R - lm * lm);
    CHECKF(fabs(lsd - TQ_MK_ROW_SIGMA) < 0.03 && fabs(lm) < 0.03, "log row scale mean %g sd %g", lm, lsd);
    /* heavy tails as seen from the values alone: entries beyond 7 sigma of the row exist
     * (a Gaussian bulk from 32-bit uniforms never exceeds 6.7) at about P(|z| > 7/15)/512 */
    uint64_t big = 0;
    for (uint64_t r = 0; r < R; r++) {
        double rs = tq_mk_matrix_row_scale(&m, r) / sqrt((double)C);
        for (uint64_t c = 0; c < C; c++)
            if (!m.is_outlier[c] && fabs(v[r * C + c]) > 7 * rs)
                big++;
    }
    double bf = (double)big / (double)(R * C);
    CHECKF(bf > 0.0011 && bf < 0.0015, "fraction beyond 7 sigma %g", bf);
    free(v);
    tq_mk_matrix_free(&m);

    /* same name and seed: same outliers; other seed: other values */
    tq_mk_matrix a, b;
    CHECK_OK(tq_mk_matrix_init(&a, 3, "x", 4, 1024, &err));
    CHECK_OK(tq_mk_matrix_init(&b, 4, "x", 4, 1024, &err));
    float va[1024], vb[1024];
    tq_mk_matrix_rows(&a, 1, 1, va);
    tq_mk_matrix_rows(&b, 1, 1, vb);
    CHECK(memcmp(va, vb, sizeof va) != 0);
    tq_mk_matrix_free(&a);
    tq_mk_matrix_free(&b);
}

static void test_norm_values(void)
{
    float v[4096];
    tq_mk_norm_values(9, "model.norm.weight", 0, 4096, v);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < 4096; i++)
        s1 += v[i], s2 += (double)v[i] * v[i];
    double mean = s1 / 4096, sd = sqrt(s2 / 4096 - mean * mean);
    CHECKF(fabs(mean - 1) < 0.005 && fabs(sd - TQ_MK_NORM_SIGMA) < 0.005, "norm mean %g sd %g", mean, sd);
}

/* A worked example of MLX's rule: w = 0, 1/63, ..., 1: the edge of larger magnitude (1.0)
 * is exact, the scale is negative (-1/15) and q = rint((1 - w) * 15). */
static void test_affine_example(void)
{
    float w[64], sc[1], bi[1], back[64];
    uint32_t q[8];
    for (int i = 0; i < 64; i++)
        w[i] = (float)i / 63.0f;
    tq_affine_quantize_row(w, 64, 4, 64, q, sc, bi);
    CHECKF(bi[0] == 1.0f && fabsf(sc[0] + 1.0f / 15.0f) < 1e-7f, "scale %g bias %g", sc[0], bi[0]);
    CHECK((q[0] & 0xF) == 15);          /* w[0] = 0 -> q = 15, least significant nibble first */
    CHECK((q[7] >> 28) == 0);           /* w[63] = 1 -> q = 0 */
    tq_affine_dequantize_row(q, sc, bi, 64, 4, 64, back);
    CHECK(back[63] == 1.0f);
    for (int i = 0; i < 64; i++)
        CHECKF(fabsf(back[i] - w[i]) <= 0.5f / 15.0f + 1e-6f, "i=%d %g vs %g", i, back[i], w[i]);
}

static void test_affine_error(void)
{
    tq_err err = {0};
    const uint64_t R = 64, C = 1024;
    tq_mk_matrix m;
    CHECK_OK(tq_mk_matrix_init(&m, 1, "q", R, C, &err));
    float *v = malloc(R * C * sizeof *v), *back = malloc(C * sizeof *back);
    uint32_t *q = malloc(C * sizeof *q);
    float sc[32], bi[32];
    tq_mk_matrix_rows(&m, 0, R, v);
    for (int bits = 4; bits <= 8; bits += 4) {
        double num = 0, den = 0, worst = 0;
        uint64_t over_half = 0;
        for (uint64_t r = 0; r < R; r++) {
            const float *w = v + r * C;
            tq_affine_quantize_row(w, C, bits, 64, q, sc, bi);
            tq_affine_dequantize_row(q, sc, bi, C, bits, 64, back);
            for (uint64_t c = 0; c < C; c++) {
                double d = (double)back[c] - w[c];
                num += d * d;
                den += (double)w[c] * w[c];
                double rel = fabs(d) / fabs(sc[c / 64]);
                if (rel > worst)
                    worst = rel;
                over_half += rel > 0.5 + 1e-3;
            }
        }
        /* half a step, except where MLX's exact-edge scale pushes the opposite edge past
         * 2^bits - 1 and it is clipped: at most one step there */
        CHECKF(worst <= 1.0 + 1e-3, "bits %d: error %g steps", bits, worst);
        CHECKF(over_half < R * C / 100, "bits %d: %llu entries over half a step", bits,
               (unsigned long long)over_half);
        double rmse = num / den;
        /* affine min/max on heavy-tailed groups: 4 bits ~1e-2, 8 bits ~4e-5 */
        CHECKF(bits == 4 ? rmse < 0.03 && rmse > 0.001 : rmse < 2e-4, "bits %d rel mse %g", bits, rmse);
    }
    free(v);
    free(back);
    free(q);
    tq_mk_matrix_free(&m);
}

int main(void)
{
    RUN(test_golden_values);
    RUN(test_log_exp);
    RUN(test_gauss_moments);
    RUN(test_recipe_statistics);
    RUN(test_norm_values);
    RUN(test_affine_example);
    RUN(test_affine_error);
    TEST_MAIN_END();
}
