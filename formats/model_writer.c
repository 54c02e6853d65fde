/* Sharded model writer: tensors go to shards in name order, so the same declarations always
 * give the same files; each shard is an atomic tq_st_writer and the index is written last. */
#include "formats/formats_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INDEX_NAME "model.safetensors.index.json"

struct tq_model_writer {
    char *dir;
    size_t n;
    char **names;      /* sorted */
    size_t *shard_of;  /* per tensor (name order) */
    size_t *local;     /* index within its shard writer */
    uint64_t total;
    size_t n_shards;
    char **shard_names;
    tq_st_writer **sw;
    unsigned char *kept;   /* [n_shards]: complete from an earlier run (--resume) */
};

static int cmp_decl(const void *a, const void *b)
{
    return strcmp((*(const tq_st_decl *const *)a)->name, (*(const tq_st_decl *const *)b)->name);
}

static void mw_free(tq_model_writer *w)
{
    if (!w)
        return;
    tq_free_strv(w->names, w->n);
    tq_free_strv(w->shard_names, w->n_shards);
    free(w->shard_of);
    free(w->local);
    free(w->sw);
    free(w->kept);
    free(w->dir);
    free(w);
}

static uint64_t decl_bytes(const tq_st_decl *d, int *overflow)
{
    uint64_t v = tq_dtype_size(d->dtype);
    for (int k = 0; k < d->ndim && k < TQ_MAX_DIMS; k++)
        if (tq_mul_u64(v, d->shape[k], &v) != 0)
            *overflow = 1;
    return v;
}

static cJSON *index_json(const tq_model_writer *w);

/* dry: the files (shards, index) go into *dry with their sizes; nothing is created. */
/* keep (--resume): shards it names are complete in dir already: never opened. */
static int mw_open(tq_model_writer **out, const char *dir, const tq_st_decl *decls, size_t n,
                   uint64_t shard_size, const char *const *meta_keys, const char *const *meta_vals,
                   size_t n_meta, tq_out_plan *dry, int (*keep)(void *ctx, const char *shard), void *keep_ctx,
                   tq_err *e)
{
    *out = NULL;
    tq_model_writer *w = tq_calloc(1, sizeof *w, e);
    if (!w)
        return -1;
    const tq_st_decl **sorted = tq_calloc(n ? n : 1, sizeof *sorted, e);
    tq_st_decl *group = tq_calloc(n ? n : 1, sizeof *group, e);
    w->names = tq_calloc(n ? n : 1, sizeof *w->names, e);
    w->shard_of = tq_calloc(n ? n : 1, sizeof *w->shard_of, e);
    w->local = tq_calloc(n ? n : 1, sizeof *w->local, e);
    w->dir = tq_strdup(dir, e);
    if (!sorted || !group || !w->names || !w->shard_of || !w->local || !w->dir)
        goto fail;
    for (size_t i = 0; i < n; i++)
        sorted[i] = &decls[i];
    qsort(sorted, n, sizeof *sorted, cmp_decl);

    /* assign shards in name order */
    uint64_t cur = 0;
    size_t shard = 0, in_shard = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && !strcmp(sorted[i]->name, sorted[i - 1]->name)) {
            tq_fail(e, TQ_EUSAGE, "%s: tensor '%s' declared twice", dir, sorted[i]->name);
            goto fail;
        }
        int of = 0;
        uint64_t nb = decl_bytes(sorted[i], &of);
        if (of || tq_add_u64(w->total, nb, &w->total) != 0) {
            tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': size overflows", dir, sorted[i]->name);
            goto fail;
        }
        if (in_shard && shard_size && (cur + nb > shard_size || cur + nb < cur)) {
            shard++;
            in_shard = 0;
            cur = 0;
        }
        w->shard_of[i] = shard;
        w->local[i] = in_shard++;
        cur += nb;
        if (!(w->names[i] = tq_strdup(sorted[i]->name, e))) {
            w->n = i;
            goto fail;
        }
        w->n = i + 1;
    }
    size_t ns = shard + 1;
    if (!(w->sw = tq_calloc(ns, sizeof *w->sw, e)) || !(w->shard_names = tq_calloc(ns, sizeof *w->shard_names, e)) ||
        !(w->kept = tq_calloc(ns, 1, e)))
        goto fail;
    if (!dry && tq_mkdir_p(dir, e) != 0)
        goto fail;
    size_t first = 0;
    for (size_t s = 0; s < ns; s++) {
        size_t cnt = 0;
        while (first + cnt < n && w->shard_of[first + cnt] == s) {
            group[cnt] = *sorted[first + cnt];
            cnt++;
        }
        char name[64];
        if (ns == 1)
            snprintf(name, sizeof name, "model.safetensors");
        else
            snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, ns);
        if (!(w->shard_names[s] = tq_strdup(name, e)))
            goto fail;
        w->n_shards = s + 1;
        if (keep && keep(keep_ctx, name)) { /* already there, complete: never opened */
            w->kept[s] = 1;
            first += cnt;
            continue;
        }
        char *p = tq_path_join(dir, name, e);
        uint64_t size;
        int rc = !p ? -1
                 : dry ? tq_st_file_size(p, group, cnt, meta_keys, meta_vals, n_meta, 0, &size, e) ||
                             tq_out_plan_add(dry, name, size, e)
                       : tq_st_writer_open(&w->sw[s], p, group, cnt, meta_keys, meta_vals, n_meta, 0, e);
        free(p);
        if (rc != 0)
            goto fail;
        first += cnt;
    }
    free(sorted);
    free(group);
    if (dry) {
        cJSON *ix = ns > 1 ? index_json(w) : NULL;
        int rc = ns > 1 ? (ix ? tq_out_plan_add_json(dry, INDEX_NAME, ix, e) : tq_fail(e, TQ_ENOMEM, "out of memory")) : 0;
        cJSON_Delete(ix);
        mw_free(w);
        return rc;
    }
    *out = w;
    return 0;
