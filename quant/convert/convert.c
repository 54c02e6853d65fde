/* tq_convert: open the input, plan, write every output into OUT.partial-XXXXXX, then put
 * the directory in place with one rename. A failure at any point removes the partial
 * directory, so OUTPUT_DIR only ever holds a complete conversion (or what it held before). */
#include "quant/convert/convert_internal.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

void tq_convert_opts_default(tq_convert_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mode = TQ_CONVERT_QUANTIZE;
    o->method = TQ_METHOD_TURBOQUANT;
    o->affine_rule = TQ_AFFINE_GPU;
    o->embed = TQ_EMBED_DEFAULT;
    o->bits = 3;
    o->group_size = 64;
    o->scale = TQ_SCALE_LSQ;
    o->seed = 42;
    o->dtype = -1;
    o->shard_size = 5ull << 30;
    o->threads = tq_default_threads();
}

static int check_opts(const tq_convert_opts *o, tq_err *e)
{
    if (o->mode < 0 || o->mode > TQ_CONVERT_PLAIN)
        return tq_fail(e, TQ_EUSAGE, "unknown mode %d", o->mode);
    int affine = o->method == TQ_METHOD_AFFINE;
    if (o->method != TQ_METHOD_TURBOQUANT && !affine)
        return tq_fail(e, TQ_EUSAGE, "unknown method %d", o->method);
    if (affine ? o->bits != 4 && o->bits != 8 : o->bits < 2 || o->bits > 4)
        return tq_fail(e, TQ_EUSAGE, affine ? "--bits must be 4 or 8 with --method affine" : "--bits must be 2, 3 or 4");
    if (o->group_size != 32 && o->group_size != 64 && o->group_size != 128)
        return tq_fail(e, TQ_EUSAGE, "--group-size must be 32, 64 or 128");
    for (size_t i = 0; i < o->n_bits_for; i++)
        if (affine ? o->bits_for_bits[i] != 4 && o->bits_for_bits[i] != 8 : o->bits_for_bits[i] < 2 || o->bits_for_bits[i] > 4)
            return tq_fail(e, TQ_EUSAGE, "--bits-for '%s': bits must be %s", o->bits_for_re[i], affine ? "4 or 8" : "2, 3 or 4");
    if (o->affine_rule != TQ_AFFINE_GPU && o->affine_rule != TQ_AFFINE_CPU)
        return tq_fail(e, TQ_EUSAGE, "unknown affine rule %d", o->affine_rule);
    if (o->embed != TQ_EMBED_DEFAULT && o->embed != TQ_EMBED_KEEP && o->embed != 4 && o->embed != 8)
        return tq_fail(e, TQ_EUSAGE, "--embed must be keep, affine4 or affine8");
    if (o->codebook != TQ_CODEBOOK_GAUSSIAN && o->codebook != TQ_CODEBOOK_FITTED)
        return tq_fail(e, TQ_EUSAGE, "unknown codebook kind %d", o->codebook);
    if (!(o->target_bpw >= 0 && o->target_bpw <= 64))
        return tq_fail(e, TQ_EUSAGE, "--target-bpw must be above 0 and at most 64");
    if (o->target_bpw > 0 && o->target_size)
        return tq_fail(e, TQ_EUSAGE, "--target-bpw and --target-size exclude each other");
    if ((o->target_bpw > 0 || o->target_size || o->codebook == TQ_CODEBOOK_FITTED) && affine)
        return tq_fail(e, TQ_EUSAGE, "--codebook, --target-bpw and --target-size are TurboQuant options, not --method affine ones");
    if ((o->target_bpw > 0 || o->target_size) && o->n_bits_for)
        return tq_fail(e, TQ_EUSAGE, "--bits-for and a byte budget (--target-bpw, --target-size) exclude each other");
    if (o->scale != TQ_SCALE_RMS && o->scale != TQ_SCALE_LSQ)
        return tq_fail(e, TQ_EUSAGE, "unknown scale method");
    if (o->dtype >= 0 && o->dtype != TQ_DT_F16 && o->dtype != TQ_DT_BF16 && o->dtype != TQ_DT_F32)
        return tq_fail(e, TQ_EUSAGE, "--dtype must be bf16, f16 or f32");
    if (o->threads < 1 || o->threads > 1024)
        return tq_fail(e, TQ_EUSAGE, "--threads must be 1..1024");
    if (!o->shard_size)
        return tq_fail(e, TQ_EUSAGE, "--shard-size must be positive");
    return 0;
}

