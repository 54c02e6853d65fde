/* Expert blocks of a split directory (split.json, read by formats/flash_manifest.c) as named ranges
 * of its layer files, so manifests and checks can name (layer, expert). */
#include "verify/verify_internal.h"
#include "formats/flash.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

#define SPLIT_JSON "split.json"

static int has_split(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, SPLIT_JSON);
    return tq_exists(p);
}

static int cmp_range_off(const void *a, const void *b)
{
    const tq_mf_range *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Append sm's blocks to the matching files of m; with_hash copies split.json's hashes
 * (check), otherwise they are computed later (manifest). Files that already have blocks
 * keep theirs. */
static int add_blocks(const tq_flash_manifest *sm, tq_manifest *m, int with_hash, tq_err *e)
{
    if (!sm->num_experts)
        return 0;
    for (size_t i = 0; i < sm->n_layers; i++) {
        tq_mf_file *f = (tq_mf_file *)tq_manifest_find(m, sm->layers[i].file);
        if (!f)
            continue;
        int has = 0;
        for (size_t k = 0; k < f->n_ranges; k++)
            has |= f->ranges[k].kind == TQ_MF_BLOCK;
        if (has)
            continue;
        size_t first = i * sm->num_experts;
        if (first + sm->num_experts > sm->n_blocks)
            break;
        tq_mf_range *nr = realloc(f->ranges, (f->n_ranges + sm->num_experts) * sizeof *nr);
        if (!nr)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        f->ranges = nr;
        for (uint64_t x = 0; x < sm->num_experts; x++) {
            const tq_flash_block *b = &sm->blocks[first + x];
            tq_mf_range *r = &f->ranges[f->n_ranges];
            memset(r, 0, sizeof *r);
            if (!(r->name = tq_asprintf(e, "layer %u expert %u", b->layer, b->expert)))
                return -1;
            r->kind = TQ_MF_BLOCK;
            r->layer = b->layer;
            r->expert = b->expert;
            r->offset = b->offset;
            r->nbytes = b->length;
            if (with_hash)
                memcpy(r->sha256, b->sha256, 32);
            f->n_ranges++;
        }
        qsort(f->ranges, f->n_ranges, sizeof *f->ranges, cmp_range_off);
    }
    return 0;
}

int tq_verify_split_blocks(const char *dir, tq_manifest *m, tq_err *e)
{
    if (!has_split(dir))
        return 0;
    tq_flash_manifest *sm;
    if (tq_flash_manifest_load(&sm, dir, e) != 0)
        return -1;
    int rc = add_blocks(sm, m, 0, e);
    tq_flash_manifest_free(sm);
    return rc;
}

int tq_verify_split_merge(const char *dir, tq_manifest *m, tq_check_report *r, tq_err *e)
{
    if (!has_split(dir))
        return 0;
    tq_flash_manifest *sm;
    tq_err le = {0};
    if (tq_flash_manifest_load(&sm, dir, &le) != 0) {
        tq_report_add(r, TQ_PROB_MANIFEST, SPLIT_JSON, NULL, "unusable: %s", le.msg);
        return 0;
    }
    int rc = add_blocks(sm, m, 1, e);
    tq_flash_manifest_free(sm);
    return rc;
}

int tq_verify_manifest_from_split(const char *dir, tq_manifest **out, tq_err *e)
{
    tq_flash_manifest *sm;
    if (tq_flash_manifest_load(&sm, dir, e) != 0)
        return -1;
    tq_manifest *m = tq_calloc(1, sizeof *m, e);
    int rc = -1;
    if (!m || !(m->files = tq_calloc(sm->n_files + 1, sizeof *m->files, e)))
        goto out;
    for (size_t i = 0; i < sm->n_files; i++) {
        if (!tq_verify_path_ok(sm->files[i].name)) {
            tq_fail(e, TQ_EDATA, "%s/%s: unsafe path '%.200s'", dir, SPLIT_JSON, sm->files[i].name);
            goto out;
        }
        tq_mf_file *f = &m->files[m->n_files];
        if (!(f->path = tq_strdup(sm->files[i].name, e)))
            goto out;
        m->n_files++;
        f->size = sm->files[i].size;
        memcpy(f->sha256, sm->files[i].sha256, 32);
    }
    /* split.json itself is covered by nothing; listing it with its own hash would be
     * circular, so it is simply not an extra file. */
    rc = add_blocks(sm, m, 1, e);
out:
    tq_flash_manifest_free(sm);
    if (rc == 0)
        *out = m;
    else
        tq_manifest_free(m);
    return rc;
}

/* msg without its leading "PATH: " (the report names the file itself) */
static const char *after_path(const char *msg, const char *path)
{
    size_t n = strlen(path);
    return !strncmp(msg, path, n) && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

int tq_verify_split_layout(const char *dir, tq_check_report *r, tq_err *e)
{
    if (!has_split(dir))
        return 0;
    tq_flash_manifest *sm;
    tq_err le = {0};
    if (tq_flash_manifest_load(&sm, dir, &le) != 0)
        return 0; /* reported by tq_verify_split_merge, or fatal for a check from split.json */
    int rc = -1;
    for (size_t i = 0; i < sm->n_layers; i++) {
        char *p = tq_path_join(dir, sm->layers[i].file, e);
        if (!p)
            goto out;
        if (tq_exists(p)) { /* a missing one is reported as missing */
            tq_flash_header h;
            memset(&le, 0, sizeof le);
            if (tq_flash_read(&h, p, &le) == 0) {
                tq_flash_manifest_check_layer(sm, i, &h, p, &le);
                tq_flash_header_free(&h);
            }
            if (le.code)
                tq_report_add(r, TQ_PROB_MANIFEST, sm->layers[i].file, NULL, "%s", after_path(le.msg, p));
        }
        free(p);
    }
    char *cp = tq_path_join(dir, "config.json", e);
    if (!cp)
        goto out;
    cJSON *cj = NULL;
    memset(&le, 0, sizeof le);
    if (tq_exists(cp) && (tq_json_read_file(cp, 64u << 20, &cj, &le) != 0 || tq_flash_streaming_check(cj, sm, dir, cp, &le) != 0))
        tq_report_add(r, TQ_PROB_MANIFEST, "config.json", NULL, "%s", after_path(le.msg, cp));
    cJSON_Delete(cj);
    free(cp);
    rc = 0;
out:
    tq_flash_manifest_free(sm);
    return rc;
}
