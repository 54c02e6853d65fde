/* tokenizer/chat_template.c — chat templates: the Jinja subset of HuggingFace chat templates, rendered as @huggingface/jinja renders them.
 *
 * The reference is @huggingface/jinja 0.5.11 (the Jinja of transformers.js; tests/chat/oracle.sh
 * compares byte for byte). Its lexer (src/lexer.ts: preprocess, tokenize), parser
 * (src/parser.ts) and interpreter (src/runtime.ts: Interpreter, Environment, applyFilter) are
 * followed function by function, quirks included, where they differ from Python's Jinja:
 * lstrip_blocks and trim_blocks are on; printed none/undefined are empty and booleans print
 * "true"/"false"; "==" is JavaScript's loose equality; "%" keeps the dividend's sign; str.strip,
 * lstrip and rstrip take no characters (any argument is ignored: they trim ECMAScript white
 * space); a set inside a for loop lives in that loop's one scope, shared by its iterations;
 * output of an iteration cut short by break or continue is dropped; macros see the caller's
 * variables; string lengths and indexes count UTF-16 units, slices count code points.
 *
 * Whatever the subset lacks (call and filter blocks, argument unpacking, kwargs/varargs in
 * macros, Unicode case mapping (upper, lower, sorting without case_sensitive on non-ASCII
 * text), comparing a string with a number, a mapping or list added to a string, ...) is an error naming the construct and its line and column; so are the
 * errors @huggingface/jinja throws. Work is bounded: template size, nesting depth, evaluation
 * steps and the bytes a render may allocate (TQ_CHAT_MAX_*), so a hostile template fails. */
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TEMPLATE (1u << 20)    /* template bytes */
#define MAX_DEPTH 200              /* parser nesting */
#define MAX_EVAL_DEPTH 500         /* evaluation recursion (expressions, blocks, macro calls) */
#define MAX_STEPS 20000000ull      /* evaluation steps (nodes, iterations, items) */
#define MAX_ARENA (256ull << 20)   /* bytes one render may allocate */
#define MAX_JSON_DEPTH 100         /* nesting of values printed as JSON */

/* ------------------------------------------------------------------ arena and errors */
typedef struct ablk {
    struct ablk *next;
    size_t used, cap;
    max_align_t data[];
} ablk;

typedef struct str {
    const char *s;
    size_t n;
} str;

struct node;
struct val;
struct env;

typedef struct ctx {
    ablk *blk;
    uint64_t total, steps;
    int depth;
    jmp_buf jb;
    tq_err *e;
    const char *orig; /* the template as given, for line numbers */
    size_t *map;      /* preprocessed offset -> original offset */
    size_t src_n;
    tq_sb *out;       /* where statements write */
    struct sbnode *sbs; /* every string builder of the render, freed at its end (also after a failure) */
    int64_t now;
} ctx;

#define NOPOS ((size_t)-1) /* an error with no place in the template */

static size_t line_col(const ctx *c, size_t off, size_t *col)
{
    size_t o = off < c->src_n ? c->map[off] : (c->src_n ? c->map[c->src_n - 1] + 1 : 0);
    size_t line = 1, ls = 0;
    for (size_t i = 0; i < o && c->orig[i]; i++)
        if (c->orig[i] == '\n')
            line++, ls = i + 1;
    *col = o - ls + 1;
    return line;
}

static _Noreturn void failv(ctx *c, int code, size_t off, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (off == NOPOS) {
        tq_fail(c->e, code, "chat_template: %s", msg);
    } else {
        size_t col, line = line_col(c, off, &col);
        tq_fail(c->e, code, "chat_template: line %zu, column %zu: %s", line, col, msg);
    }
    longjmp(c->jb, 1);
}

__attribute__((format(printf, 3, 4))) static _Noreturn void fail(ctx *c, size_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(c, TQ_EDATA, off, fmt, ap);
}

/* A construct the subset does not have. */
__attribute__((format(printf, 3, 4))) static _Noreturn void unsup(ctx *c, size_t off, const char *fmt, ...)
{
    char f2[256];
    snprintf(f2, sizeof f2, "unsupported: %s", fmt);
    va_list ap;
    va_start(ap, fmt);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    failv(c, TQ_EUNSUP, off, f2, ap);
#pragma GCC diagnostic pop
}

static void *alloc(ctx *c, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n > MAX_ARENA || c->total + n > MAX_ARENA) {
        tq_fail(c->e, TQ_EDATA, "chat_template: the render needs more than %llu MiB (a runaway template?)",
                (unsigned long long)(MAX_ARENA >> 20));
        longjmp(c->jb, 1);
    }
    if (!c->blk || c->blk->cap - c->blk->used < n) {
        size_t cap = n > (1u << 20) ? n : (1u << 20);
        ablk *b = malloc(sizeof *b + cap);
        if (!b) {
            tq_fail(c->e, TQ_ENOMEM, "chat_template: out of memory");
            longjmp(c->jb, 1);
        }
        b->next = c->blk, b->used = 0, b->cap = cap;
        c->blk = b;
    }
    void *p = (char *)c->blk->data + c->blk->used;
    c->blk->used += n;
    c->total += n;
    memset(p, 0, n);
    return p;
}

typedef struct sbnode {
    tq_sb b;
    struct sbnode *next;
} sbnode;

/* A string builder the render's end frees, whether it ends well or by fail(). */
static tq_sb *sb_new(ctx *c)
{
    sbnode *n = alloc(c, sizeof *n);
    n->next = c->sbs;
    c->sbs = n;
    return &n->b;
}

static void step(ctx *c, size_t off, uint64_t n)
{
    c->steps += n;
    if (c->steps > MAX_STEPS)
        fail(c, off, "the render takes more than %llu steps (a runaway loop?)", (unsigned long long)MAX_STEPS);
}

static str sdup(ctx *c, const char *s, size_t n)
{
    char *p = alloc(c, n + 1);
    memcpy(p, s, n);
    return (str){p, n};
}

static str scat(ctx *c, str a, str b)
{
    char *p = alloc(c, a.n + b.n + 1);
    memcpy(p, a.s, a.n);
    memcpy(p + a.n, b.s, b.n);
    return (str){p, a.n + b.n};
}

static int seq(str a, const char *b)
{
    return a.n == strlen(b) && !memcmp(a.s, b, a.n);
}

static int seqs(str a, str b)
{
    return a.n == b.n && (!a.n || !memcmp(a.s, b.s, a.n));
}

/* ------------------------------------------------------------------ UTF-8 and ECMAScript text */
static uint32_t cp_at(const char *s, size_t n, size_t *len)
{
    uint32_t cp;
    int l = tq_utf8_next(s, n, &cp);
    if (l <= 0) {
        *len = 1;
        return 0xFFFD;
    }
    *len = (size_t)l;
    return cp;
}

static int js_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == ' ' || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

static int is_word(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* JavaScript's String.prototype.trimStart / trimEnd. */
static str js_trim(str s, int start, int end)
{
    size_t l;
    if (start)
        while (s.n && js_space(cp_at(s.s, s.n, &l)))
            s.s += l, s.n -= l;
    if (end)
        while (s.n) {
            size_t i = s.n - 1;
            while (i && ((unsigned char)s.s[i] & 0xC0) == 0x80)
                i--;
            if (!js_space(cp_at(s.s + i, s.n - i, &l)))
                break;
            s.n = i;
        }
    return s;
}

static size_t utf16_len(str s)
{
    size_t n = 0, l;
    for (size_t i = 0; i < s.n; i += l)
        n += cp_at(s.s + i, s.n - i, &l) >= 0x10000 ? 2 : 1;
    return n;
}

static size_t cp_count(str s)
{
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++)
        n += ((unsigned char)s.s[i] & 0xC0) != 0x80;
    return n;
}

static int has_non_ascii(str s)
{
    for (size_t i = 0; i < s.n; i++)
        if ((unsigned char)s.s[i] >= 0x80)
            return 1;
    return 0;
}

