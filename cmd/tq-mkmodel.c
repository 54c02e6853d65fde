/* tq-mkmodel: write a deterministic synthetic HuggingFace model directory. */
#include "cmd/cli.h"
#include "testdata/mkmodel/mkmodel.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("Usage: tq-mkmodel [OPTIONS] OUTPUT_DIR\n"
           "Write a deterministic synthetic model (config.json, tokenizer files, safetensors\n"
           "shards) whose weights look like trained LLM weights. Same options and seed give\n"
           "byte-identical files on every machine and for any thread count.\n"
           "\n"
           "  --arch A              llama, qwen3, qwen3_moe (default) or ngram\n"
           "  --size S              preset: tiny (default, a few MB) or 8g (~8 GB bf16)\n"
           "  --layers N --hidden N --intermediate N --moe-intermediate N --experts N\n"
           "  --top-k N --heads N --kv-heads N --head-dim N --vocab N\n"
           "                        override preset dimensions\n"
           "  --dtype T             bf16 (default), f16 or f32\n"
           "  --shard-size SIZE     bytes of tensor data per shard (default 5000000000)\n"
           "  --seed N              random seed (default 0)\n"
           "  --naming hf|mlx       qwen3_moe experts per expert (hf) or stacked switch_mlp (mlx)\n"
           "  --shared-expert       add a shared expert and its gate (qwen2_moe style)\n"
           "  --tie-embeddings      no lm_head.weight; tie_word_embeddings = true\n"
           "  --quant affine4|affine8  MLX affine quantization of the linear layers\n"
           "  --group-size N        quantization group (default 64; ngram 32)\n"
           "  --rows N --width N --bits N --prefix P   ngram table (default 1024 x 160, 4 bits)\n"
           "  --threads N           worker threads (default: all cores)\n"
           "  --json                print a JSON summary on stdout\n"
           "  --quiet               no progress output\n"
           "  --help, --version\n"
           "\n"
           "OUTPUT_DIR must be new, empty or an earlier tq-mkmodel output (replaced).\n"
           "Exit status: 0 success, 1 I/O error or foreign files in OUTPUT_DIR, 2 bad usage.\n"
           "See tq-mkmodel(1) for the weight recipe.\n");
}

enum {
    O_ARCH = 256, O_SIZE, O_LAYERS, O_HIDDEN, O_INTER, O_MOE_INTER, O_EXPERTS, O_TOPK, O_HEADS,
    O_KV, O_HEAD_DIM, O_VOCAB, O_DTYPE, O_SHARD, O_SEED, O_NAMING, O_SHARED, O_TIE, O_QUANT,
    O_GROUP, O_ROWS, O_WIDTH, O_BITS, O_PREFIX, O_THREADS, O_JSON, O_QUIET, O_HELP, O_VERSION,
    O_COUNT
};

static const struct option long_opts[] = {
    {"arch", 1, 0, O_ARCH}, {"size", 1, 0, O_SIZE}, {"layers", 1, 0, O_LAYERS},
    {"hidden", 1, 0, O_HIDDEN}, {"intermediate", 1, 0, O_INTER},
    {"moe-intermediate", 1, 0, O_MOE_INTER}, {"experts", 1, 0, O_EXPERTS},
    {"top-k", 1, 0, O_TOPK}, {"heads", 1, 0, O_HEADS}, {"kv-heads", 1, 0, O_KV},
    {"head-dim", 1, 0, O_HEAD_DIM}, {"vocab", 1, 0, O_VOCAB}, {"dtype", 1, 0, O_DTYPE},
    {"shard-size", 1, 0, O_SHARD}, {"seed", 1, 0, O_SEED}, {"naming", 1, 0, O_NAMING},
    {"shared-expert", 0, 0, O_SHARED}, {"tie-embeddings", 0, 0, O_TIE},
    {"quant", 1, 0, O_QUANT}, {"group-size", 1, 0, O_GROUP}, {"rows", 1, 0, O_ROWS},
    {"width", 1, 0, O_WIDTH}, {"bits", 1, 0, O_BITS}, {"prefix", 1, 0, O_PREFIX},
    {"threads", 1, 0, O_THREADS}, {"json", 0, 0, O_JSON}, {"quiet", 0, 0, O_QUIET},
    {"help", 0, 0, O_HELP}, {"version", 0, 0, O_VERSION}, {0, 0, 0, 0},
};

