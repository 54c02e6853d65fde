/* Row files: canonical JSON (against Python's json.dumps output), identity, paged
 * geometry, the chunk engine, and convert/check/extract on tables written with tq's
 * safetensors writer. */
#include "common/common.h"
#include "formats/formats.h"
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"
#include "tests/unit/check.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */
static uint32_t rng32(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

typedef struct table_spec {
    const char *prefix;
    uint64_t rows, wcols, scols, bcols; /* 0 cols = part absent (weight always present) */
    tq_dtype wdt, sdt, bdt;
    int extra;                         /* add an unrelated tensor */
    int meta;                          /* add __metadata__ */
} table_spec;

/* Write a table with tq's writer; bytes are a deterministic function of (spec, seed). */
static int write_table(const char *path, const table_spec *s, uint64_t seed)
{
    tq_err err = {0};
    tq_st_decl d[4];
    size_t n = 0;
    char nm[4][128];
    struct { uint64_t cols; tq_dtype dt; const char *suf; } parts[3] = {
        {s->wcols, s->wdt, "weight"}, {s->scols, s->sdt, "scales"}, {s->bcols, s->bdt, "biases"}};
    for (int p = 0; p < 3; p++) {
        if (p > 0 && !parts[p].cols)
            continue;
        snprintf(nm[n], sizeof nm[n], "%s.%s", s->prefix, parts[p].suf);
        d[n] = (tq_st_decl){nm[n], parts[p].dt, 2, {s->rows, parts[p].cols}};
        n++;
    }
    if (s->extra) {
        snprintf(nm[n], sizeof nm[n], "other.bias");
        d[n] = (tq_st_decl){nm[n], TQ_DT_F32, 1, {7}};
        n++;
    }
    const char *mk[1] = {"origin"}, *mv[1] = {"test table \xc3\xa9"};
    tq_st_writer *w;
    unlink(path);
    if (tq_st_writer_open(&w, path, d, n, mk, mv, s->meta ? 1 : 0, 0, &err) != 0) {
        printf("# writer: %s\n", err.msg);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const tq_tensor_info *ti = tq_st_writer_tensor(w, (size_t)tq_st_writer_index(w, nm[i]));
        unsigned char *buf = malloc(ti->nbytes ? ti->nbytes : 1);
        uint64_t st = seed * 1000003 + i;
        for (uint64_t k = 0; k < ti->nbytes; k++)
            buf[k] = (unsigned char)rng32(&st);
        int rc = tq_st_writer_write(w, (size_t)tq_st_writer_index(w, nm[i]), 0, buf, ti->nbytes, &err);
        free(buf);
        if (rc != 0) {
            tq_st_writer_abort(w);
            return -1;
        }
    }
    return tq_st_writer_finish(w, &err);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    char *b = NULL;
    tq_err err = {0};
    if (tq_read_small_file(path, 1u << 30, &b, n, &err) != 0)
        return NULL;
    return (unsigned char *)b;
}

/* ------------------------------------------------------------------ canonical JSON */
static void test_canonical_matches_python(void)
{
    tq_err err = {0};
    /* Expected strings were printed by Python 3.11 json.dumps(json.loads(src), sort_keys=True). */
    const char *src =
        "{\"b\": [1, -2, 0, -0, 9007199254740991], \"a\": {\"z\": true, \"y\": null, \"x\": false, \"\xc3\xa9\": "
        "\"caf\xc3\xa9 \xf0\x9f\x98\x80 \\u00e9 \\ud83d\\ude00 \\u007f \\u0001 \\t\\n\\r\\b\\f \\\" \\\\ \\/ ~\", "
        "\"e\": \"x\"}, \"A\": {}, \"c\": [], \"__metadata__\": {\"k\": \"v\"}}";
    const char *want =
        "{\"A\": {}, \"__metadata__\": {\"k\": \"v\"}, \"a\": {\"e\": \"x\", \"x\": false, \"y\": null, \"z\": true, "
        "\"\\u00e9\": \"caf\\u00e9 \\ud83d\\ude00 \\u00e9 \\ud83d\\ude00 \\u007f \\u0001 \\t\\n\\r\\b\\f \\\" \\\\ / ~\"}, "
        "\"b\": [1, -2, 0, 0, 9007199254740991], \"c\": []}";
    CHECK_OK(tq_json_canonical_text_ok(src, strlen(src), &err));
    cJSON *j = tq_json_parse(src, strlen(src), NULL, NULL);
    CHECK(j != NULL);
    char *got = tq_json_canonical(j, &err);
    CHECKF(got && !strcmp(got, want), "got %s", got ? got : err.msg);
    free(got);
    cJSON_Delete(j);
    char hex[65];
    CHECK_OK(tq_rows_header_sha256(src, strlen(src), "x", hex, &err));
    CHECK(!strcmp(hex, "0fc2463f94c75c001d2523ce689f82a39652b0082bed8c363c8d217d56b2a194"));
}

static void test_canonical_refuses(void)
{
    tq_err err = {0};
    const char *bad_text[] = {"{\"a\": 1.0}", "{\"a\": 1e3}", "{\"a\": 01}", "{\"a\": \"x\\u0000y\"}", "[-]"};
    for (size_t i = 0; i < sizeof bad_text / sizeof *bad_text; i++)
        CHECKF(tq_json_canonical_text_ok(bad_text[i], strlen(bad_text[i]), &err) != 0, "%s", bad_text[i]);
    const char *ok_text = "{\"a\": \"\\\\u0000 1.5e3\", \"b\": [0, -7]}";
    CHECK_OK(tq_json_canonical_text_ok(ok_text, strlen(ok_text), &err));
    const char *bad_tree[] = {"{\"a\": 1, \"a\": 2}", "[9007199254740992]"};
    for (size_t i = 0; i < 2; i++) {
        cJSON *j = cJSON_Parse(bad_tree[i]);
        char *c = tq_json_canonical(j, &err);
        CHECKF(c == NULL, "%s", bad_tree[i]);
        free(c);
        cJSON_Delete(j);
    }
    cJSON *s = cJSON_CreateString("\xff\xfe");
    char *c = tq_json_canonical(s, &err);
    CHECK(c == NULL);
    free(c);
    cJSON_Delete(s);
    CHECK(tq_json_parse("{} x", 4, NULL, NULL) == NULL);
}

/* ------------------------------------------------------------------ identity */
static void test_identity_json_roundtrip(void)
{
    tq_err err = {0};
    tq_rows_identity a = {.size = 123456789012ull, .mtime_ns = 1795941878781225268ll, .ctime_ns = -5,
                          .device = 18446744073709551615ull, .inode = 9007199254740993ull};
    memset(a.header_sha256, 'a', 64);
    a.header_sha256[64] = 0;
    char *j = tq_rows_identity_json(&a, &err);
    CHECK(j != NULL);
    tq_rows_identity b;
    memset(&b, 0, sizeof b);
    CHECK_OK(tq_rows_identity_parse(j, &b, &err));
    char diff[256];
    tq_rows_identity_diff(&a, &b, diff, sizeof diff);
    CHECKF(!diff[0], "%s", diff);
    free(j);
    /* MTPLX writes json.dumps(identity) unsorted */
    const char *py = "{\"size\": 10, \"mtime_ns\": 1795941878781225269, \"ctime_ns\": 1795941878781225270, "
                     "\"device\": 64768, \"inode\": 42, \"header_sha256\": "
                     "\"0fc2463f94c75c001d2523ce689f82a39652b0082bed8c363c8d217d56b2a194\"}";
    CHECK_OK(tq_rows_identity_parse(py, &b, &err));
    CHECK(b.size == 10 && b.mtime_ns == 1795941878781225269ll && b.ctime_ns == 1795941878781225270ll &&
          b.device == 64768 && b.inode == 42);
    const char *bad[] = {"{\"size\": 1}", "{\"size\": 1.5, \"mtime_ns\": 1, \"ctime_ns\": 1, \"device\": 1, \"inode\": 1, "
                                           "\"header_sha256\": \"0fc2463f94c75c001d2523ce689f82a39652b0082bed8c363c8d217d56b2a194\"}",
                         "{\"size\": 1, \"mtime_ns\": 1, \"ctime_ns\": 1, \"device\": 1, \"inode\": 1, \"x\": 1, "
                         "\"header_sha256\": \"0fc2463f94c75c001d2523ce689f82a39652b0082bed8c363c8d217d56b2a194\"}",
                         "{\"size\": 1, \"mtime_ns\": 1, \"ctime_ns\": 1, \"device\": 1, \"inode\": 1, "
                         "\"header_sha256\": \"XYZ\"}",
                         "{\"size\": 99999999999999999999, \"mtime_ns\": 1, \"ctime_ns\": 1, \"device\": 1, \"inode\": 1, "
                         "\"header_sha256\": \"0fc2463f94c75c001d2523ce689f82a39652b0082bed8c363c8d217d56b2a194\"}",
                         "[]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKF(tq_rows_identity_parse(bad[i], &b, &err) != 0, "accepted %s", bad[i]);
}

/* ------------------------------------------------------------------ geometry */
static void brute_geom_check(uint64_t rows, uint64_t S, uint64_t P, int pads)
{
    tq_err err = {0};
    tq_rows_geom g;
    memset(&g, 0, sizeof g);
    g.rows = rows;
    g.stride = S;
    g.page = P;
    g.pad_stride = pads;
    CHECK_OK(tq_rows_geom_layout(&g, &err));
    /* records in order, disjoint, inside the tensor, never straddling more pages than needed */
    uint64_t prev_end = 0;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t o = tq_rows_record_offset(&g, r);
        CHECKF(o >= prev_end && o + S <= g.data_bytes, "S=%llu P=%llu r=%llu", (unsigned long long)S,
               (unsigned long long)P, (unsigned long long)r);
        if (P) {
            uint64_t minp = (S + P - 1) / P, touched = (o + S - 1) / P - o / P + 1;
            CHECKF(touched == minp, "S=%llu P=%llu r=%llu straddles", (unsigned long long)S, (unsigned long long)P,
                   (unsigned long long)r);
            if (pads && S <= P)
                CHECK(P % g.slot == 0 && g.slot >= S);
        }
        prev_end = o + S;
    }
    if (!P)
        CHECK(g.data_bytes == rows * S);
    else
        CHECK(g.data_bytes % P == 0 && g.data_bytes - prev_end < g.group_bytes);
    if (P && pads && S <= P) { /* the padded slot is the smallest divisor of the page that holds a record */
        uint64_t want = S;
        while (P % want)
            want++;
        CHECKF(g.slot == want, "S=%llu P=%llu: slot %llu, smallest divisor >= S is %llu", (unsigned long long)S,
               (unsigned long long)P, (unsigned long long)g.slot, (unsigned long long)want);
    }
    /* straddle count against brute force, plain layout at several data starts */
    tq_rows_geom v1 = g;
    v1.page = 0;
    CHECK_OK(tq_rows_geom_layout(&v1, &err));
    uint64_t pages[3] = {64, 4096, 104};
    for (int k = 0; k < 3; k++)
        for (uint64_t ds = 8; ds < 200; ds += 64) {
            uint64_t want = 0, Q = pages[k], minp = (S + Q - 1) / Q;
            for (uint64_t r = 0; r < rows; r++) {
                uint64_t o = ds + r * S;
                want += (o + S - 1) / Q - o / Q + 1 > minp;
            }
            CHECKF(tq_rows_count_straddles(&v1, ds, Q) == want, "S=%llu Q=%llu ds=%llu",
                   (unsigned long long)S, (unsigned long long)Q, (unsigned long long)ds);
        }
    if (P)
        CHECK(tq_rows_count_straddles(&g, 0, P) == 0);
}

static void test_geometry(void)
{
    uint64_t strides[] = {1, 7, 8, 100, 128, 4095, 4096, 4097, 10000}; /* 8 divides 96, 8·8 < 96 */
    for (size_t i = 0; i < sizeof strides / sizeof *strides; i++) {
        brute_geom_check(333, strides[i], 0, 0);
        brute_geom_check(333, strides[i], 4096, 0);
        brute_geom_check(333, strides[i], 4096, 1);
        brute_geom_check(50, strides[i], 96, 1); /* non-power-of-two page */
    }
    tq_err err = {0};
    tq_rows_geom g = {.rows = 10, .stride = 100, .page = 4096, .pad_stride = 1};
    CHECK_OK(tq_rows_geom_layout(&g, &err));
    CHECK(g.slot == 128 && g.per_group == 32 && g.data_bytes == 4096);
    tq_rows_geom h = {.rows = 100, .stride = 100, .page = 4096};
    CHECK_OK(tq_rows_geom_layout(&h, &err));
    CHECK(h.slot == 100 && h.per_group == 40 && h.groups == 3 && h.data_bytes == 3 * 4096);
    tq_rows_geom z = {.rows = 10, .stride = 0};
    CHECK(tq_rows_geom_layout(&z, &err) != 0);
    tq_rows_geom big = {.rows = 1ull << 40, .stride = 1ull << 30};
    CHECK(tq_rows_geom_layout(&big, &err) != 0);
}

/* The chunk engine against an independent formula: every chunk size, every layout. */
static void test_chunk_engine(void)
{
    tq_err err = {0};
    tq_rows_geom g;
    memset(&g, 0, sizeof g);
    g.rows = 37;
    g.n_parts = 3;
    uint64_t prb[3] = {80, 10, 10};
    for (int p = 0; p < 3; p++) {
        g.parts[p].row_bytes = prb[p];
        g.parts[p].pos = g.stride;
        g.stride += prb[p];
        snprintf(g.parts[p].name, sizeof g.parts[p].name, "p%d", p);
    }
    unsigned char src[3][37 * 80];
    uint64_t s = 9;
    for (int p = 0; p < 3; p++)
        for (uint64_t k = 0; k < 37 * prb[p]; k++)
            src[p][k] = (unsigned char)rng32(&s);
    uint64_t pages[3] = {0, 256, 64};
    for (int pi = 0; pi < 3; pi++)
        for (int pads = 0; pads < 2; pads++) {
            g.page = pages[pi];
            g.pad_stride = pads && g.page;
            CHECK_OK(tq_rows_geom_layout(&g, &err));
            unsigned char *want = calloc(1, g.data_bytes), *got = calloc(1, g.data_bytes);
            for (uint64_t r = 0; r < g.rows; r++)
                for (int p = 0; p < 3; p++)
                    memcpy(want + tq_rows_record_offset(&g, r) + g.parts[p].pos, src[p] + r * prb[p], prb[p]);
            uint64_t chunks[] = {1, 3, 64, 99, 100, 101, 257, 5000};
            for (size_t ci = 0; ci < sizeof chunks / sizeof *chunks; ci++) {
                rows_io io;
                CHECK_OK(rows_io_init(&io, &g, chunks[ci], &err));
                memset(got, 0xee, g.data_bytes);
                for (uint64_t o0 = 0, o1; o0 < g.data_bytes; o0 = o1) {
                    o1 = rows_io_next(&io, o0);
                    CHECK(o1 > o0 && o1 - o0 <= io.chunk);
                    rows_io_plan(&io, o0, o1);
                    uint64_t tot = 0;
                    for (int p = 0; p < 3; p++) {
                        memcpy(io.src + io.sbo[p], src[p] + io.soff[p], io.slen[p]);
                        tot += io.slen[p];
                    }
                    CHECK(tot <= o1 - o0);
                    rows_io_scatter(&io, o0, o1);
                    memcpy(got + o0, io.out, o1 - o0);
                    memcpy(io.rb, io.out, o1 - o0);
                    rows_mismatch m;
                    CHECK(rows_io_compare(&io, o0, o1, &m) == 0);
                    /* a flipped byte is found where it is */
                    uint64_t at = (o1 - o0) / 2;
                    io.rb[at] ^= 1;
                    CHECK(rows_io_compare(&io, o0, o1, &m) == 1 && m.offset == o0 + at);
                    io.rb[at] ^= 1;
                    memset(io.src, 0, io.chunk);
                    rows_io_gather(&io, o0, o1);
                    for (int p = 0; p < 3; p++)
                        CHECK(!memcmp(io.src + io.sbo[p], src[p] + io.soff[p], io.slen[p]));
                }
                CHECKF(!memcmp(got, want, g.data_bytes), "page %llu pads %d chunk %llu",
                       (unsigned long long)g.page, pads, (unsigned long long)chunks[ci]);
                rows_io_free(&io);
            }
            free(want);
            free(got);
        }
}

/* ------------------------------------------------------------------ end to end */
static const table_spec specs[] = {
    /* width 160 at 4 bits: weight 20 u32 (80 B) + 5 f16 scales + 5 f16 biases = 100-byte records */
    {"ngram", 1000, 20, 5, 5, TQ_DT_U32, TQ_DT_F16, TQ_DT_F16, 0, 0},
    {"ngram", 257, 64, 8, 8, TQ_DT_U32, TQ_DT_BF16, TQ_DT_BF16, 0, 1},
    {"tok", 33, 3, 1, 0, TQ_DT_U32, TQ_DT_F16, TQ_DT_F16, 0, 0},       /* no biases, odd widths */
    {"emb", 64, 1100, 0, 0, TQ_DT_U32, TQ_DT_F16, TQ_DT_F16, 0, 0},     /* weight only, 4400-byte records */
    {"ngram", 0, 20, 5, 5, TQ_DT_U32, TQ_DT_F16, TQ_DT_F16, 0, 0},      /* empty table */
    {"ngram", 300, 96, 0, 0, TQ_DT_BF16, TQ_DT_F16, TQ_DT_F16, 0, 1},   /* raw BF16 rows, 192 B */
    {"ngram", 77, 33, 0, 0, TQ_DT_F16, TQ_DT_F16, TQ_DT_F16, 0, 0},     /* raw F16 rows, odd width */
};

static void roundtrip(const table_spec *s, uint64_t page, int pads, uint64_t chunk, int i)
{
    tq_err err = {0};
    char src[600], out[600], dir[600], name[64];
    snprintf(src, sizeof src, "%s", t_path("src.safetensors"));
    snprintf(out, sizeof out, "%s/rows-%d-%llu-%d.safetensors", t_tmpdir(), i, (unsigned long long)page, pads);
    snprintf(dir, sizeof dir, "%s/ex-%d-%llu-%d", t_tmpdir(), i, (unsigned long long)page, pads);
    unlink(out);
    CHECK(write_table(src, s, (uint64_t)i + 1) == 0);
    tq_rows_opts o = {.prefix = s->prefix, .page_align = page, .pad_stride = pads, .chunk_bytes = chunk, .quiet = 1};
    tq_rows_report r;
    CHECK_OK(tq_rows_convert(src, out, &o, &r, &err));
    uint64_t stride = s->wcols * tq_dtype_size(s->wdt) + s->scols * 2 + s->bcols * 2;
    CHECKF(r.rows == s->rows && r.row_bytes == stride && r.all_rows_bit_exact, "spec %d", i);
    if (page)
        CHECK(r.straddle_paged == 0);
    tq_rows_report_free(&r);
    /* a valid safetensors file holding exactly the records, record r = the parts' rows */
    tq_st_file *f = NULL, *sf = NULL;
    CHECK_OK(tq_st_open(&f, out, &err));
    CHECK_OK(tq_st_open(&sf, src, &err));
    if (f && sf) {
        CHECK(f->n_tensors == 1);
        CHECK(!strcmp(tq_st_meta(f, "format"), page ? TQ_ROWS_FORMAT_PAGED : TQ_ROWS_FORMAT_V1));
        if (page)
            CHECK(f->data_start % page == 0);
        tq_rows_geom g = {.rows = s->rows, .stride = stride, .page = page, .pad_stride = pads};
        CHECK_OK(tq_rows_geom_layout(&g, &err));
        unsigned char *rec = malloc(stride), *want = malloc(stride);
        const char *suf[3] = {"weight", "scales", "biases"};
        for (uint64_t row = 0; row < s->rows; row += 1 + s->rows / 50) {
            CHECK_OK(tq_st_read(f, &f->tensors[0], tq_rows_record_offset(&g, row), rec, stride, &err));
            uint64_t at = 0;
            for (int p = 0; p < 3; p++) {
                snprintf(name, sizeof name, "%s.%s", s->prefix, suf[p]);
                const tq_tensor_info *t = tq_st_find(sf, name);
                if (!t)
                    continue;
                uint64_t rb = t->nbytes / (s->rows ? s->rows : 1);
                CHECK_OK(tq_st_read(sf, t, row * rb, want + at, rb, &err));
                at += rb;
            }
            CHECKF(at == stride && !memcmp(rec, want, stride), "spec %d row %llu", i, (unsigned long long)row);
        }
        free(rec);
        free(want);
    }
    tq_st_close(f);
    tq_st_close(sf);
    CHECK_OK(tq_rows_check(out, NULL, &o, &r, &err));
    tq_rows_report_free(&r);
    tq_rows_opts ox = {.chunk_bytes = chunk, .quiet = 1};
    char rebuilt[700];
    snprintf(rebuilt, sizeof rebuilt, "%s/src.safetensors", dir);
    unlink(rebuilt);
    CHECK_OK(tq_rows_extract(out, dir, &ox, &r, &err));
    CHECK(r.byte_identical == !s->extra);
    tq_rows_report_free(&r);
    if (!s->extra)
        CHECKF(t_files_equal(rebuilt, src), "spec %d page %llu: extracted file differs", i, (unsigned long long)page);
}

static void test_roundtrip_tables(void)
{
    for (int i = 0; i < (int)(sizeof specs / sizeof *specs); i++) {
        roundtrip(&specs[i], 0, 0, 0, i);
        roundtrip(&specs[i], 4096, 0, 1000, i);
        roundtrip(&specs[i], 4096, 1, 0, i);
        roundtrip(&specs[i], 512, 0, 7, i);
        /* chunks of at least rows_convert.c's FILL_THREAD_MIN: the next chunk is filled on a
         * second thread while this one is written (the three above fill inline or in one chunk) */
        roundtrip(&specs[i], 0, 0, 16384, i);
    }
}

/* A source with another tensor: the rebuilt file has the table's tensors, bit for bit. */
static void test_extract_tensor_identical(void)
{
    tq_err err = {0};
    table_spec s = specs[0];
    s.extra = 1;
    s.meta = 1;
    const char *src = t_path("extra.safetensors"), *out = t_path("extra.rows"), *dir = t_path("extra-ex");
    unlink(out);
    CHECK(write_table(src, &s, 5) == 0);
    tq_rows_opts o = {.quiet = 1};
    tq_rows_report r;
    CHECK_OK(tq_rows_convert(src, out, &o, &r, &err));
    tq_rows_report_free(&r);
    char rebuilt[700];
    snprintf(rebuilt, sizeof rebuilt, "%s/extra.safetensors", dir);
    unlink(rebuilt);
    CHECK_OK(tq_rows_extract(out, dir, &o, &r, &err));
    CHECK(r.byte_identical == 0);
    tq_rows_report_free(&r);
    tq_st_file *a = NULL, *b = NULL;
    CHECK_OK(tq_st_open(&a, src, &err));
    CHECK_OK(tq_st_open(&b, rebuilt, &err));
    if (a && b) {
        CHECK(b->n_tensors == 3);
        for (size_t i = 0; i < b->n_tensors; i++) {
            const tq_tensor_info *tb = &b->tensors[i], *ta = tq_st_find(a, tb->name);
            CHECK(ta && ta->dtype == tb->dtype && ta->nbytes == tb->nbytes && ta->shape[0] == tb->shape[0] &&
                  ta->shape[1] == tb->shape[1]);
            if (!ta)
                continue;
            unsigned char *x = malloc(ta->nbytes), *y = malloc(tb->nbytes);
            CHECK_OK(tq_st_read(a, ta, 0, x, ta->nbytes, &err));
            CHECK_OK(tq_st_read(b, tb, 0, y, tb->nbytes, &err));
            CHECK(!memcmp(x, y, ta->nbytes));
            free(x);
            free(y);
        }
    }
    tq_st_close(a);
    tq_st_close(b);
}

static int check_msg(const char *rows, const char *src, char *msg, size_t cap)
{
    tq_err err = {0};
    tq_rows_opts o = {.quiet = 1, .chunk_bytes = 4096};
    tq_rows_report r;
    int rc = tq_rows_check(rows, src, &o, &r, &err);
    if (rc == 0)
        tq_rows_report_free(&r);
    snprintf(msg, cap, "%s", err.msg);
    return rc;
}

static void test_check_finds_first_bad_row(void)
{
    tq_err err = {0};
    const char *src = t_path("flip.safetensors"), *out = t_path("flip.rows");
    unlink(out);
    CHECK(write_table(src, &specs[0], 3) == 0);
    tq_rows_opts o = {.quiet = 1};
    tq_rows_report r;
    CHECK_OK(tq_rows_convert(src, out, &o, &r, &err));
    uint64_t ds = r.data_start;
    tq_rows_report_free(&r);
    char msg[1024];
    CHECK(check_msg(out, NULL, msg, sizeof msg) == 0);
    struct { uint64_t row, rbyte; const char *part; uint64_t pbyte; } cases[] = {
        {0, 0, "weight", 0}, {999, 99, "biases", 9}, {500, 85, "scales", 5}, {17, 90, "biases", 0}, {3, 79, "weight", 79}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint64_t off = ds + cases[i].row * 100 + cases[i].rbyte;
        int later = cases[i].row + 3 < 1000; /* a later row flipped too: the first one is named */
        t_flip_byte(out, off, 0x5a);
        if (later)
            t_flip_byte(out, off + 300, 0x5a);
        CHECK(check_msg(out, NULL, msg, sizeof msg) != 0);
        char want[200];
        snprintf(want, sizeof want, "row %llu differs: part '%s' byte %llu", (unsigned long long)cases[i].row,
                 cases[i].part, (unsigned long long)cases[i].pbyte);
        CHECKF(strstr(msg, want) != NULL, "want '%s' in '%s'", want, msg);
        t_flip_byte(out, off, 0x5a);
        if (later)
            t_flip_byte(out, off + 300, 0x5a);
        CHECKF(check_msg(out, NULL, msg, sizeof msg) == 0, "restored: %s", msg);
    }
    /* paged: a padding byte */
    const char *pout = t_path("flip.paged");
    unlink(pout);
    tq_rows_opts po = {.quiet = 1, .page_align = 4096};
    CHECK_OK(tq_rows_convert(src, pout, &po, &r, &err));
    uint64_t pds = r.data_start;
    tq_rows_report_free(&r);
    t_flip_byte(pout, pds + 4000 + 50, 0x5a); /* after the 40 records of page 0 */
    CHECK(check_msg(pout, NULL, msg, sizeof msg) != 0 && strstr(msg, "padding before row 40"));
    t_flip_byte(pout, pds + 4000 + 50, 0x5a);
    t_flip_byte(pout, pds + 4096 + 100 + 3, 0x5a); /* row 41, weight byte 3 */
    CHECK(check_msg(pout, NULL, msg, sizeof msg) != 0 && strstr(msg, "row 41 differs: part 'weight' byte 3"));
}

static void test_check_source_changed_and_truncated(void)
{
    tq_err err = {0};
    const char *src = t_path("chg.safetensors"), *out = t_path("chg.rows");
    unlink(out);
    CHECK(write_table(src, &specs[1], 4) == 0);
    tq_rows_opts o = {.quiet = 1};
    tq_rows_report r;
    CHECK_OK(tq_rows_convert(src, out, &o, &r, &err));
    tq_rows_report_free(&r);
    char msg[1024];
    struct stat st0;
    stat(src, &st0);
    /* mtime */
    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000, .tv_nsec = 5}};
    utimensat(AT_FDCWD, src, ts, 0);
    CHECK(check_msg(out, NULL, msg, sizeof msg) != 0 && strstr(msg, "source changed") && strstr(msg, "mtime_ns"));
    /* size: one byte appended */
    CHECK(write_table(src, &specs[1], 4) == 0);
    unlink(out);
    CHECK_OK(tq_rows_convert(src, out, &o, &r, &err));
    tq_rows_report_free(&r);
    int fd = open(src, O_WRONLY | O_APPEND);
    CHECK(write(fd, "x", 1) == 1);
    close(fd);
    CHECK(check_msg(out, NULL, msg, sizeof msg) != 0 && strstr(msg, "size ") && strstr(msg, "source changed"));
    /* header: same size, one metadata byte changed, mtime put back */
    CHECK(write_table(src, &specs[1], 4) == 0);
    unlink(out);
    CHECK_OK(tq_rows_convert(src, out, &o, &r, &err));
    tq_rows_report_free(&r);
    stat(src, &st0);
    size_t n;
    unsigned char *b = slurp(src, &n);
    unsigned char *p = b ? memmem(b, n, "test table", 10) : NULL;
    CHECK(p != NULL);
    if (p) {
        p[0] = 'T';
        fd = open(src, O_WRONLY);
        CHECK(pwrite(fd, b, n, 0) == (ssize_t)n);
        close(fd);
        struct timespec back[2] = {st0.st_atim, st0.st_mtim};
        utimensat(AT_FDCWD, src, back, 0);
        CHECK(check_msg(out, NULL, msg, sizeof msg) != 0 && strstr(msg, "header_sha256") && !strstr(msg, "mtime_ns") &&
              !strstr(msg, "size "));
    }
    free(b);
    /* truncated row file */
    CHECK(write_table(src, &specs[1], 4) == 0);
    unlink(out);
    CHECK_OK(tq_rows_convert(src, out, &o, &r, &err));
    tq_rows_report_free(&r);
    CHECK(check_msg(out, NULL, msg, sizeof msg) == 0);
    struct stat so;
    stat(out, &so);
    CHECK(truncate(out, so.st_size - 1) == 0);
    CHECK(check_msg(out, NULL, msg, sizeof msg) != 0 && strstr(msg, "truncated") && strstr(msg, "1 missing"));
    CHECK(truncate(out, 5) == 0);
    CHECK(check_msg(out, NULL, msg, sizeof msg) != 0 && strstr(msg, "too short"));
}

