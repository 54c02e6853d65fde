/* tq_split_join: write a split directory back out as an ordinary model directory. With the
 * source's naming and sharding (recorded in split.json) a model written by tq comes back
 * byte for byte. */
#include "layout/split/split_internal.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK (4u << 20)

typedef struct join_job {
    const tq_model *m;
    tq_model_writer *w;
} join_job;

static int join_tensor(tq_work *q, void *ctx, int worker, uint64_t i, tq_err *e)
{
    join_job *j = ctx;
    unsigned char *buf = tq_work_scratch(q, worker, CHUNK, e);
    if (!buf)
        return -1;
    const tq_model_tensor *t = &j->m->tensors[i];
    long wi = tq_model_writer_index(j->w, t->info.name);
    if (wi < 0)
        return tq_fail(e, TQ_EDATA, "join: tensor '%s' was not declared", t->info.name);
    for (uint64_t off = 0; off < t->info.nbytes;) {
        size_t len = t->info.nbytes - off < CHUNK ? (size_t)(t->info.nbytes - off) : CHUNK;
        if (tq_model_read(t, off, buf, len, e) != 0 || tq_model_writer_write(j->w, (size_t)wi, off, buf, len, e) != 0)
            return -1;
        off += len;
        tq_work_progress(q, len);
    }
    return 0;
}

/* The largest source shard's data size reproduces the source's greedy name-order sharding:
 * every shard closed because the next tensor did not fit under the original limit, which is
 * at least that size, and never did before it. */
static uint64_t source_shard_size(const tq_flash_manifest *man)
{
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(man->json, "source");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(src, "files");
    uint64_t best = 0, v;
    const cJSON *f;
    cJSON_ArrayForEach(f, files)
    {
        if (tq_json_u64(cJSON_GetObjectItemCaseSensitive(f, "data_bytes"), &v) == 0 && v > best)
            best = v;
    }
    return best;
}

int tq_split_join(const char *split_dir, const char *out_dir, const tq_split_join_opts *o, tq_err *e)
{
    tq_model *m = NULL;
    tq_flash_manifest *man = NULL;
    tq_model_writer *w = NULL;
    tq_st_decl *decls = NULL;
    tq_adir out = {0};
    tq_sources src = {0};
    char *cfg = NULL;
    int rc = -1;
    if (tq_out_dir_check(out_dir, split_dir, o->force, e) != 0 || tq_sources_add(&src, split_dir, e) != 0 ||
        tq_model_open_split(&m, split_dir, o->naming, e) != 0 || tq_flash_manifest_load(&man, split_dir, e) != 0)
        goto out;
    /* what is joined is what was split: headers alone (checked on open) do not cover the data */
    if (!o->no_verify && tq_flash_manifest_check_data(man, split_dir, o->threads, o->quiet, e) != 0)
        goto out;
    if (!(decls = tq_calloc(m->n_tensors ? m->n_tensors : 1, sizeof *decls, e)))
        goto out;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_tensor_info *t = &m->tensors[i].info;
        decls[i].name = t->name;
        decls[i].dtype = t->dtype;
        decls[i].ndim = t->ndim;
        memcpy(decls[i].shape, t->shape, sizeof t->shape);
    }
    if (tq_adir_open(&out, out_dir, o->force ? TQ_ADIR_REPLACE : 0, e) != 0)
        goto out;
    const char *stage = out.tmp_path;
    const tq_st_file *pin = m->files[0];
    uint64_t shard = o->shard_size ? o->shard_size : source_shard_size(man);
    if (tq_model_writer_open(&w, stage, decls, m->n_tensors, shard, (const char *const *)pin->meta_keys,
                             (const char *const *)pin->meta_vals, pin->n_meta, e) != 0)
        goto out;
    uint64_t total = 0;
    for (size_t i = 0; i < m->n_tensors; i++)
        total += m->tensors[i].info.nbytes;
    tq_progress prog;
    tq_progress_init(&prog, "join", total, o->quiet);
    int n = o->threads > 0 ? o->threads : tq_default_threads();
    join_job j = {.m = m, .w = w};
    if (tq_work_run(m->n_tensors, n, join_tensor, &j, &prog, e) != 0)
        goto out;
    rc = tq_model_writer_finish(w, e);
    w = NULL;
    if (rc != 0)
        goto out;
    rc = -1;
    tq_progress_end(&prog);
    if (m->config && (!(cfg = tq_path_join(stage, "config.json", e)) || tq_json_write_file(cfg, m->config, e) != 0))
        goto out;
    if (tq_model_copy_extras(m, stage, e) != 0 || tq_provenance_write(stage, o->provenance, m, e) != 0 ||
        tq_sources_check_adir(&src, &out, e) != 0 ||
        tq_adir_commit(&out, e) != 0)
        goto out;
    rc = 0;
out:
    if (w)
        tq_model_writer_abort(w);
    if (out.tmp_path)
        tq_adir_abort(&out);
    free(cfg);
    free(decls);
    tq_flash_manifest_free(man);
    tq_model_close(m);
    tq_sources_free(&src);
    return rc;
}
