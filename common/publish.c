/* The one commit step of every output: a complete partial (file or directory) takes its final
 * name with a rename that never replaces what the tool did not mean to replace. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/platform.h"

/* ------------------------------------------------------------ test hooks */

/* TQ_CRASH_AT_STEP=N: SIGKILL at the N-th step point (1-based) of this process. Step points
 * are the moments between the system calls that publish an output or remove a replaced
 * one, so a test can kill a tool at every one of them in turn. */
static _Atomic long step_left = -2; /* -2: not read yet, -1: disabled */

void tq_test_step(void)
{
    long s = atomic_load(&step_left);
    if (s == -1)
        return;
    if (s == -2) {
        const char *v = getenv("TQ_CRASH_AT_STEP");
        long want = v && *v ? atol(v) : -1;
        long expect = -2;
        atomic_compare_exchange_strong(&step_left, &expect, want < 1 ? -1 : want);
        if (want < 1)
            return;
    }
    if (atomic_fetch_sub(&step_left, 1) == 1)
        kill(getpid(), SIGKILL);
}

/* TQ_RENAME_FALLBACK=1: behave as on a system without renameat2/renamex_np, so the portable
 * fallbacks are tested on every machine. */
static int use_fallback(void)
{
    const char *s = getenv("TQ_RENAME_FALLBACK");
    return s && *s && strcmp(s, "0") != 0;
}

/* ------------------------------------------------------------ renames */

enum { R_NOREPLACE = 1, R_EXCHANGE = 2 };

/* The kernel's flagged rename; -1 with errno EINVAL/ENOSYS/ENOTSUP when this system or
 * filesystem has none (the caller then falls back). */
static int rename_flags(const char *from, const char *to, int how)
{
    if (use_fallback()) {
        errno = ENOSYS;
        return -1;
    }
    return tq_plat_rename(from, to, how == R_EXCHANGE);
}

static int unsupported(int err)
{
    return err == EINVAL || err == ENOSYS || err == ENOTSUP || err == EOPNOTSUPP;
}

