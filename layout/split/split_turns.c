/* Work items claimed in order by several threads, with an optional ordered part done one
 * item at a time in item order (hashing a file's bytes in file order), and the first failure
 * stopping everyone. */
#include "layout/split/split_internal.h"

#include <string.h>

void split_turns_init(split_turns *t, uint64_t count)
{
    memset(t, 0, sizeof *t);
    t->count = count;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
}

int split_turns_finish(split_turns *t, tq_err *e)
{
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    if (!t->failed)
        return 0;
    *e = t->err;
    return -1;
}

int split_turns_claim(split_turns *t, uint64_t *item)
{
    pthread_mutex_lock(&t->mu);
    int ok = !t->failed && t->next < t->count;
    if (ok)
        *item = t->next++;
    pthread_mutex_unlock(&t->mu);
    return ok ? 0 : -1;
}

void split_turns_fail(split_turns *t, const tq_err *e)
{
    pthread_mutex_lock(&t->mu);
    if (!t->failed) {
        t->failed = 1;
        t->err = *e;
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

int split_turns_wait(split_turns *t, uint64_t item)
{
    pthread_mutex_lock(&t->mu);
    while (!t->failed && t->turn != item)
        pthread_cond_wait(&t->cv, &t->mu);
    int failed = t->failed;
    pthread_mutex_unlock(&t->mu);
    return failed ? -1 : 0;
}

void split_turns_done(split_turns *t)
{
    pthread_mutex_lock(&t->mu);
    t->turn++;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

int split_run_threads(void *(*fn)(void *), void *arg, int n, tq_err *e)
{
    pthread_t th[256];
    if (n > 256)
        n = 256;
    int started = 0;
    for (; started < n - 1; started++)
        if (pthread_create(&th[started], NULL, fn, arg) != 0)
            break;
    fn(arg); /* the calling thread works too */
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    (void)e;
    return 0;
}
