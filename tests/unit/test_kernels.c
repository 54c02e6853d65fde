/* runtime/kernels.c's SIMD matvec paths (AVX2 and AVX-512F on x86-64, NEON on arm64) against
 * its portable C path, bit for bit, on random matrices of every kind and shape class. A
 * consistency test (all paths are ours): the portable path is the reference that the decoder
 * tests hold to independent oracles; here every other path must give the same bits, which is
 * what makes logits independent of the CPU (docs/runtime.md, "Matvec summation orders").
 * Single-threaded, so it also runs under qemu-user (make check-arm64); the thread pool's split
 * of work is tests/unit/test_pool.c. */
#include "quant/quant.h"
#include "runtime/rt_internal.h"
#include "tests/unit/check.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t r32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* A float of random sign and magnitude over a few binades, so that any change in the order of
 * the sums changes the rounding. */
static float rf(void)
{
    float m = (float)(r32() & 0xffffff) / 16777216.0f + 0.5f;
    int e = (int)(r32() % 9) - 4;
    return (r32() & 1 ? -m : m) * ldexpf(1.0f, e);
}

static void put_dt(tq_dtype dt, void *p, uint64_t i, float v)
{
    if (dt == TQ_DT_F32)
        memcpy((char *)p + 4 * i, &v, 4);
    else {
        uint16_t h = dt == TQ_DT_F16 ? tq_f32_to_f16(v) : tq_f32_to_bf16(v);
        memcpy((char *)p + 2 * i, &h, 2);
    }
}

static rt_pool *POOL;
static char name[160];

/* y of l at every SIMD level the CPU has, each against level 0 (portable) bit for bit. */
static void compare_levels(const rt_linear *l, const char *what)
{
    tq_err err = {0};
    float *x = malloc(l->cols * sizeof *x), *y0 = calloc(l->rows, sizeof *y0), *y = calloc(l->rows, sizeof *y);
    for (uint64_t j = 0; j < l->cols; j++)
        x[j] = rf();
    rt_scratch s0 = {0}, s1 = {0};
    int hw = rt_kernels_simd(9);
    rt_kernels_simd(0);
    int rc0 = rt_matvec(POOL, l, x, y0, &s0, &err);
    for (int lev = 1; lev <= hw; lev++) {
        CHECK(rt_kernels_simd(lev) == lev);
        memset(y, 0xa5, l->rows * sizeof *y);
        int rc = rt_matvec(POOL, l, x, y, &s1, &err);
        CHECKF(rc == rc0, "%s, level %d: rc %d, portable %d", what, lev, rc, rc0);
        uint64_t bad = l->rows;
        for (uint64_t r = 0; r < l->rows && bad == l->rows; r++)
            if (memcmp(y + r, y0 + r, 4) != 0)
                bad = r;
        CHECKF(rc0 != 0 || bad == l->rows, "%s, SIMD level %d: row %llu is %a, portable %a", what, lev,
               (unsigned long long)bad, bad < l->rows ? (double)y[bad] : 0.0, bad < l->rows ? (double)y0[bad] : 0.0);
    }
    rt_kernels_simd(hw);
    if (rt_linear_packable(l)) {
        /* the packed layout (rt_linear_pack) on a copy: y on one and three threads, and every
         * row read back (rt_linear_row), bit for bit as the unpacked matrix gives them */
        rt_linear p = *l;
        uint64_t wb = l->rows * l->wpr * 4, sb = l->rows * l->ngroups * tq_dtype_size(l->sdt);
        void *w = malloc(wb), *sc = malloc(sb), *bi = l->biases ? malloc(sb) : NULL;
        memcpy(w, l->w, wb);
        memcpy(sc, l->scales, sb);
        if (bi)
            memcpy(bi, l->biases, sb);
        p.w = w;
        p.scales = sc;
        p.biases = bi;
        CHECK(rt_linear_pack(&p, &err) == 0 && p.packed);
        rt_pool *p3 = NULL;
        CHECK(rt_pool_create(&p3, 3, &err) == 0);
        for (int t = 0; t < 2; t++) {
            memset(y, 0xa5, l->rows * sizeof *y);
            CHECK(rt_matvec(t ? p3 : POOL, &p, x, y, &s1, &err) == rc0);
            uint64_t bad = l->rows;
            for (uint64_t r = 0; r < l->rows && bad == l->rows; r++)
                if (memcmp(y + r, y0 + r, 4) != 0)
                    bad = r;
            CHECKF(rc0 != 0 || bad == l->rows, "%s, packed, %d threads: row %llu is %a, portable %a", what, t ? 3 : 1,
                   (unsigned long long)bad, bad < l->rows ? (double)y[bad] : 0.0, bad < l->rows ? (double)y0[bad] : 0.0);
        }
        rt_pool_destroy(p3);
        float *ra = malloc(l->cols * sizeof *ra), *rb = malloc(l->cols * sizeof *rb);
        uint64_t bad = l->rows;
        for (uint64_t r = 0; r < l->rows && bad == l->rows; r++)
            if (rt_linear_row(l, r, ra, &err) != 0 || rt_linear_row(&p, r, rb, &err) != 0 ||
                memcmp(ra, rb, l->cols * sizeof *ra) != 0)
                bad = r;
        CHECKF(bad == l->rows, "%s, packed: rt_linear_row of row %llu differs", what, (unsigned long long)bad);
        free(ra);
        free(rb);
        free(w);
        free(sc);
        free(bi);
    }
    free(s0.xr);
    free(s1.xr);
    free(x);
    free(y0);
    free(y);
}

