/* Streaming from split directories (written by the split library, tq-split's engine):
 * streamed logits are bit-identical to --resident and to the unsplit model, for TurboQuant
 * and bf16 qwen3_moe models and every other family the runtime decodes, at cache budgets
 * from one expert block to everything, with any number of io threads; cache statistics add
 * up; --check-blocks names a corrupt block. */
#include "layout/split/split.h"
#include "runtime/runtime.h"
#include "tests/unit/check.h"
#include "tests/unit/rt_fixture.h"

#include <cjson/cJSON.h>
#include <unistd.h>

#define NP 3
#define NGEN 6
static const int32_t prompt[NP] = {9, 4, 33};

static fx_cfg moe_cfg(int kind)
{
    fx_cfg c = {0};
    c.arch = FX_QWEN3_MOE;
    c.kind = kind;
    c.hidden = 64;
    c.inter = 64;
    c.layers = 3;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.vocab = 72;
    c.theta = 1e6;
    c.eps = 1e-6;
    c.seed = 11;
    c.experts = 8;
    c.top_k = 2;
    c.moe_inter = 32;
    c.norm_topk = 1;
    return c;
}

static int decode(const char *dir, tq_run_opts *o, fx_logits *b, tq_run_stats *st, tq_err *err)
{
    tq_runner *r;
    int32_t toks[NGEN];
    o->on_logits = fx_collect;
    o->user = b;
    b->steps = 0;
    if (tq_runner_open(&r, dir, o, err) != 0)
        return -1;
    int rc = tq_runner_generate(r, prompt, NP, NGEN, toks, st, err);
    tq_runner_close(r);
    return rc;
}

/* The expert block size of the first layer file (dense first layers have none). */
static uint64_t block_size_of(const char *split_dir)
{
    for (int l = 0; l < 8; l++) {
        char p[700];
        snprintf(p, sizeof p, "%s/experts/layer_%02d.bin", split_dir, l);
        tq_flash_header h;
        tq_err err = {0};
        if (access(p, F_OK) != 0 || tq_flash_read(&h, p, &err) != 0)
            continue;
        uint64_t b = h.expert_block_size;
        tq_flash_header_free(&h);
        return b;
    }
    return 0;
}

/* layers with routed experts in fixture c */
static uint64_t moe_layers(const fx_cfg *c)
{
    return (uint64_t)(c->layers - c->first_dense - (c->mlp_only ? 1 : 0));
}

static void make_split(fx_cfg c, const char *name, char *src, char *dst, size_t cap)
{
    snprintf(src, cap, "%s/rts-%s-%d", t_tmpdir(), name, (int)getpid());
    snprintf(dst, cap, "%s.split", src);
    fx_model m;
    CHECK(fx_generate(&c, src, &m) == 0);
    fx_free(&m);
    tq_err err = {0};
    tq_split_opts so = {0};
    so.threads = 1;
    so.quiet = 1;
    tq_split_result res;
    CHECK_OK(tq_split(src, dst, &so, &res, &err));
}

