/* cmd/opts.c: option tables — every kind of value, the usage errors, --help layout, overlay, and a
 * bad table stopping the program. */
#include "cmd/cli.h"
#include "tests/unit/check.h"

#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run tq_cli_parse on a NULL-terminated argument list with stderr going to a file; *msg gets
 * what was printed there. Returns tq_cli_parse's value and sets *rc. */
static char msg[4096];
static int parse(tq_cli_spec *s, int *rc, const char *const *args)
{
    static char *argv[32]; /* s->args points into it after the return */
    int argc = 0;
    argv[argc++] = (char *)"tq-test";
    while (*args && argc < 31)
        argv[argc++] = (char *)*args++;
    argv[argc] = NULL;
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(t_path("stderr.txt"), "w+");
    if (!f || saved < 0)
        return -1;
    dup2(fileno(f), 2);
    *rc = -1;
    int r = tq_cli_parse(s, argc, argv, rc);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(msg, 1, sizeof msg - 1, f);
    msg[n] = 0;
    fclose(f);
    return r;
}
#define ARGS(...) ((const char *[]){__VA_ARGS__, NULL})

static const tq_opt_choice colors[] = {{"red", 1, 0}, {"green", 2, 0}, {"verde", 2, 1}, {NULL, 0, 0}};

typedef struct vals {
    int flag, set, i, color;
    long neg;
    unsigned long long big;
    uint64_t size, pow2, mult8;
    size_t st;
    const char *str;
    tq_cli_ids ids;
    tq_cli_strs strs;
    char called[64];
} vals;

static int call_upper(void *ctx, const char *val, char *why, size_t cap)
{
    vals *v = ctx;
    if (!*val || strlen(val) >= sizeof v->called) {
        snprintf(why, cap, "expected 1 to %zu characters", sizeof v->called - 1);
        return -1;
    }
    for (size_t i = 0; val[i]; i++)
        v->called[i] = (char)(val[i] >= 'a' && val[i] <= 'z' ? val[i] - 32 : val[i]);
    return 0;
}

#define TABLE(v)                                                                                            \
    tq_opt opts[] = {                                                                                       \
        TQ_OPT_FLAG("flag", 'f', &(v).flag, "a flag"),                                                      \
        TQ_OPT_SET("set", 0, &(v).set, 7, "stores 7"),                                                      \
        TQ_OPT_INT("int", 'i', &(v).i, 2, 4, "N", "an integer in [2, 4]"),                                  \
        TQ_OPT_INT("neg", 0, &(v).neg, -5, 5, "N", "an integer in [-5, 5]"),                                \
        TQ_OPT_INT("big", 0, &(v).big, 0, ULLONG_MAX, "N", "any unsigned 64-bit integer"),                  \
        TQ_OPT_INT("st", 0, &(v).st, 1, 100, "N", "a size_t"),                                              \
        TQ_OPT_SIZE("size", 0, &(v).size, 1, UINT64_MAX, 0, "SIZE", "a positive size"),                     \
        TQ_OPT_BYTES("pow2", 0, &(v).pow2, 4096, 1 << 20, TQ_OPT_POW2, "N", "a power of two"),              \
        TQ_OPT_BYTES("mult8", 0, &(v).mult8, 8, 64, 8, "N", "a multiple of 8"),                             \
        TQ_OPT_CHOICE("color", 'c', &(v).color, colors, NULL, "red or green"),                              \
        TQ_OPT_STR("str", 's', &(v).str, "S", "a string"),                                                  \
        TQ_OPT_IDS("ids", 0, &(v).ids, "LIST", "token ids"),                                                \
        TQ_OPT_STRS("strs", 0, &(v).strs, "S", "repeatable"),                                               \
        TQ_OPT_CALL("upper", 0, call_upper, &(v), "S", "upper-cased into called"),                          \
        TQ_OPT_END,                                                                                         \
    };                                                                                                      \
    tq_cli_spec cli = {.usage = "Usage: tq-test [OPTIONS] A B\n", .about = "About.\n", .opts = opts}

