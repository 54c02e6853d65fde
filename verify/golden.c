/* tq-verify golden: the runtime's greedy validation decode against a committed golden file. */
#include "verify/verify_internal.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GOLDEN_BYTES (16u << 20)
#define MAX_TOKENS (1u << 16)

void tq_golden_result_free(tq_golden_result *res)
{
    free(res->tokens);
    free(res->expected);
    free(res->text);
    free(res->expected_text);
    memset(res, 0, sizeof *res);
}

typedef struct golden {
    int32_t *prompt, *tokens;
    size_t n_prompt, max_tokens;
    char sha[65];
    char *text; /* "text", when recorded */
} golden;

static int int_array(const cJSON *a, size_t max, int32_t **out, size_t *n)
{
    if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) > max)
        return -1;
    size_t cnt = (size_t)cJSON_GetArraySize(a), i = 0;
    int32_t *v = malloc((cnt ? cnt : 1) * sizeof *v);
    if (!v)
        return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        uint64_t x;
        if (tq_json_u64(it, &x) != 0 || x > INT32_MAX) {
            free(v);
            return -1;
        }
        v[i++] = (int32_t)x;
    }
    *out = v;
    *n = cnt;
    return 0;
}

static int text_ok(const cJSON *v)
{
    return !v || cJSON_IsString(v);
}

static int load_golden(const char *path, golden *g, tq_err *e)
{
    cJSON *j;
    if (tq_json_read_file(path, MAX_GOLDEN_BYTES, &j, e) != 0)
        return -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "max_tokens");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(j, "logits_sha256");
    size_t nt = 0;
    uint64_t want = 0;
    unsigned char d[32];
    int rc = -1;
    if (!cJSON_IsObject(j) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, TQ_GOLDEN_FORMAT)) {
        tq_fail(e, TQ_EDATA, "%s: not a %s file", path, TQ_GOLDEN_FORMAT);
    } else if (int_array(cJSON_GetObjectItemCaseSensitive(j, "prompt"), MAX_TOKENS, &g->prompt, &g->n_prompt) ||
               !g->n_prompt) {
        tq_fail(e, TQ_EDATA, "%s: \"prompt\" must be a non-empty array of token ids", path);
    } else if (tq_json_u64(mt, &want) != 0 || want < 1 || want > MAX_TOKENS) {
        tq_fail(e, TQ_EDATA, "%s: \"max_tokens\" must be an integer in [1, %u]", path, MAX_TOKENS);
    } else if (int_array(cJSON_GetObjectItemCaseSensitive(j, "tokens"), MAX_TOKENS, &g->tokens, &nt) ||
               nt != want) {
        tq_fail(e, TQ_EDATA, "%s: \"tokens\" must be max_tokens token ids", path);
    } else if (!cJSON_IsString(sha) || strlen(sha->valuestring) != 64 || tq_unhex32(sha->valuestring, d)) {
        tq_fail(e, TQ_EDATA, "%s: \"logits_sha256\" must be 64 hex digits", path);
    } else if (!text_ok(cJSON_GetObjectItemCaseSensitive(j, "text")) ||
               !text_ok(cJSON_GetObjectItemCaseSensitive(j, "prompt_text"))) {
        tq_fail(e, TQ_EDATA, "%s: \"text\" and \"prompt_text\" must be strings when present", path);
    } else if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "text")) &&
               !(g->text = tq_strdup(cJSON_GetObjectItemCaseSensitive(j, "text")->valuestring, e))) {
        /* out of memory: e is set */
    } else {
        g->max_tokens = nt;
        tq_hex(d, 32, g->sha);
        rc = 0;
    }
    cJSON_Delete(j);
    return rc;
}

/* The new golden file through af (checked when the run began), published only if the file it
 * was read from (src) is as it was then. */
static int write_golden(tq_afile *af, const tq_sources *src, const int32_t *prompt, size_t np, const int32_t *tokens,
                        size_t nt, const char *sha, const char *prompt_text, const char *text, tq_err *e)
{
    cJSON *j = cJSON_CreateObject();
    if (prompt_text)
        cJSON_AddStringToObject(j, "prompt_text", prompt_text);
    if (text)
        cJSON_AddStringToObject(j, "text", text);
    cJSON_AddStringToObject(j, "format", TQ_GOLDEN_FORMAT);
    cJSON *p = cJSON_AddArrayToObject(j, "prompt"), *t = cJSON_AddArrayToObject(j, "tokens");
    for (size_t i = 0; p && i < np; i++)
        cJSON_AddItemToArray(p, cJSON_CreateNumber(prompt[i]));
    for (size_t i = 0; t && i < nt; i++)
        cJSON_AddItemToArray(t, cJSON_CreateNumber(tokens[i]));
    cJSON_AddNumberToObject(j, "max_tokens", (double)nt);
    cJSON_AddStringToObject(j, "logits_sha256", sha);
    char *txt = tq_json_print(j, e);
    cJSON_Delete(j);
    int rc = -1;
    if (txt && tq_afile_create(af, e) == 0) {
        if (tq_write_full(af->fd, txt, strlen(txt), af->tmp_path, e) != 0)
            tq_afile_abort(af);
        else if (tq_sources_check(src, e) == 0) /* the golden file itself too: it is the input */
            rc = tq_afile_commit(af, e);
        else {
            char *kept = tq_afile_keep(af);
            tq_err_suffix(e, "; nothing was published, and the output built from it is kept at %s", kept ? kept : "?");
            free(kept);
        }
    }
    free(txt);
    return rc;
}

