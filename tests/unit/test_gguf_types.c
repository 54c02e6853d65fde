/* Every ggml type tq reads, against the tests' own per-element reference (ggml_ref.c, written
 * from the published layouts): random and all-ones blocks written as GGUF by the tests' writer,
 * read back through tq_gguf_read_f32 whole and in unaligned pieces, bit for bit. The i-quant
 * lattices of formats/ are checked entry by entry against ggml's compact lists and against a
 * SHA-256 of ggml's published tables; blocks ggml itself refuses are refused naming the tensor. */
#include "formats/formats.h"
#include "formats/gguf_internal.h"
#include "check.h"
#include "ggml_grids.h"
#include "gguf_writer.h"

static tq_err err;

/* Every type tq dequantizes (by formats/'s names, held to ggml.h's numbers by
 * test_ids_are_ggml_h; the reference, ggml_ref.c, keeps ggml.h's numbers itself so that it
 * does not lean on the enum it checks). */
static const uint32_t all_types[] = {
    TQ_GGML_F32,     TQ_GGML_F16,    TQ_GGML_BF16,    TQ_GGML_Q4_0,  TQ_GGML_Q4_1,   TQ_GGML_Q5_0,   TQ_GGML_Q5_1,
    TQ_GGML_Q8_0,    TQ_GGML_Q2_K,   TQ_GGML_Q3_K,    TQ_GGML_Q4_K,  TQ_GGML_Q5_K,   TQ_GGML_Q6_K,   TQ_GGML_Q8_K,
    TQ_GGML_IQ2_XXS, TQ_GGML_IQ2_XS, TQ_GGML_IQ3_XXS, TQ_GGML_IQ1_S, TQ_GGML_IQ4_NL, TQ_GGML_IQ3_S,  TQ_GGML_IQ2_S,
    TQ_GGML_IQ4_XS,  TQ_GGML_IQ1_M,  TQ_GGML_TQ1_0,   TQ_GGML_TQ2_0, TQ_GGML_MXFP4,
};
#define N_ALL (sizeof all_types / sizeof *all_types)

