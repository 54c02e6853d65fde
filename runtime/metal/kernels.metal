/* runtime/metal/kernels.metal — the decoder's kernels in Metal Shading Language, in the
 * restricted form of shim_internal.h so that the same text also compiles as C (shim.c) and
 * runs in make check on machines without a GPU. docs/metal.md lists every kernel, its
 * threadgroup layout and reduction order, and where its result may differ from the CPU
 * runtime's (runtime/kernels.c, ops.c, attention.c, forward.c) and by how much.
 *
 * Every kernel runs threadgroups of RTM_TG threads (abi_internal.h). Orders that make results
 * bit-identical with the CPU runtime: the Hadamard transform does quant/hadamard.c's operations per element;
 * attention scores and outputs are sequential sums in the CPU's order. Sums over a whole
 * threadgroup (RMSNorm, softmax denominators) are per-thread strided sums, a 32-lane
 * butterfly, then the simd groups in order, and every matvec (dense, MXFP4, TurboQuant, MLX
 * affine) takes the simd-group shape of rtm_mv_dense, rtm_mv_mxfp4 and rtm_mv_q: different
 * orders from the CPU's (runtime/kernels.c: 8 lanes per row). */
#include "runtime/metal/shim_internal.h" /* first: <metal_stdlib> defines uint and friends */
#include "runtime/metal/abi_internal.h"

#ifdef __METAL_VERSION__
#define RTM_THREAD thread
#else
#define RTM_THREAD
#endif

#define RTM_NSG (RTM_TG / RTM_SIMD) /* simd groups per threadgroup */

/* ------------------------------------------------------------ scalar helpers */

/* Element i of a weight part stored as f32, f16 or bf16 (all conversions exact). */
RTM_FN float rtm_ld(uint dt, RTM_DEV const uchar *p, ulong i)
{
    if (dt == RTM_F32)
        return ((RTM_DEV const float *)p)[i];
    ushort h = ((RTM_DEV const ushort *)p)[i];
    if (dt == RTM_F16)
        return RTM_H2F(h);
    return RTM_AS_FLOAT((uint)h << 16);
}

#define RTM_INF RTM_AS_FLOAT(0x7f800000u)
#define RTM_NINF RTM_AS_FLOAT(0xff800000u)

/* e^x in f32 from + - * and a bit cast only, so the GPU and the shim compute the same bits:
 * k = nearest integer to x/ln2 (the 1.5·2^23 trick: round to nearest even), r = x - k·ln2 in
 * two steps (ln2_hi has 15 significant bits, so k·ln2_hi and x - k·ln2_hi are exact),
 * e^r by its Taylor polynomial to r^7 (|r| ≤ 0.347, truncation < 0.13 of 2^-24 relative),
 * times 2^k built in the exponent field. Below -87 the result is 0 (the true value is under
 * 1.7e-38: subnormal results are avoided, since the GPU may flush them); above 88.7228 it
 * is +inf. Error: tests/unit/test_metal_kernels.c measures it against a double exp over one
 * float in every 61 of the whole range (docs/metal.md, exp). */
RTM_FN float rtm_exp(float x)
{
    if (!(x == x))
        return x;
    if (x > 88.72283f)
        return RTM_INF;
    if (x < -87.0f)
        return 0.0f;
    float t = x * 1.44269504088896341f;
    float k = (t + 12582912.0f) - 12582912.0f;
    float hi = k * 0.693145751953125f;
    float r = x - hi;
    float lo = k * 1.42860682030941723e-06f;
    r = r - lo;
    float p = 1.98412698412698413e-04f;
    p = p * r;
    p = p + 1.38888888888888889e-03f;
    p = p * r;
    p = p + 8.33333333333333333e-03f;
    p = p * r;
    p = p + 4.16666666666666667e-02f;
    p = p * r;
    p = p + 1.66666666666666667e-01f;
    p = p * r;
    p = p + 0.5f;
    p = p * r;
    p = p + 1.0f;
    p = p * r;
    p = p + 1.0f;
    int ki = (int)k;
    if (ki > 127) { /* x in (88.38, 88.7228]: 2^128 is not a float */
        p = p * 2.0f;
        ki = ki - 1;
    }
    float s = RTM_AS_FLOAT((uint)(ki + 127) << 23);
    return p * s;
}

RTM_FN float rtm_sigmoid(float x)
{
    float e = rtm_exp(-x);
    float d = 1.0f + e;
    return 1.0f / d;
}

RTM_FN float rtm_silu(float x)
{
    float e = rtm_exp(-x);
    float d = 1.0f + e;
    return x / d;
}

/* ln x for a positive normal x in f32 from + - * / and bit casts only (as rtm_exp): x = m·2^e
 * with m in [√½, √2), f = m - 1 (exact), s = f / (2 + f), ln m = 2·atanh s = 2s + s·z·(2/3 +
 * z·(2/5 + z·(2/7 + z·(2/9 + z·2/11)))) with z = s² ≤ 0.0295 (the next term is below 2^-30 of
 * the sum), plus e·ln2 in two parts (ln2_hi has 15 significant bits: e·ln2_hi is exact). Its
 * error is a few roundings (s and the sum), not bounded here formally: test_metal_kernels'
 * deltanet compares the decay it feeds against the CPU's double log. 0 gives -inf, anything
 * else outside the domain NaN. */
