/* runtime/metal/backend.c — the decoder's operations on a device (rtm_internal.h): which
 * kernels each operation queues, with which buffers, argument blocks and threadgroup counts.
 * Written once for the Metal device and the shim, so what make check runs here is what the
 * GPU is asked to do.
 *
 * Memory: pointers the kernels write must come from rtm_be_alloc. A pointer they only read is
 * found in this registry (alloc'd memory, or a region wrapped earlier), else in a stable
 * host region the caller's region function knows (the store's tensors, the model's vectors,
 * resident expert blocks, mapped layer files: wrapped once — in place where the device can,
 * whole RTM_PAGE pages, else copied once and counted — then registered), else it is staged:
 * copied now, as the bytes are at this call.
 *
 * Counters (rtm_counts: dispatches, waits, staged and copied bytes) are kept here, not in a
 * device, so the shim and Metal report the same numbers for the same decode. */
#include "runtime/metal/rtm_internal.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROT_SLOTS 4 /* rotated activations kept (gate and up of a layer's experts, q/k/v, ...) */

typedef struct rtm_region {
    const char *base;
    uint64_t n;
    void *h;
    int alloc; /* made by rtm_be_alloc (kernels may write it) */
} rtm_region;

struct rtm_be {
    rtm_dev *dev;
    rtm_region_fn region;
    void *user;
    rtm_region *reg; /* sorted by base, disjoint */
    size_t nreg, capreg;
    float *dummy;    /* bound to unused slots */
    /* scratch: butterflies [cols] of blocks longer than threadgroup memory */
    float *tmp;
    uint64_t cap_t;
    /* rotated activations (see rotation()): a TurboQuant matvec reuses the rotation of the
     * same x by the same signs instead of queuing another */
    struct rot_entry {
        const float *x;
        const void *signs;
        const uint32_t *ids; /* per-expert signs: those of expert ids[rank] (else NULL) */
        uint64_t rank;
        uint64_t cols;
        tq_dtype gdt;
        float *out;
        uint64_t cap, used;
        int valid;
    } rot[ROT_SLOTS];
    uint64_t rot_tick;
    uint64_t rot_reused; /* rotations saved (tests) */
    /* routing: scratch [2E + groups], ids [K] (u32), weights [K] */
    float *rs, *rw;
    uint32_t *rid;
    uint64_t cap_rs;
    uint64_t route_E, route_K; /* of the last route queued: what rid and rw hold */
    /* latent attention: the heads' query in the latent space and weighted latent [heads·kvl] */
    float *mla_qa, *mla_ol;
    uint64_t cap_mqa, cap_mol;
    /* expert matrices whose every MXFP4 block scale was checked (by expert 0's weights) */
    const void **checked;
    size_t n_checked, cap_checked;
    rtm_counts cnt;
    uint64_t pending; /* dispatches since the last sync */
    /* buffers dropped from the registry that queued work may still use: released at sync */
    void **retired;
    size_t n_retired, cap_retired;
};

/* ------------------------------------------------------------ the registry */

/* Index of the region whose base is the largest not above p, or -1. */
static long reg_find(const rtm_be *b, const void *p)
{
    size_t lo = 0, hi = b->nreg;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->reg[mid].base <= (const char *)p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

static int reg_add(rtm_be *b, const void *base, uint64_t n, void *h, int alloc, tq_err *e)
{
    void *grown = tq_grow(b->reg, &b->capreg, b->nreg, sizeof *b->reg, e);
    if (!grown)
        return -1;
    b->reg = grown;
    size_t at = (size_t)(reg_find(b, base) + 1);
    memmove(b->reg + at + 1, b->reg + at, (b->nreg - at) * sizeof *b->reg);
    b->reg[at] = (rtm_region){base, n, h, alloc};
    b->nreg++;
    return 0;
}

/* A kept rotation is stale once anything may have changed its x: a kernel writing memory
 * that overlaps it (run), the CPU (it writes device memory only after a sync), or the memory
 * being freed (rtm_be_free: the address may be handed out again). */
static void rot_forget_all(rtm_be *b)
{
    for (int i = 0; i < ROT_SLOTS; i++)
        b->rot[i].valid = 0;
}

static void rot_forget_written(rtm_be *b, const void *p, uint64_t n)
{
    const char *lo = p, *hi = (const char *)p + n;
    for (int i = 0; i < ROT_SLOTS; i++) {
        const struct rot_entry *r = &b->rot[i];
        if (r->valid && lo < (const char *)(r->x + r->cols) && (const char *)r->x < hi)
            b->rot[i].valid = 0;
        if (r->valid && r->ids && lo < (const char *)(r->ids + r->rank + 1) && (const char *)r->ids < hi)
            b->rot[i].valid = 0; /* a new route: another expert's signs */
    }
}

/* How a kernel uses a buffer slot: reads an activation (or other transient values), writes
 * it, or reads weights (what staged_weight_bytes counts). */
enum { RD, WR, WT };

/* A device buffer over the stable region [base, base + n): the device maps it in place where it
 * can — where it is whole pages (16 KiB on Apple silicon and in the shim: the regions tq makes
 * are whole RTM_PAGE pages) — and copies it once where it cannot; each copy is counted
 * (rtm_counts.wrap_copies), never silent. The device decides, so that the shim's page rule is
 * the one a misplaced region meets (test_metal_kernels, wrap_rules). */
static int wrap_region(rtm_be *b, const void *base, uint64_t n, void **h, tq_err *e)
{
    int rc = b->dev->wrap(b->dev, base, n, h, e);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        b->cnt.wrap_copies++;
        b->cnt.wrap_copy_bytes += n;
    }
    return 0;
}

