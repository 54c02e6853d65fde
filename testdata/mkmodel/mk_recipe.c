/* The weight recipe: values that look like trained LLM weights (see mkmodel.h). Each
 * property draws from its own stream of the tensor's key so that, e.g., the tail mask
 * does not correlate with the Gaussian bulk. */
#include "testdata/mkmodel/mkmodel.h"
#include "testdata/mkmodel/mk_rng_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_BULK 0x1D8E4E27C47D124Full
#define STREAM_ROW 0x2545F4914F6CDD1Dull
#define STREAM_OUTLIER 0x6A09E667F3BCC909ull
#define STREAM_TAIL 0xBB67AE8584CAA73Bull

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int tq_mk_matrix_init(tq_mk_matrix *m, uint64_t seed, const char *name, uint64_t rows,
                      uint64_t cols, tq_err *e)
{
    memset(m, 0, sizeof *m);
    if (cols == 0 || cols > 0xFFFFFFFFull)
        return tq_fail(e, TQ_EUSAGE, "tensor '%s': %llu input channels not supported", name,
                       (unsigned long long)cols);
    m->key = tq_mk_key(seed, name);
    m->rows = rows;
    m->cols = cols;
    m->inv_sqrt_cols = 1.0 / sqrt((double)cols);
    m->n_outliers = cols / TQ_MK_OUTLIER_DIV ? cols / TQ_MK_OUTLIER_DIV : 1;
    m->outliers = tq_calloc(m->n_outliers, sizeof *m->outliers, e);
    m->is_outlier = tq_calloc(cols, 1, e);
    if (!m->outliers || !m->is_outlier) {
        tq_mk_matrix_free(m);
        return -1;
    }
    /* Draw distinct channels; attempt counter j keeps the choice independent of order. */
    uint64_t sk = m->key ^ STREAM_OUTLIER;
    size_t got = 0;
    for (uint64_t j = 0; got < m->n_outliers; j++) {
        uint32_t c = (uint32_t)(tq_mk_mix64(sk + j * 0x9E3779B97F4A7C15ull) % cols);
        if (m->is_outlier[c])
            continue;
        m->is_outlier[c] = 1;
        m->outliers[got++] = c;
    }
    qsort(m->outliers, m->n_outliers, sizeof *m->outliers, cmp_u32);
    return 0;
}

void tq_mk_matrix_free(tq_mk_matrix *m)
{
    free(m->outliers);
    free(m->is_outlier);
    m->outliers = NULL;
    m->is_outlier = NULL;
}

double tq_mk_matrix_row_scale(const tq_mk_matrix *m, uint64_t row)
{
    return tq_mk_exp(TQ_MK_ROW_SIGMA * tq_mk_gauss(m->key ^ STREAM_ROW, row));
}

static inline int is_tail(uint64_t tail_stream, uint64_t i)
{
    return mk_mix64(tail_stream + i * 0xD6E8FEB86659FD93ull) < TQ_MK_TAIL_THRESHOLD;
}

int tq_mk_matrix_is_tail(const tq_mk_matrix *m, uint64_t row, uint64_t col)
{
    return is_tail(m->key ^ STREAM_TAIL, row * m->cols + col);
}

static inline float recipe_value(const tq_mk_matrix *m, double rs, uint64_t tail_stream,
                                 uint64_t i, uint64_t c, double z)
{
    double w = rs * z;
    if (m->is_outlier[c])
        w *= TQ_MK_OUTLIER_MUL;
    if (is_tail(tail_stream, i))
        w *= TQ_MK_TAIL_MUL;
    return (float)w;
}

void tq_mk_matrix_rows(const tq_mk_matrix *m, uint64_t row0, uint64_t n, float *out)
{
    uint64_t bulk = m->key ^ STREAM_BULK, tail = m->key ^ STREAM_TAIL;
    for (uint64_t r = 0; r < n; r++) {
        uint64_t row = row0 + r;
        double rs = tq_mk_matrix_row_scale(m, row) * m->inv_sqrt_cols;
        uint64_t i0 = row * m->cols;
        float *o = out + r * m->cols;
        for (uint64_t c = 0; c < m->cols;) {
            uint64_t i = i0 + c;
            double z0, z1;
            mk_gauss_pair(bulk, i >> 1, &z0, &z1);
            if (i & 1) { /* second half of a pair that straddles the row start */
                o[c] = recipe_value(m, rs, tail, i, c, z1);
                c++;
                continue;
            }
            o[c] = recipe_value(m, rs, tail, i, c, z0);
            c++;
            if (c < m->cols) {
                o[c] = recipe_value(m, rs, tail, i + 1, c, z1);
                c++;
            }
        }
    }
}

void tq_mk_vector_values(uint64_t seed, const char *name, uint64_t i0, uint64_t n, double mean,
                         double sigma, float *out)
{
    uint64_t bulk = tq_mk_key(seed, name) ^ STREAM_BULK;
    for (uint64_t i = 0; i < n; i++)
        out[i] = (float)(mean + sigma * tq_mk_gauss(bulk, i0 + i));
}

void tq_mk_norm_values(uint64_t seed, const char *name, uint64_t i0, uint64_t n, float *out)
{
    tq_mk_vector_values(seed, name, i0, n, 1.0, TQ_MK_NORM_SIGMA, out);
}