static void hex(const unsigned char *d, char *out)
{
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

/* One lattice: formats' expanded table against the compact list (every entry, every element)
 * and against the SHA-256 of ggml-common.h's table of the same name (little-endian bytes).
 * Returns the number of differences (a digest mismatch counts one). */
static size_t lattice_diffs(const void *table, int wide, unsigned n, const uint16_t *compact, int bits,
                            int (*level)(unsigned), const char *sha)
{
    size_t bad = 0;
    for (unsigned k = 0; k < n; k++)
        for (int j = 0; j < (wide ? 8 : 4); j++) {
            uint64_t entry = wide ? ((const uint64_t *)table)[k] : ((const uint32_t *)table)[k];
            int got = (int)(int8_t)(uint8_t)(entry >> (8 * j));
            int want = gg_grid_value(compact, bits, level, k, j);
            if (!wide || level != gg_level_iq1)
                got = (uint8_t)(entry >> (8 * j));
            bad += got != want;
        }
    /* the digest of the table as the published header defines it */
    unsigned char le[2048 * 8], d[32];
    size_t w = wide ? 8 : 4;
    for (unsigned k = 0; k < n; k++) {
        uint64_t entry = wide ? ((const uint64_t *)table)[k] : ((const uint32_t *)table)[k];
        for (size_t b = 0; b < w; b++)
            le[k * w + b] = (unsigned char)(entry >> (8 * b));
    }
    tq_sha256_buf(le, n * w, d);
    char h[65];
    hex(d, h);
    return bad + (strcmp(h, sha) != 0);
}

static void check_lattice(const char *name, const void *table, int wide, unsigned n, const uint16_t *compact,
                          int bits, int (*level)(unsigned), const char *sha)
{
    size_t bad = lattice_diffs(table, wide, n, compact, bits, level, sha);
    CHECKF(bad == 0, "%s: %zu grid values (or the digest) differ from ggml's published forms", name, bad);
}

static void test_lattices(void)
{
    check_lattice("iq2xxs_grid", tq_ggml_iq2xxs_grid, 1, 256, gg_compact_2bit_256, 2, gg_level_iq2,
                  "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54");
    check_lattice("iq2xs_grid", tq_ggml_iq2xs_grid, 1, 512, gg_compact_2bit_512, 2, gg_level_iq2,
                  "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de");
    check_lattice("iq2s_grid", tq_ggml_iq2s_grid, 1, 1024, gg_compact_2bit_1024, 2, gg_level_iq2,
                  "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88");
    check_lattice("iq1s_grid", tq_ggml_iq1s_grid, 1, 2048, gg_compact_1bit_2048, 2, gg_level_iq1,
                  "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a");
    check_lattice("iq3xxs_grid", tq_ggml_iq3xxs_grid, 0, 256, gg_compact_3bit_256, 3, gg_level_iq3xxs,
                  "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d");
    check_lattice("iq3s_grid", tq_ggml_iq3s_grid, 0, 512, gg_compact_3bit_512, 3, gg_level_iq3s,
                  "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f");
    /* The sign bytes (an even count of minus signs), which both sides derive by rule, against
     * ggml's published ksigns_iq2xs table. */
    unsigned char s[128], d[32];
    for (int i = 0; i < 128; i++)
        s[i] = (unsigned char)(i | (__builtin_popcount((unsigned)i) & 1) << 7);
    tq_sha256_buf(s, 128, d);
    char h[65];
    hex(d, h);
    CHECK(strcmp(h, "a76742a603f8beca5212ecce0f1f02f11a4887fd2f7c8b15aca0ea3eb3380c31") == 0);
    /* A flipped entry is noticed twice: by the expansion and by the digest. */
    uint64_t copy[256];
    memcpy(copy, tq_ggml_iq2xxs_grid, sizeof copy);
    copy[77] ^= 1ull << 40;
    CHECK(lattice_diffs(copy, 1, 256, gg_compact_2bit_256, 2, gg_level_iq2,
                        "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54") == 2);
}

/* The type ids against ggml's own numbering: enum ggml_type in ggml/include/ggml.h (llama.cpp
 * commit 004eaba8), restated here by hand as id, name, with the removed ids (4, 5 Q4_2/Q4_3;
 * 31-33 Q4_0_4_4/Q4_0_4_8/Q4_0_8_8; 36-38 IQ4_NL_4_4/_4_8/_8_8, "support has been removed")
 * absent and GGML_TYPE_COUNT = 40. Correctness: formats/'s names (the row of each id) and its
 * enum's values must both agree with that list. */
static void test_ids_are_ggml_h(void)
{
    static const char *const ggml_h[40] = {
        "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K",
        "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",
        "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0",
        NULL, NULL, NULL, "MXFP4",
    };
    for (uint32_t id = 0; id < 40; id++) {
        const char *got = tq_ggml_type_name(id);
        CHECKF(ggml_h[id] ? got && !strcmp(got, ggml_h[id]) : !got, "id %u: %s, ggml.h %s", id, got ? got : "(none)",
               ggml_h[id] ? ggml_h[id] : "(removed)");
    }
    CHECK(TQ_GGML_COUNT == 40 && !tq_ggml_type_name(40) && !tq_ggml_type_name(UINT32_MAX));
#define ID(NAME) {TQ_GGML_##NAME, #NAME}
    static const struct { uint32_t id; const char *name; } named[] = {
        ID(F32), ID(F16), ID(Q4_0), ID(Q4_1), ID(Q5_0), ID(Q5_1), ID(Q8_0), ID(Q8_1), ID(Q2_K), ID(Q3_K),
        ID(Q4_K), ID(Q5_K), ID(Q6_K), ID(Q8_K), ID(IQ2_XXS), ID(IQ2_XS), ID(IQ3_XXS), ID(IQ1_S), ID(IQ4_NL),
        ID(IQ3_S), ID(IQ2_S), ID(IQ4_XS), ID(I8), ID(I16), ID(I32), ID(I64), ID(F64), ID(IQ1_M), ID(BF16),
        ID(TQ1_0), ID(TQ2_0), ID(MXFP4),
    };
#undef ID
    size_t n_named = sizeof named / sizeof *named, n_h = 0;
    for (size_t i = 0; i < n_named; i++)
        CHECKF(named[i].id < 40 && ggml_h[named[i].id] && !strcmp(ggml_h[named[i].id], named[i].name),
               "TQ_GGML_%s = %u, ggml.h has %s there", named[i].name, named[i].id,
               named[i].id < 40 && ggml_h[named[i].id] ? ggml_h[named[i].id] : "nothing");
    for (int id = 0; id < 40; id++)
        n_h += ggml_h[id] != NULL;
    CHECK(n_named == n_h); /* every type ggml.h names has its enum constant */
    /* one-element types are presented in their own dtype, block types are not */
    tq_dtype dt;
    CHECK(tq_ggml_type_dtype(TQ_GGML_BF16, &dt) == 1 && dt == TQ_DT_BF16);
    CHECK(tq_ggml_type_dtype(TQ_GGML_I16, &dt) == 1 && dt == TQ_DT_I16);
    CHECK(tq_ggml_type_dtype(TQ_GGML_Q4_K, &dt) == 0 && tq_ggml_type_dtype(31, &dt) == 0);
}

/* Geometry agrees between formats/ and the reference for every type. */
static void test_geometry(void)
{
    for (size_t i = 0; i < N_ALL; i++) {
        uint32_t a, b, c, d;
        CHECK(gg_type_geometry(all_types[i], &a, &b) == 0);
        CHECKF(tq_ggml_type_block(all_types[i], &c, &d) == 0 && a == c && b == d, "%s", gg_type_name(all_types[i]));
        CHECKF(tq_ggml_type_can_dequant(all_types[i]), "%s", gg_type_name(all_types[i]));
        CHECK(strcmp(tq_ggml_type_name(all_types[i]), gg_type_name(all_types[i])) == 0);
    }
    CHECK(!tq_ggml_type_can_dequant(TQ_GGML_Q8_1)); /* ggml has no dequantization for it */
}

enum { ROWS = 3, BLOCKS_PER_ROW = 4 };

/* A GGUF holding one (ROWS x BLOCKS_PER_ROW blocks) tensor per type: block 0 of row 0 has every
 * bit set (highest grid indices), the rest random. Returns the raw blocks per type. */
static unsigned char *make_blocks(uint32_t type, uint64_t seed, uint64_t *nblocks)
{
    uint32_t be, bb;
    gg_type_geometry(type, &be, &bb);
    uint64_t per_row = be == 1 ? 256 : BLOCKS_PER_ROW;
    *nblocks = per_row * ROWS;
    unsigned char *p = malloc(*nblocks * bb);
    uint64_t rng = seed * 7919 + type;
    for (uint64_t k = 0; k < *nblocks; k++)
        gg_random_block(type, &rng, k == 0 && be > 1, p + k * bb);
    return p;
}

static void test_every_type_against_reference(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/types.gguf", t_tmpdir());
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "test");
    unsigned char *raw[N_ALL];
    uint64_t nblk[N_ALL];
    for (size_t i = 0; i < N_ALL; i++) {
        uint32_t be, bb;
        gg_type_geometry(all_types[i], &be, &bb);
        raw[i] = make_blocks(all_types[i], 1, &nblk[i]);
        uint64_t ne[2] = {nblk[i] / ROWS * be, ROWS};
        char name[64];
        snprintf(name, sizeof name, "t.%s", gg_type_name(all_types[i]));
        gw_tensor_add(&w, name, 2, ne, all_types[i], raw[i], nblk[i] * bb);
    }
    CHECK(gw_write(&w, path) == 0);
    gw_free(&w);
    tq_gguf_file *f = NULL;
    CHECK_OK(tq_gguf_open(&f, path, &err));
    for (size_t i = 0; f && i < N_ALL; i++) {
        uint32_t type = all_types[i], be, bb;
        gg_type_geometry(type, &be, &bb);
        char name[64];
        snprintf(name, sizeof name, "t.%s", gg_type_name(type));
        const tq_gguf_tensor *t = tq_gguf_find_tensor(f, name);
        CHECKF(t && t->type == type && t->nelem == nblk[i] * be, "%s", name);
        if (!t)
            continue;
        float *want = malloc(t->nelem * 4), *got = malloc(t->nelem * 4);
        for (uint64_t k = 0; k < t->nelem; k++)
            want[k] = gg_ref_element(type, raw[i] + k / be * bb, (uint32_t)(k % be));
        CHECK_OK(tq_gguf_read_f32(f, t, 0, t->nelem, got, &err));
        size_t bad = 0, first = 0, finite = 0;
        for (uint64_t k = 0; k < t->nelem; k++) {
            finite += isfinite(want[k]) != 0;
            if (memcmp(&got[k], &want[k], 4) && !bad++)
                first = k;
        }
        CHECKF(bad == 0, "%s: %zu of %llu values differ from the reference, first at %zu (%a vs %a)", name, bad,
               (unsigned long long)t->nelem, first, bad ? got[first] : 0.0, bad ? want[first] : 0.0);
        CHECKF(finite == t->nelem, "%s: the reference made %zu non-finite values", name, t->nelem - finite);
        /* not all zero: the comparison means something */
        size_t nz = 0;
        for (uint64_t k = 0; k < t->nelem; k++)
            nz += want[k] != 0;
        CHECKF(nz > t->nelem / 4, "%s: only %zu non-zero values", name, nz);
        /* unaligned pieces crossing block and row boundaries */
        uint64_t starts[] = {1, be - 1, be + 3, t->nelem / 2 + 5};
        for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
            uint64_t n = t->nelem - starts[s] < 77 ? t->nelem - starts[s] : 77;
            CHECK_OK(tq_gguf_read_f32(f, t, starts[s], n, got, &err));
            CHECKF(memcmp(got, want + starts[s], n * 4) == 0, "%s: piece at %llu", name, (unsigned long long)starts[s]);
        }
        free(want);
        free(got);
    }
    tq_gguf_close(f);
    for (size_t i = 0; i < N_ALL; i++)
        free(raw[i]);
    remove(path);
}

