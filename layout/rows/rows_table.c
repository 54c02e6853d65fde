/* The source of a row file: a safetensors table PREFIX.weight (U32, 2-D) with optional
 * PREFIX.scales and PREFIX.biases (F16/BF16, 2-D), all with the same number of rows. */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *part_names[TQ_ROWS_MAX_PARTS] = {"weight", "scales", "biases"};

void rows_table_close(rows_table *t)
{
    if (t->st)
        tq_st_close(t->st);
    cJSON_Delete(t->hdr);
    free(t->prefix);
    free(t->path_abs);
    free(t->parts_json);
    free(t->provenance);
    memset(t, 0, sizeof *t);
}

static void list_candidates(const tq_st_file *st, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < st->n_tensors && n < cap; i++) {
        const tq_tensor_info *t = &st->tensors[i];
        size_t l = strlen(t->name);
        if (t->dtype == TQ_DT_U32 && t->ndim == 2 && l > 7 && !strcmp(t->name + l - 7, ".weight"))
            n += (size_t)snprintf(buf + n, cap - n, "%s'%.*s'", n ? ", " : "", (int)(l - 7), t->name);
    }
}

/* MTPLX's table metadata (docs/compatibility.md, MTPLX): ngram_bits (0 = raw weight rows)
 * and ngram_group_size (default 32), as decimal strings; when present they must describe the
 * parts: bits 0 a float weight alone, else U32 words of 32/bits values, scales and biases of
 * one dtype and shape, words x 32 = groups x group size x bits. */
static int small_decimal(const char *s, uint64_t *out)
{
    const char *end = tq_parse_udec(s, 999999, out);
    return end && !*end ? 0 : -1;
}

static int check_ngram_meta(const rows_table *t, const char *path, tq_err *e)
{
    const char *vb = NULL, *vg = NULL;
    for (size_t i = 0; i < t->st->n_meta; i++) {
        if (!strcmp(t->st->meta_keys[i], "ngram_bits"))
            vb = t->st->meta_vals[i];
        else if (!strcmp(t->st->meta_keys[i], "ngram_group_size"))
            vg = t->st->meta_vals[i];
    }
    if (!vb && !vg)
        return 0;
    uint64_t bits = 4, group = 32;
    if ((vb && (small_decimal(vb, &bits) != 0 || bits > 8)) || (vg && (small_decimal(vg, &group) != 0 || !group || group > 4096)))
        return tq_fail(e, TQ_EDATA, "%s: __metadata__ ngram_bits '%s' / ngram_group_size '%s' are not valid numbers", path,
                       vb ? vb : "", vg ? vg : "");
    const tq_rows_geom *g = &t->g;
    const tq_rows_part *w = &g->parts[0], *s = g->n_parts > 1 ? &g->parts[1] : NULL, *b = g->n_parts > 2 ? &g->parts[2] : NULL;
    const char *why = NULL;
    if (bits == 0 && (w->dtype == TQ_DT_U32 || g->n_parts != 1))
        why = "ngram_bits 0 means raw F16/BF16 weight rows alone";
    else if (bits != 0 && (w->dtype != TQ_DT_U32 || !s || !b || strcmp(s->name, "scales") || s->dtype != b->dtype ||
                           s->cols != b->cols))
        why = "a packed table needs a U32 weight with scales and biases of one dtype and shape";
    else if (bits != 0 && w->cols * 32 != s->cols * group * bits)
        why = "weight words x 32 != groups x group size x bits";
    if (why)
        return tq_fail(e, TQ_EDATA, "%s: __metadata__ says ngram_bits %llu, ngram_group_size %llu, but table '%s' does not "
                       "match: %s", path, (unsigned long long)bits, (unsigned long long)group, t->prefix, why);
    return 0;
}

