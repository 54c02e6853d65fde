/* Inputs read over time: their identity (device, inode, size, mtime, ctime, a hash of the
 * first bytes) is recorded when a tool starts and compared again before it publishes. */
#include "common/common.h"
#include "common/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEAD_BYTES 65536     /* hashed at the start of every file: headers live there */
#define MAX_DEPTH 8
#define MAX_ENTRIES 1000000

void tq_file_id_stat(const struct stat *st, tq_file_id *id)
{
    memset(id, 0, sizeof *id);
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->size = S_ISDIR(st->st_mode) ? 0 : (uint64_t)st->st_size;
    id->is_dir = S_ISDIR(st->st_mode);
    tq_plat_stat_times(st, &id->mtime_ns, &id->ctime_ns);
}

/* The hash of the first HEAD_BYTES of a regular file, read without blocking on anything that
 * is not one. */
static int head_hash(const char *path, unsigned char out[32], tq_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return tq_fail(e, TQ_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 0 : tq_fail(e, TQ_EDATA, "%s: not a regular file", path);
    if (rc == 0) {
        uint64_t n = (uint64_t)st.st_size < HEAD_BYTES ? (uint64_t)st.st_size : HEAD_BYTES;
        rc = tq_sha256_range(fd, 0, n, path, out, e);
    }
    close(fd);
    return rc;
}

static int id_of(const char *path, tq_file_id *id, tq_err *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tq_fail(e, TQ_EIO, "%s: cannot open: %s", path, strerror(errno));
    tq_file_id_stat(&st, id);
    if (S_ISREG(st.st_mode)) {
        if (head_hash(path, id->head, e) != 0)
            return -1;
        id->has_head = 1;
    }
    return 0;
}

/* Takes names (a directory's sorted entries, or NULL) whatever happens. */
static int add_one(tq_sources *s, const char *path, const tq_file_id *id, char **names, size_t n_names, int known,
                   tq_err *e)
{
    if (s->n >= MAX_ENTRIES) {
        tq_free_strv(names, n_names);
        return tq_fail(e, TQ_EDATA, "%s: more than %d files and directories to watch", path, MAX_ENTRIES);
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **p = realloc(s->paths, cap * sizeof *p);
        if (p)
            s->paths = p;
        tq_file_id *q = p ? realloc(s->ids, cap * sizeof *q) : NULL;
        if (q)
            s->ids = q;
        tq_sources_names *r = q ? realloc(s->names, cap * sizeof *r) : NULL;
        if (!r) {
            tq_free_strv(names, n_names);
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        }
        s->names = r;
        s->cap = cap;
    }
    if (!(s->paths[s->n] = tq_strdup(path, e))) {
        tq_free_strv(names, n_names);
        return -1;
    }
    s->names[s->n] = (tq_sources_names){names, n_names, known};
    s->ids[s->n++] = *id;
    return 0;
}

/* A directory's entries, to tell later whether only this process's own outputs came or went;
 * 0 when it cannot be listed (then any change to it counts). */
static int list_quietly(const char *path, char ***names, size_t *n)
{
    tq_err ignored;
    *names = NULL;
    *n = 0;
    if (tq_list_dir(path, names, n, &ignored) == 0)
        return 1;
    *names = NULL;
    *n = 0;
    return 0;
}

static int add_tree(tq_sources *s, const char *path, int depth, tq_err *e)
{
    tq_file_id id;
    if (id_of(path, &id, e) != 0)
        return -1;
    char **names = NULL;
    size_t n = 0;
    struct stat lst;
    /* Directories are entered, except through a symbolic link (no cycles); files a link
     * names are followed (a HuggingFace snapshot is links to blobs). */
    int enter = id.is_dir && depth < MAX_DEPTH && !(depth > 0 && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode));
    int known = 0;
    if (enter) {
        if (tq_list_dir(path, &names, &n, e) != 0)
            return -1;
        known = 1;
    } else if (id.is_dir) {
        known = list_quietly(path, &names, &n);
    }
    size_t at = s->n;
    if (add_one(s, path, &id, names, n, known, e) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; enter && rc == 0 && i < n; i++) {
        char *p = tq_path_join(path, s->names[at].v[i], e);
        rc = p ? add_tree(s, p, depth + 1, e) : -1;
        free(p);
    }
    return rc;
}

int tq_sources_add(tq_sources *s, const char *path, tq_err *e)
{
    return add_tree(s, path, 0, e);
}

