/* Small helpers shared by the formats/ sources. */
#include "formats/formats_internal.h"

#include <stdio.h>

int tq_utf8_check(const char *str, size_t len, size_t *bad)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            *bad = i;
            return -1;
        }
        if (len - i - 1 < n) {
            *bad = i;
            return -1;
        }
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) {
                *bad = i;
                return -1;
            }
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            *bad = i;
            return -1;
        }
        i += n + 1;
    }
    return 0;
}

void tq_shape_str(const uint64_t *shape, int ndim, char *buf, size_t cap)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}
