/* SOURCE -> row file: interleave chunk by chunk, read every chunk back from the partial
 * file and compare it with the source rows, fsync, re-check the source, rename. */
#include "common/platform.h"
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *abs_path_of_new(const char *out, tq_err *e)
{
    char *c1 = tq_strdup(out, e), *c2 = tq_strdup(out, e);
    char rp[PATH_MAX], *res = NULL;
    if (c1 && c2 && realpath(dirname(c1), rp)) {
        const char *b = basename(c2);
        size_t n = strlen(rp) + strlen(b) + 2;
        if ((res = tq_malloc(n, e)))
            snprintf(res, n, "%s/%s", strcmp(rp, "/") ? rp : "", b);
    } else if (c1 && c2) {
        tq_fail(e, TQ_EIO, "%s: directory does not exist: %s", out, strerror(errno));
    }
    free(c1);
    free(c2);
    return res;
}

/* The kept partial file, by absolute path so the message says exactly where it is. */
static char *keep_partial(tq_afile *af)
{
    char *kept = tq_afile_keep(af), rp[PATH_MAX];
    if (kept && realpath(kept, rp)) {
        char *a = strdup(rp);
        if (a) {
            free(kept);
            kept = a;
        }
    }
    return kept;
}

/* Chunk k+1 is read from the source and interleaved on a second thread while chunk k is
 * written, read back and compared, so the three kernel copies of every byte use two cores. */
typedef struct fill_job {
    rows_io *io;
    const rows_table *t;
    const char *source;
    uint64_t o0, o1;
    int rc;
    tq_err err;
} fill_job;

static void *fill_chunk(void *arg)
{
    fill_job *j = arg;
    rows_io_plan(j->io, j->o0, j->o1);
    j->rc = rows_io_read_source(j->io, j->t->st->fd, j->t->src_off, j->source, &j->err);
    if (j->rc == 0)
        rows_io_scatter(j->io, j->o0, j->o1);
    return NULL;
}

/* Below this a chunk is filled inline: starting a thread costs more than the overlap gains
 * (--chunk-size can be a few bytes; tests use 7), and under qemu-user, where thread starts are
 * slow, one thread per tiny chunk made test_rows run past 30 minutes. Same bytes either way. */
#define FILL_THREAD_MIN 4096

/* Start filling io for [o0, o1) in the background (inline for a small chunk, or when no
 * thread can be made). */
static int fill_start(fill_job *j, pthread_t *th)
{
    if (j->o1 - j->o0 >= FILL_THREAD_MIN && pthread_create(th, NULL, fill_chunk, j) == 0)
        return 1;
    fill_chunk(j);
    return 0;
}

/* Keeps MSG (from tq_asprintf, NULL when it failed) in the report. */
static int warn(tq_rows_report *r, char *msg)
{
    if (!msg)
        return -1;
    if (r->n_warnings < sizeof r->warnings / sizeof r->warnings[0])
        r->warnings[r->n_warnings++] = msg;
    else
        free(msg);
    return 0;
}

/* What MTPLX cannot load (it reads PREFIX "ngram", raw rows only with ngram_bits "0", and
 * mtplx_ngram_rows_v1 only), and an
 * output inside the source's directory, where loaders that take every *.safetensors of a
 * model directory would read it as a shard. */
static int rows_warnings(const rows_table *t, const tq_rows_opts *o, tq_rows_report *r, tq_err *e)
{
    if (strcmp(t->prefix, "ngram") &&
        warn(r, tq_asprintf(e, "prefix '%s': MTPLX reads only the table 'ngram' and cannot load this file", t->prefix)))
        return -1;
    /* MTPLX's loader takes a table whose metadata lacks ngram_bits for 4-bit packed rows */
    if (!strcmp(t->prefix, "ngram") && t->g.parts[0].dtype != TQ_DT_U32 && !tq_st_meta(t->st, "ngram_bits") &&
        warn(r, tq_asprintf(e, "raw %s rows without __metadata__ ngram_bits \"0\": MTPLX's loader reads such a table "
                               "as 4-bit packed rows and cannot load it", tq_dtype_name(t->g.parts[0].dtype))))
        return -1;
    if (o->page_align && warn(r, tq_asprintf(e, "%s is tq's own layout: MTPLX loads only %s", TQ_ROWS_FORMAT_PAGED,
                                                TQ_ROWS_FORMAT_V1)))
        return -1;
    const char *ss = strrchr(t->path_abs, '/'), *os = strrchr(r->output, '/');
    size_t sl = ss ? (size_t)(ss - t->path_abs) : 0, ol = os ? (size_t)(os - r->output) : 0;
    if (sl && ol >= sl && !strncmp(r->output, t->path_abs, sl) && (r->output[sl] == '/') &&
        warn(r, tq_asprintf(e, "%s is inside the source's directory %.*s: a loader that reads every *.safetensors "
                                  "there would take it for a model shard",
                               r->output, (int)sl, t->path_abs)))
        return -1;
    return 0;
}

