/* Resident tensors: read on first use from a model directory, or from a split directory's
 * pinned file and flash_aligned_v1 dense FFN files. */
#include "common/platform.h"
#include "runtime/rt_internal.h"
#include "formats/flash.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rt_store {
    tq_model *m;
    void **data;             /* per model tensor, loaded lazily */
    char root[32];           /* where the language model's "model." tensors are */
    char lm_root[32];        /* where "lm_head." is */
    uint64_t bytes;
    /* dense split: per layer ffn_aligned header + fd */
    uint64_t n_ffn;
    tq_flash_header *ffn;
    int *ffn_fd;
    char **ffn_path;
    void ***ffn_data;
    /* tensors made at load (rt_store_get_xw), kept for rt_store_region and freed on close */
    size_t n_made;
    void **made;
    uint64_t *made_bytes;
};

/* A tensor's memory: whole rt_map_page() pages, aligned to one, so that a GPU backend can
 * map it in place (runtime/metal/: Metal's no-copy buffers need both, in the GPU host's 16 KiB
 * pages). The tail after the tensor is zeroed. */
static uint64_t page_round(uint64_t n)
{
    return rt_map_round(n);
}

static void *alloc_pages(uint64_t n, tq_err *e)
{
    void *p = NULL;
    uint64_t sz = page_round(n);
    if (sz > SIZE_MAX || posix_memalign(&p, (size_t)rt_map_page(), (size_t)sz) != 0) {
        tq_fail(e, TQ_ENOMEM, "out of memory (%llu bytes)", (unsigned long long)n);
        return NULL;
    }
    memset((char *)p + n, 0, sz - n);
    return p;
}

int rt_store_open(rt_store **out, const char *dir, const rt_config *c, tq_err *e)
{
    /* a split as split.json recorded it: headers, small files, layer files, streaming block */
    if (c->split && tq_flash_split_open_check(dir, e) != 0)
        return -1;
    rt_store *s = tq_calloc(1, sizeof *s, e);
    if (!s)
        return -1;
    char *path = c->split ? tq_path_join(dir, c->pinned_file, e) : tq_strdup(dir, e);
    if (!path || tq_model_open(&s->m, path, e) != 0) {
        free(path);
        free(s);
        return -1;
    }
    free(path);
    s->data = tq_calloc(s->m->n_tensors ? s->m->n_tensors : 1, sizeof *s->data, e);
    if (!s->data) {
        rt_store_close(s);
        return -1;
    }
    /* The language model's root: plain, MLX multimodal or HF multimodal checkpoint. */
    static const char *const roots[][2] = {{"model.", "lm_head."},
                                           {"language_model.model.", "language_model.lm_head."},
                                           {"model.language_model.", "lm_head."}};
    strcpy(s->root, roots[0][0]);
    strcpy(s->lm_root, roots[0][1]);
    for (size_t i = 1; i < sizeof roots / sizeof *roots && !tq_model_find(s->m, "model.embed_tokens.weight"); i++) {
        char name[64];
        snprintf(name, sizeof name, "%sembed_tokens.weight", roots[i][0]);
        if (tq_model_find(s->m, name)) {
            strcpy(s->root, roots[i][0]);
            strcpy(s->lm_root, roots[i][1]);
        }
    }
    if (c->split) {
        /* Dense FFNs of a split dense model live in ffn_aligned/layer_LL.bin. */
        s->n_ffn = c->layers;
        s->ffn = tq_calloc(c->layers, sizeof *s->ffn, e);
        s->ffn_fd = tq_calloc(c->layers, sizeof *s->ffn_fd, e);
        s->ffn_path = tq_calloc(c->layers, sizeof *s->ffn_path, e);
        s->ffn_data = tq_calloc(c->layers, sizeof *s->ffn_data, e);
        if (!s->ffn || !s->ffn_fd || !s->ffn_path || !s->ffn_data) {
            rt_store_close(s);
            return -1;
        }
        for (uint64_t l = 0; l < c->layers; l++) {
            s->ffn_fd[l] = -1;
            char *p = rt_split_file(dir, c->ffn_dir, l, e);
            if (!p) {
                rt_store_close(s);
                return -1;
            }
            if (!tq_exists(p)) {
                free(p);
                continue;
            }
            s->ffn_path[l] = p;
            if (tq_flash_read(&s->ffn[l], p, e) != 0 ||
                !(s->ffn_data[l] = tq_calloc(s->ffn[l].n_tensors + 1, sizeof(void *), e))) {
                rt_store_close(s);
                return -1;
            }
            if (s->ffn[l].kind != TQ_FLASH_DENSE) {
                tq_fail(e, TQ_EDATA, "%s: expected a flash_aligned_v1 file", p);
                rt_store_close(s);
                return -1;
            }
            s->ffn_fd[l] = tq_open_regular(p, NULL, e);
            if (s->ffn_fd[l] < 0) {
                rt_store_close(s);
                return -1;
            }
        }
    }
    *out = s;
    return 0;
}

