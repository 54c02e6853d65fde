/* gpt-oss as the world writes it, through every path to a decode: transformers' float layout
 * (GptOssExperts: gate_up_proj [E, H, 2I] used as x @ W, gate/up interleaved) and the released
 * MXFP4 form, each decoded unsplit, split (tq_split), converted with every tensor kept float
 * (tq_convert) and converted then split; every path against the independent f64 oracle
 * (rt_oracle.c's expert(): GptOssExperts.forward's clamp(max=limit) on gate, clamp(-limit,
 * limit) on up, gate * sigmoid(1.702 gate) * (up + 1); the fixture restates transformers'
 * tensor layout, rt_fixture.c fx_xw_experts) with relative logit error <= 1e-4 and the same
 * greedy token at all 24 teacher-forced positions: correctness, not consistency. Square experts
 * (hidden = I, as gpt-oss-20b's 2880 = 2880) so a transposed down_proj passes every shape
 * check and only the logits can catch it, and a non-square case. The split of the transformers
 * layout holds the same expert blocks, byte for byte, as the split of its mlx-lm form
 * (consistency), and comes back under its source names byte for byte (--join). */
#include "layout/split/split.h"
#include "quant/convert/convert.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/rt_fixture.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#define NSEQ 24

/* fx_family_cfg's gpt_oss (2 layers: sliding then full, sinks, biases, YaRN) with experts
 * hidden x I, in float kind k, experts as transformers saves them (xw) or as released. */
static fx_cfg cfg(int kind, int I, int xw)
{
    fx_cfg c = fx_family_cfg(FX_GPT_OSS, kind);
    c.moe_inter = I;
    c.inter = I;
    c.hf_expert_names = xw ? 2 : 1;
    return c;
}

/* gpt-oss-20b's own values where a tiny model can hold them, from its published config.json
 * (huggingface.co/openai/gpt-oss-20b, config.json: hidden_size 2880 = intermediate_size 2880,
 * num_local_experts 32, num_experts_per_tok 4, head_dim 64, rms_norm_eps 1e-05, rope_theta
 * 150000, rope_scaling yarn factor 32, beta_fast 32, beta_slow 1,
 * original_max_position_embeddings 4096, truncate false, sliding_window 128, swiglu_limit 7.0;
 * also testdata/mkmodel/mk_config.c): 32 experts, top 4, head_dim 64, square 64 = 64 (the
 * 2880 = 2880 of the release, scaled). */
static fx_cfg cfg_20b(int xw)
{
    fx_cfg c = cfg(FX_BF16, 64, xw);
    c.experts = 32;
    c.top_k = 4;
    c.head_dim = 64;
    c.heads = 2;
    c.kv_heads = 1;
    c.eps = 1e-5;
    c.theta = 150000;
    c.rs_factor = 32;
    c.rs_orig = 4096;
    c.rs_beta_fast = 32;
    c.rs_beta_slow = 1;
    c.rs_truncate = 0;
    c.window = 128;
    c.swiglu_limit = 7.0;
    return c;
}

static void dir_of(char *buf, size_t cap, const char *what, const char *suffix)
{
    snprintf(buf, cap, "%s/rtg-%s-%d%s", t_tmpdir(), what, (int)getpid(), suffix);
}

/* Decode dir teacher-forced (resident or streamed) against the oracle m (fx_oracle_compare);
 * the logits kept in *keep (caller frees). */
static void against(const fx_model *m, const char *dir, int resident, const char *what, float **keep)
{
    fx_check_oracle(m, dir, resident, NSEQ, what, keep);
}

/* One model through every path: unsplit, split (streamed and --resident), converted with
 * every tensor float, converted then split; all against the oracle, and bit for bit alike. */
static void every_path(fx_cfg c, const char *what)
{
    char src[512], sp[600], cv[600], cvs[600], name[160];
    dir_of(src, sizeof src, what, "");
    dir_of(sp, sizeof sp, what, ".split");
    dir_of(cv, sizeof cv, what, ".conv");
    dir_of(cvs, sizeof cvs, what, ".conv.split");
    fx_model m;
    CHECK(fx_generate(&c, src, &m) == 0);
    tq_err err = {0};
    CHECK_OK(fx_split_dir(src, sp, &err));
    CHECK_OK(fx_convert_keep(src, cv, &err));
    CHECK_OK(fx_split_dir(cv, cvs, &err));
    const char *dirs[5] = {src, sp, sp, cv, cvs};
    const char *how[5] = {"unsplit", "split", "split --resident", "converted", "converted, split"};
    float *l[5];
    size_t n = (size_t)NSEQ * (size_t)c.vocab;
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s %s", what, how[i]);
        against(&m, dirs[i], i != 1, name, &l[i]);
    }
    for (int i = 1; i < 5; i++) {
        CHECKF(memcmp(l[0], l[i], n * 4) == 0, "%s: %s logits differ from unsplit", what, how[i]);
        free(l[i]);
    }
    free(l[0]);
    fx_free(&m);
    /* the split of transformers' layout holds the blocks the split of its mlx-lm form holds */
    for (int layer = 0; c.hf_expert_names == 2 && layer < c.layers; layer++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/experts/layer_%02d.bin", sp, layer);
        snprintf(b, sizeof b, "%s/experts/layer_%02d.bin", cvs, layer);
        char *x = NULL, *y = NULL;
        size_t na = 0, nb = 0;
        CHECK_OK(tq_read_small_file(a, 64u << 20, &x, &na, &err));
        CHECK_OK(tq_read_small_file(b, 64u << 20, &y, &nb, &err));
        CHECKF(x && y && na == nb && memcmp(x, y, na) == 0, "%s: %s differs from the split of the converted model", what,
               a);
        free(x);
        free(y);
    }
}

