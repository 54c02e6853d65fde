/* Streaming routed experts: one pread per expert block into a byte-budgeted LRU cache,
 * files opened so the OS page cache does not grow (O_DIRECT / F_NOCACHE, or fadvise
 * DONTNEED after each read where the filesystem refuses O_DIRECT). The top-k misses of a
 * layer are read in parallel by io threads. Only the decoding thread touches the cache
 * structure; io threads only fill buffers. */
#include "runtime/rt_internal.h"
#include "common/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *rt_alloc_aligned(uint64_t n, uint64_t align, tq_err *e)
{
    void *p = NULL;
    if (align < 64)
        align = 64;
    if (n > SIZE_MAX - align || posix_memalign(&p, (size_t)align, n ? (size_t)n : 1) != 0) {
        tq_fail(e, TQ_ENOMEM, "out of memory (%llu bytes)", (unsigned long long)n);
        return NULL;
    }
    return p;
}

uint64_t rt_map_page(void)
{
    uint64_t pg = tq_plat_page_size();
    return pg > RT_MAP_PAGE ? pg : RT_MAP_PAGE;
}

uint64_t rt_map_round(uint64_t n)
{
    uint64_t pg = rt_map_page();
    n = n ? n : 1;
    return n > UINT64_MAX - pg ? UINT64_MAX : (n + pg - 1) / pg * pg;
}

/* ---------------------------------------------------------------- block sources */
int rt_block_src_open(rt_block_src *s, const char *path, int io_mode, tq_err *e)
{
    s->path = tq_strdup(path, e);
    if (!s->path)
        return -1;
    s->fd = -1;
    uint64_t size;
    /* every open is tq_open_regular's: a FIFO or a device never blocks, a directory is named */
    if (io_mode == TQ_RUN_IO_BUFFERED || io_mode == TQ_RUN_IO_FADVISE) {
        s->io = io_mode;
        s->fd = tq_open_regular(path, &size, e);
    } else {
        s->io = TQ_RUN_IO_FADVISE;
        s->fd = tq_open_regular(path, &size, e);
        if (s->fd >= 0 && tq_plat_uncached(s->fd, 1) == 0) {
            /* Some filesystems accept O_DIRECT and refuse the read: probe once. */
            uint64_t a = s->align ? s->align : 4096;
            void *probe = rt_alloc_aligned(a, a, e);
            if (!probe) {
                close(s->fd);
                s->fd = -1;
                return -1;
            }
            ssize_t got = pread(s->fd, probe, (size_t)a, 0);
            free(probe);
            if (got >= 0)
                s->io = TQ_RUN_IO_DIRECT;
            else
                (void)tq_plat_uncached(s->fd, 0);
        }
    }
    if (s->fd < 0)
        return -1;
    /* the header page was read through the page cache when the file was parsed */
    if (s->io != TQ_RUN_IO_BUFFERED)
        tq_plat_advise(s->fd, 0, 0, TQ_ADV_DONTNEED);
    uint64_t need;
    if (tq_mul_u64(s->block_size, s->n_experts, &need) || tq_add_u64(need, s->data_start, &need) ||
        need > size)
        return tq_fail(e, TQ_EDATA, "%s: file is %llu bytes, its %llu expert blocks need %llu", path,
                       (unsigned long long)size, (unsigned long long)s->n_experts,
                       (unsigned long long)need);
    return 0;
}

void rt_block_src_close(rt_block_src *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    free(s->path);
    s->path = NULL;
    free(s->sha);
    s->sha = NULL;
}

const char *rt_io_name(int io)
{
    switch (io) {
    case TQ_RUN_IO_DIRECT: return "direct";
    case TQ_RUN_IO_FADVISE: return "fadvise";
    case TQ_RUN_IO_BUFFERED: return "buffered";
    default: return "auto";
    }
}

/* One pread of one whole block (a short read is retried by tq_pread_full, counted once). */
static int read_block(rt_block_src *s, uint64_t ex, uint8_t *buf, int check, tq_err *e)
{
    uint64_t off = s->data_start + ex * s->block_size;
    if (tq_pread_full(s->fd, buf, s->block_size, off, s->path, e) != 0)
        return tq_err_prefix(e, "expert %llu (%s read)", (unsigned long long)ex, rt_io_name(s->io));
    if (s->io == TQ_RUN_IO_FADVISE)
        tq_plat_advise(s->fd, off, s->block_size, TQ_ADV_DONTNEED);
    if (check && s->have_sha) {
        unsigned char d[32];
        tq_sha256_buf(buf, s->block_size, d);
        if (memcmp(d, s->sha[ex], 32))
            return tq_fail(e, TQ_EDATA, "%s: expert %llu block (offset %llu, %llu bytes) does not match split.json's SHA-256",
                           s->path, (unsigned long long)ex, (unsigned long long)off,
                           (unsigned long long)s->block_size);
    }
    return 0;
}

