/* tokenizer/tok_internal.h — the loaded tokenizer's parts, shared by the tokenizer/ files. */
#ifndef TQ_TOK_INTERNAL_H
#define TQ_TOK_INTERNAL_H

#include "tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>

#define TOK_MAX_ID (1 << 24) /* ids at or above this are refused (bounds the id tables) */

/* ---- string -> id map (open addressing over an arena of strings) ---- */
typedef struct tok_map {
    uint32_t *slot; /* entry index + 1, 0 = empty */
    size_t cap;     /* power of two */
    struct tok_ent { uint32_t off, len; int32_t id; uint32_t hash; } *ent;
    size_t n, ent_cap;
    tq_sb pool;
} tok_map;
uint32_t tok_hash(const void *d, size_t n);
/* Index of the entry for s, or -1. */
long tok_map_find(const tok_map *m, const char *s, size_t n);
/* Adds s -> id; returns the entry index, or -1 when out of memory. *existed says whether s was
 * there already (its id is then left unchanged). */
long tok_map_add(tok_map *m, const char *s, size_t n, int32_t id, int *existed);
void tok_map_free(tok_map *m);

/* ---- (left id, right id) -> (rank, merged id) ---- */
typedef struct tok_merges {
    struct tok_merge { uint64_t key; int32_t rank, out; } *slot; /* key (left << 32 | right) + 1, 0 = empty */
    size_t cap, n;
} tok_merges;
int tok_merges_find(const tok_merges *m, int32_t a, int32_t b, int32_t *rank, int32_t *out);

/* ---- added-token contents, leftmost-longest matching ----
 * An Aho-Corasick automaton over the contents written backwards, built once at load
 * (tok_trie_build): scanning a text from its end, the state after reading text[i] names,
 * through its output links, every added token that begins at i, longest first. So the
 * longest token at every position comes out of one pass, in time linear in the text,
 * however many added tokens there are and however long they are (tok_encode.c, split_added). */
typedef struct tok_trie {
    struct tok_tnode {
        int32_t child, sibling; /* first child, next sibling (-1 none) */
        int32_t token;          /* the added token whose reversed content ends here, or -1 */
        int32_t fail;           /* the longest proper suffix of this node's string that is a node */
        int32_t out;            /* the nearest node with a token on the fail chain from here (itself included), -1 none */
        int32_t plain;          /* the same, skipping single_word tokens */
        uint8_t byte;
    } *node;                    /* node 0 is the root */
    size_t n, cap;
    int32_t root[256]; /* the root's transitions: a child, or 0 (the root itself) */
} tok_trie;
/* Next state from v on byte b. */
static inline int32_t tok_trie_step(const tok_trie *t, int32_t v, unsigned b)
{
    for (;;) {
        if (v == 0)
            return t->root[b];
        for (int32_t k = t->node[v].child; k >= 0; k = t->node[k].sibling)
            if (t->node[k].byte == b)
                return k;
        v = t->node[v].fail;
    }
}

/* ---- patterns (a literal string or a PCRE2 regex) ---- */
typedef struct tok_pattern {
    char *lit; /* literal pattern (String), or NULL for a regex */
    size_t lit_len;
    pcre2_code *re;
} tok_pattern;

enum { N_NFC, N_NFD, N_NFKC, N_NFKD, N_REPLACE, N_PREPEND, N_STRIP, N_LOWER, N_STRIP_ACCENTS };
typedef struct tok_norm {
    int kind;
    char where[192]; /* the step's field path, for messages: "normalizer.normalizers[2]" */
    tok_pattern pat;
    char *content; /* Replace content, Prepend prefix */
    size_t content_len;
    int left, right; /* Strip */
} tok_norm;

/* The step names of the kinds above, in their order. */
extern const char *const tok_norm_names[];
extern const char *const tok_dec_names[];

/* How far one normalizer or decoder step may grow the text: every step's output is at most
 * TOK_GROWTH_FACTOR times what entered the chain plus TOK_GROWTH_SLACK bytes (a step that
 * makes more is an error naming it). Real steps stay far below: NFKC's largest expansion is
 * U+FDFA, 3 bytes to 33, Replace of ' ' by U+2581 is 1 byte to 3. Chained Replace steps that
 * each multiply the text would otherwise grow it exponentially in the number of steps. */
#define TOK_GROWTH_FACTOR 32
#define TOK_GROWTH_SLACK 4096
static inline size_t tok_growth_limit(size_t n)
{
    return n > (SIZE_MAX - TOK_GROWTH_SLACK) / TOK_GROWTH_FACTOR ? SIZE_MAX - 1
                                                                 : n * TOK_GROWTH_FACTOR + TOK_GROWTH_SLACK;
}
/* The error of a step (its file, field path and type) that made more than limit bytes. */
int tok_grown(tq_err *e, const char *file, const char *where, const char *type, size_t in, size_t limit);

