/* cmd/opts.c — option tables: getopt_long array, value checks and --help from one table. */
#include "cmd/cli.h"
#include "formats/formats.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HELP_WIDTH 80 /* --help lines are wrapped to this many columns */
#define HELP_COL 26   /* help text starts at most this far right */

/* ------------------------------------------------------------ integer targets */
static const struct {
    long long lo;
    unsigned long long hi;
} ctype_range[] = {
    [1] = {INT_MIN, INT_MAX},   [2] = {0, UINT_MAX},   [3] = {LONG_MIN, LONG_MAX},
    [4] = {0, ULONG_MAX},       [5] = {LLONG_MIN, LLONG_MAX}, [6] = {0, ULLONG_MAX},
};

/* A value in [LLONG_MIN, ULLONG_MAX]: negative ones in s, the others in u. */
typedef struct ival {
    int neg;
    long long s;
    unsigned long long u;
} ival;

static ival ival_of(long long v)
{
    return v < 0 ? (ival){1, v, 0} : (ival){0, v, (unsigned long long)v};
}

static int ival_in(ival v, long long min, unsigned long long max)
{
    if (v.neg)
        return v.s >= min;
    return v.u <= max && (min <= 0 || v.u >= (unsigned long long)min);
}

static void store_int(const tq_opt *o, ival v)
{
    long long s = v.neg ? v.s : (long long)v.u; /* signed targets: v.u <= their maximum */
    switch (o->ctype) {
    case 1: *(int *)o->target = (int)s; break;
    case 2: *(unsigned *)o->target = (unsigned)v.u; break;
    case 3: *(long *)o->target = (long)s; break;
    case 4: *(unsigned long *)o->target = (unsigned long)v.u; break;
    case 5: *(long long *)o->target = s; break;
    case 6: *(unsigned long long *)o->target = v.u; break;
    }
}

static size_t ctype_size(int ct)
{
    static const size_t size[] = {0, sizeof(int), sizeof(unsigned), sizeof(long), sizeof(unsigned long),
                                  sizeof(long long), sizeof(unsigned long long)};
    return size[ct];
}

/* ------------------------------------------------ memory kept until the exit */
static void **owned;
static size_t n_owned, cap_owned;

static void owned_free(void)
{
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    owned = NULL;
    n_owned = cap_owned = 0;
}

/* Keep p (replacing old, which is freed) until the program exits. -1: out of memory. */
static int owned_keep(void *p, void *old)
{
    for (size_t i = 0; old && i < n_owned; i++)
        if (owned[i] == old) {
            free(old);
            owned[i] = p;
            return 0;
        }
    if (n_owned == cap_owned) {
        size_t cap = cap_owned ? 2 * cap_owned : 8;
        void **grown = realloc(owned, cap * sizeof *grown);
        if (!grown)
            return -1;
        if (!owned)
            atexit(owned_free);
        owned = grown;
        cap_owned = cap;
    }
    owned[n_owned++] = p;
    return 0;
}

/* ----------------------------------------------------------- table checking */
/* A mistake in a tool's table is a programming error: say which row, and stop. */
static void table_bug(const tq_opt *o, const char *what)
{
    fprintf(stderr, "%s: internal error: option table row '--%s': %s\n", tq_prog, o->name ? o->name : "?", what);
    abort();
}

