/* common/common.h — the conventions every tq library folder shares.
 *
 * Errors: a function that can fail returns 0 on success and -1 on failure, after filling
 * a caller-provided tq_err with a code and a message that names the file, and the tensor
 * and byte offset where relevant ("model.safetensors: tensor 'x': data_offsets [8, 4] ...").
 * Front-ends print "tq-NAME: <msg>" and exit with tq_exit_code(). */
#ifndef TQ_COMMON_H
#define TQ_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

/* The version: TQ_VERSION is the string (the Makefile reads it from this line), the numbers
 * are the same version for #if: TQ_VERSION_NUMBER is MAJOR * 10000 + MINOR * 100 + PATCH.
 * tests/cli/install.sh checks in a C and a C++ program that the two agree. */
#define TQ_VERSION "0.1.0"
#define TQ_VERSION_MAJOR 0
#define TQ_VERSION_MINOR 1
#define TQ_VERSION_PATCH 0
#define TQ_VERSION_NUMBER (TQ_VERSION_MAJOR * 10000 + TQ_VERSION_MINOR * 100 + TQ_VERSION_PATCH)

/* TQ_API marks what libtq.so exports: the library is built with -fvisibility=hidden, so a
 * function or variable is visible to a program linking the shared library only when its
 * declaration in a public header carries TQ_API (tests/cli/exports.sh: only tq_ names). */
#if defined(_WIN32)
#define TQ_API
#else
#define TQ_API __attribute__((visibility("default")))
#endif

/* Every public header wraps its declarations in these, so that C++ programs link. */
#ifdef __cplusplus
#define TQ_BEGIN_DECLS extern "C" {
#define TQ_END_DECLS }
#else
#define TQ_BEGIN_DECLS
#define TQ_END_DECLS
#endif

TQ_BEGIN_DECLS

enum tq_errcode {
    TQ_OK = 0,
    TQ_EDATA = 1,   /* malformed or inconsistent input data */
    TQ_EIO = 2,     /* read/write/open failure, disk full */
    TQ_EUSAGE = 3,  /* bad arguments (front-ends exit 2) */
    TQ_ENOMEM = 4,
    TQ_EEXIST = 5,  /* output exists and may not be replaced */
    TQ_EUNSUP = 6,  /* valid input the tool does not handle (unsupported type, ...) */
};

typedef struct tq_err {
    int code;
    char msg[1024];
} tq_err;

