/* Fuzz target: a GGUF file opened as a tq_model (names, llama permutation from hostile head
 * counts, config synthesis) and a few bytes read from every tensor. The input is written to
 * a file in the scratch directory since the model layer reads by path. */
#include "formats/formats.h"
#include "tests/fuzz/fz_file.h"

#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s", fz_path("model.gguf"));
    fz_write("model.gguf", data, size);
    for (unsigned flags = 0; flags < 2; flags++) {
        tq_err e;
        tq_model *m = NULL;
        if (tq_model_open_ex(&m, path, flags ? TQ_MODEL_KEEP_NAMES : 0, &e) != 0)
            continue;
        unsigned char buf[4096];
        for (size_t i = 0; i < m->n_tensors; i++) {
            const tq_model_tensor *t = &m->tensors[i];
            uint64_t n = t->info.nbytes;
            size_t len = n < sizeof buf ? (size_t)n : sizeof buf;
            (void)tq_model_read(t, 0, buf, len, &e);
            if (n > 7)
                (void)tq_model_read(t, n - 7, buf, 7, &e); /* unaligned tail */
            if (n > 0)
                (void)tq_model_read(t, n, buf, 1, &e);     /* one past: must fail */
        }
        const char *const *w;
        (void)tq_gguf_model_warnings(m, &w);
        tq_model_close(m);
    }
    return 0;
}
