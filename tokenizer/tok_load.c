/* tokenizer/tok_load.c — reads tokenizer.json (and tokenizer_config.json) as hostile input. */
#include "tokenizer/tok_internal.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JSON_BYTES (512u << 20)
#define MAX_CONFIG_BYTES (64u << 20)
#define MAX_STEPS 64 /* normalizers, pre-tokenizers, decoders, template items */

/* A field path for messages: "pre_tokenizer.pretokenizers[1].pattern.Regex". */
typedef struct path {
    char s[256];
} path;

static const path *sub(path *out, const path *in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static const path *sub(path *out, const path *in, const char *fmt, ...)
{
    char tail[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    snprintf(out->s, sizeof out->s, "%s%s%s", in->s, in->s[0] && tail[0] != '[' ? "." : "", tail);
    return out;
}

static int bad(tq_err *e, const path *p, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(tq_err *e, const path *p, const char *fmt, ...)
{
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return tq_fail(e, TQ_EDATA, "%s: %s", p->s, m);
}

static int unsup(tq_err *e, const path *p, const char *what, const char *v)
{
    return tq_fail(e, TQ_EUNSUP, "%s: %s '%.80s' is not supported", p->s, what, v);
}

static const cJSON *item(const cJSON *o, const char *k)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static int is_absent(const cJSON *v)
{
    return !v || cJSON_IsNull(v);
}

/* Optional boolean (absent or null: def). */
static int get_bool(const cJSON *o, const char *k, int def, int *out, const path *p, tq_err *e)
{
    const cJSON *v = item(o, k);
    if (is_absent(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) {
        path q;
        sub(&q, p, "%s", k);
        return bad(e, &q, "must be true or false");
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Required (or, with opt, optional) string; valid UTF-8. */
static int get_str(const cJSON *o, const char *k, int opt, const char **out, const path *p, tq_err *e)
{
    const cJSON *v = item(o, k);
    path q;
    sub(&q, p, "%s", k);
    if (is_absent(v) && opt) {
        *out = NULL;
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring)
        return bad(e, &q, opt ? "must be a string or null" : "missing, or not a string");
    size_t n = strlen(v->valuestring);
    if (tok_utf8_check(v->valuestring, n) != n)
        return bad(e, &q, "is not valid UTF-8");
    *out = v->valuestring;
    return 0;
}

static int get_int(const cJSON *v, long lo, long hi, long *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
        v->valuedouble != (double)(long)v->valuedouble)
        return -1;
    *out = (long)v->valuedouble;
    return 0;
}

static const char *type_of(const cJSON *o, const path *p, tq_err *e)
{
    const char *t;
    return get_str(o, "type", 0, &t, p, e) ? NULL : t;
}

/* ------------------------------------------------------------------ trie */
static int trie_node(tok_trie *t, uint8_t byte)
{
    if (t->n == t->cap) {
        size_t c = t->cap ? t->cap * 2 : 256;
        struct tok_tnode *x = c > (size_t)INT32_MAX ? NULL : realloc(t->node, c * sizeof *x);
        if (!x)
            return -1;
        t->node = x;
        t->cap = c;
    }
    t->node[t->n] = (struct tok_tnode){.child = -1, .sibling = -1, .token = -1, .fail = 0, .out = -1, .plain = -1,
                                       .byte = byte};
    return (int32_t)t->n++;
}

/* Adds s[0..n), written backwards, as token. */
static int trie_add(tok_trie *t, const char *s, size_t n, int32_t token)
{
    if (!t->n) {
        if (trie_node(t, 0) < 0)
            return -1;
        memset(t->root, 0, sizeof t->root);
    }
    int32_t at = 0;
    for (size_t i = n; i-- > 0;) {
        uint8_t b = (uint8_t)s[i];
        int32_t k = at ? t->node[at].child : t->root[b] ? t->root[b] : -1;
        if (at)
            while (k >= 0 && t->node[k].byte != b)
                k = t->node[k].sibling;
        if (k < 0) {
            if ((k = trie_node(t, b)) < 0)
                return -1;
            if (at) {
                t->node[k].sibling = t->node[at].child;
                t->node[at].child = k;
            } else {
                t->root[b] = k;
            }
        }
        at = k;
    }
    if (t->node[at].token < 0)
        t->node[at].token = token;
    return 0;
}

/* The Aho-Corasick links, breadth first (a node's fail link is shallower than the node, so
 * it is complete when the node is reached). */
static int trie_build(tok_trie *t, const tok_added *added)
{
    if (!t->n)
        return 0;
    int32_t *queue = malloc(t->n * sizeof *queue);
    if (!queue)
        return -1;
    size_t head = 0, tail = 0;
    for (unsigned b = 0; b < 256; b++)
        if (t->root[b])
            queue[tail++] = t->root[b];
    while (head < tail) {
        int32_t v = queue[head++];
        struct tok_tnode *nv = &t->node[v];
        int32_t f = nv->fail;
        nv->out = nv->token >= 0 ? v : t->node[f].out;
        nv->plain = nv->token >= 0 && !added[nv->token].single_word ? v : t->node[f].plain;
        for (int32_t c = nv->child; c >= 0; c = t->node[c].sibling) {
            t->node[c].fail = tok_trie_step(t, f, t->node[c].byte);
            queue[tail++] = c;
        }
    }
    free(queue);
    return 0;
}

/* ------------------------------------------------------------------ model */
static int load_vocab(tq_tok *t, const cJSON *vocab, const path *mp, tq_err *e)
{
    path p;
    sub(&p, mp, "vocab");
    if (!cJSON_IsObject(vocab))
        return bad(e, &p, "missing, or not an object of token: id");
    long max = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab)
    {
        long id;
        if (get_int(it, 0, TOK_MAX_ID - 1, &id))
            return bad(e, &p, "token '%.60s' has id that is not an integer in [0, %d)", it->string, TOK_MAX_ID);
        size_t n = strlen(it->string);
        if (tok_utf8_check(it->string, n) != n)
            return bad(e, &p, "a token is not valid UTF-8");
        if (!n)
            return bad(e, &p, "an empty token");
        int existed;
        if (tok_map_add(&t->vocab, it->string, n, (int32_t)id, &existed) < 0)
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        if (existed)
            return bad(e, &p, "token '%.60s' is listed twice", it->string);
        if (id > max)
            max = id;
    }
    t->n_ids = (int32_t)(max + 1);
    return 0;
}

/* id tables over vocabulary and added tokens; called after both are read. */
static int index_ids(tq_tok *t, tq_err *e)
{
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id >= t->n_ids)
            t->n_ids = t->added[i].id + 1;
    size_t n = t->n_ids ? (size_t)t->n_ids : 1;
    if (!(t->id_ent = malloc(n * sizeof *t->id_ent)) || !(t->id_added = malloc(n * sizeof *t->id_added)))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    memset(t->id_ent, 0xff, n * sizeof *t->id_ent);
    memset(t->id_added, 0xff, n * sizeof *t->id_added);
    for (size_t k = 0; k < t->vocab.n; k++) {
        int32_t id = t->vocab.ent[k].id;
        if (t->id_ent[id] >= 0) {
            const struct tok_ent *o = &t->vocab.ent[t->id_ent[id]];
            return tq_fail(e, TQ_EDATA, "model.vocab: id %d is given to both '%.60s' and '%.60s'", (int)id,
                           t->vocab.pool.s + o->off, t->vocab.pool.s + t->vocab.ent[k].off);
        }
        t->id_ent[id] = (int32_t)k;
    }
    return 0;
}

static int32_t vocab_id(const tq_tok *t, const char *s, size_t n)
{
    long k = tok_map_find(&t->vocab, s, n);
    return k < 0 ? -1 : t->vocab.ent[k].id;
}

static int merge_put(tok_merges *m, int32_t a, int32_t b, int32_t rank, int32_t out)
{
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & (m->cap - 1);
    while (m->slot[i].key && m->slot[i].key != k)
        i = (i + 1) & (m->cap - 1);
    if (!m->slot[i].key)
        m->n++;
    /* A pair listed twice keeps its later rank, as both tokenizers implementations do. */
    m->slot[i] = (struct tok_merge){k, rank, out};
    return 0;
}

static int load_merges(tq_tok *t, const cJSON *merges, const path *mp, tq_err *e)
{
    path p, q;
    sub(&p, mp, "merges");
    if (is_absent(merges))
        return 0;
    if (!cJSON_IsArray(merges))
        return bad(e, &p, "must be an array");
    size_t n = (size_t)cJSON_GetArraySize(merges);
    if (n >= (size_t)INT32_MAX)
        return bad(e, &p, "too many merges");
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    tok_merges *m = &t->merges;
    m->cap = cap;
    if (!(m->slot = calloc(cap, sizeof *m->slot)))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    tq_sb cat = {0};
    const cJSON *it;
    int32_t rank = 0;
    int rc = 0;
    cJSON_ArrayForEach(it, merges)
    {
        sub(&q, &p, "[%d]", (int)rank);
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(it)) {
            const char *s = it->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ') || sp == s || !sp[1]) {
                rc = bad(e, &q, "'%.80s' is not two tokens separated by one space", s);
                break;
            }
            a = s, la = (size_t)(sp - s), b = sp + 1, lb = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            a = it->child->valuestring, la = strlen(a), b = it->child->next->valuestring, lb = strlen(b);
        } else {
            rc = bad(e, &q, "must be \"A B\" or [\"A\", \"B\"]");
            break;
        }
        int32_t ia = vocab_id(t, a, la), ib = vocab_id(t, b, lb), io;
        cat.len = 0;
        if (tq_sb_put(&cat, a, la) || tq_sb_put(&cat, b, lb)) {
            rc = tq_fail(e, TQ_ENOMEM, "out of memory");
            break;
        }
        if (ia < 0 || ib < 0) {
            rc = bad(e, &q, "'%.*s' is not in model.vocab", (int)(ia < 0 ? la : lb) > 80 ? 80 : (int)(ia < 0 ? la : lb),
                     ia < 0 ? a : b);
            break;
        }
        if ((io = vocab_id(t, cat.s, cat.len)) < 0) {
            rc = bad(e, &q, "the merged token '%.80s' is not in model.vocab", cat.s);
            break;
        }
        merge_put(m, ia, ib, rank, io);
        rank++;
    }
    tq_sb_free(&cat);
    return rc;
}

static int load_model(tq_tok *t, const cJSON *model, tq_err *e)
{
    path mp = {"model"}, q;
    if (!cJSON_IsObject(model))
        return bad(e, &mp, "missing, or not an object");
    const cJSON *ty = item(model, "type");
    if (!is_absent(ty)) {
        const char *s = type_of(model, &mp, e);
        if (!s)
            return -1;
        if (strcmp(s, "BPE"))
            return unsup(e, sub(&q, &mp, "type"), "model type", s);
    } else if (!item(model, "merges")) {
        return bad(e, sub(&q, &mp, "type"), "missing (and no merges to infer BPE from)");
    }
    const char *s;
    const cJSON *d = item(model, "dropout");
    if (!is_absent(d) && !(cJSON_IsNumber(d) && d->valuedouble == 0))
        return unsup(e, sub(&q, &mp, "dropout"), "dropout", "non-zero");
    if (get_str(model, "continuing_subword_prefix", 1, &s, &mp, e))
        return -1;
    if (s && *s)
        return unsup(e, sub(&q, &mp, "continuing_subword_prefix"), "prefix", s);
    if (get_str(model, "end_of_word_suffix", 1, &s, &mp, e))
        return -1;
    if (s && *s)
        return unsup(e, sub(&q, &mp, "end_of_word_suffix"), "suffix", s);
    if (get_bool(model, "byte_fallback", 0, &t->byte_fallback, &mp, e) ||
        get_bool(model, "fuse_unk", 0, &t->fuse_unk, &mp, e) ||
        get_bool(model, "ignore_merges", 0, &t->ignore_merges, &mp, e) ||
        load_vocab(t, item(model, "vocab"), &mp, e) || load_merges(t, item(model, "merges"), &mp, e))
        return -1;
    return 0;
}

static int load_unk(tq_tok *t, const cJSON *model, tq_err *e)
{
    path mp = {"model"}, q;
    const char *s;
    t->unk = -1;
    if (get_str(model, "unk_token", 1, &s, &mp, e))
        return -1;
    if (s && (t->unk = tq_tok_token_id(t, s)) < 0)
        return bad(e, sub(&q, &mp, "unk_token"), "'%.80s' is not a token", s);
    for (unsigned b = 0; b < 256; b++) {
        char hex[8], ch[2];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_tok[b] = vocab_id(t, hex, 6);
        t->level_tok[b] = vocab_id(t, ch, tq_tok_byte_char(b, ch));
    }
    return 0;
}

/* ------------------------------------------------------------------ added tokens */
static int load_added(tq_tok *t, const cJSON *arr, tq_err *e)
{
    path p = {"added_tokens"}, q;
    if (is_absent(arr))
        return 0;
    if (!cJSON_IsArray(arr))
        return bad(e, &p, "must be an array");
    size_t n = (size_t)cJSON_GetArraySize(arr);
    if (n > TOK_MAX_ID)
        return bad(e, &p, "too many added tokens");
    if (n && !(t->added = calloc(n, sizeof *t->added)))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    tok_map seen = {0}, ids = {0}; /* content -> index, id (4 bytes) -> index */
    const cJSON *it;
    int rc = 0;
    cJSON_ArrayForEach(it, arr)
    {
        size_t i = t->n_added;
        tok_added *a = &t->added[i];
        sub(&q, &p, "[%zu]", i);
        const char *c;
        long id;
        if (!cJSON_IsObject(it)) {
            rc = bad(e, &q, "must be an object");
            break;
        }
        if (get_str(it, "content", 0, &c, &q, e) || get_bool(it, "lstrip", 0, &a->lstrip, &q, e) ||
            get_bool(it, "rstrip", 0, &a->rstrip, &q, e) || get_bool(it, "single_word", 0, &a->single_word, &q, e) ||
            get_bool(it, "normalized", 0, &a->normalized, &q, e) || get_bool(it, "special", 0, &a->special, &q, e)) {
            rc = -1;
            break;
        }
        if (get_int(item(it, "id"), 0, TOK_MAX_ID - 1, &id)) {
            rc = bad(e, &q, "id must be an integer in [0, %d)", TOK_MAX_ID);
            break;
        }
        if (!*c) {
            rc = bad(e, &q, "content is empty");
            break;
        }
        a->len = strlen(c);
        a->id = (int32_t)id;
        if (!(a->content = tq_strdup(c, e))) {
            rc = -1;
            break;
        }
        t->n_added++;
        int existed;
        long k = tok_map_add(&seen, c, a->len, (int32_t)i, &existed);
        if (k < 0) {
            rc = tq_fail(e, TQ_ENOMEM, "out of memory");
            break;
        }
        if (existed) {
            rc = bad(e, &q, "content '%.80s' is already added_tokens[%d]", c, (int)seen.ent[k].id);
            break;
        }
        unsigned char key[4] = {(unsigned char)(id >> 24), (unsigned char)(id >> 16), (unsigned char)(id >> 8),
                                (unsigned char)id};
        if ((k = tok_map_add(&ids, (const char *)key, sizeof key, (int32_t)i, &existed)) < 0) {
            rc = tq_fail(e, TQ_ENOMEM, "out of memory");
            break;
        }
        if (existed) {
            size_t j = (size_t)ids.ent[k].id;
            rc = bad(e, &q, "id %ld is already added_tokens[%zu] ('%.80s')", id, j, t->added[j].content);
            break;
        }
    }
    tok_map_free(&seen);
    tok_map_free(&ids);
    return rc;
}

/* After the vocabulary: added tokens take their ids in the string map, and the tries. */
static int index_added(tq_tok *t, tq_err *e)
{
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        t->id_added[a->id] = (int32_t)i;
        int existed;
        long k = tok_map_add(&t->vocab, a->content, a->len, a->id, &existed);
        if (k < 0 || trie_add(a->normalized ? &t->norm_trie : &t->raw_trie, a->content, a->len, (int32_t)i))
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        t->vocab.ent[k].id = a->id; /* an added token's id wins, as in transformers.js */
    }
    if (trie_build(&t->raw_trie, t->added) || trie_build(&t->norm_trie, t->added))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    return 0;
}