/* Fill e (if non-NULL) and return -1. */
TQ_API int tq_fail(tq_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefix an existing message: "prefix: old message". Returns -1. */
TQ_API int tq_err_prefix(tq_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append to an existing message (what was or was not done about it). Returns -1. */
TQ_API int tq_err_suffix(tq_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Process exit status for an error: 2 for usage errors, 1 for everything else. */
TQ_API int tq_exit_code(const tq_err *e);

/* Overflow-checked arithmetic: return 0 and set *out, or return -1 on overflow. */
TQ_API int tq_mul_u64(uint64_t a, uint64_t b, uint64_t *out);
TQ_API int tq_add_u64(uint64_t a, uint64_t b, uint64_t *out);
/* x rounded up to a power-of-two a, overflow-checked; -1 on overflow or a bad a. */
TQ_API int tq_align_up(uint64_t x, uint64_t a, uint64_t *out);

/* Allocation that reports failure through tq_err. */
TQ_API void *tq_malloc(size_t n, tq_err *e);
TQ_API void *tq_calloc(size_t n, size_t size, tq_err *e);
/* Room for element n of an array of *cap elements: arr itself while n < *cap, else arr
 * reallocated to twice the capacity (64 at first; *cap updated). NULL on failure (arr is
 * still valid and still the caller's). */
TQ_API void *tq_grow(void *arr, size_t *cap, size_t n, size_t elem, tq_err *e);
TQ_API char *tq_strdup(const char *s, tq_err *e);
TQ_API char *tq_path_join(const char *dir, const char *name, tq_err *e);

/* ---- strings (str.c, utf8.c) ---- */
/* A growable NUL-terminated string; start from {0}. After a failed allocation appending does
 * nothing and returns -1, and tq_sb_finish reports it, so callers may check once at the end. */
typedef struct tq_sb {
    char *s;
    size_t len, cap;
    int oom;
} tq_sb;
TQ_API int tq_sb_put(tq_sb *b, const char *s, size_t n);
/* Room for n more bytes and the NUL, so the caller may write at s + len (or append from the
 * builder's own bytes, which put could move under it). -1 after a failed allocation. */
TQ_API int tq_sb_reserve(tq_sb *b, size_t n);
TQ_API int tq_sb_str(tq_sb *b, const char *s);
TQ_API int tq_sb_printf(tq_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The string, which the caller frees ("" when nothing was appended), or NULL with TQ_ENOMEM
 * after a failed allocation. Leaves b empty either way. */
TQ_API char *tq_sb_finish(tq_sb *b, tq_err *e);
TQ_API void tq_sb_free(tq_sb *b);
/* The one escaping of names (files, paths, tensors, bundle entries) in everything a tool
 * prints, reports and messages alike: a backslash as \\, a byte below 0x20 or 0x7f as \xNN,
 * every other byte as it is. A name so printed can neither break or forge a line (an
 * "OK: ..." of its own) nor send a terminal escape, and stays readable. */
TQ_API int tq_sb_escaped(tq_sb *b, const char *s);
TQ_API void tq_fput_escaped(FILE *f, const char *s);
/* printf into a new string (caller frees); NULL with TQ_ENOMEM when out of memory. */
TQ_API char *tq_asprintf(tq_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TQ_API char *tq_vasprintf(tq_err *e, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* UTF-8 by RFC 3629: shortest form only, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF, no sequence cut short by the end of the text. U+0000 counts as valid.
 * tq_utf8_next: length (1-4) of the sequence at s[0..len) with its code point in *cp, or -1.
 * tq_utf8_check: 0 when all of s[0..len) is valid; else -1 and *bad (if non-NULL) = the
 * offset of the first invalid sequence. */
TQ_API int tq_utf8_next(const char *s, size_t len, uint32_t *cp);
TQ_API int tq_utf8_check(const char *s, size_t len, size_t *bad);

/* ---- files ---- */
/* Read exactly len bytes at off; a short read is an error naming path and offset. */
TQ_API int tq_pread_full(int fd, void *buf, size_t len, uint64_t off, const char *path, tq_err *e);
TQ_API int tq_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, const char *path, tq_err *e);
TQ_API int tq_write_full(int fd, const void *buf, size_t len, const char *path, tq_err *e);
/* Opens path read-only and returns the descriptor (size in *size when size is non-NULL), or
 * -1 when it cannot be opened or is not a regular file. Every input file tq reads is opened
 * here: it is opened O_NONBLOCK (a FIFO or a device never blocks the open) and checked with
 * fstat before any read, then the flag is cleared. A FIFO, socket, device or directory is
 * refused with TQ_EDATA, "PATH: not a regular file (a FIFO)". _flags adds open(2) flags
 * (O_DIRECT). */
TQ_API int tq_open_regular(const char *path, uint64_t *size, tq_err *e);
TQ_API int tq_open_regular_flags(const char *path, int flags, uint64_t *size, tq_err *e);
/* "a FIFO", "a directory", ... for a st_mode, in messages. */
TQ_API const char *tq_file_kind(unsigned mode);
/* Whole small file (config.json, index.json) into a NUL-terminated buffer; refuses files > max. */
TQ_API int tq_read_small_file(const char *path, size_t max, char **out, size_t *len, tq_err *e);
TQ_API int tq_file_size(const char *path, uint64_t *size, tq_err *e);
TQ_API int tq_is_dir(const char *path);
TQ_API int tq_exists(const char *path);
TQ_API int tq_mkdir_p(const char *path, tq_err *e);
/* Copy a file byte for byte through an atomic output. */
TQ_API int tq_copy_file(const char *src, const char *dst, tq_err *e);
/* Sorted names of the entries of dir but . and .. (not recursive). Free with tq_free_strv. */
TQ_API int tq_list_dir(const char *dir, char ***names, size_t *n, tq_err *e);
TQ_API void tq_free_strv(char **v, size_t n);

/* ---- outputs: nothing incomplete under a final name, nothing replaced unasked ----
 *
 * Publishing (tq_publish): a complete, fsynced partial TMP (a file or a directory, made next
 * to FINAL) takes the name FINAL and FINAL's parent is fsynced. Without TQ_PUBLISH_REPLACE
 * nothing is ever replaced: the rename is renameat2(RENAME_NOREPLACE) on Linux,
 * renamex_np(RENAME_EXCL) on macOS, link(2)+unlink(2) for a file elsewhere (and, where a
 * filesystem has no hard links, a look then a rename), rename(2) for a directory elsewhere
 * (which cannot replace a non-empty directory or a file). If FINAL exists (it appeared while
 * TMP was written) it fails with TQ_EEXIST naming TMP, which is left in place, complete.
 * With TQ_PUBLISH_REPLACE an existing FINAL is replaced: a file by rename(2), a directory by
 * an atomic exchange (RENAME_EXCHANGE / renamex_np RENAME_SWAP) after which the old output,
 * now at TMP, is removed; without an exchange the old directory is first moved aside to
 * FINAL.old-XXXXXX (the one case where an interruption can leave FINAL missing, with the old
 * output under that name). FINAL always holds a complete output, old or new. On any failure
 * but TQ_EEXIST the partial TMP is removed. */
#define TQ_PUBLISH_REPLACE 1
TQ_API int tq_publish(const char *tmp, const char *final_path, int flags, tq_err *e);
/* Replace only the FINAL with this device and inode (the one a tool was told to replace);
 * one that took its place meanwhile is left as it is (TQ_EEXIST, TMP kept). An absent FINAL
 * is published to as without REPLACE. */
TQ_API int tq_publish_over(const char *tmp, const char *final_path, uint64_t dev, uint64_t ino, tq_err *e);
/* FINAL without trailing slashes + suffix. */
TQ_API char *tq_sibling_path(const char *final_path, const char *suffix, tq_err *e);
TQ_API void tq_fsync_parent(const char *path);

/* Atomic output file: data goes to "FINAL.partial-XXXXXX"; commit = fsync + publish; abort (or
 * a failure to write) unlinks the partial file. Every output file follows one rule (man
 * tq-formats(5), OUTPUTS), carried here so that no caller can bend it: tq_afile_check looks
 * at FINAL once, when the tool starts on its output: nothing there (commit creates FINAL and
 * never replaces a file that appeared meanwhile: TQ_EEXIST naming FINAL and the kept
 * partial), an empty regular file (it gives way at commit, if it is still that empty file),
 * a non-empty regular file (refused, TQ_EEXIST "use --force to replace it", unless
 * TQ_AFILE_REPLACE: then that file, this device and inode, is replaced atomically at commit
 * and nothing that took its place meanwhile), anything else (tq_out_kind_check: TQ_EUSAGE). */
typedef struct tq_afile {
    int fd;
    int flags;
    char *final_path;
    char *tmp_path;
    int had_final, final_empty;    /* a regular file was at FINAL at check (an empty one) ... */
    uint64_t final_dev, final_ino; /* ... this one */
} tq_afile;
#define TQ_AFILE_REPLACE 1 /* --force: replace the non-empty regular file FINAL is at check */
/* tq_afile_check + tq_afile_create. */
TQ_API int tq_afile_open(tq_afile *f, const char *final_path, int flags, tq_err *e);
/* The refusals and what FINAL is now, without making the partial yet (for a tool that looks at
 * its output when it starts but writes it only at the end, or whose partial must not sit among
 * its inputs meanwhile); tq_afile_create makes it. On failure f holds nothing to abort. */
TQ_API int tq_afile_check(tq_afile *f, const char *final_path, int flags, tq_err *e);
TQ_API int tq_afile_create(tq_afile *f, tq_err *e);
/* 0 when commit would publish now: FINAL absent, or still the file seen at check; else the
 * TQ_EEXIST of a FINAL that appeared (for a tool publishing several files, before the first). */
TQ_API int tq_afile_ready(const tq_afile *f, tq_err *e);
/* fsync + close, without publishing (commit does it if not done); on failure, aborts. */
TQ_API int tq_afile_sync(tq_afile *f, tq_err *e);
TQ_API int tq_afile_commit(tq_afile *f, tq_err *e);
TQ_API void tq_afile_abort(tq_afile *f);
/* Close the partial file and leave it where it is; returns its path (caller frees). */
TQ_API char *tq_afile_keep(tq_afile *f);
/* A file this process owns (inside its partial output directory, its journal), written whole
 * through tq_afile_open(path, TQ_AFILE_REPLACE): the file there now, if any, is replaced
 * atomically. Not for an output a user named: that one is checked by tq_afile_check when the
 * tool starts, and written through that tq_afile. */
TQ_API int tq_write_file_atomic(const char *path, const void *data, size_t len, tq_err *e);
/* What an output may replace: only a regular file (dir 0), or a directory or regular file
 * (dir 1; a regular file as an output directory is the caller's to refuse). A device
 * (/dev/null, /dev/stdout), a FIFO, a socket or a symbolic link (never followed), and for a
 * file a directory, is refused untouched: TQ_EUSAGE naming what it is. --force changes
 * nothing here. tq_afile_open, tq_out_file_check and tq_out_dir_check call it. */
TQ_API int tq_out_kind_check(const char *path, int dir, tq_err *e);
/* The refusals of tq_afile_check(force ? TQ_AFILE_REPLACE : 0) alone, for a tool to say them
 * before any work: tq_out_kind_check, then an existing non-empty regular file is refused
 * (TQ_EEXIST, "use --force to replace it") unless force. */
TQ_API int tq_out_file_check(const char *path, int force, tq_err *e);

/* Atomic output directory: built as "FINAL.partial-XXXXXX" and published by commit. Without
 * TQ_ADIR_REPLACE a non-empty FINAL is refused at open, an empty one gives way at commit
 * (unless something was put in it), and one that appeared meanwhile makes commit fail with
 * TQ_EEXIST, keeping the partial directory and naming it; with TQ_ADIR_REPLACE the FINAL that
 * existed at open is swapped atomically (tq_publish_over), one that appeared meanwhile is
 * refused the same way. Abort, or any other failure, removes the partial tree. */
typedef struct tq_adir {
    char *final_path;
    char *tmp_path;
    int flags;
    int had_final, final_empty;    /* FINAL was a directory at open (an empty one) ... */
    uint64_t final_dev, final_ino; /* ... this one */
} tq_adir;
#define TQ_ADIR_REPLACE 1
/* TQ_ADIR_RESUME (--resume): the partial directory is FINAL.partial-resume, made if absent and
 * reused if there (a directory, not a link); abort and a signal keep it (tq_partials_keep). */
#define TQ_ADIR_RESUME 2
#define TQ_RESUME_SUFFIX ".partial-resume"
TQ_API int tq_adir_open(tq_adir *d, const char *final_path, int flags, tq_err *e);
/* The refusals of tq_adir_open alone: 0 when open would go ahead (tq_out_dir_check's rule
 * after its input check, REPLACE standing for --force). */
TQ_API int tq_adir_check(const char *final_path, int flags, tq_err *e);
/* The one rule of every tool's OUTPUT_DIR, before anything is read or written: it may not be,
 * hold or lie inside the input in (NULL: none); tq_out_kind_check (a device, FIFO, socket or
 * symbolic link: TQ_EUSAGE); an existing OUT must be a directory, and a
 * non-empty one is refused (TQ_EEXIST, "use --force to replace it") unless force, in which case
 * tq_adir_open(TQ_ADIR_REPLACE) swaps it whole at the end. */
TQ_API int tq_out_dir_check(const char *out, const char *in, int force, tq_err *e);
TQ_API int tq_adir_commit(tq_adir *d, tq_err *e);
TQ_API void tq_adir_abort(tq_adir *d);
/* Leave the partial directory where it is; returns its path (caller frees). */
TQ_API char *tq_adir_keep(tq_adir *d);
/* The partial outputs open in this process (partials.c): tq_afile_* and tq_adir_* add
 * theirs at open and forget them at commit, abort and keep; tq_partials_remove_all, for a
 * front-end interrupted by a signal, removes every one still open (a directory with all it
 * holds) and returns how many it removed; it leaves the registry locked, for the exit. */
TQ_API void tq_partials_add(const char *path);
TQ_API void tq_partials_forget(const char *path);
TQ_API size_t tq_partials_remove_all(void);
/* The signals a front-end blocks in every thread and takes in its own stop thread (cmd/cli.c):
 * while one of them is pending, tq_partials_forget never returns, so an output is never
 * published (nor its partial forgotten) once an interruption has arrived but before the stop
 * thread has woken to remove the partials and exit. */
TQ_API void tq_partials_stop_signals(const sigset_t *set);
/* A partial kept on purpose for a later --resume (one per process; NULL forgets it): what an
 * interrupted front-end names instead of removing it. */
TQ_API void tq_partials_keep(const char *path);
TQ_API const char *tq_partials_kept(void);
TQ_API void tq_rm_tree(const char *path); /* rm -rf, not following symlinks */
/* A new private scratch directory $TMPDIR/PREFIX-XXXXXX (/tmp without TMPDIR); the caller
 * removes it (tq_rm_tree) and frees the path. */
TQ_API char *tq_temp_dir(const char *prefix, tq_err *e);
TQ_API int tq_dir_is_empty(const char *path);

/* Outputs against inputs, before anything is written: fails (TQ_EUSAGE, exit 2, one message
 * naming both) when OUT is IN (same device and inode, or the same path), lies inside the
 * directory IN, or would hold IN. OUT need not exist yet. */
TQ_API int tq_check_out_in(const char *out, const char *in, tq_err *e);
/* Absolute path with symbolic links resolved as far as the path exists; the part that does
 * not exist yet is appended with "." and ".." resolved. */
TQ_API char *tq_path_canonical(const char *path, tq_err *e);

/* Identity of an input: when any of it differs later, the input changed. */
struct stat;
typedef struct tq_file_id {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
    int is_dir;
    int has_head;
    unsigned char head[32]; /* SHA-256 of the first 64 KiB of a regular file */
} tq_file_id;
TQ_API void tq_file_id_stat(const struct stat *st, tq_file_id *id); /* the stat fields only */
/* "size 1 -> 2, mtime_ns ..." for the fields that differ; "" when none does. */
TQ_API void tq_file_id_diff(const tq_file_id *a, const tq_file_id *b, char *buf, size_t cap);
/* The inputs a tool reads over time. Add each input before opening it (a directory adds
 * itself and everything under it; symbolic links to files are followed); check before
 * publishing the output: TQ_EDATA naming the first input that changed and how. */
typedef struct tq_sources_names {
    char **v; /* a directory's entries when it was added, sorted */
    size_t n;
    int known; /* 0: a file, or a directory that could not be listed */
} tq_sources_names;
typedef struct tq_sources {
    size_t n, cap;
    char **paths;
    tq_file_id *ids;
    tq_sources_names *names;
} tq_sources;
TQ_API int tq_sources_add(tq_sources *s, const char *path, tq_err *e);
/* path alone, not what is under it: a directory's own identity changes when an entry is
 * added, removed or renamed in it. */
TQ_API int tq_sources_add_entry(tq_sources *s, const char *path, tq_err *e);
TQ_API int tq_sources_check(const tq_sources *s, tq_err *e);
/* The test hook of every check of inputs (TQ_PAUSE_BEFORE_CHECK=1: SIGSTOP before the first),
 * for a tool that checks its inputs its own way (tq-rowlayout's source identity). */
TQ_API void tq_test_pause_before_check(void);
TQ_API void tq_sources_free(tq_sources *s);
/* tq_sources_check, except that the paths in own (this process's outputs inside a watched
 * directory: their partials and final names) are no inputs: a change to one of them, or to a
 * watched directory's times because they came, went or were renamed there, is no change. */
TQ_API int tq_sources_check_own(const tq_sources *s, const char *const *own, size_t n_own, tq_err *e);
/* tq_sources_check_own of the outputs' partials and final names, up to publishing f (n of
 * them) or d: on a change every partial output is kept (closed) and the message ends with
 * where they are. */
TQ_API int tq_sources_check_afiles(const tq_sources *s, tq_afile *const *f, size_t n, tq_err *e);
TQ_API int tq_sources_check_afile(const tq_sources *s, tq_afile *f, tq_err *e);
TQ_API int tq_sources_check_adir(const tq_sources *s, tq_adir *d, tq_err *e);

/* Resumable outputs (resume.c; man tq-formats(5), RESUME JOURNAL). The journal DIR/.tq-resume
 * holds the command's identity and one line per finished piece (a file under DIR: name, size,
 * SHA-256, and a line of the caller's own, extra). tq_resume_open locks DIR against a second
 * run, reads the journal (refusing another command's: TQ_EUSAGE when an option differs, else
 * TQ_EDATA, naming it), keeps every recorded piece whose bytes still match (checked on threads,
 * "verify" progress), removes every other file under DIR (directories stay) and writes the
 * journal anew. A piece is recorded once it is complete, fsynced and renamed: tq_resume_done
 * hashes DIR/name, _done_sha takes a hash the caller computed; either appends one line and
 * fsyncs it (thread-safe). tq_resume_finish removes the journal before DIR is published. */
typedef struct tq_resume tq_resume;
struct cJSON;
/* The identity: one line of canonical JSON with the tool, tq's version, options (taken) and
 * every input file's name under the input, size, mtime and head hash. Caller frees. */
TQ_API char *tq_resume_identity(const char *tool, const tq_sources *src, struct cJSON *options, tq_err *e);
TQ_API int tq_resume_open(tq_resume **r, const char *dir, const char *identity, int threads, int quiet, tq_err *e);
/* The extra of a kept piece ("" when none), its size and hash (either may be NULL), or NULL:
 * not kept (redo it). r may be NULL. */
TQ_API const char *tq_resume_have(const tq_resume *r, const char *name, uint64_t *size, unsigned char sha[32]);
/* Pieces kept, and recorded but dropped (missing, changed). */
TQ_API void tq_resume_counts(const tq_resume *r, size_t *kept, size_t *dropped);
TQ_API int tq_resume_done(tq_resume *r, const char *name, const char *extra, tq_err *e);
TQ_API int tq_resume_done_sha(tq_resume *r, const char *name, uint64_t size, const unsigned char sha[32], const char *extra,
                              tq_err *e);
TQ_API int tq_resume_finish(tq_resume *r, tq_err *e);
TQ_API void tq_resume_close(tq_resume *r);

/* Test hook: with TQ_CRASH_AT_STEP=N in the environment the process SIGKILLs itself at the
 * N-th call (the step points between the system calls of publishing and of removing). */
TQ_API void tq_test_step(void);

/* ---- hashing (libcrypto EVP) ---- */
typedef struct tq_sha256 tq_sha256;
TQ_API tq_sha256 *tq_sha256_new(void);
TQ_API void tq_sha256_update(tq_sha256 *h, const void *data, size_t len);
TQ_API void tq_sha256_final(tq_sha256 *h, unsigned char out[32]); /* also frees h */
TQ_API void tq_sha256_buf(const void *data, size_t len, unsigned char out[32]);
TQ_API void tq_hex(const unsigned char *d, size_t n, char *out); /* out has 2n+1 bytes */
/* 64 hex digits (either case) at s into 32 bytes; -1 at the first that is not one (a
 * shorter string fails at its NUL). */
TQ_API int tq_unhex32(const char *s, unsigned char out[32]);
TQ_API int tq_sha256_file(const char *path, unsigned char out[32], uint64_t *size, tq_err *e);
/* Hash [off, off+len) of an open file. */
TQ_API int tq_sha256_range(int fd, uint64_t off, uint64_t len, const char *path, unsigned char out[32], tq_err *e);

/* ---- JSON (cJSON) ---- */
struct cJSON;
/* Sort every object's keys (recursively, strcmp order) so printed JSON is deterministic. */
TQ_API void tq_json_sort(struct cJSON *j);
/* Sorted, pretty-printed (2-space indent), newline-terminated. Caller frees. */
TQ_API char *tq_json_print(struct cJSON *j, tq_err *e);
/* Write JSON atomically to path (sorted keys), as tq_write_file_atomic (a file this process owns). */
TQ_API int tq_json_write_file(const char *path, struct cJSON *j, tq_err *e);
/* One JSON value in exactly s[0..len) (no NUL needed), followed by nothing but JSON
 * whitespace. NULL otherwise; then *at (if non-NULL) is the byte offset of the problem and
 * *trailing (if non-NULL) is 1 when a whole value parsed but other bytes follow it. */
TQ_API struct cJSON *tq_json_parse(const char *s, size_t len, size_t *at, int *trailing);
/* Parse a JSON file of at most max bytes (tq_json_parse: one value, nothing after it, and
 * no object holding a key twice); the error names the file (and the repeated key). */
TQ_API int tq_json_read_file(const char *path, size_t max, struct cJSON **out, tq_err *e);
/* Largest integer a JSON number is taken to hold exactly. cJSON parses numbers as doubles:
 * every integer up to 2^53 - 1 survives, but 2^53 is also what 2^53 + 1 becomes, so it and
 * everything above are refused (when read) and never written. */
#define TQ_JSON_MAX_INT 9007199254740991.0
/* A JSON number that is an exact non-negative integer (<= TQ_JSON_MAX_INT) into *out; -1
 * otherwise. */
TQ_API int tq_json_u64(const struct cJSON *v, uint64_t *out);
/* Add key: v as a JSON number (exact for v <= TQ_JSON_MAX_INT). NULL when out of memory. */
TQ_API struct cJSON *tq_json_add_u64(struct cJSON *obj, const char *key, uint64_t v);
/* Canonical JSON (json_canonical.c) = Python json.dumps(v, sort_keys=True): keys sorted by
 * code point, ", " and ": " separators, non-ASCII and control characters as lowercase \uXXXX
 * escapes. Refuses (TQ_EUNSUP) what cJSON cannot carry exactly: non-integer numbers,
 * |n| > TQ_JSON_MAX_INT, duplicate keys, invalid UTF-8, U+0000. cJSON_Raw nodes are copied
 * verbatim. Caller frees. */
TQ_API char *tq_json_canonical(const struct cJSON *j, tq_err *e);
/* Lexical pre-check of JSON text for tq_json_canonical: every number token is a plain
 * integer and no string holds \u0000 (cJSON would silently change both). */
TQ_API int tq_json_canonical_text_ok(const char *json, size_t len, tq_err *e);

/* ---- dry runs (out_plan.c) ----
 * The files an output will hold, as a dry run predicts them: names relative to the output
 * directory, exact sizes. Start from {0}. */
typedef struct tq_out_file {
    char *name;
    uint64_t size;
} tq_out_file;
typedef struct tq_out_plan {
    tq_out_file *v;
    size_t n, cap;
} tq_out_plan;
TQ_API int tq_out_plan_add(tq_out_plan *p, const char *name, uint64_t size, tq_err *e);
/* A JSON file as tq_json_write_file would write j (sorted keys, two-space indents). */
TQ_API int tq_out_plan_add_json(tq_out_plan *p, const char *name, struct cJSON *j, tq_err *e);
TQ_API void tq_out_plan_sort(tq_out_plan *p); /* by name */
TQ_API uint64_t tq_out_plan_total(const tq_out_plan *p);
TQ_API struct cJSON *tq_out_plan_json(const tq_out_plan *p); /* [{"name", "size"}...], NULL out of memory */
TQ_API void tq_out_plan_free(tq_out_plan *p);

/* ---- free space (space.c) ---- */
/* Bytes path holds on disk (st_blocks), a directory with everything under it (symbolic links
 * not followed); 0 when it is not there. */
TQ_API uint64_t tq_tree_bytes(const char *path);
/* Bytes available to this user on the filesystem the output `out` will be created on (its
 * parent directory's): 0, or -1 when statvfs cannot say. TQ_FAKE_FREE_BYTES=SIZE in the
 * environment stands in for the answer (the tests' full disk). */
TQ_API int tq_space_available(const char *out, uint64_t *avail);
/* Before a long write of need bytes to out: TQ_EIO with both numbers and the filesystem when
 * need > available + credit (credit: bytes already written that the run keeps, a --resume
 * directory's). 0 when there is room or statvfs cannot say. */
TQ_API int tq_space_check(const char *out, uint64_t need, uint64_t credit, tq_err *e);

/* ---- misc ---- */
/* "4096", "512M", "1.5G", "2GiB", "16k": binary units. Returns -1 on bad syntax/overflow. */
TQ_API int tq_parse_size(const char *s, uint64_t *out);
/* The same, and *unit: 1 when s ends in a unit (K, M, G, T with optional i and B, or B
 * alone: "16B" is sixteen bytes), 0 for a bare number ("16"), which the option tables refuse
 * for a size (cmd/opts.c: "16" for --ram is never meant as 16 bytes). */
TQ_API int tq_parse_size_unit(const char *s, uint64_t *out, int *unit);
/* A canonical unsigned decimal at the start of s: one or more ASCII digits, no sign, no
 * space, no leading zero ("0" itself is fine, "00" and "07" are not), value <= max (checked
 * without overflow). Returns the byte after the digits with *out set, or NULL (*out untouched).
 * The caller decides what may follow (tensor-name indices: a '.'; a whole string: NUL). */
TQ_API const char *tq_parse_udec(const char *s, uint64_t max, uint64_t *out);
/* "3,1,4": comma-separated decimal token ids into a new array (free it), each 0..INT32_MAX.
 * Digits only: no sign, no spaces, no empty item (",1", "1,,2", "1," are refused) and at
 * least one id. Returns -1 with a message naming the bad item on bad syntax or range. */
TQ_API int tq_parse_ids(const char *s, int32_t **out, size_t *n, tq_err *e);
/* The same from buf[len] (NUL-terminated there, trimmed in place), with white space around the
 * ids; none at all: no ids (*ids NULL, *n 0). A NUL byte inside is refused with its offset. */
TQ_API int tq_parse_id_text(char *buf, size_t len, int32_t **ids, size_t *n, tq_err *e);
/* Human-readable bytes, e.g. "1.50 GiB". */
TQ_API void tq_format_size(uint64_t n, char *buf, size_t cap);
/* Worker threads when none are asked for: the CPUs this process may run on
 * (sched_getaffinity: taskset, cpusets), fewer under a cgroup CPU quota, 1..256. */
TQ_API int tq_default_threads(void);
/* The CPU limit of this process's cgroups, quota / period rounded up (the smallest on the
 * way up each hierarchy), read from proc_cgroup (/proc/self/cgroup) and the cgroup mounts
 * under fs_root (/sys/fs/cgroup): v2 cpu.max, v1 cpu/cpu.cfs_quota_us and
 * cpu.cfs_period_us. 0 when there is no limit or nothing can be read. */
TQ_API int tq_cgroup_cpus(const char *proc_cgroup, const char *fs_root);
TQ_API double tq_now(void);           /* monotonic seconds */
TQ_API uint64_t tq_peak_rss(void);    /* bytes (VmHWM on Linux, ru_maxrss elsewhere) */
TQ_API uint32_t tq_crc32(const void *data, size_t len); /* zlib-compatible CRC-32 */

/* Progress of a long phase ("quantize", "hash", "compress", ...). Library code reports and
 * never prints: each report goes to the one sink a front-end installs (cmd/progress.c
 * renders --progress), and nowhere when none is installed or the phase was started quiet.
 * The sink is called with done never decreasing within a phase, from tq_progress_add
 * (under tq_work_run's lock when reported through tq_work_progress) and, with final set,
 * once from tq_progress_end. */
typedef void (*tq_progress_sink)(void *ctx, const char *phase, uint64_t done, uint64_t total, int final);
TQ_API void tq_progress_set_sink(tq_progress_sink fn, void *ctx);
typedef struct tq_progress {
    const char *label; /* the phase */
    uint64_t total, done;
    double last;
    int enabled;
} tq_progress;
TQ_API void tq_progress_init(tq_progress *p, const char *label, uint64_t total, int quiet);
TQ_API void tq_progress_add(tq_progress *p, uint64_t n);
TQ_API void tq_progress_end(tq_progress *p);

/* ---- work queue (work.c) ----
 * tq_work_run hands items 0, 1, ..., count-1, in that order, to `threads` workers (the
 * calling thread is worker 0; fewer when count is smaller or a thread cannot be started) and
 * returns when all are done: 0, or -1 with the error of the first item that failed, after
 * which no further item is handed out. fn does one item; worker (0..threads-1) indexes the
 * caller's per-worker state. Results must not depend on which worker ran an item. */
typedef struct tq_work tq_work;
typedef int (*tq_work_fn)(tq_work *w, void *ctx, int worker, uint64_t item, tq_err *e);
TQ_API int tq_work_run(uint64_t count, int threads, tq_work_fn fn, void *ctx, tq_progress *prog, tq_err *e);
/* The worker's buffer of `size` bytes (the same size on every call of a run): zeroed and
 * 4096-byte aligned (fit for O_DIRECT) when first asked for, then kept, as its caller left it,
 * for the worker's later items; freed when the run ends. NULL with e filled when out of memory. */
TQ_API void *tq_work_scratch(tq_work *w, int worker, size_t size, tq_err *e);
/* Add n to the run's progress (prog of tq_work_run; nothing when it was NULL), under the lock. */
TQ_API void tq_work_progress(tq_work *w, uint64_t n);
/* The ordered part: tq_work_turn(w, item) waits until every earlier item has called
 * tq_work_turn_done, so what comes between the two runs one item at a time in item order.
 * Returns -1 when the run has failed meanwhile (fn then returns -1; the first error stands).
 * A run that uses turns calls both for every item. */
TQ_API int tq_work_turn(tq_work *w, uint64_t item);
TQ_API void tq_work_turn_done(tq_work *w);

TQ_END_DECLS

#endif
