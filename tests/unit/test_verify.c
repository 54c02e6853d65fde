/* verify/: SHA256SUMS parsing, manifests, localized checks, deterministic and hostile bundles. */
#include "common/common.h"
#include "formats/formats.h"
#include "tests/unit/check.h"
#include "verify/verify.h"

#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

static char root[4096];

static void path_of(char *out, size_t cap, const char *a, const char *b)
{
    if (b)
        snprintf(out, cap, "%s/%s/%s", root, a, b);
    else
        snprintf(out, cap, "%s/%s", root, a);
}

static void write_text(const char *dir, const char *rel, const char *text)
{
    char p[4096];
    path_of(p, sizeof p, dir, rel);
    char *slash = strrchr(p, '/');
    *slash = 0;
    tq_err err;
    tq_mkdir_p(p, &err);
    *slash = '/';
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
}

/* A model dir: a safetensors file with three tensors (one of them `big` bytes), nested files. */
static void make_dir(const char *name, uint64_t big)
{
    char d[4096], p[4096];
    path_of(d, sizeof d, name, NULL);
    tq_err err;
    tq_mkdir_p(d, &err);
    tq_st_decl decl[3] = {
        {.name = "alpha", .dtype = TQ_DT_F32, .ndim = 2, .shape = {4, 8}},
        {.name = "beta", .dtype = TQ_DT_U8, .ndim = 1, .shape = {big}},
        {.name = "gamma", .dtype = TQ_DT_BF16, .ndim = 1, .shape = {33}},
    };
    path_of(p, sizeof p, name, "model.safetensors");
    tq_st_writer *w;
    CHECK_OK(tq_st_writer_open(&w, p, decl, 3, NULL, NULL, 0, 0, &err));
    unsigned char *buf = malloc(1 << 20);
    for (size_t i = 0; i < 3; i++) {
        const tq_tensor_info *t = tq_st_writer_tensor(w, i);
        for (uint64_t off = 0; off < t->nbytes;) {
            size_t n = t->nbytes - off < (1 << 20) ? (size_t)(t->nbytes - off) : (1 << 20);
            for (size_t k = 0; k < n; k++)
                buf[k] = (unsigned char)((off + k) * 131 + i * 7 + ((off + k) >> 13));
            CHECK_OK(tq_st_writer_write(w, i, off, buf, n, &err));
            off += n;
        }
    }
    free(buf);
    CHECK_OK(tq_st_writer_finish(w, &err));
    write_text(name, "config.json", "{\"model_type\": \"test\"}\n");
    write_text(name, "tokenizer/vocab.txt", "a\nb\nc\n");
    write_text(name, "tokenizer.json", "{}\n");
}

static char *manifest_text(const tq_manifest *m)
{
    tq_err err;
    cJSON *j = tq_manifest_to_json(m, &err);
    char *s = tq_json_print(j, &err);
    cJSON_Delete(j);
    return s;
}

static void test_sums_parse(void)
{
    tq_err err;
    tq_sum_entry *v;
    size_t n;
    const char *h = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char ok[1024];
    snprintf(ok, sizeof ok, "%s  b/c.txt\n%s *a.bin\n%.64s  x y", h, h, "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855");
    CHECK_OK(tq_sums_parse(ok, strlen(ok), "S", &v, &n, &err));
    CHECK(n == 3 && !strcmp(v[0].path, "a.bin") && !strcmp(v[1].path, "b/c.txt") && !strcmp(v[2].path, "x y"));
    CHECK(n == 3 && v[0].sha256[0] == 0xe3 && v[2].sha256[31] == 0x55);
    tq_sums_free(v, n);
    CHECK_OK(tq_sums_parse("", 0, "S", &v, &n, &err));
    CHECK(n == 0);
    const char *bad[] = {"abc  x\n", "%s x\n", "%s  /etc/passwd\n", "%s  ../x\n", "%s  a/../x\n", "%s  a//b\n",
                         "%s  ./a\n", "%s  a\n%s  a\n", "%s  \n", "%s\tx\n", "%s  a\\b\n", "%s  a\rb\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char t[512];
        snprintf(t, sizeof t, bad[i], h, h);
        CHECKF(tq_sums_parse(t, strlen(t), "S", &v, &n, &err) != 0, "case %zu accepted", i);
        CHECK(err.code == TQ_EDATA && strstr(err.msg, "S: "));
    }
    char nul[200];
    snprintf(nul, sizeof nul, "%s  ab", h);
    nul[66] = 0;
    CHECK(tq_sums_parse(nul, 68, "S", &v, &n, &err) != 0);
    char badhex[200];
    snprintf(badhex, sizeof badhex, "%s  a\n", h);
    badhex[10] = 'g';
    CHECK(tq_sums_parse(badhex, strlen(badhex), "S", &v, &n, &err) != 0 && strstr(err.msg, "hex"));
}

