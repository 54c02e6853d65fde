/* safetensors reader. The file is hostile: every rule of the format is checked before a
 * single tensor byte is trusted, and tensor data is only ever read with pread into caller
 * buffers, so a shard is never mapped or loaded whole. */
#include "formats/formats_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dtypes that exist in safetensors but that tq does not handle */
static const char *const exotic_dtypes[] = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0", "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ"};

static const char *json_type(const cJSON *j)
{
    if (cJSON_IsObject(j)) return "an object";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    return "invalid";
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const tq_tensor_info *)a)->name, ((const tq_tensor_info *)b)->name);
}

static int cmp_begin(const void *a, const void *b)
{
    const tq_tensor_info *x = *(const tq_tensor_info *const *)a, *y = *(const tq_tensor_info *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) /* zero-size tensors first at a shared offset */
        return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int parse_entry(tq_st_file *f, const char *name, const cJSON *ent, tq_tensor_info *t,
                       uint64_t *begin, uint64_t *end, tq_err *e)
{
    const char *P = f->path;
    if (!cJSON_IsObject(ent))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': entry is %s, not an object", P, name, json_type(ent));
    const cJSON *jd = NULL, *js = NULL, *jo = NULL;
    for (const cJSON *c = ent->child; c; c = c->next) {
        const cJSON **slot = !strcmp(c->string, "dtype") ? &jd
                           : !strcmp(c->string, "shape") ? &js
                           : !strcmp(c->string, "data_offsets") ? &jo : NULL;
        if (!slot)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s': unknown key '%s' (expected dtype, shape, data_offsets)", P, name, c->string);
        if (*slot)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s': key '%s' appears twice", P, name, c->string);
        *slot = c;
    }
    if (!jd || !js || !jo)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': missing '%s'", P, name, !jd ? "dtype" : !js ? "shape" : "data_offsets");

    if (!cJSON_IsString(jd))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': dtype is %s, not a string", P, name, json_type(jd));
    if (tq_dtype_from_name(jd->valuestring, &t->dtype) != 0) {
        for (size_t i = 0; i < sizeof exotic_dtypes / sizeof *exotic_dtypes; i++)
            if (!strcmp(jd->valuestring, exotic_dtypes[i]))
                return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': dtype %s is not supported", P, name, jd->valuestring);
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': unknown dtype '%.64s'", P, name, jd->valuestring);
    }

    if (!cJSON_IsArray(js))
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': shape is %s, not an array", P, name, json_type(js));
    int nd = cJSON_GetArraySize(js);
    if (nd > TQ_MAX_DIMS)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': shape has %d dimensions (at most %d supported)", P, name, nd, TQ_MAX_DIMS);
    t->ndim = nd;
    t->nelem = 1;
    int k = 0;
    int overflow = 0;
    for (const cJSON *c = js->child; c; c = c->next, k++) {
        if (tq_json_u64(c, &t->shape[k]) != 0)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s': shape[%d] is not an integer in [0, 2^53 - 1]", P, name, k);
        if (!overflow && tq_mul_u64(t->nelem, t->shape[k], &t->nelem) != 0)
            overflow = 1;
    }
    char shp[200];
    tq_shape_str(t->shape, t->ndim, shp, sizeof shp);
    /* a zero dimension makes the product 0 even if a partial product overflowed */
    for (k = 0; overflow && k < nd; k++)
        if (t->shape[k] == 0)
            overflow = 0, t->nelem = 0;
    if (overflow)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': shape %s has more than 2^64 elements", P, name, shp);
    if (tq_mul_u64(t->nelem, tq_dtype_size(t->dtype), &t->nbytes) != 0)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': shape %s of %s is more than 2^64 bytes", P, name, shp, tq_dtype_name(t->dtype));

    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets is not an array of two integers", P, name);
    if (tq_json_u64(jo->child, begin) != 0 || tq_json_u64(jo->child->next, end) != 0)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets[%d] is not an integer in [0, 2^53 - 1]", P, name,
                       tq_json_u64(jo->child, begin) != 0 ? 0 : 1);
    if (*begin > *end)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets [%llu, %llu]: begin is after end", P, name,
                       (unsigned long long)*begin, (unsigned long long)*end);
    if (*end - *begin != t->nbytes)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s needs %llu",
                       P, name, (unsigned long long)*begin, (unsigned long long)*end,
                       (unsigned long long)(*end - *begin), shp, tq_dtype_name(t->dtype), (unsigned long long)t->nbytes);
    return 0;
}

