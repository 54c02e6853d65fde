/* Synthetic GGUF files of any ggml block type for bench/gguf.sh, and a test that the chunked read path
 * (tq_model_read through the GGUF source) equals dequantizing the whole tensor at once.
 *   test_gguf_bench                          run the test
 *   test_gguf_bench --make FILE TYPE BYTES   write a GGUF of about BYTES of TYPE (Q4_K, Q6_K,
 *                                            ...) blocks; prints the weight count
 *   test_gguf_bench --kernel TYPE            dequantization kernel alone, one thread, data in
 *                                            cache: prints G weights/s per wall and per CPU second */
#include "formats/formats.h"
#include "check.h"
#include "gguf_writer.h"
#include "ggml_grids.h"

#include <stdint.h>
#include <time.h>

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static tq_err err;

typedef struct fill_ctx {
    uint32_t type, block_bytes;
    uint64_t seed;
} fill_ctx;

/* Valid blocks of any type (finite, varied scales: ggml_ref.c's generator), block k of tensor t
 * always the same bytes, so that blocks straddling chunks come out whole. */
static void fill_blocks(size_t tensor, uint64_t off, unsigned char *buf, size_t len, void *vctx)
{
    const fill_ctx *c = vctx;
    unsigned char blk[512];
    for (uint64_t b = off / c->block_bytes; b * c->block_bytes < off + len; b++) {
        uint64_t s = c->seed ^ (b * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)tensor << 40);
        gg_random_block(c->type, &s, 0, blk);
        uint64_t start = b * c->block_bytes, lo = start > off ? start : off;
        uint64_t hi = start + c->block_bytes < off + len ? start + c->block_bytes : off + len;
        memcpy(buf + (lo - off), blk + (lo - start), (size_t)(hi - lo));
    }
}

static uint32_t type_by_name(const char *n)
{
    for (uint32_t t = 0; t < 64; t++)
        if (tq_ggml_type_name(t) && strcmp(tq_ggml_type_name(t), n) == 0)
            return t;
    return UINT32_MAX;
}

/* Tensors of 4096 x 1024 weights until about `bytes`; returns the weight count. */
static uint64_t make_file(const char *path, uint32_t type, uint64_t bytes, uint64_t seed)
{
    uint32_t be, bb;
    if (tq_ggml_type_block(type, &be, &bb) != 0 || !tq_ggml_type_can_dequant(type))
        return 0;
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen3");
    uint64_t ne[2] = {4096, 1024};
    uint64_t tbytes = ne[0] * ne[1] / be * bb, weights = 0;
    if (bytes < tbytes) {
        ne[1] = bytes / (ne[0] / be * bb);
        ne[1] = ne[1] ? ne[1] : 1;
        tbytes = ne[0] * ne[1] / be * bb;
    }
    for (uint64_t i = 0; weights == 0 || (i * tbytes < bytes); i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%llu.ffn_up.weight", (unsigned long long)i);
        gw_tensor_add_lazy(&w, name, 2, ne, type, tbytes);
        weights += ne[0] * ne[1];
    }
    fill_ctx c = {type, bb, seed};
    int rc = gw_write_fill(&w, path, fill_blocks, &c);
    gw_free(&w);
    return rc == 0 ? weights : 0;
}

static void test_chunked_reads_match_whole(void)
{
    uint32_t types[] = {2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 29, 34, 35, 39};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/bench-%u.gguf", t_tmpdir(), types[ti]);
        uint64_t weights = make_file(path, types[ti], 300000, 7);
        CHECK(weights > 0);
        tq_model *m = NULL;
        CHECK_OK(tq_model_open(&m, path, &err));
        if (!m)
            continue;
        const tq_model_tensor *t = tq_model_find(m, "model.layers.0.mlp.up_proj.weight");
        CHECK(t && t->was_quantized);
        uint32_t be, bb;
        tq_ggml_type_block(types[ti], &be, &bb);
        /* Reference: the raw blocks dequantized in one call. */
        tq_gguf_file *f = NULL;
        CHECK_OK(tq_gguf_open(&f, path, &err));
        if (t && f) {
            const tq_gguf_tensor *gt = &f->tensors[0];
            unsigned char *raw = malloc(gt->nbytes);
            float *want = malloc(gt->nelem * 4), *got = malloc(gt->nelem * 4);
            FILE *fp = fopen(path, "rb");
            CHECK(fp && fseek(fp, (long)(f->data_start + gt->offset), SEEK_SET) == 0 &&
                  fread(raw, 1, gt->nbytes, fp) == gt->nbytes);
            if (fp)
                fclose(fp);
            tq_ggml_dequant(gt->type, raw, want, gt->nelem / be);
            /* Odd-sized chunks across block and row boundaries. */
            size_t chunk = 4 * 1000 + 3;
            for (uint64_t off = 0; off < t->info.nbytes; off += chunk) {
                size_t len = t->info.nbytes - off < chunk ? (size_t)(t->info.nbytes - off) : chunk;
                CHECK_OK(tq_model_read(t, off, (unsigned char *)got + off, len, &err));
            }
            CHECKF(memcmp(got, want, gt->nelem * 4) == 0, "type %s", tq_ggml_type_name(types[ti]));
            int finite = 1;
            for (uint64_t i = 0; i < gt->nelem; i++)
                finite &= isfinite(want[i]) != 0;
            CHECKF(finite, "type %s: non-finite values", tq_ggml_type_name(types[ti]));
            free(raw);
            free(want);
            free(got);
        }
        tq_gguf_close(f);
        tq_model_close(m);
        remove(path);
    }
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--make") == 0) {
        uint64_t bytes;
        uint32_t type = type_by_name(argv[3]);
        if (type == UINT32_MAX || tq_parse_size(argv[4], &bytes) != 0) {
            fprintf(stderr, "usage: %s --make FILE TYPE BYTES\n", argv[0]);
            return 2;
        }
        uint64_t weights = make_file(argv[2], type, bytes, 1);
        if (!weights) {
            fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[2]);
            return 1;
        }
        printf("%llu\n", (unsigned long long)weights);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--kernel") == 0) {
        uint32_t type = type_by_name(argv[2]), be, bb;
        if (type == UINT32_MAX || tq_ggml_type_block(type, &be, &bb) != 0 || !tq_ggml_type_can_dequant(type)) {
            fprintf(stderr, "usage: %s --kernel TYPE\n", argv[0]);
            return 2;
        }
        enum { NB = 64 }; /* 64 blocks of 256: 64 KiB of output, stays in L2 */
        unsigned char *q = malloc((size_t)NB * bb);
        float *y = malloc((size_t)NB * be * sizeof(float));
        fill_ctx c = {type, bb, 3};
        fill_blocks(0, 0, q, (size_t)NB * bb, &c);
        uint64_t reps = 0, target = (uint64_t)1 << 30; /* ~1 G weights */
        double t0 = tq_now(), c0 = thread_cpu();
        while (reps * NB * be < target) {
            tq_ggml_dequant(type, q, y, NB);
            reps++;
        }
        double dt = tq_now() - t0, dc = thread_cpu() - c0;
        volatile float sink = y[reps % (NB * be)];
        (void)sink;
        /* wall-clock rate, and the rate per CPU second (robust on a loaded machine) */
        printf("%.3f %.3f\n", (double)reps * NB * be / dt / 1e9, (double)reps * NB * be / dc / 1e9);
        free(q);
        free(y);
        return 0;
    }
    RUN(test_chunked_reads_match_whole);
    TEST_MAIN_END();
}
