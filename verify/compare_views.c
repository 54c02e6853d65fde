/* What tq-verify compare can open: model directories and safetensors files (formats). */
#include "verify/verify_internal.h"
#include "formats/formats.h"

int tq_verify_open_view(const char *path, const char *other, tq_model **out, tq_err *e)
{
    (void)other;
    return tq_model_open(out, path, e);
}
