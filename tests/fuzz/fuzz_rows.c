/* Fuzz target: row-file metadata (mtplx_ngram_rows_v1 / tq_rows_paged_v1) on arbitrary bytes.
 * The input is the row file: rows_file_open (what tq-rowlayout --check and --extract start
 * with) must only accept geometry whose records lie inside the file, and tq_rows_extract must
 * then rebuild a source file inside the target directory or fail cleanly. The same bytes
 * also go through the metadata-string parsers on their own (source identity, parts,
 * canonical-JSON header hash). */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"
#include "tests/fuzz/fz_file.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void extract(const char *rows)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", fz_path("x"));
    tq_rows_opts o;
    memset(&o, 0, sizeof o);
    o.quiet = 1;
    tq_rows_report r;
    tq_err e;
    if (tq_rows_extract(rows, dir, &o, &r, &e) != 0)
        fz_note(e.msg);
    tq_rows_report_free(&r);
    /* whatever happened, nothing may appear outside dir: the scratch root holds only
     * r.safetensors and x */
    DIR *d = opendir(fz_dir());
    if (!d)
        abort();
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "r.safetensors") &&
            strcmp(de->d_name, "x"))
            abort();
    closedir(d);
    tq_rm_tree(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e;
    fz_write("r.safetensors", data, size);
    char path[512];
    snprintf(path, sizeof path, "%s", fz_path("r.safetensors"));
    rows_file f;
    if (rows_file_open(&f, path, &e) == 0) {
        const tq_rows_geom *g = &f.g;
        if (f.data_start > f.size || g->data_bytes > f.size - f.data_start || g->rows == 0 ||
            tq_rows_record_offset(g, g->rows - 1) + g->stride > g->data_bytes)
            abort();
        rows_file_close(&f);
        extract(path);
    } else {
        fz_note(e.msg);
    }
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = 0;
    tq_rows_identity id;
    if (tq_rows_identity_parse(s, &id, &e) == 0) {
        char *j = tq_rows_identity_json(&id, &e);
        tq_rows_identity again;
        char diff[512];
        if (!j || tq_rows_identity_parse(j, &again, &e) != 0)
            abort();
        tq_rows_identity_diff(&id, &again, diff, sizeof diff);
        if (diff[0])
            abort();
        free(j);
    }
    tq_rows_geom g;
    memset(&g, 0, sizeof g);
    (void)rows_parts_from_json(s, 64, &g, &e);
    char hex[65];
    (void)tq_rows_header_sha256(s, size, "fuzz", hex, &e);
    free(s);
    return 0;
}
