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
#include <unistd.h>

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

/* ------------------------------------------------------------ noise baseline */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in (0, 1): the top 53 bits, offset by half a step */
static double unit_open(uint64_t *x) { return ((double)(splitmix64(x) >> 11) + 0.5) * 0x1p-53; }

static int cmp_name_tensor(const void *k, const void *t)
{
    return strcmp((const char *)k, ((const tq_quality_tensor *)t)->name);
}

int tq_quality_noise_model(const char *ref, const tq_quality_report *r, uint64_t seed, const char *dir, tq_err *e)
{
    tq_model *m = NULL;
    tq_model_writer *w = NULL;
    tq_st_decl *decls = NULL;
    void *raw = NULL;
    float *f = NULL;
    char *cfg = NULL;
    int rc = -1;
    if (tq_model_open(&m, ref, e) != 0 || tq_mkdir_p(dir, e) != 0)
        goto out;
    if (!(decls = tq_calloc(m->n_tensors ? m->n_tensors : 1, sizeof *decls, e)) ||
        !(raw = tq_malloc(CHUNK_ELEMS * 8, e)) || !(f = tq_malloc(CHUNK_ELEMS * sizeof *f, e)))
        goto out;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_tensor_info *t = &m->tensors[i].info;
        const tq_quality_tensor *q = bsearch(t->name, r->t, r->n, sizeof *r->t, cmp_name_tensor);
        decls[i].name = t->name;
        decls[i].dtype = q && q->err2 > 0 ? TQ_DT_F32 : t->dtype;
        decls[i].ndim = t->ndim;
        memcpy(decls[i].shape, t->shape, sizeof t->shape);
    }
    if (tq_model_writer_open(&w, dir, decls, m->n_tensors, 0, NULL, NULL, 0, e) != 0)
        goto out;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const tq_model_tensor *mt = &m->tensors[i];
        const tq_tensor_info *t = &mt->info;
        const tq_quality_tensor *q = bsearch(t->name, r->t, r->n, sizeof *r->t, cmp_name_tensor);
        long wi = tq_model_writer_index(w, t->name);
        if (wi < 0) {
            tq_fail(e, TQ_EDATA, "tensor '%s': not declared", t->name);
            goto out;
        }
        if (!q || !(q->err2 > 0)) { /* copied as it is */
            for (uint64_t off = 0; off < t->nbytes; off += CHUNK_ELEMS * 8) {
                size_t k = (size_t)(t->nbytes - off < CHUNK_ELEMS * 8 ? t->nbytes - off : CHUNK_ELEMS * 8);
                if (tq_model_read(mt, off, raw, k, e) || tq_model_writer_write(w, (size_t)wi, off, raw, k, e))
                    goto out;
            }
            continue;
        }
        double sigma = sqrt(q->err2 / (double)q->params);
        uint64_t st = seed + tq_crc32(t->name, strlen(t->name)), have = 0;
        double spare = 0;
        size_t sz = tq_dtype_size(t->dtype);
        for (uint64_t i0 = 0; i0 < t->nelem; i0 += CHUNK_ELEMS) {
            size_t k = (size_t)(t->nelem - i0 < CHUNK_ELEMS ? t->nelem - i0 : CHUNK_ELEMS);
            if (tq_model_read(mt, i0 * sz, raw, k * sz, e) || tq_to_f32(t->dtype, raw, f, k, e))
                goto out;
            for (size_t j = 0; j < k; j++) {
                double z;
                if (have) {
                    z = spare;
                    have = 0;
                } else { /* Box-Muller: two normals from two uniforms */
                    double u1 = unit_open(&st), u2 = unit_open(&st), rad = sqrt(-2 * log(u1));
                    z = rad * cos(2 * M_PI * u2);
                    spare = rad * sin(2 * M_PI * u2);
                    have = 1;
                }
                f[j] = (float)((double)f[j] + sigma * z);
            }
            if (tq_model_writer_write(w, (size_t)wi, i0 * 4, f, k * 4, e))
                goto out;
        }
    }
    rc = tq_model_writer_finish(w, e);
    w = NULL;
    if (rc != 0)
        goto out;
    rc = -1;
    if (m->config && (!(cfg = tq_path_join(dir, "config.json", e)) || tq_json_write_file(cfg, m->config, e) != 0))
        goto out;
    if (tq_model_copy_extras(m, dir, e) != 0)
        goto out;
    rc = 0;
out:
    if (w)
        tq_model_writer_abort(w);
    if (rc)
        tq_err_prefix(e, "%s: noise baseline", ref);
    free(cfg);
    free(raw);
    free(f);
    free(decls);
    tq_model_close(m);
    return rc;
}

/* The negative log-likelihood of each step's target (step s predicts ids[s + 1]) from a
 * logits file of steps x V raw f32. */
static int step_nll(const char *path, uint64_t V, const int32_t *ids, uint64_t steps, double *nll, tq_err *e)
{
    uint64_t size;
    int fd = tq_open_regular(path, &size, e);
    if (fd < 0)
        return -1;
    float *a = tq_malloc(V * 4, e);
    int rc = a ? 0 : -1;
    for (uint64_t s = 0; s < steps && rc == 0; s++) {
        if ((rc = tq_pread_full(fd, a, V * 4, s * V * 4, path, e)) != 0)
            break;
        double mx = -INFINITY, z = 0;
        for (uint64_t i = 0; i < V; i++)
            mx = fmax(mx, a[i]);
        for (uint64_t i = 0; i < V; i++)
            z += exp(a[i] - mx);
        uint64_t t = (uint64_t)ids[s + 1];
        if (t >= V)
            rc = tq_fail(e, TQ_EDATA, "%s: token %llu beyond the vocabulary", path, (unsigned long long)t);
        else
            nll[s] = log(z) + mx - (double)a[t];
    }
    free(a);
    close(fd);
    return rc;
}

