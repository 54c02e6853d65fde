/* Every limit of the safetensors reader (formats/safetensors_read.c, man tq-formats(5),
 * SAFETENSORS) at the limit and one past it on each side: file size against the 8-byte
 * length, header length against the file and against TQ_ST_MAX_HEADER, the data buffer's end
 * against the file size, tensor begin/end against their neighbours and their shape, element
 * and byte counts at 2^64, dimensions at TQ_MAX_DIMS, shape values and offsets at 2^53, nesting depth
 * and array length of the header, and tq_st_read's range. Each case asserts the message, so
 * a limit that moves by one is caught by the case on its other side. */
#include "formats/formats.h"
#include "tests/unit/check.h"

#include <fcntl.h>
#include <unistd.h>

/* ---------------------------------------------------------------- framing */
/* A file of `size` bytes whose first 8 hold the little-endian header length n, then '{'
 * and spaces. tq_st_read_header's result; its message into msg. */
static int frame(uint64_t size, uint64_t n, char *msg, size_t cap, uint64_t *len_out)
{
    const char *p = t_path("frame.safetensors");
    unlink(p);
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    if (fd < 0)
        return -2;
    unsigned char buf[64];
    memset(buf, ' ', sizeof buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(n >> (8 * i));
    buf[8] = '{';
    CHECK(size <= sizeof buf && write(fd, buf, (size_t)size) == (ssize_t)size);
    tq_err err = {0};
    char *json = NULL;
    uint64_t len = 0;
    int rc = tq_st_read_header(fd, size, "f", &json, &len, &err);
    snprintf(msg, cap, "%s", rc ? err.msg : "");
    if (len_out)
        *len_out = len;
    free(json);
    close(fd);
    return rc;
}

static void test_frame_limits(void)
{
    char m[512];
    uint64_t len;
    /* the 8-byte length itself */
    CHECK(frame(7, 0, m, sizeof m, NULL) == -1 && !strcmp(m, "f: file is 7 bytes, too short for the 8-byte header length"));
    CHECK(frame(8, 0, m, sizeof m, &len) == 0 && len == 0);
    /* header length against the file: 8 + N == size fits, one more does not */
    CHECK(frame(20, 12, m, sizeof m, &len) == 0 && len == 12);
    CHECKF(frame(20, 13, m, sizeof m, NULL) == -1 && !strcmp(m, "f: header length 13 runs past the end of the file (20 bytes)"),
           "%s", m);
    CHECK(frame(20, 11, m, sizeof m, &len) == 0 && len == 11);
    /* header length against TQ_ST_MAX_HEADER: at the limit only the file size refuses it */
    CHECKF(frame(20, TQ_ST_MAX_HEADER, m, sizeof m, NULL) == -1 && strstr(m, "runs past the end of the file"), "%s", m);
    CHECKF(frame(20, TQ_ST_MAX_HEADER + 1, m, sizeof m, NULL) == -1 &&
               !strcmp(m, "f: header length 100000001 exceeds the limit of 100000000 bytes"),
           "%s", m);
    CHECKF(frame(20, UINT64_MAX, m, sizeof m, NULL) == -1 && strstr(m, "exceeds the limit"), "%s", m);
    /* through tq_st_open: an empty header is refused after the frame */
    tq_st_file *f = NULL;
    tq_err err = {0};
    frame(8, 0, m, sizeof m, NULL);
    CHECK(tq_st_open(&f, t_path("frame.safetensors"), &err) == -1);
    CHECKF(strstr(err.msg, "header length is 0"), "%s", err.msg);
}

/* ---------------------------------------------------------------- header */
/* tq_st_parse_header of json with `data` bytes of tensor data after it; message into msg. */
static int hdr(const char *json, uint64_t data, char *msg, size_t cap)
{
    tq_st_file f = {0};
    f.fd = -1;
    f.path = "h";
    tq_err err = {0};
    int rc = tq_st_parse_header(&f, json, strlen(json), 8 + strlen(json) + data, &err);
    snprintf(msg, cap, "%s", rc ? err.msg : "");
    tq_st_free_header(&f);
    return rc;
}

/* one tensor "a" of dtype, shape (JSON array text) and offsets */
static int one(const char *dtype, const char *shape, uint64_t b, uint64_t en, uint64_t data, char *msg, size_t cap)
{
    char json[1024];
    snprintf(json, sizeof json, "{\"a\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}}", dtype, shape,
             (unsigned long long)b, (unsigned long long)en);
    return hdr(json, data, msg, cap);
}

static void test_data_end_vs_file_size(void)
{
    char m[512];
    /* 6 bytes of U8: data_offsets end == data size is the only size accepted */
    CHECKF(one("U8", "[6]", 0, 6, 6, m, sizeof m) == 0, "%s", m);
    CHECKF(one("U8", "[6]", 0, 6, 7, m, sizeof m) == -1 && strstr(m, ": 1 trailing byte after the last tensor's data"),
           "%s", m);
    CHECKF(one("U8", "[6]", 0, 6, 5, m, sizeof m) == -1 && strstr(m, "run past the end of the file (data ends at byte"),
           "%s", m);
    /* no tensors: the header alone must fill the file */
    CHECK(hdr("{}", 0, m, sizeof m) == 0);
    CHECKF(hdr("{}", 1, m, sizeof m) == -1 && strstr(m, "1 trailing byte"), "%s", m);
}

static void test_offsets_vs_shape(void)
{
    char m[512];
    /* end - begin == nbytes (3 x F32 = 12), one either way refused */
    CHECK(one("F32", "[3]", 0, 12, 12, m, sizeof m) == 0);
    CHECKF(one("F32", "[3]", 0, 11, 11, m, sizeof m) == -1 && strstr(m, "hold 11 bytes but shape [3] of F32 needs 12"), "%s", m);
    CHECKF(one("F32", "[3]", 0, 13, 13, m, sizeof m) == -1 && strstr(m, "hold 13 bytes but shape [3] of F32 needs 12"), "%s", m);
    CHECKF(one("U8", "[0]", 1, 0, 1, m, sizeof m) == -1 && strstr(m, "begin is after end"), "%s", m);
    /* the first tensor starts at 0, not 1 */
    CHECKF(one("U8", "[2]", 1, 3, 3, m, sizeof m) == -1 && strstr(m, "the first tensor must start at 0"), "%s", m);
}

/* Two tensors: "a" [0, 4) then "b" of 4 bytes at begin: adjacent accepted, a gap or an overlap
 * of one byte refused. */
static void test_neighbours(void)
{
    char m[512], json[512];
    const uint64_t begins[3] = {4, 5, 3};
    for (int k = 0; k < 3; k++) {
        uint64_t b = begins[k];
        snprintf(json, sizeof json,
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[%llu,%llu]}}",
                 (unsigned long long)b, (unsigned long long)(b + 4));
        int rc = hdr(json, b + 4, m, sizeof m);
        if (k == 0)
            CHECKF(rc == 0, "%s", m);
        else if (k == 1)
            CHECKF(rc == -1 && strstr(m, "tensor 'b': data_offsets [5, 9] leave a gap after previous tensor 'a' ending at 4"),
                   "%s", m);
        else
            CHECKF(rc == -1 && strstr(m, "tensor 'b': data_offsets [3, 7] overlap previous tensor 'a' ending at 4"), "%s", m);
    }
}

