/* Deterministic .tar.zst bundles (libarchive + zstd), checked or unpacked in one pass. */
#include "formats/formats.h"
#include "verify/verify_internal.h"
#include "formats/flash.h"

#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (4u << 20)
#define MAX_MANIFEST_BYTES (512u << 20)
#define MAX_SUMS_BYTES (64u << 20)
#define MAX_UNLISTED 10000u /* entries a bundle may hold beyond what its manifest lists */

/* ------------------------------------------------------------------- pack */
static int same_manifest(const tq_manifest *fresh, const tq_manifest *old, const char *what, tq_err *e)
{
    size_t i = 0, k = 0;
    while (i < fresh->n_files || k < old->n_files) {
        int c = i >= fresh->n_files ? 1 : k >= old->n_files ? -1 : strcmp(fresh->files[i].path, old->files[k].path);
        if (c < 0)
            return tq_fail(e, TQ_EDATA, "%s: does not list '%s' (run tq-verify check)", what, fresh->files[i].path);
        if (c > 0)
            return tq_fail(e, TQ_EDATA, "%s: lists '%s', which is missing (run tq-verify check)", what, old->files[k].path);
        if (memcmp(fresh->files[i].sha256, old->files[k].sha256, 32) ||
            (old->files[k].size != TQ_MF_SIZE_UNKNOWN && old->files[k].size != fresh->files[i].size))
            return tq_fail(e, TQ_EDATA, "%s: '%s' has changed since the manifest was written (run tq-verify check)",
                           what, fresh->files[i].path);
        i++;
        k++;
    }
    return 0;
}

/* A split directory's split.json must still describe it: every file it lists present, with
 * the size and SHA-256 recorded (a bundle of a split with a layer file lost or changed would
 * carry a split.json that no longer holds). */
static int check_split(const char *dir, const tq_manifest *fresh, tq_err *e)
{
    char *p = tq_path_join(dir, "split.json", e);
    if (!p)
        return -1;
    tq_flash_manifest *sm = NULL;
    int rc = tq_exists(p) ? tq_flash_manifest_load(&sm, dir, e) : 0;
    for (size_t i = 0; rc == 0 && sm && i < sm->n_files; i++) {
        const tq_flash_file *sf = &sm->files[i];
        const tq_mf_file *f = tq_manifest_find(fresh, sf->name);
        if (!f)
            rc = tq_fail(e, TQ_EDATA, "%s: lists '%s', which is missing", p, sf->name);
        else if (f->size != sf->size || memcmp(f->sha256, sf->sha256, 32))
            rc = tq_fail(e, TQ_EDATA, "%s: '%s' has changed since the split was made (size or SHA-256)", p, sf->name);
    }
    tq_flash_manifest_free(sm);
    free(p);
    return rc;
}

static int check_existing(const char *dir, const tq_manifest *fresh, tq_err *e)
{
    char *mp = tq_path_join(dir, TQ_MANIFEST_NAME, e), *sp = tq_path_join(dir, TQ_SUMS_NAME, e);
    int rc = (mp && sp) ? 0 : -1;
    if (rc == 0 && tq_exists(mp)) {
        char *text;
        size_t len;
        tq_manifest *old = NULL;
        rc = tq_read_small_file(mp, MAX_MANIFEST_BYTES, &text, &len, e);
        if (rc == 0) {
            rc = tq_manifest_from_json(text, len, mp, &old, e);
            free(text);
        }
        if (rc == 0)
            rc = same_manifest(fresh, old, mp, e);
        tq_manifest_free(old);
    }
    if (rc == 0 && tq_exists(sp)) {
        char *text;
        size_t len, n = 0;
        tq_sum_entry *s = NULL;
        rc = tq_read_small_file(sp, MAX_SUMS_BYTES, &text, &len, e);
        if (rc == 0) {
            rc = tq_sums_parse(text, len, sp, &s, &n, e);
            free(text);
        }
        if (rc == 0) {
            tq_manifest old = {0};
            old.n_files = n;
            old.files = n ? calloc(n, sizeof *old.files) : NULL;
            if (n && !old.files)
                rc = tq_fail(e, TQ_ENOMEM, "out of memory");
            for (size_t i = 0; rc == 0 && i < n; i++) {
                old.files[i].path = s[i].path;
                old.files[i].size = TQ_MF_SIZE_UNKNOWN;
                memcpy(old.files[i].sha256, s[i].sha256, 32);
            }
            if (rc == 0)
                rc = same_manifest(fresh, &old, sp, e);
            free(old.files);
        }
        tq_sums_free(s, n);
    }
    free(mp);
    free(sp);
    return rc == 0 ? check_split(dir, fresh, e) : rc;
}