static void bit_identical(fx_cfg c, const char *name)
{
    char src[512], dst[512];
    make_split(c, name, src, dst, sizeof src);
    size_t n = (size_t)NGEN * (size_t)c.vocab;
    tq_err err = {0};
    tq_run_opts o;
    tq_run_stats st;
    fx_logits ref = {.v = calloc(n, 4), .cap = NGEN}, b = {.v = calloc(n, 4), .cap = NGEN};

    tq_run_opts_default(&o);
    o.resident = 1;
    o.threads = 2;
    o.check_blocks = 1;
    CHECK_OK(decode(dst, &o, &ref, &st, &err));
    CHECK(ref.steps == NGEN && !st.streamed);

    /* the unsplit source model computes the same bytes */
    tq_run_opts_default(&o);
    CHECK_OK(decode(src, &o, &b, &st, &err));
    CHECKF(memcmp(ref.v, b.v, n * 4) == 0, "%s: unsplit model differs from split --resident", name);

    uint64_t blk = block_size_of(dst);
    CHECK(blk > 0 && blk % 16384 == 0);
    uint64_t budgets[] = {blk, 2 * blk, 5 * blk, 1ull << 30};
    int io[] = {1, 3, 2, 1};
    for (int i = 0; i < 4; i++) {
        tq_run_opts_default(&o);
        o.cache_budget = budgets[i];
        o.io_threads = io[i];
        o.threads = 1 + i % 3;
        o.check_blocks = i % 2;
        memset(b.v, 0, n * 4);
        memset(&st, 0, sizeof st);
        int ok = decode(dst, &o, &b, &st, &err) == 0;
        CHECKF(ok, "budget %llu: %s", (unsigned long long)budgets[i], err.msg);
        /* a failed decode leaves no statistics to check (nor a pass count to divide by) */
        CHECKF(!ok || st.forward_passes > 0, "budget %llu: no forward pass", (unsigned long long)budgets[i]);
        if (!ok || st.forward_passes == 0)
            continue;
        CHECK(st.streamed);
        CHECKF(memcmp(ref.v, b.v, n * 4) == 0, "%s: streamed (budget %llu) differs from resident", name,
               (unsigned long long)budgets[i]);
        /* the statistics add up */
        uint64_t lookups = moe_layers(&c) * (uint64_t)c.top_k * st.forward_passes;
        CHECK(st.expert_hits + st.expert_misses == lookups);
        CHECK(st.reads == st.expert_misses);
        CHECK(st.bytes_read == st.reads * blk);
        CHECK(st.bytes_per_token == st.bytes_read / st.forward_passes);
        CHECK(st.cache_bytes <= (budgets[i] > blk ? budgets[i] : blk));
        CHECK(st.cache_peak_bytes <= budgets[i] + (uint64_t)c.top_k * blk);
        if (i == 3) /* everything fits: each (layer, expert) is read once */
            CHECK(st.expert_misses <= moe_layers(&c) * (uint64_t)c.experts);
        if (i == 0)
            CHECK(st.expert_hits < lookups / 2);
        printf("  %s budget %llu: hits %llu misses %llu bytes/token %llu io %s\n", name,
               (unsigned long long)budgets[i], (unsigned long long)st.expert_hits,
               (unsigned long long)st.expert_misses, (unsigned long long)st.bytes_per_token, st.io);
    }
    /* buffered reads: same logits */
    tq_run_opts_default(&o);
    o.io_mode = TQ_RUN_IO_BUFFERED;
    CHECK_OK(decode(dst, &o, &b, &st, &err));
    CHECK(strcmp(st.io, "buffered") == 0);
    CHECK(memcmp(ref.v, b.v, n * 4) == 0);
    /* the fadvise fallback (taken where O_DIRECT is refused): same logits */
    o.io_mode = TQ_RUN_IO_FADVISE;
    o.cache_budget = blk;
    CHECK_OK(decode(dst, &o, &b, &st, &err));
    CHECK(strcmp(st.io, "fadvise") == 0);
    CHECK(memcmp(ref.v, b.v, n * 4) == 0);
    /* the layer files mapped (map_experts; the CPU finds a block by id in the mapping): same
     * logits, the OS reads the pages (no hit, miss or read counted), with --check-blocks too */
    for (int chk = 0; chk < 2; chk++) {
        tq_run_opts_default(&o);
        o.map_experts = 1;
        o.check_blocks = chk;
        memset(b.v, 0, n * 4);
        CHECK_OK(decode(dst, &o, &b, &st, &err));
        CHECKF(st.streamed && strcmp(st.io, "map") == 0 && st.expert_hits + st.expert_misses + st.reads == 0 &&
                   st.cache_budget == 0,
               "%s mapped: streamed %d io %s, %llu hits %llu misses", name, st.streamed, st.io,
               (unsigned long long)st.expert_hits, (unsigned long long)st.expert_misses);
        CHECKF(memcmp(ref.v, b.v, n * 4) == 0, "%s: mapped experts differ from resident", name);
    }
    o.resident = 1; /* one or the other */
    CHECK(decode(dst, &o, &b, &st, &err) == -1 && err.code == TQ_EUSAGE);
    free(ref.v);
    free(b.v);
}

static void split_tq3_bit_identical(void)
{
    bit_identical(moe_cfg(FX_TQ3), "tq3");
}

static void split_bf16_hf_shared_bit_identical(void)
{
    fx_cfg c = moe_cfg(FX_BF16);
    c.hf_expert_names = 1;
    c.shared_inter = 48;
    bit_identical(c, "bf16");
}

static void split_aff4_bit_identical(void)
{
    bit_identical(moe_cfg(FX_AFF4), "aff4");
}

/* the hybrid families (Gated DeltaNet + gated attention, shared expert with its gate):
 * stacked MLX experts streamed from layer files; qwen3_next's layer 2 is dense
 * (mlp_only_layers) and stays pinned between two layers with files */
