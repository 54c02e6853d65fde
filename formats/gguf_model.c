/* A GGUF file (or a llama.cpp split set) presented as a tq_model with the row-major shapes:
 * F32/F16/BF16 (and F64, I8..I64) tensors in their stored dtype, block types as the exact F32
 * of their dequantization, read through tq_tensor_source by dequantizing only the blocks that
 * cover the requested bytes. */
#include "formats/formats.h"
#include "formats/gguf_internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct src_tensor {
    const tq_gguf_file *f;
    const tq_gguf_tensor *t;
    uint64_t nelem;     /* presented elements */
    uint64_t row_len;   /* elements per row (ne[0]; 1 for a permuted 1-D bias) */
    uint64_t rows;      /* rows, for the permutation */
    uint64_t n_head;    /* >0: rows are llama-permuted in groups of rows/n_head */
    uint32_t esize;     /* bytes per presented element */
    int raw;            /* one-element type presented as stored; else block type as F32 */
    int shift;          /* gemma3 norm: llama.cpp stored HF's weight + 1, presented minus 1 (F32) */
    tq_dtype narrow;    /* F16/BF16: a 1-D F32 tensor of an F16/BF16 file presented in the file's
                         * type (every value exact in it; see narrow_exact); 0: not */
    /* deepseek2 kv_b_proj joined from llama.cpp's split (t = attn_k_b, t2 = attn_v_b): jh heads
     * of jk key rows then jv value rows, each of row_len (kv_lora_rank) values */
    const tq_gguf_file *f2;
    const tq_gguf_tensor *t2;
    uint64_t jh, jk, jv;
} src_tensor;

typedef struct gguf_source {
    tq_tensor_source base; /* first: tq_model holds &base */
    size_t n_files;
    tq_gguf_file **files;
    size_t n;
    src_tensor *ts;
    char **names;          /* the presented names (tq_model_tensor.info.name points here) */
    size_t n_warnings;
    char **warnings;
} gguf_source;

/* ------------------------------------------------------------------ reads */
/* Elements [first, first+n) of the stored tensor: raw bytes of a one-element type, else f32
 * (minus 1 for a gemma3 norm), else (narrow) those f32 values as F16/BF16. */
static int read_stored(const src_tensor *s, uint64_t first, uint64_t n, unsigned char *dst, tq_err *e)
{
    if (s->raw)
        return tq_gguf_read_raw(s->f, s->t, first, n, dst, e);
    if (!s->narrow) {
        if (tq_gguf_read_f32(s->f, s->t, first, n, (float *)(void *)dst, e))
            return -1;
        for (uint64_t i = 0; s->shift && i < n; i++)
            ((float *)(void *)dst)[i] -= 1.0f;
        return 0;
    }
    float v[1024];
    while (n > 0) {
        uint64_t c = n < 1024 ? n : 1024;
        if (tq_gguf_read_f32(s->f, s->t, first, c, v, e))
            return -1;
        for (uint64_t i = 0; i < c; i++) {
            float x = s->shift ? v[i] - 1.0f : v[i];
            uint16_t h = s->narrow == TQ_DT_F16 ? tq_f32_to_f16(x) : tq_f32_to_bf16(x);
            memcpy(dst + 2 * i, &h, 2);
        }
        first += c, n -= c, dst += 2 * c;
    }
    return 0;
}

/* Elements [first, first+n) of one of the stored tensors of s, as s presents them. */
static int read_part(const src_tensor *s, const tq_gguf_file *f, const tq_gguf_tensor *t, uint64_t first, uint64_t n,
                     unsigned char *dst, tq_err *e)
{
    if (s->raw)
        return tq_gguf_read_raw(f, t, first, n, dst, e);
    return tq_gguf_read_f32(f, t, first, n, (float *)(void *)dst, e);
}

/* llama.cpp's split of DeepSeek's kv_b_proj [H*(K+V), R] (head h: K key rows, then V value
 * rows): attn_k_b holds each head's key rows transposed, stored [H][R][K] (ne K, R, H), and
 * attn_v_b each head's value rows as they are, [H][V][R] (ne R, V, H). Presented row r of head
 * h = r / (K+V), j = r % (K+V): j < K reads column j of k_b's [R][K] head slab, else row j-K
 * of v_b's head. Whole key rows are gathered from one read of the slab rows they need. */
