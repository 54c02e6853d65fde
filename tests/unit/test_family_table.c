/* The family table (formats/family.h) walked row by row: every family is named, detected,
 * made by tq-mkmodel, converted, split and decoded by tq-run — or, when its row names no
 * decoder, refused by tq-run and warned about by tq-convert and tq-split — and its GGUF
 * architecture is read back as the same family. A row added without its pieces fails here.
 * This is a consistency test between the tools and the table (the decoders' correctness is
 * test_runtime_families's, against independent oracles). */
#include "formats/family.h"
#include "formats/formats.h"
#include "formats/gguf_internal.h"
#include "layout/split/split.h"
#include "quant/convert/convert.h"
#include "runtime/runtime.h"
#include "testdata/mkmodel/mkmodel.h"
#include "tests/unit/check.h"
#include "tests/unit/gguf_writer.h"

#include <cjson/cJSON.h>
#include <string.h>

/* The mkmodel archs of a family (kimi_k2 is deepseek_v3's second). */
static int mk_archs(const tq_family *f, tq_mk_arch *out, int cap)
{
    int n = 0;
    for (int i = 0; i < TQ_MK_ARCH_COUNT; i++)
        if (tq_mk_family((tq_mk_arch)i) == f && n < cap)
            out[n++] = (tq_mk_arch)i;
    return n;
}

/* Names: the canonical name and every model_type find the row; a config naming only
 * model_type, or only architectures[0], is detected as it. */
static void test_rows_named(void)
{
    for (int id = 0; id < TQ_FAM_COUNT; id++) {
        const tq_family *f = tq_family_get((tq_family_id)id);
        CHECKF(f && f->id == (tq_family_id)id, "row %d holds id %d", id, f ? (int)f->id : -1);
        if (!f)
            continue;
        CHECKF(f->name && *f->name && f->source && *f->source, "row %d: no name or source", id);
        CHECKF(tq_family_by_name(f->name) == f, "%s: not found by its name", f->name);
        CHECKF(f->model_types && *f->model_types[0] && f->architectures && *f->architectures[0], "%s: no model_type "
               "or architectures", f->name);
        for (const char *const *t = f->model_types; t && **t; t++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "model_type", *t);
            CHECKF(tq_family_by_name(*t) == f && tq_family_detect(c) == f, "%s: model_type %s", f->name, *t);
            cJSON_Delete(c);
        }
        for (const char *const *a = f->architectures; a && **a; a++) {
            cJSON *c = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(c, "architectures");
            cJSON_AddItemToArray(arr, cJSON_CreateString(*a));
            CHECKF(tq_family_detect(c) == f, "%s: architectures[0] %s", f->name, *a);
            cJSON_Delete(c);
        }
        CHECKF((unsigned)f->decode.decoder < TQ_DEC_COUNT, "%s: decoder %d", f->name, (int)f->decode.decoder);
        CHECKF(f->decode.decoder == TQ_DEC_NONE || f->decode.route <= TQ_ROUTE_SIGMOID_GROUP, "%s: route %d",
               f->name, (int)f->decode.route);
        CHECKF(!f->decode.clamped_swiglu || (f->decode.swiglu_alpha > 0 && f->decode.swiglu_limit > 0),
               "%s: clamped SwiGLU without alpha or limit", f->name);
        tq_mk_arch a[4];
        CHECKF(mk_archs(f, a, 4) >= 1, "%s: tq-mkmodel has no --arch for it (testdata/mkmodel/mk_options.c)", f->name);
    }
}

/* tq-run's list (tq_run_decodable, printed by tq-run, tq-convert and tq-split) is exactly the
 * model_types of the rows with a decoder, in table order. */
static void test_decodable_list(void)
{
    char want[1024] = "", got[1024];
    size_t n = 0;
    for (int id = 0; id < TQ_FAM_COUNT; id++) {
        const tq_family *f = tq_family_get((tq_family_id)id);
        for (const char *const *t = f->model_types; f->decode.decoder && **t; t++)
            n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", n ? ", " : "", *t);
    }
    tq_run_decodable(got, sizeof got);
    CHECKF(strcmp(want, got) == 0, "tq_run_decodable: '%s', rows say '%s'", got, want);
}

/* GGUF: a row's gguf_arch finds the row (the first with it: mixtral shares llama's), and when
 * formats/gguf_names.c maps that architecture, the config.json it writes names this family
 * (or, for "llama", llama; mixtral is told apart by its expert count). */
