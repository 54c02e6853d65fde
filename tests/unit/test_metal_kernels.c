/* runtime/metal/kernels.metal, kernel by kernel, through the backend's operations with the
 * threadgroup sizes the Metal host code uses (abi_internal.h), on random shapes with ragged
 * tails. Integer paths (unpacking, codebook and scale lookup, routing choices, copies) and
 * every kernel whose order is the CPU runtime's (matvec, Hadamard, RoPE) must equal their
 * reference bit for bit; float reductions (RMSNorm, softmax, attention, exp-based
 * activations) must lie within the a-priori error bound docs/metal.md derives, against an
 * f64 evaluation of the definition. On the shim every case also runs with each threadgroup's
 * threads in reverse order and must give the same bits (a kernel that reads in one phase what
 * another thread writes in it would not). Where the build has Metal, every case runs again on
 * the GPU with the same checks. References: quant/ (Hadamard, packing, dequantization),
 * runtime/kernels.c and ops.c (the CPU runtime), and definitions evaluated here in double. */
#include "runtime/metal/rtm_internal.h"
#include "formats/formats.h"
#include "quant/quant.h"
#include "tests/unit/check.h"

#include <float.h>

#define U (1.0 / 16777216.0) /* 2^-24, the unit roundoff of f32 */
/* rtm_exp's largest relative error over the sweep of exp_sweep, in units of U: the bound the
 * other kernels' error bounds use (docs/metal.md, exp). */
#define EXP_ERR_U 2.0

static double gam(double k)
{
    return k * U / (1.0 - k * U);
}

/* The shim's floating-point mode (tests/cli/metal-shim-modes.sh; docs/metal.md, Assumptions):
 * FP_FMA when this binary's shim was built with contraction (rtm_shim_fp), FP_FTZ with
 * TQ_SHIM_FTZ set (subnormals flushed during syncs). A bit-for-bit comparison with the CPU
 * runtime names the assumption it rests on through exact(): "A2" (no fused multiply-add: the
 * CPU runtime is built with -ffp-contract=off) or "A4" (subnormals kept, as the CPU runtime
 * keeps them); in a mode that drops it the comparison is left out, and the error bounds
 * against f64 beside it, which hold with fused or flushed arithmetic too, still run. */
static int FP_FMA, FP_FTZ;
static int exact(const char *assumption)
{
    if (strcmp(assumption, "A2") == 0)
        return !FP_FMA;
    if (strcmp(assumption, "A4") == 0)
        return !FP_FTZ;
    return 1;
}

static rtm_be *BE;        /* the backend under test */
static const char *DEV;   /* its device's name */
static int ORDERS = 2;    /* shim: forward and reverse thread order; GPU: 1 */
static uint64_t rng = 0x5eed1234abcdULL;
static rt_pool *POOL;

static double urand(void)
{
    return t_urand(&rng);
}
static double nrand(void)
{
    return t_nrand(&rng);
}
static uint64_t irand(uint64_t n)
{
    return (uint64_t)(urand() * (double)n) % n;
}

static float *dmem(uint64_t n)
{
    tq_err err = {0};
    float *p = rtm_be_alloc(BE, n ? n * 4 : 4, &err);
    CHECKF(p != NULL, "alloc: %s", err.msg);
    return p;
}

static int sync_ok(void)
{
    tq_err err = {0};
    int rc = rtm_be_sync(BE, &err);
    CHECKF(rc == 0, "sync: %s", err.msg);
    return rc == 0;
}

static uint16_t enc(tq_dtype dt, float v)
{
    return dt == TQ_DT_F16 ? tq_f32_to_f16(v) : tq_f32_to_bf16(v);
}

/* Random values in dtype dt: n elements, normal times scale (bytes returned). */
static void *rand_vals(tq_dtype dt, uint64_t n, double scale)
{
    void *p = malloc(n * tq_dtype_size(dt) + 4);
    for (uint64_t i = 0; i < n; i++) {
        float v = (float)(nrand() * scale);
        if (dt == TQ_DT_F32)
            ((float *)p)[i] = v;
        else
            ((uint16_t *)p)[i] = enc(dt, v);
    }
    return p;
}

/* The outputs of the first thread order, compared bit for bit with the later ones. */
static float *order_keep;
static uint64_t order_n;
static void order_check(int ord, const float *v, uint64_t n, const char *what)
{
    if (ord == 0) {
        free(order_keep);
        order_keep = malloc(n * 4 + 4);
        memcpy(order_keep, v, n * 4);
        order_n = n;
        return;
    }
    CHECKF(order_n == n && memcmp(order_keep, v, n * 4) == 0, "%s: reverse thread order changed the result", what);
}

/* ---------------------------------------------------------------- exp, sigmoid, silu */

/* rtm_exp on one float in every 61 of [-87, 88.72] against exp in double: relative error in
 * units of U at most EXP_ERR_U; 0 below -87 and +inf above 88.7229 by design. */
static void exp_sweep(void)
{
    const uint64_t CH = 1u << 20;
    float *x = dmem(CH), *y = dmem(CH);
    double worst = 0;
    uint64_t n_done = 0;
    tq_err err = {0};
    float lo = -87.0f, hi = 88.72283f;
    uint32_t bits_lo, bits_hi;
    memcpy(&bits_lo, &lo, 4);
    memcpy(&bits_hi, &hi, 4);
    /* negative floats from -0 down to -87 (bit patterns 0x80000000 .. bits_lo), then positive */
    for (int side = 0; side < 2; side++) {
        uint32_t b0 = side == 0 ? 0x80000000u : 0u, b1 = side == 0 ? bits_lo : bits_hi;
        for (uint64_t b = b0; b <= b1;) {
            uint64_t n = 0;
            for (; n < CH && b <= b1; n++, b += 61) {
                uint32_t u32 = (uint32_t)b;
                memcpy(&x[n], &u32, 4);
            }
            CHECK_OK(rtm_be_unary(BE, y, x, n, 0, &err));
            if (!sync_ok())
                return;
            for (uint64_t i = 0; i < n; i++) {
                double ref = exp((double)x[i]), rel = fabs((double)y[i] - ref) / ref / U;
                if (!(rel <= worst))
                    worst = rel;
            }
            n_done += n;
        }
    }
    printf("  %s: rtm_exp over %llu floats in [-87, 88.72]: max relative error %.3f U\n", DEV,
           (unsigned long long)n_done, worst);
    CHECKF(worst <= EXP_ERR_U, "rtm_exp error %.3f U above the stated %.1f U", worst, EXP_ERR_U);
    /* the ends */
    float ends[6] = {-87.5f, -1000.0f, 88.75f, 1000.0f, 0.0f, -0.0f};
    memcpy(x, ends, sizeof ends);
    CHECK_OK(rtm_be_unary(BE, y, x, 6, 0, &err));
    if (sync_ok())
        CHECK(y[0] == 0.0f && y[1] == 0.0f && isinf(y[2]) && isinf(y[3]) && y[4] == 1.0f && y[5] == 1.0f);
    rtm_be_free(BE, x);
    rtm_be_free(BE, y);
}

/* sigmoid and silu from rtm_exp: relative error ≤ γ(EXP_ERR_U + 3) on [-40, 40]. */
static void sigmoid_silu(void)
{
    const uint64_t n = 200003;
    float *x = dmem(n), *y = dmem(n);
    tq_err err = {0};
    for (int kind = 1; kind <= 2; kind++) {
        for (uint64_t i = 0; i < n; i++)
            x[i] = (float)(-40.0 + 80.0 * (double)i / (double)(n - 1));
        CHECK_OK(rtm_be_unary(BE, y, x, n, kind, &err));
        if (!sync_ok())
            return;
        double worst = 0;
        for (uint64_t i = 0; i < n; i++) {
            double s = 1.0 / (1.0 + exp(-(double)x[i])), ref = kind == 1 ? s : (double)x[i] * s;
            double rel = ref != 0 ? fabs((double)y[i] - ref) / fabs(ref) : fabs((double)y[i]);
            if (!(rel <= worst))
                worst = rel;
        }
        CHECKF(worst <= gam(EXP_ERR_U + 3), "%s: relative error %.3g U", kind == 1 ? "sigmoid" : "silu", worst / U);
        printf("  %s: %s max relative error %.3f U (bound %.1f U)\n", DEV, kind == 1 ? "sigmoid" : "silu", worst / U,
               gam(EXP_ERR_U + 3) / U);
    }
    rtm_be_free(BE, x);
    rtm_be_free(BE, y);
}

/* rtm_log and rtm_log1p (the Gated DeltaNet decay's softplus, dn_core) against the C library's
 * double log and log1p (independent of the kernels' code): ln over one positive normal float
 * in every 997 of the whole range, ln(1 + t) over a geometric grid of t in [1e-30, 5e8] (the
 * decay's exp(x) for x ≤ 20) and 0. LOG_ERR_U is the measured bound, rounded up; the
 * kernels' error beyond it is not derived here (docs/metal.md, Gated DeltaNet). */
#define LOG_ERR_U 3.0
static void log_sweep(void)
{
    const uint64_t CH = 1u << 20;
    float *x = dmem(CH), *y = dmem(CH);
    tq_err err = {0};
    double worst = 0, worst1 = 0;
    uint64_t n_done = 0;
    for (uint64_t b = 0x00800000u; b <= 0x7f7fffffu;) {
        uint64_t n = 0;
        for (; n < CH && b <= 0x7f7fffffu; n++, b += 997) {
            uint32_t u32 = (uint32_t)b;
            memcpy(&x[n], &u32, 4);
        }
        CHECK_OK(rtm_be_unary(BE, y, x, n, 3, &err));
        if (!sync_ok())
            return;
        for (uint64_t i = 0; i < n; i++) {
            double ref = log((double)x[i]);
            /* relative to ln x, or to one unit of its scale near x = 1, where ln x → 0 */
            double rel = fabs((double)y[i] - ref) / fmax(fabs(ref), 0x1p-24) / U;
            if (!(rel <= worst))
                worst = rel;
        }
        n_done += n;
    }
    const uint64_t n1 = 200001;
    for (uint64_t i = 0; i < n1; i++)
        x[i] = i == 0 ? 0.0f : (float)(1e-30 * pow(5e38, (double)(i - 1) / (double)(n1 - 2)));
    CHECK_OK(rtm_be_unary(BE, y, x, n1, 4, &err));
    if (!sync_ok())
        return;
    for (uint64_t i = 0; i < n1; i++) {
        double ref = log1p((double)x[i]), rel = ref != 0 ? fabs((double)y[i] - ref) / ref / U : fabs((double)y[i]);
        if (!(rel <= worst1))
            worst1 = rel;
    }
    printf("  %s: rtm_log over %llu floats: max error %.3f U; rtm_log1p over [0, 5e8]: %.3f U\n", DEV,
           (unsigned long long)n_done, worst, worst1);
    CHECKF(worst <= LOG_ERR_U, "rtm_log error %.3f U above the stated %.1f U", worst, LOG_ERR_U);
    CHECKF(worst1 <= LOG_ERR_U + 2, "rtm_log1p error %.3f U above the stated %.1f U", worst1, LOG_ERR_U + 2);
    float ends[3] = {1.0f, 0.0f, -1.0f};
    memcpy(x, ends, sizeof ends);
    CHECK_OK(rtm_be_unary(BE, y, x, 3, 3, &err));
    if (sync_ok())
        CHECK(y[0] == 0.0f && isinf(y[1]) && y[1] < 0 && isnan(y[2]));
    rtm_be_free(BE, x);
    rtm_be_free(BE, y);
}

/* ---------------------------------------------------------------- Hadamard */

/* The activation's rotation against quant/'s tq_hadamard_rotate, bit for bit: block lengths
 * m·2^k for m = 1, 12, 20, 28, one and several blocks, signs stored as f16, bf16 or f32. */
static void hadamard_bits(void)
{
    static const uint64_t cols[] = {16,  32,  48,  80,   96,   112,  144,  160,   224,    256,
                                    384, 640, 768, 896, 1024, 4096, 5120, 14336, 2 * 96, 3 * 160};
    static const tq_dtype gd[] = {TQ_DT_F16, TQ_DT_BF16, TQ_DT_F32};
    tq_err err = {0};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
        uint64_t n = cols[c], blk = tq_hadamard_block(n);
        tq_dtype gdt = gd[c % 3];
        float *x = dmem(n), *out = dmem(n), *ref = malloc(n * 4), *sg = malloc(n * 4);
        void *signs = malloc(n * 4);
        for (uint64_t j = 0; j < n; j++) {
            x[j] = (float)nrand();
            sg[j] = urand() < 0.5 ? -1.0f : 1.0f;
            if (gdt == TQ_DT_F32)
                ((float *)signs)[j] = sg[j];
            else
                ((uint16_t *)signs)[j] = enc(gdt, sg[j]);
            ref[j] = x[j];
        }
        CHECK(tq_hadamard_rotate(ref, n, sg, blk) == 0);
        for (int ord = 0; ord < ORDERS; ord++) {
            rtm_shim_reverse = ord;
            memset(out, 0xff, n * 4);
            CHECK_OK(rtm_be_rotate(BE, x, signs, gdt, n, out, &err));
            if (!sync_ok())
                break;
            CHECKF(memcmp(out, ref, n * 4) == 0, "rotation of %llu (block %llu) differs from quant/",
                   (unsigned long long)n, (unsigned long long)blk);
            order_check(ord, out, n, "hadamard");
        }
        rtm_shim_reverse = 0;
        free(ref);
        free(sg);
        free(signs);
        rtm_be_free(BE, x);
        rtm_be_free(BE, out);
    }
}