static void test_bad_inputs(void)
{
    tq_err err = {0};
    tq_rows_opts o = {.quiet = 1};
    tq_rows_report r;
    const char *src = t_path("bad.safetensors"), *out = t_path("bad.rows");
    struct { table_spec s; const char *want; int code; } cases[] = {
        {{"ngram", 10, 4, 2, 2, TQ_DT_F16, TQ_DT_F16, TQ_DT_F16, 0, 0}, "a raw F16/BF16 weight table has no scales or biases", TQ_EUNSUP},
        {{"ngram", 10, 4, 0, 0, TQ_DT_F32, TQ_DT_F16, TQ_DT_F16, 0, 0}, "weight must be U32 (packed) or F16/BF16 (raw rows)", TQ_EUNSUP},
        {{"ngram", 10, 4, 2, 2, TQ_DT_U32, TQ_DT_F32, TQ_DT_F16, 0, 0}, "must be F16 or BF16", TQ_EUNSUP},
        {{"other", 10, 4, 2, 2, TQ_DT_U32, TQ_DT_F16, TQ_DT_F16, 0, 0}, "no tensor 'ngram.weight' (U32 2-D tables present: 'other'", TQ_EDATA},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unlink(out);
        CHECK(write_table(src, &cases[i].s, 1) == 0);
        memset(&err, 0, sizeof err);
        CHECK(tq_rows_convert(src, out, &o, &r, &err) != 0);
        CHECKF(strstr(err.msg, cases[i].want) && err.code == cases[i].code, "%s", err.msg);
        CHECK(!tq_exists(out));
    }
    /* mismatched rows and a 3-D part, written by hand with the writer */
    tq_st_decl d1[2] = {{"ngram.scales", TQ_DT_F16, 2, {9, 2}}, {"ngram.weight", TQ_DT_U32, 2, {10, 4}}};
    tq_st_decl d2[1] = {{"ngram.weight", TQ_DT_U32, 3, {2, 5, 4}}};
    struct { tq_st_decl *d; size_t n; const char *want; } hand[2] = {
        {d1, 2, "'ngram.scales': has 9 rows but 'ngram.weight' has 10"}, {d2, 1, "has 3 dimensions"}};
    for (int i = 0; i < 2; i++) {
        unlink(out);
        unlink(src); /* a new source each time: outputs never replace a file unasked */
        tq_st_writer *w;
        CHECK_OK(tq_st_writer_open(&w, src, hand[i].d, hand[i].n, NULL, NULL, 0, 0, &err));
        for (size_t k = 0; k < hand[i].n; k++) {
            const tq_tensor_info *t = tq_st_writer_tensor(w, k);
            void *z = calloc(1, t->nbytes);
            CHECK_OK(tq_st_writer_write(w, k, 0, z, t->nbytes, &err));
            free(z);
        }
        CHECK_OK(tq_st_writer_finish(w, &err));
        memset(&err, 0, sizeof err);
        CHECK(tq_rows_convert(src, out, &o, &r, &err) != 0 && err.code == TQ_EDATA);
        CHECKF(strstr(err.msg, hand[i].want), "%s", err.msg);
        CHECK(!tq_exists(out));
    }
}