static int read_joined(const src_tensor *s, uint64_t first, uint64_t n, unsigned char *dst, tq_err *e)
{
    const uint64_t R = s->row_len, K = s->jk, per = s->jk + s->jv, es = s->esize;
    unsigned char *slab = NULL;
    int rc = 0;
    while (n > 0 && !rc) {
        uint64_t r = first / R, col = first % R, h = r / per, j = r % per;
        if (j >= K) { /* value row: contiguous in v_b */
            uint64_t cnt = R - col < n ? R - col : n;
            rc = read_part(s, s->f2, s->t2, (h * s->jv + (j - K)) * R + col, cnt, dst, e);
            first += cnt, n -= cnt, dst += cnt * es;
            continue;
        }
        /* key rows j .. j+m-1 of head h (m >= 1; only the first and last may be partial) */
        uint64_t m = 1, cnt = R - col < n ? R - col : n;
        if (col == 0 && cnt == R)
            while (j + m < K && (m + 1) * R <= n)
                m++;
        /* k_b rows c (of K values) in chunks of at most 4096 values; element (c, j) at c*K + j */
        uint64_t chunk = 4096 / K ? 4096 / K : 1;
        if (!slab && !(slab = tq_malloc((size_t)(chunk * K * es), e)))
            return -1;
        for (uint64_t c0 = col; c0 < col + cnt && !rc; c0 += chunk) {
            uint64_t nc = col + cnt - c0 < chunk ? col + cnt - c0 : chunk;
            rc = read_part(s, s->f, s->t, (h * R + c0) * K, nc * K, slab, e);
            for (uint64_t c = 0; c < nc && !rc; c++)
                for (uint64_t q = 0; q < m; q++)
                    memcpy(dst + (q * R + (c0 - col) + c) * es, slab + (c * K + j + q) * es, (size_t)es);
        }
        first += (m - 1) * R + cnt, dst += ((m - 1) * R + cnt) * es, n -= (m - 1) * R + cnt;
    }
    free(slab);
    return rc;
}

/* Elements [first, first+n) of the presented (un-permuted) tensor, esize bytes each. */
static int read_elems(const src_tensor *s, uint64_t first, uint64_t n, unsigned char *dst, tq_err *e)
{
    if (s->t2)
        return read_joined(s, first, n, dst, e);
    if (!s->n_head) /* read_stored subtracts a gemma3 norm's 1 */
        return read_stored(s, first, n, dst, e);
    while (n > 0) {
        uint64_t r = first / s->row_len, col = first % s->row_len;
        uint64_t cnt = s->row_len - col < n ? s->row_len - col : n;
        uint64_t src_row = tq_gguf_unpermute_row(r, s->rows, s->n_head);
        if (read_stored(s, src_row * s->row_len + col, cnt, dst, e) != 0)
            return -1;
        first += cnt;
        n -= cnt;
        dst += cnt * s->esize;
    }
    return 0;
}

static int src_read(const tq_tensor_source *base, uint64_t index, uint64_t off, void *buf, size_t len, tq_err *e)
{
    const gguf_source *g = (const gguf_source *)base;
    if (index >= g->n)
        return tq_fail(e, TQ_EUSAGE, "GGUF source: no tensor %llu", (unsigned long long)index);
    const src_tensor *s = &g->ts[index];
    const uint64_t es = s->esize;
    uint64_t total = s->nelem * es, end;
    if (tq_add_u64(off, len, &end) != 0 || end > total)
        return tq_fail(e, TQ_EUSAGE, "%s: tensor '%s': read [%llu, +%zu) past its %llu bytes", s->f->path, s->t->name,
                       (unsigned long long)off, len, (unsigned long long)total);
    unsigned char *out = buf;
    if (off % es == 0 && len % es == 0 && (s->raw || ((uintptr_t)out % _Alignof(float)) == 0))
        return read_elems(s, off / es, len / es, out, e);
    /* Unaligned request: through a bounded scratch buffer. */
    enum { CHUNK = 1 << 16 };
    float *tmp = tq_malloc(CHUNK * sizeof(float), e);
    if (!tmp)
        return -1;
    const uint64_t cap = CHUNK * sizeof(float) / es;
    while (len > 0) {
        uint64_t el = off / es, skip = off % es;
        uint64_t want_el = (skip + len + es - 1) / es;
        if (want_el > cap)
            want_el = cap;
        if (read_elems(s, el, want_el, (unsigned char *)tmp, e) != 0) {
            free(tmp);
            return -1;
        }
        size_t cnt = want_el * es - skip < len ? (size_t)(want_el * es - skip) : len;
        memcpy(out, (unsigned char *)tmp + skip, cnt);
        out += cnt;
        off += cnt;
        len -= cnt;
    }
    free(tmp);
    return 0;
}

