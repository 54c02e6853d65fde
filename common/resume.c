/* Resumable outputs (--resume): the journal of a partial directory OUT.partial-resume. It names
 * the command that made it (its inputs' identity and its options) and every finished piece
 * with its size and SHA-256, appended and fsynced as each piece is fsynced and renamed into
 * place. A rerun with the same identity keeps the pieces whose bytes still match, removes
 * everything else and redoes only that. Format: man tq-formats(5), RESUME JOURNAL. */
#include "common/common.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOURNAL_NAME ".tq-resume"
#define JOURNAL_MAGIC "tq-resume-v1 "
#define MAX_JOURNAL (256u << 20) /* a journal larger than this is not ours */

typedef struct piece {
    char *name;
    uint64_t size;
    unsigned char sha[32];
    char *extra;
    int kept;
} piece;

struct tq_resume {
    char *dir, *journal;
    int dir_fd, fd;
    pthread_mutex_t mu;
    char *identity;
    size_t n, cap;
    piece *p;
    size_t kept, dropped;
};

/* ------------------------------------------------------------ identity */

char *tq_resume_identity(const char *tool, const tq_sources *src, cJSON *options, tq_err *e)
{
    cJSON *j = cJSON_CreateObject(), *in = j ? cJSON_AddArrayToObject(j, "inputs") : NULL;
    int ok = in && cJSON_AddStringToObject(j, "tool", tool) && cJSON_AddStringToObject(j, "version", TQ_VERSION);
    if (ok && options) {
        cJSON_AddItemToObject(j, "options", options);
        options = NULL;
    }
    /* every regular file under the input, by its name relative to the input (the input may
     * be given by another path on the rerun): size, mtime and the hash of its first bytes */
    size_t root = src->n ? strlen(src->paths[0]) : 0;
    for (size_t i = 0; ok && i < src->n; i++) {
        const tq_file_id *id = &src->ids[i];
        if (id->is_dir)
            continue;
        const char *rel = src->paths[i] + (i ? root : 0);
        while (i && *rel == '/')
            rel++;
        if (!i) {
            const char *slash = strrchr(src->paths[0], '/');
            rel = slash && slash[1] ? slash + 1 : src->paths[0];
        }
        char head[65] = "";
        if (id->has_head)
            tq_hex(id->head, 32, head);
        char *s = tq_asprintf(e, "%s size %" PRIu64 " mtime_ns %" PRId64 " head %s", rel, id->size, id->mtime_ns,
                              id->has_head ? head : "-");
        ok = s && cJSON_AddItemToArray(in, cJSON_CreateString(s));
        free(s);
    }
    cJSON_Delete(options);
    char *text = ok ? tq_json_canonical(j, e) : NULL;
    if (!ok && j)
        tq_fail(e, TQ_ENOMEM, "out of memory");
    cJSON_Delete(j);
    return text;
}

/* What differs between the identity of the journal (was) and this command's (now): the
 * first option, the inputs, the tool or its version. Exit status 2 for options, else 1. */