char *rt_split_file(const char *dir, const char *sub, uint64_t layer, tq_err *e)
{
    /* "experts/" (tq, mac-code) and "bin" (mlx-sniper) both name a directory */
    char name[32];
    snprintf(name, sizeof name, "layer_%02llu.bin", (unsigned long long)layer);
    char *d = tq_path_join(dir, sub, e);
    char *p = d ? tq_path_join(d, name, e) : NULL;
    free(d);
    return p;
}

void rt_store_close(rt_store *s)
{
    if (!s)
        return;
    if (s->m) {
        for (size_t i = 0; i < s->m->n_tensors; i++)
            free(s->data ? s->data[i] : NULL);
        tq_model_close(s->m);
    }
    free(s->data);
    for (uint64_t l = 0; l < s->n_ffn; l++) {
        if (s->ffn_data && s->ffn_data[l]) {
            for (size_t i = 0; i < s->ffn[l].n_tensors; i++)
                free(s->ffn_data[l][i]);
            free(s->ffn_data[l]);
        }
        if (s->ffn && s->ffn_path && s->ffn_path[l])
            tq_flash_header_free(&s->ffn[l]);
        if (s->ffn_fd && s->ffn_fd[l] >= 0)
            close(s->ffn_fd[l]);
        if (s->ffn_path)
            free(s->ffn_path[l]);
    }
    for (size_t i = 0; i < s->n_made; i++)
        free(s->made[i]);
    free(s->made);
    free(s->made_bytes);
    free(s->ffn);
    free(s->ffn_fd);
    free(s->ffn_path);
    free(s->ffn_data);
    free(s);
}

void rt_store_drop_cache(rt_store *s)
{
    for (size_t i = 0; i < s->m->n_files; i++)
        if (s->m->files[i] && s->m->files[i]->fd >= 0)
            tq_plat_advise(s->m->files[i]->fd, 0, 0, TQ_ADV_DONTNEED);
    for (uint64_t l = 0; l < s->n_ffn; l++)
        if (s->ffn_fd[l] >= 0)
            tq_plat_advise(s->ffn_fd[l], 0, 0, TQ_ADV_DONTNEED);
}

static int in_alloc(const void *p, const void *d, uint64_t nbytes, const void **base, uint64_t *n)
{
    uint64_t sz = page_round(nbytes);
    if (!d || (const char *)p < (const char *)d || (uint64_t)((const char *)p - (const char *)d) >= sz)
        return 0;
    *base = d;
    *n = sz;
    return 1;
}

int rt_store_region(const rt_store *s, const void *p, const void **base, uint64_t *n)
{
    for (size_t i = 0; i < s->m->n_tensors; i++)
        if (in_alloc(p, s->data[i], s->m->tensors[i].info.nbytes, base, n))
            return 1;
    for (uint64_t l = 0; l < s->n_ffn; l++)
        for (size_t i = 0; s->ffn_data && s->ffn_data[l] && i < s->ffn[l].n_tensors; i++)
            if (in_alloc(p, s->ffn_data[l][i], s->ffn[l].tensors[i].nbytes, base, n))
                return 1;
    for (size_t i = 0; i < s->n_made; i++)
        if (in_alloc(p, s->made[i], s->made_bytes[i], base, n))
            return 1;
    return 0;
}

