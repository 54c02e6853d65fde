/* GGUF header parser (man tq-formats(5), GGUF INPUT). The file is hostile: every count and
 * length is checked against the bytes that remain before it is used, and nothing is
 * allocated from a count that the file's size cannot back. */
#include "formats/formats.h"
#include "formats/gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32u

/* Parse result distinct from -1: the header runs past the bytes given but the file is
 * longer, so tq_gguf_open retries with more of it. */
#define NEED_MORE (-2)

typedef struct cursor {
    const unsigned char *p;
    uint64_t len;        /* bytes available */
    uint64_t pos;
    uint64_t file_size;
    const char *name;    /* file name for messages */
    tq_err *e;
    uint64_t arr_elems;  /* metadata array elements seen so far */
} cursor;

/* Fails when n bytes are not available at the cursor: NEED_MORE if the file goes on. */
static int need(cursor *c, uint64_t n, const char *what)
{
    uint64_t end;
    if (tq_add_u64(c->pos, n, &end) == 0) {
        if (end <= c->len)
            return 0;
        if (end <= c->file_size)
            return NEED_MORE;
    }
    return tq_fail(c->e, TQ_EDATA, "%s: %s runs past the end of the file (offset %llu, %llu bytes, file is %llu bytes)",
                   c->name, what, (unsigned long long)c->pos, (unsigned long long)n,
                   (unsigned long long)c->file_size);
}

