/* GGUF parser and dequantization: ggml's own vectors bit for bit, partial reads, and a
 * table of malformed files that must each fail with one exact message.
 * TQ_GGUF_WRITE_MALFORMED=DIR also writes the malformed files there (that is how
 * the malformed files of tests/fuzz/corpus/gguf/ were made). */
#include "formats/formats.h"
#include "check.h"
#include "gguf_writer.h"

#include <cjson/cJSON.h>
#include <stdint.h>

static tq_err err;

static char *vec_path(const char *name)
{
    static char buf[2][4096];
    static int k;
    const char *root = getenv("TQ_ROOT");
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/testdata/vectors/%s", root ? root : ".", name);
    return buf[k];
}

/* The expected safetensors file, read with cJSON (independent of formats' reader). */
typedef struct expected {
    unsigned char *buf;
    size_t len;
    uint64_t data;
    cJSON *hdr;
} expected;

static int load_expected(expected *x, const char *name)
{
    memset(x, 0, sizeof *x);
    FILE *f = fopen(vec_path(name), "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    x->len = (size_t)ftell(f);
    rewind(f);
    x->buf = malloc(x->len);
    if (!x->buf || fread(x->buf, 1, x->len, f) != x->len) {
        fclose(f);
        return -1;
    }
    fclose(f);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | x->buf[i];
    if (n > x->len - 8)
        return -1;
    x->hdr = cJSON_ParseWithLength((const char *)x->buf + 8, n);
    x->data = 8 + n;
    return x->hdr ? 0 : -1;
}

/* Expected values of a tensor, or NULL; shape checked against ne reversed. */
static const float *expected_tensor(const expected *x, const tq_gguf_tensor *t)
{
    cJSON *o = cJSON_GetObjectItemCaseSensitive(x->hdr, t->name);
    cJSON *shape = cJSON_GetObjectItemCaseSensitive(o, "shape");
    cJSON *offs = cJSON_GetObjectItemCaseSensitive(o, "data_offsets");
    if (!o || cJSON_GetArraySize(shape) != (int)t->n_dims)
        return NULL;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if ((uint64_t)cJSON_GetArrayItem(shape, (int)d)->valuedouble != t->ne[t->n_dims - 1 - d])
            return NULL;
    uint64_t b = (uint64_t)cJSON_GetArrayItem(offs, 0)->valuedouble;
    uint64_t e = (uint64_t)cJSON_GetArrayItem(offs, 1)->valuedouble;
    if (e - b != t->nelem * 4 || x->data + e > x->len)
        return NULL;
    return (const float *)(x->buf + x->data + b);
}

/* Tensor t read whole, and in unaligned ranges crossing block boundaries, equals the expected
 * f32 values bit for bit. */
static int matches_expected(const tq_gguf_file *f, const expected *x, const tq_gguf_tensor *t)
{
    const float *want = expected_tensor(x, t);
    CHECKF(want != NULL, "%s: missing or wrong shape in expected file", t->name);
    if (!want)
        return 0;
    float *got = malloc(t->nelem * sizeof(float));
    CHECK_OK(tq_gguf_read_f32(f, t, 0, t->nelem, got, &err));
    size_t bad = 0, first = 0;
    for (uint64_t k = 0; k < t->nelem; k++)
        if (memcmp(&got[k], &want[k], 4) != 0 && !bad++)
            first = k;
    CHECKF(bad == 0, "%s (%s): %zu of %llu values differ, first at %zu", t->name, tq_ggml_type_name(t->type), bad,
           (unsigned long long)t->nelem, first);
    uint64_t starts[] = {1, 31, 255, 257, t->nelem > 300 ? t->nelem - 300 : 3};
    for (size_t s = 0; s < sizeof starts / sizeof *starts && t->nelem >= 560; s++) {
        uint64_t n = 290;
        CHECK_OK(tq_gguf_read_f32(f, t, starts[s], n, got, &err));
        CHECKF(memcmp(got, want + starts[s], n * 4) == 0, "%s: range at %llu differs", t->name,
               (unsigned long long)starts[s]);
        bad += memcmp(got, want + starts[s], n * 4) != 0;
    }
    free(got);
    return bad == 0;
}

static void test_vectors_bit_exact(void)
{
    tq_gguf_file *f = NULL;
    expected x;
    CHECK_OK(tq_gguf_open(&f, vec_path("ggml-vectors.gguf"), &err));
    CHECK(load_expected(&x, "ggml-vectors.expected.safetensors") == 0);
    if (!f || !x.hdr)
        return;
    CHECK(f->version == 3);
    CHECK(f->n_tensors == 26);
    CHECK(cJSON_GetArraySize(x.hdr) == 26);
    int types_seen[64] = {0};
    for (size_t i = 0; i < f->n_tensors; i++)
        if (matches_expected(f, &x, &f->tensors[i]) && f->tensors[i].type < 64)
            types_seen[f->tensors[i].type]++;
    /* 13 types, each as a 2-D and a 3-D tensor. */
    uint32_t want_types[] = {0, 1, 30, 8, 2, 3, 6, 7, 10, 11, 12, 13, 14};
    for (size_t i = 0; i < 13; i++)
        CHECKF(types_seen[want_types[i]] == 2, "type %u seen %d times", want_types[i], types_seen[want_types[i]]);
    cJSON_Delete(x.hdr);
    free(x.buf);
    tq_gguf_close(f);
}

/* The types the shipped vectors lack (Q8_K, the i-quants, TQ1_0, TQ2_0): random blocks written
 * by the tests' GGUF writer, dequantized by ggml's own dequantize_row_* (ggml-quants.c at ggml
 * commit 9a4acb37, built outside the tree; the GGUF's tq.vectors.source key says so). */
static void test_iq_vectors_bit_exact(void)
{
    tq_gguf_file *f = NULL;
    expected x;
    CHECK_OK(tq_gguf_open(&f, vec_path("ggml-iq-vectors.gguf"), &err));
    CHECK(load_expected(&x, "ggml-iq-vectors.expected.safetensors") == 0);
    if (!f || !x.hdr)
        return;
    CHECK(f->n_tensors == 12 && cJSON_GetArraySize(x.hdr) == 12);
    uint32_t want_types[] = {15, 16, 17, 18, 19, 20, 21, 22, 23, 29, 34, 35};
    for (size_t i = 0; i < f->n_tensors; i++) {
        int known = 0;
        for (size_t k = 0; k < 12; k++)
            known += f->tensors[i].type == want_types[k];
        CHECKF(known == 1, "%s: type %u", f->tensors[i].name, f->tensors[i].type);
        CHECK(matches_expected(f, &x, &f->tensors[i]));
    }
    cJSON_Delete(x.hdr);
    free(x.buf);
    tq_gguf_close(f);
}

static void test_vectors_metadata(void)
{
    tq_gguf_file *f = NULL;
    CHECK_OK(tq_gguf_open(&f, vec_path("ggml-vectors.gguf"), &err));
    if (!f)
        return;
    char *arch = tq_gguf_get_str(f, "general.architecture");
    CHECK(arch && strcmp(arch, "qwen3moe") == 0);
    free(arch);
    uint64_t u;
    double d;
    CHECK(tq_gguf_get_u64(f, "qwen3moe.block_count", &u) == 0 && u == 2);
    CHECK(tq_gguf_get_u64(f, "tq.test.u64", &u) == 0 && u == 1099511627776ull);
    CHECK(tq_gguf_get_f64(f, "tq.test.f64", &d) == 0 && d == -0.125);
    CHECK(tq_gguf_get_f64(f, "qwen3moe.rope.freq_base", &d) == 0 && d == 1000000.0);
    const tq_gguf_kv *kv = tq_gguf_find_kv(f, "tq.test.flag");
    CHECK(kv && kv->type == TQ_GGUF_BOOL && kv->num.u == 1);
    kv = tq_gguf_find_kv(f, "tokenizer.ggml.tokens");
    CHECK(kv && kv->type == TQ_GGUF_ARRAY && kv->arr_type == TQ_GGUF_STRING && kv->arr_n == 5);
    kv = tq_gguf_find_kv(f, "tq.test.i32s");
    CHECK(kv && kv->arr_type == TQ_GGUF_I32 && kv->arr_n == 3);
    CHECK(tq_gguf_get_u64(f, "general.name", &u) == -1);
    CHECK(tq_gguf_find_tensor(f, "blk.12.ffn_gate_exps.weight") != NULL);
    tq_gguf_close(f);
}

/* ----------------------------------------------------------- malformed files */
static void hdr(gb *b, uint32_t version, uint64_t n_t, uint64_t n_kv)
{
    gb_bytes(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_t);
    gb_u64(b, n_kv);
}

static void tensor_info(gb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        gb_u64(b, ne[d]);
    gb_u32(b, type);
    gb_u64(b, off);
}

static void pad_to(gb *b, size_t align, size_t extra)
{
    while (b->len % align)
        gb_u8(b, 0);
    for (size_t i = 0; i < extra; i++)
        gb_u8(b, (uint8_t)i);
}

/* One F32 tensor of 8 elements, with optional tweaks. */
static void one_tensor(gb *b, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off, size_t data)
{
    hdr(b, 3, 1, 0);
    tensor_info(b, "w", n_dims, ne, type, off);
    pad_to(b, 32, data);
}

static void kv_key(gb *b, const char *k, uint32_t type)
{
    gb_str(b, k);
    gb_u32(b, type);
}

typedef struct mcase {
    const char *name;
    void (*build)(gb *b);
    const char *msg; /* after "NAME.gguf: " */
} mcase;

static void m_bad_magic(gb *b) { gb_bytes(b, "GGUX", 4); gb_u32(b, 3); gb_u64(b, 0); gb_u64(b, 0); }
static void m_version1(gb *b) { hdr(b, 1, 0, 0); }
static void m_version4(gb *b) { hdr(b, 4, 0, 0); }
static void m_big_endian(gb *b) { hdr(b, 0x03000000u, 0, 0); }
static void m_truncated(gb *b) { gb_bytes(b, "GGUF\3\0", 6); }
static void m_kv_count(gb *b) { hdr(b, 3, 0, 1ull << 40); }
static void m_tensor_count(gb *b) { hdr(b, 3, 1000000, 0); }
static void m_key_len(gb *b) { hdr(b, 3, 0, 1); gb_u64(b, 1000); gb_bytes(b, "abcdefghijklmnop", 16); }
static void m_str_len(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "k", 8); gb_u64(b, 1ull << 62); gb_bytes(b, "x", 1); }
static void m_value_type(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "k", 13); gb_u32(b, 0); }
static void m_array_type(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "k", 9); gb_u32(b, 99); gb_u64(b, 1); gb_u32(b, 0); }
static void m_array_nest(gb *b)
{
    hdr(b, 3, 0, 1);
    kv_key(b, "bomb", 9);
    for (int i = 0; i < 6; i++) {
        gb_u32(b, 9);
        gb_u64(b, 1);
    }
    gb_u32(b, 0);
    gb_u64(b, 0);
}
static void m_array_count(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "k", 9); gb_u32(b, 10); gb_u64(b, 1000); gb_u64(b, 7); }
static void m_array_bomb(gb *b)
{
    /* An array claiming 2^29 arrays: refused by the element budget before any walk. */
    hdr(b, 3, 0, 1);
    kv_key(b, "bomb", 9);
    gb_u32(b, 9);
    gb_u64(b, 1ull << 29);
    for (int i = 0; i < 4; i++)
        gb_u64(b, 0);
}
static void m_array_elems(gb *b)
{
    /* Many small nested arrays whose counts add up past the element budget. */
    hdr(b, 3, 0, 2);
    kv_key(b, "a", 9);
    gb_u32(b, 0);
    gb_u64(b, (1ull << 28) - 4);
    for (size_t i = 0; i < 8; i++)
        gb_u8(b, 0);
}
static void m_bool(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "flag", 7); gb_u8(b, 2); }
static void m_dup_key(gb *b)
{
    hdr(b, 3, 0, 2);
    kv_key(b, "general.name", 8);
    gb_str(b, "a");
    kv_key(b, "general.name", 8);
    gb_str(b, "b");
}
static void m_empty_key(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "", 4); gb_u32(b, 1); }
static void m_nul_name(gb *b)
{
    hdr(b, 3, 1, 0);
    gb_u64(b, 3);
    gb_bytes(b, "a\0b", 3);
    gb_u32(b, 1);
    gb_u64(b, 8);
    gb_u32(b, 0);
    gb_u64(b, 0);
    pad_to(b, 32, 32);
}
static void m_align0(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "general.alignment", 4); gb_u32(b, 0); }
static void m_align48(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "general.alignment", 4); gb_u32(b, 48); }
static void m_align_type(gb *b) { hdr(b, 3, 0, 1); kv_key(b, "general.alignment", 10); gb_u64(b, 32); }
static void m_ndims5(gb *b) { uint64_t ne[5] = {8, 1, 1, 1, 1}; one_tensor(b, 5, ne, 0, 0, 32); }
static void m_ne_overflow(gb *b) { uint64_t ne[2] = {1ull << 40, 1ull << 40}; one_tensor(b, 2, ne, 0, 0, 32); }
static void m_ne_negative(gb *b) { uint64_t ne[2] = {8, 1ull << 63}; one_tensor(b, 2, ne, 0, 0, 32); }
static void m_type_id(gb *b) { uint64_t ne[1] = {8}; one_tensor(b, 1, ne, 99, 0, 32); }
static void m_removed_type(gb *b) { uint64_t ne[1] = {32}; one_tensor(b, 1, ne, 4, 0, 32); }
static void m_block_multiple(gb *b) { uint64_t ne[2] = {100, 2}; one_tensor(b, 2, ne, 12, 0, 288); }
static void m_misaligned(gb *b) { uint64_t ne[1] = {8}; one_tensor(b, 1, ne, 0, 16, 64); }
static void m_outside(gb *b) { uint64_t ne[1] = {8}; one_tensor(b, 1, ne, 0, 64, 32); }
static void m_offset_huge(gb *b) { uint64_t ne[1] = {8}; one_tensor(b, 1, ne, 0, UINT64_MAX - 31, 32); }
static void m_overlap(gb *b)
{
    uint64_t ne[1] = {16};
    hdr(b, 3, 2, 0);
    tensor_info(b, "a", 1, ne, 0, 0);
    tensor_info(b, "b", 1, ne, 0, 32);
    pad_to(b, 32, 128);
    (void)ne;
}
static void m_overlap2(gb *b)
{
    uint64_t ne[1] = {16}, ne2[1] = {8};
    hdr(b, 3, 2, 0);
    tensor_info(b, "a", 1, ne2, 0, 32);
    tensor_info(b, "b", 1, ne, 0, 0);
    pad_to(b, 32, 128);
}
static void m_dup_tensor(gb *b)
{
    uint64_t ne[1] = {8};
    hdr(b, 3, 2, 0);
    tensor_info(b, "a", 1, ne, 0, 0);
    tensor_info(b, "a", 1, ne, 0, 32);
    pad_to(b, 32, 64);
}
static void m_data_start(gb *b)
{
    uint64_t ne[1] = {0};
    hdr(b, 3, 1, 0);
    tensor_info(b, "empty", 1, ne, 0, 0);
}
/* A header one tensor short of its records (tensor_count 1 over two tensor infos): the name
 * length puts the short header's end on the alignment, so the second info and the padding
 * become "data" and tensor 'a.weight' would read them; the bytes left over are refused. */
