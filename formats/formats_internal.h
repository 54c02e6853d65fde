/* formats/formats_internal.h — helpers shared by the formats/ sources, not public. */
#ifndef TQ_FORMATS_INTERNAL_H
#define TQ_FORMATS_INTERNAL_H

#include "formats/formats.h"

/* "[2, 3, 4]" into buf. */
void tq_shape_str(const uint64_t *shape, int ndim, char *buf, size_t cap);

#endif
