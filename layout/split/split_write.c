/* tq_split: stream a model into pinned.safetensors + per-layer moe_flash_v1 / flash_aligned_v1
 * files + config.json + split.json. Every byte is read once and hashed as it is written;
 * memory is one expert block (or one copy chunk) per thread. The whole output is built in
 * OUT.partial-XXXXXX and renamed into place last, so a failure leaves nothing behind. */
#include "layout/split/split_internal.h"
#include "runtime/runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ config, extras */

/* config.json's text for the split (caller frees), or NULL */
static char *config_text(const split_plan *p, tq_err *e)
{
    cJSON *c = p->m->config ? cJSON_Duplicate(p->m->config, 1) : cJSON_CreateObject();
    if (!c)
        return tq_fail(e, TQ_ENOMEM, "out of memory"), NULL;
    const split_profile *pr = split_profile_get(p->target);
    if (split_profile_config(p, c, e) != 0) {
        cJSON_Delete(c);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(c, "streaming");
    /* the decoder's layer count: a family's dense layers have no layer file but are layers */
    uint64_t n_layers = p->n_layers;
    if (p->fam && tq_family_cfg_u64(p->m->config, "num_hidden_layers", &n_layers, e) != 0)
        n_layers = p->n_layers;
    cJSON *s = cJSON_AddObjectToObject(c, "streaming");
    int ok = s && cJSON_AddStringToObject(s, "pinned_file", "pinned.safetensors") &&
             tq_json_add_u64(s, "num_layers", n_layers) && tq_json_add_u64(s, "page_size", p->align) &&
             cJSON_AddStringToObject(s, "manifest", "split.json");
    if (p->kind == TQ_FLASH_MOE)
        ok = ok && cJSON_AddStringToObject(s, "format", "moe_flash_v1") &&
             cJSON_AddStringToObject(s, "expert_dir", pr->stream_dir) && tq_json_add_u64(s, "num_experts", p->num_experts) &&
             tq_json_add_u64(s, "experts_per_tok", p->top_k);
    else
        ok = ok && cJSON_AddStringToObject(s, "format", "flash_aligned_v1") &&
             cJSON_AddStringToObject(s, "ffn_dir", "ffn_aligned/");
    char *text = ok ? tq_json_print(c, e) : NULL;
    cJSON_Delete(c);
    if (!ok)
        tq_fail(e, TQ_ENOMEM, "out of memory");
    return text;
}

/* tq-provenance.json's text (caller frees), or NULL */
static char *provenance_text(const split_run *r, tq_err *e)
{
    cJSON *j = tq_provenance_json(r->o->provenance, r->plan.m, e);
    char *text = j ? tq_json_print(j, e) : NULL;
    cJSON_Delete(j);
    return text;
}

/* text into the output file NAME, hashed into split.json like every output. */
static int write_text(split_run *r, const char *name, const char *text, tq_err *e)
{
    out_file of;
    int rc = -1;
    if (split_of_open(&of, r->stage, name, e) == 0) {
        if (split_of_write(&of, text, strlen(text), e) != 0)
            split_of_abort(&of);
        else {
            tq_flash_file *rec = split_add_file(r, e);
            if (rec)
                rc = split_of_commit(&of, rec, e);
            else
                split_of_abort(&of);
        }
    }
    return rc;
}

static int write_config(split_run *r, tq_err *e)
{
    char *text = config_text(&r->plan, e);
    if (!text)
        return -1;
    int rc = write_text(r, "config.json", text, e);
    free(text);
    return rc;
}

static int write_provenance(split_run *r, tq_err *e)
{
    if (!r->o->provenance)
        return 0;
    char *text = provenance_text(r, e);
    int rc = text ? write_text(r, TQ_PROVENANCE_NAME, text, e) : -1;
    free(text);
    return rc;
}

static int copy_extra(split_run *r, const char *name, unsigned char *buf, tq_err *e)
{
    char *src = tq_path_join(r->plan.m->path, name, e);
    if (!src)
        return -1;
    int fd = tq_open_regular(src, NULL, e);
    if (fd < 0) {
        free(src);
        return -1;
    }
    out_file of;
    int rc = split_of_open(&of, r->stage, name, e);
    for (;;) {
        if (rc != 0)
            break;
        ssize_t n = read(fd, buf, SPLIT_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = tq_fail(e, TQ_EIO, "%s: read error: %s", src, strerror(errno));
            split_of_abort(&of);
            break;
        }
        if (n == 0) {
            tq_flash_file *rec = split_add_file(r, e);
            if (!rec) {
                split_of_abort(&of);
                rc = -1;
            } else
                rc = split_of_commit(&of, rec, e);
            break;
        }
        if ((rc = split_of_write(&of, buf, (size_t)n, e)) != 0)
            split_of_abort(&of);
    }
    close(fd);
    free(src);
    return rc;
}

static int reserved_name(const char *n)
{
    return !strcmp(n, "pinned.safetensors") || !strcmp(n, "config.json") || !strcmp(n, "split.json") ||
           !strcmp(n, TQ_PROVENANCE_NAME);
}

/* Generated file i of the source (a GGUF's tokenizer files) to write, as tq-convert writes it
 * (sorted JSON text, caller frees; *name set), or NULL with *text_rc 0 when there is none. */
static char *generated_text(const tq_model *m, size_t i, const char **name, int *text_rc, tq_err *e)
{
    cJSON *j = tq_model_generated_file(m, i, name);
    *text_rc = 0;
    if (!j)
        return NULL;
    if (reserved_name(*name)) {
        *text_rc = tq_fail(e, TQ_EDATA, "%s: generated file '%s' would collide with a split output", m->path, *name);
        return NULL;
    }
    char *text = tq_json_print(j, e);
    *text_rc = text ? 0 : -1;
    return text;
}

/* The input's extra files (tokenizer etc.) as they are, then the files generated from it (a
 * GGUF's tokenizer files) that no extra file replaces. */
static int copy_extras(split_run *r, tq_err *e)
{
    const tq_model *m = r->plan.m;
    int rc = 0;
    if (m->n_extra) {
        unsigned char *buf = tq_malloc(SPLIT_CHUNK, e);
        if (!buf)
            return -1;
        for (size_t i = 0; i < m->n_extra && rc == 0; i++) {
            if (reserved_name(m->extra_files[i]))
                rc = tq_fail(e, TQ_EDATA, "%s: extra file '%s' would collide with a split output", m->path,
                             m->extra_files[i]);
            else
                rc = copy_extra(r, m->extra_files[i], buf, e);
        }
        free(buf);
    }
    for (size_t i = 0; i < m->n_generated && rc == 0; i++) {
        const char *name;
        char *text = generated_text(m, i, &name, &rc, e);
        if (text)
            rc = write_text(r, name, text, e);
        free(text);
    }
    return rc;
}

/* ------------------------------------------------------------ driver */

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const tq_flash_file *)a)->name, ((const tq_flash_file *)b)->name);
}