static void check_table(const tq_opt *opts)
{
    for (const tq_opt *o = opts; o->name; o++) {
        if (!*o->name || o->name[0] == '-' || strchr(o->name, '='))
            table_bug(o, "bad long name");
        if (!strcmp(o->name, "help") || !strcmp(o->name, "version") || o->short_name == 'h')
            table_bug(o, "--help, -h and --version are added to every table");
        if (o->short_name && !isalnum((unsigned char)o->short_name))
            table_bug(o, "bad short name");
        for (const tq_opt *p = opts; p < o; p++)
            if (!strcmp(p->name, o->name) || (o->short_name && p->short_name == o->short_name))
                table_bug(o, "given twice");
        if (!o->help || !*o->help)
            table_bug(o, "no help text");
        if (!o->target && o->kind != TQ_OPT_CALL)
            table_bug(o, "no target");
        int ranged = o->kind == TQ_OPT_INT || o->kind == TQ_OPT_SIZE;
        if (o->kind == TQ_OPT_FLAG || ranged || o->kind == TQ_OPT_CHOICE) {
            if (o->ctype < 1 || o->ctype > 6)
                table_bug(o, "target is not an integer");
            long long lo = ctype_range[o->ctype].lo;
            unsigned long long hi = ctype_range[o->ctype].hi;
            if (o->kind == TQ_OPT_FLAG && !ival_in(ival_of(o->min), lo, hi))
                table_bug(o, "value does not fit the target");
            if (ranged && (!ival_in(ival_of(o->min), lo, hi) || o->max > hi ||
                           (o->min > 0 && (unsigned long long)o->min > o->max)))
                table_bug(o, "range does not fit the target or is empty");
            if (o->kind == TQ_OPT_SIZE && (lo < 0 || o->min < 0))
                table_bug(o, "a size needs an unsigned target and range");
            if (o->kind == TQ_OPT_CHOICE) {
                if (!o->choices || !o->choices[0].name)
                    table_bug(o, "no choices");
                for (const tq_opt_choice *c = o->choices; c->name; c++)
                    if (!ival_in(ival_of(c->value), lo, hi))
                        table_bug(o, "a choice's value does not fit the target");
            }
        }
        if (o->kind == TQ_OPT_CALL && !o->call)
            table_bug(o, "no function");
        if (o->out && (o->kind != TQ_OPT_STR || o->out > TQ_OUT_DIR))
            table_bug(o, "an output is a string option made with TQ_OPT_OUT_FILE or TQ_OPT_OUT_DIR");
        if (o->kind != TQ_OPT_FLAG && o->kind != TQ_OPT_CHOICE && !o->metavar)
            table_bug(o, "no metavar");
    }
}

/* -------------------------------------------------------------------- hints */
static const tq_opt_hint *cur_hints; /* the spec being parsed: its hints (NULL: none) */

