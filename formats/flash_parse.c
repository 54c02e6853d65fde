/* Parsing moe_flash_v1 / flash_aligned_v1 layer-file headers. The header page is hostile
 * input: every number is checked to be an exact integer, every size product and offset sum
 * overflow-checked, every tensor inside its block (or file) and disjoint from the others. */
#include "formats/flash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    tq_dtype dt;
    const char *mlx;
} dtype_names[] = {
    {TQ_DT_BOOL, "bool"},       {TQ_DT_U8, "uint8"},     {TQ_DT_I8, "int8"},
    {TQ_DT_U16, "uint16"},      {TQ_DT_I16, "int16"},    {TQ_DT_F16, "float16"},
    {TQ_DT_BF16, "bfloat16"},   {TQ_DT_U32, "uint32"},   {TQ_DT_I32, "int32"},
    {TQ_DT_F32, "float32"},     {TQ_DT_F64, "float64"},  {TQ_DT_U64, "uint64"},
    {TQ_DT_I64, "int64"},
};

const char *tq_flash_dtype_name(tq_dtype d)
{
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (dtype_names[i].dt == d)
            return dtype_names[i].mlx;
    return tq_dtype_name(d); /* no MLX spelling (F8_*): the safetensors one */
}

int tq_flash_dtype_parse(const char *s, tq_dtype *out)
{
    if (strncmp(s, "mlx.core.", 9) == 0)
        s += 9;
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (strcmp(dtype_names[i].mlx, s) == 0) {
            *out = dtype_names[i].dt;
            return 0;
        }
    return tq_dtype_from_name(s, out);
}

int tq_flash_json_u64(const cJSON *obj, const char *key, uint64_t *out, const char *path,
                    const char *what, tq_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return tq_fail(e, TQ_EDATA, "%s: header: %s has no '%s'", path, what, key);
    if (tq_json_u64(v, out) != 0)
        return tq_fail(e, TQ_EDATA, "%s: header: %s '%s' is not a non-negative integer", path, what, key);
    return 0;
}

void tq_flash_header_free(tq_flash_header *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n_tensors; i++)
        free(h->tensors[i].name);
    free(h->tensors);
    memset(h, 0, sizeof *h);
}

static int cmp_offset(const void *a, const void *b)
{
    const tq_flash_tensor *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    /* zero-byte tensors share offsets; keep the order total */
    return strcmp(x->name, y->name);
}

/* One tensor entry {offset-key, nbytes, dtype, shape-key}. */
static int parse_tensor(tq_flash_tensor *t, const cJSON *v, const char *off_key,
                        const char *shape_key, const char *path, tq_err *e)
{
    char what[300];
    snprintf(what, sizeof what, "tensor '%s'", t->name);
    if (!cJSON_IsObject(v))
        return tq_fail(e, TQ_EDATA, "%s: header: %s is not an object", path, what);
    if (tq_flash_json_u64(v, off_key, &t->offset, path, what, e) != 0 ||
        tq_flash_json_u64(v, "nbytes", &t->nbytes, path, what, e) != 0)
        return -1;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    if (!cJSON_IsString(dt) || tq_flash_dtype_parse(dt->valuestring, &t->dtype) != 0)
        return tq_fail(e, TQ_EDATA, "%s: header: %s has a missing or unknown dtype", path, what);
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(v, shape_key);
    if (!cJSON_IsArray(sh))
        return tq_fail(e, TQ_EDATA, "%s: header: %s has no '%s' array", path, what, shape_key);
    int n = cJSON_GetArraySize(sh);
    if (n > TQ_MAX_DIMS)
        return tq_fail(e, TQ_EDATA, "%s: header: %s has %d dimensions (at most %d)", path, what, n, TQ_MAX_DIMS);
    t->ndim = n;
    uint64_t prod = tq_dtype_size(t->dtype);
    int i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        if (tq_json_u64(d, &t->shape[i]) != 0)
            return tq_fail(e, TQ_EDATA, "%s: header: %s: '%s'[%d] is not a non-negative integer", path, what, shape_key, i);
        if (tq_mul_u64(prod, t->shape[i], &prod) != 0)
            return tq_fail(e, TQ_EDATA, "%s: header: %s: shape size overflows", path, what);
    }
    if (prod != t->nbytes)
        return tq_fail(e, TQ_EDATA, "%s: header: %s: nbytes %llu but shape and dtype give %llu", path,
                       what, (unsigned long long)t->nbytes, (unsigned long long)prod);
    return 0;
}

