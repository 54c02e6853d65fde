/* HuggingFace model directories: model.safetensors, or model.safetensors.index.json + shards,
 * or a set of *.safetensors without an index, or a single .safetensors file. The index is as
 * hostile as the shards: it may only name plain files in the directory, and it must agree
 * exactly with what the shards hold. */
#include "formats/formats_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_NAME "model.safetensors.index.json"
#define MAX_INDEX_BYTES (256u << 20)
#define MAX_CONFIG_BYTES (64u << 20)
#define MAX_EXPERT_INDEX (1u << 20) /* TQ_FLASH_MAX_EXPERTS */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

static int cmp_mt(const void *a, const void *b)
{
    return strcmp(((const tq_model_tensor *)a)->info.name, ((const tq_model_tensor *)b)->info.name);
}

static int push_str(char ***v, size_t *n, const char *s, tq_err *e)
{
    /* grow at powers of two */
    if ((*n & (*n - 1)) == 0) {
        char **nv = realloc(*v, (*n ? 2 * *n : 1) * sizeof **v);
        if (!nv)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        *v = nv;
    }
    char **nv = *v;
    if (!(nv[*n] = tq_strdup(s, e)))
        return -1;
    (*n)++;
    return 0;
}

/* Where routed experts sit in a tensor name: the block before "experts." or "switch_mlp." /
 * "switch_glu." (length of "model.layers.0.mlp."), whether they are per-expert
 * ("experts.N.") or stacked (MLX switch_mlp / switch_glu, HF fused experts.gate_up_proj), and
 * for per-expert names the index text. 0 when the name is not an expert tensor. */
enum { EXP_NONE, EXP_PER, EXP_STACKED };
static int expert_form(const char *name, size_t *block_len, const char **idx, size_t *idx_len)
{
    static const char *const stacked[] = {".switch_mlp.", ".switch_glu.", ".experts.gate_up_proj", ".experts.down_proj",
                                          ".experts.gate_proj", ".experts.up_proj"};
    for (size_t k = 0; k < sizeof stacked / sizeof *stacked; k++) {
        const char *s = strstr(name, stacked[k]);
        if (s) {
            *block_len = (size_t)(s - name) + 1;
            /* an MLX container under experts. ("experts.switch_glu.") belongs to the block above */
            if (*block_len >= 8 && !strncmp(name + *block_len - 8, "experts.", 8))
                *block_len -= 8;
            return EXP_STACKED;
        }
    }
    const char *x = strstr(name, ".experts.");
    if (!x || x[9] < '0' || x[9] > '9')
        return EXP_NONE;
    *block_len = (size_t)(x - name) + 1;
    *idx = x + 9;
    *idx_len = strspn(*idx, "0123456789");
    return EXP_PER;
}

