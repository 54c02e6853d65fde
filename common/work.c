/* common/work.c — the one work queue: items [0, count) claimed in increasing order by a set of
 * threads (the caller is one of them), the first failure stopping the rest, a progress counter
 * shared under the queue's lock, and an optional ordered part ("wait for my turn") that runs
 * one item at a time in item order, so a file hash sees bytes in file order whatever the
 * thread count. */
#include "common/common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct tq_work {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next, count, turn;
    int failed;
    tq_err err;
    tq_progress *prog;
    tq_work_fn fn;
    void *ctx;
    void **scratch; /* [workers]: tq_work_scratch buffers */
};

typedef struct work_thread {
    tq_work *w;
    int worker;
} work_thread;

static void work_fail(tq_work *w, const tq_err *e)
{
    pthread_mutex_lock(&w->mu);
    if (!w->failed) { /* first failure wins */
        w->failed = 1;
        w->err = *e;
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *work_main(void *arg)
{
    const work_thread *t = arg;
    tq_work *w = t->w;
    tq_err e = {0};
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int ok = !w->failed && w->next < w->count;
        uint64_t item = ok ? w->next++ : 0;
        pthread_mutex_unlock(&w->mu);
        if (!ok)
            break;
        if (w->fn(w, w->ctx, t->worker, item, &e) != 0) {
            work_fail(w, &e);
            break;
        }
    }
    return NULL;
}

int tq_work_run(uint64_t count, int threads, tq_work_fn fn, void *ctx, tq_progress *prog, tq_err *e)
{
    tq_work w;
    memset(&w, 0, sizeof w);
    w.count = count;
    w.prog = prog;
    w.fn = fn;
    w.ctx = ctx;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    int n = threads > 1 ? threads : 1;
    if ((uint64_t)n > count)
        n = count ? (int)count : 1;
    work_thread *t = tq_calloc((size_t)n, sizeof *t, e);
    w.scratch = t ? tq_calloc((size_t)n, sizeof *w.scratch, e) : NULL;
    if (!w.scratch) {
        free(t);
        return -1;
    }
    /* Workers 1..n-1 on their own threads; when a thread cannot be started, fewer workers do
     * the same items. */
    pthread_t *th = n > 1 ? calloc((size_t)n, sizeof *th) : NULL;
    int started = 1;
    for (int i = 0; i < n; i++)
        t[i] = (work_thread){&w, i};
    for (; th && started < n; started++)
        if (pthread_create(&th[started], NULL, work_main, &t[started]) != 0)
            break;
    work_main(&t[0]);
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++)
        free(w.scratch[i]);
    free(w.scratch);
    free(th);
    free(t);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    if (!w.failed)
        return 0;
    if (e)
        *e = w.err;
    return -1;
}

void *tq_work_scratch(tq_work *w, int worker, size_t size, tq_err *e)
{
    if (w->scratch[worker])
        return w->scratch[worker];
    void *p = NULL;
    if (posix_memalign(&p, 4096, size ? size : 1) != 0) {
        tq_fail(e, TQ_ENOMEM, "out of memory for a %zu-byte work buffer", size);
        return NULL;
    }
    memset(p, 0, size);
    return w->scratch[worker] = p;
}

void tq_work_progress(tq_work *w, uint64_t n)
{
    if (!w->prog)
        return;
    pthread_mutex_lock(&w->mu);
    tq_progress_add(w->prog, n);
    pthread_mutex_unlock(&w->mu);
}

int tq_work_turn(tq_work *w, uint64_t item)
{
    pthread_mutex_lock(&w->mu);
    while (!w->failed && w->turn != item)
        pthread_cond_wait(&w->cv, &w->mu);
    int failed = w->failed;
    pthread_mutex_unlock(&w->mu);
    return failed ? -1 : 0;
}

void tq_work_turn_done(tq_work *w)
{
    pthread_mutex_lock(&w->mu);
    w->turn++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}
