/* tokenizer/tok_encode.c — text to ids: added tokens, normalizers, pre-tokenizers, BPE. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define CACHE_MAX_WORD 256        /* longer pre-tokens are not cached */
#define CACHE_MAX_WORDS (1 << 16) /* the cache is emptied when it holds this many */

typedef struct piece {
    size_t off, len; /* in enc.text */
    int32_t added;   /* added-token id, or -1 for text */
    int bytelevel;
} piece;

typedef struct plist {
    piece *p;
    size_t n, cap;
} plist;

typedef struct sym {
    int32_t id, prev, next;
    uint32_t start, len; /* bytes in the pre-token; len 0 once merged into its left neighbour */
} sym;

typedef struct hent {
    int32_t rank, pos, right, lid, rid, out;
} hent;

typedef struct enc {
    const tq_tok *t;
    tq_sb text;  /* the input and every string made from it */
    plist a, b;    /* pre-token lists (current, next) */
    int32_t *ids;
    size_t n, cap;
    pcre2_match_data *md;
    sym *sym;
    size_t sym_cap;
    hent *heap;
    size_t nheap, heap_cap;
    tq_sb mapped; /* a byte-level pre-token as vocabulary characters */
    tok_map cache;  /* pre-token (+ byte-level flag) -> span in cache_ids */
    struct span { uint32_t off, n; } *spans;
    size_t n_spans, spans_cap;
    int32_t *cache_ids;
    size_t n_cache_ids, cache_ids_cap;
    long unk_section; /* section of the last unk emitted, for fuse_unk */
    int32_t *best;    /* split_added: the added token to take at each position, or -1 */
    size_t best_cap;
} enc;

