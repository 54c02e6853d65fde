/* tq_split: stream a model into pinned.safetensors + per-layer moe_flash_v1 / flash_aligned_v1
 * files + config.json + split.json. Every byte is read once and hashed as it is written;
 * memory is one expert block (or one copy chunk) per thread. The whole output is built in
 * OUT.partial-XXXXXX and renamed into place last, so a failure leaves nothing behind. */
#include "layout/split_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (4u << 20)

/* ------------------------------------------------------------ hashed output */

typedef struct out_file {
    int fd;
    char *path;
    tq_sha256 *sha;
    uint64_t size;
    char *rel;                     /* name relative to the split dir */
} out_file;

/* Files go straight into the private staging directory (the directory is what appears
 * atomically); they are fsynced together just before it is renamed, so writeback of one file
 * overlaps the work on the next instead of stalling it. */
static int of_open(out_file *f, const char *dir, const char *rel, tq_err *e)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!(f->path = tq_path_join(dir, rel, e)))
        return -1;
    f->fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        tq_fail(e, TQ_EIO, "%s: cannot create: %s", f->path, strerror(errno));
        free(f->path);
        return -1;
    }
    f->sha = tq_sha256_new();
    f->rel = tq_strdup(rel, e);
    if (!f->sha || !f->rel) {
        close(f->fd);
        unlink(f->path);
        free(f->path);
        if (f->sha) {
            unsigned char d[32];
            tq_sha256_final(f->sha, d);
        }
        free(f->rel);
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    return 0;
}

static int of_write(out_file *f, const void *buf, size_t len, tq_err *e)
{
    if (tq_pwrite_full(f->fd, buf, len, f->size, f->path, e) != 0)
        return -1;
    tq_sha256_update(f->sha, buf, len);
    f->size += len;
    return 0;
}

static void of_abort(out_file *f)
{
    if (f->sha) {
        unsigned char d[32];
        tq_sha256_final(f->sha, d);
        f->sha = NULL;
    }
    if (f->fd >= 0) {
        close(f->fd);
        unlink(f->path);
    }
    f->fd = -1;
    free(f->path);
    free(f->rel);
    f->path = f->rel = NULL;
}

/* Close and record in files[]; takes ownership of f->rel. */
static int of_commit(out_file *f, tq_split_file *rec, tq_err *e)
{
    tq_sha256_final(f->sha, rec->sha256);
    f->sha = NULL;
    rec->size = f->size;
    rec->name = f->rel;
    f->rel = NULL;
    int rc = close(f->fd) == 0 ? 0 : tq_fail(e, TQ_EIO, "%s: close failed: %s", f->path, strerror(errno));
    f->fd = -1;
    free(f->path);
    f->path = NULL;
    return rc;
}

static int fsync_path(const char *path, int dir, tq_err *e)
{
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return tq_fail(e, TQ_EIO, "%s: cannot open: %s", path, strerror(errno));
    int rc = fsync(fd) == 0 ? 0 : tq_fail(e, TQ_EIO, "%s: fsync failed: %s", path, strerror(errno));
    close(fd);
    return rc;
}

/* Expert blocks and header pages are whole multiples of the alignment (>= 4096) at aligned
 * offsets, so MoE layer files are written with O_DIRECT where the filesystem allows it: no
 * copy into the page cache and no dirty-page throttling, which is most of the system time
 * of a buffered write. Filesystems that refuse it (tmpfs) get ordinary writes. */
static void *aligned_zeroed(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, TQ_FLASH_MIN_ALIGN, n ? n : 1) != 0)
        return NULL;
    memset(p, 0, n);
    return p;
}

static void of_try_direct(out_file *f)
{
#ifdef O_DIRECT
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0)
        fcntl(f->fd, F_SETFL, fl | O_DIRECT);
#endif
}

static int write_direct(out_file *f, const void *buf, size_t len, uint64_t off, tq_err *e)
{
    if (tq_pwrite_full(f->fd, buf, len, off, f->path, e) == 0)
        return 0;
#ifdef O_DIRECT
    /* accepted at open, refused on write (EINVAL): once more through the page cache */
    int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(f->fd, F_SETFL, fl & ~O_DIRECT) == 0)
        return tq_pwrite_full(f->fd, buf, len, off, f->path, e);
