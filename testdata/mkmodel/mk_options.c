/* tq-mkmodel options: architecture names, size presets, consistency checks. */
#include "testdata/mkmodel/mkmodel.h"

#include <string.h>

static const char *const arch_names[] = {"llama", "qwen3", "qwen3_moe", "ngram"};

int tq_mk_arch_from_name(const char *s, tq_mk_arch *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, arch_names[i]) == 0) {
            *out = (tq_mk_arch)i;
            return 0;
        }
    return -1;
}

const char *tq_mk_arch_name(tq_mk_arch a)
{
    return (unsigned)a < 4 ? arch_names[a] : "?";
}

int tq_mk_preset(tq_mk_opts *o, tq_mk_arch arch, const char *size, tq_err *e)
{
    memset(o, 0, sizeof *o);
    o->arch = arch;
    o->dtype = TQ_DT_BF16;
    o->shard_size = 5000000000ull; /* HuggingFace's default max_shard_size "5GB" */
    o->seed = 0;
    o->prefix = "ngram";
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
    } else if (strcmp(size, "8g") == 0) {
        /* ~8 GB of bf16 with the proportions of released checkpoints (Qwen3-30B-A3B's
         * attention and expert shapes, fewer layers and experts; Llama-3.2-3B-like dense) */
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
        } else {
            o->layers = 32;
            o->hidden = 3072;
            o->intermediate = 8192;
            o->heads = 24;
            o->kv_heads = 8;
            o->head_dim = 128;
            o->vocab = arch == TQ_MK_LLAMA ? 128256 : 151936;
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

int tq_mk_validate(const tq_mk_opts *o, tq_err *e)
{
    if (o->dtype != TQ_DT_BF16 && o->dtype != TQ_DT_F16 && o->dtype != TQ_DT_F32)
        return tq_fail(e, TQ_EUSAGE, "--dtype must be bf16, f16 or f32");
    if (o->shard_size == 0)
        return tq_fail(e, TQ_EUSAGE, "--shard-size must be positive");
    if (o->arch == TQ_MK_NGRAM) {
        if (o->dtype == TQ_DT_F32)
            return tq_fail(e, TQ_EUSAGE, "ngram tables store scales/biases as f16 or bf16");
        if (o->rows == 0 || o->rows > (1ull << 40))
            return tq_fail(e, TQ_EUSAGE, "--rows must be in [1, 2^40]");
        if (o->bits != 2 && o->bits != 4 && o->bits != 8)
            return tq_fail(e, TQ_EUSAGE, "--bits must be 2, 4 or 8");
        if (range("width", o->width, 1, 1 << 20, e) || range("group-size", o->group_size, 1, 1 << 20, e))
            return -1;
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
    if (o->arch != TQ_MK_QWEN3_MOE || o->shared_expert)
        if (range("intermediate", o->intermediate, 1, 1 << 18, e))
            return -1;
    if (o->arch == TQ_MK_QWEN3_MOE) {
        if (range("experts", o->experts, 1, 4096, e) || range("top-k", o->top_k, 1, o->experts, e) ||
            range("moe-intermediate", o->moe_intermediate, 1, 1 << 18, e))
            return -1;
    } else {
        if (o->naming_mlx)
            return tq_fail(e, TQ_EUSAGE, "--naming mlx only applies to --arch qwen3_moe");
        if (o->shared_expert)
            return tq_fail(e, TQ_EUSAGE, "--shared-expert only applies to --arch qwen3_moe");
    }
    if (o->quant_bits) {
        if (o->quant_bits != 4 && o->quant_bits != 8)
            return tq_fail(e, TQ_EUSAGE, "--quant must be affine4 or affine8");
        if (o->group_size != 32 && o->group_size != 64 && o->group_size != 128)
            return tq_fail(e, TQ_EUSAGE, "--group-size must be 32, 64 or 128 with --quant");
    }
    return 0;
}