/* ---------------------------------------------------------------- matrix-vector products */

typedef struct mat {
    rt_linear l;
    void *w, *scales, *biases, *codebook, *signs, *bias;
} mat;

static void mat_free(mat *m)
{
    free(m->w);
    free(m->scales);
    free(m->biases);
    free(m->codebook);
    free(m->signs);
    free(m->bias);
}

static void with_bias(mat *m, int bias)
{
    if (!bias)
        return;
    static const tq_dtype bd[] = {TQ_DT_F32, TQ_DT_F16, TQ_DT_BF16};
    m->l.biasdt = bd[irand(3)];
    m->bias = rand_vals(m->l.biasdt, m->l.rows * (m->l.rstep ? m->l.rstep : 1), 1.0);
    m->l.bias = m->bias;
}

static void mat_init(mat *m, int kind, uint64_t rows, uint64_t cols, uint64_t group)
{
    memset(m, 0, sizeof *m);
    m->l.kind = kind;
    m->l.rows = rows;
    m->l.cols = cols;
    m->l.group = group;
    m->l.ngroups = group ? cols / group : 0;
}

static void make_dense(mat *m, uint64_t rows, uint64_t cols, tq_dtype wdt, int bias)
{
    mat_init(m, RT_DENSE, rows, cols, 0);
    m->l.wdt = wdt;
    m->w = rand_vals(wdt, rows * cols, 0.5);
    m->l.w = m->w;
    with_bias(m, bias);
}

/* Random indices packed by quant/'s tq_pack (epw = 32/bits per word, LSB first). */
static void rand_packed(mat *m, uint64_t rows, uint64_t cols, int bits)
{
    uint64_t wpr = tq_pack_words(cols, bits);
    uint8_t *idx = malloc(cols);
    m->w = calloc(rows * wpr + 1, 4);
    for (uint64_t r = 0; r < rows; r++) {
        for (uint64_t j = 0; j < cols; j++)
            idx[j] = (uint8_t)irand(1u << bits);
        tq_pack(idx, cols, bits, (uint32_t *)m->w + r * wpr);
    }
    free(idx);
    m->l.w = m->w;
    m->l.wpr = wpr;
    m->l.bits = (uint64_t)bits;
}

static void make_tq(mat *m, uint64_t rows, uint64_t cols, int bits, uint64_t group, tq_dtype sdt, tq_dtype cdt,
                    tq_dtype gdt, int bias)
{
    mat_init(m, RT_TQ, rows, cols, group);
    rand_packed(m, rows, cols, bits);
    m->l.sdt = sdt;
    m->scales = malloc(rows * m->l.ngroups * 4);
    for (uint64_t i = 0; i < rows * m->l.ngroups; i++) {
        float v = (float)(0.01 + 0.05 * fabs(nrand()));
        if (sdt == TQ_DT_F32)
            ((float *)m->scales)[i] = v;
        else
            ((uint16_t *)m->scales)[i] = enc(sdt, v);
    }
    m->l.scales = m->scales;
    tq_codebook cb;
    tq_err err = {0};
    CHECK_OK(tq_codebook_lloyd_max(bits, &cb, &err));
    m->l.cdt = cdt;
    m->codebook = malloc(64);
    for (int q = 0; q < (1 << bits); q++) {
        if (cdt == TQ_DT_F32)
            ((float *)m->codebook)[q] = cb.c[q];
        else
            ((uint16_t *)m->codebook)[q] = cb.f16[q];
    }
    m->l.codebook = m->codebook;
    m->l.gdt = gdt;
    m->signs = malloc(cols * 4);
    for (uint64_t j = 0; j < cols; j++) {
        float v = urand() < 0.5 ? -1.0f : 1.0f;
        if (gdt == TQ_DT_F32)
            ((float *)m->signs)[j] = v;
        else
            ((uint16_t *)m->signs)[j] = enc(gdt, v);
    }
    m->l.signs = m->signs;
    with_bias(m, bias);
}

static void make_affine(mat *m, uint64_t rows, uint64_t cols, int bits, uint64_t group, tq_dtype sdt, int bias)
{
    mat_init(m, RT_AFFINE, rows, cols, group);
    rand_packed(m, rows, cols, bits);
    m->l.sdt = m->l.zdt = sdt;
    m->scales = rand_vals(sdt, rows * m->l.ngroups, 0.02);
    m->biases = rand_vals(sdt, rows * m->l.ngroups, 0.1);
    m->l.scales = m->scales;
    m->l.biases = m->biases;
    with_bias(m, bias);
}

/* MXFP4 rows (gpt-oss): random nibbles, block scales 2^-10 .. 2^10 (and the smallest, 2^-127,
 * in one block), rows stored rstep apart as gpt-oss's interleaved gate/up. */
static void make_mxfp4(mat *m, uint64_t rows, uint64_t cols, uint64_t rstep, int bias)
{
    mat_init(m, RT_MXFP4, rows, cols, 0);
    m->l.rstep = rstep;
    uint64_t stored = rows * rstep, nb = cols / 32;
    m->w = malloc(stored * nb * 16 + 1);
    m->scales = malloc(stored * nb + 1);
    for (uint64_t i = 0; i < stored * nb * 16; i++)
        ((uint8_t *)m->w)[i] = (uint8_t)irand(256);
    for (uint64_t i = 0; i < stored * nb; i++)
        ((uint8_t *)m->scales)[i] = (uint8_t)(117 + irand(21));
    ((uint8_t *)m->scales)[0] = 0;
    m->l.w = m->w;
    m->l.scales = m->scales;
    with_bias(m, bias);
}

static double ldv(tq_dtype dt, const void *p, uint64_t i)
{
    return (double)rt_load_f(dt, p, i);
}

/* y = W x in double from the stored parts, and Σ|terms| (xr: the rotated x for TurboQuant). */
static void mv_ref(const rt_linear *l, const float *x, const float *xr, uint64_t r, double *y, double *sabs)
{
    double s = 0, a = 0;
    const uint32_t *w = (const uint32_t *)l->w + r * l->wpr;
    int packed = l->kind == RT_TQ || l->kind == RT_AFFINE;
    uint32_t mask = packed ? (1u << l->bits) - 1 : 0, epw = packed ? 32 / (uint32_t)l->bits : 1;
    for (uint64_t j = 0; j < l->cols; j++) {
        double t, tb = 0;
        if (l->kind == RT_DENSE) {
            t = ldv(l->wdt, l->w, r * l->cols + j) * x[j];
        } else if (l->kind == RT_MXFP4) {
            uint64_t rr = r * l->rstep, nb = l->cols / 32;
            uint8_t byte = ((const uint8_t *)l->w)[rr * nb * 16 + j / 2], sc = ((const uint8_t *)l->scales)[rr * nb + j / 32];
            t = (double)tq_mxfp4_value(j % 2 ? byte >> 4 : byte & 15u, sc) * x[j];
        } else {
            uint32_t q = (w[j / epw] >> ((j % epw) * l->bits)) & mask;
            uint64_t gi = r * l->ngroups + j / l->group;
            if (l->kind == RT_TQ) {
                t = ldv(l->cdt, l->codebook, q) * xr[j] * ldv(l->sdt, l->scales, gi);
            } else {
                t = ldv(l->sdt, l->scales, gi) * q * x[j];
                tb = ldv(l->zdt, l->biases, gi) * x[j];
            }
        }
        s += t + tb;
        a += fabs(t) + fabs(tb);
    }
    uint64_t br = r * (l->rstep ? l->rstep : 1);
    if (l->bias) {
        s += ldv(l->biasdt, l->bias, br);
        a += fabs(ldv(l->biasdt, l->bias, br));
    }
    *y = s;
    *sabs = a;
}

/* mv_tq's codes per chunk and chunks per row (docs/metal.md, mv_tq). */
static uint64_t tq_chunk(const rt_linear *l, uint64_t *nch)
{
    *nch = (l->wpr + RTM_MV_CW - 1) / RTM_MV_CW;
    return RTM_MV_CW * (32 / l->bits);
}

/* The largest number of roundings one term of a quantized row goes through in the simd-group
 * order of mv_tq and mv_affine: the product value·x, at most V additions in its segment (the
 * first onto +0), ·scale (affine: and + bias·Σx, whose x terms go through V additions and the
 * product), at most ⌈chunks/32⌉ additions to its lane's accumulator, 5 butterfly levels, the
 * bias; + 1 for the value·scale product of the reference. */
static double mv_q_depth(const rt_linear *l)
{
    uint64_t nch, V = tq_chunk(l, &nch);
    return 1 + (double)V + 1 + (l->kind == RT_AFFINE ? 1 : 0) + (double)((nch + RTM_SIMD - 1) / RTM_SIMD) + 5 +
           (l->bias ? 1 : 0) + 1;
}

/* The simd-group order of mv_tq and mv_affine evaluated here in f32, statement by statement as
 * the kernel writes it (lane l: chunks c ≡ l mod 32; a segment — the part of a chunk inside one
 * group — summed from +0 in increasing j into d, and for affine its x into sx; d·scale, or
 * scale·d + bias·sx, added to the lane's accumulator; then the xor butterfly of
 * shim_internal.h and the bias): a model of the kernel, not an independent oracle (the f64
 * bound is that). Under A1 and A2 the kernel gives these bits. xr: x rotated for TurboQuant. */
static float q_term(const rt_linear *l, float d, float sx, uint64_t gi)
{
    float sc = rt_load_f(l->sdt, l->scales, gi);
    if (l->kind != RT_AFFINE)
        return d * sc;
    float t1 = sc * d;
    float t2 = rt_load_f(l->zdt, l->biases, gi) * sx;
    return t1 + t2;
}

/* The xor butterfly over 32 lanes (shim_internal.h) and the output bias, as the kernels end. */
static float lanes_sum(const rt_linear *l, float *v, uint64_t r)
{
    float nv[32];
    for (int m = 1; m < 32; m <<= 1) {
        for (int k = 0; k < 32; k++)
            nv[k] = v[k] + v[k ^ m];
        memcpy(v, nv, sizeof nv);
    }
    float y = v[0];
    if (l->bias) {
        float b = rt_load_f(l->biasdt, l->bias, r * (l->rstep ? l->rstep : 1));
        y = y + b;
    }
    return y;
}

/* mv_dense's order in f32 (lane l: chunks of 4 elements c ≡ l mod 32, each product added to
 * the lane's accumulator from +0 in increasing j; the butterfly; the bias): its C model,
 * bit for bit under A1 and A2. */
static float mv_dense_model(const rt_linear *l, const float *x, uint64_t r)
{
    uint64_t nch = (l->cols + 3) / 4;
    float v[32];
    for (uint64_t lane = 0; lane < 32; lane++) {
        float acc = 0.0f;
        for (uint64_t c = lane; c < nch; c += 32)
            for (uint64_t j = 4 * c; j < 4 * c + 4 && j < l->cols; j++) {
                float p = rt_load_f(l->wdt, l->w, r * l->cols + j) * x[j];
                acc = acc + p;
            }
        v[lane] = acc;
    }
    return lanes_sum(l, v, r);
}

/* mv_mxfp4's order in f32 (lane l: blocks c ≡ l mod 32; d = Σ E2M1[q]·x in increasing j from
 * +0, d·2^(s-127) added to the lane's accumulator; the butterfly; the bias): its C model, bit
 * for bit under A1 and A2, and A4 (d·2^-127 may be subnormal). The E2M1 values are
 * tq_mxfp4_value's at scale 127 (2^0). */
static float mv_mxfp4_model(const rt_linear *l, const float *x, uint64_t r)
{
    uint64_t nb = l->cols / 32, rr = r * l->rstep;
    const uint8_t *w = (const uint8_t *)l->w + rr * nb * 16, *sc = (const uint8_t *)l->scales + rr * nb;
    float v[32];
    for (uint64_t lane = 0; lane < 32; lane++) {
        float acc = 0.0f;
        for (uint64_t c = lane; c < nb; c += 32) {
            float d = 0.0f;
            for (uint64_t j = 32 * c; j < 32 * c + 32; j++) {
                uint8_t byte = w[j / 2];
                float p = tq_mxfp4_value(j % 2 ? byte >> 4 : byte & 15u, 127) * x[j];
                d = d + p;
            }
            uint32_t bits = sc[c] ? (uint32_t)sc[c] << 23 : 0x00400000u;
            float s2;
            memcpy(&s2, &bits, 4);
            float t = d * s2;
            acc = acc + t;
        }
        v[lane] = acc;
    }
    return lanes_sum(l, v, r);
}

/* mv_mxfp4's rounding depth: the product, at most 32 additions in its block (the first onto
 * +0), the scale's product, at most ⌈blocks/32⌉ additions to the lane's accumulator, 5 butterfly
 * levels, the bias. */
static double mv_mxfp4_depth(const rt_linear *l)
{
    uint64_t nb = l->cols / 32;
    return 1 + 32 + 1 + (double)((nb + 31) / 32) + 5 + (l->bias ? 1 : 0);
}

/* mv_dense's rounding depth: the product, at most 4·⌈chunks/32⌉ additions to the lane's
 * accumulator, 5 butterfly levels, the bias. */
static double mv_dense_depth(const rt_linear *l)
{
    uint64_t nch = (l->cols + 3) / 4;
    return 1 + 4.0 * (double)((nch + 31) / 32) + 5 + (l->bias ? 1 : 0);
}