/* ------------------------------------------------------------------ pipeline steps */
static int load_pattern(tok_pattern *pt, const cJSON *o, const path *p, tq_err *e)
{
    path q, r;
    sub(&q, p, "pattern");
    const cJSON *pat = item(o, "pattern");
    const cJSON *s = item(pat, "String"), *re = item(pat, "Regex");
    if (cJSON_IsString(s) && !re) {
        size_t n = strlen(s->valuestring);
        if (tok_utf8_check(s->valuestring, n) != n)
            return bad(e, sub(&r, &q, "String"), "is not valid UTF-8");
        return tok_pattern_compile(pt, s->valuestring, n, 0, sub(&r, &q, "String")->s, e);
    }
    if (cJSON_IsString(re) && !s) {
        size_t n = strlen(re->valuestring);
        if (tok_utf8_check(re->valuestring, n) != n)
            return bad(e, sub(&r, &q, "Regex"), "is not valid UTF-8");
        return tok_pattern_compile(pt, re->valuestring, n, 1, sub(&r, &q, "Regex")->s, e);
    }
    return bad(e, &q, "must be {\"String\": ...} or {\"Regex\": ...}");
}

static int get_char(const cJSON *o, const char *k, const char *def, char out[8], size_t *len, const path *p,
                    tq_err *e)
{
    const char *s;
    if (get_str(o, k, 1, &s, p, e))
        return -1;
    if (!s)
        s = def;
    uint32_t cp;
    size_t n = strlen(s);
    if (!n || tok_utf8_len((const unsigned char *)s, n, &cp) != n) {
        path q;
        return bad(e, sub(&q, p, "%s", k), "must be one character");
    }
    memcpy(out, s, n);
    *len = n;
    return 0;
}

