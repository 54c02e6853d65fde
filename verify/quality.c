/* verify/quality.c — tq-verify quality: a model against its reference, tensor by tensor
 * (relative MSE of TEST's dequantized weights) and on held-out text (the runtime's
 * sliding-window evaluation of both: perplexity, KL(REF‖TEST), top-1 agreement). */
#include "verify/verify_internal.h"
#include "formats/family.h"
#include "formats/formats.h"
#include "quant/convert/convert.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_ELEMS ((size_t)1 << 18) /* elements per read: 2 MiB of f64 at most per side */
#define MAX_EVAL_BYTES ((size_t)1 << 30)

void tq_quality_report_free(tq_quality_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->t[i].name);
        free(r->t[i].klass);
    }
    free(r->t);
    tq_free_strv(r->classes, r->n_classes);
    free(r->class_rel_mse);
    free(r->layer_rel_mse);
    free(r->layer_class_rel_mse);
    free(r->ref);
    free(r->test);
    memset(r, 0, sizeof *r);
}

/* TEST holds a quantized module (P.weight U32 beside P.scales): what tq-convert dequantizes. */
static int has_quantized(const tq_model *m)
{
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_tensor_info *ti = &m->tensors[i].info;
        size_t n = strlen(ti->name);
        if (ti->dtype != TQ_DT_U32 || n < 7 || strcmp(ti->name + n - 7, ".weight"))
            continue;
        char s[4200];
        if (n - 7 + sizeof ".scales" <= sizeof s) {
            snprintf(s, sizeof s, "%.*s.scales", (int)(n - 7), ti->name);
            if (tq_model_find(m, s))
                return 1;
        }
    }
    return 0;
}

/* Class of a tensor: the module's leaf name (the component before the last ".weight" /
 * ".bias"), prefixed with the role for routed and shared experts. */
