/* verify/verify.h — manifests, bit-exact comparison, golden decodes, bundles. */
#ifndef TQ_VERIFY_H
#define TQ_VERIFY_H

#include "common/common.h"

TQ_BEGIN_DECLS

struct cJSON;

#define TQ_SUMS_NAME "SHA256SUMS"
#define TQ_MANIFEST_NAME "tq-manifest.json"
#define TQ_MANIFEST_FORMAT "tq_manifest_v1"
/* The OpenSSF Model Signing signature a directory carries (man tq-formats(5), MODEL
 * SIGNATURES); manifests do not list it, bundles carry it after SHA256SUMS. */
#define TQ_OMS_SIG_NAME "model.sig"

/* Progress of hashing on stderr when it is a TTY (off by default; tools turn it on unless
 * --quiet). */
TQ_API void tq_verify_progress(int enabled);

/* ------------------------------------------------------------ SHA256SUMS */
/* One line of a SHA256SUMS file: "<64 hex>  <path>\n" (what sha256sum -c accepts). */
typedef struct tq_sum_entry {
    char *path;
    unsigned char sha256[32];
} tq_sum_entry;

/* Parse SHA256SUMS text (hostile): every line "<64 hex><2 sep><relative path>", lowercase or
 * uppercase hex, "  " or " *" separator, safe relative paths only, no duplicates. `what`
 * names the file in messages. Entries come back sorted by path. */
TQ_API int tq_sums_parse(const char *text, size_t len, const char *what, tq_sum_entry **out, size_t *n,
                         tq_err *e);
TQ_API void tq_sums_free(tq_sum_entry *v, size_t n);

/* A path a manifest may name: relative, '/'-separated, no empty, "." or ".." component, no
 * backslash, newline or control character. 1 if safe. */
TQ_API int tq_verify_path_ok(const char *path);

/* Regular files under dir, recursively, as sorted relative paths (strcmp order), without
 * SHA256SUMS, tq-manifest.json and model.sig at the top. Symbolic links to regular files
 * count as files; anything else that is not a regular file or directory is an error. */
TQ_API int tq_verify_walk(const char *dir, char ***paths, size_t *n, tq_err *e);

/* -------------------------------------------------------------- manifest */
/* A named byte range of a file with its own hash: a safetensors tensor or an expert block. */
typedef struct tq_mf_range {
    char *name;               /* tensor name, or "layer L expert E" for a block */
    int kind;                 /* TQ_MF_TENSOR or TQ_MF_BLOCK */
    char dtype[16];           /* tensors */
    int ndim;
    uint64_t shape[8];
    int64_t layer, expert;    /* blocks */
    uint64_t offset, nbytes;  /* absolute in the file */
    unsigned char sha256[32];
} tq_mf_range;
enum { TQ_MF_TENSOR = 1, TQ_MF_BLOCK = 2 };

typedef struct tq_mf_file {
    char *path;
    uint64_t size;
    unsigned char sha256[32];
    int safetensors;          /* ranges hold its tensors */
    size_t n_ranges;
    tq_mf_range *ranges;      /* sorted by offset */
} tq_mf_file;

typedef struct tq_manifest {
    size_t n_files;
    tq_mf_file *files;        /* sorted by path */
} tq_manifest;

/* Hash every file under dir with `threads` workers (files in parallel, and the tensors of
 * big files alongside their whole-file hash). Every *.safetensors file must parse; its
 * tensors get dtype, shape, offsets and SHA-256. Expert blocks of moe_flash_v1 layer files
 * described by a split.json get (layer, expert, offsets, SHA-256). */
TQ_API int tq_manifest_build(const char *dir, int threads, tq_manifest **out, tq_err *e);
TQ_API void tq_manifest_free(tq_manifest *m);
TQ_API const tq_mf_file *tq_manifest_find(const tq_manifest *m, const char *path);
/* tq-manifest.json document (caller frees with cJSON_Delete; print with tq_json_print). */
TQ_API struct cJSON *tq_manifest_to_json(const tq_manifest *m, tq_err *e);
/* Parse a tq-manifest.json document (hostile). */
TQ_API int tq_manifest_from_json(const char *text, size_t len, const char *what, tq_manifest **out, tq_err *e);
/* SHA256SUMS text for m (sorted by path). Caller frees. */
TQ_API char *tq_manifest_sums(const tq_manifest *m, size_t *len, tq_err *e);
/* Write dir/SHA256SUMS and dir/tq-manifest.json, each atomically. */
TQ_API int tq_manifest_write(const char *dir, const tq_manifest *m, tq_err *e);
/* tq-verify manifest: build and write, with every file and directory under dir recorded
 * (tq_sources) before it is read and checked before anything is written; one that changed
 * meanwhile fails (TQ_EDATA, naming it) and nothing is written. */