static const tq_opt *row_named(const tq_opt *opts, const char *name, size_t len)
{
    for (const tq_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

/* Every hint's `to` names an option of the table (and, after '=', one of its choices). */
static void check_hints(const tq_opt *opts, const tq_opt_hint *hints)
{
    for (const tq_opt_hint *h = hints; h && h->from; h++) {
        if (!h->note || !*h->note || !*h->from)
            table_bug(opts, "a hint without its note");
        if (!h->to)
            continue;
        size_t len = strcspn(h->to, "=");
        const tq_opt *o = row_named(opts, h->to, len);
        if (!o) {
            fprintf(stderr, "%s: internal error: hint '%s' points at '--%s', not in the table\n", tq_prog, h->from, h->to);
            abort();
        }
        int found = !h->to[len];
        for (const tq_opt_choice *c = o->choices; c && c->name && !found; c++)
            found = !strcasecmp(c->name, h->to + len + 1);
        if (!found)
            table_bug(o, "a hint names a value that is not one of its choices");
    }
}

/* The hint for an unknown --NAME (len bytes of name), -C (name "-C") or value NAME=VAL. */
static const tq_opt_hint *hint_for(const char *name, size_t len, const char *val)
{
    for (const tq_opt_hint *h = cur_hints; h && h->from; h++) {
        if (val) {
            size_t n = strcspn(h->from, "=");
            if (h->from[n] == '=' && n == len && !strncmp(h->from, name, len) && !strcasecmp(h->from + n + 1, val))
                return h;
        } else if (strlen(h->from) == len && !strncmp(h->from, name, len)) {
            return h;
        }
    }
    return NULL;
}

/* "did you mean --bits? (NOTE)", "did you mean --method affine? (NOTE)" or ": NOTE" */
static void hint_text(const tq_opt_hint *h, char *buf, size_t cap)
{
    if (!h->to) {
        snprintf(buf, cap, ": %s", h->note);
        return;
    }
    size_t len = strcspn(h->to, "=");
    snprintf(buf, cap, ": did you mean --%.*s%s%s? (%s)", (int)len, h->to, h->to[len] ? " " : "",
             h->to[len] ? h->to + len + 1 : "", h->note);
}

/* Optimal string alignment distance (insertions, deletions, substitutions, transpositions of
 * neighbours), case-insensitive, of a[0..la) and b; large when either is over 63 bytes. */
static int edit_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 63 || lb > 63)
        return 1000;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* (cli.h) The candidates nearest to name (at most 1 edit for names up to 4 bytes, 2 beyond), as
 * ": did you mean PRE-a, PRE-b or PRE-c?"; "" when none is that near. */
void tq_cli_nearest(const char *name, size_t len, const char *const *cand, size_t n, const char *pre, char *buf,
                    size_t cap)
{
    int best = len <= 4 ? 1 : 2;
    for (size_t i = 0; i < n; i++) {
        int d = edit_distance(name, len, cand[i]);
        if (d < best)
            best = d;
    }
    size_t k = 0, hits = 0, used = 0;
    for (size_t i = 0; i < n; i++)
        hits += edit_distance(name, len, cand[i]) == best;
    buf[0] = 0;
    for (size_t i = 0; i < n && hits <= 3; i++) {
        if (edit_distance(name, len, cand[i]) != best)
            continue;
        int w = snprintf(buf + used, cap - used, "%s%s%s", k == 0 ? ": did you mean " : k + 1 == hits ? " or " : ", ",
                         pre, cand[i]);
        if (w < 0 || (size_t)w >= cap - used)
            break;
        used += (size_t)w;
        k++;
    }
    if (k)
        snprintf(buf + used, cap - used, "?");
    else
        buf[0] = 0;
}

/* ------------------------------------------------------------------ values */
/* "a, b or c" of the listed choices. */
static void choice_list(const tq_opt *o, const char *sep, const char *last, char *buf, size_t cap)
{
    size_t n = 0, k = 0, len = 0;
    for (const tq_opt_choice *c = o->choices; c->name; c++)
        n += !c->alias;
    buf[0] = 0;
    for (const tq_opt_choice *c = o->choices; c->name; c++) {
        if (c->alias)
            continue;
        const char *s = k == 0 ? "" : k + 1 == n ? last : sep;
        int w = snprintf(buf + len, cap - len, "%s%s", s, c->name);
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
        k++;
    }
}

/* 16384 -> "16K"; sizes that are not whole units in bytes. */
static void size_words(unsigned long long v, char *buf, size_t cap)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (u < 3 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, cap, "%llu", v);
    else
        snprintf(buf, cap, "%llu%c", v, units[u]);
}

