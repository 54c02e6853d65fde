/* The single-thread read floor of bench/decode.sh: sums BYTES of memory as u64 words (four
 * independent sums, so the loop waits on memory, not on adds), REPS passes; prints
 * "BYTES BEST_S MEAN_S" (the fastest pass, and the mean: on a shared machine the mean meets the
 * same contention as a decode of REPS tokens). With SPAN (> BYTES) the buffer is SPAN bytes and
 * each pass reads the BYTES that follow the previous pass's, wrapping: a working set as large
 * as a whole model, as a MoE decode whose experts change from token to token meets it, where
 * BYTES alone may sit in a large last-level cache. Built by make, baseline flags like the
 * runtime. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: read_loop BYTES [REPS [SPAN]]\n");
        return 2;
    }
    size_t bytes = (size_t)strtoull(argv[1], NULL, 10) / 32 * 32;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1)
        reps = 1;
    size_t span = argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) / 32 * 32 : 0;
    if (span < bytes)
        span = bytes;
    uint64_t *p = malloc(span ? span : 32);
    if (!p) {
        fprintf(stderr, "read_loop: out of memory (%zu bytes)\n", span);
        return 1;
    }
    size_t n = bytes / 8, m = span / 8, at = 0; /* words per pass, in the buffer; next start */
    for (size_t i = 0; i < m; i++)
        p[i] = i * 0x9E3779B97F4A7C15ull;
    double best = 0, total = 0;
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t left = n; left >= 4;) { /* from at to the end of the buffer, then from 0 */
            size_t run = m - at < left ? m - at : left;
            const uint64_t *q = p + at;
            for (size_t i = 0; i + 4 <= run; i += 4) {
                s0 += q[i];
                s1 += q[i + 1];
                s2 += q[i + 2];
                s3 += q[i + 3];
            }
            left -= run;
            at = (at + run) % m;
        }
        double t = now_s() - t0;
        sink += s0 ^ s1 ^ s2 ^ s3;
        total += t;
        if (r == 0 || t < best)
            best = t;
    }
    printf("%zu %.9f %.9f\n", bytes, best, total / (reps > 0 ? reps : 1));
    free(p);
    return sink == 42; /* keeps the sums live */
}
