/* Running a plan: jobs of bounded size (a few MiB of input each), taken by worker threads
 * in any order. Each job reads its rows with pread, computes, and writes a disjoint byte
 * range of the output; its error sums go to its own slot and are added up in job order. */
#include "common/platform.h"
#include "quant/convert/convert_internal.h"
#include "quant/quant_internal.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JOB_BYTES (4u << 20) /* input bytes per job (f32-equivalent for quantization) */

typedef struct cv_job {
    cv_item *it;
    uint64_t part, first, count; /* rows (QUANT/DEQUANT) or elements (COPY) of a part */
    double err2, sum2;
} cv_job;

void *cv_grow(cv_buf *b, size_t n, tq_err *e)
{
    if (n <= b->cap)
        return b->p;
    void *np = realloc(b->p, n);
    if (!np)
        return tq_fail(e, TQ_ENOMEM, "out of memory (%zu bytes)", n), NULL;
    b->p = np;
    b->cap = n;
    return np;
}

typedef struct cv_shared {
    cv_job *jobs;
    size_t n_jobs;
    tq_model_writer *w;
    int threads;
    int allow_nonfinite;
    struct cv_worker *wk; /* [threads] */
    cv_item *items;       /* the plan's */
    cv_track *track;      /* --resume: shards finished as their items are done */
    size_t *job0;         /* [n_items]: the first job of each item (with track) */
} cv_shared;

/* Values read or made must be finite unless --allow-nonfinite: a NaN copied or dequantized
 * into a model is a model that decodes garbage. first: the element index of p[0] in the tensor. */
static int check_finite(const cv_shared *sh, const char *tensor, tq_dtype d, const void *p, size_t n, uint64_t first,
                        const char *how, tq_err *e)
{
    size_t at;
    const char *what;
    if (sh->allow_nonfinite || !tq_find_nonfinite(d, p, n, &at, &what))
        return 0;
    return tq_fail(e, TQ_EDATA, "tensor '%s' element %llu: %s%s value (--allow-nonfinite %s it anyway)", tensor,
                   (unsigned long long)(first + at), how, strcmp(what, "NaN") ? "an infinite" : "a NaN",
                   *how ? "writes" : "copies");
}

typedef struct cv_worker {
    cv_shared *sh;
    cv_buf in, f32, scratch, words, scales, out;
} cv_worker;

/* Rows [r0, r0+n) of part pt (it->cols values each) as f32: a strided source (gpt-oss's
 * interleaved gate/up rows) read as one span when it is small and row by row otherwise, an
 * MXFP4 source decoded exactly from its blocks and scales. */