static uint64_t rd_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static uint32_t rd_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int get_u32(cursor *c, uint32_t *v, const char *what)
{
    int r = need(c, 4, what);
    if (r)
        return r;
    *v = rd_u32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int get_u64(cursor *c, uint64_t *v, const char *what)
{
    int r = need(c, 8, what);
    if (r)
        return r;
    *v = rd_u64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

/* A length-prefixed string; off and len locate its bytes in the buffer. */
static int get_str(cursor *c, uint64_t *off, uint64_t *len, const char *what)
{
    uint64_t at = c->pos;
    int r = get_u64(c, len, what);
    if (r)
        return r;
    if (*len > c->file_size - c->pos)
        return tq_fail(c->e, TQ_EDATA, "%s: %s length %llu runs past the end of the file (offset %llu)",
                       c->name, what, (unsigned long long)*len, (unsigned long long)at);
    r = need(c, *len, what);
    if (r)
        return r;
    *off = c->pos;
    c->pos += *len;
    return 0;
}

/* A name (key or tensor name) as a C string: no NUL bytes, bounded length; with ctl, no
 * control bytes (0x01-0x1f, 0x7f) either. */
static int get_name(cursor *c, char **out, const char *what, int ctl)
{
    uint64_t at = c->pos, off, len;
    int r = get_str(c, &off, &len, what);
    if (r)
        return r;
    if (len == 0)
        return tq_fail(c->e, TQ_EDATA, "%s: empty %s (offset %llu)", c->name, what, (unsigned long long)at);
    if (len > TQ_GGUF_MAX_NAME)
        return tq_fail(c->e, TQ_EDATA, "%s: %s of %llu bytes is longer than %d (offset %llu)", c->name,
                       what, (unsigned long long)len, TQ_GGUF_MAX_NAME, (unsigned long long)at);
    if (memchr(c->p + off, 0, len))
        return tq_fail(c->e, TQ_EDATA, "%s: %s contains a NUL byte (offset %llu)", c->name, what,
                       (unsigned long long)at);
    /* Tensor names are printed and compared as C strings: no C0 control byte or DEL either
     * (man tq-formats(5), GGUF INPUT). */
    for (uint64_t i = 0; ctl && i < len; i++)
        if (c->p[off + i] < 0x20 || c->p[off + i] == 0x7f)
            return tq_fail(c->e, TQ_EDATA, "%s: %s contains the control byte 0x%02x (offset %llu)", c->name, what,
                           c->p[off + i], (unsigned long long)(off + i));
    char *s = tq_malloc(len + 1, c->e);
    if (!s)
        return -1;
    memcpy(s, c->p + off, len);
    s[len] = 0;
    *out = s;
    return 0;
}

static const uint8_t scalar_size[TQ_GGUF_VTYPE_COUNT] = {
    [TQ_GGUF_U8] = 1, [TQ_GGUF_I8] = 1, [TQ_GGUF_U16] = 2, [TQ_GGUF_I16] = 2,
    [TQ_GGUF_U32] = 4, [TQ_GGUF_I32] = 4, [TQ_GGUF_F32] = 4, [TQ_GGUF_BOOL] = 1,
    [TQ_GGUF_U64] = 8, [TQ_GGUF_I64] = 8, [TQ_GGUF_F64] = 8,
};

const char *tq_gguf_vtype_name(uint32_t t)
{
    static const char *n[TQ_GGUF_VTYPE_COUNT] = {"uint8", "int8", "uint16", "int16", "uint32",
                                                 "int32", "float32", "bool", "string", "array",
                                                 "uint64", "int64", "float64"};
    return t < TQ_GGUF_VTYPE_COUNT ? n[t] : "invalid";
}

/* Skips (validating) one value of type t; depth counts array nesting. */
static int skip_value(cursor *c, uint32_t t, int depth, const char *key)
{
    if (t >= TQ_GGUF_VTYPE_COUNT)
        return tq_fail(c->e, TQ_EDATA, "%s: key '%s': invalid value type %u (offset %llu)", c->name, key,
                       t, (unsigned long long)c->pos);
    if (t == TQ_GGUF_STRING) {
        uint64_t off, len;
        return get_str(c, &off, &len, "string value");
    }
    if (t != TQ_GGUF_ARRAY) {
        int r = need(c, scalar_size[t], "metadata value");
        if (r)
            return r;
        if (t == TQ_GGUF_BOOL && c->p[c->pos] > 1)
            return tq_fail(c->e, TQ_EDATA, "%s: key '%s': bool value %u is not 0 or 1 (offset %llu)", c->name,
                           key, c->p[c->pos], (unsigned long long)c->pos);
        c->pos += scalar_size[t];
        return 0;
    }
    if (depth >= TQ_GGUF_MAX_ARRAY_DEPTH)
        return tq_fail(c->e, TQ_EDATA, "%s: key '%s': arrays nested deeper than %d (offset %llu)", c->name,
                       key, TQ_GGUF_MAX_ARRAY_DEPTH, (unsigned long long)c->pos);
    uint32_t et;
    uint64_t n, at = c->pos;
    int r = get_u32(c, &et, "array type");
    if (!r)
        r = get_u64(c, &n, "array length");
    if (r)
        return r;
    if (et >= TQ_GGUF_VTYPE_COUNT)
        return tq_fail(c->e, TQ_EDATA, "%s: key '%s': invalid array element type %u (offset %llu)", c->name,
                       key, et, (unsigned long long)at);
    if (n > TQ_GGUF_MAX_ARRAY_ELEMS || c->arr_elems + n > TQ_GGUF_MAX_ARRAY_ELEMS)
        return tq_fail(c->e, TQ_EDATA, "%s: key '%s': metadata arrays hold more than %llu elements (offset %llu)",
                       c->name, key, (unsigned long long)TQ_GGUF_MAX_ARRAY_ELEMS, (unsigned long long)at);
    c->arr_elems += n;
    /* Every element takes at least one byte (strings 8, arrays 12): a count the rest of the
     * file cannot hold is rejected before walking it. */
    uint64_t min_el = et == TQ_GGUF_STRING ? 8 : et == TQ_GGUF_ARRAY ? 12 : scalar_size[et];
    uint64_t total;
    if (tq_mul_u64(n, min_el, &total) != 0 || total > c->file_size - (c->pos < c->file_size ? c->pos : c->file_size))
        return tq_fail(c->e, TQ_EDATA, "%s: key '%s': array of %llu %s runs past the end of the file (offset %llu)",
                       c->name, key, (unsigned long long)n, tq_gguf_vtype_name(et), (unsigned long long)at);
    if (et != TQ_GGUF_STRING && et != TQ_GGUF_ARRAY) {
        r = need(c, total, "array data");
        if (r)
            return r;
        if (et == TQ_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->p[c->pos + i] > 1)
                    return tq_fail(c->e, TQ_EDATA, "%s: key '%s': bool value %u is not 0 or 1 (offset %llu)",
                                   c->name, key, c->p[c->pos + i], (unsigned long long)(c->pos + i));
        c->pos += total;
        return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if ((r = skip_value(c, et, depth + 1, key)) != 0)
            return r;
    return 0;
}

static int parse_kv(cursor *c, tq_gguf_kv *kv)
{
    int r = get_name(c, &kv->key, "metadata key", 0);
    if (!r)
        r = get_u32(c, &kv->type, "metadata value type");
    if (r)
        return r;
    if (kv->type >= TQ_GGUF_VTYPE_COUNT)
        return tq_fail(c->e, TQ_EDATA, "%s: key '%s': invalid value type %u (offset %llu)", c->name, kv->key,
                       kv->type, (unsigned long long)(c->pos - 4));
    if (kv->type == TQ_GGUF_ARRAY) {
        kv->off = c->pos;
        r = skip_value(c, TQ_GGUF_ARRAY, 0, kv->key);
        if (r)
            return r;
        kv->arr_type = rd_u32(c->p + kv->off);
        kv->arr_n = rd_u64(c->p + kv->off + 4);
        kv->off += 12;
        return 0;
    }
    if (kv->type == TQ_GGUF_STRING)
        return get_str(c, &kv->off, &kv->len, "string value");
    kv->off = c->pos;
    r = skip_value(c, kv->type, 0, kv->key);
    if (r)
        return r;
    const unsigned char *p = c->p + kv->off;
    switch (kv->type) {
    case TQ_GGUF_U8: case TQ_GGUF_BOOL: kv->num.u = p[0]; break;
    case TQ_GGUF_I8: kv->num.i = (int8_t)p[0]; break;
    case TQ_GGUF_U16: kv->num.u = (uint64_t)p[0] | (uint64_t)p[1] << 8; break;
    case TQ_GGUF_I16: kv->num.i = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case TQ_GGUF_U32: kv->num.u = rd_u32(p); break;
    case TQ_GGUF_I32: kv->num.i = (int32_t)rd_u32(p); break;
    case TQ_GGUF_U64: kv->num.u = rd_u64(p); break;
    case TQ_GGUF_I64: kv->num.i = (int64_t)rd_u64(p); break;
    case TQ_GGUF_F32: { uint32_t b = rd_u32(p); float f; memcpy(&f, &b, 4); kv->num.f = f; break; }
    case TQ_GGUF_F64: { uint64_t b = rd_u64(p); memcpy(&kv->num.f, &b, 8); break; }
    default: break;
    }
    return 0;
}

static int parse_tensor_info(cursor *c, tq_gguf_tensor *t)
{
    int r = get_name(c, &t->name, "tensor name", 1);
    if (!r)
        r = get_u32(c, &t->n_dims, "tensor n_dims");
    if (r)
        return r;
    if (t->n_dims > TQ_GGUF_MAX_DIMS)
        return tq_fail(c->e, TQ_EDATA, "%s: tensor '%s': n_dims %u is more than %d (offset %llu)", c->name,
                       t->name, t->n_dims, TQ_GGUF_MAX_DIMS, (unsigned long long)(c->pos - 4));
    for (int d = 0; d < TQ_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if ((r = get_u64(c, &t->ne[d], "tensor dimensions")) != 0)
            return r;
    uint64_t at = c->pos;
    if ((r = get_u32(c, &t->type, "tensor type")) != 0 || (r = get_u64(c, &t->offset, "tensor offset")) != 0)
        return r;
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (t->ne[d] > (uint64_t)INT64_MAX || tq_mul_u64(n, t->ne[d], &n) != 0 || n > (uint64_t)INT64_MAX)
            return tq_fail(c->e, TQ_EDATA, "%s: tensor '%s': element count overflows (dimension %u is %llu)",
                           c->name, t->name, d, (unsigned long long)t->ne[d]);
    t->nelem = n;
    uint32_t be, bb;
    if (tq_ggml_type_block(t->type, &be, &bb) != 0)
        return tq_fail(c->e, TQ_EDATA, "%s: tensor '%s': unknown ggml type id %u (offset %llu)", c->name,
                       t->name, t->type, (unsigned long long)at);
    if (t->ne[0] % be != 0)
        return tq_fail(c->e, TQ_EDATA, "%s: tensor '%s': ne[0] = %llu is not a multiple of the %s block size %u",
                       c->name, t->name, (unsigned long long)t->ne[0], tq_ggml_type_name(t->type), be);
    if (tq_mul_u64(n / be, bb, &t->nbytes) != 0)
        return tq_fail(c->e, TQ_EDATA, "%s: tensor '%s': byte size overflows", c->name, t->name);
    return 0;
}

/* Offset order; at one offset a zero-byte tensor first (it takes no room), then by name, so
 * the order and every message are the same on every platform. */
static int cmp_off(const void *a, const void *b)
{
    const tq_gguf_tensor *x = *(tq_gguf_tensor *const *)a, *y = *(tq_gguf_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(tq_gguf_tensor *const *)a)->name, (*(tq_gguf_tensor *const *)b)->name);
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp((*(tq_gguf_kv *const *)a)->key, (*(tq_gguf_kv *const *)b)->key);
}

/* Bytes [from, to) of the file are all zero: 0, or the file offset of the first that is not
 * in *at (1). They come from the header buffer where it holds them, else by pread in
 * bounded pieces; NEED_MORE for a buffer parse without them. */
static int nonzero_at(const tq_gguf_file *f, const cursor *c, uint64_t from, uint64_t to, uint64_t *at)
{
    for (; from < to && from < c->len; from++)
        if (c->p[from]) {
            *at = from;
            return 1;
        }
    if (from >= to)
        return 0;
    if (f->fd < 0)
        return NEED_MORE;
    unsigned char buf[4096];
    while (from < to) {
        size_t n = to - from < sizeof buf ? (size_t)(to - from) : sizeof buf;
        if (tq_pread_full(f->fd, buf, n, from, c->name, c->e) != 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            if (buf[i]) {
                *at = from + i;
                return 1;
            }
        from += n;
    }
    return 0;
}

/* Alignment, data section placement, per-tensor ranges, overlaps, duplicates, and the data
 * section as ggml lays it out: the header padded with zeros to the alignment, then every
 * tensor's data, each starting at the aligned end of the one before (ggml's gguf.cpp: the
 * writer gguf_write_out pads with zero bytes after the header and after every tensor, and
 * the reader gguf_init_from_reader refuses a tensor whose offset is not the running sum of
 * the padded sizes before it). After the last tensor's data only its zero padding may follow;
 * that padding may be left off (llama.cpp's loader, llama_tensor_weight in
 * src/llama-model-loader.h, needs each tensor's bytes inside the file, no more). Tensors may
 * be listed in any order. A tensor count one too low, or a data section shifted against the
 * records, leaves bytes that belong to no tensor: refused, naming the offset. */
static int check_layout(tq_gguf_file *f, cursor *c)
{
    tq_err *e = c->e;
    const tq_gguf_kv *al = tq_gguf_find_kv(f, "general.alignment");
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (al) {
        if (al->type != TQ_GGUF_U32)
            return tq_fail(e, TQ_EDATA, "%s: general.alignment has type %s, expected uint32", c->name,
                           tq_gguf_vtype_name(al->type));
        if (al->num.u == 0 || (al->num.u & (al->num.u - 1)) != 0)
            return tq_fail(e, TQ_EDATA, "%s: general.alignment %llu is not a power of two", c->name,
                           (unsigned long long)al->num.u);
        f->alignment = al->num.u;
    }
    f->header_len = c->pos;
    uint64_t pad = (f->alignment - f->header_len % f->alignment) % f->alignment;
    f->data_start = f->header_len + pad;
    size_t n = f->n_tensors;
    uint64_t at;
    if (n == 0) {
        /* No data section: the file ends at the header or at its padding (ggml pads even
         * then; its reader does not look). */
        uint64_t end = f->file_size < f->data_start ? f->file_size : f->data_start;
        int r = nonzero_at(f, c, f->header_len, end, &at);
        if (r == 1)
            return tq_fail(e, TQ_EDATA, "%s: padding after the header is not zero (offset %llu)", c->name,
                           (unsigned long long)at);
        if (r)
            return r;
        if (f->file_size > f->data_start)
            return tq_fail(e, TQ_EDATA, "%s: %llu bytes at offset %llu follow a header of no tensors",
                           c->name, (unsigned long long)(f->file_size - f->data_start),
                           (unsigned long long)f->data_start);
        return 0;
    }
    if (f->data_start > f->file_size)
        return tq_fail(e, TQ_EDATA, "%s: data section starts at %llu, past the end of the file (%llu bytes)",
                       c->name, (unsigned long long)f->data_start, (unsigned long long)f->file_size);
    int zr = nonzero_at(f, c, f->header_len, f->data_start, &at);
    if (zr == 1)
        return tq_fail(e, TQ_EDATA, "%s: padding before the data section (offset %llu) is not zero (offset %llu)",
                       c->name, (unsigned long long)f->data_start, (unsigned long long)at);
    if (zr)
        return zr;
    uint64_t data_len = f->file_size - f->data_start;
    tq_gguf_tensor **v = tq_malloc(n * sizeof *v, e);
    if (!v)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        tq_gguf_tensor *t = &f->tensors[i];
        v[i] = t;
        if (t->offset % f->alignment != 0)
            rc = tq_fail(e, TQ_EDATA, "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                         c->name, t->name, (unsigned long long)t->offset, (unsigned long long)f->alignment);
        else if (t->offset > data_len || t->nbytes > data_len - t->offset)
            rc = tq_fail(e, TQ_EDATA, "%s: tensor '%s': data [%llu, +%llu) lies outside the %llu-byte data section",
                         c->name, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                         (unsigned long long)data_len);
    }
    if (!rc) {
        qsort(v, n, sizeof *v, cmp_name);
        for (size_t i = 1; i < n && !rc; i++)
            if (strcmp(v[i - 1]->name, v[i]->name) == 0)
                rc = tq_fail(e, TQ_EDATA, "%s: duplicate tensor name '%s'", c->name, v[i]->name);
    }
    /* In offset order each tensor starts where the padded data before it ends (next); every
     * offset and end is inside the data section (checked above), so nothing overflows. */
    uint64_t next = 0, end = 0;
    const tq_gguf_tensor *last = NULL; /* the last tensor holding bytes */
    if (!rc)
        qsort(v, n, sizeof *v, cmp_off);
    for (size_t i = 0; i < n && !rc; i++) {
        const tq_gguf_tensor *t = v[i];
        if (t->offset < next)
            rc = tq_fail(e, TQ_EDATA, "%s: tensor '%s' (data at %llu) overlaps tensor '%s' (data [%llu, %llu))",
                         c->name, t->name, (unsigned long long)t->offset, last->name,
                         (unsigned long long)last->offset, (unsigned long long)(last->offset + last->nbytes));
        else if (t->offset > next)
            rc = tq_fail(e, TQ_EDATA, "%s: tensor '%s': data at %llu, but the data before it ends at %llu: "
                         "bytes [%llu, %llu) of the file belong to no tensor", c->name, t->name,
                         (unsigned long long)t->offset, (unsigned long long)next,
                         (unsigned long long)(f->data_start + next), (unsigned long long)(f->data_start + t->offset));
        else if (t->nbytes > 0) {
            last = t;
            end = t->offset + t->nbytes;
            (void)tq_align_up(end, f->alignment, &next); /* end <= file size: no overflow */
        }
    }
    free(v);
    if (rc)
        return rc;
    if (data_len > next)
        return tq_fail(e, TQ_EDATA, "%s: %llu bytes at offset %llu follow the last tensor's data and padding "
                       "and belong to no tensor (tensor_count is %llu)", c->name,
                       (unsigned long long)(data_len - next), (unsigned long long)(f->data_start + next),
                       (unsigned long long)n);
    zr = nonzero_at(f, c, f->data_start + end, f->file_size, &at);
    if (zr == 1)
        return tq_fail(e, TQ_EDATA, "%s: padding after the last tensor's data is not zero (offset %llu)", c->name,
                       (unsigned long long)at);
    return zr;
}

static int check_dup_keys(tq_gguf_file *f, cursor *c)
{
    if (f->n_kv < 2)
        return 0;
    tq_gguf_kv **v = tq_malloc(f->n_kv * sizeof *v, c->e);
    if (!v)
        return -1;
    for (size_t i = 0; i < f->n_kv; i++)
        v[i] = &f->kv[i];
    qsort(v, f->n_kv, sizeof *v, cmp_key);
    int rc = 0;
    for (size_t i = 1; i < f->n_kv && !rc; i++)
        if (strcmp(v[i - 1]->key, v[i]->key) == 0)
            rc = tq_fail(c->e, TQ_EDATA, "%s: duplicate metadata key '%s'", c->name, v[i]->key);
    free(v);
    return rc;
}

static void free_contents(tq_gguf_file *f)
{
    for (size_t i = 0; i < f->n_kv; i++)
        free(f->kv[i].key);
    for (size_t i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    f->kv = NULL;
    f->tensors = NULL;
    f->n_kv = f->n_tensors = 0;
}

/* Parses buf into f (kv and tensors; f->header not touched). */
static int parse(tq_gguf_file *f, const char *name, const unsigned char *buf, uint64_t len,
                 uint64_t file_size, tq_err *e)
{
    cursor c = {buf, len, 0, file_size, name, e, 0};
    int r;
    if (file_size < 4 || (len >= 4 && memcmp(buf, "GGUF", 4) != 0)) {
        if (len < 4 && file_size >= 4)
            return NEED_MORE;
        tq_content_kind k = tq_sniff(buf, (size_t)len, file_size);
        if (k != TQ_CONTENT_UNKNOWN && k != TQ_CONTENT_GGUF) /* say what it is instead */
            return tq_fail(e, TQ_EDATA, "%s: %s, not a GGUF file (bad magic): %s", name, tq_content_name(k),
                           tq_content_hint(k));
        return tq_fail(e, TQ_EDATA, "%s: not a GGUF file (bad magic)", name);
    }
    c.pos = 4;
    uint64_t tc, kc;
    if ((r = get_u32(&c, &f->version, "version")) != 0)
        return r;
    if (f->version == 0x03000000u || f->version == 0x02000000u)
        return tq_fail(e, TQ_EDATA, "%s: big-endian GGUF is not supported", name);
    if (f->version != 2 && f->version != 3)
        return tq_fail(e, TQ_EDATA, "%s: GGUF version %u is not supported (only 2 and 3)", name, f->version);
    if ((r = get_u64(&c, &tc, "tensor_count")) != 0 || (r = get_u64(&c, &kc, "kv_count")) != 0)
        return r;
    /* Smallest kv: 8-byte key length + 1 key byte + 4-byte type + 1 value byte; smallest
     * tensor info: 8 + 1 + 4 (n_dims) + 4 (type) + 8 (offset). */
    uint64_t rest = file_size - c.pos;
    if (kc > rest / 14)
        return tq_fail(e, TQ_EDATA, "%s: kv_count %llu cannot fit in a file of %llu bytes", name,
                       (unsigned long long)kc, (unsigned long long)file_size);
    if (tc > rest / 25)
        return tq_fail(e, TQ_EDATA, "%s: tensor_count %llu cannot fit in a file of %llu bytes", name,
                       (unsigned long long)tc, (unsigned long long)file_size);
    f->kv = tq_calloc(kc ? kc : 1, sizeof *f->kv, e);
    f->tensors = tq_calloc(tc ? tc : 1, sizeof *f->tensors, e);
    if (!f->kv || !f->tensors)
        return -1;
    for (uint64_t i = 0; i < kc; i++) {
        f->n_kv = i + 1;
        if ((r = parse_kv(&c, &f->kv[i])) != 0)
            return r;
    }
    if ((r = check_dup_keys(f, &c)) != 0)
        return r;
    for (uint64_t i = 0; i < tc; i++) {
        f->n_tensors = i + 1;
        if ((r = parse_tensor_info(&c, &f->tensors[i])) != 0)
            return r;
    }
    return check_layout(f, &c);
}

static tq_gguf_file *new_file(const char *name, tq_err *e)
{
    tq_gguf_file *f = tq_calloc(1, sizeof *f, e);
    if (!f)
        return NULL;
    f->fd = -1;
    f->path = tq_strdup(name, e);
    if (!f->path) {
        free(f);
        return NULL;
    }
    return f;
}

int tq_gguf_parse(tq_gguf_file **out, const char *name, const void *buf, size_t len,
                  uint64_t file_size, tq_err *e)
{
    *out = NULL;
    tq_gguf_file *f = new_file(name, e);
    if (!f)
        return -1;
    f->file_size = file_size;
    if (len > file_size)
        len = (size_t)file_size;
    f->header = tq_malloc(len ? len : 1, e);
    if (!f->header) {
        tq_gguf_close(f);
        return -1;
    }
    memcpy(f->header, buf, len);
    int r = parse(f, name, f->header, len, file_size, e);
    if (r == NEED_MORE)
        r = tq_fail(e, TQ_EDATA, "%s: header runs past the %zu bytes given", name, len);
    if (r) {
        tq_gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int tq_gguf_open(tq_gguf_file **out, const char *path, tq_err *e)
{
    *out = NULL;
    tq_gguf_file *f = new_file(path, e);
    if (!f)
        return -1;
    f->fd = tq_open_regular(path, &f->file_size, e);
    if (f->fd < 0) {
        tq_gguf_close(f);
        return -1;
    }
    /* Read a prefix; grow it (doubling) while the header runs on. */
    uint64_t want = 1u << 20;
    for (;;) {
        uint64_t len = want < f->file_size ? want : f->file_size;
        free(f->header);
        f->header = tq_malloc(len ? len : 1, e);
        if (!f->header || tq_pread_full(f->fd, f->header, len, 0, path, e) != 0) {
            tq_gguf_close(f);
            return -1;
        }
        free_contents(f);
        int r = parse(f, path, f->header, len, f->file_size, e);
        if (r == 0)
            break;
        if (r != NEED_MORE) {
            tq_gguf_close(f);
            return -1;
        }
        if (len >= TQ_GGUF_MAX_HEADER) {
            tq_fail(e, TQ_EDATA, "%s: header is larger than %llu bytes", path,
                    (unsigned long long)TQ_GGUF_MAX_HEADER);
            tq_gguf_close(f);
            return -1;
        }
        want = len * 2 > TQ_GGUF_MAX_HEADER ? TQ_GGUF_MAX_HEADER : len * 2;
    }
    *out = f;
    return 0;
}

void tq_gguf_close(tq_gguf_file *f)
{
    if (!f)
        return;
    free_contents(f);
    if (f->fd >= 0)
        close(f->fd);
    free(f->header);
    free(f->path);
    free(f);
}

const tq_gguf_kv *tq_gguf_find_kv(const tq_gguf_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, key) == 0)
            return &f->kv[i];
    return NULL;
}

const tq_gguf_tensor *tq_gguf_find_tensor(const tq_gguf_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

int tq_gguf_check_key(const tq_gguf_file *f, const char *key, tq_gguf_want want, tq_err *e)
{
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, key);
    if (!kv)
        return 0;
    uint32_t t = kv->type;
    int is_uint = t == TQ_GGUF_U8 || t == TQ_GGUF_U16 || t == TQ_GGUF_U32 || t == TQ_GGUF_U64;
    int is_int = t == TQ_GGUF_I8 || t == TQ_GGUF_I16 || t == TQ_GGUF_I32 || t == TQ_GGUF_I64;
    int ok = want == TQ_GGUF_WANT_STR ? t == TQ_GGUF_STRING
           : want == TQ_GGUF_WANT_BOOL ? t == TQ_GGUF_BOOL
           : want == TQ_GGUF_WANT_NUM ? is_uint || is_int || t == TQ_GGUF_F32 || t == TQ_GGUF_F64
                                      : is_uint || is_int;
    const char *what = want == TQ_GGUF_WANT_STR ? "a string" : want == TQ_GGUF_WANT_BOOL ? "a bool"
                     : want == TQ_GGUF_WANT_NUM ? "a number" : "a non-negative integer";
    if (!ok)
        return tq_fail(e, TQ_EDATA, "%s: key '%s' has type %s, expected %s", f->path, key,
                       t == TQ_GGUF_ARRAY ? "array" : tq_gguf_vtype_name(t), what);
    if (want == TQ_GGUF_WANT_UINT && is_int && kv->num.i < 0)
        return tq_fail(e, TQ_EDATA, "%s: key '%s' is %lld, expected %s", f->path, key, (long long)kv->num.i, what);
    return 0;
}

int tq_gguf_get_u64(const tq_gguf_file *f, const char *key, uint64_t *out)
{
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, key);
    if (!kv)
        return -1;
    switch (kv->type) {
    case TQ_GGUF_U8: case TQ_GGUF_U16: case TQ_GGUF_U32: case TQ_GGUF_U64:
        *out = kv->num.u;
        return 0;
    case TQ_GGUF_I8: case TQ_GGUF_I16: case TQ_GGUF_I32: case TQ_GGUF_I64:
        if (kv->num.i < 0)
            return -1;
        *out = (uint64_t)kv->num.i;
        return 0;
    default:
        return -1;
    }
}

int tq_gguf_get_f64(const tq_gguf_file *f, const char *key, double *out)
{
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, key);
    if (!kv)
        return -1;
    switch (kv->type) {
    case TQ_GGUF_F32: case TQ_GGUF_F64: *out = kv->num.f; return 0;
    case TQ_GGUF_U8: case TQ_GGUF_U16: case TQ_GGUF_U32: case TQ_GGUF_U64: *out = (double)kv->num.u; return 0;
    case TQ_GGUF_I8: case TQ_GGUF_I16: case TQ_GGUF_I32: case TQ_GGUF_I64: *out = (double)kv->num.i; return 0;
    default: return -1;
    }
}

char *tq_gguf_get_str(const tq_gguf_file *f, const char *key)
{
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, key);
    if (!kv || kv->type != TQ_GGUF_STRING)
        return NULL;
    char *s = malloc(kv->len + 1);
    if (!s)
        return NULL;
    memcpy(s, f->header + kv->off, kv->len);
    s[kv->len] = 0;
    return s;
}

int tq_gguf_read_f32(const tq_gguf_file *f, const tq_gguf_tensor *t, uint64_t first, uint64_t n,
                     float *dst, tq_err *e)
{
    if (!tq_ggml_type_can_dequant(t->type)) {
        const char *tn = tq_ggml_type_name(t->type);
        return tq_fail(e, TQ_EUNSUP, "%s: tensor '%s': ggml type %s (%u) cannot be dequantized (ggml has no "
                       "dequantization for it either)", f->path, t->name, tn ? tn : "?", t->type);
    }
    if (first > t->nelem || n > t->nelem - first)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': elements [%llu, +%llu) out of range (%llu elements)", f->path,
                       t->name, (unsigned long long)first, (unsigned long long)n, (unsigned long long)t->nelem);
    if (f->fd < 0)
        return tq_fail(e, TQ_EIO, "%s: no file to read tensor data from", f->path);
    uint32_t be, bb;
    tq_ggml_type_block(t->type, &be, &bb);
    /* Scratch for at most CHUNK_BLOCKS blocks and their values, sized to the request. */
    enum { CHUNK_BLOCKS = 4096 };
    uint64_t span = (first % be + n + be - 1) / be;
    size_t cap = span < CHUNK_BLOCKS ? (size_t)span : CHUNK_BLOCKS;
    unsigned char *qbuf = tq_malloc(cap * bb, e);
    float *fbuf = NULL; /* only for a first or last block that is partly wanted */
    if (!qbuf)
        return -1;
    int rc = 0;
    uint64_t done = 0;
    while (done < n && !rc) {
        uint64_t el = first + done;
        uint64_t blk = el / be, skip = el % be;
        uint64_t want_el = n - done;
        uint64_t nblk = (skip + want_el + be - 1) / be;
        if (nblk > cap)
            nblk = cap;
        uint64_t off = f->data_start + t->offset + blk * bb;
        if (tq_pread_full(f->fd, qbuf, nblk * bb, off, f->path, e) != 0) {
            rc = tq_err_prefix(e, "tensor '%s'", t->name);
            break;
        }
        uint64_t bad;
        char why[96];
        if (tq_ggml_check_blocks(t->type, qbuf, nblk, &bad, why, sizeof why) != 0) {
            rc = tq_fail(e, TQ_EDATA, "%s: tensor '%s': block %llu (file offset %llu): %s", f->path, t->name,
                         (unsigned long long)(blk + bad), (unsigned long long)(off + bad * bb), why);
            break;
        }
        uint64_t avail = nblk * be - skip;
        uint64_t cnt = avail < want_el ? avail : want_el;
        if (skip == 0 && cnt == nblk * be) {
            tq_ggml_dequant(t->type, qbuf, dst + done, nblk);
        } else {
            if (!fbuf && !(fbuf = tq_malloc(cap * be * sizeof(float), e))) {
                rc = -1;
                break;
            }
            tq_ggml_dequant(t->type, qbuf, fbuf, nblk);
            memcpy(dst + done, fbuf + skip, cnt * sizeof(float));
        }
        done += cnt;
    }
    free(qbuf);
    free(fbuf);
    return rc;
}

int tq_gguf_read_raw(const tq_gguf_file *f, const tq_gguf_tensor *t, uint64_t first, uint64_t n, void *dst, tq_err *e)
{
    uint32_t be, bb;
    if (tq_ggml_type_block(t->type, &be, &bb) != 0 || be != 1)
        return tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': ggml type %u is a block type, not read raw", f->path, t->name,
                       t->type);
    if (first > t->nelem || n > t->nelem - first)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s': elements [%llu, +%llu) out of range (%llu elements)", f->path,
                       t->name, (unsigned long long)first, (unsigned long long)n, (unsigned long long)t->nelem);
    if (f->fd < 0)
        return tq_fail(e, TQ_EIO, "%s: no file to read tensor data from", f->path);
    if (tq_pread_full(f->fd, dst, n * bb, f->data_start + t->offset + first * bb, f->path, e) != 0)
        return tq_err_prefix(e, "tensor '%s'", t->name);
    return 0;
}