/* The reference itself is not vacuous: a few values known by hand. */
static void test_reference_known_values(void)
{
    unsigned char b[292] = {0};
    /* Q4_0, d = 1.0 (0x3c00), byte 0 = 0x9f: element 0 = 15-8 = 7, element 16 = 9-8 = 1 */
    b[1] = 0x3c;
    b[2] = 0x9f;
    CHECK(gg_ref_element(2, b, 0) == 7.0f && gg_ref_element(2, b, 16) == 1.0f && gg_ref_element(2, b, 1) == -8.0f);
    /* IQ4_NL, d = 0.5: level 15 = 113 */
    memset(b, 0, sizeof b);
    b[1] = 0x38;
    b[2] = 0x0f;
    CHECK(gg_ref_element(20, b, 0) == 56.5f && gg_ref_element(20, b, 16) == -63.5f);
    /* MXFP4, e = 127 (scale 1): nibble 7 = +6, nibble 0xf = -6, nibble 1 = 0.5 */
    memset(b, 0, sizeof b);
    b[0] = 127;
    b[1] = 0xf7;
    b[2] = 0x01;
    CHECK(gg_ref_element(39, b, 0) == 6.0f && gg_ref_element(39, b, 16) == -6.0f && gg_ref_element(39, b, 1) == 0.5f);
    /* TQ2_0, d = 2: codes 0,1,2,3 -> -2, 0, 2, 4 */
    memset(b, 0, sizeof b);
    b[65] = 0x40;
    b[0] = 0xe4; /* codes 0,1,2,3 at shifts 0,2,4,6 -> elements 0,32,64,96 */
    CHECK(gg_ref_element(35, b, 0) == -2.0f && gg_ref_element(35, b, 32) == 0.0f &&
          gg_ref_element(35, b, 64) == 2.0f && gg_ref_element(35, b, 96) == 4.0f);
    /* TQ1_0: 5 trits 2,1,0,2,2 -> v = 2*81+27+0+6+2 = 197 -> byte ceil(197*256/243) = 208 */
    memset(b, 0, sizeof b);
    b[53] = 0x3c;
    b[0] = 208;
    CHECK(gg_ref_element(34, b, 0) == 1.0f && gg_ref_element(34, b, 32) == 0.0f &&
          gg_ref_element(34, b, 64) == -1.0f && gg_ref_element(34, b, 96) == 1.0f && gg_ref_element(34, b, 128) == 1.0f);
}

