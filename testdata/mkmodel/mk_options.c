/* tq-mkmodel options: architecture names, size presets, consistency checks. */
#include "testdata/mkmodel/mkmodel.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int family; /* tq_family_id, -1 for ngram */
} archs[TQ_MK_ARCH_COUNT] = {
    [TQ_MK_LLAMA] = {"llama", TQ_FAM_LLAMA},
    [TQ_MK_QWEN3] = {"qwen3", TQ_FAM_QWEN3},
    [TQ_MK_QWEN3_MOE] = {"qwen3_moe", TQ_FAM_QWEN3_MOE},
    [TQ_MK_NGRAM] = {"ngram", -1},
    [TQ_MK_QWEN2] = {"qwen2", TQ_FAM_QWEN2},
    [TQ_MK_QWEN2_MOE] = {"qwen2_moe", TQ_FAM_QWEN2_MOE},
    [TQ_MK_QWEN3_NEXT] = {"qwen3_next", TQ_FAM_QWEN3_NEXT},
    [TQ_MK_QWEN3_5] = {"qwen3_5", TQ_FAM_QWEN3_5},
    [TQ_MK_QWEN3_5_MOE] = {"qwen3_5_moe", TQ_FAM_QWEN3_5_MOE},
    [TQ_MK_MIXTRAL] = {"mixtral", TQ_FAM_MIXTRAL},
    [TQ_MK_DEEPSEEK_V3] = {"deepseek_v3", TQ_FAM_DEEPSEEK_V3},
    [TQ_MK_KIMI_K2] = {"kimi_k2", TQ_FAM_DEEPSEEK_V3},
    [TQ_MK_GPT_OSS] = {"gpt_oss", TQ_FAM_GPT_OSS},
    [TQ_MK_GEMMA4] = {"gemma4", TQ_FAM_GEMMA4},
};

int tq_mk_arch_from_name(const char *s, tq_mk_arch *out)
{
    for (int i = 0; i < TQ_MK_ARCH_COUNT; i++)
        if (strcmp(s, archs[i].name) == 0) {
            *out = (tq_mk_arch)i;
            return 0;
        }
    return -1;
}

const char *tq_mk_arch_name(tq_mk_arch a)
{
    return (unsigned)a < TQ_MK_ARCH_COUNT ? archs[a].name : "?";
}

tq_mk_arch tq_mk_arch_at(int i)
{
    int n = 0;
    for (int f = 0; f < TQ_FAM_COUNT; f++)
        for (int a = 0; a < TQ_MK_ARCH_COUNT; a++)
            if (archs[a].family == f && n++ == i)
                return (tq_mk_arch)a;
    return TQ_MK_NGRAM; /* the row table, then the ngram table */
}

const char *tq_mk_arch_list(void)
{
    static char buf[512];
    size_t n = 0;
    for (int i = 0; i < TQ_MK_ARCH_COUNT; i++) {
        tq_mk_arch a = tq_mk_arch_at(i);
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s%s", i == 0 ? "" : i + 1 == TQ_MK_ARCH_COUNT ? " or " : ", ",
                              archs[a].name, a == TQ_MK_QWEN3_MOE ? " (default)" : "");
        if (n >= sizeof buf)
            break;
    }
    return buf;
}

const tq_family *tq_mk_family(tq_mk_arch a)
{
    return (unsigned)a < TQ_MK_ARCH_COUNT && archs[a].family >= 0 ? tq_family_get((tq_family_id)archs[a].family) : NULL;
}

int tq_mk_is_moe(tq_mk_arch a)
{
    const tq_family *f = tq_mk_family(a);
    return f && f->store != TQ_EXP_NONE;
}

/* Tiny presets of the families added with the family table, as data: the fields an arch sets
 * over the common tiny preset (2 layers, hidden 128, 4 heads of 32, 2 kv heads, vocab 512; a
 * MoE family 8 experts of 128, 2 per token). A few MB, every quantized input width a multiple
 * of 64, and every branch of the family present (both attention kinds, a shared expert, a
 * dense first layer, several expert groups, sinks, sliding windows). Zero: the common value. */
#define QWEN3_NEXT_TINY /* 4 layers: three Gated DeltaNet layers, then one gated full-attention layer */ \
    .layers = 4, .head_dim = 64, .shared_inter = 128, .lin_k_heads = 2, .lin_v_heads = 4, .lin_k_dim = 32,   \
    .lin_v_dim = 32, .conv_kernel = 4, .full_attn_interval = 4
/* layer 0 dense (first_k_dense_replace 1), q LoRA; head_dim = qk_nope + qk_rope (not a config
 * key of DeepSeek-V3); one kv head per query head */
