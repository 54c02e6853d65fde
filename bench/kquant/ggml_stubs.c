/* bench/kquant/ggml_stubs.c — the few ggml.c symbols ggml-quants.c needs, so bench/quality.sh can
 * build ggml's quantizers alone (from a ggml checkout, TQ_GGML_SRC) and run them on the trained
 * test models beside tq-convert. Not part of tq; compiled only with ggml's own headers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#define GGML_COMMON_DECL_C
#include "ggml-common.h"

float ggml_table_f32_f16[1 << 16];

/* IEEE binary16 -> binary32, for the table ggml_init() fills in ggml.c. */
__attribute__((constructor)) static void stub_fill_table(void)
{
    for (uint32_t h = 0; h < (1u << 16); h++) {
        uint32_t s = (h >> 15) << 31, ex = (h >> 10) & 31, m = h & 1023, u;
        if (ex == 31)
            u = s | 0x7f800000u | (m << 13);
        else if (ex)
            u = s | ((ex + 112) << 23) | (m << 13);
        else if (!m)
            u = s;
        else {
            int e = 113;
            while (!(m & 1024)) {
                m <<= 1;
                e--;
            }
            u = s | ((uint32_t)e << 23) | ((m & 1023) << 13);
        }
        memcpy(&ggml_table_f32_f16[h], &u, 4);
    }
}

void ggml_abort(const char *file, int line, const char *fmt, ...)
{
    fprintf(stderr, "ggml_abort at %s:%d (%s)\n", file, line, fmt);
    abort();
}

/* ggml.c's type_traits (blck_size, type_size) for the types bench/kquant/kquant.py uses: the
 * chunk quantizers (quantize_q4_0, quantize_q2_K, ... what ggml_quantize_chunk calls) size their
 * rows with ggml_row_size. Any other type aborts rather than guess. */
static void stub_traits(enum ggml_type type, int64_t *blck, size_t *size)
{
    switch (type) {
    case GGML_TYPE_Q4_0: *blck = QK4_0, *size = sizeof(block_q4_0); return;
    case GGML_TYPE_Q4_1: *blck = QK4_1, *size = sizeof(block_q4_1); return;
    case GGML_TYPE_Q5_0: *blck = QK5_0, *size = sizeof(block_q5_0); return;
    case GGML_TYPE_Q5_1: *blck = QK5_1, *size = sizeof(block_q5_1); return;
    case GGML_TYPE_Q8_0: *blck = QK8_0, *size = sizeof(block_q8_0); return;
    case GGML_TYPE_Q2_K: *blck = QK_K, *size = sizeof(block_q2_K); return;
    case GGML_TYPE_Q3_K: *blck = QK_K, *size = sizeof(block_q3_K); return;
    case GGML_TYPE_Q4_K: *blck = QK_K, *size = sizeof(block_q4_K); return;
    case GGML_TYPE_Q5_K: *blck = QK_K, *size = sizeof(block_q5_K); return;
    case GGML_TYPE_Q6_K: *blck = QK_K, *size = sizeof(block_q6_K); return;
    case GGML_TYPE_IQ4_NL: *blck = QK4_NL, *size = sizeof(block_iq4_nl); return;
    case GGML_TYPE_IQ4_XS: *blck = QK_K, *size = sizeof(block_iq4_xs); return;
    case GGML_TYPE_IQ3_S: *blck = QK_K, *size = sizeof(block_iq3_s); return;
    default:
        fprintf(stderr, "ggml_stubs: no traits for ggml type %d\n", (int)type);
        abort();
    }
}

int64_t ggml_blck_size(enum ggml_type type)
{
    int64_t b;
    size_t s;
    stub_traits(type, &b, &s);
    return b;
}

size_t ggml_type_size(enum ggml_type type)
{
    int64_t b;
    size_t s;
    stub_traits(type, &b, &s);
    return s;
}

size_t ggml_row_size(enum ggml_type type, int64_t ne)
{
    int64_t b;
    size_t s;
    stub_traits(type, &b, &s);
    if (ne % b) {
        fprintf(stderr, "ggml_stubs: row of %lld weights is not whole blocks of %lld\n", (long long)ne, (long long)b);
        abort();
    }
    return s * (size_t)(ne / b);
}

const char *ggml_type_name(enum ggml_type type)
{
    (void)type;
    return "?";
}
