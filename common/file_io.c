/* Whole reads and writes at offsets, small files, directories, file copies; the crash/pause test hooks. */
#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

/* Fault injection for the crash-safety tests: with TQ_CRASH_AFTER_BYTES=N in the environment
 * the process SIGKILLs itself once N bytes have gone through tq_pwrite_full/tq_write_full,
 * which is every byte tq writes to an output file. */
static _Atomic long long crash_budget = -2; /* -2: not read yet, -1: disabled */

static void crash_hook(size_t n)
{
    long long b = atomic_load(&crash_budget);
    if (b == -1)
        return;
    if (b == -2) {
        const char *v = getenv("TQ_CRASH_AFTER_BYTES");
        long long want = v && *v ? atoll(v) : -1;
        long long expect = -2;
        atomic_compare_exchange_strong(&crash_budget, &expect, want < 0 ? -1 : want);
        if (want < 0)
            return;
    }
    if (atomic_fetch_sub(&crash_budget, (long long)n) - (long long)n < 0)
        kill(getpid(), SIGKILL);
}

/* The same with TQ_PAUSE_AFTER_BYTES=N: the process stops itself (SIGSTOP) once, before the
 * write that crosses N bytes, so a test can change an input under it and then SIGCONT it. */
static _Atomic long long pause_budget = -2;

static void pause_hook(size_t n)
{
    long long b = atomic_load(&pause_budget);
    if (b == -1)
        return;
    if (b == -2) {
        const char *v = getenv("TQ_PAUSE_AFTER_BYTES");
        long long want = v && *v ? atoll(v) : -1;
        long long expect = -2;
        atomic_compare_exchange_strong(&pause_budget, &expect, want < 0 ? -1 : want);
        if (want < 0)
            return;
    }
    long long before = atomic_fetch_sub(&pause_budget, (long long)n);
    if (before >= 0 && before - (long long)n < 0) {
        atomic_store(&pause_budget, -1);
        kill(getpid(), SIGSTOP);
    }
}

int tq_pread_full(int fd, void *buf, size_t len, uint64_t off, const char *path, tq_err *e)
{
    char *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, p + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tq_fail(e, TQ_EIO, "%s: read error at offset %llu: %s", path,
                           (unsigned long long)(off + done), strerror(errno));
        }
        if (n == 0)
            return tq_fail(e, TQ_EDATA, "%s: unexpected end of file at offset %llu (wanted %zu more bytes; file changed or truncated?)",
                           path, (unsigned long long)(off + done), len - done);
        done += (size_t)n;
    }
    return 0;
}

int tq_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, const char *path, tq_err *e)
{
    const char *p = buf;
    size_t done = 0;
    crash_hook(len);
    pause_hook(len);
    while (done < len) {
        ssize_t n = pwrite(fd, p + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tq_fail(e, TQ_EIO, "%s: write error at offset %llu: %s", path,
                           (unsigned long long)(off + done), strerror(errno));
        }
        done += (size_t)n;
    }
    return 0;
}

int tq_write_full(int fd, const void *buf, size_t len, const char *path, tq_err *e)
{
    const char *p = buf;
    size_t done = 0;
    crash_hook(len);
    pause_hook(len);
    while (done < len) {
        ssize_t n = write(fd, p + done, len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return tq_fail(e, TQ_EIO, "%s: write error: %s", path, strerror(errno));
        }
        done += (size_t)n;
    }
    return 0;
}

const char *tq_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    default: return "not a file";
    }
}

int tq_open_regular_flags(const char *path, int flags, uint64_t *size, tq_err *e)
{
    /* O_NONBLOCK: opening a FIFO (or a device) for reading would wait for a writer; the
     * flag is cleared once the file is known to be regular, where it changes nothing. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
    struct stat st;
    if (fd < 0) {
        int err = errno;
        /* a socket cannot be opened at all (ENXIO): name what it is rather than the errno */
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return tq_fail(e, TQ_EDATA, "%s: not a regular file (%s)", path, tq_file_kind((unsigned)st.st_mode));
        return tq_fail(e, TQ_EIO, "%s: cannot open: %s", path, strerror(err));
    }
    if (fstat(fd, &st) != 0) {
        tq_fail(e, TQ_EIO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tq_fail(e, TQ_EDATA, "%s: not a regular file (%s)", path, tq_file_kind((unsigned)st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        tq_fail(e, TQ_EIO, "%s: cannot clear O_NONBLOCK: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (size)
        *size = (uint64_t)st.st_size;
    return fd;
}

int tq_open_regular(const char *path, uint64_t *size, tq_err *e)
{
    return tq_open_regular_flags(path, 0, size, e);
}

int tq_read_small_file(const char *path, size_t max, char **out, size_t *len, tq_err *e)
{
    uint64_t size;
    int fd = tq_open_regular(path, &size, e);
    if (fd < 0)
        return -1;
    if (size > max) {
        close(fd);
        return tq_fail(e, TQ_EDATA, "%s: file is %llu bytes, more than the %zu allowed", path,
                       (unsigned long long)size, max);
    }
    size_t n = (size_t)size;
    char *buf = tq_malloc(n + 1, e);
    if (!buf) {
        close(fd);
        return -1;
    }
    if (tq_pread_full(fd, buf, n, 0, path, e) != 0) {
        free(buf);
        close(fd);
        return -1;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return 0;
}

int tq_file_size(const char *path, uint64_t *size, tq_err *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tq_fail(e, TQ_EIO, "%s: cannot stat: %s", path, strerror(errno));
    *size = (uint64_t)st.st_size;
    return 0;
}

int tq_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int tq_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int tq_mkdir_p(const char *path, tq_err *e)
{
    char *p = tq_strdup(path, e);
    if (!p)
        return -1;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                int err = errno;
                free(p);
                return tq_fail(e, TQ_EIO, "%s: cannot create directory: %s", path, strerror(err));
            }
            *s = c;
            if (!c)
                break;
        }
    }
    free(p);
    if (!tq_is_dir(path))
        return tq_fail(e, TQ_EIO, "%s: exists and is not a directory", path);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int tq_list_dir(const char *dir, char ***names, size_t *n, tq_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return tq_fail(e, TQ_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, cap * sizeof *v);
            if (!nv)
                goto oom;
            v = nv;
        }
        if (!(v[cnt] = strdup(de->d_name)))
            goto oom;
        cnt++;
    }
    closedir(d);
    if (cnt)
        qsort(v, cnt, sizeof *v, cmp_str);
    *names = v;
    *n = cnt;
    return 0;
oom:
    closedir(d);
    tq_free_strv(v, cnt);
    return tq_fail(e, TQ_ENOMEM, "%s: out of memory listing directory", dir);
}