/* ------------------------------------------------------------- malformed */
static char *one_tensor_file(uint32_t type, const unsigned char *blocks, uint64_t nblocks, uint64_t cut)
{
    static char path[4096];
    uint32_t be, bb;
    gg_type_geometry(type, &be, &bb);
    snprintf(path, sizeof path, "%s/bad-%s.gguf", t_tmpdir(), gg_type_name(type));
    gw w;
    gw_init(&w);
    uint64_t ne[2] = {be * nblocks, 1};
    gw_tensor_add(&w, "blk.0.ffn_up.weight", 2, ne, type, blocks, nblocks * bb);
    gb b = {0};
    gw_build(&w, &b);
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(b.p, 1, b.len - cut, fp) == b.len - cut);
    if (fp)
        fclose(fp);
    gb_free(&b);
    gw_free(&w);
    return path;
}

static void test_malformed_per_type(void)
{
    size_t n_scale = 0;
    for (size_t i = 0; i < N_ALL; i++) {
        uint32_t type = all_types[i], be, bb, off, width;
        gg_type_geometry(type, &be, &bb);
        if (be == 1)
            continue;
        uint64_t rng = 99 + type;
        unsigned char blocks[3 * 292];
        for (int k = 0; k < 3; k++)
            gg_random_block(type, &rng, 0, blocks + k * bb);
        /* (1) the data ends inside the last block */
        char *path = one_tensor_file(type, blocks, 3, 1 + bb / 2);
        tq_gguf_file *f = NULL;
        CHECKF(tq_gguf_open(&f, path, &err) == -1 && strstr(err.msg, "tensor 'blk.0.ffn_up.weight'") &&
                   strstr(err.msg, "lies outside"), "%s truncated: %s", gg_type_name(type), err.msg);
        tq_gguf_close(f);
        /* (2) an impossible scale in block 1 (ggml_validate_row_data refuses it too) */
        unsigned char bad[3 * 292];
        memcpy(bad, blocks, sizeof bad);
        const char *want = NULL;
        if (gg_scale_field(type, &off, &width) == 0) {
            unsigned char *p = bad + bb + off;
            if (width == 2)
                p[0] = 0x01, p[1] = 0x7e, want = "block 1 (file offset "; /* f16 NaN */
            else if (width == 4)
                p[0] = p[1] = 0, p[2] = 0x80, p[3] = 0xff, want = "scale is infinite (f32 0xff800000)";
            else
                p[0] = 0xff, want = "E8M0 scale 0xff is NaN";
        } else if (type == TQ_GGML_IQ1_M) {
            for (int k = 0; k < 4; k++)
                bad[bb + 48 + 2 * k + 1] |= 0xf0; /* super-block scale 0xffff: NaN */
            want = "scale is NaN (f16 0xffff)";
        }
        CHECKF(want != NULL, "%s: no impossible scale to test", gg_type_name(type));
        path = one_tensor_file(type, bad, 3, 0);
        CHECK_OK(tq_gguf_open(&f, path, &err));
        if (f) {
            float *out = malloc(3 * be * 4);
            int rc = tq_gguf_read_f32(f, &f->tensors[0], 0, 3 * be, out, &err);
            CHECKF(rc == -1 && err.code == TQ_EDATA && strstr(err.msg, "tensor 'blk.0.ffn_up.weight': block 1 (file offset ") &&
                       strstr(err.msg, want), "%s bad scale: '%s'", gg_type_name(type), err.msg);
            n_scale += rc == -1;
            /* block 0 alone is fine */
            CHECKF(tq_gguf_read_f32(f, &f->tensors[0], 0, be, out, &err) == 0, "%s: %s", gg_type_name(type), err.msg);
            free(out);
            tq_gguf_close(f);
        }
        remove(path);
    }
    CHECK(n_scale == 23);
}

