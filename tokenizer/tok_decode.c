/* tokenizer/tok_decode.c — ids to text through the decoder chain, whole or streamed. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* The decoder works on a list of token strings held in one buffer. */
typedef struct tlist {
    tq_sb buf;
    struct tstr { size_t off, len; int added; } *s;
    size_t n, cap;
} tlist;

static int tl_add(tlist *l, const char *s, size_t n, int added)
{
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 64;
        struct tstr *x = realloc(l->s, c * sizeof *x);
        if (!x)
            return -1;
        l->s = x;
        l->cap = c;
    }
    size_t off = l->buf.len;
    if (tq_sb_put(&l->buf, s, n))
        return -1;
    l->s[l->n++] = (struct tstr){off, n, added};
    return 0;
}

static void tl_free(tlist *l)
{
    tq_sb_free(&l->buf);
    free(l->s);
    memset(l, 0, sizeof *l);
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>' || hexval(s[3]) < 0 || hexval(s[4]) < 0)
        return -1;
    return hexval(s[3]) * 16 + hexval(s[4]);
}

/* One step of the chain: in -> out, at most limit bytes (-3 past it). */
static int step(const tq_tok *t, const tok_dec *d, const tlist *in, tlist *out, pcre2_match_data *md, size_t limit,
                tq_err *e)
{
    tq_sb tmp = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = in->buf.s + in->s[i].off;
        size_t n = in->s[i].len;
        int added = in->s[i].added;
        tmp.len = 0;
        switch (d->kind) {
        case D_REPLACE: {
            size_t from = 0, ms, me;
            for (;;) {
                int r = tok_pattern_next(&d->pat, md, s, n, from, &ms, &me, e);
                if (r < 0) {
                    rc = -1;
                    break;
                }
                if (r > 0)
                    ms = me = n;
                if (out->buf.len + tmp.len + (ms - from) + (r == 0 ? d->content_len : 0) > limit)
                    rc = -3;
                else if (tq_sb_put(&tmp, s + from, ms - from) ||
                         (r == 0 && tq_sb_put(&tmp, d->content, d->content_len)))
                    rc = -2;
                if (r > 0 || rc)
                    break;
                from = me;
            }
            if (!rc && tl_add(out, tmp.s ? tmp.s : "", tmp.len, added))
                rc = -2;
            break;
        }
        case D_BYTEFALLBACK: {
            int b = byte_token(s, n);
            if (b < 0) {
                rc = tl_add(out, s, n, added) ? -2 : 0;
                break;
            }
            char c = (char)b;
            size_t j = i;
            while (!rc && j < in->n && (b = byte_token(in->buf.s + in->s[j].off, in->s[j].len)) >= 0) {
                c = (char)b;
                rc = tq_sb_put(&tmp, &c, 1) ? -2 : 0;
                j++;
            }
            if (!rc && tl_add(out, tmp.s, tmp.len, 0))
                rc = -2;
            i = j - 1;
            break;
        }
        case D_FUSE:
            if (i == 0 && tl_add(out, "", 0, 0))
                rc = -2;
            if (!rc && tq_sb_put(&out->buf, s, n))
                rc = -2;
            if (!rc)
                out->s[0].len += n;
            break;
        case D_STRIP: {
            size_t a = 0, b = n, cl = d->content_len;
            for (long k = 0; k < d->start && b - a >= cl && !memcmp(s + a, d->content, cl); k++)
                a += cl;
            for (long k = 0; k < d->stop && b - a >= cl && !memcmp(s + b - cl, d->content, cl); k++)
                b -= cl;
            rc = tl_add(out, s + a, b - a, added) ? -2 : 0;
            break;
        }
        case D_METASPACE: {
            for (size_t j = 0; j < n && !rc;) {
                if (n - j >= d->repl_len && !memcmp(s + j, d->repl, d->repl_len)) {
                    rc = tq_sb_put(&tmp, " ", 1) ? -2 : 0;
                    j += d->repl_len;
                } else {
                    rc = tq_sb_put(&tmp, s + j, 1) ? -2 : 0;
                    j++;
                }
            }
            size_t skip = d->prefix && i == 0 && tmp.len && tmp.s[0] == ' ';
            if (!rc && tl_add(out, tmp.s ? tmp.s + skip : "", tmp.len - skip, added))
                rc = -2;
            break;
        }
        case D_BYTELEVEL: {
            /* Added tokens pass as they are; any other token is GPT-2 characters standing for
             * bytes (a token with a character outside that map passes as it is). */
            int ok = !added;
            for (size_t j = 0; ok && j < n;) {
                uint32_t cp;
                size_t cl = tok_utf8_len((const unsigned char *)s + j, n - j, &cp);
                int b = cl ? tok_char_byte(cp) : -1;
                if (b < 0) {
                    ok = 0;
                    break;
                }
                char c = (char)b;
                rc = tq_sb_put(&tmp, &c, 1) ? -2 : 0;
                j += cl;
            }
            if (!rc && (ok ? tl_add(out, tmp.s ? tmp.s : "", tmp.len, 0) : tl_add(out, s, n, added)))
                rc = -2;
            break;
        }
        }
    }
    tq_sb_free(&tmp);
    if (rc == -2)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    if (!rc && out->buf.len > limit)
        rc = -3;
    (void)t;
    return rc;
}

