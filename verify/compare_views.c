/* What tq-verify compare can open: model directories and safetensors files (formats), and
 * split directories seen as the model they came from (the layout code's join view). */
#include "verify/verify_internal.h"
#include "formats/formats.h"
#include "layout/layout.h"

#include <stdio.h>

int tq_verify_open_view(const char *path, const char *other, tq_model **out, tq_err *e)
{
    (void)other;
    char p[4096];
    snprintf(p, sizeof p, "%s/split.json", path);
    if (tq_is_dir(path) && tq_exists(p))
        return tq_split_open_model(out, path, TQ_NAMING_SOURCE, e);
    return tq_model_open(out, path, e);
}
