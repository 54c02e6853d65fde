/* Fuzz target: arbitrary bytes as a stream of ggml blocks of one type (the IQ1..IQ4, TQ1_0/TQ2_0,
 * MXFP4 and K/legacy block types tq dequantizes). Input: byte 0 is the ggml type id (any other
 * value picks one of them by remainder), bytes 1..8 an element range (u32 first, u32 count,
 * little-endian, reduced modulo the stream), the rest is the block stream (a partial last block
 * is dropped). Checks: tq_ggml_check_blocks names the first bad block and agrees with
 * itself block by block; dequantization writes exactly the blocks' elements (exact-size heap
 * buffers under ASan), is the same run twice and block by block, and gives no NaN from a stream
 * the check accepts (nothing non-finite where the scales are f16); tq_gguf_read_f32 of the range
 * from a one-tensor GGUF file holding the stream returns the same values, or fails naming a
 * block when a block it covers is refused. */
#include "formats/formats.h"
#include "formats/gguf_internal.h"
#include "tests/fuzz/fz_file.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The block types that dequantize, in type-id order (built once). */
static uint32_t types[64];
static size_t n_types;

static void init_types(void)
{
    if (n_types)
        return;
    for (uint32_t t = 0; t < 64; t++) {
        uint32_t be, bb;
        if (tq_ggml_type_can_dequant(t) && tq_ggml_type_block(t, &be, &bb) == 0 && be > 1)
            types[n_types++] = t;
    }
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static void put(unsigned char **p, const void *v, size_t n)
{
    memcpy(*p, v, n);
    *p += n;
}

/* A GGUF v3 file with one 1-D tensor "t" of the type holding the stream; returns its path. */
static const char *write_gguf(uint32_t type, uint64_t nelem, const uint8_t *q, size_t qlen)
{
    size_t head = 4 + 4 + 8 + 8 + 8 + 1 + 4 + 8 + 4 + 8, pad = (32 - head % 32) % 32;
    unsigned char *buf = malloc(head + pad + qlen + 1), *p = buf;
    if (!buf)
        abort();
    uint32_t ver = 3, ndim = 1;
    uint64_t nt = 1, nkv = 0, nlen = 1, off = 0;
    put(&p, "GGUF", 4);
    put(&p, &ver, 4);
    put(&p, &nt, 8);
    put(&p, &nkv, 8);
    put(&p, &nlen, 8);
    put(&p, "t", 1);
    put(&p, &ndim, 4);
    put(&p, &nelem, 8);
    put(&p, &type, 4);
    put(&p, &off, 8);
    memset(p, 0, pad);
    p += pad;
    if (qlen)
        put(&p, q, qlen);
    fz_write("blocks.gguf", buf, (size_t)(p - buf));
    free(buf);
    return fz_path("blocks.gguf");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_types();
    if (size < 9)
        return 0;
    uint32_t be, bb, type = data[0];
    if (!tq_ggml_type_can_dequant(type) || tq_ggml_type_block(type, &be, &bb) != 0 || be == 1)
        type = types[data[0] % n_types];
    tq_ggml_type_block(type, &be, &bb);
    const uint64_t nb = (size - 9) / bb;
    if (nb == 0)
        return 0;
    /* exact-size copies: a read or write past the blocks is an ASan report */
    uint8_t *q = malloc(nb * bb);
    float *y = malloc(nb * be * sizeof(float)), *y2 = malloc(nb * be * sizeof(float)), *one = malloc(be * sizeof(float));
    if (!q || !y || !y2 || !one)
        abort();
    memcpy(q, data + 9, nb * bb);

    uint64_t bad = UINT64_MAX;
    char why[96] = "";
    const int ok = tq_ggml_check_blocks(type, q, nb, &bad, why, sizeof why) == 0;
    if (!ok) {
        if (bad >= nb || !why[0] || !memchr(why, 0, sizeof why))
            abort();
        uint64_t b2;
        char w2[96];
        /* the blocks before the first bad one pass; the bad one fails on its own */
        if (tq_ggml_check_blocks(type, q, bad, &b2, w2, sizeof w2) != 0 ||
            tq_ggml_check_blocks(type, q + bad * bb, 1, &b2, w2, sizeof w2) == 0 || b2 != 0 || strcmp(w2, why))
            abort();
    }
    tq_ggml_dequant(type, q, y, nb);
    tq_ggml_dequant(type, q, y2, nb);
    if (memcmp(y, y2, nb * be * sizeof(float)))
        abort();
    for (uint64_t b = 0; b < nb && b < 64; b++) { /* blocks are independent */
        tq_ggml_dequant(type, q + b * bb, one, 1);
        if (memcmp(one, y + b * be, be * sizeof(float)))
            abort();
    }
    if (ok) {
        /* f16 scales that are finite give finite values; Q8_K's f32 and MXFP4's 2^127 scale
         * can overflow to infinity exactly as ggml's do, but never to NaN */
        const int may_overflow = type == TQ_GGML_Q8_K || type == TQ_GGML_MXFP4;
        for (uint64_t i = 0; i < nb * be; i++)
            if (isnan(y[i]) || (!may_overflow && !isfinite(y[i])))
                abort();
    }

    /* the same blocks through a GGUF file and the chunked reader */
    const uint64_t nelem = nb * be;
    uint64_t first = le32(data + 1) % (nelem + 1), n = le32(data + 5) % (nelem - first + 1);
    tq_err e;
    tq_gguf_file *f = NULL;
    if (tq_gguf_open(&f, write_gguf(type, nelem, q, nb * bb), &e) != 0) {
        fprintf(stderr, "fuzz: own GGUF refused: %s\n", e.msg);
        abort();
    }
    if (f->n_tensors != 1 || f->tensors[0].nelem != nelem || f->tensors[0].nbytes != nb * bb)
        abort();
    float *r = malloc(n ? n * sizeof(float) : 1);
    if (!r)
        abort();
    const uint64_t b0 = first / be, b1 = n ? (first + n + be - 1) / be : b0;
    uint64_t bb2;
    char w3[96];
    const int covered_ok = tq_ggml_check_blocks(type, q + b0 * bb, b1 - b0, &bb2, w3, sizeof w3) == 0;
    const int rc = tq_gguf_read_f32(f, &f->tensors[0], first, n, r, &e);
    if (covered_ok ? rc != 0 || memcmp(r, y + first, n * sizeof(float))
                   : rc == 0 || !strstr(e.msg, "block") || !strstr(e.msg, w3))
        abort();
    /* one element past the end is refused */
    if (tq_gguf_read_f32(f, &f->tensors[0], nelem, 1, r, &e) == 0)
        abort();
    tq_gguf_close(f);
    free(r);
    free(q);
    free(y);
    free(y2);
    free(one);
    return 0;
}