static int oom(tq_err *e)
{
    return tq_fail(e, TQ_ENOMEM, "out of memory");
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int emit(enc *x, int32_t id, long section)
{
    const tq_tok *t = x->t;
    if (t->fuse_unk && id == t->unk && id >= 0) {
        if (x->unk_section == section && x->n && x->ids[x->n - 1] == id)
            return 0;
        x->unk_section = section;
    }
    if (grow((void **)&x->ids, &x->cap, x->n + 1, sizeof *x->ids))
        return -1;
    x->ids[x->n++] = id;
    return 0;
}

static int plist_add(plist *l, size_t off, size_t len, int32_t added, int bytelevel)
{
    if (!len)
        return 0;
    if (grow((void **)&l->p, &l->cap, l->n + 1, sizeof *l->p))
        return -1;
    l->p[l->n++] = (piece){off, len, added, bytelevel};
    return 0;
}

/* ECMAScript white space, as transformers.js trims and splits with. */
static int js_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == ' ' || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

static uint32_t cp_at(const char *s, size_t n, size_t *len)
{
    uint32_t c = 0;
    *len = tok_utf8_len((const unsigned char *)s, n, &c);
    if (!*len)
        *len = 1;
    return c;
}

/* The character ending just before s[i]. */
static uint32_t cp_before(const char *s, size_t i, size_t *len)
{
    size_t k = i;
    while (k > 0 && ((unsigned char)s[k - 1] & 0xC0) == 0x80 && i - k < 3)
        k--;
    if (k > 0)
        k--;
    return cp_at(s + k, i - k, len);
}

static int word_char(uint32_t c)
{
    if (c == '_')
        return 1;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

/* ------------------------------------------------------------------ added tokens */
/* The longest added token of tr beginning at s[i] (within [lo, end)) that may stand there: a
 * single_word token only between non-word characters (or the ends). v is the automaton's
 * state after reading s[end-1] down to s[i]; its output links list the tokens beginning at i,
 * longest first. Returns the token index, or -1. */
static int32_t longest_at(const tq_tok *t, const tok_trie *tr, int32_t v, const char *s, size_t lo, size_t i,
                          size_t end)
{
    int32_t u = tr->node[v].out;
    if (u < 0 || !t->added[tr->node[u].token].single_word)
        return u < 0 ? -1 : tr->node[u].token;
    size_t cl;
    if (i > lo && word_char(cp_before(s, i, &cl))) { /* no single_word token can begin here */
        u = tr->node[v].plain;
        return u < 0 ? -1 : tr->node[u].token;
    }
    /* Only single_word tokens longer than the longest other one are looked at, each once: a
     * tokenizer whose single_word tokens begin one another in long chains ("a", "ab", "abc",
     * ...) makes this walk long (real ones have a handful of single_word tokens at most). */
    for (; u >= 0; u = tr->node[tr->node[u].fail].out) {
        const tok_added *a = &t->added[tr->node[u].token];
        size_t j = i + a->len;
        if (!a->single_word || j == end || !word_char(cp_at(s + j, end - j, &cl)))
            return tr->node[u].token;
    }
    return -1;
}

/* Splits text[off, off+len) at the added tokens of tr into out: from the left, the longest
 * token that may stand at a position is taken (with lstrip and rstrip's white space), else
 * the position is passed over. One backward pass of the automaton finds that token for every
 * position first, so the work is linear in len. */
static int split_added(enc *x, const tok_trie *tr, size_t off, size_t len, plist *out)
{
    const tq_tok *t = x->t;
    size_t start = off, end = off + len, cl;
    if (grow((void **)&x->best, &x->best_cap, len, sizeof *x->best))
        return -1;
    const char *s = x->text.s;
    int32_t v = 0;
    for (size_t i = end; i-- > off;) {
        v = tok_trie_step(tr, v, (unsigned char)s[i]);
        x->best[i - off] = longest_at(t, tr, v, s, off, i, end);
    }
    for (size_t i = off; i < end;) {
        int32_t best = x->best[i - off];
        if (best < 0) {
            i++;
            continue;
        }
        const tok_added *a = &t->added[best];
        size_t tstart = i, tend = i + a->len;
        if (a->lstrip) /* whitespace before the token belongs to it */
            while (tstart > start && js_space(cp_before(s, tstart, &cl)))
                tstart -= cl;
        if (a->rstrip)
            while (tend < end && js_space(cp_at(s + tend, end - tend, &cl)))
                tend += cl;
        if (plist_add(out, start, tstart - start, -1, 0) || plist_add(out, tstart, tend - tstart, a->id, 0))
            return -1;
        i = start = tend;
    }
    return plist_add(out, start, end - start, -1, 0);
}

/* ------------------------------------------------------------------ normalizers */
/* Appends a new string to x->text; its offset in *off. */
static int add_text(enc *x, const char *s, size_t n, size_t *off)
{
    *off = x->text.len;
    return tq_sb_put(&x->text, s, n);
}

static int is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    return 1;
}

/* Replaces every match of pat in text[*off, +*len) with content; result appended to text.
 * A result longer than limit is refused as it grows (1 returned, nothing else said). */
static int replace_all(enc *x, const tok_pattern *pat, const char *content, size_t clen, size_t *off, size_t *len,
                       size_t limit, tq_err *e)
{
    size_t from = 0, ms, me, o = x->text.len;
    int found = 0;
    for (;;) {
        int r = tok_pattern_next(pat, x->md, x->text.s + *off, *len, from, &ms, &me, e);
        if (r < 0)
            return -1;
        if (r > 0)
            break;
        if (!found && tq_sb_reserve(&x->text, *len + 1))
            return oom(e);
        found = 1;
        /* x->text may move on growth: copy through offsets */
        if (tq_sb_reserve(&x->text, ms - from + clen + 1))
            return oom(e);
        memcpy(x->text.s + x->text.len, x->text.s + *off + from, ms - from);
        x->text.len += ms - from;
        if (x->text.len - o + clen > limit) {
            x->text.len = o;
            return 1;
        }
        if (tq_sb_put(&x->text, content, clen))
            return oom(e);
        from = me;
    }
    if (!found)
        return 0;
    if (tq_sb_reserve(&x->text, *len - from + 1))
        return oom(e);
    memcpy(x->text.s + x->text.len, x->text.s + *off + from, *len - from);
    x->text.len += *len - from;
    x->text.s[x->text.len] = 0;
    *off = o;
    *len = x->text.len - o;
    return 0;
}

/* The normalizer chain on text[*off, +*len); each step's string is appended to x->text (the
 * one before it dropped when it was made here), at most tok_growth_limit of the input. */
static int normalize(enc *x, size_t *off, size_t *len, tq_err *e)
{
    const tq_tok *t = x->t;
    size_t n0 = *len, limit = tok_growth_limit(n0), base = x->text.len;
    for (size_t k = 0; k < t->n_norm && *len; k++) {
        const tok_norm *nm = &t->norm[k];
        const char *s = x->text.s + *off;
        size_t n = *len, o, cl, poff = *off;
        int rc;
        switch (nm->kind) {
        case N_NFC:
        case N_NFD:
        case N_NFKC:
        case N_NFKD: {
            if (is_ascii(s, n))
                break;
            static const int opts[] = {UTF8PROC_COMPOSE, UTF8PROC_DECOMPOSE, UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
                                       UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT};
            utf8proc_uint8_t *d = NULL;
            utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &d,
                                              (utf8proc_option_t)(UTF8PROC_STABLE | opts[nm->kind - N_NFC]));
            if (r < 0) {
                free(d);
                return tq_fail(e, r == UTF8PROC_ERROR_NOMEM ? TQ_ENOMEM : TQ_EDATA, "normalizer: %s",
                               utf8proc_errmsg(r));
            }
            rc = add_text(x, (const char *)d, (size_t)r, &o);
            free(d);
            if (rc)
                return oom(e);
            *off = o, *len = (size_t)r;
            break;
        }
        case N_REPLACE:
            if ((rc = replace_all(x, &nm->pat, nm->content, nm->content_len, off, len, limit, e)) < 0)
                return -1;
            if (rc)
                return tok_grown(e, t->name, nm->where, tok_norm_names[nm->kind], n0, limit);
            break;
        case N_PREPEND:
            o = x->text.len;
            if (tq_sb_put(&x->text, nm->content, nm->content_len) || tq_sb_reserve(&x->text, n + 1))
                return oom(e);
            memcpy(x->text.s + x->text.len, x->text.s + *off, n);
            x->text.len += n;
            x->text.s[x->text.len] = 0;
            *off = o, *len = x->text.len - o;
            break;
        case N_STRIP:
            while (nm->left && *len && js_space(cp_at(x->text.s + *off, *len, &cl)))
                *off += cl, *len -= cl;
            while (nm->right && *len && js_space(cp_before(x->text.s + *off, *len, &cl)))
                *len -= cl;
            break;
        case N_LOWER:
        case N_STRIP_ACCENTS: {
            tq_sb b = {0};
            for (size_t i = 0; i < n;) {
                uint32_t c = cp_at(s + i, n - i, &cl);
                utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
                int drop = nm->kind == N_STRIP_ACCENTS && (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
                                                          cat == UTF8PROC_CATEGORY_ME);
                if (nm->kind == N_LOWER)
                    c = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
                utf8proc_uint8_t u[4];
                utf8proc_ssize_t ul = utf8proc_encode_char((utf8proc_int32_t)c, u);
                if (!drop && tq_sb_put(&b, (const char *)u, (size_t)ul)) {
                    tq_sb_free(&b);
                    return oom(e);
                }
                i += cl;
            }
            rc = add_text(x, b.s ? b.s : "", b.len, &o);
            tq_sb_free(&b);
            if (rc)
                return oom(e);
            *off = o, *len = x->text.len - o;
            break;
        }
        }
        if (*len > limit)
            return tok_grown(e, t->name, nm->where, tok_norm_names[nm->kind], n0, limit);
        /* The step before's string is not needed once it was this chain's own, at the end. */
        if (*off > poff && poff >= base && poff + n == *off && *off + *len == x->text.len) {
            memmove(x->text.s + poff, x->text.s + *off, *len);
            *off = poff;
            x->text.len = poff + *len;
            x->text.s[x->text.len] = 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ pre-tokenizers */
/* Splits piece p at the matches of pat (or of re when pat is NULL) with behavior into out. */
static int split_piece(enc *x, const piece *p, const tok_pattern *pat, int behavior, int invert, plist *out, tq_err *e)
{
    /* segments: alternating gaps and matches, as (end, is_match) */
    size_t from = 0, ms, me;
    const char *s = x->text.s + p->off;
    size_t n = p->len, first = out->n;
    size_t cur_s = 0; /* start of the piece being built */
    int have = 0, prev_match = 0;
    size_t pend_s = 0, pend_e = 0; /* MergedWithNext: a match waiting for the next segment */
    int pend = 0;
    for (;;) {
        int r = tok_pattern_next(pat, x->md, s, n, from, &ms, &me, e);
        if (r < 0)
            return -1;
        size_t seg[2][2];
        int nseg = 0;
        if (r > 0)
            ms = me = n;
        if (ms > from)
            seg[nseg][0] = from, seg[nseg++][1] = ms;
        if (me > ms)
            seg[nseg][0] = ms, seg[nseg++][1] = me;
        for (int k = 0; k < nseg; k++) {
            size_t a = seg[k][0], b = seg[k][1];
            int m = (a == ms && b == me && me > ms) != invert;
            switch (behavior) {
            case B_REMOVED:
                if (!m && plist_add(out, p->off + a, b - a, -1, p->bytelevel))
                    return oom(e);
                break;
            case B_ISOLATED:
                if (plist_add(out, p->off + a, b - a, -1, p->bytelevel))
                    return oom(e);
                break;
            case B_PREV:
                if (m && !prev_match && out->n > first)
                    out->p[out->n - 1].len = p->off + b - out->p[out->n - 1].off;
                else if (plist_add(out, p->off + a, b - a, -1, p->bytelevel))
                    return oom(e);
                break;
            case B_CONTIGUOUS:
                if (m == prev_match && out->n > first && have)
                    out->p[out->n - 1].len = p->off + b - out->p[out->n - 1].off;
                else if (plist_add(out, p->off + a, b - a, -1, p->bytelevel))
                    return oom(e);
                break;
            case B_NEXT:
                if (pend) {
                    if (!m) { /* the pending match joins this segment */
                        if (plist_add(out, p->off + pend_s, b - pend_s, -1, p->bytelevel))
                            return oom(e);
                        pend = 0;
                        break;
                    }
                    if (plist_add(out, p->off + pend_s, pend_e - pend_s, -1, p->bytelevel))
                        return oom(e);
                    pend = 0;
                }
                if (m)
                    pend = 1, pend_s = a, pend_e = b;
                else if (plist_add(out, p->off + a, b - a, -1, p->bytelevel))
                    return oom(e);
                break;
            }
            prev_match = m;
            have = 1;
            (void)cur_s;
        }
        if (r > 0)
            break;
        from = me;
    }
    if (pend && plist_add(out, p->off + pend_s, pend_e - pend_s, -1, p->bytelevel))
        return oom(e);
    return 0;
}

/* Splits at runs of characters for which cls says 1 (kept or dropped). */
static int split_runs(enc *x, const piece *p, int (*cls)(uint32_t, int), int arg, int drop, plist *out)
{
    const char *s = x->text.s + p->off;
    size_t i = 0, start = 0, cl;
    int cur = -1;
    while (i < p->len) {
        int c = cls(cp_at(s + i, p->len - i, &cl), arg);
        if (c != cur || (c == 2)) {
            if (i > start && !(drop && cur == 1) && plist_add(out, p->off + start, i - start, -1, p->bytelevel))
                return -1;
            start = i;
            cur = c;
        }
        i += cl;
    }
    if (i > start && !(drop && cur == 1) && plist_add(out, p->off + start, i - start, -1, p->bytelevel))
        return -1;
    return 0;
}

static int cls_space(uint32_t c, int arg)
{
    (void)arg;
    return js_space(c);
}

static int cls_digit(uint32_t c, int individual)
{
    return c >= '0' && c <= '9' ? (individual ? 2 : 1) : 0;
}

static int pre_tokenize(enc *x, size_t off, size_t len, int first, tq_err *e)
{
    const tq_tok *t = x->t;
    x->a.n = 0;
    if (plist_add(&x->a, off, len, -1, 0))
        return oom(e);
    for (size_t k = 0; k < t->n_pre; k++) {
        const tok_pre *pr = &t->pre[k];
        x->b.n = 0;
        for (size_t i = 0; i < x->a.n; i++) {
            piece p = x->a.p[i];
            int rc = 0;
            switch (pr->kind) {
            case P_SPLIT:
                rc = split_piece(x, &p, &pr->pat, pr->behavior, pr->invert, &x->b, e);
                break;
            case P_WHITESPACE:
                rc = split_piece(x, &p, &pr->pat, B_REMOVED, 1, &x->b, e);
                break;
            case P_WSPLIT:
                rc = split_runs(x, &p, cls_space, 0, 1, &x->b) ? oom(e) : 0;
                break;
            case P_DIGITS:
                rc = split_runs(x, &p, cls_digit, pr->individual, 0, &x->b) ? oom(e) : 0;
                break;
            case P_BYTELEVEL: {
                if (pr->add_prefix_space && x->text.s[p.off] != ' ') {
                    size_t o = x->text.len;
                    if (tq_sb_put(&x->text, " ", 1) || tq_sb_reserve(&x->text, p.len + 1))
                        return oom(e);
                    memcpy(x->text.s + x->text.len, x->text.s + p.off, p.len);
                    x->text.len += p.len;
                    x->text.s[x->text.len] = 0;
                    p.off = o, p.len++;
                }
                p.bytelevel = 1;
                if (pr->use_regex) {
                    tok_pattern g = {.re = t->gpt2_re};
                    rc = split_piece(x, &p, &g, B_ISOLATED, 0, &x->b, e);
                } else if (plist_add(&x->b, p.off, p.len, -1, 1)) {
                    rc = oom(e);
                }
                break;
            }
            case P_METASPACE: {
                size_t o = x->text.len;
                int pre = pr->prepend == PREPEND_ALWAYS || (pr->prepend == PREPEND_FIRST && first && i == 0);
                if (pre && !(p.len >= pr->repl_len && !memcmp(x->text.s + p.off, pr->repl, pr->repl_len)) &&
                    tq_sb_put(&x->text, pr->repl, pr->repl_len))
                    return oom(e);
                for (size_t j = 0; j < p.len; j++) {
                    char c = x->text.s[p.off + j];
                    if (c == ' ' ? tq_sb_put(&x->text, pr->repl, pr->repl_len) : tq_sb_put(&x->text, &c, 1))
                        return oom(e);
                }
                piece q = {o, x->text.len - o, -1, p.bytelevel};
                if (pr->split) {
                    tok_pattern lit = {.lit = (char *)pr->repl, .lit_len = pr->repl_len};
                    rc = split_piece(x, &q, &lit, B_NEXT, 0, &x->b, e);
                } else if (plist_add(&x->b, q.off, q.len, -1, q.bytelevel)) {
                    rc = oom(e);
                }
                break;
            }
            }
            if (rc)
                return -1;
        }
        plist tmp = x->a;
        x->a = x->b;
        x->b = tmp;
    }
    return 0;
}

/* ------------------------------------------------------------------ BPE */
static int hless(const hent *a, const hent *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(enc *x, int32_t l)
{
    const sym *s = x->sym;
    int32_t r = s[l].next, rank, out;
    if (r < 0 || s[l].id < 0 || s[r].id < 0 || !tok_merges_find(&x->t->merges, s[l].id, s[r].id, &rank, &out))
        return 0;
    if (grow((void **)&x->heap, &x->heap_cap, x->nheap + 1, sizeof *x->heap))
        return -1;
    hent h = {rank, l, r, s[l].id, s[r].id, out};
    size_t i = x->nheap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!hless(&h, &x->heap[up]))
            break;
        x->heap[i] = x->heap[up];
        i = up;
    }
    x->heap[i] = h;
    return 0;
}

static hent heap_pop(enc *x)
{
    hent top = x->heap[0], last = x->heap[--x->nheap];
    size_t i = 0, n = x->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && hless(&x->heap[c + 1], &x->heap[c]))
            c++;
        if (!hless(&x->heap[c], &last))
            break;
        x->heap[i] = x->heap[c];
        i = c;
    }
    if (n)
        x->heap[i] = last;
    return top;
}