#define DEEPSEEK_TINY                                                                                          \
    .layers = 3, .moe_intermediate = 64, .q_lora_rank = 64, .kv_lora_rank = 64, .qk_nope_dim = 32,          \
    .qk_rope_dim = 32, .v_head_dim = 32, .kv_heads = 4, .head_dim = 64, .n_shared_experts = 1, .first_dense = 1, \
    .topk_group = 1
static const tq_mk_opts tiny_shape[TQ_MK_ARCH_COUNT] = {
    [TQ_MK_QWEN2_MOE] = {.shared_inter = 256},
    [TQ_MK_QWEN3_NEXT] = {QWEN3_NEXT_TINY},
    [TQ_MK_QWEN3_5] = {QWEN3_NEXT_TINY, .mtp_layers = 1},
    [TQ_MK_QWEN3_5_MOE] = {QWEN3_NEXT_TINY, .mtp_layers = 1},
    [TQ_MK_MIXTRAL] = {.intermediate = 128}, /* Mixtral's expert width is intermediate_size */
    /* 2 expert groups and one MTP layer (DeepSeek-V3 ships one), Kimi-K2 1 group and none */
    [TQ_MK_DEEPSEEK_V3] = {DEEPSEEK_TINY, .n_group = 2, .mtp_layers = 1},
    [TQ_MK_KIMI_K2] = {DEEPSEEK_TINY, .n_group = 1},
    /* gpt-oss: expert width is intermediate_size; a window shorter than a test prompt */
    [TQ_MK_GPT_OSS] = {.head_dim = 64, .intermediate = 128, .sliding_window = 8},
    [TQ_MK_GEMMA4] = {.moe_intermediate = 64, .sliding_window = 8},
};

static void tiny_family(tq_mk_opts *o)
{
    const tq_mk_opts *t = &tiny_shape[o->arch];
    int moe = tq_mk_is_moe(o->arch);
    o->layers = t->layers ? t->layers : 2;
    o->experts = moe ? 8 : 0;
    o->top_k = moe ? 2 : 0;
#define OVER(field) \
    if (t->field)   \
        o->field = t->field;
    OVER(head_dim) OVER(intermediate) OVER(moe_intermediate) OVER(kv_heads) OVER(shared_inter) OVER(mtp_layers)
    OVER(lin_k_heads) OVER(lin_v_heads) OVER(lin_k_dim) OVER(lin_v_dim) OVER(conv_kernel) OVER(full_attn_interval)
    OVER(q_lora_rank) OVER(kv_lora_rank) OVER(qk_nope_dim) OVER(qk_rope_dim) OVER(v_head_dim) OVER(n_shared_experts)
    OVER(first_dense) OVER(n_group) OVER(topk_group) OVER(sliding_window)
#undef OVER
}

int tq_mk_preset(tq_mk_opts *o, tq_mk_arch arch, const char *size, tq_err *e)
{
    memset(o, 0, sizeof *o);
    o->arch = arch;
    o->dtype = TQ_DT_BF16;
    o->shard_size = 5000000000ull; /* HuggingFace's default max_shard_size "5GB" */
    o->seed = 0;
    o->prefix = "ngram";
    int legacy = arch == TQ_MK_LLAMA || arch == TQ_MK_QWEN3 || arch == TQ_MK_QWEN3_MOE || arch == TQ_MK_NGRAM;
    if (strcmp(size, "tiny") == 0) {
        /* a few MB: small enough that a test converts, splits and runs it in well under a
         * second, but every dimension a multiple of 64 so quantizers see whole groups */
        o->layers = 2;
        o->hidden = 128;
        o->intermediate = 256;
        o->moe_intermediate = 128;
        o->experts = arch == TQ_MK_QWEN3_MOE ? 8 : 0;
        o->top_k = arch == TQ_MK_QWEN3_MOE ? 2 : 0;
        o->heads = 4;
        o->kv_heads = 2;
        o->head_dim = 32;
        o->vocab = 512;
        o->rows = 1024;
        if (!legacy)
            tiny_family(o);
    } else if (strcmp(size, "8g") == 0) {
        /* ~8 GB of bf16 with the proportions of released checkpoints (Qwen3-30B-A3B's
         * attention and expert shapes, fewer layers and experts; Llama-3.2-3B-like dense;
         * Qwen3.5-35B-A3B's hybrid layers with fewer experts) */
        if (arch == TQ_MK_QWEN3_MOE) {
            o->layers = 12;
            o->hidden = 2048;
            o->intermediate = 6144;
            o->moe_intermediate = 768;
            o->experts = 60;
            o->top_k = 8;
            o->heads = 32;
            o->kv_heads = 4;
            o->head_dim = 128;
            o->vocab = 151936;
        } else if (arch == TQ_MK_QWEN3_5_MOE || arch == TQ_MK_QWEN3_NEXT) {
            tiny_family(o);
            o->layers = 12;
            o->hidden = 2048;
            o->intermediate = 5120;
            o->moe_intermediate = 512;
            o->shared_inter = 512;
            o->experts = 96;
            o->top_k = 8;
            o->heads = 16;
            o->kv_heads = 2;
            o->head_dim = 256;
            o->lin_k_heads = 16;
            o->lin_v_heads = 32;
            o->lin_k_dim = 128;
            o->lin_v_dim = 128;
            o->mtp_layers = 0;
            o->vocab = 151936;
        } else if (legacy) {
            o->layers = 32;
            o->hidden = 3072;
            o->intermediate = 8192;
            o->heads = 24;
            o->kv_heads = 8;
            o->head_dim = 128;
            o->vocab = arch == TQ_MK_LLAMA ? 128256 : 151936;
        } else {
            return tq_fail(e, TQ_EUSAGE, "--size 8g exists for llama, qwen3, qwen3_moe, qwen3_next, qwen3_5_moe "
                           "and ngram, not for --arch %s", tq_mk_arch_name(arch));
        }
        o->rows = 80000000; /* 100-byte records: 8 GB */
    } else {
        return tq_fail(e, TQ_EUSAGE, "unknown --size '%s' (expected tiny or 8g)", size);
    }
    o->width = 160;
    o->bits = 4;
    o->group_size = arch == TQ_MK_NGRAM ? 32 : 64;
    return 0;
}