fail:
    free(sorted);
    free(group);
    tq_model_writer_abort(w);
    return -1;
}

int tq_model_writer_open(tq_model_writer **out, const char *dir, const tq_st_decl *decls, size_t n,
                         uint64_t shard_size, const char *const *meta_keys,
                         const char *const *meta_vals, size_t n_meta, tq_err *e)
{
    return mw_open(out, dir, decls, n, shard_size, meta_keys, meta_vals, n_meta, NULL, NULL, NULL, e);
}

int tq_model_writer_open_keep(tq_model_writer **out, const char *dir, const tq_st_decl *decls, size_t n,
                              uint64_t shard_size, const char *const *meta_keys, const char *const *meta_vals,
                              size_t n_meta, int (*keep)(void *ctx, const char *shard), void *keep_ctx, tq_err *e)
{
    return mw_open(out, dir, decls, n, shard_size, meta_keys, meta_vals, n_meta, NULL, keep, keep_ctx, e);
}

int tq_model_writer_plan(const char *dir, const tq_st_decl *decls, size_t n, uint64_t shard_size,
                         const char *const *meta_keys, const char *const *meta_vals, size_t n_meta,
                         tq_out_plan *files, tq_err *e)
{
    tq_model_writer *w = NULL;
    return mw_open(&w, dir, decls, n, shard_size, meta_keys, meta_vals, n_meta, files, NULL, NULL, e);
}