/* Appends the ids of one unknown symbol (byte fallback or unk) to x->cache_ids-style out. */
static int unknown(enc *x, const char *s, size_t n, int32_t **out, size_t *no, size_t *cap, tq_err *e)
{
    const tq_tok *t = x->t;
    int all = t->byte_fallback;
    for (size_t i = 0; all && i < n; i++)
        all = t->byte_tok[(unsigned char)s[i]] >= 0;
    size_t k = all ? n : 1;
    if (grow((void **)out, cap, *no + k, sizeof **out))
        return oom(e);
    if (all) {
        for (size_t i = 0; i < n; i++)
            (*out)[(*no)++] = t->byte_tok[(unsigned char)s[i]];
        return 0;
    }
    if (t->unk < 0)
        return tq_fail(e, TQ_EDATA, "the vocabulary has no token for '%.*s' and model.unk_token is not set",
                       (int)(n > 16 ? 16 : n), s);
    (*out)[(*no)++] = t->unk;
    return 0;
}

/* BPE of one pre-token; ids appended to (*out, *no). */
static int bpe_word(enc *x, const char *w, size_t n, int bytelevel, int32_t **out, size_t *no, size_t *cap, tq_err *e)
{
    const tq_tok *t = x->t;
    if (t->ignore_merges) {
        const char *key = w;
        size_t kn = n;
        if (bytelevel) {
            x->mapped.len = 0;
            if (tq_sb_reserve(&x->mapped, 2 * n + 1))
                return oom(e);
            for (size_t i = 0; i < n; i++)
                x->mapped.len += tq_tok_byte_char((unsigned char)w[i], x->mapped.s + x->mapped.len);
            key = x->mapped.s, kn = x->mapped.len;
        }
        long k = tok_map_find(&t->vocab, key, kn);
        if (k >= 0) {
            if (grow((void **)out, cap, *no + 1, sizeof **out))
                return oom(e);
            (*out)[(*no)++] = t->vocab.ent[k].id;
            return 0;
        }
    }
    if (n > INT32_MAX / 2)
        return tq_fail(e, TQ_EDATA, "a pre-token of %zu bytes is too long", n);
    if (grow((void **)&x->sym, &x->sym_cap, n, sizeof *x->sym))
        return oom(e);
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t cl;
        int32_t id;
        if (bytelevel) {
            cl = 1;
            id = t->level_tok[(unsigned char)w[i]];
        } else {
            cp_at(w + i, n - i, &cl);
            long k = tok_map_find(&t->vocab, w + i, cl);
            id = k < 0 ? -1 : t->vocab.ent[k].id;
        }
        x->sym[ns] = (sym){id, (int32_t)ns - 1, (int32_t)ns + 1, (uint32_t)i, (uint32_t)cl};
        ns++;
        i += cl;
    }
    x->sym[ns - 1].next = -1;
    x->nheap = 0;
    for (size_t i = 0; i + 1 < ns; i++)
        if (heap_push(x, (int32_t)i))
            return oom(e);
    while (x->nheap) {
        hent h = heap_pop(x);
        sym *l = &x->sym[h.pos], *r = &x->sym[h.right];
        if (!l->len || !r->len || l->next != h.right || l->id != h.lid || r->id != h.rid)
            continue; /* stale: one side has merged since */
        l->id = h.out;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0)
            x->sym[r->next].prev = h.pos;
        r->len = 0;
        if ((l->prev >= 0 && heap_push(x, l->prev)) || heap_push(x, h.pos))
            return oom(e);
    }
    for (int32_t i = 0; i >= 0; i = x->sym[i].next) {
        const sym *s = &x->sym[i];
        if (s->id >= 0) {
            if (grow((void **)out, cap, *no + 1, sizeof **out))
                return oom(e);
            (*out)[(*no)++] = s->id;
            continue;
        }
        char ch[2];
        const char *u = w + s->start;
        size_t ul = s->len;
        if (bytelevel) /* transformers.js falls back to the bytes of the mapped character */
            ul = tq_tok_byte_char((unsigned char)*u, ch), u = ch;
        if (unknown(x, u, ul, out, no, cap, e))
            return -1;
    }
    return 0;
}

