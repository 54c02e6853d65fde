/* Tests-only GGUF writer: see gguf_writer.h. Aborts on allocation failure. */
#include "gguf_writer.h"
#include "ggml_grids.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gb_bytes(gb *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}
void gb_u8(gb *b, uint8_t v) { gb_bytes(b, &v, 1); }
void gb_u16(gb *b, uint16_t v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    gb_bytes(b, x, 2);
}
void gb_u32(gb *b, uint32_t v)
{
    unsigned char x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    gb_bytes(b, x, 4);
}
void gb_u64(gb *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    gb_bytes(b, x, 8);
}
void gb_f32(gb *b, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    gb_u32(b, u);
}
void gb_f64(gb *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    gb_u64(b, u);
}
void gb_str(gb *b, const char *s)
{
    gb_u64(b, strlen(s));
    gb_bytes(b, s, strlen(s));
}
void gb_free(gb *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void gw_init(gw *w)
{
    memset(w, 0, sizeof *w);
    w->version = 3;
    w->alignment = 32;
}

void gw_free(gw *w)
{
    gb_free(&w->kv);
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    memset(w, 0, sizeof *w);
}

static void key(gw *w, const char *k, uint32_t type)
{
    gb_str(&w->kv, k);
    gb_u32(&w->kv, type);
    w->n_kv++;
}
void gw_kv_u32(gw *w, const char *k, uint32_t v) { key(w, k, 4); gb_u32(&w->kv, v); }
void gw_kv_i32(gw *w, const char *k, int32_t v) { key(w, k, 5); gb_u32(&w->kv, (uint32_t)v); }
void gw_kv_u64(gw *w, const char *k, uint64_t v) { key(w, k, 10); gb_u64(&w->kv, v); }
void gw_kv_f32(gw *w, const char *k, float v) { key(w, k, 6); gb_f32(&w->kv, v); }
void gw_kv_f64(gw *w, const char *k, double v) { key(w, k, 12); gb_f64(&w->kv, v); }
void gw_kv_bool(gw *w, const char *k, int v) { key(w, k, 7); gb_u8(&w->kv, v ? 1 : 0); }
void gw_kv_str(gw *w, const char *k, const char *v) { key(w, k, 8); gb_str(&w->kv, v); }
void gw_kv_str_array(gw *w, const char *k, const char *const *v, size_t n)
{
    key(w, k, 9);
    gb_u32(&w->kv, 8);
    gb_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++)
        gb_str(&w->kv, v[i]);
}
void gw_kv_i32_array(gw *w, const char *k, const int32_t *v, size_t n)
{
    key(w, k, 9);
    gb_u32(&w->kv, 5);
    gb_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++)
        gb_u32(&w->kv, (uint32_t)v[i]);
}
void gw_kv_bool_array(gw *w, const char *k, const int *v, size_t n)
{
    key(w, k, 9);
    gb_u32(&w->kv, 7);
    gb_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++)
        gb_u8(&w->kv, v[i] ? 1 : 0);
}
void gw_kv_f32_array(gw *w, const char *k, const float *v, size_t n)
{
    key(w, k, 9);
    gb_u32(&w->kv, 6);
    gb_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++)
        gb_f32(&w->kv, v[i]);
}
void gw_spm_vocab(gw *w)
{
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "<0x41>", "\xe2\x96\x81", "a", "b",
                                       "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab"};
    static const int32_t types[] = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1};
    static const float scores[] = {0, 0, 0, 0, -1, -2, -3, -4, -5, -6};
    gw_kv_str(w, "tokenizer.ggml.model", "llama");
    gw_kv_str_array(w, "tokenizer.ggml.tokens", toks, 10);
    gw_kv_i32_array(w, "tokenizer.ggml.token_type", types, 10);
    gw_kv_f32_array(w, "tokenizer.ggml.scores", scores, 10);
}

static uint64_t tensor_elems(uint32_t n_dims, const uint64_t *ne)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        n *= ne[d];
    return n;
}

