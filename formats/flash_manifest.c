/* split.json (tq_split_v1) read back: every file and expert block of a split directory with
 * its SHA-256, validated as hostile input. Written by layout/split/split_manifest.c. */
#include "formats/flash_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPLIT_JSON_MAX (256u << 20)

/* 64 lowercase hex digits (man tq-formats(5), split.json), decoded by common/'s tq_unhex32 */
static int parse_hex32(const cJSON *v, unsigned char out[32])
{
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 64 || strspn(v->valuestring, "0123456789abcdef") != 64)
        return -1;
    return tq_unhex32(v->valuestring, out);
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

void tq_flash_manifest_free(tq_flash_manifest *m)
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

static int load(tq_flash_manifest *m, const char *path, tq_err *e)
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
    if (tq_flash_json_u64(j, "align", &m->align, path, "manifest", e) != 0)
        return -1;
    if (m->align < TQ_FLASH_MIN_ALIGN || m->align > TQ_FLASH_MAX_ALIGN || (m->align & (m->align - 1)))
        BAD("%s: align %llu is not a power of two in [%u, %u]", path, (unsigned long long)m->align,
            TQ_FLASH_MIN_ALIGN, TQ_FLASH_MAX_ALIGN);
    if (m->kind == TQ_FLASH_MOE) {
        if (tq_flash_json_u64(j, "num_experts", &m->num_experts, path, "manifest", e) != 0 ||
            tq_flash_json_u64(j, "experts_per_tok", &m->experts_per_tok, path, "manifest", e) != 0)
            return -1;
        if (m->num_experts == 0 || m->num_experts > TQ_FLASH_MAX_EXPERTS)
            BAD("%s: num_experts %llu out of range", path, (unsigned long long)m->num_experts);
        if (m->experts_per_tok == 0 || m->experts_per_tok > m->num_experts)
            BAD("%s: experts_per_tok %llu is not in [1, num_experts %llu]", path, (unsigned long long)m->experts_per_tok,
                (unsigned long long)m->num_experts);
    } else {
        static const char *const moe_keys[] = {"num_experts", "experts_per_tok", "expert_blocks"};
        for (size_t k = 0; k < 3; k++)
            if (cJSON_GetObjectItemCaseSensitive(j, moe_keys[k]))
                BAD("%s: kind is \"dense\" but it has '%s': kind and content disagree", path, moe_keys[k]);
    }
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    if (!cJSON_IsObject(files))
        BAD("%s: no 'files' object", path);
    size_t nf = (size_t)cJSON_GetArraySize(files);
    m->files = tq_calloc(nf ? nf : 1, sizeof *m->files, e);
    if (!m->files)
        return -1;
    for (const cJSON *c = files->child; c; c = c->next) {
        tq_flash_file *f = &m->files[m->n_files];
        if (!c->string || !safe_rel(c->string))
            BAD("%s: files: '%s' is not a safe relative path", path, c->string ? c->string : "");
        if (m->n_files && strcmp(m->files[m->n_files - 1].name, c->string) >= 0)
            BAD("%s: files: '%s' is out of order or repeated", path, c->string);
        if (!(f->name = tq_strdup(c->string, e)))
            return -1;
        m->n_files++;
        if (tq_flash_json_u64(c, "size", &f->size, path, c->string, e) != 0)
            return -1;
        if (parse_hex32(cJSON_GetObjectItemCaseSensitive(c, "sha256"), f->sha256) != 0)
            BAD("%s: files: '%s' has no valid sha256", path, c->string);
        const cJSON *hb = cJSON_GetObjectItemCaseSensitive(c, "header_bytes");
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(c, "header_sha256");
        if (hb || hs) {
            if (!hb || !hs || tq_json_u64(hb, &f->header_bytes) != 0 || f->header_bytes == 0 ||
                f->header_bytes > f->size || parse_hex32(hs, f->header_sha256) != 0)
                BAD("%s: files: '%s': header_bytes (in [1, size]) and header_sha256 (64 lowercase hex digits) "
                    "go together",
                    path, c->string);
        }
    }
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(j, "layers");
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) == 0)
        BAD("%s: no 'layers' array", path);
    size_t nl = (size_t)cJSON_GetArraySize(layers);
    m->layers = tq_calloc(nl, sizeof *m->layers, e);
    if (!m->layers)
        return -1;
    for (const cJSON *c = layers->child; c; c = c->next) {
        tq_flash_layer *L = &m->layers[m->n_layers];
        uint64_t layer;
        if (tq_flash_json_u64(c, "layer", &layer, path, "layers[]", e) != 0)
            return -1;
        /* ascending; a family's dense layers (first_k_dense_replace...) have no file */
        if (layer > UINT32_MAX || (m->n_layers && layer <= m->layers[m->n_layers - 1].layer) ||
            (m->kind == TQ_FLASH_DENSE && layer != m->n_layers))
            BAD("%s: layers[%zu] is layer %llu (layers must be in ascending order; a dense split's 0..N-1)", path,
                m->n_layers, (unsigned long long)layer);
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
        else if (strcmp(naming->valuestring, "fused") == 0)
            L->naming = TQ_NAMING_FUSED;
        else if (strcmp(naming->valuestring, "fused_xw") == 0 && m->kind == TQ_FLASH_MOE)
            L->naming = TQ_NAMING_FUSED_XW;
        else
            BAD("%s: layers[%zu]: naming must be \"hf\", \"mlx\", \"fused\" or \"fused_xw\"", path, m->n_layers);
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
            tq_flash_block *b = &m->blocks[m->n_blocks];
            uint64_t layer, expert;
            if (tq_flash_json_u64(c, "layer", &layer, path, "expert_blocks[]", e) != 0 ||
                tq_flash_json_u64(c, "expert", &expert, path, "expert_blocks[]", e) != 0 ||
                tq_flash_json_u64(c, "offset", &b->offset, path, "expert_blocks[]", e) != 0 ||
                tq_flash_json_u64(c, "length", &b->length, path, "expert_blocks[]", e) != 0)
                return -1;
            if (layer != m->layers[m->n_blocks / m->num_experts].layer || expert != m->n_blocks % m->num_experts)
                BAD("%s: expert_blocks[%zu] is (layer %llu, expert %llu): blocks must be in layer-major order", path,
                    m->n_blocks, (unsigned long long)layer, (unsigned long long)expert);
            uint64_t end;
            if (b->length == 0 || tq_add_u64(b->offset, b->length, &end) != 0)
                BAD("%s: expert_blocks[%zu]: bad offset/length", path, m->n_blocks);
            const tq_flash_file *lf = tq_flash_manifest_file(m, m->layers[m->n_blocks / m->num_experts].file);
            if (lf && end > lf->size)
                BAD("%s: expert_blocks[%zu] (layer %llu, expert %llu) ends at byte %llu, past the end of %s (%llu bytes)",
                    path, m->n_blocks, (unsigned long long)layer, (unsigned long long)expert, (unsigned long long)end,
                    lf->name, (unsigned long long)lf->size);
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

int tq_flash_manifest_load(tq_flash_manifest **out, const char *split_dir, tq_err *e)
{
    *out = NULL;
    char *path = tq_path_join(split_dir, "split.json", e);
    if (!path)
        return -1;
    tq_flash_manifest *m = tq_calloc(1, sizeof *m, e);
    if (!m || tq_json_read_file(path, SPLIT_JSON_MAX, &m->json, e) != 0 || load(m, path, e) != 0) {
        tq_flash_manifest_free(m);
        free(path);
        return -1;
    }
    free(path);
    *out = m;
    return 0;
}

const tq_flash_block *tq_flash_manifest_block(const tq_flash_manifest *m, uint32_t layer, uint64_t expert)
{
    if (m->kind != TQ_FLASH_MOE || expert >= m->num_experts)
        return NULL;
    size_t lo = 0, hi = m->n_layers; /* layers ascend: find the position of layer id `layer` */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->layers[mid].layer < layer)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == m->n_layers || m->layers[lo].layer != layer)
        return NULL;
    return &m->blocks[lo * m->num_experts + expert];
}