static void fill_bias(rt_linear *l, void **bias, int with)
{
    *bias = NULL;
    if (!with)
        return;
    uint64_t n = l->rows * (l->rstep ? l->rstep : 1);
    *bias = malloc(n * 4);
    for (uint64_t i = 0; i < n; i++)
        put_dt(TQ_DT_F32, *bias, i, rf());
    l->bias = *bias;
    l->biasdt = TQ_DT_F32;
}

/* TurboQuant (tq) or MLX affine, BITS-bit indices in groups of GROUP, scales of dtype sdt. */
static void quant_case(int tq, uint64_t bits, uint64_t rows, uint64_t cols, uint64_t group, tq_dtype sdt,
                       int rot, int bias)
{
    rt_linear l = {0};
    l.kind = tq ? RT_TQ : RT_AFFINE;
    l.rows = rows;
    l.cols = cols;
    l.bits = bits;
    l.group = group;
    l.ngroups = cols / group;
    uint64_t epw = 32 / bits;
    l.wpr = (cols + epw - 1) / epw;
    uint32_t *w = malloc(rows * l.wpr * 4);
    for (uint64_t i = 0; i < rows * l.wpr; i++)
        w[i] = r32(); /* unused high bits (3-bit) and tail indices random too */
    void *sc = malloc(rows * l.ngroups * 4), *bi = malloc(rows * l.ngroups * 4), *cb = malloc(256 * 4),
         *sg = malloc(cols * 4), *ob;
    for (uint64_t i = 0; i < rows * l.ngroups; i++) {
        put_dt(sdt, sc, i, rf());
        put_dt(sdt, bi, i, rf());
    }
    for (uint64_t i = 0; i < 256; i++)
        put_dt(TQ_DT_F32, cb, i, rf());
    for (uint64_t j = 0; j < cols; j++)
        put_dt(TQ_DT_F32, sg, j, r32() & 1 ? 1.0f : -1.0f);
    l.w = w;
    l.scales = sc;
    l.sdt = sdt;
    if (tq) {
        l.codebook = cb;
        l.cdt = TQ_DT_F32;
        l.signs = sg;
        l.gdt = TQ_DT_F32;
        l.norot = !rot;
    } else {
        l.biases = bi;
        l.zdt = sdt;
    }
    fill_bias(&l, &ob, bias);
    snprintf(name, sizeof name, "%s %llu-bit [%llu, %llu] group %llu scales %s%s%s", tq ? "TurboQuant" : "affine",
             (unsigned long long)bits, (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)group,
             tq_dtype_name(sdt), rot ? " rotated" : "", bias ? " +bias" : "");
    compare_levels(&l, name);
    free(w);
    free(sc);
    free(bi);
    free(cb);
    free(sg);
    free(ob);
}