static int prepend_scheme(const cJSON *o, int *out, const path *p, tq_err *e)
{
    const char *s;
    int aps;
    if (get_str(o, "prepend_scheme", 1, &s, p, e) || get_bool(o, "add_prefix_space", 1, &aps, p, e))
        return -1;
    if (!s) {
        *out = aps ? PREPEND_ALWAYS : PREPEND_NEVER;
        return 0;
    }
    path q;
    sub(&q, p, "prepend_scheme");
    if (!strcmp(s, "always"))
        *out = PREPEND_ALWAYS;
    else if (!strcmp(s, "first"))
        *out = PREPEND_FIRST;
    else if (!strcmp(s, "never"))
        *out = PREPEND_NEVER;
    else
        return unsup(e, &q, "prepend scheme", s);
    return 0;
}

typedef int (*step_fn)(tq_tok *t, const cJSON *o, const char *type, const path *p, tq_err *e);

/* Loads o (null, one step, or a Sequence of steps under seq_key) through fn. */
static int load_steps(tq_tok *t, const cJSON *o, const char *seq_key, step_fn fn, const path *p, int depth, tq_err *e)
{
    if (is_absent(o))
        return 0;
    if (!cJSON_IsObject(o))
        return bad(e, p, "must be an object or null");
    if (depth > 8)
        return bad(e, p, "Sequences nested too deeply");
    const char *type = type_of(o, p, e);
    if (!type)
        return -1;
    if (strcmp(type, "Sequence"))
        return fn(t, o, type, p, e);
    path q, r;
    sub(&q, p, "%s", seq_key);
    const cJSON *arr = item(o, seq_key);
    if (!cJSON_IsArray(arr))
        return bad(e, &q, "must be an array");
    if (cJSON_GetArraySize(arr) > MAX_STEPS)
        return bad(e, &q, "more than %d steps", MAX_STEPS);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        sub(&r, &q, "[%d]", i++);
        if (load_steps(t, it, seq_key, fn, &r, depth + 1, e))
            return -1;
    }
    return 0;
}

