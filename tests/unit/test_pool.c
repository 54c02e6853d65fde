/* runtime/pool.c's split of work over its threads (a consistency check of our own pool; kept
 * out of test_kernels so that test, single-threaded, still runs under qemu-user, which cannot
 * start threads: make check-arm64 lists this one as skipped). */
#include <stdatomic.h>
#include "runtime/rt_internal.h"
#include "tests/unit/check.h"

/* rt_pool_for_grain hands every item of [0, n) to exactly one call, whatever the thread count
 * and grain, and returns only when all are done (a consistency check of runtime/pool.c: the
 * caller claims chunks itself, and workers that wake late must neither miss the end of a job
 * nor run a finished job's function on the next one). */
struct pool_case {
    _Atomic unsigned *hits;
    uint64_t n;
    _Atomic int bad;
};

static void pool_task(void *vctx, uint64_t b, uint64_t e)
{
    struct pool_case *c = vctx;
    if (b >= e || e > c->n)
        atomic_store(&c->bad, 1);
    for (uint64_t i = b; i < e && i < c->n; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static void test_pool_split(void)
{
    tq_err err = {0};
    for (int threads = 2; threads <= 3; threads++) {
        rt_pool *p;
        CHECK(rt_pool_create(&p, threads, &err) == 0);
        CHECK(rt_pool_threads(p) == threads);
        for (int round = 0; round < 3000; round++) {
            uint64_t n = 1 + (uint64_t)(round * 37 % 301), grain = 1 + (uint64_t)(round % 23);
            _Atomic unsigned hits[301];
            for (uint64_t i = 0; i < n; i++)
                atomic_init(&hits[i], 0);
            struct pool_case c = {.hits = hits, .n = n};
            atomic_init(&c.bad, 0);
            if (round % 2)
                rt_pool_for(p, n, pool_task, &c);
            else
                rt_pool_for_grain(p, n, grain, pool_task, &c);
            int ok = !atomic_load(&c.bad);
            for (uint64_t i = 0; i < n; i++)
                ok &= atomic_load(&hits[i]) == 1;
            CHECK(ok);
            if (!ok) {
                printf("  threads %d, n %llu, grain %llu\n", threads, (unsigned long long)n, (unsigned long long)grain);
                break;
            }
        }
        rt_pool_destroy(p);
    }
}

int main(void)
{
    RUN(test_pool_split);
    TEST_MAIN_END();
}
