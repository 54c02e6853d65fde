/* Parallel hashing of files and of byte ranges inside them, in large sequential reads. */
#include "common/platform.h"
#include "verify/verify_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK (8u << 20)
/* Files at least this big with ranges are hashed by several workers when threads > 1. */
#define SPLIT_MIN (64ull << 20)
#define RANGE_JOB_MIN (32ull << 20)

int tq_vh_init(tq_vhasher *h, int want_whole, uint64_t pos, tq_vh_range *r, size_t n, tq_err *e)
{
    memset(h, 0, sizeof *h);
    h->r = r;
    h->n = n;
    h->pos = pos;
    for (size_t i = 0; i < n; i++) {
        r[i].seen = 0;
        r[i].h = NULL;
    }
    if (want_whole && !(h->whole = tq_sha256_new()))
        return tq_fail(e, TQ_ENOMEM, "cannot create SHA-256 context");
    for (size_t i = 0; i < n; i++)
        if (!(r[i].h = tq_sha256_new())) {
            unsigned char d[32];
            tq_vh_finish(h, d);
            return tq_fail(e, TQ_ENOMEM, "cannot create SHA-256 context");
        }
    /* Skip ranges that end before the start position. */
    while (h->cursor < n && r[h->cursor].off + r[h->cursor].len <= pos && r[h->cursor].len)
        h->cursor++;
    return 0;
}

void tq_vh_feed(tq_vhasher *h, const void *data, size_t len)
{
    if (h->whole)
        tq_sha256_update(h->whole, data, len);
    uint64_t start = h->pos, end = start + len;
    for (size_t i = h->cursor; i < h->n; i++) {
        tq_vh_range *r = &h->r[i];
        if (r->off >= end)
            break;
        uint64_t a = r->off > start ? r->off : start;
        uint64_t b = r->off + r->len < end ? r->off + r->len : end;
        if (a < b && a == r->off + r->seen) {
            tq_sha256_update(r->h, (const char *)data + (a - start), (size_t)(b - a));
            r->seen += b - a;
        }
    }
    while (h->cursor < h->n && h->r[h->cursor].off + h->r[h->cursor].len <= end)
        h->cursor++;
    h->pos = end;
}

void tq_vh_finish(tq_vhasher *h, unsigned char whole[32])
{
    if (h->whole)
        tq_sha256_final(h->whole, whole);
    h->whole = NULL;
    for (size_t i = 0; i < h->n; i++)
        if (h->r[i].h) {
            tq_sha256_final(h->r[i].h, h->r[i].out);
            h->r[i].h = NULL;
        }
}

/* ---- jobs: a whole task, its whole-file hash alone, or a slice of its ranges ---- */
typedef struct job {
    tq_vh_task *t;
    int whole;
    size_t r0, r1;    /* ranges [r0, r1) */
    uint64_t bytes;   /* scheduling weight */
    tq_err err;
    int failed;
    unsigned char digest[32];
    uint64_t size;
} job;

/* Progress over all jobs of a run, reported to the progress sink when enabled with
 * tq_verify_progress. */
static int progress_on;

void tq_verify_progress(int enabled)
{
    progress_on = enabled;
}

static int read_span(tq_work *q, int fd, const char *path, uint64_t from, uint64_t to, int until_eof,
                     tq_vhasher *vh, char *buf, uint64_t *total, tq_err *e)
{
    uint64_t off = from;
    for (;;) {
        size_t want = READ_CHUNK;
        if (!until_eof) {
            if (off >= to)
                break;
            if (to - off < want)
                want = (size_t)(to - off);
        }
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return tq_fail(e, TQ_EIO, "%s: read error at offset %llu: %s", path,
                           (unsigned long long)off, strerror(errno));
        if (n == 0)
            break;
        tq_vh_feed(vh, buf, (size_t)n);
        tq_work_progress(q, (uint64_t)n);
        off += (uint64_t)n;
    }
    *total = off - from;
    return 0;
}

