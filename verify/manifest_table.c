/* verify/manifest_table.c — a manifest in memory: look a file up, free it. Apart from
 * manifest.c (build, serialize, parse) because the split block code fills manifests too and
 * manifest.c calls it: both build on this file, which calls neither. */
#include "verify/verify_internal.h"

#include <stdlib.h>
#include <string.h>

static void free_file(tq_mf_file *f)
{
    for (size_t i = 0; i < f->n_ranges; i++)
        free(f->ranges[i].name);
    free(f->ranges);
    free(f->path);
}

void tq_manifest_free(tq_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_files; i++)
        free_file(&m->files[i]);
    free(m->files);
    free(m);
}

static int cmp_file_path(const void *key, const void *elem)
{
    return strcmp(key, ((const tq_mf_file *)elem)->path);
}

const tq_mf_file *tq_manifest_find(const tq_manifest *m, const char *path)
{
    if (!m->n_files)
        return NULL;
    return bsearch(path, m->files, m->n_files, sizeof *m->files, cmp_file_path);
}
