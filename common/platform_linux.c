/* common/platform_linux.c — common/platform.h on Linux, from the Linux man-pages (man7.org): posix_fadvise(2), fcntl(2), rename(2), sched_getaffinity(2), fallocate(2), sync_file_range(2), proc(5). */
#include "common/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *tq_plat_name(void)
{
    return "linux";
}

void tq_plat_advise(int fd, uint64_t off, uint64_t len, int advice)
{
    int a = advice == TQ_ADV_SEQUENTIAL ? POSIX_FADV_SEQUENTIAL
            : advice == TQ_ADV_WILLNEED ? POSIX_FADV_WILLNEED
                                        : POSIX_FADV_DONTNEED;
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, a);
}

int tq_plat_uncached(int fd, int on)
{
    /* fcntl(2): "F_SETFL ... On Linux, this command can change only the O_APPEND, O_ASYNC,
     * O_DIRECT, O_NOATIME, and O_NONBLOCK flags"; setting O_DIRECT where the filesystem has no
     * direct I/O fails with EINVAL (fs/fcntl.c setfl), as open(2) with O_DIRECT does. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    int want = on ? fl | O_DIRECT : fl & ~O_DIRECT;
    return want == fl ? 0 : fcntl(fd, F_SETFL, want);
}

int tq_plat_is_uncached(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_DIRECT) != 0;
}

int tq_plat_mkstemp_cloexec(char *tmpl)
{
    return mkostemp(tmpl, O_CLOEXEC);
}

int tq_plat_rename(const char *from, const char *to, int exchange)
{
#ifdef SYS_renameat2
    /* The syscall directly: glibc before 2.28 has no renameat2() wrapper. Flag values are
     * the kernel's (include/uapi/linux/fs.h): RENAME_NOREPLACE 1, RENAME_EXCHANGE 2. */
    unsigned flags = exchange ? 2u : 1u;
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
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
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        n = CPU_COUNT(&set);
    int q = tq_cgroup_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
    if (q > 0 && q < n)
        n = q;
    return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

uint64_t tq_plat_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) {
                fclose(f);
                return kb * 1024;
            }
        }
        fclose(f);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024; /* getrusage(2): "ru_maxrss ... in kilobytes" */
}

uint64_t tq_plat_page_size(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    return pg > 0 ? (uint64_t)pg : 4096;
}

void *tq_plat_map_anon(size_t n)
{
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

int tq_plat_reserve(int fd, uint64_t size)
{
    if (size && fallocate(fd, 0, 0, (off_t)size) != 0 && (errno == ENOSPC || errno == EFBIG || errno == EDQUOT))
        return -1;
    return 0;
}

void tq_plat_writeback(int fd, uint64_t off, uint64_t len)
{
    (void)sync_file_range(fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
}

void tq_plat_stat_times(const struct stat *st, int64_t *mtime_ns, int64_t *ctime_ns)
{
    *mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    *ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}
