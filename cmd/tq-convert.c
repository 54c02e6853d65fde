/* tq-convert: data-free TurboQuant quantization (and --dequantize / --no-quantize).
 * Argument parsing and reporting only; the work is tq_convert() in quant/. */
#include "cmd/cli.h"
#include "formats/formats.h"
#include "quant/convert/convert.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tq_opt_choice rotations[] = {{"hadamard", 0, 0}, {"blockwise_hadamard", 0, 1}, {"none", 1, 0}, {NULL, 0, 0}};
static const tq_opt_choice scales[] = {{"rms", TQ_SCALE_RMS, 0}, {"lsq", TQ_SCALE_LSQ, 0}, {NULL, 0, 0}};
static const tq_opt_choice codebooks[] = {{"gaussian", TQ_CODEBOOK_GAUSSIAN, 0}, {"fitted", TQ_CODEBOOK_FITTED, 0},
                                          {NULL, 0, 0}};
static const tq_opt_choice group_sizes[] = {{"32", 32, 0}, {"64", 64, 0}, {"128", 128, 0}, {NULL, 0, 0}};
static const tq_opt_choice methods[] = {{"turboquant", TQ_METHOD_TURBOQUANT, 0}, {"affine", TQ_METHOD_AFFINE, 0},
                                        {NULL, 0, 0}};
static const tq_opt_choice rules[] = {{"gpu", TQ_AFFINE_GPU, 0}, {"cpu", TQ_AFFINE_CPU, 0}, {NULL, 0, 0}};
static const tq_opt_choice embeds[] = {{"keep", TQ_EMBED_KEEP, 0}, {"affine4", 4, 0}, {"affine8", 8, 0}, {NULL, 0, 0}};
static const tq_opt_choice dtypes[] = {{"bf16", TQ_DT_BF16, 0}, {"f16", TQ_DT_F16, 0}, {"fp16", TQ_DT_F16, 1},
                                       {"f32", TQ_DT_F32, 0},   {"fp32", TQ_DT_F32, 1}, {NULL, 0, 0}};

/* --bits-for REGEX=B, in command-line order (room for argc of them). */
typedef struct bits_for {
    char **re;
    int *bits;
    size_t n;
} bits_for;

static int add_bits_for(void *ctx, const char *val, char *why, size_t cap)
{
    bits_for *b = ctx;
    const char *eq = strrchr(val, '=');
    if (!eq || eq == val || eq[1] < '2' || (eq[1] > '4' && eq[1] != '8') || eq[2]) {
        snprintf(why, cap, "expected REGEX=B with B 2, 3 or 4 (affine: 4 or 8)");
        return -1;
    }
    if (!(b->re[b->n] = strndup(val, (size_t)(eq - val)))) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    b->bits[b->n++] = eq[1] - '0';
    return 0;
}

static int set_target_bpw(void *ctx, const char *val, char *why, size_t cap)
{
    char *end;
    double v = strtod(val, &end);
    if (end == val || *end || !(v >= 1.0 && v <= 16.0)) {
        snprintf(why, cap, "expected bits per weight between 1 and 16 (e.g. 3.5)");
        return -1;
    }
    *(double *)ctx = v;
    return 0;
}

static void print_choices(const tq_convert_tensor *t)
{
    printf("      settings (rel. MSE on the row sample):");
    for (size_t k = 0; k < t->n_choices; k++) {
        const struct tq_convert_choice *c = &t->choices[k];
        printf("%s %d/g%zu %.5f%s%s", k ? "," : "", c->bits, c->group_size, c->rel_mse_est, c->fitted ? " fitted" : "",
               (int)k == t->chosen ? " (chosen)" : "");
    }
    printf("\n");
}

