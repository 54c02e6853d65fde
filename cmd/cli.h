/* cmd/cli.h — what every tq front-end shares: error printing, --version, and the option
 * tables from which each tool's getopt_long array, value checks and --help are made. */
#ifndef TQ_CLI_H
#define TQ_CLI_H

#include "common/common.h"

#include <stdio.h>

extern const char *tq_prog; /* "tq-convert", set by tq_cli_init */
extern const char *tq_cli_command; /* the tq-verify subcommand being parsed, or NULL */

void tq_cli_init(const char *prog);
/* Print "PROG: msg" (escaped by tq_fput_escaped) and return the exit status for it (1
 * data/io, 2 usage). */
int tq_cli_fail(const tq_err *e);
/* s escaped as tq_sb_escaped does, for printf's %s: every name (file, path, tensor) a tool
 * prints goes through it. The string lives until eight later calls. */
const char *tq_cli_esc(const char *s);
/* Print "PROG: [COMMAND: ]message" + "Try 'PROG [COMMAND ]--help' for more information."
 * to stderr (COMMAND: the subcommand whose table was parsed last, if any); returns 2. */
int tq_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Binary output to standard output (OPT is the option, e.g. "-o -"): refused when standard
 * output is a terminal, as zstd does, 2 after the message; 0 when it is a file or a pipe. */
int tq_cli_stdout_binary_check(const char *opt);
void tq_cli_version(void); /* "PROG (tq) VERSION" on stdout */
/* --resume (tq-convert, tq-split): before a run without it, a note on stderr when
 * OUT.partial-resume is there (an interrupted --resume run, left alone); after a failed run
 * with it, where the finished pieces are kept. */
void tq_cli_resume_note(const char *out, int resume);
/* Before writing OUT: one line on stderr naming every OUT.partial-XXXXXX beside it (a run
 * killed before its end, SIGKILL or a crash, leaves it; tens of GB on a real model) with its
 * size on disk; nothing is removed. tq_cli_resume_note calls it. */
void tq_cli_partials_note(const char *out);
void tq_cli_resume_kept(const char *out, int resume);
/* Print j on stdout with sorted keys and delete it (NULL j = out of memory). Returns 0 or
 * the exit status of the failure. */
struct cJSON;
int tq_cli_print_json(struct cJSON *j);

/* ---- option tables ----
 * Each tool (and each tq-verify subcommand) declares its options once, as an array of
 * tq_opt rows made with the TQ_OPT_* macros below and ended by TQ_OPT_END. From it
 * tq_cli_parse builds the getopt_long array ("--opt VAL", "--opt=VAL", "-o VAL"), checks
 * every value and stores it through the row's target, and tq_cli_help prints --help.
 * -h/--help and --version are added to every table. */
typedef enum tq_opt_kind {
    TQ_OPT_FLAG,   /* no value: stores `min` (1, or TQ_OPT_SET's value) into an integer */
    TQ_OPT_INT,    /* decimal integer in [min, max] */
    TQ_OPT_SIZE,   /* byte count with units (tq_parse_size) in [min, max], a multiple of
                    * `multiple` (TQ_OPT_POW2: a power of two); a bare number other than 0 is
                    * refused ("16" for --ram is never 16 bytes: write 16G, or 16B for bytes)
                    * unless the row is TQ_OPT_BYTES (alignments, where it is bytes) */
    TQ_OPT_CHOICE, /* one of `choices` (case-insensitive); stores the choice's value */
    TQ_OPT_IDS,    /* comma-separated token ids 0..INT32_MAX into a tq_cli_ids */
    TQ_OPT_STR,    /* any string into a const char * (the last one given wins) */
    TQ_OPT_STRS,   /* repeatable: every value appended to a tq_cli_strs */
    TQ_OPT_CALL,   /* call(target, value, why, cap): 0, or -1 with why saying what is wrong */
} tq_opt_kind;

