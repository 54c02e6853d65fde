/* Output directories that appear all at once: built as FINAL.partial-XXXXXX, renamed last. */
#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tq_dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    return empty;
}

int tq_adir_check(const char *final_path, int flags, tq_err *e)
{
    struct stat st;
    if (lstat(final_path, &st) != 0)
        return 0;
    if (tq_out_kind_check(final_path, 1, e))
        return -1;
    if (!S_ISDIR(st.st_mode))
        return tq_fail(e, TQ_EEXIST, "%s: exists and is not a directory", final_path);
    if (!(flags & TQ_ADIR_REPLACE) && !tq_dir_is_empty(final_path))
        return tq_fail(e, TQ_EEXIST, "%s: exists and is not empty (use --force to replace it)", final_path);
    return 0;
}

int tq_out_dir_check(const char *out, const char *in, int force, tq_err *e)
{
    if (in && tq_check_out_in(out, in, e))
        return -1;
    return tq_adir_check(out, force ? TQ_ADIR_REPLACE : 0, e);
}

/* FINAL.partial-resume: reused when it is a directory (not a link to one), else made. */
static int open_resume(tq_adir *d, tq_err *e)
{
    struct stat st;
    int err = 0;
    if (!(d->tmp_path = tq_sibling_path(d->final_path, TQ_RESUME_SUFFIX, e)))
        err = -1;
    else if (lstat(d->tmp_path, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            err = tq_fail(e, TQ_EEXIST, "%s: exists and is %s, not the directory of an interrupted --resume run",
                          d->tmp_path, tq_file_kind((unsigned)st.st_mode));
    } else if (errno != ENOENT || mkdir(d->tmp_path, 0777) != 0) {
        err = tq_fail(e, TQ_EIO, "%s: cannot create the output directory: %s", d->tmp_path, strerror(errno));
    }
    if (err) {
        free(d->final_path);
        free(d->tmp_path);
        memset(d, 0, sizeof *d);
        return -1;
    }
    tq_partials_keep(d->tmp_path);
    return 0;
}

int tq_adir_open(tq_adir *d, const char *final_path, int flags, tq_err *e)
{
    memset(d, 0, sizeof *d);
    d->flags = flags;
    struct stat st;
    if (tq_adir_check(final_path, flags, e) != 0)
        return -1;
    if (lstat(final_path, &st) == 0) {
        d->final_empty = tq_dir_is_empty(final_path);
        d->had_final = 1;
        d->final_dev = (uint64_t)st.st_dev;
        d->final_ino = (uint64_t)st.st_ino;
    }
    if (!(d->final_path = tq_sibling_path(final_path, "", e)))
        return -1;
    if (flags & TQ_ADIR_RESUME)
        return open_resume(d, e);
    if (!(d->tmp_path = tq_sibling_path(final_path, ".partial-XXXXXX", e)) || !mkdtemp(d->tmp_path)) {
        int err = errno;
        free(d->final_path);
        free(d->tmp_path);
        memset(d, 0, sizeof *d);
        return tq_fail(e, TQ_EIO, "%s: cannot create the output directory: %s", final_path, strerror(err));
    }
    mode_t um = umask(0); /* mkdtemp makes 0700; the output gets the usual permissions */
    umask(um);
    chmod(d->tmp_path, 0777 & ~um);
    tq_partials_add(d->tmp_path);
    return 0;
}

static void adir_clear(tq_adir *d)
{
    if (d->tmp_path && (d->flags & TQ_ADIR_RESUME))
        tq_partials_keep(NULL);
    else if (d->tmp_path)
        tq_partials_forget(d->tmp_path);
    free(d->tmp_path);
    free(d->final_path);
    memset(d, 0, sizeof *d);
}

int tq_adir_commit(tq_adir *d, tq_err *e)
{
    int fd = open(d->tmp_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    /* The empty FINAL that was there at open gives way; rmdir(2) fails if anything was put in
     * it meanwhile, and tq_publish then refuses. With REPLACE only the FINAL seen at open is
     * replaced, never one that took its place meanwhile. On a conflict the complete output
     * stays where the message says; on any other failure it is gone. */
    struct stat st;
    int rc;
    tq_partials_forget(d->tmp_path); /* as tq_afile_commit */
    if (d->had_final && (d->flags & TQ_ADIR_REPLACE)) {
        rc = tq_publish_over(d->tmp_path, d->final_path, d->final_dev, d->final_ino, e);
    } else {
        if (d->had_final && d->final_empty && lstat(d->final_path, &st) == 0 && (uint64_t)st.st_dev == d->final_dev &&
            (uint64_t)st.st_ino == d->final_ino) {
            tq_test_step();
            rmdir(d->final_path);
        }
        rc = tq_publish(d->tmp_path, d->final_path, 0, e);
    }
    adir_clear(d);
    return rc;
}

char *tq_adir_keep(tq_adir *d)
{
    char *kept = d->tmp_path;
    if (kept)
        tq_partials_forget(kept);
    d->tmp_path = NULL;
    adir_clear(d);
    return kept;
}

void tq_adir_abort(tq_adir *d)
{
    if (d->tmp_path && !(d->flags & TQ_ADIR_RESUME)) /* a resumable one stays for the rerun */
        tq_rm_tree(d->tmp_path);
    adir_clear(d);
}