/* ECMAScript Number::toString (shortest round-trip digits). */
static void js_num(tq_sb *b, double x)
{
    if (isnan(x)) {
        tq_sb_str(b, "NaN");
        return;
    }
    if (isinf(x)) {
        tq_sb_str(b, x < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (x == 0) {
        tq_sb_str(b, "0");
        return;
    }
    if (x < 0) {
        tq_sb_str(b, "-");
        x = -x;
    }
    char buf[64], digits[32];
    int p, ex = 0;
    for (p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    /* buf: d.ddde±XX */
    size_t k = 0;
    for (const char *q = buf; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[k++] = *q;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = 0;
    ex = atoi(strchr(buf, 'e') + 1);
    int n = ex + 1; /* x = 0.digits * 10^n */
    if ((int)k <= n && n <= 21) {
        tq_sb_put(b, digits, k);
        for (int i = (int)k; i < n; i++)
            tq_sb_put(b, "0", 1);
    } else if (0 < n && n <= 21) {
        tq_sb_put(b, digits, (size_t)n);
        tq_sb_put(b, ".", 1);
        tq_sb_put(b, digits + n, k - (size_t)n);
    } else if (-6 < n && n <= 0) {
        tq_sb_str(b, "0.");
        for (int i = 0; i < -n; i++)
            tq_sb_put(b, "0", 1);
        tq_sb_put(b, digits, k);
    } else {
        tq_sb_put(b, digits, 1);
        if (k > 1) {
            tq_sb_put(b, ".", 1);
            tq_sb_put(b, digits + 1, k - 1);
        }
        tq_sb_printf(b, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
    }
}

/* ------------------------------------------------------------------ values */
enum vk { V_UNDEF, V_NULL, V_BOOL, V_INT, V_FLOAT, V_STR, V_ARR, V_TUPLE, V_OBJ, V_KWARGS, V_NS, V_FUNC };
static const char *const vk_name[] = {"an undefined value", "none",    "a boolean",        "an integer",
                                      "a float",            "a string", "a list",           "a tuple",
                                      "a mapping",          "keyword arguments", "a namespace", "a function"};

typedef struct val val;
typedef struct arr {
    val **v;
    size_t n, cap;
} arr;
typedef struct obj {
    str *k;
    val **v;
    size_t n, cap;
} obj;

enum fk { F_NAMESPACE, F_RANGE, F_RAISE, F_STRFTIME, F_MACRO, F_METHOD };
typedef struct func {
    enum fk kind;
    const char *name; /* method name */
    val *self;
    struct node *macro;
} func;

struct val {
    enum vk k;
    int b;
    double d;
    str s;
    arr *a;
    obj *o;
    func *f;
};

static val V_undef = {.k = V_UNDEF}, V_null = {.k = V_NULL};

static val *mk(ctx *c, enum vk k)
{
    val *v = alloc(c, sizeof *v);
    v->k = k;
    return v;
}
static val *mk_bool(ctx *c, int b)
{
    val *v = mk(c, V_BOOL);
    v->b = !!b;
    return v;
}
static val *mk_num(ctx *c, enum vk k, double d)
{
    val *v = mk(c, k);
    v->d = d;
    return v;
}
static val *mk_str(ctx *c, str s)
{
    val *v = mk(c, V_STR);
    v->s = s;
    return v;
}
static val *mk_cstr(ctx *c, const char *s)
{
    return mk_str(c, (str){s, strlen(s)});
}
static val *mk_arr(ctx *c, enum vk k)
{
    val *v = mk(c, k);
    v->a = alloc(c, sizeof *v->a);
    return v;
}
static val *mk_obj(ctx *c, enum vk k)
{
    val *v = mk(c, k);
    v->o = alloc(c, sizeof *v->o);
    return v;
}
static val *mk_func(ctx *c, enum fk k, const char *name, val *self, struct node *m)
{
    val *v = mk(c, V_FUNC);
    v->f = alloc(c, sizeof *v->f);
    *v->f = (func){k, name, self, m};
    return v;
}

static void arr_push(ctx *c, arr *a, val *x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        val **nv = alloc(c, cap * sizeof *nv);
        if (a->n)
            memcpy(nv, a->v, a->n * sizeof *nv);
        a->v = nv, a->cap = cap;
    }
    a->v[a->n++] = x;
}

static long obj_find(ctx *c, const obj *o, str k)
{
    step(c, NOPOS, o->n / 16);
    for (size_t i = 0; i < o->n; i++)
        if (seqs(o->k[i], k))
            return (long)i;
    return -1;
}

static val *obj_get(ctx *c, const obj *o, str k)
{
    long i = obj_find(c, o, k);
    return i < 0 ? NULL : o->v[i];
}

/* Map.set: replaces in place, or appends. */
static void obj_set(ctx *c, obj *o, str k, val *x)
{
    long i = obj_find(c, o, k);
    if (i >= 0) {
        o->v[i] = x;
        return;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        str *nk = alloc(c, cap * sizeof *nk);
        val **nv = alloc(c, cap * sizeof *nv);
        if (o->n) {
            memcpy(nk, o->k, o->n * sizeof *nk);
            memcpy(nv, o->v, o->n * sizeof *nv);
        }
        o->k = nk, o->v = nv, o->cap = cap;
    }
    o->k[o->n] = k;
    o->v[o->n++] = x;
}

static int is_arr(const val *v)
{
    return v->k == V_ARR || v->k == V_TUPLE;
}
static int is_obj(const val *v) /* instanceof ObjectValue */
{
    return v->k == V_OBJ || v->k == V_KWARGS;
}
static int is_num(const val *v)
{
    return v->k == V_INT || v->k == V_FLOAT;
}

static int truthy(const val *v)
{
    switch (v->k) {
    case V_UNDEF:
    case V_NULL:
        return 0;
    case V_BOOL:
        return v->b;
    case V_INT:
    case V_FLOAT:
        return v->d != 0 && !isnan(v->d);
    case V_STR:
        return v->s.n > 0;
    case V_ARR:
    case V_TUPLE:
        return v->a->n > 0;
    case V_OBJ:
    case V_KWARGS:
        return v->o->n > 0;
    default:
        return 1;
    }
}

/* ------------------------------------------------------------------ JSON out (runtime.ts toJSON) */
typedef struct jopts {
    long indent; /* 0: none */
    int ascii;
    str item_sep, key_sep;
} jopts;

static void json_str(tq_sb *b, str s, int ascii)
{
    tq_sb_put(b, "\"", 1);
    size_t l;
    for (size_t i = 0; i < s.n; i += l) {
        unsigned char ch = (unsigned char)s.s[i];
        uint32_t cp = cp_at(s.s + i, s.n - i, &l);
        if (ch == '"' || ch == '\\')
            tq_sb_printf(b, "\\%c", ch);
        else if (ch == '\b')
            tq_sb_str(b, "\\b");
        else if (ch == '\f')
            tq_sb_str(b, "\\f");
        else if (ch == '\n')
            tq_sb_str(b, "\\n");
        else if (ch == '\r')
            tq_sb_str(b, "\\r");
        else if (ch == '\t')
            tq_sb_str(b, "\\t");
        else if (ch < 0x20)
            tq_sb_printf(b, "\\u%04x", ch);
        else if (ascii && cp >= 0x7F) {
            if (cp >= 0x10000)
                tq_sb_printf(b, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
            else
                tq_sb_printf(b, "\\u%04x", cp);
        } else
            tq_sb_put(b, s.s + i, l);
    }
    tq_sb_put(b, "\"", 1);
}

static void pad(tq_sb *b, long indent, int depth)
{
    tq_sb_put(b, "\n", 1);
    for (long i = 0; i < indent * depth; i++)
        tq_sb_put(b, " ", 1);
}

static void to_json(ctx *c, size_t off, tq_sb *b, const val *v, const jopts *o, int depth, int undef_null)
{
    step(c, off, 1);
    if (depth > MAX_JSON_DEPTH)
        fail(c, off, "a value nested more than %d deep (a cycle?) cannot be written as JSON", MAX_JSON_DEPTH);
    switch (v->k) {
    case V_NULL:
        tq_sb_str(b, "null");
        return;
    case V_UNDEF:
        tq_sb_str(b, undef_null ? "null" : "undefined");
        return;
    case V_BOOL:
        tq_sb_str(b, v->b ? "true" : "false");
        return;
    case V_INT:
    case V_FLOAT:
        if (!isfinite(v->d))
            tq_sb_str(b, "null");
        else
            js_num(b, v->d);
        return;
    case V_STR:
        json_str(b, v->s, o->ascii);
        return;
    case V_ARR: {
        const arr *a = v->a;
        tq_sb_put(b, "[", 1);
        for (size_t i = 0; i < a->n; i++) {
            if (i)
                tq_sb_put(b, o->item_sep.s, o->item_sep.n);
            if (o->indent)
                pad(b, o->indent, depth + 1);
            to_json(c, off, b, a->v[i], o, depth + 1, undef_null);
        }
        if (o->indent && a->n)
            pad(b, o->indent, depth);
        tq_sb_put(b, "]", 1);
        return;
    }
    case V_OBJ:
    case V_NS: {
        const obj *ob = v->o;
        tq_sb_put(b, "{", 1);
        for (size_t i = 0; i < ob->n; i++) {
            if (i)
                tq_sb_put(b, o->item_sep.s, o->item_sep.n);
            if (o->indent)
                pad(b, o->indent, depth + 1);
            json_str(b, ob->k[i], o->ascii);
            tq_sb_put(b, o->key_sep.s, o->key_sep.n);
            to_json(c, off, b, ob->v[i], o, depth + 1, undef_null);
        }
        if (o->indent && ob->n)
            pad(b, o->indent, depth);
        tq_sb_put(b, "}", 1);
        return;
    }
    default:
        fail(c, off, "cannot convert %s to JSON", vk_name[v->k]);
    }
}

static str sb_take(ctx *c, tq_sb *b, size_t off)
{
    if (b->oom) {
        tq_sb_free(b);
        tq_fail(c->e, TQ_ENOMEM, "chat_template: out of memory");
        longjmp(c->jb, 1);
    }
    str s = sdup(c, b->s ? b->s : "", b->len);
    tq_sb_free(b);
    (void)off;
    return s;
}

static str json_of(ctx *c, size_t off, const val *v, const jopts *o, int undef_null)
{
    tq_sb *b = sb_new(c);
    jopts def = {0, 0, {", ", 2}, {": ", 2}};
    to_json(c, off, b, v, o ? o : &def, 0, undef_null);
    return sb_take(c, b, off);
}

/* RuntimeValue.toString, as a statement's output or "~" and "+" see it. */
static str to_str(ctx *c, size_t off, const val *v, int for_print)
{
    tq_sb *b;
    switch (v->k) {
    case V_STR:
        return v->s;
    case V_BOOL:
        return (str){v->b ? "true" : "false", v->b ? 4 : 5};
    case V_INT:
        b = sb_new(c);
        js_num(b, v->d);
        return sb_take(c, b, off);
    case V_FLOAT:
        /* FloatValue.toString when printed; "+" and "~" use the plain number's */
        if (for_print && signbit(v->d) && v->d == 0)
            return (str){"-0.0", 4};
        b = sb_new(c);
        js_num(b, v->d);
        if (for_print && isfinite(v->d) && v->d == floor(v->d) && fabs(v->d) < 1e21)
            tq_sb_str(b, ".0");
        return sb_take(c, b, off);
    case V_ARR:
    case V_OBJ:
    case V_NS:
        if (for_print)
            return json_of(c, off, v, NULL, 0);
        unsup(c, off, "%s turned into text by '+' or '~'", vk_name[v->k]);
    case V_UNDEF:
    case V_NULL:
        if (for_print)
            return (str){"", 0};
        /* fallthrough */
    default:
        if (for_print)
            fail(c, off, "cannot print %s", vk_name[v->k]);
        unsup(c, off, "%s turned into text", vk_name[v->k]);
    }
}

/* ------------------------------------------------------------------ preprocess and lexer (lexer.ts) */
enum tt {
    T_TEXT, T_NUM, T_STR, T_IDENT, T_EQUALS, T_LPAREN, T_RPAREN, T_OPEN_STMT, T_CLOSE_STMT, T_OPEN_EXPR,
    T_CLOSE_EXPR, T_LBRACK, T_RBRACK, T_LBRACE, T_RBRACE, T_COMMA, T_DOT, T_COLON, T_PIPE, T_ADD, T_MUL, T_POW,
    T_CMP, T_UNARY, T_COMMENT
};

typedef struct tok {
    enum tt t;
    str v;
    size_t off;
} tok;

typedef struct lexer {
    ctx *c;
    const char *s;
    size_t n, pos;
    tok *t;
    size_t nt, cap;
} lexer;

static int line_start(const char *s, size_t i)
{
    if (i == 0)
        return 1;
    unsigned char p = (unsigned char)s[i - 1];
    if (p == '\n' || p == '\r')
        return 1;
    /* U+2028 / U+2029 end a line for ECMAScript's multiline ^ */
    return i >= 3 && (unsigned char)s[i - 3] == 0xE2 && (unsigned char)s[i - 2] == 0x80 &&
           (p == 0xA8 || p == 0xA9);
}

/* lexer.ts preprocess with lstrip_blocks and trim_blocks: drop one trailing "\n"; drop spaces
 * and tabs from a line's start to a "{%", "{#" or "{-"; drop the "\n" after "%}", "#}", "-}".
 * Keeps, for every byte kept, its offset in the original. */
static void preprocess(ctx *c, const char *t, size_t n, char **out, size_t *on)
{
    if (n && t[n - 1] == '\n')
        n--;
    char *a = alloc(c, n + 1);
    size_t *am = alloc(c, (n + 1) * sizeof *am), an = 0;
    for (size_t i = 0; i < n;) {
        if (line_start(t, i)) {
            size_t j = i;
            while (j < n && (t[j] == ' ' || t[j] == '\t'))
                j++;
            if (j > i && j + 1 < n && t[j] == '{' && (t[j + 1] == '#' || t[j + 1] == '%' || t[j + 1] == '-')) {
                i = j;
                continue;
            }
        }
        am[an] = i;
        a[an++] = t[i++];
    }
    char *b = alloc(c, an + 1);
    size_t *bm = alloc(c, (an + 1) * sizeof *bm), bn = 0;
    for (size_t i = 0; i < an; i++) {
        bm[bn] = am[i];
        b[bn++] = a[i];
        if (i + 2 < an && (a[i] == '#' || a[i] == '%' || a[i] == '-') && a[i + 1] == '}' && a[i + 2] == '\n') {
            bm[bn] = am[i + 1];
            b[bn++] = '}';
            i += 2; /* "}" written, the newline dropped */
        }
    }
    c->map = bm;
    c->src_n = bn;
    *out = b;
    *on = bn;
}

static void push_tok(lexer *L, enum tt t, str v, size_t off)
{
    ctx *c = L->c;
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        tok *nt = alloc(c, cap * sizeof *nt);
        if (L->nt)
            memcpy(nt, L->t, L->nt * sizeof *nt);
        L->t = nt, L->cap = cap;
    }
    step(c, off, 1);
    L->t[L->nt++] = (tok){t, v, off};
}

static enum tt last_type(const lexer *L, int *none)
{
    *none = L->nt == 0;
    return L->nt ? L->t[L->nt - 1].t : T_TEXT;
}

static int lx_space_at(const lexer *L, size_t *len)
{
    if (L->pos >= L->n)
        return 0;
    return js_space(cp_at(L->s + L->pos, L->n - L->pos, len));
}

static void strip_trailing(lexer *L)
{
    if (L->nt && L->t[L->nt - 1].t == T_TEXT) {
        tok *t = &L->t[L->nt - 1];
        t->v = js_trim(t->v, 0, 1);
        if (!t->v.n)
            L->nt--;
    }
}

static void skip_leading(lexer *L)
{
    size_t l;
    while (lx_space_at(L, &l))
        L->pos += l;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static void put_cp(tq_sb *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80)
        u[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | (cp >> 6 & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F)),
        n = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | (cp >> 12 & 0x3F)),
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    tq_sb_put(b, u, n);
}

/* A string literal's body up to the closing quote q (lexer.ts consumeWhile with escapes). */
static str lex_string(lexer *L, char q, size_t start)
{
    ctx *c = L->c;
    tq_sb *b = sb_new(c);
    uint32_t hi = 0; /* a pending high surrogate from \uD8xx */
    while (L->pos < L->n && L->s[L->pos] != q) {
        if (L->s[L->pos] == '\\') {
            if (++L->pos >= L->n) {
                tq_sb_free(b);
                fail(c, start, "unexpected end of input in a string literal");
            }
            char e = L->s[L->pos++];
            if (e == 'x' || e == 'u') {
                int len = e == 'x' ? 2 : 4;
                uint32_t v = 0;
                for (int i = 0; i < len; i++) {
                    int h = L->pos + (size_t)i < L->n ? hexval((unsigned char)L->s[L->pos + (size_t)i]) : -1;
                    if (h < 0) {
                        tq_sb_free(b);
                        fail(c, L->pos, "invalid hexadecimal escape sequence in a string literal");
                    }
                    v = v * 16 + (uint32_t)h;
                }
                L->pos += (size_t)len;
                if (v >= 0xD800 && v <= 0xDBFF && !hi) {
                    hi = v;
                    continue;
                }
                if (v >= 0xDC00 && v <= 0xDFFF && hi) {
                    put_cp(b, 0x10000 + ((hi - 0xD800) << 10) + (v - 0xDC00));
                    hi = 0;
                    continue;
                }
                if (hi || (v >= 0xD800 && v <= 0xDFFF)) {
                    tq_sb_free(b);
                    unsup(c, L->pos, "a lone surrogate escape in a string literal");
                }
                put_cp(b, v);
                continue;
            }
            if (hi) {
                tq_sb_free(b);
                unsup(c, L->pos, "a lone surrogate escape in a string literal");
            }
            const char *from = "ntrbfv'\"\\", *to = "\n\t\r\b\f\v'\"\\";
            const char *p = strchr(from, e);
            if (!e || !p) {
                tq_sb_free(b);
                fail(c, L->pos - 1, "unexpected escaped character '%c' in a string literal", e);
            }
            tq_sb_put(b, to + (p - from), 1);
            continue;
        }
        if (hi) {
            tq_sb_free(b);
            unsup(c, L->pos, "a lone surrogate escape in a string literal");
        }
        tq_sb_put(b, L->s + L->pos, 1);
        if (++L->pos >= L->n) {
            tq_sb_free(b);
            fail(c, start, "unexpected end of input in a string literal");
        }
    }
    if (hi) {
        tq_sb_free(b);
        unsup(c, L->pos, "a lone surrogate escape in a string literal");
    }
    if (L->pos >= L->n) {
        tq_sb_free(b);
        fail(c, start, "unexpected end of input in a string literal");
    }
    L->pos++; /* the closing quote */
    return sb_take(c, b, start);
}

/* consumeWhile for digits and word characters: reaching the end of input is an error there. */
static size_t lex_run(lexer *L, int digits_only, size_t start)
{
    size_t b = L->pos;
    while (L->pos < L->n && (digits_only ? (L->s[L->pos] >= '0' && L->s[L->pos] <= '9') : is_word(L->s[L->pos]))) {
        if (++L->pos >= L->n)
            fail(L->c, start, "unexpected end of input");
    }
    return L->pos - b;
}

static void lex(ctx *c, const char *s, size_t n, lexer *L)
{
    static const struct {
        const char *seq;
        enum tt t;
    } table[] = {{"{%", T_OPEN_STMT}, {"%}", T_CLOSE_STMT}, {"{{", T_OPEN_EXPR}, {"}}", T_CLOSE_EXPR},
                 {"(", T_LPAREN},     {")", T_RPAREN},      {"{", T_LBRACE},     {"}", T_RBRACE},
                 {"[", T_LBRACK},     {"]", T_RBRACK},      {",", T_COMMA},      {".", T_DOT},
                 {":", T_COLON},      {"|", T_PIPE},        {"<=", T_CMP},       {">=", T_CMP},
                 {"==", T_CMP},       {"!=", T_CMP},        {"<", T_CMP},        {">", T_CMP},
                 {"+", T_ADD},        {"-", T_ADD},         {"~", T_ADD},        {"**", T_POW},
                 {"*", T_MUL},        {"//", T_MUL},        {"/", T_MUL},        {"%", T_MUL},
                 {"=", T_EQUALS}};
    *L = (lexer){.c = c, .s = s, .n = n};
    int curly = 0;
    while (L->pos < n) {
        int none;
        enum tt lt = last_type(L, &none);
        if (none || lt == T_CLOSE_STMT || lt == T_CLOSE_EXPR || lt == T_COMMENT) {
            size_t b = L->pos;
            while (L->pos < n &&
                   !(s[L->pos] == '{' && L->pos + 1 < n && (s[L->pos + 1] == '%' || s[L->pos + 1] == '{' || s[L->pos + 1] == '#')))
                L->pos++;
            if (L->pos > b) {
                push_tok(L, T_TEXT, (str){s + b, L->pos - b}, b);
                continue;
            }
        }
        size_t at = L->pos;
        if (s[at] == '{' && at + 1 < n && s[at + 1] == '#') {
            L->pos += 2;
            int before = L->pos < n && s[L->pos] == '-';
            if (before)
                L->pos++;
            size_t b = L->pos;
            while (!(L->pos + 1 < n && s[L->pos] == '#' && s[L->pos + 1] == '}')) {
                if (L->pos + 2 >= n)
                    fail(c, at, "missing end of comment tag");
                L->pos++;
            }
            str body = {s + b, L->pos - b};
            int after = body.n && body.s[body.n - 1] == '-';
            if (after)
                body.n--;
            if (before)
                strip_trailing(L);
            push_tok(L, T_COMMENT, body, at);
            L->pos += 2;
            if (after)
                skip_leading(L);
            continue;
        }
        if (at + 2 < n && s[at] == '{' && s[at + 1] == '%' && s[at + 2] == '-') {
            strip_trailing(L);
            push_tok(L, T_OPEN_STMT, (str){"{%", 2}, at);
            L->pos += 3;
            continue;
        }
        if (at + 2 < n && s[at] == '{' && s[at + 1] == '{' && s[at + 2] == '-') {
            strip_trailing(L);
            push_tok(L, T_OPEN_EXPR, (str){"{{", 2}, at);
            curly = 0;
            L->pos += 3;
            continue;
        }
        {
            size_t l;
            while (lx_space_at(L, &l)) {
                L->pos += l;
                if (L->pos >= n)
                    fail(c, at, "unexpected end of input");
            }
        }
        at = L->pos;
        if (at + 2 < n + 0 && s[at] == '-' && s[at + 1] == '%' && s[at + 2] == '}') {
            push_tok(L, T_CLOSE_STMT, (str){"%}", 2}, at);
            L->pos += 3;
            skip_leading(L);
            continue;
        }
        if (at + 2 < n + 0 && s[at] == '-' && s[at + 1] == '}' && s[at + 2] == '}') {
            push_tok(L, T_CLOSE_EXPR, (str){"}}", 2}, at);
            L->pos += 3;
            skip_leading(L);
            continue;
        }
        char ch = s[at];
        if (ch == '-' || ch == '+') {
            lt = last_type(L, &none);
            if (none || lt == T_TEXT)
                fail(c, at, "unexpected character '%c'", ch);
            if (!(lt == T_IDENT || lt == T_NUM || lt == T_STR || lt == T_RPAREN || lt == T_RBRACK)) {
                L->pos++;
                size_t b = L->pos, k = lex_run(L, 1, at);
                if (k && L->pos + 1 < n && s[L->pos] == '.' && s[L->pos + 1] >= '0' && s[L->pos + 1] <= '9') {
                    L->pos++;
                    lex_run(L, 1, at);
                }
                if (k)
                    push_tok(L, T_NUM, (str){s + b - 1, L->pos - b + 1}, at);
                else
                    push_tok(L, T_UNARY, (str){s + at, 1}, at);
                continue;
            }
        }
        int matched = 0;
        for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
            size_t l = strlen(table[i].seq);
            if (table[i].t == T_CLOSE_EXPR && curly > 0)
                continue;
            if (at + l <= n && !memcmp(s + at, table[i].seq, l)) {
                push_tok(L, table[i].t, (str){s + at, l}, at);
                if (table[i].t == T_OPEN_EXPR)
                    curly = 0;
                else if (table[i].t == T_LBRACE)
                    curly++;
                else if (table[i].t == T_RBRACE)
                    curly--;
                L->pos += l;
                matched = 1;
                break;
            }
        }
        if (matched)
            continue;
        if (ch == '\'' || ch == '"') {
            L->pos++;
            str v = lex_string(L, ch, at);
            push_tok(L, T_STR, v, at);
            continue;
        }
        if (ch >= '0' && ch <= '9') {
            size_t b = L->pos;
            lex_run(L, 1, at);
            if (!(L->nt && L->t[L->nt - 1].t == T_DOT) && L->pos + 1 < n && s[L->pos] == '.' && s[L->pos + 1] >= '0' &&
                s[L->pos + 1] <= '9') {
                L->pos++;
                lex_run(L, 1, at);
            }
            push_tok(L, T_NUM, (str){s + b, L->pos - b}, at);
            continue;
        }
        if (is_word(ch)) {
            size_t b = L->pos;
            lex_run(L, 0, at);
            push_tok(L, T_IDENT, (str){s + b, L->pos - b}, at);
            continue;
        }
        size_t l;
        uint32_t cp = cp_at(s + at, n - at, &l);
        if (cp < 0x80)
            fail(c, at, "unexpected character '%c'", (char)cp);
        fail(c, at, "unexpected character U+%04X", (unsigned)cp);
    }
}

/* ------------------------------------------------------------------ AST and parser (parser.ts) */
enum nk {
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_MACRO, N_BREAK, N_CONTINUE, N_COMMENT,
    E_STR, E_INT, E_FLOAT, E_ARR, E_TUPLE, E_OBJ, E_IDENT, E_MEMBER, E_SLICE, E_CALL, E_KWARG, E_BIN, E_UNARY,
    E_FILTER, E_TEST, E_SELECT, E_TERNARY
};

typedef struct list {
    struct node **v;
    size_t n, cap;
} list;

typedef struct node {
    enum nk k;
    size_t off;
    str s;       /* literal, identifier, operator, filter/test name */
    double num;
    int flag;    /* member: computed; test: negated */
    struct node *a, *b, *c; /* operands: object/property, left/right, test/true/false, slice parts */
    list l1, l2; /* bodies, arguments, elements, object keys/values */
} node;

typedef struct parser {
    ctx *c;
    tok *t;
    size_t n, i;
    int depth;
    int in_macro;
} parser;

static node *nn(parser *P, enum nk k, size_t off)
{
    node *x = alloc(P->c, sizeof *x);
    x->k = k, x->off = off;
    return x;
}

static void lpush(ctx *c, list *l, node *x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        node **nv = alloc(c, cap * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv, l->cap = cap;
    }
    l->v[l->n++] = x;
}

static size_t here(const parser *P)
{
    return P->i < P->n ? P->t[P->i].off : P->c->src_n;
}

static const char *tt_name(enum tt t)
{
    static const char *const names[] = {"text", "number", "string", "identifier", "'='", "'('", "')'", "'{%'",
                                        "'%}'", "'{{'", "'}}'", "'['", "']'", "'{'", "'}'", "','", "'.'", "':'",
                                        "'|'", "operator", "operator", "'**'", "comparison", "operator", "comment"};
    return names[t];
}

static _Noreturn void perr(parser *P, const char *what)
{
    if (P->i >= P->n)
        fail(P->c, here(P), "%s, found the end of the template", what);
    fail(P->c, here(P), "%s, found %s '%.*s'", what, tt_name(P->t[P->i].t), (int)(P->t[P->i].v.n > 40 ? 40 : P->t[P->i].v.n),
         P->t[P->i].v.s);
}

static int is_t(const parser *P, enum tt t)
{
    return P->i < P->n && P->t[P->i].t == t;
}

static int is_ident(const parser *P, size_t ahead, const char *name)
{
    return P->i + ahead < P->n && P->t[P->i + ahead].t == T_IDENT && seq(P->t[P->i + ahead].v, name);
}

static tok *expect(parser *P, enum tt t, const char *what)
{
    if (!is_t(P, t))
        perr(P, what);
    return &P->t[P->i++];
}

static void expect_ident(parser *P, const char *name)
{
    if (!is_ident(P, 0, name)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s'", name);
        perr(P, m);
    }
    P->i++;
}

static int is_stmt(const parser *P, const char *const *names)
{
    if (!(P->i + 1 < P->n && P->t[P->i].t == T_OPEN_STMT && P->t[P->i + 1].t == T_IDENT))
        return 0;
    for (; *names; names++)
        if (seq(P->t[P->i + 1].v, *names))
            return 1;
    return 0;
}

static void enter(parser *P)
{
    if (++P->depth > MAX_DEPTH)
        fail(P->c, here(P), "the template nests more than %d deep", MAX_DEPTH);
}

static node *parse_any(parser *P);
static node *parse_expr(parser *P);
static node *parse_primary(parser *P);

/* Statements until one of names opens (not consumed). */
static void parse_body(parser *P, list *body, const char *const *names, const char *what)
{
    while (!is_stmt(P, names)) {
        if (P->i >= P->n) {
            char m[96];
            snprintf(m, sizeof m, "expected {%% %s %%}", what);
            perr(P, m);
        }
        lpush(P->c, body, parse_any(P));
    }
}

static node *parse_seq(parser *P, int primary)
{
    size_t off = here(P);
    node *first = primary ? parse_primary(P) : parse_expr(P);
    if (!is_t(P, T_COMMA))
        return first;
    node *t = nn(P, E_TUPLE, off);
    lpush(P->c, &t->l1, first);
    while (is_t(P, T_COMMA)) {
        P->i++;
        lpush(P->c, &t->l1, primary ? parse_primary(P) : parse_expr(P));
    }
    return t;
}

/* parseArgs: "(" args ")"; mode parameters (macro) or call. */
static void parse_args(parser *P, list *out, int params)
{
    expect(P, T_LPAREN, "expected '(' for an argument list");
    int kw = 0;
    while (!is_t(P, T_RPAREN)) {
        if (P->i >= P->n)
            perr(P, "expected ')'");
        size_t off = here(P);
        if (is_t(P, T_POW) || (is_t(P, T_MUL) && seq(P->t[P->i].v, "*")))
            unsup(P->c, off, "argument unpacking ('*' or '**')");
        node *a = parse_expr(P);
        if (is_t(P, T_EQUALS)) {
            P->i++;
            if (a->k != E_IDENT)
                fail(P->c, off, params ? "expected an identifier for a parameter declaration"
                                      : "expected an identifier for a keyword argument");
            node *k = nn(P, E_KWARG, off);
            k->s = a->s;
            k->a = parse_expr(P);
            a = k;
        }
        if (params) {
            if (a->k != E_IDENT && a->k != E_KWARG)
                fail(P->c, off, "expected an identifier for a parameter declaration");
            for (size_t i = 0; i < out->n; i++)
                if (seqs(out->v[i]->s, a->s))
                    fail(P->c, off, "duplicate parameter name '%.*s'", (int)a->s.n, a->s.s);
            if (seq(a->s, "kwargs") || seq(a->s, "varargs") || seq(a->s, "caller"))
                unsup(P->c, off, "a macro parameter named '%.*s'", (int)a->s.n, a->s.s);
        }
        if (a->k == E_KWARG)
            kw = 1;
        else if (kw)
            fail(P->c, off, params ? "non-default argument follows default argument"
                                  : "positional arguments must come before keyword arguments");
        lpush(P->c, out, a);
        if (is_t(P, T_COMMA))
            P->i++;
    }
    P->i++;
}

static node *parse_member(parser *P, node *ob);

static node *parse_call(parser *P, node *callee)
{
    enter(P);
    node *x = nn(P, E_CALL, callee->off);
    x->a = callee;
    parse_args(P, &x->l1, 0);
    x = parse_member(P, x);
    if (is_t(P, T_LPAREN))
        x = parse_call(P, x);
    P->depth--;
    return x;
}

static node *parse_member_args(parser *P)
{
    size_t off = here(P);
    node *parts[4] = {0};
    size_t np = 0;
    int slice = 0;
    while (!is_t(P, T_RBRACK)) {
        if (P->i >= P->n)
            perr(P, "expected ']'");
        if (np == 4)
            fail(P->c, off, "expected 0-3 arguments for a slice expression");
        if (is_t(P, T_COLON)) {
            parts[np++] = NULL;
            P->i++;
            slice = 1;
        } else {
            parts[np++] = parse_expr(P);
            if (is_t(P, T_COLON)) {
                P->i++;
                slice = 1;
            }
        }
    }
    if (!np)
        fail(P->c, off, "expected at least one argument for a member or slice expression");
    if (!slice)
        return parts[0];
    if (np > 3)
        fail(P->c, off, "expected 0-3 arguments for a slice expression");
    node *s = nn(P, E_SLICE, off);
    s->a = parts[0], s->b = np > 1 ? parts[1] : NULL, s->c = np > 2 ? parts[2] : NULL;
    return s;
}

static node *parse_member(parser *P, node *ob)
{
    while (is_t(P, T_DOT) || is_t(P, T_LBRACK)) {
        int computed = is_t(P, T_LBRACK);
        size_t off = here(P);
        P->i++;
        node *prop;
        if (computed) {
            prop = parse_member_args(P);
            expect(P, T_RBRACK, "expected ']'");
        } else {
            prop = parse_primary(P);
            if (prop->k != E_IDENT && prop->k != E_INT)
                fail(P->c, off, "expected an identifier or integer after '.'");
        }
        node *m = nn(P, E_MEMBER, off);
        m->a = ob, m->b = prop, m->flag = computed;
        ob = m;
    }
    return ob;
}

static node *parse_unary_sign(parser *P);

static node *parse_filter(parser *P)
{
    node *x = parse_unary_sign(P);
    while (is_t(P, T_PIPE)) {
        size_t off = here(P);
        P->i++;
        node *f = parse_primary(P);
        if (f->k != E_IDENT)
            fail(P->c, off, "expected an identifier for the filter");
        if (is_t(P, T_LPAREN))
            f = parse_call(P, f);
        node *e = nn(P, E_FILTER, off);
        e->a = x, e->b = f;
        x = e;
    }
    return x;
}

static node *parse_test(parser *P)
{
    node *x = parse_filter(P);
    while (is_ident(P, 0, "is")) {
        size_t off = here(P);
        P->i++;
        int neg = is_ident(P, 0, "not");
        if (neg)
            P->i++;
        node *t = parse_primary(P);
        if (t->k != E_IDENT)
            fail(P->c, off, "expected an identifier for the test");
        node *e = nn(P, E_TEST, off);
        e->a = x, e->s = t->s, e->flag = neg;
        x = e;
    }
    return x;
}

static node *bin(parser *P, tok *op, node *l, node *r)
{
    node *e = nn(P, E_BIN, op->off);
    e->s = op->v, e->a = l, e->b = r;
    return e;
}

static node *parse_pow(parser *P)
{
    node *l = parse_test(P);
    while (is_t(P, T_POW)) {
        tok *op = &P->t[P->i++];
        l = bin(P, op, l, parse_test(P));
    }
    return l;
}

static node *parse_mul(parser *P)
{
    node *l = parse_pow(P);
    while (is_t(P, T_MUL)) {
        tok *op = &P->t[P->i++];
        l = bin(P, op, l, parse_pow(P));
    }
    return l;
}

static node *parse_add(parser *P)
{
    node *l = parse_mul(P);
    while (is_t(P, T_ADD)) {
        tok *op = &P->t[P->i++];
        l = bin(P, op, l, parse_mul(P));
    }
    return l;
}

static node *parse_cmp(parser *P)
{
    node *l = parse_add(P);
    for (;;) {
        size_t off = here(P);
        str op;
        if (is_ident(P, 0, "not") && is_ident(P, 1, "in")) {
            op = (str){"not in", 6};
            P->i += 2;
        } else if (is_ident(P, 0, "in") || is_t(P, T_CMP)) {
            op = P->t[P->i++].v;
        } else
            break;
        node *r = parse_add(P);
        node *e = nn(P, E_BIN, off);
        e->s = op, e->a = l, e->b = r;
        l = e;
    }
    return l;
}

/* parser.ts parseLogicalNegationExpression: a while loop in which each "not" replaces what the
 * previous one parsed, so "not a not b" is "not b". */
static node *parse_not(parser *P)
{
    node *right = NULL;
    while (is_ident(P, 0, "not")) {
        size_t off = here(P);
        P->i++;
        enter(P);
        node *e = nn(P, E_UNARY, off);
        e->s = (str){"not", 3};
        e->a = parse_not(P);
        P->depth--;
        right = e;
    }
    return right ? right : parse_cmp(P);
}

static node *parse_and(parser *P)
{
    node *l = parse_not(P);
    while (is_ident(P, 0, "and")) {
        tok *op = &P->t[P->i++];
        l = bin(P, op, l, parse_not(P));
    }
    return l;
}

static node *parse_or(parser *P)
{
    node *l = parse_and(P);
    while (is_ident(P, 0, "or")) {
        tok *op = &P->t[P->i++];
        l = bin(P, op, l, parse_and(P));
    }
    return l;
}

static node *parse_expr(parser *P)
{
    enter(P);
    node *a = parse_or(P);
    if (is_ident(P, 0, "if")) {
        size_t off = here(P);
        P->i++;
        node *test = parse_or(P);
        if (is_ident(P, 0, "else")) {
            P->i++;
            node *e = nn(P, E_TERNARY, off);
            e->a = test, e->b = a, e->c = parse_expr(P);
            a = e;
        } else {
            node *e = nn(P, E_SELECT, off);
            e->a = a, e->b = test;
            a = e;
        }
    }
    P->depth--;
    return a;
}

static node *parse_unary_sign(parser *P)
{
    if (P->i < P->n && (P->t[P->i].t == T_UNARY || P->t[P->i].t == T_ADD) &&
        (seq(P->t[P->i].v, "-") || seq(P->t[P->i].v, "+"))) {
        tok *op = &P->t[P->i++];
        enter(P);
        node *e = nn(P, E_UNARY, op->off);
        e->s = op->v;
        e->a = parse_unary_sign(P);
        P->depth--;
        return e;
    }
    node *m = parse_member(P, parse_primary(P));
    if (is_t(P, T_LPAREN))
        return parse_call(P, m);
    return m;
}

static node *parse_primary(parser *P)
{
    if (P->i >= P->n)
        perr(P, "expected an expression");
    tok *t = &P->t[P->i++];
    node *x;
    switch (t->t) {
    case T_NUM: {
        int is_float = memchr(t->v.s, '.', t->v.n) != NULL;
        x = nn(P, is_float ? E_FLOAT : E_INT, t->off);
        char buf[64];
        if (t->v.n >= sizeof buf)
            unsup(P->c, t->off, "a number literal of %zu characters", t->v.n);
        memcpy(buf, t->v.s, t->v.n);
        buf[t->v.n] = 0;
        x->num = strtod(buf, NULL);
        return x;
    }
    case T_STR: {
        x = nn(P, E_STR, t->off);
        x->s = t->v;
        while (is_t(P, T_STR))
            x->s = scat(P->c, x->s, P->t[P->i++].v);
        return x;
    }
    case T_IDENT:
        x = nn(P, E_IDENT, t->off);
        x->s = t->v;
        if (P->in_macro && (seq(x->s, "kwargs") || seq(x->s, "varargs")))
            unsup(P->c, t->off, "'%.*s' in a macro", (int)x->s.n, x->s.s);
        return x;
    case T_LPAREN:
        enter(P);
        x = parse_seq(P, 0);
        expect(P, T_RPAREN, "expected ')'");
        P->depth--;
        return x;
    case T_LBRACK:
        enter(P);
        x = nn(P, E_ARR, t->off);
        while (!is_t(P, T_RBRACK)) {
            if (P->i >= P->n)
                perr(P, "expected ']'");
            lpush(P->c, &x->l1, parse_expr(P));
            if (is_t(P, T_COMMA))
                P->i++;
        }
        P->i++;
        P->depth--;
        return x;
    case T_LBRACE:
        enter(P);
        x = nn(P, E_OBJ, t->off);
        while (!is_t(P, T_RBRACE)) {
            if (P->i >= P->n)
                perr(P, "expected '}'");
            lpush(P->c, &x->l1, parse_expr(P));
            expect(P, T_COLON, "expected ':' between key and value in an object literal");
            lpush(P->c, &x->l2, parse_expr(P));
            if (is_t(P, T_COMMA))
                P->i++;
        }
        P->i++;
        P->depth--;
        return x;
    default:
        P->i--;
        perr(P, "expected an expression");
    }
}

static node *parse_if(parser *P, size_t off)
{
    static const char *const stop[] = {"elif", "else", "endif", NULL}, *const endif[] = {"endif", NULL};
    enter(P);
    node *x = nn(P, N_IF, off);
    x->a = parse_expr(P);
    expect(P, T_CLOSE_STMT, "expected '%}'");
    parse_body(P, &x->l1, stop, "endif");
    if (is_stmt(P, (const char *const[]){"elif", NULL})) {
        size_t o = here(P);
        P->i += 2;
        lpush(P->c, &x->l2, parse_if(P, o));
    } else if (is_stmt(P, (const char *const[]){"else", NULL})) {
        P->i += 2;
        expect(P, T_CLOSE_STMT, "expected '%}'");
        parse_body(P, &x->l2, endif, "endif");
    }
    P->depth--;
    return x;
}

static node *parse_stmt(parser *P)
{
    size_t off = here(P);
    expect(P, T_OPEN_STMT, "expected '{%'");
    if (!is_t(P, T_IDENT))
        perr(P, "expected a statement name");
    str name = P->t[P->i].v;
    size_t noff = here(P);
    P->i++;
    node *x;
    enter(P);
    if (seq(name, "set")) {
        x = nn(P, N_SET, off);
        x->a = parse_seq(P, 0);
        if (is_t(P, T_EQUALS)) {
            P->i++;
            x->b = parse_seq(P, 0);
        } else {
            static const char *const endset[] = {"endset", NULL};
            expect(P, T_CLOSE_STMT, "expected '=' or '%}'");
            parse_body(P, &x->l1, endset, "endset");
            P->i++;
            expect_ident(P, "endset");
        }
        expect(P, T_CLOSE_STMT, "expected '%}'");
    } else if (seq(name, "if")) {
        x = parse_if(P, off);
        expect(P, T_OPEN_STMT, "expected {% endif %}");
        expect_ident(P, "endif");
        expect(P, T_CLOSE_STMT, "expected '%}'");
    } else if (seq(name, "macro")) {
        static const char *const endmacro[] = {"endmacro", NULL};
        x = nn(P, N_MACRO, off);
        node *nm = parse_primary(P);
        if (nm->k != E_IDENT)
            fail(P->c, nm->off, "expected an identifier after 'macro'");
        x->s = nm->s;
        parse_args(P, &x->l2, 1);
        expect(P, T_CLOSE_STMT, "expected '%}'");
        P->in_macro++;
        parse_body(P, &x->l1, endmacro, "endmacro");
        P->in_macro--;
        P->i++;
        expect_ident(P, "endmacro");
        expect(P, T_CLOSE_STMT, "expected '%}'");
    } else if (seq(name, "for")) {
        static const char *const stop[] = {"endfor", "else", NULL}, *const endfor[] = {"endfor", NULL};
        x = nn(P, N_FOR, off);
        x->a = parse_seq(P, 1);
        if (x->a->k != E_IDENT && x->a->k != E_TUPLE)
            fail(P->c, x->a->off, "expected an identifier or tuple for the loop variable");
        if (!is_ident(P, 0, "in"))
            perr(P, "expected 'in' after the loop variable");
        P->i++;
        x->b = parse_expr(P);
        expect(P, T_CLOSE_STMT, "expected '%}'");
        parse_body(P, &x->l1, stop, "endfor");
        if (is_stmt(P, (const char *const[]){"else", NULL})) {
            P->i += 2;
            expect(P, T_CLOSE_STMT, "expected '%}'");
            parse_body(P, &x->l2, endfor, "endfor");
        }
        expect(P, T_OPEN_STMT, "expected {% endfor %}");
        expect_ident(P, "endfor");
        expect(P, T_CLOSE_STMT, "expected '%}'");
    } else if (seq(name, "break") || seq(name, "continue")) {
        x = nn(P, seq(name, "break") ? N_BREAK : N_CONTINUE, off);
        expect(P, T_CLOSE_STMT, "expected '%}'");
    } else if (seq(name, "call") || seq(name, "filter") || seq(name, "generation") || seq(name, "endgeneration")) {
        unsup(P->c, noff, "the statement '%.*s'", (int)name.n, name.s);
    } else {
        unsup(P->c, noff, "the statement '%.*s'", (int)(name.n > 40 ? 40 : name.n), name.s);
    }
    P->depth--;
    return x;
}

static node *parse_any(parser *P)
{
    tok *t = &P->t[P->i];
    node *x;
    switch (t->t) {
    case T_COMMENT:
        P->i++;
        return nn(P, N_COMMENT, t->off);
    case T_TEXT:
        P->i++;
        x = nn(P, N_TEXT, t->off);
        x->s = t->v;
        return x;
    case T_OPEN_STMT:
        return parse_stmt(P);
    case T_OPEN_EXPR:
        P->i++;
        x = nn(P, N_OUT, t->off);
        x->a = parse_expr(P);
        expect(P, T_CLOSE_EXPR, "expected '}}'");
        return x;
    default:
        perr(P, "unexpected token");
    }
}

/* ------------------------------------------------------------------ environments */
typedef struct env {
    struct env *parent;
    str *k;
    val **v;
    size_t n, cap;
} env;

static env *env_new(ctx *c, env *parent)
{
    env *e = alloc(c, sizeof *e);
    e->parent = parent;
    return e;
}

static void env_set(ctx *c, env *e, str k, val *v)
{
    for (size_t i = 0; i < e->n; i++)
        if (seqs(e->k[i], k)) {
            e->v[i] = v;
            return;
        }
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        str *nk = alloc(c, cap * sizeof *nk);
        val **nv = alloc(c, cap * sizeof *nv);
        if (e->n) {
            memcpy(nk, e->k, e->n * sizeof *nk);
            memcpy(nv, e->v, e->n * sizeof *nv);
        }
        e->k = nk, e->v = nv, e->cap = cap;
    }
    e->k[e->n] = k;
    e->v[e->n++] = v;
}

static val *env_get(ctx *c, env *e, str k)
{
    for (; e; e = e->parent) {
        step(c, NOPOS, e->n / 16);
        for (size_t i = 0; i < e->n; i++)
            if (seqs(e->k[i], k))
                return e->v[i];
    }
    return &V_undef;
}

/* ------------------------------------------------------------------ interpreter (runtime.ts) */
enum flow { FL_NONE, FL_BREAK, FL_CONTINUE };

static val *eval(ctx *c, node *x, env *e);
static enum flow exec_block(ctx *c, list *body, env *e);

static void enter_eval(ctx *c, size_t off)
{
    if (++c->depth > MAX_EVAL_DEPTH)
        fail(c, off, "the render recurses more than %d deep", MAX_EVAL_DEPTH);
}

typedef struct args {
    val **pos;
    size_t npos;
    val *kw; /* V_KWARGS or NULL */
} args;

static args eval_args(ctx *c, list *l, env *e)
{
    args a = {0};
    a.pos = alloc(c, (l->n + 1) * sizeof *a.pos);
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i]->k != E_KWARG)
            a.pos[a.npos++] = eval(c, l->v[i], e);
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i]->k == E_KWARG) {
            if (!a.kw)
                a.kw = mk_obj(c, V_KWARGS);
            if (obj_find(c, a.kw->o, l->v[i]->s) >= 0)
                fail(c, l->v[i]->off, "got multiple values for keyword argument '%.*s'", (int)l->v[i]->s.n,
                     l->v[i]->s.s);
            obj_set(c, a.kw->o, l->v[i]->s, eval(c, l->v[i]->a, e));
        }
    return a;
}

