/* Fuzz target: the GGUF header parser on arbitrary bytes (the whole input is the file). */
#include "formats/formats.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e;
    tq_gguf_file *f = NULL;
    if (tq_gguf_parse(&f, "fuzz.gguf", data, size, size, &e) != 0)
        return 0;
    /* Touch everything the parse promised is in bounds. */
    uint64_t u;
    double d;
    for (size_t i = 0; i < f->n_kv; i++) {
        const tq_gguf_kv *kv = &f->kv[i];
        if (kv->type == TQ_GGUF_STRING)
            free(tq_gguf_get_str(f, kv->key));
        (void)tq_gguf_get_u64(f, kv->key, &u);
        (void)tq_gguf_get_f64(f, kv->key, &d);
    }
    for (size_t i = 0; i < f->n_tensors; i++) {
        const tq_gguf_tensor *t = &f->tensors[i];
        if (t->offset + t->nbytes > f->file_size - f->data_start)
            abort();
    }
    tq_gguf_close(f);
    return 0;
}