static int parse_metadata(tq_st_file *f, const cJSON *m, tq_err *e)
{
    if (!cJSON_IsObject(m))
        return tq_fail(e, TQ_EDATA, "%s: __metadata__ is %s, not an object", f->path, json_type(m));
    size_t n = 0;
    for (const cJSON *c = m->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return tq_fail(e, TQ_EDATA, "%s: __metadata__ '%s': value is %s, not a string", f->path, c->string, json_type(c));
        n++;
    }
    f->meta_keys = tq_calloc(n ? n : 1, sizeof(char *), e);
    f->meta_vals = tq_calloc(n ? n : 1, sizeof(char *), e);
    if (!f->meta_keys || !f->meta_vals)
        return -1;
    /* insertion sort keeps it simple: metadata has a handful of keys */
    for (const cJSON *c = m->child; c; c = c->next) {
        size_t i = f->n_meta;
        while (i > 0 && strcmp(f->meta_keys[i - 1], c->string) > 0)
            i--;
        if (i > 0 && !strcmp(f->meta_keys[i - 1], c->string))
            return tq_fail(e, TQ_EDATA, "%s: __metadata__ key '%s' appears twice", f->path, c->string);
        memmove(f->meta_keys + i + 1, f->meta_keys + i, (f->n_meta - i) * sizeof(char *));
        memmove(f->meta_vals + i + 1, f->meta_vals + i, (f->n_meta - i) * sizeof(char *));
        f->meta_keys[i] = f->meta_vals[i] = NULL;
        f->n_meta++;
        if (!(f->meta_keys[i] = tq_strdup(c->string, e)) || !(f->meta_vals[i] = tq_strdup(c->valuestring, e)))
            return -1;
    }
    return 0;
}

/* cJSON reads every number as a double, so 1.0, 1e3 and -0 look like integers to it; the
 * format only has unsigned integers, so look at the number tokens themselves. */
static int check_number_tokens(const tq_st_file *f, const char *json, size_t len, tq_err *e)
{
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '0' && i + 1 < len && json[i + 1] >= '0' && json[i + 1] <= '9' &&
                   (i == 0 || json[i - 1] < '0' || json[i - 1] > '9')) {
            /* JSON allows no leading zero, and the reference reader's serde_json refuses one
             * (src/de.rs, parse_integer: "There can be only one leading '0'") */
            size_t en = i;
            while (en < len && json[en] >= '0' && json[en] <= '9')
                en++;
            return tq_fail(e, TQ_EDATA, "%s: header: number '%.*s' at byte offset %zu has a leading zero",
                           f->path, (int)(en - i > 40 ? 40 : en - i), json + i, 8 + i);
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
            size_t b = i, en = i;
            while (b > 0 && strchr("0123456789.eE+-", json[b - 1]))
                b--;
            while (en < len && strchr("0123456789.eE+-", json[en]))
                en++;
            return tq_fail(e, TQ_EDATA, "%s: header: number '%.*s' at byte offset %zu is not a plain non-negative integer",
                           f->path, (int)(en - b > 40 ? 40 : en - b), json + b, 8 + b);
        }
    }
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The header's strings, on the JSON text (cJSON keeps a key only up to an escaped NUL, and
 * takes raw control bytes): no string holds a raw byte below 0x20 (JSON forbids them; the
 * reference reader's serde_json refuses them), and no tensor name (a key of the top-level
 * object) holds a control character, raw or escaped: U+0000-U+001F or U+007F. Run on a header
 * cJSON has parsed, so strings are well formed. */
