/* Block Walsh-Hadamard transform, bit-exact with MLX's CPU hadamard_transform (REFERENCE §3.1).
 *
 * The operation order is part of the contract: butterflies (a+b, a-b) stage by stage with
 * h = 1, 2, 4, ... inside each N chunk, then for every fast index i the m-point product
 * accumulated from 0.0f in c order, then one multiplication by s. Vector code below uses
 * GCC/Clang vector extensions; lane-wise IEEE operations give the same bits as the scalar
 * loop, so the result does not depend on the vector width. */
#include "quant/quant.h"

#include <math.h>
#include <string.h>

typedef float v4f __attribute__((vector_size(16)));

static inline v4f ld4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void st4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

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

/* One butterfly stage over a chunk of N; multiplies by s in the same pass when last. */
static void stage(float *x, size_t N, size_t h, int last, float s)
{
    if (h >= 4) {
        for (size_t base = 0; base < N; base += 2 * h)
            for (size_t j = 0; j < h; j += 4) {
                v4f a = ld4(x + base + j), b = ld4(x + base + j + h);
                v4f u = a + b, d = a - b;
                if (last) {
                    u = u * s;
                    d = d * s;
                }
                st4(x + base + j, u);
                st4(x + base + j + h, d);
            }
        return;
    }
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

/* y[i + r·N] = s · Σ_c H[r][c]·x[i + c·N] (H transposed when inverse), accumulated in c order. */
static void mpoint(float *x, int m, size_t N, float s, int inverse)
{
    const char *const *H = hm_rows(m);
    float acc[28 * 4];
    size_t i = 0;
    for (; i + 4 <= N; i += 4) {
        for (int r = 0; r < m; r++) {
            v4f a = {0, 0, 0, 0};
            for (int c = 0; c < m; c++) {
                char sg = inverse ? H[c][r] : H[r][c];
                v4f v = ld4(x + i + (size_t)c * N);
                a = sg == '+' ? a + v : a - v;
            }
            st4(acc + 4 * r, a * s);
        }
        for (int r = 0; r < m; r++)
            st4(x + i + (size_t)r * N, ld4(acc + 4 * r));
    }
    for (; i < N; i++) {
        for (int r = 0; r < m; r++) {
            float a = 0.0f;
            for (int c = 0; c < m; c++) {
                char sg = inverse ? H[c][r] : H[r][c];
                float v = x[i + (size_t)c * N];
                a = sg == '+' ? a + v : a - v;
            }
            acc[r] = a * s;
        }
        for (int r = 0; r < m; r++)
            x[i + (size_t)r * N] = acc[r];
    }
}

static void block(float *x, int m, size_t N, float s, int inverse)
{
    for (size_t c = 0; c < (size_t)m; c++)
        for (size_t h = 1; h < N; h <<= 1)
            stage(x + c * N, N, h, m == 1 && 2 * h == N, s);
    if (m > 1)
        mpoint(x, m, N, s, inverse);
}

int tq_hadamard(float *x, size_t n, size_t b, int inverse)
{
    int m;
    uint64_t N;
    if (b == 0 || n % b || tq_hadamard_split(b, &m, &N))
        return -1;
    float s = (float)(1.0 / sqrt((double)b));
    for (size_t off = 0; off < n; off += b)
        block(x + off, m, (size_t)N, s, inverse);
    return 0;
}

int tq_rotate(float *x, size_t n, const float *signs, size_t b)
{
    int m;
    uint64_t N;
    if (b == 0 || n % b || tq_hadamard_split(b, &m, &N))
        return -1;
    if (signs)
        for (size_t j = 0; j < n; j++)
            x[j] *= signs[j];
    return tq_hadamard(x, n, b, 0);
}

int tq_unrotate(float *x, size_t n, const float *signs, size_t b)
{
    if (tq_hadamard(x, n, b, 1))
        return -1;
    if (signs)
        for (size_t j = 0; j < n; j++)
            x[j] *= signs[j];
    return 0;
}