int rows_table_open(rows_table *t, const char *path, const char *prefix, tq_err *e)
{
    memset(t, 0, sizeof *t);
    if (!prefix)
        prefix = "ngram";
    if (!*prefix || strlen(prefix) > 200)
        return tq_fail(e, TQ_EUSAGE, "invalid prefix '%s'", prefix);
    t->prefix = tq_strdup(prefix, e);
    char rp[PATH_MAX];
    if (!t->prefix)
        goto fail;
    if (!realpath(path, rp)) {
        tq_fail(e, TQ_EIO, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if (!(t->path_abs = tq_strdup(rp, e)))
        goto fail;
    /* Identity first, then the validating reader; both must describe the same file. */
    if (tq_rows_identity_read(path, &t->id, e) != 0)
        goto fail;
    if (tq_st_open(&t->st, path, e) != 0)
        goto fail;
    tq_rows_identity now;
    if (rows_identity_fd(t->st->fd, path, &now, e) != 0)
        goto fail;
    char diff[512];
    tq_rows_identity_diff(&t->id, &now, diff, sizeof diff);
    if (diff[0]) {
        tq_fail(e, TQ_EDATA, "%s: changed while being opened (%s)", path, diff);
        goto fail;
    }
    t->hdr = tq_json_parse(t->st->header_json, (size_t)t->st->header_len, NULL, NULL);
    if (!t->hdr) {
        tq_fail(e, TQ_EDATA, "%s: header is not valid JSON", path);
        goto fail;
    }

    tq_rows_geom *g = &t->g;
    memset(g, 0, sizeof *g);
    cJSON *parts = cJSON_CreateArray();
    if (!parts) {
        tq_fail(e, TQ_ENOMEM, "out of memory");
        goto fail;
    }
    for (int p = 0; p < TQ_ROWS_MAX_PARTS; p++) {
        char name[256];
        snprintf(name, sizeof name, "%s.%s", prefix, part_names[p]);
        const tq_tensor_info *ti = tq_st_find(t->st, name);
        if (!ti) {
            if (p == 0) {
                char cand[512];
                list_candidates(t->st, cand, sizeof cand);
                tq_fail(e, TQ_EDATA, "%s: no tensor '%s'%s%s%s", path, name,
                        cand[0] ? " (U32 2-D tables present: " : "", cand, cand[0] ? "; use --prefix)" : "");
                cJSON_Delete(parts);
                goto fail;
            }
            continue;
        }
        /* the weight packed (U32, with scales and biases) or raw rows (F16/BF16, alone) */
        int fl = ti->dtype == TQ_DT_F16 || ti->dtype == TQ_DT_BF16;
        int ok_dtype = p == 0 ? ti->dtype == TQ_DT_U32 || fl : fl && g->parts[0].dtype == TQ_DT_U32;
        if (!ok_dtype) {
            tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': dtype %s is not supported (%s)", path, name,
                    tq_dtype_name(ti->dtype),
                    p == 0 ? "weight must be U32 (packed) or F16/BF16 (raw rows)"
                    : fl   ? "a raw F16/BF16 weight table has no scales or biases"
                           : "scales and biases must be F16 or BF16");
            cJSON_Delete(parts);
            goto fail;
        }
        if (ti->ndim != 2) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s': has %d dimensions; a row table needs 2-D parts", path,
                    name, ti->ndim);
            cJSON_Delete(parts);
            goto fail;
        }
        if (g->n_parts == 0) {
            g->rows = ti->shape[0];
        } else if (ti->shape[0] != g->rows) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s': has %llu rows but '%s.weight' has %llu", path, name,
                    (unsigned long long)ti->shape[0], prefix, (unsigned long long)g->rows);
            cJSON_Delete(parts);
            goto fail;
        }
        tq_rows_part *pt = &g->parts[g->n_parts];
        snprintf(pt->name, sizeof pt->name, "%s", part_names[p]);
        pt->dtype = ti->dtype;
        pt->cols = ti->shape[1];
        if (tq_mul_u64(pt->cols, tq_dtype_size(ti->dtype), &pt->row_bytes) != 0) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s': row size overflows", path, name);
            cJSON_Delete(parts);
            goto fail;
        }
        pt->pos = g->stride;
        if (tq_add_u64(g->stride, pt->row_bytes, &g->stride) != 0) {
            tq_fail(e, TQ_EDATA, "%s: record size overflows", path);
            cJSON_Delete(parts);
            goto fail;
        }
        pt->begin = ti->offset - t->st->data_start;
        pt->end = pt->begin + ti->nbytes;
        t->src_off[g->n_parts] = ti->offset;
        g->n_parts++;
        cJSON *entry = cJSON_GetObjectItemCaseSensitive(t->hdr, name);
        cJSON *pair = cJSON_CreateArray();
        cJSON *dup = entry ? cJSON_Duplicate(entry, 1) : NULL;
        if (!pair || !dup) {
            cJSON_Delete(pair);
            cJSON_Delete(dup);
            cJSON_Delete(parts);
            tq_fail(e, TQ_ENOMEM, "%s: tensor '%s': header entry missing or out of memory", path, name);
            goto fail;
        }
        cJSON_AddItemToArray(pair, cJSON_CreateString(part_names[p]));
        cJSON_AddItemToArray(pair, dup);
        cJSON_AddItemToArray(parts, pair);
    }
    t->parts_json = tq_json_canonical(parts, e);
    cJSON_Delete(parts);
    if (!t->parts_json) {
        tq_err_prefix(e, "%s", path);
        goto fail;
    }
    if (g->stride == 0) {
        tq_fail(e, TQ_EDATA, "%s: table '%s' has 0 bytes per row", path, prefix);
        goto fail;
    }
    if (check_ngram_meta(t, path, e) != 0)
        goto fail;
    return 0;
fail:
    rows_table_close(t);
    return -1;
}
