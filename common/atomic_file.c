/* Atomic output files: FILE.partial-XXXXXX, fsynced and published by tq_publish, or removed. */
#include "common/common.h"
#include "common/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The rule of every output file (man tq-formats(5), OUTPUTS): what is at FINAL now decides
 * what commit may do later. Nothing there: commit creates FINAL and never replaces one that
 * appeared meanwhile. An empty regular file: it gives way at commit, if it is still that
 * empty file. A non-empty regular file: refused unless TQ_AFILE_REPLACE (--force), and then
 * only that file (this device and inode) is replaced at commit. */
int tq_afile_check(tq_afile *f, const char *final_path, int flags, tq_err *e)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->flags = flags;
    if (tq_out_kind_check(final_path, 0, e) != 0)
        return -1;
    struct stat st;
    if (lstat(final_path, &st) == 0) {
        if (st.st_size > 0 && !(flags & TQ_AFILE_REPLACE))
            return tq_fail(e, TQ_EEXIST, "%s: exists and is not empty (use --force to replace it)", final_path);
        f->had_final = 1;
        f->final_empty = st.st_size == 0;
        f->final_dev = (uint64_t)st.st_dev;
        f->final_ino = (uint64_t)st.st_ino;
    }
    if (!(f->final_path = tq_strdup(final_path, e)))
        return -1;
    return 0;
}

int tq_afile_create(tq_afile *f, tq_err *e)
{
    size_t n = strlen(f->final_path);
    if (!(f->tmp_path = tq_malloc(n + sizeof ".partial-XXXXXX", e))) {
        tq_afile_abort(f);
        return -1;
    }
    memcpy(f->tmp_path, f->final_path, n);
    memcpy(f->tmp_path + n, ".partial-XXXXXX", sizeof ".partial-XXXXXX");
    f->fd = tq_plat_mkstemp_cloexec(f->tmp_path);
    if (f->fd < 0) {
        int err = errno;
        free(f->tmp_path);
        f->tmp_path = NULL;
        tq_fail(e, TQ_EIO, "%s: cannot create output: %s", f->final_path, strerror(err));
        tq_afile_abort(f);
        return -1;
    }
    fchmod(f->fd, 0644);
    tq_partials_add(f->tmp_path);
    return 0;
}

int tq_afile_open(tq_afile *f, const char *final_path, int flags, tq_err *e)
{
    /* Only a regular file is ever replaced: a device (/dev/stdout, /dev/null), a FIFO, a
     * socket, a directory or a symbolic link given as an output is refused, untouched. */
    if (tq_afile_check(f, final_path, flags, e) != 0) {
        tq_afile_abort(f);
        return -1;
    }
    return tq_afile_create(f, e);
}

static void afile_clear(tq_afile *f)
{
    if (f->tmp_path)
        tq_partials_forget(f->tmp_path);
    free(f->tmp_path);
    free(f->final_path);
    f->tmp_path = f->final_path = NULL;
}

int tq_afile_sync(tq_afile *f, tq_err *e)
{
    if (f->fd < 0)
        return 0;
    int rc = fsync(f->fd);
    if (rc == 0) {
        rc = close(f->fd);
        f->fd = -1;
    }
    if (rc != 0) {
        tq_fail(e, TQ_EIO, "%s: %s failed: %s", f->tmp_path, f->fd >= 0 ? "fsync" : "close", strerror(errno));
        tq_afile_abort(f);
        return -1;
    }
    return 0;
}

/* FINAL is still the file seen by tq_afile_check that commit may replace. */
static int still_there(const tq_afile *f)
{
    struct stat st;
    return lstat(f->final_path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_dev == f->final_dev &&
           (uint64_t)st.st_ino == f->final_ino && ((f->flags & TQ_AFILE_REPLACE) || st.st_size == 0);
}

int tq_afile_ready(const tq_afile *f, tq_err *e)
{
    struct stat st;
    if (lstat(f->final_path, &st) != 0 || (f->had_final && still_there(f)))
        return 0;
    return tq_fail(e, TQ_EEXIST,
                   "%s: appeared while this output was being written; it was left as it is, and the complete new "
                   "output is kept at %s",
                   f->final_path, f->tmp_path ? f->tmp_path : "?");
}

int tq_afile_commit(tq_afile *f, tq_err *e)
{
    if (tq_afile_sync(f, e) != 0)
        return -1;
    /* no longer a partial to remove on a signal; after an interruption's cleanup began this
     * waits for the exit, so nothing is published then */
    tq_partials_forget(f->tmp_path);
    /* On a conflict the complete output stays where the message says; otherwise it is gone.
     * Only the file seen at check is replaced (an empty one, or any with REPLACE), and only
     * while it is still that file; anything else at FINAL is left as it is. */
    int rc;
    if (f->had_final && still_there(f))
        rc = tq_publish_over(f->tmp_path, f->final_path, f->final_dev, f->final_ino, e);
    else
        rc = tq_publish(f->tmp_path, f->final_path, 0, e);
    afile_clear(f);
    return rc;
}

char *tq_afile_keep(tq_afile *f)
{
    if (f->fd >= 0) {
        fsync(f->fd);
        close(f->fd);
    }
    f->fd = -1;
    char *kept = f->tmp_path;
    if (kept)
        tq_partials_forget(kept);
    f->tmp_path = NULL;
    afile_clear(f);
    return kept;
}

void tq_afile_abort(tq_afile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->tmp_path)
        unlink(f->tmp_path);
    afile_clear(f);
}

int tq_out_kind_check(const char *path, int dir, tq_err *e)
{
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode) || (dir && S_ISDIR(st.st_mode)))
        return 0;
    return tq_fail(e, TQ_EUSAGE, "%s: %s, not a %s: outputs are written as new %s%s", path,
                   tq_file_kind((unsigned)st.st_mode), dir ? "directory" : "regular file",
                   dir ? "directories" : "regular files", S_ISLNK(st.st_mode) ? " (a link is not followed)" : "");
}

int tq_out_file_check(const char *path, int force, tq_err *e)
{
    tq_afile f;
    int rc = tq_afile_check(&f, path, force ? TQ_AFILE_REPLACE : 0, e);
    tq_afile_abort(&f);
    return rc;
}

int tq_write_file_atomic(const char *path, const void *data, size_t len, tq_err *e)
{
    tq_afile f;
    if (tq_afile_open(&f, path, TQ_AFILE_REPLACE, e) != 0)
        return -1;
    if (tq_write_full(f.fd, data, len, path, e) != 0) {
        tq_afile_abort(&f);
        return -1;
    }
    return tq_afile_commit(&f, e);
}