static void print_summary(const tq_convert_report *r, const tq_convert_opts *o, const char *out)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->n; i++) {
        const tq_convert_tensor *t = &r->t[i];
        if (t->quantized) {
            printf("  %-64s %d-bit g%-3zu rel_mse %.5f%s\n", tq_cli_esc(t->name), t->bits, t->group_size, t->rel_mse,
                   t->codebook_fitted ? " fitted codebook" : "");
            if (t->n_choices > 1)
                print_choices(t);
        } else if (t->note) {
            printf("  %-64s kept (%s)\n", tq_cli_esc(t->name), tq_cli_esc(t->note));
            kept++;
        }
    }
    char in_h[32], out_h[32];
    tq_format_size(r->in_bytes, in_h, sizeof in_h);
    tq_format_size(r->bytes, out_h, sizeof out_h);
    printf("%s: %zu tensors, %s -> %s in %.2f s (%d threads)\n", tq_cli_esc(out), r->n, in_h, out_h, r->seconds, r->threads);
    if (o->mode == TQ_CONVERT_QUANTIZE)
        printf("quantized %llu weights: %.4f bits/weight (incl. %s), %.4f bits/weight overall, "
               "relative MSE %.5f\n",
               (unsigned long long)r->q_params, r->bpw_quantized,
               o->method == TQ_METHOD_AFFINE ? "scales and biases" : "scales, codebooks, signs", r->bpw_total, r->rel_mse);
    if (r->budget_bytes)
        printf("budget: %llu bytes for the quantized weights (%.4f bits/weight), %llu used; objective "
               "sum of importance x squared error: %.6g (estimated from the row samples %.6g)\n",
               (unsigned long long)r->budget_bytes, r->q_params ? 8.0 * (double)r->budget_bytes / (double)r->q_params : 0,
               (unsigned long long)r->q_bytes, r->objective, r->objective_est);
}

/* --dry-run: what a run would write, file by file; the tensors as the summary lists them. */
static void print_dry_run(const tq_convert_report *r, const tq_convert_opts *o, const tq_out_plan *files,
                          const char *out)
{
    for (size_t i = 0; i < r->n; i++) {
        const tq_convert_tensor *t = &r->t[i];
        if (t->quantized)
            printf("  %-64s %d-bit g%-3zu %llu bytes\n", tq_cli_esc(t->name), t->bits, t->group_size, (unsigned long long)t->bytes);
        else
            printf("  %-64s %s%s%s %llu bytes\n", tq_cli_esc(t->name), t->note ? "kept (" : "kept", tq_cli_esc(t->note),
                   t->note ? ")" : "", (unsigned long long)t->bytes);
    }
    char in_h[32], out_h[32];
    uint64_t total = tq_out_plan_total(files);
    tq_format_size(r->in_bytes, in_h, sizeof in_h);
    tq_format_size(total, out_h, sizeof out_h);
    printf("%s would get %zu tensors (%llu quantized weights), %s of input -> %zu files:\n", tq_cli_esc(out), r->n,
           (unsigned long long)r->q_params, in_h, files->n);
    for (size_t i = 0; i < files->n; i++)
        printf("  %-48s %llu bytes\n", tq_cli_esc(files->v[i].name), (unsigned long long)files->v[i].size);
    printf("total: %llu bytes (%s); dry run, nothing written\n", (unsigned long long)total, out_h);
}

