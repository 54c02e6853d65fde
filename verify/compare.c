/* tq-verify compare: tensor-by-tensor bit-exact comparison of two models, whatever their
 * sharding or layout (plain model directory, split directory through the split code's
 * model view). */
#include "verify/verify_internal.h"
#include "formats/formats.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CMP_CHUNK (4u << 20)

static int add_diff(tq_cmp_report *r, const char *tensor, const char *fmt, ...)
{
    tq_cmp_diff *nv = realloc(r->v, (r->n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    r->v = nv;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->v[r->n].tensor = strdup(tensor);
    r->v[r->n].detail = strdup(buf);
    r->n++;
    return 0;
}

void tq_cmp_report_free(tq_cmp_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].tensor);
        free(r->v[i].detail);
    }
    free(r->v);
    memset(r, 0, sizeof *r);
}

cJSON *tq_cmp_report_json(const tq_cmp_report *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "equal", r->n == 0);
    cJSON_AddNumberToObject(j, "tensors_compared", (double)r->tensors_compared);
    cJSON_AddNumberToObject(j, "tensors_equal", (double)r->tensors_equal);
    cJSON_AddNumberToObject(j, "bytes_compared", (double)r->bytes);
    cJSON *a = cJSON_AddArrayToObject(j, "differences");
    for (size_t i = 0; i < r->n; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "tensor", r->v[i].tensor);
        cJSON_AddStringToObject(d, "detail", r->v[i].detail);
        cJSON_AddItemToArray(a, d);
    }
    return j;
}

static void shape_str(const tq_tensor_info *t, char *out, size_t cap)
{
    size_t o = 0;
    o += (size_t)snprintf(out + o, cap - o, "[");
    for (int d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(out + o, cap - o, d ? ", %llu" : "%llu", (unsigned long long)t->shape[d]);
    if (o < cap)
        snprintf(out + o, cap - o, "]");
}

static int compare_tensor(const tq_model_tensor *a, const tq_model_tensor *b, char *ba, char *bb,
                          tq_cmp_report *r, tq_err *e)
{
    const tq_tensor_info *x = &a->info, *y = &b->info;
    r->tensors_compared++;
    int same_shape = x->ndim == y->ndim;
    for (int d = 0; same_shape && d < x->ndim; d++)
        same_shape = x->shape[d] == y->shape[d];
    if (x->dtype != y->dtype || !same_shape) {
        char sa[160], sb[160];
        shape_str(x, sa, sizeof sa);
        shape_str(y, sb, sizeof sb);
        return add_diff(r, x->name, "dtype/shape differ: A %s %s, B %s %s", tq_dtype_name(x->dtype), sa,
                        tq_dtype_name(y->dtype), sb) ? tq_fail(e, TQ_ENOMEM, "out of memory") : 0;
    }
    for (uint64_t off = 0; off < x->nbytes;) {
        size_t n = x->nbytes - off < CMP_CHUNK ? (size_t)(x->nbytes - off) : CMP_CHUNK;
        if (tq_model_read(a, off, ba, n, e) != 0)
            return tq_err_prefix(e, "A");
        if (tq_model_read(b, off, bb, n, e) != 0)
            return tq_err_prefix(e, "B");
        r->bytes += n;
        if (memcmp(ba, bb, n)) {
            size_t k = 0;
            while (ba[k] == bb[k])
                k++;
            uint64_t at = off + k;
            size_t es = tq_dtype_size(x->dtype);
            return add_diff(r, x->name, "first difference at byte %llu (element %llu): A 0x%02x, B 0x%02x",
                            (unsigned long long)at, (unsigned long long)(es ? at / es : at),
                            (unsigned char)ba[k], (unsigned char)bb[k]) ? tq_fail(e, TQ_ENOMEM, "out of memory") : 0;
        }
        off += n;
    }
    r->tensors_equal++;
    return 0;
}

int tq_compare_model_objs(const tq_model *a, const tq_model *b, tq_cmp_report *r, tq_err *e)
{
    char *ba = tq_malloc(CMP_CHUNK, e), *bb = tq_malloc(CMP_CHUNK, e);
    int rc = (ba && bb) ? 0 : -1;
    size_t i = 0, k = 0;
    while (rc == 0 && (i < a->n_tensors || k < b->n_tensors)) {
        int c = i >= a->n_tensors ? 1 : k >= b->n_tensors ? -1
                                      : strcmp(a->tensors[i].info.name, b->tensors[k].info.name);
        if (c < 0) {
            if (add_diff(r, a->tensors[i].info.name, "only in A"))
                rc = tq_fail(e, TQ_ENOMEM, "out of memory");
            i++;
        } else if (c > 0) {
            if (add_diff(r, b->tensors[k].info.name, "only in B"))
                rc = tq_fail(e, TQ_ENOMEM, "out of memory");
            k++;
        } else {
            rc = compare_tensor(&a->tensors[i], &b->tensors[k], ba, bb, r, e);
            i++;
            k++;
        }
    }
    free(ba);
    free(bb);
    return rc;
}

int tq_compare_models(const char *a, const char *b, tq_cmp_report *r, tq_err *e)
{
    memset(r, 0, sizeof *r);
    tq_model *ma = NULL, *mb = NULL;
    if (tq_verify_open_view(a, b, &ma, e) != 0)
        return -1;
    if (tq_verify_open_view(b, a, &mb, e) != 0) {
        tq_model_close(ma);
        return -1;
    }
    int rc = tq_compare_model_objs(ma, mb, r, e);
    tq_model_close(ma);
    tq_model_close(mb);
    return rc;
}
