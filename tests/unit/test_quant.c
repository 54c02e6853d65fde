/* quant/: Hadamard blocks, MLX signs, Lloyd-Max codebooks, group quantization, packing.
 * The reference side of every comparison is written here from docs/quantization.md with
 * plain loops in double (O(n²) Hadamard from the Sylvester formula and the H_m tables), not
 * by calling the library. */
#include "formats/formats.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"
#include "tests/unit/check.h"

#include <stdint.h>

/* ---------------------------------------------------------------- naive reference */
static const char *const R12[12] = {
    "+-++++++++++", "--+-+-+-+-+-", "+++-++----++", "+---+--+-++-", "+++++-++----", "+-+---+--+-+",
    "++--+++-++--", "+--++---+--+", "++----+++-++", "+--+-++---+-", "++++----+++-", "+-+--+-++---",
};
static const char *const R20[20] = {
    "+----+----++--++-++-", "-+----+---+++---+-++", "--+----+---+++-+-+-+", "---+----+---+++++-+-",
    "----+----++--++-++-+", "-+++++-----+--+++--+", "+-+++-+---+-+--+++--", "++-++--+---+-+--+++-",
    "+++-+---+---+-+--+++", "++++-----++--+-+--++", "--++-+-++-+-----++++", "---++-+-++-+---+-+++",
    "+---++-+-+--+--++-++", "++---++-+----+-+++-+", "-++---++-+----+++++-", "-+--+--++-+----+----",
    "+-+-----++-+----+---", "-+-+-+---+--+----+--", "--+-+++------+----+-", "+--+--++------+----+",
};
static const char *const R28[28] = {
    "+------++----++-+--+-+--++--", "-+-----+++-----+-+--+-+--++-", "--+-----+++---+-+-+----+--++",
    "---+-----+++---+-+-+-+--+--+", "----+-----+++---+-+-+++--+--", "-----+-----++++--+-+--++--+-",
    "------++----++-+--+-+--++--+", "--++++-+-------++--+++-+--+-", "---++++-+-----+-++--+-+-+--+",
    "+---+++--+----++-++--+-+-+--", "++---++---+----++-++--+-+-+-", "+++---+----+----++-++--+-+-+",
    "++++--------+-+--++-++--+-+-", "-++++--------+++--++--+--+-+", "-+-++-++--++--+--------++++-",
    "+-+-++--+--++--+--------++++", "-+-+-++--+--++--+----+---+++", "+-+-+-++--+--+---+---++---++",
    "++-+-+-++--+------+--+++---+", "-++-+-+-++--+------+-++++---", "+-++-+---++--+------+-++++--",
    "-++--++-+-++-+++----++------", "+-++--++-+-++-+++-----+-----", "++-++---+-+-++-+++-----+----",
    "-++-++-+-+-+-+--+++-----+---", "--++-++++-+-+----+++-----+--", "+--++-+-++-+-+----+++-----+-",
    "++--++-+-++-+-+----++------+",
};

static int ref_hm(int m, int r, int c)
{
    if (m == 1)
        return 1;
    const char *const *H = m == 12 ? R12 : m == 20 ? R20 : R28;
    return H[r][c] == '+' ? 1 : -1;
}

static int popcount(uint64_t v)
{
    int c = 0;
    for (; v; v &= v - 1)
        c++;
    return c;
}

/* y = (1/sqrt(b)) (H_m ⊗ H_N) x for one block, by definition, in double. */
static void ref_block(const double *x, double *y, int m, size_t N)
{
    double s = 1.0 / sqrt((double)m * (double)N);
    for (int r = 0; r < m; r++)
        for (size_t i = 0; i < N; i++) {
            double acc = 0;
            for (int c = 0; c < m; c++)
                for (size_t j = 0; j < N; j++)
                    acc += ref_hm(m, r, c) * (popcount(i & j) & 1 ? -1.0 : 1.0) * x[c * N + j];
            y[r * N + i] = s * acc;
        }
}

static void ref_split(size_t b, int *m, size_t *N)
{
    *m = b % 7 == 0 ? 28 : b % 5 == 0 ? 20 : b % 3 == 0 ? 12 : 1;
    *N = b / (size_t)*m;
}

static void ref_rotate(const float *w, const float *signs, size_t n, size_t b, double *out)
{
    int m;
    size_t N;
    ref_split(b, &m, &N);
    double *tmp = malloc(b * sizeof *tmp);
    for (size_t off = 0; off < n; off += b) {
        for (size_t j = 0; j < b; j++)
            tmp[j] = (double)w[off + j] * signs[off + j];
        ref_block(tmp, out + off, m, N);
    }
    free(tmp);
}

/* Deterministic test data: xorshift + Box-Muller. */
static uint64_t rng_state = 88172645463325252ull;
static double urand(void) { return t_urand(&rng_state); }
static double nrand(void) { return t_nrand(&rng_state); }
static void fill_normal(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)nrand();
}

static float half_to_float(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (float)(h & 0x8000 ? -v : v);
}

