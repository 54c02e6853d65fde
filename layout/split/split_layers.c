/* The layer files: moe_flash_v1 (one block per expert, workers in parallel, the file hash in
 * block order) and flash_aligned_v1 (one dense FFN layer per worker). */
#include "common/platform.h"
#include "layout/split/split_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct moe_job {
    split_layer *L;
    out_file *of;
} moe_job;

/* A gathered slot (FUSED_XW): the expert's stored slice, read once per block for the slots
 * that share it (gate and up come from one gate_up_proj slice), then gathered. */
static int fill_xw(const split_slot *sl, uint64_t x, unsigned char *dst, const void **cache_t, unsigned char **cache,
                   tq_err *e)
{
    int i = 0;
    while (cache_t[i] && cache_t[i] != sl->stacked)
        i++;
    if (!cache_t[i]) {
        if (!(cache[i] = tq_malloc((size_t)sl->expert_bytes, e)) ||
            tq_model_read(sl->stacked, x * sl->expert_bytes, cache[i], (size_t)sl->expert_bytes, e) != 0)
            return -1;
        cache_t[i] = sl->stacked;
    }
    tq_flash_xw_gather(&sl->xwp, cache[i], tq_dtype_size(sl->stacked->info.dtype), dst);
    return 0;
}

static int fill_block(const split_layer *L, uint64_t x, unsigned char *buf, tq_err *e)
{
    const void *cache_t[TQ_FLASH_NSLOTS + 1] = {0};
    unsigned char *cache[TQ_FLASH_NSLOTS + 1] = {0};
    int rc = 0;
    for (int s = 0; s < L->n_slots && rc == 0; s++) {
        const split_slot *sl = &L->slots[s];
        const tq_flash_tensor *t = &L->hdr.tensors[s];
        rc = sl->xw       ? fill_xw(sl, x, buf + t->offset, cache_t, cache, e)
             : sl->stacked ? tq_model_read(sl->stacked, x * sl->expert_bytes, buf + t->offset, (size_t)t->nbytes, e)
                           : tq_model_read(sl->per_expert[x], 0, buf + t->offset, (size_t)t->nbytes, e);
    }
    for (int i = 0; i < TQ_FLASH_NSLOTS; i++)
        free(cache[i]);
    return rc != 0 ? -1 : 0;
}

/* Ask the kernel to start reading expert x's source slices: the slices of one expert are
 * spread over several tensors, which defeats plain readahead on a cold cache. */
#define PREFETCH_DISTANCE 4
static void prefetch_expert(const split_layer *L, uint64_t x)
{
    if (x >= L->hdr.num_experts)
        return;
    for (int s = 0; s < L->n_slots; s++) {
        const split_slot *sl = &L->slots[s];
        const tq_model_tensor *t = sl->stacked ? sl->stacked : sl->per_expert[x];
        if (!t->file)
            continue;
        uint64_t off = t->info.offset + (sl->stacked ? x * sl->expert_bytes : 0);
        tq_plat_advise(t->file->fd, off, sl->expert_bytes, TQ_ADV_WILLNEED);
    }
}

/* Expert x: its block read, hashed and written by whichever worker claimed it; then, in turn,
 * added to the file hash, which so sees the blocks in file order whatever the thread count. */
static int moe_block(tq_work *q, void *ctx, int worker, uint64_t x, tq_err *e)
{
    moe_job *j = ctx;
    split_layer *L = j->L;
    const tq_flash_header *h = &L->hdr;
    /* zeroed once per worker: the padding after the tensors is the same in every block */
    unsigned char *buf = tq_work_scratch(q, worker, (size_t)h->expert_block_size, e);
    if (!buf)
        return -1;
    prefetch_expert(L, x + PREFETCH_DISTANCE);
    uint64_t off = h->data_start + x * h->expert_block_size;
    if (fill_block(L, x, buf, e) != 0)
        return -1;
    tq_sha256_buf(buf, (size_t)h->expert_block_size, L->block_sha[x]);
    if (split_write_direct(j->of, buf, (size_t)h->expert_block_size, off, e) != 0 || tq_work_turn(q, x) != 0)
        return -1;
    tq_sha256_update(j->of->sha, buf, (size_t)h->expert_block_size);
    tq_work_progress(q, h->expert_block_size);
    tq_work_turn_done(q);
    return 0;
}

