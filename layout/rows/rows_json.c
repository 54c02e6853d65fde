/* layout/rows/rows_json.c — the header hash of a row file's source: the SHA-256 of the
 * header in canonical JSON (tq_json_canonical), as MTPLX computes it. */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int tq_rows_header_sha256(const char *json, size_t len, const char *path, char hex[65], tq_err *e)
{
    if (tq_json_canonical_text_ok(json, len, e) != 0)
        return tq_err_prefix(e, "%s: header", path);
    cJSON *j = tq_json_parse(json, len, NULL, NULL);
    if (!j)
        return tq_fail(e, TQ_EDATA, "%s: header is not valid JSON", path);
    char *c = tq_json_canonical(j, e);
    cJSON_Delete(j);
    if (!c)
        return tq_err_prefix(e, "%s: header", path);
    unsigned char d[32];
    tq_sha256_buf(c, strlen(c), d);
    tq_hex(d, 32, hex);
    free(c);
    return 0;
}