static int norm_step(tq_tok *t, const cJSON *o, const char *type, const path *p, tq_err *e)
{
    static const char *const simple[] = {"NFC", "NFD", "NFKC", "NFKD"};
    if (t->n_norm >= MAX_STEPS)
        return bad(e, p, "more than %d normalizers", MAX_STEPS);
    tok_norm *n = &t->norm[t->n_norm];
    memset(n, 0, sizeof *n);
    snprintf(n->where, sizeof n->where, "%s", p->s);
    const char *s;
    for (int k = 0; k < 4; k++)
        if (!strcmp(type, simple[k])) {
            n->kind = N_NFC + k;
            t->n_norm++;
            return 0;
        }
    if (!strcmp(type, "Lowercase")) {
        n->kind = N_LOWER;
    } else if (!strcmp(type, "StripAccents")) {
        n->kind = N_STRIP_ACCENTS;
    } else if (!strcmp(type, "Strip")) {
        n->kind = N_STRIP;
        if (get_bool(o, "strip_left", 1, &n->left, p, e) || get_bool(o, "strip_right", 1, &n->right, p, e))
            return -1;
    } else if (!strcmp(type, "Prepend") || !strcmp(type, "Replace")) {
        int rep = type[0] == 'R';
        n->kind = rep ? N_REPLACE : N_PREPEND;
        if (get_str(o, rep ? "content" : "prepend", 0, &s, p, e) || !(n->content = tq_strdup(s, e)))
            return -1;
        n->content_len = strlen(s);
        t->n_norm++; /* owned now: freed with the tokenizer even if the pattern fails */
        return rep ? load_pattern(&n->pat, o, p, e) : 0;
    } else {
        path q;
        return unsup(e, sub(&q, p, "type"), "normalizer type", type);
    }
    t->n_norm++;
    return 0;
}