RTM_FN float rtm_log(float x)
{
    if (x == 0.0f)
        return RTM_NINF;
    if (!(x > 0.0f) || x < 1.17549435e-38f)
        return RTM_AS_FLOAT(0x7fc00000u);
    if (x == RTM_INF)
        return x;
    uint u = RTM_AS_UINT(x);
    int e = (int)(u >> 23) - 127;
    float m = RTM_AS_FLOAT((u & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356f) {
        m = m * 0.5f;
        e = e + 1;
    }
    float f = m - 1.0f;
    float d = 2.0f + f;
    float s = f / d;
    float z = s * s;
    float p = 0.181818181818181818f;
    p = p * z;
    p = p + 0.222222222222222222f;
    p = p * z;
    p = p + 0.285714285714285714f;
    p = p * z;
    p = p + 0.4f;
    p = p * z;
    p = p + 0.666666666666666667f;
    p = p * z;
    p = p * s;
    float s2 = s + s;
    float lm = s2 + p;
    float ef = (float)e;
    float lo = ef * 1.42860682030941723e-06f;
    lo = lo + lm;
    float hi = ef * 0.693145751953125f;
    return hi + lo;
}

/* ln(1 + t) for t ≥ 0 without the cancellation of 1 + t (Kahan's trick): u = f32(1 + t), then
 * ln(u) · t / (u - 1), or t where u rounds to 1. */
RTM_FN float rtm_log1p(float t)
{
    float u = 1.0f + t;
    if (u == 1.0f)
        return t;
    float d = u - 1.0f;
    float q = t / d;
    return rtm_log(u) * q;
}

/* The k largest of v[0..n), ties to the lower index, in rank order (forward.c's rule); one
 * thread, for short lists (a group's top two, the best groups). */
RTM_FN void rtm_topk_seq(RTM_DEV const float *v, uint n, uint k, RTM_THREAD uint *ids)
{
    for (uint j = 0; j < k; j++) {
        uint best = n;
        for (uint i = 0; i < n; i++) {
            uint taken = 0;
            for (uint t = 0; t < j; t++)
                taken |= ids[t] == i ? 1u : 0u;
            if (taken == 0u && (best == n || v[i] > v[best]))
                best = i;
        }
        ids[j] = best;
    }
}

/* Row r of H_12, H_20, H_28 (quant/hadamard.c, MLX's orientation) as a mask: bit c set where
 * H[r][c] = -1. */
RTM_TABLE uint rtm_h12[12] = {0x0000002u, 0x0000aabu, 0x00003c8u, 0x000096eu, 0x0000f20u, 0x00005bau,
                              0x0000c8cu, 0x00006e6u, 0x000023cu, 0x0000b96u, 0x00008f0u, 0x0000e5au};
RTM_TABLE uint rtm_h20[20] = {0x00933deu, 0x002e3bdu, 0x005477bu, 0x00a0ef7u, 0x00499efu, 0x00637c1u, 0x00c6ba2u,
                              0x008d764u, 0x001aee8u, 0x00359f0u, 0x000fa53u, 0x00174a7u, 0x0026d4eu, 0x0045e9cu,
                              0x0083d39u, 0x00f7a6du, 0x00ef4fau, 0x00dedd5u, 0x00bdf8bu, 0x007bf36u};
RTM_TABLE uint rtm_h28[28] = {0xcd69e7eu, 0x9ad7c7du, 0x37ab8fbu, 0x6d571f7u, 0xd8ae3efu, 0xb3587dfu, 0x66b4f3fu,
                              0xb467f43u, 0x6acbe87u, 0xd593d8eu, 0xab27b9cu, 0x564f7b8u, 0xac9aff0u, 0x5b31fe1u,
                              0x87fb325u, 0x0ff66cau, 0x1decd95u, 0x39ddb2au, 0x71bf654u, 0xe17eca9u, 0xc2fd9d2u,
                              0xfcf1299u, 0xfbe2532u, 0xf7c4ae4u, 0xef8d549u, 0xdf1ea13u, 0xbe3d4a6u, 0x7e7a94cu};

RTM_FN uint rtm_hm_row(uint m, uint r)
{
    return m == 12u ? rtm_h12[r] : m == 20u ? rtm_h20[r] : rtm_h28[r];
}

/* ------------------------------------------------------------ matrix-vector products */

/* Dense rows (f32 / f16 / bf16) in the simd-group shape (docs/metal.md, mv_dense): simd group
 * sg takes the RTM_MV_RPS rows r0 = tgid·RTM_MV_ROWS + sg·RTM_MV_RPS, ...; a row is cut into
 * chunks of 4 elements, lane l takes the chunks c ≡ l (mod 32) in increasing c (one 16- or
 * 8-byte load where the host says the rows allow it: RTM_MV_WIDE), reads the chunk's x once
 * for its rows, and adds w[j]·x[j] to its accumulator (from +0) in increasing j; then the xor
 * butterfly over the 32 lanes, + bias. part [RTM_MV_RPS·RTM_TG] is threadgroup scratch. */
RTM_FN float rtm_dense_w(RTM_DEV const uchar *wr, uint wdt, uint j)
{
    if (wdt == RTM_F32)
        return ((RTM_DEV const float *)wr)[j];
    uint h = ((RTM_DEV const ushort *)wr)[j];
    return wdt == RTM_F16 ? RTM_H2F(h) : RTM_AS_FLOAT(h << 16);
}

RTM_FN void rtm_mv_dense(RTM_DEV const uchar *w, RTM_DEV const float *x, RTM_DEV float *y, RTM_DEV const uchar *bias,
                         RTM_CONST rtm_mv_args *a, uint tgid, RTM_TGMEM float *part RTM_TGFN_PARAMS)
{
    RTM_PHASE(lid) {
        const uint lane = lid % RTM_SIMD, r0 = tgid * RTM_MV_ROWS + (lid / RTM_SIMD) * RTM_MV_RPS;
        const uint esz = a->wdt == RTM_F32 ? 4u : 2u, nch = (a->cols + 3u) / 4u;
        float acc[RTM_MV_RPS];
        for (uint rr = 0; rr < RTM_MV_RPS; rr++)
            acc[rr] = 0.0f;
        for (uint c = lane; c < nch; c += RTM_SIMD) {
            const uint j0 = c * 4u, n = a->cols - j0 < 4u ? a->cols - j0 : 4u;
            float xs[4];
            for (uint k = 0; k < 4u; k++)
                xs[k] = k < n ? x[j0 + k] : 0.0f;
            for (uint rr = 0; rr < RTM_MV_RPS; rr++) {
                const uint r = r0 + rr;
                if (r >= a->rows)
                    break;
                RTM_DEV const uchar *wr = w + (ulong)r * a->cols * esz;
                float wv[4];
                if ((a->flags & RTM_MV_WIDE) != 0u && a->wdt == RTM_F32) {
                    RTM_LD_F4(wr, c, wv);
                } else if ((a->flags & RTM_MV_WIDE) != 0u) {
                    uint h[4];
                    RTM_LD_H4(wr, c, h);
                    for (uint k = 0; k < 4u; k++)
                        wv[k] = a->wdt == RTM_F16 ? RTM_H2F(h[k]) : RTM_AS_FLOAT(h[k] << 16);
                } else {
                    for (uint k = 0; k < 4u; k++)
                        wv[k] = k < n ? rtm_dense_w(wr, a->wdt, j0 + k) : 0.0f;
                }
                for (uint k = 0; k < n; k++) {
                    float p = wv[k] * xs[k];
                    acc[rr] = acc[rr] + p;
                }
            }
        }
        for (uint rr = 0; rr < RTM_MV_RPS; rr++)
            part[rr * RTM_TG + lid] = acc[rr];
    }
    for (uint rr = 0; rr < RTM_MV_RPS; rr++)
        RTM_SIMD_SUM(part + rr * RTM_TG, RTM_SIMD);
    RTM_PHASE(lid) {
        const uint lane = lid % RTM_SIMD, sg = lid / RTM_SIMD, r = tgid * RTM_MV_ROWS + sg * RTM_MV_RPS + lane;
        if (lane >= RTM_MV_RPS || r >= a->rows)
            continue;
        float v = part[lane * RTM_TG + lid]; /* row rr's sum, which every lane holds: its own copy */
        if (a->has_bias != 0u) {
            float b = rtm_ld(a->biasdt, bias, (ulong)r * a->rstep);
            v = v + b;
        }
        y[r] = v;
    }
}

RTM_KERNEL rtm_k_mv_dense(RTM_DEV const uchar *w RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1),
                          RTM_DEV float *y RTM_BUF(2), RTM_DEV const uchar *bias RTM_BUF(3),
                          RTM_CONST rtm_mv_args *a RTM_BUF(4), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    rtm_mv_dense(w, x, y, bias, a, rtm_tgid, part RTM_TGFN_ARGS);
}

/* FP4 E2M1 values as formats/mxfp4.c (ggml) decodes them: sign bit 3, then 0, .5, 1, 1.5, 2,
 * 3, 4, 6; code 8 is +0 as in ggml. */
RTM_TABLE float rtm_e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                0.0f,  -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* MXFP4 rows (gpt-oss experts) in the simd-group shape (docs/metal.md, mv_mxfp4), row r stored at
 * r·rstep: element j is E2M1(nibble j%2 of byte j/2) · 2^(s - 127), s the E8M0 scale of its
 * block of 32. Simd group sg takes the RTM_MV_RPS rows r0 = tgid·RTM_MV_ROWS + sg·RTM_MV_RPS, ...;
 * lane l takes the blocks c ≡ l (mod 32) in increasing c (16 bytes: two 64-bit loads where the
 * host says the rows are 8-byte aligned), reads the block's 32 values of x once for its rows,
 * sums E2M1[q]·x[j] in increasing j from +0 into d and adds d·2^(s-127) (exact but for
 * subnormal or overflowing results; 2^-127 is a subnormal, the host refuses scales that make
 * NaN or infinity) to its accumulator from +0; then the 32-lane xor butterfly, + bias. part
 * [RTM_MV_RPS·RTM_TG] is threadgroup scratch. */
RTM_FN void rtm_mv_mxfp4(RTM_DEV const uchar *w, RTM_DEV const float *x, RTM_DEV float *y, RTM_DEV const uchar *scales,
                         RTM_DEV const uchar *bias, RTM_CONST rtm_mv_args *a, uint tgid,
                         RTM_TGMEM float *part RTM_TGFN_PARAMS)
{
    RTM_PHASE(lid) {
        const uint lane = lid % RTM_SIMD, r0 = tgid * RTM_MV_ROWS + (lid / RTM_SIMD) * RTM_MV_RPS;
        const uint nb = a->cols / 32u;
        float acc[RTM_MV_RPS];
        for (uint rr = 0; rr < RTM_MV_RPS; rr++)
            acc[rr] = 0.0f;
        for (uint c = lane; c < nb; c += RTM_SIMD) {
            float xs[32];
            for (uint k = 0; k < 32u; k++)
                xs[k] = x[c * 32u + k];
            for (uint rr = 0; rr < RTM_MV_RPS; rr++) {
                const uint r = r0 + rr;
                if (r >= a->rows)
                    break;
                const ulong blk = (ulong)r * a->rstep * nb + c;
                RTM_DEV const uchar *bp = w + blk * 16u;
                uint wd[4];
                if ((a->flags & RTM_MV_WIDE) != 0u) {
                    RTM_LD_W2((RTM_DEV const uint *)bp, 0u, wd[0], wd[1]);
                    RTM_LD_W2((RTM_DEV const uint *)bp, 1u, wd[2], wd[3]);
                } else {
                    for (uint k = 0; k < 4u; k++)
                        wd[k] = (uint)bp[4u * k] | ((uint)bp[4u * k + 1u] << 8) | ((uint)bp[4u * k + 2u] << 16) |
                                ((uint)bp[4u * k + 3u] << 24);
                }
                float d = 0.0f;
                for (uint k = 0; k < 4u; k++)
                    for (uint e = 0; e < 8u; e++) {
                        float p = rtm_e2m1[(wd[k] >> (4u * e)) & 15u] * xs[8u * k + e];
                        d = d + p;
                    }
                uint sv = scales[blk];
                float sc = sv != 0u ? RTM_AS_FLOAT(sv << 23) : RTM_AS_FLOAT(0x00400000u);
                float t = d * sc;
                acc[rr] = acc[rr] + t;
            }
        }
        for (uint rr = 0; rr < RTM_MV_RPS; rr++)
            part[rr * RTM_TG + lid] = acc[rr];
    }
    for (uint rr = 0; rr < RTM_MV_RPS; rr++)
        RTM_SIMD_SUM(part + rr * RTM_TG, RTM_SIMD);
    RTM_PHASE(lid) {
        const uint lane = lid % RTM_SIMD, sg = lid / RTM_SIMD, r = tgid * RTM_MV_ROWS + sg * RTM_MV_RPS + lane;
        if (lane >= RTM_MV_RPS || r >= a->rows)
            continue;
        float v = part[lane * RTM_TG + lid]; /* row rr's sum, which every lane holds: its own copy */
        if (a->has_bias != 0u) {
            float b = rtm_ld(a->biasdt, bias, (ulong)r * a->rstep);
            v = v + b;
        }
        y[r] = v;
    }
}

