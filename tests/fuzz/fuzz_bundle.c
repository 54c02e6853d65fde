/* Fuzz target: bundle reading on arbitrary bytes (the input is the .tar.zst file; plain tar
 * is read too): tq_check_bundle, then tq_bundle_unpack into a scratch directory. Both must
 * agree (a clean check <=> an unpack), and what unpacks must check clean as a directory.
 * (Supersedes the first bundle target, which ran tq_check_bundle alone.) */
#include "verify/verify.h"
#include "tests/fuzz/fz_file.h"

#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("in.tar.zst", data, size);
    char bundle[512], out[512];
    snprintf(bundle, sizeof bundle, "%s", fz_path("in.tar.zst"));
    snprintf(out, sizeof out, "%s", fz_path("out"));
    tq_err e;
    tq_check_report r;
    int checked = tq_check_bundle(bundle, &r, &e) == 0;
    if (checked && r.files_ok > r.files_listed)
        abort();
    int clean = checked && r.n == 0;
    tq_check_report_free(&r);
    int rc = tq_bundle_unpack(bundle, out, 0, &r, &e);
    if (rc != 0)
        fz_note(e.msg);
    tq_check_report_free(&r);
    if ((rc == 0) != clean)
        abort();
    if (rc == 0) {
        if (tq_check_dir(out, 1, &r, &e) != 0 || r.n != 0)
            abort();
        tq_check_report_free(&r);
        tq_rm_tree(out);
    } else if (access(out, F_OK) == 0) {
        abort(); /* a failed unpack leaves nothing under the final name */
    }
    return 0;
}
