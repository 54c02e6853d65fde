/* runtime/metal/metal.m — the Metal device of the GPU backend (rtm_internal.h), macOS only:
 * the system's default GPU, one command queue, one compute pipeline per kernel of the
 * metallib the build embeds (kernels.metal compiled with IEEE math and -ffp-contract=off:
 * scripts/metal-flags),
 * shared-storage buffers, and one serial compute encoder per command buffer, committed and
 * waited for at sync. Everything else — which kernels run, on which buffers, with which
 * threadgroup counts — is backend.c, the same code the shim runs in make check everywhere.
 * Built without ARC (every object this file makes is released here). docs/metal.md. */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include "runtime/metal/rtm_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The metallib, generated at build time by scripts/embed-bytes. */
extern const unsigned char rtm_metallib[];
extern const size_t rtm_metallib_len;

/* Staging memory for transient bytes: chunks of shared storage filled front to back; all but
 * the first are released at sync, the first is reused. */
#define STAGE_CHUNK (16u << 20)
#define STAGE_ALIGN 256u

typedef struct mtl_dev {
    rtm_dev d;
    id<MTLDevice> dev;
    id<MTLCommandQueue> queue;
    id<MTLComputePipelineState> ps[RTM_K_COUNT];
    id<MTLCommandBuffer> cb;          /* open command buffer (nil when none) */
    id<MTLComputeCommandEncoder> enc; /* its encoder */
    id<MTLBuffer> *chunk;
    size_t n_chunk, cap_chunk;
    uint64_t used; /* bytes used in the last chunk */
} mtl_dev;

static int mtl_fail(tq_err *e, int code, const char *what, NSError *err)
{
    const char *why = err ? [[err localizedDescription] UTF8String] : NULL;
    return tq_fail(e, code, "Metal: %s%s%s", what, why ? ": " : "", why ? why : "");
}

static int mtl_wrap(rtm_dev *d, const void *p, uint64_t n, void **h, tq_err *e)
{
    mtl_dev *m = (mtl_dev *)d;
    uint64_t page = (uint64_t)getpagesize(), len = n ? n : 4;
    if (len > [m->dev maxBufferLength])
        return tq_fail(e, TQ_EUNSUP, "Metal: a %llu-byte tensor exceeds the device's largest buffer (%llu bytes)",
                       (unsigned long long)len, (unsigned long long)[m->dev maxBufferLength]);
    id<MTLBuffer> b = nil;
    int copied = 0;
    /* in place where the memory is whole pages (the backend passes whole RTM_PAGE pages, a
     * multiple of this device's page); the caller keeps it alive and unchanged */
    if (n && (uintptr_t)p % page == 0 && n % page == 0)
        b = [m->dev newBufferWithBytesNoCopy:(void *)p length:n options:MTLResourceStorageModeShared deallocator:nil];
    if (!b && n) { /* a copy: reported to the backend, which counts it (rtm_counts.wrap_copies) */
        b = [m->dev newBufferWithBytes:p length:n options:MTLResourceStorageModeShared];
        copied = 1;
    }
    if (!b && !n)
        b = [m->dev newBufferWithLength:len options:MTLResourceStorageModeShared];
    if (!b)
        return tq_fail(e, TQ_ENOMEM, "Metal: cannot make a buffer of %llu bytes", (unsigned long long)len);
    *h = (void *)b;
    return copied;
}

static int mtl_alloc(rtm_dev *d, uint64_t n, void **h, void **host, tq_err *e)
{
    mtl_dev *m = (mtl_dev *)d;
    if (n > [m->dev maxBufferLength])
        return tq_fail(e, TQ_EUNSUP, "Metal: %llu bytes exceed the device's largest buffer (%llu bytes)",
                       (unsigned long long)n, (unsigned long long)[m->dev maxBufferLength]);
    id<MTLBuffer> b = [m->dev newBufferWithLength:n options:MTLResourceStorageModeShared];
    if (!b)
        return tq_fail(e, TQ_ENOMEM, "Metal: cannot make a buffer of %llu bytes", (unsigned long long)n);
    memset([b contents], 0, n);
    *h = (void *)b;
    *host = [b contents];
    return 0;
}