int cv_read_rows_f32(cv_buf *inb, cv_buf *scratch, const cv_item *it, const cv_part *pt, uint64_t r0, uint64_t n,
                     float *out, tq_err *e)
{
    uint64_t C = it->cols, stride = pt->stride ? pt->stride : C;
    if (it->mxfp4) {
        uint64_t nb = C / 32;
        uint8_t *q = cv_grow(scratch, (size_t)(nb * 17), e);
        if (!q)
            return -1;
        for (uint64_t r = 0; r < n; r++) {
            uint64_t el = pt->src_off + (r0 + r) * stride, bad;
            if (tq_model_read(pt->src, el / 2, q, (size_t)(nb * 16), e) ||
                tq_model_read(pt->scales, el / 32, q + nb * 16, (size_t)nb, e))
                return -1;
            /* a value past f32 is ggml's inf, refused below as any non-finite value is */
            if (tq_mxfp4_decode(q, q + nb * 16, nb, 0, out + r * C, &bad))
                for (uint64_t k = bad; k < nb; k++)
                    if (q[nb * 16 + k] == 255)
                        return tq_fail(e, TQ_EDATA, "tensor '%s': MXFP4 block %llu: scale byte 255 is E8M0 NaN",
                                       pt->scales->info.name, (unsigned long long)(el / 32 + k));
        }
        return 0;
    }
    size_t isz = tq_dtype_size(it->src_dtype);
    if (pt->cstride > 1) {
        /* transposed (transformers' gpt-oss experts): column c of the n rows is the run of
         * (n-1)*stride+1 source elements at src_off + r0*stride + c*cstride, read whole */
        uint64_t run = (n - 1) * stride + 1;
        char *in = cv_grow(inb, (size_t)(run * isz), e);
        float *col = in ? cv_grow(scratch, (size_t)(run * sizeof(float)), e) : NULL;
        for (uint64_t c = 0; col && c < C; c++) {
            if (tq_model_read(pt->src, (pt->src_off + r0 * stride + c * pt->cstride) * isz, in, (size_t)(run * isz), e) ||
                tq_to_f32(it->src_dtype, in, col, (size_t)run, e))
                return -1;
            for (uint64_t r = 0; r < n; r++)
                out[r * C + c] = col[r * stride];
        }
        return col ? 0 : -1;
    }
    uint64_t first = pt->src_off + r0 * stride, span = (n - 1) * stride + C;
    if (stride == C || span <= (1u << 20)) {
        char *in = cv_grow(inb, (size_t)(span * isz), e);
        if (!in || tq_model_read(pt->src, first * isz, in, (size_t)(span * isz), e))
            return -1;
        for (uint64_t r = 0; r < n; r++)
            if (tq_to_f32(it->src_dtype, in + r * stride * isz, out + r * C, (size_t)C, e))
                return -1;
        return 0;
    }
    char *in = cv_grow(inb, (size_t)(C * isz), e);
    for (uint64_t r = 0; in && r < n; r++)
        if (tq_model_read(pt->src, (first + r * stride) * isz, in, (size_t)(C * isz), e) ||
            tq_to_f32(it->src_dtype, in, out + r * C, (size_t)C, e))
            return -1;
    return in ? 0 : -1;
}

static int job_copy(cv_worker *wk, cv_job *j, tq_err *e)
{
    cv_item *it = j->it;
    const cv_part *pt = &it->parts[j->part];
    size_t isz = tq_dtype_size(it->src_dtype), osz = tq_dtype_size(it->out_dtype);
    size_t n = (size_t)j->count;
    if (it->rowwise) { /* j->first / count are rows of it->cols */
        size_t nv = n * (size_t)it->cols;
        float *f = cv_grow(&wk->f32, nv * sizeof(float), e);
        void *o = f ? cv_grow(&wk->out, nv * osz, e) : NULL;
        if (!o || cv_read_rows_f32(&wk->in, &wk->scratch, it, pt, j->first, n, f, e))
            return -1;
        for (size_t r = 0; r < n; r++) { /* element numbers as decoded (MXFP4) or stored */
            uint64_t row0 = pt->src_off + (j->first + r) * (pt->stride ? pt->stride : it->cols);
            size_t at = 0, len = (size_t)it->cols;
            const char *what;
            if (pt->cstride > 1 && !wk->sh->allow_nonfinite && /* transposed: name the stored element */
                tq_find_nonfinite(TQ_DT_F32, f + r * it->cols, len, &at, &what))
                row0 += at * pt->cstride, len = 1;
            else
                at = 0;
            if (check_finite(wk->sh, pt->src->info.name, TQ_DT_F32, f + r * it->cols + at, len, row0, "", e))
                return -1;
        }
        for (size_t i = 0; it->add != 0.0f && i < nv; i++)
            f[i] += it->add;
        if (tq_from_f32(it->out_dtype, f, o, nv, e))
            return -1;
        return tq_model_writer_write(wk->sh->w, (size_t)pt->out, (pt->out_off + j->first * it->cols) * osz, o, nv * osz, e);
    }
    void *in = cv_grow(&wk->in, n * isz, e);
    if (!in || tq_model_read(pt->src, (pt->src_off + j->first) * isz, in, n * isz, e) ||
        check_finite(wk->sh, pt->src->info.name, it->src_dtype, in, n, pt->src_off + j->first, "", e))
        return -1;
    const void *outp = in;
    if (it->out_dtype != it->src_dtype || it->add != 0.0f) {
        /* exact in f32, then one rounding: a correctly rounded sum for bf16/f16 values */
        float *f = cv_grow(&wk->f32, n * sizeof(float), e);
        void *o = f ? cv_grow(&wk->out, n * osz, e) : NULL;
        if (!o || tq_to_f32(it->src_dtype, in, f, n, e))
            return -1;
        for (size_t i = 0; it->add != 0.0f && i < n; i++)
            f[i] += it->add;
        if (tq_from_f32(it->out_dtype, f, o, n, e))
            return -1;
        outp = o;
    }
    return tq_model_writer_write(wk->sh->w, (size_t)pt->out, (pt->out_off + j->first) * osz, outp, n * osz, e);
}