/* ---------------------------------------------------------------- tests */
static void test_block_rule(void)
{
    CHECK(tq_hadamard_block(768) == 768);
    CHECK(tq_hadamard_block(1536) == 1536);
    CHECK(tq_hadamard_block(5120) == 5120);
    CHECK(tq_hadamard_block(25600) == 5120);
    CHECK(tq_hadamard_block(4096) == 4096);
    CHECK(tq_hadamard_block(14336) == 14336); /* 28·512 */
    CHECK(tq_hadamard_block(11008) == 256);   /* 2^8·43 */
    CHECK(tq_hadamard_block(36) == 12);       /* never 36 = 12·3 */
    CHECK(tq_hadamard_block(6) == 2);         /* 12 needs a factor 4 */
    CHECK(tq_hadamard_block(7) == 1);
    CHECK(tq_hadamard_block(0) == 0);
    int m;
    uint64_t N;
    CHECK(tq_hadamard_split(36, &m, &N) == -1);
    CHECK(tq_hadamard_split(0, &m, &N) == -1);
    CHECK(tq_hadamard_split(160, &m, &N) == 0 && m == 20 && N == 8);
    float x[36] = {0};
    CHECK(tq_hadamard(x, 36, 36, 0) == -1);
    CHECK(tq_hadamard(x, 36, 24, 0) == -1); /* does not divide */
}

static void test_tables_orthogonal(void)
{
    static const int ms[] = {12, 20, 28};
    for (int k = 0; k < 3; k++) {
        int m = ms[k];
        for (int a = 0; a < m; a++)
            for (int b = 0; b < m; b++) {
                int d = 0;
                for (int c = 0; c < m; c++)
                    d += ref_hm(m, a, c) * ref_hm(m, b, c);
                CHECKF(d == (a == b ? m : 0), "H%d rows %d,%d: %d", m, a, b, d);
            }
    }
}

static void test_hadamard_vs_definition(void)
{
    static const size_t sizes[] = {1, 2, 4, 8, 32, 64, 256, 12, 24, 96, 20, 160, 320, 28, 224, 768, 1024};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t b = sizes[k], n = 2 * b;
        float *x = malloc(n * sizeof *x), *ones = malloc(n * sizeof *ones), *back = malloc(n * sizeof *back);
        double *y = malloc(n * sizeof *y);
        fill_normal(x, n);
        for (size_t j = 0; j < n; j++)
            ones[j] = 1;
        ref_rotate(x, ones, n, b, y);
        memcpy(back, x, n * sizeof *x);
        CHECK(tq_hadamard(back, n, b, 0) == 0);
        double maxd = 0;
        for (size_t j = 0; j < n; j++)
            maxd = fmax(maxd, fabs(back[j] - y[j]));
        CHECKF(maxd < 2e-5, "b=%zu max |fast - definition| = %g", b, maxd);
        CHECK(tq_hadamard(back, n, b, 1) == 0);
        maxd = 0;
        for (size_t j = 0; j < n; j++)
            maxd = fmax(maxd, fabs(back[j] - x[j]));
        CHECKF(maxd < 2e-5, "b=%zu inverse error %g", b, maxd);
        free(x), free(ones), free(back), free(y);
    }
}

/* Bit-exact with MLX's CPU order, written as MLX writes it: butterflies with h = 1, 2, 4, ...
 * over each N chunk (scale multiplied in at the last stage when m = 1), then per fast
 * index i: out[r] = 0; out[r] += or -= x[i + c·N] in c order; x = out[r]·scale. */
static void mlx_order(float *x, size_t b)
{
    int m;
    size_t N;
    ref_split(b, &m, &N);
    float scale = (float)(1.0 / sqrt((double)b));
    for (int c = 0; c < m; c++) {
        float *d = x + (size_t)c * N;
        for (size_t h = 1; h < N; h <<= 1)
            for (size_t i = 0; i < N / 2; i++) {
                size_t k = i & (h - 1), j = ((i - k) << 1) + k;
                float a = d[j], bb = d[j + h];
                d[j] = a + bb;
                d[j + h] = a - bb;
                if (m == 1 && h == N / 2) {
                    d[j] *= scale;
                    d[j + h] *= scale;
                }
            }
    }
    if (m == 1)
        return;
    float out[28];
    for (size_t i = 0; i < N; i++) {
        for (int r = 0; r < m; r++) {
            out[r] = 0;
            for (int c = 0; c < m; c++) {
                float v = x[i + (size_t)c * N];
                if (ref_hm(m, r, c) > 0)
                    out[r] += v;
                else
                    out[r] -= v;
            }
        }
        for (int r = 0; r < m; r++)
            x[i + (size_t)r * N] = out[r] * scale;
    }
}

static void test_hadamard_bit_exact(void)
{
    static const size_t sizes[] = {2, 8, 16, 32, 64, 128, 256, 1024, 4096, 12, 96, 768, 1536, 20, 160, 5120, 28, 224, 1792, 14336};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t b = sizes[k];
        float *x = malloc(b * sizeof *x), *y = malloc(b * sizeof *y);
        fill_normal(x, b);
        x[b / 2] = 0.0f;
        x[b - 1] = -0.0f;
        memcpy(y, x, b * sizeof *x);
        mlx_order(x, b);
        CHECK(tq_hadamard(y, b, b, 0) == 0);
        CHECKF(memcmp(x, y, b * sizeof *x) == 0, "block %zu differs from MLX's operation order", b);
        free(x), free(y);
    }
}

/* e_0 through the transform: y[r·N + i] = H_m[r][0]/sqrt(b) — checks that row r of the table
 * produces output r (H20 and H28 are not symmetric). */