static void split_qwen3_next_tq3(void)
{
    bit_identical(fx_family_cfg(FX_QWEN3_NEXT, FX_TQ3), "qwen3_next-tq3");
}

/* the other families the runtime decodes: Mixtral's block_sparse_moe.switch_mlp, DeepSeek's
 * dense first layer (first_k_dense_replace, pinned, no layer file) with shared experts,
 * gpt-oss's mlp.experts with biases */
static void split_mixtral_tq3(void)
{
    bit_identical(fx_family_cfg(FX_MIXTRAL, FX_TQ3), "mixtral-tq3");
}

static void split_deepseek_tq4(void)
{
    fx_cfg c = fx_family_cfg(FX_DEEPSEEK, FX_TQ4);
    CHECK(c.first_dense == 1);
    bit_identical(c, "deepseek-tq4");
}

static void split_gpt_oss_aff4(void)
{
    bit_identical(fx_family_cfg(FX_GPT_OSS, FX_AFF4), "gpt_oss-aff4");
}

static void split_qwen3_5_moe_aff4(void)
{
    bit_identical(fx_family_cfg(FX_QWEN3_5_MOE, FX_AFF4), "qwen3_5_moe-aff4");
}

/* qwen2_moe (Qwen2MoeSparseMoeBlock: router mlp.gate, shared_expert and its gate pinned):
 * stacked MLX experts and HF per-expert tensors streamed; layer 1 is dense (mlp_only_layers)
 * and stays pinned between two layers with files. test_runtime_families.c holds the unsplit
 * model to the oracle, so the streamed one is too. */
static void split_qwen2_moe(void)
{
    fx_cfg c = fx_family_cfg(FX_QWEN2_MOE, FX_TQ3);
    CHECK(c.mlp_only == 2 && c.layers == 3);
    bit_identical(c, "qwen2_moe-tq3");
    c = fx_family_cfg(FX_QWEN2_MOE, FX_BF16);
    c.hf_expert_names = 1;
    bit_identical(c, "qwen2_moe-bf16-hf");
}

/* gemma4 (router.proj with its scale vectors, the dense mlp beside the experts, sandwich
 * norms, layer_scalar pinned): MLX experts.switch_glu stacked and HF fused experts
 * gate_up_proj / down_proj streamed from layer files; sliding and full layers of different
 * head sizes. test_runtime_families.c holds the unsplit model to the oracle. */
static void split_gemma4(void)
{
    bit_identical(fx_family_cfg(FX_GEMMA4, FX_TQ4), "gemma4-tq4");
    fx_cfg c = fx_family_cfg(FX_GEMMA4, FX_BF16);
    c.hf_expert_names = 1;
    bit_identical(c, "gemma4-bf16-hf");
}

static void split_qwen3_5_moe_bf16(void)
{
    bit_identical(fx_family_cfg(FX_QWEN3_5_MOE, FX_BF16), "qwen3_5_moe-bf16");
}

/* HF checkpoints whose experts are fused (tq-split keeps each expert's slice of the stacked
 * tensor as one tensor of its block, man tq-formats(5)): qwen3_5_moe's gate_up_proj
 * [E, 2I, H] + down_proj and gpt-oss's MXFP4 blocks, scales and biases with interleaved
 * gate/up rows. Streamed and --resident decode like the unsplit checkpoint, the layer header
 * holds the fused tensors, nothing of the experts is pinned, and the join gives the source's
 * tensors back byte for byte under their source names. */