/* ---------------------------------------------------------------- io threads */
typedef struct io_job {
    rt_block_src *src;
    uint64_t ex;
    uint8_t *buf;
    int check, rc;
    tq_err err;
} io_job;

typedef struct io_pool {
    int n;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    io_job *jobs;
    size_t n_jobs, next, finished;
    int quit;
} io_pool;

static void *io_worker(void *arg)
{
    io_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->next >= p->n_jobs)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->quit)
            break;
        io_job *j = &p->jobs[p->next++];
        pthread_mutex_unlock(&p->mu);
        j->rc = read_block(j->src, j->ex, j->buf, j->check, &j->err);
        pthread_mutex_lock(&p->mu);
        if (++p->finished == p->n_jobs)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void io_run(io_pool *p, io_job *jobs, size_t n)
{
    if (p->n == 0 || n == 1) {
        for (size_t i = 0; i < n; i++)
            jobs[i].rc = read_block(jobs[i].src, jobs[i].ex, jobs[i].buf, jobs[i].check, &jobs[i].err);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->jobs = jobs;
    p->n_jobs = n;
    p->next = 0;
    p->finished = 0;
    pthread_cond_broadcast(&p->work);
    while (p->finished < n)
        pthread_cond_wait(&p->done, &p->mu);
    p->jobs = NULL;
    p->n_jobs = p->next = p->finished = 0;
    pthread_mutex_unlock(&p->mu);
}

/* ---------------------------------------------------------------- LRU cache */
typedef struct ent {
    uint64_t layer, ex;
    uint8_t *buf;
    uint64_t size;
    int ref;
    struct ent *prev, *next; /* prev = more recently used */
} ent;

struct rt_cache {
    uint64_t budget, layers, experts;
    ent **map;
    ent *mru, *lru;
    uint64_t bytes, peak;
    uint64_t hits, misses, bytes_read, reads;
    double io_s;
    io_pool io;
    rt_cache_mem mem;
    rt_cache_fill_fn fill; /* each block read, before it is served (rt_cache_set_fill) */
    void *fill_user;
};

static void *host_alloc(void *user, uint64_t n, uint64_t align, tq_err *e)
{
    (void)user;
    return rt_alloc_aligned(n, align, e);
}

static void host_free(void *user, void *p)
{
    (void)user;
    free(p);
}

void rt_cache_set_mem(rt_cache *c, const rt_cache_mem *m)
{
    c->mem = *m;
}

void rt_cache_set_fill(rt_cache *c, rt_cache_fill_fn fn, void *user)
{
    c->fill = fn;
    c->fill_user = user;
}

int rt_cache_create(rt_cache **out, uint64_t budget, uint64_t layers, uint64_t experts, int io_threads,
                    tq_err *e)
{
    uint64_t n;
    if (tq_mul_u64(layers, experts, &n))
        return tq_fail(e, TQ_EDATA, "too many experts");
    rt_cache *c = tq_calloc(1, sizeof *c, e);
    if (!c)
        return -1;
    c->budget = budget;
    c->layers = layers;
    c->experts = experts;
    c->mem = (rt_cache_mem){host_alloc, host_free, NULL};
    c->map = tq_calloc(n ? n : 1, sizeof *c->map, e);
    if (!c->map) {
        free(c);
        return -1;
    }
    pthread_mutex_init(&c->io.mu, NULL);
    pthread_cond_init(&c->io.work, NULL);
    pthread_cond_init(&c->io.done, NULL);
    if (io_threads > 1) {
        c->io.tid = tq_calloc((size_t)io_threads, sizeof *c->io.tid, e);
        if (!c->io.tid) {
            rt_cache_destroy(c);
            return -1;
        }
        for (int i = 0; i < io_threads; i++) {
            if (pthread_create(&c->io.tid[i], NULL, io_worker, &c->io) != 0) {
                rt_cache_destroy(c);
                return tq_fail(e, TQ_ENOMEM, "cannot start io thread %d", i);
            }
            c->io.n = i + 1;
        }
    }
    *out = c;
    return 0;
}

static void unlink_ent(rt_cache *c, ent *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        c->mru = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        c->lru = x->prev;
    x->prev = x->next = NULL;
}

static void push_mru(rt_cache *c, ent *x)
{
    x->prev = NULL;
    x->next = c->mru;
    if (c->mru)
        c->mru->prev = x;
    c->mru = x;
    if (!c->lru)
        c->lru = x;
}

/* Drop the least recently used unreferenced entry; returns its buffer when it has `keep`
 * bytes (the caller reuses it), else frees it. 0 when nothing can be dropped. */
static int evict_one(rt_cache *c, uint64_t keep, uint8_t **reuse)
{
    ent *x = c->lru;
    while (x && x->ref)
        x = x->prev;
    if (!x)
        return 0;
    unlink_ent(c, x);
    c->map[x->layer * c->experts + x->ex] = NULL;
    c->bytes -= x->size;
    if (reuse && !*reuse && x->size == keep)
        *reuse = x->buf;
    else
        c->mem.free(c->mem.user, x->buf);
    free(x);
    return 1;
}

void rt_cache_destroy(rt_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->io.mu);
    c->io.quit = 1;
    pthread_cond_broadcast(&c->io.work);
    pthread_mutex_unlock(&c->io.mu);
    for (int i = 0; i < c->io.n; i++)
        pthread_join(c->io.tid[i], NULL);
    free(c->io.tid);
    while (c->mru) {
        ent *x = c->mru;
        unlink_ent(c, x);
        c->mem.free(c->mem.user, x->buf);
        free(x);
    }
    free(c->map);
    pthread_mutex_destroy(&c->io.mu);
    pthread_cond_destroy(&c->io.work);
    pthread_cond_destroy(&c->io.done);
    free(c);
}

