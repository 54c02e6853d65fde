/* tq-verify check DIR: every file against tq-manifest.json / SHA256SUMS, naming the tensor or
 * expert block that differs. */
#include "verify/verify_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_MANIFEST_BYTES (512u << 20)
#define MAX_SUMS_BYTES (64u << 20)

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
        m->files[i].size = TQ_MF_SIZE_UNKNOWN;
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
    if ((!from_split && tq_verify_split_merge(dir, m, r, e) != 0) || tq_verify_split_layout(dir, r, e) != 0)
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
            t->size_hint = m->files[k].size == TQ_MF_SIZE_UNKNOWN ? 0 : m->files[k].size;
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