static void fixed_entry(struct archive_entry *en, const char *path, uint64_t size)
{
    archive_entry_clear(en);
    archive_entry_set_pathname(en, path);
    archive_entry_set_filetype(en, AE_IFREG);
    archive_entry_set_perm(en, 0644);
    archive_entry_set_size(en, (la_int64_t)size);
    archive_entry_set_mtime(en, 0, 0);
    archive_entry_set_uid(en, 0);
    archive_entry_set_gid(en, 0);
}

static int ar_fail(struct archive *a, tq_err *e, const char *out, const char *what)
{
    return tq_fail(e, TQ_EIO, "%s: %s: %s", out, what, archive_error_string(a) ? archive_error_string(a) : "libarchive error");
}

static int put_buffer(struct archive *a, struct archive_entry *en, const char *name, const void *data,
                      size_t len, const char *out, tq_err *e)
{
    fixed_entry(en, name, len);
    if (archive_write_header(a, en) != ARCHIVE_OK)
        return ar_fail(a, e, out, name);
    if (len && archive_write_data(a, data, len) != (la_ssize_t)len)
        return ar_fail(a, e, out, name);
    return 0;
}

static int put_file(struct archive *a, struct archive_entry *en, const char *dir, const tq_mf_file *f,
                    char *buf, tq_progress *prog, const char *out, tq_err *e)
{
    char *p = tq_path_join(dir, f->path, e);
    if (!p)
        return -1;
    int fd = tq_open_regular(p, NULL, e);
    if (fd < 0) {
        free(p);
        return -1;
    }
    fixed_entry(en, f->path, f->size);
    int rc = archive_write_header(a, en) == ARCHIVE_OK ? 0 : ar_fail(a, e, out, f->path);
    tq_sha256 *h = rc == 0 ? tq_sha256_new() : NULL;
    if (rc == 0 && !h)
        rc = tq_fail(e, TQ_ENOMEM, "cannot create SHA-256 context");
    uint64_t done = 0;
    while (rc == 0 && done < f->size) {
        size_t want = f->size - done < CHUNK ? (size_t)(f->size - done) : CHUNK;
        ssize_t n = pread(fd, buf, want, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = tq_fail(e, TQ_EDATA, "%s: shrank or became unreadable while packing (offset %llu)", p,
                         (unsigned long long)done);
            break;
        }
        tq_sha256_update(h, buf, (size_t)n);
        if (archive_write_data(a, buf, (size_t)n) != n)
            rc = ar_fail(a, e, out, f->path);
        done += (uint64_t)n;
        tq_progress_add(prog, (uint64_t)n);
    }
    if (h) {
        unsigned char d[32];
        tq_sha256_final(h, d);
        char extra;
        if (rc == 0 && (memcmp(d, f->sha256, 32) || pread(fd, &extra, 1, (off_t)done) != 0))
            rc = tq_fail(e, TQ_EDATA, "%s: changed while packing", p);
    }
    close(fd);
    free(p);
    return rc;
}

/* DIR/model.sig, when there is one: it must at least read as a signature bundle (whose
 * signature only a key can check). */
static int read_signature(const char *dir, char **text, size_t *len, tq_err *e)
{
    *text = NULL;
    *len = 0;
    char *p = tq_path_join(dir, TQ_OMS_SIG_NAME, e);
    if (!p)
        return -1;
    int rc = 0;
    if (tq_exists(p)) {
        tq_oms_env env;
        rc = tq_read_small_file(p, TQ_OMS_MAX_SIG_BYTES, text, len, e);
        if (rc == 0 && (rc = tq_oms_bundle_parse(*text, *len, p, &env, e)) == 0)
            tq_oms_env_free(&env);
        if (rc != 0) {
            free(*text);
            *text = NULL;
        }
    }
    free(p);
    return rc;
}

/* The archive's bytes go through tq_write_full like every other tq output, so write errors
 * name the file and the crash-safety hook (TQ_CRASH_AFTER_BYTES) sees them. */
