/* tokenizer/tok_util.c — buffers, hash maps, the added-token trie, UTF-8 and regex helpers. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* memmem(3) (a GNU/BSD extension, POSIX only since 2024): the first `nl` bytes of `ndl` in
 * `hay`, NULL when absent; an empty needle is found at `hay`. */
static const char *find_bytes(const char *hay, size_t hn, const char *ndl, size_t nl)
{
    if (nl == 0)
        return hay;
    while (nl <= hn) {
        const char *p = memchr(hay, ndl[0], hn - nl + 1);
        if (!p)
            return NULL;
        if (memcmp(p, ndl, nl) == 0)
            return p;
        hn -= (size_t)(p - hay) + 1;
        hay = p + 1;
    }
    return NULL;
}

const char *const tok_norm_names[] = {"NFC",      "NFD",   "NFKC",      "NFKD",        "Replace",
                                     "Prepend",  "Strip", "Lowercase", "StripAccents"};
const char *const tok_dec_names[] = {"ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip"};

int tok_grown(tq_err *e, const char *file, const char *where, const char *type, size_t in, size_t limit)
{
    return tq_fail(e, TQ_EDATA,
                   "%s: %s (%s): grows %zu bytes of text past %zu bytes; a step may make at most %d times its "
                   "chain's input plus %d bytes",
                   file, where, type, in, limit, TOK_GROWTH_FACTOR, TOK_GROWTH_SLACK);
}

/* ------------------------------------------------------------------ maps */
uint32_t tok_hash(const void *d, size_t n)
{
    const unsigned char *p = d;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h ^ (h >> 15);
}

long tok_map_find(const tok_map *m, const char *s, size_t n)
{
    if (!m->cap)
        return -1;
    uint32_t h = tok_hash(s, n);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        uint32_t k = m->slot[i];
        if (!k)
            return -1;
        const struct tok_ent *x = &m->ent[k - 1];
        if (x->hash == h && x->len == n && !memcmp(m->pool.s + x->off, s, n))
            return (long)(k - 1);
    }
}

static int map_grow(tok_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint32_t *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t k = 0; k < m->n; k++) {
        size_t i = m->ent[k].hash & (cap - 1);
        while (slot[i])
            i = (i + 1) & (cap - 1);
        slot[i] = (uint32_t)(k + 1);
    }
    free(m->slot);
    m->slot = slot;
    m->cap = cap;
    return 0;
}

long tok_map_add(tok_map *m, const char *s, size_t n, int32_t id, int *existed)
{
    long f = tok_map_find(m, s, n);
    *existed = f >= 0;
    if (f >= 0)
        return f;
    if ((m->n + 1) * 2 > m->cap && map_grow(m))
        return -1;
    if (m->n == m->ent_cap) {
        size_t c = m->ent_cap ? m->ent_cap * 2 : 1024;
        struct tok_ent *x = realloc(m->ent, c * sizeof *x);
        if (!x)
            return -1;
        m->ent = x;
        m->ent_cap = c;
    }
    if (m->pool.len + n >= UINT32_MAX || tq_sb_put(&m->pool, s, n) || tq_sb_put(&m->pool, "", 0))
        return -1;
    m->pool.len++; /* keep each string NUL-terminated in the pool */
    struct tok_ent *x = &m->ent[m->n];
    x->off = (uint32_t)(m->pool.len - n - 1);
    x->len = (uint32_t)n;
    x->id = id;
    x->hash = tok_hash(s, n);
    size_t i = x->hash & (m->cap - 1);
    while (m->slot[i])
        i = (i + 1) & (m->cap - 1);
    m->slot[i] = (uint32_t)(m->n + 1);
    return (long)m->n++;
}

void tok_map_free(tok_map *m)
{
    free(m->slot);
    free(m->ent);
    tq_sb_free(&m->pool);
    memset(m, 0, sizeof *m);
}

int tok_merges_find(const tok_merges *m, int32_t a, int32_t b, int32_t *rank, int32_t *out)
{
    if (!m->cap)
        return 0;
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    for (size_t i = (size_t)(h >> 20) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const struct tok_merge *x = &m->slot[i];
        if (x->key == k) {
            *rank = x->rank;
            *out = x->out;
            return 1;
        }
        if (!x->key)
            return 0;
    }
}

/* ------------------------------------------------------------------ UTF-8 */
/* Bytes of the longest prefix of p[0..n) that is the start of some valid sequence (1 for a
 * lone valid lead byte, up to 3); 0 if p[0] cannot start one. Follows the WHATWG decoder's
 * bounds on the second byte, so a "maximal subpart" is replaced by one U+FFFD. */