int tq_sources_add_entry(tq_sources *s, const char *path, tq_err *e)
{
    tq_file_id id;
    if (id_of(path, &id, e) != 0)
        return -1;
    char **names = NULL;
    size_t n = 0;
    int known = id.is_dir && list_quietly(path, &names, &n);
    return add_one(s, path, &id, names, n, known, e);
}

void tq_file_id_diff(const tq_file_id *a, const tq_file_id *b, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
#define ADD(...)                                                          \
    do {                                                                  \
        if (n < cap)                                                      \
            n += (size_t)snprintf(buf + n, cap - n, "%s", n ? ", " : ""); \
        if (n < cap)                                                      \
            n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);         \
    } while (0)
    if (a->size != b->size)
        ADD("size %" PRIu64 " -> %" PRIu64, a->size, b->size);
    if (a->mtime_ns != b->mtime_ns)
        ADD("mtime_ns %" PRId64 " -> %" PRId64, a->mtime_ns, b->mtime_ns);
    if (a->has_head != b->has_head || (a->has_head && memcmp(a->head, b->head, 32)))
        ADD("first %d bytes differ", HEAD_BYTES);
    if (a->ctime_ns != b->ctime_ns)
        ADD("ctime_ns %" PRId64 " -> %" PRId64, a->ctime_ns, b->ctime_ns);
    if (a->dev != b->dev)
        ADD("device %" PRIu64 " -> %" PRIu64, a->dev, b->dev);
    if (a->ino != b->ino)
        ADD("inode %" PRIu64 " -> %" PRIu64 ": replaced", a->ino, b->ino);
    if (a->is_dir != b->is_dir)
        ADD("%s", b->is_dir ? "now a directory" : "no longer a directory");
#undef ADD
}

/* Test hook: TQ_PAUSE_BEFORE_CHECK=1 stops the process (SIGSTOP) before its first check, so
 * a test can change an input of a tool that writes nothing before it has read everything. */
void tq_test_pause_before_check(void)
{
    static atomic_int done;
    const char *v = getenv("TQ_PAUSE_BEFORE_CHECK");
    if (v && *v && strcmp(v, "0") != 0 && !atomic_exchange(&done, 1))
        raise(SIGSTOP);
}

/* This process's own outputs (their partials and final names) among the inputs' directories:
 * each as its parent directory's device and inode and its last name. */
typedef struct own_entry {
    int known;
    uint64_t dev, ino;
    const char *name;
    size_t len;
} own_entry;

static void own_resolve(const char *path, own_entry *o)
{
    memset(o, 0, sizeof *o);
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    o->name = path + b;
    o->len = n - b;
    char *parent = b == 0 ? strdup(".") : strndup(path, b);
    struct stat st;
    if (parent && stat(parent, &st) == 0) {
        o->known = 1;
        o->dev = (uint64_t)st.st_dev;
        o->ino = (uint64_t)st.st_ino;
    }
    free(parent);
}

/* name is an own output, or a partial of one (NAME.partial-XXXXXX, this process's or another
 * writer's of the same output: never an input) */
static int is_own(const own_entry *own, size_t n_own, uint64_t dev, uint64_t ino, const char *name, size_t len)
{
    for (size_t k = 0; k < n_own; k++)
        if (own[k].known && own[k].dev == dev && own[k].ino == ino && len >= own[k].len &&
            !memcmp(own[k].name, name, own[k].len) &&
            (len == own[k].len || (len > own[k].len + 9 && !memcmp(name + own[k].len, ".partial-", 9))))
            return 1;
    return 0;
}

/* path (an input) is one of the outputs */
static int own_path(const own_entry *own, size_t n_own, const char *path)
{
    own_entry o;
    own_resolve(path, &o);
    return o.known && is_own(own, n_own, o.dev, o.ino, o.name, o.len);
}

/* The directory's entries but the own ones are those recorded (it is the same directory). */
static int same_entries(const tq_sources *s, size_t i, const own_entry *own, size_t n_own)
{
    const tq_sources_names *was = &s->names[i];
    const tq_file_id *d = &s->ids[i];
    char **now;
    size_t n;
    tq_err ignored;
    if (!was->known || tq_list_dir(s->paths[i], &now, &n, &ignored) != 0)
        return 0;
    size_t a = 0, b = 0;
    int same;
    for (;;) {
        while (a < was->n && is_own(own, n_own, d->dev, d->ino, was->v[a], strlen(was->v[a])))
            a++;
        while (b < n && is_own(own, n_own, d->dev, d->ino, now[b], strlen(now[b])))
            b++;
        if (a == was->n || b == n) {
            same = a == was->n && b == n;
            break;
        }
        if (strcmp(was->v[a++], now[b++])) {
            same = 0;
            break;
        }
    }
    tq_free_strv(now, n);
    return same;
}