/* MXFP4 at the edges, read from a GGUF as ggml's dequantize_row_mxfp4 writes them: code 8 is
 * +0, e = 0 gives the subnormal 2^-128 steps, e = 254 under level 12 overflows to inf (ggml
 * does not refuse it; tq-convert refuses it later as a non-finite weight), and e = 254 under
 * level 3 (E2M1 1.5) is the largest finite value, 1.5 * 2^127. */
static void test_mxfp4_edges(void)
{
    unsigned char b[3 * 17] = {0};
    b[0] = 127, b[1] = 0x88;                 /* elements 0 and 16: code 8 */
    b[17] = 0, b[18] = 0x17;                 /* 12 * 2^-128 and 2^-128 */
    b[34] = 254, b[35] = 0x07, b[36] = 0x0f; /* inf, then -inf */
    b[37] = 0x03;                            /* 3 * 2^126 = 1.5 * 2^127 */
    char *path = one_tensor_file(39, b, 3, 0);
    tq_gguf_file *f = NULL;
    CHECK_OK(tq_gguf_open(&f, path, &err));
    float o[96];
    if (f && tq_gguf_read_f32(f, &f->tensors[0], 0, 96, o, &err) == 0) {
        CHECK(o[0] == 0.0f && !signbit(o[0]) && o[16] == 0.0f && !signbit(o[16]));
        CHECK(o[32] == ldexpf(3.0f, -126) && o[48] == ldexpf(1.0f, -128));
        CHECK(o[64] == INFINITY && o[65] == -INFINITY && o[66] == ldexpf(1.5f, 127) && o[67] == 0.0f);
    } else
        CHECKF(0, "read: %s", err.msg);
    tq_gguf_close(f);
    remove(path);
}

