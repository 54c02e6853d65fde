/* common/cgroup.c — tq_cgroup_cpus: the CPU quota of a cgroup, parsed from files named by the caller (common/platform_linux.c passes /proc/self/cgroup and /sys/fs/cgroup). */
#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