typedef struct pack_sink {
    int fd;           /* the partial bundle's, or standard output's for "-" */
    const char *name; /* for messages */
    int failed;
    tq_err err;
} pack_sink;

static la_ssize_t sink_write(struct archive *a, void *cd, const void *buf, size_t len)
{
    pack_sink *s = cd;
    if (tq_write_full(s->fd, buf, len, s->name, &s->err) != 0) {
        s->failed = 1;
        archive_set_error(a, EIO, "%s", s->err.msg);
        return -1;
    }
    return (la_ssize_t)len;
}

int tq_bundle_pack(const char *dir, const char *out, int threads, int level, int force, tq_err *e)
{
    tq_manifest *m = NULL;
    tq_sources src = {0};
    tq_afile af = {.fd = -1};
    int to_stdout = !strcmp(out, "-"); /* a stream: nothing to publish, nothing to check against */
    /* the output as it is now, before the hashing: what the bundle may replace at the end */
    if ((!to_stdout && (tq_check_out_in(out, dir, e) != 0 ||
                        tq_afile_check(&af, out, force ? TQ_AFILE_REPLACE : 0, e) != 0)) ||
        tq_sources_add(&src, dir, e) != 0 || tq_manifest_build(dir, threads, &m, e) != 0 ||
        check_existing(dir, m, e) != 0) {
        tq_afile_abort(&af);
        tq_manifest_free(m);
        tq_sources_free(&src);
        return -1;
    }
    cJSON *j = tq_manifest_to_json(m, e);
    char *mtext = j ? tq_json_print(j, e) : NULL;
    size_t slen = 0;
    char *sums = tq_manifest_sums(m, &slen, e);
    cJSON_Delete(j);
    char *sig = NULL;
    size_t siglen = 0;
    if (mtext && sums && read_signature(dir, &sig, &siglen, e) != 0) {
        free(mtext);
        mtext = NULL;
    }
    char *buf = tq_malloc(CHUNK, e);
    pack_sink sink = {.fd = STDOUT_FILENO, .name = "standard output"};
    int rc = -1, opened = 0;
    struct archive *a = NULL;
    struct archive_entry *en = archive_entry_new();
    if (!mtext || !sums || !buf || !en)
        goto out;
    if (!to_stdout) {
        if (tq_afile_create(&af, e) != 0)
            goto out;
        opened = 1;
        sink.fd = af.fd;
        sink.name = af.tmp_path;
    }
    a = archive_write_new();
    char opt[64];
    snprintf(opt, sizeof opt, "zstd:compression-level=%d", level);
    if (!a || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_add_filter_zstd(a) != ARCHIVE_OK || archive_write_set_options(a, opt) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK || /* no padding after the zstd frame */
        archive_write_open(a, &sink, NULL, sink_write, NULL) != ARCHIVE_OK) {
        if (a)
            ar_fail(a, e, out, "cannot set up a pax + zstd writer");
        else
            tq_fail(e, TQ_ENOMEM, "out of memory");
        goto out;
    }
    if (put_buffer(a, en, TQ_MANIFEST_NAME, mtext, strlen(mtext), out, e) != 0 ||
        put_buffer(a, en, TQ_SUMS_NAME, sums, slen, out, e) != 0 ||
        (sig && put_buffer(a, en, TQ_OMS_SIG_NAME, sig, siglen, out, e) != 0))
        goto out;
    uint64_t total = 0;
    for (size_t i = 0; i < m->n_files; i++)
        total += m->files[i].size;
    tq_progress prog; /* the compression: most of pack's time after the hashing */
    tq_progress_init(&prog, "compress", total, 0);
    for (size_t i = 0; i < m->n_files; i++)
        if (put_file(a, en, dir, &m->files[i], buf, &prog, out, e) != 0)
            goto out;
    tq_progress_end(&prog);
    if (archive_write_close(a) != ARCHIVE_OK) {
        ar_fail(a, e, out, "cannot finish the archive");
        goto out;
    }
    archive_write_free(a);
    a = NULL;
    if (to_stdout)
        rc = tq_sources_check(&src, e);
    else {
        opened = 0;
        rc = tq_sources_check_afile(&src, &af, e) == 0 ? tq_afile_commit(&af, e) : -1;
    }
out:
    if (a)
        archive_write_free(a);
    if (opened || af.final_path)
        tq_afile_abort(&af);
    if (rc != 0 && sink.failed)
        *e = sink.err; /* the write error itself, not libarchive's retelling of it */
    archive_entry_free(en);
    free(buf);
    free(mtext);
    free(sums);
    free(sig);
    tq_manifest_free(m);
    tq_sources_free(&src);
    return rc;
}