/* Give back the references of ids[0..n) and drop the entries this call created (unread or
 * failed blocks must never be served later). */
static void undo(rt_cache *c, uint64_t layer, const uint64_t *ids, size_t n, ent **fresh, size_t nf)
{
    for (size_t i = 0; i < n; i++) {
        ent *x = c->map[layer * c->experts + ids[i]];
        if (x && x->ref > 0)
            x->ref--;
    }
    for (size_t k = 0; k < nf; k++) {
        unlink_ent(c, fresh[k]);
        c->map[fresh[k]->layer * c->experts + fresh[k]->ex] = NULL;
        c->bytes -= fresh[k]->size;
        c->mem.free(c->mem.user, fresh[k]->buf);
        free(fresh[k]);
    }
}

int rt_cache_acquire(rt_cache *c, rt_block_src *src, uint64_t layer, const uint64_t *ids, size_t n,
                     int check, const uint8_t **bufs, tq_err *e)
{
    io_job jobs[64];
    ent *fresh[64];
    size_t nj = 0;
    if (n > 64)
        return tq_fail(e, TQ_EUNSUP, "more than 64 experts per token");
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= c->experts || layer >= c->layers)
            return tq_fail(e, TQ_EDATA, "expert %llu of layer %llu out of range", (unsigned long long)ids[i],
                           (unsigned long long)layer);
        ent *x = c->map[layer * c->experts + ids[i]];
        if (x) {
            c->hits++;
            x->ref++;
            unlink_ent(c, x);
            push_mru(c, x);
            bufs[i] = x->buf;
            continue;
        }
        c->misses++;
        uint8_t *buf = NULL;
        while (c->bytes + src->block_size > c->budget && evict_one(c, src->block_size, &buf))
            ;
        if (!buf)
            buf = c->mem.alloc(c->mem.user, src->block_size, src->align, e);
        x = buf ? calloc(1, sizeof *x) : NULL;
        if (!x) {
            if (buf)
                c->mem.free(c->mem.user, buf);
            undo(c, layer, ids, i, fresh, nj);
            return tq_fail(e, TQ_ENOMEM, "out of memory for an expert block (%llu bytes)",
                           (unsigned long long)src->block_size);
        }
        x->layer = layer;
        x->ex = ids[i];
        x->buf = buf;
        x->size = src->block_size;
        x->ref = 1;
        c->map[layer * c->experts + ids[i]] = x;
        push_mru(c, x);
        c->bytes += x->size;
        bufs[i] = buf;
        fresh[nj] = x;
        jobs[nj] = (io_job){.src = src, .ex = ids[i], .buf = buf, .check = check};
        nj++;
    }
    if (c->bytes > c->peak)
        c->peak = c->bytes;
    if (nj == 0)
        return 0;
    double t0 = tq_now();
    io_run(&c->io, jobs, nj);
    c->io_s += tq_now() - t0;
    int bad = -1;
    for (size_t k = 0; k < nj; k++) {
        c->reads++;
        if (jobs[k].rc == 0)
            c->bytes_read += src->block_size;
        else if (bad < 0)
            bad = (int)k;
    }
    if (bad >= 0) {
        *e = jobs[bad].err;
        undo(c, layer, ids, n, fresh, nj);
        return -1;
    }
    for (size_t k = 0; k < nj && c->fill; k++)
        if (c->fill(c->fill_user, layer, jobs[k].buf, e) != 0) {
            undo(c, layer, ids, n, fresh, nj);
            return -1;
        }
    return 0;
}

void rt_cache_release(rt_cache *c, uint64_t layer, const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ent *x = c->map[layer * c->experts + ids[i]];
        if (x && x->ref > 0)
            x->ref--;
    }
    while (c->bytes > c->budget && evict_one(c, 0, NULL))
        ;
}

void rt_cache_stats(const rt_cache *c, uint64_t *hits, uint64_t *misses, uint64_t *bytes_read,
                    uint64_t *reads, uint64_t *bytes_now, uint64_t *bytes_peak, double *io_s)
{
    *io_s = c->io_s;
    *hits = c->hits;
    *misses = c->misses;
    *bytes_read = c->bytes_read;
    *reads = c->reads;
    *bytes_now = c->bytes;
    *bytes_peak = c->peak;
}
