/* quant/quant.h — TurboQuant: block Hadamard rotation, sign draws, Lloyd-Max codebooks,
 * per-group scales, packing. Pure computation; no file I/O. */
#ifndef TQ_QUANT_H
#define TQ_QUANT_H

#include "common/common.h"

#endif