TQ_API int tq_manifest_update(const char *dir, int threads, tq_manifest **out, tq_err *e);

/* ------------------------------------------------------------------ check */
enum tq_problem_kind {
    TQ_PROB_MISMATCH = 1, /* file content differs (sha256 or size) */
    TQ_PROB_RANGE,        /* a tensor or expert block inside a differing file */
    TQ_PROB_MISSING,      /* listed, not present */
    TQ_PROB_EXTRA,        /* present, not listed */
    TQ_PROB_MANIFEST,     /* SHA256SUMS / tq-manifest.json / split.json disagree */
    TQ_PROB_ENTRY,        /* bundle entry refused (unsafe path, link, device, duplicate) */
};

typedef struct tq_problem {
    int kind;
    char *file;
    char *what;           /* tensor name / "layer L expert E" / NULL */
    char *detail;         /* human-readable */
} tq_problem;

typedef struct tq_check_report {
    size_t files_listed, files_ok;
    uint64_t bytes;       /* bytes hashed */
    size_t n;
    tq_problem *v;
} tq_check_report;

/* Verify a directory against its tq-manifest.json (or SHA256SUMS when there is none, or
 * split.json for a split directory without either). Returns 0 when the check ran (the
 * report may hold problems), -1 when it could not run (no manifest at all, unreadable). */
TQ_API int tq_check_dir(const char *dir, int threads, tq_check_report *r, tq_err *e);
/* Verify a bundle written by tq_bundle_pack in one streaming pass, writing nothing. A corrupt or
 * truncated archive is an error (-1). */
TQ_API int tq_check_bundle(const char *path, tq_check_report *r, tq_err *e);
TQ_API void tq_check_report_free(tq_check_report *r);
TQ_API struct cJSON *tq_check_report_json(const tq_check_report *r);
/* "FILE: what: detail" lines, one per problem. */
TQ_API void tq_check_report_print(const tq_check_report *r, FILE *f);

/* ---------------------------------------------------------------- bundles */
/* Deterministic .tar.zst of dir: entries tq-manifest.json, SHA256SUMS, then every file in
 * path order; pax format, mtime 0, uid/gid 0, mode 0644, no atime/ctime. The manifest and
 * sums are generated fresh; when dir already has them they must agree with its content.
 * Files are hashed again while packed, so a file that changes during pack fails it.
 * Output is atomic, under the one rule of output files (tq_afile_check; force: replace an
 * existing non-empty out). out "-": standard output. */
TQ_API int tq_bundle_pack(const char *dir, const char *out, int threads, int level, int force, tq_err *e);
/* Verify and extract a bundle into OUT through OUT.partial-XXXXXX; any problem leaves nothing
 * under OUT. An existing non-empty OUT is refused (TQ_EEXIST) unless force, which replaces it
 * whole at the end (tq_out_dir_check's rule). Progress: phase "unpack" (tq_check_bundle's is
 * "check"), the bytes of the files the manifest lists. */
TQ_API int tq_bundle_unpack(const char *bundle, const char *out, int force, tq_check_report *r, tq_err *e);

/* ------------------------------------------------------ model signatures */
/* OpenSSF Model Signing (the model_signing tool's "key" method): an in-toto Statement v1
 * listing every file with its SHA-256, in a DSSE envelope, in a Sigstore bundle (man
 * tq-formats(5), MODEL SIGNATURES). MODEL is a directory or a single file. */
typedef struct tq_oms_opts {
    const char *sig;            /* the signature file; NULL: model.sig in DIR (next to FILE) */
    const char *const *ignore;  /* more paths to leave out (as given: relative to the current
                                 * directory, or absolute); those outside MODEL are dropped */
    size_t n_ignore;
    int keep_git;               /* sign: hash .git, .gitattributes, .github, .gitignore too */
    int keep_index;             /* sign: hash SHA256SUMS and tq-manifest.json too */
    int allow_symlinks;         /* sign: follow symbolic links to files (else refuse them) */
    int force;                  /* sign: replace an existing non-empty signature file (else refused,
                                 * tq_out_file_check's rule) */
    int threads;
} tq_oms_opts;

