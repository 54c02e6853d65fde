/* tokenizer.json for generated models: a real byte-level BPE tokenizer in HuggingFace's format
 * (Qwen2-style: NFC, the Qwen2 split regex, GPT-2's byte-to-character map), small enough for
 * tests. Ids: 0 <unk>, 1 <s>, 2 </s> (added, special), 3..258 the 256 bytes' characters in byte
 * order, then merges learnt from a built-in text until the vocabulary is full or every word of
 * the text is one token. With a vocabulary under 259 only the first bytes fit and the rest encode as <unk>.
 * gemma4 has Gemma's special ids instead (0 <pad>, 1 <eos>, 2 <bos>, 3 <unk>; its config.json
 * says bos_token_id 2, eos_token_id 1, pad_token_id 0), the bytes from 4, <bos> prepended.
 * Every byte depends on --arch and --vocab alone. */
#include "testdata/mkmodel/mk_internal.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* The merges are learnt from this; it only has to look a little like text and code. */
static const char train_text[] =
    "The quick brown fox jumps over the lazy dog. The model streams its experts from the disk, "
    "and the tokenizer turns the text into tokens and the tokens back into text. There is a "
    "cache in memory for the weights that are read most often; the rest are read when needed.\n"
    "In the beginning the weights are quantized to three or four bits per value, in groups of "
    "sixty-four, with a scale for each group. Then the layers are split into files, one for each "
    "layer, so that the runtime reads only what the next token needs. It is not the fastest way "
    "to run a model, but it is the one that fits on a small machine with a fast disk.\n"
    "int main(int argc, char **argv)\n{\n    for (int i = 0; i < argc; i++)\n        printf(\"%s\\n\", argv[i]);\n"
    "    return 0;\n}\n"
    "def tokenize(text):\n    return [token for token in text.split() if token]\n\n"
    "Numbers: 1, 2, 3, 10, 20, 30, 100, 2024, 3.14, 1000000. Dates: 2024-01-01, 1999-12-31.\n"
    "Questions? Answers! Lists: one, two, three; four, five, six. \"Quotes\" and 'apostrophes' "
    "aren't rare: it's, don't, we're, they've, I'm, you'll, he'd.\n";

#define MAX_WORDS 512
#define MAX_WORD_SYMS 64

typedef struct word {
    int32_t sym[MAX_WORD_SYMS];
    int n, count;
} word;

/* Splits like the Qwen2 regex does on ASCII: letters with one leading non-letter, single
 * digits, punctuation runs with an optional leading space, and runs of white space. */
static size_t next_piece(const char *s, size_t n, size_t i)
{
#define ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define DIGIT(c) ((c) >= '0' && (c) <= '9')
#define SPACE(c) ((c) == ' ' || (c) == '\n' || (c) == '\t')
    size_t j = i;
    if (ALPHA(s[j]) || (j + 1 < n && !DIGIT(s[j]) && s[j] != '\n' && ALPHA(s[j + 1]))) {
        j++;
        while (j < n && ALPHA(s[j]))
            j++;
        return j;
    }
    if (DIGIT(s[j]))
        return j + 1;
    if (!SPACE(s[j]) || (s[j] == ' ' && j + 1 < n && !SPACE(s[j + 1]) && !ALPHA(s[j + 1]) && !DIGIT(s[j + 1]))) {
        j++;
        while (j < n && !SPACE(s[j]) && !ALPHA(s[j]) && !DIGIT(s[j]))
            j++;
        return j;
    }
    while (j < n && SPACE(s[j]))
        j++;
    return j;
#undef ALPHA
#undef DIGIT
#undef SPACE
}

typedef struct tokset {
    char **s;
    long n;
} tokset;

static long find_tok(const tokset *t, const char *s)
{
    for (long i = 0; i < t->n; i++)
        if (t->s[i] && !strcmp(t->s[i], s))
            return i;
    return -1;
}

static void free_toks(tokset *t)
{
    for (long i = 0; i < t->n; i++)
        free(t->s[i]);
    free(t->s);
}

typedef struct pairc {
    int32_t a, b;
    int count;
} pairc;

static int pair_cmp(const void *x, const void *y)
{
    const pairc *p = x, *q = y;
    return p->a != q->a ? (p->a < q->a ? -1 : 1) : p->b != q->b ? (p->b < q->b ? -1 : 1) : 0;
}

/* Learns merges: fills toks (id -> string) up to vocab and merges (pairs of ids, in rank
 * order): each time the most frequent adjacent pair (ties: the smaller ids), until the
 * vocabulary is full or every word of the text is one token. */