static void m_count_low(gb *b)
{
    uint64_t ne[1] = {8};
    hdr(b, 3, 1, 0);
    tensor_info(b, "a.weight", 1, ne, 0, 0); /* header ends at 64 */
    tensor_info(b, "b.weight", 1, ne, 0, 32);
    pad_to(b, 32, 0);
    for (int i = 0; i < 64; i++)
        gb_u8(b, (uint8_t)(i + 1));
}
/* The same with one-byte names: the second info lands in the short header's padding. */
static void m_count_low_pad(gb *b)
{
    uint64_t ne[1] = {8};
    hdr(b, 3, 1, 0);
    tensor_info(b, "a", 1, ne, 0, 0); /* header ends at 57 */
    tensor_info(b, "b", 1, ne, 0, 32);
    pad_to(b, 32, 0);
    for (int i = 0; i < 64; i++)
        gb_u8(b, (uint8_t)(i + 1));
}
static void m_pad_nonzero(gb *b)
{
    uint64_t ne[1] = {8};
    hdr(b, 3, 1, 0);
    tensor_info(b, "w", 1, ne, 0, 0); /* header ends at 57 */
    gb_bytes(b, "\0\0\0\1\0\0\0", 7);
    pad_to(b, 32, 32);
}
static void m_gap(gb *b)
{
    uint64_t ne[1] = {8};
    hdr(b, 3, 2, 0);
    tensor_info(b, "a", 1, ne, 0, 0);
    tensor_info(b, "b", 1, ne, 0, 64);
    pad_to(b, 32, 96);
}
static void m_trailing(gb *b) { uint64_t ne[1] = {8}; one_tensor(b, 1, ne, 0, 0, 64); }
static void m_trailing_pad(gb *b) { uint64_t ne[1] = {2}; one_tensor(b, 1, ne, 0, 0, 32); }
static void m_no_tensors_trailing(gb *b) { hdr(b, 3, 0, 0); pad_to(b, 32, 32); }
static void ctl_name(gb *b, const char *name)
{
    hdr(b, 3, 1, 0);
    gb_str(b, name);
    gb_u32(b, 1);
    gb_u64(b, 8);
    gb_u32(b, 0);
    gb_u64(b, 0);
    pad_to(b, 32, 32);
}
static void m_ctl_name(gb *b) { ctl_name(b, "a\033[2Jb"); }
static void m_del_name(gb *b) { ctl_name(b, "ab\177"); }
static void m_dims_truncated(gb *b) { hdr(b, 3, 1, 0); gb_str(b, "w"); gb_u32(b, 4); gb_u64(b, 8); gb_u64(b, 1); }

