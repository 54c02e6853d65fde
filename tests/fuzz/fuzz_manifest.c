/* Fuzz target: the verify readers of hostile text — SHA256SUMS (first byte even) and
 * tq-manifest.json (odd). Whatever parses must print back and parse to the same thing. */
#include "verify/verify.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    tq_err e;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (!(data[0] & 1)) {
        tq_sum_entry *v;
        size_t n;
        if (tq_sums_parse(text, len, "fuzz", &v, &n, &e) != 0)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (!tq_verify_path_ok(v[i].path) || (i && strcmp(v[i - 1].path, v[i].path) >= 0))
                abort();
        tq_sums_free(v, n);
        return 0;
    }
    tq_manifest *m, *m2;
    if (tq_manifest_from_json(text, len, "fuzz", &m, &e) != 0)
        return 0;
    for (size_t i = 0; i < m->n_files; i++)
        for (size_t k = 0; k < m->files[i].n_ranges; k++)
            if (m->files[i].ranges[k].offset + m->files[i].ranges[k].nbytes > m->files[i].size)
                abort();
    cJSON *j = tq_manifest_to_json(m, &e);
    char *s = j ? tq_json_print(j, &e) : NULL;
    cJSON_Delete(j);
    if (!s)
        abort();
    if (tq_manifest_from_json(s, strlen(s), "fuzz2", &m2, &e) != 0 || m2->n_files != m->n_files)
        abort();
    size_t l1, l2;
    char *a = tq_manifest_sums(m, &l1, &e), *b = tq_manifest_sums(m2, &l2, &e);
    if (!a || !b || l1 != l2 || memcmp(a, b, l1))
        abort();
    free(a);
    free(b);
    free(s);
    tq_manifest_free(m);
    tq_manifest_free(m2);
    return 0;
}
