/* Fuzz target: split.json (tq_split_v1) loading on arbitrary bytes, through
 * tq_flash_manifest_load on a scratch directory. What loads must be self-consistent: layers
 * 0..N-1, files sorted and findable (a recorded header within its file), every (layer,
 * expert) block where the lookup says. */
#include "formats/flash.h"
#include "tests/fuzz/fz_file.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("split.json", data, size);
    tq_err e;
    tq_flash_manifest *m = NULL;
    if (tq_flash_manifest_load(&m, fz_dir(), &e) != 0) {
        if (m || !e.msg[0])
            abort();
        fz_note(e.msg);
        return 0;
    }
    if (m->n_layers == 0)
        abort();
    for (size_t i = 0; i < m->n_layers; i++)
        if ((i && m->layers[i].layer <= m->layers[i - 1].layer) ||
            (m->kind == TQ_FLASH_DENSE && m->layers[i].layer != i) || !m->layers[i].file || !m->layers[i].prefix)
            abort();
    for (size_t i = 0; i < m->n_files; i++)
        if (tq_flash_manifest_file(m, m->files[i].name) != &m->files[i] ||
            (i && strcmp(m->files[i - 1].name, m->files[i].name) >= 0) || m->files[i].header_bytes > m->files[i].size)
            abort();
    if (m->kind == TQ_FLASH_MOE) {
        if (m->n_blocks != m->n_layers * m->num_experts)
            abort();
        for (size_t i = 0; i < m->n_layers; i++)
            for (uint64_t x = 0; x < m->num_experts; x++) {
                const tq_flash_block *b = tq_flash_manifest_block(m, m->layers[i].layer, x);
                if (!b || b->layer != m->layers[i].layer || b->expert != x || b->length == 0 || b->offset + b->length < b->offset)
                    abort();
            }
        if ((m->layers[m->n_layers - 1].layer < UINT32_MAX &&
             tq_flash_manifest_block(m, m->layers[m->n_layers - 1].layer + 1, 0)) ||
            tq_flash_manifest_block(m, 0, m->num_experts))
            abort();
    } else if (m->n_blocks || tq_flash_manifest_block(m, 0, 0)) {
        abort();
    }
    tq_flash_manifest_free(m);
    return 0;
}