RTM_KERNEL rtm_k_mv_mxfp4(RTM_DEV const uchar *w RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1),
                          RTM_DEV float *y RTM_BUF(2), RTM_DEV const uchar *scales RTM_BUF(3),
                          RTM_DEV const uchar *bias RTM_BUF(4), RTM_CONST rtm_mv_args *a RTM_BUF(5), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    rtm_mv_mxfp4(w, x, y, scales, bias, a, rtm_tgid, part RTM_TGFN_ARGS);
}

/* Quantized rows in the simd-group shape (docs/metal.md, mv_tq and mv_affine): TurboQuant
 * (value = codebook[q], x already rotated) or MLX affine (value = scale·q + bias, per group).
 * Simd group sg of the threadgroup takes the RTM_MV_RPS rows r0 = tgid·RTM_MV_ROWS +
 * sg·RTM_MV_RPS, ...; a row is cut into chunks of RTM_MV_CW words (V = RTM_MV_CW·32/bits
 * codes), lane l takes the chunks c ≡ l (mod 32) in increasing c, reads each chunk's V values
 * of x once for its RTM_MV_RPS rows, and for each row sums lut[q]·x[j] (lut: the codebook, or
 * q itself for affine) in increasing j from +0 over each run of the chunk inside one group (a
 * segment) into d, then adds to its accumulator (from +0), in order, d·scale (TurboQuant) or
 * scale·d + bias·sx (affine; sx = the segment's Σ x[j] in increasing j from +0); the 32 lanes'
 * accumulators are then summed by the xor butterfly (+ the output bias). No division inside
 * the loops: the host precomputes the group arithmetic (rtm_mv_args). */
#define RTM_MV_VMAX 32u /* codes per chunk on the in-group path (bits 2, 4 and 8) */

/* A segment's term: d·scale, or scale·d + bias·sx for affine rows. */
RTM_FN float rtm_q_term(float d, float sx, RTM_DEV const uchar *scales, RTM_DEV const uchar *zb,
                        RTM_CONST rtm_mv_args *a, ulong gi, uint affine)
{
    float sc = rtm_ld(a->sdt, scales, gi);
    if (affine == 0u)
        return d * sc;
    float t1 = sc * d;
    float t2 = rtm_ld(a->zdt, zb, gi) * sx;
    return t1 + t2;
}

/* One lane's chunks when every chunk lies inside one group (RTM_MV_INGROUP; B = 2, 4 or 8, a
 * constant after inlining, so every shift and index below is too). */
RTM_FN void rtm_q_lane_ingroup(const uint B, RTM_DEV const uint *w, RTM_DEV const float *x,
                               RTM_DEV const uchar *scales, RTM_DEV const uchar *zb, RTM_TGMEM const float *lut,
                               RTM_CONST rtm_mv_args *a, uint affine, uint r0, uint lane, RTM_THREAD float *acc)
{
    const uint EPW = 32u / B, V = RTM_MV_CW * EPW, M = (1u << B) - 1u, nch = a->wpr / RTM_MV_CW;
    for (uint c = lane; c < nch; c += RTM_SIMD) {
        float xs[RTM_MV_VMAX];
        float sx = 0.0f;
        for (uint k = 0; k < V; k++) {
            xs[k] = x[c * V + k];
            sx = sx + xs[k];
        }
        const uint g = c >> a->gshift;
        for (uint rr = 0; rr < RTM_MV_RPS; rr++) {
            const uint r = r0 + rr;
            if (r >= a->rows)
                break;
            RTM_DEV const uint *wr = w + (ulong)r * a->wpr;
            uint w0, w1;
            if ((a->flags & RTM_MV_WIDE) != 0u) {
                RTM_LD_W2(wr, c, w0, w1);
            } else {
                w0 = wr[c * RTM_MV_CW];
                w1 = wr[c * RTM_MV_CW + 1u];
            }
            float d = 0.0f;
            for (uint k = 0; k < EPW; k++) {
                float p = lut[(w0 >> (B * k)) & M] * xs[k];
                d = d + p;
            }
            for (uint k = 0; k < EPW; k++) {
                float p = lut[(w1 >> (B * k)) & M] * xs[EPW + k];
                d = d + p;
            }
            float t = rtm_q_term(d, sx, scales, zb, a, (ulong)r * a->ngroups + g, affine);
            acc[rr] = acc[rr] + t;
        }
    }
}

/* One lane's chunks in general: any bits, groups that chunks cross (a 3-bit word holds 10
 * codes, so its rows never align with groups of 32 or 64). (g, rem): the group of the lane's
 * chunk's first code and that code's place in it, advanced by the host's (gstep_q, gstep_r). */
RTM_FN void rtm_q_lane_any(RTM_DEV const uint *w, RTM_DEV const float *x, RTM_DEV const uchar *scales,
                           RTM_DEV const uchar *zb, RTM_TGMEM const float *lut, RTM_CONST rtm_mv_args *a, uint affine,
                           uint r0, uint lane, RTM_THREAD float *acc)
{
    const uint bits = a->bits, epw = 32u / bits, M = (1u << bits) - 1u, V = RTM_MV_CW * epw;
    const uint nch = (a->wpr + RTM_MV_CW - 1u) / RTM_MV_CW;
    uint g = (lane * V) / a->group, rem = lane * V - g * a->group; /* once per thread */
    for (uint c = lane; c < nch; c += RTM_SIMD) {
        for (uint rr = 0; rr < RTM_MV_RPS; rr++) {
            const uint r = r0 + rr;
            if (r >= a->rows)
                break;
            RTM_DEV const uint *wr = w + (ulong)r * a->wpr;
            uint gg = g, left = a->group - rem, j = c * V, open = 0u;
            float d = 0.0f, sx = 0.0f;
            for (uint wk = 0; wk < RTM_MV_CW; wk++) {
                const uint wi = c * RTM_MV_CW + wk;
                const uint word = wi < a->wpr ? wr[wi] : 0u;
                for (uint e = 0; e < epw && j < a->cols; e++, j++) {
                    float xv = x[j];
                    float p = lut[(word >> (e * bits)) & M] * xv;
                    d = d + p;
                    sx = sx + xv;
                    open = 1u;
                    left = left - 1u;
                    if (left == 0u) {
                        float t = rtm_q_term(d, sx, scales, zb, a, (ulong)r * a->ngroups + gg, affine);
                        acc[rr] = acc[rr] + t;
                        d = 0.0f;
                        sx = 0.0f;
                        open = 0u;
                        gg = gg + 1u;
                        left = a->group;
                    }
                }
            }
            if (open != 0u) {
                float t = rtm_q_term(d, sx, scales, zb, a, (ulong)r * a->ngroups + gg, affine);
                acc[rr] = acc[rr] + t;
            }
        }
        g = g + a->gstep_q;
        rem = rem + a->gstep_r;
        if (rem >= a->group) {
            rem = rem - a->group;
            g = g + 1u;
        }
    }
}

/* The simd-group product above for the threadgroup tgid (affine: zb holds the biases, the
 * codebook is unused): lut [256] and part [RTM_MV_RPS·RTM_TG] are threadgroup scratch. */
RTM_FN void rtm_mv_q(RTM_DEV const uint *w, RTM_DEV const float *x, RTM_DEV float *y, RTM_DEV const uchar *scales,
                     RTM_DEV const uchar *codebook, RTM_DEV const uchar *zb, RTM_DEV const uchar *bias,
                     RTM_CONST rtm_mv_args *a, uint affine, uint tgid, RTM_TGMEM float *lut,
                     RTM_TGMEM float *part RTM_TGFN_PARAMS)
{
    RTM_PHASE(lid) {
        for (uint q = lid; q < (1u << a->bits); q += RTM_TG)
            lut[q] = affine != 0u ? (float)q : rtm_ld(a->cdt, codebook, q);
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        const uint lane = lid % RTM_SIMD, r0 = tgid * RTM_MV_ROWS + (lid / RTM_SIMD) * RTM_MV_RPS;
        float acc[RTM_MV_RPS];
        for (uint rr = 0; rr < RTM_MV_RPS; rr++)
            acc[rr] = 0.0f;
        const uint ing = a->flags & RTM_MV_INGROUP;
        if (ing != 0u && a->bits == 4u)
            rtm_q_lane_ingroup(4u, w, x, scales, zb, lut, a, affine, r0, lane, acc);
        else if (ing != 0u && a->bits == 2u)
            rtm_q_lane_ingroup(2u, w, x, scales, zb, lut, a, affine, r0, lane, acc);
        else if (ing != 0u && a->bits == 8u)
            rtm_q_lane_ingroup(8u, w, x, scales, zb, lut, a, affine, r0, lane, acc);
        else
            rtm_q_lane_any(w, x, scales, zb, lut, a, affine, r0, lane, acc);
        for (uint rr = 0; rr < RTM_MV_RPS; rr++)
            part[rr * RTM_TG + lid] = acc[rr];
    }
    for (uint rr = 0; rr < RTM_MV_RPS; rr++)
        RTM_SIMD_SUM(part + rr * RTM_TG, RTM_SIMD);
    RTM_PHASE(lid) {
        const uint lane = lid % RTM_SIMD, sg = lid / RTM_SIMD, r = tgid * RTM_MV_ROWS + sg * RTM_MV_RPS + lane;
        if (lane >= RTM_MV_RPS || r >= a->rows)
            continue;
        float v = part[lane * RTM_TG + lid]; /* row rr's sum, which every lane holds: its own copy */
        if (a->has_bias != 0u) {
            float b = rtm_ld(a->biasdt, bias, (ulong)r * a->rstep);
            v = v + b;
        }
        y[r] = v;
    }
}

