/* Output files of tq-rowlayout: the one rule of every output file (tq_out_file_check; the source
 * under another name is a path conflict), the space reserved up front; publishing is common/'s
 * tq_afile_commit. */
#include "common/platform.h"
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

int rows_out_refuse(const char *out, const char *source, int force, tq_err *e)
{
    if (source && tq_check_out_in(out, source, e) != 0)
        return -1;
    return tq_out_file_check(out, force, e);
}

int rows_out_reserve(tq_afile *f, uint64_t size, tq_err *e)
{
    /* Fail early on a full disk or a file-size limit; filesystems without fallocate just
     * get the bytes as they are written. */
    if (tq_plat_reserve(f->fd, size) != 0)
        return tq_fail(e, TQ_EIO, "%s: cannot reserve %llu bytes: %s", f->final_path, (unsigned long long)size,
                       strerror(errno));
    return 0;
}