static int check(const tq_sources *s, const char *const *own_paths, size_t n_own, tq_err *e)
{
    tq_test_pause_before_check();
    own_entry own_buf[8] = {{0}};
    own_entry *own = n_own <= 8 ? own_buf : tq_calloc(n_own, sizeof *own, e);
    if (!own)
        return -1;
    for (size_t k = 0; k < n_own; k++)
        own_resolve(own_paths[k], &own[k]);
    int rc = 0;
    /* files first, so the message names the file itself rather than its directory */
    for (size_t k = 0; rc == 0 && k < 2 * s->n; k++) {
        size_t i = k % s->n;
        if (s->ids[i].is_dir != (k >= s->n) || (n_own && own_path(own, n_own, s->paths[i])))
            continue;
        tq_file_id now;
        tq_err why = {0};
        if (id_of(s->paths[i], &now, &why) != 0) {
            rc = tq_fail(e, TQ_EDATA, "%s: vanished or became unreadable while it was being read (%s)", s->paths[i],
                         why.msg);
            break;
        }
        char diff[512];
        tq_file_id_diff(&s->ids[i], &now, diff, sizeof diff);
        if (diff[0] && n_own && now.is_dir && s->ids[i].is_dir) {
            /* a directory whose times changed because this process made or renamed its own
             * outputs in it, and for no other reason */
            tq_file_id was = s->ids[i];
            was.mtime_ns = now.mtime_ns;
            was.ctime_ns = now.ctime_ns;
            char rest[512];
            tq_file_id_diff(&was, &now, rest, sizeof rest);
            if (!rest[0] && same_entries(s, i, own, n_own))
                continue;
        }
        if (diff[0])
            rc = tq_fail(e, TQ_EDATA, "%s: changed while it was being read (%s%s)", s->paths[i], diff,
                         s->ids[i].is_dir ? "; an entry was added, removed or renamed" : "");
    }
    if (own != own_buf)
        free(own);
    return rc;
}

int tq_sources_check(const tq_sources *s, tq_err *e)
{
    return check(s, NULL, 0, e);
}

int tq_sources_check_own(const tq_sources *s, const char *const *own, size_t n_own, tq_err *e)
{
    return check(s, own, n_own, e);
}

void tq_sources_free(tq_sources *s)
{
    for (size_t i = 0; s->names && i < s->n; i++)
        tq_free_strv(s->names[i].v, s->names[i].n);
    free(s->names);
    tq_free_strv(s->paths, s->n);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

/* The check before publishing: a change to the outputs themselves (their partials and final
 * names, inside an input directory) is no change to the inputs; on a change the partial
 * outputs stay where they are, and the message says where. */
int tq_sources_check_afiles(const tq_sources *s, tq_afile *const *f, size_t n, tq_err *e)
{
    const char *own_buf[8] = {0};
    const char **own = n <= 4 ? own_buf : tq_calloc(2 * n, sizeof *own, e);
    if (!own)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (f[i]->tmp_path)
            own[k++] = f[i]->tmp_path;
        if (f[i]->final_path)
            own[k++] = f[i]->final_path;
    }
    int rc = check(s, own, k, e);
    if (own != own_buf)
        free(own);
    if (rc == 0)
        return 0;
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        char *kept = tq_afile_keep(f[i]);
        if (kept)
            tq_err_suffix(e, "%s %s", any++ ? " and" : "; nothing was published, and the output built from it is kept at",
                          kept);
        free(kept);
    }
    return -1;
}

int tq_sources_check_afile(const tq_sources *s, tq_afile *f, tq_err *e)
{
    return tq_sources_check_afiles(s, &f, 1, e);
}

int tq_sources_check_adir(const tq_sources *s, tq_adir *d, tq_err *e)
{
    const char *own[2] = {d->tmp_path, d->final_path};
    if (check(s, own, d->tmp_path ? 2 : 0, e) == 0)
        return 0;
    char *kept = tq_adir_keep(d);
    if (kept)
        tq_err_suffix(e, "; nothing was published, and the output built from it is kept at %s", kept);
    free(kept);
    return -1;
}
