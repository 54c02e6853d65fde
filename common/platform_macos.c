/* common/platform_macos.c — common/platform.h on macOS, written from Apple's man pages (fcntl(2), rename(2)/renamex_np, sysctlbyname(3), getrusage(2), sysconf(3)); built only on macOS and never run: no Mac was at hand. */
#include "common/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sysctl.h>
#include <sys/types.h>
#include <unistd.h>

const char *tq_plat_name(void)
{
    return "macos";
}

void tq_plat_advise(int fd, uint64_t off, uint64_t len, int advice)
{
    /* macOS has no posix_fadvise. fcntl(2): "F_RDADVISE  Issue an advisory read async with no
     * copy to user", taking a struct radvisory {off_t ra_offset; int ra_count;}. SEQUENTIAL is
     * the default read-ahead (F_RDAHEAD, on by default) and DONTNEED has no equivalent. */
    if (advice != TQ_ADV_WILLNEED)
        return;
    while (len > 0) {
        int n = len > (1u << 30) ? 1 << 30 : (int)len;
        struct radvisory ra = {.ra_offset = (off_t)off, .ra_count = n};
        if (fcntl(fd, F_RDADVISE, &ra) == -1)
            return;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
}

int tq_plat_uncached(int fd, int on)
{
    /* fcntl(2): "F_NOCACHE  Turns data caching off/on. A non-zero value in arg turns data
     * caching off. A value of zero in arg turns data caching on." No alignment is required. */
    return fcntl(fd, F_NOCACHE, on ? 1 : 0) == -1 ? -1 : 0;
}

int tq_plat_is_uncached(int fd)
{
#ifdef F_GETNOCACHE
    int r = fcntl(fd, F_GETNOCACHE);
    return r > 0;
#else
    (void)fd;
    return 0;
#endif
}

int tq_plat_mkstemp_cloexec(char *tmpl)
{
    return mkostemp(tmpl, O_CLOEXEC);
}

int tq_plat_rename(const char *from, const char *to, int exchange)
{
    /* rename(2): "renamex_np() ... RENAME_SWAP: On file systems that support it, it will cause
     * the source and target to be atomically swapped. RENAME_EXCL: On file systems that
     * support it, it will cause EEXIST to be returned if the destination already exists."
     * Where the filesystem has neither it fails with ENOTSUP (macOS 10.12 and later). */
#if defined(RENAME_EXCL) && defined(RENAME_SWAP)
    return renamex_np(from, to, exchange ? RENAME_SWAP : RENAME_EXCL);
#else
    (void)from;
    (void)to;
    (void)exchange;
    errno = ENOSYS;
    return -1;
#endif
}

int tq_plat_cpus(void)
{
    /* sysctl(3): "hw.activecpu  The number of processors currently available for executing
     * threads." macOS has no affinity masks or cgroup quotas. */
    int n = 0;
    size_t sz = sizeof n;
    if (sysctlbyname("hw.activecpu", &n, &sz, NULL, 0) != 0 || n < 1) {
        long m = sysconf(_SC_NPROCESSORS_ONLN);
        n = m < 1 ? 1 : m > 1 << 20 ? 1 << 20 : (int)m;
    }
    return n;
}

uint64_t tq_plat_peak_rss(void)
{
    /* getrusage(2) on macOS: ru_maxrss is in bytes (Linux: kilobytes). */
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_maxrss;
}

uint64_t tq_plat_page_size(void)
{
    long pg = sysconf(_SC_PAGESIZE); /* 16384 on Apple silicon */
    return pg > 0 ? (uint64_t)pg : 16384;
}

void *tq_plat_map_anon(size_t n)
{
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

int tq_plat_reserve(int fd, uint64_t size)
{
    /* F_PREALLOCATE could reserve, but allocates beyond EOF without moving it: left out, as
     * on Linux filesystems without fallocate the bytes come as written. */
    (void)fd;
    (void)size;
    return 0;
}

void tq_plat_writeback(int fd, uint64_t off, uint64_t len)
{
    (void)fd;
    (void)off;
    (void)len;
}

void tq_plat_stat_times(const struct stat *st, int64_t *mtime_ns, int64_t *ctime_ns)
{
    *mtime_ns = (int64_t)st->st_mtimespec.tv_sec * 1000000000 + st->st_mtimespec.tv_nsec;
    *ctime_ns = (int64_t)st->st_ctimespec.tv_sec * 1000000000 + st->st_ctimespec.tv_nsec;
}