static void test_turboquant(void)
{
    static const uint64_t bits[] = {2, 3, 4, 8};
    for (int b = 0; b < 4; b++) {
        /* 37 rows: blocks of 8 and of 4 and single rows; group 24 is not a multiple of 16
         * (2-bit words straddle groups), 12 not of 8 (the portable path everywhere) */
        quant_case(1, bits[b], 37, 240, 24, TQ_DT_F16, 0, 0);
        quant_case(1, bits[b], 37, 320, 64, TQ_DT_BF16, 0, 1);
        quant_case(1, bits[b], 21, 256, 32, TQ_DT_F32, 1, 0);
        quant_case(1, bits[b], 19, 120, 12, TQ_DT_F16, 0, 0);
        quant_case(1, bits[b], 16, 1024, 128, TQ_DT_F16, 1, 1);
        /* 128 columns: at 3 bits the last 8 lie in the row's last word (120 = 12 words), so a
         * kernel reading the next word too would read past the matrix (ASan: make check-asan) */
        quant_case(1, bits[b], 16, 128, 32, TQ_DT_F16, 0, 0);
        /* 4-bit: packed blocks of 16 rows in pairs and alone, a tail of 13 unpacked rows, and
         * chunks of 128 rows (whole pairs) over 3 threads; every width, the others unpacked */
        quant_case(1, bits[b], 16 * 21 + 13, 1024, 64, TQ_DT_BF16, 1, 1);
    }
}

static void test_affine(void)
{
    static const uint64_t bits[] = {2, 4, 8};
    for (int b = 0; b < 3; b++) {
        quant_case(0, bits[b], 37, 256, 64, TQ_DT_BF16, 0, 0);
        quant_case(0, bits[b], 29, 320, 32, TQ_DT_F16, 0, 1);
        quant_case(0, bits[b], 19, 240, 24, TQ_DT_F32, 0, 0);
        quant_case(0, bits[b], 9, 120, 12, TQ_DT_F16, 0, 0);
        quant_case(0, bits[b], 16 * 21 + 13, 1024, 64, TQ_DT_F32, 0, 1);
    }
}

static void dense_case(tq_dtype dt, uint64_t rows, uint64_t cols, int bias)
{
    rt_linear l = {0};
    l.kind = RT_DENSE;
    l.wdt = dt;
    l.rows = rows;
    l.cols = cols;
    void *w = malloc(rows * cols * 4), *ob;
    for (uint64_t i = 0; i < rows * cols; i++)
        put_dt(dt, w, i, rf());
    l.w = w;
    fill_bias(&l, &ob, bias);
    snprintf(name, sizeof name, "dense %s [%llu, %llu]%s", tq_dtype_name(dt), (unsigned long long)rows,
             (unsigned long long)cols, bias ? " +bias" : "");
    compare_levels(&l, name);
    free(w);
    free(ob);
}

static void test_dense(void)
{
    static const tq_dtype dts[] = {TQ_DT_F32, TQ_DT_BF16, TQ_DT_F16};
    for (int d = 0; d < 3; d++) {
        dense_case(dts[d], 37, 256, 0);
        dense_case(dts[d], 13, 203, 1); /* a tail of 3 columns */
        dense_case(dts[d], 6, 5, 0);    /* no whole block of 8 */
    }
}

/* Every f16 value through the dense f16 kernel: row r holds half r in column 0 and +0 in the
 * other 7, x is all ones, so y[r] is that half widened (NaNs, infinities, subnormals included):
 * the SIMD widening (vcvtph2ps, NEON's fcvtl) against f16_table. */