static void test_refuses_existing_and_source(void)
{
    tq_err err = {0};
    tq_rows_opts o = {.quiet = 1};
    tq_rows_report r;
    const char *src = t_path("ref.safetensors"), *out = t_path("ref.rows"), *hl = t_path("ref-link.safetensors");
    CHECK(write_table(src, &specs[2], 1) == 0);
    unlink(hl);
    CHECK(link(src, hl) == 0);
    size_t n0, n1;
    unsigned char *before = slurp(src, &n0);
    /* the source under another name is a path conflict (exit 2), named with both paths */
    CHECK(tq_rows_convert(src, hl, &o, &r, &err) != 0 && err.code == TQ_EUSAGE && strstr(err.msg, "is the input") &&
          strstr(err.msg, "ref-link.safetensors") && strstr(err.msg, "ref.safetensors itself"));
    CHECK(tq_rows_convert(src, src, &o, &r, &err) != 0 && err.code == TQ_EUSAGE);
    /* the one rule of outputs: an empty file gives way, a non-empty one needs force */
    int fd = open(out, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    close(fd);
    CHECK(tq_rows_convert(src, out, &o, &r, &err) != 0 && err.code != TQ_EEXIST); /* it went on, to the data */
    struct stat st;
    fd = open(out, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, "x", 1) == 1);
    close(fd);
    off_t was = 1;
    CHECK(tq_rows_convert(src, out, &o, &r, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, "exists and is not empty"));
    unsigned char *after = slurp(src, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0));
    free(before);
    free(after);
    CHECK(stat(out, &st) == 0 && st.st_size == was);
}

