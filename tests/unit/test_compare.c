/* tq-verify compare (verify/compare.c) is bit-exact: tensors that differ only in the sign of
 * a zero differ, and tensors longer than one 4 MiB read chunk are compared to their last
 * byte, with the first differing byte named exactly wherever it falls (chunk edges
 * included); equal bytes under another dtype or shape differ. */
#include "formats/formats.h"
#include "verify/verify.h"
#include "tests/unit/check.h"

#define MIB (1ull << 20)

/* A fresh one-tensor safetensors file (never rewriting one: outputs are not replaced) of
 * name, dtype, shape and bytes; its path into path. */
static void write_one(char *path, const char *name, tq_dtype dt, int ndim, const uint64_t *shape, const void *data)
{
    static int seq;
    char base[64];
    snprintf(base, sizeof base, "t%d.safetensors", seq++);
    snprintf(path, 600, "%s", t_path(base));
    tq_err err = {0};
    tq_st_decl d = {name, dt, ndim, {0}};
    memcpy(d.shape, shape, (size_t)ndim * sizeof *shape);
    tq_st_writer *w = NULL;
    CHECK_OK(tq_st_writer_open(&w, path, &d, 1, NULL, NULL, 0, 0, &err));
    if (!w)
        return;
    const tq_tensor_info *t = tq_st_writer_tensor(w, 0);
    CHECK_OK(tq_st_writer_write(w, 0, 0, data, (size_t)t->nbytes, &err));
    CHECK_OK(tq_st_writer_finish(w, &err));
}

/* Compare a and b: the number of differences, and the first one's detail into detail. */
static size_t compare(const char *a, const char *b, char *detail, size_t cap, tq_cmp_report *keep)
{
    tq_err err = {0};
    tq_cmp_report r;
    CHECK_OK(tq_compare_models(a, b, &r, &err));
    size_t n = r.n;
    snprintf(detail, cap, "%s", n ? r.v[0].detail : "");
    if (keep)
        *keep = r;
    else
        tq_cmp_report_free(&r);
    return n;
}

static void test_sign_of_zero(void)
{
    uint64_t shape[1] = {4};
    float a[4] = {1.0f, 0.0f, -2.5f, 0.0f}, b[4] = {1.0f, 0.0f, -2.5f, -0.0f};
    char pa[600], pb[600], d[512];
    write_one(pa, "w", TQ_DT_F32, 1, shape, a);
    write_one(pb, "w", TQ_DT_F32, 1, shape, b);
    CHECK(compare(pa, pa, d, sizeof d, NULL) == 0);
    CHECKF(compare(pa, pb, d, sizeof d, NULL) == 1, "+0.0 and -0.0 compared equal");
    /* element 3 is bytes 12..15, little-endian: the sign bit is in byte 15 */
    CHECKF(!strcmp(d, "first difference at byte 15 (element 3): A 0x00, B 0x80"), "%s", d);
    /* the same in bf16 (sign bit in byte 1 of each element) */
    uint16_t ha[3] = {0x3f80, 0x0000, 0x0000}, hb[3] = {0x3f80, 0x8000, 0x0000};
    shape[0] = 3;
    write_one(pa, "w", TQ_DT_BF16, 1, shape, ha);
    write_one(pb, "w", TQ_DT_BF16, 1, shape, hb);
    CHECK(compare(pa, pb, d, sizeof d, NULL) == 1);
    CHECKF(!strcmp(d, "first difference at byte 3 (element 1): A 0x00, B 0x80"), "%s", d);
}

/* A tensor of 5 MiB + 3 bytes (two read chunks and a ragged tail): one byte changed at each
 * position around the chunk edge and at the very end is found at its exact offset; equal
 * copies compare all of their bytes. */
