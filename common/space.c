/* Free space before a long write (statvfs of the output's filesystem) and the bytes a file
 * tree holds on disk (stale partial outputs, a --resume directory's finished pieces). */
#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

uint64_t tq_tree_bytes(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    uint64_t n = (uint64_t)st.st_blocks * 512u; /* what it holds on disk, holes not counted */
    if (!S_ISDIR(st.st_mode))
        return n;
    DIR *d = opendir(path);
    if (!d)
        return n;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *sub = tq_path_join(path, de->d_name, NULL);
        if (sub)
            n += tq_tree_bytes(sub);
        free(sub);
    }
    closedir(d);
    return n;
}

/* The directory an output named out will be created in (its partial lies there too). */
static char *parent_dir(const char *out)
{
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        n--;
    while (n > 0 && out[n - 1] != '/')
        n--;
    while (n > 1 && out[n - 1] == '/')
        n--;
    if (n == 0)
        return strdup(".");
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, out, n);
        p[n] = 0;
    }
    return p;
}

int tq_space_available(const char *out, uint64_t *avail)
{
    const char *fake = getenv("TQ_FAKE_FREE_BYTES"); /* the tests' stand-in for a full disk */
    if (fake && *fake) {
        uint64_t v;
        if (tq_parse_size(fake, &v) == 0) {
            *avail = v;
            return 0;
        }
    }
    char *dir = parent_dir(out);
    struct statvfs sv;
    int rc = dir && statvfs(dir, &sv) == 0 ? 0 : -1;
    free(dir);
    if (rc == 0)
        *avail = (uint64_t)sv.f_bavail * (uint64_t)(sv.f_frsize ? sv.f_frsize : sv.f_bsize);
    return rc;
}

int tq_space_check(const char *out, uint64_t need, uint64_t credit, tq_err *e)
{
    uint64_t avail;
    if (tq_space_available(out, &avail) != 0)
        return 0; /* no answer from statvfs: nothing to say */
    if (avail > UINT64_MAX - credit)
        avail = UINT64_MAX;
    else
        avail += credit;
    if (need <= avail)
        return 0;
    char n_h[32], a_h[32];
    tq_format_size(need, n_h, sizeof n_h);
    tq_format_size(avail, a_h, sizeof a_h);
    char *dir = parent_dir(out);
    tq_fail(e, TQ_EIO,
            "%s: not enough free space: the output needs %s (%llu bytes), the filesystem of %s has %s (%llu bytes) "
            "available%s; free some, write elsewhere, or give --force-space to start anyway",
            out, n_h, (unsigned long long)need, dir ? dir : ".", a_h, (unsigned long long)avail,
            credit ? ", counting the finished pieces of the --resume run" : "");
    free(dir);
    return -1;
}
