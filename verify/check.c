/* tq-verify check DIR: every file against tq-manifest.json / SHA256SUMS, naming the tensor or
 * expert block that differs. */
#include "verify/verify_internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MANIFEST_BYTES (512u << 20)
#define MAX_SUMS_BYTES (64u << 20)
#define SIZE_UNKNOWN UINT64_MAX

int tq_report_add(tq_check_report *r, int kind, const char *file, const char *what,
                  const char *fmt, ...)
{
    tq_problem *nv = realloc(r->v, (r->n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    r->v = nv;
    tq_problem *p = &r->v[r->n++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->file = strdup(file ? file : "");
    p->what = what ? strdup(what) : NULL;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    p->detail = strdup(buf);
    return 0;
}

void tq_check_report_free(tq_check_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].file);
        free(r->v[i].what);
        free(r->v[i].detail);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}

static const char *kind_name(int k)
{
    switch (k) {
    case TQ_PROB_MISMATCH: return "mismatch";
    case TQ_PROB_RANGE: return "range";
    case TQ_PROB_MISSING: return "missing";
    case TQ_PROB_EXTRA: return "extra";
    case TQ_PROB_MANIFEST: return "manifest";
    case TQ_PROB_ENTRY: return "refused";
    }
    return "?";
}

cJSON *tq_check_report_json(const tq_check_report *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "ok", r->n == 0);
    cJSON_AddNumberToObject(j, "files_listed", (double)r->files_listed);
    cJSON_AddNumberToObject(j, "files_ok", (double)r->files_ok);
    cJSON_AddNumberToObject(j, "bytes_hashed", (double)r->bytes);
    cJSON *a = cJSON_AddArrayToObject(j, "problems");
    for (size_t i = 0; i < r->n; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "kind", kind_name(r->v[i].kind));
        cJSON_AddStringToObject(p, "file", r->v[i].file);
        if (r->v[i].what)
            cJSON_AddStringToObject(p, "what", r->v[i].what);
        cJSON_AddStringToObject(p, "detail", r->v[i].detail);
        cJSON_AddItemToArray(a, p);
    }
    return j;
}

void tq_check_report_print(const tq_check_report *r, FILE *f)
{
    for (size_t i = 0; i < r->n; i++) {
        const tq_problem *p = &r->v[i];
        if (p->what)
            fprintf(f, "%s: %s: %s\n", p->file, p->what, p->detail);
        else
            fprintf(f, "%s: %s\n", p->file, p->detail);
    }
}

static void short_hex(const unsigned char d[32], char out[17])
{
    tq_hex(d, 8, out);
}

void tq_report_compare_file(tq_check_report *r, const tq_mf_file *want, const tq_vh_task *t)
{
    if (t->failed) {
        tq_report_add(r, TQ_PROB_MISMATCH, want->path, NULL, "cannot be verified: %s", t->err.msg);
        return;
    }
    r->bytes += t->size;
    int size_bad = want->size != SIZE_UNKNOWN && t->size != want->size;
    int hash_bad = memcmp(t->whole, want->sha256, 32) != 0;
    size_t bad_ranges = 0;
    for (size_t k = 0; k < want->n_ranges; k++)
        bad_ranges += t->r[k].seen != want->ranges[k].nbytes || memcmp(t->r[k].out, want->ranges[k].sha256, 32);
    if (!size_bad && !hash_bad && !bad_ranges) {
        r->files_ok++;
        return;
    }
    char got[65], exp[65];
    tq_hex(t->whole, 32, got);
    tq_hex(want->sha256, 32, exp);
    if (size_bad)
        tq_report_add(r, TQ_PROB_MISMATCH, want->path, NULL, "size %llu bytes, expected %llu (sha256 %s, expected %s)",
                      (unsigned long long)t->size, (unsigned long long)want->size, got, exp);
    else if (hash_bad)
        tq_report_add(r, TQ_PROB_MISMATCH, want->path, NULL, "sha256 %s, expected %s%s", got, exp,
                      want->n_ranges && !bad_ranges ? " (every tensor/block matches: the difference is in "
                                                      "the header or padding)" : "");
    int kind = (size_bad || hash_bad) ? TQ_PROB_RANGE : TQ_PROB_MANIFEST;
    for (size_t k = 0; k < want->n_ranges; k++) {
        const tq_mf_range *mr = &want->ranges[k];
        const tq_vh_range *hr = &t->r[k];
        char what[600];
        if (mr->kind == TQ_MF_TENSOR)
            snprintf(what, sizeof what, "tensor '%.500s'", mr->name);
        else
            snprintf(what, sizeof what, "expert block (layer %lld, expert %lld)", (long long)mr->layer,
                     (long long)mr->expert);
        if (hr->seen != mr->nbytes) {
            tq_report_add(r, kind, want->path, what, "bytes [%llu, %llu) are cut off by the end of the file",
                          (unsigned long long)mr->offset, (unsigned long long)(mr->offset + mr->nbytes));
        } else if (memcmp(hr->out, mr->sha256, 32) != 0) {
            char g[17], x[17];
            short_hex(hr->out, g);
            short_hex(mr->sha256, x);
            if (kind == TQ_PROB_RANGE)
                tq_report_add(r, kind, want->path, what, "bytes [%llu, %llu) differ (sha256 %s..., expected %s...)",
                              (unsigned long long)mr->offset, (unsigned long long)(mr->offset + mr->nbytes), g, x);
            else
                tq_report_add(r, kind, want->path, what,
                              "bytes [%llu, %llu): the manifest says sha256 %s..., the file has %s... although "
                              "the whole file matches", (unsigned long long)mr->offset,
                              (unsigned long long)(mr->offset + mr->nbytes), x, g);
        }
    }
}

