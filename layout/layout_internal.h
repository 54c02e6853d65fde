/* layout/layout_internal.h — helpers shared by the layout/ sources (not public). */
#ifndef TQ_LAYOUT_INTERNAL_H
#define TQ_LAYOUT_INTERNAL_H

#include "layout/layout.h"

#include <cjson/cJSON.h>

/* JSON numbers that must be exact non-negative integers (≤ 2^53). */
#define TQ_JSON_MAX_INT 9007199254740992.0
int tq_json_get_u64(const cJSON *obj, const char *key, uint64_t *out, const char *path,
                    const char *what, tq_err *e);
int tq_json_num_u64(const cJSON *v, uint64_t *out);
cJSON *tq_json_add_u64(cJSON *obj, const char *key, uint64_t v);

/* Block-order rank of an expert/FFN tensor tail "PROJ.SUFFIX" (gate, up, down × weight,
 * scales, biases, bias); -1 when it is not one. */
int tq_ffn_slot_rank(const char *proj, const char *suffix);
#define TQ_FFN_NSLOTS 12
extern const char *const tq_ffn_projs[3];
extern const char *const tq_ffn_suffixes[4];


#endif
