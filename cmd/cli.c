/* cmd/cli.c — what every tq front-end shares: error printing, usage errors, --version, option values, JSON output. */
#include "cmd/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>

const char *tq_prog = "tq";

void tq_cli_init(const char *prog)
{
    tq_prog = prog;
    /* A file-size limit (ulimit -f) must surface as EFBIG from write(), named in an error
     * message with the partial output removed, not as a silent kill. */
    signal(SIGXFSZ, SIG_IGN);
}

int tq_cli_fail(const tq_err *e)
{
    fprintf(stderr, "%s: %s\n", tq_prog, e->msg);
    return tq_exit_code(e);
}

int tq_cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", tq_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", tq_prog);
    return 2;
}

void tq_cli_version(void)
{
    printf("%s (tq) %s\n", tq_prog, TQ_VERSION);
}

int tq_cli_int(const char *opt, const char *val, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < min || v > max) {
        tq_cli_usage_error("invalid value '%s' for %s (expected an integer in [%ld, %ld])", val, opt, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int tq_cli_size(const char *opt, const char *val, uint64_t *out)
{
    if (tq_parse_size(val, out) != 0) {
        tq_cli_usage_error("invalid size '%s' for %s (examples: 4096, 512M, 16G)", val, opt);
        return -1;
    }
    return 0;
}

int tq_cli_print_json(cJSON *j)
{
    tq_err err = {0};
    char *s = j ? tq_json_print(j, &err) : NULL;
    if (!j)
        tq_fail(&err, TQ_ENOMEM, "out of memory building the JSON report");
    cJSON_Delete(j);
    if (!s)
        return tq_cli_fail(&err);
    fputs(s, stdout);
    free(s);
    return 0;
}
