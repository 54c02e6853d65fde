/* --plan arithmetic: what a split needs on a machine with a given amount of RAM. */
#include "layout/split/split.h"

#include <cjson/cJSON.h>

#define GiB (1024ull * 1024 * 1024)

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return tq_mul_u64(a, b, &r) == 0 ? r : UINT64_MAX;
}

void tq_split_plan_compute(tq_split_ram_plan *p)
{
    p->reserve = 3 * GiB;
    /* An engine may use at most min(RAM, max(8 GiB, 3/4 of RAM), 192 GiB). */
    uint64_t three_q = p->ram / 4 * 3 + (p->ram % 4) * 3 / 4;
    uint64_t env = three_q > 8 * GiB ? three_q : 8 * GiB;
    if (env > p->ram)
        env = p->ram;
    if (env > 192 * GiB)
        env = 192 * GiB;
    p->envelope = env;
    uint64_t fixed;
    if (tq_add_u64(p->pinned_bytes, p->reserve, &fixed) != 0)
        fixed = UINT64_MAX;
    p->cache_budget = env > fixed ? env - fixed : 0;
    if (p->kind == TQ_FLASH_MOE) {
        p->bytes_per_token_cold = sat_mul(sat_mul(p->n_layers, p->experts_per_tok), p->block_size);
        p->blocks_total = sat_mul(p->n_layers, p->num_experts);
    } else {
        p->bytes_per_token_cold = p->ffn_bytes;
        p->blocks_total = p->n_layers;
    }
    p->blocks_cached = p->block_size ? p->cache_budget / p->block_size : 0;
    if (p->blocks_cached > p->blocks_total)
        p->blocks_cached = p->blocks_total;
    p->cached_share = p->blocks_total ? (double)p->blocks_cached / (double)p->blocks_total : 0.0;
    /* the least an engine holds: pinned, the reserve, and two layers' worth of blocks (the
     * layer in use and the next one read ahead) */
    uint64_t work = p->kind == TQ_FLASH_MOE ? sat_mul(sat_mul(2, p->experts_per_tok), p->block_size) : sat_mul(2, p->block_size);
    uint64_t need = fixed == UINT64_MAX || work > UINT64_MAX - fixed ? UINT64_MAX : fixed + work;
    for (int t = 0; t < TQ_TARGET_COUNT; t++) {
        p->targets[t].min_ram_bytes = need;
        p->targets[t].fits = need <= env;
    }
}

cJSON *tq_split_plan_json(const tq_split_ram_plan *p)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    int ok = cJSON_AddStringToObject(j, "kind", p->kind == TQ_FLASH_MOE ? "moe" : "dense") != NULL;
    ok = ok && tq_json_add_u64(j, "ram_bytes", p->ram) && tq_json_add_u64(j, "pinned_bytes", p->pinned_bytes) &&
         tq_json_add_u64(j, "layers", p->n_layers) && tq_json_add_u64(j, "ffn_bytes", p->ffn_bytes) &&
         tq_json_add_u64(j, "bytes_per_token_cold", p->bytes_per_token_cold) &&
         tq_json_add_u64(j, "envelope_bytes", p->envelope) && tq_json_add_u64(j, "reserve_bytes", p->reserve) &&
         tq_json_add_u64(j, "cache_budget_bytes", p->cache_budget) &&
         cJSON_AddNumberToObject(j, "cached_share", p->cached_share);
    if (p->kind == TQ_FLASH_MOE)
        ok = ok && tq_json_add_u64(j, "num_experts", p->num_experts) &&
             tq_json_add_u64(j, "experts_per_tok", p->experts_per_tok) &&
             tq_json_add_u64(j, "expert_block_bytes", p->block_size) &&
             tq_json_add_u64(j, "experts_total", p->blocks_total) &&
             tq_json_add_u64(j, "experts_cached", p->blocks_cached);
    else
        ok = ok && tq_json_add_u64(j, "largest_layer_file_bytes", p->block_size) &&
             tq_json_add_u64(j, "layers_cached", p->blocks_cached);
    cJSON *ts = ok ? cJSON_AddObjectToObject(j, "targets") : NULL;
    ok = ok && ts;
    for (int t = 0; ok && t < TQ_TARGET_COUNT; t++) {
        cJSON *o = cJSON_AddObjectToObject(ts, tq_split_target_name(t));
        ok = o && cJSON_AddBoolToObject(o, "readable", p->targets[t].readable) &&
             cJSON_AddBoolToObject(o, "fits", p->targets[t].readable && p->targets[t].fits) &&
             tq_json_add_u64(o, "min_ram_bytes", p->targets[t].min_ram_bytes) &&
             (p->targets[t].readable || cJSON_AddStringToObject(o, "reason", p->targets[t].reason));
    }
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}
