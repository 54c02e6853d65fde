/* verify/report.c — the problem list of a check (tq_check_report): add, sort, print, JSON,
 * and the comparisons that fill it. The lowest layer of verify/: check, bundle and the split
 * block code add to a report; nothing here calls them. */
#include "verify/verify_internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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
        const tq_problem *p = &r->v[i]; /* names from the files checked: escaped */
        tq_fput_escaped(f, p->file);
        if (p->what) {
            fputs(": ", f);
            tq_fput_escaped(f, p->what);
        }
        fputs(": ", f);
        tq_fput_escaped(f, p->detail);
        fputc('\n', f);
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
    int size_bad = want->size != TQ_MF_SIZE_UNKNOWN && t->size != want->size;
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
