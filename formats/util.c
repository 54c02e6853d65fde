/* Small helpers shared by the formats/ sources. */
#include "formats/formats_internal.h"

#include <cjson/cJSON.h>
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

int tq_model_quant_params(const cJSON *config, const char *P, uint64_t *bits, uint64_t *group)
{
    const cJSON *q = config ? cJSON_GetObjectItemCaseSensitive(config, "quantization") : NULL;
    if (!cJSON_IsObject(q) && config)
        q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    if (!cJSON_IsObject(q))
        return 0;
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(q, P);
    const cJSON *src = cJSON_IsObject(mo) ? mo : q;
    uint64_t b, g;
    if (tq_json_u64(cJSON_GetObjectItemCaseSensitive(src, "bits"), &b) != 0 ||
        tq_json_u64(cJSON_GetObjectItemCaseSensitive(src, "group_size"), &g) != 0)
        return 0;
    *bits = b;
    *group = g;
    return 1;
}