static void test_shape_products(void)
{
    char m[512];
    /* elements: 2^64 - 1 = 4294967297 · 4294967295 fits, 2^64 = 2^32 · 2^32 does not */
    CHECKF(one("U8", "[4294967297,4294967295]", 0, 1, 1, m, sizeof m) == -1 &&
               strstr(m, "needs 18446744073709551615"),
           "%s", m);
    CHECKF(one("U8", "[4294967296,4294967296]", 0, 1, 1, m, sizeof m) == -1 &&
               strstr(m, "shape [4294967296, 4294967296] has more than 2^64 elements"),
           "%s", m);
    /* bytes: 2^63 - 1 F16 elements are 2^64 - 2 bytes, 2^63 of them are 2^64 */
    CHECKF(one("F16", "[153092023,60247241209]", 0, 1, 1, m, sizeof m) == -1 && strstr(m, "needs 18446744073709551614"),
           "%s", m);
    CHECKF(one("F16", "[4294967296,2147483648]", 0, 1, 1, m, sizeof m) == -1 && strstr(m, "is more than 2^64 bytes"),
           "%s", m);
    /* shape values: 2^53 - 1 is an exact integer; 2^53 is refused, being what 2^53 + 1 reads as */
    CHECKF(one("U8", "[9007199254740991]", 0, 9007199254740991ull, 1, m, sizeof m) == -1 && strstr(m, "run past the end"),
           "%s", m);
    CHECKF(one("U8", "[9007199254740992]", 0, 1, 1, m, sizeof m) == -1 &&
               strstr(m, "shape[0] is not an integer in [0, 2^53 - 1]"),
           "%s", m);
    /* data_offsets likewise */
    CHECKF(one("U8", "[0]", 9007199254740992ull, 9007199254740992ull, 0, m, sizeof m) == -1 &&
               strstr(m, "data_offsets[0] is not an integer in [0, 2^53 - 1]"),
           "%s", m);
    /* dimensions: TQ_MAX_DIMS (8) accepted, 9 refused */
    CHECKF(one("U8", "[1,1,1,1,1,1,1,2]", 0, 2, 2, m, sizeof m) == 0, "%s", m);
    CHECKF(one("U8", "[1,1,1,1,1,1,1,1,2]", 0, 2, 2, m, sizeof m) == -1 &&
               strstr(m, "shape has 9 dimensions (at most 8 supported)"),
           "%s", m);
}

