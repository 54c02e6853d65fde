/* tq-rowlayout: interleave a quantized table's weight/scales/biases rows into one record
 * per row (mtplx_ngram_rows_v1 or tq_rows_paged_v1), check and extract such files. */
#include "cmd/cli.h"
#include "layout/rows/rows.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    tq_cli_init("tq-rowlayout");
    const char *out = NULL, *check = NULL, *extract = NULL, *to = NULL;
    int json = 0, rc;
    tq_rows_opts o = {0};
    tq_opt opts[] = {
        TQ_OPT_OUT_FILE("out", 0, &out, "FILE", "write the row file (refuses an existing FILE or the source itself)"),
        TQ_OPT_STR("prefix", 0, &o.prefix, "P", "table prefix (default: ngram)"),
        TQ_OPT_BYTES("page-align", 0, &o.page_align, 8, TQ_ROWS_MAX_PAGE, 8, "N",
                    "tq_rows_paged_v1: no record straddles an N-byte page (N a multiple of 8)"),
        TQ_OPT_FLAG("pad-stride", 0, &o.pad_stride,
                    "paged: pad each record to a divisor of N instead of padding page ends"),
        TQ_OPT_STR("check", 0, &check, "FILE",
                   "re-verify FILE against its source (SOURCE, or the recorded source path)"),
        TQ_OPT_STR("extract", 0, &extract, "FILE", "rebuild the source tensors from FILE ..."),
        TQ_OPT_OUT_DIR("to", 0, &to, "DIR", "... into DIR (created if missing)"),
        TQ_OPT_SIZE("chunk-size", 0, &o.chunk_bytes, 1, 1u << 30, 0, "SIZE",
                    "bytes of records per chunk (default 8M; memory is about 3x this)"),
        TQ_OPT_FLAG("force", 0, &o.force, "replace an existing output file (--out, or the file --extract writes)"),
        TQ_OPT_FLAG("force-space", 0, &o.force_space,
                    "convert even when the row file (its exact size) does not fit the free space of its "
                    "filesystem (refused by default, exit 1, with both numbers)"),
        TQ_OPT_FLAG("json", 0, &json, "print the report as JSON: the receipt of a conversion (rows, layout, source identity)"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 0, &o.quiet, "no progress, no report unless --json"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .usage = "Usage: tq-rowlayout [OPTIONS] SOURCE.safetensors --out OUT.safetensors\n"
                 "       tq-rowlayout [SOURCE.safetensors] --check OUT.safetensors\n"
                 "       tq-rowlayout --extract OUT.safetensors --to DIR\n",
        .about = "\n"
                 "Interleave the rows of a quantized table (P.weight U32, optional P.scales and P.biases\n"
                 "F16/BF16, all 2-D with the same rows) into one record per row, so one read fetches a row.\n"
                 "Every chunk is read back from the output and compared bit for bit with the source.\n",
        .epilog = "Exit status: 0 success, 1 bad data, I/O error or failed check, 2 bad usage.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-rowlayout table/model.safetensors --out rows.safetensors   # one record per row",
            "tq-rowlayout --check rows.safetensors   # every row against its source again",
            "tq-rowlayout --extract rows.safetensors --to restored   # the source file back",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    tq_cli_progress_start(o.quiet, json);
    int page_given = tq_cli_given(&cli, "page-align") > 0;
    int npos = cli.n_args;
    const char *source = npos >= 1 ? cli.args[0] : NULL;
    int modes = !!out + !!check + !!extract;
    if (modes != 1)
        return tq_cli_usage_error("give exactly one of --out, --check, --extract");
    if (npos > 1)
        return tq_cli_usage_error("unexpected argument '%s'", cli.args[1]);
    if (o.pad_stride && !page_given)
        return tq_cli_usage_error("--pad-stride needs --page-align");
    if (to && !extract)
        return tq_cli_usage_error("--to goes with --extract");
    if ((check || extract) && page_given)
        return tq_cli_usage_error("--page-align applies to conversion; --check and --extract read it from the file");

    tq_err e = {0};
    tq_rows_report r;
    const char *mode;
    tq_provenance pv;
    if (out) {
        if (!source)
            return tq_cli_usage_error("missing SOURCE.safetensors");
        if (tq_cli_provenance(&cli, -1, &pv) != 0) /* the header's tq_provenance */
            return 1;
        o.provenance = &pv;
        mode = "convert";
        tq_cli_partials_note(out);
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
    for (size_t i = 0; i < r.n_warnings && !o.quiet; i++)
        fprintf(stderr, "%s: warning: %s\n", tq_prog, tq_cli_esc(r.warnings[i]));
    int status = 0;
    if (json) {
        int jrc = tq_cli_print_json(tq_rows_report_json(&r, mode));
        if (jrc) {
            tq_rows_report_free(&r);
            return jrc;
        }
    } else if (!o.quiet && out) { /* one line, as every tool; the receipt is --json's */
        printf("%s: %" PRIu64 " rows of %" PRIu64 " bytes (%s) from %s, every row read back bit-exact\n",
               tq_cli_esc(out), r.rows, r.row_bytes, tq_cli_esc(r.format), tq_cli_esc(source));
    } else if (!o.quiet && check) {
        printf("%s: OK: %" PRIu64 " rows of %" PRIu64 " bytes bit-exact against %s\n", tq_cli_esc(check), r.rows,
               r.row_bytes, tq_cli_esc(r.source_path));
    } else if (!o.quiet) {
        printf("%s: %" PRIu64 " rows -> %s (%s)\n", tq_cli_esc(extract), r.rows, tq_cli_esc(r.output),
               r.byte_identical ? "byte-identical to the source file" : "same tensors; file layout rewritten");
    }
    if (fflush(stdout) != 0)
        status = 1;
    tq_rows_report_free(&r);
    return status;
}