/* The slot for [p, p + n): see the file comment. kind: RD, WR or WT. */
static int bind(rtm_be *b, const void *p, uint64_t n, int kind, rtm_bind *out, tq_err *e)
{
    const int write = kind == WR;
    if (!p)
        p = b->dummy, n = 0;
    long i = reg_find(b, p);
    if (i >= 0) {
        const rtm_region *r = &b->reg[i];
        uint64_t off = (uint64_t)((const char *)p - r->base);
        if (off <= r->n && n <= r->n - off) {
            if (write && !r->alloc)
                return tq_fail(e, TQ_EUSAGE, "GPU backend: a kernel would write read-only memory");
            *out = (rtm_bind){r->h, off};
            return 0;
        }
    }
    if (write)
        return tq_fail(e, TQ_EUSAGE, "GPU backend: a kernel would write memory it was not given");
    const void *base;
    uint64_t bn;
    if (b->region && b->region(b->user, p, &base, &bn) == 1 && (const char *)p >= (const char *)base &&
        (uint64_t)((const char *)p - (const char *)base) <= bn && n <= bn - (uint64_t)((const char *)p - (const char *)base)) {
        void *h;
        if (wrap_region(b, base, bn, &h, e) != 0)
            return -1;
        if (reg_add(b, base, bn, h, 0, e) != 0) {
            b->dev->release(b->dev, h);
            return -1;
        }
        *out = (rtm_bind){h, (uint64_t)((const char *)p - (const char *)base)};
        return 0;
    }
    if (b->dev->stage(b->dev, p, n, out, e) != 0)
        return -1;
    b->cnt.staged_bytes += n;
    if (kind == WT)
        b->cnt.staged_weight_bytes += n;
    return 0;
}

void *rtm_be_alloc(rtm_be *b, uint64_t n, tq_err *e)
{
    void *h, *host;
    if (b->dev->alloc(b->dev, n ? n : 4, &h, &host, e) != 0)
        return NULL;
    if (reg_add(b, host, n ? n : 4, h, 1, e) != 0) {
        b->dev->release(b->dev, h);
        return NULL;
    }
    return host;
}

/* Queued kernels may still use p: with work queued, its buffer leaves the registry now and is
 * released at the next sync (or, where the list cannot grow, after running the queue now). */
void rtm_be_free(rtm_be *b, void *p)
{
    if (!b || !p)
        return;
    long i = reg_find(b, p);
    if (i < 0 || b->reg[i].base != (const char *)p || !b->reg[i].alloc)
        return;
    rot_forget_written(b, p, b->reg[i].n); /* its address may come back, with other contents */
    for (int k = 0; k < ROT_SLOTS; k++)
        if (b->rot[k].out == p)
            b->rot[k].valid = 0;
    void *h = b->reg[i].h;
    memmove(b->reg + i, b->reg + i + 1, (b->nreg - (size_t)i - 1) * sizeof *b->reg);
    b->nreg--;
    if (b->pending) {
        tq_err e = {0};
        void *grown = tq_grow(b->retired, &b->cap_retired, b->n_retired, sizeof *b->retired, &e);
        if (grown) {
            b->retired = grown;
            b->retired[b->n_retired++] = h;
            return;
        }
        (void)rtm_be_sync(b, &e);
    }
    b->dev->release(b->dev, h);
}

int rtm_be_sync(rtm_be *b, tq_err *e)
{
    rot_forget_all(b);
    if (b->pending) {
        b->cnt.waits++;
        b->pending = 0;
    }
    int rc = b->dev->sync(b->dev, e);
    for (size_t i = 0; i < b->n_retired; i++)
        b->dev->release(b->dev, b->retired[i]);
    b->n_retired = 0;
    return rc;
}

void rtm_be_counts(const rtm_be *b, rtm_counts *out)
{
    *out = b->cnt;
}

rtm_dev *rtm_be_dev(rtm_be *b)
{
    return b->dev;
}

int rtm_be_open(rtm_be **out, rtm_dev *dev, rtm_region_fn region, void *user, tq_err *e)
{
    *out = NULL;
    rtm_be *b = tq_calloc(1, sizeof *b, e);
    if (!b) {
        dev->close(dev);
        return -1;
    }
    b->dev = dev;
    b->region = region;
    b->user = user;
    if (!(b->dummy = rtm_be_alloc(b, 16, e))) {
        rtm_be_close(b);
        return -1;
    }
    *out = b;
    return 0;
}

void rtm_be_close(rtm_be *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->nreg; i++)
        b->dev->release(b->dev, b->reg[i].h);
    free(b->reg);
    for (size_t i = 0; i < b->n_retired; i++)
        b->dev->release(b->dev, b->retired[i]);
    free(b->retired);
    free(b->checked);
    b->dev->close(b->dev);
    free(b);
}

/* Scratch of at least n floats in *p (capacity *cap). Growing does not wait for the queue
 * (queued kernels may still use the old buffer): rtm_be_free releases it at the next sync. */
static int scratch(rtm_be *b, float **p, uint64_t *cap, uint64_t n, tq_err *e)
{
    if (*p && *cap >= n)
        return 0;
    if (*p) {
        rtm_be_free(b, *p);
        *p = NULL;
    }
    uint64_t bytes;
    if (tq_mul_u64(n ? n : 1, 4, &bytes) || !(*p = rtm_be_alloc(b, bytes, e)))
        return -1;
    *cap = n;
    return 0;
}

/* ------------------------------------------------------------ dispatch helpers */
#define MAX_SLOTS 10

typedef struct slot_in {
    const void *p;
    uint64_t n;
    int kind; /* RD, WR, WT */
} slot_in;

static int run(rtm_be *b, int k, const slot_in *s, int ns, const void *args, uint32_t args_n, uint64_t groups,
               tq_err *e)
{
    rtm_bind bd[MAX_SLOTS];
    if (groups == 0)
        return 0;
    if (groups > UINT32_MAX)
        return tq_fail(e, TQ_EUNSUP, "GPU backend: %llu threadgroups exceed one dispatch", (unsigned long long)groups);
    for (int i = 0; i < ns; i++) {
        if (bind(b, s[i].p, s[i].n, s[i].kind, &bd[i], e) != 0)
            return -1;
        if (s[i].kind == WR)
            rot_forget_written(b, s[i].p, s[i].n);
    }
    if (b->dev->dispatch(b->dev, k, bd, ns, args, args_n, (uint32_t)groups, e) != 0)
        return -1;
    b->cnt.dispatches++;
    b->pending++;
    return 0;
}