/* The model's tokenizer, or NULL when it has no tokenizer.json (-1 when one fails to load). */
static int model_tokenizer(const char *model, tq_tok **t, tq_err *e)
{
    *t = NULL;
    char *p = tq_is_dir(model) ? tq_path_join(model, "tokenizer.json", e) : NULL;
    int rc = p && tq_exists(p) ? tq_tok_load(model, t, e) : 0;
    free(p);
    return rc;
}

/* Decoded text of ids, or NULL when an id is not the tokenizer's, on no tokenizer, or when the
 * text holds a NUL (a JSON string of the file could, the C strings that carry it could not). */
static char *decode_or_null(const tq_tok *t, const int32_t *ids, size_t n)
{
    tq_err ignored;
    char *s = NULL;
    size_t len;
    if (!t)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!tq_tok_has_id(t, ids[i]))
            return NULL;
    if (tq_tok_decode(t, ids, n, &s, &len, &ignored))
        return NULL;
    if (strlen(s) != len) {
        free(s);
        return NULL;
    }
    return s;
}

int tq_golden_run(const char *model, const char *path, const tq_golden_opts *o, tq_golden_result *res, tq_err *e)
{
    memset(res, 0, sizeof *res);
    res->first_token_diff = -1;
    golden g = {0};
    tq_afile af = {.fd = -1};
    tq_sources src = {0};
    tq_tok *tok = NULL;
    int32_t *text_ids = NULL;
    char *prompt_text = NULL;
    if (model_tokenizer(model, &tok, e) != 0)
        goto fail;
    /* --update makes FILE an output: never a non-regular file, never inside MODEL; an empty
     * one is taken as absent (the one rule: only a non-empty output needs consent, and
     * --update is that consent for a golden file, the only kind it replaces). The file seen
     * now is the one replaced at the end, and only if it is still that file, unchanged. */
    if (o->update && (tq_check_out_in(path, model, e) != 0 || tq_afile_check(&af, path, TQ_AFILE_REPLACE, e) != 0))
        goto fail;
    int have = tq_exists(path) && !(o->update && af.had_final && af.final_empty);
    if (have && ((o->update && tq_sources_add_entry(&src, path, e) != 0) || load_golden(path, &g, e) != 0))
        goto fail;
    if (!have && !o->update) {
        tq_fail(e, TQ_EIO, "%s: no such golden file (create it with --update and --tokens IDS or --prompt TEXT)", path);
        goto fail;
    }
    const int32_t *prompt = o->update && o->prompt ? o->prompt : g.prompt;
    size_t np = o->update && o->prompt ? o->n_prompt : g.n_prompt;
    if (o->update && o->prompt_text) {
        if (!tok) {
            tq_fail(e, TQ_EUSAGE, "%s: a text prompt needs the model's tokenizer.json", model);
            goto fail;
        }
        if (tq_tok_encode(tok, o->prompt_text, strlen(o->prompt_text), 0, &text_ids, &np, e) != 0) {
            tq_err_prefix(e, "--prompt");
            goto fail;
        }
        prompt = text_ids;
    }
    size_t nt = o->update && o->max_tokens ? o->max_tokens : have ? g.max_tokens : 8;
    if (!prompt || !np) {
        tq_fail(e, TQ_EUSAGE, "%s: a new golden file needs a prompt (--tokens IDS or --prompt TEXT)", path);
        goto fail;
    }
    if (nt > MAX_TOKENS) {
        tq_fail(e, TQ_EUSAGE, "max tokens %zu is more than %u", nt, MAX_TOKENS);
        goto fail;
    }
    if (!(res->tokens = tq_calloc(nt, sizeof *res->tokens, e)))
        goto fail;
    res->n_tokens = nt;
    tq_run_opts ro;
    tq_run_opts_default(&ro);
    ro.threads = o->threads;
    unsigned char d[32];
    if (tq_run_validate(model, prompt, np, nt, &ro, res->tokens, d, e) != 0)
        goto fail;
    tq_hex(d, 32, res->logits_sha256);
    if (have) {
        res->expected = g.tokens;
        g.tokens = NULL;
        memcpy(res->expected_sha256, g.sha, 65);
        int same_run = g.max_tokens == nt && g.n_prompt == np && !memcmp(g.prompt, prompt, np * sizeof *prompt);
        size_t cmp = nt < g.max_tokens ? nt : g.max_tokens;
        for (size_t i = 0; i < cmp && res->first_token_diff < 0; i++)
            if (res->tokens[i] != res->expected[i])
                res->first_token_diff = (long)i;
        if (res->first_token_diff < 0 && nt != g.max_tokens)
            res->first_token_diff = (long)cmp;
        res->match = same_run && res->first_token_diff < 0 && !strcmp(res->logits_sha256, g.sha);
    }
    res->text = decode_or_null(tok, res->tokens, nt);
    prompt_text = decode_or_null(tok, prompt, np);
    res->expected_text = g.text;
    g.text = NULL;
    if (res->text && res->expected_text && strcmp(res->text, res->expected_text)) {
        res->text_differs = 1;
        res->match = 0;
    }
    if (o->update) {
        if (write_golden(&af, &src, prompt, np, res->tokens, nt, res->logits_sha256, prompt_text, res->text, e) != 0)
            goto fail;
        res->updated = 1;
    }
    tq_sources_free(&src);
    free(g.prompt);
    free(g.tokens);
    free(text_ids);
    free(prompt_text);
    tq_tok_free(tok);
    return 0;
fail:
    if (af.final_path)
        tq_afile_abort(&af);
    tq_sources_free(&src);
    free(g.prompt);
    free(g.tokens);
    free(g.text);
    free(text_ids);
    free(prompt_text);
    tq_tok_free(tok);
    tq_golden_result_free(res);
    return -1;
}