/* ------------------------------------------------------------ output directory */
/* ------------------------------------------------------------ config.json */
static const char *scale_name(int s) { return s == TQ_SCALE_RMS ? "rms" : "lsq"; }

/* TurboQuant-MLX's bit classes (its TurboQuantConfig.bits_for_path): the first path component
 * that is self_attn, attention or linear_attn makes a module "attn", mlp or feed_forward
 * "mlp"; anything else takes "bits". 0 attn, 1 mlp, -1 neither. */
static int tqmlx_class(const char *P)
{
    static const char *const cls[2][3] = {{"self_attn", "attention", "linear_attn"}, {"mlp", "feed_forward", NULL}};
    for (const char *s = P; *s;) {
        size_t n = strcspn(s, ".");
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 3 && cls[c][k]; k++)
                if (strlen(cls[c][k]) == n && !strncmp(s, cls[c][k], n))
                    return c;
        s += n + (s[n] == '.');
    }
    return -1;
}

/* "attn_bits" / "mlp_bits" for loaders that take a module's bits from its class rather than
 * from its codebook (TurboQuant-MLX before it read codebook lengths): written when every
 * TurboQuant module of the class has the same bits and they differ from "bits". A class
 * whose modules differ keeps only the per-module entries (man tq-convert(1)). */
static int add_class_bits(cJSON *q, const cv_plan *p)
{
    int bits[2] = {0, 0}, mixed[2] = {0, 0};
    for (size_t i = 0; i < p->n_items; i++) {
        const cv_item *it = &p->items[i];
        int c = it->kind == CV_QUANT ? tqmlx_class(it->name) : -1;
        if (c < 0)
            continue;
        if (bits[c] && bits[c] != it->bits)
            mixed[c] = 1;
        bits[c] = it->bits;
    }
    static const char *const key[2] = {"attn_bits", "mlp_bits"};
    for (int c = 0; c < 2; c++)
        if (bits[c] && !mixed[c] && bits[c] != p->q_bits && bits[c] >= 2 && bits[c] <= 4 &&
            !cJSON_AddNumberToObject(q, key[c], bits[c]))
            return 0;
    return 1;
}

