/* Writing a generated model: worker threads take row blocks of the plan in order from the
 * common work queue, compute them into private bounded buffers and pwrite them through the
 * model writer. Every byte is a function of the options alone, so any thread count and any
 * completion order give the same files. */
#include "testdata/mkmodel/mk_internal.h"
#include "quant/quant.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK_FLOATS (64u * 1024u) /* values per work item: bounded memory per thread */
#define MAX_THREADS 64

typedef struct job {
    const tq_mk_opts *o;
    mk_plan_priv *pv;
    tq_model_writer *w;
    uint64_t *first;        /* [n_items + 1]: index of each item's first row block */
    struct worker *wk;      /* [threads] */
} job;

typedef struct task {
    const mk_item *it;
    size_t item;
    uint64_t expert, row0, n;
} task;

static uint64_t block_rows(const mk_item *it)
{
    uint64_t r = BLOCK_FLOATS / it->cols;
    return r ? r : 1;
}

/* Row blocks are numbered item by item, expert by expert, row by row. */
static uint64_t item_blocks(const mk_item *it)
{
    if (!it->rows || !it->n_exp)
        return 0;
    return it->n_exp * ((it->rows + block_rows(it) - 1) / block_rows(it));
}

/* Row block k: the last item whose first block is <= k (items with no blocks are passed). */
static void task_of(const job *j, uint64_t k, task *t)
{
    size_t lo = 0, hi = j->pv->n_items;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (j->first[mid] <= k)
            lo = mid;
        else
            hi = mid;
    }
    const mk_item *it = &j->pv->items[lo];
    uint64_t br = block_rows(it), per_expert = (it->rows + br - 1) / br, in = k - j->first[lo];
    t->it = it;
    t->item = lo;
    t->expert = in / per_expert;
    t->row0 = in % per_expert * br;
    t->n = it->rows - t->row0 < br ? it->rows - t->row0 : br;
}

typedef struct worker {
    job *j;
    float *vals;            /* block values (f32) */
    unsigned char *bytes;   /* block values in the model dtype, or packed LE u32 words */
    uint32_t *packed;       /* one row of packed words */
    float *sc, *bi;         /* one row of f32 scales and biases */
    unsigned char *scb, *bib; /* the block's scales and biases in the model dtype */
    mk_cache cache;         /* recipe matrices of the current item / expert */
} worker;

