/* runtime/metal/shim.c — the shim device: kernels.metal compiled as C and run on the CPU with
 * Metal's memory rules, so that make check runs the GPU kernels and the backend's host logic
 * on any machine (docs/metal.md, The shim).
 *
 * Like a Metal command queue, dispatch only records the kernel, its buffers and a copy of
 * its argument block; sync runs the queue in order (each dispatch's threadgroups in a shuffled
 * order, each threadgroup's RTM_TG threads as fibers meeting at real barriers, below). Like
 * newBufferWithBytesNoCopy, wrap uses memory in place, and only memory whose start and length
 * are whole 16 KiB pages (RTM_PAGE, Apple silicon's page, which Metal requires there); any other
 * region it copies, as Metal's fallback newBufferWithBytes would, and says so (returns 1: the
 * backend counts it, rtm_counts.wrap_copies). Like a staging buffer, stage copies the bytes and
 * the copy lives until the next sync. A host that reads results before sync, or hands kernels memory
 * to write that alloc did not make, gets wrong results here as it would on the GPU. */
#include "runtime/metal/rtm_internal.h"
#include "formats/formats.h"
#include "common/platform.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int rtm_shim_reverse = 0;
int rtm_shim_ftz = 0;
#if defined(TQ_SHIM_FMA)
const char *const rtm_shim_fp = "fma"; /* built with -ffp-contract=fast (tests/cli/metal-shim-modes.sh) */
#else
const char *const rtm_shim_fp = "ieee";
#endif

/* ------------------------------------------------------------ threads as fibers
 * One threadgroup runs at a time, its RTM_TG threads as fibers on this OS thread. A thread
 * runs until a barrier (or a step of a collective) or its end, then the next thread runs;
 * when every thread has stopped the scheduler checks that all stopped at the same barrier
 * (else the dispatch fails naming the kernel: on a GPU it hangs) and releases them. Threads
 * run in index order, or from the last to the first when rtm_shim_reverse is set, so a read
 * of another thread's write with no barrier between sees the old value in one of the two.
 *
 * A switch is tq_shim_swap below on x86-64 and arm64: it saves the callee-saved registers
 * on the running stack, stores the stack pointer, loads the other's and pops its registers
 * (no system call, unlike swapcontext, which sets the signal mask on every switch; the
 * floating-point control registers are shared by all fibers, and set only around a whole
 * sync). Other machines use ucontext. Switches are announced to ASan (its fake stacks and
 * stack bounds) and to ThreadSanitizer, where each thread is a fiber and only the barriers,
 * the collectives' meetings and the start and end of a threadgroup order them: a read of
 * another thread's write between two barriers is a reported race (make check-tsan). */
#define SHIM_TGMEM 32768u /* Metal's threadgroup memory limit */
#define SHIM_POISON 0xFFA5A5A5u /* a NaN as a float, a huge index as a uint */

#if defined(__SANITIZE_ADDRESS__)
#define SHIM_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define SHIM_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHIM_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define SHIM_TSAN 1
#endif
#endif

/* Each fiber's stack: the kernels' frames are small; the sanitizers' reports and larger
 * frames need more. */
#if SHIM_ASAN || SHIM_TSAN
#define SHIM_STACK (128u * 1024u)
#else
#define SHIM_STACK (32u * 1024u)
#endif

#if SHIM_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define SHIM_NO_ASAN __attribute__((no_sanitize_address))
#else
#define SHIM_NO_ASAN
#endif
#if SHIM_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define SHIM_TSAN_NO_SYNC 1u /* __tsan_switch_to_fiber_no_sync */
/* The scheduler's own bookkeeping (which thread waits where) is shared by all fibers on
 * purpose and is not what the race check is about. */
#define SHIM_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define SHIM_NO_TSAN
#endif