static void test_manifest_threads_roundtrip(void)
{
    make_dir("m1", 1000);
    char d[4096];
    path_of(d, sizeof d, "m1", NULL);
    tq_err err;
    tq_manifest *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tq_manifest_build(d, 1, &a, &err));
    CHECK_OK(tq_manifest_build(d, 3, &b, &err));
    if (!a || !b)
        return;
    CHECK(a->n_files == 4);
    CHECK(!strcmp(a->files[0].path, "config.json") && !strcmp(a->files[3].path, "tokenizer/vocab.txt"));
    const tq_mf_file *st = tq_manifest_find(a, "model.safetensors");
    CHECK(st && st->safetensors && st->n_ranges == 3);
    if (st && st->n_ranges == 3) {
        CHECK(!strcmp(st->ranges[0].name, "alpha") && !strcmp(st->ranges[0].dtype, "F32") &&
              st->ranges[0].ndim == 2 && st->ranges[0].shape[1] == 8 && st->ranges[0].nbytes == 128);
        /* The tensor hash is the hash of exactly its bytes. */
        char p[4096];
        path_of(p, sizeof p, "m1", "model.safetensors");
        int fd = open(p, O_RDONLY);
        unsigned char h[32];
        CHECK_OK(tq_sha256_range(fd, st->ranges[1].offset, st->ranges[1].nbytes, p, h, &err));
        close(fd);
        CHECK(!memcmp(h, st->ranges[1].sha256, 32));
        uint64_t sz;
        CHECK_OK(tq_sha256_file(p, h, &sz, &err));
        CHECK(!memcmp(h, st->sha256, 32) && sz == st->size);
    }
    char *ta = manifest_text(a), *tb = manifest_text(b);
    CHECK(ta && tb && !strcmp(ta, tb));
    CHECK_OK(tq_manifest_from_json(ta, strlen(ta), "m", &c, &err));
    char *tc = c ? manifest_text(c) : NULL;
    CHECK(tc && !strcmp(ta, tc));
    free(ta);
    free(tb);
    free(tc);
    tq_manifest_free(a);
    tq_manifest_free(b);
    tq_manifest_free(c);
}

static void test_manifest_json_hostile(void)
{
    tq_err err;
    tq_manifest *m;
    const char *h = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const char *bad[] = {
        "[]", "{\"format\":\"other\",\"files\":{}}", "{\"format\":\"tq_manifest_v1\"}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"../x\":{\"size\":1,\"sha256\":\"%s\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"/x\":{\"size\":1,\"sha256\":\"%s\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"SHA256SUMS\":{\"size\":1,\"sha256\":\"%s\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":-1,\"sha256\":\"%s\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":1.5,\"sha256\":\"%s\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":1e30,\"sha256\":\"%s\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":1,\"sha256\":\"abc\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":1,\"sha256\":\"%s\"},\"x\":{\"size\":1,\"sha256\":\"%s\"}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":10,\"sha256\":\"%s\",\"tensors\":{\"t\":{\"offsets\":[4,11],\"sha256\":\"%s\",\"dtype\":\"U8\",\"shape\":[7]}}}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":10,\"sha256\":\"%s\",\"tensors\":{\"t\":{\"offsets\":[5,4],\"sha256\":\"%s\",\"dtype\":\"U8\",\"shape\":[7]}}}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":10,\"sha256\":\"%s\",\"blocks\":{\"b\":{\"offsets\":[0,4],\"sha256\":\"%s\"}}}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":10,\"sha256\":\"%s\",\"tensors\":[]}}}",
        "{\"format\":\"tq_manifest_v1\",\"files\":{\"x\":{\"size\":1,\"sha256\":\"%s\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char t[1024];
        snprintf(t, sizeof t, bad[i], h, h);
        m = NULL;
        CHECKF(tq_manifest_from_json(t, strlen(t), "M", &m, &err) != 0, "case %zu accepted", i);
        CHECK(err.code == TQ_EDATA);
    }
}

