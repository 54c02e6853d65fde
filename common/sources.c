/* Inputs read over time: their identity (device, inode, size, mtime, ctime, a hash of the
 * first bytes) is recorded when a tool starts and compared again before it publishes. */
#include "common/common.h"

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

static int64_t ns_of(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void tq_file_id_stat(const struct stat *st, tq_file_id *id)
{
    memset(id, 0, sizeof *id);
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->size = S_ISDIR(st->st_mode) ? 0 : (uint64_t)st->st_size;
    id->is_dir = S_ISDIR(st->st_mode);
#ifdef __APPLE__
    id->mtime_ns = ns_of(st->st_mtimespec);
    id->ctime_ns = ns_of(st->st_ctimespec);
#else
    id->mtime_ns = ns_of(st->st_mtim);
    id->ctime_ns = ns_of(st->st_ctim);
#endif
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

static int add_one(tq_sources *s, const char *path, const tq_file_id *id, tq_err *e)
{
    if (s->n >= MAX_ENTRIES)
        return tq_fail(e, TQ_EDATA, "%s: more than %d files and directories to watch", path, MAX_ENTRIES);
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **p = realloc(s->paths, cap * sizeof *p);
        if (p)
            s->paths = p;
        tq_file_id *q = p ? realloc(s->ids, cap * sizeof *q) : NULL;
        if (!q)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        s->ids = q;
        s->cap = cap;
    }
    if (!(s->paths[s->n] = tq_strdup(path, e)))
        return -1;
    s->ids[s->n++] = *id;
    return 0;
}

static int add_tree(tq_sources *s, const char *path, int depth, tq_err *e)
{
    tq_file_id id;
    if (id_of(path, &id, e) != 0 || add_one(s, path, &id, e) != 0)
        return -1;
    struct stat lst;
    /* Directories are entered, except through a symbolic link (no cycles); files a link
     * names are followed (a HuggingFace snapshot is links to blobs). */
    if (!id.is_dir || depth >= MAX_DEPTH || (depth > 0 && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)))
        return 0;
    char **names;
    size_t n;
    if (tq_list_dir(path, &names, &n, e) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char *p = tq_path_join(path, names[i], e);
        rc = p ? add_tree(s, p, depth + 1, e) : -1;
        free(p);
    }
    tq_free_strv(names, n);
    return rc;
}

int tq_sources_add(tq_sources *s, const char *path, tq_err *e)
{
    return add_tree(s, path, 0, e);
}

int tq_sources_add_entry(tq_sources *s, const char *path, tq_err *e)
{
    tq_file_id id;
    return id_of(path, &id, e) != 0 ? -1 : add_one(s, path, &id, e);
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
static void pause_before_check(void)
{
    static atomic_int done;
    const char *v = getenv("TQ_PAUSE_BEFORE_CHECK");
    if (v && *v && strcmp(v, "0") != 0 && !atomic_exchange(&done, 1))
        raise(SIGSTOP);
}

int tq_sources_check(const tq_sources *s, tq_err *e)
{
    pause_before_check();
    /* files first, so the message names the file itself rather than its directory */
    for (size_t k = 0; k < 2 * s->n; k++) {
        size_t i = k % s->n;
        if (s->ids[i].is_dir != (k >= s->n))
            continue;
        tq_file_id now;
        tq_err why = {0};
        if (id_of(s->paths[i], &now, &why) != 0)
            return tq_fail(e, TQ_EDATA, "%s: vanished or became unreadable while it was being read (%s)", s->paths[i],
                           why.msg);
        char diff[512];
        tq_file_id_diff(&s->ids[i], &now, diff, sizeof diff);
        if (diff[0])
            return tq_fail(e, TQ_EDATA, "%s: changed while it was being read (%s%s)", s->paths[i], diff,
                           s->ids[i].is_dir ? "; an entry was added, removed or renamed" : "");
    }
    return 0;
}

void tq_sources_free(tq_sources *s)
{
    tq_free_strv(s->paths, s->n);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

/* The check before publishing: on a change the partial output stays where it is, and the
 * message says where. */
static int refuse_keeping(char *kept, tq_err *e)
{
    if (kept)
        tq_err_suffix(e, "; nothing was published, and the output built from it is kept at %s", kept);
    free(kept);
    return -1;
}

int tq_sources_check_afile(const tq_sources *s, tq_afile *f, tq_err *e)
{
    return tq_sources_check(s, e) == 0 ? 0 : refuse_keeping(tq_afile_keep(f), e);
}

int tq_sources_check_adir(const tq_sources *s, tq_adir *d, tq_err *e)
{
    return tq_sources_check(s, e) == 0 ? 0 : refuse_keeping(tq_adir_keep(d), e);
}