static int bad_value(const tq_opt *o, const char *val, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad_value(const tq_opt *o, const char *val, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    tq_cli_usage_error("invalid value '%s' for --%s (%s)", val, o->name, why);
    return -1;
}

static int parse_int(const char *val, ival *v)
{
    const char *p = val;
    char *end;
    while (isspace((unsigned char)*p))
        p++;
    errno = 0;
    if (*p == '-')
        *v = ival_of(strtoll(val, &end, 10));
    else
        *v = (ival){0, 0, strtoull(val, &end, 10)};
    return errno || end == val || *end ? -1 : 0;
}

/* Check val and store it through o's target: 0, -1 after a usage error, -2 out of memory. */
static int set_value(tq_opt *o, const char *val)
{
    switch (o->kind) {
    case TQ_OPT_FLAG:
        store_int(o, ival_of(o->min));
        return 0;
    case TQ_OPT_INT: {
        ival v;
        if (parse_int(val, &v) == 0 && ival_in(v, o->min, o->max)) {
            store_int(o, v);
            return 0;
        }
        if (o->max == ULLONG_MAX && o->min == 0)
            return bad_value(o, val, "expected a non-negative integer");
        if (o->max == ULLONG_MAX)
            return bad_value(o, val, "expected an integer >= %lld", o->min);
        return bad_value(o, val, "expected an integer in [%lld, %llu]", o->min, o->max);
    }
    case TQ_OPT_SIZE: {
        uint64_t b;
        int unit;
        if (tq_parse_size_unit(val, &b, &unit) != 0) {
            tq_cli_usage_error("invalid size '%s' for --%s (examples: %s512M, 16G)", val, o->name,
                               o->bare_bytes ? "4096, " : "");
            return -1;
        }
        if (!unit && b && !o->bare_bytes) {
            /* the number as given with G, or B for bytes */
            int w = (int)strspn(val, " \t");
            tq_cli_usage_error("size '%s' for --%s has no unit: write %sG for GiB (or M, K; %sB for bytes)", val,
                               o->name, val + w, val + w);
            return -1;
        }
        int step_ok = o->multiple == TQ_OPT_POW2 ? b && !(b & (b - 1)) : o->multiple < 2 || b % o->multiple == 0;
        if (step_ok && ival_in((ival){0, 0, b}, o->min, o->max)) {
            store_int(o, (ival){0, 0, b});
            return 0;
        }
        char lo[32], hi[32], step[48] = "a size";
        size_words((unsigned long long)o->min, lo, sizeof lo);
        size_words(o->max, hi, sizeof hi);
        if (o->multiple == TQ_OPT_POW2)
            snprintf(step, sizeof step, "a power of two");
        else if (o->multiple > 1)
            snprintf(step, sizeof step, "a multiple of %llu", o->multiple);
        if (o->max == ULLONG_MAX && o->min == 1 && o->multiple < 2)
            return bad_value(o, val, "expected a positive size");
        if (o->max == ULLONG_MAX)
            return bad_value(o, val, "expected %s of at least %s bytes", step, lo);
        return bad_value(o, val, "expected %s in [%s, %s] bytes", step, lo, hi);
    }
    case TQ_OPT_CHOICE:
        for (const tq_opt_choice *c = o->choices; c->name; c++)
            if (!strcasecmp(val, c->name)) {
                store_int(o, ival_of(c->value));
                return 0;
            }
        char list[256], hint[512] = "";
        choice_list(o, ", ", " or ", list, sizeof list);
        const tq_opt_hint *h = hint_for(o->name, strlen(o->name), val);
        if (h) {
            hint_text(h, hint, sizeof hint);
        } else {
            const char *cand[64];
            size_t n = 0;
            for (const tq_opt_choice *c = o->choices; c->name && n < 64; c++)
                if (!c->alias)
                    cand[n++] = c->name;
            char pre[80];
            snprintf(pre, sizeof pre, "--%s ", o->name);
            tq_cli_nearest(val, strlen(val), cand, n, pre, hint, sizeof hint);
        }
        tq_cli_usage_error("invalid value '%s' for --%s (expected %s)%s", val, o->name, list, hint);
        return -1;
    case TQ_OPT_IDS: {
        tq_cli_ids *ids = o->target;
        tq_err e = {0};
        int32_t *v;
        size_t n;
        if (tq_parse_ids(val, &v, &n, &e) != 0) {
            tq_cli_usage_error("invalid value '%s' for --%s: %s", val, o->name, e.msg);
            return -1;
        }
        if (owned_keep(v, ids->v) != 0) {
            free(v);
            fprintf(stderr, "%s: out of memory\n", tq_prog);
            return -2;
        }
        ids->v = v;
        ids->n = n;
        return 0;
    }
    case TQ_OPT_STR:
        *(const char **)o->target = val;
        return 0;
    case TQ_OPT_STRS: {
        tq_cli_strs *s = o->target;
        const char **grown = malloc((s->n + 1) * sizeof *grown);
        if (grown && s->n)
            memcpy(grown, s->v, s->n * sizeof *grown);
        if (!grown || owned_keep(grown, (void *)s->v) != 0) {
            free(grown);
            fprintf(stderr, "%s: out of memory\n", tq_prog);
            return -2;
        }
        grown[s->n++] = val;
        s->v = grown;
        return 0;
    }
    case TQ_OPT_CALL: {
        char why[256] = "";
        if (o->call(o->target, val, why, sizeof why) == 0)
            return 0;
        return bad_value(o, val, "%s", why);
    }
    }
    return -1;
}

/* ------------------------------------------------------------------- parse */
/* The table row (or -1 for --help, -2 for --version) that getopt_long's value c stands for. */
static int row_of(const tq_opt *opts, size_t n, int c)
{
    if (c == 'h')
        return -1;
    if (c == 256 + (int)n)
        return -2;
    if (c >= 256 && c < 256 + (int)n)
        return c - 256;
    for (size_t i = 0; c > 0 && c < 256 && i < n; i++)
        if (opts[i].short_name == c)
            return (int)i;
    return -3;
}

static const char *row_name(const tq_opt *opts, int r)
{
    return r == -1 ? "help" : r == -2 ? "version" : opts[r].name;
}

/* A long option getopt_long did not take: unknown, or an ambiguous abbreviation. */
static void unknown_long(const tq_opt *opts, size_t n, const char *arg)
{
    const char *name = arg + 2;
    int len = (int)strcspn(name, "=");
    char list[512] = "";
    size_t used = 0, hits = 0;
    for (int r = -2; r < (int)n; r++) {
        const char *cand = row_name(opts, r);
        if (strncmp(cand, name, (size_t)len) != 0)
            continue;
        int w = snprintf(list + used, sizeof list - used, "%s--%s", hits ? ", " : "", cand);
        if (w > 0 && (size_t)w < sizeof list - used)
            used += (size_t)w;
        hits++;
    }
    if (hits > 1) {
        tq_cli_usage_error("option '--%.*s' is ambiguous (%s)", len, name, list);
        return;
    }
    char hint[512] = "";
    const tq_opt_hint *h = hint_for(name, (size_t)len, NULL);
    if (h) {
        hint_text(h, hint, sizeof hint);
    } else {
        const char **cand = malloc((n + 2) * sizeof *cand);
        for (int r = -2; cand && r < (int)n; r++)
            cand[r + 2] = row_name(opts, r);
        if (cand)
            tq_cli_nearest(name, (size_t)len, cand, n + 2, "--", hint, sizeof hint);
        free(cand);
    }
    tq_cli_usage_error("unknown option '--%.*s'%s", len, name, hint);
}

/* An unknown -C: its hint, if the table has one. */
static void unknown_short(int c)
{
    char name[3] = {'-', (char)c, 0}, hint[512] = "";
    const tq_opt_hint *h = hint_for(name, 2, NULL);
    if (h)
        hint_text(h, hint, sizeof hint);
    tq_cli_usage_error("unknown option '-%c'%s", c, hint);
}

/* The table for scripts/completions, one row per line:
 * NAME TAB SHORT TAB VALUE TAB CHOICES TAB HELP, where VALUE is none, choice, number or
 * path, CHOICES the choice names (aliases too) separated by spaces, and an empty SHORT,
 * CHOICES or HELP is "-" (a shell's read joins adjacent tabs). */
static void print_outputs(const tq_cli_spec *s)
{
    static const char *kind[] = {"?", "file", "dir"};
    for (const tq_opt *o = s->opts; o->name; o++)
        if (o->out)
            printf("--%s\t%s\n", o->name, kind[o->out]);
    if (s->out_operand)
        printf("operand %d\t%s\n", s->out_operand, kind[s->out_operand_kind]);
    for (const char *p = s->implied; p && *p;) {
        size_t n = strcspn(p, " ");
        if (n)
            printf("implied %.*s\tfile\n", (int)n, p);
        p += n + (p[n] == ' ');
    }
}

static void print_table(const tq_cli_spec *s)
{
    const char *which = getenv("TQ_CLI_TABLE");
    if (which && !strcmp(which, "outputs")) {
        print_outputs(s);
        return;
    }
    static const char *value[] = {
        [TQ_OPT_FLAG] = "none",   [TQ_OPT_INT] = "number", [TQ_OPT_SIZE] = "number", [TQ_OPT_CHOICE] = "choice",
        [TQ_OPT_IDS] = "number",  [TQ_OPT_STR] = "path",   [TQ_OPT_STRS] = "path",   [TQ_OPT_CALL] = "path",
    };
    for (const tq_opt *o = s->opts; o->name; o++) {
        printf("%s\t%c\t%s\t", o->name, o->short_name ? o->short_name : '-', value[o->kind]);
        for (const tq_opt_choice *c = o->choices; c && c->name; c++)
            printf("%s%s", c == o->choices ? "" : " ", c->name);
        printf("%s\t%s\n", o->choices ? "" : "-", o->help && *o->help ? o->help : "-");
    }
    printf("help\th\tnone\t-\tprint this help and exit\nversion\t-\tnone\t-\tprint the version and exit\n");
}

/* ------------------------------------------------------ the recorded command */
/* Every option given to the last tq_cli_parse, in order, with its value (NULL: a flag). */
static struct given {
    const tq_opt *row;
    const char *val;
} *given;
static size_t n_given, cap_given;

/* Options that never change an output's bytes, left out of the recorded command line so
 * that outputs stay identical for any of their values ("out": tq-rowlayout's output FILE,
 * like every tool's output operand; "chunk-size": its buffer size). */
static const char *const not_recorded[] = {"threads", "progress", "quiet",      "json",        "force",
                                           "dry-run", "resume",   "out",   "chunk-size", "force-space", NULL};

int tq_cli_command_line(const tq_cli_spec *s, int skip_operand, tq_cli_strs *out)
{
    size_t cap = 1 + 2 * n_given + (size_t)(s->n_args > 0 ? s->n_args : 0);
    const char **v = malloc(cap * sizeof *v);
    if (!v || owned_keep(v, NULL) != 0) {
        free(v);
        return -1;
    }
    size_t n = 0;
    v[n++] = tq_prog;
    for (size_t i = 0; i < n_given; i++) {
        int skip = 0;
        for (const char *const *d = not_recorded; *d && !skip; d++)
            skip = !strcmp(*d, given[i].row->name);
        if (skip)
            continue;
        char *name = malloc(strlen(given[i].row->name) + 3);
        if (!name || owned_keep(name, NULL) != 0) {
            free(name);
            return -1;
        }
        sprintf(name, "--%s", given[i].row->name);
        v[n++] = name;
        if (given[i].val)
            v[n++] = given[i].val;
    }
    for (int i = 0; i < s->n_args; i++)
        if (i != skip_operand)
            v[n++] = s->args[i];
    out->v = v;
    out->n = n;
    return 0;
}

int tq_cli_provenance(const tq_cli_spec *s, int skip_operand, tq_provenance *pv)
{
    tq_cli_strs c;
    if (tq_cli_command_line(s, skip_operand, &c) != 0) {
        fprintf(stderr, "%s: out of memory\n", tq_prog);
        return -1;
    }
    pv->tool = tq_prog;
    pv->command = c.v;
    pv->n_command = c.n;
    return 0;
}

/* (the list stays reachable until the exit, like the option values it points to) */
static int given_add(const tq_opt *row, const char *val)
{
    if (n_given == cap_given) {
        size_t cap = cap_given ? 2 * cap_given : 16;
        struct given *g = realloc(given, cap * sizeof *g);
        if (!g)
            return -1;
        given = g;
        cap_given = cap;
    }
    given[n_given++] = (struct given){row, row->kind == TQ_OPT_FLAG ? NULL : val};
    return 0;
}

int tq_cli_parse(tq_cli_spec *s, int argc, char **argv, int *rc)
{
    tq_cli_command = s->command;
    n_given = 0;
    check_table(s->opts);
    check_hints(s->opts, s->hints);
    for (const char *const *x = s->examples; x && *x; x++) /* an example runs this tool (command) */
        if (!strstr(*x, tq_prog) || (s->command && !strstr(*x, s->command))) {
            fprintf(stderr, "%s: internal error: example '%s' does not run %s%s%s\n", tq_prog, *x, tq_prog,
                    s->command ? " " : "", s->command ? s->command : "");
            abort();
        }
    cur_hints = s->hints;
    if (getenv("TQ_CLI_TABLE")) {
        print_table(s);
        *rc = 0;
        return 1;
    }
    size_t n = 0;
    while (s->opts[n].name)
        n++;
    struct option *lo = calloc(n + 3, sizeof *lo);
    char *shorts = malloc(2 * n + 3);
    if (!lo || !shorts) {
        free(lo);
        free(shorts);
        fprintf(stderr, "%s: out of memory\n", tq_prog);
        *rc = 1;
        return 1;
    }
    /* a leading ':' makes a missing value ':' rather than '?' */
    size_t k = 0;
    shorts[k++] = ':';
    shorts[k++] = 'h';
    for (size_t i = 0; i < n; i++) {
        const tq_opt *o = &s->opts[i];
        int has_arg = o->kind == TQ_OPT_FLAG ? no_argument : required_argument;
        lo[i] = (struct option){o->name, has_arg, NULL, o->short_name ? o->short_name : 256 + (int)i};
        if (o->short_name) {
            shorts[k++] = o->short_name;
            if (has_arg)
                shorts[k++] = ':';
        }
    }
    shorts[k] = 0;
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){"version", no_argument, NULL, 256 + (int)n};
    opterr = 0;
#ifdef __GLIBC__
    optind = 0; /* a full restart: a process may parse more than one table (the unit test) */
#else
    optreset = 1;
    optind = 1;
#endif
    int c, status = -1;
    while (status < 0 && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
        int r = row_of(s->opts, n, c == ':' || c == '?' ? optopt : c);
        if (c == ':') {
            tq_cli_usage_error("option '--%s' needs a value", row_name(s->opts, r));
            status = 2;
        } else if (c == '?') {
            if (r != -3)
                tq_cli_usage_error("option '--%s' takes no value", row_name(s->opts, r));
            else if (optopt)
                unknown_short(optopt);
            else
                unknown_long(s->opts, n, argv[optind - 1]);
            status = 2;
        } else if (r == -1) {
            tq_cli_help(s, stdout);
            status = 0;
        } else if (r == -2) {
            tq_cli_version();
            status = 0;
        } else {
            s->opts[r].seen++;
            int st = set_value(&s->opts[r], optarg);
            if (st == 0 && given_add(&s->opts[r], optarg) != 0) {
                fprintf(stderr, "%s: out of memory\n", tq_prog);
                st = -2;
            }
            if (st < 0)
                status = st == -2 ? 1 : 2;
        }
    }
    free(lo);
    free(shorts);
    if (status >= 0) {
        *rc = status;
        return 1;
    }
    s->args = argv + optind;
    s->n_args = argc - optind;
    return 0;
}