#if (defined(__x86_64__) || defined(__aarch64__)) && (defined(__ELF__) || defined(__APPLE__))
#define SHIM_ASM 1
#if defined(__APPLE__)
#define SHIM_ASM_BEGIN ".pushsection __TEXT,__text,regular,pure_instructions\n.p2align 4\n.globl tq_shim_swap\n.private_extern tq_shim_swap\ntq_shim_swap:\n"
#define SHIM_ASM_END ".popsection\n"
#else
#define SHIM_ASM_BEGIN ".pushsection .text\n.p2align 4\n.globl tq_shim_swap\n.hidden tq_shim_swap\n.type tq_shim_swap, %function\ntq_shim_swap:\n"
#define SHIM_ASM_END ".size tq_shim_swap, .-tq_shim_swap\n.popsection\n"
#endif
/* tq_shim_swap(&from_sp, to_sp): push the callee-saved registers of the System V x86-64 ABI
 * (rbx, rbp, r12-r15) or of AAPCS64 (x19-x28, fp, lr, d8-d15), store sp in *from_sp, switch
 * to to_sp, pop that stack's registers and return where it was suspended. */
void tq_shim_swap(void **from_sp, void *to_sp) __asm__("tq_shim_swap");
#if defined(__x86_64__)
__asm__(SHIM_ASM_BEGIN
        "pushq %rbp\n pushq %rbx\n pushq %r12\n pushq %r13\n pushq %r14\n pushq %r15\n"
        "movq %rsp, (%rdi)\n movq %rsi, %rsp\n"
        "popq %r15\n popq %r14\n popq %r13\n popq %r12\n popq %rbx\n popq %rbp\n"
        "ret\n" SHIM_ASM_END);
#else
__asm__(SHIM_ASM_BEGIN
        "sub sp, sp, #160\n"
        "stp x19, x20, [sp, #0]\n stp x21, x22, [sp, #16]\n stp x23, x24, [sp, #32]\n"
        "stp x25, x26, [sp, #48]\n stp x27, x28, [sp, #64]\n stp x29, x30, [sp, #80]\n"
        "stp d8, d9, [sp, #96]\n stp d10, d11, [sp, #112]\n stp d12, d13, [sp, #128]\n stp d14, d15, [sp, #144]\n"
        "mov x9, sp\n str x9, [x0]\n mov sp, x1\n"
        "ldp x19, x20, [sp, #0]\n ldp x21, x22, [sp, #16]\n ldp x23, x24, [sp, #32]\n"
        "ldp x25, x26, [sp, #48]\n ldp x27, x28, [sp, #64]\n ldp x29, x30, [sp, #80]\n"
        "ldp d8, d9, [sp, #96]\n ldp d10, d11, [sp, #112]\n ldp d12, d13, [sp, #128]\n ldp d14, d15, [sp, #144]\n"
        "add sp, sp, #160\n ret\n" SHIM_ASM_END);
#endif
typedef struct shim_ctx {
    void *sp;
} shim_ctx;
#else
#include <ucontext.h>
typedef struct shim_ctx {
    ucontext_t uc;
} shim_ctx;
#endif

typedef struct shim_thr {
    shim_ctx ctx;
    int state;     /* 0 runnable, 1 at a barrier, 2 finished */
    int line;      /* the barrier's line in kernels.metal, -1 for a collective's step */
    unsigned nbar; /* barriers and collective steps passed */
    size_t tgoff;
#if SHIM_TSAN
    void *tsan;
#endif
} shim_thr;

typedef struct shim_sched {
    shim_ctx main;
    const void *main_bottom; /* the OS thread's stack, for ASan */
    size_t main_size;
    shim_thr t[RTM_TG];
    unsigned char *stacks; /* RTM_TG stacks of SHIM_STACK bytes, each above a guard page */
    size_t stack_step, map_size;
    int dirty_stacks; /* a threadgroup was abandoned mid-run (ASan: its frames stay poisoned) */
    _Alignas(16) unsigned char tg[SHIM_TGMEM];
    size_t tg_hi; /* bytes of tg handed out since it was last poisoned */
    int tg_over;
    uint cur;
    void (*fn)(void *const *s, const void *a, uint tgid);
    void *const *slot;
    const void *args;
    uint g;
    /* The collectives' exchange slots, two sets used alternately (a thread's collective count
     * picks one), so a fast thread's next collective does not overwrite a slot a slower
     * thread has still to read. */
    float xf[2][RTM_TG];
    uint xu[2][RTM_TG];
    uint xdone[2][RTM_TG / 32]; /* the meeting (thread's nbar after it) whose results xf holds */
#if SHIM_TSAN
    void *tsan_main;
    char sync_start, sync_end, sync_bar[2], sync_simd[2][RTM_TG / 32];
#endif
} shim_sched;

