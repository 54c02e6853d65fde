/* --extract: rebuild the source tensors from a row file. When the row file kept the source
 * header (metadata source_header) and the source held only the table, the rebuilt file is
 * the source file byte for byte; otherwise it is a new safetensors file with the same
 * tensors (names, dtypes, shapes, bytes). */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The kept source header, if it proves to describe exactly the table: same canonical hash
 * as the identity, tensors = the parts with the same entries, data buffer fully covered. */
static int kept_header_usable(const rows_file *f, tq_err *e)
{
    if (!f->source_header)
        return 0;
    char hex[65];
    if (tq_rows_header_sha256(f->source_header, f->source_header_len, f->path, hex, e) != 0)
        return -1;
    if (strcmp(hex, f->id.header_sha256))
        return tq_fail(e, TQ_EDATA, "%s: metadata source_header does not hash to the recorded header_sha256", f->path);
    cJSON *h = tq_json_parse(f->source_header, f->source_header_len, NULL, NULL);
    if (!h || !cJSON_IsObject(h)) {
        cJSON_Delete(h);
        return tq_fail(e, TQ_EDATA, "%s: metadata source_header is not a JSON object", f->path);
    }
    cJSON *parts = tq_json_parse(f->parts_json, strlen(f->parts_json), NULL, NULL);
    int n_ten = 0, ok = parts != NULL;
    for (cJSON *c = h->child; c && ok; c = c->next) {
        if (!strcmp(c->string, "__metadata__"))
            continue;
        n_ten++;
        ok = 0;
        for (cJSON *pr = parts->child; pr; pr = pr->next) {
            char name[300];
            snprintf(name, sizeof name, "%s.%s", f->prefix, pr->child->valuestring);
            if (strcmp(name, c->string))
                continue;
            char *a = tq_json_canonical(c, NULL), *b = tq_json_canonical(pr->child->next, NULL);
            ok = a && b && !strcmp(a, b);
            free(a);
            free(b);
        }
    }
    cJSON_Delete(parts);
    cJSON_Delete(h);
    if (!ok || n_ten != f->g.n_parts)
        return 0;
    /* parts must tile [0, data) exactly */
    uint64_t data = f->id.size - 8 - f->source_header_len, covered = 0;
    if (f->id.size < 8 + f->source_header_len)
        return 0;
    for (uint64_t at = 0; at < data;) {
        int found = 0;
        for (int p = 0; p < f->g.n_parts; p++)
            if (f->g.parts[p].begin == at && f->g.parts[p].end > at) {
                covered += f->g.parts[p].end - at;
                at = f->g.parts[p].end;
                found = 1;
                break;
            }
        if (!found)
            return 0;
    }
    return covered == data;
}

static int cmp_part_name(const void *a, const void *b)
{
    return strcmp(((const tq_rows_part *)a)->name, ((const tq_rows_part *)b)->name);
}

