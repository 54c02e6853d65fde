/* Kernel rates of the quantizer, in memory (no file I/O): rotation, the group search
 * (--scale lsq and rms) with packing, per thread CPU second, best of R repetitions over
 * ROWS rows of 2048 N(0,1) values (built by make, run by bench/quant-kernel.sh). */
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 1;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((rng >> 11) + 0.5) * 0x1p-53;
}

int main(int argc, char **argv)
{
    size_t n = 2048, rows = argc > 1 ? (size_t)atol(argv[1]) : 1024, g = 64;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    float *w = malloc(n * rows * sizeof *w), *x = malloc(n * sizeof *x);
    uint8_t *idx = malloc(n);
    uint16_t *sc = malloc(n / g * 2);
    uint32_t *pk = malloc(n * 4);
    if (!w || !x || !idx || !sc || !pk)
        return 1;
    for (size_t i = 0; i < n * rows; i++)
        w[i] = (float)(sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()));
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_s();
        for (size_t i = 0; i < rows; i++) {
            memcpy(x, w + i * n, n * sizeof *x);
            tq_hadamard(x, n, n, 0);
        }
        best = fmin(best, cpu_s() - t0);
    }
    printf("quant-kernel: Hadamard (block 2048): %.0f M values/s per CPU second\n", n * rows / best / 1e6);
    for (int bits = 2; bits <= 4; bits++)
        for (int method = TQ_SCALE_LSQ; method >= TQ_SCALE_RMS; method--) {
            tq_err e;
            tq_codebook cb;
            if (tq_codebook_lloyd_max(bits, &cb, &e))
                return 1;
            double e2 = 0, s2 = 0;
            best = INFINITY;
            for (int r = 0; r < reps; r++) {
                double t0 = cpu_s();
                e2 = s2 = 0;
                for (size_t i = 0; i < rows; i++) {
                    double a, b;
                    if (tq_quantize_groups(&cb, method, g, w + i * n, n, idx, sc, &a, &b, &e))
                        return 1;
                    tq_pack(idx, n, bits, pk);
                    e2 += a, s2 += b;
                }
                best = fmin(best, cpu_s() - t0);
            }
            printf("quant-kernel: %d-bit g64 --scale %s, group search + packing: %.0f M weights/s per CPU second "
                   "(rel MSE %.5f)\n",
                   bits, method == TQ_SCALE_LSQ ? "lsq" : "rms", n * rows / best / 1e6, e2 / s2);
        }
    return 0;
}