static _Thread_local shim_sched *shim_run; /* the scheduler running a group, for the kernels' calls */

static unsigned char *shim_stack(shim_sched *r, uint i)
{
    return r->stacks + (size_t)i * r->stack_step + (r->stack_step - SHIM_STACK);
}

/* Switch from thread `from` (RTM_TG: the scheduler) to `to`; `from_exits`: it never resumes. */
SHIM_NO_ASAN SHIM_NO_TSAN static void shim_switch(shim_sched *r, uint from, uint to, int from_exits)
{
    shim_ctx *fc = from == RTM_TG ? &r->main : &r->t[from].ctx, *tc = to == RTM_TG ? &r->main : &r->t[to].ctx;
#if SHIM_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(from_exits ? NULL : &fake, to == RTM_TG ? r->main_bottom : shim_stack(r, to),
                                   to == RTM_TG ? r->main_size : SHIM_STACK);
#else
    (void)from_exits;
#endif
#if SHIM_TSAN
    __tsan_switch_to_fiber(to == RTM_TG ? r->tsan_main : r->t[to].tsan, SHIM_TSAN_NO_SYNC);
#endif
#if SHIM_ASM
    tq_shim_swap(&fc->sp, tc->sp);
#else
    swapcontext(&fc->uc, &tc->uc);
#endif
#if SHIM_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

uint rtm_shim_lid(void)
{
    return shim_run->cur;
}

/* The thread to run after `me` in this round (RTM_TG before the first): the next runnable
 * one in index order, or in reverse order; RTM_TG when the round is over. A stopping thread
 * switches straight to it, not through the scheduler: one switch per thread and round. */
SHIM_NO_TSAN static uint shim_next(const shim_sched *r, uint me)
{
    if (!rtm_shim_reverse) {
        for (uint i = me == RTM_TG ? 0 : me + 1; i < RTM_TG; i++)
            if (r->t[i].state == 0)
                return i;
    } else {
        for (uint i = me == RTM_TG ? RTM_TG : me; i-- > 0;)
            if (r->t[i].state == 0)
                return i;
    }
    return RTM_TG;
}

/* Leave thread me (already marked stopped) for the next of the round, or the scheduler. */
SHIM_NO_TSAN static void shim_yield(shim_sched *r, uint me, int exits)
{
    uint to = shim_next(r, me);
    if (to != RTM_TG)
        r->cur = to;
    shim_switch(r, me, to, exits);
}

/* Wait at a barrier (line > 0) or a collective's meeting (line -1, simd group `sg`). */
SHIM_NO_TSAN static void shim_wait(int line, uint sg)
{
    shim_sched *r = shim_run;
    uint me = r->cur;
    shim_thr *t = &r->t[me];
    t->state = 1;
    t->line = line;
#if SHIM_TSAN
    /* A barrier orders the whole group; a collective only its simd group. Two objects used
     * alternately, so a thread already past the next barrier adds nothing to this one. */
    void *sync = line < 0 ? (void *)&r->sync_simd[t->nbar & 1u][sg] : (void *)&r->sync_bar[t->nbar & 1u];
    __tsan_release(sync);
#else
    (void)sg;
#endif
    t->nbar++;
    shim_yield(r, me, 0);
#if SHIM_TSAN
    __tsan_acquire(sync);
#endif
}

void rtm_shim_barrier(int line)
{
    shim_wait(line, 0);
}