/* The grid index fields are exactly as wide as the lattices are long, so no index can fall
 * outside: all-ones blocks (test_every_type_against_reference) reach each lattice's last
 * entry, and every index of each lattice is reached here through one IQ block per entry. */
static void test_every_grid_index_decodes(void)
{
    static const struct { uint32_t type; unsigned n; } lat[] = {{16, 256}, {17, 512}, {22, 1024}, {18, 256}, {21, 512},
                                                              {19, 2048}, {29, 2048}};
    for (size_t i = 0; i < sizeof lat / sizeof *lat; i++) {
        uint32_t be, bb, type = lat[i].type;
        gg_type_geometry(type, &be, &bb);
        size_t bad = 0;
        unsigned char b[110];
        float y[256];
        uint64_t rng = 5;
        for (unsigned k = 0; k < lat[i].n; k++) {
            gg_random_block(type, &rng, 0, b);
            /* put index k in the first group of the block */
            switch (type) {
            case 16: b[2] = (unsigned char)k; break;
            case 17: b[2] = (unsigned char)k, b[3] = (unsigned char)((b[3] & 0xfe) | k >> 8); break;
            case 22: b[2] = (unsigned char)k, b[66] = (unsigned char)((b[66] & 0xfc) | k >> 8); break;
            case 18: b[2] = (unsigned char)k; break;
            case 21: b[2] = (unsigned char)k, b[66] = (unsigned char)((b[66] & 0xfe) | k >> 8); break;
            case 19: b[2] = (unsigned char)k, b[34] = (unsigned char)((b[34] & 0xf8) | k >> 8); break;
            case 29: b[0] = (unsigned char)k, b[32] = (unsigned char)((b[32] & 0xf8) | k >> 8); break;
            }
            tq_ggml_dequant(type, b, y, 1);
            for (uint32_t e = 0; e < 8; e++)
                bad += memcmp(&y[e], &(float){gg_ref_element(type, b, e)}, 4) != 0;
        }
        CHECKF(bad == 0, "%s: %zu values differ", gg_type_name(type), bad);
    }
}

int main(void)
{
    RUN(test_lattices);
    RUN(test_ids_are_ggml_h);
    RUN(test_geometry);
    RUN(test_reference_known_values);
    RUN(test_every_type_against_reference);
    RUN(test_every_grid_index_decodes);
    RUN(test_malformed_per_type);
    RUN(test_mxfp4_edges);
    TEST_MAIN_END();
}
