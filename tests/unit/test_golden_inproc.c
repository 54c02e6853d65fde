/* make verify's golden bytes made by the library in one thread, no tools: written for make check-arm64 (issue 37) when its threads would not start under qemu-user; it now runs make verify with the tools too. */
/*
 * The library (tq_mkmodel, tq_convert, tq_split: no CLI, no signal thread, threads = 1) makes
 * the first models of scripts/verify with the same arguments and relative names, and the
 * SHA-256 of every file is compared with its line of testdata/golden/outputs.sha256, which
 * make verify wrote from the x86-64 tools. Natively this is a consistency check (library ==
 * CLI); under qemu-user on arm64 (scripts/check-arm64) it shows the arm64 build makes the
 * x86-64 bytes. The provenance each tool records is built here as the tool records it
 * (cmd/opts.c tq_cli_command_line: the program, the options given, the input operand).
 */
#include "layout/split/split.h"
#include "quant/convert/convert.h"
#include "testdata/mkmodel/mkmodel.h"
#include "tests/unit/check.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

static char *golden;      /* outputs.sha256 */
static size_t golden_len;
static int n_seen;        /* files under the output being compared */

static const char *root(void)
{
    const char *r = getenv("TQ_ROOT");
    return r && *r ? r : ".";
}

static int count_file(const char *p, const struct stat *st, int type, struct FTW *f)
{
    (void)p;
    (void)st;
    (void)f;
    n_seen += type == FTW_F;
    return 0;
}

/* Every golden line under OUT/ against the file here; and no file here the goldens lack. */
static void compare_out(const char *out)
{
    size_t pl = strlen(out);
    int n_gold = 0;
    for (const char *l = golden; l && l < golden + golden_len;) {
        const char *nl = memchr(l, '\n', (size_t)(golden + golden_len - l));
        size_t len = nl ? (size_t)(nl - l) : (size_t)(golden + golden_len - l);
        /* "HEX64  PATH" */
        if (len > 66 + pl && !memcmp(l + 66, out, pl) && l[66 + pl] == '/') {
            char path[512], want[65];
            snprintf(path, sizeof path, "%.*s", (int)(len - 66), l + 66);
            snprintf(want, sizeof want, "%.64s", l);
            unsigned char d[32];
            char got[65];
            tq_err err;
            if (tq_sha256_file(path, d, NULL, &err) != 0) {
                CHECKF(0, "%s: %s", path, err.msg);
            } else {
                for (int i = 0; i < 32; i++)
                    snprintf(got + 2 * i, 3, "%02x", d[i]);
                CHECKF(!strcmp(got, want), "%s: sha256 %s, golden %s", path, got, want);
            }
            n_gold++;
        }
        l = nl ? nl + 1 : NULL;
    }
    n_seen = 0;
    CHECK(nftw(out, count_file, 16, FTW_PHYS) == 0);
    CHECKF(n_gold > 0 && n_seen == n_gold, "%s: %d files, %d in testdata/golden/outputs.sha256", out, n_seen, n_gold);
}

static void mk(const char *dir, const char *arch, uint64_t seed, const char *const *cmd, size_t n_cmd,
               void (*tweak)(tq_mk_opts *))
{
    tq_err err;
    tq_mk_arch a;
    tq_mk_opts o;
    CHECK_OK(tq_mk_arch_from_name(arch, &a));
    CHECK_OK(tq_mk_preset(&o, a, "tiny", &err));
    o.seed = seed;
    o.threads = 1;
    o.quiet = 1;
    if (tweak)
        tweak(&o);
    tq_provenance pv = {"tq-mkmodel", cmd, n_cmd};
    o.provenance = &pv;
    CHECK_OK(tq_mkmodel(dir, &o, &err));
    compare_out(dir);
}

static void llama_shards(tq_mk_opts *o)
{
    tq_err err;
    CHECK_OK(tq_parse_size("400k", &o->shard_size));
}
static void tie(tq_mk_opts *o) { o->tie_embeddings = 1; }
static void mlx_f16(tq_mk_opts *o)
{
    o->naming_mlx = 1;
    o->shared_expert = 1;
    o->dtype = TQ_DT_F16;
}