static float mv_q_model(const rt_linear *l, const float *xr, uint64_t r)
{
    uint64_t nch, V = tq_chunk(l, &nch), epw = 32 / l->bits;
    const uint32_t *w = (const uint32_t *)l->w + r * l->wpr;
    uint32_t mask = (1u << l->bits) - 1;
    float v[32], nv[32];
    for (uint64_t lane = 0; lane < 32; lane++) {
        float acc = 0.0f;
        for (uint64_t c = lane; c < nch; c += 32) {
            float s = 0.0f, sx = 0.0f;
            int open = 0;
            uint64_t j = c * V, end = c * V + V < l->cols ? c * V + V : l->cols;
            for (; j < end; j++) {
                uint32_t q = (w[j / epw] >> ((j % epw) * l->bits)) & mask;
                float val = l->kind == RT_AFFINE ? (float)q : rt_load_f(l->cdt, l->codebook, q);
                float p = val * xr[j];
                s = s + p;
                sx = sx + xr[j];
                open = 1;
                if ((j + 1) % l->group == 0) {
                    float t = q_term(l, s, sx, r * l->ngroups + j / l->group);
                    acc = acc + t;
                    s = 0.0f;
                    sx = 0.0f;
                    open = 0;
                }
            }
            if (open) {
                float t = q_term(l, s, sx, r * l->ngroups + (j - 1) / l->group);
                acc = acc + t;
            }
        }
        v[lane] = acc;
    }
    for (int m = 1; m < 32; m <<= 1) {
        for (int k = 0; k < 32; k++)
            nv[k] = v[k] + v[k ^ m];
        memcpy(v, nv, sizeof v);
    }
    float y = v[0];
    if (l->bias) {
        float b = rt_load_f(l->biasdt, l->bias, r * (l->rstep ? l->rstep : 1));
        y = y + b;
    }
    return y;
}

/* The largest number of roundings one term of a row goes through in the CPU runtime's order
 * (runtime/kernels.c: 8 lanes, docs/metal.md, Matvec), which mv_dense, mv_mxfp4 and mv_affine
 * keep. */
static double mv_depth(const rt_linear *l)
{
    double bias = l->bias ? 1 : 0;
    if (l->kind == RT_DENSE || l->kind == RT_MXFP4)
        return (double)((l->cols + 7) / 8) + 3 + bias;
    double m = (double)((l->group + 7) / 8), ng = (double)l->ngroups;
    if (l->kind == RT_TQ)
        return m + 3 + 1 + (ng - 1) + 1 + bias; /* + 1: the codebook·scale product of the reference */
    double g = (double)l->group - 1;
    return (m + 3 > g ? m + 3 : g) + 2 + (ng - 1) + bias;
}

/* The largest |GPU − CPU| / Σ|terms| of quantized rows seen, in units of U (printed by
 * matvec_tq and matvec_affine). */
static double mv_worst_cpu;

/* GPU backend vs the CPU runtime's rt_matvec bit for bit (TurboQuant: vs mv_tq's order modelled
 * in C bit for bit, vs the CPU within the sum of the two orders' bounds), and vs the double
 * reference within γ(depth)·Σ|terms|, in both thread orders. */
static void check_mv(mat *m, const char *what)
{
    const rt_linear *l = &m->l;
    tq_err err = {0};
    float *x = dmem(l->cols), *y = dmem(l->rows), *cpu = malloc(l->rows * 4), *xr = malloc(l->cols * 4 + 4);
    for (uint64_t j = 0; j < l->cols; j++)
        x[j] = (float)nrand();
    rt_scratch scr = {0};
    CHECK_OK(rt_matvec(POOL, l, x, cpu, &scr, &err));
    free(scr.xr);
    if (l->kind == RT_TQ) {
        for (uint64_t j = 0; j < l->cols; j++)
            xr[j] = x[j] * rt_load_f(l->gdt, l->signs, j);
        if (!l->norot)
            CHECK(tq_hadamard_rotate(xr, l->cols, NULL, tq_hadamard_block(l->cols)) == 0);
    }
    for (int ord = 0; ord < ORDERS; ord++) {
        rtm_shim_reverse = ord;
        memset(y, 0xff, l->rows * 4);
        CHECK_OK(rtm_be_matvec(BE, l, x, y, &err));
        if (!sync_ok())
            break;
        uint64_t diff = 0;
        /* every matvec's own order (simd groups, chunks per lane, a butterfly over 32 lanes):
         * its C model's bits, resting on A1 and A2, and for MXFP4 on A4 (its block scale 2^-127
         * makes subnormal results; matvec_mxfp4 shows one flushed) */
        for (uint64_t r = 0; r < l->rows; r++) {
            float mo = l->kind == RT_DENSE   ? mv_dense_model(l, x, r)
                       : l->kind == RT_MXFP4 ? mv_mxfp4_model(l, x, r)
                                             : mv_q_model(l, l->kind == RT_TQ ? xr : x, r);
            diff += memcmp(&y[r], &mo, 4) != 0;
        }
        CHECKF(diff == 0 || !exact("A2") || (l->kind == RT_MXFP4 && !exact("A4")),
               "%s %llux%llu: %llu rows differ from the simd-group order modelled in C", what,
               (unsigned long long)l->rows, (unsigned long long)l->cols, (unsigned long long)diff);
        /* against exact arithmetic (f64), whatever the order, fused or flushed: γ(depth)·Σ|terms|,
         * plus an absolute allowance per operation a term goes through: 2^-149 where a result may
         * be subnormal (MXFP4's scale 2^-127; the relative bound does not hold there), FLT_MIN
         * where subnormals are flushed (A4 dropped: an MXFP4 row of block scale 2^-127 comes out
         * 0); against the CPU runtime: the two orders' bounds added (each is within its own of
         * the exact value), no assumption beyond A1 */
        double g = gam(l->kind == RT_DENSE   ? mv_dense_depth(l)
                       : l->kind == RT_MXFP4 ? mv_mxfp4_depth(l)
                                             : mv_q_depth(l));
        double gc = gam(mv_depth(l));
        double flushed = !exact("A4")          ? (double)(l->cols + 64) * FLT_MIN
                         : l->kind == RT_MXFP4 ? (double)(l->cols + 64) * ldexp(1.0, -149)
                                               : 1e-300;
        for (uint64_t r = 0; r < l->rows; r++) {
            double ref, sabs;
            mv_ref(l, x, xr, r, &ref, &sabs);
            CHECKF(fabs((double)y[r] - ref) <= g * sabs + flushed, "%s row %llu: |%.9g - %.9g| > %.3g", what,
                   (unsigned long long)r, y[r], ref, g * sabs);
            double d = fabs((double)y[r] - (double)cpu[r]);
            CHECKF(d <= (g + gc) * sabs + 2 * flushed, "%s row %llu: |%.9g - the CPU's %.9g| > %.3g", what,
                   (unsigned long long)r, y[r], cpu[r], (g + gc) * sabs);
            mv_worst_cpu = fmax(mv_worst_cpu, sabs > 0 ? d / sabs / U : 0);
        }
        order_check(ord, y, l->rows, what);
    }
    rtm_shim_reverse = 0;
    free(cpu);
    free(xr);
    rtm_be_free(BE, x);
    rtm_be_free(BE, y);
}

static void matvec_dense(void)
{
    static const tq_dtype wd[] = {TQ_DT_F32, TQ_DT_F16, TQ_DT_BF16};
    static const uint64_t fixed[][2] = {{1, 1}, {32, 8}, {31, 9}, {33, 7}, {65, 257}, {1, 1000}, {300, 3}};
    for (int i = 0; i < 24; i++) {
        uint64_t rows = i < 7 ? fixed[i][0] : 1 + irand(100), cols = i < 7 ? fixed[i][1] : 1 + irand(300);
        mat m;
        make_dense(&m, rows, cols, wd[i % 3], i % 2);
        check_mv(&m, "dense");
        mat_free(&m);
    }
    /* rows long enough that each lane takes several chunks; 2050 and 4097 end in a partial
     * chunk (no vector loads) */
    static const uint64_t lc[] = {4096, 2050, 4097};
    for (int i = 0; i < 3; i++) {
        mat m;
        make_dense(&m, 1 + irand(40), lc[i], wd[i], i % 2);
        check_mv(&m, "dense long rows");
        mat_free(&m);
    }
    printf("  %s: dense rows: largest |GPU - CPU| %.3f U of sum |terms|\n", DEV, mv_worst_cpu);
    mv_worst_cpu = 0;
}

/* TurboQuant rows: 2, 3 (10 per word, 2 high bits unused) and 4 bits; groups of 32, 64 and 36
 * (lanes with uneven counts); scales, codebooks and signs in each stored type; ragged rows. */
static void matvec_tq(void)
{
    static const struct {
        uint64_t cols, group;
    } sh[] = {{64, 32}, {96, 32}, {144, 36}, {160, 32}, {224, 32}, {384, 64}, {640, 64}, {768, 128}, {448, 64}};
    static const tq_dtype d3[] = {TQ_DT_F16, TQ_DT_BF16, TQ_DT_F32};
    for (int i = 0; i < 27; i++) {
        int bits = 2 + i % 3;
        uint64_t rows = i < 3 ? (uint64_t)(i + 1) : 1 + irand(90);
        mat m;
        make_tq(&m, rows, sh[i % 9].cols, bits, sh[i % 9].group, d3[i % 3], d3[(i / 3) % 3], d3[(i / 9) % 3], i % 4 == 1);
        check_mv(&m, bits == 3 ? "tq3" : bits == 2 ? "tq2" : "tq4");
        mat_free(&m);
    }
    /* Rows long enough that each lane takes several chunks (its accumulator's order, the
     * host's group steps), groups that chunks cross (36; 3 bits), words per row odd (no 64-bit
     * loads). */
    static const struct {
        uint64_t cols, group;
        int bits;
    } lg[] = {{4096, 64, 4}, {2048, 128, 2}, {2560, 64, 3}, {2160, 36, 4}, {2160, 36, 2}, {1440, 32, 3}};
    for (int i = 0; i < 6; i++) {
        mat m;
        make_tq(&m, 1 + irand(40), lg[i].cols, lg[i].bits, lg[i].group, d3[i % 3], d3[(i + 1) % 3], d3[(i + 2) % 3], i % 2);
        check_mv(&m, "tq long rows");
        mat_free(&m);
    }
    /* A module quantized unrotated (rotation "none", every sign +1: runtime/model.c sets
     * norot): the CPU runtime multiplies by the signs and skips the Hadamard transform, and so
     * must the backend (before, it rotated x anyway). */
    mat m;
    make_tq(&m, 37, 256, 4, 64, TQ_DT_F16, TQ_DT_F16, TQ_DT_F16, 0);
    for (uint64_t j = 0; j < 256; j++)
        ((uint16_t *)m.signs)[j] = tq_f32_to_f16(1.0f);
    m.l.norot = 1;
    check_mv(&m, "tq unrotated");
    mat_free(&m);
    printf("  %s: TurboQuant rows: largest |GPU - CPU| %.3f U of sum |terms|\n", DEV, mv_worst_cpu);
    mv_worst_cpu = 0;
}

static void matvec_affine(void)
{
    static const tq_dtype d3[] = {TQ_DT_F16, TQ_DT_BF16, TQ_DT_F32};
    static const int bits[] = {4, 8, 2};
    static const uint64_t groups[] = {32, 64, 128};
    for (int i = 0; i < 18; i++) {
        uint64_t group = groups[i % 3], cols = group * (1 + irand(6)), rows = 1 + irand(90);
        mat m;
        make_affine(&m, rows, cols, bits[(i / 3) % 3], group, d3[i % 3], i % 5 == 2);
        check_mv(&m, "affine");
        mat_free(&m);
    }
    /* rows long enough that lanes take several chunks, and groups chunks cross (36: the
     * general path) */
    static const struct {
        uint64_t cols, group;
        int bits;
    } lg[] = {{4096, 64, 4}, {2048, 128, 8}, {1536, 32, 2}, {2160, 36, 4}};
    for (int i = 0; i < 4; i++) {
        mat m;
        make_affine(&m, 1 + irand(40), lg[i].cols, lg[i].bits, lg[i].group, d3[i % 3], i % 2);
        check_mv(&m, "affine long rows");
        mat_free(&m);
    }
    printf("  %s: quantized rows: largest |GPU - CPU| %.3f U of sum |terms|\n", DEV, mv_worst_cpu);
}

/* gpt-oss's MXFP4 experts, rows one or two apart (interleaved gate/up) with biases alike; a
 * block scale 255 (E8M0 NaN) or 254 with a value of 2 or more is refused as on the CPU. */
