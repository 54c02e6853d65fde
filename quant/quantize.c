/* Per-group scales, nearest-centroid indices, packing, dequantization.
 *
 * Every sum runs in a fixed order (4 float lanes combined lane 0..3, or scalar double), so
 * results never depend on threads or vector width. Candidate scales are compared through
 * Σ(w - c·s)² = Σw² - 2sΣwc + s²Σc², with the sums in double and s the f16-rounded scale
 * the file will store. */
#include "quant/quant.h"
#include "quant/quant_internal.h"

#include <math.h>
#include <string.h>

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f ld4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

#define LSQ_ROUNDS 4

static double sumsq(const float *w, size_t g)
{
    size_t i = 0;
    double s = 0;
    if (g >= 4) {
        v4f a = {0, 0, 0, 0};
        for (; i + 4 <= g; i += 4) {
            v4f v = ld4(w + i);
            a += v * v;
        }
        s = ((double)a[0] + (double)a[1]) + ((double)a[2] + (double)a[3]);
    }
    for (; i < g; i++)
        s += (double)w[i] * w[i];
    return s;
}

/* idx = #{k : w/s >= bnd[k]} */
static void assign_scaled(const tq_codebook *cb, const float *w, size_t g, float s, uint8_t *idx)
{
    int nb = cb->n - 1;
    size_t i = 0;
    for (; i + 4 <= g; i += 4) {
        v4f v = ld4(w + i) / s;
        v4i cnt = {0, 0, 0, 0};
        for (int k = 0; k < nb; k++)
            cnt -= (v4i)(v >= cb->bnd[k]);
        idx[i] = (uint8_t)cnt[0];
        idx[i + 1] = (uint8_t)cnt[1];
        idx[i + 2] = (uint8_t)cnt[2];
        idx[i + 3] = (uint8_t)cnt[3];
    }
    for (; i < g; i++) {
        float v = w[i] / s;
        int c = 0;
        for (int k = 0; k < nb; k++)
            c += v >= cb->bnd[k];
        idx[i] = (uint8_t)c;
    }
}

void tq_assign(const tq_codebook *cb, const float *v, size_t n, uint8_t *idx)
{
    assign_scaled(cb, v, n, 1.0f, idx);
}

/* Σ w·c[idx] and Σ c[idx]² */
static void moments(const tq_codebook *cb, const float *w, const uint8_t *idx, size_t g, double *num, double *den)
{
    float a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= g; i += 4)
        for (int l = 0; l < 4; l++) {
            float c = cb->c[idx[i + l]];
            a[l] += w[i + l] * c;
            b[l] += c * c;
        }
    double sn = ((double)a[0] + (double)a[1]) + ((double)a[2] + (double)a[3]);
    double sd = ((double)b[0] + (double)b[1]) + ((double)b[2] + (double)b[3]);
    for (; i < g; i++) {
        float c = cb->c[idx[i]];
        sn += (double)w[i] * c;
        sd += (double)c * c;
    }
    *num = sn;
    *den = sd;
}

static double sq_err(double ss, double num, double den, double s)
{
    double r = ss - 2 * s * num + s * s * den;
    return r > 0 ? r : 0;
}

/* The best (indices, f16 scale) pair seen so far for one group. */
typedef struct best_pair {
    double err;
    uint16_t scale;
    uint8_t *idx;
} best_pair;

/* Alternate from indices q (moments num/den): least-squares scale for the indices, rounded to
 * f16, then nearest indices for that scale; stop when neither improves on *b. */
static void refine(const tq_codebook *cb, const float *x, size_t g, double ss, uint8_t *q,
                   double num, double den, uint8_t *cand, best_pair *b)
{
    for (int r = 0; r < LSQ_ROUNDS; r++) {
        if (!(den > 0))
            return;
        uint16_t h = tq_q_f16((float)(num / den));
        float sf = tq_q_f32(h);
        if (!(sf > 0) || !isfinite(sf))
            return;
        double e1 = sq_err(ss, num, den, sf); /* same indices, refitted scale */
        assign_scaled(cb, x, g, sf, cand);    /* nearest indices for that scale */
        double n2, d2;
        moments(cb, x, cand, g, &n2, &d2);
        double e2 = sq_err(ss, n2, d2, sf);
        if (e1 < b->err && e1 <= e2) {
            b->err = e1;
            b->scale = h;
            if (q != b->idx)
                memcpy(b->idx, q, g);
        }
        if (e2 < b->err) {
            b->err = e2;
            b->scale = h;
            memcpy(b->idx, cand, g);
        } else if (!(e2 < e1)) {
            return;
        }
        memcpy(q, cand, g);
        num = n2;
        den = d2;
    }
}