/* A fresh header for the parts in tensor-name order, as tq's safetensors writer lays them. */
static int fresh_header(const rows_file *f, uint64_t *dst_begin, char **out, uint64_t *len, tq_err *e)
{
    tq_rows_part sorted[TQ_ROWS_MAX_PARTS];
    memcpy(sorted, f->g.parts, sizeof sorted);
    qsort(sorted, (size_t)f->g.n_parts, sizeof sorted[0], cmp_part_name);
    cJSON *root = cJSON_CreateObject();
    uint64_t at = 0;
    for (int i = 0; i < f->g.n_parts; i++) {
        const tq_rows_part *pt = &sorted[i];
        uint64_t nb = pt->end - pt->begin;
        char name[300], t[3][32];
        snprintf(name, sizeof name, "%s.%s", f->prefix, pt->name);
        cJSON *ent = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *of = cJSON_CreateArray();
        snprintf(t[0], sizeof t[0], "%" PRIu64, f->g.rows);
        snprintf(t[1], sizeof t[1], "%" PRIu64, pt->cols);
        cJSON_AddItemToArray(sh, cJSON_CreateRaw(t[0]));
        cJSON_AddItemToArray(sh, cJSON_CreateRaw(t[1]));
        snprintf(t[0], sizeof t[0], "%" PRIu64, at);
        snprintf(t[2], sizeof t[2], "%" PRIu64, at + nb);
        cJSON_AddItemToArray(of, cJSON_CreateRaw(t[0]));
        cJSON_AddItemToArray(of, cJSON_CreateRaw(t[2]));
        cJSON_AddStringToObject(ent, "dtype", tq_dtype_name(pt->dtype));
        cJSON_AddItemToObject(ent, "shape", sh);
        cJSON_AddItemToObject(ent, "data_offsets", of);
        cJSON_AddItemToObject(root, name, ent);
        for (int p = 0; p < f->g.n_parts; p++)
            if (!strcmp(f->g.parts[p].name, pt->name))
                dst_begin[p] = at;
        at += nb;
    }
    char *json = tq_json_canonical(root, e);
    cJSON_Delete(root);
    if (!json)
        return -1;
    uint64_t n = strlen(json), hl = n + (8 - n % 8) % 8;
    char *buf = tq_malloc((size_t)(8 + hl), e);
    if (!buf) {
        free(json);
        return -1;
    }
    for (int i = 0; i < 8; i++)
        buf[i] = (char)(hl >> (8 * i));
    memcpy(buf + 8, json, n);
    memset(buf + 8 + n, ' ', (size_t)(hl - n));
    free(json);
    *out = buf;
    *len = 8 + hl;
    return 0;
}

