/* formats/gguf_tokenizer.c — a GGUF vocabulary (tokenizer.ggml.*) as the files HuggingFace
 * loaders read: tokenizer.json in the tokenizers library's schema, tokenizer_config.json and
 * generation_config.json. Two vocabulary kinds are written:
 *   gpt2   byte-level BPE: vocab and merges as stored; the pre-tokenizer regex is chosen by
 *          tokenizer.ggml.pre (the patterns of the original tokenizer.json files); control and
 *          user-defined tokens become added_tokens (outside the model vocab, as HF keeps them);
 *   llama  SentencePiece BPE with byte fallback: every piece in the vocab, merges derived from
 *          the piece scores the way transformers' SentencePiece converter derives them (every
 *          split of a piece into two pieces, ordered by the merged piece's score, highest
 *          first), the "▁" metaspace normalizer and decoder.
 * The metadata is hostile: array types and lengths are checked; anything unusable gives no
 * tokenizer files and a warning naming the key, never a failed conversion. */
#include "formats/formats.h"
#include "formats/gguf_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct vocab {
    size_t n;
    char **tok;          /* NUL-free strings (a token with a NUL byte makes the vocab unusable) */
    int32_t *type;       /* TT_*, TT_NORMAL when the file has no token_type */
    float *score;        /* NULL when absent */
    /* string -> first id, open addressing */
    size_t cap;
    int64_t *slot;
} vocab;

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int64_t vocab_find_n(const vocab *v, const char *s, size_t n)
{
    for (size_t i = hash_str(s, n) & (v->cap - 1);; i = (i + 1) & (v->cap - 1)) {
        int64_t id = v->slot[i];
        if (id < 0)
            return -1;
        if (strlen(v->tok[id]) == n && memcmp(v->tok[id], s, n) == 0)
            return id;
    }
}

static void vocab_free(vocab *v)
{
    for (size_t i = 0; v->tok && i < v->n; i++)
        free(v->tok[i]);
    free(v->tok);
    free(v->type);
    free(v->score);
    free(v->slot);
}

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Strings of a string-array key, copied; *why names what is wrong. */
static char **read_strings(const tq_gguf_file *f, const char *key, size_t *n, const char **why)
{
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, key);
    *n = 0;
    if (!kv)
        return NULL;
    if (kv->type != TQ_GGUF_ARRAY || kv->arr_type != TQ_GGUF_STRING) {
        *why = "is not an array of strings";
        return NULL;
    }
    char **s = calloc(kv->arr_n ? kv->arr_n : 1, sizeof *s);
    if (!s) {
        *why = "is too large for memory";
        return NULL;
    }
    const unsigned char *p = f->header + kv->off; /* the parser checked every length */
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        uint64_t len = rd64(p);
        if (memchr(p + 8, 0, len) || !(s[i] = malloc(len + 1))) {
            *why = memchr(p + 8, 0, len) ? "holds a string with a NUL byte" : "is too large for memory";
            tq_free_strv(s, i);
            return NULL;
        }
        memcpy(s[i], p + 8, len);
        s[i][len] = 0;
        p += 8 + len;
    }
    *n = kv->arr_n;
    return s;
}

/* A numeric array of n elements as int32 / float; NULL (why set) on a wrong type or length. */
static void *read_numbers(const tq_gguf_file *f, const char *key, size_t n, int as_float, const char **why)
{
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, key);
    if (!kv)
        return NULL;
    uint32_t want = as_float ? TQ_GGUF_F32 : TQ_GGUF_I32;
    if (kv->type != TQ_GGUF_ARRAY || (kv->arr_type != want && !(as_float == 0 && kv->arr_type == TQ_GGUF_U32)) ||
        kv->arr_n != n) {
        *why = as_float ? "is not a float32 array as long as the token list" : "is not an int32 array as long as the token list";
        return NULL;
    }
    uint32_t *out = malloc(n ? n * 4 : 4);
    if (!out) {
        *why = "is too large for memory";
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = rd32(f->header + kv->off + 4 * i);
    return out;
}