static void matvec_mxfp4(void)
{
    for (int i = 0; i < 12; i++) {
        mat m;
        make_mxfp4(&m, 1 + irand(70), 32 * (1 + irand(12)), 1 + (uint64_t)(i % 2), i % 3 != 0);
        check_mv(&m, "mxfp4");
        mat_free(&m);
    }
    /* rows of gpt-oss's width (2880: 90 blocks, so lanes take several) */
    for (int i = 0; i < 2; i++) {
        mat m;
        make_mxfp4(&m, 1 + irand(40), 2880, 1 + (uint64_t)i, i);
        check_mv(&m, "mxfp4 long rows");
        mat_free(&m);
    }
    printf("  %s: MXFP4 rows: largest |GPU - CPU| %.3f U of sum |terms|\n", DEV, mv_worst_cpu);
    mv_worst_cpu = 0;
    tq_err err = {0};
    mat m;
    make_mxfp4(&m, 5, 64, 1, 0);
    float *x = dmem(64), *y = dmem(5);
    ((uint8_t *)m.scales)[7] = 255;
    CHECK(rtm_be_matvec(BE, &m.l, x, y, &err) != 0 && strstr(err.msg, "block 1"));
    ((uint8_t *)m.scales)[7] = 254;
    memset((uint8_t *)m.w + 3 * 32 + 16, 0x11, 16); /* row 3, block 1: values 0.5 only */
    CHECK_OK(rtm_be_matvec(BE, &m.l, x, y, &err));
    ((uint8_t *)m.w)[3 * 32 + 16 + 5] = 0x41; /* a 2 in it: 2·2^127 overflows */
    CHECK(rtm_be_matvec(BE, &m.l, x, y, &err) != 0 && strstr(err.msg, "scale 254"));
    sync_ok();
    rtm_be_free(BE, x);
    rtm_be_free(BE, y);
    mat_free(&m);
    /* One row of one block of scale 2^-127 (E8M0 0): every weight is subnormal. The CPU's bits
     * under A4 (subnormals kept); with subnormals flushed (ftz mode, as a GPU may) the row is
     * 0 — which shows the mode takes effect. */
    make_mxfp4(&m, 1, 32, 1, 0);
    float cpu1;
    x = dmem(32);
    y = dmem(1);
    for (int j = 0; j < 32; j++)
        x[j] = 1.0f;
    rt_scratch scr = {0};
    CHECK_OK(rt_matvec(POOL, &m.l, x, &cpu1, &scr, &err));
    free(scr.xr);
    CHECK_OK(rtm_be_matvec(BE, &m.l, x, y, &err));
    if (sync_ok()) {
        if (exact("A4"))
            CHECKF(memcmp(y, &cpu1, 4) == 0 && cpu1 != 0.0f, "subnormal mxfp4 row: %.9g vs the CPU's %.9g", y[0], cpu1);
        else
            CHECKF(y[0] == 0.0f && cpu1 != 0.0f, "subnormal mxfp4 row, flushed: %.9g (the CPU's %.9g)", y[0], cpu1);
    }
    rtm_be_free(BE, x);
    rtm_be_free(BE, y);
    mat_free(&m);
}

/* TurboQuant matvecs rotate each input vector once (runtime/metal/backend.c, rotation()):
 * two matrices with the same signs and the same x share one rotation; a different sign vector,
 * a kernel writing x, or the CPU writing x after a sync each make a new one. Every product is
 * held to mv_tq's model on the rotation of the x it was given (A1, A2), so a stale rotation
 * fails here whatever the counter says. */
static void rotation_reuse(void)
{
    const uint64_t rows = 40, cols = 512;
    tq_err err = {0};
    mat a, b, c;
    make_tq(&a, rows, cols, 4, 64, TQ_DT_F16, TQ_DT_F16, TQ_DT_F16, 0);
    make_tq(&b, rows, cols, 3, 64, TQ_DT_F16, TQ_DT_F16, TQ_DT_F16, 0);
    make_tq(&c, rows, cols, 4, 64, TQ_DT_F16, TQ_DT_F16, TQ_DT_F16, 0);
    b.l.signs = a.l.signs; /* shared, as a layer's experts share theirs */
    float *x = dmem(cols), *x2 = dmem(cols), *y = dmem(4 * rows), *xr = malloc(cols * 4);
    for (uint64_t j = 0; j < cols; j++) {
        x[j] = (float)nrand();
        x2[j] = (float)nrand();
    }
    uint64_t r0 = rtm_be_rotations_reused(BE);
    /* the products' expected bits, each on x as it is when queued */
    const mat *seq[4] = {&a, &b, &c, &a};
    float want[4][40];
    for (int k = 0; k < 4; k++) {
        const rt_linear *l = &seq[k]->l;
        const float *xs = k == 3 ? x2 : x; /* before the 4th product, x becomes x2 */
        for (uint64_t j = 0; j < cols; j++)
            xr[j] = xs[j] * rt_load_f(l->gdt, l->signs, j);
        CHECK(tq_hadamard_rotate(xr, cols, NULL, tq_hadamard_block(cols)) == 0);
        for (uint64_t r = 0; r < rows; r++)
            want[k][r] = mv_q_model(l, xr, r);
    }
    for (int round = 0; round < 2; round++) {
        if (round == 1) /* the CPU writes x after a sync */
            for (uint64_t j = 0; j < cols; j++)
                x[j] = xr[j] = (float)nrand();
        CHECK_OK(rtm_be_matvec(BE, &a.l, x, y, &err));
        CHECK_OK(rtm_be_matvec(BE, &b.l, x, y + rows, &err)); /* same x, same signs: reused */
        CHECK_OK(rtm_be_matvec(BE, &c.l, x, y + 2 * rows, &err)); /* other signs: rotated */
        if (round == 0) {
            /* a kernel overwrites x: the next product must not reuse a's rotation */
            CHECK_OK(rtm_be_gather(BE, x, x2, 1, cols, cols, 0, &err));
            CHECK_OK(rtm_be_matvec(BE, &a.l, x, y + 3 * rows, &err));
        }
        if (!sync_ok())
            break;
        if (round == 0) {
            uint64_t bad = 0;
            for (int k = 0; k < 4; k++)
                for (uint64_t r = 0; r < rows; r++)
                    bad += memcmp(&y[k * rows + r], &want[k][r], 4) != 0;
            CHECKF(bad == 0 || !exact("A2"), "%llu products differ from mv_tq's model on the x they were given",
                   (unsigned long long)bad);
            CHECKF(rtm_be_rotations_reused(BE) - r0 == 1, "%llu rotations reused, expected 1",
                   (unsigned long long)(rtm_be_rotations_reused(BE) - r0));
        } else {
            /* after the sync the CPU's new x must be rotated again */
            for (uint64_t j = 0; j < cols; j++)
                xr[j] = x[j] * rt_load_f(a.l.gdt, a.l.signs, j);
            CHECK(tq_hadamard_rotate(xr, cols, NULL, tq_hadamard_block(cols)) == 0);
            uint64_t bad = 0;
            for (uint64_t r = 0; r < rows; r++) {
                float mo = mv_q_model(&a.l, xr, r);
                bad += memcmp(&y[r], &mo, 4) != 0;
            }
            CHECKF(bad == 0 || !exact("A2"), "after the CPU wrote x: %llu rows differ from the model", (unsigned long long)bad);
            CHECKF(rtm_be_rotations_reused(BE) - r0 == 2, "%llu rotations reused, expected 2",
                   (unsigned long long)(rtm_be_rotations_reused(BE) - r0));
        }
    }
    rtm_be_free(BE, x);
    rtm_be_free(BE, x2);
    rtm_be_free(BE, y);
    free(xr);
    b.l.signs = NULL;
    mat_free(&a);
    mat_free(&b);
    mat_free(&c);
}

/* Integer paths bit for bit: with x = e_j the products give column j of the dequantized
 * matrix, which quant/'s own dequantizers compute: tq_dequantize_row (codebook[q]·scale of the
 * rotated row; the rotation is bypassed) and tq_affine_dequantize_row (scale·q + bias). */
static void unpack_bits(void)
{
    tq_err err = {0};
    for (int kind = 0; kind < 2; kind++)
        for (int bits = 2; bits <= (kind == 0 ? 4 : 8); bits += kind == 0 ? 1 : 2) {
            if (kind == 1 && bits == 6)
                continue;
            uint64_t group = kind == 0 && bits == 3 ? 36 : 32, cols = group * 4, rows = 37;
            mat m;
            if (kind == 0)
                make_tq(&m, rows, cols, bits, group, TQ_DT_F16, TQ_DT_F32, TQ_DT_F16, 0);
            else
                make_affine(&m, rows, cols, bits, group, TQ_DT_F16, 0);
            float *deq = malloc(rows * cols * 4), *sc = malloc(rows * m.l.ngroups * 4), *bi = malloc(rows * m.l.ngroups * 4);
            for (uint64_t i = 0; i < rows * m.l.ngroups; i++) {
                sc[i] = rt_load_f(TQ_DT_F16, m.scales, i);
                if (kind == 1)
                    bi[i] = rt_load_f(TQ_DT_F16, m.biases, i);
            }
            for (uint64_t r = 0; r < rows; r++) {
                const uint32_t *w = (const uint32_t *)m.w + r * m.l.wpr;
                if (kind == 0)
                    tq_dequantize_row(w, (const uint16_t *)m.scales + r * m.l.ngroups, (const float *)m.codebook, bits,
                                      group, cols, deq + r * cols);
                else
                    tq_affine_dequantize_row(w, sc + r * m.l.ngroups, bi + r * m.l.ngroups, cols, bits, (int)group,
                                             deq + r * cols);
            }
            float *x = dmem(cols), *y = dmem(rows * cols);
            for (uint64_t j = 0; j < cols; j++) {
                memset(x, 0, cols * 4);
                x[j] = 1.0f;
                if (kind == 0)
                    CHECK_OK(rtm_be_matvec_rotated(BE, &m.l, x, y + j * rows, &err));
                else
                    CHECK_OK(rtm_be_matvec(BE, &m.l, x, y + j * rows, &err));
                if (!sync_ok())
                    break;
            }
            uint64_t bad = 0;
            for (uint64_t j = 0; j < cols; j++)
                for (uint64_t r = 0; r < rows; r++)
                    bad += memcmp(&y[j * rows + r], &deq[r * cols + j], 4) != 0;
            CHECKF(bad == 0, "%s %d-bit: %llu of %llu dequantized values differ from quant/'s", kind ? "affine" : "tq",
                   bits, (unsigned long long)bad, (unsigned long long)(rows * cols));
            rtm_be_free(BE, x);
            rtm_be_free(BE, y);
            free(deq);
            free(sc);
            free(bi);
            mat_free(&m);
        }
}

/* ---------------------------------------------------------------- RMSNorm, RoPE */

/* Relative error bound of RMSNorm for n values (docs/metal.md, RMSNorm): the sum of squares
 * through K = ceil(n/256) + 12 roundings, then /n, + eps (eps itself rounded to f32), sqrt,
 * 1/·, ·x, ·w. */
static double rms_bound(uint64_t n)
{
    double K = (double)((n + RTM_TG - 1) / RTM_TG) + 12, g = gam(K + 3);
    return 0.5 * g + g * g + gam(4);
}

static void rmsnorm(void)
{
    static const uint64_t ns[] = {1, 7, 64, 255, 256, 257, 1000, 4096, 5000};
    tq_err err = {0};
    double worst = 0, worst_cpu = 0;
    for (size_t c = 0; c < sizeof ns / sizeof *ns * 2; c++) {
        uint64_t n = ns[c % 9], count = 1 + irand(4);
        int has_w = c % 3 != 0, inplace = c % 4 == 1;
        double eps = c % 2 ? 1e-6 : 1e-5, scale = c % 5 == 0 ? 1e-3 : 3.0;
        float *x = dmem(n * count), *out = inplace ? x : dmem(n * count), *w = malloc(n * 4), *x0 = malloc(n * count * 4);
        float *cpu = malloc(n * count * 4);
        for (uint64_t i = 0; i < n * count; i++)
            x0[i] = (float)(nrand() * scale);
        for (uint64_t i = 0; i < n; i++)
            w[i] = (float)(1.0 + 0.3 * nrand());
        for (uint64_t v = 0; v < count; v++)
            rt_rmsnorm(cpu + v * n, x0 + v * n, has_w ? w : NULL, n, eps);
        for (int ord = 0; ord < ORDERS; ord++) {
            rtm_shim_reverse = ord;
            memcpy(x, x0, n * count * 4);
            CHECK_OK(rtm_be_rmsnorm(BE, out, x, has_w ? w : NULL, n, count, eps, &err));
            if (!sync_ok())
                break;
            double bound = rms_bound(n);
            for (uint64_t v = 0; v < count; v++) {
                double ss = 0;
                for (uint64_t i = 0; i < n; i++)
                    ss += (double)x0[v * n + i] * x0[v * n + i];
                double inv = 1.0 / sqrt(ss / (double)n + eps);
                for (uint64_t i = 0; i < n; i++) {
                    double ref = (has_w ? w[i] : 1.0) * x0[v * n + i] * inv, got = out[v * n + i];
                    double rel = ref != 0 ? fabs(got - ref) / fabs(ref) : fabs(got);
                    CHECKF(rel <= bound, "rmsnorm n=%llu: relative error %.3g U > %.3g U", (unsigned long long)n, rel / U,
                           bound / U);
                    worst = fmax(worst, rel);
                    float c1 = cpu[v * n + i];
                    if (c1 != 0)
                        worst_cpu = fmax(worst_cpu, fabs(got - (double)c1) / fabs((double)c1));
                }
            }
            order_check(ord, out, n * count, "rmsnorm");
        }
        rtm_shim_reverse = 0;
        rtm_be_free(BE, x);
        if (!inplace)
            rtm_be_free(BE, out);
        free(w);
        free(x0);
        free(cpu);
    }
    printf("  %s: rmsnorm max relative error %.3f U vs f64 (bound %.2f U at n = 5000), %.3f U vs the CPU runtime\n", DEV,
           worst / U, rms_bound(5000) / U, worst_cpu / U);
}

/* RoPE against the CPU runtime's rt_rope_apply bit for bit (NeoX and interleaved pairs,
 * partial rotary dims, vectors at a stride and offset). */