static int has_problem(const tq_check_report *r, int kind, const char *file, const char *what)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].kind == kind && !strcmp(r->v[i].file, file) &&
            (!what ? !r->v[i].what : r->v[i].what && strstr(r->v[i].what, what)))
            return 1;
    return 0;
}

/* Flip one byte inside each tensor, then in the header: the check names exactly that. */
static void test_check_localizes(void)
{
    make_dir("c1", 5000);
    char d[4096], p[4096];
    path_of(d, sizeof d, "c1", NULL);
    path_of(p, sizeof p, "c1", "model.safetensors");
    tq_err err;
    tq_manifest *m = NULL;
    CHECK_OK(tq_manifest_build(d, 2, &m, &err));
    CHECK_OK(tq_manifest_write(d, m, &err));
    tq_check_report r;
    CHECK_OK(tq_check_dir(d, 2, &r, &err));
    CHECK(r.n == 0 && r.files_ok == 4 && r.files_listed == 4);
    tq_check_report_free(&r);
    const tq_mf_file *f = m ? tq_manifest_find(m, "model.safetensors") : NULL;
    for (size_t k = 0; f && k < f->n_ranges; k++) {
        uint64_t off = f->ranges[k].offset + f->ranges[k].nbytes / 2;
        t_flip_byte(p, off, 0x40);
        CHECK_OK(tq_check_dir(d, 1 + (int)k % 2, &r, &err));
        CHECKF(r.n == 2 && has_problem(&r, TQ_PROB_MISMATCH, "model.safetensors", NULL) &&
                   has_problem(&r, TQ_PROB_RANGE, "model.safetensors", f->ranges[k].name),
               "tensor %s: %zu problems", f->ranges[k].name, r.n);
        tq_check_report_free(&r);
        t_flip_byte(p, off, 0x40);
    }
    t_flip_byte(p, 12, 0x40); /* inside the JSON header */
    CHECK_OK(tq_check_dir(d, 2, &r, &err));
    CHECK(r.n == 1 && strstr(r.v[0].detail, "header or padding"));
    tq_check_report_free(&r);
    t_flip_byte(p, 12, 0x40);
    /* Truncation: the cut tensor is named. */
    if (f) {
        CHECK(truncate(p, (off_t)(f->size - 3)) == 0);
        CHECK_OK(tq_check_dir(d, 2, &r, &err));
        CHECK(has_problem(&r, TQ_PROB_MISMATCH, "model.safetensors", NULL) &&
              has_problem(&r, TQ_PROB_RANGE, "model.safetensors", f->ranges[f->n_ranges - 1].name));
        tq_check_report_free(&r);
    }
    /* Missing and extra files; a flipped byte in a plain file. */
    char q[4096];
    path_of(q, sizeof q, "c1", "tokenizer/vocab.txt");
    unlink(q);
    write_text("c1", "tokenizer/new.txt", "x");
    path_of(q, sizeof q, "c1", "config.json");
    t_flip_byte(q, 3, 0x40);
    CHECK_OK(tq_check_dir(d, 2, &r, &err));
    CHECK(has_problem(&r, TQ_PROB_MISSING, "tokenizer/vocab.txt", NULL));
    CHECK(has_problem(&r, TQ_PROB_EXTRA, "tokenizer/new.txt", NULL));
    CHECK(has_problem(&r, TQ_PROB_MISMATCH, "config.json", NULL));
    tq_check_report_free(&r);
    /* SHA256SUMS alone still catches it; a SHA256SUMS that disagrees with the manifest is named. */
    path_of(q, sizeof q, "c1", "tq-manifest.json");
    char *mt = NULL;
    size_t ml = 0;
    tq_read_small_file(q, 1 << 20, &mt, &ml, &err);
    unlink(q);
    CHECK_OK(tq_check_dir(d, 2, &r, &err));
    CHECK(has_problem(&r, TQ_PROB_MISMATCH, "config.json", NULL) && has_problem(&r, TQ_PROB_MISSING, "tokenizer/vocab.txt", NULL));
    tq_check_report_free(&r);
    tq_write_file_atomic(q, mt, ml, &err);
    free(mt);
    path_of(q, sizeof q, "c1", "SHA256SUMS");
    {
        int fd = open(q, O_RDWR); /* first hex digit of config.json's line: still hex, different */
        char c0;
        if (pread(fd, &c0, 1, 0) == 1) {
            c0 = c0 == '0' ? '1' : '0';
            CHECK(pwrite(fd, &c0, 1, 0) == 1);
        }
        close(fd);
    }
    CHECK_OK(tq_check_dir(d, 2, &r, &err));
    CHECK(has_problem(&r, TQ_PROB_MANIFEST, "config.json", NULL));
    tq_check_report_free(&r);
    /* Nothing to check against. */
    unlink(q);
    path_of(q, sizeof q, "c1", "tq-manifest.json");
    unlink(q);
    CHECK(tq_check_dir(d, 2, &r, &err) != 0 && strstr(err.msg, "no "));
    tq_check_report_free(&r);
    tq_manifest_free(m);
}