static int job_quant(cv_worker *wk, cv_job *j, tq_err *e)
{
    cv_item *it = j->it;
    const cv_part *pt = &it->parts[j->part];
    size_t isz = tq_dtype_size(it->src_dtype), in = (size_t)it->cols, rows = (size_t)j->count;
    size_t words = tq_pack_words(in, it->bits), ng = in / it->group;
    int direct = !it->mxfp4 && !pt->stride; /* rows straight from the file, converted as they are signed */
    void *src = cv_grow(&wk->in, rows * in * (direct ? isz : sizeof(float)), e);
    uint32_t *pk = src ? cv_grow(&wk->words, rows * words * 4, e) : NULL;
    uint16_t *sc = pk ? cv_grow(&wk->scales, rows * ng * 2, e) : NULL;
    if (!sc)
        return -1;
    if (direct && tq_model_read(pt->src, (pt->src_off + j->first * in) * isz, src, rows * in * isz, e))
        return -1;
    if (!direct) {
        /* cv_read_rows_f32 uses wk->in and wk->scratch itself: decode into a buffer of its own */
        float *rowsf = cv_grow(&wk->out, rows * in * sizeof(float), e);
        if (!rowsf || cv_read_rows_f32(&wk->in, &wk->scratch, it, pt, j->first, rows, rowsf, e))
            return -1;
        src = rowsf;
        isz = sizeof(float);
    }
    void *scr = cv_grow(&wk->scratch, tq_quantize_row_scratch(in), e);
    if (!scr)
        return -1;
    tq_dtype sdt = direct ? it->src_dtype : TQ_DT_F32;
    const tq_qspec q = {it->cb, it->scale_method, it->group, it->block, it->signs};
    double e2 = 0, s2 = 0;
    for (size_t r = 0; r < rows; r++) {
        double a, b;
        /* tq_quantize_row's recipe on the row as stored: the dtype conversion fused into the
         * sign multiplication, no Hadamard under --rotation none */
        if (tq_q_quantize_row(&q, sdt, !it->norot, (const char *)src + r * in * isz, in, scr, pk + r * words,
                              sc + r * ng, &a, &b, e))
            return tq_err_prefix(e, "tensor '%s' row %llu", it->source, (unsigned long long)(j->first + r));
        e2 += a;
        s2 += b;
    }
    j->err2 = e2;
    j->sum2 = s2;
    uint64_t row0 = (uint64_t)j->part * it->rows + j->first;
    if (tq_model_writer_write(wk->sh->w, (size_t)pt->out, row0 * words * 4, pk, rows * words * 4, e))
        return -1;
    return tq_model_writer_write(wk->sh->w, (size_t)it->out_scales, row0 * ng * 2, sc, rows * ng * 2, e);
}