static int pre_step(tq_tok *t, const cJSON *o, const char *type, const path *p, tq_err *e)
{
    if (t->n_pre >= MAX_STEPS)
        return bad(e, p, "more than %d pre-tokenizers", MAX_STEPS);
    if (t->n_pre && t->pre[t->n_pre - 1].kind == P_BYTELEVEL)
        return unsup(e, p, "pre-tokenizer after ByteLevel", type);
    tok_pre *x = &t->pre[t->n_pre];
    memset(x, 0, sizeof *x);
    path q;
    if (!strcmp(type, "Split")) {
        static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        const char *b;
        x->kind = P_SPLIT;
        if (get_str(o, "behavior", 0, &b, p, e) || get_bool(o, "invert", 0, &x->invert, p, e))
            return -1;
        x->behavior = -1;
        for (int k = 0; k < 5; k++)
            if (!strcmp(b, names[k]))
                x->behavior = k;
        if (x->behavior < 0)
            return unsup(e, sub(&q, p, "behavior"), "split behavior", b);
        t->n_pre++;
        return load_pattern(&x->pat, o, p, e);
    } else if (!strcmp(type, "ByteLevel")) {
        x->kind = P_BYTELEVEL;
        if (get_bool(o, "add_prefix_space", 0, &x->add_prefix_space, p, e) ||
            get_bool(o, "use_regex", 1, &x->use_regex, p, e))
            return -1;
        if (x->use_regex && !t->gpt2_re) {
            static const char gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
            if (!(t->gpt2_re = tok_regex_compile(gpt2, sizeof gpt2 - 1, p->s, e)))
                return -1;
        }
    } else if (!strcmp(type, "Metaspace")) {
        x->kind = P_METASPACE;
        if (get_char(o, "replacement", "\xE2\x96\x81", x->repl, &x->repl_len, p, e) ||
            prepend_scheme(o, &x->prepend, p, e) || get_bool(o, "split", 1, &x->split, p, e))
            return -1;
    } else if (!strcmp(type, "WhitespaceSplit")) {
        x->kind = P_WSPLIT;
    } else if (!strcmp(type, "Whitespace")) {
        x->kind = P_WHITESPACE;
        static const char ws[] = "\\w+|[^\\w\\s]+";
        t->n_pre++;
        return tok_pattern_compile(&x->pat, ws, sizeof ws - 1, 1, p->s, e);
    } else if (!strcmp(type, "Digits")) {
        x->kind = P_DIGITS;
        if (get_bool(o, "individual_digits", 0, &x->individual, p, e))
            return -1;
    } else {
        return unsup(e, sub(&q, p, "type"), "pre-tokenizer type", type);
    }
    t->n_pre++;
    return 0;
}