/* Index of the first tensor whose name is >= key (names are sorted). */
static size_t lower_bound(const tq_model *m, const char *key, size_t key_len)
{
    size_t lo = 0, hi = m->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strncmp(m->tensors[mid].info.name, key, key_len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Expert tensors must be unambiguous: an index is a canonical decimal below 2^20 (no leading
 * zero: "experts.01" and "experts.1" would be one expert or two), and no block holds both
 * per-expert and stacked experts (which would be the experts?). Names are sorted. */
static int check_expert_names(const tq_model *m, tq_err *e)
{
    char key[512];
    for (size_t i = 0; i < m->n_tensors; i++) {
        const char *n = m->tensors[i].info.name, *idx = NULL;
        size_t blen = 0, ilen = 0;
        int form = expert_form(n, &blen, &idx, &ilen);
        if (form == EXP_PER && ((ilen > 1 && idx[0] == '0') || ilen > 7 || strtoul(idx, NULL, 10) >= MAX_EXPERT_INDEX))
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s': expert index '%.*s' is not a canonical decimal below %u",
                           m->path, n, (int)(ilen > 24 ? 24 : ilen), idx, MAX_EXPERT_INDEX);
        if (form != EXP_STACKED || blen + 8 >= sizeof key)
            continue;
        /* per-expert names of the same block sort from "<block>experts." on */
        memcpy(key, n, blen);
        memcpy(key + blen, "experts.", 9);
        for (size_t k = lower_bound(m, key, blen + 8); k < m->n_tensors; k++) {
            const char *o = m->tensors[k].info.name;
            if (strncmp(o, key, blen + 8))
                break;
            if (o[blen + 8] >= '0' && o[blen + 8] <= '9')
                return tq_fail(e, TQ_EDATA,
                               "%s: '%.*s' holds both per-expert (%s) and stacked (%s) expert tensors: which are the "
                               "experts is ambiguous",
                               m->path, (int)blen, n, o, n);
        }
    }
    return 0;
}

/* names are relative to m->path, or full paths when single_file */
static int open_shards(tq_model *m, char **names, size_t n, int single_file, tq_err *e)
{
    if (!(m->files = tq_calloc(n ? n : 1, sizeof *m->files, e)))
        return -1;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = single_file ? NULL : tq_path_join(m->path, names[i], e);
        if (!single_file && !p)
            return -1;
        int rc = tq_st_open(&m->files[i], single_file ? names[i] : p, e);
        free(p);
        if (rc != 0)
            return -1;
        m->n_files++;
        if (tq_add_u64(total, m->files[i]->n_tensors, &total) != 0)
            return tq_fail(e, TQ_EDATA, "%s: too many tensors", m->path);
    }
    if (!(m->tensors = tq_calloc(total ? (size_t)total : 1, sizeof *m->tensors, e)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < m->files[i]->n_tensors; k++) {
            tq_model_tensor *t = &m->tensors[m->n_tensors++];
            t->info = m->files[i]->tensors[k];
            t->file = m->files[i];
        }
    }
    qsort(m->tensors, m->n_tensors, sizeof *m->tensors, cmp_mt);
    for (size_t i = 1; i < m->n_tensors; i++) {
        const tq_model_tensor *a = &m->tensors[i - 1], *b = &m->tensors[i];
        if (!strcmp(a->info.name, b->info.name)) {
            const char *fa = base_name(a->file->path), *fb = base_name(b->file->path);
            if (strcmp(fa, fb) > 0) {
                const char *t = fa;
                fa = fb;
                fb = t;
            }
            return tq_fail(e, TQ_EDATA, "%s: tensor '%s' is in both %s and %s", m->path, a->info.name, fa, fb);
        }
    }
    return check_expert_names(m, e);
}

typedef struct ientry {
    const char *name, *shard;
} ientry;

