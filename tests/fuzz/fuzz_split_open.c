/* Fuzz target: a split directory as its readers open it, with the input as its split.json
 * and every other file real (a tiny generated MoE model split once): the header and data
 * checks tq-split --join runs (tq_flash_manifest_check_headers, _check_data), the split seen
 * as a model (tq_model_open_split, one read of every tensor's first byte) and the runtime's
 * loader (tq_runner_open: config, store, layer files, expert blocks). A refusal must say
 * why; a split that opens has every tensor inside its file; nothing may crash. */
#include "formats/flash.h"
#include "layout/split/split.h"
#include "runtime/runtime.h"
#include "tests/fuzz/fz_file.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *split_dir(void)
{
    static char *dir;
    if (!dir) {
        tq_mk_opts o;
        fz_mk_small_moe(&o);
        static const char *model; /* kept for the process, as fz_mkmodel says */
        model = fz_mkmodel("model", &o);
        dir = strdup(fz_path("split"));
        tq_split_opts so = {0};
        so.threads = 1;
        so.quiet = 1;
        so.align = TQ_FLASH_MIN_ALIGN;
        tq_split_result res;
        tq_err e;
        if (!dir || tq_split(model, dir, &so, &res, &e) != 0)
            abort();
        /* the corpus seeds start from this split.json: FZ_SPLIT_JSON_OUT=FILE saves it */
        const char *out = getenv("FZ_SPLIT_JSON_OUT");
        char *sj = tq_path_join(dir, "split.json", &e);
        if (out && (!sj || tq_copy_file(sj, out, &e) != 0))
            abort();
        free(sj);
    }
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = split_dir();
    fz_write("split/split.json", data, size);
    tq_err e;
    tq_flash_manifest *man = NULL;
    if (tq_flash_manifest_load(&man, dir, &e) == 0) {
        e.msg[0] = 0;
        int ok = tq_flash_manifest_check_headers(man, dir, &e) == 0 && tq_flash_manifest_check_data(man, dir, 1, 1, &e) == 0;
        if (!ok && !e.msg[0])
            abort();
        tq_flash_manifest_free(man);
    } else if (man || !e.msg[0]) {
        abort();
    }
    tq_model *m = NULL;
    if (tq_model_open_split(&m, dir, TQ_NAMING_SOURCE, &e) == 0) {
        unsigned char b;
        for (size_t i = 0; i < m->n_tensors; i++)
            if (m->tensors[i].info.nbytes && tq_model_read(&m->tensors[i], 0, &b, 1, &e) != 0)
                abort(); /* opened, so every tensor lies inside its file */
        tq_model_close(m);
    } else {
        fz_note(e.msg);
    }
    tq_run_opts ro;
    tq_run_opts_default(&ro);
    ro.threads = 1;
    tq_runner *r = NULL;
    if (tq_runner_open(&r, dir, &ro, &e) == 0)
        tq_runner_close(r);
    else
        fz_note(e.msg);
    return 0;
}
