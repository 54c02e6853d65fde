/* bench/kquant/ggml_stubs.c — the few ggml.c symbols ggml-quants.c needs, so bench/quality.sh can
 * build ggml's reference K-quant quantizers alone (from a ggml checkout, TQ_GGML_SRC) and run
 * them on the trained test models beside tq-convert. Not part of tq. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Only the validation and imatrix paths call these; the reference quantizers used here do not. */
size_t ggml_row_size(int type, int64_t ne);
size_t ggml_row_size(int type, int64_t ne)
{
    (void)type;
    (void)ne;
    abort();
}
size_t ggml_type_size(int type);
size_t ggml_type_size(int type)
{
    (void)type;
    abort();
}
const char *ggml_type_name(int type);
const char *ggml_type_name(int type)
{
    (void)type;
    return "?";
}