static void fused_split(int arch, const char *name, const char *part, const char *const *src_names)
{
    fx_cfg c = fx_family_cfg(arch, FX_BF16);
    c.hf_expert_names = 1;
    bit_identical(c, name);
    char src[512], dst[512], joined[600], lf[700];
    snprintf(src, sizeof src, "%s/rts-%s-%d", t_tmpdir(), name, (int)getpid());
    snprintf(dst, sizeof dst, "%s.split", src);
    snprintf(joined, sizeof joined, "%s.joined", src);
    snprintf(lf, sizeof lf, "%s/experts/layer_00.bin", dst);
    tq_flash_header h;
    tq_err err = {0};
    CHECK_OK(tq_flash_read(&h, lf, &err));
    CHECKF(tq_flash_find(&h, part) != NULL, "%s: no %s in the layer header", name, part);
    tq_flash_header_free(&h);
    tq_split_join_opts jo = {.quiet = 1, .threads = 2};
    CHECK_OK(tq_split_join(dst, joined, &jo, &err));
    tq_model *a = NULL, *b = NULL, *pin = NULL;
    CHECK_OK(tq_model_open(&a, src, &err));
    CHECK_OK(tq_model_open(&b, joined, &err));
    snprintf(lf, sizeof lf, "%s/pinned.safetensors", dst);
    CHECK_OK(tq_model_open(&pin, lf, &err));
    if (a && b && pin) {
        CHECK(a->n_tensors == b->n_tensors);
        for (size_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
            uint64_t na = 0, nb = 0;
            const char *n = a->tensors[i].info.name;
            void *x = t_read_tensor(a, n, &na), *y = t_read_tensor(b, n, &nb);
            CHECKF(x && y && na == nb && memcmp(x, y, na) == 0, "%s: joined tensor '%s' differs", name, n);
            free(x);
            free(y);
        }
        for (const char *const *s = src_names; *s; s++) {
            CHECKF(tq_model_find(a, *s) != NULL, "%s: source has no '%s'", name, *s);
            CHECKF(tq_model_find(pin, *s) == NULL, "%s: '%s' left in pinned.safetensors", name, *s);
        }
    }
    tq_model_close(a);
    tq_model_close(b);
    tq_model_close(pin);
}

static void split_qwen3_5_moe_hf_fused(void)
{
    static const char *const names[] = {"model.language_model.layers.0.mlp.experts.gate_up_proj",
                                        "model.language_model.layers.1.mlp.experts.down_proj", NULL};
    fused_split(FX_QWEN3_5_MOE, "qwen3_5_moe-hf-fused", "mlp.switch_mlp.gate_up_proj.weight", names);
}

static void split_gpt_oss_hf_mxfp4(void)
{
    static const char *const names[] = {"model.layers.0.mlp.experts.gate_up_proj_blocks",
                                        "model.layers.0.mlp.experts.gate_up_proj_scales",
                                        "model.layers.1.mlp.experts.down_proj_bias", NULL};
    fused_split(FX_GPT_OSS, "gpt_oss-hf-mxfp4", "mlp.switch_mlp.gate_up_proj.blocks", names);
}