/* Move from to to unless to exists (then -1, errno EEXIST). */
static int rename_noreplace(const char *from, const char *to, int is_dir)
{
    if (rename_flags(from, to, R_NOREPLACE) == 0)
        return 0;
    if (!unsupported(errno))
        return -1;
    struct stat st;
    if (is_dir) {
        /* rename(2) fails on a non-empty directory (ENOTEMPTY/EEXIST) and on a file (ENOTDIR):
         * at worst an empty directory made meanwhile is replaced, and nothing is lost. */
        if (lstat(to, &st) == 0 && !S_ISDIR(st.st_mode)) {
            errno = EEXIST;
            return -1;
        }
        if (rename(from, to) == 0)
            return 0;
        if (errno == ENOTEMPTY || errno == ENOTDIR)
            errno = EEXIST;
        return -1;
    }
    /* link(2) never replaces: it fails with EEXIST. */
    if (link(from, to) == 0) {
        unlink(from);
        return 0;
    }
    if (errno == EEXIST)
        return -1;
    /* No hard links here (some FUSE and FAT filesystems): look, then rename; a file made
     * between the two is replaced, the one window this fallback leaves. */
    if (lstat(to, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(from, to);
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

void tq_fsync_parent(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    while (n > 0 && path[n - 1] != '/')
        n--;
    if (n == 0) {
        fsync_dir(".");
        return;
    }
    char *p = strndup(path, n);
    if (p) {
        fsync_dir(p);
        free(p);
    }
}

/* FINAL with its trailing slashes dropped, followed by suffix. */
char *tq_sibling_path(const char *final_path, const char *suffix, tq_err *e)
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

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    tq_test_step();
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

char *tq_temp_dir(const char *prefix, tq_err *e)
{
    const char *tmp = getenv("TMPDIR");
    char *dir = tq_asprintf(e, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (dir && !mkdtemp(dir)) {
        tq_fail(e, TQ_EIO, "%s: cannot create a temporary directory: %s", dir, strerror(errno));
        free(dir);
        return NULL;
    }
    return dir;
}

static void remove_any(const char *path, int is_dir)
{
    if (is_dir)
        tq_rm_tree(path);
    else
        unlink(path);
}

/* The replaced output, wherever it is now, is the one the caller meant: no expectation, or
 * the same device and inode. */
typedef struct expect {
    int any;              /* replace whatever is there */
    uint64_t dev, ino;
} expect;

static int is_expected(const char *path, const expect *x)
{
    struct stat st;
    return x->any || (lstat(path, &st) == 0 && (uint64_t)st.st_dev == x->dev && (uint64_t)st.st_ino == x->ino);
}

static int appeared(const char *final_path, const char *tmp, tq_err *e)
{
    return tq_fail(e, TQ_EEXIST,
                   "%s: appeared while this output was being written; it was left as it is, and the complete new "
                   "output is kept at %s",
                   final_path, tmp);
}

/* Replace without RENAME_EXCHANGE: a file is replaced by rename(2), which is atomic; a
 * directory is first moved aside to FINAL.old-XXXXXX (put back if it is not the expected one
 * or the second rename fails), so an interruption between the two renames leaves the earlier
 * output under that name. */
static int replace_fallback(const char *tmp, const char *final_path, int is_dir, const expect *x, tq_err *e)
{
    if (!is_dir) {
        if (!is_expected(final_path, x))
            return appeared(final_path, tmp, e);
        if (rename(tmp, final_path) != 0)
            return tq_fail(e, TQ_EIO, "%s: cannot rename %s into place: %s", final_path, tmp, strerror(errno));
        tq_test_step();
        tq_fsync_parent(final_path);
        return 0;
    }
    char *old = tq_sibling_path(final_path, ".old-XXXXXX", e);
    if (!old)
        return -1;
    /* mkdtemp reserves a unique name; rename(2) then replaces that empty directory. */
    int made = mkdtemp(old) != NULL;
    if (!made || rename(final_path, old) != 0) {
        int err = errno;
        if (made)
            rmdir(old);
        free(old);
        return tq_fail(e, TQ_EIO, "%s: cannot move the earlier output aside: %s", final_path, strerror(err));
    }
    tq_test_step();
    if (!is_expected(old, x)) {
        rename(old, final_path);
        free(old);
        return appeared(final_path, tmp, e);
    }
    if (rename(tmp, final_path) != 0) {
        int err = errno;
        rename(old, final_path);
        free(old);
        return tq_fail(e, TQ_EIO, "%s: cannot rename %s into place: %s", final_path, tmp, strerror(err));
    }
    tq_test_step();
    tq_fsync_parent(final_path);
    tq_test_step();
    tq_rm_tree(old);
    free(old);
    return 0;
}

static int publish(const char *tmp, const char *final_path, int flags, const expect *x, tq_err *e)
{
    struct stat st;
    if (lstat(tmp, &st) != 0)
        return tq_fail(e, TQ_EIO, "%s: the output to publish is gone: %s", tmp, strerror(errno));
    int is_dir = S_ISDIR(st.st_mode);
    tq_test_step();
    if (rename_noreplace(tmp, final_path, is_dir) == 0) {
        tq_test_step();
        tq_fsync_parent(final_path);
        return 0;
    }
    int err = errno;
    if (err != EEXIST)
        return tq_fail(e, TQ_EIO, "%s: cannot rename %s into place: %s", final_path, tmp, strerror(err));
    if (!(flags & TQ_PUBLISH_REPLACE))
        return appeared(final_path, tmp, e);
    if (lstat(final_path, &st) == 0 && !S_ISDIR(st.st_mode) != !is_dir)
        return tq_fail(e, TQ_EEXIST, "%s: exists and is %s; refusing to replace it with a %s (the new output is kept at %s)",
                       final_path, is_dir ? "not a directory" : "a directory", is_dir ? "directory" : "file", tmp);
    if (!is_dir) /* rename(2) replaces a file atomically */
        return replace_fallback(tmp, final_path, 0, x, e);
    /* Swap: FINAL holds the new output and TMP the old one, in one step; only then is the
     * old one removed. Had someone else's directory taken FINAL's place meanwhile, it is
     * swapped back, untouched. */
    if (!is_expected(final_path, x))
        return appeared(final_path, tmp, e);
    if (rename_flags(tmp, final_path, R_EXCHANGE) != 0) {
        if (!unsupported(errno))
            return tq_fail(e, TQ_EIO, "%s: cannot exchange it with %s: %s", final_path, tmp, strerror(errno));
        return replace_fallback(tmp, final_path, 1, x, e);
    }
    tq_test_step();
    if (!is_expected(tmp, x)) {
        rename_flags(tmp, final_path, R_EXCHANGE);
        return appeared(final_path, tmp, e);
    }
    tq_fsync_parent(final_path);
    tq_test_step();
    remove_any(tmp, is_dir);
    return 0;
}

/* On any failure but a conflict the partial is removed. */
static int publish_or_remove(const char *tmp, const char *final_path, int flags, const expect *x, tq_err *e)
{
    tq_err local = {0};
    if (!e)
        e = &local;
    int rc = publish(tmp, final_path, flags, x, e);
    if (rc != 0 && e->code != TQ_EEXIST) {
        struct stat st;
        if (lstat(tmp, &st) == 0)
            remove_any(tmp, S_ISDIR(st.st_mode));
    }
    return rc;
}

int tq_publish(const char *tmp, const char *final_path, int flags, tq_err *e)
{
    expect x = {.any = 1};
    return publish_or_remove(tmp, final_path, flags, &x, e);
}

int tq_publish_over(const char *tmp, const char *final_path, uint64_t dev, uint64_t ino, tq_err *e)
{
    expect x = {.any = 0, .dev = dev, .ino = ino};
    return publish_or_remove(tmp, final_path, TQ_PUBLISH_REPLACE, &x, e);
}