/* Reproducible output: the same source converts to the same bytes. */
static void test_deterministic(void)
{
    tq_err err = {0};
    tq_rows_opts o = {.quiet = 1, .chunk_bytes = 333};
    tq_rows_opts o2 = {.quiet = 1};
    tq_rows_report r;
    const char *src = t_path("det.safetensors"), *a = t_path("det-a.rows"), *b = t_path("det-b.rows");
    unlink(a);
    unlink(b);
    CHECK(write_table(src, &specs[0], 8) == 0);
    CHECK_OK(tq_rows_convert(src, a, &o, &r, &err));
    tq_rows_report_free(&r);
    CHECK_OK(tq_rows_convert(src, b, &o2, &r, &err));
    tq_rows_report_free(&r);
    CHECK(t_files_equal(a, b));
}

/* Fuzz seeds (tests/fuzz/corpus/rows/hdr-*) double as parser cases: tq's own headers and an
 * MTPLX-style one (unsorted keys, identity in MTPLX's key order, no tq metadata) open; the
 * damaged ones do not. */
static void test_header_seeds(void)
{
    const char *root = getenv("TQ_ROOT");
    const char *good[] = {"v1", "paged", "pads", "bigp", "mtplx_style"};
    const char *bad[] = {"parts_rows_mismatch", "wrong_format", "truncated_json", "empty", "paged_bad_layout"};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 5; i++) {
            char path[600];
            snprintf(path, sizeof path, "%s/tests/fuzz/corpus/rows/hdr-%s.safetensors", root ? root : ".",
                     k ? bad[i] : good[i]);
            tq_err err = {0};
            rows_file f;
            int rc = rows_file_open(&f, path, &err);
            CHECKF(k ? rc != 0 : rc == 0, "%s: %s", path, err.msg);
            if (rc == 0) {
                CHECK(!strcmp(f.prefix, strcmp(good[i], "bigp") ? "ngram" : "emb"));
                CHECK(f.g.rows > 0 && f.g.stride > 0 && (f.g.page != 0) == (f.paged != 0));
                CHECK(f.data_start + f.g.data_bytes == f.size);
                rows_file_close(&f);
            }
        }
}

