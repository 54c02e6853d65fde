/* split.json: what a split directory holds (every file and expert block with its SHA-256),
 * where it came from, and what tq_join needs to rebuild the source names. */
#include "layout/split_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#define SPLIT_JSON_MAX (256u << 20)

static cJSON *add_hex(cJSON *o, const char *key, const unsigned char d[32])
{
    char hex[65];
    tq_hex(d, 32, hex);
    return cJSON_AddStringToObject(o, key, hex);
}

static int source_json(cJSON *src, const split_plan *p, const char *label)
{
    const tq_model *m = p->m;
    uint64_t total = 0;
    cJSON *files = cJSON_AddArrayToObject(src, "files");
    if (!files || !cJSON_AddStringToObject(src, "path", label))
        return -1;
    for (size_t i = 0; i < m->n_files; i++) {
        const tq_st_file *f = m->files[i];
        const char *base = strrchr(f->path, '/');
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(files, o)) {
            cJSON_Delete(o);
            return -1;
        }
        /* The header pins every tensor's name, dtype, shape and offset; with the size it
         * identifies the shard without a second read of the data. */
        unsigned char d[32];
        tq_sha256 *h = tq_sha256_new();
        if (!h)
            return -1;
        unsigned char len8[8];
        for (int b = 0; b < 8; b++)
            len8[b] = (unsigned char)(f->header_len >> (8 * b));
        tq_sha256_update(h, len8, 8);
        tq_sha256_update(h, f->header_json, (size_t)f->header_len);
        tq_sha256_final(h, d);
        if (!cJSON_AddStringToObject(o, "name", base ? base + 1 : f->path) || !tq_json_add_u64(o, "size", f->file_size) ||
            !tq_json_add_u64(o, "data_bytes", f->file_size - f->data_start) || !add_hex(o, "header_sha256", d))
            return -1;
        total += f->file_size;
    }
    if (m->n_files == 0) {
        /* a non-safetensors source (GGUF): its own file, identified by size and first MiB */
        tq_err e;
        uint64_t size = 0;
        if (!tq_is_dir(m->path) && tq_file_size(m->path, &size, &e) == 0) {
            unsigned char d[32];
            int fd = open(m->path, O_RDONLY | O_CLOEXEC);
            size_t n = size < (1u << 20) ? (size_t)size : (1u << 20);
            unsigned char *buf = fd >= 0 ? malloc(n ? n : 1) : NULL;
            int ok = buf && tq_pread_full(fd, buf, n, 0, m->path, &e) == 0;
            if (ok)
                tq_sha256_buf(buf, n, d);
            free(buf);
            if (fd >= 0)
                close(fd);
            const char *base = strrchr(m->path, '/');
            cJSON *o = cJSON_CreateObject();
            if (!o || !cJSON_AddItemToArray(files, o) || !cJSON_AddStringToObject(o, "name", base ? base + 1 : m->path) ||
                !tq_json_add_u64(o, "size", size) || (ok && !add_hex(o, "first_mib_sha256", d)))
                return -1;
            total = size;
        }
    }
    return tq_json_add_u64(src, "total_bytes", total) ? 0 : -1;
}

cJSON *split_manifest_json(const split_plan *p, const char *label, const tq_split_file *files,
                           size_t n_files, tq_err *e)
{
    const int moe = p->kind == TQ_FLASH_MOE;
    cJSON *j = cJSON_CreateObject(), *a;
    if (!j)
        goto oom;
    if (!cJSON_AddStringToObject(j, "format", "tq_split_v1") || !cJSON_AddStringToObject(j, "tool", "tq-split " TQ_VERSION) ||
        !cJSON_AddStringToObject(j, "kind", moe ? "moe" : "dense") || !tq_json_add_u64(j, "align", p->align))
        goto oom;
    if (moe && (!tq_json_add_u64(j, "num_experts", p->num_experts) || !tq_json_add_u64(j, "experts_per_tok", p->top_k)))
        goto oom;
    cJSON *src = cJSON_AddObjectToObject(j, "source");
    if (!src || source_json(src, p, label) != 0)
        goto oom;
    cJSON *fo = cJSON_AddObjectToObject(j, "files");
    if (!fo)
        goto oom;
    for (size_t i = 0; i < n_files; i++) {
        cJSON *o = cJSON_AddObjectToObject(fo, files[i].name);
        if (!o || !tq_json_add_u64(o, "size", files[i].size) || !add_hex(o, "sha256", files[i].sha256))
            goto oom;
    }
    if (!(a = cJSON_AddArrayToObject(j, "layers")))
        goto oom;
    for (size_t i = 0; i < p->n_layers; i++) {
        const split_layer *L = &p->layers[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o) || !tq_json_add_u64(o, "layer", L->layer) ||
            !cJSON_AddStringToObject(o, "file", L->file) || !cJSON_AddStringToObject(o, "prefix", L->prefix) ||
            !cJSON_AddStringToObject(o, "naming", L->naming == TQ_NAMING_MLX ? "mlx" : "hf"))
            goto oom;
    }
    if (moe) {
        if (!(a = cJSON_AddArrayToObject(j, "expert_blocks")))
            goto oom;
        for (size_t i = 0; i < p->n_layers; i++) {
            const split_layer *L = &p->layers[i];
            for (uint64_t x = 0; x < L->hdr.num_experts; x++) {
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(a, o) || !tq_json_add_u64(o, "layer", L->layer) ||
                    !tq_json_add_u64(o, "expert", x) ||
                    !tq_json_add_u64(o, "offset", L->hdr.data_start + x * L->hdr.expert_block_size) ||
                    !tq_json_add_u64(o, "length", L->hdr.expert_block_size) || !add_hex(o, "sha256", L->block_sha[x]))
                    goto oom;
            }
        }
    }
    return j;
