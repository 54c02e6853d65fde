/* --scale lsq: least-squares group scales, eight groups at a time.
 *
 * The groups of a row are transposed so that each of 8 float lanes carries one group; the
 * whole per-group search (the RMS and a coarse grid of scales from 0.7 to 1.3 times it, then
 * two finer steps either side of the best so far, each candidate stored as is or refitted;
 * then the nearest indices for the best stored scale, as is or refitted, and for those
 * indices the scale Σx²/Σx·c[idx] that keeps the group's size: no shrinkage) runs as
 * lane-wise vector arithmetic. Each lane performs the
 * IEEE f32 operations a scalar loop over its own group would, in the same order, so results
 * depend neither on the vector unit nor on where a group falls in its block of eight.
 *
 * Indices are chosen on magnitudes against scaled positive boundaries (no division):
 * m = #{k : |x| >= a·bp[k]}, index = half + m for x >= 0 and half - 1 - m below, which is
 * the nearest centroid of the (exactly symmetric) codebook. A candidate assignment scale a
 * is judged by its moments Σ|x|·cp[m] and Σcp[m]² (cp the positive centroids): the squared
 * error at a stored scale s is Σx² - 2sΣ|x|cp + s²Σcp². */
#include "quant/quant.h"
#include "quant/quant_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LANES 8
#define STACK_GROUP 128 /* larger groups (not offered by tq-convert) use the heap */

typedef struct lsq_book {
    tq_v8f c0;   /* smallest positive centroid */
    tq_v8f d[8]; /* cp[k+1] - cp[k]: exact in f32, so c0 + Σ d[k] over k < m is cp[m] exactly */
    float bp[8]; /* positive boundaries */
    tq_v8i cp;   /* positive centroids, lanes 0..half-1 (as bits, for the lane lookup) */
    int half;
} lsq_book;

typedef struct lsq_best {
    tq_v8f err;   /* the least squared error so far */
    tq_v8u scale; /* its stored scale, f16 bits */
} lsq_best;

/* Coarse grid of scales tried around the RMS r (r itself is the first candidate), each with
 * its own refit; then, around the best stored scale s so far, s times each pair of lsq_fine
 * in turn. Measured on the benchmark tensors of issue 17 (synthetic, g64), against a dense
 * search (r·0.4 to r·1.8 in 0.01 steps, then three refit rounds): the old set {r, 0.9r,
 * 1.1r} was 3.3% (3-bit) and 9.8% (4-bit) above its relative MSE, this one 0.3% and 1.5%,
 * for 2.5 times the old search's assignment passes (9 candidates and the final step, not 3
 * and the final step). A finer grid (0.6r to 1.4r in 0.1 steps) reached 0.1% and 0.4% for
 * 3.5 times. */
static const float lsq_grid[4] = {0.7f, 0.85f, 1.15f, 1.3f};
static const float lsq_fine[2][2] = {{0.95f, 1.05f}, {0.975f, 1.025f}};

TQ_INLINE tq_v8f vabs(tq_v8f x) { return (tq_v8f)((tq_v8u)x & 0x7FFFFFFFu); }
TQ_INLINE tq_v8i vfinite(tq_v8f x) { return ((tq_v8u)x & 0x7F800000u) != 0x7F800000u; }