static int cmp_name(const void *k, const void *f)
{
    return strcmp(k, ((const tq_flash_file *)f)->name);
}

const tq_flash_file *tq_flash_manifest_file(const tq_flash_manifest *m, const char *name)
{
    return bsearch(name, m->files, m->n_files, sizeof *m->files, cmp_name);
}

int tq_flash_hash_head(const char *path, uint64_t n, unsigned char out[32], tq_err *e)
{
    enum { PIECE = 1 << 20 };
    uint64_t size;
    int fd = tq_open_regular(path, &size, e);
    if (fd < 0)
        return -1;
    unsigned char *buf = NULL;
    tq_sha256 *h = NULL;
    int rc = -1;
    if (size < n)
        tq_fail(e, TQ_EDATA, "%s: file is %llu bytes, shorter than its %llu-byte header", path,
                (unsigned long long)size, (unsigned long long)n);
    else if (!(buf = tq_malloc(PIECE, e)))
        ; /* e is set */
    else if (!(h = tq_sha256_new()))
        tq_fail(e, TQ_ENOMEM, "out of memory");
    else {
        rc = 0;
        for (uint64_t off = 0; off < n && rc == 0; off += PIECE) {
            size_t len = n - off < PIECE ? (size_t)(n - off) : PIECE;
            rc = tq_pread_full(fd, buf, len, off, path, e);
            if (rc == 0)
                tq_sha256_update(h, buf, len);
        }
    }
    if (h)
        tq_sha256_final(h, out);
    free(buf);
    close(fd);
    return rc;
}

