/* Fuzz target: a family's config.json (formats/family.c detection and per-layer rules, then the
 * runtime's, model layer's and split planner's reading of it) against a model of that family.
 * tq_family_config_check runs on every JSON object. The input is the config.json; the family it
 * names picks a tiny model tq-mkmodel generates for that family (each made once per process),
 * into which the input is written, so that every family's tensor checks meet configs that
 * claim to describe them. A config naming no family
 * goes into a directory holding nothing else. */
#include "formats/family.h"
#include "tests/fuzz/fz_config.h"
#include "tests/fuzz/fz_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The generated model of family f (made on first use), or NULL when tq-mkmodel has no arch for it. */
static const char *family_dir(const tq_family *f)
{
    static const char *dirs[TQ_FAM_COUNT];
    if (dirs[f->id])
        return dirs[f->id];
    for (int a = 0; a < TQ_MK_ARCH_COUNT; a++)
        if (tq_mk_family((tq_mk_arch)a) == f) {
            tq_mk_opts o;
            char rel[64];
            fz_mk_opts(&o, (tq_mk_arch)a);
            snprintf(rel, sizeof rel, "fam-%s", f->name);
            return dirs[f->id] = fz_mkmodel(rel, &o);
        }
    return NULL;
}

/* family.c's own answers for the parsed config: in range, and a refusal says why. */
static void family_rules(const tq_family *f, const cJSON *j)
{
    tq_err e;
    uint64_t layers = 0, ne;
    e.msg[0] = 0;
    if (tq_family_by_name(f->name) != f || tq_family_text_config(j) == NULL)
        abort();
    int rc = tq_family_cfg_u64(j, "num_hidden_layers", &layers, &e);
    if (rc < -1 || rc > 1 || (rc < 0 && !e.msg[0]))
        abort();
    if (rc != 0)
        layers = 4;
    e.msg[0] = 0;
    if (tq_family_num_experts(f, j, &ne, &e) != 0 && !e.msg[0])
        abort();
    for (uint64_t l = 0; l < layers && l < 512; l++) {
        e.msg[0] = 0;
        int moe = tq_family_layer_is_moe(f, j, l, &e);
        if (moe < -1 || moe > 1 || (moe < 0 && !e.msg[0]) || (moe > 0 && f->store == TQ_EXP_NONE))
            abort();
        e.msg[0] = 0;
        int kind = tq_family_attn_kind(f, j, l, &e);
        if (kind < -1 || kind > TQ_ATTN_SLIDING || (kind < 0 && !e.msg[0]))
            abort();
    }
    /* names of the layers the config declares (and the one past it: DeepSeek's MTP layer) */
    const char *root = f->wrapped ? "model.language_model." : "model.";
    const char *blk = f->moe_block && *f->moe_block ? f->moe_block : "mlp";
    for (uint64_t l = layers > 0 ? layers - 1 : 0; l <= layers; l++) {
        char name[256];
        tq_name_info ni;
        snprintf(name, sizeof name, "%slayers.%llu.%s.experts.3.%s.weight", root, (unsigned long long)l, blk,
                 f->hf_proj[TQ_PROJ_DOWN] ? f->hf_proj[TQ_PROJ_DOWN] : "down_proj");
        tq_family_name(f, layers, name, &ni);
        if (ni.role > TQ_ROLE_MTP || ni.layer_len > strlen(name) || ni.root_len > strlen(name))
            abort();
        if (ni.role == TQ_ROLE_EXPERT && ni.form == TQ_FORM_SEPARATE && (ni.expert != 3 || !ni.has_layer || ni.layer != l))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *j = cJSON_ParseWithLength((const char *)data, size);
    const tq_family *f = tq_family_detect(j);
    if (f)
        family_rules(f, j);
    if (cJSON_IsObject(j)) { /* the one validation pass (generic keys alone without a family) */
        tq_err e;
        e.msg[0] = 0;
        int rc = tq_family_config_check(f, j, NULL, &e);
        if (rc != 0 && (rc != -1 || !e.msg[0]))
            abort();
    }
    cJSON_Delete(j);
    static const char *none;
    const char *dir = f ? family_dir(f) : NULL;
    if (!dir) {
        if (!none && (!(none = strdup(fz_path("nofamily"))) || (mkdir(none, 0755) != 0 && errno != EEXIST)))
            abort();
        dir = none;
    }
    char rel[300];
    snprintf(rel, sizeof rel, "%s/config.json", dir + strlen(fz_dir()) + 1);
    fz_write(rel, data, size);
    fz_config_runtime(dir);
    if (f)
        fz_config_model(dir);
    return 0;
}
