/* The streaming expert cache (runtime/expert_cache.c) is least-recently-used: hit and miss
 * counts for a pattern worked out by hand, then for long random top-k patterns over two
 * layers at budgets of one to ten blocks against a plain list model of LRU written here
 * (blocks in use by the current lookup cannot be dropped; on release the cache shrinks back
 * to its budget from the least recently used end). Every block served holds its own bytes. */
#include "runtime/rt_internal.h"
#include "tests/unit/check.h"

#include <fcntl.h>
#include <unistd.h>

#define BLK 4096u
#define START 4096u
#define EXPERTS 8u
#define LAYERS 2u

/* A layer file: header page, then EXPERTS blocks, byte j of block e of layer l being
 * (l·16 + e + j·7) mod 256. */
static unsigned char byte_of(uint64_t l, uint64_t e, uint64_t j)
{
    return (unsigned char)((l * 16 + e + j * 7) & 255);
}

static int make_layer(const char *path, uint64_t l)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    static unsigned char buf[START + EXPERTS * BLK];
    memset(buf, 0, START);
    for (uint64_t e = 0; e < EXPERTS; e++)
        for (uint64_t j = 0; j < BLK; j++)
            buf[START + e * BLK + j] = byte_of(l, e, j);
    int ok = write(fd, buf, sizeof buf) == (ssize_t)sizeof buf;
    return close(fd) == 0 && ok ? 0 : -1;
}

/* ---------------------------------------------------------------- the model */
typedef struct model_ent {
    uint64_t key;
    int ref;
} model_ent;

typedef struct lru_model {
    model_ent v[LAYERS * EXPERTS]; /* v[0] most recently used */
    size_t n, cap;                 /* cap: budget in blocks */
    uint64_t hits, misses;
} lru_model;

static void model_drop_lru(lru_model *m, size_t keep_at_most)
{
    while (m->n > keep_at_most) {
        size_t i = m->n;
        while (i > 0 && m->v[i - 1].ref)
            i--;
        if (i == 0)
            return; /* everything is in use */
        memmove(&m->v[i - 1], &m->v[i], (m->n - i) * sizeof *m->v);
        m->n--;
    }
}

static void model_acquire(lru_model *m, uint64_t layer, const uint64_t *ids, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t key = layer * EXPERTS + ids[k];
        size_t i = 0;
        while (i < m->n && m->v[i].key != key)
            i++;
        model_ent e = {key, 1};
        if (i < m->n) {
            m->hits++;
            e.ref = m->v[i].ref + 1;
            memmove(&m->v[1], &m->v[0], i * sizeof *m->v);
        } else {
            m->misses++;
            model_drop_lru(m, m->cap ? m->cap - 1 : 0);
            memmove(&m->v[1], &m->v[0], m->n * sizeof *m->v);
            m->n++;
        }
        m->v[0] = e;
    }
}

static void model_release(lru_model *m, uint64_t layer, const uint64_t *ids, size_t n)
{
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < m->n; i++)
            if (m->v[i].key == layer * EXPERTS + ids[k] && m->v[i].ref > 0)
                m->v[i].ref--;
    model_drop_lru(m, m->cap);
}

/* ---------------------------------------------------------------- the cache */
typedef struct rig {
    rt_cache *c;
    rt_block_src src[LAYERS];
} rig;

static int rig_open(rig *r, uint64_t budget_blocks, int io_threads)
{
    tq_err err = {0};
    memset(r, 0, sizeof *r);
    for (uint64_t l = 0; l < LAYERS; l++) {
        char name[64];
        snprintf(name, sizeof name, "cache-layer-%llu.bin", (unsigned long long)l);
        const char *p = t_path(name);
        CHECK(make_layer(p, l) == 0);
        r->src[l].data_start = START;
        r->src[l].block_size = BLK;
        r->src[l].n_experts = EXPERTS;
        r->src[l].align = BLK;
        CHECK_OK(rt_block_src_open(&r->src[l], p, TQ_RUN_IO_BUFFERED, &err));
    }
    CHECK_OK(rt_cache_create(&r->c, budget_blocks * BLK, LAYERS, EXPERTS, io_threads, &err));
    return t_failed_here ? -1 : 0;
}

static void rig_close(rig *r)
{
    rt_cache_destroy(r->c);
    for (uint64_t l = 0; l < LAYERS; l++)
        if (r->src[l].path)
            rt_block_src_close(&r->src[l]);
}

/* One lookup of ids in layer, served bytes checked, then released. */
static void lookup(rig *r, uint64_t layer, const uint64_t *ids, size_t n)
{
    tq_err err = {0};
    const uint8_t *bufs[8];
    CHECK_OK(rt_cache_acquire(r->c, &r->src[layer], layer, ids, n, 0, bufs, &err));
    if (t_failed_here)
        return;
    for (size_t k = 0; k < n; k++)
        for (uint64_t j = 0; j < BLK; j += 509)
            if (bufs[k][j] != byte_of(layer, ids[k], j)) {
                CHECKF(0, "layer %llu expert %llu: byte %llu is %u", (unsigned long long)layer,
                       (unsigned long long)ids[k], (unsigned long long)j, bufs[k][j]);
                break;
            }
    rt_cache_release(r->c, layer, ids, n);
}

