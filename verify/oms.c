/* Model signatures of directories and files: which files a signature covers, signing them
 * (tq-verify sign) and checking a model against a signature (tq-verify verify). */
#include "verify/verify_internal.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void tq_oms_info_free(tq_oms_info *info)
{
    if (!info)
        return;
    free(info->sig_path);
    free(info->name);
    memset(info, 0, sizeof *info);
}

void tq_oms_info_set(tq_oms_info *info, const unsigned char subject[32], const tq_oms_key *k, size_t files,
                     uint64_t bytes, char *sig_path, char *name)
{
    tq_hex(subject, 32, info->subject);
    snprintf(info->key_hint, sizeof info->key_hint, "%s", tq_oms_key_hint(k));
    info->key_type = tq_oms_key_type(k);
    info->files = files;
    info->bytes = bytes;
    info->sig_path = sig_path;
    info->name = name;
}

/* ---- paths ---- */
/* An absolute path without links, '.' or '..' for p, whose last component need not exist. */
static char *resolve(const char *p, tq_err *e)
{
    char buf[PATH_MAX];
    if (realpath(p, buf))
        return tq_strdup(buf, e);
    if (errno != ENOENT)
        return tq_fail(e, TQ_EIO, "%s: %s", p, strerror(errno)), NULL;
    char *d = tq_strdup(p, e), *b = tq_strdup(p, e);
    char *out = NULL;
    if (d && b) {
        const char *base = basename(b);
        if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(base, "/"))
            tq_fail(e, TQ_EIO, "%s: %s", p, strerror(ENOENT));
        else if (!realpath(dirname(d), buf))
            tq_fail(e, TQ_EIO, "%s: %s", p, strerror(errno));
        else
            out = tq_path_join(buf, base, e);
    }
    free(d);
    free(b);
    return out;
}

/* abs relative to root (both from resolve), or NULL when abs is not strictly inside root. */
static const char *inside(const char *root, const char *abs)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return abs[1] ? abs + 1 : NULL;
    if (strncmp(root, abs, n) || abs[n] != '/' || !abs[n + 1])
        return NULL;
    return abs + n + 1;
}

/* The subject name: the model path's last component as pathlib names it (trailing '/' and
 * '.' components dropped); for "", ".", ".." or "/" the resolved directory's name. */
static char *model_name(const char *model, const char *resolved, tq_err *e)
{
    char *c = tq_strdup(model, e);
    if (!c)
        return NULL;
    for (;;) {
        size_t n = strlen(c);
        while (n > 1 && c[n - 1] == '/')
            c[--n] = 0;
        if (n >= 2 && c[n - 1] == '.' && c[n - 2] == '/') {
            c[n - 2] = 0;
            continue;
        }
        break;
    }
    const char *last = strrchr(c, '/');
    last = last ? last + 1 : c;
    char *out;
    if (!*last || !strcmp(last, ".") || !strcmp(last, "..")) {
        const char *r = strrchr(resolved, '/');
        out = tq_strdup(r ? r + 1 : resolved, e);
    } else {
        out = tq_strdup(last, e);
    }
    free(c);
    return out;
}

/* ---- ignore lists ---- */
typedef struct strv {
    char **v;
    size_t n;
} strv;

static int strv_add(strv *l, const char *s, tq_err *e)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s))
            return 0;
    char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    l->v = nv;
    if (!(l->v[l->n] = tq_strdup(s, e)))
        return -1;
    l->n++;
    return 0;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int tq_oms_ignored(char *const *ign, size_t n, const char *rel)
{
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(ign[i]);
        if (!strncmp(rel, ign[i], l) && (rel[l] == 0 || rel[l] == '/'))
            return 1;
    }
    return 0;
}

/* What the walk leaves out: the ignored paths, and a partial IGNORED.partial-XXXXXX of an
 * ignored file (the signature being written by this or another run: man tq-formats(5),
 * OUTPUTS), never a model file. */
