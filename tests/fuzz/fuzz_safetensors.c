/* Fuzz target: the safetensors header rules on arbitrary bytes (the whole input is the file).
 * Whatever the parse accepts must tile the data buffer exactly. */
#include "formats/formats.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | data[i];
    if (n > TQ_ST_MAX_HEADER || n > size - 8)
        return 0;
    tq_st_file f;
    memset(&f, 0, sizeof f);
    f.fd = -1;
    f.path = (char *)"fuzz.safetensors";
    tq_err e;
    if (tq_st_parse_header(&f, (const char *)data + 8, (size_t)n, size, &e) != 0)
        return 0;
    uint64_t total = 0;
    for (size_t i = 0; i < f.n_tensors; i++) {
        const tq_tensor_info *t = &f.tensors[i];
        if (t->offset < f.data_start || t->offset + t->nbytes > size || tq_st_find(&f, t->name) != t)
            abort();
        if (i > 0 && strcmp(f.tensors[i - 1].name, t->name) >= 0)
            abort();
        total += t->nbytes;
    }
    if (total != size - f.data_start)
        abort();
    for (size_t i = 0; i < f.n_meta; i++)
        if (tq_st_meta(&f, f.meta_keys[i]) != f.meta_vals[i])
            abort();
    tq_st_free_header(&f);
    return 0;
}
