/* t_read_tensor (declared in check.h): a test's read of one whole tensor. Apart from check.c,
 * which stays free of the library for tests/cli/run-tests-report.sh. */
#include "formats/formats.h"
#include "tests/unit/check.h"

void *t_read_tensor(const tq_model *m, const char *name, uint64_t *nbytes)
{
    tq_err err = {0};
    const tq_model_tensor *t = tq_model_find(m, name);
    if (!t)
        return NULL;
    void *b = malloc(t->info.nbytes ? t->info.nbytes : 1);
    if (b && tq_model_read(t, 0, b, t->info.nbytes, &err)) {
        free(b);
        return NULL;
    }
    if (nbytes)
        *nbytes = t->info.nbytes;
    return b;
}