/* Standard error of the mean of b[s] - a[s]. */
static double paired_stderr(const double *a, const double *b, uint64_t n)
{
    if (n < 2)
        return 0;
    double m = 0, v = 0;
    for (uint64_t s = 0; s < n; s++)
        m += b[s] - a[s];
    m /= (double)n;
    for (uint64_t s = 0; s < n; s++)
        v += (b[s] - a[s] - m) * (b[s] - a[s] - m);
    return sqrt(v / (double)(n - 1) / (double)n);
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

static int quality_eval(const char *ref, const char *test, const char *dir, const tq_quality_opts *o,
                        const tq_quality_report *r, tq_quality_eval *q, tq_err *e)
{
    char *text = NULL, *la = NULL, *lb = NULL, *ln = NULL, *nd = NULL;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    double *na = NULL, *nb = NULL;
    tq_tok *tok = NULL;
    int rc = -1;
    uint64_t vocab = 0;
    tq_run_eval ea, eb, en;
    tq_run_logits_cmp c, cn;
    if (tq_read_small_file(o->eval_path, MAX_EVAL_BYTES, &text, &len, e) || tq_tok_load(ref, &tok, e) ||
        tq_tok_encode(tok, text, len, 0, &ids, &n, e))
        goto out;
    if (!(la = tq_path_join(dir, "ref.f32", e)) || !(lb = tq_path_join(dir, "test.f32", e)) ||
        eval_one(ref, ids, n, o, la, &vocab, &ea, e) || eval_one(test, ids, n, o, lb, &vocab, &eb, e) ||
        tq_run_logits_compare(la, lb, vocab, &c, e))
        goto out;
    if (c.steps + 1 > n) {
        tq_fail(e, TQ_EDATA, "%s: %llu scored steps for %zu tokens", o->eval_path, (unsigned long long)c.steps, n);
        goto out;
    }
    *q = (tq_quality_eval){
        .tokens = ea.tokens, .scored = ea.scored, .window = ea.window, .stride = ea.stride,
        .ref_ppl = ea.perplexity, .test_ppl = eb.perplexity, .ref_nll = ea.mean_nll, .test_nll = eb.mean_nll,
        .ref_top1 = ea.top1_rate, .test_top1 = eb.top1_rate, .steps = c.steps, .top1_agree = c.top1_agree,
        .top1_rate = c.top1_rate, .mean_kl = c.mean_kl, .max_kl = c.max_kl, .max_rel_diff = c.max_rel_diff,
        .kl_stderr = c.kl_stderr,
    };
    if (!(na = tq_calloc(c.steps + 1, sizeof *na, e)) || !(nb = tq_calloc(c.steps + 1, sizeof *nb, e)) ||
        step_nll(la, vocab, ids, c.steps, na, e) || step_nll(lb, vocab, ids, c.steps, nb, e))
        goto out;
    q->nll_diff_stderr = paired_stderr(na, nb, c.steps);
    if (o->noise && r) {
        if (!(nd = tq_path_join(dir, "noise", e)) || !(ln = tq_path_join(dir, "noise.f32", e)) ||
            tq_quality_noise_model(ref, r, o->noise_seed, nd, e) || eval_one(nd, ids, n, o, ln, &vocab, &en, e) ||
            tq_run_logits_compare(la, ln, vocab, &cn, e) || step_nll(ln, vocab, ids, c.steps, nb, e))
            goto out;
        q->has_noise = 1;
        q->noise_seed = o->noise_seed;
        q->noise_ppl = en.perplexity;
        q->noise_nll = en.mean_nll;
        q->noise_top1 = en.top1_rate;
        q->noise_top1_rate = cn.top1_rate;
        q->noise_mean_kl = cn.mean_kl;
        q->noise_max_kl = cn.max_kl;
        q->noise_kl_stderr = cn.kl_stderr;
        q->noise_nll_diff_stderr = paired_stderr(na, nb, c.steps);
    }
    rc = 0;
out:
    tq_tok_free(tok);
    free(ids);
    free(text);
    free(na);
    free(nb);
    free(la);
    free(lb);
    free(ln);
    free(nd);
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
        rc = quality_eval(ref, test, dir, &oo, r, &r->ev, e);
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
            {ev, "kl_stderr", q->kl_stderr},        {ev, "nll_diff_stderr", q->nll_diff_stderr},
        };
        for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
            cJSON_AddNumberToObject(nums[i].o, nums[i].k, nums[i].v);
        if (q->has_noise) {
            cJSON *nz = cJSON_AddObjectToObject(ev, "noise");
            const struct {
                const char *k;
                double v;
            } nn[] = {
                {"seed", (double)q->noise_seed},        {"perplexity", q->noise_ppl},
                {"mean_nll", q->noise_nll},             {"top1_rate", q->noise_top1},
                {"top1_agreement", q->noise_top1_rate}, {"mean_kl", q->noise_mean_kl},
                {"max_kl", q->noise_max_kl},            {"kl_stderr", q->noise_kl_stderr},
                {"nll_diff_stderr", q->noise_nll_diff_stderr},
            };
            for (size_t i = 0; i < sizeof nn / sizeof *nn; i++)
                cJSON_AddNumberToObject(nz, nn[i].k, nn[i].v);
        }
    }
    return j;
}