static val *kwarg(ctx *c, const args *a, const char *k)
{
    return a->kw ? obj_get(c, a->kw->o, (str){k, strlen(k)}) : NULL;
}

/* A boolean argument: positional i, else keyword name, else NULL (false); anything else fails. */
static val *flag_arg(ctx *c, const args *a, size_t i, const char *name, size_t off)
{
    val *v = i < a->npos ? a->pos[i] : kwarg(c, a, name);
    if (v && v->k != V_BOOL)
        fail(c, off, "%s must be a boolean", name);
    return v;
}

static str render_block_to_str(ctx *c, list *body, env *e, size_t off)
{
    tq_sb *saved = c->out, *b = sb_new(c);
    c->out = b;
    enum flow f = exec_block(c, body, e);
    c->out = saved;
    if (f != FL_NONE) {
        tq_sb_free(b);
        fail(c, off, "'break' or 'continue' outside a loop");
    }
    return sb_take(c, b, off);
}

static val *call_macro(ctx *c, node *m, args *a, env *caller, size_t off)
{
    env *scope = env_new(c, caller);
    size_t np = m->l2.n;
    if (a->npos > np)
        fail(c, off, "macro '%.*s' takes not more than %zu argument(s)", (int)m->s.n, m->s.s, np);
    obj *kw = NULL;
    if (a->kw) { /* a copy: bound names are taken out of it */
        kw = alloc(c, sizeof *kw);
        for (size_t i = 0; i < a->kw->o->n; i++)
            obj_set(c, kw, a->kw->o->k[i], a->kw->o->v[i]);
    }
    int *pending = alloc(c, (np + 1) * sizeof *pending);
    for (size_t i = 0; i < np; i++) {
        node *p = m->l2.v[i];
        val *v = i < a->npos ? a->pos[i] : NULL;
        if (!v && kw) {
            long j = obj_find(c, kw, p->s);
            if (j >= 0) {
                v = kw->v[j];
                memmove(kw->k + j, kw->k + j + 1, (kw->n - (size_t)j - 1) * sizeof *kw->k);
                memmove(kw->v + j, kw->v + j + 1, (kw->n - (size_t)j - 1) * sizeof *kw->v);
                kw->n--;
            }
        }
        if (!v && p->k == E_KWARG)
            pending[i] = 1;
        env_set(c, scope, p->s, v ? v : &V_undef);
    }
    if (kw && kw->n)
        fail(c, off, "macro '%.*s' takes no keyword argument '%.*s'", (int)m->s.n, m->s.s, (int)kw->k[0].n,
             kw->k[0].s);
    for (size_t i = 0; i < np; i++)
        if (pending[i])
            env_set(c, scope, m->l2.v[i]->s, eval(c, m->l2.v[i]->a, scope));
    return mk_str(c, render_block_to_str(c, &m->l1, scope, off));
}

