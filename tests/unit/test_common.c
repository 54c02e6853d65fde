/* common/: sizes, overflow checks, CRC-32, SHA-256, sorted JSON, atomic files, short reads, tq_open_regular, cgroup CPU limits. */
#include "common/common.h"
#include "tests/unit/check.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_parse_size(void)
{
    uint64_t v;
    CHECK(tq_parse_size("4096", &v) == 0 && v == 4096);
    CHECK(tq_parse_size("512M", &v) == 0 && v == 512ull << 20);
    CHECK(tq_parse_size("1.5G", &v) == 0 && v == 3ull << 29);
    CHECK(tq_parse_size("2GiB", &v) == 0 && v == 2ull << 30);
    CHECK(tq_parse_size("16k", &v) == 0 && v == 16384);
    CHECK(tq_parse_size("", &v) != 0);
    CHECK(tq_parse_size("12X", &v) != 0);
    CHECK(tq_parse_size("-1", &v) != 0);
    CHECK(tq_parse_size("99999999999T", &v) != 0);
    /* a unit or not: the option tables refuse a bare number as a size (issue 32) */
    int unit = -1;
    CHECK(tq_parse_size_unit("16", &v, &unit) == 0 && v == 16 && unit == 0);
    CHECK(tq_parse_size_unit("1.5", &v, &unit) == 0 && v == 1 && unit == 0);
    CHECK(tq_parse_size_unit("16G", &v, &unit) == 0 && v == 16ull << 30 && unit == 1);
    CHECK(tq_parse_size_unit("16GiB", &v, &unit) == 0 && v == 16ull << 30 && unit == 1);
    CHECK(tq_parse_size_unit("16B", &v, &unit) == 0 && v == 16 && unit == 1);
    CHECK(tq_parse_size_unit("4k", &v, &unit) == 0 && v == 4096 && unit == 1);
    CHECK(tq_parse_size_unit("16b", &v, &unit) != 0); /* bits or bytes? refused */
}

static void test_parse_ids(void)
{
    tq_err err = {0};
    int32_t *v = NULL;
    size_t n = 0;
    CHECK(tq_parse_ids("3,1,4", &v, &n, &err) == 0 && n == 3 && v[0] == 3 && v[1] == 1 && v[2] == 4);
    free(v);
    CHECK(tq_parse_ids("2147483647", &v, &n, &err) == 0 && n == 1 && v[0] == INT32_MAX);
    free(v);
    CHECK(tq_parse_ids("0", &v, &n, &err) == 0 && n == 1 && v[0] == 0);
    free(v);
    static const char *bad[] = {"", ",", "1,", ",1", "1,,2", "-1", "+1", " 1", "1 ", "1;2", "0x10",
                                "2147483648", "99999999999999999999999", "1,2a"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err.code = 0;
        CHECKF(tq_parse_ids(bad[i], &v, &n, &err) == -1 && err.code == TQ_EUSAGE, "'%s' accepted", bad[i]);
    }
    CHECK(tq_parse_ids("1,2a", &v, &n, &err) == -1 && strstr(err.msg, "id 2 ('2a')"));
}

/* tq_parse_id_text: what tq-run --decode and --eval-ids read (moved from cmd/tq-run.c; a
 * consistency test of that behaviour, which tests/cli/run-*.sh pin end to end). */
static void test_parse_id_text(void)
{
    tq_err err = {0};
    int32_t *v = NULL;
    size_t n = 9;
    char a[] = " \t3,1,4\r\n";
    CHECK(tq_parse_id_text(a, sizeof a - 1, &v, &n, &err) == 0 && n == 3 && v[0] == 3 && v[2] == 4);
    free(v);
    char b[] = " \n\t";
    CHECK(tq_parse_id_text(b, sizeof b - 1, &v, &n, &err) == 0 && n == 0 && !v); /* nothing: no ids */
    char c[] = "1\0002";
    CHECK(tq_parse_id_text(c, sizeof c - 1, &v, &n, &err) == -1 && strstr(err.msg, "NUL byte at offset 1"));
    char d[] = "1, 2";
    CHECK(tq_parse_id_text(d, sizeof d - 1, &v, &n, &err) == -1 && err.code == TQ_EUSAGE);
}

/* tq_parse_udec: canonical unsigned decimals (no sign, no leading zero) up to a bound, which
 * layer/expert indices in tensor names, GGUF block numbers and MTPLX metadata all use. */