typedef struct tq_oms_info {
    char *sig_path;             /* the signature written or read */
    char *name;                 /* the subject's name (the model directory's name) */
    char subject[65];           /* hex SHA-256 over every file's digest, in resource order */
    char key_hint[65];          /* hex SHA-256 of the public key's PEM */
    const char *key_type;       /* "ecdsa-p256", "ecdsa-p384", "ecdsa-p521", "ed25519" */
    size_t files;
    uint64_t bytes;
} tq_oms_info;
TQ_API void tq_oms_info_free(tq_oms_info *info);

/* Hash MODEL and write its signature (atomically) with the PEM private key key_pem (ECDSA
 * P-256/P-384/P-521 or Ed25519, unencrypted). */
TQ_API int tq_oms_sign(const char *model, const char *key_pem, const tq_oms_opts *o, tq_oms_info *info, tq_err *e);
/* Check the signature with the PEM public key pub_pem, then every file of MODEL against it:
 * differing, missing and extra files go into r (0 returned); -1 when the signature is
 * malformed, of another key or not valid, or MODEL cannot be read. */
TQ_API int tq_oms_verify(const char *model, const char *pub_pem, const tq_oms_opts *o, tq_check_report *r,
                         tq_oms_info *info, tq_err *e);
/* Directories: as tq_check_dir, and with pub_pem also tq_oms_verify (its problems added to r). */
TQ_API int tq_check_dir_signed(const char *dir, int threads, const char *pub_pem, tq_check_report *r, tq_oms_info *info,
                               tq_err *e);
/* Bundles: as tq_check_bundle, and with pub_pem also check the bundle's model.sig and every
 * signed file against the bundle's entries (problems into r). */
TQ_API int tq_check_bundle_signed(const char *path, const char *pub_pem, tq_check_report *r, tq_oms_info *info,
                                  tq_err *e);

/* ------------------------------------------------------------- compare */
typedef struct tq_cmp_diff {
    char *tensor;
    char *detail;         /* "only in A", "dtype BF16 vs F16", "first difference at byte N ..." */
} tq_cmp_diff;

typedef struct tq_cmp_report {
    size_t tensors_compared, tensors_equal;
    uint64_t bytes;
    size_t n;
    tq_cmp_diff *v;
} tq_cmp_report;

/* Tensor by tensor, bit-exact, whatever the sharding of a and b (model dirs or files). */
TQ_API int tq_compare_models(const char *a, const char *b, tq_cmp_report *r, tq_err *e);
TQ_API void tq_cmp_report_free(tq_cmp_report *r);
TQ_API struct cJSON *tq_cmp_report_json(const tq_cmp_report *r);

/* ---------------------------------------------------------------- golden */
/* Golden file (tq_golden_v1): {"format": "tq_golden_v1", "prompt": [ids], "max_tokens": N,
 * "tokens": [N ids], "logits_sha256": hex of the SHA-256 of all N x vocab f32 logits}, and,
 * when the model directory has a tokenizer.json, "prompt_text" and "text": the prompt's and
 * the generated tokens' decoded text (optional: files without them are read as before; "text"
 * is left out when a generated id is not the tokenizer's). */
#define TQ_GOLDEN_FORMAT "tq_golden_v1"

typedef struct tq_golden_opts {
    int update;               /* rewrite the golden file (FILE.partial-XXXXXX, renamed) with this
                               * run's result: only a regular file that is absent, empty or a
                               * valid golden file, never one inside the model */
    int threads;              /* runtime compute threads; 0 = default */
    const int32_t *prompt;    /* with update: new prompt (NULL = keep the file's) */
    size_t n_prompt;
    size_t max_tokens;        /* with update: new length (0 = keep the file's, or 8) */
    const char *prompt_text;  /* with update: new prompt as text, encoded with the model's
                                 tokenizer.json (instead of prompt) */
} tq_golden_opts;

typedef struct tq_golden_result {
    int match;                /* tokens and logits hash equal to the golden file */
    int updated;
    size_t n_tokens;
    int32_t *tokens;          /* this run */
    int32_t *expected;        /* the golden file's (NULL when it did not exist) */
    char logits_sha256[65], expected_sha256[65];
    long first_token_diff;    /* -1 when tokens agree */
    char *text, *expected_text; /* decoded generated text: this run's (NULL without a
                                   tokenizer) and the golden file's (NULL when not recorded) */
    int text_differs;         /* both present and different (a tokenizer change) */
} tq_golden_result;

/* Run the runtime's validation decode (greedy) on model with the golden file's prompt and
 * compare generated tokens and the logits hash. */
TQ_API int tq_golden_run(const char *model, const char *golden, const tq_golden_opts *o,
                         tq_golden_result *res, tq_err *e);
TQ_API void tq_golden_result_free(tq_golden_result *res);