static int parse_tensors(tq_flash_header *h, const cJSON *obj, const char *path, tq_err *e)
{
    const int moe = h->kind == TQ_FLASH_MOE;
    if (!cJSON_IsObject(obj))
        return tq_fail(e, TQ_EDATA, "%s: header: 'tensors' is not an object", path);
    size_t n = 0;
    for (const cJSON *c = obj->child; c; c = c->next)
        n++;
    if (n == 0)
        return tq_fail(e, TQ_EDATA, "%s: header: no tensors", path);
    h->tensors = tq_calloc(n, sizeof *h->tensors, e);
    if (!h->tensors)
        return -1;
    for (const cJSON *c = obj->child; c; c = c->next) {
        tq_flash_tensor *t = &h->tensors[h->n_tensors];
        if (!c->string || !*c->string)
            return tq_fail(e, TQ_EDATA, "%s: header: tensor with an empty name", path);
        t->name = tq_strdup(c->string, e);
        if (!t->name)
            return -1;
        h->n_tensors++;
        if (parse_tensor(t, c, moe ? "inner_offset" : "offset", moe ? "shape_per_expert" : "shape", path, e) != 0)
            return -1;
    }
    qsort(h->tensors, h->n_tensors, sizeof *h->tensors, cmp_offset);
    /* Disjoint, inside the block (moe) or inside [page, total) and page-aligned (dense). */
    uint64_t lo = moe ? 0 : h->page_size, hi = moe ? h->expert_block_size : h->total_size;
    uint64_t prev_end = lo;
    for (size_t i = 0; i < h->n_tensors; i++) {
        tq_flash_tensor *t = &h->tensors[i];
        for (size_t j = 0; j < i; j++)
            if (strcmp(h->tensors[j].name, t->name) == 0)
                return tq_fail(e, TQ_EDATA, "%s: header: tensor '%s' appears twice", path, t->name);
        uint64_t end;
        if (tq_add_u64(t->offset, t->nbytes, &end) != 0 || t->offset < lo || end > hi)
            return tq_fail(e, TQ_EDATA, "%s: header: tensor '%s': bytes [%llu, %llu) are outside the %s [%llu, %llu)",
                           path, t->name, (unsigned long long)t->offset,
                           (unsigned long long)(t->offset + t->nbytes), moe ? "expert block" : "tensor area",
                           (unsigned long long)lo, (unsigned long long)hi);
        if (t->offset < prev_end)
            return tq_fail(e, TQ_EDATA, "%s: header: tensor '%s' at offset %llu overlaps the previous tensor",
                           path, t->name, (unsigned long long)t->offset);
        if (!moe && t->offset % h->page_size)
            return tq_fail(e, TQ_EDATA, "%s: header: tensor '%s': offset %llu is not a multiple of page_size %llu",
                           path, t->name, (unsigned long long)t->offset, (unsigned long long)h->page_size);
        prev_end = end;
    }
    return 0;
}