static const mcase cases[] = {
    {"bad-magic", m_bad_magic, "not a GGUF file (bad magic)"},
    {"version-1", m_version1, "GGUF version 1 is not supported (only 2 and 3)"},
    {"version-4", m_version4, "GGUF version 4 is not supported (only 2 and 3)"},
    {"big-endian", m_big_endian, "big-endian GGUF is not supported"},
    {"truncated-version", m_truncated, "version runs past the end of the file (offset 4, 4 bytes, file is 6 bytes)"},
    {"kv-count-past-eof", m_kv_count, "kv_count 1099511627776 cannot fit in a file of 24 bytes"},
    {"tensor-count-past-eof", m_tensor_count, "tensor_count 1000000 cannot fit in a file of 24 bytes"},
    {"key-length-past-eof", m_key_len, "metadata key length 1000 runs past the end of the file (offset 24)"},
    {"string-length-past-eof", m_str_len,
     "string value length 4611686018427387904 runs past the end of the file (offset 37)"},
    {"bad-value-type", m_value_type, "key 'k': invalid value type 13 (offset 33)"},
    {"bad-array-type", m_array_type, "key 'k': invalid array element type 99 (offset 37)"},
    {"array-nesting-bomb", m_array_nest, "key 'bomb': arrays nested deeper than 4 (offset 88)"},
    {"array-count-past-eof", m_array_count, "key 'k': array of 1000 uint64 runs past the end of the file (offset 37)"},
    {"array-of-arrays-bomb", m_array_bomb,
     "key 'bomb': metadata arrays hold more than 268435456 elements (offset 40)"},
    {"array-elements-past-eof", m_array_elems,
     "key 'a': array of 268435452 uint8 runs past the end of the file (offset 37)"},
    {"bool-not-0-or-1", m_bool, "key 'flag': bool value 2 is not 0 or 1 (offset 40)"},
    {"duplicate-key", m_dup_key, "duplicate metadata key 'general.name'"},
    {"empty-key", m_empty_key, "empty metadata key (offset 24)"},
    {"nul-in-tensor-name", m_nul_name, "tensor name contains a NUL byte (offset 24)"},
    {"alignment-0", m_align0, "general.alignment 0 is not a power of two"},
    {"alignment-48", m_align48, "general.alignment 48 is not a power of two"},
    {"alignment-not-u32", m_align_type, "general.alignment has type uint64, expected uint32"},
    {"n-dims-5", m_ndims5, "tensor 'w': n_dims 5 is more than 4 (offset 33)"},
    {"ne-product-overflow", m_ne_overflow, "tensor 'w': element count overflows (dimension 1 is 1099511627776)"},
    {"ne-negative", m_ne_negative, "tensor 'w': element count overflows (dimension 1 is 9223372036854775808)"},
    {"bad-type-id", m_type_id, "tensor 'w': unknown ggml type id 99 (offset 45)"},
    {"removed-type-id", m_removed_type, "tensor 'w': unknown ggml type id 4 (offset 45)"},
    {"ne0-not-block-multiple", m_block_multiple, "tensor 'w': ne[0] = 100 is not a multiple of the Q4_K block size 256"},
    {"misaligned-offset", m_misaligned, "tensor 'w': offset 16 is not a multiple of the alignment 32"},
    {"offset-past-eof", m_outside, "tensor 'w': data [64, +32) lies outside the 32-byte data section"},
    {"offset-overflow", m_offset_huge,
     "tensor 'w': data [18446744073709551584, +32) lies outside the 32-byte data section"},
    {"overlapping-tensors", m_overlap, "tensor 'b' (data at 32) overlaps tensor 'a' (data [0, 64))"},
    {"overlapping-tensors-reordered", m_overlap2, "tensor 'a' (data at 32) overlaps tensor 'b' (data [0, 64))"},
    {"duplicate-tensor", m_dup_tensor, "duplicate tensor name 'a'"},
    {"data-section-past-eof", m_data_start, "data section starts at 64, past the end of the file (61 bytes)"},
    {"dims-past-eof", m_dims_truncated,
     "tensor dimensions runs past the end of the file (offset 53, 8 bytes, file is 53 bytes)"},
    {"tensor-count-one-low", m_count_low,
     "96 bytes at offset 96 follow the last tensor's data and padding and belong to no tensor (tensor_count is 1)"},
    {"tensor-count-one-low-padding", m_count_low_pad,
     "padding before the data section (offset 64) is not zero (offset 57)"},
    {"padding-not-zero", m_pad_nonzero, "padding before the data section (offset 64) is not zero (offset 60)"},
    {"gap-between-tensors", m_gap,
     "tensor 'b': data at 64, but the data before it ends at 32: bytes [128, 160) of the file belong to no tensor"},
    {"trailing-bytes", m_trailing,
     "32 bytes at offset 96 follow the last tensor's data and padding and belong to no tensor (tensor_count is 1)"},
    {"trailing-padding-not-zero", m_trailing_pad, "padding after the last tensor's data is not zero (offset 72)"},
    {"no-tensors-trailing-bytes", m_no_tensors_trailing, "32 bytes at offset 32 follow a header of no tensors"},
    {"control-byte-in-tensor-name", m_ctl_name, "tensor name contains the control byte 0x1b (offset 33)"},
    {"del-in-tensor-name", m_del_name, "tensor name contains the control byte 0x7f (offset 34)"},
};