uint64_t rt_store_bytes(const rt_store *s)
{
    return s->bytes;
}

const char *rt_store_name(const rt_store *s, const char *name, char *buf, size_t cap)
{
    if (!strncmp(name, "model.", 6))
        snprintf(buf, cap, "%s%s", s->root, name + 6);
    else if (!strncmp(name, "lm_head.", 8))
        snprintf(buf, cap, "%s%s", s->lm_root, name + 8);
    else if (!strcmp(name, "lm_head")) /* the module: the root without its dot */
        snprintf(buf, cap, "%.*s", (int)strlen(s->lm_root) - 1, s->lm_root);
    else
        snprintf(buf, cap, "%s", name);
    return buf;
}

/* "model.layers.L.REST" → (L, REST) */
static int layer_of(const char *name, uint64_t *l, const char **rest)
{
    const char *p = "model.layers.";
    if (strncmp(name, p, strlen(p)))
        return 0;
    char *end;
    unsigned long long v = strtoull(name + strlen(p), &end, 10);
    if (end == name + strlen(p) || *end != '.')
        return 0;
    *l = v;
    *rest = end + 1;
    return 1;
}

static int get_ffn(rt_store *s, const char *name, rt_tensor *t, tq_err *e)
{
    uint64_t l;
    const char *rest;
    if (!layer_of(name, &l, &rest) || l >= s->n_ffn || !s->ffn_path[l])
        return 0;
    const tq_flash_tensor *ft = tq_flash_find(&s->ffn[l], rest);
    if (!ft)
        return 0;
    size_t i = (size_t)(ft - s->ffn[l].tensors);
    if (!s->ffn_data[l][i]) {
        void *buf = alloc_pages(ft->nbytes, e);
        if (!buf)
            return -1;
        if (tq_pread_full(s->ffn_fd[l], buf, ft->nbytes, ft->offset, s->ffn_path[l], e) != 0) {
            free(buf);
            return -1;
        }
        s->ffn_data[l][i] = buf;
        s->bytes += ft->nbytes;
    }
    t->dt = ft->dtype;
    t->ndim = ft->ndim;
    memcpy(t->shape, ft->shape, sizeof t->shape);
    t->nbytes = ft->nbytes;
    t->data = s->ffn_data[l][i];
    return 1;
}

/* The model's tensor NAME under the store's root: 1 with *mt, 0 when there is none, -1 when the
 * name is too long (e). */
static int store_find(rt_store *s, const char *name, const tq_model_tensor **mt, tq_err *e)
{
    char full[512];
    if (strlen(name) + sizeof s->root >= sizeof full)
        return tq_fail(e, TQ_EDATA, "tensor name too long: %s", name);
    *mt = tq_model_find(s->m, rt_store_name(s, name, full, sizeof full));
    return *mt != NULL;
}

/* t described as mt is stored (dtype, shape, bytes); t->data is the caller's */
static void store_describe(const tq_model_tensor *mt, rt_tensor *t)
{
    t->dt = mt->info.dtype;
    t->ndim = mt->info.ndim;
    memcpy(t->shape, mt->info.shape, sizeof t->shape);
    t->nbytes = mt->info.nbytes;
}

/* Room for one more buffer the store made (rebuilt or stacked experts), freed with the store:
 * reserved before the buffer is allocated, so keeping it cannot fail. */
static int store_made_reserve(rt_store *s, tq_err *e)
{
    void **made = realloc(s->made, (s->n_made + 1) * sizeof *made);
    if (made)
        s->made = made;
    uint64_t *mb = made ? realloc(s->made_bytes, (s->n_made + 1) * sizeof *mb) : NULL;
    if (mb)
        s->made_bytes = mb;
    if (!made || !mb) {
        tq_fail(e, TQ_ENOMEM, "out of memory");
        return -1;
    }
    return 0;
}