static int job_dequant(cv_worker *wk, cv_job *j, tq_err *e)
{
    cv_item *it = j->it;
    const cv_part *pt = &it->parts[j->part];
    size_t in = (size_t)it->cols, rows = (size_t)j->count, osz = tq_dtype_size(it->out_dtype);
    size_t words = tq_pack_words(in, it->bits), ng = in / it->group;
    uint32_t *pk = cv_grow(&wk->words, rows * words * 4, e);
    uint16_t *sc = pk ? cv_grow(&wk->scales, rows * ng * 2, e) : NULL;
    float *f = sc ? cv_grow(&wk->f32, in * sizeof(float), e) : NULL;
    char *out = f ? cv_grow(&wk->out, rows * in * osz, e) : NULL;
    if (!out || tq_model_read(pt->src, (pt->src_off + j->first * words) * 4, pk, rows * words * 4, e) ||
        tq_model_read(pt->scales, (pt->scales_off + j->first * ng) * 2, sc, rows * ng * 2, e))
        return -1;
    for (size_t r = 0; r < rows; r++) {
        tq_dequantize_row(pk + r * words, sc + r * ng, it->codebook, it->bits, it->group, in, f);
        if (check_finite(wk->sh, pt->src->info.name, TQ_DT_F32, f, in, (j->first + r) * in, "dequantized to ", e))
            return -1;
        if (!it->norot && tq_hadamard_unrotate(f, in, it->signs, it->block))
            return tq_fail(e, TQ_EDATA, "tensor '%s': bad Hadamard block", it->source);
        if (tq_from_f32(it->out_dtype, f, out + r * in * osz, in, e))
            return -1;
    }
    return tq_model_writer_write(wk->sh->w, (size_t)pt->out, (pt->out_off + j->first * in) * osz, out, rows * in * osz, e);
}

/* MLX affine (docs/quantization.md, MLX affine): each row rounded to the weight's dtype (as
 * MLX sees it after --dtype), quantized by MLX's rule, scales and biases stored in that dtype;
 * the error sums use the stored scales and biases. */
static int job_affine(cv_worker *wk, cv_job *j, tq_err *e)
{
    cv_item *it = j->it;
    const cv_part *pt = &it->parts[j->part];
    size_t isz = tq_dtype_size(it->src_dtype), qsz = tq_dtype_size(it->qdtype);
    size_t in = (size_t)it->cols, rows = (size_t)j->count, group = it->group;
    size_t words = in / (32 / (size_t)it->bits), ng = in / group;
    int direct = !it->mxfp4 && !pt->stride;
    tq_dtype sdt = direct ? it->src_dtype : TQ_DT_F32;
    if (!direct)
        isz = sizeof(float);
    void *src = cv_grow(&wk->in, rows * in * isz, e);
    float *f = src ? cv_grow(&wk->f32, (2 * in + 4 * ng) * sizeof(float), e) : NULL;
    void *tmp = f ? cv_grow(&wk->out, in * qsz, e) : NULL;
    uint32_t *pk = tmp ? cv_grow(&wk->words, rows * words * 4, e) : NULL;
    unsigned char *sb = pk ? cv_grow(&wk->scales, 2 * rows * ng * qsz, e) : NULL;
    if (!sb)
        return -1;
    if (direct && tq_model_read(pt->src, (pt->src_off + j->first * in) * isz, src, rows * in * isz, e))
        return -1;
    if (!direct) { /* strided or MXFP4 rows, decoded to f32 (cv_read_rows_f32 uses wk->in too) */
        float *rowsf = malloc(rows * in * sizeof(float));
        if (!rowsf)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        if (cv_read_rows_f32(&wk->in, &wk->scratch, it, pt, j->first, rows, rowsf, e)) {
            free(rowsf);
            return -1;
        }
        src = cv_grow(&wk->in, rows * in * isz, e);
        if (src)
            memcpy(src, rowsf, rows * in * sizeof(float));
        free(rowsf);
        if (!src)
            return -1;
    }
    float *back = f + in, *fs = back + in, *fb = fs + ng, *rs = fb + ng, *rb = rs + ng;
    unsigned char *sc = sb, *bi = sb + rows * ng * qsz;
    double e2 = 0, s2 = 0;
    for (size_t r = 0; r < rows; r++) {
        uint64_t row = j->first + r, bad;
        if (tq_to_f32(sdt, (const char *)src + r * in * isz, f, in, e))
            return -1;
        if (sdt != it->qdtype &&
            (tq_from_f32(it->qdtype, f, tmp, in, e) || tq_to_f32(it->qdtype, tmp, f, in, e)))
            return -1;
        if (tq_affine_quantize_row_rule(f, in, it->bits, (int)group, it->affine_rule, pk + r * words, fs, fb, &bad))
            return tq_fail(e, TQ_EDATA, "tensor '%s' row %llu column %llu: %s weight%s (MLX affine quantization needs finite weights)",
                           it->source, (unsigned long long)row, (unsigned long long)bad, f[bad] != f[bad] ? "NaN" : "infinite",
                           it->src_dtype != it->qdtype ? " after conversion to the output dtype" : "");
        if (tq_from_f32(it->qdtype, fs, sc + r * ng * qsz, ng, e) || tq_from_f32(it->qdtype, fb, bi + r * ng * qsz, ng, e) ||
            tq_to_f32(it->qdtype, sc + r * ng * qsz, rs, ng, e) || tq_to_f32(it->qdtype, bi + r * ng * qsz, rb, ng, e))
            return -1;
        for (size_t g = 0; g < ng; g++)
            if (!isfinite(rs[g]) || !isfinite(rb[g]))
                return tq_fail(e, TQ_EDATA, "tensor '%s' row %llu group %zu: the scale %g does not fit in %s (use --dtype f32 or bf16)",
                               it->source, (unsigned long long)row, g, (double)fs[g], tq_dtype_name(it->qdtype));
        tq_affine_dequantize_row(pk + r * words, rs, rb, in, it->bits, (int)group, back);
        for (size_t c = 0; c < in; c++) {
            double d = (double)f[c] - (double)back[c];
            e2 += d * d;
            s2 += (double)f[c] * (double)f[c];
        }
    }
    j->err2 = e2;
    j->sum2 = s2;
    uint64_t row0 = (uint64_t)j->part * it->rows + j->first;
    return tq_model_writer_write(wk->sh->w, (size_t)pt->out, row0 * words * 4, pk, rows * words * 4, e) ||
                   tq_model_writer_write(wk->sh->w, (size_t)it->out_scales, row0 * ng * qsz, sc, rows * ng * qsz, e) ||
                   tq_model_writer_write(wk->sh->w, (size_t)it->out_biases, row0 * ng * qsz, bi, rows * ng * qsz, e)
               ? -1
               : 0;
}