static cJSON *dry_run_json(const tq_convert_report *r, const tq_convert_opts *o, const tq_out_plan *files,
                           const char *out)
{
    cJSON *j = tq_convert_report_json(r, o), *f = tq_out_plan_json(files);
    if (!j || !f || !cJSON_AddBoolToObject(j, "dry_run", 1) || !cJSON_AddStringToObject(j, "output", out) ||
        !tq_json_add_u64(j, "output_bytes", tq_out_plan_total(files))) {
        cJSON_Delete(j);
        cJSON_Delete(f);
        return NULL;
    }
    cJSON_AddItemToObject(j, "files", f);
    return j;
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-convert");
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    bits_for bf = {calloc((size_t)argc, sizeof(char *)), calloc((size_t)argc, sizeof(int)), 0};
    tq_cli_strs keep = {0};
    int json = 0, deq = 0, noq = 0, dry = 0, rc = 2;
    if (!bf.re || !bf.bits) {
        fprintf(stderr, "tq-convert: out of memory\n");
        return 1;
    }
    tq_opt opts[] = {
        TQ_OPT_CHOICE("method", 0, &o.method, methods, "M",
                      "turboquant (default) or affine: MLX's own format, bit for bit as mlx.core.quantize"),
        TQ_OPT_INT("bits", 0, &o.bits, 2, 8, "B", "bits per weight: 2, 3 or 4 (default 3); affine 4 (default) or 8"),
        TQ_OPT_CHOICE("group-size", 0, &o.group_size, group_sizes, "G", "32, 64 or 128 inputs per scale (default 64)"),
        TQ_OPT_CHOICE("scale", 0, &o.scale, scales, NULL,
                      "group scale: RMS (the reference recipe) or searched indices (better than rms's) with the "
                      "scale that keeps the weights' size, no shrinkage (default lsq)"),
        TQ_OPT_CHOICE("codebook", 0, &o.codebook, codebooks, NULL,
                      "gaussian (default): the Lloyd-Max table of N(0,1); fitted: a codebook per module fitted "
                      "to its rotated, group-normalised weights, kept where it beats gaussian"),
        TQ_OPT_CALL("target-bpw", 0, set_target_bpw, &o.target_bpw, "B",
                    "choose bits (2, 3, 4) and group size (32, 64, 128) per module for B bits per quantized "
                    "weight (blocks, scales, codebooks, signs), least squared error"),
        TQ_OPT_SIZE("target-size", 0, &o.target_size, 1, UINT64_MAX, 0, "SIZE",
                    "the same for SIZE bytes of output tensors in all (quantized or not)"),
        TQ_OPT_INT("seed", 0, &o.seed, 0, 2147483647, "S", "rotation_seed for the signs (default 42)"),
        TQ_OPT_CHOICE("rotation", 0, &o.rotation_none, rotations, NULL,
                      "hadamard (default): signs and block Hadamard before quantizing; none: neither "
                      "(all-ones signs), as TurboQuant-MLX's --rotation none"),
        TQ_OPT_CALL("bits-for", 0, add_bits_for, &bf, "REGEX=B",
                    "B bits for tensors matching the POSIX extended REGEX (repeatable; the last match wins)"),
        TQ_OPT_CHOICE("affine-rule", 0, &o.affine_rule, rules, "R",
                      "affine: gpu (default; MLX's Metal kernels, what mlx_lm.convert runs on a Mac) or cpu "
                      "(MLX's CPU path)"),
        TQ_OPT_CHOICE("embed", 0, &o.embed, embeds, "E",
                      "embeddings: keep, affine4 or affine8 (default: turboquant keeps them, affine "
                      "quantizes them with --bits)"),
        TQ_OPT_STRS("keep", 0, &keep, "REGEX", "leave matching tensors unquantized (repeatable)"),
        TQ_OPT_CHOICE("dtype", 0, &o.dtype, dtypes, "D",
                      "bf16, f16 or f32 for unquantized float tensors (default: as input; with --dequantize "
                      "the weights default to bf16)"),
        TQ_OPT_SIZE("shard-size", 0, &o.shard_size, 1, UINT64_MAX, 0, "SIZE",
                    "tensor bytes per output shard (default 5G)"),
        TQ_OPT_INT("threads", 0, &o.threads, 1, 1024, "N", "worker threads (default: number of cores)"),
        TQ_OPT_FLAG("dequantize", 0, &deq,
                    "quantized model -> plain float model (TurboQuant: rotation undone; affine: scale*q+bias)"),
        TQ_OPT_FLAG("no-quantize", 0, &noq, "plain dtype conversion (with --dtype), names unchanged"),
        TQ_OPT_FLAG("keep-names", 0, &o.keep_names,
                    "keep input names: no stacking of HF experts into switch_mlp (or unstacking with --dequantize)"),
        TQ_OPT_FLAG("allow-nonfinite", 0, &o.allow_nonfinite,
                    "copy (--no-quantize) or dequantize NaN and infinite values instead of refusing them"),
        TQ_OPT_FLAG("force", 0, &o.force, "replace an existing non-empty OUTPUT_DIR"),
        TQ_OPT_FLAG("force-space", 0, &o.force_space,
                    "start even when the output (its exact size, as --dry-run lists it) does not fit the free "
                    "space of OUTPUT_DIR's filesystem (refused by default, exit 1, with both numbers)"),
        TQ_OPT_FLAG("dry-run", 0, &dry,
                    "write nothing: check everything a run checks, then list the tensors (bits, bytes) and "
                    "every file the run would write with its exact size"),
        TQ_OPT_FLAG("resume", 0, &o.resume,
                    "build in OUTPUT_DIR.partial-resume with a journal, kept when interrupted; rerun the same "
                    "command with --resume to keep the finished shards (checked by SHA-256) and redo the rest"),
        TQ_OPT_FLAG("json", 0, &json, "print the report as JSON on stdout"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 0, &o.quiet, "no progress, no warnings, no summary or dry-run plan (--json still prints)"),
        TQ_OPT_END,
    };
    /* what mlx_lm.convert (mlx_lm/convert.py) and llama.cpp's convert_hf_to_gguf.py users type */
    static const tq_opt_hint hints[] = {
        {"q-bits", "bits", "--q-bits is mlx_lm.convert's spelling"},
        {"q-group-size", "group-size", "--q-group-size is mlx_lm.convert's spelling"},
        {"q-mode", "method=affine", "mlx_lm.convert's --q-mode affine is tq-convert's --method affine"},
        {"outtype", "dtype", "--outtype is llama.cpp's convert_hf_to_gguf.py; tq-convert writes safetensors: "
                             "--dtype for float tensors, --bits to quantize"},
        {"outfile", NULL, "OUTPUT_DIR is tq-convert's second operand (--outfile is llama.cpp's spelling)"},
        {"hf-path", NULL, "INPUT is tq-convert's first operand (--hf-path is mlx_lm.convert's spelling)"},
        {"mlx-path", NULL, "OUTPUT_DIR is tq-convert's second operand (--mlx-path is mlx_lm.convert's spelling)"},
        {"quantize", NULL, "tq-convert quantizes by default; --method affine writes MLX's own format "
                           "(mlx_lm.convert -q)"},
        {"-q", NULL, "tq-convert quantizes by default; --method affine writes MLX's own format "
                     "(mlx_lm.convert -q); --quiet is the long option for silence"},
        {"method=mlx", "method=affine", "MLX's affine format, bit for bit as mlx_lm.convert writes it"},
        {"method=mlx-lm", "method=affine", "MLX's affine format, bit for bit as mlx_lm.convert writes it"},
        {"dtype=float16", "dtype=f16", "tq-convert's name for it"},
        {"dtype=bfloat16", "dtype=bf16", "tq-convert's name for it"},
        {"dtype=float32", "dtype=f32", "tq-convert's name for it"},
        {NULL, NULL, NULL},
    };
    tq_cli_spec cli = {
        .usage = "Usage: tq-convert [OPTIONS] INPUT OUTPUT_DIR\n",
        .out_operand = 2,
        .out_operand_kind = TQ_OUT_DIR,
        .about = "Quantize a HuggingFace model directory or .safetensors file (or a GGUF file) to a\n"
                 "TurboQuant model directory loadable by TurboQuant-MLX: block Hadamard rotation with\n"
                 "per-module random signs, Lloyd-Max codebooks, per-group f16 scales. Data-free.\n"
                 "With --method affine, to MLX's affine 4- or 8-bit format as mlx_lm.convert writes it.\n",
        .epilog = "Exit status: 0 ok, 1 bad data or I/O error, 2 bad usage.\n",
        .opts = opts,
        .hints = hints,
        .examples = (const char *const[]){
            "tq-convert model model-tq3   # 3-bit TurboQuant, the reference recipe",
            "tq-convert --method affine --bits 4 model model-mlx4   # MLX's own 4-bit format",
            "tq-convert --dry-run --target-bpw 3.5 model model-tq35   # what 3.5 bits/weight would write",
            "tq-convert --dequantize model-tq3 model-bf16   # back to plain bf16 weights",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        goto out;
    rc = 2;
    if (deq && noq) {
        tq_cli_usage_error("--dequantize and --no-quantize exclude each other");
        goto out;
    }
    if (cli.n_args != 2) {
        tq_cli_usage_error("expected INPUT and OUTPUT_DIR");
        goto out;
    }
    if (o.method == TQ_METHOD_AFFINE && (tq_cli_given(&cli, "scale") > 0 || tq_cli_given(&cli, "seed") > 0)) {
        tq_cli_usage_error("--scale and --seed are TurboQuant options, not --method affine ones");
        goto out;
    }
    if ((tq_cli_given(&cli, "target-bpw") > 0 || tq_cli_given(&cli, "target-size") > 0) &&
        (tq_cli_given(&cli, "bits") > 0 || tq_cli_given(&cli, "group-size") > 0 || bf.n)) {
        tq_cli_usage_error("--target-bpw and --target-size choose the bits and group size: not with --bits, --group-size "
                           "or --bits-for");
        goto out;
    }
    if (tq_cli_given(&cli, "target-bpw") > 0 && tq_cli_given(&cli, "target-size") > 0) {
        tq_cli_usage_error("--target-bpw and --target-size exclude each other");
        goto out;
    }
    if (o.method == TQ_METHOD_AFFINE && (tq_cli_given(&cli, "codebook") > 0 || tq_cli_given(&cli, "target-bpw") > 0 ||
                                         tq_cli_given(&cli, "target-size") > 0)) {
        tq_cli_usage_error("--codebook, --target-bpw and --target-size are TurboQuant options, not --method affine ones");
        goto out;
    }
    if ((deq || noq) && (tq_cli_given(&cli, "codebook") > 0 || tq_cli_given(&cli, "target-bpw") > 0 ||
                         tq_cli_given(&cli, "target-size") > 0)) {
        tq_cli_usage_error("--codebook, --target-bpw and --target-size go with quantizing");
        goto out;
    }
    if (o.method != TQ_METHOD_AFFINE && tq_cli_given(&cli, "affine-rule") > 0) {
        tq_cli_usage_error("--affine-rule goes with --method affine");
        goto out;
    }
    if (o.method == TQ_METHOD_AFFINE && tq_cli_given(&cli, "bits") <= 0)
        o.bits = 4;
    tq_err err = {0};
    o.mode = deq ? TQ_CONVERT_DEQUANTIZE : noq ? TQ_CONVERT_PLAIN : TQ_CONVERT_QUANTIZE;
    o.n_bits_for = bf.n;
    o.bits_for_re = (const char *const *)bf.re;
    o.bits_for_bits = bf.bits;
    o.n_keep = keep.n;
    o.keep_re = keep.v;
    int quiet = o.quiet;
    tq_provenance pv;
    if (tq_cli_provenance(&cli, 1, &pv) != 0) {
        rc = 1;
        goto out;
    }
    o.provenance = &pv;
    if ((rc = tq_cli_hf_models(&cli, 0, 1)) != 0) /* a HF cache entry, offline (after pv: it records what was typed) */
        goto out;
    const char *in = cli.args[0], *outdir = cli.args[1];
    tq_cli_progress_start(quiet, json);
    tq_convert_report r;
    if (dry) {
        tq_out_plan files = {0};
        if (tq_convert_dry_run(in, outdir, &o, &r, &files, &err)) {
            rc = tq_cli_fail(&err);
            goto out;
        }
        for (size_t i = 0; i < r.n_warnings && !quiet; i++)
            fprintf(stderr, "%s: warning: %s\n", tq_prog, tq_cli_esc(r.warnings[i]));
        rc = 0;
        /* --quiet: no plan either (the exit status says whether the run would go ahead);
         * --json prints its document whatever --quiet says, as everywhere */
        if (json)
            rc = tq_cli_print_json(dry_run_json(&r, &o, &files, outdir));
        else if (!quiet)
            print_dry_run(&r, &o, &files, outdir);
        tq_out_plan_free(&files);
        tq_convert_report_free(&r);
        goto out;
    }
    tq_cli_resume_note(outdir, o.resume);
    if (tq_convert(in, outdir, &o, &r, &err)) {
        rc = tq_cli_fail(&err);
        tq_cli_resume_kept(outdir, o.resume);
        goto out;
    }
    rc = 0;
    if (o.resume && !quiet && (r.resume_kept || r.resume_dropped))
        fprintf(stderr, "%s: resumed: %zu of %zu shards kept from the interrupted run%s\n", tq_prog, r.resume_kept,
                r.n_shards, r.resume_dropped ? ", changed or missing ones redone" : "");
    for (size_t i = 0; i < r.n_warnings && !quiet; i++)
        fprintf(stderr, "%s: warning: %s\n", tq_prog, tq_cli_esc(r.warnings[i]));
    if (json) {
        rc = tq_cli_print_json(tq_convert_report_json(&r, &o));
    } else if (!o.quiet) {
        print_summary(&r, &o, outdir);
    }
    tq_convert_report_free(&r);
out:
    for (size_t i = 0; i < bf.n; i++)
        free(bf.re[i]);
    free(bf.re);
    free(bf.bits);
    return rc;
}
