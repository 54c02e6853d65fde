/* tq-mkmodel: write a deterministic synthetic HuggingFace model directory. */
#include "cmd/cli.h"
#include "testdata/mkmodel/mkmodel.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const tq_opt_choice sizes[] = {{"tiny", 0, 0}, {"8g", 1, 0}, {NULL, 0, 0}};
static const char *const size_names[] = {"tiny", "8g"};
static const tq_opt_choice dtypes[] = {
    {"bf16", TQ_DT_BF16, 0}, {"f16", TQ_DT_F16, 0}, {"f32", TQ_DT_F32, 0}, {NULL, 0, 0}};
static const tq_opt_choice namings[] = {{"hf", 0, 0}, {"mlx", 1, 0}, {NULL, 0, 0}};
static const tq_opt_choice quants[] = {{"affine4", 4, 0}, {"affine8", 8, 0}, {NULL, 0, 0}};

int main(int argc, char **argv)
{
    tq_cli_init("tq-mkmodel");
    /* The options are parsed into ov and laid over the --arch/--size preset afterwards, so an
     * explicit dimension wins wherever it stands. */
    tq_mk_opts ov = {0};
    tq_mk_arch arch = TQ_MK_QWEN3_MOE;
    int size = 0, json = 0, force_space = 0, rc;
    /* the --arch choices and their help in the family table's order (formats/family.h) */
    tq_opt_choice archs[TQ_MK_ARCH_COUNT + 1] = {{NULL, 0, 0}};
    for (int a = 0; a < TQ_MK_ARCH_COUNT; a++)
        archs[a] = (tq_opt_choice){tq_mk_arch_name(tq_mk_arch_at(a)), tq_mk_arch_at(a), 0};
    tq_opt opts[] = {
        TQ_OPT_CHOICE("arch", 0, &arch, archs, "A", tq_mk_arch_list()),
        TQ_OPT_CHOICE("size", 0, &size, sizes, "S", "preset: tiny (default, a few MB) or 8g (~8 GB bf16)"),
        TQ_OPT_INT("layers", 0, &ov.layers, 1, 1024, "N", "decoder layers"),
        TQ_OPT_INT("hidden", 0, &ov.hidden, 1, 1 << 16, "N", "hidden size"),
        TQ_OPT_INT("intermediate", 0, &ov.intermediate, 1, 1 << 18, "N", "dense (and shared-expert) MLP width"),
        TQ_OPT_INT("moe-intermediate", 0, &ov.moe_intermediate, 1, 1 << 18, "N", "routed-expert MLP width"),
        TQ_OPT_INT("experts", 0, &ov.experts, 1, 4096, "N", "routed experts per layer (MoE families)"),
        TQ_OPT_INT("top-k", 0, &ov.top_k, 1, 4096, "N", "experts per token (MoE families)"),
        TQ_OPT_INT("heads", 0, &ov.heads, 1, 1024, "N", "attention heads"),
        TQ_OPT_INT("kv-heads", 0, &ov.kv_heads, 1, 1024, "N", "key/value heads (must divide --heads)"),
        TQ_OPT_INT("head-dim", 0, &ov.head_dim, 1, 4096, "N", "head dimension (even)"),
        TQ_OPT_INT("vocab", 0, &ov.vocab, 1, 1 << 24, "N", "vocabulary size"),
        TQ_OPT_CHOICE("dtype", 0, &ov.dtype, dtypes, "T", "bf16 (default), f16 or f32"),
        TQ_OPT_SIZE("shard-size", 0, &ov.shard_size, 1, UINT64_MAX, 0, "SIZE",
                    "bytes of tensor data per shard (default 5000000000)"),
        TQ_OPT_INT("seed", 0, &ov.seed, 0, UINT64_MAX, "N", "random seed (default 0)"),
        TQ_OPT_FLAG("force-space", 0, &force_space,
                    "generate even when the tensor bytes alone exceed the free space of OUTPUT_DIR's "
                    "filesystem (refused by default, exit 1, with both numbers)"),
        TQ_OPT_CHOICE("naming", 0, &ov.naming_mlx, namings, NULL,
                      "the family's HuggingFace checkpoint (hf, default) or the MLX form "
                      "tq-convert writes (mlx: stacked experts, MLX names)"),
        TQ_OPT_INT("mtp", 0, &ov.mtp_layers, 0, 8, "N",
                   "multi-token-prediction layers (qwen3_next, qwen3_5*, deepseek)"),
        TQ_OPT_FLAG("shared-expert", 0, &ov.shared_expert, "add a shared expert and its gate (qwen2_moe style)"),
        TQ_OPT_FLAG("tie-embeddings", 0, &ov.tie_embeddings, "no lm_head.weight; tie_word_embeddings = true"),
        TQ_OPT_CHOICE("quant", 0, &ov.quant_bits, quants, NULL, "MLX affine quantization of the linear layers"),
        TQ_OPT_INT("group-size", 0, &ov.group_size, 1, 1 << 20, "N", "quantization group (default 64; ngram 32)"),
        TQ_OPT_INT("rows", 0, &ov.rows, 1, 1ull << 40, "N", "ngram table rows (default 1024)"),
        TQ_OPT_INT("width", 0, &ov.width, 1, 1 << 20, "N", "ngram values per row (default 160)"),
        TQ_OPT_INT("bits", 0, &ov.bits, 0, 32, "N",
                   "ngram bits per value: 2, 4 (default) or 8; 0: raw --dtype rows, no scales or biases"),
        TQ_OPT_STR("prefix", 0, &ov.prefix, "P", "ngram tensor name prefix (default ngram)"),
        TQ_OPT_INT("threads", 0, &ov.threads, 1, 1024, "N", "worker threads (default: all cores)"),
        TQ_OPT_FLAG("force", 0, &ov.force,
                    "replace an earlier tq-mkmodel output in OUTPUT_DIR (a directory holding other files "
                    "is refused even so)"),
        TQ_OPT_FLAG("json", 0, &json, "print a JSON summary on stdout"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 0, &ov.quiet, "no progress output"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .usage = "Usage: tq-mkmodel [OPTIONS] OUTPUT_DIR\n",
        .out_operand = 1,
        .out_operand_kind = TQ_OUT_DIR,
        .about = "Write a deterministic synthetic model (config.json, tokenizer files, safetensors\n"
                 "shards) whose weights look like trained LLM weights. Same options and seed give\n"
                 "byte-identical files on every machine and for any thread count. Options given\n"
                 "explicitly override the --size preset, whatever their order.\n",
        .epilog = "OUTPUT_DIR must be new or empty, or with --force an earlier tq-mkmodel output (replaced).\n"
                  "Exit status: 0 success, 1 I/O error or foreign files in OUTPUT_DIR, 2 bad usage.\n"
                  "See tq-mkmodel(1) for the weight recipe.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-mkmodel --arch qwen3_moe --size tiny model   # a 2 MB MoE model with a tokenizer",
            "tq-mkmodel --arch llama --seed 2 --shard-size 256K dense   # a dense one, in shards",
            "tq-mkmodel --arch ngram --rows 1000 table   # an n-gram table for tq-rowlayout",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    tq_cli_progress_start(ov.quiet, json);
    if (cli.n_args != 1)
        return tq_cli_usage_error(cli.n_args == 0 ? "missing OUTPUT_DIR" : "too many arguments");
    const char *outdir = cli.args[0];
    if (ov.quant_bits && arch == TQ_MK_NGRAM)
        return tq_cli_usage_error("--quant does not apply to --arch ngram (use --bits)");

    tq_mk_opts o;
    tq_err err = {0};
    if (tq_mk_preset(&o, arch, size_names[size], &err))
        return tq_cli_usage_error("%s", err.msg);
    tq_cli_overlay(&cli, &ov, &o, sizeof o);
    if (tq_mk_validate(&o, &err))
        return tq_cli_usage_error("%s", err.msg);
    tq_provenance pv;
    if (tq_cli_provenance(&cli, 0, &pv) != 0)
        return 1;
    o.provenance = &pv;

    /* the tensor bytes (the files hold a little more: headers, config) against the free space:
     * --size 8g is 8 GB */
    tq_mk_plan plan;
    if (tq_mk_plan_build(&plan, &o, &err))
        return tq_cli_fail(&err);
    if (!force_space && tq_space_check(outdir, plan.total_bytes, 0, &err)) {
        tq_mk_plan_free(&plan);
        return tq_cli_fail(&err);
    }
    double t0 = tq_now();
    tq_cli_partials_note(outdir);
    if (tq_mkmodel(outdir, &o, &err)) {
        tq_mk_plan_free(&plan);
        return tq_cli_fail(&err);
    }
    if (json) {
        cJSON *r = cJSON_CreateObject();
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)o.seed);
        cJSON_AddStringToObject(r, "output", outdir);
        cJSON_AddStringToObject(r, "arch", tq_mk_arch_name(o.arch));
        cJSON_AddStringToObject(r, "seed", seed);
        cJSON_AddNumberToObject(r, "tensors", (double)plan.n);
        cJSON_AddNumberToObject(r, "bytes", (double)plan.total_bytes);
        cJSON_AddNumberToObject(r, "elapsed_s", tq_now() - t0);
        tq_mk_plan_free(&plan);
        return tq_cli_print_json(r);
    }
    tq_mk_plan_free(&plan);
    return 0;
}
