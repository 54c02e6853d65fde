/* Generate -> read -> write: a generated model read through tq_model and written back
 * through tq_model_writer (same shard size and metadata) gives byte-identical files. */
#include "formats/formats.h"
#include "testdata/mkmodel/mkmodel.h"
#include "tests/unit/check.h"

#include <cjson/cJSON.h>

static void round_trip(tq_mk_arch arch, uint64_t shard_size, const char *tag)
{
    tq_err err = {0};
    char src[1024], dst[1024];
    snprintf(src, sizeof src, "%s/rt-src-%s", t_tmpdir(), tag);
    snprintf(dst, sizeof dst, "%s/rt-dst-%s", t_tmpdir(), tag);
    tq_mk_opts o;
    CHECK_OK(tq_mk_preset(&o, arch, "tiny", &err));
    o.shard_size = shard_size;
    o.seed = 5;
    o.quiet = 1;
    CHECK_OK(tq_mkmodel(src, &o, &err));
    tq_model *m;
    CHECK_OK(tq_model_open(&m, src, &err));
    if (t_failed_here)
        return;
    CHECK(m->n_files >= 1 && m->n_tensors > 0 && (shard_size > (1ull << 30)) == (m->n_files == 1));
    tq_st_decl *d = calloc(m->n_tensors, sizeof *d);
    for (size_t i = 0; i < m->n_tensors; i++) {
        d[i].name = m->tensors[i].info.name;
        d[i].dtype = m->tensors[i].info.dtype;
        d[i].ndim = m->tensors[i].info.ndim;
        memcpy(d[i].shape, m->tensors[i].info.shape, sizeof d[i].shape);
    }
    const tq_st_file *f0 = m->files[0];
    tq_model_writer *w;
    CHECK_OK(tq_model_writer_open(&w, dst, d, m->n_tensors, shard_size, (const char *const *)f0->meta_keys,
                                  (const char *const *)f0->meta_vals, f0->n_meta, &err));
    size_t cap = 1 << 16;
    char *buf = malloc(cap);
    for (size_t i = 0; i < m->n_tensors && !t_failed_here; i++) {
        const tq_model_tensor *t = &m->tensors[i];
        long k = tq_model_writer_index(w, t->info.name);
        for (uint64_t off = 0; off < t->info.nbytes && !t_failed_here; off += cap) {
            size_t n = t->info.nbytes - off < cap ? (size_t)(t->info.nbytes - off) : cap;
            CHECK_OK(tq_model_read(t, off, buf, n, &err));
            CHECK_OK(tq_model_writer_write(w, (size_t)k, off, buf, n, &err));
        }
    }
    CHECK_OK(tq_model_writer_finish(w, &err));
    CHECK_OK(tq_model_copy_extras(m, dst, &err));
    size_t n_files = m->n_files;
    char **names = calloc(n_files, sizeof *names);
    for (size_t i = 0; i < n_files; i++)
        names[i] = strdup(strrchr(m->files[i]->path, '/') + 1);
    tq_model_close(m);
    free(buf);
    free(d);
    char a[2048], b[2048];
    for (size_t i = 0; i < n_files; i++) {
        snprintf(a, sizeof a, "%s/%s", src, names[i]);
        snprintf(b, sizeof b, "%s/%s", dst, names[i]);
        CHECKF(t_files_equal(a, b), "%s differs", names[i]);
        free(names[i]);
    }
    free(names);
    snprintf(a, sizeof a, "%s/model.safetensors.index.json", src);
    snprintf(b, sizeof b, "%s/model.safetensors.index.json", dst);
    CHECK(tq_exists(a) == tq_exists(b) && (!tq_exists(a) || t_files_equal(a, b)));
    CHECK(n_files > 1 || !tq_exists(a));
    snprintf(a, sizeof a, "%s/tokenizer_config.json", src);
    snprintf(b, sizeof b, "%s/tokenizer_config.json", dst);
    CHECK(t_files_equal(a, b));
}

static void roundtrip_moe_sharded(void)
{
    round_trip(TQ_MK_QWEN3_MOE, 300000, "moe");
}

static void roundtrip_llama_single(void)
{
    round_trip(TQ_MK_LLAMA, 1ull << 40, "llama");
}

int main(void)
{
    RUN(roundtrip_moe_sharded);
    RUN(roundtrip_llama_single);
    TEST_MAIN_END();
}
