/* Recursive, sorted listing of the regular files a manifest or a signature covers. */
#include "verify/verify_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64

typedef struct plist {
    char **v;
    size_t n, cap;
} plist;

static int push(plist *l, char *s, tq_err *e)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            free(s);
            return tq_fail(e, TQ_ENOMEM, "out of memory listing files");
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = s;
    return 0;
}

static int walk(const char *root, const char *rel, int depth, const tq_walk_opts *o, plist *l, tq_err *e)
{
    char *dpath = *rel ? tq_path_join(root, rel, e) : tq_strdup(root, e);
    if (!dpath)
        return -1;
    if (depth > MAX_DEPTH) {
        tq_fail(e, TQ_EDATA, "%s: directories nested deeper than %d levels", dpath, MAX_DEPTH);
        free(dpath);
        return -1;
    }
    DIR *d = opendir(dpath);
    if (!d) {
        tq_fail(e, TQ_EIO, "%s: cannot open directory: %s", dpath, strerror(errno));
        free(dpath);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        size_t rl = strlen(rel), nl = strlen(de->d_name);
        char *sub = malloc(rl + nl + 2);
        if (!sub) {
            rc = tq_fail(e, TQ_ENOMEM, "out of memory listing files");
            break;
        }
        if (rl) {
            memcpy(sub, rel, rl);
            sub[rl] = '/';
            memcpy(sub + rl + 1, de->d_name, nl + 1);
        } else {
            memcpy(sub, de->d_name, nl + 1);
        }
        if (o->skip && o->skip(o->ctx, sub)) {
            free(sub);
            continue;
        }
        struct stat lst, st;
        if (fstatat(dirfd(d), de->d_name, &lst, AT_SYMLINK_NOFOLLOW) != 0 ||
            fstatat(dirfd(d), de->d_name, &st, 0) != 0) {
            rc = tq_fail(e, TQ_EIO, "%s/%s: cannot stat: %s", root, sub, strerror(errno));
            free(sub);
            break;
        }
        if (!tq_verify_path_ok(sub)) {
            rc = tq_fail(e, TQ_EDATA, "%s/%s: file name with a control character or backslash; "
                         "SHA256SUMS cannot name it", root, sub);
            free(sub);
            break;
        }
        if (S_ISDIR(lst.st_mode)) {
            rc = walk(root, sub, depth + 1, o, l, e);
            free(sub);
        } else if (S_ISREG(st.st_mode) && S_ISLNK(lst.st_mode) && o->refuse_links) {
            rc = tq_fail(e, TQ_EDATA, "%s/%s: symbolic link; links are followed only when allowed (allow_symlinks)",
                         root, sub);
            free(sub);
        } else if (S_ISREG(st.st_mode)) {
            rc = push(l, sub, e);
        } else {
            rc = tq_fail(e, TQ_EDATA, "%s/%s: %s; manifests cover regular files only", root, sub,
                         S_ISDIR(st.st_mode) ? "symbolic link to a directory" : "not a regular file");
            free(sub);
        }
    }
    closedir(d);
    free(dpath);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int tq_verify_walk_ex(const char *dir, const tq_walk_opts *o, char ***paths, size_t *n, tq_err *e)
{
    plist l = {0};
    if (!tq_is_dir(dir))
        return tq_fail(e, TQ_EIO, "%s: not a directory", dir);
    if (walk(dir, "", 0, o, &l, e) != 0) {
        tq_free_strv(l.v, l.n);
        return -1;
    }
    if (l.n)
        qsort(l.v, l.n, sizeof *l.v, cmp_str);
    *paths = l.v;
    *n = l.n;
    return 0;
}

/* NAME itself, or a partial NAME.partial-XXXXXX of it being written (man tq-formats(5), OUTPUTS). */
static int is_or_partial(const char *rel, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(rel, name, n) && (!rel[n] || !strncmp(rel + n, ".partial-", 9));
}

/* What manifests leave out: their own two files and the signature, at the top, and the
 * partials of these being written. */
static int skip_index(void *ctx, const char *rel)
{
    (void)ctx;
    return is_or_partial(rel, TQ_SUMS_NAME) || is_or_partial(rel, TQ_MANIFEST_NAME) ||
           is_or_partial(rel, TQ_OMS_SIG_NAME);
}

int tq_verify_walk(const char *dir, char ***paths, size_t *n, tq_err *e)
{
    tq_walk_opts o = {.skip = skip_index};
    return tq_verify_walk_ex(dir, &o, paths, n, e);
}