oom:
    cJSON_Delete(j);
    tq_fail(e, TQ_ENOMEM, "out of memory building split.json");
    return NULL;
}

/* ------------------------------------------------------------------ loading */

static int parse_hex32(const cJSON *v, unsigned char out[32])
{
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 64)
        return -1;
    for (int i = 0; i < 32; i++) {
        unsigned x = 0;
        for (int k = 0; k < 2; k++) {
            char c = v->valuestring[2 * i + k];
            x <<= 4;
            if (c >= '0' && c <= '9')
                x |= (unsigned)(c - '0');
            else if (c >= 'a' && c <= 'f')
                x |= (unsigned)(c - 'a' + 10);
            else
                return -1;
        }
        out[i] = (unsigned char)x;
    }
    return 0;
}

/* A relative path inside the split dir: no absolute path, no "..", no empty component. */
static int safe_rel(const char *s)
{
    if (!*s || *s == '/')
        return 0;
    for (const char *c = s; *c;) {
        const char *n = strchr(c, '/');
        size_t len = n ? (size_t)(n - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        c += len + (n ? 1 : 0);
    }
    return 1;
}

void tq_split_manifest_free(tq_split_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_layers; i++) {
        free(m->layers[i].file);
        free(m->layers[i].prefix);
    }
    for (size_t i = 0; i < m->n_files; i++)
        free(m->files[i].name);
    free(m->layers);
    free(m->files);
    free(m->blocks);
    cJSON_Delete(m->json);
    free(m);
}