/* w = scale·q + bias in f32 (man tq-formats(5), MLX AFFINE WEIGHTS), rounded to the output dtype. */
static int job_affine_dequant(cv_worker *wk, cv_job *j, tq_err *e)
{
    cv_item *it = j->it;
    const cv_part *pt = &it->parts[j->part];
    size_t in = (size_t)it->cols, rows = (size_t)j->count, osz = tq_dtype_size(it->out_dtype), qsz = tq_dtype_size(it->qdtype);
    size_t words = in / (32 / (size_t)it->bits), ng = in / it->group;
    uint32_t *pk = cv_grow(&wk->words, rows * words * 4, e);
    unsigned char *sb = pk ? cv_grow(&wk->scales, 2 * rows * ng * qsz, e) : NULL;
    float *f = sb ? cv_grow(&wk->f32, (in + 2 * ng) * sizeof(float), e) : NULL;
    char *out = f ? cv_grow(&wk->out, rows * in * osz, e) : NULL;
    uint64_t s0 = (pt->scales_off + j->first * ng) * qsz;
    if (!out || tq_model_read(pt->src, (pt->src_off + j->first * words) * 4, pk, rows * words * 4, e) ||
        tq_model_read(pt->scales, s0, sb, rows * ng * qsz, e) || tq_model_read(pt->biases, s0, sb + rows * ng * qsz, rows * ng * qsz, e))
        return -1;
    float *fs = f + in, *fb = fs + ng;
    for (size_t r = 0; r < rows; r++) {
        if (tq_to_f32(it->qdtype, sb + r * ng * qsz, fs, ng, e) || tq_to_f32(it->qdtype, sb + (rows + r) * ng * qsz, fb, ng, e))
            return -1;
        tq_affine_dequantize_row(pk + r * words, fs, fb, in, it->bits, (int)it->group, f);
        if (check_finite(wk->sh, pt->src->info.name, TQ_DT_F32, f, in, (j->first + r) * in, "dequantized to ", e))
            return -1;
        if (tq_from_f32(it->out_dtype, f, out + r * in * osz, in, e))
            return -1;
    }
    return tq_model_writer_write(wk->sh->w, (size_t)pt->out, (pt->out_off + j->first * in) * osz, out, rows * in * osz, e);
}

