/* Progress lines on stderr, only when it is a terminal. */
#include "common/common.h"

#include <unistd.h>

void tq_progress_init(tq_progress *p, const char *label, uint64_t total, int quiet)
{
    p->label = label;
    p->total = total;
    p->done = 0;
    p->last = 0;
    p->enabled = !quiet && isatty(STDERR_FILENO);
}

void tq_progress_add(tq_progress *p, uint64_t n)
{
    p->done += n;
    if (!p->enabled)
        return;
    double now = tq_now();
    if (now - p->last < 0.2 && p->done < p->total)
        return;
    p->last = now;
    if (p->total)
        fprintf(stderr, "\r%s: %5.1f%%", p->label, 100.0 * (double)p->done / (double)p->total);
    else
        fprintf(stderr, "\r%s: %llu", p->label, (unsigned long long)p->done);
}

void tq_progress_end(tq_progress *p)
{
    if (p->enabled)
        fprintf(stderr, "\r\033[K");
}
