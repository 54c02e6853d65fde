/* safetensors writer: the whole header is fixed up front (sorted, padded), then tensor bytes
 * are written with pwrite as they are produced, in any order and from any thread. Finish
 * refuses unless every declared byte was written exactly once. */
#include "formats/formats_internal.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct range {
    uint64_t b, e;
} range;

typedef struct track {
    range *r; /* written byte ranges of one tensor: sorted, disjoint, adjacent ones merged */
    size_t n, cap;
    uint64_t written;
} track;

struct tq_st_writer {
    tq_afile af;
    size_t n;
    tq_tensor_info *t; /* sorted by name; absolute offsets */
    track *tr;
    pthread_mutex_t mu;
    int failed;
    uint64_t file_size; /* 8 + header + data */
};

static int cmp_decl(const void *a, const void *b)
{
    return strcmp((*(const tq_st_decl *const *)a)->name, (*(const tq_st_decl *const *)b)->name);
}

/* A JSON string literal, escaped by cJSON. */
static void sb_json_string(tq_sb *b, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *p = j ? cJSON_PrintUnformatted(j) : NULL;
    if (p)
        tq_sb_str(b, p);
    else
        b->oom = 1;
    cJSON_free(p);
    cJSON_Delete(j);
}

static int check_text(const char *path, const char *what, const char *s, tq_err *e)
{
    size_t bad;
    if (tq_utf8_check(s, strlen(s), &bad) != 0)
        return tq_fail(e, TQ_EUSAGE, "%s: %s is not valid UTF-8 (byte %zu)", path, what, bad);
    return 0;
}