int tok_decode_raw(const tq_tok *t, const int32_t *ids, size_t n, tq_sb *out, tq_err *e)
{
    tlist a = {0}, b = {0};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = md ? 0 : tq_fail(e, TQ_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        size_t len;
        const char *s = tok_id_str(t, ids[i], &len);
        if (!s)
            rc = tq_fail(e, TQ_EDATA, "token id %ld is not in the vocabulary (%d ids)", (long)ids[i], (int)t->n_ids);
        else if (tl_add(&a, s, len, t->id_added[ids[i]] >= 0))
            rc = tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    size_t n0 = a.buf.len, limit = tok_growth_limit(n0);
    for (size_t k = 0; k < t->n_dec && !rc; k++) {
        b.n = 0;
        b.buf.len = 0;
        rc = step(t, &t->dec[k], &a, &b, md, limit, e);
        if (rc == -3)
            rc = tok_grown(e, t->name, t->dec[k].where, tok_dec_names[t->dec[k].kind], n0, limit);
        tlist tmp = a;
        a = b;
        b = tmp;
    }
    /* No decoder: tokens joined by spaces, as both tokenizers implementations do. */
    for (size_t i = 0; i < a.n && !rc; i++)
        if ((i && !t->has_decoder && tq_sb_put(out, " ", 1)) || tq_sb_put(out, a.buf.s + a.s[i].off, a.s[i].len))
            rc = tq_fail(e, TQ_ENOMEM, "out of memory");
    if (!rc && tq_sb_put(out, "", 0))
        rc = tq_fail(e, TQ_ENOMEM, "out of memory");
    pcre2_match_data_free(md);
    tl_free(&a);
    tl_free(&b);
    return rc;
}

/* transformers' clean_up_tokenization (tokenization_utils_base.py; transformers.js
 * tokenizers.js, clean_up_tokenization, the same list): these replacements of every
 * occurrence, left to right without overlaps, one after another over the whole text. Applied
 * after the decode when tokenizer_config.json has clean_up_tokenization_spaces: true
 * (Llama 3's). Rewrites b in place; the text only shrinks. */
static const char *const cleanup_from[10] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
static const char *const cleanup_to[10] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};

static void cleanup(tq_sb *b)
{
    for (int k = 0; k < 10; k++) {
        size_t fl = strlen(cleanup_from[k]), tl = strlen(cleanup_to[k]), r = 0, w = 0;
        while (r < b->len) {
            if (b->len - r >= fl && !memcmp(b->s + r, cleanup_from[k], fl)) {
                memmove(b->s + w, cleanup_to[k], tl);
                w += tl;
                r += fl;
            } else {
                b->s[w++] = b->s[r++];
            }
        }
        b->len = w;
    }
}

int tq_tok_decode(const tq_tok *t, const int32_t *ids, size_t n, char **text, size_t *len, tq_err *e)
{
    *text = NULL;
    *len = 0;
    tq_sb raw = {0}, out = {0};
    int rc = tok_decode_raw(t, ids, n, &raw, e);
    if (!rc && tok_utf8_sanitize(&out, raw.s, raw.len))
        rc = tq_fail(e, TQ_ENOMEM, "out of memory");
    if (!rc && t->cleanup)
        cleanup(&out);
    if (!rc && tq_sb_put(&out, "", 0))
        rc = tq_fail(e, TQ_ENOMEM, "out of memory");
    tq_sb_free(&raw);
    if (rc) {
        tq_sb_free(&out);
        return -1;
    }
    *text = out.s;
    *len = out.len;
    return 0;
}