/* Set KEY of DIR/config.json (text_config when there is one) to V. */
static void set_config_key(const char *dir, const char *key, double v)
{
    char p[700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    cJSON *c = NULL;
    tq_err err = {0};
    CHECK_OK(tq_json_read_file(p, 1u << 20, &c, &err));
    cJSON *tc = cJSON_GetObjectItem(c, "text_config");
    cJSON *o = cJSON_IsObject(tc) ? tc : c;
    cJSON_DeleteItemFromObject(o, key);
    cJSON_AddNumberToObject(o, key, v);
    CHECK_OK(tq_json_write_file(p, c, &err));
    cJSON_Delete(c);
}

/* Malformed fused checkpoints: tq-split exits with a data error naming the fused tensor
 * (expert count other than the config's; gate_up/down widths other than the config's). */
static void fused_malformed(void)
{
    static const struct {
        int arch;
        const char *key;
        double v;
        const char *want;
    } cases[] = {
        {FX_QWEN3_5_MOE, "num_experts", 6, "(tensor 'model.language_model.layers.0.mlp.experts.gate_up_proj')"},
        {FX_QWEN3_5_MOE, "moe_intermediate_size", 16, "tensor 'model.language_model.layers.0.mlp.experts.gate_up_proj' is"},
        {FX_GPT_OSS, "num_local_experts", 4, "(tensor 'model.layers.0.mlp.experts.gate_up_proj_blocks')"},
        {FX_GPT_OSS, "hidden_size", 96, "tensor 'model.layers.0.mlp.experts.gate_up_proj_blocks' is"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fx_cfg c = fx_family_cfg(cases[i].arch, FX_BF16);
        c.hf_expert_names = 1;
        char src[512], dst[600];
        snprintf(src, sizeof src, "%s/rts-bad%zu-%d", t_tmpdir(), i, (int)getpid());
        snprintf(dst, sizeof dst, "%s.split", src);
        fx_model m;
        CHECK(fx_generate(&c, src, &m) == 0);
        fx_free(&m);
        set_config_key(src, cases[i].key, cases[i].v);
        tq_err err = {0};
        tq_split_opts so = {.threads = 1, .quiet = 1};
        tq_split_result res;
        CHECKF(tq_split(src, dst, &so, &res, &err) == -1 && err.code == TQ_EDATA && strstr(err.msg, cases[i].want),
               "case %zu: %s", i, err.msg);
        CHECK(access(dst, F_OK) != 0);
    }
}

/* dense model: FFNs in flash_aligned_v1 files, loaded resident */
static void split_dense(void)
{
    fx_cfg c = moe_cfg(FX_TQ4);
    c.arch = FX_QWEN3;
    c.tied = 1;
    char src[512], dst[512];
    make_split(c, "dense", src, dst, sizeof src);
    size_t n = (size_t)NGEN * (size_t)c.vocab;
    tq_err err = {0};
    tq_run_opts o;
    tq_run_stats st;
    fx_logits a = {.v = calloc(n, 4), .cap = NGEN}, b = {.v = calloc(n, 4), .cap = NGEN};
    tq_run_opts_default(&o);
    CHECK_OK(decode(src, &o, &a, &st, &err));
    CHECK_OK(decode(dst, &o, &b, &st, &err));
    CHECK(a.steps == NGEN && memcmp(a.v, b.v, n * 4) == 0);
    free(a.v);
    free(b.v);
}

/* One flipped byte in an expert block: --check-blocks names it; resident load too. */
static void check_blocks_detects_corruption(void)
{
    char src[512], dst[512];
    make_split(moe_cfg(FX_TQ3), "corrupt", src, dst, sizeof src);
    uint64_t blk = block_size_of(dst);
    tq_err err = {0};
    tq_run_opts o;
    tq_run_stats st;
    size_t n = (size_t)NGEN * 72;
    fx_logits b = {.v = calloc(n, 4), .cap = NGEN};
    char p[700];
    snprintf(p, sizeof p, "%s/experts/layer_01.bin", dst);
    /* corrupt every expert of layer 1 so whichever the router picks is caught */
    for (uint64_t x = 0; x < 8; x++)
        t_flip_byte(p, 16384 + x * blk + 100, 0x40);
    tq_run_opts_default(&o);
    o.check_blocks = 1;
    CHECK(decode(dst, &o, &b, &st, &err) == -1);
    CHECKF(strstr(err.msg, "layer_01.bin") && strstr(err.msg, "expert") && strstr(err.msg, "SHA-256"), "%s",
           err.msg);
    o.resident = 1;
    CHECK(decode(dst, &o, &b, &st, &err) == -1);
    CHECKF(strstr(err.msg, "layer_01.bin") && strstr(err.msg, "SHA-256"), "%s", err.msg);
    /* mapped: every block is checked once, at open (the CPU does not learn which ones a
     * device reads), so the first corrupt one is named before any decode */
    o.resident = 0;
    o.map_experts = 1;
    CHECK(decode(dst, &o, &b, &st, &err) == -1);
    CHECKF(strstr(err.msg, "layer_01.bin") && strstr(err.msg, "expert 0 block") && strstr(err.msg, "SHA-256"), "%s",
           err.msg);
    /* without verification it decodes (the data is only different, not malformed) */
    tq_run_opts_default(&o);
    CHECK_OK(decode(dst, &o, &b, &st, &err));
    o.map_experts = 1;
    CHECK_OK(decode(dst, &o, &b, &st, &err));
    o.map_experts = 0;
    /* a truncated layer file is an error at open */
    CHECK(truncate(p, 16384 + 3 * (off_t)blk) == 0);
    CHECK(decode(dst, &o, &b, &st, &err) == -1);
    CHECKF(strstr(err.msg, "layer_01.bin") != NULL, "%s", err.msg);
    free(b.v);
}

int main(void)
{
    RUN(split_tq3_bit_identical);
    RUN(split_bf16_hf_shared_bit_identical);
    RUN(split_aff4_bit_identical);
    RUN(split_qwen3_next_tq3);
    RUN(split_mixtral_tq3);
    RUN(split_deepseek_tq4);
    RUN(split_gpt_oss_aff4);
    RUN(split_qwen3_5_moe_aff4);
    RUN(split_qwen3_5_moe_bf16);
    RUN(split_qwen2_moe);
    RUN(split_gemma4);
    RUN(split_qwen3_5_moe_hf_fused);
    RUN(split_gpt_oss_hf_mxfp4);
    RUN(fused_malformed);
    RUN(split_dense);
    RUN(check_blocks_detects_corruption);
    TEST_MAIN_END();
}