static void run_job(tq_work *q, job *j, char *buf)
{
    tq_vh_task *t = j->t;
    int fd = tq_open_regular(t->path, NULL, &j->err);
    if (fd < 0) {
        j->failed = 1;
        return;
    }
    tq_plat_advise(fd, 0, 0, TQ_ADV_SEQUENTIAL);
    tq_vhasher vh;
    uint64_t from = 0, to = 0;
    int until_eof = j->whole;
    if (!j->whole && j->r1 > j->r0) {
        from = t->r[j->r0].off;
        for (size_t i = j->r0; i < j->r1; i++)
            if (t->r[i].off + t->r[i].len > to)
                to = t->r[i].off + t->r[i].len;
    }
    /* t->r is NULL for a file without ranges: no arithmetic on it */
    tq_vh_range *r = j->r1 > j->r0 ? t->r + j->r0 : NULL;
    if (tq_vh_init(&vh, j->whole, from, r, j->r1 - j->r0, &j->err) != 0) {
        j->failed = 1;
        close(fd);
        return;
    }
    uint64_t total = 0;
    if (read_span(q, fd, t->path, from, to, until_eof, &vh, buf, &total, &j->err) != 0)
        j->failed = 1;
    tq_vh_finish(&vh, j->digest);
    j->size = total;
    close(fd);
}

/* A job's own failure (open, read) stays with its file and the other jobs go on; only running
 * out of memory stops the run. */
static int hash_job(tq_work *q, void *ctx, int worker, uint64_t i, tq_err *e)
{
    char *buf = tq_work_scratch(q, worker, READ_CHUNK, e);
    if (!buf)
        return -1;
    run_job(q, (job *)ctx + i, buf);
    return 0;
}

static int cmp_job(const void *a, const void *b)
{
    const job *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x < y ? -1 : 1;
}

int tq_vh_run(tq_vh_task *t, size_t n, int threads, tq_err *e)
{
    if (threads < 1)
        threads = 1;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += 1 + t[i].n;
    job *jobs = tq_calloc(cap ? cap : 1, sizeof *jobs, e);
    if (!jobs)
        return -1;
    size_t nj = 0;
    for (size_t i = 0; i < n; i++) {
        tq_vh_task *tk = &t[i];
        tk->failed = 0;
        int split = threads > 1 && tk->n > 0 && tk->want_whole && tk->size_hint >= SPLIT_MIN;
        if (!split) {
            jobs[nj++] = (job){.t = tk, .whole = tk->want_whole, .r0 = 0, .r1 = tk->n,
                               .bytes = tk->size_hint};
            continue;
        }
        jobs[nj++] = (job){.t = tk, .whole = 1, .r0 = 0, .r1 = 0, .bytes = tk->size_hint};
        uint64_t target = tk->size_hint / (uint64_t)threads;
        if (target < RANGE_JOB_MIN)
            target = RANGE_JOB_MIN;
        size_t r0 = 0;
        uint64_t acc = 0;
        for (size_t k = 0; k < tk->n; k++) {
            acc += tk->r[k].len;
            if (acc >= target || k + 1 == tk->n) {
                jobs[nj++] = (job){.t = tk, .whole = 0, .r0 = r0, .r1 = k + 1, .bytes = acc};
                r0 = k + 1;
                acc = 0;
            }
        }
    }
    /* Largest first: the long whole-file hashes start at once. */
    qsort(jobs, nj, sizeof *jobs, cmp_job);
    tq_progress prog;
    uint64_t total_bytes = 0;
    for (size_t k = 0; k < nj; k++)
        total_bytes += jobs[k].bytes;
    tq_progress_init(&prog, "hash", total_bytes, !progress_on);
    int rc = tq_work_run(nj, threads, hash_job, jobs, prog.enabled ? &prog : NULL, e);
    if (prog.enabled)
        tq_progress_end(&prog);
    for (size_t k = 0; k < nj; k++) {
        job *j = &jobs[k];
        if (j->failed && !j->t->failed) {
            j->t->failed = 1;
            j->t->err = j->err;
        }
        if (j->whole) {
            memcpy(j->t->whole, j->digest, 32);
            j->t->size = j->size;
        }
    }
    free(jobs);
    return rc;
}