static const char *const month_abbr[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const month_full[] = {"January", "February", "March",     "April",   "May",      "June",
                                         "July",    "August",   "September", "October", "November", "December"};

/* utils.ts strftime: %Y %m %d %b %B %H %M %%, others as they are; UTC, English month names. */
static val *strftime_now(ctx *c, str fmt)
{
    time_t t = (time_t)c->now;
    struct tm tm;
    if (!gmtime_r(&t, &tm))
        memset(&tm, 0, sizeof tm);
    tq_sb *b = sb_new(c);
    for (size_t i = 0; i < fmt.n; i++) {
        if (fmt.s[i] == '%' && i + 1 < fmt.n && strchr("YmdbBHM%", fmt.s[i + 1])) {
            switch (fmt.s[++i]) {
            case 'Y': tq_sb_printf(b, "%d", tm.tm_year + 1900); break;
            case 'm': tq_sb_printf(b, "%02d", tm.tm_mon + 1); break;
            case 'd': tq_sb_printf(b, "%02d", tm.tm_mday); break;
            case 'b': tq_sb_str(b, month_abbr[tm.tm_mon]); break;
            case 'B': tq_sb_str(b, month_full[tm.tm_mon]); break;
            case 'H': tq_sb_printf(b, "%02d", tm.tm_hour); break;
            case 'M': tq_sb_printf(b, "%02d", tm.tm_min); break;
            default: tq_sb_put(b, "%", 1); break;
            }
        } else
            tq_sb_put(b, fmt.s + i, 1);
    }
    return mk_str(c, sb_take(c, b, NOPOS));
}

static str arg_str(ctx *c, val *v, const char *what, size_t off)
{
    if (!v || v->k != V_STR)
        fail(c, off, "%s must be a string", what);
    return v->s;
}

/* JS String.prototype.replace with a global, Unicode regex of the literal old. */
static str str_replace(ctx *c, str s, str old, str new, double count, size_t off)
{
    double left = count < 0 || isnan(count) ? INFINITY : count;
    if (count == 0)
        return s;
    tq_sb *b = sb_new(c);
    size_t i = 0, l;
    if (!old.n) {
        for (;;) {
            if (left > 0)
                tq_sb_put(b, new.s, new.n), left--;
            if (i >= s.n)
                break;
            cp_at(s.s + i, s.n - i, &l);
            tq_sb_put(b, s.s + i, l);
            i += l;
            step(c, off, 1);
        }
        return sb_take(c, b, off);
    }
    while (i < s.n) {
        step(c, off, 1);
        if (left > 0 && s.n - i >= old.n && !memcmp(s.s + i, old.s, old.n)) {
            tq_sb_put(b, new.s, new.n);
            left--;
            i += old.n;
        } else if (s.n - i >= old.n && !memcmp(s.s + i, old.s, old.n)) {
            tq_sb_put(b, old.s, old.n);
            i += old.n;
        } else
            tq_sb_put(b, s.s + i++, 1);
    }
    return sb_take(c, b, off);
}

static str ascii_case(ctx *c, str s, int upper, const char *what, size_t off)
{
    if (has_non_ascii(s))
        unsup(c, off, "%s of non-ASCII text (Unicode case mapping)", what);
    char *p = alloc(c, s.n + 1);
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.s[i];
        p[i] = upper ? (ch >= 'a' && ch <= 'z' ? ch - 32 : ch) : (ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    }
    return (str){p, s.n};
}

static str title_case(ctx *c, str s)
{
    char *p = alloc(c, s.n + 1);
    memcpy(p, s.s, s.n);
    for (size_t i = 0; i < s.n; i++)
        if (is_word(p[i]) && (i == 0 || !is_word(s.s[i - 1])) && p[i] >= 'a' && p[i] <= 'z')
            p[i] -= 32;
    return (str){p, s.n};
}

static val *split(ctx *c, str s, val *sep, val *maxv, size_t off)
{
    if (sep && sep->k != V_STR && sep->k != V_NULL)
        fail(c, off, "split(): the separator must be a string or none");
    if (maxv && maxv->k != V_INT)
        fail(c, off, "split(): maxsplit must be an integer");
    double max = maxv ? maxv->d : -1;
    val *r = mk_arr(c, V_ARR);
    if (!sep || sep->k == V_NULL) {
        str t = js_trim(s, 1, 0);
        size_t i = 0, l;
        while (i < t.n) {
            step(c, off, 1);
            while (i < t.n && js_space(cp_at(t.s + i, t.n - i, &l)))
                i += l;
            if (i >= t.n)
                break;
            size_t b = i;
            if (max != -1 && (double)r->a->n >= max) {
                arr_push(c, r->a, mk_str(c, (str){t.s + b, t.n - b}));
                break;
            }
            while (i < t.n && !js_space(cp_at(t.s + i, t.n - i, &l)))
                i += l;
            arr_push(c, r->a, mk_str(c, (str){t.s + b, i - b}));
        }
        return r;
    }
    str p = sep->s;
    if (!p.n)
        fail(c, off, "split(): empty separator");
    size_t b = 0;
    for (size_t i = 0; i + p.n <= s.n;) {
        step(c, off, 1);
        if (!memcmp(s.s + i, p.s, p.n) && !(max != -1 && (double)r->a->n >= max)) {
            arr_push(c, r->a, mk_str(c, (str){s.s + b, i - b}));
            i += p.n;
            b = i;
        } else
            i++;
    }
    arr_push(c, r->a, mk_str(c, (str){s.s + b, s.n - b}));
    return r;
}

static int prefix_match(str s, str p, int end)
{
    return s.n >= p.n && !memcmp(end ? s.s + s.n - p.n : s.s, p.s, p.n);
}

static val *attr_path(ctx *c, val *item, str path);

/* ECMAScript's string order: UTF-16 code units, compared in sequence. */
static int cmp_utf16(str a, str b)
{
    size_t i = 0, j = 0, la, lb;
    while (i < a.n && j < b.n) {
        uint32_t x = cp_at(a.s + i, a.n - i, &la), y = cp_at(b.s + j, b.n - j, &lb);
        if (x != y) {
            uint32_t ux = x < 0x10000 ? x : 0xD800 + ((x - 0x10000) >> 10);
            uint32_t uy = y < 0x10000 ? y : 0xD800 + ((y - 0x10000) >> 10);
            if (ux == uy) { /* two characters outside the BMP with one high surrogate */
                ux = 0xDC00 + ((x - 0x10000) & 0x3FF);
                uy = 0xDC00 + ((y - 0x10000) & 0x3FF);
            }
            return ux < uy ? -1 : 1;
        }
        i += la, j += lb;
    }
    return i < a.n ? 1 : j < b.n ? -1 : 0;
}

/* runtime.ts compareRuntimeValues: none with none and undefined with undefined are equal,
 * numbers and booleans compare as numbers, strings as strings (lower-cased unless
 * case_sensitive), anything else is an error. */
static int cmp_values(ctx *c, const val *a, const val *b, int case_sensitive, size_t off)
{
    if (a->k == V_NULL || b->k == V_NULL || a->k == V_UNDEF || b->k == V_UNDEF) {
        if (a->k == b->k)
            return 0;
        fail(c, off, "cannot compare %s with %s", vk_name[a->k], vk_name[b->k]);
    }
    int an = is_num(a) || a->k == V_BOOL, bn = is_num(b) || b->k == V_BOOL;
    if (an && bn) {
        double x = a->k == V_BOOL ? a->b : a->d, y = b->k == V_BOOL ? b->b : b->d;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a->k != b->k)
        fail(c, off, "cannot compare %s with %s", vk_name[a->k], vk_name[b->k]);
    if (a->k != V_STR)
        fail(c, off, "cannot compare %s", vk_name[a->k]);
    if (case_sensitive)
        return cmp_utf16(a->s, b->s);
    if (has_non_ascii(a->s) || has_non_ascii(b->s))
        unsup(c, off, "sorting non-ASCII text without case_sensitive (Unicode case mapping)");
    size_t n = a->s.n < b->s.n ? a->s.n : b->s.n;
    for (size_t i = 0; i < n; i++) {
        int x = (unsigned char)a->s.s[i], y = (unsigned char)b->s.s[i];
        x = x >= 'A' && x <= 'Z' ? x + 32 : x;
        y = y >= 'A' && y <= 'Z' ? y + 32 : y;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return a->s.n < b->s.n ? -1 : a->s.n > b->s.n ? 1 : 0;
}

typedef struct sort_by {
    ctx *c;
    size_t off;
    int case_sensitive, reverse;
    val *attr;  /* sort: an attribute path (string or integer), or NULL */
    int index;  /* dictsort: 0 key, 1 value; -1 for sort */
} sort_by;

static const val *sort_key(const sort_by *k, val *x)
{
    if (k->index >= 0)
        return x->a->v[k->index];
    if (!k->attr)
        return x;
    str path = k->attr->k == V_STR ? k->attr->s : to_str(k->c, k->off, k->attr, 0);
    return attr_path(k->c, x, path);
}

/* A stable merge sort (V8's sort is stable, and the comparator a total preorder), so the
 * order is the one Array.prototype.sort gives. */
static void sort_vals(const sort_by *k, val **v, size_t n)
{
    if (n < 2)
        return;
    val **tmp = alloc(k->c, n * sizeof *tmp);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                step(k->c, k->off, 1);
                int r = cmp_values(k->c, sort_key(k, v[j]), sort_key(k, v[i]), k->case_sensitive, k->off);
                if (k->reverse)
                    r = -r;
                tmp[o++] = r < 0 ? v[j++] : v[i++];
            }
            while (i < mid)
                tmp[o++] = v[i++];
            while (j < hi)
                tmp[o++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
    }
}

static val *flag_arg(ctx *c, const args *a, size_t i, const char *name, size_t off);

static val *call_method(ctx *c, func *f, args *a, size_t off)
{
    val *self = f->self;
    const char *m = f->name;
    val *a0 = a->npos > 0 ? a->pos[0] : NULL, *a1 = a->npos > 1 ? a->pos[1] : NULL;
    if (self->k == V_STR) {
        str s = self->s;
        if (!strcmp(m, "upper") || !strcmp(m, "lower"))
            return mk_str(c, ascii_case(c, s, m[0] == 'u', m, off));
        if (!strcmp(m, "strip"))
            return mk_str(c, js_trim(s, 1, 1));
        if (!strcmp(m, "lstrip"))
            return mk_str(c, js_trim(s, 1, 0));
        if (!strcmp(m, "rstrip"))
            return mk_str(c, js_trim(s, 0, 1));
        if (!strcmp(m, "title"))
            return mk_str(c, title_case(c, s));
        if (!strcmp(m, "capitalize")) {
            if (s.n && (unsigned char)s.s[0] >= 0x80)
                unsup(c, off, "capitalize of non-ASCII text (Unicode case mapping)");
            str r = sdup(c, s.s, s.n);
            if (r.n && r.s[0] >= 'a' && r.s[0] <= 'z')
                ((char *)r.s)[0] -= 32;
            return mk_str(c, r);
        }
        if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
            int end = m[0] == 'e';
            if (!a0)
                fail(c, off, "%s() requires at least one argument", m);
            if (a0->k == V_STR)
                return mk_bool(c, prefix_match(s, a0->s, end));
            if (is_arr(a0)) {
                for (size_t i = 0; i < a0->a->n; i++) {
                    if (a0->a->v[i]->k != V_STR)
                        fail(c, off, "%s() tuple elements must be strings", m);
                    if (prefix_match(s, a0->a->v[i]->s, end))
                        return mk_bool(c, 1);
                }
                return mk_bool(c, 0);
            }
            fail(c, off, "%s() argument must be a string or tuple of strings", m);
        }
        if (!strcmp(m, "split"))
            return split(c, s, a0, a1, off);
        if (!strcmp(m, "replace")) {
            if (a->npos + (a->kw ? 1 : 0) < 2)
                fail(c, off, "replace() requires at least two arguments");
            str o = arg_str(c, a0, "replace()'s arguments", off), n = arg_str(c, a1, "replace()'s arguments", off);
            val *cnt = a->npos > 2 ? a->pos[2] : (a->kw ? kwarg(c, a, "count") : NULL);
            if (cnt && cnt->k != V_INT && cnt->k != V_NULL)
                fail(c, off, "replace() count must be a number or none");
            return mk_str(c, str_replace(c, s, o, n, cnt && cnt->k == V_INT ? cnt->d : -1, off));
        }
    } else if (is_obj(self)) {
        obj *o = self->o;
        if (!strcmp(m, "get")) {
            if (!a0 || a0->k != V_STR)
                fail(c, off, "get(): the key must be a string");
            val *v = obj_get(c, o, a0->s);
            return v ? v : a1 ? a1 : &V_null;
        }
        if (!strcmp(m, "dictsort")) {
            val *cs = flag_arg(c, a, 0, "case_sensitive", off), *rev = flag_arg(c, a, 2, "reverse", off);
            val *by = a->npos > 1 ? a->pos[1] : kwarg(c, a, "by");
            if (by && (by->k != V_STR || !(seq(by->s, "key") || seq(by->s, "value"))))
                fail(c, off, "dictsort: by must be 'key' or 'value'");
            val *r = mk_arr(c, V_ARR);
            for (size_t i = 0; i < o->n; i++) {
                val *p = mk_arr(c, V_ARR);
                arr_push(c, p->a, mk_str(c, o->k[i]));
                arr_push(c, p->a, o->v[i]);
                arr_push(c, r->a, p);
            }
            sort_by k = {c, off, cs && cs->b, rev && rev->b, NULL, by && seq(by->s, "value") ? 1 : 0};
            sort_vals(&k, r->a->v, r->a->n);
            return r;
        }
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            val *r = mk_arr(c, V_ARR);
            for (size_t i = 0; i < o->n; i++) {
                step(c, off, 1);
                if (m[0] == 'i') {
                    val *p = mk_arr(c, V_ARR);
                    arr_push(c, p->a, mk_str(c, o->k[i]));
                    arr_push(c, p->a, o->v[i]);
                    arr_push(c, r->a, p);
                } else
                    arr_push(c, r->a, m[0] == 'k' ? mk_str(c, o->k[i]) : o->v[i]);
            }
            return r;
        }
    }
    unsup(c, off, "the method '%s'", m);
}