static uint64_t groups_for(uint64_t n, uint64_t per)
{
    return (n + per - 1) / per;
}

/* Argument fields are 32-bit: every size must fit. */
static int fits(uint64_t v, const char *what, tq_err *e)
{
    if (v > UINT32_MAX)
        return tq_fail(e, TQ_EUNSUP, "GPU backend: %s of %llu is beyond 32-bit kernel arguments", what,
                       (unsigned long long)v);
    return 0;
}

static int dt_code(tq_dtype dt, uint *out, tq_err *e)
{
    switch (dt) {
    case TQ_DT_F32: *out = RTM_F32; return 0;
    case TQ_DT_F16: *out = RTM_F16; return 0;
    case TQ_DT_BF16: *out = RTM_BF16; return 0;
    default: return tq_fail(e, TQ_EUNSUP, "GPU backend: weights of type %s", tq_dtype_name(dt));
    }
}

/* ------------------------------------------------------------ operations */

/* The argument block of a matvec, with the output bias's byte count. */
static int mv_args(const rt_linear *l, rtm_mv_args *a, uint64_t *bias_n, tq_err *e)
{
    memset(a, 0, sizeof *a);
    if (fits(l->rows, "a matrix's rows", e) || fits(l->cols, "a matrix's columns", e) ||
        fits(l->ngroups, "groups per row", e) || fits(l->wpr, "words per row", e))
        return -1;
    a->rows = (uint)l->rows;
    a->cols = (uint)l->cols;
    a->rstep = l->rstep ? (uint)l->rstep : 1u;
    a->has_bias = l->bias != NULL;
    if (l->bias && dt_code(l->biasdt, &a->biasdt, e))
        return -1;
    *bias_n = l->bias ? ((l->rows - 1) * a->rstep + 1) * tq_dtype_size(l->biasdt) : 0;
    if (l->kind == RT_DENSE)
        return dt_code(l->wdt, &a->wdt, e);
    if (l->kind == RT_MXFP4)
        return l->cols % 32 ? tq_fail(e, TQ_EDATA, "MXFP4 rows of %llu values (not whole blocks of 32)",
                                      (unsigned long long)l->cols)
                            : 0;
    if (l->bits < 1 || l->bits > 8 || l->group == 0 || l->ngroups * l->group != l->cols)
        return tq_fail(e, TQ_EUNSUP, "GPU backend: %llu-bit rows in groups of %llu", (unsigned long long)l->bits,
                       (unsigned long long)l->group);
    a->bits = (uint)l->bits;
    a->group = (uint)l->group;
    a->ngroups = (uint)l->ngroups;
    a->wpr = (uint)l->wpr;
    if (dt_code(l->sdt, &a->sdt, e))
        return -1;
    if (l->kind == RT_AFFINE)
        return dt_code(l->zdt, &a->zdt, e);
    return dt_code(l->cdt, &a->cdt, e);
}

/* The CPU runtime's refusals of MXFP4 rows, before the kernel runs: a block scale 255 (E8M0
 * NaN), or 254 with a value of magnitude 2 or more (2·2^127 is not an f32). */
static int mxfp4_check(const rt_linear *l, uint64_t rstep, tq_err *e)
{
    uint64_t nb = l->cols / 32;
    for (uint64_t r = 0; r < l->rows; r++) {
        const uint8_t *sc = (const uint8_t *)l->scales + r * rstep * nb, *q = (const uint8_t *)l->w + r * rstep * nb * 16;
        for (uint64_t k = 0; k < nb; k++) {
            int bad = sc[k] == 255;
            for (int j = 0; !bad && sc[k] == 254 && j < 16; j++)
                bad = (q[k * 16 + j] & 7) >= 4 || ((q[k * 16 + j] >> 4) & 7) >= 4;
            if (bad)
                return tq_fail(e, TQ_EDATA, "row %llu: MXFP4 block %llu has scale %u (E8M0 NaN or beyond f32)",
                               (unsigned long long)r, (unsigned long long)k, (unsigned)sc[k]);
        }
    }
    return 0;
}

static int rotate_ex(rtm_be *b, const float *x, const void *signs, tq_dtype gdt, uint64_t cols, const rtm_expert *ex,
                     uint64_t rank, float *out, tq_err *e);

/* T(x ⊙ signs) in device memory, queued once per input vector: a kept rotation of the same
 * x by the same signs (pointer and type: weights do not change) is reused while nothing may
 * have written x since (rot_forget_*), else the least recently used slot is rotated into.
 * With ex (experts with signs of their own, ex->sg), the signs are those of the expert the
 * route chose at rank, read by id on the device; kept while the route's ids are not rewritten. */
static const float *rotation_ex(rtm_be *b, const float *x, const void *signs, tq_dtype gdt, uint64_t cols,
                                const rtm_expert *ex, uint64_t rank, tq_err *e)
{
    struct rot_entry *r = NULL;
    const uint32_t *ids = ex ? b->rid : NULL;
    rank = ex ? rank : 0;
    for (int i = 0; i < ROT_SLOTS; i++) {
        struct rot_entry *c = &b->rot[i];
        if (c->valid && c->x == x && c->signs == signs && c->gdt == gdt && c->cols == cols && c->ids == ids &&
            c->rank == rank) {
            c->used = ++b->rot_tick;
            b->rot_reused++;
            return c->out;
        }
        if (!r || (!c->valid && r->valid) || (c->valid == r->valid && c->used < r->used))
            r = c;
    }
    r->valid = 0;
    if (scratch(b, &r->out, &r->cap, cols, e))
        return NULL;
    if (rotate_ex(b, x, signs, gdt, cols, ex, rank, r->out, e))
        return NULL;
    *r = (struct rot_entry){x, signs, ids, rank, cols, gdt, r->out, r->cap, ++b->rot_tick, 1};
    return r->out;
}