/* -------------------------------------------------------------------- help */
static void left_part(const tq_opt *o, char *buf, size_t cap)
{
    char mv[256];
    const char *m = o->metavar;
    if (!m && o->kind == TQ_OPT_CHOICE) {
        choice_list(o, "|", "|", mv, sizeof mv);
        m = mv;
    }
    if (o->short_name) /* "-o, --output FILE" */
        snprintf(buf, cap, "-%c, --%s%s%s", o->short_name, o->name, m ? " " : "", m ? m : "");
    else
        snprintf(buf, cap, "--%s%s%s", o->name, m ? " " : "", m ? m : "");
}

/* "  LEFT    help text wrapped at HELP_WIDTH, continued under itself" */
static void help_row(FILE *out, const char *left, const char *help, size_t col)
{
    size_t pos = (size_t)fprintf(out, "  %s", left);
    if (pos + 2 > col) {
        fputc('\n', out);
        pos = 0;
    }
    fprintf(out, "%*s", (int)(col - pos), "");
    pos = col;
    for (const char *p = help; *p;) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (!w)
            break;
        if (pos > col && pos + 1 + w > HELP_WIDTH) {
            fprintf(out, "\n%*s", (int)col, "");
            pos = col;
        }
        if (pos > col) {
            fputc(' ', out);
            pos++;
        }
        fwrite(p, 1, w, out);
        pos += w;
        p += w;
    }
    fputc('\n', out);
}