static val *call_func(ctx *c, val *fn, args *a, env *e, size_t off)
{
    if (fn->k != V_FUNC)
        fail(c, off, "cannot call %s", vk_name[fn->k]);
    func *f = fn->f;
    switch (f->kind) {
    case F_MACRO:
        return call_macro(c, f->macro, a, e, off);
    case F_METHOD:
        return call_method(c, f, a, off);
    case F_RAISE: {
        val *m = a->npos ? a->pos[0] : &V_undef;
        str s = m->k == V_STR ? m->s : to_str(c, off, m, 1);
        fail(c, off, "raise_exception: %.*s", (int)(s.n > 600 ? 600 : s.n), s.s);
    }
    case F_STRFTIME:
        if (!a->npos || a->pos[0]->k != V_STR)
            unsup(c, off, "strftime_now without a format string");
        return strftime_now(c, a->pos[0]->s);
    case F_RANGE: {
        double v[3] = {0, 0, 1};
        if (a->kw || a->npos < 1 || a->npos > 3)
            unsup(c, off, "range() with %zu arguments or keyword arguments", a->npos);
        for (size_t i = 0; i < a->npos; i++) {
            if (a->pos[i]->k != V_INT)
                unsup(c, off, "range() of %s", vk_name[a->pos[i]->k]);
            v[i] = a->pos[i]->d;
        }
        double start = a->npos == 1 ? 0 : v[0], stop = a->npos == 1 ? v[0] : v[1], st = a->npos == 3 ? v[2] : 1;
        if (st == 0)
            fail(c, off, "range() step must not be zero");
        val *r = mk_arr(c, V_ARR);
        for (double i = start; st > 0 ? i < stop : i > stop; i += st) {
            step(c, off, 1);
            arr_push(c, r->a, mk_num(c, V_INT, i));
        }
        return r;
    }
    case F_NAMESPACE: {
        if (a->npos > 1)
            fail(c, off, "namespace expected at most 1 argument, got %zu", a->npos);
        val *ns = mk_obj(c, V_NS);
        if (a->npos == 1) {
            val *src = a->pos[0];
            if (is_obj(src)) {
                for (size_t i = 0; i < src->o->n; i++)
                    obj_set(c, ns->o, src->o->k[i], src->o->v[i]);
            } else
                unsup(c, off, "namespace() of %s", vk_name[src->k]);
        }
        if (a->kw)
            for (size_t i = 0; i < a->kw->o->n; i++)
                obj_set(c, ns->o, a->kw->o->k[i], a->kw->o->v[i]);
        return ns;
    }
    }
    fail(c, off, "cannot call this function");
}

/* utils.ts slice */
static void slice_bounds(double n, val *vs, val *ve, val *vst, double *start, double *stop, double *stp)
{
    double st = vst->k == V_UNDEF ? 1 : vst->d;
    double s, e;
    int dir = st > 0 ? 1 : st < 0 ? -1 : 0;
    if (dir >= 0) {
        s = vs->k == V_UNDEF ? 0 : vs->d;
        s = s < 0 ? fmax(n + s, 0) : fmin(s, n);
        e = ve->k == V_UNDEF ? n : ve->d;
        e = e < 0 ? fmax(n + e, 0) : fmin(e, n);
    } else {
        s = vs->k == V_UNDEF ? n - 1 : vs->d;
        s = s < 0 ? fmax(n + s, -1) : fmin(s, n - 1);
        e = ve->k == V_UNDEF ? -1 : ve->d;
        e = e < -1 ? fmax(n + e, -1) : fmin(e, n - 1);
    }
    *start = s, *stop = e, *stp = st;
}

static val *eval_slice(ctx *c, val *o, node *sl, env *e)
{
    if (!is_arr(o) && o->k != V_STR)
        fail(c, sl->off, "only a list or a string can be sliced, not %s", vk_name[o->k]);
    val *vs = sl->a ? eval(c, sl->a, e) : &V_undef, *ve = sl->b ? eval(c, sl->b, e) : &V_undef,
        *vst = sl->c ? eval(c, sl->c, e) : &V_undef;
    val *parts[3] = {vs, ve, vst};
    for (int i = 0; i < 3; i++)
        if (parts[i]->k != V_INT && parts[i]->k != V_UNDEF)
            fail(c, sl->off, "slice bounds must be integers");
    double s, t, st;
    if (is_arr(o)) {
        slice_bounds((double)o->a->n, vs, ve, vst, &s, &t, &st);
        val *r = mk_arr(c, V_ARR);
        int dir = st > 0 ? 1 : st < 0 ? -1 : 0;
        for (double i = s; dir * i < dir * t; i += st) {
            step(c, sl->off, 1);
            arr_push(c, r->a, o->a->v[(size_t)i]);
        }
        return r;
    }
    /* a string: by code points */
    size_t n = cp_count(o->s), l;
    const char **at = alloc(c, (n + 1) * sizeof *at);
    size_t k = 0;
    for (size_t i = 0; i < o->s.n; i += l, k++) {
        at[k] = o->s.s + i;
        cp_at(o->s.s + i, o->s.n - i, &l);
    }
    at[n] = o->s.s + o->s.n;
    slice_bounds((double)n, vs, ve, vst, &s, &t, &st);
    tq_sb *b = sb_new(c);
    int dir = st > 0 ? 1 : st < 0 ? -1 : 0;
    for (double i = s; dir * i < dir * t; i += st) {
        step(c, sl->off, 1);
        tq_sb_put(b, at[(size_t)i], (size_t)(at[(size_t)i + 1] - at[(size_t)i]));
    }
    return mk_str(c, sb_take(c, b, sl->off));
}

static const char *const str_methods[] = {"upper",  "lower",      "strip",    "title", "capitalize", "rstrip",
                                          "lstrip", "startswith", "endswith", "split", "replace",    NULL};
static const char *const obj_methods[] = {"get", "items", "keys", "values", "dictsort", NULL};

static const char *find_name(const char *const *names, str k)
{
    for (; *names; names++)
        if (seq(k, *names))
            return *names;
    return NULL;
}

