/* formats/provenance.c — tq-provenance.json (man tq-formats(5), PROVENANCE): which tq made an
 * output directory, with which command line, from which source (each file's name, size and
 * the SHA-256 of its header; the HuggingFace repo and revision of a cache snapshot). Written
 * into the staging directory like every other output file; no time, host or absolute path. */
#include "formats/formats_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *base_of(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static int add_hex(cJSON *o, const char *key, const unsigned char d[32])
{
    char hex[65];
    tq_hex(d, 32, hex);
    return cJSON_AddStringToObject(o, key, hex) ? 0 : -1;
}

int tq_model_identity_json(cJSON *into, const tq_model *m, tq_err *e)
{
    uint64_t total = 0;
    cJSON *files = cJSON_AddArrayToObject(into, "files");
    if (!files)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->n_files; i++) {
        const tq_st_file *f = m->files[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(files, o)) {
            cJSON_Delete(o);
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        }
        /* The header pins every tensor's name, dtype, shape and offset; with the size it
         * identifies the shard without a second read of the data. */
        unsigned char d[32], len8[8];
        tq_sha256 *h = tq_sha256_new();
        if (!h)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        for (int b = 0; b < 8; b++)
            len8[b] = (unsigned char)(f->header_len >> (8 * b));
        tq_sha256_update(h, len8, 8);
        tq_sha256_update(h, f->header_json, (size_t)f->header_len);
        tq_sha256_final(h, d);
        if (!cJSON_AddStringToObject(o, "name", base_of(f->path)) || !tq_json_add_u64(o, "size", f->file_size) ||
            !tq_json_add_u64(o, "data_bytes", f->file_size - f->data_start) || add_hex(o, "header_sha256", d))
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        total += f->file_size;
    }
    if (m->n_files == 0 && !tq_is_dir(m->path)) {
        /* a non-safetensors source (GGUF): its own file, identified by size and first MiB */
        tq_err ie;
        uint64_t size = 0;
        if (tq_file_size(m->path, &size, &ie) == 0) {
            unsigned char d[32];
            int fd = tq_open_regular(m->path, NULL, &ie);
            size_t n = size < (1u << 20) ? (size_t)size : (1u << 20);
            unsigned char *buf = fd >= 0 ? malloc(n ? n : 1) : NULL;
            int ok = buf && tq_pread_full(fd, buf, n, 0, m->path, &ie) == 0;
            if (ok)
                tq_sha256_buf(buf, n, d);
            free(buf);
            if (fd >= 0)
                close(fd);
            cJSON *o = cJSON_CreateObject();
            if (!o || !cJSON_AddItemToArray(files, o) || !cJSON_AddStringToObject(o, "name", base_of(m->path)) ||
                !tq_json_add_u64(o, "size", size) || (ok && add_hex(o, "first_mib_sha256", d)))
                return tq_fail(e, TQ_ENOMEM, "out of memory");
            total = size;
        }
    }
    return tq_json_add_u64(into, "total_bytes", total) ? 0 : tq_fail(e, TQ_ENOMEM, "out of memory");
}

/* .../models--ORG--NAME/snapshots/REV[/...]: "huggingface": {"repo": "ORG/NAME", "revision":
 * REV} (the cache spells '/' as "--"); nothing when path is not in a cache snapshot. */
static int hf_json(cJSON *into, const char *path, tq_err *e)
{
    const char *snap = NULL;
    for (const char *s = path; (s = strstr(s, "/snapshots/")) != NULL; s++)
        snap = s;
    if (!snap)
        return 0;
    const char *dir = snap;
    while (dir > path && dir[-1] != '/')
        dir--;
    const char *rev = snap + 11;
    size_t rev_len = strcspn(rev, "/");
    if (strncmp(dir, "models--", 8) != 0 || snap - dir <= 8 || rev_len == 0)
        return 0;
    char *id = tq_asprintf(e, "%.*s", (int)(snap - dir - 8), dir + 8);
    char *r = id ? tq_asprintf(e, "%.*s", (int)rev_len, rev) : NULL;
    char *sep = id ? strstr(id, "--") : NULL;
    if (sep) {
        *sep = '/';
        memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
    }
    cJSON *o = r ? cJSON_AddObjectToObject(into, "huggingface") : NULL;
    int ok = o && cJSON_AddStringToObject(o, "repo", id) && cJSON_AddStringToObject(o, "revision", r);
    free(id);
    free(r);
    return ok ? 0 : tq_fail(e, TQ_ENOMEM, "out of memory");
}

cJSON *tq_provenance_json(const tq_provenance *pv, const tq_model *m, tq_err *e)
{
    cJSON *j = cJSON_CreateObject(), *cmd = j ? cJSON_AddArrayToObject(j, "command") : NULL;
    int ok = cmd && cJSON_AddStringToObject(j, "format", "tq_provenance_v1") &&
             cJSON_AddStringToObject(j, "tool", pv->tool) && cJSON_AddStringToObject(j, "version", TQ_VERSION);
    for (size_t i = 0; ok && i < pv->n_command; i++) {
        cJSON *a = cJSON_CreateString(pv->command[i]);
        ok = a && cJSON_AddItemToArray(cmd, a);
        if (!ok)
            cJSON_Delete(a);
    }
    if (!ok) {
        cJSON_Delete(j);
        return tq_fail(e, TQ_ENOMEM, "out of memory building %s", TQ_PROVENANCE_NAME), NULL;
    }
    if (m) {
        cJSON *src = cJSON_AddObjectToObject(j, "source");
        if (!src || tq_model_identity_json(src, m, e) != 0 || hf_json(src, m->path, e) != 0) {
            cJSON_Delete(j);
            return NULL;
        }
    }
    return j;
}

