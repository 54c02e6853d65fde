/* safetensors writer and reader: round trips, layout, alignment, refusal of incomplete or
 * overlapping writes, and header rules that the malformed corpus cannot show in one line. */
#include "formats/formats.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <pthread.h>
#include <unistd.h>


static const tq_st_decl decls[] = {
    {"zeta.weight", TQ_DT_F32, 2, {3, 4}},
    {"alpha.bias", TQ_DT_BF16, 1, {5}},
    {"mid.scalar", TQ_DT_I64, 0, {0}},
    {"empty", TQ_DT_F16, 2, {0, 7}},
    {"u8", TQ_DT_U8, 1, {3}},
};
#define ND (sizeof decls / sizeof *decls)

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 3));
}

static int write_sample(const char *path, uint64_t align, tq_err *err)
{
    const char *mk[] = {"format", "a\"quote"}, *mv[] = {"pt", "line\nbreak \xc3\xa9"};
    tq_st_writer *w;
    if (tq_st_writer_open(&w, path, decls, ND, mk, mv, 2, align, err) != 0)
        return -1;
    for (size_t i = 0; i < ND; i++) {
        const tq_tensor_info *t = tq_st_writer_tensor(w, i);
        unsigned char buf[64];
        fill(buf, t->nbytes, (unsigned)t->nbytes);
        /* write back to front in two pieces to exercise out-of-order writes */
        size_t h = t->nbytes / 2;
        if (tq_st_writer_write(w, i, h, buf + h, t->nbytes - h, err) != 0 ||
            tq_st_writer_write(w, i, 0, buf, h, err) != 0) {
            tq_st_writer_abort(w);
            return -1;
        }
    }
    return tq_st_writer_finish(w, err);
}

static void test_write_read(void)
{
    tq_err err = {0};
    const char *p = t_path("a.safetensors");
    CHECK_OK(write_sample(p, 0, &err));
    CHECK(t_count_prefixed(t_tmpdir(), "a.safetensors.partial") == 0);
    tq_st_file *f;
    CHECK_OK(tq_st_open(&f, p, &err));
    if (t_failed_here)
        return;
    CHECK(f->n_tensors == ND);
    CHECK(f->data_start % 8 == 0);
    /* sorted by name, laid out in name order */
    CHECK(!strcmp(f->tensors[0].name, "alpha.bias") && !strcmp(f->tensors[1].name, "empty") &&
          !strcmp(f->tensors[2].name, "mid.scalar") && !strcmp(f->tensors[4].name, "zeta.weight"));
    uint64_t pos = f->data_start;
    for (size_t i = 0; i < f->n_tensors; i++) {
        CHECK(f->tensors[i].offset == pos);
        pos += f->tensors[i].nbytes;
    }
    CHECK(pos == f->file_size);
    const tq_tensor_info *t = tq_st_find(f, "zeta.weight");
    CHECK(t && t->dtype == TQ_DT_F32 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 4 && t->nelem == 12 &&
          t->nbytes == 48);
    t = tq_st_find(f, "mid.scalar");
    CHECK(t && t->ndim == 0 && t->nelem == 1 && t->nbytes == 8);
    t = tq_st_find(f, "empty");
    CHECK(t && t->nelem == 0 && t->nbytes == 0);
    CHECK(tq_st_find(f, "nope") == NULL && tq_st_find(f, "") == NULL);
    CHECK(f->n_meta == 2 && !strcmp(tq_st_meta(f, "format"), "pt") &&
          !strcmp(tq_st_meta(f, "a\"quote"), "line\nbreak \xc3\xa9") && tq_st_meta(f, "x") == NULL);
    CHECK(strstr(f->header_json, "\"mid.scalar\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[") != NULL);
    CHECK(!strncmp(f->header_json, "{\"__metadata__\":{\"a\\\"quote\":", 27));
    /* data comes back */
    t = tq_st_find(f, "zeta.weight");
    unsigned char got[48], want[48];
    fill(want, 48, 48);
    CHECK_OK(tq_st_read(f, t, 0, got, 48, &err));
    CHECK(!memcmp(got, want, 48));
    CHECK_OK(tq_st_read(f, t, 40, got, 8, &err));
    CHECK(!memcmp(got, want + 40, 8));
    CHECK(tq_st_read(f, t, 41, got, 8, &err) != 0);
    CHECK(tq_st_read(f, t, UINT64_MAX, got, 2, &err) != 0);
    tq_st_close(f);
}