RTM_KERNEL rtm_k_mv_tq(RTM_DEV const uint *w RTM_BUF(0), RTM_DEV const float *xr RTM_BUF(1), RTM_DEV float *y RTM_BUF(2),
                       RTM_DEV const uchar *scales RTM_BUF(3), RTM_DEV const uchar *codebook RTM_BUF(4),
                       RTM_DEV const uchar *bias RTM_BUF(5), RTM_CONST rtm_mv_args *a RTM_BUF(6), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, lut, 256);
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    rtm_mv_q(w, xr, y, scales, codebook, scales, bias, a, 0u, rtm_tgid, lut, part RTM_TGFN_ARGS);
}

/* MLX affine rows; gsum (slot 5) is no longer read (each segment sums its own x) and is kept
 * so that the kernel's slots do not change. */
RTM_KERNEL rtm_k_mv_affine(RTM_DEV const uint *w RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1), RTM_DEV float *y RTM_BUF(2),
                           RTM_DEV const uchar *scales RTM_BUF(3), RTM_DEV const uchar *biases RTM_BUF(4),
                           RTM_DEV const float *gsum RTM_BUF(5), RTM_DEV const uchar *bias RTM_BUF(6),
                           RTM_CONST rtm_mv_args *a RTM_BUF(7), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, lut, 256);
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    (void)gsum;
    rtm_mv_q(w, x, y, scales, scales, biases, bias, a, 1u, rtm_tgid, lut, part RTM_TGFN_ARGS);
}

/* Routed experts without the CPU (docs/metal.md, One wait per token): the product of the
 * expert the route kernel chose at rank a->rank, whose id the kernel reads from ids (the route's
 * output, in device memory: the CPU never learns it). Each slot holds the part of every expert
 * of the layer, expert id's starting id·stride[i] bytes after expert 0's (i: 0 weights,
 * 1 scales, 2 affine biases, 3 output bias); then the plain kernel's body, so an expert's
 * product is that kernel's bit for bit. The route never writes an id ≥ E (the host refuses
 * K > E); an id ≥ E is read as expert 0 all the same, so no kernel reads outside its slot. */
RTM_FN ulong rtm_ex_off(RTM_DEV const uint *ids, RTM_CONST rtm_mvx_args *a, uint part)
{
    uint id = ids[a->rank];
    id = id < a->E ? id : 0u;
    return (ulong)id * a->stride[part];
}

RTM_KERNEL rtm_k_mv_dense_ex(RTM_DEV const uchar *w RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1),
                             RTM_DEV float *y RTM_BUF(2), RTM_DEV const uchar *bias RTM_BUF(3),
                             RTM_DEV const uint *ids RTM_BUF(4), RTM_CONST rtm_mvx_args *a RTM_BUF(5), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    RTM_DEV const uchar *we = w + rtm_ex_off(ids, a, 0u), *be = bias + rtm_ex_off(ids, a, 3u);
    rtm_mv_dense(we, x, y, be, &a->mv, rtm_tgid, part RTM_TGFN_ARGS);
}

RTM_KERNEL rtm_k_mv_mxfp4_ex(RTM_DEV const uchar *w RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1),
                             RTM_DEV float *y RTM_BUF(2), RTM_DEV const uchar *scales RTM_BUF(3),
                             RTM_DEV const uchar *bias RTM_BUF(4), RTM_DEV const uint *ids RTM_BUF(5),
                             RTM_CONST rtm_mvx_args *a RTM_BUF(6), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    RTM_DEV const uchar *we = w + rtm_ex_off(ids, a, 0u), *se = scales + rtm_ex_off(ids, a, 1u);
    RTM_DEV const uchar *be = bias + rtm_ex_off(ids, a, 3u);
    rtm_mv_mxfp4(we, x, y, se, be, &a->mv, rtm_tgid, part RTM_TGFN_ARGS);
}

RTM_KERNEL rtm_k_mv_tq_ex(RTM_DEV const uchar *w RTM_BUF(0), RTM_DEV const float *xr RTM_BUF(1),
                          RTM_DEV float *y RTM_BUF(2), RTM_DEV const uchar *scales RTM_BUF(3),
                          RTM_DEV const uchar *codebook RTM_BUF(4), RTM_DEV const uchar *bias RTM_BUF(5),
                          RTM_DEV const uint *ids RTM_BUF(6), RTM_CONST rtm_mvx_args *a RTM_BUF(7), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, lut, 256);
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    RTM_DEV const uint *we = (RTM_DEV const uint *)(w + rtm_ex_off(ids, a, 0u));
    RTM_DEV const uchar *se = scales + rtm_ex_off(ids, a, 1u), *be = bias + rtm_ex_off(ids, a, 3u);
    ulong co = 0;
    if (a->cstride != 0u) { /* each expert its own codebook (HF per-expert TurboQuant) */
        uint id = ids[a->rank];
        co = (ulong)(id < a->E ? id : 0u) * a->cstride;
    }
    rtm_mv_q(we, xr, y, se, codebook + co, se, be, &a->mv, 0u, rtm_tgid, lut, part RTM_TGFN_ARGS);
}

RTM_KERNEL rtm_k_mv_affine_ex(RTM_DEV const uchar *w RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1),
                              RTM_DEV float *y RTM_BUF(2), RTM_DEV const uchar *scales RTM_BUF(3),
                              RTM_DEV const uchar *biases RTM_BUF(4), RTM_DEV const float *gsum RTM_BUF(5),
                              RTM_DEV const uchar *bias RTM_BUF(6), RTM_DEV const uint *ids RTM_BUF(7),
                              RTM_CONST rtm_mvx_args *a RTM_BUF(8), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, lut, 256);
    RTM_TG_ARRAY(float, part, RTM_MV_RPS * RTM_TG);
    RTM_DEV const uint *we = (RTM_DEV const uint *)(w + rtm_ex_off(ids, a, 0u));
    RTM_DEV const uchar *se = scales + rtm_ex_off(ids, a, 1u), *ze = biases + rtm_ex_off(ids, a, 2u);
    RTM_DEV const uchar *be = bias + rtm_ex_off(ids, a, 3u);
    (void)gsum;
    rtm_mv_q(we, x, y, se, se, ze, be, &a->mv, 1u, rtm_tgid, lut, part RTM_TGFN_ARGS);
}

/* out = T(x ⊙ signs) for one block of b = m·N per threadgroup (docs/quantization.md, Hadamard
 * blocks): the sign products, butterfly stages h = 1, 2, ..., N/2 on each of the m chunks
 * (the last stage times s when m = 1), then for m > 1 y[r·N + i] = s · Σ_c ±x[c·N + i] with
 * the sum from +0 in c order. The whole threadgroup works on each stage (pair p of the stage
 * on thread p mod RTM_TG), a barrier between stages: log2(N) stages, each done once per input
 * vector (the host reuses a rotation: backend.c). A block of up to RTM_HAD_TG floats lives in
 * threadgroup memory; a longer one (28·512) in tmp [cols] on the device. N is a
 * power of two, so every index below is shifts and masks (lgN = log2 N). */
/* Where pair p of butterfly stage h = 2^lh starts: chunk p >> (lgN - 1) of N = 2^lgN, pair q
 * of it at (q / h)·2h + q mod h, in shifts and masks. */
RTM_FN uint rtm_had_j(uint p, uint lh, uint lgN)
{
    const uint q = p & ((1u << (lgN - 1u)) - 1u), c = p >> (lgN - 1u);
    return (c << lgN) + ((q >> lh) << (lh + 1u)) + (q & ((1u << lh) - 1u));
}

/* The butterfly stages on the m chunks at d, the last scaled by s when m = 1: one helper for
 * threadgroup and one for device memory, the same statements. */
