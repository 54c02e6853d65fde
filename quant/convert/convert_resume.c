/* tq-convert --resume: which output shards an earlier run finished (kept by the journal,
 * common/resume.c), which items therefore need no work, and, while the jobs run, each shard
 * finished, fsynced, renamed and journaled as soon as the last item writing into it is done.
 * A shard's journal line carries the error sums of the items writing into it (hexadecimal
 * floats, exact), so the report of a resumed run is the uninterrupted run's. */
#include "quant/convert/convert_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cv_track {
    cv_plan *p;
    tq_model_writer *w;
    tq_resume *res;
    size_t n_shards;
    size_t *shard_left;   /* [n_shards]: items still to finish that write into it */
    uint64_t *item_left;  /* [n_items]: jobs still to run */
    unsigned char *skip;  /* [n_items]: every shard it writes into was kept */
    pthread_mutex_t mu;
};

/* The distinct shards item it writes into (at most cap; the caller's cap covers every output). */
static size_t item_shards(const cv_item *it, const tq_model_writer *w, size_t *out, size_t cap)
{
    size_t n = 0;
    long outs[5] = {it->out_scales, it->out_codebook, it->out_signs, it->out_biases, -1};
    for (uint64_t k = 0; k < it->E + 4; k++) {
        long o = k < it->E ? it->parts[k].out : outs[k - it->E];
        if (o < 0)
            continue;
        size_t s = tq_model_writer_shard_of(w, (size_t)o), j = 0;
        while (j < n && out[j] != s)
            j++;
        if (j == n && n < cap)
            out[n++] = s;
    }
    return n;
}

#define MAX_TOUCH 8 /* an item writes at most 4 tensors besides its weight */

/* "I:ERR2:SUM2" of item i in a shard's journal extra ("sums I:E:S,I:E:S,..."). */
static int find_sums(const char *extra, size_t i, double *e2, double *s2)
{
    if (strncmp(extra, "sums ", 5) != 0)
        return -1;
    for (const char *q = extra + 5; *q;) {
        char *end;
        unsigned long long idx = strtoull(q, &end, 10);
        if (end == q || *end != ':')
            return -1;
        double a = strtod(end + 1, &end);
        if (*end != ':')
            return -1;
        double b = strtod(end + 1, &end);
        if (*end != ',' && *end)
            return -1;
        if (idx == i) {
            *e2 = a;
            *s2 = b;
            return 0;
        }
        q = *end ? end + 1 : end;
    }
    return -1;
}

static int keep_shard(void *ctx, const char *name)
{
    return tq_resume_have(ctx, name, NULL, NULL) != NULL;
}

int cv_track_writer_open(tq_model_writer **w, const char *dir, const tq_st_decl *decls, size_t n, uint64_t shard_size,
                         const char *const *mk, const char *const *mv, size_t n_meta, tq_resume *res, tq_err *e)
{
    if (!res)
        return tq_model_writer_open(w, dir, decls, n, shard_size, mk, mv, n_meta, e);
    return tq_model_writer_open_keep(w, dir, decls, n, shard_size, mk, mv, n_meta, keep_shard, res, e);
}

void cv_track_free(cv_track *t)
{
    if (!t)
        return;
    free(t->shard_left);
    free(t->item_left);
    free(t->skip);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int cv_track_open(cv_track **out, cv_plan *p, tq_model_writer *w, tq_resume *res, tq_err *e)
{
    *out = NULL;
    cv_track *t = tq_calloc(1, sizeof *t, e);
    if (!t)
        return -1;
    pthread_mutex_init(&t->mu, NULL);
    t->p = p;
    t->w = w;
    t->res = res;
    t->n_shards = tq_model_writer_shards(w);
    size_t ni = p->n_items ? p->n_items : 1;
    if (!(t->shard_left = tq_calloc(t->n_shards, sizeof *t->shard_left, e)) ||
        !(t->item_left = tq_calloc(ni, sizeof *t->item_left, e)) || !(t->skip = tq_calloc(ni, 1, e))) {
        cv_track_free(t);
        return -1;
    }
    for (size_t i = 0; i < p->n_items; i++) {
        cv_item *it = &p->items[i];
        size_t sh[MAX_TOUCH], n = item_shards(it, w, sh, MAX_TOUCH), kept = 0;
        for (size_t k = 0; k < n; k++)
            kept += tq_model_writer_shard_kept(w, sh[k]);
        if (n && kept == n) {
            /* its sums were journaled with each of its shards */
            const char *extra = tq_resume_have(res, tq_model_writer_shard_name(w, sh[0]), NULL, NULL);
            if (!extra || find_sums(extra, i, &it->err2, &it->sum2) != 0) {
                cv_track_free(t);
                return tq_fail(e, TQ_EDATA, "%s: the journal of the kept shard %s lacks the error sums of '%s'",
                               tq_model_writer_shard_name(w, sh[0]), tq_model_writer_shard_name(w, sh[0]), it->name);
            }
            t->skip[i] = 1;
            continue;
        }
        for (size_t k = 0; k < n; k++)
            t->shard_left[sh[k]]++;
    }
    *out = t;
    return 0;
}

int cv_track_skip(const cv_track *t, size_t item)
{
    return t && t->skip[item];
}

void cv_track_jobs(cv_track *t, size_t item, uint64_t n_jobs)
{
    if (t)
        t->item_left[item] = n_jobs;
}

/* Finish shard s (every item writing into it is done) and journal it with their sums. */
static int finish_shard(cv_track *t, size_t s, tq_err *e)
{
    if (tq_model_writer_finish_shard(t->w, s, e) != 0)
        return -1;
    tq_sb b = {0};
    tq_sb_str(&b, "sums ");
    int first = 1;
    for (size_t i = 0; i < t->p->n_items; i++) {
        const cv_item *it = &t->p->items[i];
        size_t sh[MAX_TOUCH], n = item_shards(it, t->w, sh, MAX_TOUCH), k = 0;
        while (k < n && sh[k] != s)
            k++;
        if (k == n)
            continue;
        tq_sb_printf(&b, "%s%zu:%a:%a", first ? "" : ",", i, it->err2, it->sum2);
        first = 0;
    }
    char *extra = tq_sb_finish(&b, e);
    int rc = extra ? tq_resume_done(t->res, tq_model_writer_shard_name(t->w, s), extra, e) : -1;
    free(extra);
    return rc;
}

int cv_track_start(cv_track *t, tq_err *e)
{
    for (size_t s = 0; t && s < t->n_shards; s++) /* written by nothing but write_small */
        if (!tq_model_writer_shard_kept(t->w, s) && !t->shard_left[s] && finish_shard(t, s, e) != 0)
            return -1;
    return 0;
}

int cv_track_job_done(cv_track *t, size_t item)
{
    pthread_mutex_lock(&t->mu);
    int last = --t->item_left[item] == 0;
    pthread_mutex_unlock(&t->mu);
    return last;
}

int cv_track_item_done(cv_track *t, size_t item, tq_err *e)
{
    size_t sh[MAX_TOUCH], n = item_shards(&t->p->items[item], t->w, sh, MAX_TOUCH), ready[MAX_TOUCH], nr = 0;
    pthread_mutex_lock(&t->mu); /* the item's sums, set before, are seen by whoever finishes */
    for (size_t k = 0; k < n; k++)
        if (--t->shard_left[sh[k]] == 0)
            ready[nr++] = sh[k];
    pthread_mutex_unlock(&t->mu);
    for (size_t k = 0; k < nr; k++) /* outside the lock: the other workers go on */
        if (finish_shard(t, ready[k], e) != 0)
            return -1;
    return 0;
}
