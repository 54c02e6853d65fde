/* Block Walsh-Hadamard transform, bit-exact with MLX's CPU hadamard_transform
 * (docs/quantization.md, Hadamard blocks).
 *
 * The operation order is part of the contract: butterflies (a+b, a-b) stage by stage with
 * h = 1, 2, 4, ... inside each N chunk, then for every fast index i the m-point product
 * accumulated from 0.0f in c order, then one multiplication by s. Vector code below uses
 * GCC/Clang vector extensions; lane-wise IEEE operations give the same bits as the scalar
 * loop, so the result does not depend on the vector width. */
#include "quant/quant.h"
#include "quant/quant_internal.h"

#include <math.h>
#include <string.h>

static const char *const H12[12] = {
    "+-++++++++++", "--+-+-+-+-+-", "+++-++----++", "+---+--+-++-",
    "+++++-++----", "+-+---+--+-+", "++--+++-++--", "+--++---+--+",
    "++----+++-++", "+--+-++---+-", "++++----+++-", "+-+--+-++---",
};

static const char *const H20[20] = {
    "+----+----++--++-++-", "-+----+---+++---+-++", "--+----+---+++-+-+-+",
    "---+----+---+++++-+-", "----+----++--++-++-+", "-+++++-----+--+++--+",
    "+-+++-+---+-+--+++--", "++-++--+---+-+--+++-", "+++-+---+---+-+--+++",
    "++++-----++--+-+--++", "--++-+-++-+-----++++", "---++-+-++-+---+-+++",
    "+---++-+-+--+--++-++", "++---++-+----+-+++-+", "-++---++-+----+++++-",
    "-+--+--++-+----+----", "+-+-----++-+----+---", "-+-+-+---+--+----+--",
    "--+-+++------+----+-", "+--+--++------+----+",
};

static const char *const H28[28] = {
    "+------++----++-+--+-+--++--", "-+-----+++-----+-+--+-+--++-",
    "--+-----+++---+-+-+----+--++", "---+-----+++---+-+-+-+--+--+",
    "----+-----+++---+-+-+++--+--", "-----+-----++++--+-+--++--+-",
    "------++----++-+--+-+--++--+", "--++++-+-------++--+++-+--+-",
    "---++++-+-----+-++--+-+-+--+", "+---+++--+----++-++--+-+-+--",
    "++---++---+----++-++--+-+-+-", "+++---+----+----++-++--+-+-+",
    "++++--------+-+--++-++--+-+-", "-++++--------+++--++--+--+-+",
    "-+-++-++--++--+--------++++-", "+-+-++--+--++--+--------++++",
    "-+-+-++--+--++--+----+---+++", "+-+-+-++--+--+---+---++---++",
    "++-+-+-++--+------+--+++---+", "-++-+-+-++--+------+-++++---",
    "+-++-+---++--+------+-++++--", "-++--++-+-++-+++----++------",
    "+-++--++-+-++-+++-----+-----", "++-++---+-+-++-+++-----+----",
    "-++-++-+-+-+-+--+++-----+---", "--++-++++-+-+----+++-----+--",
    "+--++-+-++-+-+----+++-----+-", "++--++-+-++-+-+----++------+",
};

static const char *const *hm_rows(int m)
{
    return m == 12 ? H12 : m == 20 ? H20 : m == 28 ? H28 : NULL;
}

uint64_t tq_hadamard_block(uint64_t n)
{
    if (n == 0)
        return 0;
    uint64_t p2 = n & (~n + 1); /* largest power of two dividing n */
    uint64_t odd = n / p2, best = p2;
    static const unsigned ms[] = {3, 5, 7}; /* 12 = 3·4, 20 = 5·4, 28 = 7·4 */
    for (int i = 0; i < 3; i++)
        if (odd % ms[i] == 0 && p2 >= 4 && (uint64_t)ms[i] * p2 > best)
            best = ms[i] * p2;
    return best;
}

