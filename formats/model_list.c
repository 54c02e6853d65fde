/* What tq-verify ls prints, and the end-to-end read behind ls --read. */
#include "common/platform.h"
#include "formats/formats_internal.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static int list_text(const tq_model *m, FILE *out)
{
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        tq_fput_escaped(out, t->info.name);
        fprintf(out, "\t%s\t[", tq_dtype_name(t->info.dtype));
        for (int k = 0; k < t->info.ndim; k++)
            fprintf(out, "%s%llu", k ? "," : "", (unsigned long long)t->info.shape[k]);
        fputs("]\t", out);
        tq_fput_escaped(out, tq_model_tensor_file(m, t));
        fprintf(out, "\t%llu\t%llu\n", (unsigned long long)t->info.offset,
                (unsigned long long)t->info.nbytes);
    }
    return 0;
}

static int list_json(const tq_model *m, FILE *out, tq_err *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *files = root ? cJSON_AddArrayToObject(root, "files") : NULL;
    cJSON *tensors = files ? cJSON_AddArrayToObject(root, "tensors") : NULL;
    int ok = tensors && cJSON_AddStringToObject(root, "path", m->path);
    uint64_t total = 0;
    for (size_t i = 0; ok && i < m->n_files; i++) {
        const char *s = strrchr(m->files[i]->path, '/');
        ok = cJSON_AddItemToArray(files, cJSON_CreateString(s ? s + 1 : m->files[i]->path));
    }
    for (size_t i = 0; ok && i < m->n_tensors; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *shape = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        ok = shape && cJSON_AddItemToArray(tensors, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        for (int k = 0; ok && k < t->info.ndim; k++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->info.shape[k]));
        ok = ok && cJSON_AddStringToObject(o, "name", t->info.name) && cJSON_AddStringToObject(o, "dtype", tq_dtype_name(t->info.dtype)) &&
             cJSON_AddStringToObject(o, "file", tq_model_tensor_file(m, t)) &&
             cJSON_AddNumberToObject(o, "offset", (double)t->info.offset) &&
             cJSON_AddNumberToObject(o, "nbytes", (double)t->info.nbytes);
        total += t->info.nbytes;
    }
    ok = ok && cJSON_AddNumberToObject(root, "n_tensors", (double)m->n_tensors) &&
         cJSON_AddNumberToObject(root, "total_bytes", (double)total);
    if (!ok) {
        cJSON_Delete(root);
        return tq_fail(e, TQ_ENOMEM, "out of memory listing %s", m->path);
    }
    char *s = tq_json_print(root, e);
    cJSON_Delete(root);
    if (!s)
        return -1;
    fputs(s, out);
    free(s);
    return 0;
}

int tq_model_list(const tq_model *m, FILE *out, int json, tq_err *e)
{
    int rc = json ? list_json(m, out, e) : list_text(m, out);
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        return tq_fail(e, TQ_EIO, "error writing the listing");
    return rc;
}

#ifndef PREFETCH
#define PREFETCH 4
#endif

int tq_model_read_all(const tq_model *m, size_t chunk, uint64_t *bytes, tq_err *e)
{
    *bytes = 0;
    if (chunk == 0)
        chunk = 8u << 20;
    char *buf = tq_malloc(chunk, e);
    if (!buf)
        return -1;
    int rc = 0;
    tq_progress prog;
    uint64_t total = 0;
    for (size_t i = 0; i < m->n_files; i++)
        total += m->files[i]->file_size - m->files[i]->data_start;
    for (size_t i = 0; i < m->n_tensors; i++)
        total += m->tensors[i].file ? 0 : m->tensors[i].info.nbytes;
    tq_progress_init(&prog, "read", total, 0);
    /* safetensors shards: tensors are validated to tile [data_start, file_size) exactly, so
     * one sequential pass over that range reads every tensor's bytes in large requests */
    for (size_t i = 0; rc == 0 && i < m->n_files; i++) {
        const tq_st_file *f = m->files[i];
        tq_plat_advise(f->fd, f->data_start, 0, TQ_ADV_SEQUENTIAL);
        uint64_t ahead = f->data_start; /* bytes up to here have been asked for */
        for (uint64_t pos = f->data_start; rc == 0 && pos < f->file_size;) {
            size_t n = f->file_size - pos < chunk ? (size_t)(f->file_size - pos) : chunk;
            /* keep PREFETCH chunks of asynchronous readahead in flight beyond this read,
             * so the disk never waits for the copy (cat gets this from small reads) */
            while (ahead < f->file_size && ahead < pos + (uint64_t)(PREFETCH + 1) * chunk) {
                tq_plat_advise(f->fd, ahead, chunk, TQ_ADV_WILLNEED);
                ahead += chunk;
            }
            rc = tq_pread_full(f->fd, buf, n, pos, f->path, e);
            pos += n;
            *bytes += n;
            tq_progress_add(&prog, n);
        }
    }
    for (size_t i = 0; rc == 0 && i < m->n_tensors; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        if (t->file)
            continue;
        for (uint64_t pos = 0; rc == 0 && pos < t->info.nbytes;) {
            size_t n = t->info.nbytes - pos < chunk ? (size_t)(t->info.nbytes - pos) : chunk;
            rc = tq_model_read(t, pos, buf, n, e);
            pos += n;
            *bytes += n;
            tq_progress_add(&prog, n);
        }
    }
    tq_progress_end(&prog);
    free(buf);
    return rc;
}
