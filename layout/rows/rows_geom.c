/* Where each record lives in the records tensor, for the plain and the paged layout. */
#include "layout/rows/rows.h"

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Smallest divisor of n that is >= s (s <= n). */
static uint64_t divisor_at_least(uint64_t n, uint64_t s)
{
    uint64_t best = n;
    for (uint64_t i = 1; i * i <= n; i++) {
        if (n % i)
            continue;
        if (i >= s && i < best)
            best = i;
        if (n / i >= s && n / i < best)
            best = n / i;
    }
    return best;
}

int tq_rows_geom_layout(tq_rows_geom *g, tq_err *e)
{
    if (g->stride == 0)
        return tq_fail(e, TQ_EDATA, "records would be empty (every part has 0 bytes per row)");
    uint64_t S = g->stride, P = g->page;
    if (P == 0) {
        g->slot = g->group_bytes = S;
        g->per_group = 1;
    } else {
        if (P > TQ_ROWS_MAX_PAGE || P % 8)
            return tq_fail(e, TQ_EUSAGE, "page size %llu must be a multiple of 8 and at most %llu",
                           (unsigned long long)P, (unsigned long long)TQ_ROWS_MAX_PAGE);
        if (S <= P) {
            g->group_bytes = P;
            g->slot = g->pad_stride ? divisor_at_least(P, S) : S;
            g->per_group = P / g->slot;
        } else {
            uint64_t pages = S / P + (S % P != 0);
            if (tq_mul_u64(pages, P, &g->group_bytes) != 0)
                return tq_fail(e, TQ_EDATA, "record size overflows");
            g->slot = g->group_bytes;
            g->per_group = 1;
        }
    }
    g->groups = g->rows / g->per_group + (g->rows % g->per_group != 0);
    if (P == 0) {
        if (tq_mul_u64(g->rows, S, &g->data_bytes) != 0)
            return tq_fail(e, TQ_EDATA, "rows x record bytes overflows");
    } else if (tq_mul_u64(g->groups, g->group_bytes, &g->data_bytes) != 0) {
        return tq_fail(e, TQ_EDATA, "paged records size overflows");
    }
    if (g->data_bytes >= (1ull << 62))
        return tq_fail(e, TQ_EDATA, "records tensor of %llu bytes is too large", (unsigned long long)g->data_bytes);
    return 0;
}

uint64_t tq_rows_record_offset(const tq_rows_geom *g, uint64_t r)
{
    return (r / g->per_group) * g->group_bytes + (r % g->per_group) * g->slot;
}

static int straddles(uint64_t start, uint64_t len, uint64_t page)
{
    uint64_t min_pages = len / page + (len % page != 0);
    uint64_t touched = (start + len - 1) / page - start / page + 1;
    return touched > min_pages;
}

uint64_t tq_rows_count_straddles(const tq_rows_geom *g, uint64_t data_start, uint64_t page)
{
    if (!page || !g->rows)
        return 0;
    /* Record offsets modulo page repeat after n groups with n * group_bytes = 0 (mod page). */
    uint64_t gm = g->group_bytes % page;
    uint64_t n = gm ? page / gcd_u64(gm, page) : 1;
    uint64_t period = n * g->per_group;
    if (period > g->rows)
        period = g->rows;
    uint64_t in_period = 0, in_tail = 0, tail = g->rows % period;
    for (uint64_t r = 0; r < period; r++) {
        int s = straddles(data_start + tq_rows_record_offset(g, r), g->stride, page);
        in_period += (uint64_t)s;
        if (r < tail)
            in_tail += (uint64_t)s;
    }
    return (g->rows / period) * in_period + in_tail;
}