/* A file big enough to be hashed as a whole-file job plus tensor jobs on several threads. */
static void test_parallel_big(void)
{
    make_dir("big", 70ull << 20);
    char d[4096];
    path_of(d, sizeof d, "big", NULL);
    tq_err err;
    tq_manifest *a = NULL, *b = NULL;
    CHECK_OK(tq_manifest_build(d, 1, &a, &err));
    CHECK_OK(tq_manifest_build(d, 4, &b, &err));
    char *ta = a ? manifest_text(a) : NULL, *tb = b ? manifest_text(b) : NULL;
    CHECK(ta && tb && !strcmp(ta, tb));
    free(ta);
    free(tb);
    char p[4096];
    path_of(p, sizeof p, "big", "model.safetensors");
    unsigned char h[32];
    uint64_t sz;
    CHECK_OK(tq_sha256_file(p, h, &sz, &err));
    const tq_mf_file *f = b ? tq_manifest_find(b, "model.safetensors") : NULL;
    CHECK(f && !memcmp(h, f->sha256, 32) && f->size == sz);
    CHECK_OK(tq_manifest_write(d, b, &err));
    t_flip_byte(p, f ? f->ranges[1].offset + (50ull << 20) : 0, 0x40);
    tq_check_report r;
    CHECK_OK(tq_check_dir(d, 3, &r, &err));
    CHECK(r.n == 2 && has_problem(&r, TQ_PROB_RANGE, "model.safetensors", "beta"));
    tq_check_report_free(&r);
    tq_manifest_free(a);
    tq_manifest_free(b);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    CHECK(system(cmd) == 0);
}