/* The provenance document (the same as an output directory's tq-provenance.json, the source
 * being the one file) for the header's metadata tq_provenance. A command line the header
 * cannot carry (not UTF-8) leaves it out, with a warning, rather than fail the conversion. */
static int rows_provenance(rows_table *t, const char *source, const tq_provenance *pv, tq_rows_report *r, tq_err *e)
{
    if (!pv)
        return 0;
    tq_model src = {.path = (char *)source, .n_files = 1, .files = &t->st};
    cJSON *j = tq_provenance_json(pv, &src, e);
    if (!j)
        return -1;
    tq_err why = {0};
    t->provenance = tq_json_canonical(j, &why);
    cJSON_Delete(j);
    if (!t->provenance && warn(r, tq_asprintf(e, "no provenance recorded in the header: %s", why.msg)) != 0)
        return -1;
    return 0;
}

int tq_rows_convert(const char *source, const char *out, const tq_rows_opts *o, tq_rows_report *r, tq_err *e)
{
    memset(r, 0, sizeof *r);
    double t0 = tq_now();
    rows_table t;
    rows_io io[2];
    memset(io, 0, sizeof io);
    tq_afile af = {.fd = -1};
    char *hdr = NULL, *hdr_v1 = NULL;
    int rc = -1, opened = 0;
    if (rows_out_refuse(out, source, o->force, e) != 0)
        return -1;
    if (rows_table_open(&t, source, o->prefix, e) != 0)
        return -1;
    if (!(r->output = abs_path_of_new(out, e)) || rows_warnings(&t, o, r, e) != 0 ||
        rows_provenance(&t, source, o->provenance, r, e) != 0)
        goto done;
    tq_rows_geom g = t.g;
    g.page = o->page_align;
    g.pad_stride = o->pad_stride;
    if (tq_rows_geom_layout(&g, e) != 0) {
        tq_err_prefix(e, "%s", source);
        goto done;
    }
    uint64_t hlen, data_start, hlen1, ds1;
    if (rows_build_header(&t, &g, &hdr, &hlen, &data_start, e) != 0)
        goto done;
    if (g.page) {
        tq_rows_geom g1 = t.g;
        if (tq_rows_geom_layout(&g1, e) != 0 || rows_build_header(&t, &g1, &hdr_v1, &hlen1, &ds1, e) != 0)
            goto done;
        r->straddle_plain = tq_rows_count_straddles(&g1, ds1, g.page);
        r->straddle_paged = tq_rows_count_straddles(&g, data_start, g.page);
    }
    uint64_t total = data_start + g.data_bytes;
    if (!o->force_space && tq_space_check(out, total, 0, e) != 0) /* the exact size, before any byte */
        goto done;
    if (tq_afile_open(&af, out, o->force ? TQ_AFILE_REPLACE : 0, e) != 0)
        goto done;
    opened = 1;
    if (rows_out_reserve(&af, total, e) != 0 || tq_pwrite_full(af.fd, hdr, (size_t)hlen, 0, af.tmp_path, e) != 0)
        goto done;
    if (rows_io_init(&io[0], &g, o->chunk_bytes, e) != 0 || rows_io_init(&io[1], &g, o->chunk_bytes, e) != 0)
        goto done;
    tq_plat_advise(t.st->fd, 0, 0, TQ_ADV_SEQUENTIAL);
    tq_progress pg;
    tq_progress_init(&pg, "rows", g.data_bytes, o->quiet);
    fill_job job[2] = {{.io = &io[0], .t = &t, .source = source}, {.io = &io[1], .t = &t, .source = source}};
    job[0].o1 = g.data_bytes ? rows_io_next(&io[0], 0) : 0;
    if (g.data_bytes)
        fill_chunk(&job[0]);
    for (int k = 0; job[k].o0 < job[k].o1; k ^= 1) {
        fill_job *cur = &job[k], *nxt = &job[k ^ 1];
        if (cur->rc != 0) {
            *e = cur->err;
            goto done;
        }
        pthread_t th;
        int threaded = 0;
        nxt->o0 = nxt->o1 = cur->o1;
        if (cur->o1 < g.data_bytes) {
            nxt->o1 = rows_io_next(nxt->io, cur->o1);
            threaded = fill_start(nxt, &th);
        }
        uint64_t o0 = cur->o0, o1 = cur->o1;
        size_t n = (size_t)(o1 - o0);
        rows_mismatch m;
        int bad = tq_pwrite_full(af.fd, cur->io->out, n, data_start + o0, af.tmp_path, e) != 0 ||
                  /* Read back from the file, not the buffer just written. */
                  tq_pread_full(af.fd, cur->io->rb, n, data_start + o0, af.tmp_path, e) != 0;
        if (!bad && rows_io_compare(cur->io, o0, o1, &m)) {
            char d[512];
            rows_mismatch_describe(&m, &g, data_start, d, sizeof d);
            tq_fail(e, TQ_EIO, "%s: read-back check failed: %s", af.tmp_path, d);
            bad = 1;
        }
        if (threaded)
            pthread_join(th, NULL);
        if (bad)
            goto done;
        /* Start writeback now so the final fsync does not find the whole file dirty. */
        tq_plat_writeback(af.fd, data_start + o0, n);
        tq_progress_add(&pg, n);
    }
    tq_progress_end(&pg);
    if (fsync(af.fd) != 0) {
        tq_fail(e, TQ_EIO, "%s: fsync failed: %s", af.tmp_path, strerror(errno));
        goto done;
    }
    tq_rows_identity now;
    char diff[512];
    tq_test_pause_before_check(); /* as every tool's check of its inputs */
    if (tq_rows_identity_read(source, &now, e) != 0) {
        r->kept_partial = keep_partial(&af);
        tq_err_prefix(e, "source vanished or became unreadable during the conversion; partial output kept at %s",
                      r->kept_partial);
        goto done;
    }
    tq_rows_identity_diff(&t.id, &now, diff, sizeof diff);
    if (diff[0]) {
        r->kept_partial = keep_partial(&af);
        tq_fail(e, TQ_EDATA, "%s: changed during the conversion (%s); incomplete output kept at %s", source, diff,
                r->kept_partial);
        goto done;
    }
    if (tq_afile_commit(&af, e) != 0) {
        opened = 0;
        goto done;
    }
    opened = 0;
    r->format = tq_strdup(g.page ? TQ_ROWS_FORMAT_PAGED : TQ_ROWS_FORMAT_V1, e);
    r->prefix = tq_strdup(t.prefix, e);
    r->source_path = tq_strdup(t.path_abs, e);
    r->rows = g.rows;
    r->row_bytes = g.stride;
    r->bytes = g.rows * g.stride;
    r->file_bytes = total;
    r->data_start = data_start;
    r->page_size = g.page;
    r->slot_bytes = g.slot;
    r->per_group = g.per_group;
    r->group_bytes = g.group_bytes;
    r->all_rows_bit_exact = 1;
    r->have_source = 1;
    r->source = t.id;
    r->elapsed_s = tq_now() - t0;
    rc = 0;
done:
    if (opened && af.tmp_path)
        tq_afile_abort(&af);
    rows_io_free(&io[0]);
    rows_io_free(&io[1]);
    free(hdr);
    free(hdr_v1);
    rows_table_close(&t);
    if (rc != 0) {
        char *kept = r->kept_partial;
        r->kept_partial = NULL;
        tq_rows_report_free(r);
        r->kept_partial = kept;
    }
    return rc;
}
