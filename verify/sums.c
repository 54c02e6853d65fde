/* SHA256SUMS: the coreutils text format, parsed as hostile input. */
#include "verify/verify.h"

#include <stdlib.h>
#include <string.h>

int tq_verify_path_ok(const char *path)
{
    if (!path || !*path || path[0] == '/' || strlen(path) > 4096)
        return 0;
    const char *s = path;
    for (;;) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!slash)
            break;
        s = slash + 1;
    }
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == '\\')
            return 0;
    return 1;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tq_sum_entry *)a)->path, ((const tq_sum_entry *)b)->path);
}

void tq_sums_free(tq_sum_entry *v, size_t n)
{
    for (size_t i = 0; i < n && v; i++)
        free(v[i].path);
    free(v);
}

int tq_sums_parse(const char *text, size_t len, const char *what, tq_sum_entry **out, size_t *n,
                  tq_err *e)
{
    tq_sum_entry *v = NULL;
    size_t cnt = 0, cap = 0, lineno = 0;
    size_t pos = 0;
    *out = NULL;
    *n = 0;
    while (pos < len) {
        lineno++;
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl ? 1 : 0);
        if (memchr(line, 0, ll)) {
            tq_sums_free(v, cnt);
            return tq_fail(e, TQ_EDATA, "%s: line %zu: NUL byte", what, lineno);
        }
        if (ll < 67 || (line[64] != ' ') || (line[65] != ' ' && line[65] != '*')) {
            tq_sums_free(v, cnt);
            return tq_fail(e, TQ_EDATA, "%s: line %zu: not \"<64 hex digits>  <path>\"", what, lineno);
        }
        if (cnt == cap) {
            size_t nc = cap ? cap * 2 : 64;
            tq_sum_entry *nv = realloc(v, nc * sizeof *v);
            if (!nv) {
                tq_sums_free(v, cnt);
                return tq_fail(e, TQ_ENOMEM, "%s: out of memory", what);
            }
            v = nv;
            cap = nc;
        }
        tq_sum_entry *en = &v[cnt];
        if (tq_unhex32(line, en->sha256) != 0) {
            tq_sums_free(v, cnt);
            return tq_fail(e, TQ_EDATA, "%s: line %zu: bad hex digest", what, lineno);
        }
        size_t pl = ll - 66;
        en->path = malloc(pl + 1);
        if (!en->path) {
            tq_sums_free(v, cnt);
            return tq_fail(e, TQ_ENOMEM, "%s: out of memory", what);
        }
        memcpy(en->path, line + 66, pl);
        en->path[pl] = 0;
        cnt++;
        if (!tq_verify_path_ok(en->path)) {
            tq_fail(e, TQ_EDATA, "%s: line %zu: unsafe or malformed path '%.200s'", what, lineno, en->path);
            tq_sums_free(v, cnt);
            return -1;
        }
    }
    if (cnt)
        qsort(v, cnt, sizeof *v, cmp_entry);
    for (size_t i = 1; i < cnt; i++)
        if (!strcmp(v[i].path, v[i - 1].path)) {
            tq_fail(e, TQ_EDATA, "%s: '%.200s' is listed twice", what, v[i].path);
            tq_sums_free(v, cnt);
            return -1;
        }
    *out = v;
    *n = cnt;
    return 0;
}
