/* formats/gguf_internal.h — what the GGUF files of formats/ share and nothing else does. */
#ifndef TQ_GGUF_INTERNAL_H
#define TQ_GGUF_INTERNAL_H

#include "formats/formats.h"

/* ggml type ids used by name in the model layer. */
enum { TQ_GGML_F32 = 0, TQ_GGML_F16 = 1, TQ_GGML_BF16 = 30 };

#endif