static int learn(long vocab, int base, tokset *toks, int32_t (*merges)[2], long *n_merges, tq_err *e)
{
    size_t n = sizeof train_text - 1;
    word *w = calloc(MAX_WORDS, sizeof *w);
    pairc *pc = calloc(n, sizeof *pc);
    int nw = 0;
    if (!w || !pc) {
        free(w);
        free(pc);
        return tq_fail(e, TQ_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n;) {
        size_t j = next_piece(train_text, n, i);
        int k = 0;
        for (; k < nw; k++) { /* a repeated word is counted, not stored twice */
            int same = w[k].n == (int)(j - i);
            for (size_t q = 0; same && q < j - i; q++)
                same = w[k].sym[q] == base + (unsigned char)train_text[i + q];
            if (same)
                break;
        }
        if (k == nw && nw < MAX_WORDS && j - i <= MAX_WORD_SYMS) {
            w[nw].n = (int)(j - i);
            for (size_t q = 0; q < j - i; q++)
                w[nw].sym[q] = base + (unsigned char)train_text[i + q];
            nw++;
        }
        if (k < nw)
            w[k].count++;
        i = j;
    }
    *n_merges = 0;
    int rc = 0;
    while (toks->n < vocab && (size_t)*n_merges < n) {
        size_t np = 0;
        for (int a = 0; a < nw; a++)
            for (int s = 0; s + 1 < w[a].n; s++)
                pc[np++] = (pairc){w[a].sym[s], w[a].sym[s + 1], w[a].count};
        qsort(pc, np, sizeof *pc, pair_cmp);
        int32_t best_a = -1, best_b = -1;
        int best = 0;
        for (size_t i = 0; i < np;) {
            size_t k = i;
            int c = 0;
            while (k < np && pc[k].a == pc[i].a && pc[k].b == pc[i].b)
                c += pc[k++].count;
            if (c > best) /* sorted order: the first of equal counts has the smaller ids */
                best = c, best_a = pc[i].a, best_b = pc[i].b;
            i = k;
        }
        if (best_a < 0)
            break;
        size_t la = strlen(toks->s[best_a]), lb = strlen(toks->s[best_b]);
        char *cat = malloc(la + lb + 1);
        if (!cat) {
            rc = tq_fail(e, TQ_ENOMEM, "out of memory");
            break;
        }
        memcpy(cat, toks->s[best_a], la);
        memcpy(cat + la, toks->s[best_b], lb + 1);
        long id = find_tok(toks, cat);
        if (id < 0) {
            id = toks->n;
            toks->s[toks->n++] = cat;
        } else {
            free(cat);
        }
        merges[*n_merges][0] = best_a;
        merges[*n_merges][1] = best_b;
        ++*n_merges;
        for (int a = 0; a < nw; a++) { /* apply the merge, left to right */
            int o = 0;
            for (int s = 0; s < w[a].n; s++) {
                if (s + 1 < w[a].n && w[a].sym[s] == best_a && w[a].sym[s + 1] == best_b) {
                    w[a].sym[o++] = (int32_t)id;
                    s++;
                } else {
                    w[a].sym[o++] = w[a].sym[s];
                }
            }
            w[a].n = o;
        }
    }
    free(w);
    free(pc);
    return rc;
}

static cJSON *added(int id, const char *content)
{
    cJSON *a = cJSON_CreateObject();
    if (a && (!cJSON_AddNumberToObject(a, "id", id) || !cJSON_AddStringToObject(a, "content", content) ||
              !cJSON_AddBoolToObject(a, "single_word", 0) || !cJSON_AddBoolToObject(a, "lstrip", 0) ||
              !cJSON_AddBoolToObject(a, "rstrip", 0) || !cJSON_AddBoolToObject(a, "normalized", 0) ||
              !cJSON_AddBoolToObject(a, "special", 1))) {
        cJSON_Delete(a);
        return NULL;
    }
    return a;
}

/* TemplateProcessing that puts BOS (id bos_id) before every sequence. */
static cJSON *post_processor(const char *bos, int bos_id)
{
    char buf[600];
    snprintf(buf, sizeof buf,
             "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"%s\",\"type_id\":0}},"
             "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"SpecialToken\":{\"id\":\"%s\",\"type_id\":0}},"
             "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],"
             "\"special_tokens\":{\"%s\":{\"id\":\"%s\",\"ids\":[%d],\"tokens\":[\"%s\"]}}}",
             bos, bos, bos, bos, bos_id, bos);
    return cJSON_Parse(buf);
}

static const char qwen2_split[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                                  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int tq_mk_tokenizer_json(const tq_mk_opts *o, cJSON **out, tq_err *e)
{
    static const char *const plain[3] = {"<unk>", "<s>", "</s>"}, *const gemma[4] = {"<pad>", "<eos>", "<bos>", "<unk>"};
    int gem = o->arch == TQ_MK_GEMMA4, n_special = gem ? 4 : 3;
    const char *const *special = gem ? gemma : plain, *bos = gem ? "<bos>" : "<s>";
    long vocab = o->vocab;
    tokset toks = {calloc((size_t)vocab + 260, sizeof(char *)), 0};
    int32_t(*merges)[2] = calloc(sizeof train_text, sizeof *merges);
    long n_merges = 0;
    cJSON *j = NULL;
    int rc = -1;
    if (!toks.s || !merges) {
        tq_fail(e, TQ_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_special; i++)
        if (!(toks.s[toks.n++] = strdup(special[i])))
            goto oom;
    for (unsigned b = 0; b < 256; b++) {
        char c[3] = {0};
        tq_tok_byte_char(b, c);
        if (!(toks.s[toks.n++] = strdup(c)))
            goto oom;
    }
    if (vocab < toks.n) { /* a tiny vocabulary keeps the first bytes only */
        for (long i = vocab; i < toks.n; i++)
            free(toks.s[i]), toks.s[i] = NULL;
        toks.n = vocab;
    } else if (learn(vocab, n_special, &toks, merges, &n_merges, e)) {
        goto done;
    }
    j = cJSON_CreateObject();
    cJSON *model = NULL, *v = NULL, *mg = NULL, *add = NULL, *pre = NULL, *seq = NULL, *split = NULL, *bl = NULL;
    cJSON *dec = NULL, *post = NULL;
    int bad = !j || !cJSON_AddStringToObject(j, "version", "1.0") || !cJSON_AddNullToObject(j, "truncation") ||
              !cJSON_AddNullToObject(j, "padding") || !(add = cJSON_AddArrayToObject(j, "added_tokens")) ||
              !(model = cJSON_AddObjectToObject(j, "model")) || !cJSON_AddStringToObject(model, "type", "BPE") ||
              !cJSON_AddNullToObject(model, "dropout") || !cJSON_AddStringToObject(model, "unk_token", "<unk>") ||
              !cJSON_AddBoolToObject(model, "fuse_unk", 0) || !cJSON_AddBoolToObject(model, "byte_fallback", 0) ||
              !cJSON_AddBoolToObject(model, "ignore_merges", 0) || !(v = cJSON_AddObjectToObject(model, "vocab")) ||
              !(mg = cJSON_AddArrayToObject(model, "merges")) || !cJSON_AddItemToObject(j, "normalizer", cJSON_Parse("{\"type\":\"NFC\"}")) ||
              !(pre = cJSON_AddObjectToObject(j, "pre_tokenizer")) || !cJSON_AddStringToObject(pre, "type", "Sequence") ||
              !(seq = cJSON_AddArrayToObject(pre, "pretokenizers")) || !(split = cJSON_CreateObject()) ||
              !cJSON_AddItemToArray(seq, split) || !cJSON_AddStringToObject(split, "type", "Split") ||
              !cJSON_AddItemToObject(split, "pattern", cJSON_CreateObject()) ||
              !cJSON_AddStringToObject(cJSON_GetObjectItem(split, "pattern"), "Regex", qwen2_split) ||
              !cJSON_AddStringToObject(split, "behavior", "Isolated") || !cJSON_AddBoolToObject(split, "invert", 0) ||
              !(bl = cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}")) ||
              !cJSON_AddItemToArray(seq, bl) || !(dec = cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                                                                    "\"trim_offsets\":false,\"use_regex\":false}")) ||
              !cJSON_AddItemToObject(j, "decoder", dec) ||
              !(post = post_processor(bos, gem ? 2 : 1)) ||
              !cJSON_AddItemToObject(j, "post_processor", post);
    for (int i = 0; !bad && i < n_special && i < toks.n; i++) {
        cJSON *a = added(i, special[i]);
        bad = !a || !cJSON_AddItemToArray(add, a);
    }
    for (long i = 0; !bad && i < toks.n; i++)
        bad = !cJSON_AddNumberToObject(v, toks.s[i], (double)i);
    for (long i = 0; !bad && i < n_merges; i++) {
        cJSON *p = cJSON_CreateArray();
        bad = !p || !cJSON_AddItemToArray(mg, p) || !cJSON_AddItemToArray(p, cJSON_CreateString(toks.s[merges[i][0]])) ||
              !cJSON_AddItemToArray(p, cJSON_CreateString(toks.s[merges[i][1]]));
    }
    if (bad)
        goto oom;
    *out = j;
    j = NULL;
    rc = 0;
    goto done;
oom:
    tq_fail(e, TQ_ENOMEM, "out of memory");
done:
    cJSON_Delete(j);
    free_toks(&toks);
    free(merges);
    return rc;
}