static int load_vocab(const tq_gguf_file *f, vocab *v, int want_scores, char *warn, size_t cap)
{
    const char *why = NULL, *key = "tokenizer.ggml.tokens";
    memset(v, 0, sizeof *v);
    v->tok = read_strings(f, key, &v->n, &why);
    if (v->tok && v->n) {
        key = "tokenizer.ggml.token_type";
        v->type = read_numbers(f, key, v->n, 0, &why);
        if (!why && !v->type && (v->type = malloc(v->n * 4)))
            for (size_t i = 0; i < v->n; i++)
                v->type[i] = TT_NORMAL;
        if (!why && want_scores) {
            key = "tokenizer.ggml.scores";
            v->score = read_numbers(f, key, v->n, 1, &why);
            if (!v->score && !why)
                why = "is missing (a SentencePiece vocabulary needs the piece scores)";
        }
    } else if (!why) {
        why = "is missing or empty";
    }
    if (!why) {
        v->cap = 16;
        while (v->cap < 2 * v->n)
            v->cap *= 2;
        if (!(v->slot = malloc(v->cap * sizeof *v->slot)))
            why = "is too large for memory";
    }
    if (why) {
        snprintf(warn, cap, "%s: %s %s; no tokenizer files written", f->path, key, why);
        vocab_free(v);
        return -1;
    }
    memset(v->slot, 0xff, v->cap * sizeof *v->slot);
    for (size_t i = 0; i < v->n; i++) {
        size_t len = strlen(v->tok[i]), k = hash_str(v->tok[i], len) & (v->cap - 1);
        while (v->slot[k] >= 0 && strcmp(v->tok[v->slot[k]], v->tok[i]) != 0)
            k = (k + 1) & (v->cap - 1);
        if (v->slot[k] < 0)
            v->slot[k] = (int64_t)i; /* a repeated string keeps its first id */
    }
    return 0;
}

static cJSON *obj(cJSON *parent, const char *key)
{
    return parent ? cJSON_AddObjectToObject(parent, key) : cJSON_CreateObject();
}

static cJSON *typed(const char *type)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static cJSON *byte_level(int prefix_space, int trim, int regex)
{
    cJSON *o = typed("ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", prefix_space);
    cJSON_AddBoolToObject(o, "trim_offsets", trim);
    cJSON_AddBoolToObject(o, "use_regex", regex);
    return o;
}

static cJSON *split(const char *kind, const char *pattern, const char *behavior)
{
    cJSON *o = typed("Split"), *p = cJSON_AddObjectToObject(o, "pattern");
    cJSON_AddStringToObject(p, kind, pattern);
    cJSON_AddStringToObject(o, "behavior", behavior);
    cJSON_AddBoolToObject(o, "invert", 0);
    return o;
}

static cJSON *replace(const char *from, const char *to)
{
    cJSON *o = typed("Replace"), *p = cJSON_AddObjectToObject(o, "pattern");
    cJSON_AddStringToObject(p, "String", from);
    cJSON_AddStringToObject(o, "content", to);
    return o;
}

static cJSON *sequence(const char *type, const char *list_key, cJSON **items, size_t n)
{
    cJSON *o = typed(type), *a = cJSON_AddArrayToObject(o, list_key);
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, items[i]);
    return o;
}