int tq_hadamard_split(uint64_t b, int *m, uint64_t *N)
{
    static const int ms[] = {1, 12, 20, 28};
    for (int i = 0; i < 4; i++) {
        if (b == 0 || b % (uint64_t)ms[i])
            continue;
        uint64_t q = b / (uint64_t)ms[i];
        if ((q & (q - 1)) == 0) {
            *m = ms[i];
            *N = q;
            return 0;
        }
    }
    return -1;
}

/* One butterfly stage (scalar; only for chunks shorter than 16). */
TQ_INLINE void stage1(float *x, size_t N, size_t h, int last, float s)
{
    for (size_t base = 0; base < N; base += 2 * h)
        for (size_t j = 0; j < h; j++) {
            float a = x[base + j], b = x[base + j + h];
            float u = a + b, d = a - b;
            if (last) {
                u *= s;
                d *= s;
            }
            x[base + j] = u;
            x[base + j + h] = d;
        }
}

/* Stages h = 1, 2, 4 on every 8-element piece of a chunk (never the last stage here), in
 * registers: lane j gets lo + hi·(±1), which is a + b or a - b exactly (x·-1 is exact and
 * a + (-b) is IEEE's definition of a - b). */
#define SHUF8(v, ...) TQ_SHUF8(v, v, __VA_ARGS__)
TQ_INLINE void wht8_all(float *x, size_t N)
{
    const tq_v8f m1 = {1, -1, 1, -1, 1, -1, 1, -1}, m2 = {1, 1, -1, -1, 1, 1, -1, -1}, m4 = {1, 1, 1, 1, -1, -1, -1, -1};
    for (size_t o = 0; o < N; o += 8) {
        tq_v8f v = tq_ld8(x + o);
        v = SHUF8(v, 0, 0, 2, 2, 4, 4, 6, 6) + SHUF8(v, 1, 1, 3, 3, 5, 5, 7, 7) * m1;
        v = SHUF8(v, 0, 1, 0, 1, 4, 5, 4, 5) + SHUF8(v, 2, 3, 2, 3, 6, 7, 6, 7) * m2;
        v = SHUF8(v, 0, 1, 2, 3, 0, 1, 2, 3) + SHUF8(v, 4, 5, 6, 7, 4, 5, 6, 7) * m4;
        tq_st8(x + o, v);
    }
}

/* Stages h and 2h in one pass (h >= 8): the same additions in the same order as two
 * separate stages, with half the memory traffic. */
TQ_INLINE void stage2(float *x, size_t N, size_t h, int last, float s)
{
    tq_v8f sv = {s, s, s, s, s, s, s, s};
    for (size_t base = 0; base < N; base += 4 * h)
        for (size_t j = base; j < base + h; j += 8) {
            tq_v8f a = tq_ld8(x + j), b = tq_ld8(x + j + h), c = tq_ld8(x + j + 2 * h), d = tq_ld8(x + j + 3 * h);
            tq_v8f a1 = a + b, b1 = a - b, c1 = c + d, d1 = c - d;
            tq_v8f a2 = a1 + c1, c2 = a1 - c1, b2 = b1 + d1, d2 = b1 - d1;
            if (last) {
                a2 *= sv, b2 *= sv, c2 *= sv, d2 *= sv;
            }
            tq_st8(x + j, a2);
            tq_st8(x + j + h, b2);
            tq_st8(x + j + 2 * h, c2);
            tq_st8(x + j + 3 * h, d2);
        }
}

TQ_INLINE void stage_v(float *x, size_t N, size_t h, int last, float s)
{
    tq_v8f sv = {s, s, s, s, s, s, s, s};
    for (size_t base = 0; base < N; base += 2 * h)
        for (size_t j = base; j < base + h; j += 8) {
            tq_v8f a = tq_ld8(x + j), b = tq_ld8(x + j + h);
            tq_v8f u = a + b, d = a - b;
            if (last) {
                u *= sv, d *= sv;
            }
            tq_st8(x + j, u);
            tq_st8(x + j + h, d);
        }
}