static int identity_mismatch(const char *dir, const char *was, const char *now, tq_err *e)
{
    cJSON *a = cJSON_Parse(was), *b = cJSON_Parse(now);
    char what[512] = "its identity";
    int code = TQ_EDATA;
    if (a && b) {
        static const char *const top[] = {"tool", "version"};
        for (size_t i = 0; i < 2; i++) {
            cJSON *x = cJSON_GetObjectItemCaseSensitive(a, top[i]), *y = cJSON_GetObjectItemCaseSensitive(b, top[i]);
            if (!cJSON_Compare(x, y, 1)) {
                const char *then = cJSON_IsString(x) ? x->valuestring : "an unknown one";
                if (i)
                    snprintf(what, sizeof what, "it was made by tq version %.100s, this is %s", then, TQ_VERSION);
                else
                    snprintf(what, sizeof what, "it was made by %.100s", then);
                goto out;
            }
        }
        cJSON *oa = cJSON_GetObjectItemCaseSensitive(a, "options"), *ob = cJSON_GetObjectItemCaseSensitive(b, "options");
        cJSON *k;
        for (int pass = 0; pass < 2; pass++) {
            cJSON *list = pass ? oa : ob;
            cJSON_ArrayForEach(k, list)
            {
                cJSON *other = cJSON_GetObjectItemCaseSensitive(pass ? ob : oa, k->string);
                if (cJSON_Compare(k, other, 1))
                    continue;
                cJSON *then = pass ? k : other, *here = pass ? other : k;
                char *t = then ? cJSON_PrintUnformatted(then) : NULL, *h = here ? cJSON_PrintUnformatted(here) : NULL;
                snprintf(what, sizeof what, "--%s was %s there, %s here", k->string, t ? t : "not given",
                         h ? h : "not given");
                cJSON_free(t);
                cJSON_free(h);
                code = TQ_EUSAGE;
                goto out;
            }
        }
        cJSON *ia = cJSON_GetObjectItemCaseSensitive(a, "inputs"), *ib = cJSON_GetObjectItemCaseSensitive(b, "inputs");
        int na = cJSON_GetArraySize(ia), nb = cJSON_GetArraySize(ib);
        snprintf(what, sizeof what, "the input has %d files, it had %d", nb, na);
        for (int i = 0; i < na && i < nb; i++) {
            cJSON *x = cJSON_GetArrayItem(ia, i), *y = cJSON_GetArrayItem(ib, i);
            if (!cJSON_Compare(x, y, 1) && cJSON_IsString(x) && cJSON_IsString(y)) {
                snprintf(what, sizeof what, "the input changed: %.200s, was %.200s", y->valuestring, x->valuestring);
                break;
            }
        }
    }
out:
    cJSON_Delete(a);
    cJSON_Delete(b);
    return tq_fail(e, code,
                   "%s: left by another command (%s); rerun that command with --resume, or remove %s to start over",
                   dir, what, dir);
}

/* ------------------------------------------------------------ the journal */

static void free_pieces(tq_resume *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->p[i].name);
        free(r->p[i].extra);
    }
    free(r->p);
    r->p = NULL;
    r->n = r->cap = 0;
}

static piece *find(const tq_resume *r, const char *name)
{
    for (size_t i = r->n; i-- > 0;)
        if (!strcmp(r->p[i].name, name))
            return &r->p[i];
    return NULL;
}

/* "piece SHA256 SIZE NAME[ EXTRA]": a later line for a name replaces an earlier one; a line
 * that does not parse (the torn last line of a killed run) is left out. */
static int parse_line(tq_resume *r, char *line, tq_err *e)
{
    char hex[65];
    int off = 0;
    if (sscanf(line, "piece %64[0-9a-f] %n", hex, &off) != 1 || !off || strlen(hex) != 64 || line[off] < '0' ||
        line[off] > '9')
        return 0;
    char *end;
    errno = 0;
    uint64_t size = strtoull(line + off, &end, 10);
    if (errno || *end != ' ')
        return 0;
    char *name = end + 1, *sp = strchr(name, ' ');
    if (sp)
        *sp = 0;
    if (!*name || name[0] == '/' || strstr(name, "..") || !strcmp(name, JOURNAL_NAME))
        return 0;
    piece *p = find(r, name);
    if (!p) {
        if (r->n == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 64;
            piece *np = realloc(r->p, cap * sizeof *np);
            if (!np)
                return tq_fail(e, TQ_ENOMEM, "out of memory");
            r->p = np;
            r->cap = cap;
        }
        p = &r->p[r->n];
        memset(p, 0, sizeof *p);
        if (!(p->name = tq_strdup(name, e)))
            return -1;
        r->n++;
    }
    free(p->extra);
    p->extra = NULL;
    if (sp && !(p->extra = tq_strdup(sp + 1, e)))
        return -1;
    p->size = size;
    tq_unhex32(hex, p->sha); /* 64 digits: checked by the scan */
    return 0;
}

/* Reads the journal if there is one: 1 (its identity matched), 0 (none: a new or unusable
 * directory), -1 (an error, or another command's journal). */