static int cmp_ientry(const void *a, const void *b)
{
    return strcmp(((const ientry *)a)->name, ((const ientry *)b)->name);
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int open_indexed(tq_model *m, tq_err *e)
{
    char *ipath = tq_path_join(m->path, INDEX_NAME, e);
    if (!ipath)
        return -1;
    cJSON *root = NULL;
    ientry *ent = NULL;
    char **shards = NULL;
    size_t n_shards = 0, n = 0;
    int rc = -1;
    if (tq_json_read_file(ipath, MAX_INDEX_BYTES, &root, e) != 0)
        goto out;
    if (!cJSON_IsObject(root)) {
        tq_fail(e, TQ_EDATA, "%s: not a JSON object", ipath);
        goto out;
    }
    const cJSON *wm = NULL, *meta = NULL;
    for (const cJSON *c = root->child; c; c = c->next) {
        const cJSON **slot = !strcmp(c->string, "weight_map") ? &wm : !strcmp(c->string, "metadata") ? &meta : NULL;
        if (slot && *slot) {
            tq_fail(e, TQ_EDATA, "%s: key '%s' appears twice", ipath, c->string);
            goto out;
        }
        if (slot)
            *slot = c;
    }
    if (!wm || !cJSON_IsObject(wm)) {
        tq_fail(e, TQ_EDATA, "%s: %s", ipath, wm ? "weight_map is not an object" : "no weight_map");
        goto out;
    }
    if (meta && !cJSON_IsObject(meta)) {
        tq_fail(e, TQ_EDATA, "%s: metadata is not an object", ipath);
        goto out;
    }
    for (const cJSON *c = wm->child; c; c = c->next)
        n++;
    if (n == 0) {
        tq_fail(e, TQ_EDATA, "%s: weight_map is empty: the index names no tensor", ipath);
        goto out;
    }
    if (!(ent = tq_calloc(n ? n : 1, sizeof *ent, e)))
        goto out;
    n = 0;
    for (const cJSON *c = wm->child; c; c = c->next) {
        if (!cJSON_IsString(c)) {
            tq_fail(e, TQ_EDATA, "%s: weight_map: tensor '%s': shard name is not a string", ipath, c->string);
            goto out;
        }
        const char *s = c->valuestring;
        if (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) {
            tq_fail(e, TQ_EDATA, "%s: weight_map: tensor '%s': shard '%s' is not a file name in the model directory",
                    ipath, c->string, s);
            goto out;
        }
        ent[n++] = (ientry){c->string, s};
    }
    qsort(ent, n, sizeof *ent, cmp_ientry);
    for (size_t i = 1; i < n; i++) {
        if (!strcmp(ent[i - 1].name, ent[i].name)) {
            tq_fail(e, TQ_EDATA, "%s: weight_map: tensor '%s' is listed twice", ipath, ent[i].name);
            goto out;
        }
    }
    /* distinct shard names, sorted (sort then unique: an index may name many shards) */
    const char **all = tq_calloc(n ? n : 1, sizeof *all, e);
    if (!all)
        goto out;
    for (size_t i = 0; i < n; i++)
        all[i] = ent[i].shard;
    qsort(all, n, sizeof *all, cmp_strp);
    for (size_t i = 0; i < n; i++) {
        if ((i == 0 || strcmp(all[i - 1], all[i])) && push_str(&shards, &n_shards, all[i], e) != 0) {
            free(all);
            goto out;
        }
    }
    free(all);
    for (size_t i = 0; i < n_shards; i++) {
        char *p = tq_path_join(m->path, shards[i], e);
        if (!p)
            goto out;
        int ok = tq_exists(p);
        free(p);
        if (!ok) {
            const char *who = "";
            for (size_t k = 0; k < n; k++)
                if (!strcmp(ent[k].shard, shards[i])) {
                    who = ent[k].name;
                    break;
                }
            tq_fail(e, TQ_EDATA, "%s: shard '%s' (named for tensor '%s') does not exist", ipath, shards[i], who);
            goto out;
        }
    }
    if (open_shards(m, shards, n_shards, 0, e) != 0)
        goto out;
    /* the index and the shards must agree exactly */
    size_t i = 0, k = 0;
    while (i < n || k < m->n_tensors) {
        int c = i == n ? 1 : k == m->n_tensors ? -1 : strcmp(ent[i].name, m->tensors[k].info.name);
        if (c < 0) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s' is not in shard '%s'", ipath, ent[i].name, ent[i].shard);
            goto out;
        }
        if (c > 0) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s' of shard '%s' is not in the weight_map", ipath,
                    m->tensors[k].info.name, base_name(m->tensors[k].file->path));
            goto out;
        }
        const char *actual = base_name(m->tensors[k].file->path);
        if (strcmp(actual, ent[i].shard)) {
            tq_fail(e, TQ_EDATA, "%s: tensor '%s' is listed in shard '%s' but stored in '%s'", ipath, ent[i].name,
                    ent[i].shard, actual);
            goto out;
        }
        i++, k++;
    }
    rc = 0;
out:
    tq_free_strv(shards, n_shards);
    free(ent);
    cJSON_Delete(root);
    free(ipath);
    return rc;
}