static void test_gguf_arch(void)
{
    int mapped = 0;
    for (int id = 0; id < TQ_FAM_COUNT; id++) {
        const tq_family *f = tq_family_get((tq_family_id)id);
        if (!f->gguf_arch)
            continue;
        const tq_family *g = tq_family_by_gguf(f->gguf_arch);
        CHECKF(g && !strcmp(g->gguf_arch, f->gguf_arch) && g->id <= f->id, "%s: gguf_arch %s finds %s", f->name,
               f->gguf_arch, g ? g->name : "nothing");
        const tq_gguf_arch *a = tq_gguf_arch_find(f->gguf_arch);
        if (!a)
            continue; /* refused by tq-convert (test_gguf_model: unmapped family) */
        mapped++;
        /* a header with the architecture (and deepseek2's sigmoid gating: DeepSeek-V3's; the
         * softmax one is V2, no family of the table) */
        gw w;
        gw_init(&w);
        gw_kv_str(&w, "general.architecture", f->gguf_arch);
        char k[96];
        snprintf(k, sizeof k, "%s.expert_gating_func", f->gguf_arch);
        gw_kv_u32(&w, k, 2);
        char path[512];
        snprintf(path, sizeof path, "%s/ft-%s.gguf", t_tmpdir(), f->name);
        CHECK(gw_write(&w, path) == 0);
        gw_free(&w);
        tq_gguf_file *gf = NULL;
        tq_err err = {0};
        CHECK_OK(tq_gguf_open(&gf, path, &err));
        cJSON *c = gf ? tq_gguf_config(gf, f->gguf_arch, 16, 0, &err) : NULL;
        CHECK(c != NULL);
        const tq_family *d = tq_family_detect(c);
        CHECKF(d == g, "%s: GGUF architecture %s gives config.json of %s", f->name, f->gguf_arch, d ? d->name : "nothing");
        cJSON_Delete(c);
        if (gf)
            tq_gguf_close(gf);
    }
    CHECKF(mapped >= 7, "only %d families' GGUF architectures mapped", mapped);
}

static tq_convert_opts copts(void);

/* A row whose GGUF architecture tq does not map (qwen3next, qwen35, qwen35moe): tq-convert
 * refuses such a GGUF (exit 1 from tq-convert), naming the family and the architectures it
 * maps, where it used to warn "no HF name mapping", exit 0 and write a directory tq-run then
 * refused; with --keep-names the GGUF names go through as asked. The tensors are llama.cpp's
 * names for a Qwen3-Next layer (src/llama-arch.cpp, LLM_TENSOR_NAMES: LLM_TENSOR_SSM_CONV1D
 * "blk.%d.ssm_conv1d", LLM_TENSOR_TOKEN_EMBD "token_embd"). An unknown architecture (no row)
 * still keeps its names with a warning (test_gguf_model). */
static void test_gguf_unmapped_refused(void)
{
    int refused = 0;
    for (int id = 0; id < TQ_FAM_COUNT; id++) {
        const tq_family *f = tq_family_get((tq_family_id)id);
        if (!f->gguf_arch || tq_gguf_arch_find(f->gguf_arch))
            continue;
        gw w;
        gw_init(&w);
        gw_kv_str(&w, "general.architecture", f->gguf_arch);
        float v[64] = {0};
        for (int i = 0; i < 64; i++)
            v[i] = (float)(i % 7) - 3.0f;
        uint64_t ne1[1] = {64}, ne2[2] = {4, 16};
        gw_tensor_add(&w, "blk.0.ssm_conv1d.weight", 2, ne2, 0, v, sizeof v);
        gw_tensor_add(&w, "token_embd.weight", 1, ne1, 0, v, sizeof v);
        char path[512], out[512];
        snprintf(path, sizeof path, "%s/ft-unmapped-%s.gguf", t_tmpdir(), f->name);
        snprintf(out, sizeof out, "%s/ft-unmapped-%s", t_tmpdir(), f->name);
        CHECK(gw_write(&w, path) == 0);
        gw_free(&w);
        tq_convert_opts o = copts();
        tq_convert_report r;
        tq_err e = {0};
        int rc = tq_convert(path, out, &o, &r, &e);
        char want[160];
        snprintf(want, sizeof want, "GGUF architecture '%s' is the %s family, but tq does not map", f->gguf_arch,
                 f->name);
        CHECKF(rc != 0 && e.code == TQ_EUNSUP && strstr(e.msg, want) && strstr(e.msg, "tq maps llama, qwen2,") &&
                   strstr(e.msg, path),
               "%s: rc %d: %s", f->gguf_arch, rc, e.msg);
        if (rc == 0)
            tq_convert_report_free(&r);
        refused += rc != 0;
        o.keep_names = 1;
        memset(&e, 0, sizeof e);
        rc = tq_convert(path, out, &o, &r, &e);
        CHECKF(rc == 0, "%s --keep-names: %s", f->gguf_arch, e.msg);
        if (rc == 0)
            tq_convert_report_free(&r);
    }
    CHECKF(refused >= 1 && tq_gguf_family_unmapped("qwen3next", (char[8]){0}, 8) == 1, "refused %d", refused);
}