static void rope_bits(void)
{
    tq_err err = {0};
    for (int c = 0; c < 12; c++) {
        uint64_t hd = 8 * (1 + irand(20)), dim = 2 * (1 + irand(hd / 2)), count = 1 + irand(40);
        uint64_t off = c % 3 == 0 ? irand(8) : 0, stride = hd + off + (c % 2 ? 0 : irand(16));
        int inter = c % 2;
        uint64_t n = count * stride;
        float *v = dmem(n), *v0 = malloc(n * 4), *ref = malloc(n * 4), *cs = malloc(dim / 2 * 4), *sn = malloc(dim / 2 * 4);
        for (uint64_t i = 0; i < n; i++)
            v0[i] = ref[i] = (float)nrand();
        for (uint64_t i = 0; i < dim / 2; i++) {
            double a = urand() * 100;
            cs[i] = (float)cos(a);
            sn[i] = (float)sin(a);
        }
        tq_runner rr;
        memset(&rr, 0, sizeof rr);
        rr.c.rope.dim = dim;
        rr.c.rope.interleaved = inter;
        rr.rcos = cs;
        rr.rsin = sn;
        for (uint64_t k = 0; k < count; k++)
            rt_rope_apply(&rr, ref + k * stride + off);
        for (int ord = 0; ord < ORDERS; ord++) {
            rtm_shim_reverse = ord;
            memcpy(v, v0, n * 4);
            CHECK_OK(rtm_be_rope(BE, v, count, stride, off, &rr.c.rope, cs, sn, &err));
            if (!sync_ok())
                break;
            /* x0·c − x1·s as the CPU rounds it: rests on A2; with fused products each output is
             * within γ(2)·(|x0·c| + |x1·s|) of exact, as the CPU's is, so they differ by at most
             * twice that, bounded here by 4γ(2)·max|x| over the row. */
            if (exact("A2"))
                CHECKF(memcmp(v, ref, n * 4) == 0, "rope dim %llu of %llu (%s) differs from the CPU runtime's",
                       (unsigned long long)dim, (unsigned long long)hd, inter ? "interleaved" : "neox");
            else {
                double vmax = 0;
                for (uint64_t i = 0; i < n; i++)
                    vmax = fabs(v0[i]) > vmax ? fabs(v0[i]) : vmax;
                for (uint64_t i = 0; i < n; i++)
                    CHECKF(fabs((double)v[i] - ref[i]) <= 4 * gam(2) * vmax + 1e-38,
                           "rope [%llu]: %.9g vs %.9g", (unsigned long long)i, v[i], ref[i]);
            }
        }
        rtm_shim_reverse = 0;
        rtm_be_free(BE, v);
        free(v0);
        free(ref);
        free(cs);
        free(sn);
    }
}

/* ---------------------------------------------------------------- softmax, attention */

/* Relative error factor of a softmax weight whose exponent argument is off by at most eps_t,
 * with E the largest such error and K the depth of the denominator's sum (docs/metal.md,
 * Softmax): p̂/p - 1 ≤ exp(eps_t + E)·(1 + c)(1 + U)/((1 - c)(1 - γ_K)) - 1, c = EXP_ERR_U·U. */
static double soft_rel(double eps_t, double E, double K)
{
    double c = EXP_ERR_U * U;
    return exp(eps_t + E) * (1 + c) * (1 + U) / ((1 - c) * (1 - gam(K))) - 1;
}

/* Depth of a threadgroup sum of n values: a thread's chain, the 32-lane butterfly, the simd
 * groups in order (+ extra terms added after). */
static double tg_depth(uint64_t n, double extra)
{
    double m = (double)((n + RTM_TG - 1) / RTM_TG);
    return (m > 1 ? m - 1 : 0) + 5 + (RTM_TG / RTM_SIMD - 1) + extra;
}

static void softmax(void)
{
    static const uint64_t ns[] = {1, 2, 3, 31, 255, 256, 257, 1000, 3000};
    tq_err err = {0};
    for (size_t c = 0; c < 18; c++) {
        uint64_t n = ns[c % 9], count = 1 + irand(3), stride = n + (c % 2 ? irand(5) : 0);
        uint64_t tot = (count - 1) * stride + n;
        float *x = dmem(tot), *x0 = malloc(tot * 4);
        for (uint64_t i = 0; i < tot; i++)
            x0[i] = (float)(nrand() * (c % 3 == 0 ? 8.0 : 2.0));
        for (int ord = 0; ord < ORDERS; ord++) {
            rtm_shim_reverse = ord;
            memcpy(x, x0, tot * 4);
            CHECK_OK(rtm_be_softmax(BE, x, n, count, stride, &err));
            if (!sync_ok())
                break;
            for (uint64_t r = 0; r < count; r++) {
                const float *v = x0 + r * stride;
                double mx = -INFINITY, sum = 0, E = 0;
                for (uint64_t i = 0; i < n; i++)
                    mx = fmax(mx, v[i]);
                for (uint64_t i = 0; i < n; i++) {
                    sum += exp(v[i] - mx);
                    E = fmax(E, U * fabs(v[i] - mx));
                }
                for (uint64_t i = 0; i < n; i++) {
                    double p = exp(v[i] - mx) / sum, got = x[r * stride + i];
                    double bound = soft_rel(U * fabs(v[i] - mx), E, tg_depth(n, 0)) * p;
                    CHECKF(fabs(got - p) <= bound + 1e-38, "softmax n=%llu [%llu]: |%.9g - %.9g| > %.3g",
                           (unsigned long long)n, (unsigned long long)i, got, p, bound);
                }
            }
            order_check(ord, x, tot, "softmax");
        }
        rtm_shim_reverse = 0;
        rtm_be_free(BE, x);
        free(x0);
    }
}

/* One query position over a KV cache: grouped heads, sliding window, sinks, head dims below
 * and above the threadgroup, contexts below and above it. Bound (docs/metal.md, Attention):
 * scores off by a_t = γ(hd + 1)·|scale|·Σ|q·k|, weights by soft_rel, output sum γ(T). */
static void attention(void)
{
    static const uint64_t hds[] = {8, 16, 64, 80, 128, 300};
    static const uint64_t poss[] = {0, 1, 17, 255, 256, 600};
    tq_err err = {0};
    double worst = 0;
    for (int c = 0; c < 24; c++) {
        uint64_t hd = hds[c % 6], pos = poss[(c / 2) % 6], kvh = 1 + irand(3), group = 1 + irand(3), heads = kvh * group;
        uint64_t kvd = kvh * hd, t0 = c % 4 == 3 && pos > 4 ? pos - 4 : 0, stride = pos + 3;
        int sinks = c % 3 == 1;
        float scale = (float)(1.0 / sqrt((double)hd));
        float *q = dmem(heads * hd), *kc = dmem((pos + 1) * kvd), *vc = dmem((pos + 1) * kvd), *sk = malloc(heads * 4);
        float *att = dmem(heads * stride), *out = dmem(heads * hd);
        for (uint64_t i = 0; i < heads * hd; i++)
            q[i] = (float)(nrand() * 2);
        for (uint64_t i = 0; i < (pos + 1) * kvd; i++) {
            kc[i] = (float)nrand();
            vc[i] = (float)nrand();
        }
        for (uint64_t h = 0; h < heads; h++)
            sk[h] = (float)nrand();
        rtm_att a = {q, kc, vc, sinks ? sk : NULL, att, out, heads, hd, kvd, group, t0, pos, stride, scale};
        for (int ord = 0; ord < ORDERS; ord++) {
            rtm_shim_reverse = ord;
            memset(out, 0xff, heads * hd * 4);
            CHECK_OK(rtm_be_attention(BE, &a, &err));
            if (!sync_ok())
                break;
            for (uint64_t h = 0; h < heads; h++) {
                uint64_t kh = h / group, T = pos - t0 + 1;
                double *z = malloc(T * 8), *at = malloc(T * 8), *p = malloc(T * 8), zmax = -INFINITY, A = 0;
                for (uint64_t t = t0; t <= pos; t++) {
                    double s = 0, sa = 0;
                    for (uint64_t i = 0; i < hd; i++) {
                        s += (double)q[h * hd + i] * kc[t * kvd + kh * hd + i];
                        sa += fabs((double)q[h * hd + i] * kc[t * kvd + kh * hd + i]);
                    }
                    z[t - t0] = s * scale;
                    at[t - t0] = gam((double)hd + 1) * scale * sa;
                    zmax = fmax(zmax, z[t - t0]);
                    A = fmax(A, at[t - t0]);
                }
                if (sinks)
                    zmax = fmax(zmax, sk[h]);
                double sum = sinks ? exp(sk[h] - zmax) : 0, E = sinks ? U * (fabs(sk[h] - zmax) + 2 * A) : 0;
                for (uint64_t t = 0; t < T; t++) {
                    sum += exp(z[t] - zmax);
                    E = fmax(E, at[t] + U * (fabs(z[t] - zmax) + 2 * A));
                }
                for (uint64_t t = 0; t < T; t++)
                    p[t] = exp(z[t] - zmax) / sum;
                double K = tg_depth(T, sinks ? 1 : 0);
                for (uint64_t i = 0; i < hd; i++) {
                    double o = 0, bound = 0;
                    for (uint64_t t = 0; t < T; t++) {
                        double v = vc[(t0 + t) * kvd + kh * hd + i], rho = soft_rel(at[t] + U * (fabs(z[t] - zmax) + 2 * A), E, K);
                        o += p[t] * v;
                        bound += (rho + gam((double)T) * (1 + rho)) * p[t] * fabs(v);
                    }
                    double got = out[h * hd + i];
                    CHECKF(fabs(got - o) <= bound + 1e-37, "attention hd %llu pos %llu head %llu [%llu]: |%.9g - %.9g| > %.3g",
                           (unsigned long long)hd, (unsigned long long)pos, (unsigned long long)h, (unsigned long long)i,
                           got, o, bound);
                    if (bound > 0)
                        worst = fmax(worst, fabs(got - o) / bound);
                }
                free(z);
                free(at);
                free(p);
            }
            order_check(ord, out, heads * hd, "attention");
        }
        rtm_shim_reverse = 0;
        rtm_be_free(BE, q);
        rtm_be_free(BE, kc);
        rtm_be_free(BE, vc);
        rtm_be_free(BE, att);
        rtm_be_free(BE, out);
        free(sk);
    }
    printf("  %s: attention error at most %.3f of its bound\n", DEV, worst);
}

/* ---------------------------------------------------------------- routing */

/* The k largest of v[0..n) by definition: sort indices by value (descending), then index. */
static void topk_def(const double *v, uint64_t n, uint64_t k, uint64_t *ids)
{
    uint64_t *o = malloc(n * 8);
    for (uint64_t i = 0; i < n; i++)
        o[i] = i;
    for (uint64_t i = 1; i < n; i++) /* insertion sort: stable, so ties keep the lower index first */
        for (uint64_t j = i; j > 0 && v[o[j]] > v[o[j - 1]]; j--) {
            uint64_t t = o[j];
            o[j] = o[j - 1];
            o[j - 1] = t;
        }
    memcpy(ids, o, k * 8);
    free(o);
}

/* Every routing mode (forward.c route()): expert ids bit for bit against the rule evaluated in
 * double (DeepSeek-V3's group-limited choice by sigmoid + correction bias, scores 0 outside the
 * best groups), weights within their bound. Logits are a shuffled grid, so no two choices are
 * closer than the f32 rounding could reorder. */