void tq_cli_help(const tq_cli_spec *s, FILE *out)
{
    static const tq_opt std[] = {
        {.name = "help", .short_name = 'h', .kind = TQ_OPT_FLAG, .help = "print this help and exit"},
        {.name = "version", .kind = TQ_OPT_FLAG, .help = "print the version and exit"},
    };
    char left[512];
    size_t col = 0;
    for (const tq_opt *o = s->opts;; o++) {
        int is_std = !o->name;
        for (size_t i = 0; i < (is_std ? 2 : 1); i++) {
            left_part(is_std ? &std[i] : o, left, sizeof left);
            size_t w = 2 + strlen(left) + 2;
            if (w <= HELP_COL && w > col)
                col = w;
        }
        if (is_std)
            break;
    }
    fputs(s->usage, out);
    if (s->about)
        fputs(s->about, out);
    fputs("\nOptions:\n", out);
    for (const tq_opt *o = s->opts; o->name; o++) {
        left_part(o, left, sizeof left);
        help_row(out, left, o->help, col);
    }
    for (size_t i = 0; i < 2; i++) {
        left_part(&std[i], left, sizeof left);
        help_row(out, left, std[i].help, col);
    }
    if (s->examples && s->examples[0]) {
        fputs("\nExamples:\n", out);
        for (const char *const *x = s->examples; *x; x++)
            fprintf(out, "  %s\n", *x);
    }
    if (s->epilog) {
        fputc('\n', out);
        fputs(s->epilog, out);
    }
}

unsigned tq_cli_given(const tq_cli_spec *s, const char *name)
{
    for (const tq_opt *o = s->opts; o->name; o++)
        if (!strcmp(o->name, name))
            return o->seen;
    /* a misspelt name would read as "not given" forever: a programming error, as in the table */
    fprintf(stderr, "%s: internal error: tq_cli_given('%s'): no such option in the table\n", tq_prog, name);
    abort();
}

void tq_cli_overlay(const tq_cli_spec *s, const void *from, void *to, size_t size)
{
    uintptr_t lo = (uintptr_t)from, hi = lo + size;
    for (const tq_opt *o = s->opts; o->name; o++) {
        uintptr_t t = (uintptr_t)o->target;
        if (!o->seen || t < lo || t >= hi || o->kind == TQ_OPT_CALL)
            continue;
        size_t len = o->kind == TQ_OPT_STR    ? sizeof(const char *)
                     : o->kind == TQ_OPT_IDS  ? sizeof(tq_cli_ids)
                     : o->kind == TQ_OPT_STRS ? sizeof(tq_cli_strs)
                                              : ctype_size(o->ctype);
        memcpy((char *)to + (t - lo), o->target, len);
    }
}
