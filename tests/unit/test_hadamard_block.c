/* The Hadamard block rule (quant/hadamard.c, docs/quantization.md "Hadamard blocks") for
 * every length, against its definition evaluated by brute force: the valid blocks are the
 * numbers m·2^k with m in {1, 12, 20, 28}; the block of an axis of n is the largest valid
 * block that divides n; tq_hadamard_split names (m, 2^k) of exactly the valid blocks, and the
 * transform accepts exactly those. */
#include "quant/quant.h"
#include "tests/unit/check.h"

#define LIMIT 16384u
#define AXES (4u * LIMIT)

static const unsigned ms[4] = {1, 12, 20, 28};

/* valid_m[b] = m when b = m·2^k (0 when b is not a block), for b <= AXES */
static unsigned valid_m[AXES + 1];

static void enumerate(void)
{
    memset(valid_m, 0, sizeof valid_m);
    for (int i = 0; i < 4; i++)
        for (uint64_t b = ms[i]; b <= AXES; b *= 2)
            valid_m[b] = ms[i];
}

static void test_split_every_length(void)
{
    enumerate();
    size_t n_valid = 0;
    for (uint64_t b = 0; b <= LIMIT; b++) {
        int m = -1;
        uint64_t N = 0;
        int rc = tq_hadamard_split(b, &m, &N);
        if (valid_m[b]) {
            n_valid++;
            CHECKF(rc == 0 && (unsigned)m == valid_m[b] && N * (uint64_t)m == b, "split(%llu): rc %d, m %d, N %llu",
                   (unsigned long long)b, rc, m, (unsigned long long)N);
        } else {
            CHECKF(rc == -1, "split(%llu) accepted a length that is not m·2^k (m %d, N %llu)", (unsigned long long)b, m,
                   (unsigned long long)N);
        }
    }
    /* 15 powers of two up to 2^14, then 12·2^k (k <= 10), 20·2^k (k <= 9), 28·2^k (k <= 9) */
    CHECKF(n_valid == 15 + 11 + 10 + 10, "%zu valid blocks up to %u", n_valid, LIMIT);
}

static void test_block_every_axis(void)
{
    enumerate();
    for (uint64_t n = 1; n <= AXES; n++) {
        uint64_t best = 0;
        for (uint64_t b = 1; b <= n; b *= 2) /* 2^k, then the m·2^k between it and 2^(k+1) */
            for (int i = 0; i < 4; i++)
                if (b * ms[i] <= n && n % (b * ms[i]) == 0 && b * ms[i] > best)
                    best = b * ms[i];
        uint64_t got = tq_hadamard_block(n);
        if (got != best) {
            CHECKF(got == best, "block(%llu) = %llu, the largest m·2^k dividing it is %llu", (unsigned long long)n,
                   (unsigned long long)got, (unsigned long long)best);
            break;
        }
    }
    CHECK(tq_hadamard_block(0) == 0);
    /* large axes: the odd part beyond 28 never joins the block */
    CHECK(tq_hadamard_block(28ull * 4096 * 3) == 28ull * 4096);
    CHECK(tq_hadamard_block(20ull * (1ull << 40)) == 20ull * (1ull << 40));
    CHECK(tq_hadamard_block(105ull << 20) == 7ull << 20); /* 105 = 3·5·7: 28·2^18 beats 20·2^18 */
}

/* The transform itself accepts a block exactly when it is valid (and divides the length). */
static void test_transform_accepts_valid_blocks(void)
{
    enumerate();
    float *x = calloc(LIMIT, sizeof *x);
    CHECK(x != NULL);
    if (!x)
        return;
    for (uint64_t b = 1; b <= LIMIT; b++) {
        x[0] = 1.0f;
        int rc = tq_hadamard(x, (size_t)b, (size_t)b, 0);
        CHECKF(rc == (valid_m[b] ? 0 : -1), "tq_hadamard(n = b = %llu): %d", (unsigned long long)b, rc);
        if (rc == 0)
            memset(x, 0, (size_t)b * sizeof *x);
    }
    CHECK(tq_hadamard(x, 96, 64, 0) == -1); /* 64 is valid but does not divide 96 */
    free(x);
}

int main(void)
{
    RUN(test_split_every_length);
    RUN(test_block_every_axis);
    RUN(test_transform_accepts_valid_blocks);
    TEST_MAIN_END();
}