RTM_FN void rtm_had_stages_tg(RTM_TGMEM float *d, RTM_CONST rtm_had_args *a, uint lgN RTM_TGFN_PARAMS)
{
    const uint npairs = lgN > 0u ? a->m << (lgN - 1u) : 0u;
    for (uint lh = 0; lh < lgN; lh++) {
        const uint h = 1u << lh, last = a->m == 1u && lh + 1u == lgN ? 1u : 0u;
        RTM_PHASE(lid) {
            for (uint p = lid; p < npairs; p += RTM_TG) {
                const uint j = rtm_had_j(p, lh, lgN);
                float u = d[j], v = d[j + h];
                float s0 = u + v, d0 = u - v;
                if (last != 0u) {
                    s0 = s0 * a->s;
                    d0 = d0 * a->s;
                }
                d[j] = s0;
                d[j + h] = d0;
            }
        }
        RTM_BARRIER();
    }
}

RTM_FN void rtm_had_stages_dev(RTM_DEV float *d, RTM_CONST rtm_had_args *a, uint lgN RTM_TGFN_PARAMS)
{
    const uint npairs = lgN > 0u ? a->m << (lgN - 1u) : 0u;
    for (uint lh = 0; lh < lgN; lh++) {
        const uint h = 1u << lh, last = a->m == 1u && lh + 1u == lgN ? 1u : 0u;
        RTM_PHASE(lid) {
            for (uint p = lid; p < npairs; p += RTM_TG) {
                const uint j = rtm_had_j(p, lh, lgN);
                float u = d[j], v = d[j + h];
                float s0 = u + v, d0 = u - v;
                if (last != 0u) {
                    s0 = s0 * a->s;
                    d0 = d0 * a->s;
                }
                d[j] = s0;
                d[j + h] = d0;
            }
        }
        RTM_BARRIER_DEV();
    }
}

RTM_KERNEL rtm_k_hadamard(RTM_DEV const float *x RTM_BUF(0), RTM_DEV const uchar *signs0 RTM_BUF(1),
                          RTM_DEV float *out RTM_BUF(2), RTM_DEV float *tmp RTM_BUF(3),
                          RTM_DEV const uint *ids RTM_BUF(4), RTM_CONST rtm_had_args *a RTM_BUF(5), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, t, RTM_HAD_TG);
    ulong so = 0;
    if (a->sstride != 0u) { /* each expert its own signs (HF per-expert TurboQuant) */
        uint id = ids[a->rank];
        so = (ulong)(id < a->E ? id : 0u) * a->sstride;
    }
    RTM_DEV const uchar *signs = signs0 + so;
    const uint b = a->m * a->N;
    const ulong off = (ulong)rtm_tgid * b;
    uint lgN = 0;
    while ((1u << lgN) < a->N)
        lgN++;
    if (b <= RTM_HAD_TG) {
        RTM_PHASE(lid) {
            for (uint j = lid; j < b; j += RTM_TG) {
                float sg = rtm_ld(a->gdt, signs, off + j);
                t[j] = x[off + j] * sg;
            }
        }
        RTM_BARRIER();
        rtm_had_stages_tg(t, a, lgN RTM_TGFN_ARGS);
        RTM_PHASE(lid) {
            for (uint e = lid; e < b; e += RTM_TG) {
                if (a->m == 1u) {
                    out[off + e] = t[e];
                } else {
                    uint r = e >> lgN, i = e & (a->N - 1u), row = rtm_hm_row(a->m, r);
                    float acc = 0.0f;
                    for (uint c = 0; c < a->m; c++) {
                        float v = t[(c << lgN) + i];
                        float tv = ((row >> c) & 1u) != 0u ? -v : v;
                        acc = acc + tv;
                    }
                    out[off + e] = acc * a->s;
                }
            }
        }
    } else {
        RTM_DEV float *d = a->m == 1u ? out + off : tmp + off;
        RTM_PHASE(lid) {
            for (uint j = lid; j < b; j += RTM_TG) {
                float sg = rtm_ld(a->gdt, signs, off + j);
                d[j] = x[off + j] * sg;
            }
        }
        RTM_BARRIER_DEV();
        rtm_had_stages_dev(d, a, lgN RTM_TGFN_ARGS);
        if (a->m > 1u) {
            RTM_PHASE(lid) {
                for (uint e = lid; e < b; e += RTM_TG) {
                    uint r = e >> lgN, i = e & (a->N - 1u), row = rtm_hm_row(a->m, r);
                    float acc = 0.0f;
                    for (uint c = 0; c < a->m; c++) {
                        float v = d[(c << lgN) + i];
                        float tv = ((row >> c) & 1u) != 0u ? -v : v;
                        acc = acc + tv;
                    }
                    out[off + e] = acc * a->s;
                }
            }
        }
    }
}

/* ------------------------------------------------------------ norms and rotary embedding */

/* Sum over a threadgroup of the values part[lid] (after a 32-lane RTM_SIMD_SUM): the simd
 * groups' sums in order. Call from one thread after a barrier. */
RTM_FN float rtm_groups_sum(RTM_TGMEM const float *part)
{
    float t = part[0];
    for (uint sg = 1; sg < RTM_NSG; sg++)
        t = t + part[sg * RTM_SIMD];
    return t;
}

RTM_FN float rtm_groups_max(RTM_TGMEM const float *part)
{
    float t = part[0];
    for (uint sg = 1; sg < RTM_NSG; sg++)
        t = part[sg * RTM_SIMD] > t ? part[sg * RTM_SIMD] : t;
    return t;
}

/* out[v·n + i] = w[i] · (x[v·n + i] · inv_v), inv_v = 1 / sqrt(Σ_i x² / n + eps): one
 * threadgroup per vector; out may be x. */
RTM_KERNEL rtm_k_rmsnorm(RTM_DEV const float *x RTM_BUF(0), RTM_DEV float *out RTM_BUF(1), RTM_DEV const float *w RTM_BUF(2),
                         RTM_CONST rtm_rms_args *a RTM_BUF(3), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, part, RTM_TG);
    RTM_TG_ARRAY(float, inv_s, 1);
    const ulong base = (ulong)rtm_tgid * a->n;
    RTM_PHASE(lid) {
        float s = 0.0f;
        for (uint i = lid; i < a->n; i += RTM_TG) {
            float v = x[base + i];
            float p = v * v;
            s = s + p;
        }
        part[lid] = s;
    }
    RTM_SIMD_SUM(part, RTM_SIMD);
    RTM_BARRIER();
    RTM_PHASE(lid) {
        if (lid != 0u)
            continue;
        float mean = rtm_groups_sum(part) / (float)a->n;
        float d = RTM_SQRT(mean + a->eps);
        inv_s[0] = 1.0f / d;
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float inv = inv_s[0];
        for (uint i = lid; i < a->n; i += RTM_TG) {
            float v = x[base + i] * inv;
            if (a->has_w != 0u)
                v = w[i] * v;
            out[base + i] = v;
        }
    }
}

/* RoPE on count vectors (v + c·stride + off): pair i turned by (cos[i], sin[i]) — pairs
 * (i, i + dim/2), or (2i, 2i+1) when interleaved; one thread per pair. */
RTM_KERNEL rtm_k_rope(RTM_DEV float *v RTM_BUF(0), RTM_DEV const float *cs RTM_BUF(1), RTM_DEV const float *sn RTM_BUF(2),
                      RTM_CONST rtm_rope_args *a RTM_BUF(3), RTM_GROUP_ARGS)
{
    RTM_PHASE(lid) {
        uint npair = a->dim / 2u, idx = rtm_tgid * RTM_TG + lid;
        if (npair == 0u || idx / npair >= a->count)
            continue;
        uint c = idx / npair, i = idx % npair;
        uint step = a->interleaved != 0u ? 2u : 1u, o2 = a->interleaved != 0u ? 1u : npair;
        RTM_DEV float *p = v + (ulong)c * a->stride + a->off + i * step;
        float co = cs[i], si = sn[i], x1 = p[0], x2 = p[o2];
        float a1 = x1 * co, a2 = x2 * si, b1 = x2 * co, b2 = x1 * si;
        p[0] = a1 - a2;
        p[o2] = b1 + b2;
    }
}

/* ------------------------------------------------------------ attention */

/* One query position, one threadgroup per head h (kv head h / group): scores
 * sc[t] = scale · Σ_i q[i]·k_t[i] (i in order) for t in [t0, pos], the maximum (with the sink
 * logit), e_t = exp(sc[t] - max), S = Σ e_t (threadgroup order) + exp(sink - max), and
 * out[i] = Σ_t (e_t / S)·v_t[i] with t in order. att [heads][att_stride] holds the scores. */
