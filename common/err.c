/* The error convention (tq_err), overflow-checked arithmetic and allocation that reports failure. */
#include "common/common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int tq_fail(tq_err *e, int code, const char *fmt, ...)
{
    if (!e)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return -1;
}

int tq_err_prefix(tq_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old);
    return -1;
}

int tq_err_suffix(tq_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    size_t n = strnlen(e->msg, sizeof e->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg + n, sizeof e->msg - n, fmt, ap);
    va_end(ap);
    return -1;
}

int tq_exit_code(const tq_err *e)
{
    return e && e->code == TQ_EUSAGE ? 2 : 1;
}

int tq_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

int tq_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a)
        return -1;
    *out = a + b;
    return 0;
}

void *tq_malloc(size_t n, tq_err *e)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        tq_fail(e, TQ_ENOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *tq_calloc(size_t n, size_t size, tq_err *e)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        tq_fail(e, TQ_ENOMEM, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *tq_grow(void *arr, size_t *cap, size_t n, size_t elem, tq_err *e)
{
    if (n < *cap)
        return arr;
    size_t nc = *cap ? 2 * *cap : 64;
    if (nc <= n || nc > SIZE_MAX / (elem ? elem : 1))
        return tq_fail(e, TQ_ENOMEM, "out of memory: %zu elements of %zu bytes", n, elem), NULL;
    void *p = realloc(arr, nc * elem);
    if (!p)
        return tq_fail(e, TQ_ENOMEM, "out of memory allocating %zu x %zu bytes", nc, elem), NULL;
    *cap = nc;
    return p;
}

char *tq_strdup(const char *s, tq_err *e)
{
    size_t n = strlen(s) + 1;
    char *p = tq_malloc(n, e);
    if (p)
        memcpy(p, s, n);
    return p;
}

char *tq_path_join(const char *dir, const char *name, tq_err *e)
{
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] != '/';
    char *p = tq_malloc(a + slash + b + 1, e);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    if (slash)
        p[a] = '/';
    memcpy(p + a + slash, name, b + 1);
    return p;
}

void tq_free_strv(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}