static void src_close(tq_tensor_source *base)
{
    gguf_source *g = (gguf_source *)base;
    if (!g)
        return;
    for (size_t i = 0; i < g->n_files; i++)
        tq_gguf_close(g->files[i]);
    free(g->files);
    free(g->ts);
    tq_free_strv(g->names, g->n);
    tq_free_strv(g->warnings, g->n_warnings);
    free(g);
}

static void warn(gguf_source *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(gguf_source *g, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char **w = realloc(g->warnings, (g->n_warnings + 1) * sizeof *w);
    if (!w)
        return;
    g->warnings = w;
    if ((w[g->n_warnings] = strdup(msg)) != NULL)
        g->n_warnings++;
}

/* ------------------------------------------------------------- split sets */
/* "PREFIX-00002-of-00005.gguf": 0 and the 1-based index/count, or -1. */
static int split_parts(const char *path, size_t *prefix_len, unsigned *idx, unsigned *count)
{
    size_t n = strlen(path);
    const char *tail = "-00000-of-00000.gguf";
    size_t tl = strlen(tail);
    if (n <= tl)
        return -1;
    const char *p = path + n - tl;
    for (size_t i = 0; i < tl; i++) {
        int digit = tail[i] == '0';
        if (digit ? (p[i] < '0' || p[i] > '9') : p[i] != tail[i])
            return -1;
    }
    *prefix_len = n - tl;
    *idx = (unsigned)strtoul(p + 1, NULL, 10);
    *count = (unsigned)strtoul(p + 10, NULL, 10);
    return *idx >= 1 && *count >= 1 && *idx <= *count ? 0 : -1;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The list of files to open for path (a .gguf file, a split piece, or a directory). */
static int resolve_files(const char *path, char ***out, size_t *n_out, tq_err *e)
{
    char *file = NULL;
    if (tq_is_dir(path)) {
        char **names;
        size_t n, found = 0;
        if (tq_list_dir(path, &names, &n, e) != 0)
            return -1;
        const char *first = NULL;
        for (size_t i = 0; i < n; i++)
            if (has_suffix(names[i], ".gguf") && names[i][0] != '.' && !strstr(names[i], ".partial-")) {
                if (!found++)
                    first = names[i];
            }
        size_t pl;
        unsigned idx, cnt;
        if (found == 0 || (found > 1 && (split_parts(first, &pl, &idx, &cnt) != 0 || cnt != found || idx != 1))) {
            tq_free_strv(names, n);
            return found ? tq_fail(e, TQ_EDATA, "%s: holds %zu GGUF files that are not one split set NAME-00001-of-%05zu.gguf",
                                   path, found, found)
                         : tq_fail(e, TQ_EDATA, "%s: no .gguf file", path);
        }
        file = tq_path_join(path, first, e);
        tq_free_strv(names, n);
        if (!file)
            return -1;
    } else {
        file = tq_strdup(path, e);
        if (!file)
            return -1;
    }
    size_t pl;
    unsigned idx, cnt;
    if (split_parts(file, &pl, &idx, &cnt) != 0) {
        char **v = tq_malloc(sizeof *v, e);
        if (!v) {
            free(file);
            return -1;
        }
        v[0] = file;
        *out = v;
        *n_out = 1;
        return 0;
    }
    char **v = tq_calloc(cnt, sizeof *v, e);
    if (!v) {
        free(file);
        return -1;
    }
    for (unsigned i = 0; i < cnt; i++) {
        size_t len = pl + 32;
        v[i] = tq_malloc(len, e);
        if (!v[i]) {
            tq_free_strv(v, i);
            free(file);
            return -1;
        }
        snprintf(v[i], len, "%.*s-%05u-of-%05u.gguf", (int)pl, file, i + 1, cnt);
        if (!tq_exists(v[i])) {
            tq_fail(e, TQ_EDATA, "%s: split set of %u files is missing %s", file, cnt, v[i]);
            tq_free_strv(v, i + 1);
            free(file);
            return -1;
        }
    }
    free(file);
    *out = v;
    *n_out = cnt;
    return 0;
}

/* --------------------------------------------------------------- the model */
/* One-element ggml types keep their dtype (F16 stays F16); block types are presented as the
 * exact F32 of their dequantization (the type's row, gguf_dequant.c). */
static tq_dtype presented_dtype(uint32_t ggml_type, int *raw)
{
    tq_dtype d = TQ_DT_F32;
    *raw = tq_ggml_type_dtype(ggml_type, &d);
    return d;
}

/* llama.cpp's converter writes an F16 or BF16 file (general.file_type LLAMA_FTYPE_MOSTLY_F16
 * = 1 or LLAMA_FTYPE_MOSTLY_BF16 = 32, llama.h: "except 1d tensors") with its 1-D tensors
 * (norms, biases) as F32. The type the file's other weights have, or 0. */
static tq_dtype file_narrow_type(const tq_gguf_file *f)
{
    uint64_t ft;
    if (tq_gguf_get_u64(f, "general.file_type", &ft) != 0)
        return (tq_dtype)0;
    return ft == 1 ? TQ_DT_F16 : ft == 32 ? TQ_DT_BF16 : (tq_dtype)0;
}

/* Every value of the 1-D F32 tensor t (minus 1 when shift) is exactly an F16 (BF16) value:
 * 1 yes, 0 no (or too large to look at: 2^24 values), -1 read error. Then presenting it in that
 * type gives the bytes the F16/BF16 original (safetensors) held, with no value changed. */
static int narrow_exact(const tq_gguf_file *f, const tq_gguf_tensor *t, int shift, tq_dtype dt, tq_err *e)
{
    if (t->type != TQ_GGML_F32 || t->n_dims != 1 || t->nelem > (1u << 24))
        return 0;
    float v[1024];
    for (uint64_t first = 0; first < t->nelem;) {
        uint64_t c = t->nelem - first < 1024 ? t->nelem - first : 1024;
        if (tq_gguf_read_f32(f, t, first, c, v, e))
            return -1;
        for (uint64_t i = 0; i < c; i++) {
            float x = shift ? v[i] - 1.0f : v[i],
                  y = dt == TQ_DT_F16 ? tq_f16_to_f32(tq_f32_to_f16(x)) : tq_bf16_to_f32(tq_f32_to_bf16(x));
            if (memcmp(&x, &y, sizeof x) != 0 || x != x)
                return 0;
        }
        first += c;
    }
    return 1;
}

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const tq_model_tensor *)a)->info.name, ((const tq_model_tensor *)b)->info.name);
}