static uint64_t job_in_bytes(const cv_job *j)
{
    const cv_item *it = j->it;
    if (it->mxfp4) /* 16 bytes of nibbles + 1 scale per 32 values */
        return j->count * it->cols / 32 * 17;
    if (it->kind == CV_COPY)
        return j->count * (it->rowwise ? it->cols : 1) * tq_dtype_size(it->src_dtype);
    if (it->kind == CV_QUANT || it->kind == CV_AFFINE)
        return j->count * it->cols * tq_dtype_size(it->src_dtype);
    if (it->kind == CV_AFFINE_DEQUANT)
        return j->count * (it->cols / (32 / (uint64_t)it->bits) * 4 + it->cols / it->group * 2 * tq_dtype_size(it->qdtype));
    return j->count * (tq_pack_words(it->cols, it->bits) * 4 + it->cols / it->group * 2);
}

/* Input byte range of a job within its safetensors shard (0 length for other sources). */
static void job_src_range(const cv_job *j, int *fd, uint64_t *off, uint64_t *len)
{
    const cv_item *it = j->it;
    const cv_part *pt = &it->parts[j->part];
    *len = 0;
    if (!pt->src || !pt->src->file || it->mxfp4 || pt->stride)
        return;
    uint64_t esz = tq_dtype_size(pt->src->info.dtype), per = it->kind == CV_COPY && !it->rowwise ? 1 : it->cols;
    if (it->kind == CV_DEQUANT) /* packed words; its scales are a tenth of that */
        per = tq_pack_words(it->cols, it->bits);
    if (it->kind == CV_AFFINE_DEQUANT)
        per = it->cols / (32 / (uint64_t)it->bits);
    *fd = pt->src->file->fd;
    *off = pt->src->info.offset + (pt->src_off + j->first * per) * esz;
    *len = j->count * per * esz;
}

/* Ask the kernel for the input of the job this thread will likely take next, so reading
 * overlaps with computing. */
static void prefetch(const cv_shared *sh, size_t k)
{
    if (k >= sh->n_jobs)
        return;
    int fd;
    uint64_t off, len;
    job_src_range(&sh->jobs[k], &fd, &off, &len);
    if (len)
        tq_plat_advise(fd, off, len, TQ_ADV_WILLNEED);
}

static int run_job(tq_work *w, void *ctx, int worker, uint64_t k, tq_err *e)
{
    cv_shared *sh = ctx;
    cv_worker *wk = &sh->wk[worker];
    cv_job *j = &sh->jobs[k];
    prefetch(sh, (size_t)k + (size_t)sh->threads);
    int rc;
    switch (j->it->kind) {
    case CV_COPY: rc = job_copy(wk, j, e); break;
    case CV_QUANT: rc = job_quant(wk, j, e); break;
    case CV_DEQUANT: rc = job_dequant(wk, j, e); break;
    case CV_AFFINE: rc = job_affine(wk, j, e); break;
    default: rc = job_affine_dequant(wk, j, e); break;
    }
    if (rc == 0)
        tq_work_progress(w, job_in_bytes(j));
    size_t item = (size_t)(j->it - sh->items);
    if (rc == 0 && sh->track && cv_track_job_done(sh->track, item)) {
        /* the item's sums in job order, as the reduction after the run adds them */
        double e2 = 0, s2 = 0;
        for (size_t q = sh->job0[item]; q < sh->n_jobs && sh->jobs[q].it == j->it; q++) {
            e2 += sh->jobs[q].err2;
            s2 += sh->jobs[q].sum2;
        }
        j->it->err2 = e2;
        j->it->sum2 = s2;
        rc = cv_track_item_done(sh->track, item, e);
    }
    return rc;
}

