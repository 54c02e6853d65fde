/* Fuzz target: a GGUF file opened as a tq_model (names, llama permutation from hostile head
 * counts, config synthesis) and a few bytes read from every tensor. The input is written to
 * a temporary file since the model layer reads by path. */
#include "formats/formats.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz-gguf-model-%ld.gguf", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    if (fwrite(data, 1, size, f) != size) {
        fclose(f);
        remove(path);
        return 0;
    }
    fclose(f);
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
    remove(path);
    return 0;
}