/* dry: lay the file out (every check, the header built) but open and write nothing. */
static int writer_open(tq_st_writer **out, const char *path, const tq_st_decl *decls, size_t n,
                       const char *const *meta_keys, const char *const *meta_vals, size_t n_meta,
                       uint64_t align, int dry, tq_err *e)
{
    *out = NULL;
    if (align == 0)
        align = 8;
    if (align < 8 || (align & (align - 1)) || align > (1u << 30))
        return tq_fail(e, TQ_EUSAGE, "%s: alignment %llu is not a power of two in [8, 2^30]", path, (unsigned long long)align);
    tq_st_writer *w = tq_calloc(1, sizeof *w, e);
    if (!w)
        return -1;
    w->af.fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    const tq_st_decl **sorted = tq_calloc(n ? n : 1, sizeof *sorted, e);
    size_t *mord = tq_calloc(n_meta ? n_meta : 1, sizeof *mord, e);
    tq_sb hb = {0};
    if (!sorted || !mord)
        goto fail_early;
    w->n = n;
    if (!(w->t = tq_calloc(n ? n : 1, sizeof *w->t, e)) || !(w->tr = tq_calloc(n ? n : 1, sizeof *w->tr, e)))
        goto fail_early;

    for (size_t i = 0; i < n; i++)
        sorted[i] = &decls[i];
    qsort(sorted, n, sizeof *sorted, cmp_decl);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        const tq_st_decl *d = sorted[i];
        tq_tensor_info *t = &w->t[i];
        if (i > 0 && !strcmp(d->name, sorted[i - 1]->name)) {
            tq_fail(e, TQ_EUSAGE, "%s: tensor '%s' declared twice", path, d->name);
            goto fail_early;
        }
        if (!strcmp(d->name, "__metadata__")) {
            tq_fail(e, TQ_EUSAGE, "%s: '__metadata__' cannot be a tensor name", path);
            goto fail_early;
        }
        if (check_text(path, "tensor name", d->name, e) != 0)
            goto fail_early;
        if ((unsigned)d->dtype >= TQ_DT_COUNT || d->ndim < 0 || d->ndim > TQ_MAX_DIMS) {
            tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': bad dtype or rank", path, d->name);
            goto fail_early;
        }
        t->dtype = d->dtype;
        t->ndim = d->ndim;
        t->nelem = 1;
        int bad = 0;
        for (int k = 0; k < d->ndim; k++) {
            t->shape[k] = d->shape[k];
            bad |= (double)d->shape[k] > TQ_JSON_MAX_INT || tq_mul_u64(t->nelem, d->shape[k], &t->nelem) != 0;
        }
        if (bad || tq_mul_u64(t->nelem, tq_dtype_size(d->dtype), &t->nbytes) != 0 ||
            tq_add_u64(pos, t->nbytes, &t->offset) != 0 || (double)t->offset > TQ_JSON_MAX_INT) {
            tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': size overflows", path, d->name);
            goto fail_early;
        }
        t->offset = pos; /* relative until the header length is known */
        pos += t->nbytes;
        if (!(t->name = tq_strdup(d->name, e)))
            goto fail_early;
    }

    /* metadata keys sorted, duplicates refused */
    for (size_t i = 0; i < n_meta; i++) {
        if (check_text(path, "metadata key", meta_keys[i], e) != 0 || check_text(path, "metadata value", meta_vals[i], e) != 0)
            goto fail_early;
        size_t j = i;
        while (j > 0 && strcmp(meta_keys[mord[j - 1]], meta_keys[i]) > 0) {
            mord[j] = mord[j - 1];
            j--;
        }
        if (j > 0 && !strcmp(meta_keys[mord[j - 1]], meta_keys[i])) {
            tq_fail(e, TQ_EUSAGE, "%s: metadata key '%s' given twice", path, meta_keys[i]);
            goto fail_early;
        }
        mord[j] = i;
    }

    /* __metadata__ first (as HuggingFace writes it), then tensors in name order */
    tq_sb_str(&hb, "{");
    if (n_meta) {
        tq_sb_str(&hb, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i)
                tq_sb_str(&hb, ",");
            sb_json_string(&hb, meta_keys[mord[i]]);
            tq_sb_str(&hb, ":");
            sb_json_string(&hb, meta_vals[mord[i]]);
        }
        tq_sb_str(&hb, "}");
    }
    for (size_t i = 0; i < n; i++) {
        const tq_tensor_info *t = &w->t[i];
        if (i || n_meta)
            tq_sb_str(&hb, ",");
        sb_json_string(&hb, t->name);
        tq_sb_str(&hb, ":{\"dtype\":\"");
        tq_sb_str(&hb, tq_dtype_name(t->dtype));
        tq_sb_str(&hb, "\",\"shape\":[");
        for (int k = 0; k < t->ndim; k++) {
            if (k)
                tq_sb_str(&hb, ",");
            tq_sb_printf(&hb, "%llu", (unsigned long long)t->shape[k]);
        }
        tq_sb_str(&hb, "],\"data_offsets\":[");
        tq_sb_printf(&hb, "%llu", (unsigned long long)t->offset);
        tq_sb_str(&hb, ",");
        tq_sb_printf(&hb, "%llu", (unsigned long long)(t->offset + t->nbytes));
        tq_sb_str(&hb, "]}");
    }
    tq_sb_str(&hb, "}");
    while (!hb.oom && (8 + hb.len) % align)
        tq_sb_str(&hb, " ");
    if (hb.oom) {
        tq_fail(e, TQ_ENOMEM, "%s: out of memory building the header", path);
        goto fail_early;
    }
    if (hb.len > TQ_ST_MAX_HEADER) {
        tq_fail(e, TQ_EUSAGE, "%s: header would be %zu bytes, more than the %llu readers accept", path, hb.len,
                (unsigned long long)TQ_ST_MAX_HEADER);
        goto fail_early;
    }
    for (size_t i = 0; i < n; i++)
        w->t[i].offset += 8 + hb.len;
    w->file_size = 8 + hb.len + pos;
    if (dry) {
        free(hb.s);
        free(sorted);
        free(mord);
        *out = w;
        return 0;
    }

    if (tq_afile_open(&w->af, path, 0, e) != 0)
        goto fail_early;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)((uint64_t)hb.len >> (8 * i));
    if (tq_pwrite_full(w->af.fd, lb, 8, 0, w->af.tmp_path, e) != 0 ||
        tq_pwrite_full(w->af.fd, hb.s, hb.len, 8, w->af.tmp_path, e) != 0) {
        free(hb.s);
        free(sorted);
        free(mord);
        tq_st_writer_abort(w);
        return -1;
    }
    free(hb.s);
    free(sorted);
    free(mord);
    *out = w;
    return 0;

fail_early:
    free(hb.s);
    free(sorted);
    free(mord);
    tq_st_writer_abort(w);
    return -1;
}

int tq_st_writer_open(tq_st_writer **out, const char *path, const tq_st_decl *decls, size_t n,
                      const char *const *meta_keys, const char *const *meta_vals, size_t n_meta,
                      uint64_t align, tq_err *e)
{
    return writer_open(out, path, decls, n, meta_keys, meta_vals, n_meta, align, 0, e);
}

int tq_st_file_size(const char *path, const tq_st_decl *decls, size_t n, const char *const *meta_keys,
                    const char *const *meta_vals, size_t n_meta, uint64_t align, uint64_t *size, tq_err *e)
{
    tq_st_writer *w;
    if (writer_open(&w, path, decls, n, meta_keys, meta_vals, n_meta, align, 1, e) != 0)
        return -1;
    *size = w->file_size;
    tq_st_writer_abort(w);
    return 0;
}

static int cmp_tname(const void *key, const void *elem)
{
    return strcmp(key, ((const tq_tensor_info *)elem)->name);
}

