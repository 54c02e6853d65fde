/* --check: a row file against its source, row by row, without writing anything. */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <stdlib.h>
#include <string.h>

int tq_rows_check(const char *rows, const char *source, const tq_rows_opts *o, tq_rows_report *r, tq_err *e)
{
    memset(r, 0, sizeof *r);
    double t0 = tq_now();
    rows_file f;
    rows_table t;
    rows_io io;
    memset(&t, 0, sizeof t);
    memset(&io, 0, sizeof io);
    int rc = -1;
    if (rows_file_open(&f, rows, e) != 0)
        return -1;
    if (!source)
        source = f.source_path;
    if (!source) {
        tq_fail(e, TQ_EUSAGE, "%s: does not record its source path; give SOURCE", rows);
        goto done;
    }
    if (o->prefix && strcmp(o->prefix, f.prefix)) {
        tq_fail(e, TQ_EUSAGE, "%s: holds table '%s', not '%s'", rows, f.prefix, o->prefix);
        goto done;
    }
    /* Identity before anything else: a changed source is reported as changed, not as
     * whatever the new bytes fail to parse as. */
    char diff[512];
    tq_rows_identity now;
    if (tq_rows_identity_read(source, &now, e) != 0)
        goto done;
    tq_rows_identity_diff(&f.id, &now, diff, sizeof diff);
    if (diff[0]) {
        tq_fail(e, TQ_EDATA, "%s: source changed since %s was made (%s)", source, rows, diff);
        goto done;
    }
    if (rows_table_open(&t, source, f.prefix, e) != 0)
        goto done;
    tq_rows_identity_diff(&f.id, &t.id, diff, sizeof diff);
    if (diff[0]) {
        tq_fail(e, TQ_EDATA, "%s: source changed since %s was made (%s)", source, rows, diff);
        goto done;
    }
    if (strcmp(f.parts_json, t.parts_json)) {
        tq_fail(e, TQ_EDATA, "%s: parts differ from the source's header entries", rows);
        goto done;
    }
    const tq_rows_geom *g = &f.g;
    if (rows_io_init(&io, g, o->chunk_bytes, e) != 0)
        goto done;
    tq_progress pg;
    tq_progress_init(&pg, "check", g->data_bytes, o->quiet);
    for (uint64_t o0 = 0, o1; o0 < g->data_bytes; o0 = o1) {
        o1 = rows_io_next(&io, o0);
        rows_io_plan(&io, o0, o1);
        if (rows_io_read_source(&io, t.st->fd, t.src_off, source, e) != 0 ||
            tq_pread_full(f.fd, io.rb, (size_t)(o1 - o0), f.data_start + o0, rows, e) != 0)
            goto done;
        rows_mismatch m;
        if (rows_io_compare(&io, o0, o1, &m)) {
            char d[512];
            rows_mismatch_describe(&m, g, f.data_start, d, sizeof d);
            tq_fail(e, TQ_EDATA, "%s: %s", rows, d);
            goto done;
        }
        tq_progress_add(&pg, o1 - o0);
    }
    tq_progress_end(&pg);
    if (tq_rows_identity_read(source, &now, e) != 0)
        goto done;
    tq_rows_identity_diff(&t.id, &now, diff, sizeof diff);
    if (diff[0]) {
        tq_fail(e, TQ_EDATA, "%s: changed during the check (%s)", source, diff);
        goto done;
    }
    r->format = tq_strdup(f.paged ? TQ_ROWS_FORMAT_PAGED : TQ_ROWS_FORMAT_V1, e);
    r->prefix = tq_strdup(f.prefix, e);
    r->output = tq_strdup(rows, e);
    r->source_path = tq_strdup(t.path_abs, e);
    r->rows = g->rows;
    r->row_bytes = g->stride;
    r->bytes = g->rows * g->stride;
    r->file_bytes = f.size;
    r->data_start = f.data_start;
    r->page_size = g->page;
    r->slot_bytes = g->slot;
    r->per_group = g->per_group;
    r->group_bytes = g->group_bytes;
    r->all_rows_bit_exact = 1;
    r->have_source = 1;
    r->source = f.id;
    r->elapsed_s = tq_now() - t0;
    rc = 0;
done:
    rows_io_free(&io);
    rows_table_close(&t);
    rows_file_close(&f);
    if (rc)
        tq_rows_report_free(r);
    return rc;
}
