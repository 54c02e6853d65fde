/* verify/verify_internal.h — pieces shared by manifest, check and bundle code. */
#ifndef TQ_VERIFY_INTERNAL_H
#define TQ_VERIFY_INTERNAL_H

#include "verify/verify.h"

/* tq_mf_file.size of an entry made from SHA256SUMS alone, which lists no sizes. */
#define TQ_MF_SIZE_UNKNOWN UINT64_MAX

int tq_verify_parse_hex32(const char *s, unsigned char out[32]);

/* A hash over [off, off+len) of a byte stream. */
typedef struct tq_vh_range {
    uint64_t off, len;
    unsigned char out[32];
    uint64_t seen;            /* bytes fed; < len when the stream ended early */
    tq_sha256 *h;
} tq_vh_range;

/* Feeds one pass over a stream (starting at byte `pos`) to a whole-stream hash and to every
 * range it crosses. Ranges must be sorted by off. */
typedef struct tq_vhasher {
    tq_sha256 *whole;
    tq_vh_range *r;
    size_t n, cursor;
    uint64_t pos;
} tq_vhasher;

int tq_vh_init(tq_vhasher *h, int want_whole, uint64_t pos, tq_vh_range *r, size_t n, tq_err *e);
void tq_vh_feed(tq_vhasher *h, const void *data, size_t len);
/* Finalizes every hash (also on error paths: always call it). */
void tq_vh_finish(tq_vhasher *h, unsigned char whole[32]);

/* One file to hash: the whole file and/or ranges of it. */
typedef struct tq_vh_task {
    const char *path;
    int want_whole;
    tq_vh_range *r;           /* sorted by off */
    size_t n;
    uint64_t size_hint;       /* for scheduling */
    /* results */
    unsigned char whole[32];
    uint64_t size;            /* bytes read for the whole hash */
    int failed;
    tq_err err;
} tq_vh_task;

/* Run every task with `threads` workers; a failing task sets failed/err and the others go on.
 * Big files with ranges are hashed as a whole-file job and range jobs in parallel. */
int tq_vh_run(tq_vh_task *t, size_t n, int threads, tq_err *e);

/* Report building. */
int tq_report_add(tq_check_report *r, int kind, const char *file, const char *what,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void tq_report_sort(tq_check_report *r);
/* Compare a file's hashes (task results) with its manifest entry; add problems to r. */
void tq_report_compare_file(tq_check_report *r, const tq_mf_file *want, const tq_vh_task *t);

/* Range descriptions for a manifest file entry (sorted by offset). */
int tq_mf_ranges_for(const tq_mf_file *f, tq_vh_range **out, tq_err *e);

/* Consistency of SHA256SUMS with a manifest: adds TQ_PROB_MANIFEST problems. */
void tq_report_sums_vs_manifest(tq_check_report *r, const tq_sum_entry *s, size_t ns,
                                const tq_manifest *m);

/* Compare two open models tensor by tensor (compare.c). */
struct tq_model;
int tq_compare_model_objs(const struct tq_model *a, const struct tq_model *b, tq_cmp_report *r, tq_err *e);

/* split.json (split_blocks.c): expert blocks of layer files as named ranges. */
int tq_verify_split_blocks(const char *dir, tq_manifest *m, tq_err *e);
int tq_verify_split_merge(const char *dir, tq_manifest *m, tq_check_report *r, tq_err *e);
int tq_verify_manifest_from_split(const char *dir, tq_manifest **out, tq_err *e);

#endif
