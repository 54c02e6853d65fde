/* Fuzz target: moe_flash_v1 / flash_aligned_v1 header parsing on arbitrary bytes (the input
 * is the start of a layer file; its size is taken as the file size), then a header that
 * parsed is printed again and must parse back to the same layout. */
#include "formats/flash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e;
    tq_flash_header h;
    /* half the inputs are checked against their own size, half against total_size only */
    uint64_t fsize = size && (data[size - 1] & 1) ? (uint64_t)size : UINT64_MAX;
    if (tq_flash_parse(&h, data, size, fsize, "fuzz.bin", &e) != 0)
        return 0;
    for (size_t i = 0; i < h.n_tensors; i++) {
        const tq_flash_tensor *t = &h.tensors[i];
        uint64_t lim = h.kind == TQ_FLASH_MOE ? h.expert_block_size : h.total_size;
        if (t->offset + t->nbytes > lim || t->offset + t->nbytes < t->offset)
            abort();
        if (tq_flash_find(&h, t->name) == NULL)
            abort();
    }
    if (h.kind == TQ_FLASH_MOE) {
        uint64_t off, len;
        if (tq_flash_expert_range(&h, h.num_experts - 1, &off, &len, &e) != 0 || off + len != h.total_size)
            abort();
    }
    char *js = tq_flash_header_json(&h, "fuzz.bin", &e);
    if (js) {
        size_t n = strlen(js);
        char *page = calloc(1, (size_t)h.page_size);
        if (page) {
            memcpy(page, js, n);
            tq_flash_header g;
            if (tq_flash_parse(&g, page, (size_t)h.page_size, UINT64_MAX, "again.bin", &e) != 0 ||
                g.n_tensors != h.n_tensors || g.total_size != h.total_size)
                abort();
            for (size_t i = 0; i < g.n_tensors; i++)
                if (g.tensors[i].offset != h.tensors[i].offset || g.tensors[i].nbytes != h.tensors[i].nbytes ||
                    g.tensors[i].dtype != h.tensors[i].dtype)
                    abort();
            tq_flash_header_free(&g);
            free(page);
        }
        free(js);
    }
    tq_flash_header_free(&h);
    return 0;
}