static const tq_problem *sort_base;
static int cmp_prob_idx(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, k = *(const size_t *)b;
    int c = strcmp(sort_base[i].file, sort_base[k].file);
    return c ? c : (i < k ? -1 : i > k);
}

/* Problems grouped by file (stable: a file's own line before its tensors'). */
void tq_report_sort(tq_check_report *r)
{
    if (r->n < 2)
        return;
    size_t *idx = malloc(r->n * sizeof *idx);
    tq_problem *v = malloc(r->n * sizeof *v);
    if (!idx || !v) {
        free(idx);
        free(v);
        return;
    }
    for (size_t i = 0; i < r->n; i++)
        idx[i] = i;
    sort_base = r->v;
    qsort(idx, r->n, sizeof *idx, cmp_prob_idx);
    for (size_t i = 0; i < r->n; i++)
        v[i] = r->v[idx[i]];
    free(r->v);
    r->v = v;
    free(idx);
}

void tq_report_sums_vs_manifest(tq_check_report *r, const tq_sum_entry *s, size_t ns,
                                const tq_manifest *m)
{
    size_t i = 0, k = 0;
    while (i < ns || k < m->n_files) {
        int c = i >= ns ? 1 : k >= m->n_files ? -1 : strcmp(s[i].path, m->files[k].path);
        if (c < 0) {
            tq_report_add(r, TQ_PROB_MANIFEST, s[i].path, NULL, "listed in %s but not in %s", TQ_SUMS_NAME,
                          TQ_MANIFEST_NAME);
            i++;
        } else if (c > 0) {
            tq_report_add(r, TQ_PROB_MANIFEST, m->files[k].path, NULL, "listed in %s but not in %s",
                          TQ_MANIFEST_NAME, TQ_SUMS_NAME);
            k++;
        } else {
            if (memcmp(s[i].sha256, m->files[k].sha256, 32))
                tq_report_add(r, TQ_PROB_MANIFEST, s[i].path, NULL, "%s and %s give different hashes",
                              TQ_SUMS_NAME, TQ_MANIFEST_NAME);
            i++;
            k++;
        }
    }
}

/* A manifest made from SHA256SUMS alone: hashes, no sizes, no ranges. */
static int manifest_from_sums(const tq_sum_entry *s, size_t n, tq_manifest **out, tq_err *e)
{
    tq_manifest *m = tq_calloc(1, sizeof *m, e);
    if (!m || (n && !(m->files = tq_calloc(n, sizeof *m->files, e)))) {
        free(m);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(m->files[i].path = tq_strdup(s[i].path, e))) {
            tq_manifest_free(m);
            return -1;
        }
        m->n_files = i + 1;
        m->files[i].size = SIZE_UNKNOWN;
        memcpy(m->files[i].sha256, s[i].sha256, 32);
    }
    *out = m;
    return 0;
}

static int load_sums(const char *path, tq_sum_entry **s, size_t *n, tq_err *e)
{
    char *text;
    size_t len;
    if (tq_read_small_file(path, MAX_SUMS_BYTES, &text, &len, e) != 0)
        return -1;
    int rc = tq_sums_parse(text, len, path, s, n, e);
    free(text);
    return rc;
}