#define TQ_OPT_POW2 (~0ull)

typedef struct tq_opt_choice {
    const char *name;
    long long value;
    int alias; /* accepted but not listed in --help and error messages */
} tq_opt_choice;

/* Values of TQ_OPT_IDS and TQ_OPT_STRS rows; the arrays live until the program exits. */
typedef struct tq_cli_ids {
    int32_t *v;
    size_t n;
} tq_cli_ids;
typedef struct tq_cli_strs {
    const char **v;
    size_t n;
} tq_cli_strs;

typedef struct tq_opt {
    const char *name;       /* long name without "--"; NULL ends the table */
    char short_name;        /* 0: none */
    tq_opt_kind kind;
    void *target;
    int ctype;              /* integer type of target (TQ_CTYPE) for FLAG, INT, SIZE, CHOICE */
    long long min;
    unsigned long long max;
    unsigned long long multiple;
    const tq_opt_choice *choices; /* ends with a NULL name */
    int (*call)(void *target, const char *val, char *why, size_t cap);
    const char *metavar;    /* NULL: none (FLAG), or the choices joined with '|' */
    const char *help;       /* one paragraph; --help wraps it */
    int bare_bytes;         /* TQ_OPT_SIZE: a bare number is bytes (TQ_OPT_BYTES) */
    int out;                /* TQ_OUT_FILE or TQ_OUT_DIR: the value names an output, which the one
                             * rule of outputs governs (man tq-formats(5), OUTPUTS); 0: not one */
    unsigned seen;          /* set by tq_cli_parse: how often the option was given */
} tq_opt;

/* What an output option, operand or implied output is (TQ_CLI_TABLE=outputs lists them all,
 * for tests/cli/outputs-rule.sh, which runs the rule's checks on every one). */
enum { TQ_OUT_FILE = 1, TQ_OUT_DIR = 2 };

/* The integer type behind a target pointer, checked at compile time: an unsupported type
 * makes a negative array size. */
#define TQ_CTYPE(p)                                                                                   \
    ((int)sizeof(char[_Generic((p), int *: 1, unsigned *: 2, long *: 3, unsigned long *: 4,          \
                               long long *: 5, unsigned long long *: 6, default: -1)]))
#define TQ_OPT_TYPED_(p, T) ((void *)(1 ? (p) : (T)0)) /* warns unless p is a T */

#define TQ_OPT_FLAG(name_, sh, p, help_) TQ_OPT_SET(name_, sh, p, 1, help_)
#define TQ_OPT_SET(name_, sh, p, value, help_)                                                        \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_FLAG, .target = (p), .ctype = TQ_CTYPE(p),      \
     .min = (value), .help = help_}
#define TQ_OPT_INT(name_, sh, p, lo, hi, mv, help_)                                                  \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_INT, .target = (p), .ctype = TQ_CTYPE(p),       \
     .min = (lo), .max = (hi), .metavar = mv, .help = help_}
#define TQ_OPT_SIZE(name_, sh, p, lo, hi, mult, mv, help_)                                           \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_SIZE, .target = (p), .ctype = TQ_CTYPE(p),      \
     .min = (lo), .max = (hi), .multiple = (mult), .metavar = mv, .help = help_}
#define TQ_OPT_BYTES(name_, sh, p, lo, hi, mult, mv, help_)                                           \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_SIZE, .target = (p), .ctype = TQ_CTYPE(p),      \
     .min = (lo), .max = (hi), .multiple = (mult), .metavar = mv, .help = help_, .bare_bytes = 1}
#define TQ_OPT_CHOICE(name_, sh, p, list, mv, help_)                                                 \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_CHOICE, .target = (p), .ctype = TQ_CTYPE(p),    \
     .choices = (list), .metavar = mv, .help = help_}
#define TQ_OPT_IDS(name_, sh, p, mv, help_)                                                          \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_IDS, .target = TQ_OPT_TYPED_(p, tq_cli_ids *), \
     .metavar = mv, .help = help_}
