/* Fuzz target: model.safetensors.index.json handling, through tq_model_open on a scratch
 * model directory. The directory holds a tiny generated model in several shards (made once);
 * each input replaces its index. What opens must agree with the shards: every tensor found
 * by name, in a shard of the directory, readable within its bounds. */
#include "formats/formats.h"
#include "testdata/mkmodel/mkmodel.h"
#include "tests/fuzz/fz_file.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *model_dir(void)
{
    static const char *dir;
    if (!dir) {
        tq_mk_opts o;
        fz_mk_opts(&o, TQ_MK_LLAMA);
        o.layers = 1;
        o.hidden = 64;
        o.intermediate = 64;
        o.heads = 2;
        o.kv_heads = 1;
        o.vocab = 64;
        o.shard_size = 20000; /* five shards and an index */
        dir = fz_mkmodel("model", &o);
    }
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = model_dir();
    fz_write("model/model.safetensors.index.json", data, size);
    tq_err e;
    tq_model *m = NULL;
    if (tq_model_open(&m, dir, &e) != 0) {
        if (m || !e.msg[0])
            abort();
        fz_note(e.msg);
        return 0;
    }
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        if (tq_model_find(m, t->info.name) != t || !t->file || (i && strcmp(m->tensors[i - 1].info.name, t->info.name) >= 0))
            abort();
        unsigned char b[16];
        size_t n = t->info.nbytes < sizeof b ? (size_t)t->info.nbytes : sizeof b;
        if (n && tq_model_read(t, t->info.nbytes - n, b, n, &e) != 0)
            abort();
    }
    tq_model_close(m);
    return 0;
}
