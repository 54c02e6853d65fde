/* split.json: what a split directory holds (every file and expert block with its SHA-256),
 * where it came from, and what tq_split_join needs to rebuild the source names. */
#include "layout/split/split_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#define SPLIT_JSON_MAX (256u << 20)

static cJSON *add_hex(cJSON *o, const char *key, const unsigned char d[32])
{
    char hex[65];
    tq_hex(d, 32, hex);
    return cJSON_AddStringToObject(o, key, hex);
}

static int source_json(cJSON *src, const split_plan *p, const char *label)
{
    tq_err e;
    return cJSON_AddStringToObject(src, "path", label) && tq_model_identity_json(src, p->m, &e) == 0 ? 0 : -1;
}

cJSON *split_manifest_json(const split_plan *p, const char *label, const tq_flash_file *files,
                           size_t n_files, tq_err *e)
{
    const int moe = p->kind == TQ_FLASH_MOE;
    cJSON *j = cJSON_CreateObject(), *a;
    if (!j)
        goto oom;
    if (!cJSON_AddStringToObject(j, "format", "tq_split_v1") || !cJSON_AddStringToObject(j, "tool", "tq-split " TQ_VERSION) ||
        !cJSON_AddStringToObject(j, "kind", moe ? "moe" : "dense") || !tq_json_add_u64(j, "align", p->align) ||
        (p->target != TQ_TARGET_TQ && !cJSON_AddStringToObject(j, "target", tq_split_target_name(p->target))))
        goto oom;
    if (moe && (!tq_json_add_u64(j, "num_experts", p->num_experts) || !tq_json_add_u64(j, "experts_per_tok", p->top_k)))
        goto oom;
    cJSON *src = cJSON_AddObjectToObject(j, "source");
    if (!src || source_json(src, p, label) != 0)
        goto oom;
    cJSON *fo = cJSON_AddObjectToObject(j, "files");
    if (!fo)
        goto oom;
    for (size_t i = 0; i < n_files; i++) {
        cJSON *o = cJSON_AddObjectToObject(fo, files[i].name);
        if (!o || !tq_json_add_u64(o, "size", files[i].size) || !add_hex(o, "sha256", files[i].sha256))
            goto oom;
        if (files[i].header_bytes && (!tq_json_add_u64(o, "header_bytes", files[i].header_bytes) ||
                                      !add_hex(o, "header_sha256", files[i].header_sha256)))
            goto oom;
    }
    if (!(a = cJSON_AddArrayToObject(j, "layers")))
        goto oom;
    for (size_t i = 0; i < p->n_layers; i++) {
        const split_layer *L = &p->layers[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o) || !tq_json_add_u64(o, "layer", L->layer) ||
            !cJSON_AddStringToObject(o, "file", L->file) || !cJSON_AddStringToObject(o, "prefix", L->prefix) ||
            !cJSON_AddStringToObject(o, "naming", L->naming == TQ_NAMING_MLX     ? "mlx"
                                                 : L->naming == TQ_NAMING_FUSED  ? "fused"
                                                 : L->naming == TQ_NAMING_FUSED_XW ? "fused_xw"
                                                                                   : "hf"))
            goto oom;
    }
    if (moe) {
        if (!(a = cJSON_AddArrayToObject(j, "expert_blocks")))
            goto oom;
        for (size_t i = 0; i < p->n_layers; i++) {
            const split_layer *L = &p->layers[i];
            for (uint64_t x = 0; x < L->hdr.num_experts; x++) {
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(a, o) || !tq_json_add_u64(o, "layer", L->layer) ||
                    !tq_json_add_u64(o, "expert", x) ||
                    !tq_json_add_u64(o, "offset", L->hdr.data_start + x * L->hdr.expert_block_size) ||
                    !tq_json_add_u64(o, "length", L->hdr.expert_block_size) || !add_hex(o, "sha256", L->block_sha[x]))
                    goto oom;
            }
        }
    }
    return j;
oom:
    cJSON_Delete(j);
    tq_fail(e, TQ_ENOMEM, "out of memory building split.json");
    return NULL;
}

/* The header of pinned.safetensors (8 + N bytes) and of every layer file (the header page
 * before its data), read back from the stage as written, so that readers can refuse a header
 * changed later without hashing whole files (man tq-formats(5), split.json). */
int split_header_hashes(split_run *r, tq_err *e)
{
    for (size_t i = 0; i < r->n_files; i++) {
        tq_flash_file *f = &r->files[i];
        uint64_t n = 0;
        char *p = tq_path_join(r->stage, f->name, e);
        if (!p)
            return -1;
        if (!strcmp(f->name, "pinned.safetensors")) {
            unsigned char len8[8];
            int fd = tq_open_regular(p, NULL, e);
            int ok = fd >= 0 && tq_pread_full(fd, len8, 8, 0, p, e) == 0;
            if (fd >= 0)
                close(fd);
            if (!ok) {
                free(p);
                return -1;
            }
            for (int b = 7; b >= 0; b--)
                n = n << 8 | len8[b];
            n += 8;
        }
        for (size_t l = 0; l < r->plan.n_layers && !n; l++)
            if (!strcmp(f->name, r->plan.layers[l].file))
                n = r->plan.layers[l].hdr.data_start;
        int rc = n ? tq_flash_hash_head(p, n, f->header_sha256, e) : 0;
        free(p);
        if (rc != 0)
            return -1;
        f->header_bytes = n;
    }
    return 0;
}
