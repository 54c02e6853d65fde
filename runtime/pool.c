/* Persistent compute threads: rt_pool_for splits [0, n) into one contiguous chunk per thread.
 * Callers compute each item whole inside one thread, so results never depend on the split. */
#include "runtime/rt_internal.h"

#include <stdlib.h>

struct rt_pool {
    int n;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending;
    int quit;
    rt_task_fn fn;
    void *ctx;
    uint64_t total;
};

static void chunk(uint64_t n, int parts, int i, uint64_t *b, uint64_t *e)
{
    *b = n * (uint64_t)i / (uint64_t)parts;
    *e = n * (uint64_t)(i + 1) / (uint64_t)parts;
}

struct worker_arg {
    rt_pool *p;
    int idx;
};

static void *worker(void *arg)
{
    struct worker_arg *wa = arg;
    rt_pool *p = wa->p;
    int idx = wa->idx;
    free(wa);
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->gen == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->gen;
        rt_task_fn fn = p->fn;
        void *ctx = p->ctx;
        uint64_t total = p->total;
        pthread_mutex_unlock(&p->mu);
        uint64_t b, en;
        chunk(total, p->n, idx, &b, &en);
        if (b < en)
            fn(ctx, b, en);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

int rt_pool_create(rt_pool **out, int threads, tq_err *e)
{
    if (threads < 1)
        threads = 1;
    rt_pool *p = tq_calloc(1, sizeof *p, e);
    if (!p)
        return -1;
    p->n = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tid = tq_calloc((size_t)threads, sizeof *p->tid, e);
    if (!p->tid) {
        free(p);
        return -1;
    }
    /* Thread 0 is the caller; workers take chunks 1..n-1. */
    for (int i = 1; i < threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->p = p;
            wa->idx = i;
        }
        if (!wa || pthread_create(&p->tid[i], NULL, worker, wa) != 0) {
            free(wa);
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

void rt_pool_for(rt_pool *p, uint64_t n, rt_task_fn fn, void *ctx)
{
    if (n == 0)
        return;
    if (p->n == 1 || n == 1) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->total = n;
    p->pending = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    uint64_t b, en;
    chunk(n, p->n, 0, &b, &en);
    if (b < en)
        fn(ctx, b, en);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