static int check_strings(const tq_st_file *f, const char *json, size_t len, tq_err *e)
{
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == '"') {
            size_t start = i, bad_at = 0;
            unsigned bad = 0x100; /* the first control character: none yet */
            for (i++; i < len && json[i] != '"'; i++) {
                unsigned char b = (unsigned char)json[i];
                unsigned ch = b;
                size_t at = i;
                if (b < 0x20)
                    return tq_fail(e, TQ_EDATA, "%s: header: raw control byte 0x%02x in a string at byte offset %zu "
                                   "(JSON escapes them)", f->path, b, 8 + i);
                if (b == '\\' && i + 1 < len) {
                    char x = json[++i];
                    ch = x == 'b' ? 0x08 : x == 'f' ? 0x0c : x == 'n' ? 0x0a : x == 'r' ? 0x0d : x == 't' ? 0x09 : 0x100;
                    if (x == 'u' && i + 4 < len) {
                        int v = 0;
                        for (int k = 1; k <= 4 && v >= 0; k++)
                            v = hexval(json[i + k]) < 0 ? -1 : v * 16 + hexval(json[i + k]);
                        ch = v >= 0 ? (unsigned)v : 0x100;
                        i += 4;
                    }
                }
                if ((ch < 0x20 || ch == 0x7f) && bad == 0x100)
                    bad = ch, bad_at = at;
            }
            size_t k = i + 1;
            while (k < len && (json[k] == ' ' || json[k] == '\t' || json[k] == '\n' || json[k] == '\r'))
                k++;
            if (depth == 1 && k < len && json[k] == ':' && bad != 0x100)
                return tq_fail(e, TQ_EDATA, "%s: tensor name at byte offset %zu holds the control character U+%04X "
                               "(byte offset %zu)", f->path, 8 + start, bad, 8 + bad_at);
        }
    }
    return 0;
}

/* Before cJSON builds a tree (about 32 bytes per byte of "[0,0,0,...]"), refuse shapes no
 * valid header has: nesting deeper than 4 or arrays longer than 64 elements. A valid header
 * nests 3 deep (header, entry, shape) and its arrays have at most TQ_MAX_DIMS elements. */
static int check_structure(const tq_st_file *f, const char *json, size_t len, tq_err *e)
{
    enum { MAX_DEPTH = 4, MAX_ARRAY = 64 };
    int depth = 0, in_str = 0;
    char kind[MAX_DEPTH + 1];
    size_t count[MAX_DEPTH + 1], start[MAX_DEPTH + 1];
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (depth == MAX_DEPTH)
                return tq_fail(e, TQ_EDATA, "%s: header nests deeper than %d levels (byte offset %zu)", f->path, MAX_DEPTH, 8 + i);
            kind[depth] = c;
            count[depth] = 0;
            start[depth] = i;
            depth++;
        } else if (c == ']' || c == '}') {
            if (depth > 0)
                depth--;
        } else if (c == ',' && depth > 0 && kind[depth - 1] == '[' && ++count[depth - 1] >= MAX_ARRAY) {
            return tq_fail(e, TQ_EDATA, "%s: header: array at byte offset %zu has more than %d elements", f->path,
                           8 + start[depth - 1], MAX_ARRAY);
        }
    }
    return 0;
}

void tq_st_free_header(tq_st_file *f)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_vals[i]);
    }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->header_json);
    f->tensors = NULL;
    f->meta_keys = f->meta_vals = NULL;
    f->header_json = NULL;
    f->n_tensors = f->n_meta = 0;
}

/* owned: json is a malloc'd buffer of len + 1 bytes that f takes over (saves copying a
 * header of up to 100 MB); else it is copied. */
