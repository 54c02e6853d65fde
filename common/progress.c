/* common/progress.c — progress reports: library code counts, the front-end's sink shows.
 * Nothing here prints; without a sink (tq_progress_set_sink) reports go nowhere. */
#include "common/common.h"

static tq_progress_sink sink_fn;
static void *sink_ctx;

void tq_progress_set_sink(tq_progress_sink fn, void *ctx)
{
    sink_fn = fn;
    sink_ctx = ctx;
}

void tq_progress_init(tq_progress *p, const char *label, uint64_t total, int quiet)
{
    p->label = label;
    p->total = total;
    p->done = 0;
    p->last = 0;
    p->enabled = !quiet && sink_fn != NULL;
    if (p->enabled)
        sink_fn(sink_ctx, label, 0, total, 0);
}

void tq_progress_add(tq_progress *p, uint64_t n)
{
    p->done += n;
    if (p->enabled)
        sink_fn(sink_ctx, p->label, p->done, p->total, 0);
}

void tq_progress_end(tq_progress *p)
{
    if (p->enabled)
        sink_fn(sink_ctx, p->label, p->done, p->total, 1);
    p->enabled = 0;
}