static int load(tq_resume *r, tq_err *e)
{
    struct stat st;
    if (lstat(r->journal, &st) != 0)
        return 0;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_JOURNAL)
        return 0;
    char *text;
    size_t len;
    if (tq_read_small_file(r->journal, MAX_JOURNAL, &text, &len, e) != 0)
        return -1;
    char *nl = memchr(text, '\n', len);
    if (!nl || strncmp(text, JOURNAL_MAGIC, strlen(JOURNAL_MAGIC)) != 0 || memchr(text, 0, len)) {
        free(text);
        return 0; /* the identity line never made it to disk: nothing here was recorded */
    }
    *nl = 0;
    const char *was = text + strlen(JOURNAL_MAGIC);
    if (strcmp(was, r->identity) != 0) {
        identity_mismatch(r->dir, was, r->identity, e);
        free(text);
        return -1;
    }
    char *line = nl + 1, *end = text + len;
    int rc = 1;
    while (rc == 1 && line < end) {
        char *next = memchr(line, '\n', (size_t)(end - line));
        if (!next)
            break; /* torn */
        *next = 0;
        if (parse_line(r, line, e) != 0)
            rc = -1;
        line = next + 1;
    }
    free(text);
    return rc;
}

/* Each recorded piece: kept when its file is there, regular, of the recorded size and hash. */
static int verify_one(tq_work *w, void *ctx, int worker, uint64_t i, tq_err *e)
{
    (void)worker;
    (void)e;
    tq_resume *r = ctx;
    piece *p = &r->p[i];
    char *path = tq_path_join(r->dir, p->name, NULL);
    struct stat st;
    if (path && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == p->size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        unsigned char d[32];
        tq_err ignored = {0};
        if (fd >= 0 && tq_sha256_range(fd, 0, p->size, path, d, &ignored) == 0 && !memcmp(d, p->sha, 32))
            p->kept = 1;
        if (fd >= 0)
            close(fd);
    }
    free(path);
    tq_work_progress(w, p->size);
    return 0;
}

/* Remove everything under dir/rel that is not a kept piece; directories stay. */
static void sweep(tq_resume *r, const char *rel)
{
    char *path = *rel ? tq_path_join(r->dir, rel, NULL) : tq_strdup(r->dir, NULL);
    char **names = NULL;
    size_t n = 0;
    if (path && tq_list_dir(path, &names, &n, NULL) == 0)
        for (size_t i = 0; i < n; i++) {
            char *sub = *rel ? tq_asprintf(NULL, "%s/%s", rel, names[i]) : tq_strdup(names[i], NULL);
            char *full = sub ? tq_path_join(r->dir, sub, NULL) : NULL;
            struct stat st;
            if (full && lstat(full, &st) == 0) {
                piece *p = find(r, sub);
                if (S_ISDIR(st.st_mode))
                    sweep(r, sub);
                else if (!(p && p->kept) && strcmp(sub, JOURNAL_NAME) != 0) {
                    tq_test_step();
                    unlink(full);
                }
            }
            free(full);
            free(sub);
        }
    tq_free_strv(names, n);
    free(path);
}