static int range(const char *what, long v, long lo, long hi, tq_err *e)
{
    if (v < lo || v > hi)
        return tq_fail(e, TQ_EUSAGE, "--%s %ld out of range [%ld, %ld]", what, v, lo, hi);
    return 0;
}

static int validate_family(const tq_mk_opts *o, tq_err *e)
{
    switch (o->arch) {
    case TQ_MK_QWEN3_NEXT:
    case TQ_MK_QWEN3_5:
    case TQ_MK_QWEN3_5_MOE:
        if (range("linear heads", o->lin_k_heads, 1, 1024, e) || range("linear heads", o->lin_v_heads, 1, 4096, e) ||
            range("linear head dim", o->lin_k_dim, 1, 4096, e) || range("linear head dim", o->lin_v_dim, 1, 4096, e) ||
            range("conv kernel", o->conv_kernel, 1, 64, e) || range("full attention interval", o->full_attn_interval, 1, 1024, e) ||
            range("mtp", o->mtp_layers, 0, 8, e))
            return -1;
        if (o->lin_v_heads % o->lin_k_heads)
            return tq_fail(e, TQ_EUSAGE, "linear-attention value heads must be a multiple of the key heads");
        if (o->head_dim % 8)
            return tq_fail(e, TQ_EUSAGE, "--head-dim must be a multiple of 8 (a quarter of it is rotary)");
        break;
    case TQ_MK_DEEPSEEK_V3:
    case TQ_MK_KIMI_K2:
        if (range("q lora rank", o->q_lora_rank, 0, 1 << 16, e) || range("kv lora rank", o->kv_lora_rank, 1, 1 << 16, e) ||
            range("qk nope dim", o->qk_nope_dim, 1, 4096, e) || range("qk rope dim", o->qk_rope_dim, 2, 4096, e) ||
            range("v head dim", o->v_head_dim, 1, 4096, e) || range("first dense layers", o->first_dense, 0, o->layers, e) ||
            range("expert groups", o->n_group, 1, o->experts, e) || range("top-k groups", o->topk_group, 1, o->n_group, e))
            return -1;
        if (o->qk_rope_dim % 2)
            return tq_fail(e, TQ_EUSAGE, "the rotary part of a DeepSeek head must be even");
        if (o->experts % o->n_group)
            return tq_fail(e, TQ_EUSAGE, "--experts %ld is not a multiple of the %ld expert groups", o->experts, o->n_group);
        break;
    case TQ_MK_GPT_OSS:
    case TQ_MK_GEMMA4:
        if (range("sliding window", o->sliding_window, 1, 1 << 20, e))
            return -1;
        if (o->arch == TQ_MK_GPT_OSS && (o->hidden % 32 || o->intermediate % 32))
            return tq_fail(e, TQ_EUSAGE, "gpt_oss experts are MXFP4: --hidden and --intermediate must be multiples of 32");
        break;
    default:
        break;
    }
    return 0;
}

