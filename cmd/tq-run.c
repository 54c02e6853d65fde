/* tq-run: reference greedy decoder (argument parsing only; see runtime/runtime.h). */
#include "cmd/cli.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_INPUT_BYTES (1u << 30)

/* All of standard input (a pipe, a terminal or a file), at most MAX_INPUT_BYTES. */
static int read_stdin(char **out, size_t *len, tq_err *e)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    if (!b)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    for (;;) {
        if (n == cap) {
            char *nb = cap < MAX_INPUT_BYTES ? realloc(b, cap * 2 + 1) : NULL;
            if (!nb) {
                free(b);
                return tq_fail(e, cap < MAX_INPUT_BYTES ? TQ_ENOMEM : TQ_EDATA,
                               "standard input: more than %u bytes", MAX_INPUT_BYTES);
            }
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(0, b + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return tq_fail(e, TQ_EIO, "standard input: %s", strerror(errno));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    b[n] = 0;
    *out = b;
    *len = n;
    return 0;
}

static int write_out(const char *s, size_t n)
{
    if (n && fwrite(s, 1, n, stdout) != n) {
        fprintf(stderr, "tq-run: standard output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* --encode: UTF-8 text on standard input -> "id,id,...\n". */
static int encode_stdin(const tq_tok *t, int add_special)
{
    tq_err err = {0};
    char *text;
    size_t len, n;
    int32_t *ids;
    if (read_stdin(&text, &len, &err))
        return tq_cli_fail(&err);
    int rc = tq_tok_encode(t, text, len, add_special, &ids, &n, &err);
    free(text);
    if (rc) {
        tq_err_prefix(&err, "standard input");
        return tq_cli_fail(&err);
    }
    for (size_t i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    return fflush(stdout) ? write_out("x", 1) : 0;
}

/* --decode: "id,id,..." (white space around it is ignored) on standard input -> text. */
static int decode_stdin(const tq_tok *t)
{
    tq_err err = {0};
    char *in, *text = NULL;
    size_t len, n = 0, tl = 0;
    int32_t *ids = NULL;
    if (read_stdin(&in, &len, &err))
        return tq_cli_fail(&err);
    int rc = 0;
    if (tq_parse_id_text(in, len, &ids, &n, &err)) {
        tq_err_prefix(&err, "standard input");
        rc = tq_cli_fail(&err);
    } else if (tq_tok_decode(t, ids, n, &text, &tl, &err)) {
        rc = tq_cli_fail(&err);
    } else {
        rc = write_out(text, tl);
        if (!rc && fflush(stdout))
            rc = write_out("x", 1);
    }
    free(in);
    free(ids);
    free(text);
    return rc;
}

/* --temperature and --top-p: a decimal number in a range. */
static int set_temperature(void *ctx, const char *val, char *why, size_t cap)
{
    char *end;
    double v = strtod(val, &end);
    if (end == val || *end || !(v >= 0 && v <= 100)) {
        snprintf(why, cap, "expected a number from 0 (greedy) to 100, e.g. 0.7");
        return -1;
    }
    *(double *)ctx = v;
    return 0;
}

static int set_top_p(void *ctx, const char *val, char *why, size_t cap)
{
    char *end;
    double v = strtod(val, &end);
    if (end == val || *end || !(v > 0 && v <= 1)) {
        snprintf(why, cap, "expected a number above 0 and at most 1, e.g. 0.9");
        return -1;
    }
    *(double *)ctx = v;
    return 0;
}

/* Streamed text output: each piece of text on standard output as soon as it exists. */
typedef struct text_out {
    tq_err err;
    int failed;
} text_out;

static int on_text(void *user, const char *p, size_t n)
{
    text_out *o = user;
    if (fwrite(p, 1, n, stdout) != n || fflush(stdout)) {
        tq_fail(&o->err, TQ_EIO, "standard output: %s", strerror(errno));
        o->failed = 1;
        return -1;
    }
    return 0;
}

/* The report of a decode (not --json): on standard error, after the text or the ids. */
static void report(FILE *f, const tq_run_stats *st, const int32_t *out, int ids_on_stdout)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    char hex[65];
    if (!ids_on_stdout) {
        fprintf(f, "tokens:");
        for (uint64_t i = 0; i < st->generated_tokens; i++)
            fprintf(f, "%s%d", i ? "," : " ", out[i]);
        fprintf(f, "%s\n", st->stopped ? " (ended at the eos token)" : "");
    } else if (st->stopped) {
        fprintf(f, "tokens: %llu (ended at a stop token)\n", (unsigned long long)st->generated_tokens);
    }
    if (st->sampling.temperature > 0)
        fprintf(f, "sampling: temperature %g, top-k %llu, top-p %g, seed %llu\n", st->sampling.temperature,
                (unsigned long long)st->sampling.top_k, st->sampling.top_p > 0 ? st->sampling.top_p : 1.0,
                (unsigned long long)st->sampling.seed);
    tq_hex(st->logits_sha256, 32, hex);
    tq_format_size(st->bytes_read, b1, sizeof b1);
    tq_format_size(st->bytes_per_token, b2, sizeof b2);
    tq_format_size(st->peak_rss, b3, sizeof b3);
    tq_format_size(st->cache_bytes, b4, sizeof b4);
    tq_format_size(st->resident_bytes, b5, sizeof b5);
    fprintf(f, "model: %s, %s weights, %s\n", tq_cli_esc(st->arch), tq_cli_esc(st->weights), st->streamed ? "experts streamed" : "resident");
    fprintf(f, "speed: %.2f tokens/s (%llu forward passes in %.3f s; load %.3f s)\n", st->tokens_per_s,
            (unsigned long long)st->forward_passes, st->decode_s, st->load_s);
    if (st->streamed && strcmp(st->io, "map") == 0)
        fprintf(f, "experts: mapped from the layer files (the OS reads their pages: no hits, misses or reads "
                   "counted)\n");
    else if (st->streamed)
        fprintf(f, "experts: hit rate %.4f (%llu hits, %llu misses); read %s in %llu reads (%s io, %.3f s), %s/token; cache %s in use\n",
                st->hit_rate, (unsigned long long)st->expert_hits, (unsigned long long)st->expert_misses, b1,
                (unsigned long long)st->reads, st->io, st->io_s, b2, b4);
    fprintf(f, "memory: resident weights %s, peak RSS %s\n", b5, b3);
    fprintf(f, "logits sha256: %s\n", hex);
}

/* strftime_now's date in chat templates: SOURCE_DATE_EPOCH when set (reproducible output), else now. */
static int64_t chat_now(void)
{
    const char *s = getenv("SOURCE_DATE_EPOCH");
    char *end;
    if (s && *s) {
        long long v = strtoll(s, &end, 10);
        if (!*end)
            return v;
    }
    return (int64_t)time(NULL);
}

/* --chat-render FILE: the rendered prompt on standard output. */
static int chat_render(const char *dir, const char *path)
{
    tq_err err = {0};
    char *json = NULL, *text = NULL;
    size_t len = 0, tl = 0;
    int rc = 0;
    if (tq_read_small_file(path, MAX_INPUT_BYTES, &json, &len, &err) ||
        tq_chat_render_dir(dir, json, len, 1, chat_now(), &text, &tl, &err)) {
        if (strncmp(err.msg, path, strlen(path)) && err.code == TQ_EDATA && !strncmp(err.msg, "messages", 8))
            tq_err_prefix(&err, "%s", path);
        rc = tq_cli_fail(&err);
    } else {
        rc = write_out(text, tl);
        if (!rc && fflush(stdout))
            rc = write_out("x", 1);
    }
    free(json);
    free(text);
    return rc;
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

static int force_out; /* --force: replace an existing --logits FILE */

/* --logits against the inputs other than the model (checked when it is opened): the prompt
 * or evaluation file and the tokenizer directory; an existing non-empty FILE needs --force.
 * --logits - streams them to standard output, and everything tq-run prints there goes to
 * standard error instead. 0 when all is well, else the exit status (the message printed). */
static int logits_vs_inputs(tq_run_opts *o, const char *file, const char *tok_dir)
{
    tq_err err = {0};
    const char *logits = o->logits_path;
    o->logits_force = force_out;
    if (logits && !strcmp(logits, "-")) {
        if (tq_cli_stdout_binary_check("--logits -"))
            return 2;
        fflush(stdout);
        if ((o->logits_fd = dup(STDOUT_FILENO)) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
            fprintf(stderr, "%s: --logits -: %s\n", tq_prog, strerror(errno));
            return 1;
        }
        return 0;
    }
    if (logits && ((file && tq_check_out_in(logits, file, &err) != 0) ||
                   (tok_dir && tq_check_out_in(logits, tok_dir, &err) != 0) || tq_out_file_check(logits, force_out, &err)))
        return tq_cli_fail(&err);
    return 0;
}

/* --eval / --eval-ids: the file's tokens (text through the tokenizer, or comma-separated ids),
 * then the sliding-window perplexity report. */
static int evaluate(const char *model, tq_run_opts *o, const char *path, int is_ids, const char *tok_dir,
                    uint64_t window, uint64_t stride, int json)
{
    tq_err err = {0};
    tq_run_eval ev;
    tq_run_stats st;
    if (tq_run_eval_file(model, o, path, MAX_INPUT_BYTES, is_ids, tok_dir, window, stride ? stride : window / 2, &ev,
                         &st, &err) != 0)
        return tq_cli_fail(&err);
    int rc;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        char hex[65];
        tq_hex(st.logits_sha256, 32, hex);
        cJSON_AddStringToObject(j, "arch", st.arch);
        cJSON_AddStringToObject(j, "weights", st.weights);
        cJSON_AddStringToObject(j, "logits_sha256", hex);
        struct {
            const char *k;
            double v;
        } nums[] = {{"tokens", (double)ev.tokens},       {"scored", (double)ev.scored},
                    {"window", (double)ev.window},       {"stride", (double)ev.stride},
                    {"top1", (double)ev.top1},           {"top1_rate", ev.top1_rate},
                    {"mean_nll", ev.mean_nll},           {"perplexity", ev.perplexity},
                    {"forward_passes", (double)st.forward_passes}, {"decode_s", st.decode_s},
                    {"peak_rss", (double)st.peak_rss}};
        for (size_t i = 0; i < sizeof nums / sizeof *nums; i++)
            cJSON_AddNumberToObject(j, nums[i].k, nums[i].v);
        rc = tq_cli_print_json(j);
    } else {
        printf("model: %s, %s weights\n", tq_cli_esc(st.arch), tq_cli_esc(st.weights));
        printf("tokens: %llu (%llu scored; window %llu, stride %llu)\n", (unsigned long long)ev.tokens,
               (unsigned long long)ev.scored, (unsigned long long)ev.window, (unsigned long long)ev.stride);
        printf("perplexity: %.4f (mean NLL %.6f nats/token)\n", ev.perplexity, ev.mean_nll);
        printf("top-1: %llu/%llu (%.4f)\n", (unsigned long long)ev.top1, (unsigned long long)ev.scored,
               ev.top1_rate);
        printf("speed: %llu forward passes in %.3f s\n", (unsigned long long)st.forward_passes, st.decode_s);
        rc = 0;
    }
    return rc;
}

static const tq_opt_choice backends[] = {
    {"cpu", TQ_RUN_BACKEND_CPU, 0}, {"metal", TQ_RUN_BACKEND_METAL, 0}, {"shim", TQ_RUN_BACKEND_SHIM, 0}, {NULL, 0, 0}};

int main(int argc, char **argv)
{
    tq_cli_init("tq-run");
    tq_run_opts o;
    tq_run_opts_default(&o);
    const char *cmp_a = NULL;
    tq_cli_ids tokens = {0}, force = {0};
    long max_tokens = 16;
    uint64_t vocab = 0;
    int json = 0, quiet = 0, rc, encode = 0, decode = 0, add_special = 0, chat = 0;
    const char *chat_file = NULL;
    const char *prompt_text = NULL, *prompt_file = NULL, *tok_dir = NULL, *eval_text = NULL, *eval_ids = NULL;
    uint64_t window = 0, stride = 0;
    int ignore_eos = 0;
    tq_opt opts[] = {
        TQ_OPT_IDS("tokens", 0, &tokens, "LIST", "prompt token ids, comma-separated"),
        TQ_OPT_STR("prompt", 0, &prompt_text, "TEXT",
                   "prompt text, encoded with the model's tokenizer.json (or --tokenizer's); the generated "
                   "text is printed as it is generated"),
        TQ_OPT_STR("prompt-file", 0, &prompt_file, "FILE", "prompt text from a file (UTF-8), as --prompt"),
        TQ_OPT_STR("tokenizer", 0, &tok_dir, "DIR",
                   "directory holding tokenizer.json (and tokenizer_config.json): a model directory or a "
                   "bare tokenizer directory; without a MODEL_DIR, for --encode and --decode"),
        TQ_OPT_FLAG("encode", 0, &encode,
                    "read UTF-8 text on standard input, print its token ids comma-separated on one line"),
        TQ_OPT_FLAG("decode", 0, &decode, "read comma-separated token ids on standard input, print their text"),
        TQ_OPT_FLAG("add-special", 0, &add_special,
                    "encode with the tokenizer's special tokens (its post-processor: bos and the like)"),
        TQ_OPT_FLAG("chat", 0, &chat,
                    "apply the tokenizer's chat template (tokenizer_config.json) to the prompt as one user "
                    "message, with the assistant's turn opened"),
        TQ_OPT_STR("chat-render", 0, &chat_file, "FILE",
                   "with --tokenizer DIR: print the chat template's rendering of FILE, a JSON list of "
                   "messages ({\"role\": ..., \"content\": ...}) or an object of template variables, with "
                   "add_generation_prompt on"),
        TQ_OPT_INT("max-tokens", 0, &max_tokens, 1, 1 << 24, "N",
                   "tokens to generate (default 16); text generation ends earlier at the eos token"),
        TQ_OPT_FLAG("ignore-eos", 0, &ignore_eos,
                    "text generation goes on past the tokenizer's eos token, to --max-tokens"),
        TQ_OPT_CALL("temperature", 0, set_temperature, &o.sampling.temperature, "T",
                    "sample each token from softmax(logits / T) (default 0: greedy, the argmax)"),
        TQ_OPT_INT("top-k", 0, &o.sampling.top_k, 0, 1 << 30, "N",
                   "with --temperature: sample among the N most likely tokens only (default 0: all)"),
        TQ_OPT_CALL("top-p", 0, set_top_p, &o.sampling.top_p, "P",
                    "with --temperature: sample among the most likely tokens whose probabilities add up to "
                    "P (after --top-k; default 1: all)"),
        TQ_OPT_INT("seed", 0, &o.sampling.seed, 0, 1ull << 53, "N",
                   "with --temperature: the sampler's seed (default 0); the same seed gives the same tokens "
                   "on every platform and for every --threads"),
        TQ_OPT_INT("ctx", 0, &o.ctx, 1, 1 << 24, "N", "KV cache positions (default: prompt + max-tokens)"),
        TQ_OPT_INT("threads", 0, &o.threads, 1, 256, "N",
                   "compute threads (default: cores); results do not depend on it"),
        TQ_OPT_CHOICE("backend", 0, &o.backend, backends, "B",
                      "where the decode runs: cpu (default), metal (the Apple GPU; builds with Metal only) or "
                      "shim (the Metal kernels on this CPU, for checking)"),
        TQ_OPT_FLAG("resident", 0, &o.resident, "load every expert into memory instead of streaming"),
        TQ_OPT_SIZE("cache-budget", 0, &o.cache_budget, 0, UINT64_MAX, 0, "SIZE",
                    "expert cache bytes when streaming (default 1G)"),
        TQ_OPT_INT("io-threads", 0, &o.io_threads, 1, 64, "N", "parallel expert readers (default: experts per token)"),
        TQ_OPT_SET("no-direct", 0, &o.io_mode, TQ_RUN_IO_BUFFERED,
                   "plain buffered reads (no O_DIRECT/F_NOCACHE/fadvise)"),
        TQ_OPT_FLAG("map-experts", 0, &o.map_experts,
                    "split: map each layer file (mmap) instead of reading the chosen expert blocks into the "
                    "cache; the OS pages them in, and with --backend metal or shim the GPU finds each "
                    "expert itself (one wait per token)"),
        TQ_OPT_FLAG("check-blocks", 0, &o.check_blocks,
                    "verify every expert block read against split.json (with --map-experts: every block, "
                    "once, at load)"),
        TQ_OPT_FLAG("allow-nonfinite", 0, &o.allow_nonfinite,
                    "decode on when a step's logits hold NaN or infinity (default: exit 1 naming the step)"),
        TQ_OPT_OUT_FILE("logits", 0, &o.logits_path, "FILE",
                   "write every step's logits (raw little-endian f32, steps x vocab); - streams them to "
                   "standard output, and what tq-run prints there goes to standard error"),
        TQ_OPT_FLAG("force", 0, &force_out, "replace an existing non-empty --logits FILE"),
        TQ_OPT_IDS("force-tokens", 0, &force, "LIST",
                   "teacher forcing: feed these ids after each step instead of the argmax"),
        TQ_OPT_STR("eval", 0, &eval_text, "FILE",
                   "perplexity of the model on a UTF-8 text file (encoded with the tokenizer), teacher-"
                   "forced in sliding windows; --logits gets the scored steps"),
        TQ_OPT_STR("eval-ids", 0, &eval_ids, "FILE", "as --eval, on comma-separated token ids"),
        TQ_OPT_INT("window", 0, &window, 2, 1 << 24, "N", "--eval window in tokens (default 512)"),
        TQ_OPT_INT("stride", 0, &stride, 1, 1 << 24, "N",
                   "--eval: a window starts every N tokens, scoring its last N (default window/2)"),
        TQ_OPT_STR("compare-logits", 0, &cmp_a, "REF TEST", "top-1 agreement and mean KL(REF||TEST) per step"),
        TQ_OPT_INT("vocab", 0, &vocab, 1, 1 << 26, "N", "vocabulary size for --compare-logits"),
        TQ_OPT_FLAG("json", 0, &json, "machine-readable report on standard output (sorted keys), no text streamed"),
        TQ_OPT_FLAG("quiet", 0, &quiet,
                    "no report: only the generated text (or, from --tokens without --tokenizer, the "
                    "generated ids) on standard output"),
        TQ_OPT_END,
    };
    /* what llama.cpp's llama-cli, mlx_lm.generate and transformers users type */
    static const tq_opt_hint hints[] = {
        {"model", NULL, "MODEL_DIR is tq-run's operand, no option before it (--model is llama.cpp's and "
                        "mlx_lm.generate's spelling)"},
        {"-m", NULL, "MODEL_DIR is tq-run's operand, no option before it (-m is llama.cpp's spelling)"},
        {"-p", "prompt", "-p is llama.cpp's spelling"},
        {"-n", "max-tokens", "-n is llama.cpp's spelling"},
        {"n-predict", "max-tokens", "--n-predict is llama.cpp's spelling"},
        {"max-new-tokens", "max-tokens", "--max-new-tokens is transformers' spelling"},
        {"backend=gpu", "backend=metal", "the Apple GPU, in builds with Metal"},
        {"backend=mps", "backend=metal", "the Apple GPU, in builds with Metal"},
        {"backend=cuda", NULL, "tq-run's one GPU backend is metal, the Apple GPU"},
        {NULL, NULL, NULL},
    };
    tq_cli_spec cli = {
        .usage = "Usage: tq-run [OPTIONS] MODEL_DIR --tokens ID,ID,...\n"
                 "       tq-run [OPTIONS] MODEL_DIR --prompt TEXT | --prompt-file FILE\n"
                 "       tq-run [OPTIONS] MODEL_DIR --eval TEXT_FILE | --eval-ids FILE [--window N]\n"
                 "       tq-run --tokenizer DIR --encode | --decode [--add-special]\n"
                 "       tq-run --tokenizer DIR --chat-render MESSAGES.json\n"
                 "       tq-run --compare-logits REF.f32 TEST.f32 --vocab N [--json]\n",
        .about = "Decode from a plain, TurboQuant, MLX affine or split model directory: greedy, or sampled\n"
                 "with --temperature. Standard output gets the generated text (a text prompt, or\n"
                 "--tokenizer) or the generated ids (--tokens), the report goes to standard error.\n",
        .opts = opts,
        .hints = hints,
        .examples = (const char *const[]){
            "tq-run model --prompt \"The weights\" --max-tokens 16   # text in, text out",
            "tq-run model-split --tokens 1,2,3 --max-tokens 8 --cache-budget 64K   # streamed experts",
            "echo \"Hello world\" | tq-run --tokenizer model --encode   # token ids of a text",
            NULL},
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
    if (chat_file) {
        if (!tok_dir)
            return tq_cli_usage_error("--chat-render needs --tokenizer DIR");
        if (cli.n_args || tokens.v || prompt_text || prompt_file || encode || decode || chat)
            return tq_cli_usage_error("--chat-render takes no model, tokens, prompt, --encode, --decode or --chat");
        return chat_render(tok_dir, chat_file);
    }
    if (encode || decode) {
        if (encode && decode)
            return tq_cli_usage_error("--encode and --decode go one at a time");
        if (!tok_dir)
            return tq_cli_usage_error("--%s needs --tokenizer DIR", encode ? "encode" : "decode");
        if (cli.n_args || tokens.v || prompt_text || prompt_file)
            return tq_cli_usage_error("--%s takes no model, tokens or prompt", encode ? "encode" : "decode");
        if (decode && add_special)
            return tq_cli_usage_error("--add-special goes with --encode");
        tq_err err = {0};
        tq_tok *t;
        if (tq_tok_load(tok_dir, &t, &err))
            return tq_cli_fail(&err);
        rc = encode ? encode_stdin(t, add_special) : decode_stdin(t);
        tq_tok_free(t);
        return rc;
    }
    if (cli.n_args == 0)
        return tq_cli_usage_error("missing MODEL_DIR");
    if (cli.n_args > 1)
        return tq_cli_usage_error("unexpected argument '%s'", cli.args[1]);
    if ((rc = tq_cli_hf_models(&cli, 0, 1)) != 0)
        return rc;
    if (o.map_experts && o.resident)
        return tq_cli_usage_error("--map-experts and --resident go one at a time");
    if (o.map_experts &&
        (tq_cli_given(&cli, "cache-budget") || tq_cli_given(&cli, "io-threads") || tq_cli_given(&cli, "no-direct")))
        return tq_cli_usage_error("--cache-budget, --io-threads and --no-direct go with reading experts, not "
                                  "--map-experts");
    if (eval_text || eval_ids) {
        if (eval_text && eval_ids)
            return tq_cli_usage_error("--eval and --eval-ids go one at a time");
        if (tokens.v || prompt_text || prompt_file || force.v || add_special || chat)
            return tq_cli_usage_error(
                "--eval takes no --tokens, --prompt, --force-tokens, --add-special or --chat");
        if (o.sampling.temperature > 0 || ignore_eos)
            return tq_cli_usage_error("--eval scores the text as it is: no --temperature or --ignore-eos");
        if (!window)
            window = 512;
        if (stride >= window)
            return tq_cli_usage_error("--stride must be below --window (%llu)", (unsigned long long)window);
        if ((rc = logits_vs_inputs(&o, eval_text ? eval_text : eval_ids, tok_dir)) != 0)
            return rc;
        return evaluate(cli.args[0], &o, eval_text ? eval_text : eval_ids, !eval_text, tok_dir, window, stride,
                        json);
    }
    if (window || stride)
        return tq_cli_usage_error("--window and --stride go with --eval or --eval-ids");
    if (!!tokens.v + !!prompt_text + !!prompt_file != 1)
        return tq_cli_usage_error(tokens.v || prompt_text || prompt_file
                                      ? "--tokens, --prompt and --prompt-file go one at a time"
                                      : "missing --tokens ID,ID,... or --prompt TEXT");
    if (add_special && tokens.v)
        return tq_cli_usage_error("--add-special goes with --prompt or --prompt-file");
    if (o.sampling.temperature == 0 &&
        (tq_cli_given(&cli, "top-k") || tq_cli_given(&cli, "top-p") || tq_cli_given(&cli, "seed")))
        return tq_cli_usage_error("--top-k, --top-p and --seed go with --temperature above 0 (the default is "
                                  "greedy decoding)");
    int text_mode = prompt_text || prompt_file || tok_dir; /* text on standard output, else ids */
    if (ignore_eos && !text_mode)
        return tq_cli_usage_error("--ignore-eos goes with text generation (--prompt, --prompt-file or --tokenizer)");
    if (chat && tokens.v)
        return tq_cli_usage_error("--chat goes with --prompt or --prompt-file");
    if ((rc = logits_vs_inputs(&o, prompt_file, tok_dir)) != 0)
        return rc;
    o.force_tokens = force.v;
    o.n_force = force.n;
    tq_err err = {0};
    text_out tout = {0};
    tq_run_job job = {.model_dir = cli.args[0], .tok_dir = tok_dir, .text = text_mode, .ids = tokens.v,
                      .n_ids = tokens.n, .prompt = prompt_text, .prompt_file = prompt_file,
                      .max_input = MAX_INPUT_BYTES, .chat = chat, .chat_now = chat ? chat_now() : 0,
                      .t = {.max_tokens = (size_t)max_tokens, .add_special = add_special, .stop_at_eos = !ignore_eos,
                            .prompt_name = prompt_file ? prompt_file : "--prompt",
                            .on_text = json ? NULL : on_text, .user = &tout}};
    tq_run_text_result res;
    tq_run_stats st;
    if (tq_run_job_run(&job, &o, &res, &st, &err) != 0)
        return tq_cli_fail(tout.failed ? &tout.err : &err);
    const int32_t *ids = res.tokens;
    rc = 0;
    if (text_mode && !json && (write_out("\n", 1) || fflush(stdout))) /* the end of the text's line */
        rc = 1;
    if (rc == 0 && json) {
        cJSON *j = tq_run_stats_json(&st, ids, st.generated_tokens);
        if (j && text_mode) { /* the prompt's ids and the generated text */
            cJSON *pids = cJSON_AddArrayToObject(j, "prompt_ids");
            for (size_t i = 0; pids && i < res.n_prompt; i++)
                cJSON_AddItemToArray(pids, cJSON_CreateNumber(res.prompt_ids[i]));
            cJSON_AddStringToObject(j, "text", res.text);
        }
        rc = tq_cli_print_json(j);
    } else if (rc == 0) {
        if (!text_mode) { /* the ids, as --encode prints them and --decode reads them */
            for (uint64_t i = 0; i < st.generated_tokens; i++)
                printf(i ? ",%d" : "%d", ids[i]);
            printf("\n");
            if (fflush(stdout))
                rc = write_out("x", 1);
        }
        if (!quiet && rc == 0)
            report(stderr, &st, ids, !text_mode);
    }
    tq_run_text_result_free(&res);
    return rc;
}