long tq_st_writer_index(const tq_st_writer *w, const char *name)
{
    const tq_tensor_info *t = bsearch(name, w->t, w->n, sizeof *w->t, cmp_tname);
    return t ? (long)(t - w->t) : -1;
}

const tq_tensor_info *tq_st_writer_tensor(const tq_st_writer *w, size_t index)
{
    return index < w->n ? &w->t[index] : NULL;
}

size_t tq_st_writer_count(const tq_st_writer *w)
{
    return w->n;
}

/* Record [b, e) as written; -1 if it overlaps something already written. */
static int track_add(track *t, uint64_t b, uint64_t e)
{
    size_t lo = 0, hi = t->n; /* first range ending after b */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->r[mid].e > b)
            hi = mid;
        else
            lo = mid + 1;
    }
    size_t i = lo;
    if (i < t->n && t->r[i].b < e)
        return -1;
    int join_prev = i > 0 && t->r[i - 1].e == b, join_next = i < t->n && t->r[i].b == e;
    if (join_prev && join_next) {
        t->r[i - 1].e = t->r[i].e;
        memmove(t->r + i, t->r + i + 1, (t->n - i - 1) * sizeof *t->r);
        t->n--;
    } else if (join_prev) {
        t->r[i - 1].e = e;
    } else if (join_next) {
        t->r[i].b = b;
    } else {
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 4;
            range *nr = realloc(t->r, cap * sizeof *nr);
            if (!nr)
                return -2;
            t->r = nr;
            t->cap = cap;
        }
        memmove(t->r + i + 1, t->r + i, (t->n - i) * sizeof *t->r);
        t->r[i] = (range){b, e};
        t->n++;
    }
    t->written += e - b;
    return 0;
}

int tq_st_writer_write(tq_st_writer *w, size_t index, uint64_t off, const void *data, size_t len, tq_err *e)
{
    if (index >= w->n)
        return tq_fail(e, TQ_EUSAGE, "%s: no tensor with index %zu", w->af.final_path, index);
    const tq_tensor_info *t = &w->t[index];
    uint64_t end;
    if (tq_add_u64(off, len, &end) != 0 || end > t->nbytes)
        return tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': write of %zu bytes at %llu is outside its %llu bytes",
                       w->af.final_path, t->name, len, (unsigned long long)off, (unsigned long long)t->nbytes);
    if (len == 0)
        return 0;
    pthread_mutex_lock(&w->mu);
    int rc = w->failed ? -3 : track_add(&w->tr[index], off, end);
    pthread_mutex_unlock(&w->mu);
    if (rc == -3)
        return tq_fail(e, TQ_EIO, "%s: an earlier write failed", w->af.final_path);
    if (rc == -2)
        return tq_fail(e, TQ_ENOMEM, "%s: out of memory", w->af.final_path);
    if (rc != 0)
        return tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': bytes [%llu, %llu) overlap bytes already written",
                       w->af.final_path, t->name, (unsigned long long)off, (unsigned long long)end);
    if (tq_pwrite_full(w->af.fd, data, len, t->offset + off, w->af.tmp_path, e) != 0) {
        pthread_mutex_lock(&w->mu);
        w->failed = 1;
        pthread_mutex_unlock(&w->mu);
        return -1;
    }
    return 0;
}

int tq_st_writer_complete(const tq_st_writer *w, tq_err *e)
{
    if (w->failed)
        return tq_fail(e, TQ_EIO, "%s: an earlier write failed", w->af.final_path);
    for (size_t i = 0; i < w->n; i++) {
        if (w->tr[i].written != w->t[i].nbytes) {
            uint64_t gap = w->tr[i].n && w->tr[i].r[0].b == 0 ? w->tr[i].r[0].e : 0;
            return tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': only %llu of %llu bytes were written (first missing byte %llu)",
                           w->af.final_path, w->t[i].name, (unsigned long long)w->tr[i].written,
                           (unsigned long long)w->t[i].nbytes, (unsigned long long)gap);
        }
    }
    return 0;
}

static void writer_free(tq_st_writer *w)
{
    for (size_t i = 0; w->t && i < w->n; i++)
        free(w->t[i].name);
    for (size_t i = 0; w->tr && i < w->n; i++)
        free(w->tr[i].r);
    free(w->t);
    free(w->tr);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

int tq_st_writer_finish(tq_st_writer *w, tq_err *e)
{
    if (tq_st_writer_complete(w, e) != 0) {
        tq_st_writer_abort(w);
        return -1;
    }
    int rc = tq_afile_commit(&w->af, e);
    writer_free(w);
    return rc;
}

void tq_st_writer_abort(tq_st_writer *w)
{
    if (!w)
        return;
    if (w->af.tmp_path || w->af.fd >= 0)
        tq_afile_abort(&w->af);
    writer_free(w);
}