/* read -> write with the same declarations and metadata gives the same bytes */
static void test_round_trip(void)
{
    tq_err err = {0};
    const char *a = t_path("rt-a.safetensors"), *b = t_path("rt-b.safetensors");
    CHECK_OK(write_sample(a, 0, &err));
    tq_st_file *f;
    CHECK_OK(tq_st_open(&f, a, &err));
    if (t_failed_here)
        return;
    tq_st_decl d[ND];
    for (size_t i = 0; i < f->n_tensors; i++) {
        d[i].name = f->tensors[i].name;
        d[i].dtype = f->tensors[i].dtype;
        d[i].ndim = f->tensors[i].ndim;
        memcpy(d[i].shape, f->tensors[i].shape, sizeof d[i].shape);
    }
    tq_st_writer *w;
    CHECK_OK(tq_st_writer_open(&w, b, d, f->n_tensors, (const char *const *)f->meta_keys,
                               (const char *const *)f->meta_vals, f->n_meta, 0, &err));
    for (size_t i = 0; i < f->n_tensors && !t_failed_here; i++) {
        unsigned char buf[64];
        long k = tq_st_writer_index(w, f->tensors[i].name);
        CHECK(k == (long)i);
        CHECK_OK(tq_st_read(f, &f->tensors[i], 0, buf, f->tensors[i].nbytes, &err));
        CHECK_OK(tq_st_writer_write(w, (size_t)k, 0, buf, f->tensors[i].nbytes, &err));
    }
    CHECK_OK(tq_st_writer_finish(w, &err));
    tq_st_close(f);
    CHECK(t_files_equal(a, b));
}

static void test_align(void)
{
    tq_err err = {0};
    const char *p = t_path("al.safetensors");
    CHECK_OK(write_sample(p, 16384, &err));
    tq_st_file *f;
    CHECK_OK(tq_st_open(&f, p, &err));
    if (t_failed_here)
        return;
    CHECK(f->data_start == 16384);
    /* the padding is spaces */
    size_t n = strlen(f->header_json);
    CHECK(n == 16384 - 8 && f->header_json[n - 1] == ' ');
    tq_st_close(f);
    tq_st_writer *w;
    CHECK(tq_st_writer_open(&w, p, decls, ND, NULL, NULL, 0, 24, &err) != 0 && err.code == TQ_EUSAGE);
}

static void test_incomplete(void)
{
    tq_err err = {0};
    const char *p = t_path("inc.safetensors");
    tq_st_writer *w;
    CHECK_OK(tq_st_writer_open(&w, p, decls, ND, NULL, NULL, 0, 0, &err));
    if (t_failed_here)
        return;
    CHECK(t_count_prefixed(t_tmpdir(), "inc.safetensors.partial-") == 1);
    unsigned char buf[48] = {0};
    long z = tq_st_writer_index(w, "zeta.weight");
    CHECK(z >= 0);
    CHECK_OK(tq_st_writer_write(w, (size_t)z, 0, buf, 40, &err));
    /* overlap and out of range are refused */
    CHECK(tq_st_writer_write(w, (size_t)z, 39, buf, 2, &err) != 0 && strstr(err.msg, "overlap"));
    CHECK(tq_st_writer_write(w, (size_t)z, 40, buf, 9, &err) != 0 && strstr(err.msg, "outside"));
    CHECK(tq_st_writer_write(w, 99, 0, buf, 1, &err) != 0);
    CHECK(tq_st_writer_finish(w, &err) != 0);
    CHECK(strstr(err.msg, "tensor 'alpha.bias': only 0 of 10 bytes were written") != NULL);
    CHECK(!tq_exists(p));
    CHECK(t_count_prefixed(t_tmpdir(), "inc.safetensors") == 0);
}

static void test_abort(void)
{
    tq_err err = {0};
    const char *p = t_path("ab.safetensors");
    tq_st_writer *w;
    CHECK_OK(tq_st_writer_open(&w, p, decls, ND, NULL, NULL, 0, 0, &err));
    if (t_failed_here)
        return;
    tq_st_writer_abort(w);
    CHECK(t_count_prefixed(t_tmpdir(), "ab.safetensors") == 0);
    /* bad declarations never create a file */
    tq_st_decl dup[2] = {{"x", TQ_DT_F32, 1, {1}}, {"x", TQ_DT_F32, 1, {2}}};
    CHECK(tq_st_writer_open(&w, p, dup, 2, NULL, NULL, 0, 0, &err) != 0 && strstr(err.msg, "declared twice"));
    tq_st_decl big[1] = {{"x", TQ_DT_F32, 3, {1ull << 30, 1ull << 30, 1ull << 30}}};
    CHECK(tq_st_writer_open(&w, p, big, 1, NULL, NULL, 0, 0, &err) != 0);
    tq_st_decl meta[1] = {{"__metadata__", TQ_DT_F32, 1, {1}}};
    CHECK(tq_st_writer_open(&w, p, meta, 1, NULL, NULL, 0, 0, &err) != 0);
    tq_st_decl badutf[1] = {{"x\xff", TQ_DT_F32, 1, {1}}};
    CHECK(tq_st_writer_open(&w, p, badutf, 1, NULL, NULL, 0, 0, &err) != 0);
    CHECK(t_count_prefixed(t_tmpdir(), "ab.safetensors") == 0);
}

