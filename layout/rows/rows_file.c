/* Row-file headers: building one for a source table, and reading one back as hostile
 * input (every number checked, geometry recomputed rather than trusted). */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The source header is kept (metadata source_header) so --extract can rebuild the source
 * file byte for byte; past this size it is left out and --extract is tensor-identical. */
#define ROWS_MAX_KEPT_HEADER (1u << 20)

static cJSON *raw_u64(uint64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    return cJSON_CreateRaw(t);
}

static cJSON *u64_pair(uint64_t a, uint64_t b)
{
    cJSON *arr = cJSON_CreateArray();
    if (arr) {
        cJSON_AddItemToArray(arr, raw_u64(a));
        cJSON_AddItemToArray(arr, raw_u64(b));
    }
    return arr;
}

static char *layout_json(const tq_rows_geom *g, tq_err *e)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddItemToObject(o, "group_bytes", raw_u64(g->group_bytes));
    cJSON_AddItemToObject(o, "page_size", raw_u64(g->page));
    cJSON_AddItemToObject(o, "record_bytes", raw_u64(g->stride));
    cJSON_AddItemToObject(o, "records_per_group", raw_u64(g->per_group));
    cJSON_AddItemToObject(o, "rows", raw_u64(g->rows));
    cJSON_AddItemToObject(o, "slot_bytes", raw_u64(g->slot));
    char *s = tq_json_canonical(o, e);
    cJSON_Delete(o);
    return s;
}

int rows_build_header(const rows_table *t, const tq_rows_geom *g, char **out, uint64_t *len,
                      uint64_t *data_start, tq_err *e)
{
    char *ident = tq_rows_identity_json(&t->id, e);
    char *lay = g->page ? layout_json(g, e) : NULL;
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject(), *ten = cJSON_CreateObject();
    char *json = NULL;
    int rc = -1;
    if (!ident || (g->page && !lay) || !root || !meta || !ten) {
        if (!e || !e->msg[0])
            tq_fail(e, TQ_ENOMEM, "out of memory");
        cJSON_Delete(meta);
        cJSON_Delete(ten);
        goto done;
    }
    cJSON_AddStringToObject(meta, "format", g->page ? TQ_ROWS_FORMAT_PAGED : TQ_ROWS_FORMAT_V1);
    cJSON_AddStringToObject(meta, "source", ident);
    cJSON_AddStringToObject(meta, "parts", t->parts_json);
    if (lay)
        cJSON_AddStringToObject(meta, "layout", lay);
    if (tq_utf8_check(t->path_abs, strlen(t->path_abs), NULL) == 0)
        cJSON_AddStringToObject(meta, "source_path", t->path_abs);
    if (t->provenance)
        cJSON_AddStringToObject(meta, TQ_PROVENANCE_META, t->provenance);
    const char *sh = t->st->header_json;
    size_t shn = (size_t)t->st->header_len;
    if (shn <= ROWS_MAX_KEPT_HEADER && !memchr(sh, 0, shn) && tq_utf8_check(sh, shn, NULL) == 0)
        cJSON_AddStringToObject(meta, "source_header", sh);
    cJSON_AddItemToObject(root, "__metadata__", meta);
    cJSON_AddStringToObject(ten, "dtype", "U8");
    if (g->page)
        cJSON_AddItemToObject(ten, "shape", u64_pair(g->groups, g->group_bytes));
    else
        cJSON_AddItemToObject(ten, "shape", u64_pair(g->rows, g->stride));
    cJSON_AddItemToObject(ten, "data_offsets", u64_pair(0, g->data_bytes));
    char name[256];
    snprintf(name, sizeof name, "%s.%s", t->prefix, g->page ? "pages" : "records");
    cJSON_AddItemToObject(root, name, ten);
    if (!(json = tq_json_canonical(root, e)))
        goto done;
    uint64_t n = strlen(json), align = g->page ? g->page : 8;
    uint64_t total = 8 + n;
    total += (align - total % align) % align;
    uint64_t hl = total - 8;
    char *buf = tq_malloc((size_t)total, e);
    if (!buf)
        goto done;
    for (int i = 0; i < 8; i++)
        buf[i] = (char)(hl >> (8 * i));
    memcpy(buf + 8, json, n);
    memset(buf + 8 + n, ' ', (size_t)(hl - n));
    *out = buf;
    *len = total;
    *data_start = total;
    rc = 0;
done:
    free(json);
    free(ident);
    free(lay);
    cJSON_Delete(root);
    return rc;
}