RTM_KERNEL rtm_k_attention(RTM_DEV const float *q RTM_BUF(0), RTM_DEV const float *kc RTM_BUF(1),
                           RTM_DEV const float *vc RTM_BUF(2), RTM_DEV const float *sinks RTM_BUF(3),
                           RTM_DEV float *att RTM_BUF(4), RTM_DEV float *out RTM_BUF(5),
                           RTM_CONST rtm_att_args *a RTM_BUF(6), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, red, RTM_TG);
    RTM_TG_ARRAY(float, sh, 2);
    const uint h = rtm_tgid, kh = h / a->group;
    RTM_DEV const float *qh = q + (ulong)h * a->hd;
    RTM_DEV float *sc = att + (ulong)h * a->att_stride;
    RTM_PHASE(lid) {
        float m = RTM_NINF;
        for (uint t = a->t0 + lid; t <= a->pos; t += RTM_TG) {
            RTM_DEV const float *k = kc + (ulong)t * a->kvd + (ulong)kh * a->hd;
            float s = 0.0f;
            for (uint i = 0; i < a->hd; i++) {
                float p = qh[i] * k[i];
                s = s + p;
            }
            s = s * a->scale;
            sc[t] = s;
            m = s > m ? s : m;
        }
        red[lid] = m;
    }
    RTM_SIMD_MAX(red);
    RTM_BARRIER_DEV();
    RTM_PHASE(lid) {
        if (lid != 0u)
            continue;
        float m = rtm_groups_max(red);
        if (a->has_sinks != 0u && sinks[h] > m)
            m = sinks[h];
        sh[0] = m;
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float m = sh[0], s = 0.0f;
        for (uint t = a->t0 + lid; t <= a->pos; t += RTM_TG) {
            float e = rtm_exp(sc[t] - m);
            sc[t] = e;
            s = s + e;
        }
        red[lid] = s;
    }
    RTM_SIMD_SUM(red, RTM_SIMD);
    RTM_BARRIER_DEV();
    RTM_PHASE(lid) {
        if (lid != 0u)
            continue;
        float s = rtm_groups_sum(red);
        if (a->has_sinks != 0u) {
            float e = rtm_exp(sinks[h] - sh[0]);
            s = s + e;
        }
        sh[1] = s;
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float s = sh[1];
        for (uint i = lid; i < a->hd; i += RTM_TG) {
            float o = 0.0f;
            for (uint t = a->t0; t <= a->pos; t++) {
                float p = sc[t] / s;
                float pv = p * vc[(ulong)t * a->kvd + (ulong)kh * a->hd + i];
                o = o + pv;
            }
            out[(ulong)h * a->hd + i] = o;
        }
    }
}

/* DeepSeek-V3's latent attention core (runtime/attention.c, mla_task, with the same products
 * in the same order but for the softmax): one threadgroup per head h, q [heads][nope + rope],
 * kc [pos + 1][kvl + rope] the normalised latents and rotated shared keys, kvb the dense rows
 * of kv_b_proj [heads·(nope + vh)][kvl].
 *   qa[j]  = Σ_d q[d]·kvb[h(nope+vh) + d][j]            (d in order; qa [heads][kvl] scratch)
 *   sc[t]  = ((Σ_j qa[j]·lat_t[j]) + (Σ_j q[nope+j]·krope_t[j]))·scale   (j in order)
 *   e_t    = exp(sc[t] - max), S = Σ e_t in threadgroup order (as the attention kernel)
 *   ol[j]  = Σ_t (e_t / S)·lat_t[j]                      (t in order; ol [heads][kvl] scratch)
 *   ao[h·vh + i] = Σ_j kvb[h(nope+vh) + nope + i][j]·ol[j]   (j in order)
 * An element of kvb is rt_linear_row's: the stored value, or scale·q + bias (MLX affine). */
RTM_FN float rtm_mla_w(RTM_CONST rtm_mla_args *a, RTM_DEV const uchar *kvb, RTM_DEV const uchar *sc,
                       RTM_DEV const uchar *zb, ulong row, uint j)
{
    if (a->affine == 0u)
        return rtm_ld(a->kvb_dt, kvb, row * a->kvl + j);
    const uint epw = 32u / a->bits, mask = (1u << a->bits) - 1u;
    RTM_DEV const uint *w = (RTM_DEV const uint *)kvb + row * a->wpr;
    uint q = (w[j / epw] >> ((j % epw) * a->bits)) & mask;
    ulong gi = row * a->ngroups + j / a->group;
    float t = rtm_ld(a->sdt, sc, gi) * (float)q;
    return t + rtm_ld(a->zdt, zb, gi);
}

RTM_KERNEL rtm_k_mla(RTM_DEV const float *q RTM_BUF(0), RTM_DEV const float *kc RTM_BUF(1),
                     RTM_DEV const uchar *kvb RTM_BUF(2), RTM_DEV float *qa RTM_BUF(3), RTM_DEV float *att RTM_BUF(4),
                     RTM_DEV float *ol RTM_BUF(5), RTM_DEV float *ao RTM_BUF(6), RTM_DEV const uchar *kvs RTM_BUF(7),
                     RTM_DEV const uchar *kvz RTM_BUF(8), RTM_CONST rtm_mla_args *a RTM_BUF(9), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, red, RTM_TG);
    RTM_TG_ARRAY(float, sh, 2);
    const uint h = rtm_tgid, W = a->kvl + a->rope;
    const ulong base = (ulong)h * (a->nope + a->vh);
    RTM_DEV const float *qh = q + (ulong)h * (a->nope + a->rope);
    RTM_DEV float *qah = qa + (ulong)h * a->kvl;
    RTM_DEV float *olh = ol + (ulong)h * a->kvl;
    RTM_DEV float *sc = att + (ulong)h * a->att_stride;
    RTM_PHASE(lid) {
        for (uint j = lid; j < a->kvl; j += RTM_TG) {
            float s = 0.0f;
            for (uint d = 0; d < a->nope; d++) {
                float p = qh[d] * rtm_mla_w(a, kvb, kvs, kvz, base + d, j);
                s = s + p;
            }
            qah[j] = s;
        }
    }
    RTM_BARRIER_DEV();
    RTM_PHASE(lid) {
        float m = RTM_NINF;
        for (uint t = lid; t <= a->pos; t += RTM_TG) {
            RTM_DEV const float *lat = kc + (ulong)t * W;
            float s = 0.0f, sr = 0.0f;
            for (uint j = 0; j < a->kvl; j++) {
                float p = qah[j] * lat[j];
                s = s + p;
            }
            for (uint j = 0; j < a->rope; j++) {
                float p = qh[a->nope + j] * lat[a->kvl + j];
                sr = sr + p;
            }
            float z = s + sr;
            z = z * a->scale;
            sc[t] = z;
            m = z > m ? z : m;
        }
        red[lid] = m;
    }
    RTM_SIMD_MAX(red);
    RTM_BARRIER_DEV();
    RTM_PHASE(lid) {
        if (lid == 0u)
            sh[0] = rtm_groups_max(red);
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float m = sh[0], s = 0.0f;
        for (uint t = lid; t <= a->pos; t += RTM_TG) {
            float e = rtm_exp(sc[t] - m);
            sc[t] = e;
            s = s + e;
        }
        red[lid] = s;
    }
    RTM_SIMD_SUM(red, RTM_SIMD);
    RTM_BARRIER_DEV();
    RTM_PHASE(lid) {
        if (lid == 0u)
            sh[1] = rtm_groups_sum(red);
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float s = sh[1];
        for (uint j = lid; j < a->kvl; j += RTM_TG) {
            float o = 0.0f;
            for (uint t = 0; t <= a->pos; t++) {
                float p = sc[t] / s;
                float pv = p * kc[(ulong)t * W + j];
                o = o + pv;
            }
            olh[j] = o;
        }
    }
    RTM_BARRIER_DEV();
    RTM_PHASE(lid) {
        for (uint i = lid; i < a->vh; i += RTM_TG) {
            float s = 0.0f;
            for (uint j = 0; j < a->kvl; j++) {
                float p = rtm_mla_w(a, kvb, kvs, kvz, base + a->nope + i, j) * olh[j];
                s = s + p;
            }
            ao[(ulong)h * a->vh + i] = s;
        }
    }
}

/* In place softmax of v[0..n): max, e_i = exp(v_i - max), S in threadgroup order, v_i = e_i / S.
 * red [RTM_TG] and sh [1] are threadgroup scratch. */
RTM_FN void rtm_softmax_tg(RTM_DEV float *v, uint n, RTM_TGMEM float *red, RTM_TGMEM float *sh RTM_TGFN_PARAMS)
{
    RTM_PHASE(lid) {
        float m = RTM_NINF;
        for (uint i = lid; i < n; i += RTM_TG)
            m = v[i] > m ? v[i] : m;
        red[lid] = m;
    }
    RTM_SIMD_MAX(red);
    RTM_BARRIER();
    RTM_PHASE(lid) {
        if (lid == 0u)
            sh[0] = rtm_groups_max(red);
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float m = sh[0], s = 0.0f;
        for (uint i = lid; i < n; i += RTM_TG) {
            float e = rtm_exp(v[i] - m);
            v[i] = e;
            s = s + e;
        }
        red[lid] = s;
    }
    RTM_SIMD_SUM(red, RTM_SIMD);
    RTM_BARRIER_DEV();
    RTM_PHASE(lid) {
        if (lid == 0u)
            sh[0] = rtm_groups_sum(red);
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float s = sh[0];
        for (uint i = lid; i < n; i += RTM_TG)
            v[i] = v[i] / s;
    }
    RTM_BARRIER_DEV();
}