static int dec_step(tq_tok *t, const cJSON *o, const char *type, const path *p, tq_err *e)
{
    if (t->n_dec >= MAX_STEPS)
        return bad(e, p, "more than %d decoders", MAX_STEPS);
    tok_dec *d = &t->dec[t->n_dec];
    memset(d, 0, sizeof *d);
    snprintf(d->where, sizeof d->where, "%s", p->s);
    path q;
    const char *s;
    if (!strcmp(type, "ByteLevel")) {
        d->kind = D_BYTELEVEL;
    } else if (!strcmp(type, "ByteFallback")) {
        d->kind = D_BYTEFALLBACK;
    } else if (!strcmp(type, "Fuse")) {
        d->kind = D_FUSE;
    } else if (!strcmp(type, "Metaspace")) {
        int scheme;
        d->kind = D_METASPACE;
        if (get_char(o, "replacement", "\xE2\x96\x81", d->repl, &d->repl_len, p, e) || prepend_scheme(o, &scheme, p, e))
            return -1;
        d->prefix = scheme != PREPEND_NEVER;
    } else if (!strcmp(type, "Replace")) {
        d->kind = D_REPLACE;
        if (get_str(o, "content", 0, &s, p, e) || !(d->content = tq_strdup(s, e)))
            return -1;
        d->content_len = strlen(s);
        t->n_dec++;
        return load_pattern(&d->pat, o, p, e);
    } else if (!strcmp(type, "Strip")) {
        d->kind = D_STRIP;
        char c[8];
        size_t cl;
        if (get_char(o, "content", " ", c, &cl, p, e))
            return -1;
        if (get_int(item(o, "start"), 0, 1 << 20, &d->start) || get_int(item(o, "stop"), 0, 1 << 20, &d->stop))
            return bad(e, p, "start and stop must be integers in [0, %d]", 1 << 20);
        if (!(d->content = malloc(cl + 1)))
            return tq_fail(e, TQ_ENOMEM, "out of memory");
        memcpy(d->content, c, cl);
        d->content[cl] = 0;
        d->content_len = cl;
    } else {
        return unsup(e, sub(&q, p, "type"), "decoder type", type);
    }
    t->n_dec++;
    return 0;
}

/* The single-sequence template as ids, -1 standing for the text's own ids. */
static int post_push(tq_tok *t, int32_t id, const path *p, tq_err *e)
{
    if (t->n_post >= MAX_STEPS)
        return bad(e, p, "more than %d template items", MAX_STEPS);
    t->post_single[t->n_post++] = id;
    return 0;
}

