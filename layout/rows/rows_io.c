/* The chunk engine shared by convert, check and extract: a chunk is a byte range [o0, o1)
 * of the records tensor; a part's bytes for the rows it touches are one contiguous range of
 * that part's source tensor (only the first and last row can be cut), so a chunk costs one
 * read per part whatever the record size, and one engine holds 3 x chunk bytes (convert
 * keeps two engines in flight). */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int rows_io_init(rows_io *io, const tq_rows_geom *g, uint64_t chunk, tq_err *e)
{
    memset(io, 0, sizeof *io);
    io->g = g;
    if (!chunk)
        chunk = 8u << 20;
    if (chunk > g->data_bytes && g->data_bytes)
        chunk = g->data_bytes;
    if (chunk > (1ull << 30))
        chunk = 1ull << 30;
    io->chunk = chunk;
    io->src = tq_malloc((size_t)chunk, e);
    io->out = io->src ? tq_malloc((size_t)chunk, e) : NULL;
    io->rb = io->out ? tq_malloc((size_t)chunk, e) : NULL;
    if (!io->rb) {
        rows_io_free(io);
        return -1;
    }
    return 0;
}

void rows_io_free(rows_io *io)
{
    free(io->src);
    free(io->out);
    free(io->rb);
    io->src = io->out = io->rb = NULL;
}

uint64_t rows_io_next(const rows_io *io, uint64_t o0)
{
    const tq_rows_geom *g = io->g;
    uint64_t step = io->chunk;
    if (g->group_bytes <= step)
        step -= step % g->group_bytes; /* whole records/groups per chunk when they fit */
    uint64_t o1 = o0 + step;
    return o1 > g->data_bytes ? g->data_bytes : o1;
}

static uint64_t clamp_rows(const tq_rows_geom *g, uint64_t r)
{
    return r > g->rows ? g->rows : r;
}

/* First row whose record ends after records offset o. */
static uint64_t row_ending_after(const tq_rows_geom *g, uint64_t o)
{
    uint64_t grp = o / g->group_bytes, w = o % g->group_bytes, k = w / g->slot;
    if (k >= g->per_group)
        return clamp_rows(g, (grp + 1) * g->per_group);
    return clamp_rows(g, grp * g->per_group + k + (w - k * g->slot >= g->stride));
}

/* First row whose record starts at or after records offset o. */
static uint64_t row_starting_from(const tq_rows_geom *g, uint64_t o)
{
    uint64_t grp = o / g->group_bytes, w = o % g->group_bytes;
    uint64_t k = w / g->slot + (w % g->slot != 0);
    if (k >= g->per_group)
        return clamp_rows(g, (grp + 1) * g->per_group);
    return clamp_rows(g, grp * g->per_group + k);
}

/* Bytes [*a, *b) of part p of row r that fall inside [o0, o1); 0 when none. */
static int piece(const tq_rows_geom *g, uint64_t r, int p, uint64_t o0, uint64_t o1, uint64_t *lo, uint64_t *a,
                 uint64_t *b)
{
    const tq_rows_part *pt = &g->parts[p];
    uint64_t ps = tq_rows_record_offset(g, r) + pt->pos, pe = ps + pt->row_bytes;
    uint64_t l = ps > o0 ? ps : o0, h = pe < o1 ? pe : o1;
    if (l >= h)
        return 0;
    *lo = l;
    *a = l - ps;
    *b = h - ps;
    return 1;
}

void rows_io_plan(rows_io *io, uint64_t o0, uint64_t o1)
{
    const tq_rows_geom *g = io->g;
    io->r0 = row_ending_after(g, o0);
    io->r1 = row_starting_from(g, o1);
    uint64_t bo = 0;
    for (int p = 0; p < g->n_parts; p++) {
        uint64_t lo, a, b, rf = io->r0, rl = io->r1, af = 0, bl = 0;
        for (; rf < io->r1; rf++)
            if (piece(g, rf, p, o0, o1, &lo, &af, &b))
                break;
        if (rf < io->r1)
            for (rl = io->r1; rl-- > rf;)
                if (piece(g, rl, p, o0, o1, &lo, &a, &bl))
                    break;
        uint64_t prb = g->parts[p].row_bytes;
        io->sbo[p] = bo;
        if (rf < io->r1) {
            io->soff[p] = rf * prb + af;
            io->slen[p] = rl * prb + bl - io->soff[p];
        } else {
            io->soff[p] = 0;
            io->slen[p] = 0;
        }
        bo += io->slen[p];
    }
}

