/* Outputs against inputs: an output path may not be an input, lie inside an input directory,
 * or hold an input; checked before anything is written. */
#include "common/common.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Append component c (length n) to the absolute path in buf (length *len), resolving "." and
 * ".." lexically; the components given here do not exist, so none is a symbolic link. */
static int push_comp(char *buf, size_t *len, const char *c, size_t n)
{
    if (n == 0 || (n == 1 && c[0] == '.'))
        return 0;
    if (n == 2 && c[0] == '.' && c[1] == '.') {
        while (*len > 1 && buf[*len - 1] != '/')
            (*len)--;
        if (*len > 1)
            (*len)--;
        buf[*len] = 0;
        return 0;
    }
    if (*len + 1 + n + 1 > PATH_MAX)
        return -1;
    if (*len > 1)
        buf[(*len)++] = '/';
    memcpy(buf + *len, c, n);
    *len += n;
    buf[*len] = 0;
    return 0;
}

char *tq_path_canonical(const char *path, tq_err *e)
{
    char rp[PATH_MAX];
    if (realpath(path, rp))
        return tq_strdup(rp, e);
    /* The longest leading part that exists, resolved; the rest appended as written. */
    char *copy = tq_strdup(path, e);
    if (!copy)
        return NULL;
    size_t cut = strlen(copy);
    for (;;) {
        while (cut > 0 && copy[cut - 1] == '/')
            cut--;
        while (cut > 0 && copy[cut - 1] != '/')
            cut--;
        int ok;
        if (cut == 0) {
            ok = realpath(".", rp) != NULL;
        } else {
            char save = copy[cut];
            copy[cut] = 0;
            ok = realpath(copy, rp) != NULL;
            copy[cut] = save;
        }
        if (ok)
            break;
        if (cut == 0) {
            free(copy);
            tq_fail(e, TQ_EIO, "%s: cannot resolve the path: %s", path, strerror(errno));
            return NULL;
        }
    }
    size_t len = strlen(rp);
    for (const char *s = copy + cut; *s;) {
        const char *t = strchr(s, '/');
        size_t cl = t ? (size_t)(t - s) : strlen(s);
        if (push_comp(rp, &len, s, cl) != 0) {
            free(copy);
            tq_fail(e, TQ_EUSAGE, "%s: path too long", path);
            return NULL;
        }
        s += cl;
        while (*s == '/')
            s++;
    }
    free(copy);
    return tq_strdup(rp, e);
}

/* a lies strictly inside directory b (both canonical) */
static int inside(const char *a, const char *b)
{
    size_t k = strlen(b);
    if (k == 1 && b[0] == '/')
        return a[1] != 0;
    return !strncmp(a, b, k) && a[k] == '/';
}

int tq_check_out_in(const char *out, const char *in, tq_err *e)
{
    struct stat so, si;
    int out_exists = stat(out, &so) == 0, in_exists = stat(in, &si) == 0;
    if (out_exists && in_exists && so.st_dev == si.st_dev && so.st_ino == si.st_ino)
        return tq_fail(e, TQ_EUSAGE, "%s: the output is the input %s itself (same device and inode); choose another output",
                       out, in);
    char *co = tq_path_canonical(out, e), *ci = co ? tq_path_canonical(in, e) : NULL;
    if (!co || !ci) {
        free(co);
        return -1;
    }
    int rc = 0;
    if (!strcmp(co, ci))
        rc = tq_fail(e, TQ_EUSAGE, "%s: the output is the input %s itself; choose another output", out, in);
    else if (in_exists && S_ISDIR(si.st_mode) && inside(co, ci))
        rc = tq_fail(e, TQ_EUSAGE, "%s: the output lies inside the input directory %s; choose an output outside it",
                     out, in);
    else if (inside(ci, co))
        rc = tq_fail(e, TQ_EUSAGE, "%s: the output would hold the input %s; choose an output that does not contain it",
                     out, in);
    free(co);
    free(ci);
    return rc;
}