static const float *rotation(rtm_be *b, const float *x, const void *signs, tq_dtype gdt, uint64_t cols, tq_err *e)
{
    return rotation_ex(b, x, signs, gdt, cols, NULL, 0, e);
}

uint64_t rtm_be_rotations_reused(const rtm_be *b)
{
    return b->rot_reused;
}

static void mv_q_args(const rtm_be *b, const rt_linear *l, const void *w, uint64_t stride, rtm_mv_args *a);
static int bind_aligned(const rtm_be *b, const void *p, uint64_t al);

/* mv_dense's flags: rows read 4 elements at a time as one vector when every row holds whole
 * chunks of 4 and starts 16 (f32) or 8 (f16, bf16) bytes aligned; stride: bytes between
 * experts (0: one matrix). */
static void mv_dense_args(const rtm_be *b, const rt_linear *l, const void *w, uint64_t stride, rtm_mv_args *a)
{
    uint64_t al = l->wdt == TQ_DT_F32 ? 16 : 8;
    a->flags = l->cols % 4 == 0 && stride % al == 0 && bind_aligned(b, w, al) ? RTM_MV_WIDE : 0;
}

/* mv_mxfp4's: a block's 16 bytes read as two 64-bit loads when the blocks are 8-byte aligned
 * (every block starts a multiple of 16 bytes after the first). */
static void mv_mxfp4_args(const rtm_be *b, const void *w, uint64_t stride, rtm_mv_args *a)
{
    a->flags = stride % 8 == 0 && bind_aligned(b, w, 8) ? RTM_MV_WIDE : 0;
}

int rtm_be_matvec(rtm_be *b, const rt_linear *l, const float *x, float *y, tq_err *e)
{
    rtm_mv_args a;
    uint64_t bias_n, groups = groups_for(l->rows, RTM_MV_ROWS);
    if (l->rows == 0)
        return 0;
    if (mv_args(l, &a, &bias_n, e))
        return -1;
    if (l->kind == RT_DENSE) {
        mv_dense_args(b, l, l->w, 0, &a);
        slot_in s[] = {{l->w, rt_linear_wbytes(l), WT}, {x, l->cols * 4, RD}, {y, l->rows * 4, WR}, {l->bias, bias_n, WT}};
        return run(b, RTM_K_mv_dense, s, 4, &a, sizeof a, groups, e);
    }
    if (l->kind == RT_MXFP4) {
        uint64_t nb = l->cols / 32, span = (l->rows - 1) * a.rstep + 1;
        if (mxfp4_check(l, a.rstep, e))
            return -1;
        mv_mxfp4_args(b, l->w, 0, &a);
        slot_in s[] = {{l->w, span * nb * 16, WT}, {x, l->cols * 4, RD}, {y, l->rows * 4, WR}, {l->scales, span * nb, WT},
                       {l->bias, bias_n, WT}};
        return run(b, RTM_K_mv_mxfp4, s, 5, &a, sizeof a, groups, e);
    }
    if (l->kind == RT_AFFINE) {
        /* each segment sums its own x (kernels.metal): no group sums pass; slot 5 unused */
        uint64_t sbytes = rt_linear_sbytes(l);
        mv_q_args(b, l, l->w, 0, &a);
        slot_in s[] = {{l->w, rt_linear_wbytes(l), WT}, {x, l->cols * 4, RD},   {y, l->rows * 4, WR},
                       {l->scales, sbytes, WT},         {l->biases, sbytes, WT}, {NULL, 0, RD},
                       {l->bias, bias_n, WT}};
        return run(b, RTM_K_mv_affine, s, 7, &a, sizeof a, groups, e);
    }
    /* TurboQuant: the activation gets the weights' rotation (signs, then block Hadamard); a
     * module quantized unrotated (rotation "none", all signs +1: l->norot) takes x as it is,
     * as runtime/kernels.c does */
    if (l->norot)
        return rtm_be_matvec_rotated(b, l, x, y, e);
    const float *xr = rotation(b, x, l->signs, l->gdt, l->cols, e);
    return xr ? rtm_be_matvec_rotated(b, l, xr, y, e) : -1;
}

int rtm_be_rotate(rtm_be *b, const float *x, const void *signs, tq_dtype gdt, uint64_t cols, float *out, tq_err *e)
{
    return rotate_ex(b, x, signs, gdt, cols, NULL, 0, out, e);
}

/* With ex: the signs of expert ids[rank] of the route, ex->sg_stride bytes apart from signs. */
static int rotate_ex(rtm_be *b, const float *x, const void *signs, tq_dtype gdt, uint64_t cols, const rtm_expert *ex,
                     uint64_t rank, float *out, tq_err *e)
{
    int m;
    uint64_t N, blk = tq_hadamard_block(cols);
    if (tq_hadamard_split(blk, &m, &N) != 0)
        return tq_fail(e, TQ_EDATA, "no Hadamard block for an input axis of %llu", (unsigned long long)cols);
    if (fits(cols, "a rotated length", e))
        return -1;
    rtm_had_args ha = {.cols = (uint)cols, .m = (uint)m, .N = (uint)N, .s = (float)(1.0 / sqrt((double)blk))};
    if (dt_code(gdt, &ha.gdt, e))
        return -1;
    uint64_t sn = cols * tq_dtype_size(gdt);
    if (ex) {
        if (fits(ex->sg_stride, "an expert's signs stride", e) || fits(ex->E, "an expert count", e))
            return -1;
        ha.rank = (uint)rank;
        ha.E = (uint)ex->E;
        ha.sstride = (uint)ex->sg_stride;
        sn += (ex->E - 1) * ex->sg_stride;
    }
    /* a block longer than threadgroup memory holds is transformed in tmp [cols] */
    const int dev = blk > RTM_HAD_TG;
    if (dev && scratch(b, &b->tmp, &b->cap_t, cols, e))
        return -1;
    slot_in sh[] = {{x, cols * 4, RD},
                    {signs, sn, WT},
                    {out, cols * 4, WR},
                    {dev ? b->tmp : NULL, dev ? cols * 4 : 0, WR},
                    {ex ? b->rid : NULL, ex ? b->route_K * 4 : 0, RD}};
    return run(b, RTM_K_hadamard, sh, 5, &ha, sizeof ha, cols / blk, e);
}