static void store_made_keep(rt_store *s, void *buf, uint64_t nbytes)
{
    s->made[s->n_made] = buf;
    s->made_bytes[s->n_made++] = nbytes;
    s->bytes += nbytes;
}

int rt_store_get(rt_store *s, const char *name, rt_tensor *t, tq_err *e)
{
    const tq_model_tensor *mt;
    int found = store_find(s, name, &mt, e);
    if (found <= 0)
        return found < 0 ? -1 : s->n_ffn ? get_ffn(s, name, t, e) : 0;
    size_t i = (size_t)(mt - s->m->tensors);
    if (!s->data[i]) {
        void *buf = alloc_pages(mt->info.nbytes, e);
        if (!buf)
            return -1;
        if (tq_model_read(mt, 0, buf, mt->info.nbytes, e) != 0) {
            free(buf);
            return -1;
        }
        s->data[i] = buf;
        s->bytes += mt->info.nbytes;
    }
    store_describe(mt, t);
    t->data = s->data[i];
    return 1;
}

int rt_store_get_xw(rt_store *s, const char *name, int part, uint64_t E, uint64_t I, uint64_t H, rt_tensor *t,
                    tq_err *e)
{
    const tq_model_tensor *mt;
    int found = store_find(s, name, &mt, e);
    if (found <= 0)
        return found;
    const tq_xw_part p = tq_flash_xw_part(part, I, H);
    size_t esz = tq_dtype_size(mt->info.dtype);
    uint64_t in = mt->info.nbytes / (E ? E : 1), out = p.rows * p.cols * esz; /* bytes per expert */
    if (store_made_reserve(s, e) != 0)
        return -1;
    unsigned char *buf = alloc_pages(E * out, e), *slice = buf ? tq_malloc((size_t)in, e) : NULL;
    if (!slice) {
        free(buf);
        return -1;
    }
    for (uint64_t x = 0; x < E; x++) {
        if (tq_model_read(mt, x * in, slice, (size_t)in, e) != 0) {
            free(slice);
            free(buf);
            return -1;
        }
        tq_flash_xw_gather(&p, slice, esz, buf + x * out);
    }
    free(slice);
    store_made_keep(s, buf, E * out);
    t->dt = mt->info.dtype;
    t->ndim = p.cols == 1 && part > TQ_XW_DOWN_W ? 2 : 3;
    t->shape[0] = E;
    t->shape[1] = p.rows;
    t->shape[2] = t->ndim == 3 ? p.cols : 0;
    t->nbytes = E * out;
    t->data = buf;
    return 1;
}

int rt_store_get_stack(rt_store *s, const char *const *names, uint64_t n, rt_tensor *t, tq_err *e)
{
    const tq_model_tensor *first = NULL, *mt;
    for (uint64_t x = 0; x < n; x++) {
        int found = store_find(s, names[x], &mt, e);
        if (found <= 0)
            return found;
        if (!first)
            first = mt;
        else if (mt->info.dtype != first->info.dtype || mt->info.ndim != first->info.ndim ||
                 memcmp(mt->info.shape, first->info.shape, sizeof mt->info.shape) != 0)
            return 0;
    }
    uint64_t one = first ? first->info.nbytes : 0, all;
    if (!first || one == 0 || tq_mul_u64(one, n, &all))
        return 0;
    if (store_made_reserve(s, e) != 0)
        return -1;
    unsigned char *buf = alloc_pages(all, e);
    if (!buf)
        return -1;
    for (uint64_t x = 0; x < n; x++) {
        (void)store_find(s, names[x], &mt, e);
        if (tq_model_read(mt, 0, buf + x * one, one, e) != 0) {
            free(buf);
            return -1;
        }
    }
    store_made_keep(s, buf, all);
    store_describe(first, t);
    t->data = buf;
    return 1;
}

int rt_store_get_info(rt_store *s, const char *name, rt_tensor *t, tq_err *e)
{
    const tq_model_tensor *mt;
    int found = store_find(s, name, &mt, e);
    if (found <= 0)
        return found;
    store_describe(mt, t);
    t->data = NULL;
    return 1;
}
