/* common/platform.h — the one interface to OS-specific calls (platform_linux.c, platform_macos.c); everything else stays POSIX.1-2008. */
#ifndef TQ_PLATFORM_H
#define TQ_PLATFORM_H

#include <stdint.h>
#include <sys/stat.h>

#include "common/common.h"

TQ_BEGIN_DECLS

/* Which implementation this build carries: "linux" or "macos". */
TQ_API const char *tq_plat_name(void);

/* Access hints for [off, off+len) of an open file (len 0: to its end). Advice only: errors
 * are ignored, and a system without the hint does nothing.
 * Linux: posix_fadvise(2). macOS (no posix_fadvise): F_RDADVISE for WILLNEED, nothing else. */
enum { TQ_ADV_SEQUENTIAL = 1, TQ_ADV_WILLNEED, TQ_ADV_DONTNEED };
TQ_API void tq_plat_advise(int fd, uint64_t off, uint64_t len, int advice);

/* Reads and writes of `fd` past the page cache (on: 1) or through it again (on: 0).
 * Linux: O_DIRECT set with fcntl(F_SETFL) — EINVAL where the filesystem has no direct I/O;
 * buffers, offsets and lengths must then be aligned. macOS: fcntl(F_NOCACHE).
 * 0 when done; -1 with errno when this file or system cannot. */
TQ_API int tq_plat_uncached(int fd, int on);
/* 1 when `fd` is uncached by tq_plat_uncached, else 0. */
TQ_API int tq_plat_is_uncached(int fd);

/* rename(2) that never replaces `to` (exchange 0), or atomically swaps `from` and `to`
 * (exchange 1). Linux: renameat2(RENAME_NOREPLACE / RENAME_EXCHANGE); macOS: renamex_np
 * (RENAME_EXCL / RENAME_SWAP). -1 with errno EINVAL/ENOSYS/ENOTSUP where this system or
 * filesystem has none (the caller falls back, common/publish.c). */
TQ_API int tq_plat_rename(const char *from, const char *to, int exchange);

/* CPUs this process may use: online CPUs, fewer under an affinity mask or a CPU quota.
 * Linux: sched_getaffinity(2) and the cgroup quota (tq_cgroup_cpus on /proc/self/cgroup);
 * macOS: sysctl hw.activecpu. At least 1, not clamped further. */
TQ_API int tq_plat_cpus(void);

/* Peak resident set size in bytes (Linux: VmHWM of /proc/self/status, else getrusage's
 * ru_maxrss, which is KiB on Linux and bytes on macOS). */
TQ_API uint64_t tq_plat_peak_rss(void);

/* The VM page size: 4 KiB on x86-64 Linux, 16 KiB on Apple silicon (sysconf(_SC_PAGESIZE)). */
TQ_API uint64_t tq_plat_page_size(void);

/* `n` bytes of zeroed, private, readable and writable memory from mmap(2) with MAP_ANON
 * (Linux and macOS; POSIX only since 2024), to be released with munmap; NULL on failure. */
TQ_API void *tq_plat_map_anon(size_t n);

/* Reserve `size` bytes for `fd` so that a full disk fails now, not half way: 0 when reserved
 * or when the filesystem cannot reserve (the bytes then come as written); -1 with errno
 * ENOSPC / EFBIG / EDQUOT when there is no room. Linux: fallocate(2); macOS: nothing. */
TQ_API int tq_plat_reserve(int fd, uint64_t size);

/* Start writeback of [off, off+len) now so that the final fsync does not find the whole file
 * dirty. Linux: sync_file_range(SYNC_FILE_RANGE_WRITE); macOS: nothing. */
TQ_API void tq_plat_writeback(int fd, uint64_t off, uint64_t len);

/* mkstemp(3) whose descriptor is close-on-exec from the start: mkostemp(tmpl, O_CLOEXEC), which
 * POSIX.1-2008 lacks (glibc declares it under _GNU_SOURCE; macOS's mkstemp(3) documents it). */
TQ_API int tq_plat_mkstemp_cloexec(char *tmpl);

/* Modification and status-change times of a stat in ns (st_mtim on Linux, st_mtimespec on macOS). */
TQ_API void tq_plat_stat_times(const struct stat *st, int64_t *mtime_ns, int64_t *ctime_ns);

TQ_END_DECLS

#endif
