/* bench/tokenizer_bench.c — encoding speed of tokenizer/ on a corpus, one thread.
 *
 * Usage: tokenizer_bench TOKENIZER_DIR CORPUS [PASSES]
 * CORPUS holds "<length>\n<bytes>\n" records (tests/tokenizer/corpus.py). Encodes every record
 * once to warm the encoder's cache, then PASSES times (default 3) and prints the best pass as
 * MB per CPU second of this thread (so other load on the machine does not count), and as MB
 * per wall second. */
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tokenizer_bench TOKENIZER_DIR CORPUS [PASSES]\n");
        return 2;
    }
    int passes = argc > 3 ? atoi(argv[3]) : 3;
    tq_err err = {0};
    char *d;
    size_t len;
    tq_tok *t;
    tq_tok_enc *x;
    if (tq_read_small_file(argv[2], 1u << 30, &d, &len, &err) || tq_tok_load(argv[1], &t, &err) ||
        tq_tok_enc_new(t, &x, &err)) {
        fprintf(stderr, "tokenizer_bench: %s\n", err.msg);
        return 1;
    }
    size_t nrec = 0, cap = 1024, bytes = 0, tokens = 0;
    struct { const char *s; size_t n; } *r = malloc(cap * sizeof *r);
    for (size_t i = 0; i < len;) {
        char *end;
        unsigned long long l = strtoull(d + i, &end, 10);
        if (*end != '\n' || (size_t)(end + 1 - d) + l > len) {
            fprintf(stderr, "tokenizer_bench: %s: bad record at byte %zu\n", argv[2], i);
            return 1;
        }
        if (nrec == cap)
            r = realloc(r, (cap *= 2) * sizeof *r);
        r[nrec].s = end + 1;
        r[nrec++].n = (size_t)l;
        bytes += (size_t)l;
        i = (size_t)(end + 1 - d) + l + 1;
    }
    double best_cpu = 1e30, best_wall = 1e30;
    for (int p = -1; p < passes; p++) {
        double c0 = cpu_now(), w0 = tq_now();
        tokens = 0;
        for (size_t i = 0; i < nrec; i++) {
            int32_t *ids;
            size_t n;
            if (tq_tok_enc_run(x, r[i].s, r[i].n, 0, &ids, &n, &err)) {
                fprintf(stderr, "tokenizer_bench: record %zu: %s\n", i, err.msg);
                return 1;
            }
            tokens += n;
            free(ids);
        }
        double c = cpu_now() - c0, w = tq_now() - w0;
        if (p >= 0 && c < best_cpu)
            best_cpu = c;
        if (p >= 0 && w < best_wall)
            best_wall = w;
    }
    printf("%.2f MB/s per CPU second (%.2f MB/s wall), %zu records, %zu bytes, %zu tokens\n", bytes / best_cpu / 1e6,
           bytes / best_wall / 1e6, nrec, bytes, tokens);
    tq_tok_enc_free(x);
    tq_tok_free(t);
    free(r);
    free(d);
    return 0;
}