#endif
    return -1;
}

/* ------------------------------------------------------------ state */

typedef struct split_run {
    split_plan plan;
    const tq_split_opts *o;
    char *stage;                   /* OUT.partial-XXXXXX */
    tq_split_file *files;
    size_t n_files, cap_files;
    tq_progress prog;
    pthread_mutex_t prog_mu;
    tq_st_writer *pinned_w;        /* written, finished last */
} split_run;

static tq_split_file *add_file(split_run *r, tq_err *e)
{
    if (r->n_files == r->cap_files) {
        size_t cap = r->cap_files ? r->cap_files * 2 : 64;
        tq_split_file *n = realloc(r->files, cap * sizeof *n);
        if (!n) {
            tq_fail(e, TQ_ENOMEM, "out of memory");
            return NULL;
        }
        r->files = n;
        r->cap_files = cap;
    }
    tq_split_file *f = &r->files[r->n_files++];
    memset(f, 0, sizeof *f);
    return f;
}

static void progress(split_run *r, uint64_t n)
{
    pthread_mutex_lock(&r->prog_mu);
    tq_progress_add(&r->prog, n);
    pthread_mutex_unlock(&r->prog_mu);
}

/* ------------------------------------------------------------ pinned */

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
    int rc = -1, fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = fd >= 0 ? tq_malloc((size_t)data_start, e) : NULL;
    if (fd < 0)
        tq_fail(e, TQ_EIO, "%s: cannot open: %s", path, strerror(errno));
    else if (buf && tq_pread_full(fd, buf, (size_t)data_start, 0, path, e) == 0) {
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
    split_run *r;
    tq_st_writer *w;
    tq_sha256 *sha;
    pin_chunk *chunks;
    size_t n_chunks;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next, turn;
    int failed;
    tq_err err;
} pin_job;

static void *pin_worker(void *arg)
{
    pin_job *j = arg;
    tq_err e = {0};
    unsigned char *buf = malloc(CHUNK);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        if (!buf && !j->failed) {
            j->failed = 1;
            tq_fail(&j->err, TQ_ENOMEM, "out of memory");
            pthread_cond_broadcast(&j->cv);
        }
        if (j->failed || j->next >= j->n_chunks) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        size_t c = j->next++;
        pthread_mutex_unlock(&j->mu);
        const pin_chunk *ch = &j->chunks[c];
        int rc = tq_model_read(ch->src, ch->off, buf, ch->len, &e);
        if (rc == 0)
            rc = tq_st_writer_write(j->w, ch->idx, ch->off, buf, ch->len, &e);
        pthread_mutex_lock(&j->mu);
        while (rc == 0 && !j->failed && j->turn != c)
            pthread_cond_wait(&j->cv, &j->mu);
        if (rc != 0 || j->failed) {
            if (rc != 0 && !j->failed) {
                j->failed = 1;
                j->err = e;
            }
            pthread_cond_broadcast(&j->cv);
            pthread_mutex_unlock(&j->mu);
            break;
        }
        pthread_mutex_unlock(&j->mu);
        tq_sha256_update(j->sha, buf, ch->len); /* in file order: only the turn holder hashes */
        progress(j->r, ch->len);
        pthread_mutex_lock(&j->mu);
        j->turn++;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
    }
    free(buf);
    return NULL;
}

static int run_threads(void *(*fn)(void *), void *arg, int n, tq_err *e);

