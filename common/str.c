/* common/str.c — the one string builder (tq_sb) and printf into a new string (tq_asprintf). */
#include "common/common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int tq_sb_reserve(tq_sb *b, size_t n)
{
    if (b->oom)
        return -1;
    if (n > SIZE_MAX / 2 - b->len) {
        b->oom = 1;
        return -1;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return -1;
        }
        b->s = p;
        b->cap = cap;
    }
    return 0;
}

int tq_sb_put(tq_sb *b, const char *s, size_t n)
{
    if (tq_sb_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
    return 0;
}

int tq_sb_str(tq_sb *b, const char *s)
{
    return tq_sb_put(b, s, strlen(s));
}

int tq_sb_printf(tq_sb *b, const char *fmt, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return -1;
    }
    if ((size_t)n < sizeof small)
        return tq_sb_put(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = tq_sb_put(b, big, (size_t)n);
    free(big);
    return rc;
}

char *tq_sb_finish(tq_sb *b, tq_err *e)
{
    char *s = b->s;
    if (b->oom) {
        free(s);
        s = NULL;
        tq_fail(e, TQ_ENOMEM, "out of memory");
    } else if (!s) {
        s = tq_strdup("", e);
    }
    memset(b, 0, sizeof *b);
    return s;
}

void tq_sb_free(tq_sb *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

char *tq_vasprintf(tq_err *e, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n < 0 ? NULL : tq_malloc((size_t)n + 1, e);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, again);
    else if (n < 0)
        tq_fail(e, TQ_EUSAGE, "bad format string '%s'", fmt);
    va_end(again);
    return s;
}

char *tq_asprintf(tq_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = tq_vasprintf(e, fmt, ap);
    va_end(ap);
    return s;
}

int tq_sb_escaped(tq_sb *b, const char *s)
{
    for (const char *run = s;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c && c != '\\' && c >= 0x20 && c != 0x7f)
            continue;
        if (s > run)
            tq_sb_put(b, run, (size_t)(s - run));
        if (!c)
            break;
        if (c == '\\')
            tq_sb_put(b, "\\\\", 2);
        else
            tq_sb_printf(b, "\\x%02x", c);
        run = s + 1;
    }
    return b->oom ? -1 : 0;
}

void tq_fput_escaped(FILE *f, const char *s)
{
    tq_sb b = {0};
    if (tq_sb_escaped(&b, s) == 0 && b.s)
        fputs(b.s, f);
    else if (b.oom)
        fputs("(a name: out of memory escaping it)", f);
    tq_sb_free(&b);
}
