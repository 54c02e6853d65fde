/* runtime/runtime.h — reference decoder: resident or streamed from a split directory.
 *
 * Greedy decoding of llama, mistral, qwen2, qwen2_moe, qwen3, qwen3_moe, mixtral,
 * deepseek_v3 / kimi_k2, gpt_oss, qwen3_next and qwen3_5(_moe) models (tq_run_decodable) (docs/runtime.md) whose weights are f32/f16/bf16,
 * TurboQuant or MLX affine (4/8 bit; man tq-formats(5), TURBOQUANT WEIGHTS and MLX AFFINE
 * WEIGHTS). A split directory (config.json with a
 * "streaming" block) keeps pinned tensors resident and reads each routed expert as one
 * block with one pread into a byte-budgeted LRU cache; --resident loads everything.
 * The same kernels run in both modes and every reduction has a fixed order, so logits are
 * bit-identical between modes and for any thread count. */
#ifndef TQ_RUNTIME_H
#define TQ_RUNTIME_H

#include "common/common.h"

TQ_BEGIN_DECLS

/* How expert blocks are read when streaming: asked for in tq_run_opts.io_mode, and the mode
 * each layer file ended up with (tq_run_stats.io names it: "direct", "fadvise", "buffered"). */
enum tq_run_io {
    TQ_RUN_IO_AUTO = 0,   /* asked: DIRECT where the file system allows it, else FADVISE */
    TQ_RUN_IO_BUFFERED,   /* plain buffered preads, page cache left alone (comparison) */
    TQ_RUN_IO_FADVISE,    /* buffered preads, each block's pages dropped after the read (the
                             fallback AUTO takes where O_DIRECT is refused) */
    TQ_RUN_IO_DIRECT,     /* O_DIRECT (Linux) / F_NOCACHE (macOS) reads, the page cache
                             bypassed; what AUTO gets where it works (asked for, it is AUTO) */
};

/* Where the decode runs (tq_run_opts.backend; docs/metal.md). */
enum tq_run_backend {
    TQ_RUN_BACKEND_CPU = 0, /* this file's reference decoder */
    TQ_RUN_BACKEND_METAL,   /* the same decode through runtime/metal/'s kernels on the Apple GPU (builds
                             * with Metal only; elsewhere opening fails with TQ_EUSAGE) */
    TQ_RUN_BACKEND_SHIM,    /* those kernels compiled as C and run on the CPU (checking, not speed) */
};

/* How each generated token is chosen (tq_run_opts.sampling). temperature 0 (the default) is
 * greedy: the argmax, the lowest id on ties, bit-exact as the golden decodes record it.
 * temperature > 0 samples, in the order of HuggingFace transformers' logits warpers
 * (generation/utils.py, _get_logits_processor: TemperatureLogitsWarper, TopKLogitsWarper,
 * TopPLogitsWarper, then softmax and a multinomial draw): scores = logits / temperature;
 * top_k > 0 keeps the tokens whose score is at least the top_k-th largest (ties at the
 * boundary kept); top_p < 1 sorts the kept tokens by score ascending, takes their softmax's
 * running sum in that order and drops every token whose running sum is <= 1 - top_p (never the
 * last, largest one); then one draw u in [0, 1) from a xoshiro256** stream seeded through
 * splitmix64 from seed picks, over the kept ids in id order, the first whose running sum of
 * exp(score - max) exceeds u times their total. One draw per generated token, whatever is kept,
 * so the tokens depend only on the logits and the seed (man tq-run(1), Sampling). */
typedef struct tq_run_sampling {
    double temperature; /* 0: greedy; else > 0 */
    uint64_t top_k;     /* 0: off */
    double top_p;       /* in (0, 1]; 1 (or 0, unset): off */
    uint64_t seed;
} tq_run_sampling;

/* The sampler on its own (what tq_runner_generate runs with tq_run_opts.sampling): scratch
 * for a vocabulary of `vocab` and the random stream. */
typedef struct tq_run_sampler tq_run_sampler;
TQ_API int tq_run_sampler_new(const tq_run_sampling *s, uint64_t vocab, tq_run_sampler **out, tq_err *e);
/* The distribution the next token is drawn from, p[vocab] (0 for a filtered id; one-hot on
 * the argmax when greedy or when a logit is not finite). Draws nothing. */
TQ_API void tq_run_sampler_dist(tq_run_sampler *s, const float *logits, double *p);
/* The next token: one draw from the stream (none when greedy). */
TQ_API int32_t tq_run_sampler_next(tq_run_sampler *s, const float *logits);
TQ_API void tq_run_sampler_free(tq_run_sampler *s);