#define NTHR 4
#define BIG (1 << 20)
struct thr {
    tq_st_writer *w;
    int k;
    unsigned char *data;
    int rc;
};

static void *writer_thread(void *arg)
{
    struct thr *t = arg;
    tq_err err;
    /* interleaved 4 KiB chunks: thread k writes chunks k, k+NTHR, ... */
    for (size_t c = (size_t)t->k; c * 4096 < BIG && t->rc == 0; c += NTHR)
        t->rc = tq_st_writer_write(t->w, 0, c * 4096, t->data + c * 4096, 4096, &err);
    return NULL;
}

static void test_threads(void)
{
    tq_err err = {0};
    const char *p = t_path("thr.safetensors");
    tq_st_decl d[1] = {{"big", TQ_DT_U8, 1, {BIG}}};
    unsigned char *data = malloc(BIG), *back = malloc(BIG);
    fill(data, BIG, 3);
    tq_st_writer *w;
    CHECK_OK(tq_st_writer_open(&w, p, d, 1, NULL, NULL, 0, 4096, &err));
    if (t_failed_here)
        return;
    pthread_t th[NTHR];
    struct thr args[NTHR];
    for (int k = 0; k < NTHR; k++) {
        args[k] = (struct thr){w, k, data, 0};
        pthread_create(&th[k], NULL, writer_thread, &args[k]);
    }
    for (int k = 0; k < NTHR; k++) {
        pthread_join(th[k], NULL);
        CHECK(args[k].rc == 0);
    }
    CHECK_OK(tq_st_writer_finish(w, &err));
    tq_st_file *f;
    CHECK_OK(tq_st_open(&f, p, &err));
    if (t_failed_here)
        return;
    CHECK(f->data_start == 4096);
    CHECK_OK(tq_st_read(f, &f->tensors[0], 0, back, BIG, &err));
    CHECK(!memcmp(data, back, BIG));
    tq_st_close(f);
    free(data);
    free(back);
}

static int parse(const char *json, uint64_t data_bytes, tq_err *err)
{
    tq_st_file f = {0};
    f.fd = -1;
    f.path = "h";
    int rc = tq_st_parse_header(&f, json, strlen(json), 8 + strlen(json) + data_bytes, err);
    tq_st_free_header(&f);
    return rc;
}

static void test_header_rules(void)
{
    tq_err err = {0};
    CHECK_OK(parse("{}", 0, &err));
    CHECK_OK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}   ", 4, &err));
    /* zero-size tensors may share an offset with anything */
    CHECK_OK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                   "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                   "\"c\":{\"dtype\":\"U8\",\"shape\":[4,0],\"data_offsets\":[2,2]}}", 2, &err));
    /* a zero dimension makes a product that would overflow empty, not an error */
    CHECK_OK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]}}", 0, &err));
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, &err) != 0);
    CHECK(strstr(err.msg, "is not a plain non-negative integer"));
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4e0]}}", 4, &err) != 0);
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-0,4]}}", 4, &err) != 0);
    CHECK(parse("{\"a\":{\"dtype\":\"F8_E8M0\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, &err) != 0 &&
          err.code == TQ_EUNSUP);
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 3, &err) != 0 &&
          strstr(err.msg, "run past the end"));
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 5, &err) != 0 &&
          !strcmp(err.msg, "h: 1 trailing byte after the last tensor's data, which ends at byte 66"));
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,2,3,4,5,6,7,8,9],\"data_offsets\":[0,4]}}", 4, &err) != 0 &&
          strstr(err.msg, "9 dimensions"));
    CHECK(parse("{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740993],\"data_offsets\":[0,4]}}", 4, &err) != 0);
    CHECK(parse("[]", 0, &err) != 0 && strstr(err.msg, "is an array, not an object"));
}

int main(void)
{
    RUN(test_write_read);
    RUN(test_round_trip);
    RUN(test_align);
    RUN(test_incomplete);
    RUN(test_abort);
    RUN(test_threads);
    RUN(test_header_rules);
    TEST_MAIN_END();
}