static void test_values(void)
{
    vals v = {0};
    TABLE(v);
    int rc;
    CHECK(parse(&cli, &rc,
                ARGS("a", "--flag", "--set", "--int=3", "--neg", "-5", "--big=18446744073709551615", "--st", "9",
                     "--size=1.5K", "--pow2", "16K", "--mult8=64", "-c", "GREEN", "-sx", "--ids=3,1,4", "--ids",
                     "5", "--strs", "p", "--strs=q", "--upper=ab", "b", "--", "-i", "--flag")) == 0);
    CHECKF(!msg[0], "stderr: %s", msg);
    CHECK(v.flag == 1 && v.set == 7 && v.i == 3 && v.neg == -5 && v.big == ULLONG_MAX && v.st == 9);
    CHECK(v.size == 1536 && v.pow2 == 16384 && v.mult8 == 64 && v.color == 2);
    CHECK(v.str && !strcmp(v.str, "x"));
    CHECK(v.ids.n == 1 && v.ids.v[0] == 5); /* the last one given wins */
    CHECK(v.strs.n == 2 && !strcmp(v.strs.v[0], "p") && !strcmp(v.strs.v[1], "q"));
    CHECK(!strcmp(v.called, "AB"));
    /* operands in order, options anywhere, "--" ends the options */
    CHECK(cli.n_args == 4 && !strcmp(cli.args[0], "a") && !strcmp(cli.args[1], "b") &&
          !strcmp(cli.args[2], "-i") && !strcmp(cli.args[3], "--flag"));
    CHECK(tq_cli_given(&cli, "ids") == 2 && tq_cli_given(&cli, "strs") == 2 && tq_cli_given(&cli, "flag") == 1);
    CHECK(tq_cli_given(&cli, "int") == 1 && tq_cli_given(&cli, "neg") == 1);
    { /* a name not in the table is a programming error: abort, never a silent 0 */
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            if (!freopen("/dev/null", "w", stderr))
                _exit(1);
            _exit((int)tq_cli_given(&cli, "nope"));
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "tq_cli_given(nope): status %#x", status);
    }
    vals u = {0};
    opts[6].target = &u.size;
    CHECK(parse(&cli, &rc, ARGS("--size=16B")) == 0 && u.size == 16);
    /* the alias is accepted; abbreviations are */
    vals w = {0};
    opts[9].target = &w.color;
    opts[2].target = &w.i;
    CHECK(parse(&cli, &rc, ARGS("--col=verde", "--in", "2")) == 0 && w.color == 2 && w.i == 2 && cli.n_args == 0);
}