static int write_pinned(split_run *r, tq_err *e)
{
    split_plan *p = &r->plan;
    const tq_model *m = p->m;
    size_t n = p->n_pinned;
    tq_st_decl *decls = tq_calloc(n ? n : 1, sizeof *decls, e);
    if (!decls)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const tq_tensor_info *t = &p->pinned[i]->info;
        decls[i].name = t->name;
        decls[i].dtype = t->dtype;
        decls[i].ndim = t->ndim;
        memcpy(decls[i].shape, t->shape, sizeof t->shape);
    }
    const tq_st_file *f0 = m->n_files ? m->files[0] : NULL;
    char *path = tq_path_join(r->stage, "pinned.safetensors", e);
    tq_st_writer *w = NULL;
    int rc = -1;
    size_t *order = NULL;
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
    if (!order)
        goto out;
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
        if (ti->offset != pos || !tq_model_find(m, ti->name)) {
            tq_fail(e, TQ_EIO, "%s: unexpected pinned layout at offset %llu", path, (unsigned long long)pos);
            goto out;
        }
        n_chunks += (size_t)((ti->nbytes + CHUNK - 1) / CHUNK);
        pos += ti->nbytes;
    }
    pin_job j = {.r = r, .w = w, .sha = sha};
    if (!(j.chunks = tq_calloc(n_chunks ? n_chunks : 1, sizeof *j.chunks, e)))
        goto out;
    for (size_t k = 0; k < n; k++) {
        const tq_tensor_info *ti = tq_st_writer_tensor(w, order[k]);
        const tq_model_tensor *src = tq_model_find(m, ti->name);
        for (uint64_t off = 0; off < ti->nbytes; off += CHUNK)
            j.chunks[j.n_chunks++] = (pin_chunk){order[k], src, off,
                                                 ti->nbytes - off < CHUNK ? (size_t)(ti->nbytes - off) : CHUNK};
    }
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    int nt = r->o->threads > 0 ? r->o->threads : tq_default_threads();
    if ((size_t)nt > j.n_chunks)
        nt = j.n_chunks ? (int)j.n_chunks : 1;
    run_threads(pin_worker, &j, nt, e);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    free(j.chunks);
    if (j.failed) {
        *e = j.err;
        goto out;
    }
    /* finished (fsync + rename inside the stage) at the end, so its writeback overlaps the
     * layer files instead of stalling before them */
    if (tq_st_writer_complete(w, e) != 0)
        goto out;
    tq_split_file *rec = add_file(r, e);
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
    free(path);
    free(decls);
    return rc;
}

/* ------------------------------------------------------------ MoE layer files */

typedef struct moe_job {
    split_run *r;
    split_layer *L;
    out_file *of;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next, turn;
    int failed;
    tq_err err;
} moe_job;

static int fill_block(const split_layer *L, uint64_t x, unsigned char *buf, tq_err *e)
{
    for (int s = 0; s < L->n_slots; s++) {
        const split_slot *sl = &L->slots[s];
        const tq_flash_tensor *t = &L->hdr.tensors[s];
        int rc = sl->stacked ? tq_model_read(sl->stacked, x * sl->expert_bytes, buf + t->offset, (size_t)t->nbytes, e)
                             : tq_model_read(sl->per_expert[x], 0, buf + t->offset, (size_t)t->nbytes, e);
        if (rc != 0)
            return -1;
    }
    return 0;
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
        posix_fadvise(t->file->fd, (off_t)off, (off_t)sl->expert_bytes, POSIX_FADV_WILLNEED);
    }
}

