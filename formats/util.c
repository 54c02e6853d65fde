/* Small helpers shared by the formats/ sources. */
#include "formats/formats_internal.h"

#include <stdio.h>

void tq_shape_str(const uint64_t *shape, int ndim, char *buf, size_t cap)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}