static void test_f16_every_value(void)
{
    rt_linear l = {0};
    l.kind = RT_DENSE;
    l.wdt = TQ_DT_F16;
    l.rows = 65536;
    l.cols = 8;
    uint16_t *w = calloc(65536 * 8, 2);
    for (uint32_t h = 0; h < 65536; h++)
        w[h * 8] = (uint16_t)h;
    l.w = w;
    float x[8] = {1, 1, 1, 1, 1, 1, 1, 1}, *y0 = malloc(65536 * 4), *y = malloc(65536 * 4);
    tq_err err = {0};
    rt_scratch s = {0};
    int hw = rt_kernels_simd(9);
    rt_kernels_simd(0);
    CHECK_OK(rt_matvec(POOL, &l, x, y0, &s, &err));
    for (int lev = 1; lev <= hw; lev++) {
        rt_kernels_simd(lev);
        CHECK_OK(rt_matvec(POOL, &l, x, y, &s, &err));
        CHECKF(memcmp(y, y0, 65536 * 4) == 0, "level %d widens some half differently", lev);
    }
    rt_kernels_simd(hw);
    free(w);
    free(y0);
    free(y);
    free(s.xr);
}

/* MXFP4 with random nibbles and block exponents 100..150, gpt-oss's interleaved rows (rstep 2)
 * and not; then rows with exponents 253 (12·2^125 overflows) and 255 (NaN), which every path
 * must refuse the same way. */
static void mxfp4_case(uint64_t rows, uint64_t cols, uint64_t rstep, int bias, int badexp)
{
    rt_linear l = {0};
    l.kind = RT_MXFP4;
    l.rows = rows;
    l.cols = cols;
    l.rstep = rstep;
    uint64_t nr = rows * (rstep ? rstep : 1), nb = cols / 32;
    uint8_t *w = malloc(nr * cols / 2), *sc = malloc(nr * nb);
    void *ob;
    for (uint64_t i = 0; i < nr * cols / 2; i++)
        w[i] = (uint8_t)r32();
    for (uint64_t i = 0; i < nr * nb; i++)
        sc[i] = (uint8_t)(100 + r32() % 51);
    if (badexp)
        sc[(rows / 2) * (rstep ? rstep : 1) * nb + 1] = (uint8_t)badexp;
    l.w = w;
    l.scales = sc;
    fill_bias(&l, &ob, bias);
    snprintf(name, sizeof name, "MXFP4 [%llu, %llu] rstep %llu%s exponent %d", (unsigned long long)rows,
             (unsigned long long)cols, (unsigned long long)rstep, bias ? " +bias" : "", badexp);
    compare_levels(&l, name);
    free(w);
    free(sc);
    free(ob);
}

static void test_mxfp4(void)
{
    mxfp4_case(37, 256, 0, 0, 0);
    mxfp4_case(19, 320, 2, 1, 0);
    mxfp4_case(9, 64, 1, 0, 0);
    mxfp4_case(9, 128, 0, 0, 252); /* the largest exponent the SIMD path takes */
    mxfp4_case(9, 128, 0, 0, 253);
    mxfp4_case(9, 128, 2, 0, 255);
}

/* A random 4-bit TurboQuant [rows, cols] matrix in group 32 with signs sg (its own data in
 * *own, freed by the caller); affine when tq is 0. */
static rt_linear batch_matrix(int tq, uint64_t rows, uint64_t cols, const float *sg, void **own)
{
    rt_linear l = {0};
    l.kind = tq ? RT_TQ : RT_AFFINE;
    l.rows = rows;
    l.cols = cols;
    l.bits = 4;
    l.group = 32;
    l.ngroups = cols / 32;
    l.wpr = cols / 8;
    uint64_t nw = rows * l.wpr, ns = rows * l.ngroups;
    uint8_t *m = malloc(nw * 4 + 2 * ns * 4 + 16 * 4);
    uint32_t *w = (uint32_t *)m;
    float *sc = (float *)(m + nw * 4), *bi = sc + ns, *cb = bi + ns;
    for (uint64_t i = 0; i < nw; i++)
        w[i] = r32();
    for (uint64_t i = 0; i < ns; i++)
        sc[i] = rf(), bi[i] = rf();
    for (int i = 0; i < 16; i++)
        cb[i] = rf();
    l.w = w;
    l.scales = sc;
    l.sdt = TQ_DT_F32;
    if (tq) {
        l.codebook = cb;
        l.cdt = TQ_DT_F32;
        l.signs = sg;
        l.gdt = TQ_DT_F32;
    } else {
        l.biases = bi;
        l.zdt = TQ_DT_F32;
    }
    *own = m;
    return l;
}