int split_write_header_page(out_file *of, const tq_flash_header *h, tq_err *e)
{
    char *json = tq_flash_header_json(h, of->rel, e);
    if (!json)
        return -1;
    unsigned char *page = split_aligned_zeroed((size_t)h->page_size);
    int rc = -1;
    if (!page)
        tq_fail(e, TQ_ENOMEM, "out of memory");
    else {
        memcpy(page, json, strlen(json));
        rc = split_write_direct(of, page, (size_t)h->page_size, of->size, e);
        if (rc == 0) {
            tq_sha256_update(of->sha, page, (size_t)h->page_size);
            of->size += h->page_size;
        }
    }
    free(page);
    free(json);
    return rc;
}

/* --resume: a layer file the journal kept (1; rec and the block hashes filled from it), or 0. */
static int layer_kept(split_run *r, split_layer *L, tq_flash_file *rec, tq_err *e)
{
    unsigned char sha[32];
    uint64_t size;
    const char *extra = tq_resume_have(r->res, L->file, &size, sha);
    if (!extra)
        return 0;
    uint64_t n = L->hdr.num_experts;
    if (size != L->hdr.total_size || (L->block_sha && (strncmp(extra, "blocks ", 7) != 0 || strlen(extra) != 7 + 64 * n)))
        return tq_fail(e, TQ_EDATA, "%s: the journal's record of %s does not match this split's layout", r->stage, L->file);
    for (uint64_t x = 0; L->block_sha && x < n; x++)
        if (tq_unhex32(extra + 7 + 64 * x, L->block_sha[x]) != 0)
            return tq_fail(e, TQ_EDATA, "%s: the journal's block hashes of %s are not hex", r->stage, L->file);
    if (!(rec->name = tq_strdup(L->file, e)))
        return -1;
    rec->size = size;
    memcpy(rec->sha256, sha, 32);
    return 1;
}

/* --resume: a layer file just written, fsynced with its directory, then journaled (with the
 * expert block hashes split.json lists). */
static int layer_journal(split_run *r, const split_layer *L, const tq_flash_file *rec, tq_err *e)
{
    if (!r->res)
        return 0;
    char *path = tq_path_join(r->stage, L->file, e), *slash = path ? strrchr(path, '/') : NULL;
    int rc = path ? split_fsync_path(path, 0, e) : -1;
    if (rc == 0) {
        *slash = 0;
        rc = split_fsync_path(path, 1, e);
    }
    free(path);
    tq_test_step(); /* complete and fsynced, not yet journaled */
    tq_sb b = {0};
    if (L->block_sha) {
        tq_sb_str(&b, "blocks ");
        for (uint64_t x = 0; x < L->hdr.num_experts; x++) {
            char hex[65];
            tq_hex(L->block_sha[x], 32, hex);
            tq_sb_put(&b, hex, 64);
        }
    }
    char *extra = tq_sb_finish(&b, e);
    if (rc == 0)
        rc = extra ? tq_resume_done_sha(r->res, L->file, rec->size, rec->sha256, extra, e) : -1;
    free(extra);
    return rc;
}

int split_write_moe_layer(split_run *r, split_layer *L, tq_err *e)
{
    const tq_flash_header *h = &L->hdr;
    out_file of;
    if (!(L->block_sha = tq_calloc((size_t)h->num_experts, sizeof *L->block_sha, e)))
        return -1;
    tq_flash_file kept = {0};
    int k = layer_kept(r, L, &kept, e);
    if (k != 0) {
        tq_flash_file *rec = k > 0 ? split_add_file(r, e) : NULL;
        if (rec)
            *rec = kept;
        else
            free(kept.name);
        tq_progress_add(&r->prog, h->num_experts * h->expert_block_size);
        return rec ? 0 : -1;
    }
    if (split_of_open(&of, r->stage, L->file, e) != 0)
        return -1;
    split_of_try_direct(&of);
    if (split_write_header_page(&of, h, e) != 0) {
        split_of_abort(&of);
        return -1;
    }
    for (uint64_t x = 0; x < PREFETCH_DISTANCE; x++)
        prefetch_expert(L, x);
    moe_job j = {.L = L, .of = &of};
    int n = r->o->threads > 0 ? r->o->threads : tq_default_threads();
    if (tq_work_run(h->num_experts, n, moe_block, &j, &r->prog, e) != 0) {
        split_of_abort(&of);
        return -1;
    }
    of.size = h->total_size;
    tq_flash_file *rec = split_add_file(r, e);
    if (!rec) {
        split_of_abort(&of);
        return -1;
    }
    return split_of_commit(&of, rec, e) == 0 ? layer_journal(r, L, rec, e) : -1;
}

