/* What a reader checks when it opens a split directory that has a split.json: the small files
 * it lists (config.json, tokenizer files) hash as recorded, every layer file's header parses and
 * agrees with split.json, and config.json's streaming block agrees with both (man tq-formats(5),
 * config.json streaming block and split.json). */
#include "formats/family.h"
#include "formats/flash_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* pinned.safetensors or a layer file: read through their recorded headers, never hashed whole
 * at open (tq-verify check and --check-blocks hash their data). */
static int is_big(const tq_flash_manifest *m, const char *name)
{
    if (!strcmp(name, "pinned.safetensors"))
        return 1;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].file, name))
            return 1;
    return 0;
}

int tq_flash_manifest_check_small(const tq_flash_manifest *m, const char *dir, tq_err *e)
{
    for (size_t i = 0; i < m->n_files; i++) {
        const tq_flash_file *f = &m->files[i];
        if (is_big(m, f->name))
            continue;
        char *p = tq_path_join(dir, f->name, e);
        if (!p)
            return -1;
        unsigned char d[32];
        uint64_t size = 0;
        int rc = tq_sha256_file(p, d, &size, e);
        if (rc == 0 && size != f->size)
            rc = tq_fail(e, TQ_EDATA, "%s: %llu bytes, but split.json's files.\"%s\".size is %llu: changed after the "
                                      "split was made",
                         p, (unsigned long long)size, f->name, (unsigned long long)f->size);
        else if (rc == 0 && memcmp(d, f->sha256, 32))
            rc = tq_fail(e, TQ_EDATA, "%s: content does not match split.json's files.\"%s\".sha256: changed after the "
                                      "split was made",
                         p, f->name);
        free(p);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int tq_flash_manifest_check_layer(const tq_flash_manifest *m, size_t i, const tq_flash_header *h, const char *path,
                                  tq_err *e)
{
    const tq_flash_layer *L = &m->layers[i];
#define DIS(what, got, want)                                                                                          \
    return tq_fail(e, TQ_EDATA, "%s: header: %s %llu but split.json records %llu", path, what,                        \
                   (unsigned long long)(got), (unsigned long long)(want))
    if (h->kind != m->kind)
        return tq_fail(e, TQ_EDATA, "%s: header: format %s but split.json's kind is %s", path,
                       h->kind == TQ_FLASH_MOE ? "moe_flash_v1" : "flash_aligned_v1",
                       m->kind == TQ_FLASH_MOE ? "moe" : "dense");
    if (h->layer_idx != L->layer)
        DIS("layer_idx", h->layer_idx, L->layer);
    if (h->page_size != m->align)
        DIS("page_size", h->page_size, m->align);
    const tq_flash_file *f = tq_flash_manifest_file(m, L->file);
    if (f && f->header_bytes && f->header_bytes != h->page_size)
        DIS("page_size", h->page_size, f->header_bytes);
    if (f && h->total_size != f->size)
        DIS("total_size", h->total_size, f->size);
    if (m->kind != TQ_FLASH_MOE)
        return 0;
    if (h->num_experts != m->num_experts)
        DIS("num_experts", h->num_experts, m->num_experts);
    for (uint64_t x = 0; x < m->num_experts; x++) {
        const tq_flash_block *b = &m->blocks[i * m->num_experts + x];
        uint64_t off, len;
        if (tq_flash_expert_range(h, x, &off, &len, e) != 0)
            return -1;
        if (b->offset != off || b->length != len)
            return tq_fail(e, TQ_EDATA, "%s: header puts expert %llu at bytes [%llu, +%llu), split.json's "
                                        "expert_blocks at [%llu, +%llu)",
                           path, (unsigned long long)x, (unsigned long long)off, (unsigned long long)len,
                           (unsigned long long)b->offset, (unsigned long long)b->length);
    }
#undef DIS
    return 0;
}

/* streaming.KEY as a string (NULL and an error naming it when missing or not a string) */
static const char *st_str(const cJSON *st, const char *key, const char *cfg, tq_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, key);
    if (!cJSON_IsString(v))
        return tq_fail(e, TQ_EDATA, "%s: streaming.%s is %s (tq-split writes a string)", cfg, key,
                       v ? "not a string" : "missing"), NULL;
    return v->valuestring;
}

static int st_u64(const cJSON *st, const char *key, uint64_t want, const char *cfg, const char *what, tq_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, key);
    uint64_t x;
    if (!v || tq_json_u64(v, &x) != 0)
        return tq_fail(e, TQ_EDATA, "%s: streaming.%s is %s", cfg, key, v ? "not a non-negative integer" : "missing");
    if (x != want)
        return tq_fail(e, TQ_EDATA, "%s: streaming.%s is %llu but %s is %llu", cfg, key, (unsigned long long)x, what,
                       (unsigned long long)want);
    return 0;
}