/* Whether p will lie a multiple of `al` bytes into the buffer bind() gives it: its offset in
 * a registered or region buffer (wrapped in place or copied whole), else 0 (a staged copy
 * starts its own buffer, or Metal's staging slot, 256-byte aligned). */
static int bind_aligned(const rtm_be *b, const void *p, uint64_t al)
{
    long i = reg_find(b, p);
    if (i >= 0 && (uint64_t)((const char *)p - b->reg[i].base) < b->reg[i].n)
        return (uint64_t)((const char *)p - b->reg[i].base) % al == 0;
    const void *base;
    uint64_t bn;
    if (b->region && b->region(b->user, p, &base, &bn) == 1 && (const char *)p >= (const char *)base &&
        (uint64_t)((const char *)p - (const char *)base) <= bn)
        return (uint64_t)((const char *)p - (const char *)base) % al == 0;
    return 1;
}

/* mv_tq's and mv_affine's precomputed group arithmetic (abi_internal.h): V codes per chunk of
 * RTM_MV_CW words; chunks inside groups when there is no padding code and group = V·2^gshift
 * (bits 2, 4 and 8: the kernel's constant-shift path); a lane's step of RTM_SIMD chunks in
 * groups. w: the rows' first word, stride: bytes between experts (0: one matrix). */
static void mv_q_args(const rtm_be *b, const rt_linear *l, const void *w, uint64_t stride, rtm_mv_args *a)
{
    uint64_t epw = 32 / l->bits, V = RTM_MV_CW * epw, step = RTM_SIMD * V;
    a->flags = 0;
    if (l->wpr % RTM_MV_CW == 0 && stride % (4 * RTM_MV_CW) == 0 && bind_aligned(b, w, 4 * RTM_MV_CW))
        a->flags |= RTM_MV_WIDE;
    a->gshift = 0;
    if ((l->bits == 2 || l->bits == 4 || l->bits == 8) && l->wpr * epw == l->cols && l->wpr % RTM_MV_CW == 0 && l->group % V == 0) {
        uint64_t q = l->group / V;
        uint32_t sh = 0;
        while (((uint64_t)1 << sh) < q)
            sh++;
        if (((uint64_t)1 << sh) == q) {
            a->flags |= RTM_MV_INGROUP;
            a->gshift = sh;
        }
    }
    a->gstep_q = (uint)(step / l->group);
    a->gstep_r = (uint)(step % l->group);
}

int rtm_be_matvec_rotated(rtm_be *b, const rt_linear *l, const float *xr, float *y, tq_err *e)
{
    rtm_mv_args a;
    uint64_t bias_n;
    if (l->rows == 0)
        return 0;
    if (mv_args(l, &a, &bias_n, e))
        return -1;
    if (l->kind != RT_TQ)
        return tq_fail(e, TQ_EUSAGE, "GPU backend: a rotated product of a matrix that is not TurboQuant");
    mv_q_args(b, l, l->w, 0, &a);
    slot_in s[] = {{l->w, rt_linear_wbytes(l), WT},
                   {xr, l->cols * 4, RD},
                   {y, l->rows * 4, WR},
                   {l->scales, rt_linear_sbytes(l), WT},
                   {l->codebook, ((uint64_t)1 << l->bits) * tq_dtype_size(l->cdt), WT},
                   {l->bias, bias_n, WT}};
    return run(b, RTM_K_mv_tq, s, 6, &a, sizeof a, groups_for(l->rows, RTM_MV_ROWS), e);
}

int rtm_be_rmsnorm(rtm_be *b, float *out, const float *x, const float *w, uint64_t n, uint64_t count, double eps,
                   tq_err *e)
{
    if (fits(n, "a norm's length", e))
        return -1;
    rtm_rms_args a = {(uint)n, w != NULL, (float)eps};
    slot_in s[] = {{x, n * count * 4, RD}, {out, n * count * 4, WR}, {w, w ? n * 4 : 0, WT}};
    return run(b, RTM_K_rmsnorm, s, 3, &a, sizeof a, count, e);
}

int rtm_be_rope(rtm_be *b, float *v, uint64_t count, uint64_t stride, uint64_t off, const rt_rope *rp, const float *cs,
                const float *sn, tq_err *e)
{
    if (rp->dim < 2 || count == 0)
        return 0;
    if (fits(stride, "a vector stride", e) || fits(off + rp->dim, "a rotary offset", e) ||
        fits(count * (rp->dim / 2), "rotary pairs", e))
        return -1;
    rtm_rope_args a = {(uint)count, (uint)stride, (uint)off, (uint)rp->dim, rp->interleaved != 0};
    uint64_t span = (count - 1) * stride + off + rp->dim;
    slot_in s[] = {{v, span * 4, WR}, {cs, rp->dim / 2 * 4, RD}, {sn, rp->dim / 2 * 4, RD}};
    return run(b, RTM_K_rope, s, 3, &a, sizeof a, groups_for(count * (rp->dim / 2), RTM_TG), e);
}

int rtm_be_attention(rtm_be *b, const rtm_att *t, tq_err *e)
{
    if (fits(t->pos + 1, "a context", e) || fits(t->kvd, "a cache row", e) || fits(t->att_stride, "a score row", e))
        return -1;
    rtm_att_args a = {(uint)t->hd, (uint)t->kvd, (uint)t->group, (uint)t->t0, (uint)t->pos, (uint)t->att_stride,
                      t->sinks != NULL, t->scale};
    uint64_t cache = (t->pos + 1) * t->kvd * 4;
    slot_in s[] = {{t->q, t->heads * t->hd * 4, RD},
                   {t->kc, cache, RD},
                   {t->vc, cache, RD},
                   {t->sinks, t->sinks ? t->heads * 4 : 0, WT},
                   {t->att, t->heads * t->att_stride * 4, WR},
                   {t->out, t->heads * t->hd * 4, WR}};
    return run(b, RTM_K_attention, s, 6, &a, sizeof a, t->heads, e);
}

