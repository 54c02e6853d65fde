/* pinned.safetensors: every tensor that is not a routed expert (or dense FFN tensor). */
#include "layout/split/split_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The pinned file's SHA-256 is computed while writing, so the header bytes tq_st_writer put
 * at the start of its partial file are needed first. The staging directory is private to
 * this run, so the one pinned.safetensors.partial-* in it is ours. */
static int hash_partial_header(split_run *r, tq_sha256 *sha, uint64_t data_start, tq_err *e)
{
    DIR *d = opendir(r->stage);
    if (!d)
        return tq_fail(e, TQ_EIO, "%s: cannot list: %s", r->stage, strerror(errno));
    struct dirent *de;
    char *path = NULL;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, "pinned.safetensors.partial-", 27) == 0) {
            path = tq_path_join(r->stage, de->d_name, e);
            break;
        }
    closedir(d);
    if (!path)
        return tq_fail(e, TQ_EIO, "%s: pinned.safetensors partial file not found", r->stage);
    int rc = -1, fd = tq_open_regular(path, NULL, e);
    char *buf = fd >= 0 ? tq_malloc((size_t)data_start, e) : NULL;
    if (fd >= 0 && buf && tq_pread_full(fd, buf, (size_t)data_start, 0, path, e) == 0) {
        tq_sha256_update(sha, buf, (size_t)data_start);
        rc = 0;
    }
    free(buf);
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

typedef struct pin_chunk {
    size_t idx;                    /* writer index */
    const tq_model_tensor *src;
    uint64_t off;
    size_t len;
} pin_chunk;

typedef struct pin_job {
    tq_st_writer *w;
    tq_sha256 *sha;
    pin_chunk *chunks;
    size_t n_chunks;
} pin_job;

/* Chunk c copied by whichever worker claimed it, then hashed in turn: only the turn holder
 * adds to the file hash, so it sees the chunks in file order. */
static int pin_chunk_copy(tq_work *q, void *ctx, int worker, uint64_t c, tq_err *e)
{
    pin_job *j = ctx;
    const pin_chunk *ch = &j->chunks[c];
    unsigned char *buf = tq_work_scratch(q, worker, SPLIT_CHUNK, e);
    if (!buf || tq_model_read(ch->src, ch->off, buf, ch->len, e) != 0 ||
        tq_st_writer_write(j->w, ch->idx, ch->off, buf, ch->len, e) != 0 || tq_work_turn(q, c) != 0)
        return -1;
    tq_sha256_update(j->sha, buf, ch->len);
    tq_work_progress(q, ch->len);
    tq_work_turn_done(q);
    return 0;
}

tq_st_decl *split_pinned_decls(const split_plan *p, tq_err *e)
{
    size_t n = p->n_pinned;
    tq_st_decl *decls = tq_calloc(n ? n : 1, sizeof *decls, e);
    for (size_t i = 0; decls && i < n; i++) {
        const tq_tensor_info *t = &p->pinned[i]->info;
        decls[i].name = p->pinned_names && p->pinned_names[i] ? p->pinned_names[i] : t->name;
        decls[i].dtype = t->dtype;
        decls[i].ndim = t->ndim;
        memcpy(decls[i].shape, t->shape, sizeof t->shape);
    }
    return decls;
}

