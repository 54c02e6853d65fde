/* tq-split: pinned backbone + aligned per-expert (or per-layer FFN) files; --join; --plan. */
#include "cmd/cli.h"
#include "layout/split/split.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("Usage: tq-split [OPTIONS] MODEL OUTPUT_DIR\n"
           "       tq-split --join [OPTIONS] SPLIT_DIR OUTPUT_DIR\n"
           "       tq-split --plan --ram SIZE [--json] MODEL\n"
           "\n"
           "Split a model into pinned.safetensors (everything but the routed experts), one\n"
           "moe_flash_v1 file per MoE layer (experts/layer_LL.bin; one aligned block per expert)\n"
           "or one flash_aligned_v1 file per dense FFN layer (ffn_aligned/layer_LL.bin),\n"
           "config.json with a \"streaming\" block, and split.json (sizes and SHA-256 of every\n"
           "file and expert block).\n"
           "\n"
           "Options:\n"
           "  --align N         block and header page alignment, a power of two >= 4096 (default 16384)\n"
           "  --threads N       worker threads (default: number of CPUs); output is identical for any N\n"
           "  --top-k K         experts per token when config.json has no num_experts_per_tok\n"
           "  --source-label S  record S instead of MODEL as the source path in split.json\n"
           "  --join            rebuild a model directory from SPLIT_DIR\n"
           "  --naming MODE     with --join: source (default; as split.json records), hf (per-expert\n"
           "                    mlp.experts.E.* names) or mlx (stacked mlp.switch_mlp.* names)\n"
           "  --shard-size SIZE with --join: shard limit (default: the source's own sharding)\n"
           "  --plan            print what the split needs, write nothing\n"
           "  --ram SIZE        with --plan: the target machine's memory (e.g. 16G)\n"
           "  --json            machine-readable report on stdout\n"
           "  --quiet           no report, no progress\n"
           "  --help, --version\n"
           "\n"
           "Exit status: 0 success, 1 bad input data or I/O error, 2 bad usage.\n");
}

static void human(uint64_t n, char *buf, size_t cap)
{
    tq_format_size(n, buf, cap);
}