int tq_check_dir(const char *dir, int threads, tq_check_report *r, tq_err *e)
{
    memset(r, 0, sizeof *r);
    char *mp = tq_path_join(dir, TQ_MANIFEST_NAME, e), *sp = tq_path_join(dir, TQ_SUMS_NAME, e);
    tq_manifest *m = NULL;
    tq_sum_entry *sums = NULL;
    size_t nsums = 0, nact = 0;
    char **actual = NULL;
    tq_vh_task *tasks = NULL;
    char **abs = NULL;
    size_t ntasks = 0;
    int rc = -1;
    if (!mp || !sp)
        goto out;
    if (!tq_is_dir(dir)) {
        tq_fail(e, TQ_EIO, "%s: not a directory", dir);
        goto out;
    }
    int have_m = tq_exists(mp), have_s = tq_exists(sp), from_split = 0;
    char split_json[4096];
    snprintf(split_json, sizeof split_json, "%s/split.json", dir);
    if (have_s && load_sums(sp, &sums, &nsums, e) != 0)
        goto out;
    if (have_m) {
        char *text;
        size_t len;
        if (tq_read_small_file(mp, MAX_MANIFEST_BYTES, &text, &len, e) != 0)
            goto out;
        int prc = tq_manifest_from_json(text, len, mp, &m, e);
        free(text);
        if (prc != 0)
            goto out;
        if (have_s)
            tq_report_sums_vs_manifest(r, sums, nsums, m);
    } else if (have_s) {
        if (manifest_from_sums(sums, nsums, &m, e) != 0)
            goto out;
    } else if (tq_exists(split_json)) {
        if (tq_verify_manifest_from_split(dir, &m, e) != 0)
            goto out;
        from_split = 1;
    } else {
        tq_fail(e, TQ_EDATA, "%s: no %s, %s or split.json to check against (run tq-verify manifest)", dir,
                TQ_MANIFEST_NAME, TQ_SUMS_NAME);
        goto out;
    }
    if (!from_split && tq_verify_split_merge(dir, m, r, e) != 0)
        goto out;
    if (tq_verify_walk(dir, &actual, &nact, e) != 0)
        goto out;
    r->files_listed = m->n_files;
    tasks = tq_calloc(m->n_files ? m->n_files : 1, sizeof *tasks, e);
    abs = tq_calloc(m->n_files ? m->n_files : 1, sizeof *abs, e);
    size_t *which = tq_calloc(m->n_files ? m->n_files : 1, sizeof *which, e);
    if (!tasks || !abs || !which) {
        free(which);
        goto out;
    }
    size_t i = 0, k = 0;
    while (i < nact || k < m->n_files) {
        int c = i >= nact ? 1 : k >= m->n_files ? -1 : strcmp(actual[i], m->files[k].path);
        if (c < 0) {
            if (!from_split || strcmp(actual[i], "split.json"))
                tq_report_add(r, TQ_PROB_EXTRA, actual[i], NULL, "present but not listed in the manifest");
            i++;
        } else if (c > 0) {
            tq_report_add(r, TQ_PROB_MISSING, m->files[k].path, NULL, "listed in the manifest but missing");
            k++;
        } else {
            tq_vh_task *t = &tasks[ntasks];
            if (!(abs[ntasks] = tq_path_join(dir, actual[i], e)) ||
                tq_mf_ranges_for(&m->files[k], &t->r, e) != 0) {
                free(which);
                goto out;
            }
            t->path = abs[ntasks];
            t->want_whole = 1;
            t->n = m->files[k].n_ranges;
            t->size_hint = m->files[k].size == SIZE_UNKNOWN ? 0 : m->files[k].size;
            which[ntasks++] = k;
            i++;
            k++;
        }
    }
    if (tq_vh_run(tasks, ntasks, threads, e) != 0) {
        free(which);
        goto out;
    }
    for (size_t t = 0; t < ntasks; t++)
        tq_report_compare_file(r, &m->files[which[t]], &tasks[t]);
    free(which);
    tq_report_sort(r);
    rc = 0;
out:
    if (tasks)
        for (size_t t = 0; t < ntasks; t++)
            free(tasks[t].r);
    free(tasks);
    if (abs)
        for (size_t t = 0; t < ntasks; t++)
            free(abs[t]);
    free(abs);
    tq_free_strv(actual, nact);
    tq_sums_free(sums, nsums);
    tq_manifest_free(m);
    free(mp);
    free(sp);
    return rc;
}