SHIM_NO_TSAN void *rtm_shim_tgmem(size_t n)
{
    shim_sched *r = shim_run;
    shim_thr *t = &r->t[r->cur];
    size_t off = (t->tgoff + 15u) & ~(size_t)15u;
    if (n > SHIM_TGMEM - off) {
        r->tg_over = 1;
        return r->tg;
    }
    t->tgoff = off + n;
    if (t->tgoff > r->tg_hi)
        r->tg_hi = t->tgoff;
    return r->tg + off;
}

SHIM_NO_ASAN SHIM_NO_TSAN __attribute__((noreturn, used)) static void shim_entry(void)
{
    shim_sched *r = shim_run;
#if SHIM_ASAN
    const void *b;
    size_t n;
    __sanitizer_finish_switch_fiber(NULL, &b, &n);
    if (!r->main_bottom) { /* the first switch of a sync comes from the scheduler's stack */
        r->main_bottom = b;
        r->main_size = n;
    }
#endif
#if SHIM_TSAN
    __tsan_acquire(&r->sync_start);
#endif
    r->fn(r->slot, r->args, r->g);
    r = shim_run;
#if SHIM_TSAN
    __tsan_release(&r->sync_end);
#endif
    r->t[r->cur].state = 2;
    shim_yield(r, r->cur, 1);
    abort(); /* never resumed */
}

/* Make thread i's fiber start at shim_entry. */
SHIM_NO_TSAN static void shim_fiber_init(shim_sched *r, uint i)
{
    unsigned char *stack = shim_stack(r, i);
#if SHIM_ASM
    uintptr_t top = ((uintptr_t)stack + SHIM_STACK) & ~(uintptr_t)15;
#if defined(__x86_64__)
    /* r15 r14 r13 r12 rbx rbp, the return address (shim_entry), and a null one above it so
     * that shim_entry starts with the stack alignment of a called function. */
    void **f = (void **)(top - 8 * sizeof(void *));
    memset(f, 0, 8 * sizeof(void *));
    f[6] = (void *)(uintptr_t)shim_entry;
#else
    /* x19..x28, fp = 0, lr = shim_entry, d8..d15 */
    void **f = (void **)(top - 160);
    memset(f, 0, 160);
    f[11] = (void *)(uintptr_t)shim_entry;
#endif
    r->t[i].ctx.sp = f;
#else
    ucontext_t *uc = &r->t[i].ctx.uc;
    getcontext(uc);
    uc->uc_stack.ss_sp = stack;
    uc->uc_stack.ss_size = SHIM_STACK;
    uc->uc_link = NULL;
    makecontext(uc, shim_entry, 0);
#endif
}

float rtm_shim_h2f(uint16_t h)
{
    return tq_f16_to_f32(h);
}

/* A value one thread writes to threadgroup memory in a phase (`if (lid == 0) sh[0] = ...`) and
 * every thread reads after the barrier is written before it is read, but gcc cannot see that
 * through the barrier and warns at some optimisation levels. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "runtime/metal/kernels.metal"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* The butterfly over one simd group's published values, in place: at mask m = 1, 2, ...
 * every lane's value becomes (own, lane l^m's) combined, all lanes from the values before the
 * step (what simd_shuffle_xor returns). Run once per meeting, by the group's first lane to
 * resume; the others read their result. */
SHIM_NO_TSAN static void shim_butterfly(float *v, uint *i, int op, uint width)
{
    float nv[32];
    uint ni[32];
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
        memcpy(v, nv, sizeof nv);
        if (op == 2)
            memcpy(i, ni, sizeof ni);
    }
}

/* After a meeting: the first lane of simd group sg to run computes the group's results. */
SHIM_NO_TSAN static void shim_simd_settle(shim_sched *r, uint par, uint sg, uint s, int has_idx, int op, uint width)
{
    uint gen = r->t[r->cur].nbar;
    if (r->xdone[par][sg] == gen)
        return;
    r->xdone[par][sg] = gen;
    uint dummy[32] = {0};
    shim_butterfly(r->xf[par] + s, has_idx ? r->xu[par] + s : dummy, op, width);
}

