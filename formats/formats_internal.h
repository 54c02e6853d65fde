/* formats/formats_internal.h — helpers shared by the formats/ sources, not public. */
#ifndef TQ_FORMATS_INTERNAL_H
#define TQ_FORMATS_INTERNAL_H

#include "formats/formats.h"

/* 0 if s[0..len) is valid UTF-8 (no overlongs, surrogates or code points > U+10FFFF);
 * else -1 and *bad = offset of the first bad byte. */
int tq_utf8_check(const char *s, size_t len, size_t *bad);

/* "[2, 3, 4]" into buf. */
void tq_shape_str(const uint64_t *shape, int ndim, char *buf, size_t cap);

#endif