static int parse_header(tq_st_file *f, char *json, int owned, size_t len, uint64_t file_size, tq_err *e)
{
    const char *P = f->path;
    f->header_len = len;
    f->data_start = 8 + (uint64_t)len;
    f->file_size = file_size;
    if (len == 0)
        return tq_fail(e, TQ_EDATA, "%s: header length is 0 (expected a JSON object)", P);
    size_t bad;
    if (memchr(json, 0, len))
        return tq_fail(e, TQ_EDATA, "%s: header contains a NUL byte at byte offset %zu", P,
                       8 + (size_t)((const char *)memchr(json, 0, len) - json));
    if (tq_utf8_check(json, len, &bad) != 0)
        return tq_fail(e, TQ_EDATA, "%s: header is not valid UTF-8 (byte offset %zu)", P, 8 + bad);
    /* cJSON skips a byte order mark; the reference reader's serde_json::from_str does not
     * (U+FEFF is not JSON whitespace), nor does JSON (RFC 8259, 8.1) allow one */
    if (len >= 3 && !memcmp(json, "\xef\xbb\xbf", 3))
        return tq_fail(e, TQ_EDATA, "%s: header starts with a UTF-8 byte order mark (byte offset 8), not JSON", P);
    if (check_structure(f, json, len, e) != 0)
        return -1;
    if (owned) {
        f->header_json = json;
    } else {
        if (!(f->header_json = tq_malloc(len + 1, e)))
            return -1;
        memcpy(f->header_json, json, len);
    }
    f->header_json[len] = 0;

    size_t at;
    int trailing;
    cJSON *root = tq_json_parse(f->header_json, len, &at, &trailing);
    if (!root)
        return trailing ? tq_fail(e, TQ_EDATA, "%s: header has bytes after the JSON object (byte offset %zu)", P, 8 + at)
                        : tq_fail(e, TQ_EDATA, "%s: header is not valid JSON (near byte offset %zu)", P, 8 + at);
    int rc = -1;
    tq_tensor_info **order = NULL;
    if (!cJSON_IsObject(root)) {
        tq_fail(e, TQ_EDATA, "%s: header JSON is %s, not an object", P, json_type(root));
        goto out;
    }
    if (check_strings(f, f->header_json, len, e) != 0)
        goto out;
    size_t n = 0;
    int n_metadata = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (!strcmp(c->string, "__metadata__"))
            n_metadata++;
        else
            n++;
    }
    if (n_metadata > 1) {
        tq_fail(e, TQ_EDATA, "%s: __metadata__ appears twice", P);
        goto out;
    }
    if (!(f->tensors = tq_calloc(n ? n : 1, sizeof *f->tensors, e)))
        goto out;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (!strcmp(c->string, "__metadata__")) {
            if (parse_metadata(f, c, e) != 0)
                goto out;
            continue;
        }
        tq_tensor_info *t = &f->tensors[f->n_tensors];
        uint64_t b, en;
        if (!(t->name = tq_strdup(c->string, e)))
            goto out;
        f->n_tensors++;
        if (parse_entry(f, c->string, c, t, &b, &en, e) != 0)
            goto out;
        t->offset = b; /* relative for now */
    }
    if (check_number_tokens(f, f->header_json, len, e) != 0)
        goto out;

    qsort(f->tensors, n, sizeof *f->tensors, cmp_name);
    for (size_t i = 1; i < n; i++) {
        if (!strcmp(f->tensors[i - 1].name, f->tensors[i].name)) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s' appears twice in the header", P, f->tensors[i].name);
            goto out;
        }
    }
    if (!(order = tq_calloc(n ? n : 1, sizeof *order, e)))
        goto out;
    for (size_t i = 0; i < n; i++)
        order[i] = &f->tensors[i];
    qsort(order, n, sizeof *order, cmp_begin);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        tq_tensor_info *t = order[i];
        unsigned long long b = t->offset, en = t->offset + t->nbytes;
        if (t->offset > pos) {
            if (i == 0)
                tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets [%llu, %llu]: the first tensor must start at 0", P, t->name, b, en);
            else
                tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets [%llu, %llu] leave a gap after previous tensor '%s' ending at %llu",
                        P, t->name, b, en, order[i - 1]->name, (unsigned long long)pos);
            goto out;
        }
        if (t->offset < pos) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets [%llu, %llu] overlap previous tensor '%s' ending at %llu",
                    P, t->name, b, en, order[i - 1]->name, (unsigned long long)pos);
            goto out;
        }
        pos = t->offset + t->nbytes;
    }
    uint64_t need;
    /* pos <= 2^53 (offsets are exact JSON integers), data_start <= 2^27: no overflow */
    need = pos + f->data_start;
    if (need > file_size) {
        if (n)
            tq_fail(e, TQ_EDATA, "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the file (data ends at byte %llu, file is %llu bytes)",
                    P, order[n - 1]->name, (unsigned long long)order[n - 1]->offset, (unsigned long long)pos,
                    (unsigned long long)need, (unsigned long long)file_size);
        else
            tq_fail(e, TQ_EDATA, "%s: header runs past the end of the file (%llu bytes)", P, (unsigned long long)file_size);
        goto out;
    }
    if (need < file_size) {
        tq_fail(e, TQ_EDATA, "%s: %llu trailing byte%s after the last tensor's data, which ends at byte %llu", P,
                (unsigned long long)(file_size - need), file_size - need == 1 ? "" : "s", (unsigned long long)need);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        f->tensors[i].offset += f->data_start;
    rc = 0;
out:
    free(order);
    cJSON_Delete(root);
    return rc;
}

static int parse_header_any(tq_st_file *f, char *json, int owned, size_t len, uint64_t file_size, tq_err *e)
{
    tq_st_free_header(f);
    const char *saved = f->path;
    if (!saved)
        f->path = (char *)"<safetensors>";
    int rc = parse_header(f, json, owned, len, file_size, e);
    if (owned && !f->header_json)
        free(json); /* refused before f took it over */
    if (rc != 0)
        tq_st_free_header(f);
    if (!saved)
        f->path = NULL;
    return rc;
}