typedef struct tq_run_opts {
    int threads;            /* compute threads; 0 = tq_default_threads() */
    int io_threads;         /* expert readers; 0 = experts_per_tok (at most 16) */
    int resident;           /* load every tensor, experts included, up front */
    int io_mode;            /* enum tq_run_io */
    int backend;            /* enum tq_run_backend */
    int check_blocks;       /* verify each expert block read against split.json's SHA-256 */
    int map_experts;        /* split: map each layer file (mmap) instead of reading the chosen
                             * blocks into the cache; a device backend then finds each expert
                             * by the id its route kernel chose, with no CPU wait per layer
                             * (docs/metal.md, Mapped experts). Not with resident. */
    int allow_nonfinite;    /* decode on when a step's logits hold NaN or infinity (else an error) */
    uint64_t cache_budget;  /* expert cache bytes (default 1 GiB) */
    uint64_t ctx;           /* KV cache positions; 0 = prompt + max_tokens */
    const char *logits_path;/* raw little-endian f32 logits, steps x vocab (atomic); NULL = none;
                               "-": streamed to logits_fd instead */
    int logits_fd;          /* with logits_path "-": where the logits go (default 1, standard
                               output) */
    int logits_force;       /* replace the non-empty logits_path there when the runner opens
                               (--force; else refused: man tq-formats(5), OUTPUTS) */
    /* Teacher forcing: feed force_tokens[s] after step s instead of the argmax (n_force of
     * them; later steps go back to greedy). out_tokens still receive each step's argmax. */
    const int32_t *force_tokens;
    size_t n_force;
    tq_run_sampling sampling;  /* how tokens are chosen (default: greedy) */
    /* Generation ends after a token of this list is chosen (it is the last of out_tokens);
     * NULL/0: it always runs max_tokens steps. */
    const int32_t *stop_tokens;
    size_t n_stop;
    /* Called with every step's logits (after the file write); non-zero return aborts. */
    int (*on_logits)(void *user, uint64_t step, const float *logits, uint64_t vocab);
    /* Called with every generated token as soon as it is chosen (streamed text output);
     * non-zero return aborts. */
    int (*on_token)(void *user, uint64_t step, int32_t token);
    void *user;
} tq_run_opts;

TQ_API void tq_run_opts_default(tq_run_opts *o);

typedef struct tq_run_stats {
    char arch[32];              /* config.json's model_type (text_config's for multimodal ones) */
    char weights[32];           /* f32/f16/bf16/turboquant/affine/mxfp4/mixed */
    int streamed;               /* experts streamed from a split directory (read or mapped) */
    char io[16];                /* "direct", "fadvise", "buffered", "map" (map_experts: the OS
                                 * pages the layer files in; no hits, misses or reads counted)
                                 * or "none" */
    uint64_t vocab;
    uint64_t prompt_tokens, generated_tokens, forward_passes;
    int stopped;                /* generation ended on a stop token before max_tokens */
    tq_run_sampling sampling;   /* as the run was asked (temperature 0: greedy) */
    double load_s, decode_s, tokens_per_s; /* tokens_per_s = forward passes / decode_s */
    uint64_t expert_hits, expert_misses;
    double hit_rate;                       /* hits / (hits + misses); 0 when none */
    uint64_t bytes_read, reads;            /* expert blocks read from disk while decoding */
    double io_s;                           /* wall time spent waiting for those reads */
    uint64_t bytes_per_token;              /* bytes_read / forward passes */
    uint64_t resident_bytes;               /* pinned (or all) weights held in memory */
    uint64_t cache_bytes, cache_budget;    /* expert cache in use at the end / its budget (0: mapped) */
    uint64_t cache_peak_bytes;             /* most cache bytes held at once */
    uint64_t peak_rss;
    unsigned char logits_sha256[32];       /* SHA-256 of the logits stream */
    /* With a device backend (shim or metal; gpu = 1), what the backend asked of the device,
     * counted in the backend (runtime/metal/backend.c), so the same on the shim as on a GPU:
     * kernels queued, CPU waits for queued work, bytes copied into staging memory (of them,
     * weights) per forward pass; stable weight regions the device could not map in place and
     * copied instead, and their bytes. docs/metal.md, Counters. */
    int gpu;
    double gpu_dispatches_per_token, gpu_waits_per_token;
    double gpu_staged_bytes_per_token, gpu_staged_weight_bytes_per_token;
    uint64_t gpu_wrap_copies, gpu_wrap_copy_bytes;
} tq_run_stats;

