/* Recognizing a weight matrix from its tensors: plain float, TurboQuant
 * (weight U32 + scales + codebook + signs) or MLX affine (weight U32 + scales + biases). */
#include "quant/quant.h"
#include "runtime/rt_internal.h"

#include <string.h>

static int is_float(tq_dtype d)
{
    return d == TQ_DT_F32 || d == TQ_DT_F16 || d == TQ_DT_BF16;
}

static int shape2(const rt_tensor *t, uint64_t a, uint64_t b)
{
    return t->ndim == 2 && t->shape[0] == a && t->shape[1] == b;
}

static int shape1(const rt_tensor *t, uint64_t a)
{
    return (t->ndim == 1 && t->shape[0] == a) || (t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == a);
}

int rt_linear_from_parts(const char *what, const rt_parts *p, uint64_t rows, uint64_t cols,
                         uint64_t abits, uint64_t agroup, rt_linear *l, tq_err *e)
{
    memset(l, 0, sizeof *l);
    l->rows = rows;
    l->cols = cols;
    const rt_tensor *w = p->w;
    if (!w)
        return tq_fail(e, TQ_EDATA, "tensor '%s.weight' is missing", what);
    if (is_float(w->dt)) {
        if (!shape2(w, rows, cols))
            return tq_fail(e, TQ_EDATA, "tensor '%s.weight': shape is not [%llu, %llu]", what,
                           (unsigned long long)rows, (unsigned long long)cols);
        l->kind = RT_DENSE;
        l->wdt = w->dt;
        l->w = w->data;
    } else if (w->dt == TQ_DT_U32 && p->codebook) {
        const rt_tensor *cb = p->codebook, *sg = p->signs, *sc = p->scales;
        uint64_t n = cb->ndim == 1 ? cb->shape[0] : 0, bits = 0;
        while (bits < 8 && (1ull << bits) < n)
            bits++;
        if (n < 2 || (1ull << bits) != n || !is_float(cb->dt))
            return tq_fail(e, TQ_EDATA, "tensor '%s.codebook': length %llu is not 2^bits (bits 1..8)",
                           what, (unsigned long long)n);
        float cbv[256];
        for (uint64_t i = 0; i < n; i++)
            cbv[i] = rt_load_f(cb->dt, cb->data, i);
        size_t bad;
        const char *why;
        if (tq_codebook_check(cbv, (size_t)n, &bad, &why))
            return tq_fail(e, TQ_EDATA, "tensor '%s.codebook': value %zu (%g) is %s", what, bad, (double)cbv[bad], why);
        if (!sg || !is_float(sg->dt) || !shape1(sg, cols))
            return tq_fail(e, TQ_EDATA, "tensor '%s.signs': missing or not [%llu] floats", what,
                           (unsigned long long)cols);
        if (!sc || !is_float(sc->dt) || sc->ndim != 2 || sc->shape[0] != rows || sc->shape[1] == 0 ||
            cols % sc->shape[1])
            return tq_fail(e, TQ_EDATA, "tensor '%s.scales': missing or not [%llu, a divisor of %llu]",
                           what, (unsigned long long)rows, (unsigned long long)cols);
        l->kind = RT_TQ;
        l->bits = bits;
        l->ngroups = sc->shape[1];
        l->group = cols / l->ngroups;
        uint64_t epw = 32 / bits;
        l->wpr = (cols + epw - 1) / epw;
        if (!shape2(w, rows, l->wpr))
            return tq_fail(e, TQ_EDATA, "tensor '%s.weight': shape is not [%llu, %llu] for %llu-bit indices "
                           "('%s.codebook' has %llu values)", what, (unsigned long long)rows,
                           (unsigned long long)l->wpr, (unsigned long long)bits, what, (unsigned long long)n);
        l->w = w->data;
        l->scales = sc->data;
        l->sdt = sc->dt;
        l->codebook = cb->data;
        l->cdt = cb->dt;
        l->signs = sg->data;
        l->gdt = sg->dt;
    } else if (w->dt == TQ_DT_U32 && p->scales && p->biases) {
        const rt_tensor *sc = p->scales, *bi = p->biases;
        if (abits == 0 || 32 % abits || abits > 8)
            return tq_fail(e, TQ_EUNSUP, "tensor '%s.weight': %llu-bit affine packing is not supported (2, 4, 8)",
                           what, (unsigned long long)abits);
        uint64_t epw = 32 / abits;
        if (cols % epw || agroup == 0 || cols % agroup)
            return tq_fail(e, TQ_EDATA, "tensor '%s.weight': %llu inputs do not fit %llu-bit groups of %llu",
                           what, (unsigned long long)cols, (unsigned long long)abits,
                           (unsigned long long)agroup);
        l->kind = RT_AFFINE;
        l->bits = abits;
        l->group = agroup;
        l->ngroups = cols / agroup;
        l->wpr = cols / epw;
        if (!shape2(w, rows, l->wpr))
            return tq_fail(e, TQ_EDATA, "tensor '%s.weight': shape is not [%llu, %llu] (%llu-bit affine)",
                           what, (unsigned long long)rows, (unsigned long long)l->wpr,
                           (unsigned long long)abits);
        if (!is_float(sc->dt) || !shape2(sc, rows, l->ngroups) || !is_float(bi->dt) ||
            !shape2(bi, rows, l->ngroups))
            return tq_fail(e, TQ_EDATA, "tensors '%s.scales'/'%s.biases': not [%llu, %llu] floats", what,
                           what, (unsigned long long)rows, (unsigned long long)l->ngroups);
        l->w = w->data;
        l->scales = sc->data;
        l->sdt = sc->dt;
        l->biases = bi->data;
        l->zdt = bi->dt;
    } else {
        return tq_fail(e, TQ_EUNSUP, "tensor '%s.weight': dtype %s without a codebook or scales+biases",
                       what, tq_dtype_name(w->dt));
    }
    if (p->bias) {
        if (!is_float(p->bias->dt) || !shape1(p->bias, rows))
            return tq_fail(e, TQ_EDATA, "tensor '%s.bias': not [%llu] floats", what,
                           (unsigned long long)rows);
        l->bias = p->bias->data;
        l->biasdt = p->bias->dt;
    }
    return 0;
}

void rt_emat_bind(const rt_emat *m, uint64_t ex, const uint8_t *block, rt_linear *out)
{
    if (m->per_expert) {
        *out = m->per_expert[ex];
        return;
    }
    *out = m->t;
    const void **dst[4] = {&out->w, &out->scales, &out->biases, &out->bias};
    for (int i = 0; i < 4; i++) {
        if (!*dst[i])
            continue;
        if (m->base[i])
            *dst[i] = m->base[i] + ex * m->stride[i];
        else
            *dst[i] = block + m->off[i];
    }
    if (m->base[4])
        out->codebook = m->base[4] + ex * m->stride[4];
    if (m->base[5])
        out->signs = m->base[5] + ex * m->stride[5];
}
