/* tq-manifest.json + SHA256SUMS: build (parallel hashing), serialize, parse (hostile). */
#include "verify/verify_internal.h"
#include "formats/formats.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>


static int cmp_range(const void *a, const void *b)
{
    const tq_mf_range *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Tensor ranges of a safetensors file, from its (validated) header. */
static int st_ranges(const char *abs, tq_mf_file *f, tq_err *e)
{
    tq_st_file *st;
    if (tq_st_open(&st, abs, e) != 0)
        return -1;
    f->safetensors = 1;
    f->ranges = st->n_tensors ? tq_calloc(st->n_tensors, sizeof *f->ranges, e) : NULL;
    if (st->n_tensors && !f->ranges) {
        tq_st_close(st);
        return -1;
    }
    for (size_t i = 0; i < st->n_tensors; i++) {
        const tq_tensor_info *t = &st->tensors[i];
        tq_mf_range *r = &f->ranges[i];
        r->kind = TQ_MF_TENSOR;
        if (!(r->name = tq_strdup(t->name, e))) {
            tq_st_close(st);
            return -1;
        }
        f->n_ranges = i + 1;
        snprintf(r->dtype, sizeof r->dtype, "%s", tq_dtype_name(t->dtype));
        r->ndim = t->ndim;
        for (int d = 0; d < t->ndim && d < 8; d++)
            r->shape[d] = t->shape[d];
        r->offset = t->offset;
        r->nbytes = t->nbytes;
    }
    tq_st_close(st);
    if (f->n_ranges)
        qsort(f->ranges, f->n_ranges, sizeof *f->ranges, cmp_range);
    return 0;
}

int tq_mf_ranges_for(const tq_mf_file *f, tq_vh_range **out, tq_err *e)
{
    *out = NULL;
    if (!f->n_ranges)
        return 0;
    tq_vh_range *r = tq_calloc(f->n_ranges, sizeof *r, e);
    if (!r)
        return -1;
    for (size_t i = 0; i < f->n_ranges; i++) {
        r[i].off = f->ranges[i].offset;
        r[i].len = f->ranges[i].nbytes;
    }
    *out = r;
    return 0;
}


int tq_manifest_build(const char *dir, int threads, tq_manifest **out, tq_err *e)
{
    char **paths = NULL;
    size_t n = 0;
    if (tq_verify_walk(dir, &paths, &n, e) != 0)
        return -1;
    tq_manifest *m = tq_calloc(1, sizeof *m, e);
    tq_vh_task *tasks = NULL;
    char **abs = NULL;
    int rc = -1;
    if (!m)
        goto out;
    m->files = n ? tq_calloc(n, sizeof *m->files, e) : NULL;
    tasks = tq_calloc(n ? n : 1, sizeof *tasks, e);
    abs = tq_calloc(n ? n : 1, sizeof *abs, e);
    if ((n && !m->files) || !tasks || !abs)
        goto out;
    for (size_t i = 0; i < n; i++) {
        tq_mf_file *f = &m->files[i];
        f->path = paths[i];
        paths[i] = NULL;
        m->n_files = i + 1;
        if (!(abs[i] = tq_path_join(dir, f->path, e)))
            goto out;
        if (ends_with(f->path, ".safetensors") && st_ranges(abs[i], f, e) != 0)
            goto out;
    }
    if (tq_verify_split_blocks(dir, m, e) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        tq_mf_file *f = &m->files[i];
        tasks[i].path = abs[i];
        tasks[i].want_whole = 1;
        if (tq_mf_ranges_for(f, &tasks[i].r, e) != 0)
            goto out;
        tasks[i].n = f->n_ranges;
        if (tq_file_size(abs[i], &tasks[i].size_hint, e) != 0)
            goto out;
    }
    if (tq_vh_run(tasks, n, threads, e) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        tq_mf_file *f = &m->files[i];
        if (tasks[i].failed) {
            *e = tasks[i].err;
            goto out;
        }
        memcpy(f->sha256, tasks[i].whole, 32);
        f->size = tasks[i].size;
        for (size_t k = 0; k < f->n_ranges; k++) {
            if (tasks[i].r[k].seen != f->ranges[k].nbytes) {
                tq_fail(e, TQ_EDATA, "%s: changed while hashing (range '%s' past the end)", abs[i],
                        f->ranges[k].name);
                goto out;
            }
            memcpy(f->ranges[k].sha256, tasks[i].r[k].out, 32);
        }
    }
    rc = 0;
out:
    if (tasks)
        for (size_t i = 0; i < n; i++)
            free(tasks[i].r);
    free(tasks);
    if (abs)
        for (size_t i = 0; i < n; i++)
            free(abs[i]);
    free(abs);
    tq_free_strv(paths, n);
    if (rc == 0)
        *out = m;
    else
        tq_manifest_free(m);
    return rc;
}

/* The pair written and published under the one rule of outputs, with the inputs (src, NULL:
 * none) checked up to publishing: after both partials are complete, before either is
 * renamed. The earlier pair (fm and fs as checked at the start) is the command's own to
 * replace: it is what tq-verify manifest refreshes. */
static int write_pair(const tq_manifest *m, const tq_sources *src, tq_afile *fm, tq_afile *fs, tq_err *e)
{
    size_t len;
    char *sums = tq_manifest_sums(m, &len, e);
    cJSON *j = tq_manifest_to_json(m, e);
    char *mtext = j ? tq_json_print(j, e) : NULL;
    tq_afile *both[2] = {fm, fs};
    int rc = -1;
    if (!sums || !mtext || tq_afile_create(fm, e) != 0 || tq_afile_create(fs, e) != 0 ||
        tq_write_full(fm->fd, mtext, strlen(mtext), fm->tmp_path, e) != 0 ||
        tq_write_full(fs->fd, sums, len, fs->tmp_path, e) != 0 || tq_afile_sync(fm, e) != 0 ||
        tq_afile_sync(fs, e) != 0 || (src && tq_sources_check_afiles(src, both, 2, e) != 0)) {
        /* nothing published; the partials are removed, or kept and named */
    } else if (tq_afile_ready(fm, e) != 0 || tq_afile_ready(fs, e) != 0 || tq_afile_commit(fm, e) != 0) {
        /* one of the pair appeared meanwhile: neither is published; both complete files kept */
        for (int i = 0; i < 2; i++) {
            char *kept = tq_afile_keep(both[i]);
            if (kept && !strstr(e->msg, kept))
                tq_err_suffix(e, "; the new %s, complete too, is left at %s", i ? TQ_SUMS_NAME : TQ_MANIFEST_NAME, kept);
            free(kept);
        }
    } else if (tq_afile_commit(fs, e) == 0) {
        rc = 0;
    } else if (e->code == TQ_EEXIST) {
        tq_err_suffix(e, " (%s was published)", TQ_MANIFEST_NAME);
    }
    cJSON_Delete(j);
    free(mtext);
    free(sums);
    return rc;
}

/* fm and fs checked: DIR/tq-manifest.json and DIR/SHA256SUMS as they are now. */
static int check_pair(const char *dir, tq_afile *fm, tq_afile *fs, tq_err *e)
{
    char *sp = tq_path_join(dir, TQ_SUMS_NAME, e), *mp = tq_path_join(dir, TQ_MANIFEST_NAME, e);
    int rc = sp && mp && tq_afile_check(fm, mp, TQ_AFILE_REPLACE, e) == 0 &&
                     tq_afile_check(fs, sp, TQ_AFILE_REPLACE, e) == 0
                 ? 0
                 : -1;
    free(sp);
    free(mp);
    return rc;
}

int tq_manifest_update(const char *dir, int threads, tq_manifest **out, tq_err *e)
{
    tq_sources src = {0};
    tq_manifest *m = NULL;
    tq_afile fm = {.fd = -1}, fs = {.fd = -1};
    int rc = -1;
    if (check_pair(dir, &fm, &fs, e) == 0 && tq_sources_add(&src, dir, e) == 0 &&
        tq_manifest_build(dir, threads, &m, e) == 0) {
        /* a file changed while it was hashed: its digest may be of neither version */
        const char *own[2] = {fm.final_path, fs.final_path};
        if (tq_sources_check_own(&src, own, 2, e) != 0)
            tq_err_suffix(e, "; %s and %s were not written", TQ_SUMS_NAME, TQ_MANIFEST_NAME);
        else
            rc = write_pair(m, &src, &fm, &fs, e);
    }
    if (fm.final_path)
        tq_afile_abort(&fm);
    if (fs.final_path)
        tq_afile_abort(&fs);
    tq_sources_free(&src);
    if (rc == 0)
        *out = m;
    else
        tq_manifest_free(m);
    return rc;
}

/* ---------------------------------------------------------------- JSON out */
static cJSON *hex_item(const unsigned char d[32])
{
    char h[65];
    tq_hex(d, 32, h);
    return cJSON_CreateString(h);
}

static cJSON *offsets_item(uint64_t off, uint64_t n)
{
    cJSON *a = cJSON_CreateArray();
    if (a) {
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)(off + n)));
    }
    return a;
}