/* rt_matvec_n (several matrices as one job, the CPU backend's experts and q/k/v) against one
 * rt_matvec per matrix, bit for bit, at every SIMD level and on 1 and 3 threads. Consistency,
 * not correctness (rt_matvec is held to the portable path above): the batch shares one rotated
 * x between TurboQuant matrices on the same x with equal signs (the same pointer, or equal
 * contents), and must not between ones whose signs, x or rotation differ (matrices 3, 4, 5),
 * nor mix up the codebooks, outputs and chunks of 18 matrices (more than one batch). */
static void test_matvec_batch(void)
{
    enum { N = 18, COLS = 256 };
    float s1[COLS], s1copy[COLS], s2[COLS], x1[COLS], x2[COLS];
    for (int j = 0; j < COLS; j++) {
        s1[j] = s1copy[j] = r32() & 1 ? 1.0f : -1.0f;
        s2[j] = r32() & 1 ? 1.0f : -1.0f;
        x1[j] = rf();
        x2[j] = rf();
    }
    s2[7] = -s1[7]; /* differs from s1 somewhere for sure */
    rt_linear ls[N];
    const float *xs[N];
    void *own[N];
    float *y[N], *yn[N];
    for (int i = 0; i < N; i++) {
        int kind = i % 9;
        const float *sg = kind == 2 ? s1copy : kind == 3 ? s2 : s1;
        ls[i] = batch_matrix(kind != 6, (uint64_t)(8 + 29 * (i % 5)) + (kind == 1 ? 160 : 0), COLS, sg, &own[i]);
        ls[i].norot = kind == 5;
        xs[i] = kind == 4 || kind == 8 ? x2 : x1;
        y[i] = malloc(ls[i].rows * 4);
        yn[i] = malloc(ls[i].rows * 4);
    }
    int hw = rt_kernels_simd(9);
    for (int threads = 1; threads <= 3; threads += 2) {
        rt_pool *p;
        tq_err err = {0};
        CHECK_OK(rt_pool_create(&p, threads, &err));
        for (int lev = 0; lev <= hw; lev++) {
            rt_kernels_simd(lev);
            rt_scratch s = {0};
            for (int i = 0; i < N; i++) {
                CHECK_OK(rt_matvec(p, &ls[i], xs[i], y[i], &s, &err));
                memset(yn[i], 0xa5, ls[i].rows * 4);
            }
            CHECK_OK(rt_matvec_n(p, N, ls, xs, yn, &s, &err));
            for (int i = 0; i < N; i++)
                CHECKF(memcmp(y[i], yn[i], ls[i].rows * 4) == 0, "matrix %d (%s), %d threads, SIMD level %d: the batch differs",
                       i, i % 9 == 6 ? "affine" : "TurboQuant", threads, lev);
            free(s.xr);
        }
        rt_pool_destroy(p);
    }
    rt_kernels_simd(hw);
    for (int i = 0; i < N; i++) {
        free(own[i]);
        free(y[i]);
        free(yn[i]);
    }
}

/* A copy of 4-bit l (indices, scales, biases in *own, freed by the caller) packed by
 * rt_linear_pack when the AVX-512 kernels take it; the copy as it is otherwise. */
static rt_linear packed_copy(const rt_linear *l, void **own)
{
    tq_err err = {0};
    rt_linear p = *l;
    uint64_t wb = l->rows * l->wpr * 4, sb = l->rows * l->ngroups * tq_dtype_size(l->sdt);
    uint8_t *m = malloc(wb + 2 * sb);
    memcpy(m, l->w, wb);
    memcpy(m + wb, l->scales, sb);
    p.w = m;
    p.scales = m + wb;
    if (l->biases) {
        memcpy(m + wb + sb, l->biases, sb);
        p.biases = m + wb + sb;
    }
    if (rt_linear_packable(l))
        CHECK(rt_linear_pack(&p, &err) == 0 && p.packed);
    *own = m;
    return p;
}

