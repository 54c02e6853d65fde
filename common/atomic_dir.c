/* Output directories that appear all at once: built as FINAL.partial-XXXXXX, renamed last. */
#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(p);
    else
        unlink(p);
    return 0;
}

void tq_rm_tree(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

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

/* FINAL with trailing slashes dropped, plus a suffix ending in XXXXXX for mkdtemp. */
static char *sibling_name(const char *final_path, const char *suffix, tq_err *e)
{
    size_t len = strlen(final_path), sl = strlen(suffix);
    while (len > 1 && final_path[len - 1] == '/')
        len--;
    char *s = tq_malloc(len + sl + 1, e);
    if (s) {
        memcpy(s, final_path, len);
        memcpy(s + len, suffix, sl + 1);
    }
    return s;
}

int tq_adir_open(tq_adir *d, const char *final_path, int flags, tq_err *e)
{
    memset(d, 0, sizeof *d);
    struct stat st;
    if (lstat(final_path, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return tq_fail(e, TQ_EEXIST, "%s: exists and is not a directory", final_path);
        if (!(flags & TQ_ADIR_REPLACE) && !tq_dir_is_empty(final_path))
            return tq_fail(e, TQ_EEXIST, "%s: exists and is not empty; refusing to overwrite", final_path);
    }
    if (!(d->final_path = sibling_name(final_path, "", e)))
        return -1;
    if (!(d->tmp_path = sibling_name(final_path, ".partial-XXXXXX", e)) || !mkdtemp(d->tmp_path)) {
        int err = errno;
        free(d->final_path);
        free(d->tmp_path);
        memset(d, 0, sizeof *d);
        return tq_fail(e, TQ_EIO, "%s: cannot create the output directory: %s", final_path, strerror(err));
    }
    mode_t um = umask(0); /* mkdtemp makes 0700; the output gets the usual permissions */
    umask(um);
    chmod(d->tmp_path, 0777 & ~um);
    return 0;
}

static void fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

static void fsync_parent_of(const char *path)
{
    char *parent = strdup(path);
    if (!parent)
        return;
    char *slash = strrchr(parent, '/');
    if (slash)
        *(slash == parent ? slash + 1 : slash) = 0;
    fsync_path(slash ? parent : ".");
    free(parent);
}

int tq_adir_commit(tq_adir *d, tq_err *e)
{
    fsync_path(d->tmp_path);
    char *old = NULL;
    struct stat st;
    /* rename(2) replaces an empty directory atomically; a non-empty one (allowed only with
     * TQ_ADIR_REPLACE) is first moved aside, so FINAL always names a complete output. */
    if (lstat(d->final_path, &st) == 0 && !tq_dir_is_empty(d->final_path)) {
        if (!(old = sibling_name(d->final_path, ".old-XXXXXX", e)) || !mkdtemp(old) || rmdir(old) != 0 ||
            rename(d->final_path, old) != 0) {
            int err = errno;
            free(old);
            tq_adir_abort(d);
            return tq_fail(e, TQ_EIO, "cannot move the earlier output aside: %s", strerror(err));
        }
    }
    if (rename(d->tmp_path, d->final_path) != 0) {
        int err = errno;
        if (old)
            rename(old, d->final_path);
        free(old);
        tq_fail(e, TQ_EIO, "%s: cannot rename %s into place: %s", d->final_path, d->tmp_path, strerror(err));
        tq_adir_abort(d);
        return -1;
    }
    fsync_parent_of(d->final_path);
    if (old) {
        tq_rm_tree(old);
        free(old);
    }
    free(d->tmp_path);
    free(d->final_path);
    memset(d, 0, sizeof *d);
    return 0;
}

void tq_adir_abort(tq_adir *d)
{
    if (d->tmp_path)
        tq_rm_tree(d->tmp_path);
    free(d->tmp_path);
    free(d->final_path);
    memset(d, 0, sizeof *d);
}