static void test_malformed(void)
{
    const char *dir = getenv("TQ_GGUF_WRITE_MALFORMED");
    CHECK(sizeof cases / sizeof *cases >= 20);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gb b = {0};
        cases[i].build(&b);
        char name[256], want[1024];
        snprintf(name, sizeof name, "%s.gguf", cases[i].name);
        snprintf(want, sizeof want, "%s: %s", name, cases[i].msg);
        tq_gguf_file *f = NULL;
        memset(&err, 0, sizeof err);
        int rc = tq_gguf_parse(&f, name, b.p, b.len, b.len, &err);
        CHECKF(rc == -1 && f == NULL, "%s: parsed", name);
        if (strcmp(err.msg, want) != 0)
            printf("  %s:\n   got  '%s'\n   want '%s'\n", name, err.msg, want);
        CHECKF(strcmp(err.msg, want) == 0, "%s: message differs", name);
        CHECKF(err.code == TQ_EDATA, "%s: code %d", name, err.code);
        /* The same through a real file and tq_gguf_open (incremental header reads). */
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : t_tmpdir(), name);
        FILE *fp = fopen(path, "wb");
        CHECK(fp && fwrite(b.p, 1, b.len, fp) == b.len);
        if (fp)
            fclose(fp);
        rc = tq_gguf_open(&f, path, &err);
        snprintf(want, sizeof want, "%s: %s", path, cases[i].msg);
        CHECKF(rc == -1 && strcmp(err.msg, want) == 0, "open %s: '%s'", name, err.msg);
        if (!dir || !*dir)
            remove(path);
        /* Every prefix of the file fails cleanly too (no crash, no success). */
        for (size_t n = 0; n < b.len; n++) {
            rc = tq_gguf_parse(&f, name, b.p, n, n, &err);
            if (rc == 0)
                tq_gguf_close(f);
        }
        gb_free(&b);
    }
}