/* TemplateProcessing that adds BOS (and EOS) around one or two sequences. */
static cJSON *template_processing(const char *bos, int64_t bos_id, const char *eos, int64_t eos_id)
{
    cJSON *o = typed("TemplateProcessing"), *st = NULL;
    const char *names[2] = {"single", "pair"};
    for (int pair = 0; pair < 2; pair++) {
        cJSON *a = cJSON_AddArrayToObject(o, names[pair]);
        for (int s = 0; s <= pair; s++) {
            const char *seq = s ? "B" : "A";
            for (int part = 0; part < 3; part++) {
                const char *special = part == 0 ? bos : part == 2 ? eos : NULL;
                if (part != 1 && !special)
                    continue;
                cJSON *it = cJSON_CreateObject(), *in = cJSON_AddObjectToObject(it, part == 1 ? "Sequence" : "SpecialToken");
                cJSON_AddStringToObject(in, "id", part == 1 ? seq : special);
                cJSON_AddNumberToObject(in, "type_id", s);
                cJSON_AddItemToArray(a, it);
            }
        }
    }
    st = cJSON_AddObjectToObject(o, "special_tokens");
    for (int k = 0; k < 2; k++) {
        const char *t = k ? eos : bos;
        int64_t id = k ? eos_id : bos_id;
        if (!t || cJSON_GetObjectItemCaseSensitive(st, t))
            continue;
        cJSON *e = cJSON_AddObjectToObject(st, t), *ids = cJSON_AddArrayToObject(e, "ids"), *ts = cJSON_AddArrayToObject(e, "tokens");
        cJSON_AddStringToObject(e, "id", t);
        cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)id));
        cJSON_AddItemToArray(ts, cJSON_CreateString(t));
    }
    return o;
}

/* Pre-tokenizer patterns of the byte-level BPE vocabularies, by tokenizer.ggml.pre. */
#define RX_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
static const char RX_LLAMA3[] = RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RX_QWEN2[] = RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RX_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" RX_CONTRACTIONS "?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" RX_CONTRACTIONS "?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RX_DSV3_CJK[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
static const char RX_DSV3_REST[] = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

/* normalizer, pre_tokenizer, post_processor, decoder and the model flags of a gpt2 vocab. */
static void bpe_pipeline(cJSON *tj, cJSON *model, const char *pre, int add_bos, const char *bos, int64_t bos_id,
                         char *warn, size_t cap, const char *path)
{
    cJSON *steps[4];
    int llama3_like = 1;
    if (!strcmp(pre, "qwen2")) {
        cJSON_AddItemToObject(tj, "normalizer", typed("NFC"));
        steps[0] = split("Regex", RX_QWEN2, "Isolated");
        steps[1] = byte_level(0, 0, 0);
        cJSON_AddItemToObject(tj, "pre_tokenizer", sequence("Sequence", "pretokenizers", steps, 2));
        llama3_like = 0;
    } else if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") || !strcmp(pre, "gpt-4o")) {
        cJSON_AddNullToObject(tj, "normalizer");
        steps[0] = split("Regex", strcmp(pre, "gpt-4o") ? RX_LLAMA3 : RX_O200K, "Isolated");
        steps[1] = byte_level(0, 1, 0);
        cJSON_AddItemToObject(tj, "pre_tokenizer", sequence("Sequence", "pretokenizers", steps, 2));
        cJSON_AddBoolToObject(model, "ignore_merges", 1);
    } else if (!strcmp(pre, "deepseek-v3")) {
        cJSON_AddItemToObject(tj, "normalizer", sequence("Sequence", "normalizers", NULL, 0));
        steps[0] = split("Regex", "\\p{N}{1,3}", "Isolated");
        steps[1] = split("Regex", RX_DSV3_CJK, "Isolated");
        steps[2] = split("Regex", RX_DSV3_REST, "Isolated");
        steps[3] = byte_level(0, 1, 0);
        cJSON_AddItemToObject(tj, "pre_tokenizer", sequence("Sequence", "pretokenizers", steps, 4));
    } else {
        if (strcmp(pre, "default") && strcmp(pre, "gpt2"))
            snprintf(warn, cap, "%s: tokenizer.ggml.pre '%s' has no known pattern; tokenizer.json uses GPT-2's", path, pre);
        cJSON_AddNullToObject(tj, "normalizer");
        cJSON_AddItemToObject(tj, "pre_tokenizer", byte_level(0, 1, 1));
    }
    if (llama3_like) {
        cJSON *pp = byte_level(1, 0, 1);
        if (add_bos && bos) {
            cJSON *seq[2] = {pp, template_processing(bos, bos_id, NULL, -1)};
            pp = sequence("Sequence", "processors", seq, 2);
        }
        cJSON_AddItemToObject(tj, "post_processor", pp);
        cJSON_AddItemToObject(tj, "decoder", byte_level(1, 1, 1));
        cJSON_AddNullToObject(model, "continuing_subword_prefix");
        cJSON_AddNullToObject(model, "end_of_word_suffix");
    } else {
        cJSON_AddItemToObject(tj, "post_processor", byte_level(0, 0, 0));
        cJSON_AddItemToObject(tj, "decoder", byte_level(0, 0, 0));
        cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
        cJSON_AddStringToObject(model, "end_of_word_suffix", "");
        cJSON_AddBoolToObject(model, "ignore_merges", 0);
    }
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
}