static void stats(rig *r, uint64_t *hits, uint64_t *misses, uint64_t *now)
{
    uint64_t bytes_read, reads, peak;
    double io_s;
    rt_cache_stats(r->c, hits, misses, &bytes_read, &reads, now, &peak, &io_s);
    CHECKF(reads == *misses && bytes_read == *misses * BLK, "reads %llu, bytes %llu for %llu misses",
           (unsigned long long)reads, (unsigned long long)bytes_read, (unsigned long long)*misses);
}

/* Budget of three blocks, one expert per lookup: 0 1 2 0 3 1 4 0.
 *   0 1 2 miss            (2 1 0)
 *   0 hit                 (0 2 1)
 *   3 miss, drops 1       (3 0 2)
 *   1 miss, drops 2       (1 3 0)
 *   4 miss, drops 0       (4 1 3)
 *   0 miss, drops 3       (0 4 1)      1 hit, 7 misses
 * (Dropping the newest instead gives 2 hits; not moving a hit to the front, 2 hits.) */
static void test_hand_pattern(void)
{
    rig r;
    if (rig_open(&r, 3, 1) != 0)
        return;
    static const uint64_t seq[] = {0, 1, 2, 0, 3, 1, 4, 0};
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++)
        lookup(&r, 0, &seq[i], 1);
    uint64_t hits, misses, now;
    stats(&r, &hits, &misses, &now);
    CHECKF(hits == 1 && misses == 7, "hits %llu, misses %llu", (unsigned long long)hits, (unsigned long long)misses);
    CHECK(now == 3 * BLK);
    /* 4 1 are the most recent: both hit; 3 was dropped: a miss */
    static const uint64_t again[] = {4, 1, 3};
    for (size_t i = 0; i < 3; i++)
        lookup(&r, 0, &again[i], 1);
    stats(&r, &hits, &misses, &now);
    CHECKF(hits == 3 && misses == 8, "hits %llu, misses %llu", (unsigned long long)hits, (unsigned long long)misses);
    rig_close(&r);
}

/* Two experts per lookup with a budget of one block: both are in use together, so the cache
 * holds two during the lookup and shrinks to one (the more recent) after it. */
static void test_over_budget_lookup(void)
{
    rig r;
    if (rig_open(&r, 1, 2) != 0)
        return;
    uint64_t hits, misses, now;
    const uint64_t a[2] = {5, 6}, b[1] = {6}, c[1] = {5};
    lookup(&r, 1, a, 2);
    stats(&r, &hits, &misses, &now);
    CHECK(misses == 2 && hits == 0 && now == BLK);
    lookup(&r, 1, b, 1); /* 6 was acquired last: it stayed */
    lookup(&r, 1, c, 1);
    stats(&r, &hits, &misses, &now);
    CHECKF(hits == 1 && misses == 3, "hits %llu, misses %llu", (unsigned long long)hits, (unsigned long long)misses);
    rig_close(&r);
}

/* Random top-2 lookups alternating over the layers (as a decode does), skewed toward a few
 * experts so that hits happen, at budgets 1..10 blocks and 1 or 3 io threads: hit and miss
 * counts equal the model's after every lookup. */
static void test_random_patterns(void)
{
    uint64_t s = 99;
    for (uint64_t budget = 1; budget <= 10; budget++) {
        for (int io = 1; io <= 3; io += 2) {
            rig r;
            if (rig_open(&r, budget, io) != 0)
                return;
            lru_model m = {.cap = budget};
            for (int step = 0; step < 300 && !t_failed_here; step++) {
                uint64_t layer = (uint64_t)step % LAYERS, ids[2];
                ids[0] = (uint64_t)(t_urand(&s) * t_urand(&s) * EXPERTS);
                do
                    ids[1] = (uint64_t)(t_urand(&s) * EXPERTS);
                while (ids[1] == ids[0]);
                lookup(&r, layer, ids, 2);
                model_acquire(&m, layer, ids, 2);
                model_release(&m, layer, ids, 2);
                uint64_t hits, misses, now;
                stats(&r, &hits, &misses, &now);
                CHECKF(hits == m.hits && misses == m.misses && now == m.n * BLK,
                       "budget %llu io %d step %d: hits %llu misses %llu bytes %llu, LRU gives %llu %llu %llu",
                       (unsigned long long)budget, io, step, (unsigned long long)hits, (unsigned long long)misses,
                       (unsigned long long)now, (unsigned long long)m.hits, (unsigned long long)m.misses,
                       (unsigned long long)(m.n * BLK));
            }
            if (budget == 5 && io == 1)
                printf("  budget 5 blocks: %llu hits, %llu misses in 600 lookups\n", (unsigned long long)m.hits,
                       (unsigned long long)m.misses);
            rig_close(&r);
        }
    }
}

int main(void)
{
    RUN(test_hand_pattern);
    RUN(test_over_budget_lookup);
    RUN(test_random_patterns);
    TEST_MAIN_END();
}