static const char *part_names[TQ_ROWS_MAX_PARTS] = {"weight", "scales", "biases"};

int rows_parts_from_json(const char *text, uint64_t rows, tq_rows_geom *g, tq_err *e)
{
    cJSON *j = tq_json_parse(text, strlen(text), NULL, NULL);
    int rc = -1;
    g->n_parts = 0;
    g->stride = 0;
    if (!j || !cJSON_IsArray(j) || cJSON_GetArraySize(j) < 1 || cJSON_GetArraySize(j) > TQ_ROWS_MAX_PARTS) {
        tq_fail(e, TQ_EDATA, "metadata 'parts' must be a JSON array of 1 to 3 [name, entry] pairs");
        goto done;
    }
    int next = 0;
    for (cJSON *pair = j->child; pair; pair = pair->next) {
        cJSON *nm = cJSON_GetArrayItem(pair, 0), *en = cJSON_GetArrayItem(pair, 1);
        if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2 || !cJSON_IsString(nm) || !cJSON_IsObject(en)) {
            tq_fail(e, TQ_EDATA, "metadata 'parts': each item must be [name, entry]");
            goto done;
        }
        int p = -1;
        for (int k = next; k < TQ_ROWS_MAX_PARTS; k++)
            if (!strcmp(nm->valuestring, part_names[k]))
                p = k;
        if (p < 0 || (g->n_parts == 0 && p != 0)) {
            tq_fail(e, TQ_EDATA, "metadata 'parts': unexpected part '%.40s' (weight first, then scales, biases)",
                    nm->valuestring);
            goto done;
        }
        next = p + 1;
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(en, "dtype");
        cJSON *sh = cJSON_GetObjectItemCaseSensitive(en, "shape");
        cJSON *of = cJSON_GetObjectItemCaseSensitive(en, "data_offsets");
        tq_rows_part *pt = &g->parts[g->n_parts];
        memset(pt, 0, sizeof *pt);
        snprintf(pt->name, sizeof pt->name, "%s", part_names[p]);
        uint64_t r = 0;
        if (!cJSON_IsString(dt) || tq_dtype_from_name(dt->valuestring, &pt->dtype) != 0 ||
            (p == 0 ? pt->dtype != TQ_DT_U32 && pt->dtype != TQ_DT_F16 && pt->dtype != TQ_DT_BF16
                    : (pt->dtype != TQ_DT_F16 && pt->dtype != TQ_DT_BF16) || g->parts[0].dtype != TQ_DT_U32) ||
            !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != 2 || tq_json_u64(sh->child, &r) != 0 ||
            tq_json_u64(sh->child->next, &pt->cols) != 0 || !cJSON_IsArray(of) ||
            cJSON_GetArraySize(of) != 2 || tq_json_u64(of->child, &pt->begin) != 0 ||
            tq_json_u64(of->child->next, &pt->end) != 0) {
            tq_fail(e, TQ_EDATA, "metadata 'parts': entry of '%s' needs a supported dtype, a 2-D shape and data_offsets",
                    pt->name);
            goto done;
        }
        uint64_t nb;
        if (r != rows) {
            tq_fail(e, TQ_EDATA, "metadata 'parts': '%s' has %" PRIu64 " rows, the records %" PRIu64, pt->name, r, rows);
            goto done;
        }
        if (tq_mul_u64(pt->cols, tq_dtype_size(pt->dtype), &pt->row_bytes) != 0 ||
            tq_mul_u64(pt->row_bytes, rows, &nb) != 0 || pt->end < pt->begin || pt->end - pt->begin != nb) {
            tq_fail(e, TQ_EDATA, "metadata 'parts': '%s' data_offsets do not match its shape", pt->name);
            goto done;
        }
        pt->pos = g->stride;
        if (tq_add_u64(g->stride, pt->row_bytes, &g->stride) != 0) {
            tq_fail(e, TQ_EDATA, "metadata 'parts': record size overflows");
            goto done;
        }
        g->n_parts++;
    }
    rc = 0;
done:
    cJSON_Delete(j);
    return rc;
}

void rows_file_close(rows_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f->prefix);
    free(f->parts_json);
    free(f->source_path);
    free(f->source_header);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