/* T[j] lane l = w[l·G + j] for the first cnt groups at w, zero lanes beyond. */
TQ_INLINE void transpose_in(const float *w, size_t G, size_t cnt, tq_v8f *T)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    if (G % 8) {
        for (size_t j = 0; j < G; j++) {
            tq_v8f v = z;
            for (size_t l = 0; l < cnt; l++)
                v[l] = w[l * G + j];
            T[j] = v;
        }
        return;
    }
    for (size_t j = 0; j < G; j += 8) {
        tq_v8f r[8];
        for (size_t l = 0; l < 8; l++)
            r[l] = l < cnt ? tq_ld8(w + l * G + j) : z;
        tq_v8f t0 = TQ_SHUF8(r[0], r[1], 0, 8, 1, 9, 4, 12, 5, 13), t1 = TQ_SHUF8(r[0], r[1], 2, 10, 3, 11, 6, 14, 7, 15);
        tq_v8f t2 = TQ_SHUF8(r[2], r[3], 0, 8, 1, 9, 4, 12, 5, 13), t3 = TQ_SHUF8(r[2], r[3], 2, 10, 3, 11, 6, 14, 7, 15);
        tq_v8f t4 = TQ_SHUF8(r[4], r[5], 0, 8, 1, 9, 4, 12, 5, 13), t5 = TQ_SHUF8(r[4], r[5], 2, 10, 3, 11, 6, 14, 7, 15);
        tq_v8f t6 = TQ_SHUF8(r[6], r[7], 0, 8, 1, 9, 4, 12, 5, 13), t7 = TQ_SHUF8(r[6], r[7], 2, 10, 3, 11, 6, 14, 7, 15);
        tq_v8f u0 = TQ_SHUF8(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13), u1 = TQ_SHUF8(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
        tq_v8f u2 = TQ_SHUF8(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13), u3 = TQ_SHUF8(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
        tq_v8f u4 = TQ_SHUF8(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13), u5 = TQ_SHUF8(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
        tq_v8f u6 = TQ_SHUF8(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13), u7 = TQ_SHUF8(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
        T[j + 0] = TQ_SHUF8(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11);
        T[j + 4] = TQ_SHUF8(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15);
        T[j + 1] = TQ_SHUF8(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11);
        T[j + 5] = TQ_SHUF8(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15);
        T[j + 2] = TQ_SHUF8(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11);
        T[j + 6] = TQ_SHUF8(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15);
        T[j + 3] = TQ_SHUF8(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11);
        T[j + 7] = TQ_SHUF8(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* idx[l·G + j] = I[j] lane l, for the first cnt groups. */
TQ_INLINE void transpose_out(const tq_v8u *I, size_t G, size_t cnt, uint8_t *idx)
{
    if (G % 8) {
        for (size_t l = 0; l < cnt; l++)
            for (size_t j = 0; j < G; j++)
                idx[l * G + j] = (uint8_t)I[j][l];
        return;
    }
    for (size_t j = 0; j < G; j += 8) {
        tq_v8u lo = I[j] | I[j + 1] << 8 | I[j + 2] << 16 | I[j + 3] << 24;
        tq_v8u hi = I[j + 4] | I[j + 5] << 8 | I[j + 6] << 16 | I[j + 7] << 24;
        uint32_t a[8], b[8];
        memcpy(a, &lo, sizeof a);
        memcpy(b, &hi, sizeof b);
        for (size_t l = 0; l < cnt; l++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            a[l] = __builtin_bswap32(a[l]);
            b[l] = __builtin_bswap32(b[l]);
#endif
            memcpy(idx + l * G + j, &a[l], 4);
            memcpy(idx + l * G + j + 4, &b[l], 4);
        }
    }
}

/* cp[m] for the magnitude ax at thresholds t, and m itself. GCC looks the centroid up with
 * a lane shuffle; elsewhere it is c0 + Σ d[k] over the boundaries passed, which is the same
 * value exactly. */
TQ_INLINE tq_v8f centroid(const lsq_book *k, const int nbp, tq_v8f ax, const tq_v8f *t, tq_v8u *mp)
{
    tq_v8u m = {0, 0, 0, 0, 0, 0, 0, 0};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
    for (int b = 0; b < nbp; b++)
        m -= (tq_v8u)(ax >= t[b]);
    *mp = m;
    return (tq_v8f)__builtin_shuffle(k->cp, (tq_v8i)m);
#else
    tq_v8f cm = k->c0;
#pragma GCC unroll 8
    for (int b = 0; b < nbp; b++) {
        tq_v8i ge = ax >= t[b];
        cm += (tq_v8f)((tq_v8u)ge & (tq_v8u)k->d[b]);
        m -= (tq_v8u)ge;
    }
    *mp = m;
    return cm;
#endif
}

/* Adds the moments of one transposed column x at thresholds t to num/den. */
TQ_INLINE void moment_step(const lsq_book *k, const int nbp, tq_v8f x, const tq_v8f *t, tq_v8f *num, tq_v8f *den)
{
    tq_v8u m;
    tq_v8f ax = vabs(x), cm = centroid(k, nbp, ax, t, &m);
    *num += ax * cm;
    *den += cm * cm;
}

/* The moments of ns (1 to 3) assignment scales a[] in one sweep over the block. nbp = number
 * of positive boundaries, a constant in each instantiation so the loops unroll. A single
 * scale sums even and odd columns apart (two add chains in flight), then adds the two. */
TQ_INLINE void moments(const lsq_book *k, const int nbp, const tq_v8f *T, size_t G, const tq_v8f *a, const int ns,
                       tq_v8f *num, tq_v8f *den)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    tq_v8f t[3][8], n1 = z, d1 = z;
#pragma GCC unroll 3
    for (int s = 0; s < ns; s++) {
#pragma GCC unroll 8
        for (int b = 0; b < nbp; b++)
            t[s][b] = a[s] * k->bp[b];
        num[s] = den[s] = z;
    }
    size_t j = 0;
    if (ns == 1)
        for (; j + 1 < G; j += 2) {
            moment_step(k, nbp, T[j], t[0], &num[0], &den[0]);
            moment_step(k, nbp, T[j + 1], t[0], &n1, &d1);
        }
    for (; j < G; j++)
#pragma GCC unroll 3
        for (int s = 0; s < ns; s++)
            moment_step(k, nbp, T[j], t[s], &num[s], &den[s]);
    if (ns == 1) {
        num[0] += n1;
        den[0] += d1;
    }
}

/* Squared error Σx² - 2sΣ|x|cp + s²Σcp², +inf where s is not a usable (finite) scale. */
TQ_INLINE tq_v8f sq_err(tq_v8f ss, tq_v8f num, tq_v8f den, tq_v8f s)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    tq_v8f r = (ss - (s + s) * num) + (s * s) * den;
    r = tq_vself(r > z, r, z);
    return tq_vself(vfinite(s), r, z + INFINITY);
}

/* Offer indices with moments num/den, stored with scale h or with their own least-squares
 * scale, whichever is better. */
TQ_INLINE void offer(lsq_best *b, tq_v8f ss, tq_v8f num, tq_v8f den, tq_v8u h)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    tq_v8f e0 = sq_err(ss, num, den, tq_v_f32(h));
    tq_v8u h1 = tq_v_f16(num / den); /* den >= G·c0² > 0 */
    tq_v8f s1 = tq_v_f32(h1);
    tq_v8f e1 = tq_vself(s1 > z, sq_err(ss, num, den, s1), z + INFINITY);
    tq_v8i take = e1 < e0;
    e0 = tq_vself(take, e1, e0);
    h = tq_vsel(take, h1, h);
    tq_v8i better = e0 < b->err;
    b->err = tq_vself(better, e0, b->err);
    b->scale = tq_vsel(better, h, b->scale);
}

/* Index of column x at thresholds t into *I, and its moments into num/den. */
TQ_INLINE void index_step(const lsq_book *k, const int nbp, tq_v8f x, const tq_v8f *t, tq_v8u *I, tq_v8f *num,
                          tq_v8f *den)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    const tq_v8u up = (tq_v8u){0, 0, 0, 0, 0, 0, 0, 0} + (uint32_t)k->half;
    tq_v8u m;
    tq_v8f ax = vabs(x), cm = centroid(k, nbp, ax, t, &m);
    *I = tq_vsel(x >= z, up + m, up - 1u - m);
    *num += ax * cm;
    *den += cm * cm;
}

/* Indices at assignment scale a into I[], with their moments (even and odd columns summed
 * apart, then added). */
TQ_INLINE void final_indices(const lsq_book *k, const int nbp, const tq_v8f *T, size_t G, tq_v8f a, tq_v8u *I,
                             tq_v8f *num, tq_v8f *den)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    tq_v8f t[8], n0 = z, n1 = z, d0 = z, d1 = z;
#pragma GCC unroll 8
    for (int b = 0; b < nbp; b++)
        t[b] = a * k->bp[b];
    size_t j = 0;
    for (; j + 1 < G; j += 2) {
        index_step(k, nbp, T[j], t, &I[j], &n0, &d0);
        index_step(k, nbp, T[j + 1], t, &I[j + 1], &n1, &d1);
    }
    if (j < G)
        index_step(k, nbp, T[j], t, &I[j], &n0, &d0);
    *num = n0 + n1;
    *den = d0 + d1;
}

/* Σx² per lane: four columns apart, then (s0 + s1) + (s2 + s3). */
TQ_INLINE tq_v8f sum_squares(const tq_v8f *T, size_t G)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    tq_v8f s[4] = {z, z, z, z};
    size_t j = 0;
    for (; j + 3 < G; j += 4)
        for (int i = 0; i < 4; i++)
            s[i] += T[j + i] * T[j + i];
    for (; j < G; j++)
        s[0] += T[j] * T[j];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* The scales base·f[0] and base·f[1], each stored as f16, in one sweep: each offered to b
 * as is and refitted. */
TQ_INLINE void offer_pair(const lsq_book *k, const int nbp, const tq_v8f *T, size_t G, tq_v8f ss, tq_v8f base,
                          const float f[2], lsq_best *b)
{
    tq_v8f a[2], num[2], den[2];
    tq_v8u h[2];
    for (int s = 0; s < 2; s++) {
        h[s] = tq_v_f16(base * f[s]);
        a[s] = tq_v_f32(h[s]);
    }
    moments(k, nbp, T, G, a, 2, num, den);
    for (int s = 0; s < 2; s++)
        offer(b, ss, num[s], den[s], h[s]);
}

TQ_INLINE int lsq_k(const lsq_book *k, const int nbp, size_t G, const float *w, size_t n, uint8_t *idx,
                    uint16_t *scales, tq_v8f *T, tq_v8u *I, double *err2, double *sum2, tq_err *e)
{
    const tq_v8f z = {0, 0, 0, 0, 0, 0, 0, 0};
    double tot_err = 0, tot_ss = 0;
    size_t ng = n / G;
    for (size_t g0 = 0; g0 < ng; g0 += LANES) {
        size_t cnt = ng - g0 < LANES ? ng - g0 : LANES;
        transpose_in(w + g0 * G, G, cnt, T);
        tq_v8f ss = sum_squares(T, G);
        tq_v8f rms = z;
        for (size_t l = 0; l < cnt; l++) {
            if (!isfinite(ss[l]))
                return tq_fail(e, TQ_EDATA, "quantize: non-finite or huge value in group %zu", g0 + l);
            float r = sqrtf(ss[l] / (float)G);
            rms[l] = r >= 1e-7f ? r : 1e-7f;
        }
        for (size_t l = cnt; l < LANES; l++)
            rms[l] = 1e-7f;
        tq_v8u hs = tq_v_f16(rms);
        for (size_t l = 0; l < cnt; l++)
            if ((hs[l] & 0x7C00u) == 0x7C00u)
                return tq_fail(e, TQ_EDATA, "quantize: group %zu has RMS %g, beyond the f16 scale range", g0 + l,
                               (double)rms[l]);
        /* the RMS and the coarse grid (sweeps of three and two candidates) ... */
        tq_v8f a[3], num[3], den[3];
        tq_v8u h[3];
        lsq_best b = {z + INFINITY, hs};
        a[0] = rms;
        h[0] = hs;
        for (int g = 0; g < 2; g++) {
            h[g + 1] = tq_v_f16(rms * lsq_grid[g]);
            a[g + 1] = tq_v_f32(h[g + 1]);
        }
        moments(k, nbp, T, G, a, 3, num, den);
        for (int s = 0; s < 3; s++)
            offer(&b, ss, num[s], den[s], h[s]);
        offer_pair(k, nbp, T, G, ss, rms, lsq_grid + 2, &b);
        /* ... the finer steps either side of the best so far, two candidates per sweep ... */
        for (int f = 0; f < 2; f++)
            offer_pair(k, nbp, T, G, ss, tq_v_f32(b.scale), lsq_fine[f], &b);
        /* ... then the nearest indices for the best stored scale, which are at least as good
         * as the best candidate's own; stored with that scale or their refit. */
        final_indices(k, nbp, T, G, tq_v_f32(b.scale), I, num, den);
        b.err = z + INFINITY;
        offer(&b, ss, num[0], den[0], b.scale);
        /* ... and, for those indices, the stored scale s = Σx² / Σ|x|·cp[m] (no shrinkage:
         * Σx·ŵ = Σx², the error orthogonal to the weights), where it is a finite positive f16;
         * elsewhere (all-zero groups, overflow) the least-squares result just chosen. */
        tq_v8i pos = num[0] > z;
        tq_v8u hu = tq_v_f16(ss / tq_vself(pos, num[0], z + 1.0f));
        tq_v8f su = tq_v_f32(hu);
        tq_v8i ok = pos & vfinite(su) & (su > z);
        b.err = tq_vself(ok, sq_err(ss, num[0], den[0], su), b.err);
        b.scale = tq_vsel(ok, hu, b.scale);
        transpose_out(I, G, cnt, idx + g0 * G);
        for (size_t l = 0; l < cnt; l++) {
            scales[g0 + l] = (uint16_t)b.scale[l];
            tot_err += b.err[l];
            tot_ss += ss[l];
        }
    }
    if (err2)
        *err2 = tot_err;
    if (sum2)
        *sum2 = tot_ss;
    return 0;
}

TQ_CLONES
int tq_quantize_lsq(const tq_codebook *cb, size_t group, const float *w, size_t n, uint8_t *idx, uint16_t *scales,
                    double *err2, double *sum2, tq_err *e)
{
    lsq_book k;
    memset(&k, 0, sizeof k);
    k.half = cb->n / 2;
    int nbp = k.half - 1;
    const float *cp = cb->c + k.half;
    k.c0 = (tq_v8f){0, 0, 0, 0, 0, 0, 0, 0} + cp[0];
    for (int b = 0; b < k.half; b++)
        memcpy((char *)&k.cp + 4 * b, cp + b, 4);
    for (int b = 0; b < nbp; b++) {
        k.d[b] = (tq_v8f){0, 0, 0, 0, 0, 0, 0, 0} + (cp[b + 1] - cp[b]);
        k.bp[b] = cb->bnd[k.half + b];
    }
    tq_v8f Ts[STACK_GROUP], *T = Ts;
    tq_v8u Is[STACK_GROUP], *I = Is;
    if (group > STACK_GROUP) {
        T = aligned_alloc(sizeof *T, group * sizeof *T);
        I = aligned_alloc(sizeof *I, group * sizeof *I);
        if (!T || !I) {
            free(T), free(I);
            return tq_fail(e, TQ_ENOMEM, "quantize: out of memory for group size %zu", group);
        }
    }
    int rc;
    switch (nbp) {
    case 0: rc = lsq_k(&k, 0, group, w, n, idx, scales, T, I, err2, sum2, e); break;
    case 1: rc = lsq_k(&k, 1, group, w, n, idx, scales, T, I, err2, sum2, e); break;
    case 3: rc = lsq_k(&k, 3, group, w, n, idx, scales, T, I, err2, sum2, e); break;
    default: rc = lsq_k(&k, 7, group, w, n, idx, scales, T, I, err2, sum2, e); break;
    }
    if (T != Ts)
        free(T), free(I);
    return rc;
}