static void *moe_worker(void *arg)
{
    moe_job *j = arg;
    split_layer *L = j->L;
    const tq_flash_header *h = &L->hdr;
    tq_err e = {0};
    /* zero once: the padding after the tensors is the same in every block */
    unsigned char *buf = aligned_zeroed((size_t)h->expert_block_size);
    if (!buf)
        tq_fail(&e, TQ_ENOMEM, "out of memory for a %llu-byte expert block", (unsigned long long)h->expert_block_size);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        if (!buf && !j->failed) {
            j->failed = 1;
            j->err = e;
            pthread_cond_broadcast(&j->cv);
        }
        if (j->failed || j->next >= h->num_experts) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        uint64_t x = j->next++;
        pthread_mutex_unlock(&j->mu);
        prefetch_expert(L, x + PREFETCH_DISTANCE);
        uint64_t off = h->data_start + x * h->expert_block_size;
        int rc = fill_block(L, x, buf, &e);
        if (rc == 0) {
            tq_sha256_buf(buf, (size_t)h->expert_block_size, L->block_sha[x]);
            rc = write_direct(j->of, buf, (size_t)h->expert_block_size, off, &e);
        }
        pthread_mutex_lock(&j->mu);
        while (rc == 0 && !j->failed && j->turn != x)
            pthread_cond_wait(&j->cv, &j->mu);
        if (rc != 0 || j->failed) {
            if (rc != 0 && !j->failed) {
                j->failed = 1;
                j->err = e;
            }
            pthread_cond_broadcast(&j->cv);
            pthread_mutex_unlock(&j->mu);
            break;
        }
        pthread_mutex_unlock(&j->mu);
        /* our turn: the file hash sees blocks in file order whatever the thread count */
        tq_sha256_update(j->of->sha, buf, (size_t)h->expert_block_size);
        progress(j->r, h->expert_block_size);
        pthread_mutex_lock(&j->mu);
        j->turn++;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
    }
    free(buf);
    return NULL;
}

static int run_threads(void *(*fn)(void *), void *arg, int n, tq_err *e)
{
    pthread_t th[256];
    if (n > 256)
        n = 256;
    int started = 0;
    for (; started < n - 1; started++)
        if (pthread_create(&th[started], NULL, fn, arg) != 0)
            break;
    fn(arg); /* the calling thread works too */
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    (void)e;
    return 0;
}

static int write_header_page(out_file *of, const tq_flash_header *h, tq_err *e)
{
    char *json = tq_flash_header_json(h, of->rel, e);
    if (!json)
        return -1;
    unsigned char *page = aligned_zeroed((size_t)h->page_size);
    int rc = -1;
    if (!page)
        tq_fail(e, TQ_ENOMEM, "out of memory");
    else {
        memcpy(page, json, strlen(json));
        rc = write_direct(of, page, (size_t)h->page_size, of->size, e);
        if (rc == 0) {
            tq_sha256_update(of->sha, page, (size_t)h->page_size);
            of->size += h->page_size;
        }
    }
    free(page);
    free(json);
    return rc;
}

static int write_moe_layer(split_run *r, split_layer *L, tq_err *e)
{
    const tq_flash_header *h = &L->hdr;
    out_file of;
    if (!(L->block_sha = tq_calloc((size_t)h->num_experts, sizeof *L->block_sha, e)))
        return -1;
    if (of_open(&of, r->stage, L->file, e) != 0)
        return -1;
    of_try_direct(&of);
    if (write_header_page(&of, h, e) != 0) {
        of_abort(&of);
        return -1;
    }
    for (uint64_t x = 0; x < PREFETCH_DISTANCE; x++)
        prefetch_expert(L, x);
    moe_job j = {.r = r, .L = L, .of = &of};
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    int n = r->o->threads > 0 ? r->o->threads : tq_default_threads();
    if ((uint64_t)n > h->num_experts)
        n = (int)h->num_experts;
    run_threads(moe_worker, &j, n, e);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    if (j.failed) {
        *e = j.err;
        of_abort(&of);
        return -1;
    }
    of.size = h->total_size;
    tq_split_file *rec = add_file(r, e);
    if (!rec) {
        of_abort(&of);
        return -1;
    }
    return of_commit(&of, rec, e);
}

/* ------------------------------------------------------------ dense layer files */

typedef struct dense_job {
    split_run *r;
    pthread_mutex_t mu;
    size_t next;
    int failed;
    tq_err err;
    tq_split_file *recs;           /* [n_layers], moved into r->files in order afterwards */
} dense_job;

