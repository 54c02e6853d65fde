/* runtime/metal/shim.c — the shim device: kernels.metal compiled as C and run on the CPU with
 * Metal's memory rules, so that make check runs the GPU kernels and the backend's host logic
 * on any machine (docs/metal.md, The shim).
 *
 * Like a Metal command queue, dispatch only records the kernel, its buffers and a copy of
 * its argument block; sync runs the queue in order (each dispatch's threadgroups 0, 1, ...,
 * each threadgroup's phases over its RTM_TG threads, shim_internal.h). Like newBuffer-
 * WithBytes, wrap copies the bytes; like a staging buffer, stage copies them and the copy
 * lives until the next sync. A host that reads results before sync, or hands kernels memory
 * to write that alloc did not make, gets wrong results here as it would on the GPU. */
#if !defined(_XOPEN_SOURCE) && !defined(__APPLE__)
#define _XOPEN_SOURCE 700 /* ucontext */
#endif
#if defined(__APPLE__)
#define _XOPEN_SOURCE 700
#endif
#include "runtime/metal/rtm_internal.h"
#include "formats/formats.h"

#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

int rtm_shim_reverse = 0;

/* ------------------------------------------------------------ threads as fibers
 * One threadgroup runs at a time, its RTM_TG threads as fibers on this OS thread. A thread
 * runs until a barrier (or a step of a collective) or its end, then the next thread runs;
 * when every thread has stopped the scheduler checks that all stopped at the same barrier
 * (else the dispatch fails naming the kernel: on a GPU it hangs) and releases them. Threads
 * run in index order, or from the last to the first when rtm_shim_reverse is set, so a read
 * of another thread's write with no barrier between sees the old value in one of the two. */
#define SHIM_STACK (64u * 1024u)
#define SHIM_TGMEM 32768u /* Metal's threadgroup memory limit */
#define SHIM_POISON 0xFFA5A5A5u /* a NaN as a float, a huge index as a uint */

typedef struct shim_thr {
    ucontext_t uc;
    int state; /* 0 runnable, 1 at a barrier, 2 finished */
    int line;  /* the barrier's line in kernels.metal, -1 for a collective's step */
    size_t tgoff;
    unsigned ncoll;
} shim_thr;

typedef struct shim_sched {
    ucontext_t main;
    shim_thr t[RTM_TG];
    char *stacks;
    _Alignas(16) unsigned char tg[SHIM_TGMEM];
    int tg_over;
    uint cur;
    void (*fn)(void *const *s, const void *a, uint tgid);
    void *const *slot;
    const void *args;
    uint g;
} shim_sched;

static shim_sched *shim_run; /* the scheduler running a group, for the kernels' calls */
/* The collectives' exchange slots, two sets used alternately (a thread's collective count
 * picks one), so a fast thread's next collective does not overwrite a slot a slower thread
 * has still to read. */
static float shim_xf[2][RTM_TG];
static uint shim_xu[2][RTM_TG];

uint rtm_shim_lid(void)
{
    return shim_run->cur;
}

void rtm_shim_barrier(int line)
{
    shim_thr *t = &shim_run->t[shim_run->cur];
    t->state = 1;
    t->line = line;
    swapcontext(&t->uc, &shim_run->main);
}

void *rtm_shim_tgmem(size_t n)
{
    shim_thr *t = &shim_run->t[shim_run->cur];
    size_t off = (t->tgoff + 15u) & ~(size_t)15u;
    if (n > SHIM_TGMEM - off) {
        shim_run->tg_over = 1;
        return shim_run->tg;
    }
    t->tgoff = off + n;
    return shim_run->tg + off;
}

static void shim_entry(void)
{
    shim_sched *r = shim_run;
    r->fn(r->slot, r->args, r->g);
    r->t[r->cur].state = 2;
}

float rtm_shim_h2f(uint16_t h)
{
    return tq_f16_to_f32(h);
}