static int open_dir(tq_model *m, tq_err *e)
{
    char **names = NULL, **weights = NULL, **ggufs = NULL;
    size_t nn = 0, nw = 0, ng = 0;
    int has_index = 0, has_config = 0, rc = -1;
    if (tq_list_dir(m->path, &names, &nn, e) != 0)
        return -1;
    for (size_t i = 0; i < nn; i++) {
        const char *s = names[i];
        /* hidden files and partial outputs of an interrupted writer are not model files, and
         * an output's provenance is its own: never copied into the next output */
        if (s[0] == '.' || strstr(s, ".partial-") || !strcmp(s, TQ_PROVENANCE_NAME))
            continue;
        char *p = tq_path_join(m->path, s, e);
        if (!p)
            goto out;
        struct stat st;
        int got = stat(p, &st) == 0, reg = got && S_ISREG(st.st_mode);
        /* a file tq reads that is not a regular file (a FIFO would block, a directory holds
         * nothing to read) is refused by name, not passed over */
        int model_file = !strcmp(s, INDEX_NAME) || !strcmp(s, "config.json") || ends_with(s, ".safetensors") ||
                         ends_with(s, ".gguf");
        if (got && !reg && (model_file || !S_ISDIR(st.st_mode))) {
            tq_fail(e, TQ_EDATA, "%s: not a regular file (%s)", p, tq_file_kind((unsigned)st.st_mode));
            free(p);
            goto out;
        }
        free(p);
        if (!reg)
            continue;
        if (!strcmp(s, "split.json") && (m->flags & TQ_MODEL_NO_SPLIT)) {
            tq_fail(e, TQ_EDATA, "%s: a tq-split directory (it has split.json), not a model directory: "
                    "tq-split --join %s OUT makes a model directory from it", m->path, m->path);
            goto out;
        }
        if (!strcmp(s, INDEX_NAME))
            has_index = 1;
        else if (!strcmp(s, "config.json"))
            has_config = 1;
        else if (ends_with(s, ".safetensors")) {
            if (push_str(&weights, &nw, s, e) != 0)
                goto out;
        } else if (ends_with(s, ".gguf")) {
            if (push_str(&ggufs, &ng, s, e) != 0)
                goto out;
        } else if (push_str(&m->extra_files, &m->n_extra, s, e) != 0)
            goto out;
    }
    if (has_config) {
        char *p = tq_path_join(m->path, "config.json", e);
        if (!p || tq_json_read_file(p, MAX_CONFIG_BYTES, &m->config, e) != 0) {
            free(p);
            goto out;
        }
        if (!cJSON_IsObject(m->config)) {
            tq_fail(e, TQ_EDATA, "%s: not a JSON object", p);
            free(p);
            goto out;
        }
        free(p);
    }
    if ((has_index || nw) && ng) {
        tq_fail(e, TQ_EDATA, "%s: holds both safetensors (%s) and GGUF (%s) files; which one is the model is "
                "ambiguous: keep one format in the directory", m->path, has_index ? INDEX_NAME : weights[0], ggufs[0]);
        goto out;
    }
    if (has_index) {
        rc = open_indexed(m, e);
    } else if (nw) {
        rc = open_shards(m, weights, nw, 0, e);
    } else if (ng) {
        char *p = ng == 1 ? tq_path_join(m->path, ggufs[0], e) : tq_strdup(m->path, e);
        rc = p ? tq_model_open_gguf(m, p, e) : -1;
        free(p);
    } else {
        tq_fail(e, TQ_EDATA, "%s: no %s, *.safetensors or *.gguf file in the directory", m->path, INDEX_NAME);
    }
out:
    tq_free_strv(names, nn);
    tq_free_strv(weights, nw);
    tq_free_strv(ggufs, ng);
    return rc;
}

int tq_model_open(tq_model **out, const char *path, tq_err *e)
{
    return tq_model_open_ex(out, path, 0, e);
}

