/* Text generation: a prompt string through the tokenizer, the decode, and each token's text to a callback as it comes (runtime.h, tq_runner_generate_text). */
#include "runtime/rt_internal.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

void tq_run_text_result_free(tq_run_text_result *res)
{
    if (!res)
        return;
    free(res->prompt_ids);
    free(res->tokens);
    free(res->text);
    memset(res, 0, sizeof *res);
}

/* The state of one run: the stream decoder, the text so far, the caller's callbacks. */
typedef struct text_run {
    const tq_tok *tok;
    tq_tok_stream *s;
    const tq_run_text_opts *o;
    const int32_t *stop;
    size_t n_stop;
    int (*user_on_token)(void *user, uint64_t step, int32_t token);
    void *user;
    tq_sb text;
    tq_err err;   /* why a callback failed */
    int failed;   /* err is set */
} text_run;

static int emit(text_run *t, const char *p, size_t n)
{
    if (!n)
        return 0;
    if (tq_sb_put(&t->text, p, n) != 0) {
        tq_fail(&t->err, TQ_ENOMEM, "out of memory");
        t->failed = 1;
        return -1;
    }
    if (t->o->on_text && t->o->on_text(t->o->user, p, n) != 0)
        return -1;
    return 0;
}

static int on_token(void *user, uint64_t step, int32_t tok)
{
    text_run *t = user;
    if (t->user_on_token && t->user_on_token(t->user, step, tok) != 0)
        return -1;
    for (size_t i = 0; i < t->n_stop; i++)
        if (tok == t->stop[i])
            return 0; /* the stop token ends the text; it is not part of it */
    const char *p = "\xEF\xBF\xBD"; /* U+FFFD for an id the tokenizer lacks */
    size_t n = 3;
    if (tq_tok_has_id(t->tok, tok) && tq_tok_stream_push(t->s, tok, &p, &n, &t->err) != 0) {
        t->failed = 1;
        return -1;
    }
    return emit(t, p, n);
}

int tq_runner_generate_text_ids(tq_runner *r, const tq_tok *tok, const int32_t *prompt, size_t n_prompt,
                                const tq_run_text_opts *o, tq_run_text_result *res, tq_run_stats *st, tq_err *e)
{
    memset(res, 0, sizeof *res);
    tq_run_stats local;
    if (!st)
        st = &local;
    if (o->max_tokens == 0)
        return tq_fail(e, TQ_EUSAGE, "max_tokens must be at least 1");
    text_run t = {.tok = tok, .o = o, .user_on_token = r->o.on_token, .user = r->o.user};
    int32_t eos = tq_tok_eos(tok), *stop = NULL;
    const int32_t *saved_stop = r->o.stop_tokens;
    size_t saved_n = r->o.n_stop;
    int rc = -1;
    if (!(res->prompt_ids = tq_malloc((n_prompt ? n_prompt : 1) * sizeof *prompt, e)) ||
        !(res->tokens = tq_malloc(o->max_tokens * sizeof *res->tokens, e)) ||
        !(stop = tq_malloc((saved_n + 1) * sizeof *stop, e)) || tq_tok_stream_new(tok, &t.s, e) != 0)
        goto out;
    if (n_prompt)
        memcpy(res->prompt_ids, prompt, n_prompt * sizeof *prompt);
    res->n_prompt = n_prompt;
    if (saved_n)
        memcpy(stop, saved_stop, saved_n * sizeof *stop);
    t.stop = stop;
    t.n_stop = saved_n;
    if (o->stop_at_eos && eos >= 0)
        stop[t.n_stop++] = eos;
    r->o.stop_tokens = stop;
    r->o.n_stop = t.n_stop;
    r->o.on_token = on_token;
    r->o.user = &t;
    int grc = tq_runner_generate(r, prompt, n_prompt, o->max_tokens, res->tokens, st, e);
    r->o.stop_tokens = saved_stop;
    r->o.n_stop = saved_n;
    r->o.on_token = t.user_on_token;
    r->o.user = t.user;
    if (grc != 0) {
        if (t.failed)
            *e = t.err;
        goto out;
    }
    res->n_tokens = st->generated_tokens;
    res->stopped = st->stopped;
    const char *p;
    size_t n;
    if (tq_tok_stream_finish(t.s, &p, &n, e) != 0)
        goto out;
    if (emit(&t, p, n) != 0) {
        if (t.failed)
            *e = t.err;
        else
            tq_fail(e, TQ_EIO, "decoding stopped by the caller at the end of the text");
        goto out;
    }
    res->text_len = t.text.len;
    if (!(res->text = tq_sb_finish(&t.text, e)))
        goto out;
    rc = 0;
out:
    tq_tok_stream_free(t.s);
    tq_sb_free(&t.text);
    free(stop);
    if (rc != 0)
        tq_run_text_result_free(res);
    return rc;
}

int tq_runner_generate_text(tq_runner *r, const tq_tok *tok, const char *prompt, size_t len,
                            const tq_run_text_opts *o, tq_run_text_result *res, tq_run_stats *st, tq_err *e)
{
    memset(res, 0, sizeof *res);
    int32_t *ids = NULL;
    size_t n = 0;
    const char *name = o->prompt_name ? o->prompt_name : "prompt";
    if (tq_tok_encode(tok, prompt, len, o->add_special, &ids, &n, e) != 0) {
        tq_err_prefix(e, "%s", name);
        return -1;
    }
    if (!n) {
        free(ids);
        return tq_fail(e, TQ_EUSAGE, "%s: the prompt encodes to no tokens", name);
    }
    int rc = tq_runner_generate_text_ids(r, tok, ids, n, o, res, st, e);
    free(ids);
    return rc;
}
