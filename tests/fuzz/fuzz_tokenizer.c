/* Fuzz target: tokenizer.json loading on arbitrary bytes (the whole input is the file). A file
 * that loads must then encode fixed texts and the input itself (when it is UTF-8) without
 * harm, decode every id it produced back to valid UTF-8, and stream the same text. */
#include "tokenizer/tokenizer.h"
#include "tests/fuzz/fz_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int utf8_ok(const char *s, size_t n)
{
    /* The tokenizer's own check is what is under test; a plain re-check by round trip through
     * the library would prove nothing, so count the lead and continuation bytes instead. */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t l = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!l || i + l > n)
            return 0;
        for (size_t k = 1; k < l; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80)
                return 0;
        i += l;
    }
    return 1;
}

static void one(const tq_tok *t, const char *text, size_t len)
{
    tq_err e;
    int32_t *ids = NULL;
    size_t n = 0;
    for (int special = 0; special < 2; special++) {
        if (tq_tok_encode(t, text, len, special, &ids, &n, &e) != 0) {
            if (ids || !e.msg[0])
                abort();
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= tq_tok_vocab_size(t))
                abort();
        char *back = NULL;
        size_t bl = 0;
        if (tq_tok_decode(t, ids, n, &back, &bl, &e) == 0) {
            if (!utf8_ok(back, bl) || strlen(back) > bl)
                abort();
            /* streamed output adds up to the same text */
            tq_tok_stream *s;
            if (n <= 64 && tq_tok_stream_new(t, &s, &e) == 0) {
                size_t got = 0;
                int ok = 1;
                const char *p;
                size_t pl;
                for (size_t i = 0; ok && i < n; i++) {
                    ok = tq_tok_stream_push(s, ids[i], &p, &pl, &e) == 0;
                    if (ok && (got + pl > bl || memcmp(back + got, p, pl)))
                        abort();
                    got += ok ? pl : 0;
                }
                if (ok && (tq_tok_stream_finish(s, &p, &pl, &e) != 0 || got + pl != bl || memcmp(back + got, p, pl)))
                    abort();
                tq_tok_stream_free(s);
            }
        } else if (!e.msg[0]) {
            abort();
        }
        free(back);
        free(ids);
        ids = NULL;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e;
    tq_tok *t = NULL;
    if (tq_tok_load_mem((const char *)data, size, NULL, 0, "fuzz/tokenizer.json", &t, &e) != 0) {
        if (t || !e.msg[0])
            abort();
        fz_note(e.msg);
        return 0;
    }
    static const char *const texts[] = {"", "hello world", "  a\n\n\tb  ", "x<|end|>y<s></s>",
                                        "caf\xC3\xA9 e\xCC\x81 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
                                        "12345 3.14 '''s 'LL", "\xE2\x96\x81\xE2\x96\x81 <0x41>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        one(t, texts[i], strlen(texts[i]));
    one(t, (const char *)data, size > 4096 ? 4096 : size); /* refused when not UTF-8 */
    /* every id of the vocabulary decodes (or is refused with a message) */
    for (size_t id = 0; id < tq_tok_vocab_size(t) && id < 4096; id++) {
        int32_t v = (int32_t)id;
        char *s = NULL;
        size_t n;
        if (tq_tok_decode(t, &v, 1, &s, &n, &e) == 0 && !utf8_ok(s, n))
            abort();
        free(s);
    }
    tq_tok_free(t);
    return 0;
}