/* Starting points for the least-squares search, as multiples of the RMS scale: alternation
 * only finds a local optimum, and a few spread starts find better ones. */
static const float lsq_starts[] = {0.95f, 1.1f};

int tq_quantize_groups(const tq_codebook *cb, int method, size_t group, const float *w, size_t n,
                       uint8_t *idx, uint16_t *scales, double *err2, double *sum2, tq_err *e)
{
    if (group == 0 || n % group)
        return tq_fail(e, TQ_EUSAGE, "quantize: %zu values are not a multiple of group size %zu", n, group);
    if (method == TQ_SCALE_LSQ && group > 1024)
        return tq_fail(e, TQ_EUSAGE, "quantize: least-squares scales support groups up to 1024, not %zu", group);
    double tot_err = 0, tot_ss = 0;
    uint8_t work[1024], cand[1024];
    for (size_t g0 = 0, gi = 0; g0 < n; g0 += group, gi++) {
        const float *x = w + g0;
        uint8_t *q = idx + g0;
        double ss = sumsq(x, group);
        if (!isfinite(ss))
            return tq_fail(e, TQ_EDATA, "quantize: non-finite or huge value in group %zu", gi);
        float rms = sqrtf((float)ss / (float)group);
        if (!(rms >= 1e-7f))
            rms = 1e-7f;
        uint16_t hs = tq_q_f16(rms);
        if ((hs & 0x7C00u) == 0x7C00u)
            return tq_fail(e, TQ_EDATA, "quantize: group %zu has RMS %g, beyond the f16 scale range", gi, (double)rms);
        assign_scaled(cb, x, group, rms, q);
        double num, den;
        moments(cb, x, q, group, &num, &den);
        best_pair b = {sq_err(ss, num, den, tq_q_f32(hs)), hs, q};
        if (method == TQ_SCALE_LSQ) {
            memcpy(work, q, group);
            refine(cb, x, group, ss, work, num, den, cand, &b);
            for (size_t k = 0; k < sizeof lsq_starts / sizeof *lsq_starts; k++) {
                assign_scaled(cb, x, group, rms * lsq_starts[k], work);
                moments(cb, x, work, group, &num, &den);
                refine(cb, x, group, ss, work, num, den, cand, &b);
            }
        }
        scales[gi] = b.scale;
        tot_err += b.err;
        tot_ss += ss;
    }
    if (err2)
        *err2 = tot_err;
    if (sum2)
        *sum2 = tot_ss;
    return 0;
}

void tq_pack(const uint8_t *idx, size_t n, int bits, uint32_t *out)
{
    size_t epw = tq_epw(bits), words = tq_packed_words(n, bits);
    for (size_t wi = 0; wi < words; wi++) {
        uint32_t v = 0;
        size_t base = wi * epw;
        for (size_t j = 0; j < epw && base + j < n; j++)
            v |= (uint32_t)idx[base + j] << (j * (size_t)bits);
        out[wi] = v;
    }
}

void tq_unpack(const uint32_t *in, size_t n, int bits, uint8_t *idx)
{
    size_t epw = tq_epw(bits);
    uint32_t mask = (1u << bits) - 1;
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint8_t)((in[i / epw] >> ((i % epw) * (size_t)bits)) & mask);
}

void tq_dequantize_row(const uint32_t *packed, const uint16_t *scales, const float *codebook,
                       int bits, size_t group, size_t n, float *out)
{
    size_t epw = tq_epw(bits);
    uint32_t mask = (1u << bits) - 1;
    for (size_t i = 0; i < n; i++) {
        uint32_t q = (packed[i / epw] >> ((i % epw) * (size_t)bits)) & mask;
        out[i] = codebook[q] * tq_q_f32(scales[i / group]);
    }
}

int tq_quantize_row(const tq_qspec *q, const float *w, size_t n, void *scratch, uint32_t *packed,
                    uint16_t *scales, double *err2, double *sum2, tq_err *e)
{
    float *x = scratch;
    uint8_t *idx = (uint8_t *)(x + n);
    memcpy(x, w, n * sizeof *x);
    if (tq_rotate(x, n, q->signs, q->block))
        return tq_fail(e, TQ_EUSAGE, "quantize: Hadamard block %zu is not valid for a row of %zu", q->block, n);
    if (tq_quantize_groups(q->cb, q->method, q->group, x, n, idx, scales, err2, sum2, e))
        return -1;
    tq_pack(idx, n, q->cb->bits, packed);
    return 0;
}