static int write_part(job *j, const task *t, int k, const void *data, tq_err *e)
{
    const mk_item *it = t->it;
    uint64_t rb = it->out_row_bytes[k];
    uint64_t off = (t->expert * it->rows + t->row0) * rb;
    return tq_model_writer_write(j->w, (size_t)it->widx[k], off, data, (size_t)(t->n * rb), e);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static int run_task(worker *wk, const task *t, tq_err *e)
{
    job *j = wk->j;
    const mk_item *it = t->it;
    tq_dtype dt = j->o->dtype;
    uint64_t nvals = t->n * it->cols;
    if (mk_item_values(it, t->item, j->o->seed, t->expert, t->row0, t->n, wk->vals, &wk->cache, e))
        return -1;
    if (it->enc == MK_ENC_MXFP4) {
        uint64_t nb = nvals / 32;
        for (uint64_t b = 0; b < nb; b++)
            tq_mk_mxfp4_encode(wk->vals + b * 32, wk->bytes + b * 16, wk->scb + b);
        return write_part(j, t, 0, wk->bytes, e) || write_part(j, t, 1, wk->scb, e) ? -1 : 0;
    }
    if (it->enc == MK_ENC_DTYPE)
        dt = it->dt;
    if (tq_from_f32(dt, wk->vals, wk->bytes, nvals, e))
        return -1;
    if (it->enc == MK_ENC_DTYPE)
        return write_part(j, t, 0, wk->bytes, e);
    /* quantize what a real checkpoint holds: the values rounded to the model dtype */
    if (tq_to_f32(dt, wk->bytes, wk->vals, nvals, e))
        return -1;
    uint64_t words = it->cols * (uint64_t)it->bits / 32, groups = it->cols / (uint64_t)it->group;
    size_t gbytes = (size_t)groups * tq_dtype_size(dt);
    for (uint64_t r = 0; r < t->n; r++) {
        tq_affine_quantize_row(wk->vals + r * it->cols, it->cols, it->bits, it->group,
                                  wk->packed, wk->sc, wk->bi);
        for (uint64_t w = 0; w < words; w++)
            put_le32(wk->bytes + (r * words + w) * 4, wk->packed[w]);
        if (tq_from_f32(dt, wk->sc, wk->scb + r * gbytes, groups, e) ||
            tq_from_f32(dt, wk->bi, wk->bib + r * gbytes, groups, e))
            return -1;
    }
    return write_part(j, t, 0, wk->bytes, e) || write_part(j, t, 1, wk->scb, e) ||
                   write_part(j, t, 2, wk->bib, e)
               ? -1
               : 0;
}

static uint64_t task_bytes(const task *t)
{
    const mk_item *it = t->it;
    uint64_t b = 0;
    for (int k = 0; k < it->nparts; k++)
        b += it->out_row_bytes[k];
    return t->n * b;
}

static int mk_block(tq_work *q, void *ctx, int w, uint64_t k, tq_err *e)
{
    job *j = ctx;
    task t;
    task_of(j, k, &t);
    if (run_task(&j->wk[w], &t, e))
        return -1;
    tq_work_progress(q, task_bytes(&t));
    return 0;
}

/* A block has at most max(BLOCK_FLOATS, cols) values (one row minimum); a quantized row
 * has at most cols/4 words and cols/4 groups (group >= 32/bits >= 4). */
static int worker_alloc(worker *wk, uint64_t max_cols, tq_err *e)
{
    uint64_t n = max_cols > BLOCK_FLOATS ? max_cols : BLOCK_FLOATS;
    wk->vals = tq_malloc(n * sizeof(float), e);
    wk->bytes = tq_malloc(n * sizeof(float), e);
    wk->packed = tq_malloc(max_cols / 4 * sizeof(uint32_t) + 4, e);
    wk->sc = tq_malloc(max_cols / 4 * sizeof(float) + 4, e);
    wk->bi = tq_malloc(max_cols / 4 * sizeof(float) + 4, e);
    wk->scb = tq_malloc(n, e);
    wk->bib = tq_malloc(n, e);
    return wk->vals && wk->bytes && wk->packed && wk->sc && wk->bi && wk->scb && wk->bib ? 0 : -1;
}

static void worker_free(worker *wk)
{
    mk_cache_free(&wk->cache);
    free(wk->vals);
    free(wk->bytes);
    free(wk->packed);
    free(wk->sc);
    free(wk->bi);
    free(wk->scb);
    free(wk->bib);
}

static int generate(const char *dir, const tq_mk_opts *o, tq_mk_plan *p, tq_err *e)
{
    mk_plan_priv *pv = p->priv;
    static const char *const keys_hf[] = {"format"}, *const vals_pt[] = {"pt"}, *const vals_mlx[] = {"mlx"};
    int mlx = o->naming_mlx || o->quant_bits;
    job j;
    memset(&j, 0, sizeof j);
    j.o = o;
    j.pv = pv;
    /* an ngram table is one file: tq-rowlayout reads a single safetensors table; its
     * metadata says how it is stored, as MTPLX's table writer does (ngram_bits 0: raw rows) */
    uint64_t shard = o->arch == TQ_MK_NGRAM ? UINT64_MAX : o->shard_size;
    char nb[16], ng[16];
    snprintf(nb, sizeof nb, "%d", o->bits);
    snprintf(ng, sizeof ng, "%d", o->group_size);
    const char *const keys_ng[] = {"format", "ngram_bits", "ngram_group_size"};
    const char *const vals_ng[] = {mlx || o->bits ? "mlx" : "pt", nb, ng};
    int ngram = o->arch == TQ_MK_NGRAM;
    if (tq_model_writer_open(&j.w, dir, p->decls, p->n, shard, ngram ? keys_ng : keys_hf,
                             ngram ? vals_ng : mlx ? vals_mlx : vals_pt, ngram ? 3 : 1, e))
        return -1;
    uint64_t max_cols = 1;
    for (size_t i = 0; i < pv->n_items; i++) {
        mk_item *it = &pv->items[i];
        if (it->cols > max_cols)
            max_cols = it->cols;
        for (int k = 0; k < it->nparts; k++)
            if ((it->widx[k] = tq_model_writer_index(j.w, it->names[k])) < 0) {
                tq_model_writer_abort(j.w);
                return tq_fail(e, TQ_EIO, "%s: tensor '%s' missing from the writer", dir, it->names[k]);
            }
    }
    int nt = o->threads > 0 ? o->threads : tq_default_threads();
    if (nt > MAX_THREADS)
        nt = MAX_THREADS;
    worker *wk = j.wk = tq_calloc((size_t)nt, sizeof *wk, e);
    j.first = tq_calloc(pv->n_items + 1, sizeof *j.first, e);
    int rc = wk && j.first ? 0 : -1;
    for (int i = 0; !rc && i < nt; i++) {
        wk[i].j = &j;
        rc = worker_alloc(&wk[i], max_cols, e);
    }
    for (size_t i = 0; !rc && i < pv->n_items; i++)
        j.first[i + 1] = j.first[i] + item_blocks(&pv->items[i]);
    if (!rc) {
        tq_progress prog;
        tq_progress_init(&prog, "generate", p->total_bytes, o->quiet);
        rc = tq_work_run(j.first[pv->n_items], nt, mk_block, &j, &prog, e);
        tq_progress_end(&prog);
    }
    for (int i = 0; wk && i < nt; i++)
        worker_free(&wk[i]);
    free(wk);
    free(j.first);
    if (rc) {
        tq_model_writer_abort(j.w);
        return -1;
    }
    return tq_model_writer_finish(j.w, e);
}

/* 1 for a name tq-mkmodel writes, 2 for a partial file of one (left by an older version),
 * 0 otherwise. */
static int own_name(const char *s)
{
    static const char *const fixed[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "model.safetensors", "model.safetensors.index.json", TQ_PROVENANCE_NAME};
    static const char shard[] = "model-#####-of-#####.safetensors";
    const char *partial = strstr(s, ".partial-");
    size_t n = partial ? (size_t)(partial - s) : strlen(s);
    int kind = partial ? 2 : 1;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strlen(fixed[i]) == n && !strncmp(s, fixed[i], n))
            return kind;
    if (n != sizeof shard - 1)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (shard[i] == '#' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shard[i])
            return 0;
    return kind;
}