void rtm_shim_simd(float *buf, uint *idx, int op, uint width)
{
    shim_sched *r = shim_run;
    uint l = rtm_shim_lid(), s = l & ~31u, sg = l / 32u, par = r->t[l].nbar & 1u;
    r->xf[par][l] = buf[l];
    if (idx)
        r->xu[par][l] = idx[l];
    shim_wait(-1, sg);
    shim_simd_settle(r, par, sg, s, idx != NULL, op, width);
    buf[l] = r->xf[par][l];
    if (idx)
        idx[l] = r->xu[par][l];
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
static void run_hadamard(void *const *s, const void *a, uint g)
{
    rtm_k_hadamard(s[0], s[1], s[2], s[3], s[4], a, g);
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
static void run_mv_dense_ex(void *const *s, const void *a, uint g)
{
    rtm_k_mv_dense_ex(s[0], s[1], s[2], s[3], s[4], a, g);
}
static void run_mv_mxfp4_ex(void *const *s, const void *a, uint g)
{
    rtm_k_mv_mxfp4_ex(s[0], s[1], s[2], s[3], s[4], s[5], a, g);
}
static void run_mv_tq_ex(void *const *s, const void *a, uint g)
{
    rtm_k_mv_tq_ex(s[0], s[1], s[2], s[3], s[4], s[5], s[6], a, g);
}
static void run_mv_affine_ex(void *const *s, const void *a, uint g)
{
    rtm_k_mv_affine_ex(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], a, g);
}
static void run_mla(void *const *s, const void *a, uint g)
{
    rtm_k_mla(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], a, g);
}

static void run_dn_conv(void *const *s, const void *a, uint g)
{
    rtm_k_dn_conv(s[0], s[1], s[2], s[3], a, g);
}
static void run_dn_core(void *const *s, const void *a, uint g)
{
    rtm_k_dn_core(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], a, g);
}

#define SHIM_FN_(name, nbuf) run_##name,
static const shim_fn shim_fns[RTM_K_COUNT] = {RTM_KERNELS(SHIM_FN_)};

#define KNAME_(name, nbuf) "rtm_k_" #name,
const char *const rtm_kernel_names[RTM_K_COUNT] = {RTM_KERNELS(KNAME_)};
#define KSLOTS_(name, nbuf) nbuf,
const int rtm_kernel_slots[RTM_K_COUNT] = {RTM_KERNELS(KSLOTS_)};

/* ------------------------------------------------------------ the queue */
#define SHIM_MAX_SLOTS 10

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
    const void **inplace; /* handles of regions wrapped in place: release leaves their memory */
    size_t n_inplace, cap_inplace;
    shim_sched *sched;
} shim_dev;

static int shim_wrap(rtm_dev *d, const void *p, uint64_t n, void **h, tq_err *e)
{
    shim_dev *s = (shim_dev *)d;
    if (n > 0 && (uintptr_t)p % RTM_PAGE == 0 && n % RTM_PAGE == 0) { /* no copy: the caller's pages */
        void *grown = tq_grow(s->inplace, &s->cap_inplace, s->n_inplace, sizeof *s->inplace, e);
        if (!grown)
            return -1;
        s->inplace = grown;
        s->inplace[s->n_inplace++] = p;
        *h = (void *)p;
        return 0;
    }
    void *c = tq_malloc(n ? n : 1, e);
    if (!c)
        return -1;
    memcpy(c, p, n);
    *h = c;
    return 1; /* a copy, as Metal makes where newBufferWithBytesNoCopy refuses the region */
}