static int write_dense_layer(split_run *r, split_layer *L, tq_split_file *rec, unsigned char *buf, tq_err *e)
{
    const tq_flash_header *h = &L->hdr;
    out_file of;
    if (of_open(&of, r->stage, L->file, e) != 0)
        return -1;
    if (write_header_page(&of, h, e) != 0)
        goto fail;
    for (size_t i = 0; i < h->n_tensors; i++) {
        const tq_flash_tensor *t = &h->tensors[i];
        const tq_model_tensor *src = L->slots[i].per_expert[0];
        memset(buf, 0, CHUNK);
        while (of.size < t->offset) { /* zero padding up to the aligned offset */
            size_t len = t->offset - of.size < CHUNK ? (size_t)(t->offset - of.size) : CHUNK;
            if (of_write(&of, buf, len, e) != 0)
                goto fail;
        }
        for (uint64_t off = 0; off < t->nbytes;) {
            size_t len = t->nbytes - off < CHUNK ? (size_t)(t->nbytes - off) : CHUNK;
            if (tq_model_read(src, off, buf, len, e) != 0 || of_write(&of, buf, len, e) != 0)
                goto fail;
            off += len;
            progress(r, len);
        }
    }
    memset(buf, 0, CHUNK);
    while (of.size < h->total_size) {
        size_t len = h->total_size - of.size < CHUNK ? (size_t)(h->total_size - of.size) : CHUNK;
        if (of_write(&of, buf, len, e) != 0)
            goto fail;
    }
    return of_commit(&of, rec, e);
fail:
    of_abort(&of);
    return -1;
}

static void *dense_worker(void *arg)
{
    dense_job *j = arg;
    tq_err e = {0};
    unsigned char *buf = malloc(CHUNK);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        if (!buf && !j->failed) {
            j->failed = 1;
            tq_fail(&j->err, TQ_ENOMEM, "out of memory");
        }
        if (j->failed || j->next >= j->r->plan.n_layers) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        size_t i = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (write_dense_layer(j->r, &j->r->plan.layers[i], &j->recs[i], buf, &e) != 0) {
            pthread_mutex_lock(&j->mu);
            if (!j->failed) {
                j->failed = 1;
                j->err = e;
            }
            pthread_mutex_unlock(&j->mu);
            break;
        }
    }
    free(buf);
    return NULL;
}

static int write_dense_layers(split_run *r, tq_err *e)
{
    split_plan *p = &r->plan;
    dense_job j = {.r = r};
    if (!(j.recs = tq_calloc(p->n_layers, sizeof *j.recs, e)))
        return -1;
    pthread_mutex_init(&j.mu, NULL);
    int n = r->o->threads > 0 ? r->o->threads : tq_default_threads();
    if ((size_t)n > p->n_layers)
        n = (int)p->n_layers;
    run_threads(dense_worker, &j, n, e);
    pthread_mutex_destroy(&j.mu);
    int rc = 0;
    for (size_t i = 0; i < p->n_layers; i++) {
        if (!j.recs[i].name)
            continue;
        tq_split_file *rec = add_file(r, e);
        if (!rec) {
            rc = -1;
            free(j.recs[i].name);
            continue;
        }
        *rec = j.recs[i];
    }
    free(j.recs);
    if (j.failed) {
        *e = j.err;
        return -1;
    }
    return rc;
}

/* ------------------------------------------------------------ config, extras */

static int write_config(split_run *r, tq_err *e)
{
    const split_plan *p = &r->plan;
    cJSON *c = p->m->config ? cJSON_Duplicate(p->m->config, 1) : cJSON_CreateObject();
    if (!c)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(c, "streaming");
    cJSON *s = cJSON_AddObjectToObject(c, "streaming");
    int ok = s && cJSON_AddStringToObject(s, "pinned_file", "pinned.safetensors") &&
             tq_json_add_u64(s, "num_layers", p->n_layers) && tq_json_add_u64(s, "page_size", p->align) &&
             cJSON_AddStringToObject(s, "manifest", "split.json");
    if (p->kind == TQ_FLASH_MOE)
        ok = ok && cJSON_AddStringToObject(s, "format", "moe_flash_v1") &&
             cJSON_AddStringToObject(s, "expert_dir", "experts/") && tq_json_add_u64(s, "num_experts", p->num_experts) &&
             tq_json_add_u64(s, "experts_per_tok", p->top_k);
    else
        ok = ok && cJSON_AddStringToObject(s, "format", "flash_aligned_v1") &&
             cJSON_AddStringToObject(s, "ffn_dir", "ffn_aligned/");
    char *text = ok ? tq_json_print(c, e) : NULL;
    cJSON_Delete(c);
    if (!text)
        return ok ? -1 : tq_fail(e, TQ_ENOMEM, "out of memory");
    out_file of;
    int rc = -1;
    if (of_open(&of, r->stage, "config.json", e) == 0) {
        if (of_write(&of, text, strlen(text), e) != 0)
            of_abort(&of);
        else {
            tq_split_file *rec = add_file(r, e);
            if (rec)
                rc = of_commit(&of, rec, e);
            else
                of_abort(&of);
        }
    }
    free(text);
    return rc;
}