static void test_bundle_deterministic(void)
{
    make_dir("b1", 3000);
    /* A name longer than ustar allows forces a pax extended header. */
    write_text("b1", "a_very_long_directory_name_that_goes_on_and_on_and_on_and_on_and_on_and_on_and_on_and_on_past_one_hundred/"
                     "and_a_file_name_that_is_also_longer_than_one_hundred_characters_of_text_so_no_prefix_split_can_help.txt",
               "long\n");
    char d[4096], o1[4096], o2[4096], o3[4096];
    path_of(d, sizeof d, "b1", NULL);
    path_of(o1, sizeof o1, "b1-1.tar.zst", NULL);
    path_of(o2, sizeof o2, "b1-2.tar.zst", NULL);
    path_of(o3, sizeof o3, "b1-3.tar.zst", NULL);
    tq_err err;
    CHECK_OK(tq_bundle_pack(d, o1, 1, 3, 0, &err));
    CHECK_OK(tq_bundle_pack(d, o2, 2, 3, 0, &err));
    pid_t pid = fork();
    if (pid == 0)
        _exit(tq_bundle_pack(d, o3, 2, 3, 0, &err) ? 1 : 0); /* another process: no pid in pax headers */
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(t_files_equal(o1, o2) && t_files_equal(o1, o3));
    /* Touching mtimes and modes does not change the bundle. */
    char p[4096];
    path_of(p, sizeof p, "b1", "config.json");
    chmod(p, 0600);
    struct timespec ts[2] = {{12345, 0}, {12345, 0}};
    utimensat(AT_FDCWD, p, ts, 0);
    CHECK_OK(tq_bundle_pack(d, o2, 1, 3, 1, &err));
    CHECK(t_files_equal(o1, o2));
    tq_check_report r;
    CHECK_OK(tq_check_bundle(o1, &r, &err));
    CHECK(r.n == 0 && r.files_ok == 5);
    tq_check_report_free(&r);
    /* Unpacked, it is the directory again, with its manifest. */
    char u[4096];
    path_of(u, sizeof u, "b1-unpacked", NULL);
    CHECK_OK(tq_bundle_unpack(o1, u, 0, &r, &err));
    tq_check_report_free(&r);
    CHECK_OK(tq_check_dir(u, 2, &r, &err));
    CHECK(r.n == 0 && r.files_ok == 5);
    tq_check_report_free(&r);
    CHECK(tq_bundle_unpack(o1, u, 0, &r, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, "--force"));
    tq_check_report_free(&r);
    /* force replaces it whole: a file of the old directory's own is gone */
    char stray[4096];
    path_of(stray, sizeof stray, "b1-unpacked", "stray.txt");
    CHECK_OK(tq_write_file_atomic(stray, "x", 1, &err));
    CHECK_OK(tq_bundle_unpack(o1, u, 1, &r, &err));
    tq_check_report_free(&r);
    CHECK(!tq_exists(stray));
    CHECK_OK(tq_check_dir(u, 2, &r, &err));
    CHECK(r.n == 0 && r.files_ok == 5);
    tq_check_report_free(&r);
    /* A changed file makes a different bundle; a stale manifest in DIR makes pack refuse. */
    CHECK_OK(tq_manifest_write(u, &(tq_manifest){0}, &err));
    CHECK(tq_bundle_pack(u, o2, 1, 3, 1, &err) != 0 && strstr(err.msg, "does not list"));
    t_flip_byte(p, 2, 0x40);
    CHECK_OK(tq_bundle_pack(d, o2, 1, 3, 1, &err));
    CHECK(!t_files_equal(o1, o2));
}

static void test_bundle_damaged(void)
{
    char d[4096], o[4096], t[4096];
    path_of(d, sizeof d, "b1", NULL);
    path_of(o, sizeof o, "dmg.tar.zst", NULL);
    path_of(t, sizeof t, "dmg-t.tar.zst", NULL);
    tq_err err;
    CHECK_OK(tq_bundle_pack(d, o, 1, 3, 0, &err));
    char *data = NULL;
    size_t n = 0;
    CHECK_OK(tq_read_small_file(o, 64 << 20, &data, &n, &err));
    if (!data)
        return;
    size_t bad = 0, runs = 0;
    for (size_t cut = 0; cut < n; cut += 1 + n / 40, runs++) {
        tq_write_file_atomic(t, data, cut, &err);
        tq_check_report r;
        int rc = tq_check_bundle(t, &r, &err);
        bad += rc != 0 || r.n != 0;
        tq_check_report_free(&r);
    }
    CHECK(bad == runs);
    bad = runs = 0;
    for (size_t at = 0; at < n; at += 1 + n / 60, runs++) {
        data[at] ^= 0x5a;
        tq_write_file_atomic(t, data, n, &err);
        data[at] ^= 0x5a;
        tq_check_report r;
        int rc = tq_check_bundle(t, &r, &err);
        bad += rc != 0 || r.n != 0;
        tq_check_report_free(&r);
    }
    /* zstd frames carry no checksum here: a flip may decode to other bytes, which the
     * manifest then catches; a flip in padding after the frame changes nothing. */
    CHECKF(bad + 2 >= runs, "%zu of %zu corruptions detected", bad, runs);
    free(data);
}

/* Hostile archives written with libarchive directly. */
static struct archive *hostile_open(const char *path, const char *listed_sha, uint64_t listed_size)
{
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_zstd(a);
    archive_write_open_filename(a, path);
    char man[1024];
    snprintf(man, sizeof man,
             "{\"format\":\"tq_manifest_v1\",\"files\":{\"a.txt\":{\"size\":%llu,\"sha256\":\"%s\"}}}",
             (unsigned long long)listed_size, listed_sha);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "tq-manifest.json");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)strlen(man));
    archive_write_header(a, e);
    archive_write_data(a, man, strlen(man));
    archive_entry_free(e);
    return a;
}