static int make_jobs(cv_plan *p, cv_track *track, size_t *job0, cv_job **out, size_t *n_out, uint64_t *total_in,
                     tq_err *e)
{
    size_t n = 0, cap = 1024;
    cv_job *jobs = tq_malloc(cap * sizeof *jobs, e);
    if (!jobs)
        return -1;
    *total_in = 0;
    for (size_t i = 0; i < p->n_items; i++) {
        cv_item *it = &p->items[i];
        uint64_t unit, span;
        if (cv_track_skip(track, i)) /* its shards were kept from an earlier run */
            continue;
        if (job0)
            job0[i] = n;
        if (it->kind == CV_COPY && it->rowwise) {
            uint64_t rowb = it->cols * 4;
            unit = rowb >= JOB_BYTES ? 1 : JOB_BYTES / rowb;
            span = it->rows;
        } else if (it->kind == CV_COPY) {
            unit = JOB_BYTES / (tq_dtype_size(it->src_dtype) > tq_dtype_size(it->out_dtype) ? tq_dtype_size(it->src_dtype)
                                                                                            : tq_dtype_size(it->out_dtype));
            span = it->cols;
        } else {
            uint64_t rowb = it->cols * 4;
            unit = rowb >= JOB_BYTES ? 1 : JOB_BYTES / rowb;
            span = it->rows;
        }
        for (uint64_t part = 0; part < it->E; part++)
            for (uint64_t first = 0; first < span; first += unit) {
                if (n == cap) {
                    cv_job *nj = realloc(jobs, 2 * cap * sizeof *nj);
                    if (!nj) {
                        free(jobs);
                        return tq_fail(e, TQ_ENOMEM, "out of memory");
                    }
                    jobs = nj;
                    cap *= 2;
                }
                cv_job *j = &jobs[n++];
                memset(j, 0, sizeof *j);
                j->it = it;
                j->part = part;
                j->first = first;
                j->count = span - first < unit ? span - first : unit;
                *total_in += job_in_bytes(j);
            }
        cv_track_jobs(track, i, job0 ? n - job0[i] : 0);
    }
    *out = jobs;
    *n_out = n;
    return 0;
}

int cv_run(cv_plan *p, tq_model_writer *w, cv_track *track, tq_err *e)
{
    cv_shared sh;
    memset(&sh, 0, sizeof sh);
    uint64_t total;
    sh.track = track;
    sh.items = p->items;
    if (track && !(sh.job0 = tq_calloc(p->n_items ? p->n_items : 1, sizeof *sh.job0, e)))
        return -1;
    if (make_jobs(p, track, sh.job0, &sh.jobs, &sh.n_jobs, &total, e) || cv_track_start(track, e)) {
        free(sh.job0);
        free(sh.jobs);
        return -1;
    }
    sh.w = w;
    tq_progress prog;
    tq_progress_init(&prog, p->o->mode == TQ_CONVERT_QUANTIZE ? "quantize" : "convert", total, p->o->quiet);
    int nt = p->o->threads > 0 ? p->o->threads : 1;
    sh.threads = nt;
    sh.allow_nonfinite = p->o->allow_nonfinite;
    for (int i = 0; i < nt; i++) /* the first job of every thread */
        prefetch(&sh, (size_t)i);
    cv_worker *wk = sh.wk = tq_calloc((size_t)nt, sizeof *wk, e);
    int rc = -1;
    if (wk) {
        for (int i = 0; i < nt; i++)
            wk[i].sh = &sh;
        rc = tq_work_run(sh.n_jobs, nt, run_job, &sh, &prog, e);
        if (rc == 0 && !track) /* reduce in job order: independent of which thread ran what */
            for (size_t k = 0; k < sh.n_jobs; k++) {
                sh.jobs[k].it->err2 += sh.jobs[k].err2;
                sh.jobs[k].it->sum2 += sh.jobs[k].sum2;
            }
        tq_progress_end(&prog);
    }
    for (int i = 0; wk && i < nt; i++) {
        free(wk[i].in.p), free(wk[i].f32.p), free(wk[i].scratch.p);
        free(wk[i].words.p), free(wk[i].scales.p), free(wk[i].out.p);
    }
    free(wk);
    free(sh.jobs);
    free(sh.job0);
    return rc;
}
