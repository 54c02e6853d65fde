/* layout/layout.h — streaming layouts: moe_flash_v1 expert files, flash_aligned_v1 dense
 * FFN files, split/join, interleaved row files. */
#ifndef TQ_LAYOUT_H
#define TQ_LAYOUT_H

#include "common/common.h"

#endif