static val *member(ctx *c, val *o, val *p, size_t off)
{
    if (is_obj(o) || o->k == V_NS) {
        if (p->k != V_STR)
            fail(c, off, "cannot access a property with %s", vk_name[p->k]);
        val *v = obj_get(c, o->o, p->s);
        if (v)
            return v;
        if (is_obj(o)) {
            const char *m = find_name(obj_methods, p->s);
            if (m)
                return mk_func(c, F_METHOD, m, o, NULL);
        }
        return &V_undef;
    }
    if (is_arr(o) || o->k == V_STR) {
        if (p->k == V_INT) {
            double i = p->d;
            if (is_arr(o)) {
                double n = (double)o->a->n;
                if (i < 0)
                    i += n;
                return i >= 0 && i < n ? o->a->v[(size_t)i] : &V_undef;
            }
            double n = (double)utf16_len(o->s);
            if (i < 0)
                i += n;
            if (!(i >= 0 && i < n))
                return &V_undef;
            size_t u = 0, l;
            for (size_t b = 0; b < o->s.n; b += l) {
                uint32_t cp = cp_at(o->s.s + b, o->s.n - b, &l);
                size_t w = cp >= 0x10000 ? 2 : 1;
                if ((double)u == i && w == 1)
                    return mk_str(c, (str){o->s.s + b, l});
                if ((double)u <= i && i < (double)(u + w))
                    unsup(c, off, "indexing a string inside a character outside the Basic Multilingual Plane");
                u += w;
            }
            return &V_undef;
        }
        if (p->k == V_STR) {
            if (seq(p->s, "length"))
                return mk_num(c, V_INT, is_arr(o) ? (double)o->a->n : (double)utf16_len(o->s));
            const char *m = o->k == V_STR ? find_name(str_methods, p->s) : NULL;
            return m ? mk_func(c, F_METHOD, m, o, NULL) : &V_undef;
        }
        fail(c, off, "cannot access a property with %s", vk_name[p->k]);
    }
    if (p->k != V_STR)
        fail(c, off, "cannot access a property with %s", vk_name[p->k]);
    return &V_undef;
}

/* "==": JavaScript's loose equality of the values, where the subset can say it exactly. */
static int loose_eq(ctx *c, val *a, val *b, size_t off)
{
    int an = a->k == V_UNDEF || a->k == V_NULL, bn = b->k == V_UNDEF || b->k == V_NULL;
    if (an || bn)
        return an && bn;
    int anum = is_num(a) || a->k == V_BOOL, bnum = is_num(b) || b->k == V_BOOL;
    if (anum && bnum)
        return (a->k == V_BOOL ? a->b : a->d) == (b->k == V_BOOL ? b->b : b->d);
    if (a->k == V_STR && b->k == V_STR)
        return seqs(a->s, b->s);
    if ((a->k == V_STR && bnum) || (anum && b->k == V_STR))
        unsup(c, off, "comparing a string with %s", vk_name[a->k == V_STR ? b->k : a->k]);
    int aref = a->k >= V_ARR && a->k <= V_NS, bref = b->k >= V_ARR && b->k <= V_NS;
    if (aref && bref)
        return is_arr(a) == is_arr(b) && (is_arr(a) ? a->a == b->a : a->o == b->o);
    unsup(c, off, "comparing %s with %s", vk_name[a->k], vk_name[b->k]);
}

/* "in" against a list: strict equality of the values. */
static int strict_eq(const val *a, const val *b)
{
    int an = a->k == V_UNDEF, bn = b->k == V_UNDEF;
    if (an || bn)
        return an && bn;
    if (a->k == V_NULL || b->k == V_NULL)
        return a->k == b->k;
    if (is_num(a) && is_num(b))
        return a->d == b->d;
    if (a->k == V_BOOL && b->k == V_BOOL)
        return a->b == b->b;
    if (a->k == V_STR && b->k == V_STR)
        return seqs(a->s, b->s);
    if (is_arr(a) && is_arr(b))
        return a->a == b->a;
    if ((is_obj(a) || a->k == V_NS) && (is_obj(b) || b->k == V_NS))
        return a->o == b->o;
    if (a->k == V_FUNC && b->k == V_FUNC)
        return a->f == b->f;
    return 0;
}

static int contains(str hay, str needle)
{
    if (!needle.n)
        return 1;
    for (size_t i = 0; i + needle.n <= hay.n; i++)
        if (!memcmp(hay.s + i, needle.s, needle.n))
            return 1;
    return 0;
}

static val *eval_bin(ctx *c, node *x, env *e)
{
    str op = x->s;
    val *l = eval(c, x->a, e);
    if (seq(op, "and"))
        return truthy(l) ? eval(c, x->b, e) : l;
    if (seq(op, "or"))
        return truthy(l) ? l : eval(c, x->b, e);
    val *r = eval(c, x->b, e);
    if (seq(op, "=="))
        return mk_bool(c, loose_eq(c, l, r, x->off));
    if (seq(op, "!="))
        return mk_bool(c, !loose_eq(c, l, r, x->off));
    int is_in = seq(op, "in"), not_in = seq(op, "not in");
    if (l->k == V_UNDEF || r->k == V_UNDEF) {
        if (r->k == V_UNDEF && (is_in || not_in))
            return mk_bool(c, not_in);
        fail(c, x->off, "cannot apply '%.*s' to an undefined value", (int)op.n, op.s);
    }
    if (l->k == V_NULL || r->k == V_NULL)
        fail(c, x->off, "cannot apply '%.*s' to none", (int)op.n, op.s);
    if (seq(op, "~"))
        return mk_str(c, scat(c, to_str(c, x->off, l, 0), to_str(c, x->off, r, 0)));
    int lnum = is_num(l) || l->k == V_BOOL, rnum = is_num(r) || r->k == V_BOOL;
    if (seq(op, "**") && lnum && rnum) {
        double a = l->k == V_BOOL ? l->b : l->d, b = r->k == V_BOOL ? r->b : r->d;
        if (a == 0 && b < 0)
            fail(c, x->off, "0.0 cannot be raised to a negative power");
        double res = pow(a, b);
        if (!isfinite(res))
            fail(c, x->off, "exponentiation result is not a finite real number");
        return mk_num(c, l->k == V_FLOAT || r->k == V_FLOAT || b < 0 ? V_FLOAT : V_INT, res);
    }
    if (is_num(l) && is_num(r)) {
        double a = l->d, b = r->d;
        enum vk fk = l->k == V_FLOAT || r->k == V_FLOAT ? V_FLOAT : V_INT;
        if (seq(op, "+"))
            return mk_num(c, fk, a + b);
        if (seq(op, "-"))
            return mk_num(c, fk, a - b);
        if (seq(op, "*"))
            return mk_num(c, fk, a * b);
        if (seq(op, "/"))
            return mk_num(c, V_FLOAT, a / b);
        if (seq(op, "//"))
            return mk_num(c, fk, floor(a / b));
        if (seq(op, "%"))
            return mk_num(c, fk, fmod(a, b));
        if (seq(op, "<"))
            return mk_bool(c, a < b);
        if (seq(op, ">"))
            return mk_bool(c, a > b);
        if (seq(op, ">="))
            return mk_bool(c, a >= b);
        if (seq(op, "<="))
            return mk_bool(c, a <= b);
    } else if (is_arr(l) && is_arr(r)) {
        if (seq(op, "+")) {
            val *res = mk_arr(c, V_ARR);
            for (size_t i = 0; i < l->a->n; i++)
                arr_push(c, res->a, l->a->v[i]);
            for (size_t i = 0; i < r->a->n; i++)
                arr_push(c, res->a, r->a->v[i]);
            step(c, x->off, res->a->n);
            return res;
        }
    } else if (is_arr(r)) {
        if (is_in || not_in) {
            int found = 0;
            step(c, x->off, r->a->n);
            for (size_t i = 0; i < r->a->n && !found; i++)
                found = strict_eq(r->a->v[i], l);
            return mk_bool(c, found != not_in);
        }
    }
    if ((l->k == V_STR || r->k == V_STR) && seq(op, "+"))
        return mk_str(c, scat(c, to_str(c, x->off, l, 0), to_str(c, x->off, r, 0)));
    if (l->k == V_STR && r->k == V_STR && (is_in || not_in)) {
        step(c, x->off, r->s.n / 64);
        return mk_bool(c, contains(r->s, l->s) != not_in);
    }
    if (l->k == V_STR && is_obj(r) && (is_in || not_in))
        return mk_bool(c, (obj_find(c, r->o, l->s) >= 0) != not_in);
    fail(c, x->off, "unknown operator '%.*s' between %s and %s", (int)op.n, op.s, vk_name[l->k], vk_name[r->k]);
}

static int run_test(ctx *c, str name, val *v, val *arg, size_t off)
{
#define T(n) seq(name, n)
    if (T("boolean"))
        return v->k == V_BOOL;
    if (T("callable"))
        return v->k == V_FUNC;
    if (T("odd") || T("even")) {
        if (v->k != V_INT)
            fail(c, off, "cannot test odd or even on %s", vk_name[v->k]);
        double r = fmod(v->d, 2);
        return T("odd") ? r != 0 : r == 0;
    }
    if (T("false"))
        return v->k == V_BOOL && !v->b;
    if (T("true"))
        return v->k == V_BOOL && v->b;
    if (T("none"))
        return v->k == V_NULL;
    if (T("string"))
        return v->k == V_STR;
    if (T("number"))
        return is_num(v);
    if (T("integer"))
        return v->k == V_INT;
    if (T("iterable"))
        return v->k == V_ARR || v->k == V_STR;
    if (T("mapping"))
        return is_obj(v);
    if (T("sequence"))
        return is_arr(v) || is_obj(v) || v->k == V_STR;
    if (T("lower") || T("upper")) { /* a string equal to its lower (upper) case */
        if (v->k != V_STR)
            return 0;
        if (has_non_ascii(v->s))
            unsup(c, off, "the test '%.*s' on non-ASCII text (Unicode case mapping)", (int)name.n, name.s);
        for (size_t i = 0; i < v->s.n; i++)
            if (T("lower") ? (v->s.s[i] >= 'A' && v->s.s[i] <= 'Z') : (v->s.s[i] >= 'a' && v->s.s[i] <= 'z'))
                return 0;
        return 1;
    }
    if (T("defined"))
        return v->k != V_UNDEF;
    if (T("undefined"))
        return v->k == V_UNDEF;
    if (T("equalto") || T("eq"))
        return strict_eq(v, arg ? arg : &V_undef);
#undef T
    unsup(c, off, "the test '%.*s'", (int)(name.n > 40 ? 40 : name.n), name.s);
}

static val *attr_path(ctx *c, val *item, str path)
{
    val *v = item;
    size_t b = 0;
    for (size_t i = 0; i <= path.n; i++) {
        if (i < path.n && path.s[i] != '.')
            continue;
        str part = {path.s + b, i - b};
        b = i + 1;
        if (is_obj(v) || v->k == V_NS) {
            val *x = obj_get(c, v->o, part);
            v = x ? x : &V_undef;
        } else if (is_arr(v)) {
            /* parseInt(part, 10): leading digits */
            size_t k = 0;
            double idx = 0;
            while (k < part.n && part.s[k] >= '0' && part.s[k] <= '9')
                idx = idx * 10 + (part.s[k++] - '0');
            if (!k || idx >= (double)v->a->n)
                return &V_undef;
            v = v->a->v[(size_t)idx];
        } else
            return &V_undef;
    }
    return v;
}

/* JS parseInt(s, 10): white space, a sign, decimal digits; NaN when no digit. */
static int js_parse_int(str s, double *out)
{
    s = js_trim(s, 1, 0);
    size_t i = 0;
    int neg = 0;
    if (i < s.n && (s.s[i] == '+' || s.s[i] == '-'))
        neg = s.s[i++] == '-';
    double v = 0;
    size_t d = i;
    while (i < s.n && s.s[i] >= '0' && s.s[i] <= '9')
        v = v * 10 + (s.s[i++] - '0');
    if (i == d)
        return 0;
    *out = neg ? -v : v;
    return 1;
}

/* The indent filter: every line but the first (unless first) and blank ones (unless blank). */
static str indent(ctx *c, str s, int width, int first, int blank, size_t off)
{
    tq_sb *b = sb_new(c);
    size_t ls = 0;
    for (size_t i = 0; i <= s.n; i++) {
        if (i < s.n && s.s[i] != '\n')
            continue;
        int is_first = ls == 0;
        if (!is_first)
            tq_sb_put(b, "\n", 1);
        if (!((!first && is_first) || (!blank && i == ls)))
            for (int k = 0; k < width; k++)
                tq_sb_put(b, " ", 1);
        tq_sb_put(b, s.s + ls, i - ls);
        ls = i + 1;
        step(c, off, 1);
    }
    return sb_take(c, b, off);
}

