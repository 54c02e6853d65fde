/* tq-run: reference greedy decoder (argument parsing only; see runtime/runtime.h). */
#include "cmd/cli.h"
#include "runtime/runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
    printf("Usage: tq-run [options] MODEL_DIR --tokens ID,ID,...\n"
           "       tq-run --compare-logits REF.f32 TEST.f32 --vocab N [--json]\n"
           "Greedy decode from a plain, TurboQuant, MLX affine or split model directory.\n\n"
           "  --tokens LIST        prompt token ids, comma-separated (required)\n"
           "  --max-tokens N       tokens to generate (default 16)\n"
           "  --ctx N              KV cache positions (default: prompt + max-tokens)\n"
           "  --threads N          compute threads (default: cores); results do not depend on it\n"
           "  --resident           load every expert into memory instead of streaming\n"
           "  --cache-budget SIZE  expert cache bytes when streaming (default 1G)\n"
           "  --io-threads N       parallel expert readers (default: experts per token)\n"
           "  --no-direct          plain buffered reads (no O_DIRECT/F_NOCACHE/fadvise)\n"
           "  --check-blocks       verify every expert block read against split.json\n"
           "  --logits FILE        write every step's logits (raw little-endian f32, steps x vocab)\n"
           "  --force-tokens LIST  teacher forcing: feed these ids after each step instead of the argmax\n"
           "  --compare-logits REF TEST  top-1 agreement and mean KL(REF||TEST) per step\n"
           "  --vocab N            vocabulary size for --compare-logits\n"
           "  --json               machine-readable report (sorted keys)\n"
           "  --quiet              print only the generated token ids\n"
           "  --help, --version\n");
}

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
    const char *model = NULL, *tokens = NULL, *cmp_a = NULL, *cmp_b = NULL, *force = NULL;
    long max_tokens = 16, v;
    uint64_t vocab = 0;
    int json = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                           \
    do {                                                                 \
        if (!val)                                                        \
            return tq_cli_usage_error("option '%s' needs a value", a);   \
        i++;                                                             \
    } while (0)
        if (!strcmp(a, "--help")) {
            usage();
            return 0;
        } else if (!strcmp(a, "--version")) {
            tq_cli_version();
            return 0;
        } else if (!strcmp(a, "--tokens")) {
            NEED();
            tokens = val;
        } else if (!strcmp(a, "--force-tokens")) {
            NEED();
            force = val;
        } else if (!strcmp(a, "--max-tokens")) {
            NEED();
            if (tq_cli_int(a, val, 1, 1 << 24, &max_tokens))
                return 2;
        } else if (!strcmp(a, "--ctx")) {
            NEED();
            if (tq_cli_int(a, val, 1, 1 << 24, &v))
                return 2;
            o.ctx = (uint64_t)v;
        } else if (!strcmp(a, "--threads")) {
            NEED();
            if (tq_cli_int(a, val, 1, 256, &v))
                return 2;
            o.threads = (int)v;
        } else if (!strcmp(a, "--io-threads")) {
            NEED();
            if (tq_cli_int(a, val, 1, 64, &v))
                return 2;
            o.io_threads = (int)v;
        } else if (!strcmp(a, "--cache-budget")) {
            NEED();
            if (tq_cli_size(a, val, &o.cache_budget))
                return 2;
        } else if (!strcmp(a, "--resident")) {
            o.resident = 1;
        } else if (!strcmp(a, "--no-direct")) {
            o.io_mode = TQ_RUN_IO_BUFFERED;
        } else if (!strcmp(a, "--check-blocks")) {
            o.check_blocks = 1;
        } else if (!strcmp(a, "--logits")) {
            NEED();
            o.logits_path = val;
        } else if (!strcmp(a, "--compare-logits")) {
            if (i + 2 >= argc)
                return tq_cli_usage_error("--compare-logits needs REF and TEST files");
            cmp_a = argv[++i];
            cmp_b = argv[++i];
        } else if (!strcmp(a, "--vocab")) {
            NEED();
            if (tq_cli_int(a, val, 1, 1 << 26, &v))
                return 2;
            vocab = (uint64_t)v;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return tq_cli_usage_error("unknown option '%s'", a);
        } else if (!model) {
            model = a;
        } else {
            return tq_cli_usage_error("unexpected argument '%s'", a);
        }
#undef NEED
    }
    if (cmp_a) {
        if (model || tokens)
            return tq_cli_usage_error("--compare-logits takes no model or tokens");
        if (!vocab)
            return tq_cli_usage_error("--compare-logits needs --vocab N");
        return compare(cmp_a, cmp_b, vocab, json);
    }
    if (!model)
        return tq_cli_usage_error("missing MODEL_DIR");
    if (!tokens)
        return tq_cli_usage_error("missing --tokens ID,ID,...");
    int32_t *prompt;
    size_t n_prompt;
    if (tq_parse_ids(tokens, &prompt, &n_prompt, NULL) != 0)
        return tq_cli_usage_error("invalid --tokens '%s' (expected comma-separated ids)", tokens);
    int32_t *forced = NULL;
    size_t n_forced = 0;
    if (force && tq_parse_ids(force, &forced, &n_forced, NULL) != 0) {
        free(prompt);
        return tq_cli_usage_error("invalid --force-tokens '%s' (expected comma-separated ids)", force);
    }
    o.force_tokens = forced;
    o.n_force = n_forced;
    int32_t *out = malloc((size_t)max_tokens * sizeof *out);
    if (!out) {
        free(prompt);
        fprintf(stderr, "tq-run: out of memory\n");
        return 1;
    }
    tq_err err = {0};
    tq_runner *r;
    tq_run_stats st;
    int rc = 0;
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
    free(prompt);
    free(forced);
    free(out);
    return rc;
}