cJSON *tq_manifest_to_json(const tq_manifest *m, tq_err *e)
{
    cJSON *root = cJSON_CreateObject(), *files = cJSON_AddObjectToObject(root, "files");
    cJSON_AddStringToObject(root, "format", TQ_MANIFEST_FORMAT);
    cJSON_AddStringToObject(root, "tool", "tq-verify");
    cJSON_AddStringToObject(root, "version", TQ_VERSION);
    for (size_t i = 0; files && i < m->n_files; i++) {
        const tq_mf_file *f = &m->files[i];
        cJSON *fo = cJSON_AddObjectToObject(files, f->path);
        if (!fo)
            break;
        cJSON_AddItemToObject(fo, "sha256", hex_item(f->sha256));
        cJSON_AddNumberToObject(fo, "size", (double)f->size);
        cJSON *tens = f->safetensors ? cJSON_AddObjectToObject(fo, "tensors") : NULL;
        cJSON *blocks = NULL;
        for (size_t k = 0; k < f->n_ranges; k++) {
            const tq_mf_range *r = &f->ranges[k];
            cJSON *ro = cJSON_CreateObject();
            cJSON_AddItemToObject(ro, "offsets", offsets_item(r->offset, r->nbytes));
            cJSON_AddItemToObject(ro, "sha256", hex_item(r->sha256));
            if (r->kind == TQ_MF_TENSOR) {
                cJSON_AddStringToObject(ro, "dtype", r->dtype);
                cJSON *sh = cJSON_AddArrayToObject(ro, "shape");
                for (int d = 0; sh && d < r->ndim; d++)
                    cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)r->shape[d]));
                if (!tens)
                    tens = cJSON_AddObjectToObject(fo, "tensors");
                cJSON_AddItemToObject(tens, r->name, ro);
            } else {
                cJSON_AddNumberToObject(ro, "layer", (double)r->layer);
                cJSON_AddNumberToObject(ro, "expert", (double)r->expert);
                if (!blocks)
                    blocks = cJSON_AddObjectToObject(fo, "blocks");
                cJSON_AddItemToObject(blocks, r->name, ro);
            }
        }
    }
    if (!root || !files) {
        cJSON_Delete(root);
        tq_fail(e, TQ_ENOMEM, "out of memory building %s", TQ_MANIFEST_NAME);
        return NULL;
    }
    return root;
}