static int shim_alloc(rtm_dev *d, uint64_t n, void **h, void **host, tq_err *e)
{
    (void)d;
    void *c = NULL; /* page-aligned like a Metal buffer's contents (expert blocks are read into it with O_DIRECT) */
    if (n > SIZE_MAX - RTM_PAGE || posix_memalign(&c, RTM_PAGE, n ? (size_t)n : 1) != 0)
        return tq_fail(e, TQ_ENOMEM, "shim: out of memory (%llu bytes)", (unsigned long long)n);
    memset(c, 0, n ? (size_t)n : 1);
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
    shim_dev *s = (shim_dev *)d;
    for (size_t i = 0; i < s->n_inplace; i++)
        if (s->inplace[i] == h) {
            s->inplace[i] = s->inplace[--s->n_inplace];
            return;
        }
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
SHIM_NO_TSAN static int shim_group(shim_sched *r, const shim_cmd *c, uint g, tq_err *e)
{
    for (size_t i = 0; i < r->tg_hi; i += 4) {
        uint32_t p = SHIM_POISON;
        memcpy(r->tg + i, &p, 4);
    }
    r->tg_hi = 0;
    r->tg_over = 0;
    r->fn = shim_fns[c->k];
    r->slot = c->slot;
    r->args = c->args;
    r->g = g;
#if SHIM_ASAN
    if (r->dirty_stacks) /* frames of threads that never returned */
        __asan_unpoison_memory_region(r->stacks, r->map_size);
    r->dirty_stacks = 0;
#endif
    for (uint i = 0; i < RTM_TG; i++) {
        shim_thr *t = &r->t[i];
        t->state = 0;
        t->tgoff = 0;
        t->nbar = 0;
        shim_fiber_init(r, i);
    }
    memset(r->xdone, 0xFF, sizeof r->xdone);
#if SHIM_TSAN
    __tsan_release(&r->sync_start);
#endif
    const char *kn = rtm_kernel_names[c->k];
    int rc = 0;
    for (;;) {
        uint first_run = shim_next(r, RTM_TG);
        if (first_run != RTM_TG) {
            r->cur = first_run;
            shim_switch(r, RTM_TG, first_run, 0);
        }
        uint at = 0, done = 0, first = RTM_TG;
        for (uint i = 0; i < RTM_TG && rc == 0; i++) {
            shim_thr *t = &r->t[i];
            if (t->state == 2) {
                done++;
                continue;
            }
            at++;
            if (first == RTM_TG)
                first = i;
            if (t->line != r->t[first].line || t->nbar != r->t[first].nbar)
                rc = tq_fail(e, TQ_EUSAGE,
                             "shim: kernel %s, threadgroup %u: threads %u and %u wait at different barriers "
                             "(kernels.metal lines %d and %d, their barriers number %u and %u; line -1 is a simd "
                             "collective): on a GPU this hangs",
                             kn, g, first, i, r->t[first].line, t->line, r->t[first].nbar, t->nbar);
        }
        if (rc == 0 && r->tg_over)
            rc = tq_fail(e, TQ_EUSAGE, "shim: kernel %s uses more than %u bytes of threadgroup memory", kn,
                         SHIM_TGMEM);
        if (rc == 0 && at && done)
            rc = tq_fail(e, TQ_EUSAGE,
                         "shim: kernel %s, threadgroup %u: the barrier at kernels.metal line %d (-1: a simd "
                         "collective) is reached by %u of %u threads (the others returned): on a GPU this hangs",
                         kn, g, r->t[first].line, at, (unsigned)RTM_TG);
        if (rc || at == 0)
            break;
        for (uint i = 0; i < RTM_TG; i++)
            r->t[i].state = 0;
    }
    if (rc)
        r->dirty_stacks = 1;
#if SHIM_TSAN
    __tsan_acquire(&r->sync_end);
#endif
    return rc;
}

/* Flush-to-zero mode (rtm_shim_ftz, docs/metal.md, A4): subnormal inputs read as zero and
 * subnormal results become zero during a sync, as a GPU that flushes them would compute:
 * MXCSR's FTZ and DAZ bits on x86-64, FPCR.FZ on arm64. Returns -1 where neither exists. */
static int shim_fp_enter(int ftz, unsigned long long *old)
{
#if defined(__x86_64__)
    unsigned m;
    __asm__ volatile("stmxcsr %0" : "=m"(m));
    *old = m;
    if (ftz) {
        m |= 0x8040u; /* FTZ (bit 15), DAZ (bit 6) */
        __asm__ volatile("ldmxcsr %0" : : "m"(m));
    }
    return 0;
#elif defined(__aarch64__)
    unsigned long long c;
    __asm__ volatile("mrs %0, fpcr" : "=r"(c));
    *old = c;
    if (ftz)
        __asm__ volatile("msr fpcr, %0" : : "r"(c | (1ull << 24))); /* FZ */
    return 0;
#else
    *old = 0;
    return ftz ? -1 : 0;
#endif
}

static void shim_fp_leave(unsigned long long old)
{
#if defined(__x86_64__)
    unsigned m = (unsigned)old;
    __asm__ volatile("ldmxcsr %0" : : "m"(m));
#elif defined(__aarch64__)
    __asm__ volatile("msr fpcr, %0" : : "r"(old));
#else
    (void)old;
#endif
}

static int shim_sync(rtm_dev *d, tq_err *e)
{
    shim_dev *s = (shim_dev *)d;
    int rc = 0;
    unsigned long long fp_old;
    if (shim_fp_enter(rtm_shim_ftz, &fp_old) != 0)
        rc = tq_fail(e, TQ_EUSAGE, "shim: flush-to-zero mode is implemented for x86-64 and arm64 only");
    shim_run = s->sched;
    s->sched->main_bottom = NULL; /* the calling thread's stack, learnt at the first switch */
#if SHIM_TSAN
    s->sched->tsan_main = __tsan_get_current_fiber();
#endif
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
    shim_fp_leave(fp_old);
    shim_run = NULL;
    s->n = 0;
    for (size_t i = 0; i < s->n_staged; i++)
        free(s->staged[i]);
    s->n_staged = 0;
    return rc;
}

static void shim_sched_free(shim_sched *r)
{
    if (!r)
        return;
    if (r->stacks)
        munmap(r->stacks, r->map_size);
#if SHIM_TSAN
    for (uint i = 0; i < RTM_TG; i++)
        if (r->t[i].tsan)
            __tsan_destroy_fiber(r->t[i].tsan);
#endif
    free(r);
}

static void shim_close(rtm_dev *d)
{
    shim_dev *s = (shim_dev *)d;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_staged; i++)
        free(s->staged[i]);
    free(s->staged);
    free(s->inplace);
    free(s->q);
    shim_sched_free(s->sched);
    free(s);
}