/* --resume: the options that change a byte of the split, by their command-line names. */
static int open_resume(split_run *r, tq_err *e)
{
    const tq_split_opts *o = r->o;
    cJSON *j = cJSON_CreateObject();
    char align[32], topk[32];
    snprintf(align, sizeof align, "%llu", (unsigned long long)r->plan.align);
    snprintf(topk, sizeof topk, "%llu", (unsigned long long)o->top_k);
    if (!j || !cJSON_AddStringToObject(j, "target", split_profile_get(o->target)->name) ||
        !cJSON_AddStringToObject(j, "align", align) || !cJSON_AddStringToObject(j, "top-k", topk) ||
        (o->source_label && !cJSON_AddStringToObject(j, "source-label", o->source_label))) {
        cJSON_Delete(j);
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    char *id = tq_resume_identity("tq-split", &r->src, j, e);
    int rc = id ? tq_resume_open(&r->res, r->stage, id, o->threads > 0 ? o->threads : tq_default_threads(), o->quiet, e) : -1;
    free(id);
    return rc;
}

static int make_stage(split_run *r, const char *out_dir, tq_err *e)
{
    if (tq_adir_open(&r->out, out_dir, (r->o->force ? TQ_ADIR_REPLACE : 0) | (r->o->resume ? TQ_ADIR_RESUME : 0), e) != 0)
        return -1;
    r->stage = r->out.tmp_path;
    if (r->o->resume && open_resume(r, e) != 0)
        return -1;
    char *sub = tq_path_join(r->stage, r->plan.kind == TQ_FLASH_MOE ? split_profile_get(r->plan.target)->expert_dir : "ffn_aligned", e);
    struct stat st;
    int rc = sub && (mkdir(sub, 0755) == 0 || (r->res && lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))) ? 0 : -1;
    if (sub && rc != 0)
        tq_fail(e, TQ_EIO, "%s: cannot create: %s", sub, strerror(errno));
    free(sub);
    return rc;
}