static void xw_square_bf16(void) { every_path(cfg(FX_BF16, 64, 1), "xw-square-bf16"); }
static void xw_square_f32(void) { every_path(cfg(FX_F32, 64, 1), "xw-square-f32"); }
static void xw_wide_bf16(void) { every_path(cfg(FX_BF16, 96, 1), "xw-96x64-bf16"); }
static void xw_narrow_f16(void) { every_path(cfg(FX_F16, 32, 1), "xw-32x64-f16"); }
static void mxfp4_square(void) { every_path(cfg(FX_BF16, 64, 0), "mxfp4-square"); }
static void mxfp4_narrow(void) { every_path(cfg(FX_BF16, 32, 0), "mxfp4-32x64"); }
static void xw_20b_values(void) { every_path(cfg_20b(1), "xw-20b-values"); }
static void mxfp4_20b_values(void) { every_path(cfg_20b(0), "mxfp4-20b-values"); }

/* YaRN's `truncate` (gpt-oss's config says false; transformers' modeling_rope_utils.py,
 * _compute_yarn_parameters: truncate = rope_scaling.get("truncate", True), find_correction_range
 * floors low and ceils high only when it is true; the oracle's fx_inv_freq restates it): both
 * settings decode like the oracle, and they differ, so tq-run reads the key rather than
 * assuming either (llama.cpp always truncates; docs/compatibility.md). */
static void yarn_truncate(void)
{
    float *l[2];
    fx_cfg c[2] = {cfg_20b(1), cfg_20b(1)};
    c[1].rs_truncate = 1;
    for (int t = 0; t < 2; t++) {
        char src[512];
        dir_of(src, sizeof src, t ? "yarn-truncate" : "yarn-exact", "");
        fx_model m;
        CHECK(fx_generate(&c[t], src, &m) == 0);
        against(&m, src, 1, t ? "20b values, truncate true" : "20b values, truncate false", &l[t]);
        fx_free(&m);
    }
    CHECKF(memcmp(l[0], l[1], (size_t)NSEQ * (size_t)c[0].vocab * 4) != 0, "truncate true and false decode alike");
    free(l[0]);
    free(l[1]);
}

/* The split of transformers' layout comes back under its source names, byte for byte (the
 * gather inverted), and under mlx-lm's names (--naming mlx) as tq_convert's output has them;
 * per-expert HF names do not exist for gpt-oss and are refused. */
static void xw_join(void)
{
    fx_cfg c = cfg(FX_BF16, 64, 1);
    char src[512], sp[600], j[600], jm[600], cv[600];
    dir_of(src, sizeof src, "join", "");
    dir_of(sp, sizeof sp, "join", ".split");
    dir_of(j, sizeof j, "join", ".joined");
    dir_of(jm, sizeof jm, "join", ".joined-mlx");
    dir_of(cv, sizeof cv, "join", ".conv");
    fx_model m;
    CHECK(fx_generate(&c, src, &m) == 0);
    fx_free(&m);
    tq_err err = {0};
    CHECK_OK(fx_split_dir(src, sp, &err));
    CHECK_OK(fx_convert_keep(src, cv, &err));
    tq_split_join_opts jo = {.quiet = 1, .threads = 2};
    CHECK_OK(tq_split_join(sp, j, &jo, &err));
    jo.naming = TQ_NAMING_MLX;
    CHECK_OK(tq_split_join(sp, jm, &jo, &err));
    const char *pairs[2][2] = {{src, j}, {cv, jm}};
    for (int p = 0; p < 2; p++) {
        tq_model *a = NULL, *b = NULL;
        CHECK_OK(tq_model_open(&a, pairs[p][0], &err));
        CHECK_OK(tq_model_open(&b, pairs[p][1], &err));
        if (!a || !b) {
            tq_model_close(a);
            tq_model_close(b);
            continue;
        }
        CHECKF(a->n_tensors == b->n_tensors, "%s: %zu tensors, joined %zu", pairs[p][0], a->n_tensors, b->n_tensors);
        for (size_t i = 0; i < a->n_tensors; i++) {
            const char *n = a->tensors[i].info.name;
            uint64_t na = 0, nb = 0;
            void *x = t_read_tensor(a, n, &na), *y = t_read_tensor(b, n, &nb);
            CHECKF(x && y && na == nb && memcmp(x, y, na) == 0, "joined tensor '%s' differs from %s", n, pairs[p][0]);
            free(x);
            free(y);
        }
        tq_model_close(a);
        tq_model_close(b);
    }
    dir_of(j, sizeof j, "join", ".joined-hf");
    jo.naming = TQ_NAMING_HF;
    CHECKF(tq_split_join(sp, j, &jo, &err) == -1 && strstr(err.msg, "one tensor per expert"), "got: %s", err.msg);
}

int main(void)
{
    RUN(xw_square_bf16);
    RUN(xw_square_f32);
    RUN(xw_wide_bf16);
    RUN(xw_narrow_f16);
    RUN(mxfp4_square);
    RUN(mxfp4_narrow);
    RUN(xw_20b_values);
    RUN(mxfp4_20b_values);
    RUN(yarn_truncate);
    RUN(xw_join);
    TEST_MAIN_END();
}