/* Heads for the permutation of a llama Q or K tensor; 0 with an error on bad metadata. */
static uint64_t perm_heads(const tq_gguf_file *f, tq_gguf_role role, uint64_t rows, const char *name, tq_err *e)
{
    uint64_t h = 0, hkv = 0;
    if (tq_gguf_get_u64(f, "llama.attention.head_count", &h) != 0 || h == 0) {
        tq_fail(e, TQ_EDATA, "%s: tensor '%s': llama.attention.head_count is missing, needed to undo the Q/K permutation",
                f->path, name);
        return 0;
    }
    if (role == TQ_GGUF_ROLE_K && tq_gguf_get_u64(f, "llama.attention.head_count_kv", &hkv) == 0 && hkv > 0)
        h = hkv;
    if (h > rows || rows % h != 0 || (rows / h) % 2 != 0) {
        tq_fail(e, TQ_EDATA, "%s: tensor '%s': %llu rows do not split into %llu heads of an even size", f->path, name,
                (unsigned long long)rows, (unsigned long long)h);
        return 0;
    }
    return h;
}

/* tokenizer.json, tokenizer_config.json and generation_config.json from the vocabulary. */
static int add_tokenizer(tq_model *m, gguf_source *g, const tq_gguf_file *f0, tq_err *e)
{
    static const char *const names[3] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    cJSON *files[3];
    char w[1024];
    if (tq_gguf_tokenizer_files(f0, files, w, sizeof w, e) != 0)
        return -1;
    if (w[0])
        warn(g, "%s", w);
    if (!(m->generated = tq_calloc(3, sizeof *m->generated, e)) ||
        !(m->generated_names = tq_calloc(3, sizeof *m->generated_names, e))) {
        for (int i = 0; i < 3; i++)
            cJSON_Delete(files[i]);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        if (!files[i])
            continue;
        if (!(m->generated_names[m->n_generated] = tq_strdup(names[i], e))) {
            for (int k = i; k < 3; k++)
                cJSON_Delete(files[k]);
            return -1;
        }
        m->generated[m->n_generated++] = files[i];
    }
    return 0;
}

/* deepseek2's attn_k_b / attn_v_b, waiting for their partner. */
typedef struct pending {
    const tq_gguf_file *f;
    const tq_gguf_tensor *t;
    tq_gguf_role role;
} pending;