/* A row file's 'parts': a packed weight (U32) may have F16/BF16 scales and biases; a raw
 * F16/BF16 weight stands alone; anything else is refused as malformed. */
static void test_parts_dtypes(void)
{
    static const struct { const char *json; int ok; uint64_t stride; } cases[] = {
        {"[[\"weight\",{\"dtype\":\"BF16\",\"shape\":[4,6],\"data_offsets\":[0,48]}]]", 1, 12},
        {"[[\"weight\",{\"dtype\":\"F16\",\"shape\":[4,3],\"data_offsets\":[0,24]}]]", 1, 6},
        {"[[\"weight\",{\"dtype\":\"U32\",\"shape\":[4,2],\"data_offsets\":[0,32]}],"
         "[\"scales\",{\"dtype\":\"BF16\",\"shape\":[4,1],\"data_offsets\":[32,40]}]]", 1, 10},
        {"[[\"weight\",{\"dtype\":\"F32\",\"shape\":[4,2],\"data_offsets\":[0,32]}]]", 0, 0},
        {"[[\"weight\",{\"dtype\":\"BF16\",\"shape\":[4,2],\"data_offsets\":[0,16]}],"
         "[\"scales\",{\"dtype\":\"BF16\",\"shape\":[4,1],\"data_offsets\":[16,24]}]]", 0, 0},
        {"[[\"weight\",{\"dtype\":\"U32\",\"shape\":[4,2],\"data_offsets\":[0,32]}],"
         "[\"scales\",{\"dtype\":\"U32\",\"shape\":[4,1],\"data_offsets\":[32,48]}]]", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tq_err err = {0};
        tq_rows_geom g;
        memset(&g, 0, sizeof g);
        int rc = rows_parts_from_json(cases[i].json, 4, &g, &err);
        CHECKF(cases[i].ok ? rc == 0 && g.stride == cases[i].stride : rc != 0 && err.code == TQ_EDATA &&
                                                                         strstr(err.msg, "needs a supported dtype"),
               "case %zu: rc %d stride %llu %s", i, rc, (unsigned long long)g.stride, err.msg);
    }
}

int main(void)
{
    RUN(test_canonical_matches_python);
    RUN(test_canonical_refuses);
    RUN(test_identity_json_roundtrip);
    RUN(test_geometry);
    RUN(test_chunk_engine);
    RUN(test_roundtrip_tables);
    RUN(test_extract_tensor_identical);
    RUN(test_check_finds_first_bad_row);
    RUN(test_check_source_changed_and_truncated);
    RUN(test_bad_inputs);
    RUN(test_parts_dtypes);
    RUN(test_refuses_existing_and_source);
    RUN(test_deterministic);
    RUN(test_header_seeds);
    TEST_MAIN_END();
}