/* A header given only in part is reported as such by the buffer entry point. */
static void test_parse_needs_whole_header(void)
{
    gb b = {0};
    uint64_t ne[1] = {8};
    one_tensor(&b, 1, ne, 0, 0, 32);
    tq_gguf_file *f = NULL;
    CHECK(tq_gguf_parse(&f, "x.gguf", b.p, 20, b.len, &err) == -1);
    CHECK(strcmp(err.msg, "x.gguf: header runs past the 20 bytes given") == 0);
    CHECK_OK(tq_gguf_parse(&f, "x.gguf", b.p, b.len, b.len, &err));
    CHECK(f && f->n_tensors == 1 && f->data_start == 64 && f->tensors[0].nbytes == 32);
    tq_gguf_close(f);
    gb_free(&b);
}

/* Known types without a dequantizer (ggml has none either) are listed but refuse to be read,
 * naming both. */
static void test_unsupported_type(void)
{
    gw w;
    gw_init(&w);
    uint64_t ne[2] = {256, 2};
    unsigned char blocks[16 * 36] = {0};
    gw_tensor_add(&w, "blk.0.ffn_up.weight", 2, ne, 9 /* Q8_1 */, blocks, sizeof blocks);
    char path[4096];
    snprintf(path, sizeof path, "%s/iq.gguf", t_tmpdir());
    CHECK(gw_write(&w, path) == 0);
    tq_gguf_file *f = NULL;
    CHECK_OK(tq_gguf_open(&f, path, &err));
    if (f) {
        float out[4];
        CHECK(tq_gguf_read_f32(f, &f->tensors[0], 0, 4, out, &err) == -1);
        char want[8192];
        snprintf(want, sizeof want, "%s: tensor 'blk.0.ffn_up.weight': ggml type Q8_1 (9) cannot be dequantized "
                 "(ggml has no dequantization for it either)", path);
        CHECKF(strcmp(err.msg, want) == 0, "%s", err.msg);
        CHECK(err.code == TQ_EUNSUP);
        tq_gguf_close(f);
    }
    remove(path);
    gw_free(&w);
}

