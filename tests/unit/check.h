/* Minimal unit-test harness: each TEST is one counted case; the runner reads
 * "PASS name" / "FAIL name: why" lines. */
#ifndef TQ_TEST_CHECK_H
#define TQ_TEST_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed_here, t_pass, t_fail;
static const char *t_current;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            if (!t_failed_here)                                                      \
                printf("FAIL %s: %s:%d: %s\n", t_current, __FILE__, __LINE__, #cond); \
            t_failed_here = 1;                                                       \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            if (!t_failed_here) {                                                \
                printf("FAIL %s: %s:%d: %s: ", t_current, __FILE__, __LINE__, #cond); \
                printf(__VA_ARGS__);                                             \
                printf("\n");                                                    \
            }                                                                    \
            t_failed_here = 1;                                                   \
        }                                                                        \
    } while (0)

/* A call returning 0/-1 with a tq_err named `err` in scope. */
#define CHECK_OK(call)                                                                 \
    do {                                                                               \
        if ((call) != 0) {                                                             \
            if (!t_failed_here)                                                        \
                printf("FAIL %s: %s:%d: %s: %s\n", t_current, __FILE__, __LINE__, #call, err.msg); \
            t_failed_here = 1;                                                         \
        }                                                                              \
    } while (0)

#define RUN(fn)                                             \
    do {                                                    \
        t_current = #fn;                                    \
        t_failed_here = 0;                                  \
        fflush(stdout);                                     \
        fn();                                               \
        if (t_failed_here)                                  \
            t_fail++;                                       \
        else {                                              \
            t_pass++;                                       \
            printf("PASS %s\n", #fn);                       \
        }                                                   \
        fflush(stdout);                                     \
    } while (0)

#define TEST_MAIN_END() \
    do {                                                     \
        printf("%d passed, %d failed\n", t_pass, t_fail);    \
        return t_fail ? 1 : 0;                               \
    } while (0)

/* 1 when both files can be read and hold the same bytes (streamed, any size). */
static inline int t_files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    static unsigned char ba[1 << 16], bb[1 << 16];
    while (eq) {
        size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
        eq = na == nb && !memcmp(ba, bb, na) && !ferror(fa) && !ferror(fb);
        if (na < sizeof ba)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return eq;
}

/* Deterministic test data: xorshift64 on *s, uniform in (0, 1), and N(0, 1) by Box-Muller
 * with the two uniforms drawn in a fixed order. */
static inline double t_urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return ((*s >> 11) + 0.5) * 0x1p-53;
}
static inline double t_nrand(uint64_t *s)
{
    double r = sqrt(-2 * log(t_urand(s)));
    return r * cos(6.283185307179586 * t_urand(s));
}

/* Scratch directory for a test binary: $TQ_TMP or /tmp. */
static inline const char *t_tmpdir(void)
{
    const char *d = getenv("TQ_TMP");
    return d && *d ? d : "/tmp";
}

/* t_tmpdir()/name, in one of 16 rotating buffers (so a few can be alive at once). */
static inline char *t_path(const char *name)
{
    static char buf[16][1024];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", t_tmpdir(), name);
    return buf[k];
}

#endif
