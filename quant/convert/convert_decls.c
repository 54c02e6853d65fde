/* The plan's output declarations and items, the building blocks convert_plan.c (quantize,
 * plain) and convert_dequant.c (dequantize) both grow. */
#include "quant/convert/convert_internal.h"

#include <stdlib.h>
#include <string.h>

cv_item *cv_new_item(cv_plan *p, int kind, tq_err *e)
{
    cv_item *ni = tq_grow(p->items, &p->cap_items, p->n_items, sizeof *ni, e);
    if (!ni)
        return NULL;
    p->items = ni;
    cv_item *it = &p->items[p->n_items++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->out_scales = it->out_codebook = it->out_signs = it->out_biases = -1;
    return it;
}

/* Declare an output tensor; returns its declaration index or -1. */
long cv_declare(cv_plan *p, const char *name, tq_dtype dt, int ndim, const uint64_t *shape, tq_err *e)
{
    /* duplicates (two inputs mapping to one output) are refused by the model writer */
    cv_decl *nd = tq_grow(p->decls, &p->cap_decls, p->n_decls, sizeof *nd, e);
    if (!nd)
        return -1;
    p->decls = nd;
    cv_decl *d = &p->decls[p->n_decls];
    memset(d, 0, sizeof *d);
    if (!(d->name = tq_strdup(name, e)))
        return -1;
    d->dtype = dt;
    d->ndim = ndim;
    for (int k = 0; k < ndim; k++)
        d->shape[k] = shape[k];
    return (long)p->n_decls++;
}

long cv_find_decl(const cv_plan *p, const char *name)
{
    for (size_t i = p->n_decls; i-- > 0;)
        if (!strcmp(p->decls[i].name, name))
            return (long)i;
    return -1;
}

uint64_t cv_decl_bytes(const cv_decl *d)
{
    uint64_t v = tq_dtype_size(d->dtype);
    for (int k = 0; k < d->ndim; k++)
        v *= d->shape[k]; /* checked when planned */
    return v;
}
