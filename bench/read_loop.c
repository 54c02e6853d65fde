/* The single-thread read floor of bench/decode.sh: sums BYTES of memory as u64 words (four
 * independent sums, so the loop waits on memory, not on adds), REPS passes; prints
 * "BYTES BEST_S MEAN_S" (the fastest pass, and the mean: on a shared machine the mean meets the
 * same contention as a decode of REPS tokens). Built by make, baseline flags like the runtime. */
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
        fprintf(stderr, "usage: read_loop BYTES [REPS]\n");
        return 2;
    }
    size_t bytes = (size_t)strtoull(argv[1], NULL, 10) / 32 * 32;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1)
        reps = 1;
    uint64_t *p = malloc(bytes ? bytes : 32);
    if (!p) {
        fprintf(stderr, "read_loop: out of memory (%zu bytes)\n", bytes);
        return 1;
    }
    size_t n = bytes / 8;
    for (size_t i = 0; i < n; i++)
        p[i] = i * 0x9E3779B97F4A7C15ull;
    double best = 0, total = 0;
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i + 4 <= n; i += 4) {
            s0 += p[i];
            s1 += p[i + 1];
            s2 += p[i + 2];
            s3 += p[i + 3];
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
