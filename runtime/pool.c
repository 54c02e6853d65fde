/* Persistent compute threads: rt_pool_for hands out [0, n) in chunks that threads claim.
 * Callers compute each item whole inside one thread, so results never depend on the split. */
#include "runtime/rt_internal.h"

#include <stdatomic.h>
#include <stdlib.h>

/* The caller never waits for a worker to wake: it claims chunks itself from the same counter,
 * and a worker that wakes late finds none left and skips the job (it joins only while the job
 * is open). So a worker that is not scheduled (a loaded machine, fewer cores than threads)
 * costs a wake-up call, not a whole chunk's delay at every barrier; and after a job that the
 * workers missed, the caller runs the next ones alone (backoff). Which thread runs a chunk
 * never changes a result. */
struct rt_pool {
    int n;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int open;  /* the current job still takes workers */
    int busy;  /* workers inside the current job */
    int quit;
    rt_task_fn fn;
    void *ctx;
    uint64_t total, grain;
    uint64_t helped;  /* chunks the workers ran in the current job */
    unsigned backoff; /* jobs the caller runs alone after one the workers missed (0: none) */
    unsigned skip;    /* of which this many are left */
    _Atomic uint64_t next; /* first item not yet claimed */
};

/* Claims and runs chunks of the current job until none is left; returns how many it ran. */
static uint64_t run_chunks(rt_pool *p, rt_task_fn fn, void *ctx, uint64_t total, uint64_t grain)
{
    for (uint64_t ran = 0;; ran++) {
        uint64_t b = atomic_fetch_add_explicit(&p->next, grain, memory_order_relaxed);
        if (b >= total)
            return ran;
        fn(ctx, b, b + grain < total ? b + grain : total);
    }
}

static void *worker(void *arg)
{
    rt_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        if (!p->open)
            continue; /* finished before this thread woke */
        p->busy++;
        rt_task_fn fn = p->fn;
        void *ctx = p->ctx;
        uint64_t total = p->total, grain = p->grain;
        pthread_mutex_unlock(&p->mu);
        uint64_t ran = run_chunks(p, fn, ctx, total, grain);
        pthread_mutex_lock(&p->mu);
        p->helped += ran;
        if (--p->busy == 0 && !p->open)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int rt_pool_create(rt_pool **out, int threads, tq_err *e)
{
    if (threads < 1)
        threads = 1;
    rt_pool *p = tq_calloc(1, sizeof *p, e);
    if (!p)
        return -1;
    p->n = threads;
    atomic_init(&p->next, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tid = tq_calloc((size_t)threads, sizeof *p->tid, e);
    if (!p->tid) {
        free(p);
        return -1;
    }
    /* Thread 0 is the caller; workers are 1..n-1. */
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&p->tid[i], NULL, worker, p) != 0) {
            p->n = i;
            rt_pool_destroy(p);
            return tq_fail(e, TQ_ENOMEM, "cannot start compute thread %d", i);
        }
    }
    *out = p;
    return 0;
}

void rt_pool_destroy(rt_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->tid);
    free(p);
}

int rt_pool_threads(const rt_pool *p)
{
    return p->n;
}

void rt_pool_for_grain(rt_pool *p, uint64_t n, uint64_t grain, rt_task_fn fn, void *ctx)
{
    if (n == 0)
        return;
    if (grain < 1)
        grain = 1;
    if (p->n == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    if (p->skip > 0) { /* the workers missed a recent job: no wake-up calls for a while */
        p->skip--;
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->total = n;
    p->grain = grain;
    p->helped = 0;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->open = 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, fn, ctx, n, grain);
    pthread_mutex_lock(&p->mu);
    p->open = 0;
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    /* Workers that ran nothing were not scheduled in time (other load, fewer free cores than
     * threads): waking them only took time from the caller, so the next 1, 2, 4 … 64 jobs run
     * in the caller alone, and the pool tries again after that. */
    if (p->helped == 0)
        p->backoff = p->backoff ? (p->backoff < 64 ? 2 * p->backoff : 64) : 1;
    else
        p->backoff = 0;
    p->skip = p->backoff;
    pthread_mutex_unlock(&p->mu);
}

void rt_pool_for(rt_pool *p, uint64_t n, rt_task_fn fn, void *ctx)
{
    /* a few chunks per thread, so that a late or slow thread leaves less behind */
    rt_pool_for_grain(p, n, (n + 4 * (uint64_t)p->n - 1) / (4 * (uint64_t)p->n), fn, ctx);
}