/* The structure pre-check: nesting depth 4 and arrays of 64 elements pass it (and fail later,
 * on the format's own rules), depth 5 and 65 elements are refused before parsing. */
static void test_structure_limits(void)
{
    char m[512], json[1024];
    CHECKF(hdr("{\"a\":{\"x\":[[1]]}}", 0, m, sizeof m) == -1 && strstr(m, "unknown key 'x'"), "%s", m);
    CHECKF(hdr("{\"a\":{\"x\":[[[1]]]}}", 0, m, sizeof m) == -1 && strstr(m, "header nests deeper than 4 levels"), "%s", m);
    for (int n = 64; n <= 65; n++) {
        size_t o = (size_t)snprintf(json, sizeof json, "{\"a\":{\"dtype\":\"U8\",\"shape\":[");
        for (int i = 0; i < n; i++)
            o += (size_t)snprintf(json + o, sizeof json - o, i ? ",1" : "1");
        snprintf(json + o, sizeof json - o, "],\"data_offsets\":[0,1]}}");
        int rc = hdr(json, 1, m, sizeof m);
        if (n == 64)
            CHECKF(rc == -1 && strstr(m, "shape has 64 dimensions"), "%s", m);
        else
            CHECKF(rc == -1 && strstr(m, "has more than 64 elements"), "%s", m);
    }
}

/* tq_st_read: a read ending at the tensor's last byte is in range, one byte more is not, and
 * an offset near 2^64 does not wrap. */
static void test_read_range(void)
{
    tq_err err = {0};
    tq_st_decl d = {"t", TQ_DT_U8, 1, {16}};
    const char *p = t_path("read.safetensors");
    tq_st_writer *w = NULL;
    unsigned char buf[17] = {0};
    CHECK_OK(tq_st_writer_open(&w, p, &d, 1, NULL, NULL, 0, 0, &err));
    if (!w)
        return;
    CHECK_OK(tq_st_writer_write(w, 0, 0, buf, 16, &err));
    CHECK_OK(tq_st_writer_finish(w, &err));
    tq_st_file *f = NULL;
    CHECK_OK(tq_st_open(&f, p, &err));
    if (!f)
        return;
    const tq_tensor_info *t = &f->tensors[0];
    CHECK_OK(tq_st_read(f, t, 0, buf, 16, &err));
    CHECK_OK(tq_st_read(f, t, 15, buf, 1, &err));
    CHECK(tq_st_read(f, t, 0, buf, 17, &err) == -1 && strstr(err.msg, "read of 17 bytes at 0 is outside its 16 bytes"));
    CHECK(tq_st_read(f, t, 16, buf, 1, &err) == -1 && strstr(err.msg, "is outside"));
    CHECK(tq_st_read(f, t, UINT64_MAX, buf, 2, &err) == -1 && strstr(err.msg, "is outside"));
    tq_st_close(f);
}

int main(void)
{
    RUN(test_frame_limits);
    RUN(test_data_end_vs_file_size);
    RUN(test_offsets_vs_shape);
    RUN(test_neighbours);
    RUN(test_shape_products);
    RUN(test_structure_limits);
    RUN(test_read_range);
    TEST_MAIN_END();
}
