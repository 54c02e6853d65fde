/* cmd/cli.c — error printing, --version and JSON output shared by the tq front-ends. */
#include "cmd/cli.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>

const char *tq_prog = "tq";
const char *tq_cli_command;

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
    const char *cmd = tq_cli_command;
    fprintf(stderr, "%s: %s%s", tq_prog, cmd ? cmd : "", cmd ? ": " : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s%s%s --help' for more information.\n", tq_prog, cmd ? " " : "", cmd ? cmd : "");
    return 2;
}

void tq_cli_version(void)
{
    printf("%s (tq) %s\n", tq_prog, TQ_VERSION);
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