static const char *meta_str(const cJSON *meta, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int layout_u64(const cJSON *lay, const char *key, uint64_t *v)
{
    return tq_json_u64(cJSON_GetObjectItemCaseSensitive(lay, key), v);
}

int rows_file_open(rows_file *f, const char *path, tq_err *e)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    char *json = NULL;
    uint64_t len, size;
    int fd = tq_open_regular(path, &size, e);
    if (fd < 0)
        return -1;
    if (tq_st_read_header(fd, size, path, &json, &len, e) != 0) {
        close(fd);
        return -1;
    }
    int rc = rows_file_parse(f, json, len, size, path, e);
    free(json);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    f->fd = fd;
    return 0;
}

int rows_file_parse(rows_file *f, const char *json, uint64_t header_len, uint64_t file_size, const char *path,
                    tq_err *e)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    cJSON *hdr = NULL, *lay = NULL;
    if (!(f->path = tq_strdup(path, e)))
        return -1;
    f->size = file_size;
    f->header_len = header_len;
    f->data_start = 8 + f->header_len;
    if (tq_json_canonical_text_ok(json, (size_t)f->header_len, e) != 0) {
        tq_err_prefix(e, "%s: header", path);
        goto fail;
    }
    if (!(hdr = tq_json_parse(json, (size_t)f->header_len, NULL, NULL)) || !cJSON_IsObject(hdr)) {
        tq_fail(e, TQ_EDATA, "%s: header is not a valid JSON object", path);
        goto fail;
    }
    /* exactly __metadata__ (strings only) and one tensor */
    cJSON *meta = NULL, *ten = NULL;
    int n_ten = 0;
    for (cJSON *c = hdr->child; c; c = c->next) {
        if (!strcmp(c->string, "__metadata__")) {
            if (meta) {
                tq_fail(e, TQ_EDATA, "%s: __metadata__ appears twice", path);
                goto fail;
            }
            meta = c;
        } else {
            ten = c;
            n_ten++;
        }
    }
    if (!cJSON_IsObject(meta)) {
        tq_fail(e, TQ_EDATA, "%s: not a row file (no __metadata__)", path);
        goto fail;
    }
    for (cJSON *c = meta->child; c; c = c->next)
        if (!cJSON_IsString(c)) {
            tq_fail(e, TQ_EDATA, "%s: __metadata__ value of '%.40s' is not a string", path, c->string);
            goto fail;
        }
    const char *fmt = meta_str(meta, "format");
    if (!fmt || (strcmp(fmt, TQ_ROWS_FORMAT_V1) && strcmp(fmt, TQ_ROWS_FORMAT_PAGED))) {
        tq_fail(e, TQ_EDATA, "%s: not a row file (format '%.60s', expected %s or %s)", path, fmt ? fmt : "",
                TQ_ROWS_FORMAT_V1, TQ_ROWS_FORMAT_PAGED);
        goto fail;
    }
    f->paged = !strcmp(fmt, TQ_ROWS_FORMAT_PAGED);
    const char *suffix = f->paged ? ".pages" : ".records";
    size_t nl = ten ? strlen(ten->string) : 0, sl = strlen(suffix);
    if (n_ten != 1 || nl <= sl || strcmp(ten->string + nl - sl, suffix) || !cJSON_IsObject(ten)) {
        tq_fail(e, TQ_EDATA, "%s: a %s file holds exactly one tensor PREFIX%s", path, fmt, suffix);
        goto fail;
    }
    if (!(f->prefix = tq_malloc(nl - sl + 1, e)))
        goto fail;
    memcpy(f->prefix, ten->string, nl - sl);
    f->prefix[nl - sl] = 0;
    cJSON *dt = cJSON_GetObjectItemCaseSensitive(ten, "dtype");
    cJSON *sh = cJSON_GetObjectItemCaseSensitive(ten, "shape");
    cJSON *of = cJSON_GetObjectItemCaseSensitive(ten, "data_offsets");
    uint64_t a, b, o0, o1, nb;
    if (!cJSON_IsString(dt) || strcmp(dt->valuestring, "U8") || !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != 2 ||
        tq_json_u64(sh->child, &a) != 0 || tq_json_u64(sh->child->next, &b) != 0 || !cJSON_IsArray(of) ||
        cJSON_GetArraySize(of) != 2 || tq_json_u64(of->child, &o0) != 0 || tq_json_u64(of->child->next, &o1) != 0 ||
        tq_mul_u64(a, b, &nb) != 0 || o0 != 0 || o1 != nb) {
        tq_fail(e, TQ_EDATA, "%s: tensor '%s' must be U8 [rows, bytes] with data_offsets [0, rows*bytes]", path,
                ten->string);
        goto fail;
    }
    uint64_t want;
    if (tq_add_u64(f->data_start, nb, &want) != 0) {
        tq_fail(e, TQ_EDATA, "%s: size overflows", path);
        goto fail;
    }
    if (f->size != UINT64_MAX && f->size < want) {
        tq_fail(e, TQ_EDATA, "%s: truncated: %" PRIu64 " bytes, the header promises %" PRIu64
                " (%" PRIu64 " missing)", path, f->size, want, want - f->size);
        goto fail;
    }
    if (f->size != UINT64_MAX && f->size > want) {
        tq_fail(e, TQ_EDATA, "%s: %" PRIu64 " bytes after the end of the records", path, f->size - want);
        goto fail;
    }
    /* geometry */
    tq_rows_geom *g = &f->g;
    memset(g, 0, sizeof *g);
    uint64_t rows = a;
    if (f->paged) {
        const char *ls = meta_str(meta, "layout");
        uint64_t P, S, K, G, R, slot;
        if (!ls || !(lay = tq_json_parse(ls, strlen(ls), NULL, NULL)) || layout_u64(lay, "page_size", &P) ||
            layout_u64(lay, "record_bytes", &S) || layout_u64(lay, "records_per_group", &K) ||
            layout_u64(lay, "group_bytes", &G) || layout_u64(lay, "rows", &R) || layout_u64(lay, "slot_bytes", &slot)) {
            tq_fail(e, TQ_EDATA, "%s: metadata 'layout' must hold integer page_size, record_bytes, "
                    "records_per_group, group_bytes, rows, slot_bytes", path);
            goto fail;
        }
        rows = R;
        g->rows = R;
        g->stride = S;
        g->page = P;
        g->pad_stride = slot != S;
        if (P == 0 || tq_rows_geom_layout(g, e) != 0 || g->slot != slot || g->per_group != K ||
            g->group_bytes != G || g->groups != a || G != b || f->data_start % P) {
            tq_fail(e, TQ_EDATA, "%s: metadata 'layout' is inconsistent with the tensor shape or page size", path);
            goto fail;
        }
    }
    const char *ps = meta_str(meta, "parts");
    if (!ps) {
        tq_fail(e, TQ_EDATA, "%s: metadata 'parts' is missing", path);
        goto fail;
    }
    tq_rows_geom pg;
    memset(&pg, 0, sizeof pg);
    if (rows_parts_from_json(ps, rows, &pg, e) != 0) {
        tq_err_prefix(e, "%s", path);
        goto fail;
    }
    if (pg.stride != (f->paged ? g->stride : b)) {
        tq_fail(e, TQ_EDATA, "%s: parts add up to %" PRIu64 " bytes per record, the records have %" PRIu64, path,
                pg.stride, f->paged ? g->stride : b);
        goto fail;
    }
    g->n_parts = pg.n_parts;
    memcpy(g->parts, pg.parts, sizeof pg.parts);
    if (!f->paged) {
        g->rows = rows;
        g->stride = b;
        if (tq_rows_geom_layout(g, e) != 0) {
            tq_err_prefix(e, "%s", path);
            goto fail;
        }
    }
    cJSON *pj = tq_json_parse(ps, strlen(ps), NULL, NULL);
    f->parts_json = pj ? tq_json_canonical(pj, e) : NULL;
    cJSON_Delete(pj);
    if (!f->parts_json) {
        tq_err_prefix(e, "%s: metadata 'parts'", path);
        goto fail;
    }
    const char *src = meta_str(meta, "source");
    if (!src || tq_rows_identity_parse(src, &f->id, e) != 0) {
        if (!src)
            tq_fail(e, TQ_EDATA, "metadata 'source' is missing");
        tq_err_prefix(e, "%s", path);
        goto fail;
    }
    const char *sp = meta_str(meta, "source_path");
    if (sp && !(f->source_path = tq_strdup(sp, e)))
        goto fail;
    const char *shj = meta_str(meta, "source_header");
    if (shj) {
        f->source_header_len = strlen(shj);
        if (!(f->source_header = tq_strdup(shj, e)))
            goto fail;
    }
    cJSON_Delete(lay);
    cJSON_Delete(hdr);
    return 0;
fail:
    cJSON_Delete(lay);
    cJSON_Delete(hdr);
    rows_file_close(f);
    return -1;
}