/* The output's config.json into *out (NULL: the output has none). */
static int build_config(const cv_plan *p, const tq_model *m, const tq_convert_opts *o, cJSON **out, tq_err *e)
{
    *out = NULL;
    if (!m->config && o->mode != TQ_CONVERT_QUANTIZE)
        return 0;
    cJSON *c = m->config ? cJSON_Duplicate(m->config, 1) : cJSON_CreateObject();
    if (!c)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    int ok = 1;
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(c, "text_config");
    if (o->mode == TQ_CONVERT_QUANTIZE && cJSON_IsObject(tc))
        cJSON_DeleteItemFromObjectCaseSensitive(tc, "quantization_config");
    if (o->mode == TQ_CONVERT_QUANTIZE && o->method == TQ_METHOD_AFFINE) {
        /* as mlx_lm.convert writes it: {"group_size", "bits", "mode": "affine"} plus per-module
         * entries, and the same object again as quantization_config */
        cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization");
        cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization_config");
        cJSON *q = p->qconfig ? cJSON_Duplicate(p->qconfig, 1) : cJSON_CreateObject();
        ok = q && cJSON_AddNumberToObject(q, "group_size", (double)o->group_size) &&
             cJSON_AddNumberToObject(q, "bits", o->bits) && cJSON_AddStringToObject(q, "mode", "affine");
        cJSON *q2 = ok ? cJSON_Duplicate(q, 1) : NULL;
        ok = ok && q2;
        if (q)
            cJSON_AddItemToObject(c, "quantization", q);
        if (q2)
            cJSON_AddItemToObject(c, "quantization_config", q2);
    } else if (o->mode == TQ_CONVERT_QUANTIZE) {
        /* a source quantization tq decoded itself (gpt-oss's mxfp4) is gone from the output */
        cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization");
        cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization_config");
        cJSON *q = p->qconfig ? cJSON_Duplicate(p->qconfig, 1) : cJSON_CreateObject();
        ok = q && cJSON_AddStringToObject(q, "mode", "turboquant") && cJSON_AddNumberToObject(q, "bits", p->q_bits) &&
             cJSON_AddNumberToObject(q, "group_size", (double)p->q_group) &&
             cJSON_AddStringToObject(q, "rotation", o->rotation_none ? "none" : "hadamard") &&
             cJSON_AddNumberToObject(q, "rotation_seed", (double)o->seed) &&
             cJSON_AddStringToObject(q, "scale_method", scale_name(o->scale)) &&
             cJSON_AddStringToObject(q, "codebook", o->codebook == TQ_CODEBOOK_FITTED ? "fitted" : "lloyd_max_gaussian") &&
             add_class_bits(q, p);
        if (q)
            cJSON_AddItemToObject(c, "quantization", q);
    } else if (o->mode == TQ_CONVERT_DEQUANTIZE) {
        cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization");
        cJSON_DeleteItemFromObjectCaseSensitive(c, "quantization_config");
    }
    if (!ok) {
        cJSON_Delete(c);
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    *out = c;
    return 0;
}

static int write_config(const cv_plan *p, const tq_model *m, const tq_convert_opts *o, const char *dir, tq_err *e)
{
    cJSON *c;
    if (build_config(p, m, o, &c, e) != 0)
        return -1;
    if (!c)
        return 0;
    char *path = tq_path_join(dir, "config.json", e);
    int rc = path ? tq_json_write_file(path, c, e) : -1;
    free(path);
    cJSON_Delete(c);
    return rc;
}

/* The files a run would write (dry run): shards and index as the writer lays them out,
 * config.json, the extras. */
static int plan_files(const cv_plan *p, const tq_model *m, const tq_convert_opts *o, const char *out,
                      const tq_st_decl *decls, const char *const *mk, const char *const *mv, tq_out_plan *files,
                      tq_err *e)
{
    cJSON *c = NULL;
    if (tq_model_writer_plan(out, decls, p->n_decls, o->shard_size, mk, mv, 1, files, e) ||
        build_config(p, m, o, &c, e) || (c && tq_out_plan_add_json(files, "config.json", c, e)) ||
        tq_model_extras_plan(m, files, e) || tq_provenance_plan(o->provenance, m, files, e)) {
        cJSON_Delete(c);
        return -1;
    }
    cJSON_Delete(c);
    tq_out_plan_sort(files);
    return 0;
}

/* ------------------------------------------------------------ writing */
static int write_small(const cv_plan *p, tq_model_writer *w, tq_err *e)
{
    for (size_t i = 0; i < p->n_items; i++) {
        const cv_item *it = &p->items[i];
        if (it->kind != CV_QUANT)
            continue;
        uint16_t cb[16];
        for (int k = 0; k < it->cb->n; k++)
            cb[k] = it->cb->f16[k];
        if (tq_model_writer_write(w, (size_t)it->out_codebook, 0, cb, (size_t)it->cb->n * 2, e))
            return -1;
        uint16_t buf[4096];
        for (uint64_t j = 0; j < it->cols; j += 4096) {
            size_t k = (size_t)(it->cols - j < 4096 ? it->cols - j : 4096);
            for (size_t l = 0; l < k; l++)
                buf[l] = it->signs[j + l] < 0 ? 0xBC00 : 0x3C00; /* f16 -1 / +1 */
            if (tq_model_writer_write(w, (size_t)it->out_signs, j * 2, buf, k * 2, e))
                return -1;
        }
    }
    return 0;
}

static int cmp_rt(const void *a, const void *b)
{
    return strcmp(((const tq_convert_tensor *)a)->name, ((const tq_convert_tensor *)b)->name);
}

static int fill_report(const cv_plan *p, tq_convert_report *r, tq_err *e)
{
    if (!(r->t = tq_calloc(p->n_items ? p->n_items : 1, sizeof *r->t, e)))
        return -1;
    double qe = 0, qs = 0;
    for (size_t i = 0; i < p->n_items; i++) {
        const cv_item *it = &p->items[i];
        tq_convert_tensor *t = &r->t[r->n++];
        if (!(t->name = tq_strdup(it->name, e)) || !(t->source = tq_strdup(it->source, e)))
            return -1;
        t->note = it->note;
        t->params = it->E * it->rows * it->cols;
        if (it->kind == CV_AFFINE) {
            t->quantized = t->affine = 1;
            t->bits = it->bits;
            t->group_size = it->group;
            t->bytes = t->params / 8 * (uint64_t)it->bits + t->params / it->group * 2 * tq_dtype_size(it->qdtype);
            r->q_params += t->params;
            r->q_bytes += t->bytes;
            qe += it->err2;
            qs += it->sum2;
        } else if (it->kind == CV_QUANT) {
            t->quantized = 1;
            t->bits = it->bits;
            t->group_size = it->group;
            if (it->n_choices) {
                const cv_choice *ch = &it->choices[it->chosen];
                t->codebook_fitted = ch->fitted;
                if (!(t->choices = tq_calloc((size_t)it->n_choices, sizeof *t->choices, e)))
                    return -1;
                t->n_choices = (size_t)it->n_choices;
                t->chosen = it->chosen;
                t->importance = it->importance;
                for (int k = 0; k < it->n_choices; k++) {
                    const cv_choice *c = &it->choices[k];
                    t->choices[k] = (struct tq_convert_choice){c->bits, c->group, c->bytes,
                                                               c->sum2 > 0 ? c->err2 / c->sum2 : 0, c->fitted};
                }
                /* importance · weights · relative error, measured and as estimated */
                double w = (double)t->params;
                r->objective += it->sum2 > 0 ? it->importance * w * (it->err2 / it->sum2) : 0;
                r->objective_est += ch->sum2 > 0 ? it->importance * w * (ch->err2 / ch->sum2) : 0;
            }
            t->bytes = t->params / it->cols * (tq_pack_words(it->cols, it->bits) * 4 + it->cols / it->group * 2) +
                       ((uint64_t)it->cb->n + it->cols) * 2;
            r->q_params += t->params;
            r->q_bytes += t->bytes;
            qe += it->err2;
            qs += it->sum2;
        } else {
            t->bytes = t->params * tq_dtype_size(it->out_dtype);
            if (it->kind == CV_DEQUANT || it->kind == CV_AFFINE_DEQUANT) {
                t->bits = it->bits;
                t->group_size = it->group;
                t->affine = it->kind == CV_AFFINE_DEQUANT;
            }
        }
        t->rel_mse = it->sum2 > 0 ? it->err2 / it->sum2 : 0;
        r->params += t->params;
        r->bytes += t->bytes;
        if (it->mxfp4)
            r->in_bytes += t->params / 32 * 17;
        else if (it->kind == CV_COPY)
            r->in_bytes += t->params * tq_dtype_size(it->src_dtype);
        else if (it->kind == CV_QUANT || it->kind == CV_AFFINE)
            r->in_bytes += t->params * tq_dtype_size(it->src_dtype);
        else if (it->kind == CV_AFFINE_DEQUANT)
            r->in_bytes += t->params / 8 * (uint64_t)it->bits + t->params / it->group * 2 * tq_dtype_size(it->qdtype);
        else
            r->in_bytes += t->params / it->cols * (tq_pack_words(it->cols, it->bits) * 4 + it->cols / it->group * 2);
    }
    qsort(r->t, r->n, sizeof *r->t, cmp_rt);
    r->rel_mse = qs > 0 ? qe / qs : 0;
    r->budget_bytes = p->budget_bytes;
    r->bits = p->q_bits;
    r->group_size = p->q_group;
    r->bpw_quantized = r->q_params ? 8.0 * (double)r->q_bytes / (double)r->q_params : 0;
    r->bpw_total = r->params ? 8.0 * (double)r->bytes / (double)r->params : 0;
    return 0;
}

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* GGUF input's warnings go into the report; the front-end prints them. */
static int copy_warnings(const tq_model *m, tq_convert_report *r, tq_err *e)
{
    const char *const *w;
    size_t n = tq_gguf_model_warnings(m, &w);
    if (!n)
        return 0;
    if (!(r->warnings = tq_calloc(n, sizeof *r->warnings, e)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!(r->warnings[i] = tq_strdup(w[i], e)))
            return -1;
        r->n_warnings = i + 1;
    }
    return 0;
}

/* A GGUF of a table family whose tensor names tq does not map (qwen3next: llama.cpp's
 * Gated DeltaNet names): the output would keep GGUF names under a config tq-run cannot
 * place, so it is refused, naming the family and the architectures tq maps. --keep-names
 * asks for the GGUF names: then it goes through with the warnings. */
static int refuse_unmapped_gguf(const tq_model *m, const char *input, const tq_convert_opts *o, tq_err *e)
{
    const cJSON *ga = cJSON_GetObjectItemCaseSensitive(m->config, "gguf_architecture");
    char msg[512];
    if (o->keep_names || !cJSON_IsString(ga) || !tq_gguf_family_unmapped(ga->valuestring, msg, sizeof msg))
        return 0;
    return tq_fail(e, TQ_EUNSUP, "%s: %s (or keep the GGUF names with --keep-names)", input, msg);
}

/* A model whose family tq-run cannot decode (phi3, an unknown model_type): converting it
 * works, running the output will not; say so before anyone finds out later. The decoder's
 * own capability decides (runtime/runtime.h tq_run_decode_warning), not a list here. */
static int warn_not_decodable(const tq_model *m, tq_convert_report *r, tq_err *e)
{
    char msg[768];
    r->run_decodes = !tq_run_decode_warning(m->config, msg, sizeof msg);
    if (r->run_decodes || !m->config) /* no config.json: tq-convert writes none either */
        return 0;
    char **w = realloc(r->warnings, (r->n_warnings + 1) * sizeof *w);
    if (!w)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    r->warnings = w;
    if (!(w[r->n_warnings] = tq_strdup(msg, e)))
        return -1;
    r->n_warnings++;
    return 0;
}

/* Quantize mode that quantized no weight (every tensor kept, e.g. all 1-D or all --keep):
 * almost always a mistake, so say it. */
static int warn_nothing_quantized(const tq_convert_opts *o, tq_convert_report *r, tq_err *e)
{
    if (o->mode != TQ_CONVERT_QUANTIZE || r->q_params)
        return 0;
    char **w = realloc(r->warnings, (r->n_warnings + 1) * sizeof *w);
    if (!w)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    r->warnings = w;
    if (!(w[r->n_warnings] = tq_strdup("0 weights were quantized: no tensor is a linear weight that --keep and "
                                       "the size rules leave to quantize; the output holds the input's tensors",
                                       e)))
        return -1;
    r->n_warnings++;
    return 0;
}

/* What makes two runs the same for --resume: every option that changes a byte of the output
 * (not --threads, --force, --quiet, --json or --progress), by its command-line name. */
static cJSON *resume_options(const tq_convert_opts *o)
{
    static const char *const modes[] = {"quantize", "dequantize", "no-quantize"};
    cJSON *j = cJSON_CreateObject(), *bf = j ? cJSON_AddArrayToObject(j, "bits-for") : NULL;
    cJSON *kp = bf ? cJSON_AddArrayToObject(j, "keep") : NULL;
    char seed[32], shard[32], tbpw[40], tsize[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(tbpw, sizeof tbpw, "%a", o->target_bpw);
    snprintf(tsize, sizeof tsize, "%llu", (unsigned long long)o->target_size);
    snprintf(shard, sizeof shard, "%llu", (unsigned long long)o->shard_size);
    int ok = kp && cJSON_AddStringToObject(j, "mode", modes[o->mode]) &&
             cJSON_AddStringToObject(j, "method", o->method == TQ_METHOD_AFFINE ? "affine" : "turboquant") &&
             cJSON_AddNumberToObject(j, "bits", o->bits) && cJSON_AddNumberToObject(j, "group-size", (double)o->group_size) &&
             cJSON_AddStringToObject(j, "scale", scale_name(o->scale)) && cJSON_AddStringToObject(j, "seed", seed) &&
             cJSON_AddStringToObject(j, "rotation", o->rotation_none ? "none" : "hadamard") &&
             cJSON_AddStringToObject(j, "affine-rule", o->affine_rule == TQ_AFFINE_CPU ? "cpu" : "gpu") &&
             cJSON_AddNumberToObject(j, "embed", o->embed) && cJSON_AddNumberToObject(j, "dtype", o->dtype) &&
             cJSON_AddStringToObject(j, "shard-size", shard) && cJSON_AddBoolToObject(j, "keep-names", o->keep_names) &&
             cJSON_AddBoolToObject(j, "allow-nonfinite", o->allow_nonfinite) &&
             cJSON_AddStringToObject(j, "codebook", o->codebook == TQ_CODEBOOK_FITTED ? "fitted" : "gaussian") &&
             cJSON_AddStringToObject(j, "target-bpw", tbpw) && cJSON_AddStringToObject(j, "target-size", tsize);
    for (size_t i = 0; ok && i < o->n_bits_for; i++) {
        char *v = tq_asprintf(NULL, "%s=%d", o->bits_for_re[i], o->bits_for_bits[i]);
        ok = v && cJSON_AddItemToArray(bf, cJSON_CreateString(v));
        free(v);
    }
    for (size_t i = 0; ok && i < o->n_keep; i++)
        ok = cJSON_AddItemToArray(kp, cJSON_CreateString(o->keep_re[i])) != 0;
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static int open_resume(const tq_convert_opts *o, const tq_sources *src, const char *dir, tq_resume **res, tq_err *e)
{
    cJSON *opts = resume_options(o);
    if (!opts)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    char *id = tq_resume_identity("tq-convert", src, opts, e);
    int rc = id ? tq_resume_open(res, dir, id, o->threads, o->quiet, e) : -1;
    free(id);
    return rc;
}

/* dry: fill the report and *dry with the files, write nothing */
static int convert(const char *input, const char *out_dir, const tq_convert_opts *o, tq_convert_report *r,
                   tq_out_plan *dry, tq_err *e)
{
    double t0 = tq_now(), c0 = cpu_now();
    memset(r, 0, sizeof *r);
    r->threads = o->threads;
    if (check_opts(o, e))
        return -1;
    /* a budget plans every module the smallest group size allows, then chooses (cv_fit) */
    tq_convert_opts po = *o;
    if (o->mode == TQ_CONVERT_QUANTIZE && (o->target_bpw > 0 || o->target_size))
        po.group_size = 32;
    size_t ol = strlen(out_dir);
    while (ol > 1 && out_dir[ol - 1] == '/')
        ol--;
    char *out = tq_malloc(ol + 1, e);
    if (!out)
        return -1;
    memcpy(out, out_dir, ol);
    out[ol] = 0;
    tq_model *m = NULL;
    cv_plan plan;
    memset(&plan, 0, sizeof plan);
    tq_st_decl *decls = NULL;
    tq_model_writer *w = NULL;
    tq_adir od = {0};
    tq_sources src = {0};
    tq_resume *res = NULL;
    cv_track *track = NULL;
    const char *tmp = NULL;
    int rc = -1;
    if (tq_out_dir_check(out, input, o->force, e) || tq_sources_add(&src, input, e) ||
        tq_model_open_ex(&m, input, TQ_MODEL_NO_SPLIT | (o->keep_names ? TQ_MODEL_KEEP_NAMES : 0), e) || copy_warnings(m, r, e) ||
        refuse_unmapped_gguf(m, input, o, e) || warn_not_decodable(m, r, e) || cv_plan_build(&plan, m, &po, e) || cv_fit(&plan, e))
        goto done;
    if (!plan.n_decls) {
        tq_fail(e, TQ_EDATA, "%s: no tensors", input);
        goto done;
    }
    if (!(decls = tq_calloc(plan.n_decls, sizeof *decls, e)))
        goto done;
    for (size_t i = 0; i < plan.n_decls; i++) {
        decls[i].name = plan.decls[i].name;
        decls[i].dtype = plan.decls[i].dtype;
        decls[i].ndim = plan.decls[i].ndim;
        memcpy(decls[i].shape, plan.decls[i].shape, sizeof decls[i].shape);
    }
    static const char *const kq[] = {"format"}, *const vq[] = {"mlx"}, *const vp[] = {"pt"};
    if (dry) {
        if (plan_files(&plan, m, o, out, decls, kq, o->mode == TQ_CONVERT_QUANTIZE ? vq : vp, dry, e) ||
            fill_report(&plan, r, e) || warn_nothing_quantized(o, r, e))
            goto done;
        r->seconds = tq_now() - t0;
        r->cpu_seconds = cpu_now() - c0;
        rc = 0;
        goto done;
    }
    if (!o->force_space) { /* the exact size, as --dry-run lists it, against the free space */
        tq_out_plan need = {0};
        char *rp = o->resume ? tq_sibling_path(out, TQ_RESUME_SUFFIX, e) : NULL;
        int sc = (o->resume && !rp) || plan_files(&plan, m, o, out, decls, kq, o->mode == TQ_CONVERT_QUANTIZE ? vq : vp,
                                                  &need, e) ||
                 tq_space_check(out, tq_out_plan_total(&need), rp ? tq_tree_bytes(rp) : 0, e);
        free(rp);
        tq_out_plan_free(&need);
        if (sc)
            goto done;
    }
    if (tq_adir_open(&od, out, (o->force ? TQ_ADIR_REPLACE : 0) | (o->resume ? TQ_ADIR_RESUME : 0), e))
        goto done;
    tmp = od.tmp_path;
    if (o->resume && open_resume(o, &src, tmp, &res, e))
        goto done;
    if (cv_track_writer_open(&w, tmp, decls, plan.n_decls, o->shard_size, kq, o->mode == TQ_CONVERT_QUANTIZE ? vq : vp,
                             1, res, e) ||
        cv_plan_resolve(&plan, w, e) || (res && cv_track_open(&track, &plan, w, res, e)) || write_small(&plan, w, e) ||
        cv_run(&plan, w, track, e))
        goto done;
    r->n_shards = tq_model_writer_shards(w);
    tq_resume_counts(res, &r->resume_kept, &r->resume_dropped);
    tq_model_writer *wf = w;
    w = NULL;
    if (tq_model_writer_finish(wf, e) || write_config(&plan, m, o, tmp, e) || tq_model_copy_extras(m, tmp, e) ||
        tq_provenance_write(tmp, o->provenance, m, e) ||
        (res && tq_resume_finish(res, e)))
        goto done;
    /* an input changed meanwhile may have given mixed bytes: keep the output, publish nothing */
    if (tq_sources_check_adir(&src, &od, e) || tq_adir_commit(&od, e))
        goto done;
    if (fill_report(&plan, r, e) || warn_nothing_quantized(o, r, e))
        goto done;
    r->seconds = tq_now() - t0;
    r->cpu_seconds = cpu_now() - c0;
    rc = 0;
done:
    if (w)
        tq_model_writer_abort(w);
    cv_track_free(track);
    tq_resume_close(res); /* the lock goes before the directory is left for a rerun */
    if (od.tmp_path)
        tq_adir_abort(&od);
    if (rc)
        tq_convert_report_free(r);
    free(decls);
    cv_plan_free(&plan);
    tq_model_close(m);
    tq_sources_free(&src);
    free(out);
    return rc;
}

int tq_convert(const char *input, const char *out_dir, const tq_convert_opts *o, tq_convert_report *r, tq_err *e)
{
    return convert(input, out_dir, o, r, NULL, e);
}

int tq_convert_dry_run(const char *input, const char *out_dir, const tq_convert_opts *o, tq_convert_report *r,
                       tq_out_plan *files, tq_err *e)
{
    int rc = convert(input, out_dir, o, r, files, e);
    if (rc != 0)
        tq_out_plan_free(files);
    return rc;
}

void tq_convert_report_free(tq_convert_report *r)
{
    for (size_t i = 0; r->t && i < r->n; i++) {
        free(r->t[i].name);
        free(r->t[i].source);
        free(r->t[i].choices);
    }
    free(r->t);
    tq_free_strv(r->warnings, r->n_warnings);
    int th = r->threads;
    memset(r, 0, sizeof *r);
    r->threads = th;
}

struct cJSON *tq_convert_report_json(const tq_convert_report *r, const tq_convert_opts *o)
{
    static const char *modes[] = {"quantize", "dequantize", "plain"};
    cJSON *j = cJSON_CreateObject(), *ts = j ? cJSON_AddArrayToObject(j, "tensors") : NULL;
    if (!ts) {
        cJSON_Delete(j);
        return NULL;
    }
    cJSON_AddStringToObject(j, "mode", modes[o->mode]);
    if (o->mode == TQ_CONVERT_QUANTIZE) {
        cJSON_AddStringToObject(j, "method", o->method == TQ_METHOD_AFFINE ? "affine" : "turboquant");
        cJSON_AddNumberToObject(j, "bits", o->method == TQ_METHOD_AFFINE ? o->bits : r->bits);
        cJSON_AddNumberToObject(j, "group_size", (double)(o->method == TQ_METHOD_AFFINE ? o->group_size : r->group_size));
        if (o->method == TQ_METHOD_AFFINE) {
            cJSON_AddStringToObject(j, "affine_rule", o->affine_rule == TQ_AFFINE_CPU ? "cpu" : "gpu");
        } else {
            cJSON_AddStringToObject(j, "scale_method", scale_name(o->scale));
            cJSON_AddNumberToObject(j, "rotation_seed", (double)o->seed);
            cJSON_AddStringToObject(j, "codebook", o->codebook == TQ_CODEBOOK_FITTED ? "fitted" : "gaussian");
            if (r->budget_bytes) {
                cJSON *b = cJSON_AddObjectToObject(j, "budget");
                if (b) {
                    if (o->target_bpw > 0)
                        cJSON_AddNumberToObject(b, "target_bpw", o->target_bpw);
                    else
                        cJSON_AddNumberToObject(b, "target_size", (double)o->target_size);
                    cJSON_AddNumberToObject(b, "bytes", (double)r->budget_bytes);
                    cJSON_AddNumberToObject(b, "objective", r->objective);
                    cJSON_AddNumberToObject(b, "objective_estimated", r->objective_est);
                }
            }
        }
        cJSON_AddBoolToObject(j, "nothing_quantized", r->q_params == 0);
    }
    cJSON_AddNumberToObject(j, "threads", r->threads);
    cJSON_AddNumberToObject(j, "seconds", r->seconds);
    cJSON_AddNumberToObject(j, "cpu_seconds", r->cpu_seconds);
    cJSON_AddNumberToObject(j, "quantized_mweights_per_cpu_s", r->cpu_seconds > 0 ? (double)r->q_params / r->cpu_seconds / 1e6 : 0);
    cJSON_AddNumberToObject(j, "params", (double)r->params);
    cJSON_AddNumberToObject(j, "bytes", (double)r->bytes);
    cJSON_AddNumberToObject(j, "input_bytes", (double)r->in_bytes);
    cJSON_AddNumberToObject(j, "quantized_params", (double)r->q_params);
    cJSON_AddNumberToObject(j, "quantized_bytes", (double)r->q_bytes);
    cJSON_AddNumberToObject(j, "bits_per_weight_quantized", r->bpw_quantized);
    cJSON_AddNumberToObject(j, "bits_per_weight_total", r->bpw_total);
    cJSON_AddNumberToObject(j, "rel_mse", r->rel_mse);
    cJSON_AddBoolToObject(j, "tq_run_decodes", r->run_decodes);
    cJSON *wa = cJSON_AddArrayToObject(j, "warnings");
    for (size_t i = 0; wa && i < r->n_warnings; i++)
        cJSON_AddItemToArray(wa, cJSON_CreateString(r->warnings[i]));
    double rate = r->seconds > 0 ? (double)r->q_params / r->seconds / 1e6 : 0;
    cJSON_AddNumberToObject(j, "quantized_mweights_per_s", rate);
    cJSON_AddNumberToObject(j, "quantized_mweights_per_s_per_thread", r->threads > 0 ? rate / r->threads : 0);
    for (size_t i = 0; i < r->n; i++) {
        const tq_convert_tensor *t = &r->t[i];
        cJSON *x = cJSON_CreateObject();
        if (!x)
            break;
        cJSON_AddStringToObject(x, "name", t->name);
        cJSON_AddStringToObject(x, "source", t->source);
        cJSON_AddBoolToObject(x, "quantized", t->quantized);
        if (t->affine)
            cJSON_AddStringToObject(x, "method", "affine");
        if (t->bits) {
            cJSON_AddNumberToObject(x, "bits", t->bits);
            cJSON_AddNumberToObject(x, "group_size", (double)t->group_size);
        }
        if (t->quantized)
            cJSON_AddNumberToObject(x, "rel_mse", t->rel_mse);
        if (t->quantized && !t->affine)
            cJSON_AddStringToObject(x, "codebook", t->codebook_fitted ? "fitted" : "gaussian");
        cJSON *cs = t->n_choices > 1 ? cJSON_AddArrayToObject(x, "settings") : NULL;
        if (cs)
            cJSON_AddNumberToObject(x, "importance", t->importance);
        for (size_t k = 0; cs && k < t->n_choices; k++) {
            const struct tq_convert_choice *c = &t->choices[k];
            cJSON *y = cJSON_CreateObject();
            if (!y)
                break;
            cJSON_AddNumberToObject(y, "bits", c->bits);
            cJSON_AddNumberToObject(y, "group_size", (double)c->group_size);
            cJSON_AddNumberToObject(y, "bytes", (double)c->bytes);
            cJSON_AddNumberToObject(y, "rel_mse_sample", c->rel_mse_est);
            cJSON_AddStringToObject(y, "codebook", c->fitted ? "fitted" : "gaussian");
            cJSON_AddBoolToObject(y, "chosen", (int)k == t->chosen);
            cJSON_AddItemToArray(cs, y);
        }
        cJSON_AddNumberToObject(x, "params", (double)t->params);
        cJSON_AddNumberToObject(x, "bytes", (double)t->bytes);
        if (t->note)
            cJSON_AddStringToObject(x, "note", t->note);
        cJSON_AddItemToArray(ts, x);
    }
    return j;
}