int tq_st_parse_header(tq_st_file *f, const char *json, size_t len, uint64_t file_size, tq_err *e)
{
    return parse_header_any(f, (char *)json, 0, len, file_size, e);
}

/* The framing is wrong: if the file is clearly something else (JSON, GGUF, a layer file, a
 * bundle), say so instead of what its first 8 bytes mean as a header length. */
static int not_safetensors(int fd, uint64_t file_size, const char *path, tq_err *e)
{
    tq_content_kind k = tq_sniff_fd(fd, file_size);
    if (k == TQ_CONTENT_UNKNOWN || k == TQ_CONTENT_SAFETENSORS)
        return 0;
    size_t n = strlen(path);
    if (k == TQ_CONTENT_GGUF && n >= 5 && !strcmp(path + n - 5, ".gguf")) /* named as what it is: read where GGUF is not */
        return tq_fail(e, TQ_EDATA, "%s: a GGUF file, where a safetensors file is expected (tq-convert makes a "
                       "safetensors model of a GGUF file)", path);
    return tq_fail(e, TQ_EDATA, "%s: %s, not a safetensors file: %s", path, tq_content_name(k), tq_content_hint(k));
}

int tq_st_read_header(int fd, uint64_t file_size, const char *path, char **json, uint64_t *len, tq_err *e)
{
    if (file_size < 8 && not_safetensors(fd, file_size, path, e))
        return -1;
    if (file_size < 8)
        return tq_fail(e, TQ_EDATA, "%s: file is %llu bytes, too short for the 8-byte header length", path,
                       (unsigned long long)file_size);
    unsigned char lb[8];
    if (tq_pread_full(fd, lb, 8, 0, path, e) != 0)
        return -1;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | lb[i];
    if ((n > TQ_ST_MAX_HEADER || n > file_size - 8) && not_safetensors(fd, file_size, path, e))
        return -1;
    if (n > TQ_ST_MAX_HEADER)
        return tq_fail(e, TQ_EDATA, "%s: header length %llu exceeds the limit of %llu bytes", path,
                       (unsigned long long)n, (unsigned long long)TQ_ST_MAX_HEADER);
    if (n > file_size - 8)
        return tq_fail(e, TQ_EDATA, "%s: header length %llu runs past the end of the file (%llu bytes)", path,
                       (unsigned long long)n, (unsigned long long)file_size);
    char *hdr = tq_malloc((size_t)n + 1, e);
    if (!hdr)
        return -1;
    if (tq_pread_full(fd, hdr, (size_t)n, 8, path, e) != 0) {
        free(hdr);
        return -1;
    }
    hdr[n] = 0;
    *json = hdr;
    *len = n;
    return 0;
}

int tq_st_open(tq_st_file **out, const char *path, tq_err *e)
{
    *out = NULL;
    tq_st_file *f = tq_calloc(1, sizeof *f, e);
    if (!f)
        return -1;
    f->fd = -1;
    if (!(f->path = tq_strdup(path, e)))
        goto fail;
    uint64_t size;
    f->fd = tq_open_regular(path, &size, e);
    if (f->fd < 0)
        goto fail;
    char *hdr;
    uint64_t n;
    if (tq_st_read_header(f->fd, size, path, &hdr, &n, e) != 0)
        goto fail;
    if (parse_header_any(f, hdr, 1, n, size, e) != 0)
        goto fail;
    *out = f;
    return 0;
fail:
    tq_st_close(f);
    return -1;
}

void tq_st_close(tq_st_file *f)
{
    if (!f)
        return;
    tq_st_free_header(f);
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f);
}

const tq_tensor_info *tq_st_find(const tq_st_file *f, const char *name)
{
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0)
            return &f->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *tq_st_meta(const tq_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key))
            return f->meta_vals[i];
    return NULL;
}

int tq_st_read(const tq_st_file *f, const tq_tensor_info *t, uint64_t off, void *buf, size_t len, tq_err *e)
{
    uint64_t end;
    if (tq_add_u64(off, len, &end) != 0 || end > t->nbytes)
        return tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': read of %zu bytes at %llu is outside its %llu bytes", f->path,
                       t->name, len, (unsigned long long)off, (unsigned long long)t->nbytes);
    return tq_pread_full(f->fd, buf, len, t->offset + off, f->path, e);
}