/* A value one thread writes to threadgroup memory in a phase (`if (lid == 0) sh[0] = ...`) and
 * every thread reads in the next is written before it is read — the phase loop visits lid 0 —
 * but gcc cannot always see that through the loop and warns at some optimisation levels. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "runtime/metal/kernels.metal"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void rtm_shim_simd(float *buf, uint *idx, int op, uint width)
{
    shim_thr *t = &shim_run->t[shim_run->cur];
    uint l = shim_run->cur, s = l & ~31u, par = t->ncoll++ & 1u;
    shim_xf[par][l] = buf[l];
    if (idx)
        shim_xu[par][l] = idx[l];
    rtm_shim_barrier(-1);
    float v[32], nv[32];
    uint i[32], ni[32];
    for (uint k = 0; k < 32; k++) {
        v[k] = shim_xf[par][s + k];
        i[k] = idx ? shim_xu[par][s + k] : 0;
    }
    for (uint m = 1; m < width; m <<= 1) {
        for (uint k = 0; k < 32; k++) {
            float o = v[k ^ m];
            if (op == 0)
                nv[k] = v[k] + o;
            else if (op == 1)
                nv[k] = o > v[k] ? o : v[k];
            else {
                int take = rtm_better(o, i[k ^ m], v[k], i[k]);
                nv[k] = take ? o : v[k];
                ni[k] = take ? i[k ^ m] : i[k];
            }
        }
        memcpy(v, nv, sizeof v);
        if (op == 2)
            memcpy(i, ni, sizeof i);
    }
    buf[l] = v[l - s];
    if (idx)
        idx[l] = i[l - s];
}

/* One wrapper per kernel: slot pointers → the kernel's parameters. */
typedef void (*shim_fn)(void *const *s, const void *a, uint tgid);

static void run_mv_dense(void *const *s, const void *a, uint g)
{
    rtm_k_mv_dense(s[0], s[1], s[2], s[3], a, g);
}
static void run_mv_tq(void *const *s, const void *a, uint g)
{
    rtm_k_mv_tq(s[0], s[1], s[2], s[3], s[4], s[5], a, g);
}
static void run_mv_affine(void *const *s, const void *a, uint g)
{
    rtm_k_mv_affine(s[0], s[1], s[2], s[3], s[4], s[5], s[6], a, g);
}
static void run_mv_mxfp4(void *const *s, const void *a, uint g)
{
    rtm_k_mv_mxfp4(s[0], s[1], s[2], s[3], s[4], a, g);
}
static void run_group_sums(void *const *s, const void *a, uint g)
{
    rtm_k_group_sums(s[0], s[1], a, g);
}
static void run_hadamard(void *const *s, const void *a, uint g)
{
    rtm_k_hadamard(s[0], s[1], s[2], s[3], a, g);
}
static void run_rmsnorm(void *const *s, const void *a, uint g)
{
    rtm_k_rmsnorm(s[0], s[1], s[2], a, g);
}
static void run_rope(void *const *s, const void *a, uint g)
{
    rtm_k_rope(s[0], s[1], s[2], a, g);
}
static void run_attention(void *const *s, const void *a, uint g)
{
    rtm_k_attention(s[0], s[1], s[2], s[3], s[4], s[5], a, g);
}
static void run_softmax(void *const *s, const void *a, uint g)
{
    rtm_k_softmax(s[0], a, g);
}
static void run_route(void *const *s, const void *a, uint g)
{
    rtm_k_route(s[0], s[1], s[2], s[3], s[4], a, g);
}
static void run_act(void *const *s, const void *a, uint g)
{
    rtm_k_act(s[0], s[1], a, g);
}
static void run_axpy(void *const *s, const void *a, uint g)
{
    rtm_k_axpy(s[0], s[1], s[2], a, g);
}
static void run_gate(void *const *s, const void *a, uint g)
{
    rtm_k_gate(s[0], s[1], a, g);
}
static void run_gather(void *const *s, const void *a, uint g)
{
    rtm_k_gather(s[0], s[1], a, g);
}
static void run_unary(void *const *s, const void *a, uint g)
{
    rtm_k_unary(s[0], s[1], a, g);
}

#define SHIM_FN_(name, nbuf) run_##name,
static const shim_fn shim_fns[RTM_K_COUNT] = {RTM_KERNELS(SHIM_FN_)};

