/* tq-rowlayout: interleave a quantized table's weight/scales/biases rows into one record
 * per row (mtplx_ngram_rows_v1 or tq_rows_paged_v1), check and extract such files. */
#include "cmd/cli.h"
#include "layout/rows/rows.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("Usage: tq-rowlayout SOURCE.safetensors --out OUT.safetensors [--prefix P] [--page-align N [--pad-stride]]\n"
           "       tq-rowlayout [SOURCE.safetensors] --check OUT.safetensors\n"
           "       tq-rowlayout --extract OUT.safetensors --to DIR\n"
           "\n"
           "Interleave the rows of a quantized table (P.weight U32, optional P.scales and P.biases\n"
           "F16/BF16, all 2-D with the same rows) into one record per row, so one read fetches a row.\n"
           "Every chunk is read back from the output and compared bit for bit with the source.\n"
           "\n"
           "  --out FILE         write the row file (refuses an existing FILE or the source itself)\n"
           "  --prefix P         table prefix (default: ngram)\n"
           "  --page-align N     tq_rows_paged_v1: no record straddles an N-byte page (N a multiple of 8)\n"
           "  --pad-stride       paged: pad each record to a divisor of N instead of padding page ends\n"
           "  --check FILE       re-verify FILE against its source (SOURCE, or the recorded source path)\n"
           "  --extract FILE     rebuild the source tensors from FILE ...\n"
           "  --to DIR           ... into DIR (created if missing)\n"
           "  --chunk-size SIZE  bytes of records per chunk (default 8M; memory is about 3x this)\n"
           "  --json             print the report as JSON (conversion always prints its JSON receipt)\n"
           "  --quiet            no progress, no report unless --json\n"
           "  --help, --version\n"
           "\n"
           "Exit status: 0 success, 1 bad data, I/O error or failed check, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-rowlayout");
    enum { O_OUT = 256, O_PREFIX, O_PAGE, O_PADS, O_CHECK, O_EXTRACT, O_TO, O_CHUNK, O_JSON, O_QUIET, O_HELP, O_VERSION };
    static const struct option opts[] = {
        {"out", required_argument, 0, O_OUT},        {"prefix", required_argument, 0, O_PREFIX},
        {"page-align", required_argument, 0, O_PAGE}, {"pad-stride", no_argument, 0, O_PADS},
        {"check", required_argument, 0, O_CHECK},    {"extract", required_argument, 0, O_EXTRACT},
        {"to", required_argument, 0, O_TO},          {"chunk-size", required_argument, 0, O_CHUNK},
        {"json", no_argument, 0, O_JSON},            {"quiet", no_argument, 0, O_QUIET},
        {"help", no_argument, 0, O_HELP},            {"version", no_argument, 0, O_VERSION},
        {0, 0, 0, 0}};
    const char *out = NULL, *check = NULL, *extract = NULL, *to = NULL;
    int json = 0, page_given = 0;
    tq_rows_opts o = {0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_OUT: out = optarg; break;
        case O_PREFIX: o.prefix = optarg; break;
        case O_PAGE:
            if (tq_cli_size("--page-align", optarg, &o.page_align) != 0)
                return 2;
            if (o.page_align < 8 || o.page_align % 8 || o.page_align > TQ_ROWS_MAX_PAGE)
                return tq_cli_usage_error("--page-align must be a multiple of 8 between 8 and 64M");
            page_given = 1;
            break;
        case O_PADS: o.pad_stride = 1; break;
        case O_CHECK: check = optarg; break;
        case O_EXTRACT: extract = optarg; break;
        case O_TO: to = optarg; break;
        case O_CHUNK:
            if (tq_cli_size("--chunk-size", optarg, &o.chunk_bytes) != 0)
                return 2;
            if (o.chunk_bytes < 1 || o.chunk_bytes > (1ull << 30))
                return tq_cli_usage_error("--chunk-size must be between 1 and 1G");
            break;
        case O_JSON: json = 1; break;
        case O_QUIET: o.quiet = 1; break;
        case O_HELP: usage(); return 0;
        case O_VERSION: tq_cli_version(); return 0;
        default:
            return tq_cli_usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    int npos = argc - optind;
    const char *source = npos >= 1 ? argv[optind] : NULL;
    int modes = !!out + !!check + !!extract;
    if (modes != 1)
        return tq_cli_usage_error("give exactly one of --out, --check, --extract");
    if (npos > 1)
        return tq_cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
    if (o.pad_stride && !page_given)
        return tq_cli_usage_error("--pad-stride needs --page-align");
    if (to && !extract)
        return tq_cli_usage_error("--to goes with --extract");
    if ((check || extract) && page_given)
        return tq_cli_usage_error("--page-align applies to conversion; --check and --extract read it from the file");

    tq_err e = {0};
    tq_rows_report r;
    const char *mode;
    int rc;
    if (out) {
        if (!source)
            return tq_cli_usage_error("missing SOURCE.safetensors");
        mode = "convert";
        rc = tq_rows_convert(source, out, &o, &r, &e);
    } else if (check) {
        mode = "check";
        rc = tq_rows_check(check, source, &o, &r, &e);
    } else {
        if (!to)
            return tq_cli_usage_error("--extract needs --to DIR");
        if (source)
            return tq_cli_usage_error("--extract takes no SOURCE");
        mode = "extract";
        rc = tq_rows_extract(extract, to, &o, &r, &e);
    }
    if (rc != 0)
        return tq_cli_fail(&e);
    int status = 0;
    if (json || (out && !o.quiet)) {
        int jrc = tq_cli_print_json(tq_rows_report_json(&r, mode));
        if (jrc) {
            tq_rows_report_free(&r);
            return jrc;
        }
    } else if (!o.quiet && check) {
        printf("%s: OK: %" PRIu64 " rows of %" PRIu64 " bytes bit-exact against %s\n", check, r.rows, r.row_bytes,
               r.source_path);
    } else if (!o.quiet) {
        printf("%s: %" PRIu64 " rows -> %s (%s)\n", extract, r.rows, r.output,
               r.byte_identical ? "byte-identical to the source file" : "same tensors; file layout rewritten");
    }
    if (fflush(stdout) != 0)
        status = 1;
    tq_rows_report_free(&r);
    return status;
}
