/* The config.json checks shared by fuzz_config and fuzz_family (fz_config.h). */
#include "fz_config.h"

#include "formats/family.h"
#include "formats/formats.h"
#include "layout/split/split.h"
#include "runtime/rt_internal.h"
#include "tests/fuzz/fz_file.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

void fz_config_runtime(const char *dir)
{
    tq_err e;
    rt_config c;
    cJSON *j = NULL;
    if (rt_config_load(&c, dir, &j, &e) != 0) {
        if (j || !e.msg[0])
            abort();
        fz_note(e.msg);
        return;
    }
    if (!j || !c.fam || tq_family_detect(j) != c.fam)
        abort();
    /* RoPE turns pairs: the head is even, except under MLA (DeepSeek), where only the rotary
     * part must be and qk_nope_head_dim may be odd */
    const int mla = c.arch == RT_DEEPSEEK;
    if (c.heads == 0 || c.kv_heads == 0 || c.heads % c.kv_heads || c.head_dim == 0 ||
        (mla ? c.qk_rope % 2 || c.head_dim != c.qk_nope + c.qk_rope : c.head_dim % 2))
        abort();
    if (!c.mixer || !c.moe || !c.rope.inv_freq || c.rope.dim > c.head_dim + c.qk_rope || c.rope.dim % 2)
        abort();
    for (uint64_t l = 0; l < c.layers; l++) {
        /* the runtime's layer kinds are the family table's */
        if (tq_family_layer_is_moe(c.fam, j, l, &e) != c.moe[l] || tq_family_attn_kind(c.fam, j, l, &e) < 0)
            abort();
        if (rt_layer_is_moe(&c, l) && (c.top_k == 0 || c.top_k > c.experts || c.top_k > 64))
            abort();
        if (c.mixer[l] == RT_MIX_LINEAR && (c.lk_heads == 0 || c.lv_heads % c.lk_heads || c.conv_k == 0))
            abort();
        if (c.mixer[l] == RT_MIX_SLIDING && c.window == 0)
            abort();
    }
    static const char *mods[] = {"model.layers.0.mlp.gate", "lm_head", "model.embed_tokens", ""};
    for (size_t i = 0; i < sizeof mods / sizeof *mods; i++) {
        uint64_t bits, group;
        rt_config_affine(j, mods[i], &bits, &group, &c);
        if (bits > 32 || group > (1u << 20))
            abort();
    }
    rt_config_free(&c);
    cJSON_Delete(j);
}

void fz_config_model(const char *dir)
{
    tq_err e;
    tq_model *m = NULL;
    if (tq_model_open(&m, dir, &e) == 0) {
        if (!cJSON_IsObject(m->config))
            abort();
        tq_model_close(m);
    } else {
        fz_note(e.msg);
    }
    tq_split_opts so = {0};
    so.threads = 1;
    so.quiet = 1;
    tq_split_ram_plan p;
    if (tq_split_plan(dir, &so, 64ull << 30, &p, &e) != 0)
        fz_note(e.msg);
}