/* Softmax of row tgid (x + tgid·stride, n values), in place. */
RTM_KERNEL rtm_k_softmax(RTM_DEV float *x RTM_BUF(0), RTM_CONST rtm_softmax_args *a RTM_BUF(1), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, red, RTM_TG);
    RTM_TG_ARRAY(float, sh, 1);
    rtm_softmax_tg(x + (ulong)rtm_tgid * a->stride, a->n, red, sh RTM_TGFN_ARGS);
}

/* ------------------------------------------------------------ MoE routing */

/* chosen[0..k) = the k largest of v[0..n) (ties to the lower index), one round per rank: each
 * thread's best not yet chosen among i ≡ lid (mod RTM_TG), then rtm_better over the simd
 * groups and the groups in order. Integer result, independent of the reduction order. */
RTM_FN void rtm_topk_tg(RTM_DEV const float *v, uint n, uint k, RTM_TGMEM uint *chosen, RTM_TGMEM float *rv,
                        RTM_TGMEM uint *ri RTM_TGFN_PARAMS)
{
    for (uint j = 0; j < k; j++) {
        RTM_PHASE(lid) {
            float bv = RTM_NINF;
            uint bi = RTM_NONE;
            for (uint i = lid; i < n; i += RTM_TG) {
                uint taken = 0;
                for (uint t = 0; t < j; t++)
                    taken |= chosen[t] == i ? 1u : 0u;
                if (taken == 0u && (bi == RTM_NONE || v[i] > bv)) {
                    bv = v[i];
                    bi = i;
                }
            }
            rv[lid] = bv;
            ri[lid] = bi;
        }
        RTM_SIMD_ARGMAX(rv, ri);
        RTM_BARRIER();
        RTM_PHASE(lid) {
            if (lid != 0u)
                continue;
            float cv = rv[0];
            uint ci = ri[0];
            for (uint sg = 1; sg < RTM_NSG; sg++)
                if (rtm_better(rv[sg * RTM_SIMD], ri[sg * RTM_SIMD], cv, ci) != 0) {
                    cv = rv[sg * RTM_SIMD];
                    ci = ri[sg * RTM_SIMD];
                }
            chosen[j] = ci;
        }
        RTM_BARRIER();
    }
}

/* Router logits [E] → ids [K] and weights w [K] (enum rt_route, forward.c route()), one
 * threadgroup. scratch [2E + n_group]: probabilities or sigmoid scores, scores to choose by,
 * group scores. */
RTM_KERNEL rtm_k_route(RTM_DEV const float *logits RTM_BUF(0), RTM_DEV const float *bias RTM_BUF(1),
                       RTM_DEV float *scratch RTM_BUF(2), RTM_DEV uint *ids RTM_BUF(3), RTM_DEV float *w RTM_BUF(4),
                       RTM_CONST rtm_route_args *a RTM_BUF(5), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, red, RTM_TG);
    RTM_TG_ARRAY(uint, ri, RTM_TG);
    RTM_TG_ARRAY(float, sh, 1);
    RTM_TG_ARRAY(uint, chosen, RTM_MAX_TOPK);
    RTM_DEV float *p = scratch, *choice = scratch + a->E, *gscore = scratch + 2u * a->E;
    RTM_DEV const float *sel = p;
    if (a->mode == RTM_ROUTE_SIGMOID_GROUP) {
        RTM_PHASE(lid) {
            for (uint i = lid; i < a->E; i += RTM_TG) {
                float sg = rtm_sigmoid(logits[i]);
                float b = a->has_bias != 0u ? bias[i] : 0.0f;
                p[i] = sg;
                choice[i] = sg + b;
            }
        }
        RTM_BARRIER_DEV();
        if (a->n_group > 1u) {
            const uint per = a->E / a->n_group;
            RTM_PHASE(lid) {
                for (uint gi = lid; gi < a->n_group; gi += RTM_TG) {
                    uint two[2];
                    rtm_topk_seq(choice + gi * per, per, 2u, two);
                    gscore[gi] = choice[gi * per + two[0]] + choice[gi * per + two[1]];
                }
            }
            RTM_BARRIER_DEV();
            RTM_PHASE(lid) {
                if (lid != 0u)
                    continue;
                uint gids[RTM_MAX_GROUPS];
                rtm_topk_seq(gscore, a->n_group, a->topk_group, gids);
                for (uint gi = 0; gi < a->n_group; gi++) {
                    uint keep = 0;
                    for (uint t = 0; t < a->topk_group; t++)
                        keep |= gids[t] == gi ? 1u : 0u;
                    gscore[gi] = keep != 0u ? 1.0f : 0.0f;
                }
            }
            RTM_BARRIER_DEV();
            RTM_PHASE(lid) {
                for (uint i = lid; i < a->E; i += RTM_TG)
                    if (gscore[i / per] == 0.0f)
                        choice[i] = 0.0f;
            }
            RTM_BARRIER_DEV();
        }
        sel = choice;
    } else {
        RTM_PHASE(lid) {
            for (uint i = lid; i < a->E; i += RTM_TG)
                p[i] = logits[i];
        }
        RTM_BARRIER_DEV();
        if (a->mode == RTM_ROUTE_SOFTMAX)
            rtm_softmax_tg(p, a->E, red, sh RTM_TGFN_ARGS);
    }
    rtm_topk_tg(sel, a->E, a->K, chosen, red, ri RTM_TGFN_ARGS);
    RTM_PHASE(lid) {
        if (lid != 0u)
            continue;
        float sum = 0.0f;
        if (a->mode == RTM_ROUTE_TOPK_SOFTMAX) {
            float mx = p[chosen[0]];
            for (uint k = 0; k < a->K; k++) {
                float e = rtm_exp(p[chosen[k]] - mx);
                w[k] = e;
                sum = sum + e;
            }
            for (uint k = 0; k < a->K; k++)
                w[k] = w[k] / sum;
        } else if (a->mode == RTM_ROUTE_SIGMOID_GROUP) {
            for (uint k = 0; k < a->K; k++) {
                w[k] = p[chosen[k]];
                sum = sum + w[k];
            }
            for (uint k = 0; k < a->K; k++) {
                if (a->norm_topk != 0u)
                    w[k] = w[k] / (sum + 1e-20f);
                w[k] = w[k] * a->route_scale;
            }
        } else {
            for (uint k = 0; k < a->K; k++)
                w[k] = p[chosen[k]];
            if (a->norm_topk != 0u) {
                for (uint k = 0; k < a->K; k++)
                    sum = sum + w[k];
                for (uint k = 0; k < a->K; k++)
                    w[k] = w[k] / sum;
            }
        }
        for (uint k = 0; k < a->K; k++)
            ids[k] = chosen[k];
    }
}

/* ------------------------------------------------------------ element-wise */

/* The SwiGLU activation: g[i] = silu(g[i])·u[i], or gpt-oss's clamped form
 * min(g, L)·sigmoid(α·min(g, L))·(clamp(u, -L, L) + 1). One thread per element. */
RTM_KERNEL rtm_k_act(RTM_DEV float *g RTM_BUF(0), RTM_DEV const float *u RTM_BUF(1), RTM_CONST rtm_act_args *a RTM_BUF(2),
                     RTM_GROUP_ARGS)
{
    RTM_PHASE(lid) {
        uint i = rtm_tgid * RTM_TG + lid;
        if (i >= a->n)
            continue;
        if (a->clamped != 0u) {
            float lim = a->limit;
            float gv = g[i] < lim ? g[i] : lim;
            float uv = u[i] < -lim ? -lim : u[i] > lim ? lim : u[i];
            float t = gv * rtm_sigmoid(a->alpha * gv);
            g[i] = t * (uv + 1.0f);
        } else {
            g[i] = rtm_silu(g[i]) * u[i];
        }
    }
}

/* y[i] += a·x[i] with a from the block (a_mode 0), a = sigmoid(sa[0]) (1: a shared expert's
 * gate) or a = sa[0] (2: a routed expert's weight, from the route kernel's output). */
RTM_KERNEL rtm_k_axpy(RTM_DEV float *y RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1), RTM_DEV const float *sa RTM_BUF(2),
                      RTM_CONST rtm_axpy_args *a RTM_BUF(3), RTM_GROUP_ARGS)
{
    RTM_PHASE(lid) {
        uint i = rtm_tgid * RTM_TG + lid;
        if (i >= a->n)
            continue;
        float s = a->a_mode == 1u ? rtm_sigmoid(sa[0]) : a->a_mode == 2u ? sa[0] : a->a;
        float t = s * x[i];
        y[i] = y[i] + t;
    }
}

/* y[i] *= sigmoid(g[i]) (kind 0: attention output gate), silu(g[i]) (kind 1), or y[i] = 0
 * (kind 2, g unused). */