int tq_model_open_ex(tq_model **out, const char *path, unsigned flags, tq_err *e)
{
    *out = NULL;
    tq_model *m = tq_calloc(1, sizeof *m, e);
    if (!m)
        return -1;
    m->flags = flags;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    if (!(m->path = tq_strdup(path, e))) {
        free(m);
        return -1;
    }
    m->path[len] = 0;
    int rc;
    if (tq_is_dir(m->path)) {
        rc = open_dir(m, e);
    } else if (ends_with(m->path, ".gguf")) {
        rc = tq_model_open_gguf(m, m->path, e);
    } else {
        char *one = m->path;
        rc = open_shards(m, &one, 1, 1, e);
    }
    if (rc != 0) {
        tq_model_close(m);
        return -1;
    }
    *out = m;
    return 0;
}

void tq_model_close(tq_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_files; i++)
        tq_st_close(m->files[i]);
    free(m->files);
    free(m->tensors);
    tq_free_strv(m->extra_files, m->n_extra);
    for (size_t i = 0; i < m->n_generated; i++)
        cJSON_Delete(m->generated[i]);
    free(m->generated);
    tq_free_strv(m->generated_names, m->n_generated);
    cJSON_Delete(m->config);
    if (m->source && m->source->close)
        m->source->close(m->source);
    free(m->path);
    free(m);
}

static int cmp_key_mt(const void *key, const void *elem)
{
    return strcmp(key, ((const tq_model_tensor *)elem)->info.name);
}

const tq_model_tensor *tq_model_find(const tq_model *m, const char *name)
{
    return bsearch(name, m->tensors, m->n_tensors, sizeof *m->tensors, cmp_key_mt);
}

int tq_model_read(const tq_model_tensor *t, uint64_t off, void *buf, size_t len, tq_err *e)
{
    if (t->file)
        return tq_st_read(t->file, &t->info, off, buf, len, e);
    if (t->src && t->src->read)
        return t->src->read(t->src, t->src_index, off, buf, len, e);
    return tq_fail(e, TQ_EUSAGE, "tensor '%s': no source to read from", t->info.name);
}

struct cJSON *tq_model_generated_file(const tq_model *m, size_t i, const char **name)
{
    if (i >= m->n_generated || !m->generated[i])
        return NULL;
    for (size_t k = 0; k < m->n_extra; k++)
        if (!strcmp(m->extra_files[k], m->generated_names[i]))
            return NULL;
    *name = m->generated_names[i];
    return m->generated[i];
}

int tq_model_copy_extras(const tq_model *m, const char *dir, tq_err *e)
{
    for (size_t i = 0; i < m->n_extra; i++) {
        char *src = tq_path_join(m->path, m->extra_files[i], e);
        char *dst = src ? tq_path_join(dir, m->extra_files[i], e) : NULL;
        int rc = dst ? tq_copy_file(src, dst, e) : -1;
        free(src);
        free(dst);
        if (rc != 0)
            return -1;
    }
    for (size_t i = 0; i < m->n_generated; i++) {
        const char *name;
        cJSON *j = tq_model_generated_file(m, i, &name);
        if (!j)
            continue;
        char *dst = tq_path_join(dir, name, e);
        int rc = dst ? tq_json_write_file(dst, j, e) : -1;
        free(dst);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int tq_model_extras_plan(const tq_model *m, tq_out_plan *files, tq_err *e)
{
    for (size_t i = 0; i < m->n_extra; i++) {
        char *src = tq_path_join(m->path, m->extra_files[i], e);
        uint64_t size = 0;
        int rc = src ? tq_file_size(src, &size, e) : -1;
        free(src);
        if (rc != 0 || tq_out_plan_add(files, m->extra_files[i], size, e) != 0)
            return -1;
    }
    for (size_t i = 0; i < m->n_generated; i++) {
        const char *name;
        cJSON *j = tq_model_generated_file(m, i, &name);
        if (j && tq_out_plan_add_json(files, name, j, e) != 0)
            return -1;
    }
    return 0;
}

const char *tq_model_tensor_file(const tq_model *m, const tq_model_tensor *t)
{
    return base_name(t->file ? t->file->path : m->path);
}