int rtm_be_mla(rtm_be *b, const rtm_mla *m, tq_err *e)
{
    const rt_linear *kvb = m->kvb;
    if ((kvb->kind != RT_DENSE && kvb->kind != RT_AFFINE) || kvb->cols != m->kvl ||
        kvb->rows != m->heads * (m->nope + m->vh))
        return tq_fail(e, TQ_EUNSUP,
                       "GPU backend: latent attention with a kv_b_proj that is not a dense or affine [%llu, %llu]",
                       (unsigned long long)(m->heads * (m->nope + m->vh)), (unsigned long long)m->kvl);
    uint64_t W = m->kvl + m->rope;
    if (fits(m->pos + 1, "a context", e) || fits(W, "a latent row", e) || fits(m->att_stride, "a score row", e) ||
        fits(m->heads * (m->nope + m->vh) * m->kvl, "kv_b_proj", e))
        return -1;
    rtm_mla_args a = {.nope = (uint)m->nope, .rope = (uint)m->rope, .vh = (uint)m->vh, .kvl = (uint)m->kvl,
                      .pos = (uint)m->pos, .att_stride = (uint)m->att_stride, .scale = m->scale};
    rtm_mv_args mv;
    uint64_t bias_n, sbytes = kvb->kind == RT_AFFINE ? rt_linear_sbytes(kvb) : 0;
    if (mv_args(kvb, &mv, &bias_n, e))
        return -1;
    a.kvb_dt = mv.wdt;
    a.affine = kvb->kind == RT_AFFINE;
    a.bits = mv.bits, a.group = mv.group, a.ngroups = mv.ngroups, a.wpr = mv.wpr, a.sdt = mv.sdt, a.zdt = mv.zdt;
    if (scratch(b, &b->mla_qa, &b->cap_mqa, m->heads * m->kvl, e) ||
        scratch(b, &b->mla_ol, &b->cap_mol, m->heads * m->kvl, e))
        return -1;
    slot_in s[] = {{m->q, m->heads * (m->nope + m->rope) * 4, RD},
                   {m->kc, (m->pos + 1) * W * 4, RD},
                   {kvb->w, rt_linear_wbytes(kvb), WT},
                   {b->mla_qa, m->heads * m->kvl * 4, WR},
                   {m->att, m->heads * m->att_stride * 4, WR},
                   {b->mla_ol, m->heads * m->kvl * 4, WR},
                   {m->ao, m->heads * m->vh * 4, WR},
                   {a.affine ? kvb->scales : NULL, sbytes, WT},
                   {a.affine ? kvb->biases : NULL, sbytes, WT}};
    return run(b, RTM_K_mla, s, 9, &a, sizeof a, m->heads, e);
}

int rtm_be_deltanet(rtm_be *b, const rt_dn_step *d, tq_err *e)
{
    if (d->nk == 0 || d->nv % d->nk || d->dk == 0 || d->dv == 0 || d->K == 0 || d->dk > RTM_DN_MAXD ||
        d->dv > RTM_DN_MAXD)
        return 1;
    uint64_t Kd = d->nk * d->dk, Vd = d->nv * d->dv, C = 2 * Kd + Vd;
    if (fits(C * d->K, "a conv's weights", e) || fits(d->nv * d->dv * d->dk, "a DeltaNet state", e))
        return -1;
    rtm_dn_args a = {(uint)C, (uint)d->K, (uint)d->nk, (uint)d->dk, (uint)d->nv, (uint)d->dv, (uint)(d->nv / d->nk),
                     (float)(1.0 / sqrt((double)d->dk)), (float)d->eps};
    uint64_t st = d->K > 1 ? (d->K - 1) * C : 0;
    slot_in sc[] = {{d->mix, C * 4, RD}, {d->conv_w, C * d->K * 4, WT}, {st ? d->conv_state : NULL, st * 4, WR},
                    {d->co, C * 4, WR}};
    if (run(b, RTM_K_dn_conv, sc, 4, &a, sizeof a, groups_for(C, RTM_TG), e))
        return -1;
    slot_in s[] = {{d->co, C * 4, RD},          {d->z, Vd * 4, RD},        {d->bb, d->nv * 4, RD},
                   {d->aa, d->nv * 4, RD},      {d->A_log, d->nv * 4, WT}, {d->dt_bias, d->nv * 4, WT},
                   {d->gnorm, d->dv * 4, WT},   {d->ssm, Vd * d->dk * 4, WR}, {d->ao, Vd * 4, WR}};
    return run(b, RTM_K_dn_core, s, 9, &a, sizeof a, d->nv, e);
}

int rtm_be_softmax(rtm_be *b, float *x, uint64_t n, uint64_t count, uint64_t stride, tq_err *e)
{
    if (fits(n, "a softmax length", e) || fits(stride, "a softmax stride", e))
        return -1;
    rtm_softmax_args a = {(uint)n, (uint)stride};
    slot_in s[] = {{x, count ? ((count - 1) * stride + n) * 4 : 0, WR}};
    return run(b, RTM_K_softmax, s, 1, &a, sizeof a, count, e);
}