static int parse_json(tq_flash_header *h, const cJSON *j, uint64_t file_size, const char *path, tq_err *e)
{
    if (!cJSON_IsObject(j))
        return tq_fail(e, TQ_EDATA, "%s: header is not a JSON object", path);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    const cJSON *lay0 = cJSON_GetObjectItemCaseSensitive(j, "layout");
    /* mlx-sniper writes MoE headers without format, page_size and total_size, and keeps
     * num_experts at the top level (docs/compatibility.md, mlx-sniper): exactly the keys
     * layer_idx, num_experts and a 'layout' object identify them. */
    int peer = !fmt && cJSON_IsObject(lay0);
    for (const cJSON *k = j->child; peer && k; k = k->next)
        peer = !strcmp(k->string, "layer_idx") || !strcmp(k->string, "num_experts") || !strcmp(k->string, "layout");
    if (!peer && !cJSON_IsString(fmt))
        return tq_fail(e, TQ_EDATA, "%s: header has no 'format' string", path);
    if (peer || strcmp(fmt->valuestring, "moe_flash_v1") == 0)
        h->kind = TQ_FLASH_MOE;
    else if (strcmp(fmt->valuestring, "flash_aligned_v1") == 0)
        h->kind = TQ_FLASH_DENSE;
    else
        return tq_fail(e, TQ_EDATA, "%s: header: unknown format '%.64s' (expected moe_flash_v1 or flash_aligned_v1)",
                       path, fmt->valuestring);
    if (tq_flash_json_u64(j, "layer_idx", &h->layer_idx, path, "header", e) != 0)
        return -1;
    if (peer) {
        /* its readers read exactly one 16384-byte page; the size is checked below */
        h->page_size = TQ_FLASH_DEFAULT_ALIGN;
        h->total_size = file_size;
        if (file_size == UINT64_MAX)
            return tq_fail(e, TQ_EDATA, "%s: header has no 'total_size' and the file size is unknown", path);
    } else if (tq_flash_json_u64(j, "page_size", &h->page_size, path, "header", e) != 0 ||
               tq_flash_json_u64(j, "total_size", &h->total_size, path, "header", e) != 0) {
        return -1;
    }
    if (h->page_size < TQ_FLASH_MIN_ALIGN || h->page_size > TQ_FLASH_MAX_ALIGN || (h->page_size & (h->page_size - 1)))
        return tq_fail(e, TQ_EDATA, "%s: header: page_size %llu is not a power of two in [%u, %u]", path,
                       (unsigned long long)h->page_size, TQ_FLASH_MIN_ALIGN, TQ_FLASH_MAX_ALIGN);
    if (file_size != UINT64_MAX && h->total_size != file_size)
        return tq_fail(e, TQ_EDATA, "%s: header: total_size %llu but the file is %llu bytes", path,
                       (unsigned long long)h->total_size, (unsigned long long)file_size);
    if (h->total_size < h->page_size)
        return tq_fail(e, TQ_EDATA, "%s: header: total_size %llu is smaller than the header page", path,
                       (unsigned long long)h->total_size);
    const cJSON *tensors;
    if (h->kind == TQ_FLASH_MOE) {
        const cJSON *lay = cJSON_GetObjectItemCaseSensitive(j, "layout");
        if (!cJSON_IsObject(lay))
            return tq_fail(e, TQ_EDATA, "%s: header has no 'layout' object", path);
        const cJSON *ne = cJSON_GetObjectItemCaseSensitive(lay, "num_experts");
        if (tq_flash_json_u64(ne || !peer ? lay : j, "num_experts", &h->num_experts, path, ne || !peer ? "layout" : "header", e) != 0 ||
            tq_flash_json_u64(lay, "expert_block_size", &h->expert_block_size, path, "layout", e) != 0 ||
            tq_flash_json_u64(lay, "data_start", &h->data_start, path, "layout", e) != 0)
            return -1;
        if (h->num_experts == 0 || h->num_experts > TQ_FLASH_MAX_EXPERTS)
            return tq_fail(e, TQ_EDATA, "%s: header: num_experts %llu is not in [1, %u]", path,
                           (unsigned long long)h->num_experts, TQ_FLASH_MAX_EXPERTS);
        if (h->expert_block_size == 0 || h->expert_block_size % h->page_size)
            return tq_fail(e, TQ_EDATA, "%s: header: expert_block_size %llu is not a positive multiple of page_size %llu",
                           path, (unsigned long long)h->expert_block_size, (unsigned long long)h->page_size);
        if (h->data_start < h->page_size || h->data_start % h->page_size)
            return tq_fail(e, TQ_EDATA, "%s: header: data_start %llu is not a multiple of page_size %llu after the header page",
                           path, (unsigned long long)h->data_start, (unsigned long long)h->page_size);
        uint64_t total;
        if (tq_mul_u64(h->num_experts, h->expert_block_size, &total) != 0 ||
            tq_add_u64(total, h->data_start, &total) != 0 || total != h->total_size)
            return tq_fail(e, TQ_EDATA, "%s: header: total_size %llu != data_start + num_experts * expert_block_size",
                           path, (unsigned long long)h->total_size);
        tensors = cJSON_GetObjectItemCaseSensitive(lay, "tensors");
    } else {
        h->data_start = h->page_size;
        tensors = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    }
    return parse_tensors(h, tensors, path, e);
}