static val *apply_filter(ctx *c, val *v, node *f, env *e)
{
    size_t off = f->off;
    if (f->k == E_IDENT) {
        str n = f->s;
#define F(x) seq(n, x)
        if (F("safe"))
            return v;
        if (F("tojson"))
            return mk_str(c, json_of(c, off, v, NULL, 1));
        if (is_arr(v)) {
            arr *a = v->a;
            if (F("list"))
                return v;
            if (F("first") || F("last")) {
                if (!a->n)
                    unsup(c, off, "the filter '%.*s' of an empty list", (int)n.n, n.s);
                return a->v[F("first") ? 0 : a->n - 1];
            }
            if (F("length"))
                return mk_num(c, V_INT, (double)a->n);
            if (F("reverse")) {
                val *r = mk_arr(c, V_ARR);
                for (size_t i = a->n; i-- > 0;)
                    arr_push(c, r->a, a->v[i]);
                return r;
            }
            if (F("join")) {
                tq_sb *b = sb_new(c);
                for (size_t i = 0; i < a->n; i++) {
                    val *x = a->v[i];
                    if (x->k == V_NULL || x->k == V_UNDEF)
                        continue;
                    if (x->k != V_STR && !is_num(x) && x->k != V_BOOL) {
                        tq_sb_free(b);
                        unsup(c, off, "join of a list holding %s", vk_name[x->k]);
                    }
                    str s = to_str(c, off, x, 0);
                    tq_sb_put(b, s.s, s.n);
                }
                return mk_str(c, sb_take(c, b, off));
            }
            if (F("string"))
                return mk_str(c, json_of(c, off, v, NULL, 0));
            if (F("sort")) {
                val *r = mk_arr(c, V_ARR);
                for (size_t i = 0; i < a->n; i++)
                    arr_push(c, r->a, a->v[i]);
                sort_by k = {c, off, 0, 0, NULL, -1};
                sort_vals(&k, r->a->v, r->a->n);
                return r;
            }
            if (F("unique")) { /* a Set of the values: SameValueZero, objects by identity */
                val *r = mk_arr(c, V_ARR);
                for (size_t i = 0; i < a->n; i++) {
                    int seen = 0;
                    step(c, off, r->a->n / 8 + 1);
                    for (size_t j = 0; j < r->a->n && !seen; j++)
                        seen = strict_eq(r->a->v[j], a->v[i]) ||
                               (is_num(a->v[i]) && is_num(r->a->v[j]) && isnan(a->v[i]->d) && isnan(r->a->v[j]->d));
                    if (!seen)
                        arr_push(c, r->a, a->v[i]);
                }
                return r;
            }
        } else if (v->k == V_STR) {
            if (F("length"))
                return mk_num(c, V_INT, (double)utf16_len(v->s));
            if (F("upper") || F("lower"))
                return mk_str(c, ascii_case(c, v->s, n.s[0] == 'u', n.s[0] == 'u' ? "upper" : "lower", off));
            if (F("title"))
                return mk_str(c, title_case(c, v->s));
            if (F("capitalize")) {
                func fn = {F_METHOD, "capitalize", v, NULL};
                args none = {0};
                return call_method(c, &fn, &none, off);
            }
            if (F("trim"))
                return mk_str(c, js_trim(v->s, 1, 1));
            if (F("join") || F("string"))
                return v;
            if (F("int")) {
                double d = 0;
                js_parse_int(v->s, &d);
                return mk_num(c, V_INT, d);
            }
            if (F("indent"))
                return mk_str(c, indent(c, v->s, 4, 0, 0, off));
        } else if (is_num(v)) {
            if (F("abs"))
                return mk_num(c, v->k, fabs(v->d));
            if (F("int"))
                return mk_num(c, V_INT, floor(v->d));
            if (F("float"))
                return mk_num(c, V_FLOAT, v->d);
            if (F("string"))
                return mk_str(c, to_str(c, off, v, 1));
        } else if (is_obj(v)) {
            const char *m = find_name(obj_methods, n); /* items, keys, values, dictsort (get fails) */
            if (m) {
                func fn = {F_METHOD, m, v, NULL};
                args none = {0};
                return call_method(c, &fn, &none, off);
            }
            if (F("length"))
                return mk_num(c, V_INT, (double)v->o->n);
        } else if (v->k == V_BOOL) {
            if (F("bool"))
                return mk_bool(c, v->b);
            if (F("int"))
                return mk_num(c, V_INT, v->b);
            if (F("float"))
                return mk_num(c, V_FLOAT, v->b);
            if (F("string"))
                return mk_cstr(c, v->b ? "true" : "false");
        }
        unsup(c, off, "the filter '%.*s' on %s", (int)(n.n > 40 ? 40 : n.n), n.s, vk_name[v->k]);
    }
    /* a call: name(args) */
    if (f->k != E_CALL || f->a->k != E_IDENT)
        fail(c, off, "a filter must be a name or a call of a name");
    str n = f->a->s;
    args a = eval_args(c, &f->l1, e);
    if (F("tojson")) {
        val *ind = kwarg(c, &a, "indent"), *asc = kwarg(c, &a, "ensure_ascii"), *sk = kwarg(c, &a, "sort_keys"),
            *sep = kwarg(c, &a, "separators");
        if (ind && ind->k != V_INT && ind->k != V_NULL)
            fail(c, off, "tojson: indent must be a number");
        if (asc && asc->k != V_BOOL)
            fail(c, off, "tojson: ensure_ascii must be a boolean");
        if (sk && sk->k != V_BOOL)
            fail(c, off, "tojson: sort_keys must be a boolean");
        if (sk && sk->b)
            unsup(c, off, "tojson(sort_keys=true) (locale collation)");
        jopts o = {ind && ind->k == V_INT ? (long)ind->d : 0, asc && asc->b, {", ", 2}, {": ", 2}};
        if (o.indent < 0 || o.indent > 64)
            unsup(c, off, "tojson with indent %ld", o.indent);
        if (o.indent)
            o.item_sep = (str){",", 1};
        if (sep && sep->k != V_NULL) {
            if (!is_arr(sep) || sep->a->n != 2 || sep->a->v[0]->k != V_STR || sep->a->v[1]->k != V_STR)
                fail(c, off, "tojson: separators must be a tuple of two strings");
            o.item_sep = sep->a->v[0]->s, o.key_sep = sep->a->v[1]->s;
        }
        return mk_str(c, json_of(c, off, v, &o, 1));
    }
    if (F("join")) {
        val *sep = a.npos ? a.pos[0] : kwarg(c, &a, "separator");
        str s = sep ? arg_str(c, sep, "join's separator", off) : (str){"", 0};
        tq_sb *b = sb_new(c);
        if (v->k == V_STR) {
            size_t l;
            for (size_t i = 0; i < v->s.n; i += l) {
                cp_at(v->s.s + i, v->s.n - i, &l);
                if (i)
                    tq_sb_put(b, s.s, s.n);
                tq_sb_put(b, v->s.s + i, l);
            }
        } else if (is_arr(v)) {
            for (size_t i = 0; i < v->a->n; i++) {
                val *x = v->a->v[i];
                if (i)
                    tq_sb_put(b, s.s, s.n);
                if (x->k == V_NULL || x->k == V_UNDEF)
                    continue;
                if (x->k != V_STR && !is_num(x) && x->k != V_BOOL) {
                    tq_sb_free(b);
                    unsup(c, off, "join of a list holding %s", vk_name[x->k]);
                }
                str t = to_str(c, off, x, 0);
                tq_sb_put(b, t.s, t.n);
            }
        } else
            fail(c, off, "cannot apply the filter 'join' to %s", vk_name[v->k]);
        step(c, off, b->len / 64);
        return mk_str(c, sb_take(c, b, off));
    }
    if (F("default")) {
        val *d = a.npos ? a.pos[0] : mk_cstr(c, "");
        val *bo = a.npos > 1 ? a.pos[1] : kwarg(c, &a, "boolean");
        if (bo && bo->k != V_BOOL)
            fail(c, off, "the default filter's flag must be a boolean");
        if (v->k == V_UNDEF || (bo && bo->b && !truthy(v)))
            return d;
        return v;
    }
    if (F("int") && v->k == V_STR) {
        double d;
        val *dv = a.npos ? a.pos[0] : kwarg(c, &a, "default");
        return js_parse_int(v->s, &d) ? mk_num(c, V_INT, d) : dv ? dv : mk_num(c, V_INT, 0);
    }
    if ((F("int") || F("float")) && is_num(v))
        return v;
    if (is_arr(v) && F("sort")) {
        val *rev = flag_arg(c, &a, 0, "reverse", off), *cs = flag_arg(c, &a, 1, "case_sensitive", off);
        val *at = a.npos > 2 ? a.pos[2] : kwarg(c, &a, "attribute");
        if (at && at->k != V_STR && at->k != V_INT && at->k != V_NULL)
            fail(c, off, "sort: attribute must be a string, an integer or none");
        val *r = mk_arr(c, V_ARR);
        for (size_t i = 0; i < v->a->n; i++)
            arr_push(c, r->a, v->a->v[i]);
        sort_by k = {c, off, cs && cs->b, rev && rev->b, at && at->k != V_NULL ? at : NULL, -1};
        sort_vals(&k, r->a->v, r->a->n);
        return r;
    }
    if (is_arr(v) && (F("selectattr") || F("rejectattr"))) {
        int sel = F("selectattr");
        for (size_t i = 0; i < v->a->n; i++)
            if (!is_obj(v->a->v[i]) && v->a->v[i]->k != V_NS)
                fail(c, off, "'%.*s' can only be applied to a list of objects", (int)n.n, n.s);
        for (size_t i = 0; i < f->l1.n; i++)
            if (f->l1.v[i]->k != E_STR)
                fail(c, off, "the arguments of '%.*s' must be strings", (int)n.n, n.s);
        if (!a.npos)
            fail(c, off, "'%.*s' needs an attribute name", (int)n.n, n.s);
        val *r = mk_arr(c, V_ARR);
        for (size_t i = 0; i < v->a->n; i++) {
            step(c, off, 1);
            val *x = obj_get(c, v->a->v[i]->o, a.pos[0]->s);
            int res = 0;
            if (x)
                res = a.npos > 1 ? run_test(c, a.pos[1]->s, x, a.npos > 2 ? a.pos[2] : NULL, off) : truthy(x);
            if (res == sel)
                arr_push(c, r->a, v->a->v[i]);
        }
        return r;
    }
    if (is_arr(v) && F("map")) {
        val *at = kwarg(c, &a, "attribute");
        if (!at)
            unsup(c, off, "map without attribute=");
        if (at->k != V_STR)
            fail(c, off, "map: attribute must be a string");
        val *d = kwarg(c, &a, "default");
        val *r = mk_arr(c, V_ARR);
        for (size_t i = 0; i < v->a->n; i++) {
            step(c, off, 1);
            if (!is_obj(v->a->v[i]) && v->a->v[i]->k != V_NS)
                fail(c, off, "items in map must be objects");
            val *x = attr_path(c, v->a->v[i], at->s);
            arr_push(c, r->a, x->k == V_UNDEF ? (d ? d : &V_undef) : x);
        }
        return r;
    }
    if (v->k == V_STR && F("indent")) {
        val *w = a.npos ? a.pos[0] : kwarg(c, &a, "width");
        val *first = a.npos > 1 ? a.pos[1] : kwarg(c, &a, "first");
        val *blank = a.npos > 2 ? a.pos[2] : kwarg(c, &a, "blank");
        if (w && w->k != V_INT)
            fail(c, off, "indent: width must be a number");
        double width = w ? w->d : 4;
        if (width < 0 || width > 1024)
            unsup(c, off, "indent by %g", width);
        return mk_str(c, indent(c, v->s, (int)width, first && truthy(first), blank && truthy(blank), off));
    }
    if (v->k == V_STR && F("replace")) {
        func fn = {F_METHOD, "replace", v, NULL};
        return call_method(c, &fn, &a, off);
    }
    if (is_obj(v)) {
        const char *m = find_name(obj_methods, n);
        if (m) {
            func fn = {F_METHOD, m, v, NULL};
            return call_method(c, &fn, &a, off);
        }
    }
#undef F
    unsup(c, off, "the filter '%.*s(...)' on %s", (int)(n.n > 40 ? 40 : n.n), n.s, vk_name[v->k]);
}

static val *eval(ctx *c, node *x, env *e)
{
    step(c, x->off, 1);
    enter_eval(c, x->off);
    val *r;
    switch (x->k) {
    case E_STR:
        r = mk_str(c, x->s);
        break;
    case E_INT:
        r = mk_num(c, V_INT, x->num);
        break;
    case E_FLOAT:
        r = mk_num(c, V_FLOAT, x->num);
        break;
    case E_ARR:
    case E_TUPLE:
        r = mk_arr(c, x->k == E_ARR ? V_ARR : V_TUPLE);
        for (size_t i = 0; i < x->l1.n; i++)
            arr_push(c, r->a, eval(c, x->l1.v[i], e));
        break;
    case E_OBJ:
        r = mk_obj(c, V_OBJ);
        for (size_t i = 0; i < x->l1.n; i++) {
            val *k = eval(c, x->l1.v[i], e);
            if (k->k != V_STR)
                fail(c, x->l1.v[i]->off, "object keys must be strings, not %s", vk_name[k->k]);
            obj_set(c, r->o, k->s, eval(c, x->l2.v[i], e));
        }
        break;
    case E_IDENT:
        r = env_get(c, e, x->s);
        break;
    case E_CALL: {
        args a = eval_args(c, &x->l1, e);
        val *fn = eval(c, x->a, e);
        r = call_func(c, fn, &a, e, x->off);
        break;
    }
    case E_MEMBER: {
        val *o = eval(c, x->a, e);
        if (x->flag && x->b->k == E_SLICE) {
            r = eval_slice(c, o, x->b, e);
            break;
        }
        val *p;
        if (x->flag)
            p = eval(c, x->b, e);
        else if (x->b->k == E_INT)
            p = mk_num(c, V_INT, x->b->num);
        else
            p = mk_str(c, x->b->s);
        r = member(c, o, p, x->off);
        break;
    }
    case E_UNARY: {
        val *v = eval(c, x->a, e);
        if (seq(x->s, "not")) {
            r = mk_bool(c, !truthy(v));
            break;
        }
        double sign = seq(x->s, "-") ? -1 : 1;
        if (!is_num(v) && v->k != V_BOOL)
            fail(c, x->off, "unknown operator '%.*s' for %s", (int)x->s.n, x->s.s, vk_name[v->k]);
        r = mk_num(c, v->k == V_FLOAT ? V_FLOAT : V_INT, sign * (v->k == V_BOOL ? v->b : v->d));
        break;
    }
    case E_BIN:
        r = eval_bin(c, x, e);
        break;
    case E_FILTER:
        r = apply_filter(c, eval(c, x->a, e), x->b, e);
        break;
    case E_TEST: {
        val *v = eval(c, x->a, e);
        int t = run_test(c, x->s, v, NULL, x->off);
        r = mk_bool(c, x->flag ? !t : t);
        break;
    }
    case E_SELECT:
        r = truthy(eval(c, x->b, e)) ? eval(c, x->a, e) : &V_undef;
        break;
    case E_TERNARY:
        r = truthy(eval(c, x->a, e)) ? eval(c, x->b, e) : eval(c, x->c, e);
        break;
    case E_SLICE:
        fail(c, x->off, "a slice outside '[]'");
    case E_KWARG:
        fail(c, x->off, "a keyword argument outside a call");
    default:
        fail(c, x->off, "a statement where an expression belongs");
    }
    c->depth--;
    return r;
}

static void out_put(ctx *c, str s, size_t off)
{
    if (c->out->len + s.n > MAX_ARENA)
        fail(c, off, "the output grows past %llu MiB", (unsigned long long)(MAX_ARENA >> 20));
    step(c, off, s.n / 256);
    tq_sb_put(c->out, s.s, s.n);
}

static void bind_loopvar(ctx *c, node *lv, val *cur, env *scope, size_t off)
{
    if (lv->k == E_IDENT) {
        env_set(c, scope, lv->s, cur);
        return;
    }
    if (cur->k != V_ARR)
        fail(c, off, "cannot unpack %s", vk_name[cur->k]);
    if (lv->l1.n != cur->a->n)
        fail(c, off, "too %s items to unpack", lv->l1.n > cur->a->n ? "few" : "many");
    for (size_t j = 0; j < lv->l1.n; j++) {
        if (lv->l1.v[j]->k != E_IDENT)
            fail(c, off, "cannot unpack into a non-identifier");
        env_set(c, scope, lv->l1.v[j]->s, cur->a->v[j]);
    }
}

static void exec_for(ctx *c, node *x, env *e)
{
    env *scope = env_new(c, e);
    node *it = x->b, *test = NULL;
    if (it->k == E_SELECT)
        test = it->b, it = it->a;
    val *iter = eval(c, it, scope);
    if (!is_arr(iter) && !is_obj(iter))
        fail(c, it->off, "a for loop needs a list or a mapping, not %s", vk_name[iter->k]);
    if (is_obj(iter)) {
        func keys = {F_METHOD, "keys", iter, NULL};
        args none = {0};
        iter = call_method(c, &keys, &none, x->off);
    }
    arr items = {0};
    for (size_t i = 0; i < iter->a->n; i++) {
        val *cur = iter->a->v[i];
        step(c, x->off, 1);
        if (x->a->k == E_TUPLE && cur->k != V_ARR)
            fail(c, x->off, "cannot unpack %s", vk_name[cur->k]);
        if (test) {
            env *ls = env_new(c, scope);
            bind_loopvar(c, x->a, cur, ls, x->off);
            if (!truthy(eval(c, test, ls)))
                continue;
        }
        arr_push(c, &items, cur);
    }
    int none = 1;
    for (size_t i = 0; i < items.n; i++) {
        val *loop = mk_obj(c, V_OBJ);
        double n = (double)items.n, d = (double)i;
        obj_set(c, loop->o, (str){"index", 5}, mk_num(c, V_INT, d + 1));
        obj_set(c, loop->o, (str){"index0", 6}, mk_num(c, V_INT, d));
        obj_set(c, loop->o, (str){"revindex", 8}, mk_num(c, V_INT, n - d));
        obj_set(c, loop->o, (str){"revindex0", 9}, mk_num(c, V_INT, n - d - 1));
        obj_set(c, loop->o, (str){"first", 5}, mk_bool(c, i == 0));
        obj_set(c, loop->o, (str){"last", 4}, mk_bool(c, i == items.n - 1));
        obj_set(c, loop->o, (str){"length", 6}, mk_num(c, V_INT, n));
        obj_set(c, loop->o, (str){"previtem", 8}, i > 0 ? items.v[i - 1] : &V_undef);
        obj_set(c, loop->o, (str){"nextitem", 8}, i + 1 < items.n ? items.v[i + 1] : &V_undef);
        env_set(c, scope, (str){"loop", 4}, loop);
        bind_loopvar(c, x->a, items.v[i], scope, x->off);
        size_t mark = c->out->len;
        enum flow f = exec_block(c, &x->l1, scope);
        if (f != FL_NONE) {
            c->out->len = mark; /* the iteration's output is dropped, as runtime.ts's evaluateFor does */
            if (c->out->s)
                c->out->s[mark] = 0;
            if (f == FL_BREAK)
                break;
            continue;
        }
        none = 0;
    }
    if (none) {
        enum flow f = exec_block(c, &x->l2, scope);
        if (f != FL_NONE)
            fail(c, x->off, "'break' or 'continue' outside a loop");
    }
}