/* OUTPUT_DIR may be new, empty, or (with force) hold an earlier tq-mkmodel output, which is
 * replaced whole at the end; anything else in it is left alone and refused, even with force. */
static int check_outdir(const char *dir, tq_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : tq_fail(e, TQ_EIO, "%s: %s", dir, strerror(errno));
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *p = tq_path_join(dir, de->d_name, e);
        struct stat st;
        if (!p)
            rc = -1;
        else if (!own_name(de->d_name) || lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
            rc = tq_fail(e, TQ_EEXIST, "%s: output directory holds '%s', which tq-mkmodel does not write; "
                         "use a new or empty directory", dir, de->d_name);
        free(p);
    }
    closedir(d);
    return rc;
}

static int write_json(const char *dir, const char *name, cJSON *j, tq_err *e)
{
    char *path = tq_path_join(dir, name, e);
    int rc = path ? tq_json_write_file(path, j, e) : -1;
    free(path);
    cJSON_Delete(j);
    return rc;
}

static int tokenizer_config(const tq_mk_opts *o, cJSON **out, tq_err *e)
{
    cJSON *j = cJSON_CreateObject();
    int gem = o->arch == TQ_MK_GEMMA4; /* Gemma's token names (mk_tokenizer.c) */
    int bad = !j || !cJSON_AddStringToObject(j, "tokenizer_class", "PreTrainedTokenizerFast") ||
              !cJSON_AddStringToObject(j, "unk_token", "<unk>") ||
              !cJSON_AddStringToObject(j, "bos_token", gem ? "<bos>" : "<s>") ||
              !cJSON_AddStringToObject(j, "eos_token", gem ? "<eos>" : "</s>") ||
              (gem && !cJSON_AddStringToObject(j, "pad_token", "<pad>")) ||
              !cJSON_AddBoolToObject(j, "add_bos_token", 1) ||
              !cJSON_AddBoolToObject(j, "clean_up_tokenization_spaces", 0) ||
              !cJSON_AddNumberToObject(j, "model_max_length", o->arch == TQ_MK_LLAMA ? 8192 : 40960);
    if (bad) {
        cJSON_Delete(j);
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    *out = j;
    return 0;
}

int tq_mkmodel(const char *dir, const tq_mk_opts *o, tq_err *e)
{
    tq_mk_plan p;
    if (tq_out_dir_check(dir, NULL, o->force, e) || check_outdir(dir, e) || tq_mk_plan_build(&p, o, e))
        return -1;
    tq_adir out;
    if (tq_adir_open(&out, dir, TQ_ADIR_REPLACE, e)) {
        tq_mk_plan_free(&p);
        return -1;
    }
    const char *stage = out.tmp_path;
    cJSON *cfg = NULL;
    int rc = generate(stage, o, &p, e) || tq_mk_config(o, &cfg, e) || write_json(stage, "config.json", cfg, e);
    if (!rc && o->arch != TQ_MK_NGRAM) {
        cJSON *t = NULL;
        rc = tokenizer_config(o, &t, e) || write_json(stage, "tokenizer_config.json", t, e) ||
             tq_mk_tokenizer_json(o, &t, e) || write_json(stage, "tokenizer.json", t, e);
    }
    rc = rc || tq_provenance_write(stage, o->provenance, NULL, e);
    tq_mk_plan_free(&p);
    if (rc) {
        tq_adir_abort(&out);
        return -1;
    }
    /* a file put into the OUTPUT_DIR being replaced meanwhile is not deleted: the new model
     * stays beside it (an OUTPUT_DIR that appeared meanwhile is refused by the commit) */
    if (out.had_final && check_outdir(dir, e)) {
        char *kept = tq_adir_keep(&out);
        size_t n = strlen(e->msg);
        snprintf(e->msg + n, sizeof e->msg - n, "; the new model is kept at %s", kept ? kept : "?");
        free(kept);
        return -1;
    }
    return tq_adir_commit(&out, e);
}