static int model(enc *x, const piece *p, long section, tq_err *e)
{
    const char *w = x->text.s + p->off;
    size_t n = p->len;
    int32_t *ids;
    size_t k;
    if (n <= CACHE_MAX_WORD) {
        char key[CACHE_MAX_WORD + 1];
        memcpy(key, w, n);
        key[n] = (char)(p->bytelevel ? 1 : 0);
        long c = tok_map_find(&x->cache, key, n + 1);
        if (c < 0) {
            if (x->n_spans >= CACHE_MAX_WORDS) {
                tok_map_free(&x->cache);
                x->n_spans = x->n_cache_ids = 0;
            }
            size_t start = x->n_cache_ids;
            if (bpe_word(x, w, n, p->bytelevel, &x->cache_ids, &x->n_cache_ids, &x->cache_ids_cap, e))
                return -1;
            if (grow((void **)&x->spans, &x->spans_cap, x->n_spans + 1, sizeof *x->spans))
                return oom(e);
            int existed;
            if (tok_map_add(&x->cache, key, n + 1, (int32_t)x->n_spans, &existed) < 0)
                return oom(e);
            x->spans[x->n_spans++] = (struct span){(uint32_t)start, (uint32_t)(x->n_cache_ids - start)};
            c = tok_map_find(&x->cache, key, n + 1);
        }
        const struct span *sp = &x->spans[x->cache.ent[c].id];
        ids = x->cache_ids + sp->off;
        k = sp->n;
        for (size_t i = 0; i < k; i++)
            if (emit(x, ids[i], section))
                return oom(e);
        return 0;
    }
    int32_t *tmp = NULL;
    size_t nt = 0, cap = 0;
    int rc = bpe_word(x, w, n, p->bytelevel, &tmp, &nt, &cap, e);
    for (size_t i = 0; !rc && i < nt; i++)
        if (emit(x, tmp[i], section))
            rc = oom(e);
    free(tmp);
    return rc;
}