/* Butterflies over one chunk of N; the scale goes with the last stage when m = 1. */
TQ_INLINE void chunk(float *x, size_t N, int scale_last, float s)
{
    if (N < 16) {
        for (size_t h = 1; h < N; h <<= 1)
            stage1(x, N, h, scale_last && 2 * h == N, s);
        return;
    }
    wht8_all(x, N);
    size_t h = 8;
    for (; 4 * h <= N; h *= 4)
        stage2(x, N, h, scale_last && 4 * h == N, s);
    if (h < N)
        stage_v(x, N, h, scale_last, s);
}

/* y[i + r·N] = s · Σ_c H[r][c]·x[i + c·N], accumulated from 0 in c order; a - v is computed
 * as a + (-v), which IEEE defines to be the same operation. */
TQ_INLINE void mpoint(float *x, int m, size_t N, float s, const unsigned char *hm)
{
    tq_v8f sv = {s, s, s, s, s, s, s, s}, xs[2 * 28], out[28];
    size_t i = 0;
    for (; i + 8 <= N; i += 8) {
        for (int c = 0; c < m; c++) {
            xs[2 * c] = tq_ld8(x + i + (size_t)c * N);
            xs[2 * c + 1] = -xs[2 * c];
        }
        for (int r = 0; r < m; r += 4) { /* m is a multiple of 4: four independent chains */
            tq_v8f a0 = {0, 0, 0, 0, 0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
            const unsigned char *h0 = hm + r * m, *h1 = h0 + m, *h2 = h1 + m, *h3 = h2 + m;
            for (int c = 0; c < m; c++) {
                a0 += xs[2 * c + h0[c]];
                a1 += xs[2 * c + h1[c]];
                a2 += xs[2 * c + h2[c]];
                a3 += xs[2 * c + h3[c]];
            }
            out[r] = a0 * sv, out[r + 1] = a1 * sv, out[r + 2] = a2 * sv, out[r + 3] = a3 * sv;
        }
        for (int r = 0; r < m; r++)
            tq_st8(x + i + (size_t)r * N, out[r]);
    }
    for (; i < N; i++) {
        float o[28];
        for (int r = 0; r < m; r++) {
            float a = 0.0f;
            for (int c = 0; c < m; c++) {
                float v = x[i + (size_t)c * N];
                a += hm[r * m + c] ? -v : v;
            }
            o[r] = a * s;
        }
        for (int r = 0; r < m; r++)
            x[i + (size_t)r * N] = o[r];
    }
}

TQ_CLONES
static void transform(float *x, size_t n, int m, size_t N, float s, int inverse)
{
    unsigned char hm[28 * 28]; /* 1 where H (or Hᵀ) is -1 */
    const char *const *H = hm_rows(m);
    for (int r = 0; r < m && H; r++)
        for (int c = 0; c < m; c++)
            hm[r * m + c] = (inverse ? H[c][r] : H[r][c]) == '-';
    size_t b = (size_t)m * N;
    for (size_t off = 0; off < n; off += b) {
        for (size_t c = 0; c < (size_t)m; c++)
            chunk(x + off + c * N, N, m == 1, s);
        if (m > 1)
            mpoint(x + off, m, N, s, hm);
    }
}

int tq_hadamard(float *x, size_t n, size_t b, int inverse)
{
    int m;
    uint64_t N;
    if (b == 0 || n % b || tq_hadamard_split(b, &m, &N))
        return -1;
    transform(x, n, m, (size_t)N, (float)(1.0 / sqrt((double)b)), inverse);
    return 0;
}

static void mul_signs(float *x, const float *signs, size_t n)
{
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        tq_st8(x + j, tq_ld8(x + j) * tq_ld8(signs + j));
    for (; j < n; j++)
        x[j] *= signs[j];
}

int tq_hadamard_rotate(float *x, size_t n, const float *signs, size_t b)
{
    int m;
    uint64_t N;
    if (b == 0 || n % b || tq_hadamard_split(b, &m, &N))
        return -1;
    if (signs)
        mul_signs(x, signs, n);
    return tq_hadamard(x, n, b, 0);
}

int tq_hadamard_unrotate(float *x, size_t n, const float *signs, size_t b)
{
    if (tq_hadamard(x, n, b, 1))
        return -1;
    if (signs)
        mul_signs(x, signs, n);
    return 0;
}
