/* runtime/runtime.h — reference decoder: resident or streamed from a split directory. */
#ifndef TQ_RUNTIME_H
#define TQ_RUNTIME_H

#include "common/common.h"

#endif