/* ------------------------------------------------------------------ the pipeline */
static int encode_section(enc *x, size_t off, size_t len, long section, int first, tq_err *e)
{
    const tq_tok *t = x->t;
    if (normalize(x, &off, &len, e))
        return -1;
    if (!len)
        return 0;
    plist parts = {0};
    int rc = 0;
    if (t->norm_trie.n) {
        rc = split_added(x, &t->norm_trie, off, len, &parts) ? oom(e) : 0;
    } else {
        rc = plist_add(&parts, off, len, -1, 0) ? oom(e) : 0;
    }
    for (size_t i = 0; !rc && i < parts.n; i++) {
        piece q = parts.p[i];
        if (q.added >= 0) {
            rc = emit(x, q.added, section) ? oom(e) : 0;
            continue;
        }
        if (pre_tokenize(x, q.off, q.len, first && i == 0, e)) {
            rc = -1;
            break;
        }
        for (size_t j = 0; !rc && j < x->a.n; j++)
            rc = model(x, &x->a.p[j], section, e);
    }
    free(parts.p);
    return rc;
}

static void enc_free(enc *x)
{
    tq_sb_free(&x->text);
    free(x->a.p);
    free(x->b.p);
    free(x->ids);
    pcre2_match_data_free(x->md);
    free(x->sym);
    free(x->heap);
    tq_sb_free(&x->mapped);
    tok_map_free(&x->cache);
    free(x->spans);
    free(x->cache_ids);
    free(x->best);
}