/* mlx-sniper's reader opens EXPERT_DIR/layer_LL.bin: relative links to the layer files (not
 * listed in split.json, which lists regular files). */
static int write_links(split_run *r, tq_err *e)
{
    const split_profile *pr = split_profile_get(r->plan.target);
    for (size_t i = 0; pr->link_prefix && r->plan.kind == TQ_FLASH_MOE && i < r->plan.n_layers; i++) {
        const split_layer *L = &r->plan.layers[i];
        char *link = tq_asprintf(e, "%s/%s/%s%02u.bin", r->stage, pr->expert_dir, pr->link_prefix, L->layer);
        const char *target = strrchr(L->file, '/') + 1;
        int rc = link && symlink(target, link) == 0 ? 0 : -1;
        if (link && rc != 0)
            tq_fail(e, TQ_EIO, "%s: cannot create the link: %s", link, strerror(errno));
        free(link);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static int finish(split_run *r, const char *out_dir, tq_err *e)
{
    tq_st_writer *w = r->pinned_w;
    r->pinned_w = NULL;
    if (w && tq_st_writer_finish(w, e) != 0)
        return -1;
    qsort(r->files, r->n_files, sizeof *r->files, cmp_file);
    if (split_header_hashes(r, e) != 0)
        return -1;
    const char *label = r->o->source_label ? r->o->source_label : r->plan.m->path;
    cJSON *j = split_manifest_json(&r->plan, label, r->files, r->n_files, e);
    if (!j)
        return -1;
    char *path = tq_path_join(r->stage, "split.json", e);
    int rc = path ? tq_json_write_file(path, j, e) : -1;
    free(path);
    cJSON_Delete(j);
    if (rc != 0)
        return -1;
    for (size_t i = 0; i < r->n_files; i++) {
        char *p = tq_path_join(r->stage, r->files[i].name, e);
        rc = p ? split_fsync_path(p, 0, e) : -1;
        free(p);
        if (rc != 0)
            return -1;
    }
    char *sub = tq_path_join(r->stage, r->plan.kind == TQ_FLASH_MOE ? split_profile_get(r->plan.target)->expert_dir : "ffn_aligned", e);
    rc = sub ? split_fsync_path(sub, 1, e) : -1;
    free(sub);
    if (rc != 0 || split_fsync_path(r->stage, 1, e) != 0)
        return -1;
    if (r->res && tq_resume_finish(r->res, e) != 0)
        return -1;
    r->stage = NULL;
    if (tq_sources_check_adir(&r->src, &r->out, e) != 0)
        return -1;
    return tq_adir_commit(&r->out, e);
}

/* What the copy reports as done: the pinned tensors, each expert block whole (moe), each
 * FFN tensor (dense); header pages and padding between tensors are not counted. */
static uint64_t progress_total(const split_plan *p)
{
    uint64_t t = 0;
    for (size_t i = 0; i < p->n_pinned; i++)
        t += p->pinned[i]->info.nbytes;
    for (size_t l = 0; l < p->n_layers; l++) {
        const tq_flash_header *h = &p->layers[l].hdr;
        if (p->kind == TQ_FLASH_MOE)
            t += h->num_experts * h->expert_block_size;
        else
            for (size_t i = 0; i < h->n_tensors; i++)
                t += h->tensors[i].nbytes;
    }
    return t;
}

static void fill_result(const split_run *r, tq_split_result *res)
{
    if (!res)
        return;
    memset(res, 0, sizeof *res);
    res->kind = r->plan.kind;
    res->pinned_bytes = r->plan.pinned_bytes;
    res->n_layers = r->plan.n_layers;
    res->num_experts = r->plan.num_experts;
    res->experts_per_tok = r->plan.top_k;
    for (size_t i = 0; i < r->plan.n_layers; i++)
        if (r->plan.layers[i].hdr.expert_block_size > res->max_block_size)
            res->max_block_size = r->plan.layers[i].hdr.expert_block_size;
    res->ffn_bytes = r->plan.ffn_bytes;
    if (r->plan.m && r->plan.m->config) /* none: tq-split writes none either */
        tq_run_decode_warning(r->plan.m->config, res->run_warning, sizeof res->run_warning);
    for (size_t i = 0; i < r->n_files; i++)
        res->bytes_written += r->files[i].size;
}

int tq_split(const char *model, const char *out_dir, const tq_split_opts *o, tq_split_result *res, tq_err *e)
{
    split_run r = {.o = o};
    tq_model *m = NULL;
    int rc = -1;
    if (tq_out_dir_check(out_dir, model, o->force, e) != 0 || tq_sources_add(&r.src, model, e) != 0 ||
        tq_model_open_ex(&m, model, TQ_MODEL_NO_SPLIT, e) != 0)
        goto out;
    if (split_plan_build(&r.plan, m, o, e) != 0)
        goto out;
    if (make_stage(&r, out_dir, e) != 0)
        goto out;
    tq_progress_init(&r.prog, "split", progress_total(&r.plan), o->quiet);
    if (split_write_pinned(&r, e) != 0)
        goto out;
    if (r.plan.kind == TQ_FLASH_MOE) {
        for (size_t i = 0; i < r.plan.n_layers; i++)
            if (split_write_moe_layer(&r, &r.plan.layers[i], e) != 0)
                goto out;
    } else if (split_write_dense_layers(&r, e) != 0) {
        goto out;
    }
    if (write_config(&r, e) != 0 || copy_extras(&r, e) != 0 || write_provenance(&r, e) != 0 ||
        write_links(&r, e) != 0)
        goto out;
    if (finish(&r, out_dir, e) != 0)
        goto out;
    tq_progress_end(&r.prog);
    fill_result(&r, res);
    if (res)
        tq_resume_counts(r.res, &res->resume_kept, &res->resume_dropped);
    rc = 0;
out:
    if (r.pinned_w)
        tq_st_writer_abort(r.pinned_w);
    tq_resume_close(r.res);
    if (r.out.tmp_path)
        tq_adir_abort(&r.out);
    for (size_t i = 0; i < r.n_files; i++)
        free(r.files[i].name);
    free(r.files);
    split_plan_free(&r.plan);
    tq_model_close(m);
    tq_sources_free(&r.src);
    return rc;
}

/* ------------------------------------------------------------ dry run */

/* Every file tq_split would write (split.json laid out with the hashes still zero: they are
 * fixed-width hex), in the order of r->files. */
static int dry_files(split_run *r, tq_out_plan *files, tq_err *e)
{
    split_plan *p = &r->plan;
    const tq_model *m = p->m;
    const tq_st_file *f0 = m->n_files ? m->files[0] : NULL;
    tq_st_decl *decls = split_pinned_decls(p, e);
    uint64_t size, data = 0;
    if (!decls)
        return -1;
    if (p->n_pinned == 0) {
        free(decls);
        return tq_fail(e, TQ_EUNSUP, "%s: nothing to pin (no embeddings, attention or norms?)", m->path);
    }
    int rc = tq_st_file_size("pinned.safetensors", decls, p->n_pinned, f0 ? (const char *const *)f0->meta_keys : NULL,
                             f0 ? (const char *const *)f0->meta_vals : NULL, f0 ? f0->n_meta : 0, p->align, &size, e);
    free(decls);
    for (size_t i = 0; i < p->n_pinned; i++)
        data += p->pinned[i]->info.nbytes;
    tq_flash_file *rec = rc == 0 ? split_add_file(r, e) : NULL;
    if (!rec || !(rec->name = tq_strdup("pinned.safetensors", e)))
        return -1;
    rec->size = size;
    rec->header_bytes = size - data;
    for (size_t i = 0; i < p->n_layers; i++) {
        split_layer *L = &p->layers[i];
        if (p->kind == TQ_FLASH_MOE && !L->block_sha &&
            !(L->block_sha = tq_calloc(L->hdr.num_experts ? (size_t)L->hdr.num_experts : 1, sizeof *L->block_sha, e)))
            return -1;
        if (!(rec = split_add_file(r, e)) || !(rec->name = tq_strdup(L->file, e)))
            return -1;
        rec->size = L->hdr.total_size;
        rec->header_bytes = L->hdr.data_start;
    }
    char *text = config_text(p, e);
    if (!text || !(rec = split_add_file(r, e)) || !(rec->name = tq_strdup("config.json", e))) {
        free(text);
        return -1;
    }
    rec->size = strlen(text);
    free(text);
    if (r->o->provenance) {
        if (!(text = provenance_text(r, e)) || !(rec = split_add_file(r, e)) ||
            !(rec->name = tq_strdup(TQ_PROVENANCE_NAME, e))) {
            free(text);
            return -1;
        }
        rec->size = strlen(text);
        free(text);
    }
    for (size_t i = 0; i < m->n_extra; i++) {
        if (reserved_name(m->extra_files[i]))
            return tq_fail(e, TQ_EDATA, "%s: extra file '%s' would collide with a split output", m->path, m->extra_files[i]);
        char *src = tq_path_join(m->path, m->extra_files[i], e);
        rc = src ? tq_file_size(src, &size, e) : -1;
        free(src);
        if (rc != 0 || !(rec = split_add_file(r, e)) || !(rec->name = tq_strdup(m->extra_files[i], e)))
            return -1;
        rec->size = size;
    }
    for (size_t i = 0; i < m->n_generated; i++) {
        const char *name;
        char *gt = generated_text(m, i, &name, &rc, e);
        if (rc != 0)
            return -1;
        if (gt && (!(rec = split_add_file(r, e)) || !(rec->name = tq_strdup(name, e)))) {
            free(gt);
            return -1;
        }
        if (gt)
            rec->size = strlen(gt);
        free(gt);
    }
    qsort(r->files, r->n_files, sizeof *r->files, cmp_file);
    for (size_t i = 0; i < r->n_files; i++)
        if (tq_out_plan_add(files, r->files[i].name, r->files[i].size, e) != 0)
            return -1;
    const char *label = r->o->source_label ? r->o->source_label : m->path;
    cJSON *j = split_manifest_json(p, label, r->files, r->n_files, e);
    rc = j ? tq_out_plan_add_json(files, "split.json", j, e) : -1;
    cJSON_Delete(j);
    if (rc == 0)
        tq_out_plan_sort(files);
    return rc;
}

int tq_split_dry_run(const char *model, const char *out_dir, const tq_split_opts *o, tq_split_result *res,
                     tq_out_plan *files, tq_err *e)
{
    split_run r = {.o = o};
    tq_model *m = NULL;
    int rc = -1;
    if (tq_out_dir_check(out_dir, model, o->force, e) != 0 ||
        tq_model_open_ex(&m, model, TQ_MODEL_NO_SPLIT, e) != 0 || split_plan_build(&r.plan, m, o, e) != 0 ||
        dry_files(&r, files, e) != 0)
        goto out;
    fill_result(&r, res);
    rc = 0;
out:
    if (rc != 0)
        tq_out_plan_free(files);
    for (size_t i = 0; i < r.n_files; i++)
        free(r.files[i].name);
    free(r.files);
    split_plan_free(&r.plan);
    tq_model_close(m);
    return rc;
}

/* Whether target t can read the split of m made with o's options, and if not why. */
static void target_verdict(tq_model *m, const tq_split_opts *o, int t, tq_split_ram_plan *pl)
{
    tq_split_opts ot = *o;
    ot.target = t;
    split_plan p;
    tq_err te = {0};
    pl->targets[t].readable = split_plan_build(&p, m, &ot, &te) == 0;
    split_plan_free(&p);
    if (!pl->targets[t].readable)
        snprintf(pl->targets[t].reason, sizeof pl->targets[t].reason, "%s", te.msg);
}

int tq_split_plan(const char *model, const tq_split_opts *o, uint64_t ram, tq_split_ram_plan *pl, tq_err *e)
{
    tq_model *m = NULL;
    split_plan p;
    memset(&p, 0, sizeof p);
    if (tq_model_open_ex(&m, model, TQ_MODEL_NO_SPLIT, e) != 0)
        return -1;
    int rc = split_plan_build(&p, m, o, e);
    if (rc == 0) {
        memset(pl, 0, sizeof *pl);
        pl->kind = p.kind;
        pl->ram = ram;
        pl->pinned_bytes = p.pinned_bytes;
        pl->n_layers = p.n_layers;
        pl->num_experts = p.num_experts;
        pl->experts_per_tok = p.top_k;
        pl->ffn_bytes = p.ffn_bytes;
        for (size_t i = 0; i < p.n_layers; i++) {
            uint64_t b = p.kind == TQ_FLASH_MOE ? p.layers[i].hdr.expert_block_size : p.layers[i].hdr.total_size;
            if (b > pl->block_size)
                pl->block_size = b;
        }
        tq_split_plan_compute(pl);
        for (int t = 0; t < TQ_TARGET_COUNT; t++)
            target_verdict(m, o, t, pl);
    }
    split_plan_free(&p);
    tq_model_close(m);
    return rc;
}
