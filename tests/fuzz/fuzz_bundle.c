/* Fuzz target: tq-verify check on an arbitrary bundle file (written to a temporary file,
 * since bundles are read by path). Must return an error or a report, never crash. */
#include "verify/verify.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/tq-fuzz-bundle-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    tq_err e;
    if (tq_write_full(fd, data, size, path, &e) == 0) {
        tq_check_report r;
        if (tq_check_bundle(path, &r, &e) == 0 && r.files_ok > r.files_listed)
            abort();
        tq_check_report_free(&r);
    }
    close(fd);
    unlink(path);
    return 0;
}
