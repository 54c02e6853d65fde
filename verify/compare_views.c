/* What tq-verify compare can open: model directories and safetensors files (formats), split
 * directories seen as the model they came from (formats/flash.h's tq_model_open_split, the view tq-split --join writes out), and row files
 * rebuilt into their source tables by tq_rows_extract (layout/rows/) (in a temporary
 * directory under $TMPDIR, removed as soon as the rebuilt file is open). */
#include "verify/verify_internal.h"
#include "formats/formats.h"
#include "layout/rows/rows.h"
#include "formats/flash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_rows_file(const char *path)
{
    size_t n = strlen(path);
    if (n < 12 || strcmp(path + n - 12, ".safetensors") || tq_is_dir(path))
        return 0;
    tq_st_file *f;
    tq_err e;
    if (tq_st_open(&f, path, &e) != 0)
        return 0;
    const char *fmt = tq_st_meta(f, "format");
    int rows = fmt && (!strcmp(fmt, TQ_ROWS_FORMAT_V1) || !strcmp(fmt, TQ_ROWS_FORMAT_PAGED));
    tq_st_close(f);
    return rows;
}

static int open_rows(const char *path, tq_model **out, tq_err *e)
{
    char *dir = tq_temp_dir("tq-verify-rows", e);
    if (!dir)
        return -1;
    tq_rows_opts o = {0};
    o.quiet = 1;
    tq_rows_report rep;
    memset(&rep, 0, sizeof rep);
    int rc = tq_rows_extract(path, dir, &o, &rep, e);
    tq_rows_report_free(&rep);
    if (rc == 0)
        rc = tq_model_open(out, dir, e);
    if (rc != 0)
        tq_err_prefix(e, "%s: rebuilding the source table from the row file", path);
    tq_rm_tree(dir); /* the open model keeps its file descriptors */
    free(dir);
    return rc;
}

int tq_verify_open_view(const char *path, const char *other, tq_model **out, tq_err *e)
{
    (void)other;
    char p[4096];
    snprintf(p, sizeof p, "%s/split.json", path);
    if (tq_is_dir(path) && tq_exists(p))
        return tq_model_open_split(out, path, TQ_NAMING_SOURCE, e);
    if (is_rows_file(path))
        return open_rows(path, out, e);
    return tq_model_open(out, path, e);
}