/* ------------------------------------------------------------ read / unpack */
typedef struct scan {
    const char *bundle;
    int outfd;                  /* unpack target directory, or -1 */
    const char *outdir;         /* its path, for messages */
    tq_check_report *r;
    tq_manifest *m;
    unsigned char *seen;        /* per manifest file */
    char **extras;
    size_t n_extras;
    char *buf;
    unsigned char (*got)[32];   /* per manifest file: the hash of the bundle's bytes ... */
    unsigned char *have;        /* ... when it was read whole */
    unsigned char index_sha[2][32]; /* tq-manifest.json, SHA256SUMS */
    int have_index[2];
    char *sig;                  /* the model.sig entry, if any */
    size_t sig_len;
    int files_begun;            /* an entry other than the index and model.sig was seen */
    const char *phase;          /* the progress phase: "check" or "unpack" */
    tq_progress prog;           /* the listed files' bytes read (decompressed), from the manifest on */
    int prog_on;
} scan;

static int read_entry_text(struct archive *a, struct archive_entry *en, const char *name, size_t max,
                           const char *bundle, char **out, size_t *len, tq_err *e)
{
    la_int64_t sz = archive_entry_size(en);
    if (!archive_entry_size_is_set(en) || sz < 0 || (uint64_t)sz > max)
        return tq_fail(e, TQ_EDATA, "%s: %s: declared size %lld is larger than the %zu bytes allowed", bundle, name,
                       (long long)sz, max);
    char *t = tq_malloc((size_t)sz + 1, e);
    if (!t)
        return -1;
    size_t got = 0;
    while (got < (size_t)sz) {
        la_ssize_t n = archive_read_data(a, t + got, (size_t)sz - got);
        if (n <= 0) {
            free(t);
            return tq_fail(e, TQ_EDATA, "%s: %s: %s", bundle, name,
                           n < 0 ? archive_error_string(a) : "entry ends early");
        }
        got += (size_t)n;
    }
    t[got] = 0;
    *out = t;
    *len = got;
    return 0;
}