static int copy_extra(split_run *r, const char *name, unsigned char *buf, tq_err *e)
{
    char *src = tq_path_join(r->plan.m->path, name, e);
    if (!src)
        return -1;
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tq_fail(e, TQ_EIO, "%s: cannot open: %s", src, strerror(errno));
        free(src);
        return -1;
    }
    out_file of;
    int rc = of_open(&of, r->stage, name, e);
    for (;;) {
        if (rc != 0)
            break;
        ssize_t n = read(fd, buf, CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = tq_fail(e, TQ_EIO, "%s: read error: %s", src, strerror(errno));
            of_abort(&of);
            break;
        }
        if (n == 0) {
            tq_split_file *rec = add_file(r, e);
            if (!rec) {
                of_abort(&of);
                rc = -1;
            } else
                rc = of_commit(&of, rec, e);
            break;
        }
        if ((rc = of_write(&of, buf, (size_t)n, e)) != 0)
            of_abort(&of);
    }
    close(fd);
    free(src);
    return rc;
}

static int reserved_name(const char *n)
{
    return !strcmp(n, "pinned.safetensors") || !strcmp(n, "config.json") || !strcmp(n, "split.json");
}

static int copy_extras(split_run *r, tq_err *e)
{
    const tq_model *m = r->plan.m;
    if (!m->n_extra)
        return 0;
    unsigned char *buf = tq_malloc(CHUNK, e);
    if (!buf)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < m->n_extra && rc == 0; i++) {
        if (reserved_name(m->extra_files[i]))
            rc = tq_fail(e, TQ_EDATA, "%s: extra file '%s' would collide with a split output", m->path, m->extra_files[i]);
        else
            rc = copy_extra(r, m->extra_files[i], buf, e);
    }
    free(buf);
    return rc;
}

/* ------------------------------------------------------------ driver */

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const tq_split_file *)a)->name, ((const tq_split_file *)b)->name);
}

static int make_stage(split_run *r, const char *out_dir, tq_err *e)
{
    if (tq_stage_create(out_dir, &r->stage, e) != 0)
        return -1;
    char *sub = tq_path_join(r->stage, r->plan.kind == TQ_FLASH_MOE ? "experts" : "ffn_aligned", e);
    int rc = sub && mkdir(sub, 0755) == 0 ? 0 : -1;
    if (sub && rc != 0)
        tq_fail(e, TQ_EIO, "%s: cannot create: %s", sub, strerror(errno));
    free(sub);
    return rc;
}

static int finish(split_run *r, const char *out_dir, tq_err *e)
{
    tq_st_writer *w = r->pinned_w;
    r->pinned_w = NULL;
    if (w && tq_st_writer_finish(w, e) != 0)
        return -1;
    qsort(r->files, r->n_files, sizeof *r->files, cmp_file);
    const char *label = r->o->source_label ? r->o->source_label : r->plan.m->path;
    cJSON *j = split_manifest_json(&r->plan, label, r->files, r->n_files, e);
    if (!j)
        return -1;
    char *path = tq_path_join(r->stage, "split.json", e);
    int rc = path ? tq_json_write_file(path, j, e) : -1;
    free(path);
    cJSON_Delete(j);
    if (rc != 0)
        return -1;
    for (size_t i = 0; i < r->n_files; i++) {
        char *p = tq_path_join(r->stage, r->files[i].name, e);
        rc = p ? fsync_path(p, 0, e) : -1;
        free(p);
        if (rc != 0)
            return -1;
    }
    char *sub = tq_path_join(r->stage, r->plan.kind == TQ_FLASH_MOE ? "experts" : "ffn_aligned", e);
    rc = sub ? fsync_path(sub, 1, e) : -1;
    free(sub);
    if (rc != 0 || fsync_path(r->stage, 1, e) != 0)
        return -1;
    if (tq_stage_commit(r->stage, out_dir, e) != 0)
        return -1;
    free(r->stage);
    r->stage = NULL;
    return 0;
}

