/* Output files of tq_split: created in the staging directory, hashed while written, O_DIRECT
 * where possible, fsynced together at the end; and the run's list of finished files, which the
 * layer and pinned writers add to. */
#include "common/platform.h"
#include "layout/split/split_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Files go straight into the private staging directory (the directory is what appears
 * atomically); they are fsynced together just before it is renamed, so writeback of one file
 * overlaps the work on the next instead of stalling it. */
int split_of_open(out_file *f, const char *dir, const char *rel, tq_err *e)
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

int split_of_write(out_file *f, const void *buf, size_t len, tq_err *e)
{
    if (tq_pwrite_full(f->fd, buf, len, f->size, f->path, e) != 0)
        return -1;
    tq_sha256_update(f->sha, buf, len);
    f->size += len;
    return 0;
}

void split_of_abort(out_file *f)
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
int split_of_commit(out_file *f, tq_flash_file *rec, tq_err *e)
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

int split_fsync_path(const char *path, int dir, tq_err *e)
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
void *split_aligned_zeroed(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, TQ_FLASH_MIN_ALIGN, n ? n : 1) != 0)
        return NULL;
    memset(p, 0, n);
    return p;
}

void split_of_try_direct(out_file *f)
{
    (void)tq_plat_uncached(f->fd, 1);
}

int split_write_direct(out_file *f, const void *buf, size_t len, uint64_t off, tq_err *e)
{
    if (tq_pwrite_full(f->fd, buf, len, off, f->path, e) == 0)
        return 0;
    /* accepted at open, refused on write (EINVAL): once more through the page cache */
    if (tq_plat_is_uncached(f->fd) && tq_plat_uncached(f->fd, 0) == 0)
        return tq_pwrite_full(f->fd, buf, len, off, f->path, e);
    return -1;
}

tq_flash_file *split_add_file(split_run *r, tq_err *e)
{
    if (r->n_files == r->cap_files) {
        size_t cap = r->cap_files ? r->cap_files * 2 : 64;
        tq_flash_file *n = realloc(r->files, cap * sizeof *n);
        if (!n) {
            tq_fail(e, TQ_ENOMEM, "out of memory");
            return NULL;
        }
        r->files = n;
        r->cap_files = cap;
    }
    tq_flash_file *f = &r->files[r->n_files++];
    memset(f, 0, sizeof *f);
    return f;
}