#define KNAME_(name, nbuf) "rtm_k_" #name,
const char *const rtm_kernel_names[RTM_K_COUNT] = {RTM_KERNELS(KNAME_)};
#define KSLOTS_(name, nbuf) nbuf,
const int rtm_kernel_slots[RTM_K_COUNT] = {RTM_KERNELS(KSLOTS_)};

/* ------------------------------------------------------------ the queue */
#define SHIM_MAX_SLOTS 8

typedef struct shim_cmd {
    int k;
    uint32_t groups;
    void *slot[SHIM_MAX_SLOTS];
    unsigned char args[256];
} shim_cmd;

typedef struct shim_dev {
    rtm_dev d;
    shim_cmd *q;
    size_t n, cap;
    void **staged;
    size_t n_staged, cap_staged;
    shim_sched *sched;
} shim_dev;

static int shim_wrap(rtm_dev *d, const void *p, uint64_t n, void **h, tq_err *e)
{
    (void)d;
    void *c = tq_malloc(n ? n : 1, e);
    if (!c)
        return -1;
    memcpy(c, p, n);
    *h = c;
    return 0;
}

static int shim_alloc(rtm_dev *d, uint64_t n, void **h, void **host, tq_err *e)
{
    (void)d;
    void *c = tq_calloc(1, n ? n : 1, e);
    if (!c)
        return -1;
    *h = *host = c;
    return 0;
}

static int shim_stage(rtm_dev *d, const void *p, uint64_t n, rtm_bind *out, tq_err *e)
{
    shim_dev *s = (shim_dev *)d;
    void *c;
    void *grown = tq_grow(s->staged, &s->cap_staged, s->n_staged, sizeof *s->staged, e);
    if (!grown)
        return -1;
    s->staged = grown;
    if (!(c = tq_malloc(n ? n : 1, e)))
        return -1;
    memcpy(c, p, n);
    s->staged[s->n_staged++] = c;
    out->h = c;
    out->off = 0;
    return 0;
}

static void shim_release(rtm_dev *d, void *h)
{
    (void)d;
    free(h);
}

static int shim_dispatch(rtm_dev *d, int k, const rtm_bind *b, int nb, const void *args, uint32_t args_n,
                         uint32_t groups, tq_err *e)
{
    shim_dev *s = (shim_dev *)d;
    if (k < 0 || k >= RTM_K_COUNT || nb != rtm_kernel_slots[k] - 1 || nb > SHIM_MAX_SLOTS ||
        args_n > sizeof s->q->args)
        return tq_fail(e, TQ_EUSAGE, "shim: bad dispatch of kernel %d (%d buffers, %u argument bytes)", k, nb,
                       (unsigned)args_n);
    void *grown = tq_grow(s->q, &s->cap, s->n, sizeof *s->q, e);
    if (!grown)
        return -1;
    s->q = grown;
    shim_cmd *c = &s->q[s->n++];
    memset(c, 0, sizeof *c);
    c->k = k;
    c->groups = groups;
    for (int i = 0; i < nb; i++)
        c->slot[i] = b[i].h ? (char *)b[i].h + b[i].off : NULL;
    memcpy(c->args, args, args_n);
    return 0;
}

