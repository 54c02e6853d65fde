/* tq-run: reference greedy decoder (argument parsing only; see runtime/runtime.h). */
#include "cmd/cli.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

static int compare(const char *a, const char *b, uint64_t vocab, int json)
{
    tq_err err = {0};
    tq_run_logits_cmp c;
    if (tq_run_logits_compare(a, b, vocab, &c, &err) != 0)
        return tq_cli_fail(&err);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "steps", (double)c.steps);
        cJSON_AddNumberToObject(j, "top1_agree", (double)c.top1_agree);
        cJSON_AddNumberToObject(j, "top1_rate", c.top1_rate);
        cJSON_AddNumberToObject(j, "mean_kl", c.mean_kl);
        cJSON_AddNumberToObject(j, "max_kl", c.max_kl);
        cJSON_AddNumberToObject(j, "max_rel_diff", c.max_rel_diff);
        return tq_cli_print_json(j);
    }
    printf("steps: %llu\ntop-1 agreement: %llu/%llu (%.4f)\nmean KL: %.6g nats/step (max %.6g)\n"
           "max relative difference: %.6g\n",
           (unsigned long long)c.steps, (unsigned long long)c.top1_agree, (unsigned long long)c.steps,
           c.top1_rate, c.mean_kl, c.max_kl, c.max_rel_diff);
    return 0;
}

int main(int argc, char **argv)
{
    tq_cli_init("tq-run");
    tq_run_opts o;
    tq_run_opts_default(&o);
    const char *cmp_a = NULL;
    tq_cli_ids tokens = {0}, force = {0};
    long max_tokens = 16;
    uint64_t vocab = 0;
    int json = 0, quiet = 0, rc;
    tq_opt opts[] = {
        TQ_OPT_IDS("tokens", 0, &tokens, "LIST", "prompt token ids, comma-separated (required)"),
        TQ_OPT_INT("max-tokens", 0, &max_tokens, 1, 1 << 24, "N", "tokens to generate (default 16)"),
        TQ_OPT_INT("ctx", 0, &o.ctx, 1, 1 << 24, "N", "KV cache positions (default: prompt + max-tokens)"),
        TQ_OPT_INT("threads", 0, &o.threads, 1, 256, "N",
                   "compute threads (default: cores); results do not depend on it"),
        TQ_OPT_FLAG("resident", 0, &o.resident, "load every expert into memory instead of streaming"),
        TQ_OPT_SIZE("cache-budget", 0, &o.cache_budget, 0, UINT64_MAX, 0, "SIZE",
                    "expert cache bytes when streaming (default 1G)"),
        TQ_OPT_INT("io-threads", 0, &o.io_threads, 1, 64, "N", "parallel expert readers (default: experts per token)"),
        TQ_OPT_SET("no-direct", 0, &o.io_mode, TQ_RUN_IO_BUFFERED,
                   "plain buffered reads (no O_DIRECT/F_NOCACHE/fadvise)"),
        TQ_OPT_FLAG("check-blocks", 0, &o.check_blocks, "verify every expert block read against split.json"),
        TQ_OPT_STR("logits", 0, &o.logits_path, "FILE",
                   "write every step's logits (raw little-endian f32, steps x vocab)"),
        TQ_OPT_IDS("force-tokens", 0, &force, "LIST",
                   "teacher forcing: feed these ids after each step instead of the argmax"),
        TQ_OPT_STR("compare-logits", 0, &cmp_a, "REF TEST", "top-1 agreement and mean KL(REF||TEST) per step"),
        TQ_OPT_INT("vocab", 0, &vocab, 1, 1 << 26, "N", "vocabulary size for --compare-logits"),
        TQ_OPT_FLAG("json", 0, &json, "machine-readable report (sorted keys)"),
        TQ_OPT_FLAG("quiet", 0, &quiet, "print only the generated token ids"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .usage = "Usage: tq-run [OPTIONS] MODEL_DIR --tokens ID,ID,...\n"
                 "       tq-run --compare-logits REF.f32 TEST.f32 --vocab N [--json]\n",
        .about = "Greedy decode from a plain, TurboQuant, MLX affine or split model directory.\n",
        .opts = opts,
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cmp_a) {
        if (cli.n_args == 0)
            return tq_cli_usage_error("--compare-logits needs REF and TEST files");
        if (cli.n_args > 1 || tokens.v)
            return tq_cli_usage_error("--compare-logits takes no model or tokens");
        if (!vocab)
            return tq_cli_usage_error("--compare-logits needs --vocab N");
        return compare(cmp_a, cli.args[0], vocab, json);
    }
    if (cli.n_args == 0)
        return tq_cli_usage_error("missing MODEL_DIR");
    if (cli.n_args > 1)
        return tq_cli_usage_error("unexpected argument '%s'", cli.args[1]);
    if (!tokens.v)
        return tq_cli_usage_error("missing --tokens ID,ID,...");
    const char *model = cli.args[0];
    const int32_t *prompt = tokens.v;
    size_t n_prompt = tokens.n;
    o.force_tokens = force.v;
    o.n_force = force.n;
    int32_t *out = malloc((size_t)max_tokens * sizeof *out);
    if (!out) {
        fprintf(stderr, "tq-run: out of memory\n");
        return 1;
    }
    tq_err err = {0};
    tq_runner *r;
    tq_run_stats st;
    rc = 0;
    if (tq_runner_open(&r, model, &o, &err) != 0) {
        rc = tq_cli_fail(&err);
    } else {
        if (tq_runner_generate(r, prompt, n_prompt, (size_t)max_tokens, out, &st, &err) != 0)
            rc = tq_cli_fail(&err);
        tq_runner_close(r);
    }
    if (rc == 0) {
        if (json) {
            rc = tq_cli_print_json(tq_run_stats_json(&st, out, st.generated_tokens));
        } else {
            printf("tokens:");
            for (uint64_t i = 0; i < st.generated_tokens; i++)
                printf("%s%d", i ? "," : " ", out[i]);
            printf("\n");
            if (!quiet) {
                char b1[32], b2[32], b3[32], b4[32], b5[32];
                char hex[65];
                tq_hex(st.logits_sha256, 32, hex);
                tq_format_size(st.bytes_read, b1, sizeof b1);
                tq_format_size(st.bytes_per_token, b2, sizeof b2);
                tq_format_size(st.peak_rss, b3, sizeof b3);
                tq_format_size(st.cache_bytes, b4, sizeof b4);
                tq_format_size(st.resident_bytes, b5, sizeof b5);
                printf("model: %s, %s weights, %s\n", st.arch, st.weights,
                       st.streamed ? "experts streamed" : "resident");
                printf("speed: %.2f tokens/s (%llu forward passes in %.3f s; load %.3f s)\n", st.tokens_per_s,
                       (unsigned long long)st.forward_passes, st.decode_s, st.load_s);
                if (st.streamed)
                    printf("experts: hit rate %.4f (%llu hits, %llu misses); read %s in %llu reads (%s io, %.3f s), %s/token; cache %s in use\n",
                           st.hit_rate, (unsigned long long)st.expert_hits, (unsigned long long)st.expert_misses,
                           b1, (unsigned long long)st.reads, st.io, st.io_s, b2, b4);
                printf("memory: resident weights %s, peak RSS %s\n", b5, b3);
                printf("logits sha256: %s\n", hex);
            }
        }
    }
    free(out);
    return rc;
}