static int post_step(tq_tok *t, const cJSON *o, const char *type, const path *p, tq_err *e)
{
    path q, r, s2;
    if (!strcmp(type, "ByteLevel"))
        return 0;
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        long ids[2];
        const char *keys[2] = {"cls", "sep"};
        for (int k = 0; k < 2; k++) {
            const cJSON *v = item(o, keys[k]);
            sub(&q, p, "%s", keys[k]);
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !cJSON_IsString(v->child) ||
                get_int(v->child->next, 0, TOK_MAX_ID - 1, &ids[k]))
                return bad(e, &q, "must be [\"TOKEN\", id]");
        }
        if (t->n_post)
            return unsup(e, p, "post-processor", "a second template");
        return post_push(t, (int32_t)ids[0], p, e) || post_push(t, -1, p, e) || post_push(t, (int32_t)ids[1], p, e);
    }
    if (strcmp(type, "TemplateProcessing"))
        return unsup(e, sub(&q, p, "type"), "post-processor type", type);
    if (t->n_post)
        return unsup(e, p, "post-processor", "a second template");
    const cJSON *single = item(o, "single"), *st = item(o, "special_tokens"), *it;
    sub(&q, p, "single");
    if (!cJSON_IsArray(single))
        return bad(e, &q, "must be an array");
    int i = 0, seq = 0;
    cJSON_ArrayForEach(it, single)
    {
        sub(&r, &q, "[%d]", i++);
        const cJSON *sp = item(it, "SpecialToken"), *sq = item(it, "Sequence");
        if (sq && !sp) {
            const char *id;
            if (get_str(sq, "id", 0, &id, &r, e))
                return -1;
            if (strcmp(id, "A"))
                return bad(e, &r, "a single-sequence template may only hold sequence A");
            if (seq++)
                return bad(e, &r, "sequence A appears twice");
            if (post_push(t, -1, &r, e))
                return -1;
            continue;
        }
        if (!sp || sq)
            return bad(e, &r, "must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
        const char *name;
        if (get_str(sp, "id", 0, &name, &r, e))
            return -1;
        const cJSON *def = item(st, name), *ids = item(def, "ids"), *x;
        if (cJSON_IsArray(ids)) {
            int k = 0;
            cJSON_ArrayForEach(x, ids)
            {
                long v;
                sub(&s2, p, "special_tokens.%.60s.ids[%d]", name, k++);
                if (get_int(x, 0, TOK_MAX_ID - 1, &v))
                    return bad(e, &s2, "must be a token id");
                if (post_push(t, (int32_t)v, &s2, e))
                    return -1;
            }
        } else {
            int32_t v = tq_tok_token_id(t, name);
            if (v < 0)
                return bad(e, &r, "'%.80s' is neither in special_tokens nor a token", name);
            if (post_push(t, v, &r, e))
                return -1;
        }
    }
    if (!seq)
        return bad(e, &q, "has no Sequence A");
    return 0;
}

/* ------------------------------------------------------------------ config */
static int32_t config_token(const tq_tok *t, const cJSON *cfg, const char *k)
{
    const cJSON *v = item(cfg, k);
    if (cJSON_IsObject(v))
        v = item(v, "content");
    return cJSON_IsString(v) ? tq_tok_token_id(t, v->valuestring) : -1;
}

/* ------------------------------------------------------------------ entry points */
void tq_tok_free(tq_tok *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->id_ent);
    free(t->id_added);
    tok_map_free(&t->vocab);
    free(t->merges.slot);
    for (size_t i = 0; i < t->n_added; i++)
        free(t->added[i].content);
    free(t->added);
    free(t->raw_trie.node);
    free(t->norm_trie.node);
    for (size_t i = 0; i < t->n_norm; i++) {
        tok_pattern_free(&t->norm[i].pat);
        free(t->norm[i].content);
    }
    free(t->norm);
    for (size_t i = 0; i < t->n_pre; i++)
        tok_pattern_free(&t->pre[i].pat);
    free(t->pre);
    pcre2_code_free(t->gpt2_re);
    for (size_t i = 0; i < t->n_dec; i++) {
        tok_pattern_free(&t->dec[i].pat);
        free(t->dec[i].content);
    }
    free(t->dec);
    free(t->post_single);
    free(t);
}

static int load_all(tq_tok *t, const cJSON *j, const cJSON *cfg, tq_err *e)
{
    path np = {"normalizer"}, pp = {"pre_tokenizer"}, dp = {"decoder"}, op = {"post_processor"};
    if (!cJSON_IsObject(j))
        return tq_fail(e, TQ_EDATA, "not a JSON object");
    const cJSON *tr = item(j, "truncation"), *pad = item(j, "padding");
    if (!is_absent(tr) || !is_absent(pad))
        return tq_fail(e, TQ_EUNSUP, "%s: is set; truncation and padding are not supported",
                       !is_absent(tr) ? "truncation" : "padding");
    if (!(t->norm = calloc(MAX_STEPS, sizeof *t->norm)) || !(t->pre = calloc(MAX_STEPS, sizeof *t->pre)) ||
        !(t->dec = calloc(MAX_STEPS, sizeof *t->dec)) || !(t->post_single = calloc(MAX_STEPS, sizeof *t->post_single)))
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    if (load_model(t, item(j, "model"), e) || load_added(t, item(j, "added_tokens"), e) || index_ids(t, e) ||
        index_added(t, e) || load_unk(t, item(j, "model"), e))
        return -1;
    if (load_steps(t, item(j, "normalizer"), "normalizers", norm_step, &np, 0, e) ||
        load_steps(t, item(j, "pre_tokenizer"), "pretokenizers", pre_step, &pp, 0, e) ||
        load_steps(t, item(j, "decoder"), "decoders", dec_step, &dp, 0, e) ||
        load_steps(t, item(j, "post_processor"), "processors", post_step, &op, 0, e))
        return -1;
    t->has_decoder = !is_absent(item(j, "decoder"));
    for (size_t i = 0; i < t->n_post; i++)
        if (t->post_single[i] >= t->n_ids || (t->post_single[i] >= 0 && !tok_id_str(t, t->post_single[i], NULL)))
            return tq_fail(e, TQ_EDATA, "post_processor: token id %d is not in the vocabulary", (int)t->post_single[i]);
    t->bos = config_token(t, cfg, "bos_token");
    t->eos = config_token(t, cfg, "eos_token");
    /* decode's cleanup only when the config asks for it: transformers' PreTrainedTokenizerBase
     * defaults to False without the key (tokenization_utils_base.py), transformers.js to true */
    const cJSON *cu = item(cfg, "clean_up_tokenization_spaces");
    if (cu && !cJSON_IsBool(cu) && !cJSON_IsNull(cu))
        return tq_fail(e, TQ_EDATA, "tokenizer_config.json: clean_up_tokenization_spaces must be true or false");
    t->cleanup = cJSON_IsTrue(cu);
    return 0;
}