struct tq_tok_enc {
    enc x;
};

int tq_tok_enc_new(const tq_tok *t, tq_tok_enc **out, tq_err *e)
{
    tq_tok_enc *h = calloc(1, sizeof *h);
    if (!h || !(h->x.md = pcre2_match_data_create(1, NULL))) {
        free(h);
        return oom(e);
    }
    h->x.t = t;
    *out = h;
    return 0;
}

void tq_tok_enc_free(tq_tok_enc *h)
{
    if (h) {
        enc_free(&h->x);
        free(h);
    }
}

int tq_tok_enc_run(tq_tok_enc *h, const char *text, size_t len, int add_special, int32_t **ids, size_t *n, tq_err *e)
{
    enc *x = &h->x;
    const tq_tok *t = x->t;
    *ids = NULL;
    *n = 0;
    size_t bad_at = tok_utf8_check(text, len);
    if (bad_at != len)
        return tq_fail(e, TQ_EDATA, "input is not valid UTF-8 at byte %zu", bad_at);
    x->text.len = 0;
    x->n = 0;
    x->unk_section = -1;
    plist sec = {0};
    int rc = 0;
    if (tq_sb_put(&x->text, text, len)) {
        rc = oom(e);
        goto done;
    }
    if (add_special)
        for (size_t i = 0; i < t->n_post && t->post_single[i] >= 0; i++)
            if (emit(x, t->post_single[i], -2)) {
                rc = oom(e);
                goto done;
            }
    if (t->raw_trie.n ? split_added(x, &t->raw_trie, 0, len, &sec) : plist_add(&sec, 0, len, -1, 0)) {
        rc = oom(e);
        goto done;
    }
    for (size_t i = 0; !rc && i < sec.n; i++) {
        if (sec.p[i].added >= 0)
            rc = emit(x, sec.p[i].added, (long)i) ? oom(e) : 0;
        else
            rc = encode_section(x, sec.p[i].off, sec.p[i].len, (long)i, sec.p[i].off == 0, e);
    }
    if (!rc && add_special) {
        size_t i = 0;
        while (i < t->n_post && t->post_single[i] >= 0)
            i++;
        for (i++; i < t->n_post && !rc; i++)
            rc = emit(x, t->post_single[i], -2) ? oom(e) : 0;
    }
done:
    free(sec.p);
    if (!rc) {
        if (!(*ids = malloc((x->n ? x->n : 1) * sizeof **ids)))
            return oom(e);
        if (x->n)
            memcpy(*ids, x->ids, x->n * sizeof **ids);
        *n = x->n;
    }
    if (x->text.cap > (64u << 20)) /* do not keep a huge input's scratch around */
        tq_sb_free(&x->text);
    return rc;
}

int tq_tok_encode(const tq_tok *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                  tq_err *e)
{
    tq_tok_enc *h;
    *ids = NULL;
    *n = 0;
    if (tq_tok_enc_new(t, &h, e))
        return -1;
    int rc = tq_tok_enc_run(h, text, len, add_special, ids, n, e);
    tq_tok_enc_free(h);
    return rc;
}