static pending *grow_pending(pending *p, size_t *n, const tq_gguf_file *f, const tq_gguf_tensor *t, tq_gguf_role role,
                             tq_err *e)
{
    pending *q = realloc(p, (*n + 1) * sizeof *q);
    if (!q) {
        free(p);
        tq_fail(e, TQ_ENOMEM, "out of memory");
        return NULL;
    }
    q[*n].f = f, q[*n].t = t, q[*n].role = role;
    ++*n;
    return q;
}

/* "blk.N.attn_k_b.weight" and "blk.N.attn_v_b.weight" share their layer prefix "blk.N.". */
static int same_layer(const char *a, const char *b)
{
    const char *da = strstr(a, ".attn_"), *db = strstr(b, ".attn_");
    return da && db && da - a == db - b && !strncmp(a, b, (size_t)(da - a));
}

/* Each attn_k_b with its attn_v_b becomes one kv_b_proj, checked against each other and the
 * metadata (read_joined documents the layout). A layer that also has attn_kv_b keeps that. */
static int join_kv_b(tq_model *m, gguf_source *g, const pending *p, size_t n, tq_err *e)
{
    const tq_gguf_file *f0 = g->files[0];
    uint64_t heads = 0, rank = 0;
    (void)tq_gguf_get_u64(f0, "deepseek2.attention.head_count", &heads);
    (void)tq_gguf_get_u64(f0, "deepseek2.attention.kv_lora_rank", &rank);
    for (size_t i = 0; i < n; i++) {
        const pending *k = &p[i], *v = NULL;
        if (k->role != TQ_GGUF_ROLE_K_B) {
            int paired = 0;
            for (size_t j = 0; j < n; j++)
                paired |= p[j].role == TQ_GGUF_ROLE_K_B && same_layer(p[j].t->name, k->t->name);
            if (!paired)
                return tq_fail(e, TQ_EDATA, "%s: tensor '%s' has no attn_k_b beside it (the two are kv_b_proj split)",
                               k->f->path, k->t->name);
            continue;
        }
        for (size_t j = 0; j < n; j++)
            if (p[j].role == TQ_GGUF_ROLE_V_B && same_layer(p[j].t->name, k->t->name))
                v = &p[j];
        if (!v)
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' has no attn_v_b beside it (the two are kv_b_proj split)",
                           k->f->path, k->t->name);
        const uint64_t *kn = k->t->ne, *vn = v->t->ne;
        if (k->t->n_dims != 3 || v->t->n_dims != 3 || kn[1] != vn[0] || kn[2] != vn[2] || (heads && kn[2] != heads) ||
            (rank && kn[1] != rank) || kn[0] == 0 || vn[1] == 0 || kn[1] == 0)
            return tq_fail(e, TQ_EDATA,
                           "%s: tensor '%s' is %u-D ne [%llu, %llu, %llu] and '%s' %u-D ne [%llu, %llu, %llu]: "
                           "expected ne [K, R, H] and [R, V, H] with R = kv_lora_rank (%llu) and H = head_count (%llu)",
                           k->f->path, k->t->name, k->t->n_dims, (unsigned long long)kn[0], (unsigned long long)kn[1],
                           (unsigned long long)kn[2], v->t->name, v->t->n_dims, (unsigned long long)vn[0],
                           (unsigned long long)vn[1], (unsigned long long)vn[2], (unsigned long long)rank,
                           (unsigned long long)heads);
        tq_gguf_role role;
        char *name = tq_gguf_hf_name(tq_gguf_arch_find("deepseek2"), k->t->name, &role);
        if (!name)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        int dup = 0;
        for (size_t t = 0; t < m->n_tensors; t++)
            dup |= !strcmp(m->tensors[t].info.name, name);
        if (dup) { /* llama.cpp forks that keep attn_kv_b too: it is the same matrix */
            warn(g, "%s: '%s' and '%s' are kv_b_proj split; the layer's attn_kv_b is kept instead", k->f->path,
                 k->t->name, v->t->name);
            free(name);
            continue;
        }
        int kraw, vraw;
        tq_dtype kd = presented_dtype(k->t->type, &kraw), vd = presented_dtype(v->t->type, &vraw);
        size_t idx = g->n;
        src_tensor *s = &g->ts[idx];
        tq_model_tensor *mt = &m->tensors[idx];
        memset(s, 0, sizeof *s);
        memset(mt, 0, sizeof *mt);
        s->f = k->f, s->t = k->t, s->f2 = v->f, s->t2 = v->t;
        s->jh = kn[2], s->jk = kn[0], s->jv = vn[1], s->row_len = kn[1];
        s->raw = kraw && vraw && kd == vd;
        mt->info.dtype = s->raw ? kd : TQ_DT_F32;
        s->esize = (uint32_t)tq_dtype_size(mt->info.dtype);
        s->nelem = s->jh * (s->jk + s->jv) * s->row_len;
        mt->info.name = g->names[idx] = name;
        mt->info.ndim = 2;
        mt->info.shape[0] = s->jh * (s->jk + s->jv);
        mt->info.shape[1] = s->row_len;
        mt->info.nelem = s->nelem;
        mt->info.nbytes = s->nelem * s->esize;
        mt->src = &g->base;
        mt->src_index = idx;
        mt->src_type = k->t->type;
        mt->was_quantized = tq_ggml_type_is_quantized(k->t->type) || tq_ggml_type_is_quantized(v->t->type);
        g->n++;
        m->n_tensors = g->n;
    }
    return 0;
}