static int load(tq_split_manifest *m, const char *path, tq_err *e)
{
    const cJSON *j = m->json;
#define BAD(...) return tq_fail(e, TQ_EDATA, __VA_ARGS__)
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "tq_split_v1") != 0)
        BAD("%s: not a tq_split_v1 manifest", path);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    if (cJSON_IsString(kind) && strcmp(kind->valuestring, "moe") == 0)
        m->kind = TQ_FLASH_MOE;
    else if (cJSON_IsString(kind) && strcmp(kind->valuestring, "dense") == 0)
        m->kind = TQ_FLASH_DENSE;
    else
        BAD("%s: 'kind' must be \"moe\" or \"dense\"", path);
    if (tq_json_get_u64(j, "align", &m->align, path, "manifest", e) != 0)
        return -1;
    if (m->align < TQ_FLASH_MIN_ALIGN || m->align > TQ_FLASH_MAX_ALIGN || (m->align & (m->align - 1)))
        BAD("%s: align %llu is not a power of two in [%u, %u]", path, (unsigned long long)m->align,
            TQ_FLASH_MIN_ALIGN, TQ_FLASH_MAX_ALIGN);
    if (m->kind == TQ_FLASH_MOE) {
        if (tq_json_get_u64(j, "num_experts", &m->num_experts, path, "manifest", e) != 0 ||
            tq_json_get_u64(j, "experts_per_tok", &m->experts_per_tok, path, "manifest", e) != 0)
            return -1;
        if (m->num_experts == 0 || m->num_experts > TQ_FLASH_MAX_EXPERTS)
            BAD("%s: num_experts %llu out of range", path, (unsigned long long)m->num_experts);
    }
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    if (!cJSON_IsObject(files))
        BAD("%s: no 'files' object", path);
    size_t nf = (size_t)cJSON_GetArraySize(files);
    m->files = tq_calloc(nf ? nf : 1, sizeof *m->files, e);
    if (!m->files)
        return -1;
    for (const cJSON *c = files->child; c; c = c->next) {
        tq_split_file *f = &m->files[m->n_files];
        if (!c->string || !safe_rel(c->string))
            BAD("%s: files: '%s' is not a safe relative path", path, c->string ? c->string : "");
        if (m->n_files && strcmp(m->files[m->n_files - 1].name, c->string) >= 0)
            BAD("%s: files: '%s' is out of order or repeated", path, c->string);
        if (!(f->name = tq_strdup(c->string, e)))
            return -1;
        m->n_files++;
        if (tq_json_get_u64(c, "size", &f->size, path, c->string, e) != 0)
            return -1;
        if (parse_hex32(cJSON_GetObjectItemCaseSensitive(c, "sha256"), f->sha256) != 0)
            BAD("%s: files: '%s' has no valid sha256", path, c->string);
    }
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) == 0)
        BAD("%s: no 'layers' array", path);
    size_t nl = (size_t)cJSON_GetArraySize(layers);
    m->layers = tq_calloc(nl, sizeof *m->layers, e);
    if (!m->layers)
        return -1;
    for (const cJSON *c = layers->child; c; c = c->next) {
        tq_split_layer *L = &m->layers[m->n_layers];
        uint64_t layer;
        if (tq_json_get_u64(c, "layer", &layer, path, "layers[]", e) != 0)
            return -1;
        if (layer != m->n_layers)
            BAD("%s: layers[%zu] is layer %llu (layers must be 0..N-1 in order)", path, m->n_layers,
                (unsigned long long)layer);
        L->layer = (uint32_t)layer;
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(c, "file");
        const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(c, "prefix");
        const cJSON *naming = cJSON_GetObjectItemCaseSensitive(c, "naming");
        if (!cJSON_IsString(file) || !safe_rel(file->valuestring) || !cJSON_IsString(prefix) || !cJSON_IsString(naming))
            BAD("%s: layers[%zu]: needs 'file' (a safe relative path), 'prefix' and 'naming' strings", path, m->n_layers);
        if (strcmp(naming->valuestring, "hf") == 0)
            L->naming = TQ_NAMING_HF;
        else if (strcmp(naming->valuestring, "mlx") == 0)
            L->naming = TQ_NAMING_MLX;
        else
            BAD("%s: layers[%zu]: naming must be \"hf\" or \"mlx\"", path, m->n_layers);
        if (!(L->file = tq_strdup(file->valuestring, e)) || !(L->prefix = tq_strdup(prefix->valuestring, e)))
            return -1;
        m->n_layers++;
    }
    if (m->kind == TQ_FLASH_MOE) {
        const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(j, "expert_blocks");
        uint64_t want = (uint64_t)m->n_layers * m->num_experts;
        if (!cJSON_IsArray(blocks) || (uint64_t)cJSON_GetArraySize(blocks) != want)
            BAD("%s: 'expert_blocks' must list %llu blocks (layers × num_experts)", path, (unsigned long long)want);
        m->blocks = tq_calloc((size_t)want, sizeof *m->blocks, e);
        if (!m->blocks)
            return -1;
        for (const cJSON *c = blocks->child; c; c = c->next) {
            tq_split_block *b = &m->blocks[m->n_blocks];
            uint64_t layer, expert;
            if (tq_json_get_u64(c, "layer", &layer, path, "expert_blocks[]", e) != 0 ||
                tq_json_get_u64(c, "expert", &expert, path, "expert_blocks[]", e) != 0 ||
                tq_json_get_u64(c, "offset", &b->offset, path, "expert_blocks[]", e) != 0 ||
                tq_json_get_u64(c, "length", &b->length, path, "expert_blocks[]", e) != 0)
                return -1;
            if (layer != m->n_blocks / m->num_experts || expert != m->n_blocks % m->num_experts)
                BAD("%s: expert_blocks[%zu] is (layer %llu, expert %llu): blocks must be in layer-major order", path,
                    m->n_blocks, (unsigned long long)layer, (unsigned long long)expert);
            uint64_t end;
            if (b->length == 0 || tq_add_u64(b->offset, b->length, &end) != 0)
                BAD("%s: expert_blocks[%zu]: bad offset/length", path, m->n_blocks);
            if (parse_hex32(cJSON_GetObjectItemCaseSensitive(c, "sha256"), b->sha256) != 0)
                BAD("%s: expert_blocks[%zu]: no valid sha256", path, m->n_blocks);
            b->layer = (uint32_t)layer;
            b->expert = (uint32_t)expert;
            m->n_blocks++;
        }
    }
#undef BAD
    return 0;
}

int tq_split_manifest_load(tq_split_manifest **out, const char *split_dir, tq_err *e)
{
    *out = NULL;
    char *path = tq_path_join(split_dir, "split.json", e);
    if (!path)
        return -1;
    tq_split_manifest *m = tq_calloc(1, sizeof *m, e);
    if (!m || tq_json_read_file(path, SPLIT_JSON_MAX, &m->json, e) != 0 || load(m, path, e) != 0) {
        tq_split_manifest_free(m);
        free(path);
        return -1;
    }
    free(path);
    *out = m;
    return 0;
}

const tq_split_block *tq_split_manifest_block(const tq_split_manifest *m, uint32_t layer, uint64_t expert)
{
    if (m->kind != TQ_FLASH_MOE || layer >= m->n_layers || expert >= m->num_experts)
        return NULL;
    return &m->blocks[(size_t)layer * m->num_experts + expert];
}

static int cmp_name(const void *k, const void *f)
{
    return strcmp(k, ((const tq_split_file *)f)->name);
}

const tq_split_file *tq_split_manifest_file(const tq_split_manifest *m, const char *name)
{
    return bsearch(name, m->files, m->n_files, sizeof *m->files, cmp_name);
}