static int parse_u64(const char *opt, const char *val, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || end == val || *end || *val == '-') {
        tq_cli_usage_error("invalid value '%s' for %s (expected a non-negative integer)", val, opt);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-mkmodel");
    const char *val[O_COUNT] = {0}; /* last value of each option, applied after the preset */
    int json = 0, quiet = 0, shared = 0, tie = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        switch (c) {
        case O_HELP: usage(); return 0;
        case O_VERSION: tq_cli_version(); return 0;
        case O_JSON: json = 1; break;
        case O_QUIET: quiet = 1; break;
        case O_SHARED: shared = 1; break;
        case O_TIE: tie = 1; break;
        case '?':
            if (optopt)
                return tq_cli_usage_error("option '%s' needs a value or takes none", argv[optind - 1]);
            return tq_cli_usage_error("unknown option '%s'", argv[optind - 1]);
        default:
            if (c > 255 && c < O_COUNT)
                val[c] = optarg;
            break;
        }
    }
    if (optind + 1 != argc)
        return tq_cli_usage_error(optind >= argc ? "missing OUTPUT_DIR" : "too many arguments");
    const char *outdir = argv[optind];

    tq_mk_arch arch = TQ_MK_QWEN3_MOE;
    if (val[O_ARCH] && tq_mk_arch_from_name(val[O_ARCH], &arch))
        return tq_cli_usage_error("unknown --arch '%s' (expected llama, qwen3, qwen3_moe or ngram)", val[O_ARCH]);
    tq_mk_opts o;
    tq_err err = {0};
    if (tq_mk_preset(&o, arch, val[O_SIZE] ? val[O_SIZE] : "tiny", &err))
        return tq_cli_usage_error("%s", err.msg);
    o.shared_expert = shared;
    o.tie_embeddings = tie;
    o.quiet = quiet;

    struct { int opt; const char *name; long *dst; long max; } ints[] = {
        {O_LAYERS, "--layers", &o.layers, 1024}, {O_HIDDEN, "--hidden", &o.hidden, 1 << 16},
        {O_INTER, "--intermediate", &o.intermediate, 1 << 18},
        {O_MOE_INTER, "--moe-intermediate", &o.moe_intermediate, 1 << 18},
        {O_EXPERTS, "--experts", &o.experts, 4096}, {O_TOPK, "--top-k", &o.top_k, 4096},
        {O_HEADS, "--heads", &o.heads, 1024}, {O_KV, "--kv-heads", &o.kv_heads, 1024},
        {O_HEAD_DIM, "--head-dim", &o.head_dim, 4096}, {O_VOCAB, "--vocab", &o.vocab, 1 << 24},
        {O_WIDTH, "--width", &o.width, 1 << 20},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (val[ints[i].opt] && tq_cli_int(ints[i].name, val[ints[i].opt], 1, ints[i].max, ints[i].dst))
            return 2;
    long v;
    if (val[O_GROUP]) {
        if (tq_cli_int("--group-size", val[O_GROUP], 1, 1 << 20, &v))
            return 2;
        o.group_size = (int)v;
    }
    if (val[O_BITS]) {
        if (tq_cli_int("--bits", val[O_BITS], 1, 32, &v))
            return 2;
        o.bits = (int)v;
    }
    if (val[O_THREADS]) {
        if (tq_cli_int("--threads", val[O_THREADS], 1, 1024, &v))
            return 2;
        o.threads = (int)v;
    }
    if (val[O_ROWS] && parse_u64("--rows", val[O_ROWS], &o.rows))
        return 2;
    if (val[O_SEED] && parse_u64("--seed", val[O_SEED], &o.seed))
        return 2;
    if (val[O_SHARD] && tq_cli_size("--shard-size", val[O_SHARD], &o.shard_size))
        return 2;
    if (val[O_PREFIX])
        o.prefix = val[O_PREFIX];
    if (val[O_DTYPE]) {
        const char *d = val[O_DTYPE];
        if (!strcmp(d, "bf16")) o.dtype = TQ_DT_BF16;
        else if (!strcmp(d, "f16")) o.dtype = TQ_DT_F16;
        else if (!strcmp(d, "f32")) o.dtype = TQ_DT_F32;
        else return tq_cli_usage_error("unknown --dtype '%s' (expected bf16, f16 or f32)", d);
    }
    if (val[O_NAMING]) {
        if (!strcmp(val[O_NAMING], "mlx")) o.naming_mlx = 1;
        else if (strcmp(val[O_NAMING], "hf")) return tq_cli_usage_error("unknown --naming '%s' (expected hf or mlx)", val[O_NAMING]);
    }
    if (val[O_QUANT]) {
        if (!strcmp(val[O_QUANT], "affine4")) o.quant_bits = 4;
        else if (!strcmp(val[O_QUANT], "affine8")) o.quant_bits = 8;
        else return tq_cli_usage_error("unknown --quant '%s' (expected affine4 or affine8)", val[O_QUANT]);
        if (arch == TQ_MK_NGRAM)
            return tq_cli_usage_error("--quant does not apply to --arch ngram (use --bits)");
    }
    if (tq_mk_validate(&o, &err))
        return tq_cli_usage_error("%s", err.msg);

    tq_mk_plan plan;
    if (json && tq_mk_plan_build(&plan, &o, &err))
        return tq_cli_fail(&err);
    double t0 = tq_now();
    if (tq_mkmodel(outdir, &o, &err)) {
        if (json)
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
    return 0;
}