static char *class_of(const tq_family *f, const char *name, int64_t *layer, tq_err *e)
{
    tq_name_info ni;
    tq_family_name(f, 0, name, &ni);
    *layer = ni.has_layer ? (int64_t)ni.layer : -1;
    size_t n = strlen(name);
    const char *end = name + n;
    const char *dot = strrchr(name, '.');
    if (dot && (!strcmp(dot, ".weight") || !strcmp(dot, ".bias")))
        end = dot;
    const char *start = end;
    while (start > name && start[-1] != '.')
        start--;
    const char *role = ni.role == TQ_ROLE_EXPERT ? "experts." : ni.role == TQ_ROLE_SHARED ? "shared_expert."
                       : ni.role == TQ_ROLE_ROUTER                                       ? "router."
                                                                                         : "";
    return tq_asprintf(e, "%s%.*s%s", role, (int)(end - start), start, dot && !strcmp(dot, ".bias") ? ".bias" : "");
}

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp(((const tq_quality_tensor *)a)->name, ((const tq_quality_tensor *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *shape_str(const tq_tensor_info *ti, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ti->ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", d ? ", " : "", (unsigned long long)ti->shape[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

/* Σ(b−a)² and Σa² over one tensor of each model, streamed in chunks. */
static int tensor_err(const tq_model_tensor *ta, const tq_model_tensor *tb, void *ra, void *rb, float *fa, float *fb,
                      double *err2, double *sum2, tq_err *e)
{
    const tq_tensor_info *ia = &ta->info, *ib = &tb->info;
    size_t sa = tq_dtype_size(ia->dtype), sb = tq_dtype_size(ib->dtype);
    double s_err = 0, s_sum = 0;
    for (uint64_t i = 0; i < ia->nelem; i += CHUNK_ELEMS) {
        size_t k = (size_t)(ia->nelem - i < CHUNK_ELEMS ? ia->nelem - i : CHUNK_ELEMS);
        if (tq_model_read(ta, i * sa, ra, k * sa, e) || tq_to_f32(ia->dtype, ra, fa, k, e) ||
            tq_model_read(tb, i * sb, rb, k * sb, e) || tq_to_f32(ib->dtype, rb, fb, k, e))
            return tq_err_prefix(e, "tensor '%s'", ia->name);
        for (size_t j = 0; j < k; j++) {
            if (!isfinite(fa[j]) || !isfinite(fb[j]))
                return tq_fail(e, TQ_EDATA, "tensor '%s': element %llu is not finite in %s", ia->name,
                               (unsigned long long)(i + j), isfinite(fa[j]) ? "TEST" : "REF");
            double d = (double)fb[j] - (double)fa[j];
            s_err += d * d;
            s_sum += (double)fa[j] * (double)fa[j];
        }
    }
    *err2 = s_err;
    *sum2 = s_sum;
    return 0;
}

/* Every float tensor of REF against TEST's (dequantized) one of the same name. */
static int compare_tensors(const char *ref, const char *test, tq_model *a, tq_model *b, tq_quality_report *r, tq_err *e)
{
    const tq_family *f = tq_family_detect(a->config);
    size_t cap = 0;
    for (size_t i = 0; i < a->n_tensors; i++)
        cap += tq_dtype_is_float(a->tensors[i].info.dtype);
    for (size_t i = 0; i < b->n_tensors; i++) {
        const tq_tensor_info *ti = &b->tensors[i].info;
        if (tq_dtype_is_float(ti->dtype) && !tq_model_find(a, ti->name))
            return tq_fail(e, TQ_EDATA, "tensor '%s' is in TEST (%s) but not in REF (%s)", ti->name, test, ref);
    }
    if (!(r->t = tq_calloc(cap ? cap : 1, sizeof *r->t, e)))
        return -1;
    void *ra = tq_malloc(CHUNK_ELEMS * 8, e), *rb = ra ? tq_malloc(CHUNK_ELEMS * 8, e) : NULL;
    float *fa = rb ? tq_malloc(CHUNK_ELEMS * sizeof *fa, e) : NULL, *fb = fa ? tq_malloc(CHUNK_ELEMS * sizeof *fb, e) : NULL;
    int rc = fb ? 0 : -1;
    for (size_t i = 0; i < a->n_tensors && rc == 0; i++) {
        const tq_model_tensor *ta = &a->tensors[i];
        if (!tq_dtype_is_float(ta->info.dtype))
            continue;
        const tq_model_tensor *tb = tq_model_find(b, ta->info.name);
        char s1[160], s2[160];
        if (!tb) {
            rc = tq_fail(e, TQ_EDATA, "tensor '%s' is in REF (%s) but not in TEST (%s)", ta->info.name, ref, test);
        } else if (!tq_dtype_is_float(tb->info.dtype) || tb->info.ndim != ta->info.ndim ||
                   memcmp(tb->info.shape, ta->info.shape, sizeof(uint64_t) * (size_t)ta->info.ndim)) {
            rc = tq_fail(e, TQ_EDATA, "tensor '%s': %s %s in REF, %s %s in TEST", ta->info.name,
                         tq_dtype_name(ta->info.dtype), shape_str(&ta->info, s1, sizeof s1),
                         tq_dtype_name(tb->info.dtype), shape_str(&tb->info, s2, sizeof s2));
        } else {
            tq_quality_tensor *t = &r->t[r->n];
            if (!(t->name = tq_strdup(ta->info.name, e)) || !(t->klass = class_of(f, t->name, &t->layer, e))) {
                rc = -1;
                r->n++;
                break;
            }
            r->n++;
            t->params = ta->info.nelem;
            rc = tensor_err(ta, tb, ra, rb, fa, fb, &t->err2, &t->sum2, e);
            t->rel_mse = t->sum2 > 0 ? t->err2 / t->sum2 : t->err2 > 0 ? INFINITY : 0;
        }
    }
    free(ra);
    free(rb);
    free(fa);
    free(fb);
    if (rc)
        return -1;
    qsort(r->t, r->n, sizeof *r->t, cmp_tensor);
    return 0;
}

/* Totals, per class and per layer, over the tensors that differ (in name order). */
static int summarize(tq_quality_report *r, tq_err *e)
{
    double err = 0, sum = 0;
    for (size_t i = 0; i < r->n; i++) {
        const tq_quality_tensor *t = &r->t[i];
        if (t->layer >= 0 && (uint64_t)t->layer + 1 > r->n_layers)
            r->n_layers = (uint64_t)t->layer + 1;
        if (t->err2 <= 0)
            continue;
        r->n_differ++;
        r->params_differ += t->params;
        err += t->err2;
        sum += t->sum2;
        size_t c = 0;
        while (c < r->n_classes && strcmp(r->classes[c], t->klass))
            c++;
        if (c == r->n_classes) {
            char **nv = realloc(r->classes, (r->n_classes + 1) * sizeof *nv);
            if (!nv)
                return tq_fail(e, TQ_ENOMEM, "out of memory");
            r->classes = nv;
            if (!(r->classes[r->n_classes] = tq_strdup(t->klass, e)))
                return -1;
            r->n_classes++;
        }
    }
    r->rel_mse = sum > 0 ? err / sum : 0;
    if (r->n_classes) /* qsort and bsearch take no NULL array, even empty */
        qsort(r->classes, r->n_classes, sizeof *r->classes, cmp_str);
    size_t C = r->n_classes, L = (size_t)r->n_layers;
    double *ce = tq_calloc(C + 1, sizeof *ce, e), *cs = ce ? tq_calloc(C + 1, sizeof *cs, e) : NULL;
    double *le = cs ? tq_calloc(L * (C + 1) + 1, sizeof *le, e) : NULL, *ls = le ? tq_calloc(L * (C + 1) + 1, sizeof *ls, e) : NULL;
    int rc = -1;
    if (!ls || !(r->class_rel_mse = tq_calloc(C + 1, sizeof(double), e)) ||
        !(r->layer_rel_mse = tq_calloc(L + 1, sizeof(double), e)) ||
        !(r->layer_class_rel_mse = tq_calloc(L * C + 1, sizeof(double), e)))
        goto out;
    /* per layer: column C holds the layer's total */
    for (size_t i = 0; i < r->n; i++) {
        const tq_quality_tensor *t = &r->t[i];
        if (t->err2 <= 0)
            continue;
        size_t c = (size_t)((char **)bsearch(&t->klass, r->classes, C, sizeof *r->classes, cmp_str) - r->classes);
        ce[c] += t->err2;
        cs[c] += t->sum2;
        if (t->layer >= 0) {
            size_t l = (size_t)t->layer;
            le[l * (C + 1) + c] += t->err2;
            ls[l * (C + 1) + c] += t->sum2;
            le[l * (C + 1) + C] += t->err2;
            ls[l * (C + 1) + C] += t->sum2;
        }
    }
    for (size_t c = 0; c < C; c++)
        r->class_rel_mse[c] = cs[c] > 0 ? ce[c] / cs[c] : 0;
    for (size_t l = 0; l < L; l++) {
        double tl = ls[l * (C + 1) + C];
        r->layer_rel_mse[l] = tl > 0 ? le[l * (C + 1) + C] / tl : 0;
        for (size_t c = 0; c < C; c++) {
            double s = ls[l * (C + 1) + c];
            r->layer_class_rel_mse[l * C + c] = s > 0 ? le[l * (C + 1) + c] / s : NAN;
        }
    }
    rc = 0;
out:
    free(ce);
    free(cs);
    free(le);
    free(ls);
    return rc;
}

/* The tensor half: TEST dequantized into dir/dequantized when it holds quantized modules. */
static int quality_tensors(const char *ref, const char *test, const char *dir, int threads, tq_quality_report *r,
                           tq_err *e)
{
    tq_model *a = NULL, *b = NULL;
    char *deq = NULL;
    int rc = -1;
    if (tq_verify_open_view(ref, test, &a, e) != 0 || tq_verify_open_view(test, ref, &b, e) != 0)
        goto out;
    uint64_t va = 0, vb = 0;
    int ka = tq_family_cfg_u64(a->config, "vocab_size", &va, e), kb = ka < 0 ? -1 : tq_family_cfg_u64(b->config, "vocab_size", &vb, e);
    if (ka < 0 || kb < 0) {
        tq_err_prefix(e, "%s", ka < 0 ? ref : test);
        goto out;
    }
    if (ka == 0 && kb == 0 && va != vb) {
        tq_fail(e, TQ_EDATA, "REF (%s) has a vocabulary of %llu tokens, TEST (%s) one of %llu: not the same model", ref,
                (unsigned long long)va, test, (unsigned long long)vb);
        goto out;
    }
    if (has_quantized(b)) {
        tq_model_close(b);
        b = NULL;
        tq_convert_opts co;
        tq_convert_opts_default(&co);
        co.mode = TQ_CONVERT_DEQUANTIZE;
        co.dtype = TQ_DT_F32;
        co.threads = threads;
        co.quiet = 1;
        tq_convert_report cr;
        memset(&cr, 0, sizeof cr);
        if (!(deq = tq_path_join(dir, "dequantized", e)))
            goto out;
        int crc = tq_convert(test, deq, &co, &cr, e);
        tq_convert_report_free(&cr);
        if (crc != 0) {
            tq_err_prefix(e, "%s: dequantizing", test);
            goto out;
        }
        if (tq_model_open(&b, deq, e) != 0)
            goto out;
    }
    rc = compare_tensors(ref, test, a, b, r, e);
    if (rc == 0)
        rc = summarize(r, e);
out:
    tq_model_close(a);
    tq_model_close(b);
    if (deq)
        tq_rm_tree(deq);
    free(deq);
    return rc;
}

/* One model's evaluation, its scored steps' logits written to logits. */
static int eval_one(const char *model, const int32_t *ids, size_t n, const tq_quality_opts *o, const char *logits,
                    uint64_t *vocab, tq_run_eval *ev, tq_err *e)
{
    tq_run_opts ro;
    tq_run_opts_default(&ro);
    ro.threads = o->threads;
    ro.logits_path = logits;
    tq_runner *run = NULL;
    int rc = tq_runner_open(&run, model, &ro, e);
    if (rc == 0 && *vocab && tq_runner_vocab(run) != *vocab)
        rc = tq_fail(e, TQ_EDATA, "%s: vocabulary of %llu tokens, but REF's has %llu: not the same model", model,
                     (unsigned long long)tq_runner_vocab(run), (unsigned long long)*vocab);
    if (rc == 0) {
        *vocab = tq_runner_vocab(run);
        tq_run_stats st;
        uint64_t window = o->window ? o->window : 512;
        rc = tq_runner_eval(run, ids, n, window, o->stride ? o->stride : window / 2, ev, &st, e);
        if (rc)
            tq_err_prefix(e, "%s", o->eval_path);
    }
    tq_runner_close(run);
    return rc;
}

static int quality_eval(const char *ref, const char *test, const char *dir, const tq_quality_opts *o, tq_quality_eval *q,
                        tq_err *e)
{
    char *text = NULL, *la = NULL, *lb = NULL;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    tq_tok *tok = NULL;
    int rc = -1;
    uint64_t vocab = 0;
    tq_run_eval ea, eb;
    tq_run_logits_cmp c;
    if (tq_read_small_file(o->eval_path, MAX_EVAL_BYTES, &text, &len, e) || tq_tok_load(ref, &tok, e) ||
        tq_tok_encode(tok, text, len, 0, &ids, &n, e))
        goto out;
    if (!(la = tq_path_join(dir, "ref.f32", e)) || !(lb = tq_path_join(dir, "test.f32", e)) ||
        eval_one(ref, ids, n, o, la, &vocab, &ea, e) || eval_one(test, ids, n, o, lb, &vocab, &eb, e) ||
        tq_run_logits_compare(la, lb, vocab, &c, e))
        goto out;
    *q = (tq_quality_eval){
        .tokens = ea.tokens, .scored = ea.scored, .window = ea.window, .stride = ea.stride,
        .ref_ppl = ea.perplexity, .test_ppl = eb.perplexity, .ref_nll = ea.mean_nll, .test_nll = eb.mean_nll,
        .ref_top1 = ea.top1_rate, .test_top1 = eb.top1_rate, .steps = c.steps, .top1_agree = c.top1_agree,
        .top1_rate = c.top1_rate, .mean_kl = c.mean_kl, .max_kl = c.max_kl, .max_rel_diff = c.max_rel_diff,
    };
    rc = 0;
out:
    tq_tok_free(tok);
    free(ids);
    free(text);
    free(la);
    free(lb);
    return rc;
}

int tq_quality_run(const char *ref, const char *test, const tq_quality_opts *o, tq_quality_report *r, tq_err *e)
{
    memset(r, 0, sizeof *r);
    int threads = o->threads > 0 ? o->threads : tq_default_threads();
    tq_quality_opts oo = *o;
    oo.threads = threads;
    if (!(r->ref = tq_strdup(ref, e)) || !(r->test = tq_strdup(test, e)))
        return -1;
    char *dir = tq_temp_dir("tq-quality", e);
    if (!dir)
        return -1;
    tq_partials_add(dir); /* removed if the tool is interrupted */
    int rc = quality_tensors(ref, test, dir, threads, r, e);
    if (rc == 0 && o->eval_path) {
        rc = quality_eval(ref, test, dir, &oo, &r->ev, e);
        r->has_eval = rc == 0;
    }
    tq_partials_forget(dir);
    tq_rm_tree(dir);
    free(dir);
    return rc;
}

static cJSON *num_or_null(double v)
{
    return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

cJSON *tq_quality_report_json(const tq_quality_report *r)
{
    cJSON *j = cJSON_CreateObject(), *ts = cJSON_AddArrayToObject(j, "tensors");
    cJSON_AddStringToObject(j, "ref", r->ref ? r->ref : "");
    cJSON_AddStringToObject(j, "test", r->test ? r->test : "");
    for (size_t i = 0; i < r->n; i++) {
        const tq_quality_tensor *t = &r->t[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "class", t->klass);
        cJSON_AddItemToObject(o, "layer", t->layer >= 0 ? cJSON_CreateNumber((double)t->layer) : cJSON_CreateNull());
        cJSON_AddNumberToObject(o, "params", (double)t->params);
        cJSON_AddItemToObject(o, "rel_mse", num_or_null(t->rel_mse));
        cJSON_AddItemToArray(ts, o);
    }
    cJSON_AddNumberToObject(j, "tensors_compared", (double)r->n);
    cJSON_AddNumberToObject(j, "tensors_differ", (double)r->n_differ);
    cJSON_AddNumberToObject(j, "params_differ", (double)r->params_differ);
    cJSON_AddNumberToObject(j, "rel_mse", r->rel_mse);
    cJSON *cl = cJSON_AddObjectToObject(j, "classes");
    for (size_t c = 0; c < r->n_classes; c++)
        cJSON_AddNumberToObject(cl, r->classes[c], r->class_rel_mse[c]);
    cJSON *ls = cJSON_AddArrayToObject(j, "layers");
    for (uint64_t l = 0; l < r->n_layers; l++) {
        cJSON *o = cJSON_CreateObject(), *oc = cJSON_AddObjectToObject(o, "classes");
        cJSON_AddNumberToObject(o, "layer", (double)l);
        cJSON_AddNumberToObject(o, "rel_mse", r->layer_rel_mse[l]);
        for (size_t c = 0; c < r->n_classes; c++)
            if (isfinite(r->layer_class_rel_mse[l * r->n_classes + c]))
                cJSON_AddNumberToObject(oc, r->classes[c], r->layer_class_rel_mse[l * r->n_classes + c]);
        cJSON_AddItemToArray(ls, o);
    }
    if (r->has_eval) {
        const tq_quality_eval *q = &r->ev;
        cJSON *ev = cJSON_AddObjectToObject(j, "eval"), *a = cJSON_AddObjectToObject(ev, "ref"),
              *b = cJSON_AddObjectToObject(ev, "test");
        const struct {
            cJSON *o;
            const char *k;
            double v;
        } nums[] = {
            {ev, "tokens", (double)q->tokens},      {ev, "scored", (double)q->scored},
            {ev, "window", (double)q->window},      {ev, "stride", (double)q->stride},
            {a, "perplexity", q->ref_ppl},          {a, "mean_nll", q->ref_nll},
            {a, "top1_rate", q->ref_top1},          {b, "perplexity", q->test_ppl},
            {b, "mean_nll", q->test_nll},           {b, "top1_rate", q->test_top1},
            {ev, "perplexity_ratio", q->ref_ppl > 0 ? q->test_ppl / q->ref_ppl : 0},
            {ev, "steps", (double)q->steps},        {ev, "top1_agree", (double)q->top1_agree},
            {ev, "top1_agreement", q->top1_rate},   {ev, "mean_kl", q->mean_kl},
            {ev, "max_kl", q->max_kl},              {ev, "max_rel_diff", q->max_rel_diff},
        };
        for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
            cJSON_AddNumberToObject(nums[i].o, nums[i].k, nums[i].v);
    }
    return j;
}