/* Run threadgroup g of command c: its threadgroup memory poisoned, its threads as fibers. */
static int shim_group(shim_sched *r, const shim_cmd *c, uint g, tq_err *e)
{
    for (size_t i = 0; i < SHIM_TGMEM; i += 4) {
        uint32_t p = SHIM_POISON;
        memcpy(r->tg + i, &p, 4);
    }
    r->tg_over = 0;
    r->fn = shim_fns[c->k];
    r->slot = c->slot;
    r->args = c->args;
    r->g = g;
    for (uint i = 0; i < RTM_TG; i++) {
        shim_thr *t = &r->t[i];
        t->state = 0;
        t->tgoff = 0;
        t->ncoll = 0;
        getcontext(&t->uc);
        t->uc.uc_stack.ss_sp = r->stacks + (size_t)i * SHIM_STACK;
        t->uc.uc_stack.ss_size = SHIM_STACK;
        t->uc.uc_link = &r->main;
        makecontext(&t->uc, shim_entry, 0);
    }
    shim_run = r;
    const char *kn = rtm_kernel_names[c->k];
    for (;;) {
        for (uint k = 0; k < RTM_TG; k++) {
            uint i = rtm_shim_reverse ? RTM_TG - 1 - k : k;
            if (r->t[i].state != 0)
                continue;
            r->cur = i;
            swapcontext(&r->main, &r->t[i].uc);
        }
        uint at = 0, done = 0, first = RTM_TG;
        for (uint i = 0; i < RTM_TG; i++) {
            if (r->t[i].state == 2) {
                done++;
                continue;
            }
            at++;
            if (first == RTM_TG)
                first = i;
            if (r->t[i].line != r->t[first].line)
                return tq_fail(e, TQ_EUSAGE,
                               "shim: kernel %s, threadgroup %u: threads %u and %u wait at different barriers "
                               "(kernels.metal lines %d and %d; -1 is a simd collective): on a GPU this hangs",
                               kn, g, first, i, r->t[first].line, r->t[i].line);
        }
        if (r->tg_over)
            return tq_fail(e, TQ_EUSAGE, "shim: kernel %s uses more than %u bytes of threadgroup memory", kn,
                           SHIM_TGMEM);
        if (at == 0)
            return 0;
        if (done)
            return tq_fail(e, TQ_EUSAGE,
                           "shim: kernel %s, threadgroup %u: the barrier at kernels.metal line %d (-1: a simd "
                           "collective) is reached by %u of %u threads (the others returned): on a GPU this hangs",
                           kn, g, r->t[first].line, at, (unsigned)RTM_TG);
        for (uint i = 0; i < RTM_TG; i++)
            r->t[i].state = 0;
    }
}

static int shim_sync(rtm_dev *d, tq_err *e)
{
    shim_dev *s = (shim_dev *)d;
    int rc = 0;
    for (size_t i = 0; i < s->n && rc == 0; i++) {
        const shim_cmd *c = &s->q[i];
        /* Threadgroups in a shuffled order (a fixed seed per queue position, so runs repeat):
         * a kernel whose result depends on group order races on the GPU. */
        uint32_t n = c->groups, x = 0x9E3779B9u ^ (uint32_t)(i * 2654435761u);
        uint32_t *ord = n ? tq_malloc((size_t)n * sizeof *ord, e) : NULL;
        if (n && !ord) {
            rc = -1;
            break;
        }
        for (uint32_t g = 0; g < n; g++)
            ord[g] = g;
        for (uint32_t g = n; g > 1; g--) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            uint32_t j = x % g, t = ord[g - 1];
            ord[g - 1] = ord[j];
            ord[j] = t;
        }
        for (uint32_t g = 0; g < n && rc == 0; g++)
            rc = shim_group(s->sched, c, ord[g], e);
        free(ord);
    }
    shim_run = NULL;
    s->n = 0;
    for (size_t i = 0; i < s->n_staged; i++)
        free(s->staged[i]);
    s->n_staged = 0;
    return rc;
}

static void shim_close(rtm_dev *d)
{
    shim_dev *s = (shim_dev *)d;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_staged; i++)
        free(s->staged[i]);
    free(s->staged);
    free(s->q);
    if (s->sched)
        free(s->sched->stacks);
    free(s->sched);
    free(s);
}

int rtm_shim_open(rtm_dev **out, tq_err *e)
{
    shim_dev *s = tq_calloc(1, sizeof *s, e);
    if (!s)
        return -1;
    if (!(s->sched = tq_calloc(1, sizeof *s->sched, e)) ||
        !(s->sched->stacks = tq_malloc((size_t)RTM_TG * SHIM_STACK, e))) {
        free(s->sched);
        free(s);
        return -1;
    }
    s->d = (rtm_dev){.name = "shim",
                     .wrap = shim_wrap,
                     .alloc = shim_alloc,
                     .stage = shim_stage,
                     .release = shim_release,
                     .dispatch = shim_dispatch,
                     .sync = shim_sync,
                     .close = shim_close};
    *out = &s->d;
    return 0;
}
