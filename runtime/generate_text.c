/* Text generation: a prompt string through the tokenizer, the decode, and each token's text to a callback as it comes (runtime.h, tq_runner_generate_text); tq_run_job_run, the whole decode tq-run runs. */
#include "runtime/rt_internal.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
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

/* The tokenizer directory's chat template applied to one user message. */
static int chat_prompt(const char *dir, const char *text, size_t len, int64_t now, char **out, size_t *olen,
                       tq_err *e)
{
    char *msg = tq_malloc(len + 1, e), *js = NULL;
    if (!msg)
        return -1;
    memcpy(msg, text, len);
    msg[len] = 0;
    cJSON *m = cJSON_CreateArray(), *u = cJSON_CreateObject();
    int rc = -1;
    if (m && u && cJSON_AddItemToArray(m, u) && cJSON_AddStringToObject(u, "role", "user") &&
        cJSON_AddStringToObject(u, "content", msg) && (js = cJSON_PrintUnformatted(m)))
        rc = tq_chat_render_dir(dir, js, strlen(js), 1, now, out, olen, e);
    else {
        tq_fail(e, TQ_ENOMEM, "out of memory");
        if (u && !u->prev && m && !m->child)
            cJSON_Delete(u);
    }
    cJSON_Delete(m);
    free(js);
    free(msg);
    return rc;
}

int tq_run_job_run(const tq_run_job *j, const tq_run_opts *o, tq_run_text_result *res, tq_run_stats *st,
                   tq_err *e)
{
    memset(res, 0, sizeof *res);
    const char *tdir = j->tok_dir ? j->tok_dir : j->model_dir;
    tq_tok *tok = NULL;
    tq_runner *r = NULL;
    char *ftext = NULL, *chat_text = NULL;
    size_t flen = 0, chat_len = 0;
    int rc = -1;
    if (j->text && (tq_tok_load(tdir, &tok, e) ||
                    (j->prompt_file && tq_read_small_file(j->prompt_file, j->max_input, &ftext, &flen, e))))
        goto out;
    const char *prompt = j->prompt ? j->prompt : ftext;
    size_t plen = j->prompt ? strlen(j->prompt) : flen;
    if (j->chat && chat_prompt(tdir, prompt, plen, j->chat_now, &chat_text, &chat_len, e))
        goto out;
    if (chat_text) {
        prompt = chat_text;
        plen = chat_len;
    }
    if (tq_runner_open(&r, j->model_dir, o, e) != 0)
        goto out;
    if (j->text) {
        rc = j->ids ? tq_runner_generate_text_ids(r, tok, j->ids, j->n_ids, &j->t, res, st, e)
                    : tq_runner_generate_text(r, tok, prompt, plen, &j->t, res, st, e);
    } else if ((res->tokens = tq_malloc(j->t.max_tokens * sizeof *res->tokens, e)) != NULL &&
               tq_runner_generate(r, j->ids, j->n_ids, j->t.max_tokens, res->tokens, st, e) == 0) {
        res->n_tokens = st->generated_tokens;
        res->stopped = st->stopped;
        rc = 0;
    }
out:
    tq_runner_close(r);
    if (rc != 0)
        tq_run_text_result_free(res);
    tq_tok_free(tok);
    free(ftext);
    free(chat_text);
    return rc;
}

int tq_run_eval_file(const char *model_dir, const tq_run_opts *o, const char *path, size_t max_input, int is_ids,
                     const char *tok_dir, uint64_t window, uint64_t stride, tq_run_eval *ev, tq_run_stats *st,
                     tq_err *e)
{
    char *text = NULL;
    size_t len = 0, n = 0;
    int32_t *ids = NULL;
    tq_tok *tok = NULL;
    tq_runner *r = NULL;
    int rc = -1;
    if (tq_read_small_file(path, max_input, &text, &len, e))
        goto out;
    if (is_ids) {
        if (tq_parse_id_text(text, len, &ids, &n, e)) {
            tq_err_prefix(e, "%s", path);
            if (e->code == TQ_EUSAGE)
                e->code = TQ_EDATA; /* a bad file, not a bad argument */
            goto out;
        }
    } else if (tq_tok_load(tok_dir ? tok_dir : model_dir, &tok, e) || tq_tok_encode(tok, text, len, 0, &ids, &n, e)) {
        if (tok)
            tq_err_prefix(e, "%s", path);
        goto out;
    }
    if (tq_runner_open(&r, model_dir, o, e) != 0)
        goto out;
    if (tq_runner_eval(r, ids, n, window, stride, ev, st, e) != 0) {
        tq_err_prefix(e, "%s", path);
        goto out;
    }
    rc = 0;
out:
    tq_runner_close(r);
    tq_tok_free(tok);
    free(ids);
    free(text);
    return rc;
}