static void print_plan(const tq_split_ram_plan *p)
{
    char a[32], b[32], c[32], d[32];
    human(p->ram, a, sizeof a);
    human(p->pinned_bytes, b, sizeof b);
    printf("kind: %s\n", p->kind == TQ_FLASH_MOE ? "moe" : "dense");
    printf("pinned: %llu bytes (%s)\n", (unsigned long long)p->pinned_bytes, b);
    human(p->block_size, c, sizeof c);
    human(p->bytes_per_token_cold, d, sizeof d);
    if (p->kind == TQ_FLASH_MOE) {
        printf("layers: %llu, experts per layer: %llu, top-k: %llu\n", (unsigned long long)p->n_layers,
               (unsigned long long)p->num_experts, (unsigned long long)p->experts_per_tok);
        printf("expert block: %llu bytes (%s)\n", (unsigned long long)p->block_size, c);
        printf("read per token, cold cache: %llu bytes (%s) = %llu layers x top-%llu x block\n",
               (unsigned long long)p->bytes_per_token_cold, d, (unsigned long long)p->n_layers,
               (unsigned long long)p->experts_per_tok);
    } else {
        printf("layers: %llu, largest FFN layer file: %llu bytes (%s)\n", (unsigned long long)p->n_layers,
               (unsigned long long)p->block_size, c);
        printf("read per token, cold cache: %llu bytes (%s) (every FFN layer)\n",
               (unsigned long long)p->bytes_per_token_cold, d);
    }
    human(p->envelope, b, sizeof b);
    human(p->cache_budget, c, sizeof c);
    printf("RAM: %llu bytes (%s); engine envelope: %llu bytes (%s)\n", (unsigned long long)p->ram, a,
           (unsigned long long)p->envelope, b);
    printf("cache budget: %llu bytes (%s) = envelope - pinned - 3 GiB reserve\n",
           (unsigned long long)p->cache_budget, c);
    printf("cache holds: %llu of %llu %s (%.2f%%)\n", (unsigned long long)p->blocks_cached,
           (unsigned long long)p->blocks_total, p->kind == TQ_FLASH_MOE ? "experts" : "layers",
           100.0 * p->cached_share);
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-split");
    enum { O_ALIGN = 256, O_THREADS, O_TOPK, O_LABEL, O_JOIN, O_NAMING, O_SHARD, O_PLAN, O_RAM, O_JSON, O_QUIET, O_HELP, O_VERSION };
    static const struct option opts[] = {
        {"align", required_argument, 0, O_ALIGN},   {"threads", required_argument, 0, O_THREADS},
        {"top-k", required_argument, 0, O_TOPK},    {"join", no_argument, 0, O_JOIN},
        {"source-label", required_argument, 0, O_LABEL},
        {"naming", required_argument, 0, O_NAMING}, {"shard-size", required_argument, 0, O_SHARD},
        {"plan", no_argument, 0, O_PLAN},           {"ram", required_argument, 0, O_RAM},
        {"json", no_argument, 0, O_JSON},           {"quiet", no_argument, 0, O_QUIET},
        {"help", no_argument, 0, O_HELP},           {"version", no_argument, 0, O_VERSION},
        {0, 0, 0, 0},
    };
    tq_split_opts so = {0};
    tq_split_join_opts jo = {0};
    int join = 0, plan = 0, json = 0, have_ram = 0, c;
    uint64_t ram = 0;
    long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_ALIGN:
            if (tq_cli_size("--align", optarg, &so.align) != 0)
                return 2;
            if (so.align < TQ_FLASH_MIN_ALIGN || so.align > TQ_FLASH_MAX_ALIGN || (so.align & (so.align - 1)))
                return tq_cli_usage_error("--align %s: must be a power of two in [%u, %u]", optarg, TQ_FLASH_MIN_ALIGN,
                                          TQ_FLASH_MAX_ALIGN);
            break;
        case O_THREADS:
            if (tq_cli_int("--threads", optarg, 1, 256, &v) != 0)
                return 2;
            so.threads = jo.threads = (int)v;
            break;
        case O_TOPK:
            if (tq_cli_int("--top-k", optarg, 1, TQ_FLASH_MAX_EXPERTS, &v) != 0)
                return 2;
            so.top_k = (uint64_t)v;
            break;
        case O_LABEL:
            so.source_label = optarg;
            break;
        case O_JOIN:
            join = 1;
            break;
        case O_NAMING:
            if (!strcmp(optarg, "source"))
                jo.naming = TQ_NAMING_SOURCE;
            else if (!strcmp(optarg, "hf"))
                jo.naming = TQ_NAMING_HF;
            else if (!strcmp(optarg, "mlx"))
                jo.naming = TQ_NAMING_MLX;
            else
                return tq_cli_usage_error("--naming %s: expected source, hf or mlx", optarg);
            break;
        case O_SHARD:
            if (tq_cli_size("--shard-size", optarg, &jo.shard_size) != 0)
                return 2;
            break;
        case O_PLAN:
            plan = 1;
            break;
        case O_RAM:
            if (tq_cli_size("--ram", optarg, &ram) != 0)
                return 2;
            have_ram = 1;
            break;
        case O_JSON:
            json = 1;
            break;
        case O_QUIET:
            so.quiet = jo.quiet = 1;
            break;
        case O_HELP:
            usage();
            return 0;
        case O_VERSION:
            tq_cli_version();
            return 0;
        default:
            return tq_cli_usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    int nargs = argc - optind;
    tq_err err = {0};
    if (join && plan)
        return tq_cli_usage_error("--join and --plan do not go together");
    if (plan) {
        if (!have_ram)
            return tq_cli_usage_error("--plan needs --ram SIZE");
        if (nargs != 1)
            return tq_cli_usage_error("--plan takes one MODEL");
        tq_split_ram_plan p;
        if (tq_split_plan(argv[optind], &so, ram, &p, &err) != 0)
            return tq_cli_fail(&err);
        if (json)
            return tq_cli_print_json(tq_split_plan_json(&p));
        print_plan(&p);
        return 0;
    }
    if (have_ram)
        return tq_cli_usage_error("--ram goes with --plan");
    if (nargs != 2)
        return tq_cli_usage_error("expected %s OUTPUT_DIR", join ? "SPLIT_DIR" : "MODEL");
    if (join) {
        if (tq_split_join(argv[optind], argv[optind + 1], &jo, &err) != 0)
            return tq_cli_fail(&err);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            if (j && (!cJSON_AddStringToObject(j, "joined", argv[optind]) ||
                      !cJSON_AddStringToObject(j, "output", argv[optind + 1]) ||
                      !cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)tq_peak_rss()))) {
                cJSON_Delete(j);
                j = NULL;
            }
            return tq_cli_print_json(j);
        }
        if (!so.quiet)
            printf("joined %s into %s\n", argv[optind], argv[optind + 1]);
        return 0;
    }
    tq_split_result r;
    double t0 = tq_now();
    if (tq_split(argv[optind], argv[optind + 1], &so, &r, &err) != 0)
        return tq_cli_fail(&err);
    double dt = tq_now() - t0;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        if (j) {
            cJSON_AddStringToObject(j, "kind", r.kind == TQ_FLASH_MOE ? "moe" : "dense");
            cJSON_AddStringToObject(j, "output", argv[optind + 1]);
            cJSON_AddNumberToObject(j, "pinned_bytes", (double)r.pinned_bytes);
            cJSON_AddNumberToObject(j, "layers", (double)r.n_layers);
            cJSON_AddNumberToObject(j, "num_experts", (double)r.num_experts);
            cJSON_AddNumberToObject(j, "experts_per_tok", (double)r.experts_per_tok);
            cJSON_AddNumberToObject(j, "expert_block_bytes", (double)r.max_block_size);
            cJSON_AddNumberToObject(j, "layer_file_bytes", (double)r.ffn_bytes);
            cJSON_AddNumberToObject(j, "bytes_written", (double)r.bytes_written);
            cJSON_AddNumberToObject(j, "elapsed_s", dt);
            cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)tq_peak_rss());
        }
        return tq_cli_print_json(j);
    }
    if (!so.quiet) {
        char a[32], b[32];
        human(r.pinned_bytes, a, sizeof a);
        human(r.bytes_written, b, sizeof b);
        if (r.kind == TQ_FLASH_MOE)
            printf("split %s: %llu layers x %llu experts (block %llu bytes), pinned %s, %s written\n",
                   argv[optind + 1], (unsigned long long)r.n_layers, (unsigned long long)r.num_experts,
                   (unsigned long long)r.max_block_size, a, b);
        else
            printf("split %s: %llu dense FFN layers, pinned %s, %s written\n", argv[optind + 1],
                   (unsigned long long)r.n_layers, a, b);
    }
    return 0;
}
