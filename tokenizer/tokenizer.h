/* tokenizer/tokenizer.h — HuggingFace tokenizer.json tokenizers: load, encode, decode.
 *
 * Covers what the models tq serves use: BPE with byte-level pre-tokenisation (GPT-2 style
 * byte-to-character map, regex splits such as Qwen2/3, Llama-3, DeepSeek-V3 and o200k), and
 * SentencePiece-style BPE (the U+2581 metaspace, byte fallback, unk fusing) as Llama-2 and
 * Gemma write it; NFC/NFD/NFKC/NFKD, Replace, Prepend, Strip and Lowercase normalisers;
 * added tokens (split out before anything else, honouring lstrip, rstrip, single_word and
 * normalized); the ByteLevel, Metaspace, Replace, ByteFallback, Fuse and Strip decoders;
 * TemplateProcessing, Bert/Roberta and ByteLevel post-processors.
 *
 * Reference behaviour is transformers.js' (tests/tokenizer/compare.mjs checks it token for
 * token). Where transformers.js and the Rust tokenizers library differ it follows
 * transformers.js, namely: "\s" in split regexes is ECMAScript's white space set, and the
 * "(?i:'s|'t|...)" contraction group is plain ASCII case-insensitive.
 *
 * A tokenizer.json is hostile input: every field is checked and a failure names it
 * ("tokenizer.json: model.merges[12]: 'a' is not in model.vocab"). Loaded tokenizers are
 * read-only: encode and decode may run on one tq_tok from many threads at once. */
#ifndef TQ_TOKENIZER_H
#define TQ_TOKENIZER_H

#include "common/common.h"

TQ_BEGIN_DECLS

typedef struct tq_tok tq_tok;

/* PATH is a directory holding tokenizer.json (and, optionally, tokenizer_config.json for the
 * bos/eos tokens) or a tokenizer.json file itself. */
TQ_API int tq_tok_load(const char *path, tq_tok **out, tq_err *e);
/* From memory: json is tokenizer.json's text, config tokenizer_config.json's (or NULL); name
 * prefixes error messages. */
TQ_API int tq_tok_load_mem(const char *json, size_t len, const char *config, size_t config_len, const char *name,
                           tq_tok **out, tq_err *e);
TQ_API void tq_tok_free(tq_tok *t);

/* UTF-8 text (invalid UTF-8 is an error naming its byte offset) to token ids; add_special
 * applies the post-processor (bos and the like). *ids is malloc'ed (free it). */
TQ_API int tq_tok_encode(const tq_tok *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                         tq_err *e);
/* The same with reusable state (scratch buffers and a cache of pre-token encodings) for
 * encoding many texts: one tq_tok_enc per thread. Results do not depend on the cache. */
typedef struct tq_tok_enc tq_tok_enc;
TQ_API int tq_tok_enc_new(const tq_tok *t, tq_tok_enc **out, tq_err *e);
TQ_API int tq_tok_enc_run(tq_tok_enc *x, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                          tq_err *e);
TQ_API void tq_tok_enc_free(tq_tok_enc *x);
/* Token ids to UTF-8 text (NUL-terminated, length in *len; free it). Byte sequences that are
 * not valid UTF-8 come out as U+FFFD. An id the tokenizer does not know is an error. */
TQ_API int tq_tok_decode(const tq_tok *t, const int32_t *ids, size_t n, char **text, size_t *len, tq_err *e);

/* Incremental decode for streamed output: each push returns the text that is now complete
 * (bytes of a partial UTF-8 sequence are held until the rest arrives); finish returns what
 * is left, with an incomplete sequence as U+FFFD. Pointers stay valid until the next call. */
typedef struct tq_tok_stream tq_tok_stream;
TQ_API int tq_tok_stream_new(const tq_tok *t, tq_tok_stream **out, tq_err *e);
TQ_API int tq_tok_stream_push(tq_tok_stream *s, int32_t id, const char **text, size_t *len, tq_err *e);
TQ_API int tq_tok_stream_finish(tq_tok_stream *s, const char **text, size_t *len, tq_err *e);
TQ_API void tq_tok_stream_free(tq_tok_stream *s);

/* One past the largest token id (model vocabulary and added tokens). */
TQ_API size_t tq_tok_vocab_size(const tq_tok *t);
/* Whether id is a token of this tokenizer (a model's vocabulary may be larger). */
TQ_API int tq_tok_has_id(const tq_tok *t, int32_t id);
/* The id of an exact token string (vocabulary or added token), or -1. */
TQ_API int32_t tq_tok_token_id(const tq_tok *t, const char *token);
/* bos/eos token ids from tokenizer_config.json, or -1 when it names none. */
TQ_API int32_t tq_tok_bos(const tq_tok *t);
TQ_API int32_t tq_tok_eos(const tq_tok *t);
/* GPT-2's byte-level alphabet: the UTF-8 (1 or 2 bytes) of the character byte b stands for. */
TQ_API size_t tq_tok_byte_char(unsigned b, char out[2]);
/* Number of added tokens, and the i-th one's content and id (for tests and tools). */
TQ_API size_t tq_tok_n_added(const tq_tok *t);
TQ_API const char *tq_tok_added(const tq_tok *t, size_t i, int32_t *id);

/* ---- chat templates (chat_template.c) ----
 * A HuggingFace chat_template rendered as @huggingface/jinja (transformers.js) renders it, for
 * the Jinja subset the supported families' templates use; a construct outside the subset is
 * an error (TQ_EUNSUP) naming it and its line and column, never a silent difference. Work is
 * bounded (template size, nesting, steps, memory), so hostile templates fail.
 *
 * tq_chat_render: vars_json is a JSON object whose members are the template's variables
 * (messages, add_generation_prompt, bos_token, tools, ...); now (seconds since the epoch, UTC)
 * is the date strftime_now gives. *out (NUL-terminated, *out_len bytes; free it). */
TQ_API int tq_chat_render(const char *tmpl, size_t tlen, const char *vars_json, size_t vlen, int64_t now, char **out,
                          size_t *out_len, tq_err *e);
/* The template of tokenizer directory DIR (tokenizer_config.json's chat_template, a string or
 * the list entry named "default", else chat_template.jinja) applied to messages_json: a JSON
 * list of messages, or an object of variables holding "messages". add_generation_prompt and
 * the config's bos_token, eos_token, unk_token and pad_token are added unless given. */
TQ_API int tq_chat_render_dir(const char *dir, const char *messages_json, size_t len, int add_generation_prompt, int64_t now,
                              char **out, size_t *out_len, tq_err *e);

TQ_END_DECLS

#endif
