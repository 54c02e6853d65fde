/* tq-convert: data-free TurboQuant quantization (and --dequantize / --no-quantize).
 * Argument parsing and reporting only; the work is tq_convert() in quant/. */
#include "cmd/cli.h"
#include "formats/formats.h"
#include "quant/convert/convert.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: tq-convert [OPTIONS] INPUT OUTPUT_DIR\n"
            "Quantize a HuggingFace model directory or .safetensors file (or a GGUF file) to a\n"
            "TurboQuant model directory loadable by TurboQuant-MLX: block Hadamard rotation with\n"
            "per-module random signs, Lloyd-Max codebooks, per-group f16 scales. Data-free.\n"
            "\n"
            "  --bits B             2, 3 or 4 bits per weight (default 3)\n"
            "  --group-size G       32, 64 or 128 inputs per scale (default 64)\n"
            "  --scale rms|lsq      group scale: RMS (the reference recipe) or least squares\n"
            "                       for the chosen indices, never worse than rms (default lsq)\n"
            "  --seed S             rotation_seed for the signs (default 42)\n"
            "  --bits-for REGEX=B   B bits for tensors matching the POSIX extended REGEX\n"
            "                       (repeatable; the last match wins)\n"
            "  --keep REGEX         leave matching tensors unquantized (repeatable)\n"
            "  --dtype D            bf16, f16 or f32 for unquantized float tensors (default: as\n"
            "                       input; with --dequantize the weights default to bf16)\n"
            "  --shard-size SIZE    tensor bytes per output shard (default 5G)\n"
            "  --threads N          worker threads (default: number of cores)\n"
            "  --dequantize         TurboQuant model -> plain float model, rotation undone\n"
            "  --no-quantize        plain dtype conversion (with --dtype), names unchanged\n"
            "  --keep-names         keep input names: no stacking of HF experts into\n"
            "                       switch_mlp (or unstacking with --dequantize)\n"
            "  --force              replace an existing non-empty OUTPUT_DIR\n"
            "  --json               print the report as JSON on stdout\n"
            "  --quiet              no progress and no summary\n"
            "  --help, --version\n"
            "\n"
            "Exit status: 0 ok, 1 bad data or I/O error, 2 bad usage.\n");
}

enum { O_BITS = 256, O_GROUP, O_SCALE, O_SEED, O_BITS_FOR, O_KEEP, O_DTYPE, O_SHARD, O_THREADS, O_DEQ,
       O_NOQ, O_KEEPN, O_FORCE, O_JSON, O_QUIET, O_HELP, O_VERSION };