int tq_flash_parse(tq_flash_header *h, const void *buf, size_t len, uint64_t file_size,
                   const char *path, tq_err *e)
{
    memset(h, 0, sizeof *h);
    const char *p = buf;
    const char *nul = memchr(p, 0, len);
    size_t jlen = nul ? (size_t)(nul - p) : len;
    if (jlen == 0)
        return tq_fail(e, TQ_EDATA, "%s: header page is empty (not a moe_flash_v1/flash_aligned_v1 file)", path);
    if (!nul)
        return tq_fail(e, TQ_EDATA, "%s: header JSON is not NUL-terminated within the first %zu bytes", path, len);
    size_t at;
    int trailing;
    cJSON *j = tq_json_parse(p, jlen, &at, &trailing);
    if (!j)
        return trailing ? tq_fail(e, TQ_EDATA, "%s: header: bytes after the JSON object at offset %zu", path, at)
                        : tq_fail(e, TQ_EDATA, "%s: header is not valid JSON (near byte %zu)", path, at);
    int rc = parse_json(h, j, file_size, path, e);
    cJSON_Delete(j);
    if (rc == 0 && jlen >= h->page_size)
        rc = tq_fail(e, TQ_EDATA, "%s: header JSON (%zu bytes) does not fit in its %llu-byte page", path, jlen,
                     (unsigned long long)h->page_size);
    if (rc == 0) {
        size_t pad_end = len < h->page_size ? len : (size_t)h->page_size;
        for (size_t i = jlen; i < pad_end; i++)
            if (p[i] != 0) {
                rc = tq_fail(e, TQ_EDATA, "%s: header page: non-NUL byte at offset %zu after the JSON", path, i);
                break;
            }
    }
    if (rc != 0)
        tq_flash_header_free(h);
    return rc;
}

int tq_flash_read(tq_flash_header *h, const char *path, tq_err *e)
{
    memset(h, 0, sizeof *h);
    uint64_t size;
    int fd = tq_open_regular(path, &size, e);
    if (fd < 0)
        return -1;
    /* The page size is only known after parsing: read 16 KiB, more while there is no NUL. */
    size_t want = TQ_FLASH_DEFAULT_ALIGN;
    char *buf = NULL;
    int rc = -1;
    for (;;) {
        size_t n = size < want ? (size_t)size : want;
        char *nb = realloc(buf, n ? n : 1);
        if (!nb) {
            tq_fail(e, TQ_ENOMEM, "%s: out of memory reading the header", path);
            break;
        }
        buf = nb;
        if (tq_pread_full(fd, buf, n, 0, path, e) != 0)
            break;
        if (memchr(buf, 0, n) || n == size || want >= TQ_FLASH_MAX_ALIGN) {
            rc = tq_flash_parse(h, buf, n, size, path, e);
            if (rc == 0 && n < h->page_size && size >= h->page_size) {
                /* check the NUL padding of the rest of the page too */
                want = (size_t)h->page_size;
                tq_flash_header_free(h);
                rc = -1;
                continue;
            }
            break;
        }
        want *= 4;
    }
    free(buf);
    close(fd);
    return rc;
}

static const char *skip_mlp(const char *s)
{
    return strncmp(s, "mlp.", 4) == 0 ? s + 4 : s;
}

const tq_flash_tensor *tq_flash_find(const tq_flash_header *h, const char *name)
{
    for (size_t i = 0; i < h->n_tensors; i++)
        if (strcmp(skip_mlp(h->tensors[i].name), skip_mlp(name)) == 0)
            return &h->tensors[i];
    return NULL;
}

int tq_flash_expert_range(const tq_flash_header *h, uint64_t expert, uint64_t *offset,
                          uint64_t *length, tq_err *e)
{
    if (h->kind != TQ_FLASH_MOE)
        return tq_fail(e, TQ_EUSAGE, "layer %llu: not a moe_flash_v1 file", (unsigned long long)h->layer_idx);
    if (expert >= h->num_experts)
        return tq_fail(e, TQ_EUSAGE, "layer %llu: expert %llu out of range (%llu experts)",
                       (unsigned long long)h->layer_idx, (unsigned long long)expert,
                       (unsigned long long)h->num_experts);
    /* parse checked data_start + num_experts * block == total_size, so no overflow here */
    *offset = h->data_start + expert * h->expert_block_size;
    *length = h->expert_block_size;
    return 0;
}