/* Version 2 files, custom alignment, all scalar metadata types. */
static void test_v2_alignment_and_types(void)
{
    gw w;
    gw_init(&w);
    w.version = 2;
    w.alignment = 64;
    gw_kv_u32(&w, "general.alignment", 64);
    gw_kv_i32(&w, "a.i32", -5);
    gw_kv_f32(&w, "a.f32", 0.5f);
    gw_kv_bool(&w, "a.bool", 0);
    const char *strs[] = {"x", "", "yz"};
    gw_kv_str_array(&w, "a.strs", strs, 3);
    float v[40];
    for (int i = 0; i < 40; i++)
        v[i] = (float)i - 3.5f;
    uint64_t ne1[1] = {8}, ne2[2] = {4, 8};
    gw_tensor_add(&w, "t1", 1, ne1, 0, v, 32);
    gw_tensor_add(&w, "t2", 2, ne2, 0, v + 8, 128);
    gb b = {0};
    gw_build(&w, &b);
    tq_gguf_file *f = NULL;
    CHECK_OK(tq_gguf_parse(&f, "v2.gguf", b.p, b.len, b.len, &err));
    if (f) {
        CHECK(f->version == 2 && f->alignment == 64 && f->data_start % 64 == 0);
        CHECK(f->tensors[1].offset == 64);
        uint64_t u;
        double d;
        CHECK(tq_gguf_get_u64(f, "a.i32", &u) == -1); /* negative */
        CHECK(tq_gguf_get_f64(f, "a.i32", &d) == 0 && d == -5);
        CHECK(tq_gguf_get_f64(f, "a.f32", &d) == 0 && d == 0.5);
        const tq_gguf_kv *kv = tq_gguf_find_kv(f, "a.strs");
        CHECK(kv && kv->arr_n == 3 && kv->arr_type == TQ_GGUF_STRING);
        tq_gguf_close(f);
    }
    gb_free(&b);
    gw_free(&w);
}