static void test_hadamard_orientation(void)
{
    static const size_t bs[] = {160, 224, 96};
    for (int k = 0; k < 3; k++) {
        size_t b = bs[k], N = 8;
        int m = (int)(b / N);
        float x[224] = {0};
        x[0] = 1;
        CHECK(tq_hadamard(x, b, b, 0) == 0);
        float s = (float)(1.0 / sqrt((double)b));
        for (int r = 0; r < m; r++)
            for (size_t i = 0; i < N; i++)
                CHECKF(x[r * N + i] == (ref_hm(m, r, 0) > 0 ? s : -s), "m=%d r=%d", m, r);
        /* e_c: output r gets H[r][c]: use c = 1 and the transposed flag */
        memset(x, 0, sizeof x);
        x[N] = 1; /* c = 1, i = 0 */
        CHECK(tq_hadamard(x, b, b, 1) == 0);
        for (int r = 0; r < m; r++)
            CHECKF(x[r * N] == (ref_hm(m, 1, r) > 0 ? s : -s), "inverse m=%d r=%d", m, r);
    }
}

static void test_signs_check_values(void)
{
    uint32_t v[3];
    tq_signs_random_bits(0, v, 1);
    CHECKF(v[0] == 1797259609u, "%u", v[0]);
    tq_signs_random_bits(1, v, 1);
    CHECKF(v[0] == 507451445u, "%u", v[0]);
    tq_signs_random_bits(0, v, 3);
    CHECKF(v[0] == 4146024105u && v[1] == 1351547692u && v[2] == 2718843009u, "%u %u %u", v[0], v[1], v[2]);
    /* signs agree with bits, and the module seed is base + crc mod 2^31 */
    const char *mod = "model.layers.0.mlp.up_proj";
    uint64_t seed = tq_signs_module_seed(42, mod);
    CHECK(seed == 42 + (tq_crc32(mod, strlen(mod)) & 0x7FFFFFFFu));
    uint32_t bits[101];
    float sg[101];
    tq_signs_random_bits(seed, bits, 101);
    tq_signs_module(42, mod, sg, 101);
    int neg = 0;
    for (int i = 0; i < 101; i++) {
        float u = (float)bits[i] * 0x1p-32f;
        CHECK(sg[i] == (u < 0.5f ? -1.0f : 1.0f));
        neg += sg[i] < 0;
    }
    CHECK(neg > 30 && neg < 71);
    CHECK(tq_signs_uniform(0xFFFFFFFFu) == 0x1.fffffep-1f);
    CHECK(tq_signs_uniform(0x80000000u) == 0.5f);
}

static void test_codebooks(void)
{
    static const double ref2[] = {0.4527800, 1.5104175};
    static const double ref3[] = {0.2450941, 0.7560052, 1.3439091, 2.1519453};
    /* TurboQuant-MLX publishes 0.1285059 0.3883730 0.6572739 0.9430078 1.2570026 1.6188648
     * 2.0698192 2.7332987 for 4 bits: up to 8e-4 away from the Lloyd-Max fixed point
     * (an iteration stopped early on a very flat MSE surface: its MSE 0.0095010186 is above
     * the fixed point's 0.0095010080). These are the fixed point, computed independently
     * (Python, 852 iterations until no centroid moves by 1e-15), as Max's 1960 table has
     * them (0.1284 0.3881 0.6568 0.9424 1.256 1.618 2.069 2.733). */
    static const double ref4[] = {0.12839502985114865, 0.38804829949029535, 0.6567591185324716,
                                  0.9423404564869722, 1.2562311973471878, 1.6180463860218923,
                                  2.069017226531396, 2.7325895709951693};
    static const double mlx4[] = {0.1285059, 0.3883730, 0.6572739, 0.9430078,
                                  1.2570026, 1.6188648, 2.0698192, 2.7332987};
    static const double refmse[] = {0, 0.36338, 0.11748, 0.03455, 0.00950};
    const double *refs[] = {NULL, NULL, ref2, ref3, ref4};
    tq_err err;
    for (int bits = 1; bits <= 4; bits++) {
        tq_codebook cb;
        CHECK_OK(tq_codebook_lloyd_max(bits, &cb, &err));
        CHECK(cb.n == 1 << bits);
        int h = cb.n / 2;
        for (int i = 0; i < h; i++) {
            double want = bits == 1 ? sqrt(2 / M_PI) : refs[bits][i];
            CHECKF(fabs(cb.exact[h + i] - want) <= 1e-6, "%d-bit c%d %.9f vs %.9f", bits, i, cb.exact[h + i], want);
            if (bits == 4)
                CHECK(fabs(cb.exact[h + i] - mlx4[i]) <= 1e-3);
            CHECK(cb.exact[h - 1 - i] == -cb.exact[h + i]);
            CHECK(cb.f16[h - 1 - i] == (cb.f16[h + i] | 0x8000));
            CHECK(fabs(half_to_float(cb.f16[h + i]) - want) <= 0.5 * ldexp(1, (int)floor(log2(want)) - 10) + 1e-6);
            CHECK(cb.c[h + i] == half_to_float(cb.f16[h + i]));
        }
        CHECKF(fabs(cb.mse - refmse[bits]) <= 5e-6, "%d-bit mse %.7f", bits, cb.mse);
        if (bits == 4)
            CHECKF(fabs(cb.mse - 0.0095010080082) <= 1e-9, "%.12f", cb.mse);
        for (int i = 0; i + 1 < cb.n; i++)
            CHECK(cb.bnd[i] == (cb.c[i] + cb.c[i + 1]) * 0.5f);
    }
    tq_codebook cb;
    CHECK(tq_codebook_lloyd_max(5, &cb, &err) == -1);
}