/* --------------------------------------------------------------- quality */
/* tq-verify quality: a model (TEST, usually quantized) against its reference (REF, usually the
 * bf16 source). Tensors: TEST's quantized modules are dequantized by tq-convert's own
 * dequantizer (TurboQuant and MLX affine, HF names) to f32 in a scratch directory under
 * $TMPDIR, then every float tensor of REF and TEST is streamed in chunks and compared:
 * relative MSE Σ(ŵ−w)²/Σw² in double, element order. Both models must hold the same float
 * tensors with the same shapes. Evaluation: the runtime's sliding-window evaluation
 * (tq_runner_eval) of both over the same tokens (the text encoded with REF's tokenizer), then
 * KL(REF‖TEST) and top-1 agreement per scored step (tq_run_logits_compare); the two
 * logits files are scratch too. */
typedef struct tq_quality_opts {
    const char *eval_path;    /* text file to evaluate on; NULL: tensors only */
    uint64_t window, stride;  /* sliding window (0: 512, window/2) */
    int threads;              /* 0 = tq_default_threads() */
    int noise;                /* with eval_path: also evaluate REF plus iid Gaussian noise of TEST's
                               * error energy per tensor (tq_quality_noise_model) */
    uint64_t noise_seed;      /* its draws' seed */
} tq_quality_opts;

typedef struct tq_quality_tensor {
    char *name;
    char *klass;              /* module leaf name, e.g. "q_proj", "experts.down_proj", "lm_head" */
    int64_t layer;            /* "layers.<L>." index, -1 without one */
    uint64_t params;
    double err2, sum2;        /* Σ(ŵ−w)², Σw² */
    double rel_mse;           /* err2 / sum2 (0 when sum2 is 0 and err2 is 0) */
} tq_quality_tensor;

typedef struct tq_quality_eval {
    uint64_t tokens, scored, window, stride;
    double ref_ppl, test_ppl, ref_nll, test_nll, ref_top1, test_top1; /* top1: next-token accuracy */
    uint64_t steps, top1_agree;
    double top1_rate, mean_kl, max_kl, max_rel_diff;                  /* tq_run_logits_cmp */
    double kl_stderr;        /* standard error of mean_kl over the scored tokens */
    double nll_diff_stderr;  /* standard error of test_nll - ref_nll (paired per token) */
    /* --noise: the same for REF plus Gaussian noise (has_noise 1) */
    int has_noise;
    uint64_t noise_seed;
    double noise_ppl, noise_nll, noise_top1, noise_top1_rate, noise_mean_kl, noise_max_kl, noise_kl_stderr,
        noise_nll_diff_stderr;
} tq_quality_eval;

typedef struct tq_quality_report {
    size_t n;
    tq_quality_tensor *t;     /* sorted by name */
    size_t n_differ;          /* tensors with err2 > 0 */
    uint64_t params_differ;
    double rel_mse;           /* over the tensors that differ */
    size_t n_classes;
    char **classes;           /* classes of the tensors that differ, sorted */
    double *class_rel_mse;    /* per class, over its differing tensors */
    uint64_t n_layers;        /* highest layer index + 1 (0: no layered tensors) */
    double *layer_rel_mse;    /* [n_layers]: over the layer's differing tensors (0 when none) */
    double *layer_class_rel_mse; /* [n_layers][n_classes], NaN where the layer has none of it */
    int has_eval;
    tq_quality_eval ev;
    char *ref, *test;
} tq_quality_report;

TQ_API int tq_quality_run(const char *ref, const char *test, const tq_quality_opts *o, tq_quality_report *r, tq_err *e);
/* The noise baseline of --noise: writes into dir (a new directory) REF with every tensor of
 * r that differs (err2 > 0) replaced by w + σ·z in f32, σ² = err2 / params (TEST's error
 * energy, spread evenly), z iid standard normal: per tensor, splitmix64 seeded with
 * seed + CRC-32(name), two draws per Box-Muller pair in double, in element order. Other
 * tensors and files are copied as they are. Deterministic. */
TQ_API int tq_quality_noise_model(const char *ref, const tq_quality_report *r, uint64_t seed, const char *dir,
                                  tq_err *e);
TQ_API void tq_quality_report_free(tq_quality_report *r);
TQ_API struct cJSON *tq_quality_report_json(const tq_quality_report *r);
/* The per-layer plot: an SVG document of the per-layer relative MSE (all differing tensors,
 * and one series per class), the same bytes for the same report. Caller frees. */
TQ_API char *tq_quality_svg(const tq_quality_report *r, size_t *len, tq_err *e);

TQ_END_DECLS

#endif