/* Queues the route kernel: ids and weights into b->rid / b->rw (device memory). */
static int route_queue(rtm_be *b, const rtm_route *r, tq_err *e)
{
    if (r->K == 0 || r->K > RTM_MAX_TOPK || r->K > r->E || r->n_group > RTM_MAX_GROUPS ||
        (r->n_group > 1 && (r->E % r->n_group || r->E / r->n_group < 2 || r->topk_group > r->n_group)) ||
        fits(r->E, "an expert count", e))
        return tq_fail(e, TQ_EUNSUP, "GPU backend: routing %llu of %llu experts in %llu groups",
                       (unsigned long long)r->K, (unsigned long long)r->E, (unsigned long long)r->n_group);
    uint64_t need = 2 * r->E + RTM_MAX_GROUPS + 2 * RTM_MAX_TOPK;
    if (scratch(b, &b->rs, &b->cap_rs, need, e))
        return -1;
    b->rw = b->rs + 2 * r->E + RTM_MAX_GROUPS;
    b->rid = (uint32_t *)(b->rw + RTM_MAX_TOPK);
    rtm_route_args a = {(uint)r->E, (uint)r->K, (uint)r->mode, r->norm_topk != 0, (uint)r->n_group, (uint)r->topk_group,
                        r->bias != NULL, r->route_scale};
    slot_in s[] = {{r->logits, r->E * 4, RD},
                   {r->bias, r->bias ? r->E * 4 : 0, WT},
                   {b->rs, (2 * r->E + RTM_MAX_GROUPS) * 4, WR},
                   {b->rid, r->K * 4, WR},
                   {b->rw, r->K * 4, WR}};
    if (run(b, RTM_K_route, s, 5, &a, sizeof a, 1, e))
        return -1;
    b->route_E = r->E;
    b->route_K = r->K;
    return 0;
}

int rtm_be_route(rtm_be *b, const rtm_route *r, uint64_t *ids, float *w, tq_err *e)
{
    if (route_queue(b, r, e) || rtm_be_sync(b, e))
        return -1;
    for (uint64_t k = 0; k < r->K; k++) {
        if (b->rid[k] >= r->E)
            return tq_fail(e, TQ_EDATA, "GPU backend: routing chose no expert for rank %llu (NaN router logits?)",
                           (unsigned long long)k);
        ids[k] = b->rid[k];
        w[k] = b->rw[k];
    }
    return 0;
}

int rtm_be_route_keep(rtm_be *b, const rtm_route *r, tq_err *e)
{
    return route_queue(b, r, e);
}

/* The MXFP4 refusals of mxfp4_check for every expert of x, once per matrix: the host cannot
 * check only the chosen expert, which it does not learn. */
static int mxfp4_check_all(rtm_be *b, const rtm_expert *x, uint64_t rstep, tq_err *e)
{
    for (size_t i = 0; i < b->n_checked; i++)
        if (b->checked[i] == x->part[0])
            return 0;
    rt_linear l = *x->t;
    for (uint64_t id = 0; id < x->E; id++) {
        l.w = (const uint8_t *)x->part[0] + id * x->stride[0];
        l.scales = (const uint8_t *)x->part[1] + id * x->stride[1];
        if (mxfp4_check(&l, rstep, e) != 0) {
            char why[sizeof e->msg];
            memcpy(why, e->msg, sizeof why);
            return tq_fail(e, e->code, "expert %llu: %s", (unsigned long long)id, why);
        }
    }
    void *grown = tq_grow(b->checked, &b->cap_checked, b->n_checked, sizeof *b->checked, e);
    if (!grown)
        return -1;
    b->checked = grown;
    b->checked[b->n_checked++] = x->part[0];
    return 0;
}

int rtm_be_matvec_ex(rtm_be *b, const rtm_expert *x, uint64_t rank, const float *in, float *y, tq_err *e)
{
    const rt_linear *l = x->t;
    rtm_mvx_args a;
    uint64_t bias_n;
    memset(&a, 0, sizeof a);
    if (l->rows == 0)
        return 0;
    if (!b->rid || rank >= b->route_K || x->E != b->route_E)
        return tq_fail(e, TQ_EUSAGE, "GPU backend: expert rank %llu of a route of %llu (of %llu experts) not queued",
                       (unsigned long long)rank, (unsigned long long)b->route_K, (unsigned long long)b->route_E);
    if (mv_args(l, &a.mv, &bias_n, e))
        return -1;
    /* each part's slot spans every expert's: E - 1 strides and one expert's bytes */
    uint64_t nb = l->cols / 32, span = (l->rows - 1) * a.mv.rstep + 1;
    uint64_t n[4] = {l->kind == RT_MXFP4 ? span * nb * 16 : rt_linear_wbytes(l),
                     l->kind == RT_MXFP4 ? span * nb : l->kind == RT_DENSE ? 0 : rt_linear_sbytes(l),
                     l->kind == RT_AFFINE ? rt_linear_sbytes(l) : 0, bias_n};
    const void *p[4];
    uint64_t all[4];
    for (int i = 0; i < 4; i++) {
        p[i] = n[i] ? x->part[i] : NULL;
        uint64_t st = n[i] ? x->stride[i] : 0;
        if (n[i] && (!p[i] || fits(st, "an expert stride", e)))
            return p[i] ? -1 : tq_fail(e, TQ_EUSAGE, "GPU backend: an expert matrix without part %d", i);
        a.stride[i] = (uint)st;
        all[i] = n[i] ? (x->E - 1) * st + n[i] : 0;
    }
    if (fits(x->E, "an expert count", e))
        return -1;
    a.rank = (uint)rank;
    a.E = (uint)x->E;
    uint64_t groups = groups_for(l->rows, RTM_MV_ROWS);
    slot_in ids = {b->rid, b->route_K * 4, RD};
    if (l->kind == RT_DENSE) {
        mv_dense_args(b, l, p[0], x->stride[0], &a.mv);
        slot_in s[] = {{p[0], all[0], WT}, {in, l->cols * 4, RD}, {y, l->rows * 4, WR}, {p[3], all[3], WT}, ids};
        return run(b, RTM_K_mv_dense_ex, s, 5, &a, sizeof a, groups, e);
    }
    if (l->kind == RT_MXFP4) {
        if (mxfp4_check_all(b, x, a.mv.rstep, e))
            return -1;
        mv_mxfp4_args(b, p[0], x->stride[0], &a.mv);
        slot_in s[] = {{p[0], all[0], WT}, {in, l->cols * 4, RD}, {y, l->rows * 4, WR}, {p[1], all[1], WT},
                       {p[3], all[3], WT}, ids};
        return run(b, RTM_K_mv_mxfp4_ex, s, 6, &a, sizeof a, groups, e);
    }
    if (l->kind == RT_AFFINE) {
        mv_q_args(b, l, p[0], x->stride[0], &a.mv); /* no group sums pass: see rtm_be_matvec */
        slot_in s[] = {{p[0], all[0], WT}, {in, l->cols * 4, RD}, {y, l->rows * 4, WR}, {p[1], all[1], WT},
                       {p[2], all[2], WT}, {NULL, 0, RD},         {p[3], all[3], WT},   ids};
        return run(b, RTM_K_mv_affine_ex, s, 8, &a, sizeof a, groups, e);
    }
    /* TurboQuant: the rotation, where the layer's experts share the signs, does not depend on
     * the id, and is queued once for all of them (rotation()); none for an unrotated module.
     * Experts with signs and a codebook of their own (HF per-expert names, stacked at load):
     * the chosen expert's, found by id on the device like its other parts. */
    const rtm_expert *own = x->sg ? x : NULL;
    const float *xr = l->norot ? in : rotation_ex(b, in, own ? x->sg : l->signs, l->gdt, l->cols, own, rank, e);
    if (!xr)
        return -1;
    const void *cb = x->cb ? x->cb : l->codebook;
    uint64_t cbn = ((uint64_t)1 << l->bits) * tq_dtype_size(l->cdt);
    if (x->cb) {
        if (fits(x->cb_stride, "an expert's codebook stride", e))
            return -1;
        a.cstride = (uint)x->cb_stride;
        cbn += (x->E - 1) * x->cb_stride;
    }
    mv_q_args(b, l, p[0], x->stride[0], &a.mv); /* each expert's rows 8-byte aligned too */
    slot_in s[] = {{p[0], all[0], WT},
                   {xr, l->cols * 4, RD},
                   {y, l->rows * 4, WR},
                   {p[1], all[1], WT},
                   {cb, cbn, WT},
                   {p[3], all[3], WT},
                   ids};
    return run(b, RTM_K_mv_tq_ex, s, 7, &a, sizeof a, groups, e);
}