typedef struct tq_runner tq_runner;

/* Open MODEL_DIR (plain, TurboQuant, MLX affine or split) and load the resident part. */
TQ_API int tq_runner_open(tq_runner **out, const char *model_dir, const tq_run_opts *o, tq_err *e);
TQ_API uint64_t tq_runner_vocab(const tq_runner *r);
/* Decode: feeds the prompt, then generates up to max_tokens tokens into out_tokens (greedy, or
 * as o.sampling says; fewer when a stop token comes: st->generated_tokens says how many).
 * Step s's logits (s = 0 .. max_tokens-1) are the ones token s was chosen from.
 * One call per runner. */
TQ_API int tq_runner_generate(tq_runner *r, const int32_t *prompt, size_t n_prompt, size_t max_tokens,
                              int32_t *out_tokens, tq_run_stats *st, tq_err *e);
TQ_API void tq_runner_close(tq_runner *r);

/* Text generation: a prompt string in, text out through a callback as it is generated.
 * The prompt is encoded with tok (tokenizer/tokenizer.h; special tokens written in it, such as
 * <|im_start|>, become their ids; the post-processor's bos and the like only with
 * add_special), the runner decodes as tq_runner_generate (its tq_run_opts: sampling, logits,
 * teacher forcing; its on_token is still called), and each generated token's text goes to
 * on_text as soon as its characters are complete: the bytes of a character split over tokens
 * are held back, an unfinished one at the end comes out as U+FFFD, as does an id the
 * tokenizer lacks (a model's vocabulary may be larger). With stop_at_eos, generation ends
 * after the tokenizer's eos token (tokenizer_config.json), which is kept in the tokens but
 * not given as text. Library code: it never prints; the caller shows the text. */
struct tq_tok;
typedef struct tq_run_text_opts {
    size_t max_tokens;  /* at most this many generated tokens (>= 1) */
    int add_special;    /* encode the prompt with the tokenizer's post-processor */
    int stop_at_eos;    /* end after the tokenizer's eos token (when it names one) */
    const char *prompt_name; /* prefixes errors about the prompt text (a file name); NULL: "prompt" */
    /* Each piece of generated text (UTF-8, not NUL-terminated); non-zero return aborts the run. */
    int (*on_text)(void *user, const char *text, size_t len);
    void *user;
} tq_run_text_opts;

typedef struct tq_run_text_result {
    int32_t *prompt_ids;  /* the prompt's ids */
    size_t n_prompt;
    int32_t *tokens;      /* the generated ids, the stop token included */
    size_t n_tokens;
    char *text;           /* all the text given to on_text, NUL-terminated */
    size_t text_len;
    int stopped;          /* ended on the eos token */
} tq_run_text_result;
TQ_API void tq_run_text_result_free(tq_run_text_result *res);

/* prompt[len] is UTF-8 text (not valid UTF-8: an error naming the byte offset). One call per
 * runner, as tq_runner_generate. On failure res holds nothing (freed). */
TQ_API int tq_runner_generate_text(tq_runner *r, const struct tq_tok *tok, const char *prompt, size_t len,
                                   const tq_run_text_opts *o, tq_run_text_result *res, tq_run_stats *st, tq_err *e);
/* The same from prompt token ids (copied into res->prompt_ids). */
TQ_API int tq_runner_generate_text_ids(tq_runner *r, const struct tq_tok *tok, const int32_t *prompt, size_t n_prompt,
                                       const tq_run_text_opts *o, tq_run_text_result *res, tq_run_stats *st,
                                       tq_err *e);

/* A whole decode from a model directory, as tq-run runs it: the tokenizer loaded (text), the
 * prompt file read, the text prompt put through the tokenizer's chat template (chat), the
 * runner opened with o, the decode (tq_runner_generate_text / _ids, or tq_runner_generate for
 * ids out), the runner closed. res->tokens holds the generated ids in both modes (res->text and
 * res->prompt_ids only with text). Errors name the file or step, in that order of work.
 * Library code: it never prints; the text goes to t.on_text. On failure res holds nothing. */
typedef struct tq_run_job {
    const char *model_dir;
    const char *tok_dir;     /* the tokenizer's directory (NULL: model_dir) */
    int text;                /* text out through the tokenizer; 0: prompt ids in, ids out */
    const int32_t *ids;      /* the prompt: these ids, */
    size_t n_ids;
    const char *prompt;      /* or this NUL-terminated text, */
    const char *prompt_file; /* or this file's text (at most max_input bytes) */
    size_t max_input;
    int chat;                /* the text prompt as one user message through the chat template */
    int64_t chat_now;        /* the template's strftime_now date, seconds since the epoch */
    tq_run_text_opts t;      /* max_tokens, add_special, stop_at_eos, prompt_name, on_text */
} tq_run_job;
TQ_API int tq_run_job_run(const tq_run_job *j, const tq_run_opts *o, tq_run_text_result *res, tq_run_stats *st,
                          tq_err *e);