/* rms recipe from the spec in double: rotate by definition, scale = RMS, index = count. */
static void test_naive_agrees(void)
{
    tq_err err;
    static const size_t ins[] = {256, 768, 640};
    static const int bitsv[] = {2, 3, 4};
    static const size_t groups[] = {32, 64, 128};
    for (int t = 0; t < 3; t++) {
        size_t n = ins[t], rows = 24, g = groups[t], b = tq_hadamard_block(n);
        tq_codebook cb;
        CHECK_OK(tq_codebook_lloyd_max(bitsv[t], &cb, &err));
        float *w = malloc(rows * n * sizeof *w), *signs = malloc(n * sizeof *signs);
        fill_normal(w, rows * n);
        tq_signs_module(42, "model.layers.1.self_attn.o_proj", signs, n);
        double *rot = malloc(n * sizeof *rot);
        uint8_t *scratch = malloc(tq_quantize_row_scratch(n)), *got = malloc(n);
        uint32_t *packed = malloc(tq_pack_words(n, cb.bits) * 4);
        uint16_t *sc = malloc(n / g * 2);
        tq_qspec q = {&cb, TQ_SCALE_RMS, g, b, signs};
        size_t idx_diff = 0, sc_diff = 0, total = 0;
        for (size_t r = 0; r < rows; r++) {
            CHECK_OK(tq_quantize_row(&q, w + r * n, n, scratch, packed, sc, NULL, NULL, &err));
            tq_unpack(packed, n, cb.bits, got);
            ref_rotate(w + r * n, signs, n, b, rot);
            for (size_t g0 = 0; g0 < n; g0 += g) {
                double ss = 0;
                for (size_t j = 0; j < g; j++)
                    ss += rot[g0 + j] * rot[g0 + j];
                double scale = fmax(sqrt(ss / g), 1e-7);
                /* f16(scale) by search over all finite halves */
                uint16_t best = 0;
                for (uint32_t h = 0; h < 0x7C00; h++)
                    if (fabs(half_to_float((uint16_t)h) - scale) < fabs(half_to_float(best) - scale))
                        best = (uint16_t)h;
                if (sc[g0 / g] != best)
                    sc_diff++;
                for (size_t j = 0; j < g; j++) {
                    double v = rot[g0 + j] / scale;
                    int c = 0;
                    for (int k = 0; k + 1 < cb.n; k++)
                        c += v >= 0.5 * ((double)cb.c[k] + cb.c[k + 1]);
                    if (c != got[g0 + j]) {
                        idx_diff++;
                        /* a disagreement is only allowed right at a boundary */
                        int k = c > got[g0 + j] ? got[g0 + j] : c;
                        CHECKF(fabs(v - 0.5 * ((double)cb.c[k] + cb.c[k + 1])) < 1e-5, "v=%g", v);
                    }
                    total++;
                }
            }
        }
        CHECKF(idx_diff * 10000 <= total, "%zu of %zu indices differ", idx_diff, total);
        CHECKF(sc_diff * 100 <= rows * n / g, "%zu scales differ", sc_diff);
        free(w), free(signs), free(rot), free(scratch), free(got), free(packed), free(sc);
    }
}

/* A case small enough to do by hand: row = e_0, n = 32, 3 bits, group 32.
 * T(s0·e_0) = s0/sqrt(32) everywhere; rms = 1/sqrt(32) = 0.17677670; v = ±1, which lies
 * between centroids 0.7560 and 1.3439 below their midpoint 1.0500: index 5 (s0 = +1) or
 * 2 (s0 = -1); f16(0.17677670) = 1448·2^-13 = 0x31A8; ten indices of 5 per word = 0x2DB6DB6D. */
static void test_hand_case(void)
{
    tq_err err;
    tq_codebook cb;
    CHECK_OK(tq_codebook_lloyd_max(3, &cb, &err));
    float w[32] = {0}, signs[32], scratch[32 * 2];
    w[0] = 1;
    const char *mod = "model.layers.0.mlp.up_proj";
    tq_signs_module(42, mod, signs, 32);
    uint32_t all[32];
    tq_signs_random_bits(tq_signs_module_seed(42, mod), all, 32);
    float s0 = (float)all[0] * 0x1p-32f < 0.5f ? -1.0f : 1.0f;
    CHECK(signs[0] == s0);
    tq_qspec q = {&cb, TQ_SCALE_RMS, 32, 32, signs};
    uint32_t packed[4] = {0xDEADBEEF, 0xDEADBEEF, 0xDEADBEEF, 0xDEADBEEF};
    uint16_t sc[1];
    CHECK_OK(tq_quantize_row(&q, w, 32, scratch, packed, sc, NULL, NULL, &err));
    CHECKF(sc[0] == 0x31A8, "%04x", sc[0]);
    uint32_t full = s0 > 0 ? 0x2DB6DB6Du : 0x12492492u; /* 2 = 0b010 repeated */
    CHECKF(packed[0] == full && packed[1] == full && packed[2] == full, "%08x", packed[0]);
    CHECKF(packed[3] == (full & 0x3F), "last word %08x", packed[3]); /* 2 indices, rest zero */
}

