/* formats/flash_internal.h — helpers shared by the formats/flash_*.c sources (not public). */
#ifndef TQ_FLASH_INTERNAL_H
#define TQ_FLASH_INTERNAL_H

#include "formats/flash.h"

#include <cjson/cJSON.h>

/* An exact non-negative integer KEY of obj; a missing or inexact value is an error naming
 * path and the header part (what). */
int tq_flash_json_u64(const cJSON *obj, const char *key, uint64_t *out, const char *path,
                      const char *what, tq_err *e);

#endif