/* Create (for unpack) rel under dirfd: parents as real directories, the file O_EXCL. */
static int create_under(int dirfd, const char *rel, const char *bundle, tq_err *e)
{
    char *p = tq_strdup(rel, e);
    if (!p)
        return -1;
    int cur = dup(dirfd);
    char *s = p;
    for (;;) {
        char *slash = strchr(s, '/');
        if (!slash)
            break;
        *slash = 0;
        if (mkdirat(cur, s, 0755) != 0 && errno != EEXIST) {
            tq_fail(e, TQ_EIO, "%s: %s: cannot create directory: %s", bundle, rel, strerror(errno));
            close(cur);
            free(p);
            return -1;
        }
        int nfd = openat(cur, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(cur);
        if (nfd < 0) {
            tq_fail(e, TQ_EIO, "%s: %s: cannot open directory: %s", bundle, rel, strerror(errno));
            free(p);
            return -1;
        }
        cur = nfd;
        s = slash + 1;
    }
    int fd = openat(cur, s, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        tq_fail(e, TQ_EIO, "%s: %s: cannot create: %s", bundle, rel, strerror(errno));
    close(cur);
    free(p);
    return fd;
}

static int write_out(scan *s, const char *rel, const void *data, size_t len, tq_err *e)
{
    char *path = tq_path_join(s->outdir, rel, e);
    int fd = path ? create_under(s->outfd, rel, s->bundle, e) : -1;
    int rc = fd < 0 ? -1 : tq_write_full(fd, data, len, path, e);
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

static int add_extra(scan *s, const char *name)
{
    char **nv = realloc(s->extras, (s->n_extras + 1) * sizeof *nv);
    if (!nv)
        return -1;
    s->extras = nv;
    s->extras[s->n_extras] = strdup(name);
    return s->extras[s->n_extras++] ? 0 : -1;
}

/* One file entry listed in the manifest: stream it through the hashes (and to disk). */
static int take_file(scan *s, struct archive *a, const tq_mf_file *f, tq_err *e)
{
    tq_vh_task t = {0};
    t.path = f->path;
    t.want_whole = 1;
    if (tq_mf_ranges_for(f, &t.r, e) != 0)
        return -1;
    t.n = f->n_ranges;
    int fd = -1;
    char *wpath = NULL; /* the file written, for messages */
    if (s->outfd >= 0 && (!(wpath = tq_path_join(s->outdir, f->path, e)) ||
                          (fd = create_under(s->outfd, f->path, s->bundle, e)) < 0)) {
        free(wpath);
        free(t.r);
        return -1;
    }
    tq_vhasher vh;
    if (tq_vh_init(&vh, 1, 0, t.r, t.n, e) != 0) {
        free(wpath);
        free(t.r);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = 0;
    uint64_t total = 0;
    for (;;) {
        la_ssize_t n = archive_read_data(a, s->buf, CHUNK);
        if (n < 0) {
            rc = tq_fail(e, TQ_EDATA, "%s: %s: %s", s->bundle, f->path, archive_error_string(a));
            break;
        }
        if (n == 0)
            break;
        tq_vh_feed(&vh, s->buf, (size_t)n);
        total += (uint64_t)n;
        tq_progress_add(&s->prog, (uint64_t)n);
        if (fd >= 0 && tq_write_full(fd, s->buf, (size_t)n, wpath, e) != 0) {
            rc = -1;
            break;
        }
    }
    tq_vh_finish(&vh, t.whole);
    t.size = total;
    if (rc == 0) {
        size_t fi = (size_t)(f - s->m->files);
        memcpy(s->got[fi], t.whole, 32);
        s->have[fi] = 1;
    }
    if (fd >= 0 && rc == 0 && fsync(fd) != 0)
        rc = tq_fail(e, TQ_EIO, "%s: fsync failed: %s", wpath, strerror(errno));
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = tq_fail(e, TQ_EIO, "%s: write error", wpath);
    free(wpath);
    if (rc == 0)
        tq_report_compare_file(s->r, f, &t);
    free(t.r);
    return rc;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_oms_file(const void *a, const void *b)
{
    return tq_oms_name_cmp(((const tq_oms_file *)a)->name, ((const tq_oms_file *)b)->name);
}

static int scan_bundle(scan *s, tq_err *e)
{
    tq_check_report *r = s->r;
    struct archive *a = archive_read_new();
    struct archive_entry *en;
    int rc = -1, fd = -1;
    tq_sum_entry *sums = NULL;
    size_t nsums = 0;
    if (!a)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    archive_read_support_filter_zstd(a);
    archive_read_support_format_tar(a);
    /* opened here, not by libarchive: a FIFO or a device given as the bundle is refused;
     * "-" is standard input, read as a stream */
    if (!strcmp(s->bundle, "-")) {
        if ((fd = dup(STDIN_FILENO)) < 0) {
            tq_fail(e, TQ_EIO, "standard input: %s", strerror(errno));
            goto out;
        }
    } else if ((fd = tq_open_regular(s->bundle, NULL, e)) < 0)
        goto out;
    struct stat sb;
    tq_content_kind kind = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? tq_sniff_fd(fd, (uint64_t)sb.st_size)
                                                                      : TQ_CONTENT_UNKNOWN;
    if (kind != TQ_CONTENT_UNKNOWN && kind != TQ_CONTENT_ZSTD) { /* say what was given instead */
        tq_fail(e, TQ_EDATA, "%s: %s, not a .tar.zst bundle (expected a bundle of tq-verify pack, or a directory "
                "with tq-manifest.json, SHA256SUMS or split.json)", s->bundle, tq_content_name(kind));
        goto out;
    }
    if (archive_read_open_fd(a, fd, 1 << 20) != ARCHIVE_OK) {
        tq_fail(e, TQ_EDATA, "%s: cannot read as .tar.zst: %s", s->bundle, archive_error_string(a));
        goto out;
    }
    for (size_t idx = 0;; idx++) {
        int st = archive_read_next_header(a, &en);
        if (st == ARCHIVE_EOF)
            break;
        if (st != ARCHIVE_OK) {
            tq_fail(e, TQ_EDATA, "%s: corrupt or truncated bundle after %zu entries: %s", s->bundle, idx,
                    archive_error_string(a) ? archive_error_string(a) : "unknown error");
            goto out;
        }
        const char *name = archive_entry_pathname(en);
        mode_t type = archive_entry_filetype(en);
        if (idx == 0 && (archive_filter_count(a) != 2 || archive_filter_code(a, 0) != ARCHIVE_FILTER_ZSTD ||
                         (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) != ARCHIVE_FORMAT_TAR)) {
            /* man tq-formats(5), Bundles: one zstd frame sequence around a tar archive, nothing else */
            int nf = archive_filter_count(a);
            tq_fail(e, TQ_EDATA, "%s: not a .tar.zst bundle: a tar archive %s, where a bundle is one compressed with "
                    "zstd once", s->bundle, nf < 2 || archive_filter_code(a, 0) == ARCHIVE_FILTER_NONE ? "not compressed"
                    : nf > 2 ? "compressed more than once" : "compressed otherwise");
            goto out;
        }
        if (idx == 0) {
            if (!name || strcmp(name, TQ_MANIFEST_NAME) || type != AE_IFREG) {
                tq_fail(e, TQ_EDATA, "%s: not a tq bundle: the first entry is '%.200s', not %s", s->bundle,
                        name ? name : "?", TQ_MANIFEST_NAME);
                goto out;
            }
            char *text;
            size_t len;
            char what[600];
            snprintf(what, sizeof what, "%s: %s", s->bundle, TQ_MANIFEST_NAME);
            if (read_entry_text(a, en, TQ_MANIFEST_NAME, MAX_MANIFEST_BYTES, s->bundle, &text, &len, e) != 0)
                goto out;
            int prc = tq_manifest_from_json(text, len, what, &s->m, e);
            tq_sha256_buf(text, len, s->index_sha[0]);
            s->have_index[0] = 1;
            if (prc == 0 && s->outfd >= 0)
                prc = write_out(s, TQ_MANIFEST_NAME, text, len, e);
            free(text);
            if (prc != 0)
                goto out;
            r->files_listed = s->m->n_files;
            uint64_t listed = 0; /* the sizes take_file reads, each at most once */
            for (size_t i = 0; i < s->m->n_files; i++)
                listed += s->m->files[i].size;
            tq_progress_init(&s->prog, s->phase, listed, 0);
            s->prog_on = 1;
            if (!(s->seen = tq_calloc(s->m->n_files + 1, 1, e)) || !(s->have = tq_calloc(s->m->n_files + 1, 1, e)) ||
                !(s->got = tq_calloc(s->m->n_files + 1, sizeof *s->got, e)))
                goto out;
            continue;
        }
        /* a bundle tq wrote holds its files, the two indexes and model.sig; past that, every
         * entry is a problem to report, so their number is bounded as they stream */
        if (idx > s->m->n_files + 3 + MAX_UNLISTED) {
            tq_fail(e, TQ_EDATA, "%s: more than %u entries besides the %zu files its manifest lists: not a bundle "
                    "tq wrote; stopped reading at entry %zu",
                    s->bundle, MAX_UNLISTED, s->m->n_files, idx);
            goto out;
        }
        const char *shown = name ? name : "?";
        if (!name) {
            tq_report_add(r, TQ_PROB_ENTRY, shown, NULL, "entry name is not readable; refused");
            continue;
        }
        if (archive_entry_hardlink(en)) {
            tq_report_add(r, TQ_PROB_ENTRY, name, NULL, "hard link to '%.200s' refused", archive_entry_hardlink(en));
            continue;
        }
        if (type == AE_IFLNK) {
            tq_report_add(r, TQ_PROB_ENTRY, name, NULL, "symbolic link to '%.200s' refused",
                          archive_entry_symlink(en) ? archive_entry_symlink(en) : "?");
            continue;
        }
        if (type == AE_IFDIR) { /* man tq-formats(5), Bundles: regular files only */
            char tmp[4097];
            size_t nl = strlen(name);
            snprintf(tmp, sizeof tmp, "%s", name);
            if (nl && nl < sizeof tmp && tmp[nl - 1] == '/')
                tmp[nl - 1] = 0;
            tq_report_add(r, TQ_PROB_ENTRY, name, NULL, "%s refused: a bundle holds regular files only",
                          tq_verify_path_ok(tmp) ? "directory entry" : "unsafe directory path");
            continue;
        }
        if (type != AE_IFREG) {
            tq_report_add(r, TQ_PROB_ENTRY, name, NULL, "special file (type 0%o) refused", (unsigned)type);
            continue;
        }
        if (!tq_verify_path_ok(name)) {
            tq_report_add(r, TQ_PROB_ENTRY, name, NULL, "unsafe path (absolute, '..', empty component or control "
                          "character) refused");
            continue;
        }
        if (idx == 1 && !strcmp(name, TQ_SUMS_NAME)) {
            char *text;
            size_t len;
            if (read_entry_text(a, en, TQ_SUMS_NAME, MAX_SUMS_BYTES, s->bundle, &text, &len, e) != 0)
                goto out;
            int prc = tq_sums_parse(text, len, TQ_SUMS_NAME, &sums, &nsums, e);
            tq_sha256_buf(text, len, s->index_sha[1]);
            s->have_index[1] = 1;
            if (prc == 0 && s->outfd >= 0)
                prc = write_out(s, TQ_SUMS_NAME, text, len, e);
            free(text);
            if (prc != 0)
                goto out;
            tq_report_sums_vs_manifest(r, sums, nsums, s->m);
            continue;
        }
        if (!s->files_begun && !s->sig && !strcmp(name, TQ_OMS_SIG_NAME)) {
            /* the signature, which manifests do not list, right after the index */
            char what[600];
            snprintf(what, sizeof what, "%s: %s", s->bundle, TQ_OMS_SIG_NAME);
            if (read_entry_text(a, en, TQ_OMS_SIG_NAME, TQ_OMS_MAX_SIG_BYTES, s->bundle, &s->sig, &s->sig_len, e) != 0)
                goto out;
            if (s->outfd >= 0 && write_out(s, TQ_OMS_SIG_NAME, s->sig, s->sig_len, e) != 0)
                goto out;
            continue;
        }
        s->files_begun = 1;
        const tq_mf_file *f = tq_manifest_find(s->m, name);
        if (!f) {
            tq_report_add(r, TQ_PROB_EXTRA, name, NULL, "in the bundle but not listed in the manifest");
            if (add_extra(s, name) != 0) {
                tq_fail(e, TQ_ENOMEM, "out of memory");
                goto out;
            }
            continue;
        }
        size_t fi = (size_t)(f - s->m->files);
        if (s->seen[fi]) {
            tq_report_add(r, TQ_PROB_ENTRY, name, NULL, "duplicate entry refused");
            continue;
        }
        s->seen[fi] = 1;
        la_int64_t sz = archive_entry_size(en);
        if (!archive_entry_size_is_set(en) || sz < 0 || (uint64_t)sz != f->size) {
            tq_report_add(r, TQ_PROB_MISMATCH, name, NULL, "entry declares %lld bytes, the manifest %llu; not read",
                          (long long)sz, (unsigned long long)f->size);
            continue;
        }
        if (take_file(s, a, f, e) != 0)
            goto out;
    }
    if (!s->m) {
        tq_fail(e, TQ_EDATA, "%s: empty archive, not a tq bundle", s->bundle);
        goto out;
    }
    for (size_t i = 0; i < s->m->n_files; i++)
        if (!s->seen[i])
            tq_report_add(r, TQ_PROB_MISSING, s->m->files[i].path, NULL, "listed in the manifest but not in the bundle");
    if (s->n_extras > 1) {
        qsort(s->extras, s->n_extras, sizeof *s->extras, cmp_strp);
        for (size_t i = 1; i < s->n_extras; i++)
            if (!strcmp(s->extras[i], s->extras[i - 1]))
                tq_report_add(r, TQ_PROB_ENTRY, s->extras[i], NULL, "duplicate entry refused");
    }
    tq_report_sort(r);
    if (s->prog_on)
        tq_progress_end(&s->prog);
    rc = 0;
out:
    tq_sums_free(sums, nsums);
    archive_read_free(a);
    if (fd >= 0)
        close(fd);
    return rc;
}

static void scan_free(scan *s)
{
    tq_manifest_free(s->m);
    free(s->seen);
    free(s->have);
    free(s->got);
    free(s->sig);
    tq_free_strv(s->extras, s->n_extras);
    free(s->buf);
}

int tq_check_bundle(const char *path, tq_check_report *r, tq_err *e)
{
    return tq_check_bundle_signed(path, NULL, r, NULL, e);
}

/* The bundle's model.sig checked with the key, then every signed file against the bundle. */
static int check_signature(scan *s, const char *pub_pem, tq_oms_info *info, tq_err *e)
{
    char what[600];
    snprintf(what, sizeof what, "%s: %s", s->bundle, TQ_OMS_SIG_NAME);
    if (!s->sig)
        return tq_fail(e, TQ_EDATA, "%s: no %s in the bundle to check with the key", s->bundle, TQ_OMS_SIG_NAME);
    tq_oms_key *k = NULL;
    tq_oms_stmt st;
    memset(&st, 0, sizeof st);
    tq_oms_file *f = NULL;
    size_t n = 0;
    int rc = -1;
    if (tq_oms_key_load(pub_pem, 0, &k, e) != 0 || tq_oms_open(s->sig, s->sig_len, what, k, &st, e) != 0)
        goto out;
    if (!(f = tq_calloc(s->m->n_files + 2, sizeof *f, e)))
        goto out;
    static const char *const index_names[2] = {TQ_MANIFEST_NAME, TQ_SUMS_NAME};
    for (int i = 0; i < 2; i++)
        if (s->have_index[i])
            f[n++] = (tq_oms_file){.name = index_names[i], .sha256 = s->index_sha[i]};
    for (size_t i = 0; i < s->m->n_files; i++)
        if (s->seen[i])
            f[n++] = (tq_oms_file){.name = s->m->files[i].path, .sha256 = s->have[i] ? s->got[i] : NULL};
    /* what the signature leaves out (the index files, by default) is not compared */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!tq_oms_ignored(st.ignore, st.n_ignore, f[i].name))
            f[kept++] = f[i];
    n = kept;
    qsort(f, n, sizeof *f, cmp_oms_file);
    tq_check_report sr = {0};
    if (tq_oms_compare(&st, f, n, &sr, e) != 0) {
        tq_check_report_free(&sr);
        goto out;
    }
    for (size_t i = 0; i < sr.n; i++)
        tq_report_add(s->r, sr.v[i].kind, sr.v[i].file, "signature", "%s", sr.v[i].detail);
    tq_check_report_free(&sr);
    tq_report_sort(s->r);
    if (info) {
        tq_oms_info_set(info, st.subject, k, st.n_res, 0, tq_strdup(what, e), st.name);
        st.name = NULL;
    }
    rc = 0;
out:
    free(f);
    tq_oms_stmt_free(&st);
    tq_oms_key_free(k);
    return rc;
}

int tq_check_bundle_signed(const char *path, const char *pub_pem, tq_check_report *r, tq_oms_info *info, tq_err *e)
{
    memset(r, 0, sizeof *r);
    if (info)
        memset(info, 0, sizeof *info);
    scan s = {.bundle = path, .outfd = -1, .r = r, .phase = "check"};
    if (!(s.buf = tq_malloc(CHUNK, e)))
        return -1;
    int rc = scan_bundle(&s, e);
    if (rc == 0 && pub_pem)
        rc = check_signature(&s, pub_pem, info, e);
    scan_free(&s);
    return rc;
}

int tq_bundle_unpack(const char *bundle, const char *out, int force, tq_check_report *r, tq_err *e)
{
    memset(r, 0, sizeof *r);
    tq_adir od;
    tq_sources src = {0};
    if (tq_out_dir_check(out, bundle, force, e) != 0 || tq_sources_add(&src, bundle, e) != 0 ||
        tq_adir_open(&od, out, force ? TQ_ADIR_REPLACE : 0, e) != 0) {
        tq_sources_free(&src);
        return -1;
    }
    const char *tmp = od.tmp_path;
    scan s = {.bundle = bundle, .outfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC), .outdir = tmp, .r = r,
              .phase = "unpack"};
    int rc = -1;
    if (s.outfd < 0)
        tq_fail(e, TQ_EIO, "%s: cannot open: %s", tmp, strerror(errno));
    else if ((s.buf = tq_malloc(CHUNK, e)))
        rc = scan_bundle(&s, e);
    if (s.outfd >= 0)
        close(s.outfd);
    scan_free(&s);
    if (rc == 0 && r->n)
        rc = tq_fail(e, TQ_EDATA, "%s: %zu problem(s); nothing unpacked", bundle, r->n);
    if (rc != 0) {
        tq_adir_abort(&od);
        tq_sources_free(&src);
        return -1;
    }
    rc = tq_sources_check_adir(&src, &od, e) == 0 ? tq_adir_commit(&od, e) : -1;
    tq_sources_free(&src);
    return rc;
}