/* The row recipe tq-convert runs (tq_q_quantize_row, quant_internal.h) on rows as stored:
 * a BF16, F16 or F64 row gives the bytes tq_quantize_row gives for the same values as f32
 * (each of those converts to f32 exactly or, for F64, by the one rounding tq_to_f32 does),
 * NULL signs act as all-ones signs, and rotate = 0 (--rotation none) is tq_quantize_groups on
 * the signed values, packed. Consistency: the recipe itself is held to the definition by
 * test_naive_agrees and test_hand_case, which run it through tq_quantize_row. */
static void test_row_recipe_sources(void)
{
    tq_err err;
    tq_codebook cb;
    CHECK_OK(tq_codebook_lloyd_max(3, &cb, &err));
    enum { N = 768, G = 64 };
    static float w[N], back[N], signs[N], ones[N], x[N];
    static unsigned char raw[N * 8], scratch[N * 5];
    static uint8_t idx[N];
    uint32_t pk1[N], pk2[N];
    uint16_t sc1[N / G], sc2[N / G];
    fill_normal(w, N);
    tq_signs_module(42, "model.layers.3.mlp.down_proj", signs, N);
    for (size_t j = 0; j < N; j++)
        ones[j] = 1.0f;
    tq_qspec q = {&cb, TQ_SCALE_LSQ, G, tq_hadamard_block(N), signs};
    static const tq_dtype dts[] = {TQ_DT_BF16, TQ_DT_F16, TQ_DT_F64, TQ_DT_F32};
    for (int d = 0; d < 4; d++) {
        double a1, b1, a2, b2;
        if (dts[d] == TQ_DT_F64) /* (tq_from_f32 does not write F64) */
            for (size_t j = 0; j < N; j++) {
                double v = (double)w[j] * (1 + 0x1p-30); /* not an f32: the row rounds it */
                memcpy(raw + 8 * j, &v, 8);
            }
        else
            CHECK_OK(tq_from_f32(dts[d], w, raw, N, &err));
        CHECK_OK(tq_to_f32(dts[d], raw, back, N, &err));
        CHECK_OK(tq_quantize_row(&q, back, N, scratch, pk1, sc1, &a1, &b1, &err));
        memset(pk2, 0xAB, sizeof pk2);
        CHECK_OK(tq_q_quantize_row(&q, dts[d], 1, raw, N, scratch, pk2, sc2, &a2, &b2, &err));
        CHECKF(!memcmp(pk1, pk2, tq_pack_words(N, 3) * 4) && !memcmp(sc1, sc2, sizeof sc1) && a1 == a2 && b1 == b2,
               "%s row differs from its f32 values", tq_dtype_name(dts[d]));
        /* no signs: the same as all-ones signs */
        tq_qspec q1 = q, q0 = q;
        q1.signs = ones;
        q0.signs = NULL;
        CHECK_OK(tq_q_quantize_row(&q1, dts[d], 1, raw, N, scratch, pk1, sc1, NULL, NULL, &err));
        CHECK_OK(tq_q_quantize_row(&q0, dts[d], 1, raw, N, scratch, pk2, sc2, NULL, NULL, &err));
        CHECK(!memcmp(pk1, pk2, tq_pack_words(N, 3) * 4) && !memcmp(sc1, sc2, sizeof sc1));
    }
    /* --rotation none: signs applied (all ones in tq-convert), no Hadamard */
    for (size_t j = 0; j < N; j++)
        x[j] = w[j] * signs[j];
    CHECK_OK(tq_quantize_groups(&cb, TQ_SCALE_LSQ, G, x, N, idx, sc1, NULL, NULL, &err));
    tq_pack(idx, N, 3, pk1);
    CHECK_OK(tq_q_quantize_row(&q, TQ_DT_F32, 0, w, N, scratch, pk2, sc2, NULL, NULL, &err));
    CHECK(!memcmp(pk1, pk2, tq_pack_words(N, 3) * 4) && !memcmp(sc1, sc2, sizeof sc1));
    CHECK_OK(tq_q_quantize_row(&q, TQ_DT_F32, 1, w, N, scratch, pk2, sc2, NULL, NULL, &err));
    CHECK(memcmp(sc1, sc2, sizeof sc1) != 0); /* rotating does change the row */
    /* a block that does not divide the row, and a dtype the recipe cannot read */
    q.block = 20;
    CHECK(tq_q_quantize_row(&q, TQ_DT_F32, 1, w, N, scratch, pk2, sc2, NULL, NULL, &err) == -1 && err.code == TQ_EUSAGE);
    q.signs = NULL;
    CHECK(tq_q_quantize_row(&q, TQ_DT_I32, 0, w, N, scratch, pk2, sc2, NULL, NULL, &err) == -1 && err.code == TQ_EUNSUP);
}

