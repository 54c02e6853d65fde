/* Fuzz target: tq-manifest.json parsing on arbitrary bytes. A document that parses must
 * print (tq_manifest_to_json) and parse back to the same files and ranges, and its
 * SHA256SUMS rendering must parse as SHA256SUMS. (SHA256SUMS alone: fuzz_sums. The verify
 * helper's first version took both behind a selector byte; its seeds are in both corpora.) */
#include "verify/verify.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const tq_manifest *a, const tq_manifest *b)
{
    if (a->n_files != b->n_files)
        abort();
    for (size_t i = 0; i < a->n_files; i++) {
        const tq_mf_file *f = &a->files[i], *g = &b->files[i];
        if (strcmp(f->path, g->path) || f->size != g->size || memcmp(f->sha256, g->sha256, 32) ||
            f->n_ranges != g->n_ranges)
            abort();
        for (size_t k = 0; k < f->n_ranges; k++) {
            const tq_mf_range *r = &f->ranges[k], *s = &g->ranges[k];
            if (r->kind != s->kind || r->offset != s->offset || r->nbytes != s->nbytes ||
                memcmp(r->sha256, s->sha256, 32) || r->offset + r->nbytes > f->size)
                abort();
        }
        if (tq_manifest_find(a, f->path) != f)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e;
    tq_manifest *m = NULL;
    if (tq_manifest_from_json((const char *)data, size, "fuzz/tq-manifest.json", &m, &e) != 0) {
        if (m || !e.msg[0])
            abort();
        return 0;
    }
    cJSON *j = tq_manifest_to_json(m, &e);
    char *text = j ? tq_json_print(j, &e) : NULL;
    tq_manifest *again = NULL;
    if (!text || tq_manifest_from_json(text, strlen(text), "again", &again, &e) != 0)
        abort();
    same(m, again);
    size_t len = 0, n = 0;
    char *sums = tq_manifest_sums(m, &len, &e);
    tq_sum_entry *v = NULL;
    if (!sums || tq_sums_parse(sums, len, "sums", &v, &n, &e) != 0 || n != m->n_files)
        abort();
    tq_sums_free(v, n);
    free(sums);
    tq_manifest_free(again);
    free(text);
    cJSON_Delete(j);
    tq_manifest_free(m);
    return 0;
}