long tq_model_writer_index(const tq_model_writer *w, const char *name)
{
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(w->names[mid], name);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

int tq_model_writer_write(tq_model_writer *w, size_t index, uint64_t off, const void *data, size_t len, tq_err *e)
{
    if (index >= w->n)
        return tq_fail(e, TQ_EUSAGE, "%s: no tensor with index %zu", w->dir, index);
    size_t s = w->shard_of[index];
    if (w->kept[s]) /* the same bytes are there already */
        return 0;
    if (!w->sw[s])
        return tq_fail(e, TQ_EUSAGE, "%s: internal: tensor '%s' written after its shard %s was finished", w->dir,
                       w->names[index], w->shard_names[s]);
    return tq_st_writer_write(w->sw[s], w->local[index], off, data, len, e);
}

size_t tq_model_writer_shards(const tq_model_writer *w)
{
    return w->n_shards;
}

const char *tq_model_writer_shard_name(const tq_model_writer *w, size_t s)
{
    return s < w->n_shards ? w->shard_names[s] : NULL;
}

size_t tq_model_writer_shard_of(const tq_model_writer *w, size_t index)
{
    return index < w->n ? w->shard_of[index] : w->n_shards;
}

int tq_model_writer_shard_kept(const tq_model_writer *w, size_t s)
{
    return s < w->n_shards && w->kept[s];
}

int tq_model_writer_finish_shard(tq_model_writer *w, size_t s, tq_err *e)
{
    if (s >= w->n_shards || w->kept[s] || !w->sw[s])
        return 0;
    tq_st_writer *sw = w->sw[s];
    w->sw[s] = NULL;
    return tq_st_writer_finish(sw, e);
}

static void unlink_shards(tq_model_writer *w, size_t upto)
{
    for (size_t s = 0; s < upto; s++) {
        if (w->kept[s]) /* another run's, still good for the next --resume */
            continue;
        char *p = tq_path_join(w->dir, w->shard_names[s], NULL);
        if (p)
            unlink(p);
        free(p);
    }
}

/* model.safetensors.index.json; NULL out of memory */
static cJSON *index_json(const tq_model_writer *w)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
    cJSON *wm = meta ? cJSON_AddObjectToObject(root, "weight_map") : NULL;
    int ok = wm && cJSON_AddNumberToObject(meta, "total_size", (double)w->total);
    for (size_t i = 0; ok && i < w->n; i++)
        ok = cJSON_AddStringToObject(wm, w->names[i], w->shard_names[w->shard_of[i]]) != NULL;
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int write_index(tq_model_writer *w, tq_err *e)
{
    cJSON *root = index_json(w);
    int rc;
    if (!root) {
        rc = tq_fail(e, TQ_ENOMEM, "%s: out of memory building the index", w->dir);
    } else {
        char *p = tq_path_join(w->dir, INDEX_NAME, e);
        rc = p ? tq_json_write_file(p, root, e) : -1;
        free(p);
    }
    cJSON_Delete(root);
    return rc;
}

/* model-DDDDD-of-DDDDD.safetensors */
static int is_shard_name(const char *s)
{
    static const char pat[] = "model-#####-of-#####.safetensors";
    if (strlen(s) != sizeof pat - 1)
        return 0;
    for (size_t i = 0; pat[i]; i++)
        if (pat[i] == '#' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i])
            return 0;
    return 1;
}

/* Weights of an earlier write into the same directory with another shard count would make
 * the directory inconsistent (a reader without the index sees duplicate tensors): remove
 * files under tq's own weight names that this write did not produce. */
static void remove_stale(tq_model_writer *w)
{
    char **names;
    size_t n;
    if (tq_list_dir(w->dir, &names, &n, NULL) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        int ours = 0;
        for (size_t s = 0; s < w->n_shards && !ours; s++)
            ours = !strcmp(names[i], w->shard_names[s]);
        if (ours || !(is_shard_name(names[i]) || !strcmp(names[i], "model.safetensors") ||
                      (w->n_shards == 1 && !strcmp(names[i], INDEX_NAME))))
            continue;
        char *p = tq_path_join(w->dir, names[i], NULL);
        if (p)
            unlink(p);
        free(p);
    }
    tq_free_strv(names, n);
}

int tq_model_writer_finish(tq_model_writer *w, tq_err *e)
{
    for (size_t s = 0; s < w->n_shards; s++) {
        if (w->sw[s] && tq_st_writer_complete(w->sw[s], e) != 0) {
            tq_model_writer_abort(w);
            return -1;
        }
    }
    for (size_t s = 0; s < w->n_shards; s++) {
        tq_st_writer *sw = w->sw[s];
        w->sw[s] = NULL;
        if (sw && tq_st_writer_finish(sw, e) != 0) {
            unlink_shards(w, s);
            tq_model_writer_abort(w);
            return -1;
        }
    }
    int rc = w->n_shards > 1 ? write_index(w, e) : 0;
    if (rc != 0)
        unlink_shards(w, w->n_shards);
    else
        remove_stale(w);
    mw_free(w);
    return rc;
}

void tq_model_writer_abort(tq_model_writer *w)
{
    if (!w)
        return;
    for (size_t s = 0; w->sw && s < w->n_shards; s++)
        tq_st_writer_abort(w->sw[s]);
    mw_free(w);
}
