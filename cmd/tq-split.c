/* tq-split: pinned backbone + aligned per-expert (or per-layer FFN) files; --join; --plan. */
#include "cmd/cli.h"
#include "formats/formats.h"
#include "layout/split/split.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const tq_opt_choice namings[] = {
    {"source", TQ_NAMING_SOURCE, 0}, {"hf", TQ_NAMING_HF, 0}, {"mlx", TQ_NAMING_MLX, 0}, {NULL, 0, 0}};

static const tq_opt_choice targets[] = {{"tq", TQ_TARGET_TQ, 0},
                                        {"mac-code", TQ_TARGET_MAC_CODE, 0},
                                        {"mlx-sniper", TQ_TARGET_MLX_SNIPER, 0},
                                        {NULL, 0, 0}};

static void human(uint64_t n, char *buf, size_t cap)
{
    tq_format_size(n, buf, cap);
}

/* --plan's verdict for the target asked for (--target, default tq): 0 when the split fits
 * the machine, TQ_PLAN_NO_FIT when it does not or that target cannot read it. */
#define TQ_PLAN_NO_FIT 3

static int plan_fits(const tq_split_ram_plan *p, int target)
{
    return p->targets[target].readable && p->targets[target].fits;
}

/* The last line of --plan: the answer to the question it was asked. */
static void print_verdict(const tq_split_ram_plan *p, int target)
{
    char need[32], ram[32];
    human(p->targets[target].min_ram_bytes, need, sizeof need);
    human(p->ram, ram, sizeof ram);
    if (!p->targets[target].readable)
        printf("verdict: does not fit: target %s cannot read this model (%s)\n", tq_split_target_name(target),
               p->targets[target].reason);
    else
        printf("verdict: %s: target %s needs at least %s of RAM, the machine has %s\n",
               p->targets[target].fits ? "fits" : "does not fit", tq_split_target_name(target), need, ram);
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
    for (int t = 0; t < TQ_TARGET_COUNT; t++) {
        human(p->targets[t].min_ram_bytes, a, sizeof a);
        if (!p->targets[t].readable)
            printf("target %s: cannot read it: %s\n", tq_split_target_name(t), tq_cli_esc(p->targets[t].reason));
        else
            printf("target %s: %s (needs at least %s)\n", tq_split_target_name(t),
                   p->targets[t].fits ? "fits" : "does not fit", a);
    }
}

/* --dry-run: every file with its size, then what a streaming engine needs (with --ram, the
 * verdict per target as --plan gives it). */
static void print_dry_run(const tq_split_result *r, const tq_out_plan *files, const tq_split_ram_plan *p,
                          int have_ram, const char *out)
{
    char a[32];
    uint64_t total = tq_out_plan_total(files);
    if (r->kind == TQ_FLASH_MOE)
        printf("%s would get %llu layers x %llu experts (block %llu bytes), top-k %llu, in %zu files:\n", tq_cli_esc(out),
               (unsigned long long)r->n_layers, (unsigned long long)r->num_experts,
               (unsigned long long)r->max_block_size, (unsigned long long)r->experts_per_tok, files->n);
    else
        printf("%s would get %llu dense FFN layer files in %zu files:\n", tq_cli_esc(out), (unsigned long long)r->n_layers,
               files->n);
    for (size_t i = 0; i < files->n; i++)
        printf("  %-48s %llu bytes\n", tq_cli_esc(files->v[i].name), (unsigned long long)files->v[i].size);
    human(total, a, sizeof a);
    printf("total: %llu bytes (%s)\n", (unsigned long long)total, a);
    human(p->targets[0].min_ram_bytes, a, sizeof a);
    printf("a streaming engine needs at least %llu bytes (%s) of RAM: pinned + 3 GiB reserve + %s\n",
           (unsigned long long)p->targets[0].min_ram_bytes, a,
           r->kind == TQ_FLASH_MOE ? "2 x top-k expert blocks" : "2 FFN layer files");
    for (int t = 0; t < TQ_TARGET_COUNT; t++) {
        if (!p->targets[t].readable)
            printf("target %s: cannot read it: %s\n", tq_split_target_name(t), tq_cli_esc(p->targets[t].reason));
        else if (have_ram)
            printf("target %s: %s in %llu bytes of RAM\n", tq_split_target_name(t),
                   p->targets[t].fits ? "fits" : "does not fit", (unsigned long long)p->ram);
        else
            printf("target %s: can read it\n", tq_split_target_name(t));
    }
    printf("dry run, nothing written\n");
}