/* llama.cpp writes llama 3's rope scaling as rope_freqs.weight, one factor per frequency pair;
 * config.json gets the rope_scaling those factors come from (formats/gguf_names.c). */
static int rope_scaling_from(cJSON *config, const tq_gguf_file *f, const tq_gguf_tensor *t, int gemma4, tq_err *e)
{
    if (t->n_dims != 1 || t->nelem == 0 || t->nelem > 65536)
        return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is %u-D with %llu values: expected one factor per rotary pair",
                       f->path, t->name, t->n_dims, (unsigned long long)t->nelem);
    float *v = tq_malloc((size_t)t->nelem * sizeof *v, e);
    if (!v || tq_gguf_read_f32(f, t, 0, t->nelem, v, e)) {
        free(v);
        return -1;
    }
    char why[300];
    int rc = gemma4 ? tq_gguf_gemma4_rope(config, v, t->nelem, why, sizeof why)
                    : tq_gguf_llama3_rope(config, v, t->nelem, why, sizeof why);
    free(v);
    return rc ? tq_fail(e, TQ_EDATA, "%s: tensor '%s': %s", f->path, t->name, why) : 0;
}

static int build(tq_model *m, gguf_source *g, unsigned flags, tq_err *e)
{
    const tq_gguf_file *f0 = g->files[0];
    if (tq_gguf_check_key(f0, "general.architecture", TQ_GGUF_WANT_STR, e))
        return -1;
    char *arch = tq_gguf_get_str(f0, "general.architecture");
    if (!arch && !(arch = strdup("unknown")))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    if (tq_gguf_check_arch_keys(f0, arch, e)) {
        free(arch);
        return -1;
    }
    const tq_gguf_arch *ai = tq_gguf_arch_of(f0, arch);
    int map = tq_gguf_arch_maps_names(ai) && !(flags & TQ_MODEL_KEEP_NAMES);
    if (!tq_gguf_arch_maps_names(ai) && !(flags & TQ_MODEL_KEEP_NAMES))
        warn(g, "%s: architecture '%s' has no HF name mapping%s; tensors keep their GGUF names", f0->path, arch,
             ai ? " (config.json only)" : "");
    size_t total = 0;
    for (size_t i = 0; i < g->n_files; i++)
        total += g->files[i]->n_tensors;
    g->ts = tq_calloc(total ? total : 1, sizeof *g->ts, e);
    g->names = tq_calloc(total ? total : 1, sizeof *g->names, e);
    m->tensors = tq_calloc(total ? total : 1, sizeof *m->tensors, e);
    if (!g->ts || !g->names || !m->tensors) {
        free(arch);
        return -1;
    }
    int rc = 0, has_output = 0, n_quant = 0, gemma4 = tq_gguf_arch_is_gemma4(ai);
    uint64_t v_layers = 0; /* gemma4: layers with an attn_v (attention_k_eq_v drops it on full layers) */
    uint64_t vocab_embd = 0;
    pending *pend = NULL;
    size_t n_pend = 0;
    const tq_gguf_file *rope_f = NULL;
    const tq_gguf_tensor *rope_t = NULL;
    const tq_dtype narrow_to = file_narrow_type(f0);
    for (size_t fi = 0; fi < g->n_files && !rc; fi++) {
        const tq_gguf_file *f = g->files[fi];
        for (size_t ti = 0; ti < f->n_tensors && !rc; ti++) {
            const tq_gguf_tensor *t = &f->tensors[ti];
            size_t k = g->n;
            src_tensor *s = &g->ts[k];
            tq_model_tensor *mt = &m->tensors[k];
            s->f = f;
            s->t = t;
            s->row_len = t->ne[0];
            s->nelem = t->nelem;
            tq_gguf_role role = TQ_GGUF_ROLE_OTHER;
            char *name = map ? tq_gguf_hf_name(ai, t->name, &role) : NULL;
            if (map && !name)
                warn(g, "%s: tensor '%s' has no HF name; kept as is", f->path, t->name);
            if (role == TQ_GGUF_ROLE_ROPE_FREQS || role == TQ_GGUF_ROLE_K_B || role == TQ_GGUF_ROLE_V_B) {
                /* not a tensor of their own: config.json's rope_scaling, or half of kv_b_proj */
                free(name);
                if (role == TQ_GGUF_ROLE_ROPE_FREQS) {
                    rope_f = f, rope_t = t;
                } else if (!(pend = grow_pending(pend, &n_pend, f, t, role, e))) {
                    rc = -1;
                }
                memset(s, 0, sizeof *s);
                continue;
            }
            if (!name && !(name = strdup(t->name))) {
                rc = tq_fail(e, TQ_ENOMEM, "out of memory");
                break;
            }
            mt->info.name = g->names[k] = name;
            g->n++;
            m->n_tensors = g->n;
            mt->info.dtype = presented_dtype(t->type, &s->raw);
            s->esize = (uint32_t)tq_dtype_size(mt->info.dtype);
            mt->info.ndim = (int)t->n_dims;
            for (uint32_t d = 0; d < t->n_dims; d++)
                mt->info.shape[d] = t->ne[t->n_dims - 1 - d];
            if (role == TQ_GGUF_ROLE_NORM_SHIFT) {
                s->raw = 0; /* read as f32, minus 1 */
                s->shift = 1;
                mt->info.dtype = TQ_DT_F32;
                s->esize = 4;
            }
            int ex = narrow_to ? narrow_exact(f, t, s->shift, narrow_to, e) : 0;
            if (ex < 0) {
                rc = -1;
                break;
            }
            if (ex) { /* in the file's type, as the safetensors original held it */
                s->raw = 0; /* read as f32, then narrowed */
                s->narrow = narrow_to;
                mt->info.dtype = narrow_to;
                s->esize = 2;
            }
            if (role == TQ_GGUF_ROLE_SHEXP_GATE && t->n_dims == 1) {
                mt->info.ndim = 2;
                mt->info.shape[0] = 1;
                mt->info.shape[1] = t->ne[0];
            }
            mt->info.nelem = t->nelem;
            mt->info.offset = 0;
            mt->info.nbytes = t->nelem * s->esize;
            mt->src = &g->base;
            mt->src_index = k;
            mt->src_type = t->type;
            mt->was_quantized = tq_ggml_type_is_quantized(t->type);
            if (!s->raw && !tq_ggml_type_can_dequant(t->type))
                warn(g, "%s: tensor '%s': ggml type %s cannot be dequantized; reading it fails", f->path, t->name,
                     tq_ggml_type_name(t->type));
            n_quant += mt->was_quantized;
            if ((role == TQ_GGUF_ROLE_Q || role == TQ_GGUF_ROLE_K) && tq_gguf_arch_permutes_qk(ai)) {
                if (t->n_dims == 1) {
                    s->row_len = 1;
                    s->rows = t->ne[0];
                } else if (t->n_dims == 2) {
                    s->rows = t->ne[1];
                } else {
                    rc = tq_fail(e, TQ_EDATA, "%s: tensor '%s': %u-D, expected a 2-D projection", f->path, t->name,
                                 t->n_dims);
                    break;
                }
                s->n_head = perm_heads(f0, role, s->rows, t->name, e);
                if (!s->n_head)
                    rc = -1;
            }
            if (strcmp(t->name, "output.weight") == 0)
                has_output = 1;
            if (gemma4 && strstr(t->name, ".attn_v.weight"))
                v_layers++;
            if (strcmp(t->name, "token_embd.weight") == 0 && t->n_dims == 2)
                vocab_embd = t->ne[1];
        }
    }
    if (!rc && n_pend)
        rc = join_kv_b(m, g, pend, n_pend, e);
    free(pend);
    if (!rc) {
        qsort(m->tensors, m->n_tensors, sizeof *m->tensors, cmp_tensor);
        for (size_t i = 1; i < m->n_tensors && !rc; i++)
            if (strcmp(m->tensors[i - 1].info.name, m->tensors[i].info.name) == 0)
                rc = tq_fail(e, TQ_EDATA, "%s: two tensors are named '%s'", m->path, m->tensors[i].info.name);
    }
    if (!rc && n_quant)
        warn(g, "%s: %d tensors are stored quantized (ggml block types); they are dequantized exactly, and "
                "quantizing them again compounds the quantization error", m->path, n_quant);
    if (!rc) {
        const tq_gguf_kv *tok = tq_gguf_find_kv(f0, "tokenizer.ggml.tokens");
        uint64_t vocab = tok && tok->type == TQ_GGUF_ARRAY ? tok->arr_n : vocab_embd;
        char k[300];
        snprintf(k, sizeof k, "%s.vocab_size", arch);
        if (!vocab)
            (void)tq_gguf_get_u64(f0, k, &vocab);
        /* A config.json next to the GGUF file (already read by tq_model_open) wins. */
        int own = !m->config;
        if (!m->config && !(m->config = tq_gguf_config(f0, arch, vocab, !has_output, e)))
            rc = -1;
        else if (rope_t && !gemma4 && !cJSON_GetObjectItemCaseSensitive(m->config, "rope_scaling"))
            rc = rope_scaling_from(m->config, rope_f, rope_t, 0, e);
        else if (own && gemma4) {
            /* attention_k_eq_v: Gemma4TextAttention has no v_proj on full layers, so the GGUF
             * has attn_v on the sliding layers only; the full layers' rotation from rope_freqs
             * (Gemma4Model.generate_extra_tensors, which always writes it) */
            uint64_t n_full = 0;
            const cJSON *lt = cJSON_GetObjectItemCaseSensitive(m->config, "layer_types"), *it;
            cJSON_ArrayForEach(it, lt)
                n_full += cJSON_IsString(it) && !strcmp(it->valuestring, "full_attention");
            cJSON_AddBoolToObject(m->config, "attention_k_eq_v", n_full && v_layers + n_full == (uint64_t)cJSON_GetArraySize(lt));
            if (!rope_t)
                rc = tq_fail(e, TQ_EDATA, "%s: no rope_freqs.weight: llama.cpp's Gemma 4 converter writes the full "
                             "layers' partial rotation there", f0->path);
            else
                rc = rope_scaling_from(m->config, rope_f, rope_t, 1, e);
        }
    }
    if (!rc)
        rc = add_tokenizer(m, g, f0, e);
    free(arch);
    return rc;
}