int tq_flash_manifest_check_headers(const tq_flash_manifest *m, const char *split_dir, tq_err *e)
{
    for (size_t i = 0; i < m->n_files; i++) {
        const tq_flash_file *f = &m->files[i];
        if (!f->header_bytes)
            continue;
        char *p = tq_path_join(split_dir, f->name, e);
        unsigned char d[32];
        int rc = p ? tq_flash_hash_head(p, f->header_bytes, d, e) : -1;
        if (rc == 0 && memcmp(d, f->header_sha256, 32))
            rc = tq_fail(e, TQ_EDATA, "%s: header (its first %llu bytes) does not match split.json's header_sha256: "
                                      "changed after the split was made",
                         p, (unsigned long long)f->header_bytes);
        free(p);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- data check
 * One item per whole file, or per expert block (plus its header) of a layer file whose
 * header split.json records: blocks are hashed in parallel and a mismatch names the block. */
typedef struct data_item {
    size_t file;        /* index in m->files */
    int64_t block;      /* index in m->blocks; -1: the whole file; -2: its header */
} data_item;

typedef struct data_check {
    const tq_flash_manifest *m;
    const char *dir;
    data_item *items;
    int *fds;           /* per file, opened before the run */
    char **paths;
} data_check;

static int check_item(tq_work *q, void *ctx, int worker, uint64_t i, tq_err *e)
{
    data_check *c = ctx;
    const data_item *it = &c->items[i];
    const tq_flash_file *f = &c->m->files[it->file];
    const char *p = c->paths[it->file];
    unsigned char d[32];
    if (it->block >= 0) {
        const tq_flash_block *b = &c->m->blocks[it->block];
        if (tq_sha256_range(c->fds[it->file], b->offset, b->length, p, d, e) != 0)
            return -1;
        if (memcmp(d, b->sha256, 32))
            return tq_fail(e, TQ_EDATA, "%s: layer %u expert %u (bytes %llu..%llu) does not match split.json's sha256: "
                                        "changed after the split was made",
                           p, b->layer, b->expert, (unsigned long long)b->offset,
                           (unsigned long long)(b->offset + b->length));
        tq_work_progress(q, b->length);
        return 0;
    }
    int header = it->block == -2;
    uint64_t len = header ? f->header_bytes : f->size;
    if (tq_sha256_range(c->fds[it->file], 0, len, p, d, e) != 0)
        return -1;
    if (memcmp(d, header ? f->header_sha256 : f->sha256, 32))
        return tq_fail(e, TQ_EDATA, "%s: %s does not match split.json's %s: changed after the split was made", p,
                       header ? "header" : "content", header ? "header_sha256" : "sha256");
    tq_work_progress(q, len);
    return 0;
}

/* The layer whose file is name, with its blocks (MoE), or NULL. */
static const tq_flash_layer *blocks_of(const tq_flash_manifest *m, const char *name, size_t *first)
{
    if (m->kind != TQ_FLASH_MOE)
        return NULL;
    for (size_t l = 0; l < m->n_layers; l++) {
        if (!strcmp(m->layers[l].file, name) && (l + 1) * m->num_experts <= m->n_blocks) {
            *first = l * m->num_experts;
            return &m->layers[l];
        }
    }
    return NULL;
}

int tq_flash_manifest_check_data(const tq_flash_manifest *m, const char *split_dir, int threads, int quiet,
                                 tq_err *e)
{
    data_check c = {.m = m, .dir = split_dir};
    size_t cap = m->n_files + m->n_blocks, n = 0;
    uint64_t total = 0;
    int rc = -1;
    if (!(c.items = tq_calloc(cap ? cap : 1, sizeof *c.items, e)) ||
        !(c.fds = tq_calloc(m->n_files ? m->n_files : 1, sizeof *c.fds, e)) ||
        !(c.paths = tq_calloc(m->n_files ? m->n_files : 1, sizeof *c.paths, e)))
        goto out;
    for (size_t i = 0; i < m->n_files; i++)
        c.fds[i] = -1;
    for (size_t i = 0; i < m->n_files; i++) {
        const tq_flash_file *f = &m->files[i];
        uint64_t size;
        if (!(c.paths[i] = tq_path_join(split_dir, f->name, e)) || (c.fds[i] = tq_open_regular(c.paths[i], &size, e)) < 0)
            goto out;
        if (size != f->size) {
            tq_fail(e, TQ_EDATA, "%s: %llu bytes, split.json records %llu: changed after the split was made", c.paths[i],
                    (unsigned long long)size, (unsigned long long)f->size);
            goto out;
        }
        size_t first;
        /* blocks and header cover a layer file exactly when they tile it; else hash it whole */
        const tq_flash_layer *L = f->header_bytes ? blocks_of(m, f->name, &first) : NULL;
        uint64_t end = f->header_bytes;
        for (uint64_t x = 0; L && x < m->num_experts; x++) {
            const tq_flash_block *b = &m->blocks[first + x];
            if (b->offset != end)
                L = NULL;
            else
                end = b->offset + b->length;
        }
        if (L && end == f->size) {
            c.items[n++] = (data_item){i, -2};
            for (uint64_t x = 0; x < m->num_experts; x++)
                c.items[n++] = (data_item){i, (int64_t)(first + x)};
        } else {
            c.items[n++] = (data_item){i, -1};
        }
        total += f->size;
    }
    tq_progress prog;
    tq_progress_init(&prog, "verify", total, quiet);
    rc = tq_work_run(n, threads > 0 ? threads : tq_default_threads(), check_item, &c, &prog, e);
    if (rc == 0)
        tq_progress_end(&prog);
out:
    for (size_t i = 0; c.fds && i < m->n_files; i++) {
        if (c.fds[i] >= 0)
            close(c.fds[i]);
        if (c.paths)
            free(c.paths[i]);
    }
    free(c.fds);
    free(c.paths);
    free(c.items);
    return rc;
}