int rows_io_read_source(rows_io *io, int fd, const uint64_t *src_off, const char *path, tq_err *e)
{
    for (int p = 0; p < io->g->n_parts; p++)
        if (io->slen[p] && tq_pread_full(fd, io->src + io->sbo[p], (size_t)io->slen[p], src_off[p] + io->soff[p],
                                         path, e) != 0)
            return -1;
    return 0;
}

void rows_io_scatter(rows_io *io, uint64_t o0, uint64_t o1)
{
    const tq_rows_geom *g = io->g;
    uint64_t cur[TQ_ROWS_MAX_PARTS] = {0};
    if (g->page)
        memset(io->out, 0, (size_t)(o1 - o0));
    for (uint64_t r = io->r0; r < io->r1; r++)
        for (int p = 0; p < g->n_parts; p++) {
            uint64_t lo, a, b;
            if (!piece(g, r, p, o0, o1, &lo, &a, &b))
                continue;
            memcpy(io->out + (lo - o0), io->src + io->sbo[p] + cur[p], (size_t)(b - a));
            cur[p] += b - a;
        }
}

void rows_io_gather(rows_io *io, uint64_t o0, uint64_t o1)
{
    const tq_rows_geom *g = io->g;
    uint64_t cur[TQ_ROWS_MAX_PARTS] = {0};
    for (uint64_t r = io->r0; r < io->r1; r++)
        for (int p = 0; p < g->n_parts; p++) {
            uint64_t lo, a, b;
            if (!piece(g, r, p, o0, o1, &lo, &a, &b))
                continue;
            memcpy(io->src + io->sbo[p] + cur[p], io->rb + (lo - o0), (size_t)(b - a));
            cur[p] += b - a;
        }
}

static int zero_run(const rows_io *io, uint64_t o0, uint64_t from, uint64_t to, uint64_t row, rows_mismatch *m)
{
    for (uint64_t o = from; o < to; o++)
        if (io->rb[o - o0]) {
            m->row = row;
            m->part = -1;
            m->byte = o;
            m->offset = o;
            m->got = io->rb[o - o0];
            m->want = 0;
            return 1;
        }
    return 0;
}

int rows_io_compare(const rows_io *io, uint64_t o0, uint64_t o1, rows_mismatch *m)
{
    const tq_rows_geom *g = io->g;
    uint64_t cur[TQ_ROWS_MAX_PARTS] = {0}, expect = o0;
    for (uint64_t r = io->r0; r < io->r1; r++)
        for (int p = 0; p < g->n_parts; p++) {
            uint64_t lo, a, b;
            if (!piece(g, r, p, o0, o1, &lo, &a, &b))
                continue;
            if (lo > expect && zero_run(io, o0, expect, lo, r, m))
                return 1;
            const unsigned char *x = io->rb + (lo - o0), *y = io->src + io->sbo[p] + cur[p];
            size_t n = (size_t)(b - a);
            if (memcmp(x, y, n)) {
                size_t i = 0;
                while (x[i] == y[i])
                    i++;
                m->row = r;
                m->part = p;
                m->byte = a + i;
                m->offset = lo + i;
                m->got = x[i];
                m->want = y[i];
                return 1;
            }
            cur[p] += b - a;
            expect = lo + n;
        }
    return zero_run(io, o0, expect, o1, io->r1, m);
}

void rows_mismatch_describe(const rows_mismatch *m, const tq_rows_geom *g, uint64_t data_start, char *buf,
                            size_t cap)
{
    if (m->part < 0)
        snprintf(buf, cap, "padding before row %" PRIu64 " is not zero (file offset %" PRIu64 ": 0x%02x)", m->row,
                 data_start + m->offset, m->got);
    else
        snprintf(buf, cap, "row %" PRIu64 " differs: part '%s' byte %" PRIu64 " (record byte %" PRIu64
                 ", file offset %" PRIu64 "): 0x%02x, source has 0x%02x",
                 m->row, g->parts[m->part].name, m->byte, g->parts[m->part].pos + m->byte, data_start + m->offset,
                 m->got, m->want);
}