static void convert(const char *in, const char *out, int bits, size_t group, const char *const *cmd, size_t n)
{
    tq_err err;
    tq_convert_opts o;
    tq_convert_opts_default(&o);
    o.bits = bits;
    o.group_size = group;
    o.threads = 1;
    o.quiet = 1;
    tq_provenance pv = {"tq-convert", cmd, n};
    o.provenance = &pv;
    tq_convert_report r;
    memset(&r, 0, sizeof r);
    CHECK_OK(tq_convert(in, out, &o, &r, &err));
    tq_convert_report_free(&r);
    compare_out(out);
}

static void split(const char *in, const char *out, uint64_t align, const char *const *cmd, size_t n)
{
    tq_err err;
    tq_split_opts o = {0};
    o.align = align;
    o.threads = 1;
    o.quiet = 1;
    tq_provenance pv = {"tq-split", cmd, n};
    o.provenance = &pv;
    tq_split_result r;
    memset(&r, 0, sizeof r);
    CHECK_OK(tq_split(in, out, &o, &r, &err));
    compare_out(out);
}

#define N(a) (sizeof(a) / sizeof *(a))

/* scripts/verify, "synthetic models" */
static void test_mkmodel_golden(void)
{
    static const char *c1[] = {"tq-mkmodel", "--arch", "qwen3_moe", "--size", "tiny", "--seed", "1"};
    static const char *c2[] = {"tq-mkmodel", "--arch", "qwen3_moe", "--size", "tiny", "--seed", "2",
                               "--naming", "mlx", "--shared-expert", "--dtype", "f16"};
    static const char *c3[] = {"tq-mkmodel", "--arch", "llama", "--size", "tiny", "--seed", "3", "--shard-size", "400k"};
    static const char *c4[] = {"tq-mkmodel", "--arch", "qwen3", "--size", "tiny", "--seed", "4", "--tie-embeddings"};
    mk("mk-moe", "qwen3_moe", 1, c1, N(c1), NULL);
    mk("mk-moe-mlx", "qwen3_moe", 2, c2, N(c2), mlx_f16);
    mk("mk-llama", "llama", 3, c3, N(c3), llama_shards);
    mk("mk-qwen3", "qwen3", 4, c4, N(c4), tie);
}

/* scripts/verify, "quantization" (the first two) */
static void test_convert_golden(void)
{
    static const char *c1[] = {"tq-convert", "--bits", "3", "--group-size", "64", "mk-moe"};
    static const char *c2[] = {"tq-convert", "--bits", "2", "--group-size", "128", "mk-llama"};
    convert("mk-moe", "tq-moe-b3g64", 3, 64, c1, N(c1));
    convert("mk-llama", "tq-llama-b2g128", 2, 128, c2, N(c2));
}

/* scripts/verify, "streaming layouts" */
static void test_split_golden(void)
{
    static const char *c1[] = {"tq-split", "mk-moe"};
    static const char *c2[] = {"tq-split", "--align", "4096", "mk-moe-mlx"};
    static const char *c3[] = {"tq-split", "mk-llama"};
    static const char *c4[] = {"tq-split", "tq-moe-b3g64"};
    split("mk-moe", "split-moe", 0, c1, N(c1));
    split("mk-moe-mlx", "split-moe-mlx-a4096", 4096, c2, N(c2));
    split("mk-llama", "split-llama", 0, c3, N(c3));
    split("tq-moe-b3g64", "split-tq", 0, c4, N(c4));
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char gpath[4096], dir[4096];
    snprintf(gpath, sizeof gpath, "%s/testdata/golden/outputs.sha256", root());
    tq_err err;
    if (tq_read_small_file(gpath, 1 << 24, &golden, &golden_len, &err) != 0) {
        printf("FAIL golden: %s\n", err.msg);
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/golden-inproc", t_tmpdir());
    mkdir(dir, 0777);
    if (chdir(dir) != 0) { /* relative names, as scripts/verify: split.json records them */
        printf("FAIL chdir %s\n", dir);
        return 1;
    }
    RUN(test_mkmodel_golden);
    RUN(test_convert_golden);
    RUN(test_split_golden);
    free(golden);
    TEST_MAIN_END();
}