static int skip_ignored(void *ctx, const char *rel)
{
    const strv *l = ctx;
    if (tq_oms_ignored(l->v, l->n, rel))
        return 1;
    for (size_t i = 0; i < l->n; i++) {
        size_t n = strlen(l->v[i]);
        if (!strncmp(rel, l->v[i], n) && !strncmp(rel + n, ".partial-", 9) && !strchr(rel + n, '/'))
            return 1;
    }
    return 0;
}

/* Paths given on the command line (relative to the current directory) that lie inside the
 * model directory root, as relative paths; the others are dropped, as model_signing does. */
static int add_cli_paths(strv *l, const char *root, const char *const *p, size_t n, tq_err *e)
{
    for (size_t i = 0; i < n; i++) {
        char *abs = resolve(p[i], e);
        if (!abs)
            return -1;
        const char *rel = inside(root, abs);
        int rc = rel ? strv_add(l, rel, e) : 0;
        free(abs);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* ---- the model's files ---- */
typedef struct model {
    char *root;          /* resolved model path */
    int is_file;
    char *sig_path;      /* the signature file, as given or defaulted */
    char **files;        /* relative names, tq_oms_name_cmp order ("." for a file model) */
    size_t n;
    unsigned char (*sha)[32];
    uint64_t bytes;
} model;

static void model_free(model *m)
{
    free(m->root);
    free(m->sig_path);
    tq_free_strv(m->files, m->n);
    free(m->sha);
    memset(m, 0, sizeof *m);
}

static int cmp_name(const void *a, const void *b)
{
    return tq_oms_name_cmp(*(const char *const *)a, *(const char *const *)b);
}

static int model_open(model *m, const char *path, const char *sig, tq_err *e)
{
    memset(m, 0, sizeof *m);
    struct stat st;
    if (stat(path, &st) != 0)
        return tq_fail(e, TQ_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
        return tq_fail(e, TQ_EDATA, "%s: not a directory or regular file", path);
    m->is_file = S_ISREG(st.st_mode);
    if (!(m->root = resolve(path, e)))
        return -1;
    if (sig) {
        m->sig_path = tq_strdup(sig, e);
    } else if (m->is_file) {
        char *d = tq_strdup(path, e);
        m->sig_path = d ? tq_path_join(dirname(d), TQ_OMS_SIG_NAME, e) : NULL;
        free(d);
    } else {
        m->sig_path = tq_path_join(path, TQ_OMS_SIG_NAME, e);
    }
    return m->sig_path ? 0 : -1;
}

/* Record in watch the signed file rel of m (root relative) and each directory on its way that
 * the previous file's path (prev) did not already pass through. */
static int watch_file(tq_sources *watch, const model *m, const char *prev, const char *rel, const char *abs, tq_err *e)
{
    if (m->is_file)
        return tq_sources_add_entry(watch, abs, e);
    if (!prev && tq_sources_add_entry(watch, m->root, e) != 0)
        return -1;
    for (const char *p = strchr(rel, '/'); p; p = strchr(p + 1, '/')) {
        size_t k = (size_t)(p - rel);
        if (prev && !strncmp(prev, rel, k) && prev[k] == '/')
            continue;
        /* abs is root/rel: its first root + 1 + k bytes name this directory */
        char *dir = tq_strdup(abs, e);
        if (dir)
            dir[strlen(abs) - strlen(rel) + k] = 0;
        int rc = dir ? tq_sources_add_entry(watch, dir, e) : -1;
        free(dir);
        if (rc != 0)
            return -1;
    }
    return tq_sources_add_entry(watch, abs, e);
}

/* List (ignore rules applied) and hash the model's files; with watch, each file and the
 * directories that hold them are recorded there before the file is read. */
static int model_hash(model *m, const strv *ign, int allow_symlinks, int threads, tq_sources *watch, tq_err *e)
{
    if (m->is_file) {
        if (!(m->files = tq_calloc(1, sizeof *m->files, e)) || !(m->files[0] = tq_strdup(".", e)))
            return -1;
        m->n = 1;
    } else {
        tq_walk_opts wo = {.skip = skip_ignored, .ctx = (void *)ign, .refuse_links = !allow_symlinks};
        if (tq_verify_walk_ex(m->root, &wo, &m->files, &m->n, e) != 0)
            return -1;
        if (m->n > 1)
            qsort(m->files, m->n, sizeof *m->files, cmp_name);
        for (size_t i = 0; i < m->n; i++) {
            size_t bad = 0;
            if (tq_utf8_check(m->files[i], strlen(m->files[i]), &bad) != 0)
                return tq_fail(e, TQ_EDATA, "%s/%s: the file name is not UTF-8 (byte %zu); a signature cannot name it",
                               m->root, m->files[i], bad);
        }
    }
    tq_vh_task *t = tq_calloc(m->n ? m->n : 1, sizeof *t, e);
    char **abs = tq_calloc(m->n ? m->n : 1, sizeof *abs, e);
    m->sha = tq_calloc(m->n ? m->n : 1, sizeof *m->sha, e);
    int rc = t && abs && m->sha ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        abs[i] = m->is_file ? tq_strdup(m->root, e) : tq_path_join(m->root, m->files[i], e);
        if (!abs[i]) {
            rc = -1;
            break;
        }
        if (watch && watch_file(watch, m, i ? m->files[i - 1] : NULL, m->files[i], abs[i], e) != 0) {
            rc = -1;
            break;
        }
        t[i].path = abs[i];
        t[i].want_whole = 1;
        uint64_t sz = 0;
        tq_err ignore_err;
        if (tq_file_size(abs[i], &sz, &ignore_err) == 0)
            t[i].size_hint = sz;
    }
    if (rc == 0)
        rc = tq_vh_run(t, m->n, threads, e);
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        if (t[i].failed) {
            *e = t[i].err;
            rc = -1;
            break;
        }
        memcpy(m->sha[i], t[i].whole, 32);
        m->bytes += t[i].size;
    }
    if (abs)
        for (size_t i = 0; i < m->n; i++)
            free(abs[i]);
    free(abs);
    free(t);
    return rc;
}

/* ---------------------------------------------------------------------- sign */
static const char *const git_paths[] = {".git", ".gitattributes", ".github", ".gitignore"};

/* Where the signature may go, before anything is read: never over the key or the model file,
 * never holding the model. Inside the signed directory it is left out of what it signs (by
 * design: DIR/model.sig), so an existing file there other than DIR/model.sig is replaced only
 * when it is itself a signature; anything else is a model file that would vanish unsigned. */
static int sig_target_check(const model *m, const char *path, const char *sig_abs, const char *key_pem, tq_err *e)
{
    if (m->is_file && !strcmp(sig_abs, m->root))
        return tq_fail(e, TQ_EUSAGE,
                       "%s: the output is the input %s itself: the signature would replace the model file",
                       m->sig_path, path);
    const char *rel = m->is_file ? NULL : inside(m->root, sig_abs);
    if (!rel)
        return tq_check_out_in(m->sig_path, path, e) != 0 ? -1 : tq_check_out_in(m->sig_path, key_pem, e);
    struct stat st;
    if (tq_check_out_in(m->sig_path, key_pem, e) != 0)
        return -1;
    if (lstat(sig_abs, &st) != 0 || !strcmp(rel, TQ_OMS_SIG_NAME))
        return 0;
    char *text = NULL;
    size_t len = 0;
    tq_oms_env env;
    tq_err why = {0};
    int is_sig = S_ISREG(st.st_mode) && tq_read_small_file(sig_abs, TQ_OMS_MAX_SIG_BYTES, &text, &len, &why) == 0 &&
                 tq_oms_bundle_parse(text, len, m->sig_path, &env, &why) == 0;
    if (is_sig)
        tq_oms_env_free(&env);
    free(text);
    if (is_sig)
        return 0;
    return tq_fail(e, TQ_EUSAGE,
                   "%s: the output lies inside the input directory %s and is not a signature (%s); it would be "
                   "replaced and left out of the signature; choose another --out",
                   m->sig_path, path, why.msg[0] ? why.msg : "not a regular file");
}

/* The signature is none of the files it signs under another name (a hard link). */
static int sig_not_signed(const char *sig_path, const tq_sources *src, tq_err *e)
{
    struct stat st;
    if (stat(sig_path, &st) != 0)
        return 0;
    for (size_t i = 0; i < src->n; i++)
        if (!src->ids[i].is_dir && src->ids[i].dev == (uint64_t)st.st_dev && src->ids[i].ino == (uint64_t)st.st_ino)
            return tq_fail(e, TQ_EUSAGE,
                           "%s: the output is the input %s itself (same device and inode); choose another --out",
                           sig_path, src->paths[i]);
    return 0;
}

int tq_oms_sign(const char *path, const char *key_pem, const tq_oms_opts *o, tq_oms_info *info, tq_err *e)
{
    memset(info, 0, sizeof *info);
    model m;
    strv ign = {0};
    tq_oms_key *k = NULL;
    tq_oms_stmt s = {0};
    tq_sources src = {0};
    char *payload = NULL, *bundle = NULL, *sig_abs = NULL;
    unsigned char *pae = NULL, *sig = NULL;
    size_t plen = 0, paelen = 0, slen = 0, blen = 0;
    int rc = -1;
    tq_afile af = {.fd = -1};
    if (model_open(&m, path, o->sig, e) != 0)
        goto out;
    /* the key first: a bad key should not cost a pass over the model */
    if (tq_oms_key_load(key_pem, 1, &k, e) != 0)
        goto out;
    /* the signature file as it is now is what the new one may replace at the end */
    if (!(sig_abs = resolve(m.sig_path, e)) || sig_target_check(&m, path, sig_abs, key_pem, e) != 0 ||
        tq_afile_check(&af, m.sig_path, o->force ? TQ_AFILE_REPLACE : 0, e) != 0)
        goto out;
    if (!m.is_file) {
        const char *rel = inside(m.root, sig_abs);
        if (rel && strv_add(&ign, rel, e) != 0)
            goto out;
        /* DIR/model.sig is the directory's signature, never its content */
        char *own = tq_path_join(m.root, TQ_OMS_SIG_NAME, e);
        int has_own = own && tq_exists(own);
        free(own);
        if (has_own && strv_add(&ign, TQ_OMS_SIG_NAME, e) != 0)
            goto out;
        if (!o->keep_index && (strv_add(&ign, TQ_SUMS_NAME, e) != 0 || strv_add(&ign, TQ_MANIFEST_NAME, e) != 0))
            goto out;
        if (add_cli_paths(&ign, m.root, o->ignore, o->n_ignore, e) != 0)
            goto out;
    }
    for (size_t i = 0; !o->keep_git && i < sizeof git_paths / sizeof *git_paths; i++)
        if (strv_add(&ign, git_paths[i], e) != 0)
            goto out;
    if (ign.n > 1)
        qsort(ign.v, ign.n, sizeof *ign.v, cmp_strp);
    if (model_hash(&m, &ign, o->allow_symlinks, o->threads, &src, e) != 0 ||
        sig_not_signed(m.sig_path, &src, e) != 0)
        goto out;
    if (!(s.name = model_name(path, m.root, e)) || (m.n && !(s.res = tq_calloc(m.n, sizeof *s.res, e))))
        goto out;
    for (size_t i = 0; i < m.n; i++) {
        s.res[i].name = m.files[i]; /* borrowed; unhooked before tq_oms_stmt_free */
        memcpy(s.res[i].sha256, m.sha[i], 32);
    }
    s.n_res = m.n;
    s.allow_symlinks = o->allow_symlinks;
    s.ignore = ign.v;
    s.n_ignore = ign.n;
    tq_oms_subject(s.res, s.n_res, s.subject);
    payload = tq_oms_payload(&s, &plen, e);
    for (size_t i = 0; i < s.n_res; i++)
        s.res[i].name = NULL;
    s.ignore = NULL;
    s.n_ignore = 0;
    if (!payload || !(pae = tq_oms_pae(TQ_OMS_PAYLOAD_TYPE, (const unsigned char *)payload, plen, &paelen, e)) ||
        tq_oms_key_sign(k, pae, paelen, &sig, &slen, e) != 0 ||
        !(bundle = tq_oms_bundle_make((const unsigned char *)payload, plen, sig, slen, tq_oms_key_hint(k), &blen, e)))
        goto out;
    /* a file changed while it was hashed: its digest may be of neither version; checked again
     * once the signature is written, up to its publishing */
    const char *own[1] = {m.sig_path};
    if (tq_sources_check_own(&src, own, 1, e) != 0) {
        tq_err_suffix(e, "; the signature was not written");
        goto out;
    }
    if (tq_afile_create(&af, e) != 0)
        goto out;
    if (tq_write_full(af.fd, bundle, blen, af.tmp_path, e) != 0 || tq_sources_check_afile(&src, &af, e) != 0 ||
        tq_afile_commit(&af, e) != 0)
        goto out;
    tq_oms_info_set(info, s.subject, k, m.n, m.bytes, m.sig_path, s.name);
    m.sig_path = NULL;
    s.name = NULL;
    rc = 0;
out:
    if (af.final_path)
        tq_afile_abort(&af);
    tq_sources_free(&src);
    tq_oms_stmt_free(&s);
    tq_free_strv(ign.v, ign.n);
    tq_oms_key_free(k);
    model_free(&m);
    free(payload);
    free(pae);
    free(sig);
    free(bundle);
    free(sig_abs);
    return rc;
}

/* -------------------------------------------------------------------- verify */
int tq_oms_open(const char *text, size_t len, const char *what, const tq_oms_key *k, tq_oms_stmt *s, tq_err *e)
{
    tq_oms_env env;
    memset(s, 0, sizeof *s);
    if (tq_oms_bundle_parse(text, len, what, &env, e) != 0)
        return -1;
    int rc = -1;
    size_t paelen = 0;
    unsigned char *pae = NULL;
    if (strcmp(env.payload_type, TQ_OMS_PAYLOAD_TYPE))
        tq_fail(e, TQ_EDATA, "%s: payload type \"%.200s\" is not an in-toto statement (%s)", what, env.payload_type,
                TQ_OMS_PAYLOAD_TYPE);
    else if (env.hint && strcmp(env.hint, tq_oms_key_hint(k)))
        tq_fail(e, TQ_EDATA, "%s: signed with another key: the signature's key hint is %.80s, this %s key's is %s",
                what, env.hint, tq_oms_key_type(k), tq_oms_key_hint(k));
    else if ((pae = tq_oms_pae(env.payload_type, env.payload, env.payload_len, &paelen, e)) &&
             tq_oms_key_verify(k, pae, paelen, env.sig, env.sig_len, what, e) == 0)
        rc = tq_oms_payload_parse((const char *)env.payload, env.payload_len, what, s, e);
    free(pae);
    tq_oms_env_free(&env);
    return rc;
}

static int cmp_res(const void *a, const void *b)
{
    return tq_oms_name_cmp((*(const tq_oms_res *const *)a)->name, (*(const tq_oms_res *const *)b)->name);
}

int tq_oms_compare(const tq_oms_stmt *s, const tq_oms_file *f, size_t n, tq_check_report *r, tq_err *e)
{
    const tq_oms_res **want = tq_calloc(s->n_res ? s->n_res : 1, sizeof *want, e);
    if (!want)
        return -1;
    for (size_t i = 0; i < s->n_res; i++)
        want[i] = &s->res[i];
    /* sort the signed list by name (its own order need not be ours) */
    if (s->n_res > 1)
        qsort(want, s->n_res, sizeof *want, cmp_res);
    r->files_listed += s->n_res;
    size_t i = 0, k = 0;
    while (i < n || k < s->n_res) {
        int c = i >= n ? 1 : k >= s->n_res ? -1 : tq_oms_name_cmp(f[i].name, want[k]->name);
        if (c < 0) {
            tq_report_add(r, TQ_PROB_EXTRA, f[i].name, NULL, "present but not signed");
            i++;
        } else if (c > 0) {
            tq_report_add(r, TQ_PROB_MISSING, want[k]->name, NULL, "signed but missing");
            k++;
        } else {
            if (f[i].sha256 && memcmp(f[i].sha256, want[k]->sha256, 32)) {
                char a[65], b[65];
                tq_hex(f[i].sha256, 32, a);
                tq_hex(want[k]->sha256, 32, b);
                tq_report_add(r, TQ_PROB_MISMATCH, f[i].name, NULL, "sha256 %s, signed %s", a, b);
            } else if (f[i].sha256) {
                r->files_ok++;
            }
            i++;
            k++;
        }
    }
    free(want);
    return 0;
}

int tq_oms_verify(const char *path, const char *pub_pem, const tq_oms_opts *o, tq_check_report *r,
                  tq_oms_info *info, tq_err *e)
{
    memset(r, 0, sizeof *r);
    memset(info, 0, sizeof *info);
    model m;
    strv ign = {0};
    tq_oms_key *k = NULL;
    tq_oms_stmt s = {0};
    tq_oms_file *files = NULL;
    char *text = NULL, *sig_abs = NULL;
    size_t len = 0;
    int rc = -1;
    if (model_open(&m, path, o->sig, e) != 0 || tq_oms_key_load(pub_pem, 0, &k, e) != 0)
        goto out;
    if (tq_read_small_file(m.sig_path, TQ_OMS_MAX_SIG_BYTES, &text, &len, e) != 0 ||
        tq_oms_open(text, len, m.sig_path, k, &s, e) != 0)
        goto out;
    if (m.is_file && (s.n_res != 1 || strcmp(s.res[0].name, "."))) {
        tq_fail(e, TQ_EDATA, "%s: signs a directory (%zu files), but %s is a single file", m.sig_path, s.n_res, path);
        goto out;
    }
    if (!m.is_file) {
        if (s.n_res == 1 && !strcmp(s.res[0].name, ".")) {
            tq_fail(e, TQ_EDATA, "%s: signs a single file, but %s is a directory", m.sig_path, path);
            goto out;
        }
        if (!(sig_abs = resolve(m.sig_path, e)))
            goto out;
        const char *rel = inside(m.root, sig_abs);
        if ((rel && strv_add(&ign, rel, e) != 0) || strv_add(&ign, TQ_OMS_SIG_NAME, e) != 0)
            goto out;
        for (size_t i = 0; i < s.n_ignore; i++)
            if (strv_add(&ign, s.ignore[i], e) != 0)
                goto out;
        if (add_cli_paths(&ign, m.root, o->ignore, o->n_ignore, e) != 0)
            goto out;
    }
    if (model_hash(&m, &ign, s.allow_symlinks, o->threads, NULL, e) != 0)
        goto out;
    if (m.n && !(files = tq_calloc(m.n, sizeof *files, e)))
        goto out;
    for (size_t i = 0; i < m.n; i++)
        files[i] = (tq_oms_file){.name = m.files[i], .sha256 = m.sha[i]};
    if (tq_oms_compare(&s, files, m.n, r, e) != 0)
        goto out;
    r->bytes = m.bytes;
    tq_report_sort(r);
    tq_oms_info_set(info, s.subject, k, m.n, m.bytes, m.sig_path, s.name);
    m.sig_path = NULL;
    s.name = NULL;
    rc = 0;
out:
    free(files);
    free(text);
    free(sig_abs);
    tq_oms_stmt_free(&s);
    tq_free_strv(ign.v, ign.n);
    tq_oms_key_free(k);
    model_free(&m);
    return rc;
}

int tq_check_dir_signed(const char *dir, int threads, const char *pub_pem, tq_check_report *r, tq_oms_info *info,
                        tq_err *e)
{
    if (info)
        memset(info, 0, sizeof *info);
    if (tq_check_dir(dir, threads, r, e) != 0)
        return -1;
    if (!pub_pem)
        return 0;
    tq_oms_opts o = {.threads = threads};
    tq_oms_info scratch;
    tq_check_report sr;
    if (tq_oms_verify(dir, pub_pem, &o, &sr, info ? info : &scratch, e) != 0)
        return -1;
    if (!info)
        tq_oms_info_free(&scratch);
    for (size_t i = 0; i < sr.n; i++)
        tq_report_add(r, sr.v[i].kind, sr.v[i].file, "signature", "%s", sr.v[i].detail);
    tq_check_report_free(&sr);
    tq_report_sort(r);
    return 0;
}