int rtm_be_axpy_rank(rtm_be *b, float *y, const float *x, uint64_t rank, uint64_t n, tq_err *e)
{
    if (fits(n, "a vector length", e))
        return -1;
    if (!b->rw || rank >= b->route_K)
        return tq_fail(e, TQ_EUSAGE, "GPU backend: the weight of expert rank %llu was not routed",
                       (unsigned long long)rank);
    rtm_axpy_args a = {(uint)n, 2u, 0.0f};
    slot_in s[] = {{y, n * 4, WR}, {x, n * 4, RD}, {b->rw + rank, 4, RD}};
    return run(b, RTM_K_axpy, s, 3, &a, sizeof a, groups_for(n, RTM_TG), e);
}

int rtm_be_act(rtm_be *b, float *g, const float *u, uint64_t n, int clamped, float alpha, float limit, tq_err *e)
{
    if (fits(n, "an MLP width", e))
        return -1;
    rtm_act_args a = {(uint)n, clamped != 0, alpha, limit};
    slot_in s[] = {{g, n * 4, WR}, {u, n * 4, RD}};
    return run(b, RTM_K_act, s, 2, &a, sizeof a, groups_for(n, RTM_TG), e);
}

int rtm_be_axpy(rtm_be *b, float *y, const float *x, float av, const float *sa, uint64_t n, tq_err *e)
{
    if (fits(n, "a vector length", e))
        return -1;
    rtm_axpy_args a = {(uint)n, sa != NULL, av};
    slot_in s[] = {{y, n * 4, WR}, {x, n * 4, RD}, {sa, sa ? 4 : 0, RD}};
    return run(b, RTM_K_axpy, s, 3, &a, sizeof a, groups_for(n, RTM_TG), e);
}

int rtm_be_gate(rtm_be *b, float *y, const float *g, uint64_t n, int kind, tq_err *e)
{
    if (fits(n, "a vector length", e))
        return -1;
    rtm_gate_args a = {(uint)n, (uint)kind};
    slot_in s[] = {{y, n * 4, WR}, {kind == 2 ? NULL : g, kind == 2 ? 0 : n * 4, RD}};
    return run(b, RTM_K_gate, s, 2, &a, sizeof a, groups_for(n, RTM_TG), e);
}

int rtm_be_unary(rtm_be *b, float *y, const float *x, uint64_t n, int kind, tq_err *e)
{
    if (fits(n, "a vector length", e))
        return -1;
    rtm_gate_args a = {(uint)n, (uint)kind};
    slot_in s[] = {{y, n * 4, WR}, {x, n * 4, RD}};
    return run(b, RTM_K_unary, s, 2, &a, sizeof a, groups_for(n, RTM_TG), e);
}

int rtm_be_gather(rtm_be *b, float *dst, const float *src, uint64_t blocks, uint64_t len, uint64_t stride, uint64_t off,
                  tq_err *e)
{
    if (blocks == 0 || len == 0)
        return 0;
    if (fits(blocks * len, "a copy", e) || fits(stride, "a copy stride", e) || fits(off, "a copy offset", e))
        return -1;
    rtm_gather_args a = {(uint)blocks, (uint)len, (uint)stride, (uint)off};
    slot_in s[] = {{dst, blocks * len * 4, WR}, {src, ((blocks - 1) * stride + off + len) * 4, RD}};
    return run(b, RTM_K_gather, s, 2, &a, sizeof a, groups_for(blocks * len, RTM_TG), e);
}

#ifndef TQ_HAVE_METAL
int rtm_metal_open(rtm_dev **d, tq_err *e)
{
    *d = NULL;
    return tq_fail(e, TQ_EUSAGE,
                   "this build has no Metal backend (it is built on macOS with Xcode's metal compiler); use "
                   "--backend cpu");
}
#endif