#define TQ_OPT_STR(name_, sh, p, mv, help_)                                                          \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_STR, .target = TQ_OPT_TYPED_(p, const char **), \
     .metavar = mv, .help = help_}
#define TQ_OPT_STRS(name_, sh, p, mv, help_)                                                         \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_STRS,                                           \
     .target = TQ_OPT_TYPED_(p, tq_cli_strs *), .metavar = mv, .help = help_}
/* A string option whose value names an output file or directory (every such option is made
 * with these, so that none escapes the enumeration of outputs). */
#define TQ_OPT_OUT_FILE(name_, sh, p, mv, help_)                                                     \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_STR, .target = TQ_OPT_TYPED_(p, const char **), \
     .metavar = mv, .help = help_, .out = TQ_OUT_FILE}
#define TQ_OPT_OUT_DIR(name_, sh, p, mv, help_)                                                      \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_STR, .target = TQ_OPT_TYPED_(p, const char **), \
     .metavar = mv, .help = help_, .out = TQ_OUT_DIR}
#define TQ_OPT_CALL(name_, sh, fn, ctx, mv, help_)                                                   \
    {.name = name_, .short_name = sh, .kind = TQ_OPT_CALL, .target = (ctx), .call = (fn),            \
     .metavar = mv, .help = help_}
#define TQ_OPT_END {.name = NULL}

/* What a user of another tool may type, and what tq takes instead: declared beside a tool's
 * option table (tq_cli_spec.hints, ended by a NULL from). An unknown option or choice value
 * that matches `from` is answered "did you mean --TO?" with the note; others get the nearest
 * option or choice by edit distance, if one is close. Exit 2 either way.
 *   from: "q-bits" (an unknown --q-bits), "-q" (an unknown -q), "method=mlx" (that value of
 *         --method, refused);
 *   to:   "bits", "method=affine", or NULL (the note alone says what to do); checked against
 *         the table like the rows themselves (an option that does not exist is a table bug);
 *   note: whose spelling it is, e.g. "mlx_lm.convert's spelling". */
typedef struct tq_opt_hint {
    const char *from, *to, *note;
} tq_opt_hint;

/* ": did you mean PRE-a, PRE-b or PRE-c?" for the candidates nearest to name[0..len) (at most
 * 1 edit for names up to 4 bytes, 2 beyond, transpositions counting one), "" when none is. */
void tq_cli_nearest(const char *name, size_t len, const char *const *cand, size_t n, const char *pre, char *buf,
                    size_t cap);

typedef struct tq_cli_spec {
    const char *command; /* tq-verify subcommand ("ls"), or NULL for a tool */
    const char *usage;   /* "Usage: ..." line(s), each ending in a newline */
    const char *about;   /* what the tool does, pre-wrapped lines; NULL: nothing */
    const char *epilog;  /* printed after the options (exit status...); NULL: nothing */
    /* --help's "Examples:", NULL-ended: command lines as a user types them, each with an
     * optional "  # what it does"; every one runs as written, in order, tool after tool, on
     * the stand-in models of tests/cli/help-examples.sh */
    const char *const *examples;
    tq_opt *opts;
    const tq_opt_hint *hints; /* NULL: none */
    /* Outputs that are no option: out_operand, the number (1-based) of the operand that names
     * an output of kind out_operand_kind (TQ_OUT_DIR, TQ_OUT_FILE), 0 if none; implied, the
     * outputs written without being named ("DIR/SHA256SUMS"), space-separated, NULL if none. */
    int out_operand, out_operand_kind;
    const char *implied;
    /* Filled by tq_cli_parse: the operands, in order. */
    char **args;
    int n_args;
} tq_cli_spec;

