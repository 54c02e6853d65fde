/* Output files of tq-rowlayout: refuse to replace anything (including the source under
 * another name), commit with a rename that cannot clobber a file created meanwhile. */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rows_out_refuse(const char *out, const char *source, tq_err *e)
{
    struct stat so, oo;
    if (source && stat(out, &oo) == 0 && stat(source, &so) == 0 && so.st_dev == oo.st_dev && so.st_ino == oo.st_ino)
        return tq_fail(e, TQ_EEXIST, "%s: is the source file itself (same device and inode); choose a new output path",
                       out);
    if (lstat(out, &oo) == 0)
        return tq_fail(e, TQ_EEXIST, "%s: already exists; refusing to overwrite", out);
    return 0;
}

int rows_out_reserve(tq_afile *f, uint64_t size, tq_err *e)
{
#ifdef __linux__
    /* Fail early on a full disk or a file-size limit; filesystems without fallocate just
     * get the bytes as they are written. */
    if (size && fallocate(f->fd, 0, 0, (off_t)size) != 0 && (errno == ENOSPC || errno == EFBIG || errno == EDQUOT))
        return tq_fail(e, TQ_EIO, "%s: cannot reserve %llu bytes: %s", f->final_path, (unsigned long long)size,
                       strerror(errno));
#endif
    (void)f;
    (void)size;
    (void)e;
    return 0;
}

static int rename_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return -1;
#endif
    if (link(from, to) == 0) {
        unlink(from);
        return 0;
    }
    if (errno == EEXIST)
        return -1;
    struct stat st;
    if (lstat(to, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(from, to);
}

int rows_out_commit(tq_afile *f, tq_err *e)
{
    if (fsync(f->fd) != 0) {
        int err = errno;
        tq_fail(e, TQ_EIO, "%s: fsync failed: %s", f->tmp_path, strerror(err));
        tq_afile_abort(f);
        return -1;
    }
    int rc = close(f->fd);
    f->fd = -1;
    if (rc != 0) {
        tq_fail(e, TQ_EIO, "%s: close failed: %s", f->tmp_path, strerror(errno));
        tq_afile_abort(f);
        return -1;
    }
    if (rename_noreplace(f->tmp_path, f->final_path) != 0) {
        int err = errno;
        tq_fail(e, err == EEXIST ? TQ_EEXIST : TQ_EIO, "%s: cannot rename into place: %s", f->final_path,
                err == EEXIST ? "a file of that name appeared meanwhile" : strerror(err));
        tq_afile_abort(f);
        return -1;
    }
    char *copy = strdup(f->final_path);
    if (copy) {
        int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(copy);
    }
    free(f->tmp_path);
    free(f->final_path);
    f->tmp_path = f->final_path = NULL;
    return 0;
}

char *rows_out_keep(tq_afile *f)
{
    if (f->fd >= 0) {
        fsync(f->fd);
        close(f->fd);
    }
    f->fd = -1;
    char *kept = f->tmp_path;
    free(f->final_path);
    f->tmp_path = f->final_path = NULL;
    return kept;
}