int tq_rows_extract(const char *rows, const char *dir, const tq_rows_opts *o, tq_rows_report *r, tq_err *e)
{
    memset(r, 0, sizeof *r);
    double t0 = tq_now();
    rows_file f;
    rows_io io;
    memset(&io, 0, sizeof io);
    tq_afile af = {.fd = -1};
    char *hdr = NULL, *out = NULL;
    int rc = -1, opened = 0, made_dir = 0;
    tq_sources watch = {0};
    if (tq_sources_add(&watch, rows, e) != 0 || rows_file_open(&f, rows, e) != 0) {
        tq_sources_free(&watch);
        return -1;
    }
    const tq_rows_geom *g = &f.g;
    char name[300];
    const char *bn = f.source_path ? base_name(f.source_path) : "";
    if (*bn && bn[0] != '.' && strlen(bn) < sizeof name)
        snprintf(name, sizeof name, "%s", bn);
    else
        snprintf(name, sizeof name, "%s.safetensors", f.prefix);
    if (strchr(name, '/') || name[0] == '.' || strlen(name) >= sizeof name - 1) {
        tq_fail(e, TQ_EDATA, "%s: cannot derive a safe output file name", rows);
        goto done;
    }
    /* a directory made here is part of the output: removed with it on an error or a signal */
    made_dir = !tq_exists(dir);
    if (tq_mkdir_p(dir, e) != 0) {
        made_dir = 0;
        goto done;
    }
    if (made_dir)
        tq_partials_add(dir);
    if (!(out = tq_path_join(dir, name, e)) || rows_out_refuse(out, rows, o->force, e) != 0)
        goto done;
    int exact = kept_header_usable(&f, e);
    if (exact < 0)
        goto done;
    uint64_t dst_begin[TQ_ROWS_MAX_PARTS], hlen, total;
    if (exact) {
        hlen = 8 + f.source_header_len;
        if (!(hdr = tq_malloc((size_t)hlen, e)))
            goto done;
        for (int i = 0; i < 8; i++)
            hdr[i] = (char)((uint64_t)f.source_header_len >> (8 * i));
        memcpy(hdr + 8, f.source_header, f.source_header_len);
        for (int p = 0; p < g->n_parts; p++)
            dst_begin[p] = g->parts[p].begin;
    } else if (fresh_header(&f, dst_begin, &hdr, &hlen, e) != 0) {
        goto done;
    }
    total = hlen;
    for (int p = 0; p < g->n_parts; p++)
        total += g->parts[p].end - g->parts[p].begin;
    if (exact && total != f.id.size) {
        tq_fail(e, TQ_EDATA, "%s: rebuilt size %" PRIu64 " differs from the recorded source size %" PRIu64, rows,
                total, f.id.size);
        goto done;
    }
    if (tq_afile_open(&af, out, o->force ? TQ_AFILE_REPLACE : 0, e) != 0)
        goto done;
    opened = 1;
    if (rows_out_reserve(&af, total, e) != 0 || tq_pwrite_full(af.fd, hdr, (size_t)hlen, 0, af.tmp_path, e) != 0)
        goto done;
    if (rows_io_init(&io, g, o->chunk_bytes, e) != 0)
        goto done;
    uint64_t dst_off[TQ_ROWS_MAX_PARTS];
    for (int p = 0; p < g->n_parts; p++)
        dst_off[p] = hlen + dst_begin[p];
    tq_progress pg;
    tq_progress_init(&pg, "extract", g->data_bytes, o->quiet);
    for (uint64_t o0 = 0, o1; o0 < g->data_bytes; o0 = o1) {
        o1 = rows_io_next(&io, o0);
        size_t n = (size_t)(o1 - o0);
        rows_io_plan(&io, o0, o1);
        if (tq_pread_full(f.fd, io.rb, n, f.data_start + o0, rows, e) != 0)
            goto done;
        rows_io_gather(&io, o0, o1);
        rows_mismatch m;
        if (rows_io_compare(&io, o0, o1, &m)) { /* only padding can differ here */
            char d[512];
            rows_mismatch_describe(&m, g, f.data_start, d, sizeof d);
            tq_fail(e, TQ_EDATA, "%s: %s", rows, d);
            goto done;
        }
        for (int p = 0; p < g->n_parts; p++) {
            size_t len = (size_t)io.slen[p];
            if (!len)
                continue;
            const unsigned char *src = io.src + io.sbo[p];
            uint64_t at = dst_off[p] + io.soff[p];
            if (tq_pwrite_full(af.fd, src, len, at, af.tmp_path, e) != 0 ||
                tq_pread_full(af.fd, io.out, len, at, af.tmp_path, e) != 0)
                goto done;
            if (memcmp(io.out, src, len)) {
                tq_fail(e, TQ_EIO, "%s: read-back check failed in part '%s' near file offset %" PRIu64, af.tmp_path,
                        g->parts[p].name, at);
                goto done;
            }
        }
        tq_progress_add(&pg, n);
    }
    tq_progress_end(&pg);
    if (tq_sources_check_afile(&watch, &af, e) != 0 || tq_afile_commit(&af, e) != 0) {
        opened = 0;
        goto done;
    }
    opened = 0;
    r->format = tq_strdup(f.paged ? TQ_ROWS_FORMAT_PAGED : TQ_ROWS_FORMAT_V1, e);
    r->prefix = tq_strdup(f.prefix, e);
    r->output = out;
    out = NULL;
    r->source_path = f.source_path ? tq_strdup(f.source_path, e) : NULL;
    r->rows = g->rows;
    r->row_bytes = g->stride;
    r->bytes = g->rows * g->stride;
    r->file_bytes = total;
    r->page_size = g->page;
    r->all_rows_bit_exact = 1;
    r->byte_identical = exact;
    r->have_source = 1;
    r->source = f.id;
    r->elapsed_s = tq_now() - t0;
    rc = 0;
done:
    if (opened && af.tmp_path)
        tq_afile_abort(&af);
    if (made_dir) {
        tq_partials_forget(dir);
        if (rc)
            rmdir(dir); /* only when empty */
    }
    rows_io_free(&io);
    free(hdr);
    free(out);
    rows_file_close(&f);
    tq_sources_free(&watch);
    if (rc)
        tq_rows_report_free(r);
    return rc;
}