/* What ggml's writer makes (gguf.cpp, gguf_write_out: zero padding after the header and after
 * every tensor, also with no tensors) is read, and so are the forms ggml's readers also take:
 * the last tensor's padding left off (llama.cpp's loader needs only each tensor's bytes),
 * tensors listed out of offset order, a zero-byte tensor, a header of no tensors without
 * padding. */
static void test_layout_accepted(void)
{
    uint64_t ne[1] = {8}, ne0[1] = {0}, ne2[1] = {2};
    for (int k = 0; k < 6; k++) {
        gb b = {0};
        switch (k) {
        case 0: /* ggml's layout: 'b' (8 bytes) padded to 32 at the end */
            hdr(&b, 3, 2, 0);
            tensor_info(&b, "a", 1, ne, 0, 0);
            tensor_info(&b, "b", 1, ne2, 0, 32);
            pad_to(&b, 32, 0);
            for (int i = 0; i < 40; i++)
                gb_u8(&b, (uint8_t)(i + 1));
            for (int i = 0; i < 24; i++)
                gb_u8(&b, 0);
            break;
        case 1: /* the same without the final padding */
            hdr(&b, 3, 2, 0);
            tensor_info(&b, "a", 1, ne, 0, 0);
            tensor_info(&b, "b", 1, ne2, 0, 32);
            pad_to(&b, 32, 40);
            break;
        case 2: /* listed out of offset order */
            hdr(&b, 3, 2, 0);
            tensor_info(&b, "b", 1, ne2, 0, 32);
            tensor_info(&b, "a", 1, ne, 0, 0);
            pad_to(&b, 32, 40);
            break;
        case 3: /* a zero-byte tensor at the offset of the one after it */
            hdr(&b, 3, 2, 0);
            tensor_info(&b, "z", 1, ne0, 0, 32);
            tensor_info(&b, "a", 1, ne, 0, 0);
            pad_to(&b, 32, 32);
            break;
        case 4: /* no tensors, header padded (ggml) */
            hdr(&b, 3, 0, 0);
            pad_to(&b, 32, 0);
            break;
        case 5: /* no tensors, no padding */
            hdr(&b, 3, 0, 0);
            break;
        }
        tq_gguf_file *f = NULL;
        int rc = tq_gguf_parse(&f, "ok.gguf", b.p, b.len, b.len, &err);
        CHECKF(rc == 0, "layout %d refused: %s", k, err.msg);
        if (f && k < 3)
            CHECK(f->n_tensors == 2 && tq_gguf_find_tensor(f, "b")->offset == 32);
        tq_gguf_close(f);
        gb_free(&b);
    }
}

int main(void)
{
    RUN(test_vectors_bit_exact);
    RUN(test_iq_vectors_bit_exact);
    RUN(test_vectors_metadata);
    RUN(test_malformed);
    RUN(test_layout_accepted);
    RUN(test_parse_needs_whole_header);
    RUN(test_unsupported_type);
    RUN(test_v2_alignment_and_types);
    TEST_MAIN_END();
}
