/* common/utf8.c — the one UTF-8 check. The rules (RFC 3629): a code point is written in its
 * shortest form (no overlong encodings), is at most U+10FFFF and is not a UTF-16 surrogate
 * (U+D800..U+DFFF); every continuation byte is 10xxxxxx and a sequence may not run past the
 * end of the text. U+0000 is valid UTF-8; callers that refuse NUL bytes check for them. */
#include "common/common.h"

int tq_utf8_next(const char *str, size_t len, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    if (len == 0)
        return -1;
    unsigned c = s[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return -1;
    }
    if (len < n)
        return -1;
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return -1;
        v = v << 6 | (s[k] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return -1;
    *cp = v;
    return (int)n;
}

int tq_utf8_check(const char *s, size_t len, size_t *bad)
{
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        int n = tq_utf8_next(s + i, len - i, &cp);
        if (n < 0) {
            if (bad)
                *bad = i;
            return -1;
        }
        i += (size_t)n;
    }
    return 0;
}