static void test_packing_roundtrip(void)
{
    for (int bits = 1; bits <= 4; bits++)
        for (size_t n = 1; n <= 300; n += (n < 40 ? 1 : 37)) {
            uint8_t idx[300], back[300];
            for (size_t i = 0; i < n; i++)
                idx[i] = (uint8_t)(urand() * (1 << bits));
            size_t words = tq_pack_words(n, bits);
            CHECK(words == (n + (size_t)(32 / bits) - 1) / (size_t)(32 / bits));
            uint32_t out[300];
            tq_pack(idx, n, bits, out);
            tq_unpack(out, n, bits, back);
            CHECK(memcmp(idx, back, n) == 0);
            /* bit-level layout by definition, padding zero */
            size_t epw = (size_t)(32 / bits);
            for (size_t wi = 0; wi < words; wi++)
                for (size_t j = 0; j < 32; j++) {
                    size_t k = j / (size_t)bits, i = wi * epw + k;
                    unsigned want = k < epw && i < n ? (idx[i] >> (j % (size_t)bits)) & 1 : 0;
                    CHECK(((out[wi] >> j) & 1) == want);
                }
        }
    /* dequantize_row reads what quantize wrote, for every group size */
    static const size_t groups[] = {32, 64, 128};
    tq_err err;
    for (int bits = 2; bits <= 4; bits++)
        for (int gi = 0; gi < 3; gi++) {
            tq_codebook cb;
            CHECK_OK(tq_codebook_lloyd_max(bits, &cb, &err));
            size_t n = 384, g = groups[gi];
            float w[384], deq[384];
            uint8_t idx[384];
            uint16_t sc[12];
            uint32_t pk[384];
            fill_normal(w, n);
            CHECK_OK(tq_quantize_groups(&cb, TQ_SCALE_LSQ, g, w, n, idx, sc, NULL, NULL, &err));
            tq_pack(idx, n, bits, pk);
            tq_dequantize_row(pk, sc, cb.c, bits, g, n, deq);
            for (size_t i = 0; i < n; i++)
                CHECK(deq[i] == cb.c[idx[i]] * half_to_float(sc[i / g]));
        }
}

static double rel_mse(int bits, size_t g, int method, size_t rows, size_t n)
{
    tq_err err;
    tq_codebook cb;
    if (tq_codebook_lloyd_max(bits, &cb, &err))
        return -1;
    float *w = malloc(n * sizeof *w), *signs = malloc(n * sizeof *signs);
    uint8_t *scratch = malloc(tq_quantize_row_scratch(n));
    uint32_t *pk = malloc(tq_pack_words(n, bits) * 4);
    uint16_t *sc = malloc(n / g * 2);
    float *deq = malloc(n * sizeof *deq);
    tq_signs_module(42, "m", signs, n);
    tq_qspec q = {&cb, method, g, tq_hadamard_block(n), signs};
    double e2 = 0, s2 = 0, re2 = 0;
    for (size_t r = 0; r < rows; r++) {
        fill_normal(w, n);
        double a, b;
        if (tq_quantize_row(&q, w, n, scratch, pk, sc, &a, &b, &err))
            return -1;
        e2 += a;
        s2 += b;
        /* the reported error equals the error of the stored data, unrotated */
        tq_dequantize_row(pk, sc, cb.c, bits, g, n, deq);
        tq_hadamard_unrotate(deq, n, signs, q.block);
        for (size_t j = 0; j < n; j++)
            re2 += ((double)deq[j] - w[j]) * ((double)deq[j] - w[j]);
    }
    free(w), free(signs), free(scratch), free(pk), free(sc), free(deq);
    if (fabs(re2 - e2) > 1e-3 * e2)
        return -2;
    return e2 / s2;
}

static void test_mse_gaussian(void)
{
    static const double theory[] = {0, 0, 0.11748, 0.03455, 0.00950};
    for (int bits = 2; bits <= 4; bits++) {
        double m = rel_mse(bits, 128, TQ_SCALE_RMS, 64, 4096);
        printf("# rms %d-bit g128 relative MSE %.5f (Lloyd-Max %.5f)\n", bits, m, theory[bits]);
        CHECKF(m > 0 && fabs(m - theory[bits]) <= 0.03 * theory[bits], "%d-bit %.5f", bits, m);
    }
    double rms = rel_mse(3, 64, TQ_SCALE_RMS, 64, 4096), lsq = rel_mse(3, 64, TQ_SCALE_LSQ, 64, 4096);
    printf("# 3-bit g64 rms %.5f lsq %.5f (%.1f%% lower)\n", rms, lsq, 100 * (1 - lsq / rms));
    CHECKF(rms > 0 && lsq > 0 && lsq <= 0.92 * rms, "rms %.5f lsq %.5f", rms, lsq);
}

/* (rotated x)·(dequantized rotated rows) == W_dequant_unrotated·x */
static void activation_identity(size_t E, size_t out, size_t n, int bits, size_t g)
{
    tq_err err;
    tq_codebook cb;
    CHECK_OK(tq_codebook_lloyd_max(bits, &cb, &err));
    float *w = malloc(n * sizeof *w), *signs = malloc(n * sizeof *signs), *x = malloc(n * sizeof *x);
    float *xr = malloc(n * sizeof *xr), *deq = malloc(n * sizeof *deq);
    uint8_t *scratch = malloc(tq_quantize_row_scratch(n));
    uint32_t *pk = malloc(tq_pack_words(n, bits) * 4);
    uint16_t *sc = malloc(n / g * 2);
    size_t b = tq_hadamard_block(n);
    tq_signs_module(42, "model.layers.0.mlp.switch_mlp.down_proj", signs, n); /* shared by experts */
    fill_normal(x, n);
    memcpy(xr, x, n * sizeof *x);
    CHECK(tq_hadamard_rotate(xr, n, signs, b) == 0);
    tq_qspec q = {&cb, TQ_SCALE_LSQ, g, b, signs};
    double worst = 0;
    for (size_t ex = 0; ex < E; ex++) {
        double d2 = 0, y2 = 0;
        for (size_t r = 0; r < out; r++) {
            fill_normal(w, n);
            CHECK_OK(tq_quantize_row(&q, w, n, scratch, pk, sc, NULL, NULL, &err));
            tq_dequantize_row(pk, sc, cb.c, bits, g, n, deq);
            double fast = 0, slow = 0;
            for (size_t j = 0; j < n; j++)
                fast += (double)xr[j] * deq[j];
            CHECK(tq_hadamard_unrotate(deq, n, signs, b) == 0);
            for (size_t j = 0; j < n; j++)
                slow += (double)deq[j] * x[j];
            d2 += (fast - slow) * (fast - slow);
            y2 += slow * slow;
        }
        worst = fmax(worst, sqrt(d2 / y2));
    }
    CHECKF(worst <= 1e-5, "E=%zu n=%zu relative %g", E, n, worst);
    free(w), free(signs), free(x), free(xr), free(deq), free(scratch), free(pk), free(sc);
}

