/* Fuzz target: config.json handling, each input as the config.json of a tiny generated MoE
 * model directory (made once): the runtime's reader (rt_config_load and the per-layer and
 * per-module lookups it feeds), tq_model_open's check of the document, and the split
 * planner's reading of expert counts (tq_split_plan). fuzz_family puts the input into a model
 * of the family it names instead. */
#include "tests/fuzz/fz_config.h"
#include "tests/fuzz/fz_file.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *model_dir(void)
{
    static const char *dir;
    if (!dir) {
        tq_mk_opts o;
        fz_mk_small_moe(&o);
        dir = fz_mkmodel("model", &o);
    }
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = model_dir();
    fz_write("model/config.json", data, size);
    fz_config_runtime(dir);
    fz_config_model(dir);
    return 0;
}