static void route(void)
{
    static const uint64_t Es[] = {8, 60, 128, 300, 16, 64};
    tq_err err = {0};
    for (int c = 0; c < 18; c++) {
        int mode = c % 3;
        uint64_t E = Es[(c / 3) % 6], K = 1 + irand(E < 8 ? E : 8), ng = 1, tg = 1;
        if (mode == 2 && E % 4 == 0 && c % 2 == 0) {
            ng = E % 8 == 0 && E >= 16 ? 8 : 4;
            tg = 2;
            if (K > tg * (E / ng))
                K = tg * (E / ng);
        }
        int norm = c % 2;
        float route_scale = mode == 2 ? 2.5f : 1.0f;
        float *l = malloc(E * 4), *bias = malloc(E * 4);
        double *dl = malloc(E * 8), *sg = malloc(E * 8), *choice = malloc(E * 8);
        uint64_t *perm = malloc(E * 8), ref_ids[64], ids[64];
        for (uint64_t i = 0; i < E; i++)
            perm[i] = i;
        for (uint64_t i = E; i > 1; i--) {
            uint64_t j = irand(i), t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        for (uint64_t i = 0; i < E; i++) {
            l[i] = (float)(-3.0 + 6.0 * (double)perm[i] / (double)E);
            bias[i] = (float)(0.05 * (double)((perm[i] * 7 + 3) % E) / (double)E);
            dl[i] = l[i];
        }
        if (mode == 2) {
            for (uint64_t i = 0; i < E; i++) {
                sg[i] = 1.0 / (1.0 + exp(-dl[i]));
                choice[i] = sg[i] + bias[i];
            }
            if (ng > 1) {
                uint64_t per = E / ng, gids[64], two[2];
                double gs[64];
                for (uint64_t g = 0; g < ng; g++) {
                    topk_def(choice + g * per, per, 2, two);
                    gs[g] = choice[g * per + two[0]] + choice[g * per + two[1]];
                }
                topk_def(gs, ng, tg, gids);
                for (uint64_t g = 0; g < ng; g++) {
                    int keep = 0;
                    for (uint64_t t = 0; t < tg; t++)
                        keep |= gids[t] == g;
                    for (uint64_t i = g * per; !keep && i < (g + 1) * per; i++)
                        choice[i] = 0;
                }
            }
            topk_def(choice, E, K, ref_ids);
        } else {
            topk_def(dl, E, K, ref_ids);
        }
        /* reference weights */
        double w_ref[64], mx = -INFINITY, sum = 0, rel;
        double se = gam(EXP_ERR_U + 3);
        if (mode == 0) {
            double E_ = 0;
            for (uint64_t i = 0; i < E; i++)
                mx = fmax(mx, dl[i]);
            for (uint64_t i = 0; i < E; i++) {
                sum += exp(dl[i] - mx);
                E_ = fmax(E_, U * fabs(dl[i] - mx));
            }
            double s2 = 0;
            for (uint64_t k = 0; k < K; k++)
                s2 += w_ref[k] = exp(dl[ref_ids[k]] - mx) / sum;
            for (uint64_t k = 0; norm && k < K; k++)
                w_ref[k] /= s2;
            double rp = soft_rel(2 * E_, E_, tg_depth(E, 0));
            rel = norm ? (1 + rp) * (1 + rp) * (1 + gam((double)K + 1)) - 1 : rp;
        } else if (mode == 1) {
            double E_ = 0;
            for (uint64_t k = 0; k < K; k++) {
                sum += w_ref[k] = exp(dl[ref_ids[k]] - dl[ref_ids[0]]);
                E_ = fmax(E_, U * fabs(dl[ref_ids[k]] - dl[ref_ids[0]]));
            }
            for (uint64_t k = 0; k < K; k++)
                w_ref[k] /= sum;
            rel = soft_rel(E_, E_, (double)K);
        } else {
            for (uint64_t k = 0; k < K; k++)
                sum += w_ref[k] = sg[ref_ids[k]];
            for (uint64_t k = 0; k < K; k++)
                w_ref[k] = (norm ? w_ref[k] / sum : w_ref[k]) * route_scale;
            rel = (1 + se) * (1 + se) * (1 + gam((double)K + 3)) - 1;
        }
        float *ld = dmem(E);
        memcpy(ld, l, E * 4);
        rtm_route rt = {ld, mode == 2 ? bias : NULL, E, K, ng, tg, mode, norm, route_scale};
        float w[64];
        CHECK_OK(rtm_be_route(BE, &rt, ids, w, &err));
        CHECKF(memcmp(ids, ref_ids, K * 8) == 0, "route mode %d E %llu K %llu groups %llu: experts differ", mode,
               (unsigned long long)E, (unsigned long long)K, (unsigned long long)ng);
        for (uint64_t k = 0; k < K; k++)
            CHECKF(fabs(w[k] - w_ref[k]) <= rel * fabs(w_ref[k]), "route mode %d weight %llu: %.9g vs %.9g (bound %.3g U)",
                   mode, (unsigned long long)k, w[k], w_ref[k], rel / U);
        rtm_be_free(BE, ld);
        free(l);
        free(bias);
        free(dl);
        free(sg);
        free(choice);
        free(perm);
    }
}

/* The route kernel against the CPU runtime's own routing (runtime/forward.c, rt_route, whose
 * rules are transformers': see there), in every mode, on random logits and on tie-heavy ones
 * (every logit and correction bias from a grid of five values, so most experts tie with
 * others and, in DeepSeek-V3's mode, whole groups tie): the same ids in the same rank order —
 * ties go to the lower index on both — and weights within a relative 1e-5 (exp and the
 * softmax sum are computed differently: docs/metal.md, Routing; the bound against exact
 * arithmetic is route's). Equal logits give equal scores on both sides (the same function of
 * the same bits), and the grid's distinct values are far apart, so the ids must agree exactly.
 * A consistency check of the GPU against the CPU decoder, which is what a GPU decode has to
 * reproduce to take the same path. */
static void route_cpu(void)
{
    static const uint64_t Es[] = {8, 16, 60, 64, 128, 256};
    static const int rt_modes[] = {RT_ROUTE_SOFTMAX, RT_ROUTE_TOPK_SOFTMAX, RT_ROUTE_SIGMOID_GROUP};
    tq_err err = {0};
    int tied_ranks = 0;
    for (int c = 0; c < 36; c++) {
        int mode = c % 3, ties = (c / 3) % 2, norm = (c / 6) % 2;
        uint64_t E = Es[(c / 6) % 6], K = 1 + irand(E < 8 ? E : 8), ng = 1, tg = 1;
        if (mode == 2 && E % 8 == 0 && E >= 16) {
            ng = c % 4 == 2 ? 4 : 8;
            tg = 1 + irand(ng / 2);
            if (K > tg * (E / ng))
                K = tg * (E / ng);
        }
        float *ld = dmem(E), *rl = malloc(3 * E * 4 + 8), *bias = malloc(E * 4);
        for (uint64_t i = 0; i < E; i++) {
            ld[i] = ties ? (float)(0.5 * (double)irand(5) - 1.0) : (float)(nrand() * 2);
            bias[i] = ties ? (float)(0.0625 * (double)irand(2)) : (float)(urand() * 0.05);
        }
        memcpy(rl, ld, E * 4);
        tq_runner r;
        rt_layer L;
        memset(&r, 0, sizeof r);
        memset(&L, 0, sizeof L);
        r.c.experts = E;
        r.c.top_k = K;
        r.c.route = rt_modes[mode];
        r.c.norm_topk = norm;
        r.c.route_scale = mode == 2 ? 2.5 : 1.0;
        r.c.n_group = ng;
        r.c.topk_group = tg;
        r.rl = rl;
        L.score_bias = mode == 2 ? bias : NULL;
        uint64_t ids_cpu[64], ids[64];
        float w_cpu[64], w[64];
        CHECK_OK(rt_route(&r, &L, ids_cpu, w_cpu, &err));
        rtm_route rt = {ld, L.score_bias, E, K, ng, tg, mode, norm, (float)r.c.route_scale};
        CHECK_OK(rtm_be_route(BE, &rt, ids, w, &err));
        CHECKF(memcmp(ids, ids_cpu, K * 8) == 0,
               "route mode %d%s E %llu K %llu groups %llu/%llu: the experts differ from the CPU runtime's (rank 0: %llu vs %llu)",
               mode, ties ? " (ties)" : "", (unsigned long long)E, (unsigned long long)K, (unsigned long long)tg,
               (unsigned long long)ng, (unsigned long long)ids[0], (unsigned long long)ids_cpu[0]);
        for (uint64_t k = 0; k < K; k++) {
            CHECKF(fabs((double)w[k] - w_cpu[k]) <= 1e-5 * fabs((double)w_cpu[k]),
                   "route mode %d%s weight %llu: %.9g vs the CPU's %.9g", mode, ties ? " (ties)" : "",
                   (unsigned long long)k, w[k], w_cpu[k]);
            /* consecutive ranks with equal logits (and biases): the tie rule ordered them */
            if (ties && k + 1 < K && ld[ids[k]] == ld[ids[k + 1]] && (mode != 2 || bias[ids[k]] == bias[ids[k + 1]]))
                tied_ranks++;
        }
        rtm_be_free(BE, ld);
        free(rl);
        free(bias);
    }
    CHECKF(tied_ranks >= 20, "the tie-heavy routes decided only %d ranks by the tie rule", tied_ranks);
    printf("  %s: routes equal to the CPU runtime's, %d ranks decided by ties\n", DEV, tied_ranks);
}

/* Routed experts read by id on the device (docs/metal.md, One wait per token): E experts of
 * one matrix of each kind stacked at a fixed stride per part, with padding between experts as
 * stacked tensors and split blocks have, a route queued by rtm_be_route_keep whose choice the
 * host never reads, then for each rank the id-indexed product (rtm_be_matvec_ex) and the
 * weighted sum (rtm_be_axpy_rank). Each must equal, bit for bit, the plain kernel on the
 * expert the same logits choose (read back by rtm_be_route) and axpy with its weight: the same
 * kernel bodies on the same device, so this rests on no assumption about the arithmetic. It
 * shows that the kernels pick the right expert's bytes; the matvec cases above hold the
 * arithmetic to the CPU's. */
static void experts_ex(void)
{
    tq_err err = {0};
    int off_diag = 0;
    for (int c = 0; c < 12; c++) {
        int kind = c % 4;
        uint64_t E = 5 + irand(12), K = 1 + irand(4), rows = 1 + irand(70), cols = 0, rstep = 1;
        int bias = c % 3 != 0;
        mat m[16];
        for (uint64_t x = 0; x < E; x++) {
            if (kind == 0) {
                cols = 1 + (c * 37) % 200;
                make_dense(&m[x], rows, cols, c % 8 < 4 ? TQ_DT_BF16 : TQ_DT_F32, 0);
            } else if (kind == 1) {
                cols = c % 8 < 4 ? 96 : 144;
                make_tq(&m[x], rows, cols, 2 + c % 3, cols == 96 ? 32 : 36, TQ_DT_F16, TQ_DT_F32, TQ_DT_BF16, 0);
            } else if (kind == 2) {
                cols = 64 * (1 + c % 3);
                make_affine(&m[x], rows, cols, c % 8 < 4 ? 4 : 8, 64, TQ_DT_BF16, 0);
            } else {
                cols = 32 * (1 + c % 5);
                rstep = 1 + (uint64_t)(c % 2);
                make_mxfp4(&m[x], rows, cols, rstep, 0);
            }
            if (bias) {
                m[x].l.biasdt = TQ_DT_BF16;
                m[x].bias = rand_vals(TQ_DT_BF16, rows * rstep, 1.0);
                m[x].l.bias = m[x].bias;
            }
        }
        /* the parts stacked: expert x's part i at stack[i] + x·stride[i] */
        uint64_t nb = cols / 32, n[4];
        n[0] = kind == 3 ? rows * rstep * nb * 16 : rt_linear_wbytes(&m[0].l);
        n[1] = kind == 3 ? rows * rstep * nb : kind == 0 ? 0 : rt_linear_sbytes(&m[0].l);
        n[2] = kind == 2 ? rt_linear_sbytes(&m[0].l) : 0;
        n[3] = bias ? rows * rstep * 2 : 0;
        uint8_t *stack[4] = {0};
        rtm_expert ex = {.t = &m[0].l, .E = E};
        for (int i = 0; i < 4; i++) {
            if (!n[i])
                continue;
            ex.stride[i] = (n[i] + 15) / 16 * 16 + 16 * irand(3);
            stack[i] = calloc(E, ex.stride[i]);
            ex.part[i] = stack[i];
            for (uint64_t x = 0; x < E; x++) {
                const void *src[4] = {m[x].l.w, m[x].l.scales, m[x].l.biases, m[x].l.bias};
                memcpy(stack[i] + x * ex.stride[i], src[i], n[i]);
            }
        }
        for (uint64_t x = 0; x < E; x++) { /* the plain products read the stack too */
            m[x].l.w = stack[0] + x * ex.stride[0];
            if (n[1])
                m[x].l.scales = stack[1] + x * ex.stride[1];
            if (n[2])
                m[x].l.biases = stack[2] + x * ex.stride[2];
            if (n[3])
                m[x].l.bias = stack[3] + x * ex.stride[3];
            m[x].l.codebook = m[0].l.codebook; /* shared by a layer's experts */
            m[x].l.signs = m[0].l.signs;
        }
        float *ld = dmem(E), *x = dmem(cols), *y_ex = dmem(K * rows), *y_pl = dmem(K * rows);
        float *acc_ex = dmem(rows), *acc_pl = dmem(rows);
        for (uint64_t i = 0; i < E; i++)
            ld[i] = (float)nrand();
        for (uint64_t j = 0; j < cols; j++)
            x[j] = (float)nrand();
        int mode = c % 3;
        rtm_route rt = {ld, NULL, E, K, 1, 1, mode, 1, 1.0f};
        CHECK_OK(rtm_be_route_keep(BE, &rt, &err));
        for (uint64_t k = 0; k < K; k++) {
            CHECK_OK(rtm_be_matvec_ex(BE, &ex, k, x, y_ex + k * rows, &err));
            CHECK_OK(rtm_be_axpy_rank(BE, acc_ex, y_ex + k * rows, k, rows, &err));
        }
        uint64_t ids[64];
        float w[64];
        CHECK_OK(rtm_be_route(BE, &rt, ids, w, &err)); /* runs the queue, then reads the same route */
        for (uint64_t k = 0; k < K; k++) {
            off_diag += ids[k] != k;
            CHECK_OK(rtm_be_matvec(BE, &m[ids[k]].l, x, y_pl + k * rows, &err));
            CHECK_OK(rtm_be_axpy(BE, acc_pl, y_pl + k * rows, w[k], NULL, rows, &err));
        }
        if (sync_ok()) {
            static const char *const kn[] = {"dense", "tq", "affine", "mxfp4"};
            CHECKF(memcmp(y_ex, y_pl, K * rows * 4) == 0, "%s experts (E %llu, K %llu): the id-indexed products differ",
                   kn[kind], (unsigned long long)E, (unsigned long long)K);
            CHECKF(memcmp(acc_ex, acc_pl, rows * 4) == 0, "%s experts: the weighted sum by rank differs", kn[kind]);
        }
        /* a rank the route did not choose, or no route of this many experts, is refused */
        CHECK(rtm_be_matvec_ex(BE, &ex, K, x, y_ex, &err) != 0 && err.code == TQ_EUSAGE);
        ex.E = E + 1;
        CHECK(rtm_be_matvec_ex(BE, &ex, 0, x, y_ex, &err) != 0 && err.code == TQ_EUSAGE);
        sync_ok();
        for (uint64_t i = 0; i < E; i++)
            mat_free(&m[i]);
        for (int i = 0; i < 4; i++)
            free(stack[i]);
        rtm_be_free(BE, ld);
        rtm_be_free(BE, x);
        rtm_be_free(BE, y_ex);
        rtm_be_free(BE, y_pl);
        rtm_be_free(BE, acc_ex);
        rtm_be_free(BE, acc_pl);
    }
    CHECKF(off_diag >= 12, "only %d ranks chose an expert other than the rank's own number", off_diag);
}

/* DeepSeek-V3's latent attention core (the mla kernel; runtime/attention.c, mla_task, the CPU's)
 * against its definition in double: per head, qa = q_nope·kv_b's key rows, scores
 * (qa·latent_t + q_rope·k_rope_t)·scale over t ≤ pos, softmax, ol = Σ_t p_t·latent_t, out =
 * kv_b's value rows · ol; kv_b dense (f32, bf16) or MLX affine (4 and 8 bits). A loose check
 * (|ao - ref| ≤ 1e-4 · Σ|terms|, about 1700 U), not the a-priori bound the attention case holds:
 * it catches a wrong row, head, position or a missing barrier (poisoned threadgroup memory);
 * the decode comparison (test_metal_decode, deepseek_v3) holds the whole layer to the CPU. */
static void mla(void)
{
    tq_err err = {0};
    for (int c = 0; c < 8; c++) {
        uint64_t heads = 1 + irand(4), nope = 1 + irand(24), rope = 2 * (1 + irand(8)), vh = 1 + irand(40);
        uint64_t kvl = c % 4 < 2 ? 16 + irand(300) : 64 * (1 + irand(4)), pos = c == 0 ? 0 : irand(300);
        uint64_t W = kvl + rope, rows = heads * (nope + vh), stride = pos + 7;
        mat m;
        if (c % 4 == 0)
            make_dense(&m, rows, kvl, TQ_DT_F32, 0);
        else if (c % 4 == 1)
            make_dense(&m, rows, kvl, TQ_DT_BF16, 0);
        else
            make_affine(&m, rows, kvl, c % 4 == 2 ? 4 : 8, 64, TQ_DT_BF16, 0);
        float *q = dmem(heads * (nope + rope)), *kc = dmem((pos + 1) * W), *att = dmem(heads * stride);
        float *ao = dmem(heads * vh), *row = malloc(kvl * 4);
        for (uint64_t i = 0; i < heads * (nope + rope); i++)
            q[i] = (float)nrand();
        for (uint64_t i = 0; i < (pos + 1) * W; i++)
            kc[i] = (float)nrand();
        float scale = (float)(1.0 / sqrt((double)(nope + rope)));
        rtm_mla ml = {q, kc, &m.l, att, ao, heads, nope, rope, vh, kvl, pos, stride, scale};
        for (int ord = 0; ord < ORDERS; ord++) {
            rtm_shim_reverse = ord;
            CHECK_OK(rtm_be_mla(BE, &ml, &err));
            if (!sync_ok())
                break;
            double worst = 0;
            for (uint64_t h = 0; h < heads; h++) {
                double *qa = calloc(kvl, 8), *p = calloc(pos + 1, 8), *ol = calloc(kvl, 8), *olabs = calloc(kvl, 8);
                const float *qh = q + h * (nope + rope);
                uint64_t base = h * (nope + vh);
                for (uint64_t d = 0; d < nope; d++) {
                    CHECK_OK(rt_linear_row(&m.l, base + d, row, &err));
                    for (uint64_t j = 0; j < kvl; j++)
                        qa[j] += (double)qh[d] * row[j];
                }
                double mx = -INFINITY, sum = 0;
                for (uint64_t t = 0; t <= pos; t++) {
                    double sc = 0;
                    for (uint64_t j = 0; j < kvl; j++)
                        sc += qa[j] * kc[t * W + j];
                    for (uint64_t j = 0; j < rope; j++)
                        sc += (double)qh[nope + j] * kc[t * W + kvl + j];
                    p[t] = sc * scale;
                    mx = fmax(mx, p[t]);
                }
                for (uint64_t t = 0; t <= pos; t++)
                    sum += p[t] = exp(p[t] - mx);
                for (uint64_t t = 0; t <= pos; t++)
                    for (uint64_t j = 0; j < kvl; j++) {
                        ol[j] += p[t] / sum * kc[t * W + j];
                        olabs[j] += p[t] / sum * fabs(kc[t * W + j]);
                    }
                for (uint64_t i = 0; i < vh; i++) {
                    CHECK_OK(rt_linear_row(&m.l, base + nope + i, row, &err));
                    double ref = 0, terms = 0;
                    for (uint64_t j = 0; j < kvl; j++) {
                        ref += row[j] * ol[j];
                        terms += fabs(row[j]) * olabs[j];
                    }
                    double d = fabs(ao[h * vh + i] - ref) / (terms + 1e-300);
                    worst = fmax(worst, d);
                }
                free(qa);
                free(p);
                free(ol);
                free(olabs);
            }
            CHECKF(worst <= 1e-4, "mla heads %llu nope %llu rope %llu vh %llu kvl %llu pos %llu kind %d: error %.3g of the terms",
                   (unsigned long long)heads, (unsigned long long)nope, (unsigned long long)rope, (unsigned long long)vh,
                   (unsigned long long)kvl, (unsigned long long)pos, m.l.kind, worst);
            order_check(ord, ao, heads * vh, "mla");
        }
        rtm_shim_reverse = 0;
        mat_free(&m);
        free(row);
        rtm_be_free(BE, q);
        rtm_be_free(BE, kc);
        rtm_be_free(BE, att);
        rtm_be_free(BE, ao);
    }
}

/* ---------------------------------------------------------------- Gated DeltaNet */

/* max |a - b| / max |b| over n values (b the CPU's) */
static double rel_err(const float *a, const float *b, uint64_t n)
{
    double mx = 0, d = 0;
    for (uint64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)b[i]));
        d = fmax(d, fabs((double)a[i] - b[i]));
    }
    return mx > 0 ? d / mx : d;
}