static void test_activation_identity(void)
{
    activation_identity(1, 64, 5120, 3, 64); /* dense, block 20·256 */
    activation_identity(1, 64, 4096, 4, 32);
    activation_identity(4, 32, 768, 2, 128); /* expert stack, block 12·64 */
    activation_identity(3, 32, 1792, 3, 64); /* 28·64 */
}

static void test_bad_values(void)
{
    tq_err err;
    tq_codebook cb;
    CHECK_OK(tq_codebook_lloyd_max(3, &cb, &err));
    float w[64];
    uint8_t idx[64];
    uint16_t sc[2];
    fill_normal(w, 64);
    w[40] = NAN;
    CHECK(tq_quantize_groups(&cb, TQ_SCALE_LSQ, 32, w, 64, idx, sc, NULL, NULL, &err) == -1);
    CHECK(strstr(err.msg, "group 1") != NULL);
    w[40] = 1e30f;
    CHECK(tq_quantize_groups(&cb, TQ_SCALE_RMS, 32, w, 64, idx, sc, NULL, NULL, &err) == -1);
    for (int i = 0; i < 64; i++)
        w[i] = 0;
    double e2, s2;
    CHECK_OK(tq_quantize_groups(&cb, TQ_SCALE_LSQ, 32, w, 64, idx, sc, &e2, &s2, &err));
    CHECK(e2 < 1e-12 && s2 == 0 && sc[0] != 0 && (sc[0] & 0x7C00) != 0x7C00);
    CHECK(tq_quantize_groups(&cb, TQ_SCALE_LSQ, 48, w, 64, idx, sc, NULL, NULL, &err) == -1);
}

/* quant's inlined f16 conversions agree with formats' on every f16 and on a sweep of f32
 * bit patterns (normals, subnormals, ties, overflow, NaN). */
static void test_f16_conversions(void)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float a = tq_q_f32((uint16_t)h), b = tq_f16_to_f32((uint16_t)h);
        CHECKF(memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)), "%04x", h);
    }
    size_t bad = 0;
    for (uint64_t x = 0; x < 0x100000000ull; x += 4093) {
        uint32_t u = (uint32_t)x;
        float f;
        memcpy(&f, &u, 4);
        uint16_t a = tq_q_f16(f), b = tq_f32_to_f16(f);
        if (a != b && !(isnan(f) && (a & 0x7C00) == 0x7C00 && (a & 0x3FF) && (b & 0x7C00) == 0x7C00 && (b & 0x3FF)))
            bad++;
    }
    CHECKF(bad == 0, "%zu conversions differ", bad);
}

/* r of one group as docs/quantization.md ("Scales: rms", steps 1-2) defines it: eight f32
 * lanes over the first 8·floor(G/8) values, added in double as ((l0+l1)+(l2+l3))+((l4+l5)+
 * (l6+l7)), the rest added in double; r = sqrtf(f32(sum) / f32(G)). */
static float doc_rms(const float *x, size_t G)
{
    float l[8] = {0};
    size_t full = G - G % 8;
    for (size_t j = 0; j < full; j++)
        l[j % 8] += x[j] * x[j];
    double s = ((double)l[0] + l[1]) + ((double)l[2] + l[3]);
    s = s + (((double)l[4] + l[5]) + ((double)l[6] + l[7]));
    for (size_t j = full; j < G; j++)
        s += (double)x[j] * x[j];
    return sqrtf((float)s / (float)G);
}

/* "index = #{k : v >= bnd[k]}": a value exactly on a boundary (x / r == bnd[k] in f32) takes
 * the upper centroid, on the 8-lane path (position 3) and in the scalar tail (position 42 of
 * a group of 44: the lanes take the first 40), at the boundaries of 2, 3 and 4 bits. The
 * ties are built by solving x = bnd[k]·r for the group's own r (a fixed point, nudged by
 * ulps until exact; most boundaries get one, and each bit width gets some on both paths). */