static cJSON *dry_run_json(const tq_split_result *r, const tq_out_plan *files, const tq_split_ram_plan *p,
                           int have_ram, const char *out)
{
    cJSON *j = cJSON_CreateObject(), *f = tq_out_plan_json(files), *pl = tq_split_plan_json(p);
    int ok = j && f && pl && cJSON_AddBoolToObject(j, "dry_run", 1) && cJSON_AddStringToObject(j, "output", out) &&
             cJSON_AddStringToObject(j, "kind", r->kind == TQ_FLASH_MOE ? "moe" : "dense") &&
             tq_json_add_u64(j, "layers", r->n_layers) && tq_json_add_u64(j, "num_experts", r->num_experts) &&
             tq_json_add_u64(j, "experts_per_tok", r->experts_per_tok) &&
             tq_json_add_u64(j, "expert_block_bytes", r->max_block_size) &&
             tq_json_add_u64(j, "pinned_bytes", r->pinned_bytes) &&
             tq_json_add_u64(j, "output_bytes", tq_out_plan_total(files)) &&
             tq_json_add_u64(j, "min_ram_bytes", p->targets[0].min_ram_bytes) &&
             cJSON_AddBoolToObject(j, "tq_run_decodes", !r->run_warning[0]);
    if (ok && !have_ram) { /* the verdicts need --ram */
        cJSON_DeleteItemFromObjectCaseSensitive(pl, "ram_bytes");
        for (cJSON *t = cJSON_GetObjectItemCaseSensitive(pl, "targets")->child; t; t = t->next)
            cJSON_DeleteItemFromObjectCaseSensitive(t, "fits");
    }
    if (!ok) {
        cJSON_Delete(j);
        cJSON_Delete(f);
        cJSON_Delete(pl);
        return NULL;
    }
    cJSON_AddItemToObject(j, "files", f);
    cJSON_AddItemToObject(j, "plan", pl);
    return j;
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-split");
    tq_split_opts so = {0};
    tq_split_join_opts jo = {0};
    int join = 0, plan = 0, dry = 0, json = 0, threads = 0, quiet = 0, force_space = 0, rc;
    uint64_t ram = 0;
    tq_opt opts[] = {
        TQ_OPT_CHOICE("target", 0, &so.target, targets, "T",
                      "who reads the split: tq (default), mac-code (flash-streaming engines) or mlx-sniper; "
                      "sets names, files, header page and config, and refuses what T cannot run"),
        TQ_OPT_BYTES("align", 0, &so.align, TQ_FLASH_MIN_ALIGN, TQ_FLASH_MAX_ALIGN, TQ_OPT_POW2, "N",
                    "block and header page alignment, a power of two >= 4096 (default 16384)"),
        TQ_OPT_INT("threads", 0, &threads, 1, 256, "N",
                   "worker threads (default: number of CPUs); output is identical for any N"),
        TQ_OPT_INT("top-k", 0, &so.top_k, 1, TQ_FLASH_MAX_EXPERTS, "K",
                   "experts per token when config.json has no num_experts_per_tok"),
        TQ_OPT_STR("source-label", 0, &so.source_label, "S",
                   "record S instead of MODEL as the source path in split.json"),
        TQ_OPT_FLAG("join", 0, &join, "rebuild a model directory from SPLIT_DIR"),
        TQ_OPT_CHOICE("naming", 0, &jo.naming, namings, "MODE",
                      "with --join: source (default; as split.json records), hf (per-expert mlp.experts.E.* "
                      "names) or mlx (stacked mlp.switch_mlp.* names)"),
        TQ_OPT_SIZE("shard-size", 0, &jo.shard_size, 0, UINT64_MAX, 0, "SIZE",
                    "with --join: shard limit (default: the source's own sharding)"),
        TQ_OPT_FLAG("no-verify", 0, &jo.no_verify,
                    "with --join: skip checking every file and expert block against split.json's SHA-256 "
                    "(checked by default: a split changed after it was made is refused)"),
        TQ_OPT_FLAG("resume", 0, &so.resume,
                    "build in OUTPUT_DIR.partial-resume with a journal, kept when interrupted; rerun the same "
                    "command with --resume to keep the finished layer files (checked by SHA-256) and redo the rest"),
        TQ_OPT_FLAG("plan", 0, &plan, "print what the split needs, write nothing"),
        TQ_OPT_FLAG("dry-run", 0, &dry,
                    "write nothing: check everything a split checks, then list every file it would write "
                    "with its exact size and the RAM a streaming engine needs (with --ram: fits or not)"),
        TQ_OPT_SIZE("ram", 0, &ram, 0, UINT64_MAX, 0, "SIZE",
                    "with --plan or --dry-run: the target machine's memory (e.g. 16G)"),
        TQ_OPT_FLAG("force", 0, &so.force, "replace an existing non-empty OUTPUT_DIR (also with --join)"),
        TQ_OPT_FLAG("force-space", 0, &force_space,
                    "split even when the output (its exact size, as --dry-run lists it) does not fit the free "
                    "space of OUTPUT_DIR's filesystem (refused by default, exit 1, with both numbers)"),
        TQ_OPT_FLAG("json", 0, &json, "machine-readable report on stdout"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 0, &quiet, "no report, plan or progress (--json still prints)"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .out_operand = 2,
        .out_operand_kind = TQ_OUT_DIR,
        .usage = "Usage: tq-split [OPTIONS] MODEL OUTPUT_DIR\n"
                 "       tq-split --join [OPTIONS] SPLIT_DIR OUTPUT_DIR\n"
                 "       tq-split --plan --ram SIZE [--json] MODEL\n"
                 "       tq-split --dry-run [--ram SIZE] [OPTIONS] MODEL OUTPUT_DIR\n",
        .about = "\n"
                 "Split a model into pinned.safetensors (everything but the routed experts), one\n"
                 "moe_flash_v1 file per MoE layer (experts/layer_LL.bin; one aligned block per expert)\n"
                 "or one flash_aligned_v1 file per dense FFN layer (ffn_aligned/layer_LL.bin),\n"
                 "config.json with a \"streaming\" block, and split.json (sizes and SHA-256 of every\n"
                 "file and expert block).\n",
        .epilog = "Exit status: 0 success, 1 bad input data or I/O error, 2 bad usage; --plan: 3 when the\n"
                  "model does not fit --ram for --target (0 when it fits).\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-split model-tq3 model-split   # pinned weights + one aligned file per MoE layer",
            "tq-split --plan --ram 16G model-tq3   # does it stream on a 16 GiB machine?",
            "tq-split --join model-split model-joined   # the model directory back",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    so.threads = jo.threads = threads;
    jo.force = so.force;
    so.quiet = jo.quiet = quiet;
    tq_cli_progress_start(quiet, json);
    int have_ram = tq_cli_given(&cli, "ram") > 0;
    int nargs = cli.n_args;
    char **args = cli.args;
    tq_err err = {0};
    /* before args[0] is resolved: the command as given, MODEL as --source-label names it
     * (split.json's source.path), so that identical copies split alike */
    tq_provenance pv;
    char *model_arg = nargs >= 1 ? args[0] : NULL;
    if (nargs >= 1 && so.source_label && !join)
        args[0] = (char *)so.source_label;
    int prc = tq_cli_provenance(&cli, 1, &pv);
    if (nargs >= 1)
        args[0] = model_arg;
    if (prc != 0)
        return 1;
    so.provenance = jo.provenance = &pv;
    if (join && plan)
        return tq_cli_usage_error("--join and --plan do not go together");
    if (dry && (join || plan))
        return tq_cli_usage_error("--dry-run goes with a split, not with %s", join ? "--join" : "--plan");
    if (so.resume && plan)
        return tq_cli_usage_error("--resume goes with a split, not --plan");
    if (force_space && (join || plan || dry))
        return tq_cli_usage_error("--force-space goes with a split, not with %s", join ? "--join" : plan ? "--plan" : "--dry-run");
    if (!join && (rc = tq_cli_hf_models(&cli, 0, 1)) != 0) /* a HF cache entry, offline */
        return rc;
    if (plan) {
        if (!have_ram)
            return tq_cli_usage_error("--plan needs --ram SIZE");
        if (nargs != 1)
            return tq_cli_usage_error("--plan takes one MODEL");
        tq_split_ram_plan p;
        if (tq_split_plan(args[0], &so, ram, &p, &err) != 0)
            return tq_cli_fail(&err);
        /* exit 0 when it fits, 3 when not (--quiet: the status alone answers) */
        int verdict = plan_fits(&p, so.target) ? 0 : TQ_PLAN_NO_FIT;
        if (json)
            return (rc = tq_cli_print_json(tq_split_plan_json(&p))) ? rc : verdict;
        if (!quiet) {
            print_plan(&p);
            print_verdict(&p, so.target);
        }
        return verdict;
    }
    if (have_ram && !dry)
        return tq_cli_usage_error("--ram goes with --plan or --dry-run");
    if (jo.no_verify && !join)
        return tq_cli_usage_error("--no-verify goes with --join");
    if (so.resume && join)
        return tq_cli_usage_error("--resume goes with a split, not --join");
    if (nargs != 2)
        return tq_cli_usage_error("expected %s OUTPUT_DIR", join ? "SPLIT_DIR" : "MODEL");
    if (join) {
        tq_cli_partials_note(args[1]);
        if (tq_split_join(args[0], args[1], &jo, &err) != 0)
            return tq_cli_fail(&err);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            if (j && (!cJSON_AddStringToObject(j, "joined", args[0]) ||
                      !cJSON_AddStringToObject(j, "output", args[1]) ||
                      !cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)tq_peak_rss()))) {
                cJSON_Delete(j);
                j = NULL;
            }
            return tq_cli_print_json(j);
        }
        if (!so.quiet)
            printf("joined %s into %s\n", tq_cli_esc(args[0]), tq_cli_esc(args[1]));
        return 0;
    }
    tq_split_result r;
    if (dry) {
        tq_out_plan files = {0};
        tq_split_ram_plan p;
        if (tq_split_dry_run(args[0], args[1], &so, &r, &files, &err) != 0)
            return tq_cli_fail(&err);
        if (tq_split_plan(args[0], &so, ram, &p, &err) != 0) {
            tq_out_plan_free(&files);
            return tq_cli_fail(&err);
        }
        rc = 0;
        if (r.run_warning[0] && !quiet)
            fprintf(stderr, "%s: warning: %s\n", tq_prog, tq_cli_esc(r.run_warning));
        /* --quiet: no plan either; --json prints its document whatever --quiet says */
        if (json)
            rc = tq_cli_print_json(dry_run_json(&r, &files, &p, have_ram, args[1]));
        else if (!quiet)
            print_dry_run(&r, &files, &p, have_ram, args[1]);
        tq_out_plan_free(&files);
        return rc;
    }
    double t0 = tq_now();
    tq_cli_resume_note(args[1], so.resume);
    if (!force_space) { /* the exact size the dry run lists, against the free space */
        tq_out_plan files = {0};
        char *rp = so.resume ? tq_sibling_path(args[1], TQ_RESUME_SUFFIX, &err) : NULL;
        int sc = (so.resume && !rp) || tq_split_dry_run(args[0], args[1], &so, &r, &files, &err) ||
                 tq_space_check(args[1], tq_out_plan_total(&files), rp ? tq_tree_bytes(rp) : 0, &err);
        free(rp);
        tq_out_plan_free(&files);
        if (sc)
            return tq_cli_fail(&err);
    }
    if (tq_split(args[0], args[1], &so, &r, &err) != 0) {
        int st = tq_cli_fail(&err);
        tq_cli_resume_kept(args[1], so.resume);
        return st;
    }
    double dt = tq_now() - t0;
    if (so.resume && !so.quiet && (r.resume_kept || r.resume_dropped))
        fprintf(stderr, "%s: resumed: %zu of %llu layer files kept from the interrupted run%s\n", tq_prog, r.resume_kept,
                (unsigned long long)r.n_layers, r.resume_dropped ? ", changed or missing ones redone" : "");
    if (r.run_warning[0] && !so.quiet)
        fprintf(stderr, "%s: warning: %s\n", tq_prog, tq_cli_esc(r.run_warning));
    if (json) {
        cJSON *j = cJSON_CreateObject();
        if (j) {
            cJSON_AddStringToObject(j, "kind", r.kind == TQ_FLASH_MOE ? "moe" : "dense");
            cJSON_AddStringToObject(j, "output", args[1]);
            cJSON_AddNumberToObject(j, "pinned_bytes", (double)r.pinned_bytes);
            cJSON_AddNumberToObject(j, "layers", (double)r.n_layers);
            cJSON_AddNumberToObject(j, "num_experts", (double)r.num_experts);
            cJSON_AddNumberToObject(j, "experts_per_tok", (double)r.experts_per_tok);
            cJSON_AddNumberToObject(j, "expert_block_bytes", (double)r.max_block_size);
            cJSON_AddNumberToObject(j, "layer_file_bytes", (double)r.ffn_bytes);
            cJSON_AddNumberToObject(j, "bytes_written", (double)r.bytes_written);
            cJSON_AddBoolToObject(j, "tq_run_decodes", !r.run_warning[0]);
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
                   tq_cli_esc(args[1]), (unsigned long long)r.n_layers, (unsigned long long)r.num_experts,
                   (unsigned long long)r.max_block_size, a, b);
        else
            printf("split %s: %llu dense FFN layers, pinned %s, %s written\n", tq_cli_esc(args[1]),
                   (unsigned long long)r.n_layers, a, b);
    }
    return 0;
}