/* ------------------------------------------------------- SentencePiece merges */
typedef struct merge {
    int64_t l, r, piece; /* ids */
    float score;
    size_t order;        /* emission order before the sort (stable ties) */
} merge;

static int cmp_merge(const void *a, const void *b)
{
    const merge *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_local(const void *a, const void *b)
{
    const merge *x = a, *y = b;
    if (x->l != y->l)
        return x->l < y->l ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

/* Every (left, right) with left + right a piece, both pieces, split at a UTF-8 character
 * boundary; per piece ordered by (id of left, id of right); all ordered by the piece's score,
 * highest first, ties in piece order. */
static cJSON *spm_merges(const vocab *v)
{
    size_t n = 0, capm = 1024;
    merge *m = malloc(capm * sizeof *m);
    if (!m)
        return NULL;
    for (size_t id = 0; id < v->n; id++) {
        const char *s = v->tok[id];
        size_t len = strlen(s), first = n;
        for (size_t k = 1; k < len; k++) {
            if (((unsigned char)s[k] & 0xc0) == 0x80)
                continue; /* inside a character */
            int64_t l = vocab_find_n(v, s, k), r = vocab_find_n(v, s + k, len - k);
            if (l < 0 || r < 0)
                continue;
            if (n == capm) {
                merge *g = realloc(m, 2 * capm * sizeof *m);
                if (!g) {
                    free(m);
                    return NULL;
                }
                m = g;
                capm *= 2;
            }
            m[n++] = (merge){l, r, (int64_t)id, v->score[id], 0};
        }
        qsort(m + first, n - first, sizeof *m, cmp_local);
    }
    for (size_t i = 0; i < n; i++)
        m[i].order = i;
    qsort(m, n, sizeof *m, cmp_merge);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(v->tok[m[i].l]));
        cJSON_AddItemToArray(pair, cJSON_CreateString(v->tok[m[i].r]));
        cJSON_AddItemToArray(a, pair);
    }
    free(m);
    return a;
}

/* ------------------------------------------------------------------ the files */
static int64_t id_key(const tq_gguf_file *f, const char *key, size_t n)
{
    uint64_t v;
    return tq_gguf_get_u64(f, key, &v) == 0 && v < n ? (int64_t)v : -1;
}

static int bool_key(const tq_gguf_file *f, const char *key, int dflt)
{
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, key);
    return kv && kv->type == TQ_GGUF_BOOL ? (int)kv->num.u : dflt;
}