char *tq_manifest_sums(const tq_manifest *m, size_t *len, tq_err *e)
{
    size_t cap = 1;
    for (size_t i = 0; i < m->n_files; i++)
        cap += 64 + 2 + strlen(m->files[i].path) + 1;
    char *s = tq_malloc(cap, e);
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < m->n_files; i++) {
        tq_hex(m->files[i].sha256, 32, s + o);
        o += 64;
        s[o++] = ' ';
        s[o++] = ' ';
        size_t pl = strlen(m->files[i].path);
        memcpy(s + o, m->files[i].path, pl);
        o += pl;
        s[o++] = '\n';
    }
    s[o] = 0;
    *len = o;
    return s;
}

/* Both files are written and fsynced as partials before either is published, so a full disk
 * or a write error leaves the earlier pair (or none) under the final names, never a short one. */
int tq_manifest_write(const char *dir, const tq_manifest *m, tq_err *e)
{
    tq_afile fm = {.fd = -1}, fs = {.fd = -1};
    int rc = check_pair(dir, &fm, &fs, e) == 0 ? write_pair(m, NULL, &fm, &fs, e) : -1;
    if (fm.final_path)
        tq_afile_abort(&fm);
    if (fs.final_path)
        tq_afile_abort(&fs);
    return rc;
}

