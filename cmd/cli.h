/* cmd/cli.h — what every tq front-end shares: error printing, --help/--version, numbers. */
#ifndef TQ_CLI_H
#define TQ_CLI_H

#include "common/common.h"

extern const char *tq_prog; /* "tq-convert", set by tq_cli_init */

void tq_cli_init(const char *prog);
/* Print "PROG: msg" and return the exit status for it (1 data/io, 2 usage). */
int tq_cli_fail(const tq_err *e);
/* Print "PROG: message" + "Try 'PROG --help'." to stderr; returns 2. */
int tq_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tq_cli_version(void); /* "PROG (tq) VERSION" on stdout */
/* Print j on stdout with sorted keys and delete it (NULL j = out of memory). Returns 0 or
 * the exit status of the failure. */
struct cJSON;
int tq_cli_print_json(struct cJSON *j);
/* Parse helpers for option values; on failure print a usage error and return -1. */
int tq_cli_int(const char *opt, const char *val, long min, long max, long *out);
int tq_cli_size(const char *opt, const char *val, uint64_t *out);

#endif