static void print_summary(const tq_convert_report *r, const tq_convert_opts *o, const char *out)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->n; i++) {
        const tq_convert_tensor *t = &r->t[i];
        if (t->quantized)
            printf("  %-64s %d-bit g%-3zu rel_mse %.5f\n", t->name, t->bits, t->group_size, t->rel_mse);
        else if (t->note) {
            printf("  %-64s kept (%s)\n", t->name, t->note);
            kept++;
        }
    }
    char in_h[32], out_h[32];
    tq_format_size(r->in_bytes, in_h, sizeof in_h);
    tq_format_size(r->bytes, out_h, sizeof out_h);
    printf("%s: %zu tensors, %s -> %s in %.2f s (%d threads)\n", out, r->n, in_h, out_h, r->seconds, r->threads);
    if (o->mode == TQ_CONVERT_QUANTIZE)
        printf("quantized %llu weights: %.4f bits/weight (incl. scales, codebooks, signs), %.4f bits/weight overall, "
               "relative MSE %.5f\n",
               (unsigned long long)r->q_params, r->bpw_quantized, r->bpw_total, r->rel_mse);
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-convert");
    static const struct option opts[] = {
        {"bits", required_argument, 0, O_BITS}, {"group-size", required_argument, 0, O_GROUP},
        {"scale", required_argument, 0, O_SCALE}, {"seed", required_argument, 0, O_SEED},
        {"bits-for", required_argument, 0, O_BITS_FOR}, {"keep", required_argument, 0, O_KEEP},
        {"dtype", required_argument, 0, O_DTYPE}, {"shard-size", required_argument, 0, O_SHARD},
        {"threads", required_argument, 0, O_THREADS}, {"dequantize", no_argument, 0, O_DEQ},
        {"no-quantize", no_argument, 0, O_NOQ}, {"keep-names", no_argument, 0, O_KEEPN},
        {"force", no_argument, 0, O_FORCE}, {"json", no_argument, 0, O_JSON}, {"quiet", no_argument, 0, O_QUIET},
        {"help", no_argument, 0, O_HELP}, {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0},
    };
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    const char **bf_re = calloc((size_t)argc, sizeof *bf_re), **keep = calloc((size_t)argc, sizeof *keep);
    int *bf_bits = calloc((size_t)argc, sizeof *bf_bits);
    char **owned = calloc((size_t)argc, sizeof *owned);
    size_t n_owned = 0;
    int json = 0, deq = 0, noq = 0, c, rc = 2;
    long v;
    if (!bf_re || !keep || !bf_bits || !owned) {
        fprintf(stderr, "tq-convert: out of memory\n");
        return 1;
    }
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_BITS:
            if (tq_cli_int("--bits", optarg, 2, 4, &v))
                goto out;
            o.bits = (int)v;
            break;
        case O_GROUP:
            if (tq_cli_int("--group-size", optarg, 32, 128, &v))
                goto out;
            if (v != 32 && v != 64 && v != 128) {
                tq_cli_usage_error("--group-size must be 32, 64 or 128");
                goto out;
            }
            o.group_size = (size_t)v;
            break;
        case O_SCALE:
            if (!strcmp(optarg, "rms"))
                o.scale = TQ_SCALE_RMS;
            else if (!strcmp(optarg, "lsq"))
                o.scale = TQ_SCALE_LSQ;
            else {
                tq_cli_usage_error("--scale must be rms or lsq");
                goto out;
            }
            break;
        case O_SEED:
            if (tq_cli_int("--seed", optarg, 0, 2147483647L, &v))
                goto out;
            o.seed = (uint64_t)v;
            break;
        case O_BITS_FOR: {
            char *eq = strrchr(optarg, '=');
            if (!eq || eq == optarg) {
                tq_cli_usage_error("--bits-for expects REGEX=B, not '%s'", optarg);
                goto out;
            }
            if (tq_cli_int("--bits-for", eq + 1, 2, 4, &v))
                goto out;
            char *re = strndup(optarg, (size_t)(eq - optarg));
            if (!re)
                goto out;
            owned[n_owned++] = re;
            bf_re[o.n_bits_for] = re;
            bf_bits[o.n_bits_for++] = (int)v;
            break;
        }
        case O_KEEP: keep[o.n_keep++] = optarg; break;
        case O_DTYPE:
            if (!strcasecmp(optarg, "bf16"))
                o.dtype = TQ_DT_BF16;
            else if (!strcasecmp(optarg, "f16") || !strcasecmp(optarg, "fp16"))
                o.dtype = TQ_DT_F16;
            else if (!strcasecmp(optarg, "f32") || !strcasecmp(optarg, "fp32"))
                o.dtype = TQ_DT_F32;
            else {
                tq_cli_usage_error("--dtype must be bf16, f16 or f32");
                goto out;
            }
            break;
        case O_SHARD:
            if (tq_cli_size("--shard-size", optarg, &o.shard_size))
                goto out;
            if (!o.shard_size) {
                tq_cli_usage_error("--shard-size must be positive");
                goto out;
            }
            break;
        case O_THREADS:
            if (tq_cli_int("--threads", optarg, 1, 1024, &v))
                goto out;
            o.threads = (int)v;
            break;
        case O_DEQ: deq = 1; break;
        case O_NOQ: noq = 1; break;
        case O_KEEPN: o.keep_names = 1; break;
        case O_FORCE: o.force = 1; break;
        case O_JSON: json = 1; break;
        case O_QUIET: o.quiet = 1; break;
        case O_HELP: usage(stdout); rc = 0; goto out;
        case O_VERSION: tq_cli_version(); rc = 0; goto out;
        default: tq_cli_usage_error("unknown option or missing value: '%s'", argv[optind - 1]); goto out;
        }
    }
    if (deq && noq) {
        tq_cli_usage_error("--dequantize and --no-quantize exclude each other");
        goto out;
    }
    if (optind != argc - 2) {
        tq_cli_usage_error("expected INPUT and OUTPUT_DIR");
        goto out;
    }
    o.mode = deq ? TQ_CONVERT_DEQUANTIZE : noq ? TQ_CONVERT_PLAIN : TQ_CONVERT_QUANTIZE;
    o.bits_for_re = bf_re;
    o.bits_for_bits = bf_bits;
    o.keep_re = keep;
    int quiet = o.quiet;
    if (json)
        o.quiet = 1; /* no progress bar mixed into a JSON consumer's terminal */
    tq_err err = {0};
    tq_convert_report r;
    if (tq_convert(argv[optind], argv[optind + 1], &o, &r, &err)) {
        rc = tq_cli_fail(&err);
        goto out;
    }
    rc = 0;
    for (size_t i = 0; i < r.n_warnings && !quiet; i++)
        fprintf(stderr, "%s: warning: %s\n", tq_prog, r.warnings[i]);
    if (json) {
        rc = tq_cli_print_json(tq_convert_report_json(&r, &o));
    } else if (!o.quiet) {
        print_summary(&r, &o, argv[optind + 1]);
    }
    tq_convert_report_free(&r);
out:
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    free(bf_re);
    free(bf_bits);
    free(keep);
    return rc;
}