/* ----------------------------------------------------------------- JSON in */
static int get_hex(const cJSON *v, unsigned char out[32])
{
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 64)
        return -1;
    return tq_unhex32(v->valuestring, out);
}

static int parse_range(const cJSON *ro, int kind, tq_mf_range *r, uint64_t fsize, tq_err *e,
                       const char *what, const char *path)
{
    r->kind = kind;
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(ro, "offsets");
    uint64_t b, en;
    if (!cJSON_IsObject(ro) || !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        tq_json_u64(cJSON_GetArrayItem(offs, 0), &b) || tq_json_u64(cJSON_GetArrayItem(offs, 1), &en) ||
        b > en || en > fsize)
        return tq_fail(e, TQ_EDATA, "%s: '%s': '%s': bad or out-of-file \"offsets\"", what, path, r->name);
    r->offset = b;
    r->nbytes = en - b;
    if (get_hex(cJSON_GetObjectItemCaseSensitive(ro, "sha256"), r->sha256))
        return tq_fail(e, TQ_EDATA, "%s: '%s': '%s': bad \"sha256\"", what, path, r->name);
    if (kind == TQ_MF_TENSOR) {
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(ro, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(ro, "shape");
        if (!cJSON_IsString(dt) || strlen(dt->valuestring) >= sizeof r->dtype || !cJSON_IsArray(sh) ||
            cJSON_GetArraySize(sh) > 8)
            return tq_fail(e, TQ_EDATA, "%s: '%s': tensor '%s': bad \"dtype\" or \"shape\"", what, path, r->name);
        snprintf(r->dtype, sizeof r->dtype, "%s", dt->valuestring);
        r->ndim = cJSON_GetArraySize(sh);
        for (int d = 0; d < r->ndim; d++)
            if (tq_json_u64(cJSON_GetArrayItem(sh, d), &r->shape[d]))
                return tq_fail(e, TQ_EDATA, "%s: '%s': tensor '%s': bad \"shape\"", what, path, r->name);
    } else {
        uint64_t l, x;
        if (tq_json_u64(cJSON_GetObjectItemCaseSensitive(ro, "layer"), &l) ||
            tq_json_u64(cJSON_GetObjectItemCaseSensitive(ro, "expert"), &x))
            return tq_fail(e, TQ_EDATA, "%s: '%s': block '%s': bad \"layer\" or \"expert\"", what, path, r->name);
        r->layer = (int64_t)l;
        r->expert = (int64_t)x;
    }
    return 0;
}

static int parse_file(const cJSON *fo, tq_mf_file *f, const char *what, tq_err *e)
{
    if (!cJSON_IsObject(fo) || tq_json_u64(cJSON_GetObjectItemCaseSensitive(fo, "size"), &f->size) ||
        get_hex(cJSON_GetObjectItemCaseSensitive(fo, "sha256"), f->sha256))
        return tq_fail(e, TQ_EDATA, "%s: '%s': needs \"size\" (integer) and \"sha256\" (64 hex digits)", what, f->path);
    const cJSON *tens = cJSON_GetObjectItemCaseSensitive(fo, "tensors");
    const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(fo, "blocks");
    if ((tens && !cJSON_IsObject(tens)) || (blocks && !cJSON_IsObject(blocks)))
        return tq_fail(e, TQ_EDATA, "%s: '%s': \"tensors\"/\"blocks\" must be objects", what, f->path);
    size_t cnt = (size_t)cJSON_GetArraySize(tens) + (size_t)cJSON_GetArraySize(blocks);
    f->safetensors = tens != NULL;
    if (!cnt)
        return 0;
    if (!(f->ranges = tq_calloc(cnt, sizeof *f->ranges, e)))
        return -1;
    const cJSON *groups[2] = {tens, blocks};
    for (int g = 0; g < 2; g++) {
        const cJSON *it;
        cJSON_ArrayForEach(it, groups[g])
        {
            tq_mf_range *r = &f->ranges[f->n_ranges];
            if (!(r->name = tq_strdup(it->string ? it->string : "", e)))
                return -1;
            f->n_ranges++;
            if (parse_range(it, g ? TQ_MF_BLOCK : TQ_MF_TENSOR, r, f->size, e, what, f->path) != 0)
                return -1;
        }
    }
    qsort(f->ranges, f->n_ranges, sizeof *f->ranges, cmp_range);
    return 0;
}

static int cmp_mf_file(const void *a, const void *b)
{
    return strcmp(((const tq_mf_file *)a)->path, ((const tq_mf_file *)b)->path);
}

int tq_manifest_from_json(const char *text, size_t len, const char *what, tq_manifest **out, tq_err *e)
{
    cJSON *j = tq_json_parse(text, len, NULL, NULL);
    if (!j)
        return tq_fail(e, TQ_EDATA, "%s: not valid JSON", what);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    if (!cJSON_IsObject(j) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, TQ_MANIFEST_FORMAT) ||
        !cJSON_IsObject(files)) {
        cJSON_Delete(j);
        return tq_fail(e, TQ_EDATA, "%s: not a %s document (needs \"format\" and \"files\")", what,
                       TQ_MANIFEST_FORMAT);
    }
    tq_manifest *m = tq_calloc(1, sizeof *m, e);
    size_t n = (size_t)cJSON_GetArraySize(files);
    int rc = -1;
    if (!m || (n && !(m->files = tq_calloc(n, sizeof *m->files, e))))
        goto out;
    const cJSON *it;
    cJSON_ArrayForEach(it, files)
    {
        tq_mf_file *f = &m->files[m->n_files];
        if (!(f->path = tq_strdup(it->string ? it->string : "", e)))
            goto out;
        m->n_files++;
        if (!tq_verify_path_ok(f->path) || !strcmp(f->path, TQ_SUMS_NAME) || !strcmp(f->path, TQ_MANIFEST_NAME)) {
            tq_fail(e, TQ_EDATA, "%s: unsafe or reserved path '%.200s'", what, f->path);
            goto out;
        }
        if (parse_file(it, f, what, e) != 0)
            goto out;
    }
    if (m->n_files)
        qsort(m->files, m->n_files, sizeof *m->files, cmp_mf_file);
    for (size_t i = 1; i < m->n_files; i++)
        if (!strcmp(m->files[i].path, m->files[i - 1].path)) {
            tq_fail(e, TQ_EDATA, "%s: '%.200s' is listed twice", what, m->files[i].path);
            goto out;
        }
    rc = 0;
out:
    cJSON_Delete(j);
    if (rc == 0)
        *out = m;
    else
        tq_manifest_free(m);
    return rc;
}