static int mtl_stage(rtm_dev *d, const void *p, uint64_t n, rtm_bind *out, tq_err *e)
{
    mtl_dev *m = (mtl_dev *)d;
    uint64_t at = (m->used + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
    if (m->n_chunk == 0 || at + n > [m->chunk[m->n_chunk - 1] length]) {
        void *grown = tq_grow(m->chunk, &m->cap_chunk, m->n_chunk, sizeof *m->chunk, e);
        if (!grown)
            return -1;
        m->chunk = grown;
        uint64_t len = n > STAGE_CHUNK ? n : STAGE_CHUNK;
        id<MTLBuffer> b = [m->dev newBufferWithLength:len options:MTLResourceStorageModeShared];
        if (!b)
            return tq_fail(e, TQ_ENOMEM, "Metal: cannot make a staging buffer of %llu bytes", (unsigned long long)len);
        m->chunk[m->n_chunk++] = b;
        at = 0;
    }
    id<MTLBuffer> b = m->chunk[m->n_chunk - 1];
    memcpy((char *)[b contents] + at, p, n);
    m->used = at + n;
    out->h = (void *)b;
    out->off = at;
    return 0;
}

static void mtl_release(rtm_dev *d, void *h)
{
    (void)d;
    [(id<MTLBuffer>)h release];
}

static int mtl_dispatch(rtm_dev *d, int k, const rtm_bind *b, int nb, const void *args, uint32_t args_n, uint32_t groups,
                        tq_err *e)
{
    mtl_dev *m = (mtl_dev *)d;
    if (k < 0 || k >= RTM_K_COUNT || nb != rtm_kernel_slots[k] - 1)
        return tq_fail(e, TQ_EUSAGE, "Metal: bad dispatch of kernel %d (%d buffers)", k, nb);
    if (!m->cb) {
        @autoreleasepool {
            m->cb = [[m->queue commandBuffer] retain];
            m->enc = m->cb ? [[m->cb computeCommandEncoder] retain] : nil;
        }
        if (!m->cb || !m->enc)
            return tq_fail(e, TQ_EIO, "Metal: cannot start a command buffer");
    }
    [m->enc setComputePipelineState:m->ps[k]];
    for (int i = 0; i < nb; i++)
        [m->enc setBuffer:(id<MTLBuffer>)b[i].h offset:(NSUInteger)b[i].off atIndex:(NSUInteger)i];
    [m->enc setBytes:args length:args_n atIndex:(NSUInteger)nb];
    [m->enc dispatchThreadgroups:MTLSizeMake(groups, 1, 1) threadsPerThreadgroup:MTLSizeMake(RTM_TG, 1, 1)];
    return 0;
}

static int mtl_sync(rtm_dev *d, tq_err *e)
{
    mtl_dev *m = (mtl_dev *)d;
    int rc = 0;
    if (m->cb) {
        @autoreleasepool {
            [m->enc endEncoding];
            [m->cb commit];
            [m->cb waitUntilCompleted];
            if ([m->cb status] != MTLCommandBufferStatusCompleted)
                rc = mtl_fail(e, TQ_EIO, "a command buffer failed on the GPU", [m->cb error]);
        }
        [m->enc release];
        [m->cb release];
        m->enc = nil;
        m->cb = nil;
    }
    for (size_t i = 1; i < m->n_chunk; i++)
        [m->chunk[i] release];
    m->n_chunk = m->n_chunk ? 1 : 0;
    m->used = 0;
    return rc;
}

static void mtl_close(rtm_dev *d)
{
    mtl_dev *m = (mtl_dev *)d;
    if (!m)
        return;
    if (m->cb) { /* work queued but never run (an error stopped the decode): dropped */
        [m->enc endEncoding];
        [m->enc release];
        [m->cb release];
    }
    for (size_t i = 0; i < m->n_chunk; i++)
        [m->chunk[i] release];
    free(m->chunk);
    for (int k = 0; k < RTM_K_COUNT; k++)
        [m->ps[k] release];
    [m->queue release];
    [m->dev release];
    free(m);
}

/* One pipeline per kernel; every kernel runs RTM_TG threads per threadgroup in simd groups
 * of RTM_SIMD (the shim emulates exactly that), so a device that cannot is refused. */
static int load_pipelines(mtl_dev *m, tq_err *e)
{
    int rc = 0;
    @autoreleasepool {
        dispatch_data_t data = dispatch_data_create(rtm_metallib, rtm_metallib_len, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
        NSError *err = nil;
        id<MTLLibrary> lib = data ? [m->dev newLibraryWithData:data error:&err] : nil;
        if (data)
            dispatch_release(data);
        if (!lib)
            return mtl_fail(e, TQ_EIO, "cannot load the kernel library built into tq", err);
        for (int k = 0; k < RTM_K_COUNT && rc == 0; k++) {
            id<MTLFunction> fn = [lib newFunctionWithName:[NSString stringWithUTF8String:rtm_kernel_names[k]]];
            if (!fn) {
                rc = tq_fail(e, TQ_EIO, "Metal: the kernel library has no %s", rtm_kernel_names[k]);
                break;
            }
            m->ps[k] = [m->dev newComputePipelineStateWithFunction:fn error:&err];
            [fn release];
            if (!m->ps[k])
                rc = mtl_fail(e, TQ_EIO, "cannot make a compute pipeline", err);
            else if ([m->ps[k] maxTotalThreadsPerThreadgroup] < RTM_TG || [m->ps[k] threadExecutionWidth] != RTM_SIMD)
                rc = tq_fail(e, TQ_EUNSUP,
                             "Metal: %s runs at most %lu threads per threadgroup in simd groups of %lu; the kernels need "
                             "%u in groups of %u",
                             rtm_kernel_names[k], (unsigned long)[m->ps[k] maxTotalThreadsPerThreadgroup],
                             (unsigned long)[m->ps[k] threadExecutionWidth], RTM_TG, RTM_SIMD);
        }
        [lib release];
    }
    return rc;
}

int rtm_metal_open(rtm_dev **out, tq_err *e)
{
    *out = NULL;
    mtl_dev *m = tq_calloc(1, sizeof *m, e);
    if (!m)
        return -1;
    m->d = (rtm_dev){.name = "metal",
                     .wrap = mtl_wrap,
                     .alloc = mtl_alloc,
                     .stage = mtl_stage,
                     .release = mtl_release,
                     .dispatch = mtl_dispatch,
                     .sync = mtl_sync,
                     .close = mtl_close};
    m->dev = MTLCreateSystemDefaultDevice();
    if (!m->dev) {
        free(m);
        return tq_fail(e, TQ_EUSAGE, "Metal: this Mac offers no Metal device; use --backend cpu");
    }
    m->queue = [m->dev newCommandQueue];
    if (!m->queue) {
        mtl_close(&m->d);
        return tq_fail(e, TQ_EIO, "Metal: cannot make a command queue");
    }
    if (load_pipelines(m, e) != 0) {
        mtl_close(&m->d);
        return -1;
    }
    *out = &m->d;
    return 0;
}
