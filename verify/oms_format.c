/* Model signatures as text: base64, the DSSE PAE, the in-toto statement (payload) and the
 * Sigstore bundle around it, written and read (man tq-formats(5), MODEL SIGNATURES). */
#include "verify/verify_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ base64 */
static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tq_oms_b64_encode(const unsigned char *d, size_t n, tq_err *e)
{
    if (n > (SIZE_MAX - 1) / 4 * 3 - 3)
        return tq_fail(e, TQ_ENOMEM, "base64: %zu bytes is too much", n), NULL;
    char *out = tq_malloc((n + 2) / 3 * 4 + 1, e);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        out[o++] = b64_std[v >> 18];
        out[o++] = b64_std[(v >> 12) & 63];
        out[o++] = b64_std[(v >> 6) & 63];
        out[o++] = b64_std[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)d[i] << 16;
        out[o++] = b64_std[v >> 18];
        out[o++] = b64_std[(v >> 12) & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8;
        out[o++] = b64_std[v >> 18];
        out[o++] = b64_std[(v >> 12) & 63];
        out[o++] = b64_std[(v >> 6) & 63];
        out[o++] = '=';
    }
    out[o] = 0;
    return out;
}

/* 0..63 for a character of either alphabet ('+' '/' standard, '-' '_' URL-safe), else -1. */
static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int tq_oms_b64_decode(const char *s, size_t len, unsigned char **out, size_t *n, const char *what, tq_err *e)
{
    size_t data = len;
    while (data > 0 && s[data - 1] == '=' && len - data < 2)
        data--;
    for (size_t i = 0; i < data; i++)
        if (b64_value((unsigned char)s[i]) < 0) {
            if ((unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f)
                return tq_fail(e, TQ_EDATA, "%s: bad base64: '%c' at character %zu", what, s[i], i);
            return tq_fail(e, TQ_EDATA, "%s: bad base64: byte 0x%02x at character %zu", what, (unsigned char)s[i], i);
        }
    if (data < len && len % 4)
        return tq_fail(e, TQ_EDATA, "%s: bad base64: %zu characters with padding, not a multiple of 4", what, len);
    if (data % 4 == 1)
        return tq_fail(e, TQ_EDATA, "%s: bad base64: %zu characters cannot be a whole number of bytes", what, data);
    size_t want = data / 4 * 3 + (data % 4 ? data % 4 - 1 : 0);
    unsigned char *d = tq_malloc(want ? want : 1, e);
    if (!d)
        return -1;
    uint32_t acc = 0;
    size_t o = 0;
    for (size_t i = 0; i < data; i++) {
        acc = acc << 6 | (uint32_t)b64_value((unsigned char)s[i]);
        if (i % 4 == 3) {
            d[o++] = (unsigned char)(acc >> 16);
            d[o++] = (unsigned char)(acc >> 8);
            d[o++] = (unsigned char)acc;
            acc = 0;
        }
    }
    int rest = (int)(data % 4), spare = rest == 2 ? 4 : rest == 3 ? 2 : 0;
    if (spare && (acc & ((1u << spare) - 1))) {
        free(d);
        return tq_fail(e, TQ_EDATA, "%s: bad base64: the last character has bits set past the data", what);
    }
    if (rest == 2) {
        d[o++] = (unsigned char)(acc >> 4);
    } else if (rest == 3) {
        d[o++] = (unsigned char)(acc >> 10);
        d[o++] = (unsigned char)(acc >> 2);
    }
    *out = d;
    *n = o;
    return 0;
}

/* ---------------------------------------------------------------------- PAE */
unsigned char *tq_oms_pae(const char *type, const unsigned char *body, size_t len, size_t *out_len, tq_err *e)
{
    char head[128];
    size_t tl = strlen(type);
    int hl = snprintf(head, sizeof head, "DSSEv1 %zu ", tl);
    char mid[32];
    int ml = snprintf(mid, sizeof mid, " %zu ", len);
    if (hl < 0 || ml < 0 || len > SIZE_MAX - tl - 64)
        return tq_fail(e, TQ_ENOMEM, "PAE: %zu bytes is too much", len), NULL;
    size_t total = (size_t)hl + tl + (size_t)ml + len;
    unsigned char *p = tq_malloc(total ? total : 1, e);
    if (!p)
        return NULL;
    memcpy(p, head, (size_t)hl);
    memcpy(p + hl, type, tl);
    memcpy(p + hl + tl, mid, (size_t)ml);
    if (len)
        memcpy(p + hl + tl + ml, body, len);
    *out_len = total;
    return p;
}

/* ------------------------------------------------------------ statements */
void tq_oms_stmt_free(tq_oms_stmt *s)
{
    if (!s)
        return;
    free(s->name);
    tq_free_strv(s->ignore, s->n_ignore);
    for (size_t i = 0; i < s->n_res; i++)
        free(s->res[i].name);
    free(s->res);
    memset(s, 0, sizeof *s);
}

void tq_oms_subject(const tq_oms_res *r, size_t n, unsigned char out[32])
{
    tq_sha256 *h = tq_sha256_new();
    if (!h) {
        memset(out, 0, 32);
        return;
    }
    for (size_t i = 0; i < n; i++)
        tq_sha256_update(h, r[i].sha256, 32);
    tq_sha256_final(h, out);
}

int tq_oms_name_cmp(const char *a, const char *b)
{
    for (;;) {
        size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
        size_t m = la < lb ? la : lb;
        int c = memcmp(a, b, m);
        if (c)
            return c;
        if (la != lb)
            return la < lb ? -1 : 1;
        if (!a[la] || !b[lb])
            return (a[la] != 0) - (b[lb] != 0);
        a += la + 1;
        b += lb + 1;
    }
}

char *tq_oms_payload(const tq_oms_stmt *s, size_t *len, tq_err *e)
{
    char hex[65];
    tq_hex(s->subject, 32, hex);
    /* cJSON's Add* helpers attach what they create and return NULL for a NULL parent, so one
     * check of every last link finds any allocation failure. */
    cJSON *j = cJSON_CreateObject();
    cJSON *subj = cJSON_CreateObject();
    int ok = cJSON_AddStringToObject(j, "_type", TQ_OMS_STATEMENT_TYPE) &&
             cJSON_AddStringToObject(j, "predicateType", TQ_OMS_PREDICATE_TYPE) && subj &&
             cJSON_AddStringToObject(subj, "name", s->name) &&
             cJSON_AddStringToObject(cJSON_AddObjectToObject(subj, "digest"), "sha256", hex);
    cJSON *subjects = cJSON_AddArrayToObject(j, "subject");
    if (subjects && subj)
        cJSON_AddItemToArray(subjects, subj);
    else
        cJSON_Delete(subj);
    cJSON *pred = cJSON_AddObjectToObject(j, "predicate");
    cJSON *ser = cJSON_AddObjectToObject(pred, "serialization");
    cJSON *res = cJSON_AddArrayToObject(pred, "resources");
    ok = ok && subjects && res && cJSON_AddStringToObject(ser, "method", "files") &&
         cJSON_AddStringToObject(ser, "hash_type", "sha256") &&
         cJSON_AddBoolToObject(ser, "allow_symlinks", s->allow_symlinks);
    cJSON *ign = ok && s->n_ignore ? cJSON_AddArrayToObject(ser, "ignore_paths") : NULL;
    ok = ok && (ign || !s->n_ignore);
    for (size_t i = 0; ok && i < s->n_ignore; i++) {
        cJSON *v = cJSON_CreateString(s->ignore[i]);
        ok = v != NULL;
        if (ok)
            cJSON_AddItemToArray(ign, v);
    }
    for (size_t i = 0; ok && i < s->n_res; i++) {
        cJSON *r = cJSON_CreateObject();
        tq_hex(s->res[i].sha256, 32, hex);
        ok = r != NULL;
        if (ok)
            cJSON_AddItemToArray(res, r);
        ok = ok && cJSON_AddStringToObject(r, "name", s->res[i].name) && cJSON_AddStringToObject(r, "algorithm", "sha256") &&
             cJSON_AddStringToObject(r, "digest", hex);
    }
    char *text = ok ? tq_json_print(j, e) : NULL;
    if (!ok)
        tq_fail(e, TQ_ENOMEM, "out of memory building the signature payload");
    cJSON_Delete(j);
    if (text)
        *len = strlen(text);
    return text;
}

/* ---- reading hostile JSON ---- */
/* The member `key` of object o (NULL when absent); -1 when o has it twice. */
static int member(const cJSON *o, const char *key, const cJSON **out, const char *what, const char *where, tq_err *e)
{
    *out = NULL;
    for (const cJSON *c = o->child; c; c = c->next)
        if (c->string && !strcmp(c->string, key)) {
            if (*out)
                return tq_fail(e, TQ_EDATA, "%s: %s: key \"%s\" appears twice", what, where, key);
            *out = c;
        }
    return 0;
}

/* The member `key` of o, which must be there and be of `type` (cJSON_String, cJSON_Object or
 * cJSON_Array). */
static int need(const cJSON *o, const char *key, int type, const cJSON **out, const char *what, const char *where,
                tq_err *e)
{
    if (member(o, key, out, what, where, e) != 0)
        return -1;
    if (!*out)
        return tq_fail(e, TQ_EDATA, "%s: %s: no \"%s\"", what, where, key);
    if (((*out)->type & 0xff) != type || (type == cJSON_String && !(*out)->valuestring))
        return tq_fail(e, TQ_EDATA, "%s: %s: \"%s\" is not %s", what, where, key,
                       type == cJSON_String ? "a string" : type == cJSON_Object ? "an object" : "an array");
    return 0;
}

static int need_string(const cJSON *o, const char *key, const char **out, const char *what, const char *where, tq_err *e)
{
    const cJSON *v;
    if (need(o, key, cJSON_String, &v, what, where, e) != 0)
        return -1;
    *out = v->valuestring;
    return 0;
}

/* Lowercase or uppercase hex of 32 bytes. */
static int hex32(const char *s, unsigned char out[32])
{
    return strlen(s) == 64 && tq_unhex32(s, out) == 0 ? 0 : -1;
}

/* A lexical pass over JSON text: *nul_escape = a string holds \u0000 (cJSON would cut it
 * there); *cut_short = the text ends inside a string, object or array. */
static void json_scan(const char *p, size_t len, int *nul_escape, int *cut_short)
{
    int in_str = 0;
    size_t depth = 0;
    *nul_escape = *cut_short = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '"') {
                in_str = 0;
            } else if (c == '\\' && i + 1 < len) {
                if (p[i + 1] == 'u' && i + 5 < len && !memcmp(p + i + 2, "0000", 4))
                    *nul_escape = 1;
                i++;
            }
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && depth) {
            depth--;
        }
    }
    *cut_short = in_str || depth > 0;
}

