/* tq-verify: subcommands that inspect and check model files. Argument parsing only; the
 * work is in the library. Add a command: one function and one line in `commands`. */
#include "cmd/cli.h"
#include "formats/formats.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static int usage_ls(FILE *out)
{
    fprintf(out,
            "Usage: tq-verify ls [--json] [--read] [--keep-names] [--quiet] FILE|DIR\n"
            "List the tensors of a safetensors file or model directory: name, dtype, shape,\n"
            "file, byte offset and size, one per line (or a JSON document with --json).\n"
            "  --json    machine-readable listing\n"
            "  --read    also read every tensor's bytes end to end; report bytes/s on stderr\n"
            "  --keep-names  GGUF input: list GGUF tensor names, not HF/MLX names\n"
            "  --quiet   no listing and no warnings (with --read: only errors)\n");
    return 0;
}

static int cmd_ls(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'}, {"read", no_argument, 0, 'r'}, {"quiet", no_argument, 0, 'q'},
        {"keep-names", no_argument, 0, 'k'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int json = 0, rd = 0, quiet = 0, c;
    unsigned flags = 0;
    while ((c = getopt_long(argc, argv, "jrqh", opts, NULL)) != -1) {
        switch (c) {
        case 'k': flags |= TQ_MODEL_KEEP_NAMES; break;
        case 'j': json = 1; break;
        case 'r': rd = 1; break;
        case 'q': quiet = 1; break;
        case 'h': return usage_ls(stdout);
        default: return tq_cli_usage_error("ls: bad option");
        }
    }
    if (optind != argc - 1)
        return tq_cli_usage_error("ls: expected one FILE or DIR");
    tq_err err = {0};
    tq_model *m;
    if (tq_model_open_ex(&m, argv[optind], flags, &err) != 0)
        return tq_cli_fail(&err);
    const char *const *warn;
    size_t n_warn = tq_gguf_model_warnings(m, &warn);
    for (size_t i = 0; i < n_warn && !quiet; i++)
        fprintf(stderr, "%s: warning: %s\n", tq_prog, warn[i]);
    int rc = 0;
    if (!quiet && tq_model_list(m, stdout, json, &err) != 0)
        rc = tq_cli_fail(&err);
    if (rc == 0 && rd) {
        uint64_t bytes;
        double t0 = tq_now();
        if (tq_model_read_all(m, 8u << 20, &bytes, &err) != 0) {
            rc = tq_cli_fail(&err);
        } else if (!quiet) {
            double dt = tq_now() - t0;
            char hb[32];
            tq_format_size(bytes, hb, sizeof hb);
            fprintf(stderr, "%s: read %llu bytes (%s) in %.3f s: %.1f MiB/s, peak RSS %.1f MiB\n", tq_prog,
                    (unsigned long long)bytes, hb, dt, dt > 0 ? (double)bytes / dt / (1 << 20) : 0.0,
                    (double)tq_peak_rss() / (1 << 20));
        }
    }
    tq_model_close(m);
    return rc;
}

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"ls", cmd_ls, "list the tensors of a safetensors file or model directory"},
};

static void usage(FILE *out)
{
    fprintf(out, "Usage: tq-verify COMMAND [OPTIONS] ...\n"
                 "Inspect and check model files.\n\nCommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'tq-verify COMMAND --help' describes a command's options.\n"
                 "Exit status: 0 ok, 1 bad data or I/O error, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-verify");
    if (argc < 2)
        return tq_cli_usage_error("missing COMMAND");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        tq_cli_version();
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    return tq_cli_usage_error("unknown command '%s'", argv[1]);
}
