/* common/copy_file.c — tq_copy_file: a file copied byte for byte through an atomic output.
 * Kept apart from file_io.c so that the plain file helpers never call the atomic-output
 * code, which itself builds on them (one direction: copy_file -> atomic_file -> file_io). */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tq_copy_file(const char *src, const char *dst, tq_err *e)
{
    int in = tq_open_regular(src, NULL, e);
    if (in < 0)
        return -1;
    tq_afile out;
    if (tq_afile_open(&out, dst, 0, e) != 0) {
        close(in);
        return -1;
    }
    size_t cap = 1 << 20;
    char *buf = tq_malloc(cap, e);
    int rc = buf ? 0 : -1;
    while (rc == 0) {
        ssize_t n = read(in, buf, cap);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = tq_fail(e, TQ_EIO, "%s: read error: %s", src, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        rc = tq_write_full(out.fd, buf, (size_t)n, out.tmp_path, e);
    }
    free(buf);
    close(in);
    if (rc == 0)
        return tq_afile_commit(&out, e);
    tq_afile_abort(&out);
    return -1;
}
