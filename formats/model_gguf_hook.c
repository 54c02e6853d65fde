/* The one place where GGUF input enters tq_model_open. The GGUF reader replaces this file. */
#include "formats/formats.h"

int tq_model_open_gguf(tq_model *m, const char *path, tq_err *e)
{
    (void)m;
    return tq_fail(e, TQ_EUNSUP, "%s: GGUF input not supported yet", path);
}
