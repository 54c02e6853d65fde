/* --check-blocks: expected SHA-256 of every streamed expert block, from split.json. */
#include "runtime/rt_internal.h"
#include "formats/flash.h"

#include <string.h>

int rt_load_block_hashes(tq_runner *r, tq_err *e)
{
    tq_flash_manifest *m = NULL;
    if (tq_flash_manifest_load(&m, r->dir, e) != 0)
        return tq_err_prefix(e, "--check-blocks");
    int rc = -1;
    for (uint64_t l = 0; l < r->c.layers; l++) {
        rt_layer *L = &r->L[l];
        if (!L->streamed)
            continue;
        L->src.sha = tq_calloc(r->c.experts, 32, e);
        if (!L->src.sha)
            goto out;
        for (uint64_t x = 0; x < r->c.experts; x++) {
            const tq_flash_block *b = tq_flash_manifest_block(m, (uint32_t)l, x);
            if (!b || b->length != L->src.block_size || b->offset != L->src.data_start + x * L->src.block_size) {
                tq_fail(e, TQ_EDATA, "%s/split.json: no block matching layer %llu expert %llu of %s", r->dir,
                        (unsigned long long)l, (unsigned long long)x, L->src.path);
                goto out;
            }
            memcpy(L->src.sha[x], b->sha256, 32);
        }
        L->src.have_sha = 1;
    }
    rc = 0;
out:
    tq_flash_manifest_free(m);
    return rc;
}
