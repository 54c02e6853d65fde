/* Sizes ("512M" both ways), thread count (affinity, cgroup CPU quota), clocks, peak RSS, CRC-32, power-of-two alignment. */
#include "common/common.h"

#include <ctype.h>
#ifdef __linux__
#include <sched.h>
#endif
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int tq_parse_size(const char *s, uint64_t *out)
{
    int unit;
    return tq_parse_size_unit(s, out, &unit);
}

int tq_parse_size_unit(const char *s, uint64_t *out, int *unit)
{
    *unit = 0;
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || v < 0 || !isfinite(v))
        return -1;
    uint64_t mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    case 'B': /* "16B": bytes, said so (lower-case b could be bits: refused) */
        if (*end != 'B')
            return -1;
        break;
    default: return -1;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (mult > 1 && (*end == 'b' || *end == 'B'))
        end++;
    if (*end == 'B' && mult == 1)
        end++;
    if (*end)
        return -1;
    *unit = *s && end > s && !isdigit((unsigned char)end[-1]) && end[-1] != '.';
    double r = v * (double)mult;
    if (r >= 18446744073709551616.0)
        return -1;
    *out = (uint64_t)r;
    return 0;
}

const char *tq_parse_udec(const char *s, uint64_t max, uint64_t *out)
{
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
        return NULL;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        const uint64_t d = (uint64_t)(*s - '0');
        if (d > max || v > (max - d) / 10)
            return NULL;
        v = v * 10 + d;
    }
    *out = v;
    return s;
}

int tq_parse_ids(const char *s, int32_t **out, size_t *n, tq_err *e)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = tq_malloc(cap * sizeof *v, e);
    if (!v)
        return -1;
    size_t k = 0;
    for (const char *p = s;; p++) {
        const char *start = p;
        uint64_t x = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            x = x * 10 + (uint64_t)(*p - '0');
            if (x > INT32_MAX)
                break;
        }
        if (p == start || x > INT32_MAX || (*p && *p != ',')) {
            free(v);
            return tq_fail(e, TQ_EUSAGE, "id %zu ('%.*s'): expected a decimal number 0..%ld", k + 1,
                           (int)strcspn(start, ","), start, (long)INT32_MAX);
        }
        v[k++] = (int32_t)x;
        if (!*p)
            break;
    }
    *out = v;
    *n = k;
    return 0;
}

void tq_format_size(uint64_t n, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.2f %s", v, units[u]);
}

/* The first line of `path` (without its newline) into buf; -1 when it cannot be read. */
static int read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

/* CPUs allowed by a quota of `quota` microseconds per `period`, rounded up; 0: no limit. */
static int quota_cpus(long long quota, long long period)
{
    if (quota <= 0 || period <= 0)
        return 0;
    long long n = (quota + period - 1) / period;
    return n > 4096 ? 4096 : (int)n;
}

/* The smallest quota on the way from the cgroup `rel` (a path below the mount `mnt`) up to
 * the mount's root, reading `file` in each: cgroup v2 "cpu.max" ("QUOTA PERIOD" or "max
 * PERIOD"), or cgroup v1 "cpu.cfs_quota_us" (-1: none) beside "cpu.cfs_period_us". */
static int walk_quota(const char *mnt, const char *rel, int v2)
{
    char dir[4096], path[4200], line[128];
    int best = 0;
    if (snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(rel, "/") ? rel : "") >= (int)sizeof dir)
        return 0;
    size_t root = strlen(mnt);
    for (;;) {
        int n = 0;
        if (v2) {
            snprintf(path, sizeof path, "%s/cpu.max", dir);
            long long q, p;
            if (!read_line(path, line, sizeof line) && sscanf(line, "%lld %lld", &q, &p) == 2)
                n = quota_cpus(q, p);
        } else {
            long long q, p;
            snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
            if (!read_line(path, line, sizeof line) && sscanf(line, "%lld", &q) == 1) {
                snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
                if (!read_line(path, line, sizeof line) && sscanf(line, "%lld", &p) == 1)
                    n = quota_cpus(q, p);
            }
        }
        if (n > 0 && (best == 0 || n < best))
            best = n;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < root)
            break;
        *slash = 0;
    }
    return best;
}

int tq_cgroup_cpus(const char *proc_cgroup, const char *fs_root)
{
    FILE *f = fopen(proc_cgroup, "re");
    if (!f)
        return 0;
    char line[4096], mnt[4096];
    int best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        /* "ID:CONTROLLERS:PATH"; cgroup v2 is "0::PATH" */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c2 = 0;
        const char *ctl = c1 + 1, *rel = c2 + 1;
        int n = 0;
        if (!*ctl) {
            snprintf(mnt, sizeof mnt, "%s", fs_root);
            n = walk_quota(mnt, rel, 1);
        } else {
            /* v1: the cpu controller, mounted as "cpu,cpuacct" or "cpu" */
            int cpu = 0;
            char *save = NULL;
            for (char *t = strtok_r((char *)ctl, ",", &save); t; t = strtok_r(NULL, ",", &save))
                cpu |= !strcmp(t, "cpu");
            if (!cpu)
                continue;
            static const char *mounts[] = {"cpu,cpuacct", "cpu", "cpuacct,cpu"};
            for (size_t i = 0; i < sizeof mounts / sizeof *mounts && !n; i++) {
                snprintf(mnt, sizeof mnt, "%s/%s", fs_root, mounts[i]);
                n = walk_quota(mnt, rel, 0);
                if (!n) /* in a container the cgroup's own directory is often the mount */
                    n = walk_quota(mnt, "/", 0);
            }
        }
        if (n > 0 && (best == 0 || n < best))
            best = n;
    }
    fclose(f);
    return best;
}

int tq_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        n = CPU_COUNT(&set);
    int q = tq_cgroup_cpus("/proc/self/cgroup", "/sys/fs/cgroup");
    if (q > 0 && q < n)
        n = q;
#endif
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

double tq_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint64_t tq_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
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
#ifdef __APPLE__
    return (uint64_t)ru.ru_maxrss;
#else
    return (uint64_t)ru.ru_maxrss * 1024;
#endif
}

uint32_t tq_crc32(const void *data, size_t len)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) { /* benign race: every thread computes the same table */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++)
        c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

int tq_align_up(uint64_t x, uint64_t a, uint64_t *out)
{
    if (a == 0 || (a & (a - 1)))
        return -1;
    uint64_t t;
    if (tq_add_u64(x, a - 1, &t) != 0)
        return -1;
    *out = t & ~(a - 1);
    return 0;
}