static void hostile_add(struct archive *a, const char *name, mode_t type, const char *data, const char *link,
                        la_int64_t declared)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, 0644);
    if (type == AE_IFLNK)
        archive_entry_set_symlink(e, link);
    else if (link)
        archive_entry_set_hardlink(e, link);
    if (type == AE_IFCHR)
        archive_entry_set_rdev(e, 0x0103);
    archive_entry_set_size(e, type == AE_IFREG && !link ? (declared >= 0 ? declared : (la_int64_t)strlen(data)) : 0);
    archive_write_header(a, e);
    if (type == AE_IFREG && data && !link)
        archive_write_data(a, data, strlen(data));
    archive_entry_free(e);
}

static void test_bundle_hostile(void)
{
    const char *sha_hi = "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"; /* "hi\n" */
    char outside[4096];
    path_of(outside, sizeof outside, "outside", NULL);
    tq_err err;
    tq_mkdir_p(outside, &err);
    struct {
        const char *label, *name;
        mode_t type;
        const char *data, *link;
        const char *expect;
    } cases[] = {
        {"traversal", "../outside/evil", AE_IFREG, "x", NULL, "unsafe path"},
        {"traversal2", "sub/../../outside/evil", AE_IFREG, "x", NULL, "unsafe path"},
        {"absolute", "/tmp/tq-verify-evil-abs", AE_IFREG, "x", NULL, "unsafe path"},
        {"symlink", "link", AE_IFLNK, NULL, "/etc/passwd", "symbolic link"},
        {"hardlink", "hard", AE_IFREG, NULL, "/etc/passwd", "hard link"},
        {"device", "dev", AE_IFCHR, NULL, NULL, "special file"},
        {"fifo", "fifo", AE_IFIFO, NULL, NULL, "special file"},
        {"dupe", "a.txt", AE_IFREG, "hi\n", NULL, "duplicate"},
        {"dir", "sub/", AE_IFDIR, NULL, NULL, "directory entry refused"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char bp[4096], target[4096];
        snprintf(bp, sizeof bp, "%s/hostile-%s.tar.zst", root, cases[i].label);
        snprintf(target, sizeof target, "%s/target-%s", root, cases[i].label);
        struct archive *a = hostile_open(bp, sha_hi, 3);
        hostile_add(a, "a.txt", AE_IFREG, "hi\n", NULL, -1);
        hostile_add(a, cases[i].name, cases[i].type, cases[i].data, cases[i].link, -1);
        archive_write_close(a);
        archive_write_free(a);
        tq_check_report r;
        CHECK_OK(tq_check_bundle(bp, &r, &err));
        CHECKF(r.n == 1 && r.v[0].kind == TQ_PROB_ENTRY && strstr(r.v[0].detail, cases[i].expect), "%s: %zu problems: %s",
               cases[i].label, r.n, r.n ? r.v[0].detail : "");
        tq_check_report_free(&r);
        CHECKF(tq_bundle_unpack(bp, target, 0, &r, &err) != 0, "%s unpacked", cases[i].label);
        tq_check_report_free(&r);
        CHECKF(!tq_exists(target), "%s: target left behind", cases[i].label);
    }
    char ev[4096];
    path_of(ev, sizeof ev, "outside", "evil");
    CHECK(!tq_exists(ev) && !tq_exists("/tmp/tq-verify-evil-abs"));
    /* Huge declared sizes (patched into a plain tar: libarchive would pad real data):
     * refused without reading or allocating. */
    const char *names[] = {"a.txt", "tq-manifest.json"};
    for (int k = 0; k < 2; k++) {
        char bp[4096];
        snprintf(bp, sizeof bp, "%s/hostile-huge%d.tar", root, k);
        size_t used = 0, cap = 1 << 16;
        char *mem = calloc(1, cap);
        struct archive *a = archive_write_new();
        archive_write_set_format_ustar(a);
        archive_write_open_memory(a, mem, cap, &used);
        char man[512];
        snprintf(man, sizeof man, "{\"format\":\"tq_manifest_v1\",\"files\":{\"a.txt\":{\"size\":3,\"sha256\":\"%s\"}}}", sha_hi);
        hostile_add(a, "tq-manifest.json", AE_IFREG, man, NULL, -1);
        hostile_add(a, "a.txt", AE_IFREG, "hi\n", NULL, -1);
        archive_write_close(a);
        archive_write_free(a);
        for (size_t off = 0; off + 512 <= used; off += 512)
            if (!strcmp(mem + off, names[k]) && !memcmp(mem + off + 257, "ustar", 5)) {
                unsigned char *h = (unsigned char *)mem + off;
                memset(h + 124, 0, 12);
                h[124] = 0x80; /* base-256 size: 2^40 (k=0) or 2^50 (k=1) */
                h[135 - (k ? 6 : 5)] = k ? 4 : 1;
                memset(h + 148, ' ', 8);
                unsigned sum = 0;
                for (int b = 0; b < 512; b++)
                    sum += h[b];
                snprintf((char *)h + 148, 8, "%06o", sum);
                h[155] = ' ';
            }
        /* as a plain tar it is refused before any entry (a bundle is zstd-compressed, man
         * tq-formats(5), Bundles); compressed, the declared sizes are what is refused */
        tq_write_file_atomic(bp, mem, used, &err);
        tq_check_report r;
        int rc = tq_check_bundle(bp, &r, &err);
        CHECKF(rc != 0 && strstr(err.msg, "not a .tar.zst bundle: a tar archive not compressed"), "plain tar: rc %d: %s",
               rc, rc ? err.msg : "");
        if (rc == 0)
            tq_check_report_free(&r);
        size_t zcap = ZSTD_compressBound(used);
        char *z = malloc(zcap);
        size_t zn = z ? ZSTD_compress(z, zcap, mem, used, 3) : 0;
        CHECK(z && !ZSTD_isError(zn));
        snprintf(bp, sizeof bp, "%s/hostile-huge%d.tar.zst", root, k);
        tq_write_file_atomic(bp, z, zn, &err);
        free(z);
        free(mem);
        rc = tq_check_bundle(bp, &r, &err);
        if (k == 0)
            CHECKF((rc == 0 && r.n >= 1 && r.v[0].kind == TQ_PROB_MISMATCH && strstr(r.v[0].detail, "declares")) ||
                       (rc != 0 && err.code == TQ_EDATA), "rc %d, %zu problems, %s", rc, r.n, rc ? err.msg : r.n ? r.v[0].detail : "");
        else
            CHECKF(rc != 0 && strstr(err.msg, "larger than"), "rc %d: %s", rc, err.msg);
        tq_check_report_free(&r);
    }
    struct archive *a;
    tq_check_report r;
    char bp[4096];
    /* Not a tq bundle: no manifest first. */
    path_of(bp, sizeof bp, "hostile-noman.tar.zst", NULL);
    a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_zstd(a);
    archive_write_open_filename(a, bp);
    hostile_add(a, "a.txt", AE_IFREG, "hi\n", NULL, -1);
    archive_write_close(a);
    archive_write_free(a);
    CHECK(tq_check_bundle(bp, &r, &err) != 0 && strstr(err.msg, "not a tq bundle"));
    tq_check_report_free(&r);
    /* Wrong content and a missing file. */
    path_of(bp, sizeof bp, "hostile-wrong.tar.zst", NULL);
    a = hostile_open(bp, sha_hi, 3);
    hostile_add(a, "a.txt", AE_IFREG, "ho\n", NULL, -1);
    archive_write_close(a);
    archive_write_free(a);
    CHECK_OK(tq_check_bundle(bp, &r, &err));
    CHECK(r.n == 1 && r.v[0].kind == TQ_PROB_MISMATCH);
    tq_check_report_free(&r);
    char target[4096];
    path_of(target, sizeof target, "target-wrong", NULL);
    CHECK(tq_bundle_unpack(bp, target, 0, &r, &err) != 0 && !tq_exists(target));
    tq_check_report_free(&r);
}

int main(void)
{
    snprintf(root, sizeof root, "%s/verify-unit", t_tmpdir());
    tq_err err;
    tq_mkdir_p(root, &err);
    RUN(test_sums_parse);
    RUN(test_manifest_threads_roundtrip);
    RUN(test_manifest_json_hostile);
    RUN(test_check_localizes);
    RUN(test_parallel_big);
    RUN(test_bundle_deterministic);
    RUN(test_bundle_damaged);
    RUN(test_bundle_hostile);
    TEST_MAIN_END();
}