int split_write_pinned(split_run *r, tq_err *e)
{
    split_plan *p = &r->plan;
    const tq_model *m = p->m;
    size_t n = p->n_pinned;
    tq_st_decl *decls = split_pinned_decls(p, e);
    if (!decls)
        return -1;
    const tq_st_file *f0 = m->n_files ? m->files[0] : NULL;
    char *path = tq_path_join(r->stage, "pinned.safetensors", e);
    tq_st_writer *w = NULL;
    int rc = -1;
    size_t *order = NULL;
    const tq_model_tensor **src_of = NULL;
    tq_sha256 *sha = tq_sha256_new();
    if (!path || !sha ||
        tq_st_writer_open(&w, path, decls, n, f0 ? (const char *const *)f0->meta_keys : NULL,
                          f0 ? (const char *const *)f0->meta_vals : NULL, f0 ? f0->n_meta : 0, p->align, e) != 0)
        goto out;
    /* data in file order (the writer lays tensors out in name order; follow its offsets) */
    uint64_t data_start = UINT64_MAX, pos;
    for (size_t i = 0; i < n; i++) {
        const tq_tensor_info *ti = tq_st_writer_tensor(w, i);
        if (ti->offset < data_start)
            data_start = ti->offset;
    }
    if (n == 0) {
        tq_fail(e, TQ_EUNSUP, "%s: nothing to pin (no embeddings, attention or norms?)", m->path);
        goto out;
    }
    if (hash_partial_header(r, sha, data_start, e) != 0)
        goto out;
    order = tq_calloc(n, sizeof *order, e);
    src_of = tq_calloc(n, sizeof *src_of, e);
    if (!order || !src_of)
        goto out;
    for (size_t i = 0; i < n; i++) { /* writer index (name order of the output names) -> source */
        long wi = tq_st_writer_index(w, decls[i].name);
        if (wi < 0 || (size_t)wi >= n) {
            tq_fail(e, TQ_EIO, "%s: pinned tensor '%s' was not declared", path, decls[i].name);
            goto out;
        }
        src_of[wi] = p->pinned[i];
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    /* file order (insertion sort by offset: stable, so zero-byte tensors keep index order) */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && tq_st_writer_tensor(w, order[k - 1])->offset > tq_st_writer_tensor(w, order[k])->offset; k--) {
            size_t t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    /* chunk list in file order; workers copy chunks in parallel, the hash takes them in order */
    size_t n_chunks = 0;
    pos = data_start;
    for (size_t k = 0; k < n; k++) {
        const tq_tensor_info *ti = tq_st_writer_tensor(w, order[k]);
        if (ti->offset != pos || !src_of[order[k]]) {
            tq_fail(e, TQ_EIO, "%s: unexpected pinned layout at offset %llu", path, (unsigned long long)pos);
            goto out;
        }
        n_chunks += (size_t)((ti->nbytes + SPLIT_CHUNK - 1) / SPLIT_CHUNK);
        pos += ti->nbytes;
    }
    pin_job j = {.w = w, .sha = sha};
    if (!(j.chunks = tq_calloc(n_chunks ? n_chunks : 1, sizeof *j.chunks, e)))
        goto out;
    for (size_t k = 0; k < n; k++) {
        const tq_tensor_info *ti = tq_st_writer_tensor(w, order[k]);
        const tq_model_tensor *src = src_of[order[k]];
        for (uint64_t off = 0; off < ti->nbytes; off += SPLIT_CHUNK)
            j.chunks[j.n_chunks++] = (pin_chunk){order[k], src, off,
                                                 ti->nbytes - off < SPLIT_CHUNK ? (size_t)(ti->nbytes - off) : SPLIT_CHUNK};
    }
    int nt = r->o->threads > 0 ? r->o->threads : tq_default_threads();
    int wrc = tq_work_run(j.n_chunks, nt, pin_chunk_copy, &j, &r->prog, e);
    free(j.chunks);
    if (wrc != 0)
        goto out;
    /* finished (fsync + rename inside the stage) at the end, so its writeback overlaps the
     * layer files instead of stalling before them */
    if (tq_st_writer_complete(w, e) != 0)
        goto out;
    tq_flash_file *rec = split_add_file(r, e);
    if (!rec || !(rec->name = tq_strdup("pinned.safetensors", e)))
        goto out;
    rec->size = pos;
    tq_sha256_final(sha, rec->sha256);
    sha = NULL;
    r->pinned_w = w;
    w = NULL;
    rc = 0;
out:
    if (w)
        tq_st_writer_abort(w);
    if (sha) {
        unsigned char d[32];
        tq_sha256_final(sha, d);
    }
    free(order);
    free(src_of);
    free(path);
    free(decls);
    return rc;
}