static size_t maximal_subpart(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    size_t i = 1;
    for (; i < need && i < n; i++) {
        unsigned b = p[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF))
            break;
    }
    return i;
}

int tok_utf8_sanitize(tq_sb *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0;
    uint32_t cp;
    while (i < n) {
        size_t l = p[i] < 0x80 ? 1 : tok_utf8_len(p + i, n - i, &cp);
        if (l) {
            i += l;
            continue;
        }
        if (tq_sb_put(out, s + run, i - run) || tq_sb_put(out, "\xEF\xBF\xBD", 3))
            return -1;
        size_t m = maximal_subpart(p + i, n - i);
        i += m ? m : 1;
        run = i;
    }
    return tq_sb_put(out, s + run, n - run);
}

size_t tok_utf8_incomplete_tail(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        size_t at = n - k;
        if ((p[at] & 0xC0) == 0x80)
            continue;
        size_t m = maximal_subpart(p + at, k);
        size_t need = p[at] >= 0xF0 ? 4 : p[at] >= 0xE0 ? 3 : 2;
        return p[at] >= 0xC2 && m == k && k < need ? k : 0;
    }
    return 0;
}

/* GPT-2: printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other
 * 68 take the characters U+0100, U+0101, ... in byte order. */
static uint32_t byte_cp(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE))
        return b;
    unsigned k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE)))
            k++;
    return 256 + k;
}

size_t tq_tok_byte_char(unsigned b, char out[2])
{
    uint32_t c = byte_cp(b);
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | (c >> 6));
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

int tok_char_byte(uint32_t cp)
{
    static int16_t inv[324];
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        int16_t tmp[324];
        for (unsigned i = 0; i < 324; i++)
            tmp[i] = -1;
        for (unsigned b = 0; b < 256; b++)
            tmp[byte_cp(b)] = (int16_t)b;
        memcpy(inv, tmp, sizeof inv); /* every thread writes the same bytes */
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return cp < 324 ? inv[cp] : -1;
}

/* ------------------------------------------------------------------ regexes */
/* ECMAScript's \s (WhiteSpace and LineTerminator), which transformers.js matches with. */
#define JS_SPACE "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

/* Rewrites a tokenizer.json regex to PCRE2 with transformers.js' meaning: its contraction
 * group without (?i:), \s as ECMAScript white space, \d and \w as ASCII. */
static char *js_rewrite(const char *src, size_t len)
{
    static const char ci[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
    static const char ci_js[] = "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))";
    tq_sb b = {0};
    int in_class = 0;
    for (size_t i = 0; i < len; i++) {
        const char *rep = NULL;
        if (!in_class && len - i >= sizeof ci - 1 && !memcmp(src + i, ci, sizeof ci - 1)) {
            if (tq_sb_put(&b, ci_js, sizeof ci_js - 1))
                goto oom;
            i += sizeof ci - 2;
            continue;
        }
        char c = src[i];
        if (c == '\\' && i + 1 < len) {
            char d = src[i + 1];
            switch (d) {
            case 's': rep = in_class ? JS_SPACE : "[" JS_SPACE "]"; break;
            case 'S': rep = in_class ? NULL : "[^" JS_SPACE "]"; break;
            case 'd': rep = in_class ? "0-9" : "[0-9]"; break;
            case 'D': rep = in_class ? NULL : "[^0-9]"; break;
            case 'w': rep = in_class ? "A-Za-z0-9_" : "[A-Za-z0-9_]"; break;
            case 'W': rep = in_class ? NULL : "[^A-Za-z0-9_]"; break;
            default: break;
            }
            if (rep) {
                if (tq_sb_put(&b, rep, strlen(rep)))
                    goto oom;
            } else if (tq_sb_put(&b, src + i, 2)) {
                goto oom;
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            if (tq_sb_put(&b, "[", 1))
                goto oom;
            if (i + 1 < len && src[i + 1] == '^') {
                if (tq_sb_put(&b, "^", 1))
                    goto oom;
                i++;
            }
            if (i + 1 < len && src[i + 1] == ']') { /* a leading ']' is literal in PCRE */
                if (tq_sb_put(&b, "\\]", 2))
                    goto oom;
                i++;
            }
            continue;
        }
        if (in_class && c == ']')
            in_class = 0;
        if (tq_sb_put(&b, &c, 1))
            goto oom;
    }
    if (tq_sb_put(&b, "", 0))
        goto oom;
    return b.s;
oom:
    tq_sb_free(&b);
    return NULL;
}

/* The first construct of a tokenizer.json regex that only PCRE2 reads: ECMAScript (the
 * RegExp transformers.js compiles patterns with, whose behaviour this library follows) refuses
 * every one of them, and Oniguruma (the Rust tokenizers library's engine) refuses them or gives
 * them another meaning. PCRE2 would take them as orders: (*LIMIT_MATCH=1) and the other
 * start-of-pattern options change how matching runs, (*VERB)s steer backtracking, (?C) calls
 * out, \C splits a UTF-8 character. NULL when there is none; else what it is, at byte *at. */
static const char *pcre2_only(const char *s, size_t n, size_t *at)
{
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i], d = i + 1 < n ? s[i + 1] : 0, f = i + 2 < n ? s[i + 2] : 0;
        *at = i;
        if (c == '\\') {
            if (d == 'Q' || d == 'E')
                return "\\Q...\\E quoting";
            if (d == 'C')
                return "\\C (one code unit)";
            i++;
            continue;
        }
        if (in_class) {
            if (c == '[' && d == ':') { /* [:alpha:] inside a class */
                const char *e = find_bytes(s + i + 2, n - i - 2, ":]", 2);
                if (e)
                    i = (size_t)(e - s) + 1;
            } else if (c == ']') {
                in_class = 0;
            }
            continue;
        }
        if (c == '[') {
            in_class = 1;
            if (d == '^')
                i++, d = f;
            if (d == ']') /* a leading ']' is literal */
                i++;
            continue;
        }
        if (c != '(')
            continue;
        if (d == '*')
            return "a (*VERB) or (*OPTION)";
        if (d != '?')
            continue;
        if (f == 'C')
            return "a (?C) callout";
        if (f == '|')
            return "a (?|...) branch reset";
        if (f == 'R' || f == '&' || (f >= '0' && f <= '9') ||
            ((f == '+' || f == '-') && i + 3 < n && s[i + 3] >= '0' && s[i + 3] <= '9'))
            return "a (?R), (?N) or (?&NAME) subroutine call";
        if (f == 'P')
            return "a (?P...) Python-style group";
        if (f == '^')
            return "a (?^) option reset";
        if (f == '*')
            return "a (?*...) non-atomic assertion";
    }
    return NULL;
}