int tq_split(const char *model, const char *out_dir, const tq_split_opts *o, tq_split_result *res, tq_err *e)
{
    split_run r = {.o = o};
    pthread_mutex_init(&r.prog_mu, NULL);
    tq_model *m = NULL;
    int rc = -1;
    if (tq_model_open(&m, model, e) != 0)
        goto out;
    if (split_plan_build(&r.plan, m, o, e) != 0)
        goto out;
    if (make_stage(&r, out_dir, e) != 0)
        goto out;
    tq_progress_init(&r.prog, "split", r.plan.pinned_bytes + r.plan.ffn_bytes, o->quiet);
    if (write_pinned(&r, e) != 0)
        goto out;
    if (r.plan.kind == TQ_FLASH_MOE) {
        for (size_t i = 0; i < r.plan.n_layers; i++)
            if (write_moe_layer(&r, &r.plan.layers[i], e) != 0)
                goto out;
    } else if (write_dense_layers(&r, e) != 0) {
        goto out;
    }
    if (write_config(&r, e) != 0 || copy_extras(&r, e) != 0)
        goto out;
    if (finish(&r, out_dir, e) != 0)
        goto out;
    tq_progress_end(&r.prog);
    if (res) {
        memset(res, 0, sizeof *res);
        res->kind = r.plan.kind;
        res->pinned_bytes = r.plan.pinned_bytes;
        res->n_layers = r.plan.n_layers;
        res->num_experts = r.plan.num_experts;
        res->experts_per_tok = r.plan.top_k;
        for (size_t i = 0; i < r.plan.n_layers; i++)
            if (r.plan.layers[i].hdr.expert_block_size > res->max_block_size)
                res->max_block_size = r.plan.layers[i].hdr.expert_block_size;
        res->ffn_bytes = r.plan.ffn_bytes;
        for (size_t i = 0; i < r.n_files; i++)
            res->bytes_written += r.files[i].size;
    }
    rc = 0;
out:
    if (r.pinned_w)
        tq_st_writer_abort(r.pinned_w);
    if (r.stage) {
        tq_rm_tree(r.stage);
        free(r.stage);
    }
    for (size_t i = 0; i < r.n_files; i++)
        free(r.files[i].name);
    free(r.files);
    split_plan_free(&r.plan);
    tq_model_close(m);
    pthread_mutex_destroy(&r.prog_mu);
    return rc;
}

int tq_split_plan(const char *model, const tq_split_opts *o, uint64_t ram, tq_plan *pl, tq_err *e)
{
    tq_model *m = NULL;
    split_plan p;
    memset(&p, 0, sizeof p);
    if (tq_model_open(&m, model, e) != 0)
        return -1;
    int rc = split_plan_build(&p, m, o, e);
    if (rc == 0) {
        memset(pl, 0, sizeof *pl);
        pl->kind = p.kind;
        pl->ram = ram;
        pl->pinned_bytes = p.pinned_bytes;
        pl->n_layers = p.n_layers;
        pl->num_experts = p.num_experts;
        pl->experts_per_tok = p.top_k;
        pl->ffn_bytes = p.ffn_bytes;
        for (size_t i = 0; i < p.n_layers; i++) {
            uint64_t b = p.kind == TQ_FLASH_MOE ? p.layers[i].hdr.expert_block_size : p.layers[i].hdr.total_size;
            if (b > pl->block_size)
                pl->block_size = b;
        }
        tq_plan_compute(pl);
    }
    split_plan_free(&p);
    tq_model_close(m);
    return rc;
}
