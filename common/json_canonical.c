/* common/json_canonical.c — canonical JSON text: byte for byte what Python's
 * json.dumps(v, sort_keys=True) prints (the row-file identities of tq-rowlayout hash a
 * header in this form, as MTPLX does), and the lexical check that cJSON can carry a text to
 * it unchanged. */
#include "common/common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static int put_u16_escape(tq_sb *b, uint32_t u)
{
    char t[8];
    snprintf(t, sizeof t, "\\u%04x", u);
    return tq_sb_put(b, t, 6);
}

static int put_string(tq_sb *b, const char *s, tq_err *e)
{
    tq_sb_put(b, "\"", 1);
    const char *p = s, *end = s + strlen(s);
    while (p < end) {
        uint32_t cp;
        int n = tq_utf8_next(p, (size_t)(end - p), &cp);
        if (n < 0)
            return tq_fail(e, TQ_EUNSUP, "JSON string is not valid UTF-8");
        p += n;
        switch (cp) {
        case '"': tq_sb_put(b, "\\\"", 2); continue;
        case '\\': tq_sb_put(b, "\\\\", 2); continue;
        case '\n': tq_sb_put(b, "\\n", 2); continue;
        case '\r': tq_sb_put(b, "\\r", 2); continue;
        case '\t': tq_sb_put(b, "\\t", 2); continue;
        case '\b': tq_sb_put(b, "\\b", 2); continue;
        case '\f': tq_sb_put(b, "\\f", 2); continue;
        default: break;
        }
        if (cp >= 0x20 && cp <= 0x7E) {
            char c = (char)cp;
            tq_sb_put(b, &c, 1);
        } else if (cp < 0x10000) {
            put_u16_escape(b, cp);
        } else {
            cp -= 0x10000;
            put_u16_escape(b, 0xD800 | (cp >> 10));
            put_u16_escape(b, 0xDC00 | (cp & 0x3FF));
        }
    }
    return tq_sb_put(b, "\"", 1);
}

static int cmp_key(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string); /* UTF-8 byte order = code point order */
}

static int put_value(tq_sb *b, const cJSON *j, int depth, tq_err *e)
{
    if (depth > 64)
        return tq_fail(e, TQ_EUNSUP, "JSON nested more than 64 levels");
    if (cJSON_IsRaw(j))
        return tq_sb_str(b, j->valuestring);
    if (cJSON_IsNull(j))
        return tq_sb_str(b, "null");
    if (cJSON_IsTrue(j))
        return tq_sb_str(b, "true");
    if (cJSON_IsFalse(j))
        return tq_sb_str(b, "false");
    if (cJSON_IsString(j))
        return put_string(b, j->valuestring, e);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (!(d >= -TQ_JSON_MAX_INT && d <= TQ_JSON_MAX_INT) || d != (double)(int64_t)d)
            return tq_fail(e, TQ_EUNSUP, "JSON number %.17g is not an integer below 2^53", d);
        char t[32];
        snprintf(t, sizeof t, "%lld", (long long)(int64_t)d);
        return tq_sb_str(b, t);
    }
    if (cJSON_IsArray(j)) {
        tq_sb_put(b, "[", 1);
        int first = 1;
        for (const cJSON *c = j->child; c; c = c->next) {
            if (!first)
                tq_sb_put(b, ", ", 2);
            first = 0;
            if (put_value(b, c, depth + 1, e) != 0)
                return -1;
        }
        return tq_sb_put(b, "]", 1);
    }
    if (cJSON_IsObject(j)) {
        size_t n = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            n++;
        const cJSON **v = n ? malloc(n * sizeof *v) : NULL;
        if (n && !v)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        size_t i = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            v[i++] = c;
        if (n) /* v is NULL for an empty object */
            qsort(v, n, sizeof *v, cmp_key);
        tq_sb_put(b, "{", 1);
        for (i = 0; i < n; i++) {
            if (i && !strcmp(v[i - 1]->string, v[i]->string)) {
                tq_fail(e, TQ_EUNSUP, "JSON object has the key '%.100s' twice", v[i]->string);
                free(v);
                return -1;
            }
            if (i)
                tq_sb_put(b, ", ", 2);
            if (put_string(b, v[i]->string, e) != 0 || tq_sb_put(b, ": ", 2) != 0 ||
                put_value(b, v[i], depth + 1, e) != 0) {
                free(v);
                return -1;
            }
        }
        free(v);
        return tq_sb_put(b, "}", 1);
    }
    return tq_fail(e, TQ_EUNSUP, "unsupported JSON value");
}

char *tq_json_canonical(const cJSON *j, tq_err *e)
{
    tq_sb b = {0};
    if (put_value(&b, j, 0, e) != 0 && !b.oom) {
        tq_sb_free(&b);
        return NULL;
    }
    return tq_sb_finish(&b, e);
}

int tq_json_canonical_text_ok(const char *s, size_t len, tq_err *e)
{
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '"') {
                in_str = 0;
            } else if (c == '\\' && i + 1 < len) {
                if (s[i + 1] == 'u' && i + 5 < len && !memcmp(s + i + 2, "0000", 4))
                    return tq_fail(e, TQ_EUNSUP, "JSON string holds \\u0000 (byte %zu)", i);
                i++;
            }
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < len && strchr("+-0123456789.eE", s[j]) && s[j])
                j++;
            size_t d0 = i + (c == '-');
            int bad = d0 == j || (s[d0] == '0' && j - d0 > 1);
            for (size_t k = d0; k < j; k++)
                if (s[k] < '0' || s[k] > '9')
                    bad = 1;
            if (bad)
                    return tq_fail(e, TQ_EUNSUP, "JSON number '%.*s' is not a plain integer (byte %zu)",
                                   (int)(j - i < 40 ? j - i : 40), s + i, i);
            i = j - 1;
        }
    }
    return 0;
}