enum { P_SPLIT, P_BYTELEVEL, P_METASPACE, P_WSPLIT, P_WHITESPACE, P_DIGITS };
enum { B_REMOVED, B_ISOLATED, B_PREV, B_NEXT, B_CONTIGUOUS };
enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
typedef struct tok_pre {
    int kind;
    tok_pattern pat;
    int behavior, invert;
    int add_prefix_space, use_regex;  /* ByteLevel */
    char repl[8];                     /* Metaspace replacement (UTF-8) */
    size_t repl_len;
    int prepend, split;               /* Metaspace */
    int individual;                   /* Digits */
} tok_pre;

enum { D_BYTELEVEL, D_METASPACE, D_REPLACE, D_BYTEFALLBACK, D_FUSE, D_STRIP };
typedef struct tok_dec {
    int kind;
    char where[192]; /* the step's field path, for messages */
    tok_pattern pat;
    char *content; /* Replace content; Strip: the one character stripped */
    size_t content_len;
    char repl[8]; /* Metaspace replacement */
    size_t repl_len;
    int prefix;   /* Metaspace: drop the first token's leading space */
    long start, stop;
} tok_dec;

typedef struct tok_added {
    char *content;
    size_t len;
    int32_t id;
    int lstrip, rstrip, single_word, normalized, special;
} tok_added;

struct tq_tok {
    char *name;
    /* model */
    int32_t n_ids;        /* one past the largest id */
    int32_t *id_ent;      /* id -> vocab entry (-1 none) */
    int32_t *id_added;    /* id -> added token index (-1 none) */
    tok_map vocab;        /* model.vocab and added tokens (added tokens win) */
    tok_merges merges;
    int32_t unk;          /* -1 when none */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_tok[256];   /* <0xXX> ids for byte fallback, -1 when missing */
    int32_t level_tok[256];  /* byte-level character ids, -1 when missing */
    /* pipeline */
    tok_added *added;
    size_t n_added;
    tok_trie raw_trie, norm_trie; /* non-normalized / normalized added tokens */
    tok_norm *norm;
    size_t n_norm;
    tok_pre *pre;
    size_t n_pre;
    pcre2_code *gpt2_re; /* ByteLevel use_regex */
    tok_dec *dec;
    size_t n_dec;
    int has_decoder;
    int32_t *post_single; /* ids of the single-sequence template; -1 marks the sequence */
    size_t n_post;
    int32_t bos, eos;
    int cleanup;      /* tokenizer_config.json clean_up_tokenization_spaces: true (tok_decode.c) */
};

/* ---- UTF-8 ---- */
/* Length of the valid UTF-8 character at p (n bytes left), 0 if invalid (tq_utf8_next). */
static inline size_t tok_utf8_len(const unsigned char *p, size_t n, uint32_t *cp)
{
    int l = tq_utf8_next((const char *)p, n, cp);
    return l < 0 ? 0 : (size_t)l;
}
/* Byte offset of the first invalid UTF-8 sequence, or n when all is valid (tq_utf8_check). */
static inline size_t tok_utf8_check(const char *s, size_t n)
{
    size_t bad;
    return tq_utf8_check(s, n, &bad) ? bad : n;
}
/* Appends s with every invalid sequence replaced by U+FFFD (WHATWG decoder rules). */
int tok_utf8_sanitize(tq_sb *out, const char *s, size_t n);
/* Whether s begins with a UTF-8 sequence that is incomplete but could still become valid. */
size_t tok_utf8_incomplete_tail(const char *s, size_t n);
/* GPT-2's byte <-> character map (tq_tok_byte_char in tokenizer.h is the other way). */
int tok_char_byte(uint32_t cp); /* -1 when cp is not one of the 256 characters */

/* ---- patterns ---- */
int tok_pattern_compile(tok_pattern *p, const char *src, size_t len, int is_regex, const char *field, tq_err *e);
void tok_pattern_free(tok_pattern *p);
/* Next match of p in s[from..n): *ms, *me; 0 found, 1 none, -1 error. */
int tok_pattern_next(const tok_pattern *p, pcre2_match_data *md, const char *s, size_t n, size_t from, size_t *ms,
                     size_t *me, tq_err *e);
pcre2_code *tok_regex_compile(const char *src, size_t len, const char *field, tq_err *e);

/* ---- loader helpers used by the decoder ---- */
const char *tok_id_str(const tq_tok *t, int32_t id, size_t *len);

/* Raw decode (invalid UTF-8 left as is) of ids into out. */
int tok_decode_raw(const tq_tok *t, const int32_t *ids, size_t n, tq_sb *out, tq_err *e);

#endif