/* With TQ_CLI_TABLE set in the environment, tq_cli_parse prints the table instead (a
 * build-time interface of scripts/completions, which makes the shell completions from it)
 * and returns 1 with *rc 0. TQ_CLI_TABLE=outputs prints the outputs instead, one a line:
 * "--NAME<TAB>KIND", "operand N<TAB>KIND", "implied PATH<TAB>KIND" (KIND file or dir). */
/* Parse argv[1..argc-1] against s->opts (options and operands may be mixed; "--" ends the
 * options). Returns 0 to go on with s->args, or 1 when the program should exit with *rc:
 * 0 after --help or --version, 2 after a usage error (already printed). */
int tq_cli_parse(tq_cli_spec *s, int argc, char **argv, int *rc);
void tq_cli_help(const tq_cli_spec *s, FILE *out);
/* How often the option called name (long name) was given; 0 also for a name not in s. */
unsigned tq_cli_given(const tq_cli_spec *s, const char *name);
/* For every row given on the command line whose target lies inside the struct at `from`
 * (size bytes), copy the target's bytes to the same offset in the struct at `to`: options
 * parsed into a scratch struct, laid over defaults computed after the parse. */
void tq_cli_overlay(const tq_cli_spec *s, const void *from, void *to, size_t size);

/* Operands first .. first+count-1 (those present) that name a HuggingFace cache entry
 * (ORG/NAME through HF_HUB_CACHE / HF_HOME / ~/.cache/huggingface, or a models--ORG--NAME
 * directory) are replaced by its snapshot directory, offline (formats/hf_cache.c); other
 * operands are left as given. 0, or the exit status after the message (an ORG/NAME not in
 * the cache, a cache entry without its snapshot). The strings live until the program exits. */
int tq_cli_hf_models(tq_cli_spec *s, int first, int count);

/* The command line as provenance records it (man tq-formats(5), PROVENANCE): the program's
 * name, every option given to the last tq_cli_parse as "--LONGNAME" [VALUE] in the order
 * given (abbreviations and "=" forms spelled out), except --threads, --progress, --quiet,
 * --json, --force, --dry-run and --resume, which never change an output's bytes, then the operands
 * but number skip_operand (the output directory; -1 keeps all). The strings live until
 * the program exits. -1 when out of memory. */
int tq_cli_command_line(const tq_cli_spec *s, int skip_operand, tq_cli_strs *out);
/* pv for this tool with that command line (call it before changing s->args). -1 (printed)
 * when out of memory. */
struct tq_provenance;
int tq_cli_provenance(const tq_cli_spec *s, int skip_operand, struct tq_provenance *pv);

/* ---- progress (cmd/progress.c) ----
 * Every tool with long phases puts TQ_CLI_PROGRESS_OPT in its table and calls
 * tq_cli_progress_start after parsing: the library's reports (tq_progress) are then shown
 * on stderr as the mode says. auto: tty on a terminal, plain when CI is set (and not
 * "false" or "0"), else nothing; nothing either when the tool prints a JSON report
 * (json_report) unless a mode is asked for. --quiet (quiet) shows nothing in any mode. */
enum { TQ_CLI_PROGRESS_AUTO = 1, TQ_CLI_PROGRESS_TTY, TQ_CLI_PROGRESS_PLAIN, TQ_CLI_PROGRESS_JSON };
extern int tq_cli_progress_mode;
extern const tq_opt_choice tq_cli_progress_choices[];
#define TQ_CLI_PROGRESS_OPT                                                                             \
    TQ_OPT_CHOICE("progress", 0, &tq_cli_progress_mode, tq_cli_progress_choices, NULL,                  \
                  "progress on stderr: tty (a bar with rate and ETA), plain (a line every 10 s and at "   \
                  "the end of each phase), json (one JSON object per line: phase, done, total, "           \
                  "bytes_per_s, eta_s, final) or auto (default: tty on a terminal, plain when CI=true)")
void tq_cli_progress_start(int quiet, int json_report);

#endif
