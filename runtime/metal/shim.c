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
#include "runtime/metal/rtm_internal.h"
#include "formats/formats.h"

#include <stdlib.h>
#include <string.h>

int rtm_shim_reverse = 0;

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

static int shim_sync(rtm_dev *d, tq_err *e)
{
    (void)e;
    shim_dev *s = (shim_dev *)d;
    for (size_t i = 0; i < s->n; i++) {
        const shim_cmd *c = &s->q[i];
        for (uint32_t g = 0; g < c->groups; g++)
            shim_fns[c->k](c->slot, c->args, g);
    }
    s->n = 0;
    for (size_t i = 0; i < s->n_staged; i++)
        free(s->staged[i]);
    s->n_staged = 0;
    return 0;
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
    free(s);
}

int rtm_shim_open(rtm_dev **out, tq_err *e)
{
    shim_dev *s = tq_calloc(1, sizeof *s, e);
    if (!s)
        return -1;
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