/* ------------------------------------------------------------ dense layer files */

typedef struct dense_job {
    split_run *r;
    tq_flash_file *recs;           /* [n_layers], moved into r->files in order afterwards */
} dense_job;

static int write_dense_layer(tq_work *q, split_run *r, split_layer *L, tq_flash_file *rec, unsigned char *buf,
                             tq_err *e)
{
    const tq_flash_header *h = &L->hdr;
    out_file of;
    if (split_of_open(&of, r->stage, L->file, e) != 0)
        return -1;
    if (split_write_header_page(&of, h, e) != 0)
        goto fail;
    for (size_t i = 0; i < h->n_tensors; i++) {
        const tq_flash_tensor *t = &h->tensors[i];
        const tq_model_tensor *src = L->slots[i].per_expert[0];
        memset(buf, 0, SPLIT_CHUNK);
        while (of.size < t->offset) { /* zero padding up to the aligned offset */
            size_t len = t->offset - of.size < SPLIT_CHUNK ? (size_t)(t->offset - of.size) : SPLIT_CHUNK;
            if (split_of_write(&of, buf, len, e) != 0)
                goto fail;
        }
        for (uint64_t off = 0; off < t->nbytes;) {
            size_t len = t->nbytes - off < SPLIT_CHUNK ? (size_t)(t->nbytes - off) : SPLIT_CHUNK;
            if (tq_model_read(src, off, buf, len, e) != 0 || split_of_write(&of, buf, len, e) != 0)
                goto fail;
            off += len;
            tq_work_progress(q, len);
        }
    }
    memset(buf, 0, SPLIT_CHUNK);
    while (of.size < h->total_size) {
        size_t len = h->total_size - of.size < SPLIT_CHUNK ? (size_t)(h->total_size - of.size) : SPLIT_CHUNK;
        if (split_of_write(&of, buf, len, e) != 0)
            goto fail;
    }
    return split_of_commit(&of, rec, e);
fail:
    split_of_abort(&of);
    return -1;
}

static int dense_layer(tq_work *q, void *ctx, int worker, uint64_t i, tq_err *e)
{
    dense_job *j = ctx;
    split_layer *L = &j->r->plan.layers[i];
    int k = layer_kept(j->r, L, &j->recs[i], e);
    if (k != 0) {
        for (size_t t = 0; k > 0 && t < L->hdr.n_tensors; t++)
            tq_work_progress(q, L->hdr.tensors[t].nbytes);
        return k > 0 ? 0 : -1;
    }
    unsigned char *buf = tq_work_scratch(q, worker, SPLIT_CHUNK, e);
    if (!buf)
        return -1;
    if (write_dense_layer(q, j->r, L, &j->recs[i], buf, e) != 0)
        return -1;
    return layer_journal(j->r, L, &j->recs[i], e);
}

int split_write_dense_layers(split_run *r, tq_err *e)
{
    split_plan *p = &r->plan;
    dense_job j = {.r = r};
    if (!(j.recs = tq_calloc(p->n_layers, sizeof *j.recs, e)))
        return -1;
    int n = r->o->threads > 0 ? r->o->threads : tq_default_threads();
    tq_err werr;
    int failed = tq_work_run(p->n_layers, n, dense_layer, &j, &r->prog, &werr) != 0;
    int rc = 0;
    for (size_t i = 0; i < p->n_layers; i++) {
        if (!j.recs[i].name)
            continue;
        tq_flash_file *rec = split_add_file(r, e);
        if (!rec) {
            rc = -1;
            free(j.recs[i].name);
            continue;
        }
        *rec = j.recs[i];
    }
    free(j.recs);
    if (failed) {
        *e = werr;
        return -1;
    }
    return rc;
}