static void test_parse_udec(void)
{
    uint64_t v = 7;
    const char *s;
    CHECK((s = tq_parse_udec("0", 10, &v)) && !*s && v == 0);
    CHECK((s = tq_parse_udec("12.weight", 100, &v)) && !strcmp(s, ".weight") && v == 12);
    CHECK((s = tq_parse_udec("10", 10, &v)) && !*s && v == 10);     /* the bound itself */
    CHECK((s = tq_parse_udec("0.x", 0, &v)) && *s == '.' && v == 0); /* bound 0 */
    CHECK((s = tq_parse_udec("18446744073709551615", UINT64_MAX, &v)) && !*s && v == UINT64_MAX);
    CHECK((s = tq_parse_udec("4294967295x", UINT32_MAX, &v)) && *s == 'x' && v == UINT32_MAX);
    v = 7;
    static const struct { const char *s; uint64_t max; } bad[] = {
        {"", 10}, {"x", 10}, {"-1", 10}, {"+1", 10}, {" 1", 10}, {"01", 10}, {"00", 10}, {"007.", 1000},
        {"11", 10}, {"1", 0}, {"4294967296", UINT32_MAX}, {"18446744073709551616", UINT64_MAX},
        {"99999999999999999999", UINT64_MAX}, {"184467440737095516150", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKF(!tq_parse_udec(bad[i].s, bad[i].max, &v) && v == 7, "'%s' (max %llu) accepted", bad[i].s,
               (unsigned long long)bad[i].max);
}

static void test_strings(void)
{
    tq_err err = {0};
    tq_sb b = {0};
    char *s = tq_sb_finish(&b, &err);
    CHECK(s && !strcmp(s, ""));
    free(s);
    for (int i = 0; i < 300; i++)
        tq_sb_printf(&b, "%d,", i);
    tq_sb_str(&b, "end");
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    tq_sb_printf(&b, "%s", big); /* longer than tq_sb_printf's stack buffer */
    s = tq_sb_finish(&b, &err);
    CHECK(s && !strncmp(s, "0,1,2,", 6) && strstr(s, ",299,end") && strlen(strstr(s, "end")) == 3 + 299);
    CHECK(b.s == NULL && b.len == 0);
    free(s);
    s = tq_asprintf(&err, "%s.%llu.%s", "model.layers", 12ull, "weight");
    CHECK(s && !strcmp(s, "model.layers.12.weight"));
    free(s);
}

static void test_utf8(void)
{
    uint32_t cp;
    size_t bad = 99;
    CHECK(tq_utf8_next("\xe2\x82\xac", 3, &cp) == 3 && cp == 0x20AC);
    CHECK(tq_utf8_next("\xf4\x8f\xbf\xbf", 4, &cp) == 4 && cp == 0x10FFFF);
    CHECK(tq_utf8_check("a\0b", 3, &bad) == 0); /* NUL is valid UTF-8 */
    CHECK(tq_utf8_check("ok \xc3\xa9", 5, NULL) == 0);
    /* every limit at the edge, accepted side: the shortest forms' smallest code points
     * U+0080, U+0800, U+10000, and the neighbours of the surrogates U+D7FF, U+E000 */
    CHECK(tq_utf8_next("\xc2\x80", 2, &cp) == 2 && cp == 0x80);
    CHECK(tq_utf8_next("\xe0\xa0\x80", 3, &cp) == 3 && cp == 0x800);
    CHECK(tq_utf8_next("\xf0\x90\x80\x80", 4, &cp) == 4 && cp == 0x10000);
    CHECK(tq_utf8_next("\xed\x9f\xbf", 3, &cp) == 3 && cp == 0xD7FF);
    CHECK(tq_utf8_next("\xee\x80\x80", 3, &cp) == 3 && cp == 0xE000);
    static const struct { const char *s; size_t len, bad; } no[] = {
        {"ab\xc0\xaf", 4, 2},          /* overlong '/' */
        {"\xe0\x80\xaf", 3, 0},        /* overlong, 3 bytes */
        {"x\xed\xa0\x80", 4, 1},       /* surrogate U+D800 */
        {"x\xed\xbf\xbf", 4, 1},       /* surrogate U+DFFF */
        {"\xc1\xbf", 2, 0},            /* overlong U+007F, 2 bytes */
        {"\xe0\x9f\xbf", 3, 0},        /* overlong U+07FF, 3 bytes */
        {"\xf0\x8f\xbf\xbf", 4, 0},    /* overlong U+FFFF, 4 bytes */
        {"\xf4\x90\x80\x80", 4, 0},   /* above U+10FFFF */
        {"\xe2\x82", 2, 0},            /* cut short by the end */
        {"\xe2\x82\xac", 2, 0},        /* cut short by len, not by NUL */
        {"a\x80", 2, 1},               /* stray continuation byte */
        {"\xff", 1, 0},
    };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECKF(tq_utf8_check(no[i].s, no[i].len, &bad) == -1 && bad == no[i].bad, "case %zu: bad %zu", i, bad);
}

static void test_json_exact(void)
{
    size_t at = 0;
    int trailing = 0;
    cJSON *j = tq_json_parse("{\"a\": 1} \n", 10, &at, &trailing);
    CHECK(j && !trailing);
    cJSON_Delete(j);
    CHECK(tq_json_parse("{\"a\": 1} x", 10, &at, &trailing) == NULL && trailing && at == 9);
    CHECK(tq_json_parse("{\"a\": }", 8, &at, &trailing) == NULL && !trailing);
    CHECK(tq_json_parse("[1][2]", 6, &at, &trailing) == NULL && trailing && at == 3);
    /* exactly len bytes: what follows is not read */
    j = tq_json_parse("[12]34", 4, NULL, NULL);
    CHECK(j && cJSON_GetArrayItem(j, 0)->valuedouble == 12);
    cJSON_Delete(j);
    uint64_t v;
    cJSON *n = cJSON_Parse("[9007199254740991, 9007199254740992, 9007199254740993, -1, 1.5, 0]");
    CHECK(tq_json_u64(cJSON_GetArrayItem(n, 0), &v) == 0 && v == 9007199254740991ull);
    CHECK(tq_json_u64(cJSON_GetArrayItem(n, 1), &v) == -1); /* 2^53: also what 2^53 + 1 parses to */
    CHECK(tq_json_u64(cJSON_GetArrayItem(n, 2), &v) == -1);
    CHECK(tq_json_u64(cJSON_GetArrayItem(n, 3), &v) == -1);
    CHECK(tq_json_u64(cJSON_GetArrayItem(n, 4), &v) == -1);
    CHECK(tq_json_u64(cJSON_GetArrayItem(n, 5), &v) == 0 && v == 0);
    cJSON_Delete(n);
}

typedef struct work_t {
    int hits[100];
    uint64_t order[100];
    size_t n_order;
    uint64_t fail_at;   /* UINT64_MAX: none */
    int use_turns, scratch_bad;
} work_t;

static int work_item(tq_work *w, void *ctx, int worker, uint64_t item, tq_err *e)
{
    work_t *t = ctx;
    unsigned char *buf = tq_work_scratch(w, worker, 100, e);
    if (!buf)
        return -1;
    /* fresh buffers are zero and aligned; a worker's later items see what it left */
    if ((uintptr_t)buf % 4096 || (buf[0] && buf[0] != (unsigned char)(worker + 1)))
        t->scratch_bad = 1;
    buf[0] = (unsigned char)(worker + 1);
    __atomic_add_fetch(&t->hits[item], 1, __ATOMIC_SEQ_CST);
    if (item == t->fail_at)
        return tq_fail(e, TQ_EDATA, "item %llu failed", (unsigned long long)item);
    if (!t->use_turns)
        return 0;
    if (tq_work_turn(w, item) != 0)
        return -1;
    t->order[t->n_order++] = item; /* only the turn holder writes */
    tq_work_progress(w, 1);
    tq_work_turn_done(w);
    return 0;
}

static void test_work_queue(void)
{
    static const int threads[] = {1, 2, 7, 200};
    for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
        tq_err err = {0};
        work_t t = {.fail_at = UINT64_MAX, .use_turns = 1};
        tq_progress prog;
        tq_progress_init(&prog, "test", 100, 1);
        CHECK(tq_work_run(100, threads[ti], work_item, &t, &prog, &err) == 0);
        int once = 1;
        for (int i = 0; i < 100; i++)
            once &= t.hits[i] == 1 && t.order[i] == (uint64_t)i;
        CHECKF(once && t.n_order == 100 && prog.done == 100 && !t.scratch_bad, "threads %d", threads[ti]);

        /* the first failure stops the run and is the error returned */
        work_t f = {.fail_at = 40, .use_turns = 1};
        CHECK(tq_work_run(100, threads[ti], work_item, &f, NULL, &err) == -1 && !strcmp(err.msg, "item 40 failed"));
        /* items before the failing one that were still waiting for their turn when it failed
         * give up (the run has failed), so only one thread guarantees all 40; any thread count
         * keeps the turns in order and never passes the failing item */
        int prefix = f.n_order <= 40;
        for (size_t i = 0; prefix && i < f.n_order; i++)
            prefix = f.order[i] == (uint64_t)i;
        CHECKF(prefix && (threads[ti] > 1 || f.n_order == 40), "threads %d: %zu items hashed in turn",
               threads[ti], f.n_order);
        int after = 0;
        for (int i = 41; i < 100; i++)
            after += f.hits[i];
        CHECKF(after <= threads[ti] - 1, "threads %d: %d items ran after the failure", threads[ti], after);
    }
    tq_err err = {0};
    work_t z = {.fail_at = UINT64_MAX};
    CHECK(tq_work_run(0, 4, work_item, &z, NULL, &err) == 0);
}

static void test_overflow(void)
{
    uint64_t v;
    CHECK(tq_mul_u64(1ull << 32, 1ull << 31, &v) == 0 && v == 1ull << 63);
    CHECK(tq_mul_u64(1ull << 32, 1ull << 32, &v) != 0);
    CHECK(tq_add_u64(UINT64_MAX, 1, &v) != 0);
    CHECK(tq_add_u64(UINT64_MAX - 1, 1, &v) == 0 && v == UINT64_MAX);
    /* tq_align_up: a multiple stays, one past it goes to the next, either side of the top */
    CHECK(tq_align_up(0, 4096, &v) == 0 && v == 0);
    CHECK(tq_align_up(4096, 4096, &v) == 0 && v == 4096);
    CHECK(tq_align_up(4095, 4096, &v) == 0 && v == 4096);
    CHECK(tq_align_up(4097, 4096, &v) == 0 && v == 8192);
    CHECK(tq_align_up(UINT64_MAX - 4095, 4096, &v) == 0 && v == UINT64_MAX - 4095);
    CHECK(tq_align_up(UINT64_MAX - 4094, 4096, &v) != 0);
    CHECK(tq_align_up(10, 0, &v) != 0 && tq_align_up(10, 24, &v) != 0);
}

static void test_crc32(void)
{
    CHECK(tq_crc32("123456789", 9) == 0xCBF43926u);
    CHECK(tq_crc32("", 0) == 0);
}

static void test_sha256(void)
{
    unsigned char d[32];
    char hex[65];
    tq_sha256_buf("abc", 3, d);
    tq_hex(d, 32, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
}

static void test_json_sorted(void)
{
    tq_err err = {0};
    cJSON *j = cJSON_Parse("{\"b\":1,\"a\":{\"z\":[1,{\"y\":2,\"x\":\"t\\\"\\tq\"}],\"c\":true},\"_\":null}");
    CHECK(j != NULL);
    char *s = tq_json_print(j, &err);
    CHECK(s != NULL);
    const char *want = "{\n  \"_\": null,\n  \"a\": {\n    \"c\": true,\n    \"z\": [1, {\n        \"x\": \"t\\\"\\tq\",\n        \"y\": 2\n      }]\n  },\n  \"b\": 1\n}\n";
    CHECKF(s && !strcmp(s, want), "got:\n%s", s ? s : "(null)");
    cJSON *k = cJSON_Parse(s);
    CHECK(k && cJSON_GetObjectItem(k, "b") && cJSON_GetObjectItem(k, "b")->valueint == 1);
    cJSON_Delete(k);
    free(s);
    cJSON_Delete(j);
}

static int count_partials(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, ".partial-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void test_afile(void)
{
    tq_err err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/afile.bin", t_tmpdir());
    unlink(path);
    tq_afile f;
    CHECK_OK(tq_afile_open(&f, path, 0, &err));
    CHECK(!tq_exists(path));
    CHECK(count_partials(t_tmpdir()) == 1);
    CHECK_OK(tq_write_full(f.fd, "hello", 5, f.tmp_path, &err));
    CHECK_OK(tq_afile_commit(&f, &err));
    uint64_t sz = 0;
    CHECK_OK(tq_file_size(path, &sz, &err));
    CHECK(sz == 5);
    CHECK(count_partials(t_tmpdir()) == 0);
    /* the one rule: a non-empty file is refused without REPLACE (--force) */
    CHECK(tq_afile_open(&f, path, 0, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, "use --force"));
    CHECK(count_partials(t_tmpdir()) == 0);
    CHECK_OK(tq_afile_open(&f, path, TQ_AFILE_REPLACE, &err));
    tq_afile_abort(&f);
    CHECK(count_partials(t_tmpdir()) == 0);
    CHECK_OK(tq_file_size(path, &sz, &err));
    CHECK(sz == 5);
    unlink(path);
}

static void test_short_read_names_file(void)
{
    tq_err err = {0};
    char path[512], buf[16];
    snprintf(path, sizeof path, "%s/short.bin", t_tmpdir());
    CHECK_OK(tq_write_file_atomic(path, "abc", 3, &err));
    int fd = open(path, O_RDONLY);
    CHECK(tq_pread_full(fd, buf, 8, 0, path, &err) != 0);
    CHECK(strstr(err.msg, path) && strstr(err.msg, "offset 3"));
    close(fd);
    unlink(path);
}

/* tq_open_regular: size of a regular file; a missing path and a directory are refused by name. */
static void test_open_regular(void)
{
    tq_err err = {0};
    char path[512];
    uint64_t size = 0;
    snprintf(path, sizeof path, "%s/regular.bin", t_tmpdir());
    CHECK_OK(tq_write_file_atomic(path, "abcde", 5, &err));
    int fd = tq_open_regular(path, &size, &err);
    CHECK(fd >= 0 && size == 5);
    if (fd >= 0)
        close(fd);
    unlink(path);
    CHECK(tq_open_regular(path, &size, &err) == -1);
    CHECK(err.code == TQ_EIO && strstr(err.msg, path) && strstr(err.msg, "cannot open"));
    CHECK(tq_open_regular(t_tmpdir(), &size, &err) == -1);
    CHECK(err.code == TQ_EDATA && strstr(err.msg, "not a regular file (a directory)"));
}

/* A FIFO with no writer: a plain open(O_RDONLY) would wait for one forever; tq_open_regular
 * returns at once, naming it. The descriptor of a regular file comes back blocking (the
 * O_NONBLOCK used for the open is cleared). */
static void test_open_regular_fifo(void)
{
    tq_err err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/fifo", t_tmpdir());
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0);
    double t0 = tq_now();
    CHECK(tq_open_regular(path, NULL, &err) == -1);
    CHECK(tq_now() - t0 < 5);
    CHECK(err.code == TQ_EDATA && strstr(err.msg, path) && strstr(err.msg, "not a regular file (a FIFO)"));
    unlink(path);
    CHECK(tq_open_regular("/dev/null", NULL, &err) == -1);
    CHECK(strstr(err.msg, "/dev/null: not a regular file (a character device)"));
    snprintf(path, sizeof path, "%s/plain.bin", t_tmpdir());
    CHECK_OK(tq_write_file_atomic(path, "x", 1, &err));
    int fd = tq_open_regular(path, NULL, &err);
    CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
    if (fd >= 0)
        close(fd);
    unlink(path);
}

/* A file under the test directory holding `text` (parent directories made). */
static void put(const char *rel, const char *text)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", t_path(rel));
    CHECK(system(cmd) == 0);
    FILE *f = fopen(t_path(rel), "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* cgroup CPU limits over fake /proc/self/cgroup files and mounts (the kernel's formats:
 * cgroup v2 cpu.max "QUOTA PERIOD" / "max PERIOD", v1 cpu.cfs_quota_us -1 = none). */
static void test_cgroup_cpus(void)
{
    char root[4096];
    snprintf(root, sizeof root, "%s", t_path("cg"));
    /* v2: a limit of 2.5 CPUs on the cgroup rounds up to 3; an ancestor's 2 wins. */
    put("cg/self-v2", "0::/a/b\n");
    put("cg/a/b/cpu.max", "250000 100000\n");
    CHECK(tq_cgroup_cpus(t_path("cg/self-v2"), root) == 3);
    put("cg/a/cpu.max", "200000 100000\n");
    CHECK(tq_cgroup_cpus(t_path("cg/self-v2"), root) == 2);
    put("cg/a/cpu.max", "max 100000\n");
    put("cg/a/b/cpu.max", "max 100000\n");
    CHECK(tq_cgroup_cpus(t_path("cg/self-v2"), root) == 0);
    put("cg/cpu.max", "50000 100000\n"); /* half a CPU at the root: 1 */
    CHECK(tq_cgroup_cpus(t_path("cg/self-v2"), root) == 1);
    /* v1: the cpu controller's mount, other controllers ignored. */
    put("cg/self-v1", "4:memory:/x\n2:cpu,cpuacct:/x\n0::/\n");
    put("cg/cpu,cpuacct/x/cpu.cfs_quota_us", "-1\n");
    put("cg/cpu,cpuacct/x/cpu.cfs_period_us", "100000\n");
    put("cg/memory/x/cpu.cfs_quota_us", "100000\n");
    put("cg/memory/x/cpu.cfs_period_us", "100000\n");
    CHECK(tq_cgroup_cpus(t_path("cg/self-v1"), root) == 1); /* the v2 root's 50000/100000 */
    unlink(t_path("cg/cpu.max"));
    CHECK(tq_cgroup_cpus(t_path("cg/self-v1"), root) == 0);
    put("cg/cpu,cpuacct/x/cpu.cfs_quota_us", "400000\n");
    CHECK(tq_cgroup_cpus(t_path("cg/self-v1"), root) == 4);
    /* Nothing readable: no limit. */
    CHECK(tq_cgroup_cpus(t_path("cg/missing"), root) == 0);
    put("cg/self-bad", "garbage\n0::relative\n");
    CHECK(tq_cgroup_cpus(t_path("cg/self-bad"), root) == 0);
    int n = tq_default_threads();
    CHECK(n >= 1 && n <= 256);
}

/* tq_grow: the array itself while there is room, doubled (64 at first) when full, contents
 * kept; an impossible size fails with ENOMEM and leaves the array the caller's. */
static void test_grow(void)
{
    tq_err e = {0};
    size_t cap = 0, n = 0;
    int *a = NULL;
    for (int i = 0; i < 200; i++) {
        int *na = tq_grow(a, &cap, n, sizeof *na, &e);
        CHECK(na != NULL);
        if (!na)
            break;
        a = na;
        a[n++] = i;
    }
    CHECK(cap == 256 && n == 200);
    int ok = a != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = a[i] == (int)i;
    CHECK(ok);
    CHECK(tq_grow(a, &cap, n, sizeof *a, &e) == a); /* room left: unchanged */
    size_t big = SIZE_MAX / 2 + 1;
    CHECK(tq_grow(a, &big, big, 8, &e) == NULL && e.code == TQ_ENOMEM && big == SIZE_MAX / 2 + 1);
    free(a);
}

/* tq_sb_escaped: the printing rule of man tq-verify(1) (ls): backslash doubled, C0 and DEL as
 * \xNN, everything else (UTF-8 included) as is. Expected strings written out by hand. */
static void test_escaped(void)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"", ""},
        {"plain.safetensors", "plain.safetensors"},
        {"a\\b", "a\\\\b"},
        {"x\nOK: all good", "x\\x0aOK: all good"},
        {"\r\x1b[2J\x07\x7f\x01\t", "\\x0d\\x1b[2J\\x07\\x7f\\x01\\x09"},
        {"caf\xc3\xa9 \xff", "caf\xc3\xa9 \xff"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tq_sb b = {0};
        CHECK(tq_sb_escaped(&b, cases[i].in) == 0);
        char *got = tq_sb_finish(&b, NULL);
        CHECKF(got && !strcmp(got, cases[i].want), "case %zu: got '%s', want '%s'", i, got ? got : "(null)",
               cases[i].want);
        free(got);
    }
}

int main(void)
{
    RUN(test_parse_size);
    RUN(test_escaped);
    RUN(test_parse_ids);
    RUN(test_parse_id_text);
    RUN(test_parse_udec);
    RUN(test_overflow);
    RUN(test_work_queue);
    RUN(test_strings);
    RUN(test_utf8);
    RUN(test_json_exact);
    RUN(test_crc32);
    RUN(test_sha256);
    RUN(test_json_sorted);
    RUN(test_afile);
    RUN(test_short_read_names_file);
    RUN(test_open_regular);
    RUN(test_open_regular_fifo);
    RUN(test_cgroup_cpus);
    RUN(test_grow);
    TEST_MAIN_END();
}