int tq_provenance_write(const char *dir, const tq_provenance *pv, const tq_model *m, tq_err *e)
{
    if (!pv)
        return 0;
    cJSON *j = tq_provenance_json(pv, m, e);
    char *path = j ? tq_path_join(dir, TQ_PROVENANCE_NAME, e) : NULL;
    int rc = path ? tq_json_write_file(path, j, e) : -1;
    free(path);
    cJSON_Delete(j);
    return rc;
}

int tq_provenance_plan(const tq_provenance *pv, const tq_model *m, tq_out_plan *files, tq_err *e)
{
    if (!pv)
        return 0;
    cJSON *j = tq_provenance_json(pv, m, e);
    int rc = j ? tq_out_plan_add_json(files, TQ_PROVENANCE_NAME, j, e) : -1;
    cJSON_Delete(j);
    return rc;
}

/* A safetensors file's __metadata__ tq_provenance (tq-rowlayout's row files), parsed: 1 when
 * path is a safetensors file (*j set, or -1 on an error), 0 when it is not one. */
static int read_from_safetensors(const char *path, cJSON **j, tq_err *e)
{
    tq_err ignored;
    uint64_t size = 0;
    int fd = tq_open_regular(path, &size, &ignored);
    int is_st = fd >= 0 && tq_sniff_fd(fd, size) == TQ_CONTENT_SAFETENSORS;
    if (fd >= 0)
        close(fd);
    if (!is_st)
        return 0;
    tq_st_file *f;
    if (tq_st_open(&f, path, e) != 0)
        return -1;
    const char *text = tq_st_meta(f, TQ_PROVENANCE_META);
    int rc = 1;
    if (!text)
        rc = tq_fail(e, TQ_EDATA, "%s: a safetensors file without __metadata__ %s (tq-rowlayout's row files carry "
                     "it; model files and older row files have none)", path, TQ_PROVENANCE_META);
    else if (strlen(text) > (1u << 20))
        rc = tq_fail(e, TQ_EDATA, "%s: __metadata__ %s is larger than 1 MiB", path, TQ_PROVENANCE_META);
    else if (!(*j = tq_json_parse(text, strlen(text), NULL, NULL)))
        rc = tq_fail(e, TQ_EDATA, "%s: __metadata__ %s is not valid JSON", path, TQ_PROVENANCE_META);
    tq_st_close(f);
    return rc;
}

/* Reading: the keys every tq_provenance_v1 document has, with their types. */
int tq_provenance_read(const char *dir, cJSON **out, tq_err *e)
{
    *out = NULL;
    char *path = tq_is_dir(dir) ? tq_path_join(dir, TQ_PROVENANCE_NAME, e) : tq_strdup(dir, e);
    if (!path)
        return -1;
    if (!tq_exists(dir)) {
        tq_fail(e, TQ_EDATA, "%s: no such file or directory (expected an output directory of tq, or a row file "
                "of tq-rowlayout)", dir);
        free(path);
        return -1;
    }
    if (!tq_exists(path)) {
        tq_fail(e, TQ_EDATA, "%s: no %s (outputs of tq 0.1.0 made before it existed, and directories tq did not "
                "make, have none)", dir, TQ_PROVENANCE_NAME);
        free(path);
        return -1;
    }
    cJSON *j = NULL;
    int rc = tq_is_dir(dir) ? 0 : read_from_safetensors(path, &j, e);
    if (rc < 0) {
        free(path);
        return -1;
    }
    if (rc == 1) { /* messages name the metadata entry */
        char *where = tq_asprintf(e, "%s: __metadata__ %s", path, TQ_PROVENANCE_META);
        free(path);
        if (!(path = where)) {
            cJSON_Delete(j);
            return -1;
        }
        rc = 0;
    } else
        rc = tq_json_read_file(path, 1u << 20, &j, e);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format"), *cmd = cJSON_GetObjectItemCaseSensitive(j, "command");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(j, "source"), *c;
    if (rc == 0 && (!cJSON_IsObject(j) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "tq_provenance_v1") != 0))
        rc = tq_fail(e, TQ_EDATA, "%s: not a tq_provenance_v1 document (\"format\" must be \"tq_provenance_v1\")", path);
    if (rc == 0 && (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "tool")) ||
                    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "version"))))
        rc = tq_fail(e, TQ_EDATA, "%s: \"tool\" and \"version\" must be strings", path);
    if (rc == 0 && (!cJSON_IsArray(cmd) || !cJSON_GetArraySize(cmd)))
        rc = tq_fail(e, TQ_EDATA, "%s: \"command\" must be a non-empty array of strings", path);
    for (c = rc == 0 ? cmd->child : NULL; c && rc == 0; c = c->next)
        if (!cJSON_IsString(c))
            rc = tq_fail(e, TQ_EDATA, "%s: \"command\" must be a non-empty array of strings", path);
    if (rc == 0 && src && (!cJSON_IsObject(src) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(src, "files"))))
        rc = tq_fail(e, TQ_EDATA, "%s: \"source\" must be an object with a \"files\" array", path);
    for (c = rc == 0 && src ? cJSON_GetObjectItemCaseSensitive(src, "files")->child : NULL; c && rc == 0; c = c->next) {
        uint64_t v;
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "name")) ||
            tq_json_u64(cJSON_GetObjectItemCaseSensitive(c, "size"), &v) != 0)
            rc = tq_fail(e, TQ_EDATA, "%s: every source file needs a \"name\" string and an integer \"size\"", path);
    }
    free(path);
    if (rc != 0) {
        cJSON_Delete(j);
        return -1;
    }
    *out = j;
    return 0;
}
