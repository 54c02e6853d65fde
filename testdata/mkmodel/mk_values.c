/* The values of one plan item: the recipe matrix or vector of its key(s), fused halves or
 * interleaved rows taken from the gate and up keys, and the MLX-form adjustments (zero-centred
 * norms stored as 1 + w, gpt-oss experts passed through MXFP4). Pure functions of the options. */
#include "testdata/mkmodel/mk_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *mk_item_key(const mk_item *it, uint64_t expert, int h, tq_err *e)
{
    const char *suf = h ? it->key_suf2 : it->key_suf;
    if (!suf)
        return tq_strdup(it->key_pre, e);
    return tq_asprintf(e, "%s%llu%s", it->key_pre, (unsigned long long)expert, suf);
}

void mk_cache_free(mk_cache *c)
{
    for (int h = 0; h < 2; h++)
        if (c->have[h])
            tq_mk_matrix_free(&c->m[h]);
    c->have[0] = c->have[1] = 0;
}

/* Which key and which row/element of its matrix row r of the item comes from. */
static void map_row(const mk_item *it, uint64_t r, uint64_t span, int *h, uint64_t *rr)
{
    *h = 0;
    *rr = r;
    if (it->rowmap == MK_ROWS_HALVES && r >= span / 2) {
        *h = 1;
        *rr = r - span / 2;
    } else if (it->rowmap == MK_ROWS_INTERLEAVE) {
        *h = (int)(r & 1);
        *rr = r / 2;
    }
}

static float round_to(tq_dtype dt, float v)
{
    if (dt == TQ_DT_BF16)
        return tq_bf16_to_f32(tq_f32_to_bf16(v));
    if (dt == TQ_DT_F16)
        return tq_f16_to_f32(tq_f32_to_f16(v));
    return v;
}

void tq_mk_mxfp4_encode(const float *w, uint8_t blocks[16], uint8_t *scale)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        if (fabsf(w[i]) > amax)
            amax = fabsf(w[i]);
    int ex = -127;
    if (amax > 0.0f) { /* smallest ex with amax / 2^ex <= 6 */
        int x;
        float m = frexpf(amax / 6.0f, &x); /* amax/6 = m 2^x, m in [0.5, 1) */
        ex = m == 0.5f ? x - 1 : x;
        if (ex < -127)
            ex = -127;
        if (ex > 127)
            ex = 127;
    }
    *scale = (uint8_t)(ex + 127);
    float s = ldexpf(1.0f, ex);
    uint8_t q[32];
    for (int i = 0; i < 32; i++) {
        float a = fabsf(w[i]) / s;
        int best = 0;
        for (int k = 1; k < 8; k++) {
            float d = fabsf(a - mag[k]), db = fabsf(a - mag[best]);
            if (d < db || (d == db && !(k & 1)))
                best = k;
        }
        q[i] = (uint8_t)(best | (w[i] < 0.0f && best ? 8 : 0));
    }
    for (int j = 0; j < 16; j++)
        blocks[j] = (uint8_t)(q[2 * j] | q[2 * j + 1] << 4);
}

static int matrix(mk_cache *c, const mk_item *it, size_t item, uint64_t seed, uint64_t expert, int h,
                  tq_err *e)
{
    if (c->have[h] && c->item == item && c->expert == expert)
        return 0;
    if (c->item != item || c->expert != expert)
        mk_cache_free(c);
    c->item = item;
    c->expert = expert;
    char *key = mk_item_key(it, expert, h, e);
    if (!key)
        return -1;
    uint64_t rows = it->rowmap == MK_ROWS_PLAIN ? it->rows : it->rows / 2;
    int rc = tq_mk_matrix_init(&c->m[h], seed, key, rows, it->cols, e);
    free(key);
    if (rc)
        return -1;
    c->have[h] = 1;
    return 0;
}

int mk_item_values(const mk_item *it, size_t item_index, uint64_t seed, uint64_t expert, uint64_t row0,
                   uint64_t n, float *out, mk_cache *c, tq_err *e)
{
    if (it->kind == MK_NORM || it->kind == MK_VEC) {
        for (int h = 0; h < (it->rowmap == MK_ROWS_PLAIN ? 1 : 2); h++) {
            char *key = mk_item_key(it, expert, h, e);
            if (!key)
                return -1;
            for (uint64_t i = 0; i < it->cols; i++) {
                int hh;
                uint64_t ii;
                map_row(it, i, it->cols, &hh, &ii);
                if (hh == h)
                    tq_mk_vector_values(seed, key, ii, 1, it->mean, it->sigma, out + i);
            }
            free(key);
        }
    } else {
        for (uint64_t r = 0; r < n; r++) {
            int h;
            uint64_t rr;
            map_row(it, row0 + r, it->rows, &h, &rr);
            if (matrix(c, it, item_index, seed, expert, h, e))
                return -1;
            tq_mk_matrix_rows(&c->m[h], rr, 1, out + r * it->cols);
        }
    }
    uint64_t total = (it->kind == MK_LINEAR ? n : 1) * it->cols;
    if (it->add_one)
        for (uint64_t i = 0; i < total; i++)
            out[i] = round_to(it->dt, round_to(it->dt, out[i]) + 1.0f);
    if (it->mxfp4_round)
        for (uint64_t b = 0; b + 32 <= total; b += 32) {
            uint8_t q[16], s;
            uint64_t bad;
            tq_mk_mxfp4_encode(out + b, q, &s);
            if (tq_mxfp4_decode(q, &s, 1, 0, out + b, &bad))
                return tq_fail(e, TQ_EUSAGE, "MXFP4 value out of range");
        }
    return 0;
}