int tq_gguf_tokenizer_files(const tq_gguf_file *f, struct cJSON *out[3], char *warn, size_t cap, tq_err *e)
{
    out[0] = out[1] = out[2] = NULL;
    warn[0] = 0;
    char *kind = tq_gguf_get_str(f, "tokenizer.ggml.model");
    if (!kind)
        return 0;
    int spm = !strcmp(kind, "llama");
    if (!spm && strcmp(kind, "gpt2")) {
        snprintf(warn, cap, "%s: tokenizer.ggml.model '%s' is not a vocabulary tq can describe (gpt2, llama); no "
                 "tokenizer files written", f->path, kind);
        free(kind);
        return 0;
    }
    free(kind);
    vocab v;
    if (load_vocab(f, &v, spm, warn, cap) != 0)
        return 0;
    size_t n_merges = 0;
    char **merges = NULL;
    const char *why = NULL;
    if (!spm) {
        merges = read_strings(f, "tokenizer.ggml.merges", &n_merges, &why);
        if (why || !merges) {
            snprintf(warn, cap, "%s: tokenizer.ggml.merges %s; no tokenizer files written", f->path,
                     why ? why : "is missing (a byte-level BPE vocabulary needs its merges)");
            vocab_free(&v);
            return 0;
        }
    }
    int64_t bos = id_key(f, "tokenizer.ggml.bos_token_id", v.n), eos = id_key(f, "tokenizer.ggml.eos_token_id", v.n);
    int64_t unk = id_key(f, "tokenizer.ggml.unknown_token_id", v.n), pad = id_key(f, "tokenizer.ggml.padding_token_id", v.n);
    int64_t eot = id_key(f, "tokenizer.ggml.eot_token_id", v.n);
    int add_bos = bool_key(f, "tokenizer.ggml.add_bos_token", spm), add_eos = bool_key(f, "tokenizer.ggml.add_eos_token", 0);
    int space_prefix = bool_key(f, "tokenizer.ggml.add_space_prefix", 1);
    cJSON *tj = cJSON_CreateObject(), *tc = cJSON_CreateObject(), *gc = cJSON_CreateObject();
    if (!tj || !tc || !gc)
        goto oom;
    cJSON_AddStringToObject(tj, "version", "1.0");
    cJSON_AddNullToObject(tj, "truncation");
    cJSON_AddNullToObject(tj, "padding");
    cJSON *added = cJSON_AddArrayToObject(tj, "added_tokens");
    cJSON *model = obj(tj, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON *vj = cJSON_AddObjectToObject(model, "vocab");
    size_t dups = 0;
    for (size_t i = 0; i < v.n; i++) {
        int t = v.type[i];
        int is_added = t == TT_CONTROL || t == TT_USER || (spm && t == TT_UNKNOWN);
        if (is_added) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", v.tok[i]);
            cJSON_AddBoolToObject(a, "single_word", 0);
            cJSON_AddBoolToObject(a, "lstrip", 0);
            cJSON_AddBoolToObject(a, "rstrip", 0);
            cJSON_AddBoolToObject(a, "normalized", 0);
            cJSON_AddBoolToObject(a, "special", t != TT_USER);
            cJSON_AddItemToArray(added, a);
        }
        if (spm || !is_added) {
            if (vocab_find_n(&v, v.tok[i], strlen(v.tok[i])) != (int64_t)i)
                dups++; /* HF's vocab maps a string to one id: the first */
            else
                cJSON_AddItemToObject(vj, v.tok[i], cJSON_CreateNumber((double)i));
        }
    }
    if (spm) {
        cJSON *merges_j = spm_merges(&v);
        if (!merges_j)
            goto oom;
        cJSON_AddItemToObject(model, "merges", merges_j);
        cJSON_AddStringToObject(model, "unk_token", unk >= 0 ? v.tok[unk] : "<unk>");
        cJSON_AddNullToObject(model, "continuing_subword_prefix");
        cJSON_AddNullToObject(model, "end_of_word_suffix");
        cJSON_AddBoolToObject(model, "fuse_unk", 1);
        cJSON_AddBoolToObject(model, "byte_fallback", 1);
        cJSON_AddBoolToObject(model, "ignore_merges", 0);
        cJSON *nz[2] = {cJSON_CreateObject(), replace(" ", "\xe2\x96\x81")};
        cJSON_AddStringToObject(nz[0], "type", "Prepend");
        cJSON_AddStringToObject(nz[0], "prepend", "\xe2\x96\x81");
        if (space_prefix) {
            cJSON_AddItemToObject(tj, "normalizer", sequence("Sequence", "normalizers", nz, 2));
            cJSON_AddNullToObject(tj, "pre_tokenizer");
        } else { /* Gemma: no dummy prefix, pieces split after spaces */
            cJSON_Delete(nz[0]);
            cJSON_AddItemToObject(tj, "normalizer", nz[1]);
            cJSON_AddItemToObject(tj, "pre_tokenizer", split("String", " ", "MergedWithPrevious"));
        }
        cJSON_AddItemToObject(tj, "post_processor",
                              template_processing(add_bos && bos >= 0 ? v.tok[bos] : NULL, bos,
                                                  add_eos && eos >= 0 ? v.tok[eos] : NULL, eos));
        cJSON *dec[4] = {replace("\xe2\x96\x81", " "), typed("ByteFallback"), typed("Fuse"), NULL};
        size_t nd = 3;
        if (space_prefix) {
            dec[3] = typed("Strip");
            cJSON_AddStringToObject(dec[3], "content", " ");
            cJSON_AddNumberToObject(dec[3], "start", 1);
            cJSON_AddNumberToObject(dec[3], "stop", 0);
            nd = 4;
        }
        cJSON_AddItemToObject(tj, "decoder", sequence("Sequence", "decoders", dec, nd));
    } else {
        cJSON *mj = cJSON_AddArrayToObject(model, "merges");
        for (size_t i = 0; i < n_merges; i++)
            cJSON_AddItemToArray(mj, cJSON_CreateString(merges[i]));
        char *pre = tq_gguf_get_str(f, "tokenizer.ggml.pre");
        bpe_pipeline(tj, model, pre ? pre : "default", add_bos, bos >= 0 ? v.tok[bos] : NULL, bos, warn, cap, f->path);
        free(pre);
    }
    if (dups && !warn[0])
        snprintf(warn, cap, "%s: tokenizer.ggml.tokens repeats %zu strings; tokenizer.json's vocab maps each to its first id",
                 f->path, dups);
    /* tokenizer_config.json */
    cJSON_AddBoolToObject(tc, "add_bos_token", add_bos);
    cJSON_AddBoolToObject(tc, "add_eos_token", add_eos);
    const struct { const char *k; int64_t id; } named[] = {{"bos_token", bos}, {"eos_token", eos}, {"unk_token", unk}, {"pad_token", pad}};
    for (size_t i = 0; i < 4; i++) {
        if (named[i].id >= 0)
            cJSON_AddStringToObject(tc, named[i].k, v.tok[named[i].id]);
        else
            cJSON_AddNullToObject(tc, named[i].k);
    }
    cJSON_AddBoolToObject(tc, "clean_up_tokenization_spaces", 0);
    cJSON_AddStringToObject(tc, "tokenizer_class", spm ? "LlamaTokenizerFast" : "PreTrainedTokenizerFast");
    if (spm)
        cJSON_AddBoolToObject(tc, "legacy", 0);
    char *tmpl = tq_gguf_get_str(f, "tokenizer.chat_template");
    if (tmpl)
        cJSON_AddStringToObject(tc, "chat_template", tmpl);
    free(tmpl);
    /* generation_config.json: the ids GGUF has */
    if (bos >= 0)
        cJSON_AddNumberToObject(gc, "bos_token_id", (double)bos);
    if (eos >= 0 && eot >= 0 && eot != eos) {
        cJSON *a = cJSON_AddArrayToObject(gc, "eos_token_id");
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)eos));
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)eot));
    } else if (eos >= 0) {
        cJSON_AddNumberToObject(gc, "eos_token_id", (double)eos);
    }
    if (pad >= 0)
        cJSON_AddNumberToObject(gc, "pad_token_id", (double)pad);
    tq_free_strv(merges, n_merges);
    vocab_free(&v);
    out[0] = tj;
    out[1] = tc;
    if (bos >= 0 || eos >= 0)
        out[2] = gc;
    else
        cJSON_Delete(gc);
    return 0;
oom:
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    cJSON_Delete(gc);
    tq_free_strv(merges, n_merges);
    vocab_free(&v);
    return tq_fail(e, TQ_ENOMEM, "%s: out of memory writing the tokenizer files", f->path);
}