static tq_convert_opts copts(void)
{
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    o.threads = 2;
    o.quiet = 1;
    o.force = 1;
    return o;
}

/* Every row: tq-mkmodel --size tiny, tq-convert (TurboQuant, the default), tq-split of the
 * converted model, then tq-run decodes the source, the converted and the split model (2
 * greedy tokens), or — no decoder in the row — refuses each as not supported while
 * tq-convert and tq-split warned. */
static void test_every_row_end_to_end(void)
{
    int decoded = 0, refused = 0;
    for (int id = 0; id < TQ_FAM_COUNT; id++) {
        const tq_family *f = tq_family_get((tq_family_id)id);
        tq_mk_arch arch[4];
        int na = mk_archs(f, arch, 4);
        for (int k = 0; k < na; k++) {
            const char *an = tq_mk_arch_name(arch[k]);
            char src[512], cv[512], sp[512];
            snprintf(src, sizeof src, "%s/ft-%s", t_tmpdir(), an);
            snprintf(cv, sizeof cv, "%s/ft-%s-tq", t_tmpdir(), an);
            snprintf(sp, sizeof sp, "%s/ft-%s-split", t_tmpdir(), an);
            tq_mk_opts mo;
            tq_err e = {0};
            CHECK(tq_mk_preset(&mo, arch[k], "tiny", &e) == 0);
            mo.quiet = 1;
            mo.threads = 2;
            mo.force = 1;
            int ok = tq_mkmodel(src, &mo, &e) == 0;
            CHECKF(ok, "%s: tq-mkmodel: %s", an, e.msg);
            if (!ok)
                continue;
            tq_convert_opts co = copts();
            tq_convert_report rep;
            ok = tq_convert(src, cv, &co, &rep, &e) == 0;
            CHECKF(ok, "%s: tq-convert: %s", an, e.msg);
            if (!ok)
                continue;
            int conv_decodes = rep.run_decodes;
            tq_convert_report_free(&rep);
            tq_split_opts so = {0};
            so.threads = 2;
            so.quiet = 1;
            so.force = 1;
            tq_split_result res;
            memset(&res, 0, sizeof res);
            ok = tq_split(cv, sp, &so, &res, &e) == 0;
            CHECKF(ok, "%s: tq-split: %s", an, e.msg);
            if (!ok)
                continue;
            int want = f->decode.decoder != TQ_DEC_NONE;
            CHECKF(conv_decodes == want, "%s: tq-convert says tq_run_decodes %d, the row %d", an, conv_decodes, want);
            CHECKF((res.run_warning[0] == 0) == want, "%s: tq-split warning '%s', the row's decoder %d", an, res.run_warning,
                   want);
            const char *dirs[] = {src, cv, sp};
            for (int d = 0; d < 3; d++) {
                tq_run_opts ro;
                tq_run_opts_default(&ro);
                ro.threads = 2;
                tq_runner *r = NULL;
                tq_err re = {0};
                int rc = tq_runner_open(&r, dirs[d], &ro, &re);
                if (want) {
                    CHECKF(rc == 0, "%s: tq-run %s: %s", an, dirs[d], re.msg);
                    if (rc != 0)
                        continue;
                    int32_t prompt[2] = {1, 2}, out[2] = {-1, -1};
                    tq_run_stats st;
                    CHECKF(tq_runner_generate(r, prompt, 2, 2, out, &st, &re) == 0, "%s: decode %s: %s", an, dirs[d],
                           re.msg);
                    CHECKF(out[0] >= 0 && (uint64_t)out[0] < tq_runner_vocab(r), "%s: token %d", an, out[0]);
                    tq_runner_close(r);
                } else {
                    CHECKF(rc != 0 && re.code == TQ_EUNSUP && strstr(re.msg, "is not supported"),
                           "%s: tq-run %s: rc %d '%s'", an, dirs[d], rc, re.msg);
                    if (r)
                        tq_runner_close(r);
                }
            }
            decoded += want;
            refused += !want;
        }
    }
    printf("# %d archs decoded, %d refused\n", decoded, refused);
    CHECK(decoded >= 10);
}

int main(void)
{
    RUN(test_rows_named);
    RUN(test_decodable_list);
    RUN(test_gguf_arch);
    RUN(test_gguf_unmapped_refused);
    RUN(test_every_row_end_to_end);
    TEST_MAIN_END();
}