void gw_tensor_add(gw *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                   const void *data, uint64_t nbytes)
{
    w->t = realloc(w->t, (w->n_t + 1) * sizeof *w->t);
    if (!w->t)
        abort();
    /* Every ggml type ggml can dequantize: the byte count must be whole blocks of ne. */
    uint32_t be, bb;
    if (gg_type_geometry(type, &be, &bb) == 0 && (ne[0] % be != 0 || (data && nbytes != tensor_elems(n_dims, ne) / be * bb))) {
        fprintf(stderr, "gguf_writer: tensor '%s': %llu bytes are not whole %s blocks of its shape\n", name,
                (unsigned long long)nbytes, gg_type_name(type));
        abort();
    }
    gw_tensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->n_dims = n_dims;
    t->type = type;
    for (int d = 0; d < 4; d++)
        t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    t->nbytes = nbytes;
    t->data = malloc(nbytes ? nbytes : 1);
    if (!t->name || !t->data)
        abort();
    if (nbytes && data)
        memcpy(t->data, data, nbytes);
}

void gw_tensor_add_lazy(gw *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                        uint64_t nbytes)
{
    gw_tensor_add(w, name, n_dims, ne, type, NULL, 0);
    free(w->t[w->n_t - 1].data);
    w->t[w->n_t - 1].data = NULL;
    w->t[w->n_t - 1].nbytes = nbytes;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void header(const gw *w, gb *out)
{
    gb_bytes(out, "GGUF", 4);
    gb_u32(out, w->version);
    gb_u64(out, w->n_t);
    gb_u64(out, w->n_kv);
    gb_bytes(out, w->kv.p, w->kv.len);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const gw_tensor *t = &w->t[i];
        gb_str(out, t->name);
        gb_u32(out, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            gb_u64(out, t->ne[d]);
        gb_u32(out, t->type);
        gb_u64(out, off);
        off = align_up(off + t->nbytes, w->alignment);
    }
    static const unsigned char zero[4096];
    gb_bytes(out, zero, align_up(out->len, w->alignment) - out->len);
}

void gw_build(const gw *w, gb *out)
{
    static const unsigned char zero[4096];
    header(w, out);
    for (size_t i = 0; i < w->n_t; i++) {
        gb_bytes(out, w->t[i].data, w->t[i].nbytes);
        if (i + 1 < w->n_t)
            gb_bytes(out, zero, align_up(out->len, w->alignment) - out->len);
    }
}

int gw_write_fill(const gw *w, const char *path, gw_fill_fn fill, void *ctx)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    gb h = {0};
    header(w, &h);
    int ok = fwrite(h.p, 1, h.len, f) == h.len;
    static const unsigned char zero[4096];
    uint64_t pos = h.len;
    gb_free(&h);
    size_t cap = 1 << 20;
    unsigned char *chunk = fill ? malloc(cap) : NULL;
    for (size_t i = 0; i < w->n_t && ok; i++) {
        const gw_tensor *t = &w->t[i];
        if (t->data) {
            ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
        } else {
            for (uint64_t off = 0; off < t->nbytes && ok && chunk; off += cap) {
                size_t len = t->nbytes - off < cap ? (size_t)(t->nbytes - off) : cap;
                fill(i, off, chunk, len, ctx);
                ok = fwrite(chunk, 1, len, f) == len;
            }
            ok = ok && (chunk || t->nbytes == 0);
        }
        pos += t->nbytes;
        uint64_t pad = i + 1 < w->n_t ? align_up(pos, w->alignment) - pos : 0;
        ok = ok && fwrite(zero, 1, pad, f) == pad;
        pos += pad;
    }
    free(chunk);
    return fclose(f) == 0 && ok ? 0 : -1;
}

int gw_write(const gw *w, const char *path)
{
    return gw_write_fill(w, path, NULL, NULL);
}

void gw_llama_permute(const void *hf, void *gguf, uint64_t rows, size_t row_bytes, uint64_t n_head)
{
    const unsigned char *src = hf;
    unsigned char *dst = gguf;
    uint64_t D = rows / n_head;
    for (uint64_t h = 0; h < n_head; h++)
        for (uint64_t i = 0; i < D / 2; i++)
            for (uint64_t j = 0; j < 2; j++)
                memcpy(dst + (h * D + i * 2 + j) * row_bytes, src + (h * D + j * (D / 2) + i) * row_bytes, row_bytes);
}