/* Perplexity of a token sequence, teacher-forced with a sliding window: windows of `window`
 * tokens start every `stride` tokens (1 <= stride < window), each from an empty state, and
 * each scores only the next-token predictions no earlier window scored, so every token but
 * the first is scored exactly once. The scored steps' logits go to o.logits_path /
 * on_logits as generate's do (steps x vocab), so two models' files compare with
 * tq_run_logits_compare. Sums run in double in token order: thread-count independent. */
typedef struct tq_run_eval {
    uint64_t tokens;       /* ids in the sequence */
    uint64_t scored;       /* predictions scored: tokens - 1 */
    uint64_t window, stride;
    uint64_t top1;         /* predictions whose argmax was the next token */
    double top1_rate;
    double mean_nll;       /* mean negative log-likelihood, nats per scored token */
    double perplexity;     /* exp(mean_nll) */
} tq_run_eval;
TQ_API int tq_runner_eval(tq_runner *r, const int32_t *ids, size_t n, uint64_t window, uint64_t stride,
                          tq_run_eval *ev, tq_run_stats *st, tq_err *e);
/* The same from a file, as tq-run --eval / --eval-ids runs it: path read (at most max_input
 * bytes), its text encoded with the tokenizer in tok_dir (NULL: model_dir) or, is_ids, its
 * comma-separated ids parsed (tq_parse_id_text), the runner opened with o, the evaluation,
 * the runner closed. Errors about the input name path. */
TQ_API int tq_run_eval_file(const char *model_dir, const tq_run_opts *o, const char *path, size_t max_input,
                            int is_ids, const char *tok_dir, uint64_t window, uint64_t stride, tq_run_eval *ev,
                            tq_run_stats *st, tq_err *e);

/* Open + generate + close: the golden decode tq-verify compares. out_tokens holds
 * max_tokens ids; sha256 is the SHA-256 of the raw f32 logits stream (what --logits writes). */
TQ_API int tq_run_validate(const char *model_dir, const int32_t *prompt, size_t n_prompt,
                           size_t max_tokens, const tq_run_opts *o, int32_t *out_tokens,
                           unsigned char logits_sha256[32], tq_err *e);

/* Stats as a JSON object (keys sorted when printed with tq_json_print). */
TQ_API struct cJSON *tq_run_stats_json(const tq_run_stats *st, const int32_t *tokens, size_t n);

/* Quality of a test logits file against a reference one (both steps x vocab raw f32):
 * share of steps whose argmax agrees, mean KL(ref || test) in nats per step, and the largest
 * per-step relative difference. */
typedef struct tq_run_logits_cmp {
    uint64_t steps, top1_agree;
    double top1_rate, mean_kl, max_kl;
    double max_rel_diff; /* max over steps of max_i |ref_i - test_i| / max_i |ref_i| */
    double kl_stderr;    /* standard error of mean_kl over the steps: sd(kl) / sqrt(steps) */
} tq_run_logits_cmp;
TQ_API int tq_run_logits_compare(const char *ref_path, const char *test_path, uint64_t vocab,
                             tq_run_logits_cmp *out, tq_err *e);

/* Whether tq-run decodes a model with this config.json (its family, formats/family.h, found
 * by model_type, text_config's model_type or architectures[0], is one the decoder runs): 1
 * yes, 0 no (an unknown family or one the decoder lacks). The decoder's own capability
 * (runtime/config.c): tq-convert and tq-split warn from it. */
TQ_API int tq_run_decodes(const struct cJSON *config);
/* The model_type values of every family tq-run decodes, in the family table's order, joined
 * by ", " into buf (cap bytes, truncated to fit); returns buf. */
TQ_API const char *tq_run_decodable(char *buf, size_t cap);
/* When tq-run cannot decode a model with this config.json (tq_run_decodes 0; config NULL:
 * no config.json): 1 and one line in buf (cap bytes) naming its model_type (else
 * architectures[0]) and the families tq-run decodes; 0 and buf "" when it can. What
 * tq-convert and tq-split warn. */
TQ_API int tq_run_decode_warning(const struct cJSON *config, char *buf, size_t cap);

TQ_END_DECLS

#endif