static void test_rms_ties_go_up(void)
{
    tq_err err;
    enum { G = 44 };
    for (int bits = 2; bits <= 4; bits++) {
        tq_codebook cb;
        CHECK_OK(tq_codebook_lloyd_max(bits, &cb, &err));
        int ties[2] = {0, 0}, tried = 0;
        for (int k = 0; k + 1 < cb.n; k++)
            for (int pos = 3; pos <= 42; pos += 39) {
                float w[G];
                for (int i = 0; i < G; i++)
                    w[i] = (i % 2 ? 1.0f : -1.0f) * (0.5f + 0.03f * (float)i);
                float b = cb.bnd[k];
                int exact = 0;
                for (int it = 0; it < 120 && !exact; it++) {
                    float r = doc_rms(w, G);
                    if (w[pos] / r == b)
                        exact = 1;
                    else if (it < 20)
                        w[pos] = b * r;
                    else
                        w[pos] = nextafterf(w[pos], w[pos] / r < b ? INFINITY : -INFINITY);
                }
                tried++;
                if (!exact)
                    continue;
                ties[pos >= 40]++;
                uint8_t idx[G];
                uint16_t sc[1];
                CHECK_OK(tq_quantize_groups(&cb, TQ_SCALE_RMS, G, w, G, idx, sc, NULL, NULL, &err));
                CHECKF(idx[pos] == k + 1, "%d-bit boundary %d at position %d: index %d, the tie goes up to %d", bits,
                       k, pos, idx[pos], k + 1);
            }
        printf("  %d-bit: exact ties at %d + %d of %d boundary positions\n", bits, ties[0], ties[1], tried);
        CHECKF(ties[0] > 0 && ties[1] > 0 && ties[0] + ties[1] >= tried / 2, "%d-bit: too few exact ties (%d, %d of %d)",
               bits, ties[0], ties[1], tried);
    }
}

/* Fitted codebooks: Lloyd on the histogram finds point masses exactly, histograms add in any
 * order to the same bits, unusable fits fall back, stored tables are checked. */
static void test_codebook_fit(void)
{
    tq_err err;
    tq_codebook g2, g3, f;
    CHECK_OK(tq_codebook_lloyd_max(2, &g2, &err));
    CHECK_OK(tq_codebook_lloyd_max(3, &g3, &err));
    /* groups of 32: 16 values at ±1, 16 at ±3 (RMS sqrt 5): two magnitudes, 1/√5 and 3/√5 */
    static float x[32 * 64];
    for (int i = 0; i < 32 * 64; i++)
        x[i] = (float)((i % 4 < 2 ? 1 : 3) * (i % 2 ? -1 : 1));
    tq_fit_hist *h = calloc(1, sizeof *h), *h2 = calloc(1, sizeof *h2), *h3 = calloc(1, sizeof *h3);
    CHECK(h && h2 && h3);
    CHECK_OK(tq_fit_hist_add(h, x, 32 * 64, 32, &err));
    int it = -1;
    CHECK(tq_codebook_fit(&g2, h, &f, &it) == 0);
    CHECK(it >= 1 && it < TQ_FIT_MAX_ITERS);
    double a = 1 / sqrt(5.0), b = 3 / sqrt(5.0);
    CHECKF(fabs(f.exact[2] - a) < 1e-6 && fabs(f.exact[3] - b) < 1e-6, "%.9f %.9f", f.exact[2], f.exact[3]);
    CHECK(f.exact[1] == -f.exact[2] && f.exact[0] == -f.exact[3]);
    CHECK(f.c[2] == half_to_float(f.f16[2]) && f.f16[1] == (f.f16[2] | 0x8000));
    CHECK(f.bnd[2] == (f.c[2] + f.c[3]) * 0.5f && f.mse < 1e-12);
    /* 3 bits from two magnitudes: two of the four cells stay empty and keep their centroids */
    CHECK(tq_codebook_fit(&g3, h, &f, NULL) == 0 || memcmp(&f, &g3, sizeof f) == 0);
    /* halves added separately, then merged: the same histogram and the same codebook */
    CHECK_OK(tq_fit_hist_add(h2, x + 32 * 40, 32 * 24, 32, &err));
    CHECK_OK(tq_fit_hist_add(h3, x, 32 * 40, 32, &err));
    tq_fit_hist_merge(h2, h3);
    CHECK(memcmp(h, h2, sizeof *h) == 0);
    /* nothing to fit: the start codebook, status 1 */
    memset(h3, 0, sizeof *h3);
    CHECK(tq_codebook_fit(&g2, h3, &f, NULL) == 1 && memcmp(&f, &g2, sizeof f) == 0);
    x[7] = NAN;
    CHECK(tq_fit_hist_add(h3, x, 32, 32, &err) == -1 && err.code == TQ_EDATA);
    free(h), free(h2), free(h3);
    /* stored tables: finite and strictly ascending */
    float ok[4] = {-1, -0.25f, 0.25f, 1}, nan[4] = {-1, NAN, 0.25f, 1}, uns[4] = {-1, 0.25f, -0.25f, 1};
    size_t at;
    const char *why;
    CHECK(tq_codebook_check(ok, 4, &at, &why) == 0);
    CHECK(tq_codebook_check(nan, 4, &at, &why) == -1 && at == 1 && !strcmp(why, "not finite"));
    CHECK(tq_codebook_check(uns, 4, &at, &why) == -1 && at == 2);
}

int main(void)
{
    RUN(test_f16_conversions);
    RUN(test_block_rule);
    RUN(test_tables_orthogonal);
    RUN(test_hadamard_vs_definition);
    RUN(test_hadamard_orientation);
    RUN(test_hadamard_bit_exact);
    RUN(test_signs_check_values);
    RUN(test_codebooks);
    RUN(test_naive_agrees);
    RUN(test_rms_ties_go_up);
    RUN(test_hand_case);
    RUN(test_row_recipe_sources);
    RUN(test_packing_roundtrip);
    RUN(test_mse_gaussian);
    RUN(test_activation_identity);
    RUN(test_bad_values);
    RUN(test_codebook_fit);
    TEST_MAIN_END();
}