/* Split pieces: each names its place (split.no / split.count) when the keys are present. */
static int check_split(gguf_source *g, tq_err *e)
{
    for (size_t i = 0; i < g->n_files && g->n_files > 1; i++) {
        uint64_t no, count;
        const tq_gguf_file *f = g->files[i];
        if (tq_gguf_get_u64(f, "split.count", &count) == 0 && count != g->n_files)
            return tq_fail(e, TQ_EDATA, "%s: split.count is %llu, but the set has %zu files", f->path,
                           (unsigned long long)count, g->n_files);
        if (tq_gguf_get_u64(f, "split.no", &no) == 0 && no != i)
            return tq_fail(e, TQ_EDATA, "%s: split.no is %llu, expected %zu", f->path, (unsigned long long)no, i);
    }
    return 0;
}

int tq_model_open_gguf(tq_model *m, const char *path, tq_err *e)
{
    unsigned flags = m->flags;
    char **paths = NULL;
    size_t n = 0;
    if (resolve_files(path, &paths, &n, e) != 0)
        return -1;
    gguf_source *g = tq_calloc(1, sizeof *g, e);
    if (!g || !(g->files = tq_calloc(n, sizeof *g->files, e))) {
        free(g);
        tq_free_strv(paths, n);
        return -1;
    }
    g->base.read = src_read;
    g->base.close = src_close;
    m->source = &g->base;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = tq_gguf_open(&g->files[i], paths[i], e);
        if (!rc)
            g->n_files = i + 1;
    }
    tq_free_strv(paths, n);
    if (!rc)
        rc = check_split(g, e);
    if (!rc)
        rc = build(m, g, flags, e);
    return rc;
}

size_t tq_gguf_model_warnings(const tq_model *m, const char *const **out)
{
    const gguf_source *g = m->source && m->source->read == src_read ? (const gguf_source *)m->source : NULL;
    *out = g ? (const char *const *)g->warnings : NULL;
    return g ? g->n_warnings : 0;
}