/* dn_conv + dn_core (rtm_be_deltanet) against the CPU runtime's step (runtime/deltanet.c,
 * rt_deltanet_step) on random shapes, inputs and states, three tokens in a row (the states
 * carried): ao, the conv state and the delta-rule state within DN_TOL of the largest CPU
 * value. A consistency check against the CPU runtime, not an independent oracle: the CPU sums
 * the norms and computes the decay (exp, log) in double, the kernels in f32 (rtm_exp, rtm_log:
 * log_sweep bounds them). The decay inputs a + dt_bias span [-40, 40] (both softplus branches,
 * and ln(1 + e^x) where 1 + e^x rounds to 1), A_log [-4, 4]. dk, dv up to RTM_DN_MAXD (more
 * than a threadgroup's threads would need a second row per thread: dv = 256 = RTM_TG does not,
 * dk = 256 sums the norms over every thread). The CPU's conv is exact-order, so the conv state
 * must match bit for bit. */
#define DN_TOL 1e-4
static void deltanet(void)
{
    tq_err err = {0};
    for (int c = 0; c < 8; c++) {
        static const uint64_t dks[] = {1, 7, 64, 256, 33, 128, 16, 5};
        uint64_t nk = 1 + irand(3), rep = 1 + irand(3), nv = nk * rep, dk = dks[c], dv = c == 3 ? 256 : 1 + irand(140);
        uint64_t K = c == 0 ? 1 : 2 + irand(3), Kd = nk * dk, C = 2 * Kd + nv * dv, st = K > 1 ? (K - 1) * C : 1;
        double eps = 1e-6;
        float *w = dmem(C * K), *alog = dmem(nv), *dtb = dmem(nv), *gw = dmem(dv), *mix = dmem(C), *z = dmem(nv * dv);
        float *bb = dmem(nv), *aa = dmem(nv), *cs = dmem(st), *ssm = dmem(nv * dv * dk), *co = dmem(C), *ao = dmem(nv * dv);
        float *cs0 = malloc(st * 4), *ssm0 = malloc(nv * dv * dk * 4), *ccs = malloc(st * 4), *cssm = malloc(nv * dv * dk * 4);
        float *cco = malloc(C * 4), *cao = malloc(nv * dv * 4);
        for (uint64_t i = 0; i < C * K; i++)
            w[i] = (float)(0.5 * nrand());
        for (uint64_t i = 0; i < nv; i++) {
            alog[i] = (float)(-4 + 8 * urand());
            dtb[i] = (float)(2 * nrand());
        }
        for (uint64_t i = 0; i < dv; i++)
            gw[i] = (float)(1 + 0.3 * nrand());
        for (uint64_t i = 0; i < st; i++)
            cs0[i] = (float)nrand();
        for (uint64_t i = 0; i < nv * dv * dk; i++)
            ssm0[i] = (float)(0.3 * nrand());
        double worst = 0;
        for (int ord = 0; ord < ORDERS; ord++) {
            rtm_shim_reverse = ord;
            memcpy(cs, cs0, st * 4);
            memcpy(ccs, cs0, st * 4);
            memcpy(ssm, ssm0, nv * dv * dk * 4);
            memcpy(cssm, ssm0, nv * dv * dk * 4);
            uint64_t seed = rng;
            for (int t = 0; t < 3; t++) {
                for (uint64_t i = 0; i < C; i++)
                    mix[i] = (float)nrand();
                for (uint64_t i = 0; i < nv * dv; i++)
                    z[i] = (float)(2 * nrand());
                for (uint64_t i = 0; i < nv; i++) {
                    bb[i] = (float)(2 * nrand());
                    aa[i] = (float)(-40 + 80 * urand()) - dtb[i];
                }
                rt_dn_step dev = {nk, dk, nv, dv, K, eps, w, alog, dtb, gw, K > 1 ? cs : NULL, ssm, mix, z, bb, aa, co, ao};
                rt_dn_step cpu = dev;
                cpu.conv_state = ccs, cpu.ssm = cssm, cpu.co = cco, cpu.ao = cao;
                CHECK(rtm_be_deltanet(BE, &dev, &err) == 0);
                if (!sync_ok())
                    break;
                rt_deltanet_step(&cpu, POOL);
                if (K > 1)
                    CHECKF(memcmp(cs, ccs, st * 4) == 0, "deltanet case %d token %d: the conv state differs", c, t);
                double ea = rel_err(ao, cao, nv * dv), es = rel_err(ssm, cssm, nv * dv * dk);
                worst = fmax(worst, fmax(ea, es));
                CHECKF(ea <= DN_TOL && es <= DN_TOL,
                       "deltanet nk %llu nv %llu dk %llu dv %llu K %llu token %d: error %.3g (ao), %.3g (state)",
                       (unsigned long long)nk, (unsigned long long)nv, (unsigned long long)dk, (unsigned long long)dv,
                       (unsigned long long)K, t, ea, es);
                if (t == 0) /* the same token's output in both thread orders, bit for bit */
                    order_check(ord, ao, nv * dv, "deltanet");
            }
            if (ord + 1 < ORDERS)
                rng = seed; /* the same tokens again in the other order */
        }
        printf("  %s: deltanet nk %llu nv %llu dk %llu dv %llu K %llu: max error %.3g of the largest value\n", DEV,
               (unsigned long long)nk, (unsigned long long)nv, (unsigned long long)dk, (unsigned long long)dv,
               (unsigned long long)K, worst);
        rtm_shim_reverse = 0;
        float *dm[] = {w, alog, dtb, gw, mix, z, bb, aa, cs, ssm, co, ao};
        for (size_t i = 0; i < sizeof dm / sizeof *dm; i++)
            rtm_be_free(BE, dm[i]);
        free(cs0), free(ssm0), free(ccs), free(cssm), free(cco), free(cao);
    }
    /* beyond the kernels: nothing queued, 1 (the caller runs the CPU's step) */
    rt_dn_step big = {.nk = 1, .dk = RTM_DN_MAXD + 1, .nv = 1, .dv = 4, .K = 2, .eps = 1e-6};
    CHECK(rtm_be_deltanet(BE, &big, &err) == 1);
}

/* ---------------------------------------------------------------- element-wise */

