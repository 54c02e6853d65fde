/* verify/verify_internal.h — pieces shared by manifest, check and bundle code. */
#ifndef TQ_VERIFY_INTERNAL_H
#define TQ_VERIFY_INTERNAL_H

#include "verify/verify.h"

/* tq_mf_file.size of an entry made from SHA256SUMS alone, which lists no sizes. */
#define TQ_MF_SIZE_UNKNOWN UINT64_MAX

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
/* A split directory's layer files and config.json as split.json describes them (man
 * tq-formats(5), MOE_FLASH_V1 AND FLASH_ALIGNED_V1): each present layer file's header parses
 * and agrees with split.json (tq_flash_manifest_check_layer), config.json's streaming block
 * passes tq_flash_streaming_check. What fails is a TQ_PROB_MANIFEST problem on that file; a
 * directory without a loadable split.json adds nothing (check reports that elsewhere). */
int tq_verify_split_layout(const char *dir, tq_check_report *r, tq_err *e);

/* The directory walk behind tq_verify_walk (walk.c). skip(ctx, rel): 1 leaves the file or
 * directory rel out (a directory with everything under it) before it is even looked at;
 * refuse_links: a symbolic link to a file is an error instead of that file. */
typedef struct tq_walk_opts {
    int (*skip)(void *ctx, const char *rel);
    void *ctx;
    int refuse_links;
} tq_walk_opts;
int tq_verify_walk_ex(const char *dir, const tq_walk_opts *o, char ***paths, size_t *n, tq_err *e);

/* ---- model signatures (oms_format.c: text; oms_key.c: keys; oms.c: directories) ---- */
#define TQ_OMS_PAYLOAD_TYPE "application/vnd.in-toto+json"
#define TQ_OMS_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define TQ_OMS_PREDICATE_TYPE "https://model_signing/signature/v1.0"
#define TQ_OMS_BUNDLE_TYPE "application/vnd.dev.sigstore.bundle.v0.3+json"
#define TQ_OMS_MAX_SIG_BYTES (256u << 20)

typedef struct tq_oms_res {
    char *name;                 /* relative path, or "." for a single-file model */
    unsigned char sha256[32];
} tq_oms_res;

/* The statement's content (in-toto Statement v1, model_signing predicate v1.0). */
typedef struct tq_oms_stmt {
    char *name;                 /* subject name */
    unsigned char subject[32];  /* SHA-256 over the resources' digests, in their order */
    int allow_symlinks;
    char **ignore;              /* serialization.ignore_paths (absent when n_ignore is 0) */
    size_t n_ignore;
    tq_oms_res *res;
    size_t n_res;
} tq_oms_stmt;
void tq_oms_stmt_free(tq_oms_stmt *s);
/* The subject digest of a resource list. */
void tq_oms_subject(const tq_oms_res *r, size_t n, unsigned char out[32]);
/* model_signing's order of resource names: component by component, each in byte order. */
int tq_oms_name_cmp(const char *a, const char *b);
/* The payload: the statement as sorted JSON (tq_json_print). Caller frees. */
char *tq_oms_payload(const tq_oms_stmt *s, size_t *len, tq_err *e);
/* Parse a payload (hostile): statement type, predicate type, one subject, files/sha256
 * serialization, resources with safe unique names and their subject digest. `what` names
 * the signature in messages. */
int tq_oms_payload_parse(const char *p, size_t len, const char *what, tq_oms_stmt *s, tq_err *e);

/* The DSSE envelope of a Sigstore bundle. */
typedef struct tq_oms_env {
    unsigned char *payload;
    size_t payload_len;
    char *payload_type;
    unsigned char *sig;
    size_t sig_len;
    char *hint;                 /* verificationMaterial.publicKey.hint, or NULL */
} tq_oms_env;
void tq_oms_env_free(tq_oms_env *env);
/* Parse a bundle (hostile): media type, a public-key verification material, a DSSE envelope
 * with one signature, base64 (standard or URL-safe) payload and signature. */
int tq_oms_bundle_parse(const char *text, size_t len, const char *what, tq_oms_env *env, tq_err *e);
/* The bundle JSON for a payload (type TQ_OMS_PAYLOAD_TYPE), its signature and the key hint. */
char *tq_oms_bundle_make(const unsigned char *payload, size_t plen, const unsigned char *sig, size_t slen,
                         const char *hint, size_t *len, tq_err *e);
/* DSSE pre-authentication encoding of (type, body). Caller frees. */
unsigned char *tq_oms_pae(const char *type, const unsigned char *body, size_t len, size_t *out_len, tq_err *e);
/* Base64 (RFC 4648): encode with the standard alphabet and padding; decode either alphabet,
 * padding optional, nothing else (no whitespace), unused bits zero. */
char *tq_oms_b64_encode(const unsigned char *d, size_t n, tq_err *e);
int tq_oms_b64_decode(const char *s, size_t len, unsigned char **out, size_t *n, const char *what, tq_err *e);

/* Keys (libcrypto EVP). */
typedef struct tq_oms_key tq_oms_key;
int tq_oms_key_load(const char *path, int is_private, tq_oms_key **out, tq_err *e);
void tq_oms_key_free(tq_oms_key *k);
const char *tq_oms_key_type(const tq_oms_key *k);
/* hex SHA-256 of the public key as PEM SubjectPublicKeyInfo (model_signing's key hint) */
const char *tq_oms_key_hint(const tq_oms_key *k);
int tq_oms_key_sign(const tq_oms_key *k, const unsigned char *msg, size_t n, unsigned char **sig, size_t *slen,
                    tq_err *e);
/* 0 when sig is k's signature of msg; -1 (TQ_EDATA) otherwise. */
int tq_oms_key_verify(const tq_oms_key *k, const unsigned char *msg, size_t n, const unsigned char *sig,
                      size_t slen, const char *what, tq_err *e);
/* Fill info for a statement checked or made with k (sig_path and name are taken over). */
void tq_oms_info_set(tq_oms_info *info, const unsigned char subject[32], const tq_oms_key *k, size_t files,
                     uint64_t bytes, char *sig_path, char *name);
/* A signature file's bytes, checked with k: the envelope, then the statement it signs. */
int tq_oms_open(const char *text, size_t len, const char *what, const tq_oms_key *k, tq_oms_stmt *s, tq_err *e);
/* 1 when rel is left out by one of the n ignore paths: that path itself or anything under it. */
int tq_oms_ignored(char *const *ign, size_t n, const char *rel);
/* Compare a signed statement with actual files (sorted by tq_oms_name_cmp, digests NULL when
 * not read): differing, missing and unsigned files into r. ignored(ctx, name): 1 for files
 * the signature leaves out. */
typedef struct tq_oms_file {
    const char *name;
    const unsigned char *sha256;  /* NULL: not hashed (already reported) */
} tq_oms_file;
int tq_oms_compare(const tq_oms_stmt *s, const tq_oms_file *f, size_t n, tq_check_report *r, tq_err *e);

/* compare_views.c: open PATH as a tensor set (model, split directory, rows file). */
struct tq_model;
int tq_verify_open_view(const char *path, const char *other, struct tq_model **out, tq_err *e);

#endif