/* ------------------------------------------------------------------ streaming */
/* Decoding is prefix-stable (the text of ids[0..k] begins the text of ids[0..k+1]) for every
 * decoder here except Strip's trailing "stop" characters, which are held back. Each push decodes
 * the ids since the start again; that is quadratic in the number of tokens, and cheap beside a
 * model's forward pass for the lengths tq-run generates. */
struct tq_tok_stream {
    const tq_tok *t;
    int32_t *ids;
    size_t n, cap;
    size_t emitted; /* bytes of sanitized text handed out */
    tq_sb raw, clean;
    long hold_stop;        /* Strip stop characters the chain may still remove */
    const char *strip;     /* ... and which character that is */
    size_t strip_len;
};

int tq_tok_stream_new(const tq_tok *t, tq_tok_stream **out, tq_err *e)
{
    tq_tok_stream *s = calloc(1, sizeof *s);
    if (!s)
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    s->t = t;
    for (size_t k = 0; k < t->n_dec; k++)
        if (t->dec[k].kind == D_STRIP && t->dec[k].stop) {
            s->hold_stop += t->dec[k].stop;
            s->strip = t->dec[k].content;
            s->strip_len = t->dec[k].content_len;
        }
    *out = s;
    return 0;
}

static int stream_emit(tq_tok_stream *s, int final, const char **text, size_t *len, tq_err *e)
{
    s->raw.len = 0;
    s->clean.len = 0;
    if (tok_decode_raw(s->t, s->ids, s->n, &s->raw, e))
        return -1;
    size_t stable = s->raw.len;
    if (!final) {
        stable -= tok_utf8_incomplete_tail(s->raw.s, stable);
        for (long k = 0; k < s->hold_stop && stable >= s->strip_len &&
                         !memcmp(s->raw.s + stable - s->strip_len, s->strip, s->strip_len); k++)
            stable -= s->strip_len;
    }
    if (tok_utf8_sanitize(&s->clean, s->raw.s, stable))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    if (s->t->cleanup) {
        /* Every cleanup pattern starts with a space and spans at most 4 bytes, and a
         * replacement only removes spaces: text cut where none of its last 3 bytes is a space
         * cleans up to a prefix of what any longer text cleans up to. Hold back from a space
         * that close to the end. */
        for (size_t k = 1; !final && k <= 3 && k <= s->clean.len; k++)
            if (s->clean.s[s->clean.len - k] == ' ') {
                s->clean.len -= k;
                k = 0;
            }
        cleanup(&s->clean);
    }
    if (tq_sb_put(&s->clean, "", 0))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    if (s->clean.len < s->emitted) {
        *text = "";
        *len = 0;
        return 0;
    }
    *text = s->clean.s + s->emitted;
    *len = s->clean.len - s->emitted;
    s->emitted = s->clean.len;
    return 0;
}

int tq_tok_stream_push(tq_tok_stream *s, int32_t id, const char **text, size_t *len, tq_err *e)
{
    *text = "";
    *len = 0;
    if (!tok_id_str(s->t, id, NULL))
        return tq_fail(e, TQ_EDATA, "token id %ld is not in the vocabulary (%d ids)", (long)id, (int)s->t->n_ids);
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 64;
        int32_t *x = realloc(s->ids, c * sizeof *x);
        if (!x)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        s->ids = x;
        s->cap = c;
    }
    s->ids[s->n++] = id;
    return stream_emit(s, 0, text, len, e);
}

int tq_tok_stream_finish(tq_tok_stream *s, const char **text, size_t *len, tq_err *e)
{
    return stream_emit(s, 1, text, len, e);
}

void tq_tok_stream_free(tq_tok_stream *s)
{
    if (!s)
        return;
    free(s->ids);
    tq_sb_free(&s->raw);
    tq_sb_free(&s->clean);
    free(s);
}