static void elementwise(void)
{
    tq_err err = {0};
    const uint64_t n = 1000 + irand(300);
    float *g = dmem(n), *u = dmem(n), *y = dmem(n), *g0 = malloc(n * 4), *y0 = malloc(n * 4), *sa = dmem(1);
    for (uint64_t i = 0; i < n; i++) {
        g0[i] = (float)(nrand() * 3);
        u[i] = (float)(nrand() * 3);
        y0[i] = (float)nrand();
    }
    /* SwiGLU activation: silu(g)·u, and gpt-oss's clamped form (α = 1.702, limit 7) */
    for (int clamped = 0; clamped < 2; clamped++) {
        memcpy(g, g0, n * 4);
        CHECK_OK(rtm_be_act(BE, g, u, n, clamped, 1.702f, 7.0f, &err));
        if (!sync_ok())
            return;
        for (uint64_t i = 0; i < n; i++) {
            double gv = g0[i], uv = u[i], ref;
            if (clamped) {
                gv = fmin(gv, 7.0);
                uv = fmax(-7.0, fmin(7.0, uv));
                ref = gv / (1 + exp(-(double)(1.702f * (float)gv))) * (uv + 1);
            } else {
                ref = gv / (1 + exp(-gv)) * uv;
            }
            double bound = gam(EXP_ERR_U + 6 + (clamped ? 1.702 * fabs(gv) : 0)) * fabs(ref);
            CHECKF(fabs(g[i] - ref) <= bound + 1e-37, "act%s [%llu]: %.9g vs %.9g", clamped ? " clamped" : "",
                   (unsigned long long)i, g[i], ref);
        }
    }
    /* y += a·x, bit for bit with the CPU runtime's `y += a * x` */
    memcpy(y, y0, n * 4);
    CHECK_OK(rtm_be_axpy(BE, y, u, 0.37f, NULL, n, &err));
    if (!sync_ok())
        return;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        float t = 0.37f * u[i], r = y0[i] + t;
        /* rests on A2; fused, y + a·x has one rounding instead of two: within γ(2)(|y| + |a·x|) */
        if (exact("A2"))
            bad += memcmp(&r, &y[i], 4) != 0;
        else
            bad += !(fabs((double)y[i] - r) <= 2 * gam(2) * (fabs(y0[i]) + fabs(0.37 * u[i])) + 1e-38);
    }
    CHECKF(bad == 0, "axpy: %llu values differ", (unsigned long long)bad);
    /* y += sigmoid(sa[0])·x */
    memcpy(y, y0, n * 4);
    sa[0] = -0.8f;
    CHECK_OK(rtm_be_axpy(BE, y, u, 0, sa, n, &err));
    if (!sync_ok())
        return;
    double s = 1.0 / (1.0 + exp(0.8));
    for (uint64_t i = 0; i < n; i++) {
        double ref = y0[i] + s * u[i], bound = gam(EXP_ERR_U + 5) * fabs(s * u[i]) + U * fabs(ref);
        CHECKF(fabs(y[i] - ref) <= bound, "axpy sigmoid [%llu]", (unsigned long long)i);
    }
    /* gates: y·sigmoid(g), y·silu(g), zero */
    for (int kind = 0; kind < 3; kind++) {
        memcpy(y, y0, n * 4);
        CHECK_OK(rtm_be_gate(BE, y, g0, n, kind, &err));
        if (!sync_ok())
            return;
        for (uint64_t i = 0; i < n; i++) {
            double sg = 1.0 / (1.0 + exp(-(double)g0[i])), ref = kind == 2 ? 0 : y0[i] * (kind == 0 ? sg : g0[i] * sg);
            CHECKF(fabs(y[i] - ref) <= gam(EXP_ERR_U + 4) * fabs(ref), "gate %d [%llu]", kind, (unsigned long long)i);
        }
    }
    /* gather: split [heads][query | gate] as the gated attention does */
    uint64_t heads = 7, hd = 24;
    float *src = dmem(2 * heads * hd), *dq = dmem(heads * hd), *dg = dmem(heads * hd);
    for (uint64_t i = 0; i < 2 * heads * hd; i++)
        src[i] = (float)nrand();
    CHECK_OK(rtm_be_gather(BE, dq, src, heads, hd, 2 * hd, 0, &err));
    CHECK_OK(rtm_be_gather(BE, dg, src, heads, hd, 2 * hd, hd, &err));
    if (!sync_ok())
        return;
    for (uint64_t h = 0; h < heads; h++) {
        CHECK(memcmp(dq + h * hd, src + 2 * h * hd, hd * 4) == 0);
        CHECK(memcmp(dg + h * hd, src + 2 * h * hd + hd, hd * 4) == 0);
    }
    rtm_be_free(BE, g);
    rtm_be_free(BE, u);
    rtm_be_free(BE, y);
    rtm_be_free(BE, sa);
    rtm_be_free(BE, src);
    rtm_be_free(BE, dq);
    rtm_be_free(BE, dg);
    free(g0);
    free(y0);
}

/* ---------------------------------------------------------------- the backend's memory rules */

static void *REG_BASE;
static uint64_t REG_N;
static int reg_calls;
static int one_region(void *user, const void *p, const void **base, uint64_t *n)
{
    (void)user;
    reg_calls++;
    if ((const char *)p < (const char *)REG_BASE || (const char *)p >= (const char *)REG_BASE + REG_N)
        return 0;
    *base = REG_BASE;
    *n = REG_N;
    return 1;
}

/* A region the caller names is wrapped once and found in the registry afterwards; results
 * are unchanged; kernels may not write memory that rtm_be_alloc did not make; results read
 * before sync are not there yet (the queue runs at sync, as on the GPU). */
static void memory_rules(void)
{
    tq_err err = {0};
    rtm_dev *d;
    rtm_be *b = NULL;
    CHECK_OK(rtm_shim_open(&d, &err));
    CHECK_OK(rtm_be_open(&b, d, one_region, NULL, &err));
    if (!b)
        return;
    mat m;
    make_dense(&m, 40, 50, TQ_DT_BF16, 0);
    REG_BASE = m.w;
    REG_N = rt_linear_wbytes(&m.l);
    float *x = rtm_be_alloc(b, 50 * 4, &err), *y = rtm_be_alloc(b, 40 * 4, &err), cpu[40], host_y[40];
    for (int j = 0; j < 50; j++)
        x[j] = (float)nrand();
    rt_scratch scr = {0};
    CHECK_OK(rt_matvec(POOL, &m.l, x, cpu, &scr, &err));
    free(scr.xr);
    for (int rep = 0; rep < 3; rep++) {
        memset(y, 0, 40 * 4);
        CHECK_OK(rtm_be_matvec(b, &m.l, x, y, &err));
        CHECK(y[0] == 0.0f && y[39] == 0.0f); /* queued, not run */
        CHECK_OK(rtm_be_sync(b, &err));
        float mo[40];
        for (int r = 0; r < 40; r++)
            mo[r] = mv_dense_model(&m.l, x, (uint64_t)r);
        CHECK(memcmp(y, mo, sizeof mo) == 0 || !exact("A2")); /* mv_dense's roundings: A2 */
        CHECK(y[5] != 0.0f);                                     /* it ran, in any mode */
    }
    CHECKF(reg_calls == 1, "the region function was asked %d times (once expected)", reg_calls);
    CHECK(rtm_be_matvec(b, &m.l, x, host_y, &err) != 0 && err.code == TQ_EUSAGE && strstr(err.msg, "not given"));
    m.l.wdt = TQ_DT_I32;
    CHECK(rtm_be_matvec(b, &m.l, x, y, &err) != 0 && strstr(err.msg, "I32"));
    rtm_be_close(b);
    mat_free(&m);
}

/* Apple's rule for memory a Metal buffer uses in place (newBufferWithBytesNoCopy: a
 * page-aligned pointer and a length of whole pages; 16 KiB pages on Apple silicon), which the
 * shim holds to RTM_PAGE: a region on the page is used in place, the same region one 4 KiB page
 * further, or one 4 KiB too long, is copied, and the device says so. Through the backend the
 * copy is counted (rtm_counts.wrap_copies, tq-run's gpu_wrap_copies) and the product is
 * unchanged: a weight region that misses the page costs a copy that is reported, never a silent
 * one (docs/metal.md, Memory). Consistency of the shim with the rule as Apple documents it,
 * not a GPU result. */
static void wrap_rules(void)
{
    tq_err err = {0};
    rtm_dev *d;
    uint8_t *mem = NULL;
    CHECK(posix_memalign((void **)&mem, RTM_PAGE, 3 * RTM_PAGE) == 0);
    if (!mem)
        return;
    for (size_t i = 0; i < 3 * RTM_PAGE; i++)
        mem[i] = (uint8_t)(i * 7 + 3);
    CHECK_OK(rtm_shim_open(&d, &err));
    void *h = NULL;
    CHECK(d->wrap(d, mem, 2 * RTM_PAGE, &h, &err) == 0 && h == mem); /* in place */
    d->release(d, h);
    CHECK(d->wrap(d, mem + 4096, 2 * RTM_PAGE, &h, &err) == 1 && h != mem + 4096 &&
          memcmp(h, mem + 4096, 2 * RTM_PAGE) == 0); /* off the page: a copy, said */
    d->release(d, h);
    CHECK(d->wrap(d, mem, RTM_PAGE + 4096, &h, &err) == 1 && h != mem); /* not whole pages */
    d->release(d, h);
    d->close(d);
    for (int off = 0; off < 2; off++) {
        rtm_be *b = NULL;
        CHECK_OK(rtm_shim_open(&d, &err));
        CHECK_OK(rtm_be_open(&b, d, one_region, NULL, &err));
        if (!b)
            break;
        mat m;
        make_dense(&m, 16, 64, TQ_DT_F32, 0);
        REG_BASE = mem + off * 4096;
        REG_N = 2 * RTM_PAGE;
        memcpy(REG_BASE, m.w, 16 * 64 * 4);
        m.l.w = REG_BASE;
        float *x = rtm_be_alloc(b, 64 * 4, &err), *y = rtm_be_alloc(b, 16 * 4, &err);
        for (int j = 0; j < 64; j++)
            x[j] = (float)nrand();
        CHECK_OK(rtm_be_matvec(b, &m.l, x, y, &err));
        CHECK_OK(rtm_be_sync(b, &err));
        int same = 1;
        for (int r = 0; r < 16; r++)
            same &= y[r] == mv_dense_model(&m.l, x, (uint64_t)r) || !exact("A2");
        CHECKF(same, "wrap_rules: the product over a region %s the page differs", off ? "off" : "on");
        rtm_counts c;
        rtm_be_counts(b, &c);
        CHECKF(c.wrap_copies == (uint64_t)off && c.wrap_copy_bytes == (uint64_t)off * 2 * RTM_PAGE,
               "wrap_rules: region %d KiB past a 16 KiB page: %llu copies of %llu bytes counted", off * 4,
               (unsigned long long)c.wrap_copies, (unsigned long long)c.wrap_copy_bytes);
        rtm_be_close(b);
        mat_free(&m);
    }
    free(mem);
}

/* ---------------------------------------------------------------- main */

typedef struct tcase {
    const char *name;
    void (*fn)(void);
} tcase;

static const tcase cases[] = {
    {"exp_sweep", exp_sweep},         {"sigmoid_silu", sigmoid_silu}, {"hadamard_bits", hadamard_bits},
    {"matvec_dense", matvec_dense},   {"matvec_tq", matvec_tq},       {"matvec_affine", matvec_affine},
    {"matvec_mxfp4", matvec_mxfp4},   {"unpack_bits", unpack_bits},   {"rmsnorm", rmsnorm},
    {"rope_bits", rope_bits},         {"rotation_reuse", rotation_reuse},
    {"softmax", softmax},             {"attention", attention},       {"route", route},
    {"elementwise", elementwise},     {"route_cpu", route_cpu},       {"experts_ex", experts_ex},
    {"mla", mla},                     {"log_sweep", log_sweep},       {"deltanet", deltanet},
};

/* TQ_METAL_CASES="name name ...": only those cases (tests/cli/metal-shim-barriers.sh runs the
 * kernels that have barriers once per edited barrier). */
static int case_wanted(const char *name)
{
    return t_env_lists("TQ_METAL_CASES", name);
}

static void run_all(const char *prefix)
{
    char name[128];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (!case_wanted(cases[i].name))
            continue;
        snprintf(name, sizeof name, "%s/%s", prefix, cases[i].name);
        RUN_AS(name, cases[i].fn);
    }
}

int main(void)
{
    tq_err err = {0};
    rt_kernels_init();
    if (rt_pool_create(&POOL, 2, &err) != 0) {
        printf("FAIL pool: %s\n", err.msg);
        return 1;
    }
    rtm_dev *d;
    if (rtm_shim_open(&d, &err) != 0 || rtm_be_open(&BE, d, NULL, NULL, &err) != 0) {
        printf("FAIL shim: %s\n", err.msg);
        return 1;
    }
    FP_FMA = strcmp(rtm_shim_fp, "fma") == 0;
    FP_FTZ = rtm_shim_ftz = getenv("TQ_SHIM_FTZ") != NULL;
    if (FP_FMA || FP_FTZ)
        printf("  shim mode:%s%s (bit-for-bit checks resting on%s%s left out)\n", FP_FMA ? " fma" : "",
               FP_FTZ ? " ftz" : "", FP_FMA ? " A2" : "", FP_FTZ ? " A4" : "");
    DEV = "shim";
    ORDERS = 2;
    run_all("shim");
    if (case_wanted("memory_rules"))
        RUN(memory_rules);
    if (case_wanted("wrap_rules"))
        RUN(wrap_rules);
    rtm_be_close(BE);
    BE = NULL;
    if (rtm_metal_open(&d, &err) == 0) {
        if (rtm_be_open(&BE, d, NULL, NULL, &err) == 0) {
            DEV = "metal";
            ORDERS = 1;
            run_all("metal");
            rtm_be_close(BE);
        } else {
            printf("FAIL metal: %s\n", err.msg);
            t_fail++;
        }
    } else {
        printf("  metal: not run: %s\n", err.msg);
        /* make check-metal: a run that was meant for the GPU and skipped it has failed. */
        const char *req = getenv("TQ_REQUIRE_METAL");
        if (req && *req) {
            printf("FAIL metal: TQ_REQUIRE_METAL is set, but the GPU backend did not open\n");
            t_fail++;
        }
    }
    free(order_keep);
    rt_pool_destroy(POOL);
    TEST_MAIN_END();
}