static void exec_set(ctx *c, node *x, env *e)
{
    val *rhs = x->b ? eval(c, x->b, e) : mk_str(c, render_block_to_str(c, &x->l1, e, x->off));
    node *lhs = x->a;
    if (lhs->k == E_IDENT) {
        env_set(c, e, lhs->s, rhs);
    } else if (lhs->k == E_TUPLE) {
        if (!is_arr(rhs))
            fail(c, x->off, "cannot unpack %s in set", vk_name[rhs->k]);
        if (lhs->l1.n != rhs->a->n)
            fail(c, x->off, "too %s items to unpack in set", lhs->l1.n > rhs->a->n ? "few" : "many");
        for (size_t i = 0; i < lhs->l1.n; i++) {
            if (lhs->l1.v[i]->k != E_IDENT)
                fail(c, x->off, "cannot unpack into a non-identifier in set");
            env_set(c, e, lhs->l1.v[i]->s, rhs->a->v[i]);
        }
    } else if (lhs->k == E_MEMBER) {
        val *o = eval(c, lhs->a, e);
        if (o->k != V_NS)
            fail(c, x->off, "cannot assign an attribute of %s (only of a namespace)", vk_name[o->k]);
        if (lhs->b->k != E_IDENT)
            fail(c, x->off, "cannot assign to a member with a non-identifier property");
        obj_set(c, o->o, lhs->b->s, rhs);
    } else
        fail(c, x->off, "invalid left-hand side in set");
}

static enum flow exec_block(ctx *c, list *body, env *e)
{
    enter_eval(c, body->n ? body->v[0]->off : 0);
    enum flow f = FL_NONE;
    for (size_t i = 0; i < body->n && f == FL_NONE; i++) {
        node *x = body->v[i];
        step(c, x->off, 1);
        switch (x->k) {
        case N_TEXT:
            out_put(c, x->s, x->off);
            break;
        case N_COMMENT:
            break;
        case N_OUT: {
            val *v = eval(c, x->a, e);
            out_put(c, to_str(c, x->off, v, 1), x->off);
            break;
        }
        case N_IF: {
            val *t = eval(c, x->a, e);
            f = exec_block(c, truthy(t) ? &x->l1 : &x->l2, e);
            break;
        }
        case N_FOR:
            exec_for(c, x, e);
            break;
        case N_SET:
            exec_set(c, x, e);
            break;
        case N_MACRO:
            env_set(c, e, x->s, mk_func(c, F_MACRO, NULL, NULL, x));
            break;
        case N_BREAK:
            f = FL_BREAK;
            break;
        case N_CONTINUE:
            f = FL_CONTINUE;
            break;
        default: {
            /* an expression as a statement cannot occur: the parser makes N_OUT */
            fail(c, x->off, "unexpected node");
        }
        }
    }
    c->depth--;
    return f;
}

/* ------------------------------------------------------------------ JSON in (convertToRuntimeValues) */
static int array_index_key(const char *k, double *idx)
{
    /* ECMAScript array index: canonical decimal below 2^32 - 1 (Object.entries puts these first) */
    size_t n = strlen(k);
    if (!n || n > 10 || (n > 1 && k[0] == '0'))
        return 0;
    double v = 0;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < '0' || k[i] > '9')
            return 0;
        v = v * 10 + (k[i] - '0');
    }
    if (v >= 4294967295.0)
        return 0;
    *idx = v;
    return 1;
}

static val *from_json(ctx *c, const cJSON *j, int depth)
{
    step(c, NOPOS, 1);
    if (depth > MAX_JSON_DEPTH)
        fail(c, NOPOS, "the variables nest more than %d deep", MAX_JSON_DEPTH);
    if (cJSON_IsNull(j))
        return &V_null;
    if (cJSON_IsBool(j))
        return mk_bool(c, cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        return mk_num(c, d == floor(d) && isfinite(d) ? V_INT : V_FLOAT, d);
    }
    if (cJSON_IsString(j)) {
        size_t n = strlen(j->valuestring);
        return mk_str(c, sdup(c, j->valuestring, n));
    }
    if (cJSON_IsArray(j)) {
        val *r = mk_arr(c, V_ARR);
        for (const cJSON *x = j->child; x; x = x->next)
            arr_push(c, r->a, from_json(c, x, depth + 1));
        return r;
    }
    val *r = mk_obj(c, V_OBJ);
    /* Object.entries: array-index keys first, ascending; then the others in order */
    size_t nidx = 0;
    for (const cJSON *x = j->child; x; x = x->next) {
        double idx;
        nidx += array_index_key(x->string, &idx);
    }
    if (nidx) {
        const cJSON **ix = alloc(c, nidx * sizeof *ix);
        size_t k = 0;
        for (const cJSON *x = j->child; x; x = x->next) {
            double idx;
            if (array_index_key(x->string, &idx)) {
                size_t p = k++;
                double pi = 0;
                step(c, NOPOS, p);
                while (p > 0 && (array_index_key(ix[p - 1]->string, &pi), pi > idx))
                    ix[p] = ix[p - 1], p--;
                ix[p] = x;
            }
        }
        for (size_t i = 0; i < nidx; i++)
            obj_set(c, r->o, sdup(c, ix[i]->string, strlen(ix[i]->string)), from_json(c, ix[i], depth + 1));
    }
    for (const cJSON *x = j->child; x; x = x->next) {
        double idx;
        if (!array_index_key(x->string, &idx))
            obj_set(c, r->o, sdup(c, x->string, strlen(x->string)), from_json(c, x, depth + 1));
    }
    return r;
}

/* ------------------------------------------------------------------ entry points */
static int utf8_json_strings(const cJSON *j, int depth)
{
    if (depth > MAX_JSON_DEPTH)
        return 0;
    if (cJSON_IsString(j))
        return tq_utf8_check(j->valuestring, strlen(j->valuestring), NULL) == 0;
    if (j->string && tq_utf8_check(j->string, strlen(j->string), NULL) != 0)
        return 0;
    for (const cJSON *x = j->child; x; x = x->next)
        if (!utf8_json_strings(x, depth + 1))
            return 0;
    return 1;
}

/* The render itself, called between tq_chat_render's setjmp and its cleanup: fail() longjmps
 * out of here, so none of this frame's locals is read after a failure (and none can be
 * clobbered, which gcc -Wclobbered checks at -O0). 0 rendered, -1 e set. */
static int render_run(ctx *c, const char *tmpl, size_t tlen, cJSON *vars, cJSON *volatile *vj, tq_sb *outb,
                      char **out, size_t *out_len, tq_err *e)
{
    char *src;
    size_t n;
    preprocess(c, tmpl, tlen, &src, &n);
    lexer L;
    lex(c, src, n, &L);
    parser P = {.c = c, .t = L.t, .n = L.nt};
    list prog = {0};
    while (P.i < P.n)
        lpush(c, &prog, parse_any(&P));
    env *g = env_new(c, NULL);
    static const char *const consts[] = {"false", "true", "none", "True", "False", "None"};
    for (int i = 0; i < 6; i++)
        env_set(c, g, (str){consts[i], strlen(consts[i])},
                i == 2 || i == 5 ? &V_null : mk_bool(c, i == 1 || i == 3));
    env_set(c, g, (str){"namespace", 9}, mk_func(c, F_NAMESPACE, NULL, NULL, NULL));
    env_set(c, g, (str){"raise_exception", 15}, mk_func(c, F_RAISE, NULL, NULL, NULL));
    env_set(c, g, (str){"range", 5}, mk_func(c, F_RANGE, NULL, NULL, NULL));
    env_set(c, g, (str){"strftime_now", 12}, mk_func(c, F_STRFTIME, NULL, NULL, NULL));
    val *v = from_json(c, vars, 0);
    for (size_t i = 0; i < v->o->n; i++) {
        str k = v->o->k[i];
        for (env *x = g; x; x = NULL)
            for (size_t j = 0; j < x->n; j++)
                if (seqs(x->k[j], k))
                    fail(c, NOPOS, "the variable '%.*s' is already declared", (int)k.n, k.s);
        env_set(c, g, k, v->o->v[i]);
    }
    cJSON_Delete(vars);
    *vj = NULL;
    c->out = outb;
    enum flow f = exec_block(c, &prog, g);
    if (f != FL_NONE)
        fail(c, NOPOS, "'break' or 'continue' outside a loop");
    if (outb->oom) {
        tq_fail(e, TQ_ENOMEM, "chat_template: out of memory");
    } else {
        *out = outb->s ? outb->s : calloc(1, 1);
        if (!*out)
            tq_fail(e, TQ_ENOMEM, "chat_template: out of memory");
        else {
            if (out_len)
                *out_len = outb->len;
            *outb = (tq_sb){0};
            return 0;
        }
    }
    return -1;
}

int tq_chat_render(const char *tmpl, size_t tlen, const char *vars_json, size_t vlen, int64_t now, char **out,
                   size_t *out_len, tq_err *e)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (tlen > MAX_TEMPLATE)
        return tq_fail(e, TQ_EDATA, "chat_template: %zu bytes, more than %u", tlen, MAX_TEMPLATE);
    size_t bad;
    if (tq_utf8_check(tmpl, tlen, &bad))
        return tq_fail(e, TQ_EDATA, "chat_template: invalid UTF-8 at byte %zu", bad);
    if (memchr(tmpl, 0, tlen))
        return tq_fail(e, TQ_EDATA, "chat_template: a NUL byte at byte %zu", (size_t)((const char *)memchr(tmpl, 0, tlen) - tmpl));
    for (size_t i = 0; i + 6 <= vlen; i++)
        if (vars_json[i] == '\\' && (vars_json[i + 1] == 'u' || vars_json[i + 1] == 'U') &&
            !memcmp(vars_json + i + 2, "0000", 4))
            return tq_fail(e, TQ_EUNSUP, "chat variables: a NUL character (\\u0000) in a string");
    cJSON *vars = cJSON_ParseWithLength(vars_json, vlen);
    if (!vars || !cJSON_IsObject(vars)) {
        cJSON_Delete(vars);
        return tq_fail(e, TQ_EDATA, "chat variables: not a JSON object");
    }
    if (!utf8_json_strings(vars, 0)) {
        cJSON_Delete(vars);
        return tq_fail(e, TQ_EDATA, "chat variables: a string that is not valid UTF-8 (or nesting deeper than %d)",
                       MAX_JSON_DEPTH);
    }
    /* on the heap: what fail() leaves in it is read after its longjmp */
    ctx *c = calloc(1, sizeof *c);
    tq_sb *volatile outb = calloc(1, sizeof *outb);
    if (!c || !outb) {
        free(c);
        free(outb);
        cJSON_Delete(vars);
        return tq_fail(e, TQ_ENOMEM, "chat_template: out of memory");
    }
    c->e = e, c->orig = tmpl, c->now = now;
    volatile int rc = -1;
    cJSON *volatile vj = vars;
    if (setjmp(c->jb) == 0)
        rc = render_run(c, tmpl, tlen, vars, &vj, outb, out, out_len, e);
    cJSON_Delete(vj);
    tq_sb_free(outb);
    free(outb);
    for (sbnode *n = c->sbs; n; n = n->next)
        tq_sb_free(&n->b);
    for (ablk *b = c->blk, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    free(c);
    return rc;
}

/* A special token's text in tokenizer_config.json: a string or an AddedToken's content. */
static const char *config_token(const cJSON *cfg, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, k);
    if (cJSON_IsObject(v))
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int tq_chat_render_dir(const char *dir, const char *messages_json, size_t len, int add_generation_prompt, int64_t now,
                       char **out, size_t *out_len, tq_err *e)
{
    *out = NULL;
    char *cpath = tq_path_join(dir, "tokenizer_config.json", e), *ctext = NULL, *tmpl = NULL, *vtext = NULL,
         *jp = NULL;
    size_t clen = 0, tl = 0;
    cJSON *cfg = NULL, *vars = NULL, *msgs = NULL;
    int rc = -1;
    if (!cpath)
        goto out;
    if (access(cpath, F_OK) != 0) { /* no tokenizer_config.json: chat_template.jinja alone */
        if (!(cfg = cJSON_CreateObject())) {
            tq_fail(e, TQ_ENOMEM, "out of memory");
            goto out;
        }
    } else if (tq_read_small_file(cpath, 64u << 20, &ctext, &clen, e)) {
        goto out;
    } else if (!(cfg = cJSON_ParseWithLength(ctext, clen)) || !cJSON_IsObject(cfg)) {
        tq_fail(e, TQ_EDATA, "%s: not a JSON object", cpath);
        goto out;
    }
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsArray(ct)) { /* [{"name": ..., "template": ...}]: the one named "default" */
        const cJSON *x, *found = NULL;
        cJSON_ArrayForEach(x, ct)
        {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(x, "name");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default"))
                found = cJSON_GetObjectItemCaseSensitive(x, "template");
        }
        if (!cJSON_IsString(found)) {
            tq_fail(e, TQ_EDATA, "%s: chat_template: no template named \"default\"", cpath);
            goto out;
        }
        ct = found;
    }
    if (cJSON_IsString(ct)) {
        tl = strlen(ct->valuestring);
        if (!(tmpl = tq_strdup(ct->valuestring, e)))
            goto out;
    } else if (ct && !cJSON_IsNull(ct)) {
        tq_fail(e, TQ_EDATA, "%s: chat_template is neither a string nor a list of named templates", cpath);
        goto out;
    } else {
        if (!(jp = tq_path_join(dir, "chat_template.jinja", e)))
            goto out;
        if (access(jp, F_OK) != 0) {
            tq_fail(e, TQ_EDATA, "%s: no chat_template (nor a chat_template.jinja beside it)", cpath);
            goto out;
        }
        if (tq_read_small_file(jp, MAX_TEMPLATE, &tmpl, &tl, e))
            goto out;
    }
    msgs = cJSON_ParseWithLength(messages_json, len);
    if (!msgs || (!cJSON_IsArray(msgs) && !cJSON_IsObject(msgs))) {
        tq_fail(e, TQ_EDATA, "messages: not a JSON list of messages (nor an object of variables)");
        goto out;
    }
    if (cJSON_IsArray(msgs)) {
        vars = cJSON_CreateObject();
        if (!vars || !cJSON_AddItemToObject(vars, "messages", msgs)) {
            tq_fail(e, TQ_ENOMEM, "out of memory");
            goto out;
        }
        msgs = NULL;
    } else {
        vars = msgs;
        msgs = NULL;
        if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(vars, "messages"))) {
            tq_fail(e, TQ_EDATA, "messages: the object has no \"messages\" list");
            goto out;
        }
    }
    if (!cJSON_HasObjectItem(vars, "add_generation_prompt"))
        cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt);
    static const char *const toks[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (int i = 0; i < 4; i++) {
        const char *t = config_token(cfg, toks[i]);
        if (t && !cJSON_HasObjectItem(vars, toks[i]))
            cJSON_AddStringToObject(vars, toks[i], t);
    }
    if (!(vtext = cJSON_PrintUnformatted(vars))) {
        tq_fail(e, TQ_ENOMEM, "out of memory");
        goto out;
    }
    rc = tq_chat_render(tmpl, tl, vtext, strlen(vtext), now, out, out_len, e);
    if (rc)
        tq_err_prefix(e, "%s", jp ? jp : cpath);
out:
    cJSON_Delete(cfg);
    cJSON_Delete(vars);
    cJSON_Delete(msgs);
    free(cpath);
    free(ctext);
    free(tmpl);
    free(vtext);
    free(jp);
    return rc;
}