/* The journal written anew: the identity and the kept pieces, nothing else. */
static int rewrite(tq_resume *r, tq_err *e)
{
    tq_sb b = {0};
    tq_sb_printf(&b, "%s%s\n", JOURNAL_MAGIC, r->identity);
    for (size_t i = 0; i < r->n; i++) {
        const piece *p = &r->p[i];
        if (!p->kept)
            continue;
        char hex[65];
        tq_hex(p->sha, 32, hex);
        tq_sb_printf(&b, "piece %s %" PRIu64 " %s%s%s\n", hex, p->size, p->name, p->extra ? " " : "",
                     p->extra ? p->extra : "");
    }
    size_t len = b.len;
    char *text = tq_sb_finish(&b, e);
    if (!text)
        return -1;
    /* the journal of the earlier run is this run's own file to replace */
    tq_afile f;
    int rc = tq_afile_open(&f, r->journal, TQ_AFILE_REPLACE, e);
    if (rc == 0 && tq_write_full(f.fd, text, len, f.tmp_path, e) != 0) {
        tq_afile_abort(&f);
        rc = -1;
    }
    if (rc == 0)
        rc = tq_afile_commit(&f, e);
    free(text);
    if (rc != 0)
        return -1;
    r->fd = open(r->journal, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (r->fd < 0)
        return tq_fail(e, TQ_EIO, "%s: cannot open: %s", r->journal, strerror(errno));
    return 0;
}

int tq_resume_open(tq_resume **out, const char *dir, const char *identity, int threads, int quiet, tq_err *e)
{
    *out = NULL;
    if (strchr(identity, '\n'))
        return tq_fail(e, TQ_EUSAGE, "resume identity spans lines");
    tq_resume *r = tq_calloc(1, sizeof *r, e);
    if (!r)
        return -1;
    r->fd = r->dir_fd = -1;
    pthread_mutex_init(&r->mu, NULL);
    if (!(r->dir = tq_strdup(dir, e)) || !(r->journal = tq_path_join(dir, JOURNAL_NAME, e)) ||
        !(r->identity = tq_strdup(identity, e)))
        goto fail;
    /* one run at a time in a partial directory: the lock goes with the process */
    r->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (r->dir_fd < 0) {
        tq_fail(e, TQ_EIO, "%s: cannot open: %s", dir, strerror(errno));
        goto fail;
    }
    if (flock(r->dir_fd, LOCK_EX | LOCK_NB) != 0) {
        tq_fail(e, errno == EWOULDBLOCK ? TQ_EEXIST : TQ_EIO, "%s: %s", dir,
                errno == EWOULDBLOCK ? "another --resume run is writing it" : strerror(errno));
        goto fail;
    }
    int found = load(r, e);
    if (found < 0)
        goto fail;
    if (r->n) {
        uint64_t total = 0;
        for (size_t i = 0; i < r->n; i++)
            total += r->p[i].size;
        tq_progress prog;
        tq_progress_init(&prog, "verify", total, quiet);
        int rc = tq_work_run(r->n, threads > 0 ? threads : 1, verify_one, r, &prog, e);
        tq_progress_end(&prog);
        if (rc != 0)
            goto fail;
        for (size_t i = 0; i < r->n; i++) {
            r->kept += r->p[i].kept;
            r->dropped += !r->p[i].kept;
        }
    }
    sweep(r, "");
    if (rewrite(r, e) != 0)
        goto fail;
    *out = r;
    return 0;
fail:
    tq_resume_close(r);
    return -1;
}

const char *tq_resume_have(const tq_resume *r, const char *name, uint64_t *size, unsigned char sha[32])
{
    const piece *p = r ? find(r, name) : NULL;
    if (!p || !p->kept)
        return NULL;
    if (size)
        *size = p->size;
    if (sha)
        memcpy(sha, p->sha, 32);
    return p->extra ? p->extra : "";
}

void tq_resume_counts(const tq_resume *r, size_t *kept, size_t *dropped)
{
    *kept = r ? r->kept : 0;
    *dropped = r ? r->dropped : 0;
}

int tq_resume_done_sha(tq_resume *r, const char *name, uint64_t size, const unsigned char sha[32], const char *extra,
                       tq_err *e)
{
    char hex[65];
    tq_hex(sha, 32, hex);
    char *line = tq_asprintf(e, "piece %s %" PRIu64 " %s%s%s\n", hex, size, name, extra && *extra ? " " : "",
                             extra && *extra ? extra : "");
    if (!line)
        return -1;
    if (strchr(name, ' ') || strchr(line, '\n') != line + strlen(line) - 1) {
        free(line);
        return tq_fail(e, TQ_EUSAGE, "%s: cannot journal the piece name '%s'", r->dir, name);
    }
    pthread_mutex_lock(&r->mu);
    int rc = tq_write_full(r->fd, line, strlen(line), r->journal, e);
    if (rc == 0 && fsync(r->fd) != 0)
        rc = tq_fail(e, TQ_EIO, "%s: fsync failed: %s", r->journal, strerror(errno));
    pthread_mutex_unlock(&r->mu);
    free(line);
    tq_test_step();
    return rc;
}

int tq_resume_done(tq_resume *r, const char *name, const char *extra, tq_err *e)
{
    char *path = tq_path_join(r->dir, name, e);
    if (!path)
        return -1;
    unsigned char sha[32];
    uint64_t size;
    int rc = tq_sha256_file(path, sha, &size, e);
    free(path);
    return rc ? -1 : tq_resume_done_sha(r, name, size, sha, extra, e);
}

int tq_resume_finish(tq_resume *r, tq_err *e)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    if (unlink(r->journal) != 0 && errno != ENOENT)
        return tq_fail(e, TQ_EIO, "%s: cannot remove: %s", r->journal, strerror(errno));
    tq_test_step();
    return 0;
}

void tq_resume_close(tq_resume *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    if (r->dir_fd >= 0)
        close(r->dir_fd); /* and the lock with it */
    free_pieces(r);
    free(r->dir);
    free(r->journal);
    free(r->identity);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
