/* Fuzz target: SHA256SUMS parsing on arbitrary bytes (the whole input is the file). Whatever
 * parses must be sorted, unique and safe, and printing it again in the coreutils format must
 * parse back to the same entries. */
#include "verify/verify.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e;
    tq_sum_entry *v = NULL;
    size_t n = 0;
    if (tq_sums_parse((const char *)data, size, "fuzz/SHA256SUMS", &v, &n, &e) != 0) {
        if (v || n || !e.msg[0])
            abort();
        return 0;
    }
    size_t cap = 1, len = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tq_verify_path_ok(v[i].path) || (i > 0 && strcmp(v[i - 1].path, v[i].path) >= 0))
            abort();
        cap += 67 + strlen(v[i].path);
    }
    char *text = malloc(cap);
    if (!text)
        abort();
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 32; k++)
            len += (size_t)sprintf(text + len, "%02x", v[i].sha256[k]);
        len += (size_t)sprintf(text + len, "  %s\n", v[i].path);
    }
    tq_sum_entry *w = NULL;
    size_t m = 0;
    if (tq_sums_parse(text, len, "again", &w, &m, &e) != 0 || m != n)
        abort();
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].path, w[i].path) || memcmp(v[i].sha256, w[i].sha256, 32))
            abort();
    tq_sums_free(w, m);
    tq_sums_free(v, n);
    free(text);
    return 0;
}
