/* Minimal unit-test harness: each TEST is one counted case; the runner reads
 * "RUN name" (printed before the case starts), "PASS name" / "FAIL name: why" lines. stdout
 * is line-buffered (check.c), so when a case dies (a signal, an abort, exit) every line it
 * printed is out, and tests/run-tests names the case from its unanswered "RUN" line. */
#ifndef TQ_TEST_CHECK_H
#define TQ_TEST_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The running tally (check.c): failed in the current test, passed and failed tests. */
extern int t_failed_here, t_pass, t_fail;
extern const char *t_current;

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

/* RUN_AS(name, fn): the case fn reported under a name made at run time. */
#define RUN_AS(name, fn)                                    \
    do {                                                    \
        t_current = (name);                                 \
        t_failed_here = 0;                                  \
        printf("RUN %s\n", #fn);                            \
        fflush(stdout);                                     \
        fn();                                               \
        if (t_failed_here)                                  \
            t_fail++;                                       \
        else {                                              \
            t_pass++;                                       \
            printf("PASS %s\n", t_current);                 \
        }                                                   \
        fflush(stdout);                                     \
    } while (0)
#define RUN(fn) RUN_AS(#fn, fn)

#define TEST_MAIN_END() \
    do {                                                     \
        printf("%d passed, %d failed\n", t_pass, t_fail);    \
        return t_fail ? 1 : 0;                               \
    } while (0)

/* Helpers shared by the tests, defined in check.c. */

/* 1 when both files can be read and hold the same bytes (streamed, any size). */
int t_files_equal(const char *a, const char *b);
/* Deterministic test data: xorshift64 on *s, uniform in (0, 1), and N(0, 1) by Box-Muller
 * with the two uniforms drawn in a fixed order. */
double t_urand(uint64_t *s);
double t_nrand(uint64_t *s);
/* Scratch directory for a test binary: $TQ_TMP or /tmp. */
const char *t_tmpdir(void);
/* t_tmpdir()/name, in one of 16 rotating buffers (so a few can be alive at once). */
char *t_path(const char *name);
/* Corrupts a file in place: XORs the byte at off with x. The current test fails when that
 * byte cannot be read and written back. */
void t_flip_byte(const char *path, uint64_t off, unsigned char x);
/* Entries of dir whose names start with prefix (partial outputs, leftovers). */
int t_count_prefixed(const char *dir, const char *prefix);
/* 1 when environment variable var is unset, or holds name as one of its space-separated words
 * (TQ_METAL_CASES, TQ_METAL_FIXTURES: run only those cases). */
int t_env_lists(const char *var, const char *name);
/* The bytes of tensor NAME of model m in a new buffer (NULL if absent or unreadable);
 * *nbytes gets their count when nbytes is not NULL. */
struct tq_model;
void *t_read_tensor(const struct tq_model *m, const char *name, uint64_t *nbytes);

#endif