static void test_beyond_first_chunk(void)
{
    const uint64_t n = 5 * MIB + 3;
    unsigned char *a = malloc(n), *b = malloc(n);
    CHECK(a && b);
    if (!a || !b) {
        free(a);
        free(b);
        return;
    }
    uint64_t s = 12345;
    for (uint64_t i = 0; i < n; i++)
        a[i] = (unsigned char)(t_urand(&s) * 256);
    char pa[600], pb[600], d[512], want[200];
    uint64_t shape[1] = {n};
    write_one(pa, "big", TQ_DT_U8, 1, shape, a);
    tq_cmp_report r;
    write_one(pb, "big", TQ_DT_U8, 1, shape, a);
    CHECK(compare(pa, pb, d, sizeof d, &r) == 0);
    CHECKF(r.bytes == n && r.tensors_equal == 1, "compared %llu of %llu bytes", (unsigned long long)r.bytes,
           (unsigned long long)n);
    tq_cmp_report_free(&r);
    const uint64_t at[] = {4 * MIB - 1, 4 * MIB, 4 * MIB + 1, n - 1};
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        memcpy(b, a, n);
        b[at[k]] ^= 0x01;
        write_one(pb, "big", TQ_DT_U8, 1, shape, b);
        CHECKF(compare(pa, pb, d, sizeof d, NULL) == 1, "a change at byte %llu went unnoticed",
               (unsigned long long)at[k]);
        snprintf(want, sizeof want, "first difference at byte %llu (element %llu): A 0x%02x, B 0x%02x",
                 (unsigned long long)at[k], (unsigned long long)at[k], a[at[k]], b[at[k]]);
        CHECKF(!strcmp(d, want), "got '%s', expected '%s'", d, want);
    }
    /* an f32 tensor of 5 MiB whose last element differs only in the sign of zero */
    const uint64_t ne = 5 * MIB / 4;
    float *fa = calloc(ne, 4), *fb = calloc(ne, 4);
    CHECK(fa && fb);
    if (fa && fb) {
        fb[ne - 1] = -0.0f;
        shape[0] = ne;
        write_one(pa, "f", TQ_DT_F32, 1, shape, fa);
        write_one(pb, "f", TQ_DT_F32, 1, shape, fb);
        CHECK(compare(pa, pb, d, sizeof d, NULL) == 1);
        snprintf(want, sizeof want, "first difference at byte %llu (element %llu): A 0x00, B 0x80",
                 (unsigned long long)(ne * 4 - 1), (unsigned long long)(ne - 1));
        CHECKF(!strcmp(d, want), "got '%s', expected '%s'", d, want);
    }
    free(fa);
    free(fb);
    free(a);
    free(b);
}

/* Same bytes, another dtype or shape: still a difference (the bits alone do not make two
 * tensors equal). */
static void test_same_bytes_other_type(void)
{
    uint16_t v[4] = {0x3c00, 0x4000, 0x0000, 0x8000};
    uint64_t s4[1] = {4}, s22[2] = {2, 2};
    char pa[600], pb[600], pc[600], d[512];
    write_one(pa, "w", TQ_DT_F16, 1, s4, v);
    write_one(pb, "w", TQ_DT_BF16, 1, s4, v);
    write_one(pc, "w", TQ_DT_F16, 2, s22, v);
    CHECK(compare(pa, pb, d, sizeof d, NULL) == 1);
    CHECKF(!strcmp(d, "dtype/shape differ: A F16 [4], B BF16 [4]"), "%s", d);
    CHECK(compare(pa, pc, d, sizeof d, NULL) == 1);
    CHECKF(!strcmp(d, "dtype/shape differ: A F16 [4], B F16 [2, 2]"), "%s", d);
    /* as many dimensions and elements, another shape: [2, 3] against its transpose [3, 2] */
    uint16_t v6[6] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600};
    uint64_t s23[2] = {2, 3}, s32[2] = {3, 2};
    write_one(pa, "w", TQ_DT_F16, 2, s23, v6);
    write_one(pb, "w", TQ_DT_F16, 2, s32, v6);
    CHECK(compare(pa, pb, d, sizeof d, NULL) == 1);
    CHECKF(!strcmp(d, "dtype/shape differ: A F16 [2, 3], B F16 [3, 2]"), "%s", d);
}

int main(void)
{
    RUN(test_sign_of_zero);
    RUN(test_beyond_first_chunk);
    RUN(test_same_bytes_other_type);
    TEST_MAIN_END();
}