/* One JSON value filling text[0..len) (trailing whitespace allowed), UTF-8, and nothing
 * cJSON would change silently: no NUL byte, no string holding \u0000 (it would be cut there). */
static cJSON *parse_all(const char *text, size_t len, const char *what, const char *part, tq_err *e)
{
    size_t at = 0;
    int trailing = 0;
    if (!len)
        return tq_fail(e, TQ_EDATA, "%s: %s: empty", what, part), NULL;
    if (tq_utf8_check(text, len, &at) != 0)
        return tq_fail(e, TQ_EDATA, "%s: %s: not UTF-8 at byte %zu", what, part, at), NULL;
    const char *nul = memchr(text, 0, len);
    if (nul)
        return tq_fail(e, TQ_EDATA, "%s: %s: a NUL byte at byte %zu", what, part, (size_t)(nul - text)), NULL;
    int nul_escape, cut_short;
    json_scan(text, len, &nul_escape, &cut_short);
    if (nul_escape)
        return tq_fail(e, TQ_EDATA, "%s: %s: a string holds \\u0000", what, part), NULL;
    cJSON *j = tq_json_parse(text, len, &at, &trailing);
    if (j)
        return j;
    if (trailing)
        return tq_fail(e, TQ_EDATA, "%s: %s: bytes after the JSON value at byte %zu", what, part, at), NULL;
    if (cut_short)
        return tq_fail(e, TQ_EDATA, "%s: %s: truncated JSON (it ends after %zu bytes inside an unfinished value)", what,
                       part, len), NULL;
    return tq_fail(e, TQ_EDATA, "%s: %s: invalid JSON near byte %zu", what, part, at), NULL;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int parse_statement(const cJSON *j, const char *what, tq_oms_stmt *s, tq_err *e)
{
    const char *type, *ptype, *name, *dhex, *method, *htype;
    const cJSON *subjects, *pred, *ser, *res, *digest, *sym, *ign;
    if (!cJSON_IsObject(j))
        return tq_fail(e, TQ_EDATA, "%s: payload: not a JSON object", what);
    if (need_string(j, "_type", &type, what, "payload", e) != 0)
        return -1;
    if (strcmp(type, TQ_OMS_STATEMENT_TYPE))
        return tq_fail(e, TQ_EDATA, "%s: payload: _type \"%.200s\" is not an in-toto Statement v1 (%s)", what, type,
                       TQ_OMS_STATEMENT_TYPE);
    if (need_string(j, "predicateType", &ptype, what, "payload", e) != 0)
        return -1;
    if (strcmp(ptype, TQ_OMS_PREDICATE_TYPE))
        return tq_fail(e, TQ_EDATA, "%s: payload: predicate type \"%.200s\" is not a model signature (%s)", what,
                       ptype, TQ_OMS_PREDICATE_TYPE);
    if (need(j, "subject", cJSON_Array, &subjects, what, "payload", e) != 0)
        return -1;
    if (cJSON_GetArraySize(subjects) != 1 || !cJSON_IsObject(subjects->child))
        return tq_fail(e, TQ_EDATA, "%s: payload: \"subject\" must hold exactly one object, has %d entries", what,
                       cJSON_GetArraySize(subjects));
    if (need_string(subjects->child, "name", &name, what, "subject", e) != 0 ||
        need(subjects->child, "digest", cJSON_Object, &digest, what, "subject", e) != 0 ||
        need_string(digest, "sha256", &dhex, what, "subject digest", e) != 0)
        return -1;
    unsigned char want[32];
    if (hex32(dhex, want) != 0)
        return tq_fail(e, TQ_EDATA, "%s: subject: digest \"%.80s\" is not 64 hex digits", what, dhex);
    if (need(j, "predicate", cJSON_Object, &pred, what, "payload", e) != 0 ||
        need(pred, "serialization", cJSON_Object, &ser, what, "predicate", e) != 0 ||
        need_string(ser, "method", &method, what, "serialization", e) != 0)
        return -1;
    if (strcmp(method, "files"))
        return tq_fail(e, TQ_EUNSUP, "%s: serialization method \"%.80s\" is not supported (tq hashes whole files: "
                       "\"files\")", what, method);
    if (need_string(ser, "hash_type", &htype, what, "serialization", e) != 0)
        return -1;
    if (strcmp(htype, "sha256"))
        return tq_fail(e, TQ_EUNSUP, "%s: serialization hash_type \"%.80s\" is not supported (sha256 only)", what,
                       htype);
    if (member(ser, "allow_symlinks", &sym, what, "serialization", e) != 0 ||
        member(ser, "ignore_paths", &ign, what, "serialization", e) != 0)
        return -1;
    if (!sym || !cJSON_IsBool(sym))
        return tq_fail(e, TQ_EDATA, "%s: serialization: \"allow_symlinks\" is %s", what,
                       sym ? "not true or false" : "missing");
    if (!(s->name = tq_strdup(name, e)))
        return -1;
    memcpy(s->subject, want, 32);
    s->allow_symlinks = cJSON_IsTrue(sym);
    if (ign) {
        if (!cJSON_IsArray(ign))
            return tq_fail(e, TQ_EDATA, "%s: serialization: \"ignore_paths\" is not an array", what);
        size_t n = (size_t)cJSON_GetArraySize(ign);
        if (n && !(s->ignore = tq_calloc(n, sizeof *s->ignore, e)))
            return -1;
        for (const cJSON *v = ign->child; v; v = v->next) {
            if (!cJSON_IsString(v) || !v->valuestring)
                return tq_fail(e, TQ_EDATA, "%s: serialization: an ignore_paths entry is not a string", what);
            const char *p = v->valuestring;
            while (p[0] == '.' && p[1] == '/')
                p += 2;
            if (!*p || !strcmp(p, ".") || !strcmp(p, "./"))
                return tq_fail(e, TQ_EDATA, "%s: serialization: ignore_paths entry \"%.200s\" would leave out the "
                               "whole model", what, v->valuestring);
            if (!(s->ignore[s->n_ignore++] = tq_strdup(p, e)))
                return -1;
        }
    }
    if (need(pred, "resources", cJSON_Array, &res, what, "predicate", e) != 0)
        return -1;
    size_t n = (size_t)cJSON_GetArraySize(res);
    if (n && !(s->res = tq_calloc(n, sizeof *s->res, e)))
        return -1;
    size_t i = 0;
    for (const cJSON *r = res->child; r; r = r->next, i++) {
        char where[64];
        snprintf(where, sizeof where, "resource %zu", i);
        const char *rname, *alg, *hex;
        if (!cJSON_IsObject(r))
            return tq_fail(e, TQ_EDATA, "%s: %s: not an object", what, where);
        if (need_string(r, "name", &rname, what, where, e) != 0 || need_string(r, "algorithm", &alg, what, where, e) != 0 ||
            need_string(r, "digest", &hex, what, where, e) != 0)
            return -1;
        if (strcmp(rname, ".") && !tq_verify_path_ok(rname))
            return tq_fail(e, TQ_EDATA, "%s: %s: unsafe file name \"%.200s\" (absolute, '..', empty component or "
                           "control character)", what, where, rname);
        if (strcmp(alg, "sha256"))
            return tq_fail(e, TQ_EUNSUP, "%s: %s (%.200s): algorithm \"%.40s\" is not supported (sha256 only)", what,
                           where, rname, alg);
        if (hex32(hex, s->res[i].sha256) != 0)
            return tq_fail(e, TQ_EDATA, "%s: %s (%.200s): digest \"%.80s\" is not 64 hex digits", what, where, rname,
                           hex);
        if (!(s->res[i].name = tq_strdup(rname, e)))
            return -1;
        s->n_res = i + 1;
    }
    if (s->n_res > 1) {
        /* unique names: check on a sorted copy of the pointers */
        const char **v = tq_calloc(s->n_res, sizeof *v, e);
        if (!v)
            return -1;
        for (size_t k = 0; k < s->n_res; k++)
            v[k] = s->res[k].name;
        qsort(v, s->n_res, sizeof *v, cmp_strp);
        for (size_t k = 1; k < s->n_res; k++)
            if (!strcmp(v[k], v[k - 1])) {
                tq_fail(e, TQ_EDATA, "%s: resources: \"%.200s\" is listed twice", what, v[k]);
                free(v);
                return -1;
            }
        free(v);
    }
    for (size_t k = 0; k < s->n_res; k++)
        if (!strcmp(s->res[k].name, ".") && s->n_res != 1)
            return tq_fail(e, TQ_EDATA, "%s: resources: \".\" (a single-file model) next to other files", what);
    unsigned char got[32];
    tq_oms_subject(s->res, s->n_res, got);
    if (memcmp(got, want, 32)) {
        char a[65], b[65];
        tq_hex(want, 32, a);
        tq_hex(got, 32, b);
        return tq_fail(e, TQ_EDATA, "%s: subject digest %s does not match the resources (they hash to %s)", what, a, b);
    }
    return 0;
}

int tq_oms_payload_parse(const char *p, size_t len, const char *what, tq_oms_stmt *s, tq_err *e)
{
    memset(s, 0, sizeof *s);
    cJSON *j = parse_all(p, len, what, "payload", e);
    if (!j)
        return -1;
    int rc = parse_statement(j, what, s, e);
    cJSON_Delete(j);
    if (rc != 0)
        tq_oms_stmt_free(s);
    return rc;
}

/* ------------------------------------------------------------------ bundles */
void tq_oms_env_free(tq_oms_env *env)
{
    if (!env)
        return;
    free(env->payload);
    free(env->payload_type);
    free(env->sig);
    free(env->hint);
    memset(env, 0, sizeof *env);
}

char *tq_oms_bundle_make(const unsigned char *payload, size_t plen, const unsigned char *sig, size_t slen,
                         const char *hint, size_t *len, tq_err *e)
{
    char *p64 = tq_oms_b64_encode(payload, plen, e);
    char *s64 = p64 ? tq_oms_b64_encode(sig, slen, e) : NULL;
    if (!s64) {
        free(p64);
        return NULL;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON *vm = cJSON_AddObjectToObject(j, "verificationMaterial");
    cJSON *env = cJSON_AddObjectToObject(j, "dsseEnvelope");
    cJSON *sigs = cJSON_AddArrayToObject(env, "signatures");
    cJSON *one = cJSON_CreateObject();
    if (sigs && one)
        cJSON_AddItemToArray(sigs, one);
    int ok = sigs && one && cJSON_AddStringToObject(j, "mediaType", TQ_OMS_BUNDLE_TYPE) &&
             cJSON_AddStringToObject(cJSON_AddObjectToObject(vm, "publicKey"), "hint", hint) &&
             cJSON_AddArrayToObject(vm, "tlogEntries") && cJSON_AddStringToObject(env, "payload", p64) &&
             cJSON_AddStringToObject(env, "payloadType", TQ_OMS_PAYLOAD_TYPE) &&
             cJSON_AddStringToObject(one, "sig", s64) && cJSON_AddStringToObject(one, "keyid", "");
    if (!(sigs && one))
        cJSON_Delete(one);
    free(p64);
    free(s64);
    char *text = ok ? tq_json_print(j, e) : NULL;
    if (!ok)
        tq_fail(e, TQ_ENOMEM, "out of memory building the signature bundle");
    cJSON_Delete(j);
    if (text)
        *len = strlen(text);
    return text;
}

static int is_bundle_type(const char *t)
{
    return !strcmp(t, TQ_OMS_BUNDLE_TYPE) || !strcmp(t, "application/vnd.dev.sigstore.bundle+json;version=0.3");
}

static int parse_bundle(const cJSON *j, const char *what, tq_oms_env *env, tq_err *e)
{
    const char *mt, *p64, *ptype, *s64;
    const cJSON *vm, *pk, *de, *sigs, *ms, *hint, *keyid;
    if (!cJSON_IsObject(j))
        return tq_fail(e, TQ_EDATA, "%s: not a JSON object (a Sigstore bundle)", what);
    if (need_string(j, "mediaType", &mt, what, "bundle", e) != 0)
        return -1;
    if (!is_bundle_type(mt))
        return tq_fail(e, TQ_EDATA, "%s: media type \"%.200s\" is not a Sigstore bundle v0.3 (%s)", what, mt,
                       TQ_OMS_BUNDLE_TYPE);
    if (need(j, "verificationMaterial", cJSON_Object, &vm, what, "bundle", e) != 0 ||
        member(vm, "publicKey", &pk, what, "verificationMaterial", e) != 0)
        return -1;
    if (!pk) {
        const cJSON *c1, *c2;
        if (member(vm, "x509CertificateChain", &c1, what, "verificationMaterial", e) != 0 ||
            member(vm, "certificate", &c2, what, "verificationMaterial", e) != 0)
            return -1;
        if (c1 || c2)
            return tq_fail(e, TQ_EUNSUP, "%s: signed with a certificate; tq verifies signatures made with a key "
                           "(verificationMaterial.publicKey)", what);
        return tq_fail(e, TQ_EDATA, "%s: verificationMaterial: no \"publicKey\"", what);
    }
    if (!cJSON_IsObject(pk))
        return tq_fail(e, TQ_EDATA, "%s: verificationMaterial: \"publicKey\" is not an object", what);
    if (member(pk, "hint", &hint, what, "publicKey", e) != 0)
        return -1;
    if (hint && !cJSON_IsNull(hint) && (!cJSON_IsString(hint) || !hint->valuestring))
        return tq_fail(e, TQ_EDATA, "%s: publicKey: \"hint\" is not a string", what);
    if (member(j, "dsseEnvelope", &de, what, "bundle", e) != 0 || member(j, "messageSignature", &ms, what, "bundle", e) != 0)
        return -1;
    if (!de)
        return tq_fail(e, TQ_EDATA, "%s: no \"dsseEnvelope\"%s", what,
                       ms ? " (a messageSignature bundle signs one blob, not a model)" : "");
    if (!cJSON_IsObject(de))
        return tq_fail(e, TQ_EDATA, "%s: \"dsseEnvelope\" is not an object", what);
    if (need_string(de, "payload", &p64, what, "dsseEnvelope", e) != 0 ||
        need_string(de, "payloadType", &ptype, what, "dsseEnvelope", e) != 0 ||
        need(de, "signatures", cJSON_Array, &sigs, what, "dsseEnvelope", e) != 0)
        return -1;
    if (cJSON_GetArraySize(sigs) != 1 || !cJSON_IsObject(sigs->child))
        return tq_fail(e, TQ_EDATA, "%s: dsseEnvelope: \"signatures\" must hold exactly one signature, has %d", what,
                       cJSON_GetArraySize(sigs));
    if (need_string(sigs->child, "sig", &s64, what, "signature", e) != 0 ||
        member(sigs->child, "keyid", &keyid, what, "signature", e) != 0)
        return -1;
    if (keyid && !cJSON_IsNull(keyid) && !cJSON_IsString(keyid))
        return tq_fail(e, TQ_EDATA, "%s: signature: \"keyid\" is not a string", what);
    char part[600];
    snprintf(part, sizeof part, "%s: dsseEnvelope.payload", what);
    if (tq_oms_b64_decode(p64, strlen(p64), &env->payload, &env->payload_len, part, e) != 0)
        return -1;
    snprintf(part, sizeof part, "%s: dsseEnvelope.signatures[0].sig", what);
    if (tq_oms_b64_decode(s64, strlen(s64), &env->sig, &env->sig_len, part, e) != 0)
        return -1;
    if (!env->sig_len)
        return tq_fail(e, TQ_EDATA, "%s: the signature is empty", what);
    if (!(env->payload_type = tq_strdup(ptype, e)))
        return -1;
    if (hint && cJSON_IsString(hint) && hint->valuestring[0] && !(env->hint = tq_strdup(hint->valuestring, e)))
        return -1;
    return 0;
}

int tq_oms_bundle_parse(const char *text, size_t len, const char *what, tq_oms_env *env, tq_err *e)
{
    memset(env, 0, sizeof *env);
    cJSON *j = parse_all(text, len, what, "signature bundle", e);
    if (!j)
        return -1;
    int rc = parse_bundle(j, what, env, e);
    cJSON_Delete(j);
    if (rc != 0)
        tq_oms_env_free(env);
    return rc;
}