/* The fibers' stacks: one mapping, each stack above an inaccessible guard page, so a kernel
 * that overflows its SHIM_STACK bytes stops with SIGSEGV instead of writing its neighbour's. */
static shim_sched *shim_sched_new(tq_err *e)
{
    shim_sched *r = tq_calloc(1, sizeof *r, e);
    if (!r)
        return NULL;
    size_t page = (size_t)tq_plat_page_size();
    r->stack_step = page + ((SHIM_STACK + page - 1) / page) * page;
    r->map_size = r->stack_step * RTM_TG;
    void *m = tq_plat_map_anon(r->map_size);
    if (!m) {
        free(r);
        tq_fail(e, TQ_EIO, "shim: cannot map %zu bytes of fiber stacks", (size_t)RTM_TG * SHIM_STACK);
        return NULL;
    }
    r->stacks = m;
    for (uint i = 0; i < RTM_TG; i++)
        if (mprotect(r->stacks + (size_t)i * r->stack_step, page, PROT_NONE) != 0) {
            shim_sched_free(r);
            tq_fail(e, TQ_EIO, "shim: cannot protect a fiber stack's guard page");
            return NULL;
        }
    r->tg_hi = SHIM_TGMEM; /* poison all of it before the first threadgroup */
#if SHIM_TSAN
    for (uint i = 0; i < RTM_TG; i++)
        r->t[i].tsan = __tsan_create_fiber(0);
#endif
    return r;
}

int rtm_shim_open(rtm_dev **out, tq_err *e)
{
    shim_dev *s = tq_calloc(1, sizeof *s, e);
    if (!s)
        return -1;
    if (!(s->sched = shim_sched_new(e))) {
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
