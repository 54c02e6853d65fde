/* Canonical JSON for row files: byte for byte what Python's json.dumps(v, sort_keys=True)
 * prints, because MTPLX hashes the source header that way and compares identities it
 * wrote itself. */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int rows_sb_put(rows_sb *b, const char *s, size_t n)
{
    if (b->failed)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p) {
            b->failed = 1;
            return -1;
        }
        b->buf = p;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
    return 0;
}

int rows_sb_str(rows_sb *b, const char *s)
{
    return rows_sb_put(b, s, strlen(s));
}

/* Decode one UTF-8 sequence (strict: no overlongs, no surrogates, <= U+10FFFF). */
static int utf8_next(const unsigned char *s, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int n;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0) {
        n = 2; v = c & 0x1F; min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3; v = c & 0x0F; min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4; v = c & 0x07; min = 0x10000;
    } else {
        return -1;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return -1;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return -1;
    *cp = v;
    return n;
}

static int put_u16_escape(rows_sb *b, uint32_t u)
{
    char t[8];
    snprintf(t, sizeof t, "\\u%04x", u);
    return rows_sb_put(b, t, 6);
}

static int put_string(rows_sb *b, const char *s, tq_err *e)
{
    rows_sb_put(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp;
        int n = utf8_next(p, &cp);
        if (n < 0)
            return tq_fail(e, TQ_EUNSUP, "JSON string is not valid UTF-8");
        p += n;
        switch (cp) {
        case '"': rows_sb_put(b, "\\\"", 2); continue;
        case '\\': rows_sb_put(b, "\\\\", 2); continue;
        case '\n': rows_sb_put(b, "\\n", 2); continue;
        case '\r': rows_sb_put(b, "\\r", 2); continue;
        case '\t': rows_sb_put(b, "\\t", 2); continue;
        case '\b': rows_sb_put(b, "\\b", 2); continue;
        case '\f': rows_sb_put(b, "\\f", 2); continue;
        default: break;
        }
        if (cp >= 0x20 && cp <= 0x7E) {
            char c = (char)cp;
            rows_sb_put(b, &c, 1);
        } else if (cp < 0x10000) {
            put_u16_escape(b, cp);
        } else {
            cp -= 0x10000;
            put_u16_escape(b, 0xD800 | (cp >> 10));
            put_u16_escape(b, 0xDC00 | (cp & 0x3FF));
        }
    }
    return rows_sb_put(b, "\"", 1);
}

static int cmp_key(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string); /* UTF-8 byte order = code point order */
}

static int put_value(rows_sb *b, const cJSON *j, int depth, tq_err *e)
{
    if (depth > 64)
        return tq_fail(e, TQ_EUNSUP, "JSON nested more than 64 levels");
    if (cJSON_IsRaw(j))
        return rows_sb_str(b, j->valuestring);
    if (cJSON_IsNull(j))
        return rows_sb_str(b, "null");
    if (cJSON_IsTrue(j))
        return rows_sb_str(b, "true");
    if (cJSON_IsFalse(j))
        return rows_sb_str(b, "false");
    if (cJSON_IsString(j))
        return put_string(b, j->valuestring, e);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (!(d > -9007199254740992.0 && d < 9007199254740992.0) || d != (double)(int64_t)d)
            return tq_fail(e, TQ_EUNSUP, "JSON number %.17g is not an integer below 2^53", d);
        char t[32];
        snprintf(t, sizeof t, "%lld", (long long)(int64_t)d);
        return rows_sb_str(b, t);
    }
    if (cJSON_IsArray(j)) {
        rows_sb_put(b, "[", 1);
        int first = 1;
        for (const cJSON *c = j->child; c; c = c->next) {
            if (!first)
                rows_sb_put(b, ", ", 2);
            first = 0;
            if (put_value(b, c, depth + 1, e) != 0)
                return -1;
        }
        return rows_sb_put(b, "]", 1);
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
        rows_sb_put(b, "{", 1);
        for (i = 0; i < n; i++) {
            if (i && !strcmp(v[i - 1]->string, v[i]->string)) {
                tq_fail(e, TQ_EUNSUP, "JSON object has the key '%.100s' twice", v[i]->string);
                free(v);
                return -1;
            }
            if (i)
                rows_sb_put(b, ", ", 2);
            if (put_string(b, v[i]->string, e) != 0 || rows_sb_put(b, ": ", 2) != 0 ||
                put_value(b, v[i], depth + 1, e) != 0) {
                free(v);
                return -1;
            }
        }
        free(v);
        return rows_sb_put(b, "}", 1);
    }
    return tq_fail(e, TQ_EUNSUP, "unsupported JSON value");
}

cJSON *rows_json_parse(const char *s, size_t len)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(s, len, &end, 0);
    if (!j)
        return NULL;
    for (const char *p = end; p < s + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(j);
            return NULL;
        }
    return j;
}

char *tq_rows_json_canonical(const cJSON *j, tq_err *e)
{
    rows_sb b = {0};
    if (put_value(&b, j, 0, e) != 0 || b.failed) {
        if (b.failed)
            tq_fail(e, TQ_ENOMEM, "out of memory serializing JSON");
        free(b.buf);
        return NULL;
    }
    return b.buf;
}

int tq_rows_json_canonical_text_ok(const char *s, size_t len, tq_err *e)
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

int tq_rows_header_sha256(const char *json, size_t len, const char *path, char hex[65], tq_err *e)
{
    if (tq_rows_json_canonical_text_ok(json, len, e) != 0)
        return tq_err_prefix(e, "%s: header", path);
    cJSON *j = rows_json_parse(json, len);
    if (!j)
        return tq_fail(e, TQ_EDATA, "%s: header is not valid JSON", path);
    char *c = tq_rows_json_canonical(j, e);
    cJSON_Delete(j);
    if (!c)
        return tq_err_prefix(e, "%s: header", path);
    unsigned char d[32];
    tq_sha256_buf(c, strlen(c), d);
    tq_hex(d, 32, hex);
    free(c);
    return 0;
}