/* rt_matvec_n on packed matrices (rt_linear_pack) against the portable rt_matvec of the
 * unpacked ones, bit for bit, on 1 and 3 threads. The batch builds each packed matrix's table of
 * products value(q)·x[j] once and lends it to a later matrix with the same table; consistency
 * with the portable path shows it never lends one that differs: matrix 1 shares 0's rotated x
 * and codebook (lent), 2 shares its rotated x but not its codebook, 3 its codebook but not its
 * signs, 4 not its rotation (norot), 5 not its x; affine 7 borrows 6's table (same x), 8 may
 * not (x2); 9 has 8 rows (not packed); 20 matrices make two batches. */
static void test_matvec_batch_packed(void)
{
    enum { N = 20, COLS = 256 };
    if (rt_kernels_simd(-1) < 2) {
        printf("  (no AVX-512F: nothing is packed)\n");
        return;
    }
    float s1[COLS], s2[COLS], x1[COLS], x2[COLS], cba[16];
    for (int j = 0; j < COLS; j++) {
        s1[j] = r32() & 1 ? 1.0f : -1.0f;
        s2[j] = r32() & 1 ? 1.0f : -1.0f;
        x1[j] = rf();
        x2[j] = rf();
    }
    s2[3] = -s1[3];
    for (int q = 0; q < 16; q++)
        cba[q] = rf();
    rt_linear ls[N], ps[N];
    const float *xs[N];
    void *own[N], *pown[N];
    float *y[N], *yn[N];
    tq_err err = {0};
    for (int i = 0; i < N; i++) {
        int kind = i % 10, tq = kind != 6 && kind != 7 && kind != 8;
        ls[i] = batch_matrix(tq, kind == 9 ? 8 : (uint64_t)(16 + 21 * (i % 4)), COLS, kind == 3 ? s2 : s1, &own[i]);
        if (tq && kind != 2)
            memcpy((void *)ls[i].codebook, cba, sizeof cba);
        ls[i].norot = kind == 4;
        xs[i] = kind == 5 || kind == 8 ? x2 : x1;
        y[i] = malloc(ls[i].rows * 4);
        yn[i] = malloc(ls[i].rows * 4);
        ps[i] = packed_copy(&ls[i], &pown[i]);
        CHECK(ps[i].packed == (kind != 9));
    }
    int hw = rt_kernels_simd(0);
    rt_scratch s0 = {0};
    for (int i = 0; i < N; i++)
        CHECK_OK(rt_matvec(POOL, &ls[i], xs[i], y[i], &s0, &err));
    free(s0.xr);
    rt_kernels_simd(hw);
    for (int threads = 1; threads <= 3; threads += 2) {
        rt_pool *p;
        CHECK_OK(rt_pool_create(&p, threads, &err));
        rt_scratch s = {0};
        for (int i = 0; i < N; i++)
            memset(yn[i], 0xa5, ls[i].rows * 4);
        CHECK_OK(rt_matvec_n(p, N, ps, xs, yn, &s, &err));
        for (int i = 0; i < N; i++)
            CHECKF(memcmp(y[i], yn[i], ls[i].rows * 4) == 0, "packed matrix %d (%s), %d threads: the batch differs from the portable path",
                   i, i % 10 >= 6 && i % 10 <= 8 ? "affine" : "TurboQuant", threads);
        free(s.xr);
        rt_pool_destroy(p);
    }
    for (int i = 0; i < N; i++) {
        free(own[i]);
        free(pown[i]);
        free(y[i]);
        free(yn[i]);
    }
}

int main(void)
{
    tq_err err = {0};
    rt_kernels_init();
    if (rt_pool_create(&POOL, 1, &err) != 0) {
        printf("FAIL pool: %s\n", err.msg);
        return 1;
    }
    printf("SIMD level of this CPU: %d (0 portable only, 1 AVX2 or NEON, 2 AVX-512F)\n", rt_kernels_simd(-1));
    RUN(test_turboquant);
    RUN(test_affine);
    RUN(test_dense);
    RUN(test_f16_every_value);
    RUN(test_mxfp4);
    RUN(test_matvec_batch);
    RUN(test_matvec_batch_packed);
    rt_pool_destroy(POOL);
    TEST_MAIN_END();
}