/* DIR/SUB/layer_LL.bin (what the runtime opens for layer LL) is the file split.json lists */
static int same_layer_file(const char *dir, const char *sub, const tq_flash_layer *L, const char *cfg,
                           const char *key, tq_err *e)
{
    char name[32];
    snprintf(name, sizeof name, "layer_%02u.bin", L->layer);
    char *d = tq_path_join(dir, sub, e);
    char *p = d ? tq_path_join(d, name, e) : NULL;
    char *q = p ? tq_path_join(dir, L->file, e) : NULL;
    int rc = -1;
    struct stat a, b;
    if (q) {
        if (stat(p, &a) != 0 || stat(q, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
            tq_fail(e, TQ_EDATA, "%s: streaming.%s \"%s\": layer %u would be read from %s, but split.json's layer file "
                                 "is %s",
                    cfg, key, sub, L->layer, p, q);
        else
            rc = 0;
    }
    free(d);
    free(p);
    free(q);
    return rc;
}

int tq_flash_streaming_check(const cJSON *config, const tq_flash_manifest *m, const char *dir, const char *cfg,
                             tq_err *e)
{
    const cJSON *st = cJSON_IsObject(config) ? cJSON_GetObjectItemCaseSensitive(config, "streaming") : NULL;
    if (!cJSON_IsObject(st))
        return tq_fail(e, TQ_EDATA, "%s: no 'streaming' object, but the directory has a split.json", cfg);
    const int moe = m->kind == TQ_FLASH_MOE;
    const char *fmt = st_str(st, "format", cfg, e), *want = moe ? "moe_flash_v1" : "flash_aligned_v1";
    if (!fmt)
        return -1;
    if (strcmp(fmt, want))
        return tq_fail(e, TQ_EDATA, "%s: streaming.format is \"%.64s\" but split.json's kind %s is %s", cfg, fmt,
                       moe ? "moe" : "dense", want);
    const char *man = st_str(st, "manifest", cfg, e);
    if (!man)
        return -1;
    if (strcmp(man, "split.json"))
        return tq_fail(e, TQ_EDATA, "%s: streaming.manifest is \"%.200s\", not \"split.json\"", cfg, man);
    const char *pin = st_str(st, "pinned_file", cfg, e);
    if (!pin)
        return -1;
    if (strcmp(pin, "pinned.safetensors"))
        return tq_fail(e, TQ_EDATA, "%s: streaming.pinned_file is \"%.200s\", not \"pinned.safetensors\"", cfg, pin);
    if (st_u64(st, "page_size", m->align, cfg, "split.json's align", e) != 0)
        return -1;
    /* num_layers is the decoder's layer count (a family's dense layers have no layer file) */
    uint64_t layers;
    int have = tq_family_cfg_u64(config, "num_hidden_layers", &layers, e);
    if (have < 0 || (have == 0 && st_u64(st, "num_layers", layers, cfg, "num_hidden_layers", e) != 0))
        return -1;
    if (have == 1 && st_u64(st, "num_layers", m->n_layers, cfg, "the number of split.json's layers", e) != 0)
        return -1;
    static const char *const moe_keys[] = {"expert_dir", "num_experts", "experts_per_tok"};
    for (size_t k = 0; k < 3; k++)
        if (!moe && cJSON_GetObjectItemCaseSensitive(st, moe_keys[k]))
            return tq_fail(e, TQ_EDATA, "%s: streaming.%s in a dense split", cfg, moe_keys[k]);
    if (moe && cJSON_GetObjectItemCaseSensitive(st, "ffn_dir"))
        return tq_fail(e, TQ_EDATA, "%s: streaming.ffn_dir in a MoE split", cfg);
    if (moe && (st_u64(st, "num_experts", m->num_experts, cfg, "split.json's num_experts", e) != 0 ||
                st_u64(st, "experts_per_tok", m->experts_per_tok, cfg, "split.json's experts_per_tok", e) != 0))
        return -1;
    /* the experts per token the decoder routes to: the config's own key, said as split.json says */
    const tq_family *f = moe ? tq_family_detect(config) : NULL;
    uint64_t k;
    if (f && f->topk_key && (have = tq_family_cfg_u64(config, f->topk_key, &k, e)) <= 0) {
        if (have < 0)
            return -1;
        if (k != m->experts_per_tok)
            return tq_fail(e, TQ_EDATA, "%s: %s is %llu but split.json's experts_per_tok is %llu", cfg, f->topk_key,
                           (unsigned long long)k, (unsigned long long)m->experts_per_tok);
    }
    const char *key = moe ? "expert_dir" : "ffn_dir";
    const char *sub = st_str(st, key, cfg, e);
    if (!sub)
        return -1;
    for (size_t i = 0; i < m->n_layers; i++)
        if (same_layer_file(dir, sub, &m->layers[i], cfg, key, e) != 0)
            return -1;
    return 0;
}

int tq_flash_split_open_check(const char *dir, tq_err *e)
{
    char *sj = tq_path_join(dir, "split.json", e);
    if (!sj)
        return -1;
    int have = tq_exists(sj);
    free(sj);
    if (!have) /* a peer's split (mac-code, mlx-sniper): nothing recorded to check against */
        return 0;
    tq_flash_manifest *m;
    if (tq_flash_manifest_load(&m, dir, e) != 0)
        return -1;
    char *cfg = NULL;
    cJSON *cj = NULL;
    int rc = -1;
    if (tq_flash_manifest_check_headers(m, dir, e) != 0 || tq_flash_manifest_check_small(m, dir, e) != 0)
        goto out;
    for (size_t i = 0; i < m->n_layers; i++) {
        tq_flash_header h;
        char *p = tq_path_join(dir, m->layers[i].file, e);
        int lrc = p ? tq_flash_read(&h, p, e) : -1;
        if (lrc == 0) {
            lrc = tq_flash_manifest_check_layer(m, i, &h, p, e);
            tq_flash_header_free(&h);
        }
        free(p);
        if (lrc != 0)
            goto out;
    }
    if (!(cfg = tq_path_join(dir, "config.json", e)))
        goto out;
    if (tq_exists(cfg) && (tq_json_read_file(cfg, 64u << 20, &cj, e) != 0 || tq_flash_streaming_check(cj, m, dir, cfg, e) != 0))
        goto out;
    rc = 0;
out:
    cJSON_Delete(cj);
    free(cfg);
    tq_flash_manifest_free(m);
    return rc;
}