int tq_mk_validate(const tq_mk_opts *o, tq_err *e)
{
    if ((unsigned)o->arch >= TQ_MK_ARCH_COUNT)
        return tq_fail(e, TQ_EUSAGE, "unknown architecture");
    if (o->dtype != TQ_DT_BF16 && o->dtype != TQ_DT_F16 && o->dtype != TQ_DT_F32)
        return tq_fail(e, TQ_EUSAGE, "--dtype must be bf16, f16 or f32");
    if (o->shard_size == 0)
        return tq_fail(e, TQ_EUSAGE, "--shard-size must be positive");
    if (o->arch == TQ_MK_NGRAM) {
        if (o->dtype == TQ_DT_F32)
            return tq_fail(e, TQ_EUSAGE, "ngram tables store scales/biases as f16 or bf16");
        if (o->rows == 0 || o->rows > (1ull << 40))
            return tq_fail(e, TQ_EUSAGE, "--rows must be in [1, 2^40]");
        if (o->bits != 0 && o->bits != 2 && o->bits != 4 && o->bits != 8)
            return tq_fail(e, TQ_EUSAGE, "--bits must be 0, 2, 4 or 8");
        if (range("width", o->width, 1, 1 << 20, e) || range("group-size", o->group_size, 1, 1 << 20, e))
            return -1;
        if (o->bits == 0)
            return 0; /* raw rows: no groups */
        if (o->width % o->group_size)
            return tq_fail(e, TQ_EUSAGE, "--width %ld is not a multiple of --group-size %d", o->width, o->group_size);
        if (o->group_size % (32 / o->bits))
            return tq_fail(e, TQ_EUSAGE, "--group-size %d is not a multiple of %d (values per u32 at %d bits)",
                           o->group_size, 32 / o->bits, o->bits);
        if (!o->prefix || !*o->prefix || strlen(o->prefix) > 200)
            return tq_fail(e, TQ_EUSAGE, "--prefix must be 1 to 200 characters");
        return 0;
    }
    if (range("layers", o->layers, 1, 1024, e) || range("hidden", o->hidden, 2, 1 << 16, e) ||
        range("heads", o->heads, 1, 1024, e) || range("kv-heads", o->kv_heads, 1, 1024, e) ||
        range("head-dim", o->head_dim, 2, 4096, e) || range("vocab", o->vocab, 4, 1 << 24, e))
        return -1;
    if (o->head_dim % 2)
        return tq_fail(e, TQ_EUSAGE, "--head-dim must be even (rotary embeddings rotate pairs)");
    if (o->heads % o->kv_heads)
        return tq_fail(e, TQ_EUSAGE, "--heads %ld is not a multiple of --kv-heads %ld", o->heads, o->kv_heads);
    if ((long long)o->heads * o->head_dim > (1 << 18))
        return tq_fail(e, TQ_EUSAGE, "--heads x --head-dim too large");
    int moe = tq_mk_is_moe(o->arch);
    if (o->arch == TQ_MK_MIXTRAL && o->head_dim * o->heads != o->hidden)
        return tq_fail(e, TQ_EUSAGE, "mixtral's head size is hidden / heads: --head-dim %ld x --heads %ld != --hidden %ld",
                       o->head_dim, o->heads, o->hidden);
    if (o->arch != TQ_MK_QWEN3_MOE || o->shared_expert)
        if (range("intermediate", o->intermediate, 1, 1 << 18, e))
            return -1;
    if (moe) {
        if (range("experts", o->experts, 1, 4096, e) || range("top-k", o->top_k, 1, o->experts, e) ||
            range("moe-intermediate", o->moe_intermediate, 1, 1 << 18, e))
            return -1;
        if ((o->arch == TQ_MK_QWEN2_MOE || o->arch == TQ_MK_QWEN3_NEXT || o->arch == TQ_MK_QWEN3_5_MOE) &&
            range("shared expert width", o->shared_inter, 1, 1 << 18, e))
            return -1;
    } else if (o->naming_mlx && o->arch != TQ_MK_QWEN3_5) {
        return tq_fail(e, TQ_EUSAGE, "--naming mlx only applies to MoE architectures and qwen3_5");
    }
    if (o->shared_expert && o->arch != TQ_MK_QWEN3_MOE)
        return tq_fail(e, TQ_EUSAGE, "--shared-expert only applies to --arch qwen3_moe (the others have theirs by design)");
    if (validate_family(o, e))
        return -1;
    if (o->quant_bits) {
        if (o->quant_bits != 4 && o->quant_bits != 8)
            return tq_fail(e, TQ_EUSAGE, "--quant must be affine4 or affine8");
        if (o->group_size != 32 && o->group_size != 64 && o->group_size != 128)
            return tq_fail(e, TQ_EUSAGE, "--group-size must be 32, 64 or 128 with --quant");
        if (moe && o->arch != TQ_MK_QWEN3_MOE && !o->naming_mlx)
            return tq_fail(e, TQ_EUSAGE, "--quant writes MLX checkpoints: use it with --naming mlx for --arch %s",
                           tq_mk_arch_name(o->arch));
    }
    return 0;
}