pcre2_code *tok_regex_compile(const char *src, size_t len, const char *field, tq_err *e)
{
    size_t at;
    const char *what = pcre2_only(src, len, &at);
    if (what) {
        tq_fail(e, TQ_EDATA,
                "%s: '%.80s%s' has %s at byte %zu, PCRE2-only syntax that the tokenizers libraries' regex "
                "engines (ECMAScript, Oniguruma) do not accept",
                field, src, len > 80 ? "..." : "", what, at);
        return NULL;
    }
    char *pat = js_rewrite(src, len);
    if (!pat) {
        tq_fail(e, TQ_ENOMEM, "out of memory");
        return NULL;
    }
    int ec;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &ec, &off, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        tq_fail(e, TQ_EDATA, "%s: invalid regex: %s", field, (const char *)msg);
        return NULL;
    }
    /* JIT only makes matching faster; where it is unavailable the interpreter gives the same
     * matches. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

int tok_pattern_compile(tok_pattern *p, const char *src, size_t len, int is_regex, const char *field, tq_err *e)
{
    memset(p, 0, sizeof *p);
    if (is_regex)
        return (p->re = tok_regex_compile(src, len, field, e)) ? 0 : -1;
    if (!len)
        return tq_fail(e, TQ_EDATA, "%s: an empty String pattern", field);
    if (!(p->lit = malloc(len)))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    memcpy(p->lit, src, len);
    p->lit_len = len;
    return 0;
}

void tok_pattern_free(tok_pattern *p)
{
    free(p->lit);
    pcre2_code_free(p->re);
    memset(p, 0, sizeof *p);
}

int tok_pattern_next(const tok_pattern *p, pcre2_match_data *md, const char *s, size_t n, size_t from, size_t *ms,
                     size_t *me, tq_err *e)
{
    if (p->lit) {
        const char *f = from < n ? find_bytes(s + from, n - from, p->lit, p->lit_len) : NULL;
        if (!f)
            return 1;
        *ms = (size_t)(f - s);
        *me = *ms + p->lit_len;
        return 0;
    }
    for (size_t at = from; at <= n;) {
        int rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            return 1;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return tq_fail(e, TQ_EDATA, "regex match at byte %zu failed: %s", at, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 0;
        }
        /* An empty match splits nothing: look again one character further on. */
        at = ov[0] + 1;
        while (at < n && ((unsigned char)s[at] & 0xC0) == 0x80)
            at++;
    }
    return 1;
}