int tq_tok_load_mem(const char *json, size_t len, const char *config, size_t config_len, const char *name,
                    tq_tok **out, tq_err *e)
{
    *out = NULL;
    tq_tok *t = calloc(1, sizeof *t);
    if (!t || !(t->name = tq_strdup(name ? name : "tokenizer.json", e))) {
        free(t);
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    /* One JSON value and nothing after it but white space, as JSON.parse and serde_json read
     * them (the reference implementations both refuse trailing bytes). */
    size_t off = 0, coff = 0;
    int trailing = 0, ctrailing = 0;
    cJSON *j = tq_json_parse(json, len, &off, &trailing), *cfg = NULL;
    int rc;
    if (!j) {
        rc = trailing ? tq_fail(e, TQ_EDATA, "bytes after the JSON value at byte %zu", off)
                      : tq_fail(e, TQ_EDATA, "not valid JSON (near byte %zu)", off);
    } else if (config && !(cfg = tq_json_parse(config, config_len, &coff, &ctrailing))) {
        rc = ctrailing ? tq_fail(e, TQ_EDATA, "tokenizer_config.json: bytes after the JSON value at byte %zu", coff)
                       : tq_fail(e, TQ_EDATA, "tokenizer_config.json: not valid JSON (near byte %zu)", coff);
    } else {
        rc = load_all(t, j, cfg, e);
    }
    cJSON_Delete(j);
    cJSON_Delete(cfg);
    if (rc) {
        tq_err_prefix(e, "%s", t->name);
        tq_tok_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int tq_tok_load(const char *p, tq_tok **out, tq_err *e)
{
    *out = NULL;
    char *jpath = tq_is_dir(p) ? tq_path_join(p, "tokenizer.json", e) : tq_strdup(p, e);
    if (!jpath)
        return -1;
    char *cpath = NULL, *slash = strrchr(jpath, '/');
    if (slash) {
        *slash = 0;
        cpath = tq_path_join(jpath, "tokenizer_config.json", e);
        *slash = '/';
    } else {
        cpath = tq_strdup("tokenizer_config.json", e);
    }
    char *json = NULL, *cfg = NULL;
    size_t jn = 0, cn = 0;
    int rc = -1;
    if (cpath && !tq_read_small_file(jpath, MAX_JSON_BYTES, &json, &jn, e) &&
        (!tq_exists(cpath) || !tq_read_small_file(cpath, MAX_CONFIG_BYTES, &cfg, &cn, e)))
        rc = tq_tok_load_mem(json, jn, cfg, cn, jpath, out, e);
    free(json);
    free(cfg);
    free(jpath);
    free(cpath);
    return rc;
}

/* ------------------------------------------------------------------ queries */
size_t tq_tok_vocab_size(const tq_tok *t)
{
    return (size_t)t->n_ids;
}

int tq_tok_has_id(const tq_tok *t, int32_t id)
{
    return tok_id_str(t, id, NULL) != NULL;
}

int32_t tq_tok_token_id(const tq_tok *t, const char *s)
{
    return vocab_id(t, s, strlen(s));
}

int32_t tq_tok_bos(const tq_tok *t)
{
    return t->bos;
}

int32_t tq_tok_eos(const tq_tok *t)
{
    return t->eos;
}

size_t tq_tok_n_added(const tq_tok *t)
{
    return t->n_added;
}

const char *tq_tok_added(const tq_tok *t, size_t i, int32_t *id)
{
    if (i >= t->n_added)
        return NULL;
    if (id)
        *id = t->added[i].id;
    return t->added[i].content;
}

const char *tok_id_str(const tq_tok *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_ids)
        return NULL;
    if (t->id_added[id] >= 0) {
        const tok_added *a = &t->added[t->id_added[id]];
        if (len)
            *len = a->len;
        return a->content;
    }
    if (t->id_ent[id] < 0)
        return NULL;
    const struct tok_ent *x = &t->vocab.ent[t->id_ent[id]];
    if (len)
        *len = x->len;
    return t->vocab.pool.s + x->off;
}