static void test_errors(void)
{
    static const struct {
        const char *args[4];
        const char *msg;
    } cases[] = {
        {{"--int=5"}, "tq-test: invalid value '5' for --int (expected an integer in [2, 4])\n"},
        {{"-i", "x"}, "tq-test: invalid value 'x' for --int (expected an integer in [2, 4])\n"},
        {{"--int", "3x"}, "tq-test: invalid value '3x' for --int (expected an integer in [2, 4])\n"},
        {{"--neg=-6"}, "tq-test: invalid value '-6' for --neg (expected an integer in [-5, 5])\n"},
        {{"--big=-1"}, "tq-test: invalid value '-1' for --big (expected a non-negative integer)\n"},
        {{"--big=18446744073709551616"}, "tq-test: invalid value '18446744073709551616' for --big (expected a non-negative integer)\n"},
        {{"--st=0"}, "tq-test: invalid value '0' for --st (expected an integer in [1, 100])\n"},
        {{"--size=0"}, "tq-test: invalid value '0' for --size (expected a positive size)\n"},
        {{"--size=1Q"}, "tq-test: invalid size '1Q' for --size (examples: 512M, 16G)\n"},
        /* a bare number is not a size (issue 32: --ram 16 was 16 bytes); TQ_OPT_BYTES rows
         * (alignments) take one as bytes */
        {{"--size=16"}, "tq-test: size '16' for --size has no unit: write 16G for GiB (or M, K; 16B for bytes)\n"},
        {{"--size", "1.5"}, "tq-test: size '1.5' for --size has no unit: write 1.5G for GiB (or M, K; 1.5B for bytes)\n"},
        {{"--pow2=1Q"}, "tq-test: invalid size '1Q' for --pow2 (examples: 4096, 512M, 16G)\n"},
        {{"--pow2=12288"}, "tq-test: invalid value '12288' for --pow2 (expected a power of two in [4K, 1M] bytes)\n"},
        {{"--pow2=2048"}, "tq-test: invalid value '2048' for --pow2 (expected a power of two in [4K, 1M] bytes)\n"},
        {{"--mult8=12"}, "tq-test: invalid value '12' for --mult8 (expected a multiple of 8 in [8, 64] bytes)\n"},
        {{"-c", "blue"}, "tq-test: invalid value 'blue' for --color (expected red or green)\n"},
        {{"--ids=1,,2"}, "tq-test: invalid value '1,,2' for --ids: id 2 (''): expected a decimal number 0..2147483647\n"},
        {{"--upper="}, "tq-test: invalid value '' for --upper (expected 1 to 63 characters)\n"},
        {{"--nope"}, "tq-test: unknown option '--nope'\n"},
        {{"--nope=1"}, "tq-test: unknown option '--nope'\n"},
        {{"-z"}, "tq-test: unknown option '-z'\n"},
        {{"--s", "1"}, "tq-test: option '--s' is ambiguous (--set, --st, --size, --str, --strs)\n"},
        {{"a", "--int"}, "tq-test: option '--int' needs a value\n"},
        {{"-i"}, "tq-test: option '--int' needs a value\n"},
        {{"--flag=1"}, "tq-test: option '--flag' takes no value\n"},
        {{"--help=1"}, "tq-test: option '--help' takes no value\n"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        vals v = {0};
        TABLE(v);
        int rc;
        int r = parse(&cli, &rc, cases[k].args);
        char want[512];
        snprintf(want, sizeof want, "%sTry 'tq-test --help' for more information.\n", cases[k].msg);
        CHECKF(r == 1 && rc == 2 && !strcmp(msg, want), "case %zu: r %d rc %d, stderr:\n%s", k, r, rc, msg);
    }
    /* a subcommand's errors name it and point at its own --help */
    vals v = {0};
    TABLE(v);
    cli.command = "sub";
    int rc;
    CHECK(parse(&cli, &rc, ARGS("--int=9")) == 1 && rc == 2);
    CHECKF(!strcmp(msg, "tq-test: sub: invalid value '9' for --int (expected an integer in [2, 4])\n"
                        "Try 'tq-test sub --help' for more information.\n"),
           "%s", msg);
    tq_cli_command = NULL;
}

static void test_help(void)
{
    vals v = {0};
    TABLE(v);
    opts[13].help = "a long help text that goes on and on so that it has to be wrapped over more than one line "
                    "of the terminal, twice even, because it is really quite long";
    opts[11].metavar = "A-METAVAR-SO-LONG-IT-PUSHES-THE-HELP-DOWN";
    cli.epilog = "Epilog.\n";
    cli.examples = (const char *const[]){"tq-test a b   # the first", "tq-test --flag a b", NULL};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tq_cli_help(&cli, f);
    fclose(f);
    /* the help column is set by the widest left part that fits in 26 columns
     * ("  -c, --color red|green  "); a wider one puts its help on the next line */
    const char *want = "Usage: tq-test [OPTIONS] A B\n"
                       "About.\n"
                       "\n"
                       "Options:\n"
                       "  -f, --flag             a flag\n"
                       "  --set                  stores 7\n"
                       "  -i, --int N            an integer in [2, 4]\n"
                       "  --neg N                an integer in [-5, 5]\n"
                       "  --big N                any unsigned 64-bit integer\n"
                       "  --st N                 a size_t\n"
                       "  --size SIZE            a positive size\n"
                       "  --pow2 N               a power of two\n"
                       "  --mult8 N              a multiple of 8\n"
                       "  -c, --color red|green  red or green\n"
                       "  -s, --str S            a string\n"
                       "  --ids A-METAVAR-SO-LONG-IT-PUSHES-THE-HELP-DOWN\n"
                       "                         token ids\n"
                       "  --strs S               repeatable\n"
                       "  --upper S              a long help text that goes on and on so that it has to\n"
                       "                         be wrapped over more than one line of the terminal,\n"
                       "                         twice even, because it is really quite long\n"
                       "  -h, --help             print this help and exit\n"
                       "  --version              print the version and exit\n"
                       "\n"
                       "Examples:\n"
                       "  tq-test a b   # the first\n"
                       "  tq-test --flag a b\n"
                       "\n"
                       "Epilog.\n";
    CHECKF(!strcmp(buf, want), "got:\n%s", buf);
    free(buf);
}

static void test_overlay(void)
{
    typedef struct dims {
        long a, b;
        const char *name;
        int flag;
    } dims;
    dims scratch = {0}, out = {10, 20, "preset", 0};
    int outside = 0;
    tq_opt opts[] = {
        TQ_OPT_INT("a", 0, &scratch.a, 1, 100, "N", "a"),
        TQ_OPT_INT("b", 0, &scratch.b, 1, 100, "N", "b"),
        TQ_OPT_STR("name", 0, &scratch.name, "S", "name"),
        TQ_OPT_FLAG("flag", 0, &scratch.flag, "flag"),
        TQ_OPT_FLAG("outside", 0, &outside, "not in the struct"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {.usage = "Usage: x\n", .opts = opts};
    int rc;
    CHECK(parse(&cli, &rc, ARGS("--b=5", "--name", "n", "--outside")) == 0);
    tq_cli_overlay(&cli, &scratch, &out, sizeof out);
    CHECK(out.a == 10 && out.b == 5 && !strcmp(out.name, "n") && out.flag == 0 && outside == 1);
}

/* A table mistake is a programming error: the first parse (or --help) aborts naming the row. */
static void bad_table(int which)
{
    int x = 0, y = 0;
    unsigned u = 0;
    tq_opt dup[] = {TQ_OPT_FLAG("x", 0, &x, "x"), TQ_OPT_FLAG("x", 0, &y, "y"), TQ_OPT_END};
    tq_opt range[] = {TQ_OPT_INT("x", 0, &x, 0, 1ull << 40, "N", "too wide for an int"), TQ_OPT_END};
    tq_opt neg[] = {TQ_OPT_INT("x", 0, &u, -1, 5, "N", "negative into unsigned"), TQ_OPT_END};
    tq_opt help[] = {TQ_OPT_FLAG("help", 0, &x, "taken"), TQ_OPT_END};
    tq_opt h[] = {TQ_OPT_FLAG("x", 'h', &x, "taken"), TQ_OPT_END};
    tq_opt nohelp[] = {TQ_OPT_FLAG("x", 0, &x, ""), TQ_OPT_END};
    tq_opt choice[] = {TQ_OPT_CHOICE("c", 0, &x, colors, NULL, "a color"), TQ_OPT_END};
    /* hints pointing at an option or a value the table does not have */
    static const tq_opt_hint to_nothing[] = {{"q-bits", "bits", "no --bits here"}, {NULL, NULL, NULL}};
    static const tq_opt_hint to_no_value[] = {{"c=blue", "c=azure", "no such color"}, {NULL, NULL, NULL}};
    tq_opt *tables[] = {dup, range, neg, help, h, nohelp, choice, choice, choice};
    const tq_opt_hint *hints[] = {NULL, NULL, NULL, NULL, NULL, NULL, to_nothing, to_no_value, NULL};
    tq_cli_spec cli = {.usage = "Usage: x\n", .opts = tables[which], .hints = hints[which]};
    static const char *const other_tool[] = {"other-tool a b", NULL};
    if (which == 8) /* an example that does not run this program (not a compound literal: its
                     * lifetime would end with the if, a stack-use-after-scope under ASan) */
        cli.examples = other_tool;
    char *argv[] = {(char *)"tq-test", (char *)"--version", NULL};
    int rc;
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
        _exit(1);
    tq_cli_parse(&cli, 2, argv, &rc);
    _exit(0);
}

static void test_bad_tables(void)
{
    for (int which = 0; which < 9; which++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0)
            bad_table(which);
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "table %d: status %#x", which, status);
    }
}

/* Did you mean: a hint of the table (an unknown --NAME, -C or choice value), else the nearest
 * option or choice within 1 edit (names up to 4 bytes) or 2; none when nothing is that near. */
static void test_hints(void)
{
    static const tq_opt_hint hints[] = {
        {"q-bits", "int", "another tool's spelling"},
        {"-q", NULL, "a note alone"},
        {"color=blue", "color=green", "blue is green here"},
        {NULL, NULL, NULL},
    };
    static const struct {
        const char *args[3];
        const char *msg;
    } cases[] = {
        {{"--q-bits", "4"}, "tq-test: unknown option '--q-bits': did you mean --int? (another tool's spelling)\n"},
        {{"--q-bits=4"}, "tq-test: unknown option '--q-bits': did you mean --int? (another tool's spelling)\n"},
        {{"-q"}, "tq-test: unknown option '-q': a note alone\n"},
        {{"-c", "BLUE"}, "tq-test: invalid value 'BLUE' for --color (expected red or green): did you mean --color green? "
                         "(blue is green here)\n"},
        {{"-c", "gren"}, "tq-test: invalid value 'gren' for --color (expected red or green): did you mean --color green?\n"},
        {{"-c", "blau"}, "tq-test: invalid value 'blau' for --color (expected red or green)\n"},
        {{"--falg"}, "tq-test: unknown option '--falg': did you mean --flag?\n"},       /* a transposition */
        {{"--uper=x"}, "tq-test: unknown option '--uper': did you mean --upper?\n"},    /* a deletion */
        {{"--mult_8=8"}, "tq-test: unknown option '--mult_8': did you mean --mult8?\n"}, /* one more byte */
        {{"--sze"}, "tq-test: unknown option '--sze': did you mean --size?\n"},
        {{"--stt"}, "tq-test: unknown option '--stt': did you mean --set, --st or --str?\n"}, /* ties */
        {{"--helpp"}, "tq-test: unknown option '--helpp': did you mean --help?\n"},
        {{"--zz"}, "tq-test: unknown option '--zz'\n"},
        {{"--bigger"}, "tq-test: unknown option '--bigger'\n"}, /* 3 edits from --big */
        {{"-z"}, "tq-test: unknown option '-z'\n"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        vals v = {0};
        TABLE(v);
        cli.hints = hints;
        int rc;
        int r = parse(&cli, &rc, cases[k].args);
        char want[512];
        snprintf(want, sizeof want, "%sTry 'tq-test --help' for more information.\n", cases[k].msg);
        CHECKF(r == 1 && rc == 2 && !strcmp(msg, want), "case %zu: r %d rc %d, stderr:\n%s", k, r, rc, msg);
    }
}

int main(void)
{
    tq_cli_init("tq-test");
    RUN(test_values);
    RUN(test_errors);
    RUN(test_help);
    RUN(test_overlay);
    RUN(test_bad_tables);
    RUN(test_hints);
    TEST_MAIN_END();
}