RTM_KERNEL rtm_k_gate(RTM_DEV float *y RTM_BUF(0), RTM_DEV const float *g RTM_BUF(1), RTM_CONST rtm_gate_args *a RTM_BUF(2),
                      RTM_GROUP_ARGS)
{
    RTM_PHASE(lid) {
        uint i = rtm_tgid * RTM_TG + lid;
        if (i >= a->n)
            continue;
        if (a->kind == 2u)
            y[i] = 0.0f;
        else
            y[i] = y[i] * (a->kind == 0u ? rtm_sigmoid(g[i]) : rtm_silu(g[i]));
    }
}

/* y[i] = exp(x[i]) (kind 0), sigmoid(x[i]) (1), silu(x[i]) (2), ln x[i] (3) or ln(1 + x[i])
 * (4): the scalar functions of the other kernels on their own, so tests can compare them
 * value by value with the shim's. */
RTM_KERNEL rtm_k_unary(RTM_DEV float *y RTM_BUF(0), RTM_DEV const float *x RTM_BUF(1), RTM_CONST rtm_gate_args *a RTM_BUF(2),
                       RTM_GROUP_ARGS)
{
    RTM_PHASE(lid) {
        uint i = rtm_tgid * RTM_TG + lid;
        if (i >= a->n)
            continue;
        float v = x[i];
        y[i] = a->kind == 0u   ? rtm_exp(v)
               : a->kind == 1u ? rtm_sigmoid(v)
               : a->kind == 2u ? rtm_silu(v)
               : a->kind == 3u ? rtm_log(v)
                               : rtm_log1p(v);
    }
}

/* dst[b·len + i] = src[b·stride + off + i]: splitting and copying vectors (dst and src must
 * not overlap). */
RTM_KERNEL rtm_k_gather(RTM_DEV float *dst RTM_BUF(0), RTM_DEV const float *src RTM_BUF(1),
                        RTM_CONST rtm_gather_args *a RTM_BUF(2), RTM_GROUP_ARGS)
{
    RTM_PHASE(lid) {
        uint idx = rtm_tgid * RTM_TG + lid;
        if (a->len == 0u || idx / a->len >= a->blocks)
            continue;
        uint b = idx / a->len, i = idx % a->len;
        dst[idx] = src[(ulong)b * a->stride + a->off + i];
    }
}

/* ------------------------------------------------------------ Gated DeltaNet */

/* The causal depthwise conv of one token (runtime/deltanet.c, rt_deltanet_step), one thread per
 * channel ch: acc = Σ_{j<K-1} w[ch][j]·state[j][ch] + w[ch][K-1]·mix[ch] in the CPU's order,
 * co[ch] = silu(acc); then the channel's state rows move up one and the last becomes mix[ch]
 * (each thread touches only its own channel). */
RTM_KERNEL rtm_k_dn_conv(RTM_DEV const float *mix RTM_BUF(0), RTM_DEV const float *w RTM_BUF(1), RTM_DEV float *st RTM_BUF(2),
                         RTM_DEV float *co RTM_BUF(3), RTM_CONST rtm_dn_args *a RTM_BUF(4), RTM_GROUP_ARGS)
{
    RTM_PHASE(lid) {
        uint ch = rtm_tgid * RTM_TG + lid;
        if (ch >= a->C)
            continue;
        const uint K = a->K, C = a->C;
        float acc = 0.0f;
        for (uint j = 0; j + 1u < K; j++) {
            float p = w[(ulong)ch * K + j] * st[(ulong)j * C + ch];
            acc = acc + p;
        }
        float p = w[(ulong)ch * K + K - 1u] * mix[ch];
        acc = acc + p;
        co[ch] = rtm_silu(acc);
        for (uint j = 0; j + 2u < K; j++)
            st[(ulong)j * C + ch] = st[(ulong)(j + 1u) * C + ch];
        if (K > 1u)
            st[(ulong)(K - 2u) * C + ch] = mix[ch];
    }
}

/* One value head hv per threadgroup (runtime/deltanet.c, l2norm and dn_task): its key head
 * kh = hv / rep's q and k L2-normalised (Σx² over the threadgroup in f32, the CPU's in double;
 * q also times qs); the decay g = exp(-exp(A_log)·softplus(a + dt_bias)) and beta =
 * sigmoid(b) in f32 (rtm_exp, rtm_log1p: the CPU's in double); then thread i takes state row
 * i in the CPU's order (S_i ← g·S_i, kv = S_i·k, delta = beta·(v_i - kv), S_i ← S_i + delta·k,
 * y_i = S_i·q), and ao = RMSNorm(y)·w·silu(z) (Σy² as rmsnorm's). */
RTM_KERNEL rtm_k_dn_core(RTM_DEV const float *co RTM_BUF(0), RTM_DEV const float *z RTM_BUF(1), RTM_DEV const float *bb RTM_BUF(2),
                         RTM_DEV const float *aa RTM_BUF(3), RTM_DEV const float *alog RTM_BUF(4),
                         RTM_DEV const float *dtb RTM_BUF(5), RTM_DEV const float *gw RTM_BUF(6), RTM_DEV float *ssm RTM_BUF(7),
                         RTM_DEV float *ao RTM_BUF(8), RTM_CONST rtm_dn_args *a RTM_BUF(9), RTM_GROUP_ARGS)
{
    RTM_TG_ARRAY(float, part, RTM_TG);
    RTM_TG_ARRAY(float, qk, 2u * RTM_DN_MAXD);
    RTM_TG_ARRAY(float, y, RTM_DN_MAXD);
    RTM_TG_ARRAY(float, inv, 3);
    const uint hv = rtm_tgid, dk = a->dk, dv = a->dv;
    const ulong qo = (ulong)(hv / a->rep) * dk, ko = (ulong)a->nk * dk + qo;
    const ulong vo = 2ul * a->nk * dk + (ulong)hv * dv;
    /* Σq² */
    RTM_PHASE(lid) {
        float s = 0.0f;
        for (uint i = lid; i < dk; i += RTM_TG) {
            float v = co[qo + i];
            float p = v * v;
            s = s + p;
        }
        part[lid] = s;
    }
    RTM_SIMD_SUM(part, RTM_SIMD);
    RTM_BARRIER();
    RTM_PHASE(lid) {
        if (lid != 0u)
            continue;
        float ss = rtm_groups_sum(part) + 1e-6f;
        float d = RTM_SQRT(ss);
        inv[0] = 1.0f / d;
    }
    RTM_BARRIER();
    /* Σk² */
    RTM_PHASE(lid) {
        float s = 0.0f;
        for (uint i = lid; i < dk; i += RTM_TG) {
            float v = co[ko + i];
            float p = v * v;
            s = s + p;
        }
        part[lid] = s;
    }
    RTM_SIMD_SUM(part, RTM_SIMD);
    RTM_BARRIER();
    RTM_PHASE(lid) {
        if (lid != 0u)
            continue;
        float ss = rtm_groups_sum(part) + 1e-6f;
        float d = RTM_SQRT(ss);
        inv[1] = 1.0f / d;
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        for (uint i = lid; i < dk; i += RTM_TG) {
            float q = co[qo + i] * inv[0];
            qk[i] = q * a->qs;
            qk[RTM_DN_MAXD + i] = co[ko + i] * inv[1];
        }
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        float beta = rtm_sigmoid(bb[hv]);
        float x = aa[hv] + dtb[hv];
        float sp = x > 20.0f ? x : rtm_log1p(rtm_exp(x));
        float t = rtm_exp(alog[hv]) * sp;
        float g = rtm_exp(-t);
        for (uint i = lid; i < dv; i += RTM_TG) {
            RTM_DEV float *row = ssm + ((ulong)hv * dv + i) * dk;
            float kv = 0.0f;
            for (uint j = 0; j < dk; j++) {
                float r = row[j] * g;
                row[j] = r;
                float p = r * qk[RTM_DN_MAXD + j];
                kv = kv + p;
            }
            float dl = co[vo + i] - kv;
            float delta = dl * beta, out = 0.0f;
            for (uint j = 0; j < dk; j++) {
                float p = qk[RTM_DN_MAXD + j] * delta;
                float r = row[j] + p;
                row[j] = r;
                float o = r * qk[j];
                out = out + o;
            }
            y[i] = out;
        }
    }
    RTM_BARRIER();
    /* the gated RMSNorm: Σy² */
    RTM_PHASE(lid) {
        float s = 0.0f;
        for (uint i = lid; i < dv; i += RTM_TG) {
            float v = y[i];
            float p = v * v;
            s = s + p;
        }
        part[lid] = s;
    }
    RTM_SIMD_SUM(part, RTM_SIMD);
    RTM_BARRIER();
    RTM_PHASE(lid) {
        if (lid != 0u)
            continue;
        float mean = rtm_groups_sum(part) / (float)dv;
        float d = RTM_SQRT(mean + a->eps);
        inv[2] = 1.0f / d;
    }
    RTM_BARRIER();
    RTM_PHASE(lid) {
        for (uint i = lid; i < dv; i += RTM_TG) {
            float v = y[i] * inv[2];
            v = gw[i] * v;
            ao[(ulong)hv * dv + i] = v * rtm_silu(z[(ulong)hv * dv + i]);
        }
    }
}
