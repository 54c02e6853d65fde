/* Laying out and printing moe_flash_v1 / flash_aligned_v1 headers. */
#include "formats/flash_internal.h"

#include <stdlib.h>
#include <string.h>

const char *const tq_flash_projs[TQ_FLASH_NPROJ] = {"gate_proj", "up_proj", "gate_up_proj", "down_proj"};
const char *const tq_flash_suffixes[TQ_FLASH_NSUFFIX] = {"weight", "blocks", "scales", "biases", "bias"};

int tq_flash_slot_rank(const char *proj, const char *suffix)
{
    for (int p = 0; p < TQ_FLASH_NPROJ; p++)
        if (strcmp(proj, tq_flash_projs[p]) == 0)
            for (int s = 0; s < TQ_FLASH_NSUFFIX; s++)
                if (strcmp(suffix, tq_flash_suffixes[s]) == 0)
                    return p * TQ_FLASH_NSUFFIX + s;
    return -1;
}

int tq_flash_layout(tq_flash_header *h, tq_err *e)
{
    uint64_t a = h->page_size;
    if (a < TQ_FLASH_MIN_ALIGN || a > TQ_FLASH_MAX_ALIGN || (a & (a - 1)))
        return tq_fail(e, TQ_EUSAGE, "alignment %llu is not a power of two in [%u, %u]",
                       (unsigned long long)a, TQ_FLASH_MIN_ALIGN, TQ_FLASH_MAX_ALIGN);
    uint64_t off = h->kind == TQ_FLASH_MOE ? 0 : a;
    for (size_t i = 0; i < h->n_tensors; i++) {
        tq_flash_tensor *t = &h->tensors[i];
        uint64_t nb = tq_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++)
            if (tq_mul_u64(nb, t->shape[d], &nb) != 0)
                return tq_fail(e, TQ_EDATA, "tensor '%s': size overflows", t->name);
        t->nbytes = nb;
        t->offset = off;
        if (tq_add_u64(off, nb, &off) != 0 || (h->kind == TQ_FLASH_DENSE && tq_align_up(off, a, &off) != 0))
            return tq_fail(e, TQ_EDATA, "tensor '%s': offset overflows", t->name);
    }
    if (h->kind == TQ_FLASH_MOE) {
        if (tq_align_up(off ? off : 1, a, &h->expert_block_size) != 0)
            return tq_fail(e, TQ_EDATA, "expert block size overflows");
        h->data_start = a;
        if (tq_mul_u64(h->num_experts, h->expert_block_size, &h->total_size) != 0 ||
            tq_add_u64(h->total_size, a, &h->total_size) != 0)
            return tq_fail(e, TQ_EDATA, "layer file size overflows");
    } else {
        h->data_start = a;
        h->total_size = off;
    }
    if (h->total_size > (uint64_t)TQ_JSON_MAX_INT)
        return tq_fail(e, TQ_EDATA, "layer file of %llu bytes is too large", (unsigned long long)h->total_size);
    return 0;
}

char *tq_flash_header_json(const tq_flash_header *h, const char *path, tq_err *e)
{
    const int moe = h->kind == TQ_FLASH_MOE;
    cJSON *j = cJSON_CreateObject(), *tensors = NULL, *lay = NULL;
    if (!j)
        goto oom;
    if (!cJSON_AddStringToObject(j, "format", moe ? "moe_flash_v1" : "flash_aligned_v1") ||
        !tq_json_add_u64(j, "page_size", h->page_size) || !tq_json_add_u64(j, "layer_idx", h->layer_idx) ||
        !tq_json_add_u64(j, "total_size", h->total_size))
        goto oom;
    if (moe) {
        if (!(lay = cJSON_AddObjectToObject(j, "layout")) || !tq_json_add_u64(lay, "num_experts", h->num_experts) ||
            !tq_json_add_u64(lay, "expert_block_size", h->expert_block_size) ||
            !tq_json_add_u64(lay, "data_start", h->data_start) || !(tensors = cJSON_AddObjectToObject(lay, "tensors")))
            goto oom;
    } else if (!(tensors = cJSON_AddObjectToObject(j, "tensors"))) {
        goto oom;
    }
    for (size_t i = 0; i < h->n_tensors; i++) {
        const tq_flash_tensor *t = &h->tensors[i];
        cJSON *o = cJSON_AddObjectToObject(tensors, t->name), *shape;
        if (!o || !tq_json_add_u64(o, moe ? "inner_offset" : "offset", t->offset) ||
            !tq_json_add_u64(o, "nbytes", t->nbytes) ||
            !cJSON_AddStringToObject(o, "dtype", tq_flash_dtype_name(t->dtype)) ||
            !(shape = cJSON_AddArrayToObject(o, moe ? "shape_per_expert" : "shape")))
            goto oom;
        for (int d = 0; d < t->ndim; d++) {
            cJSON *n = cJSON_CreateNumber((double)t->shape[d]);
            if (!n || !cJSON_AddItemToArray(shape, n)) {
                cJSON_Delete(n);
                goto oom;
            }
        }
    }
    tq_json_sort(j);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) {
        tq_fail(e, TQ_ENOMEM, "out of memory printing a layer header");
        return NULL;
    }
    size_t n = strlen(s);
    if (n >= h->page_size) {
        tq_fail(e, TQ_EDATA, "%s: header is %zu bytes and does not fit in its %llu-byte page (use a larger --align)",
                path, n + 1, (unsigned long long)h->page_size);
        cJSON_free(s);
        return NULL;
    }
    char *out = tq_strdup(s, e);
    cJSON_free(s);
    return out;
oom:
    cJSON_Delete(j);
    tq_fail(e, TQ_ENOMEM, "out of memory building a layer header");
    return NULL;
}
