/* Model directories: sharded writer, index checks, extras, round trips. */
#include "formats/formats.h"
#include "tests/unit/check.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

static char *join(const char *a, const char *b)
{
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", a, b);
    return buf[k];
}

static void put(const char *path, const char *s)
{
    tq_err err;
    tq_write_file_atomic(path, s, strlen(s), &err);
}

#define NT 6
static tq_st_decl decls[NT] = {
    {"model.layers.0.w", TQ_DT_F32, 2, {8, 8}},   /* 256 bytes */
    {"model.layers.1.w", TQ_DT_F32, 2, {8, 8}},   /* 256 */
    {"model.embed", TQ_DT_BF16, 2, {16, 8}},      /* 256 */
    {"model.norm", TQ_DT_F32, 1, {8}},            /* 32 */
    {"lm_head", TQ_DT_F16, 2, {40, 8}},           /* 640: bigger than a shard */
    {"model.layers.0.b", TQ_DT_F32, 1, {8}},      /* 32 */
};

static uint64_t nbytes_of(const tq_st_decl *d)
{
    uint64_t n = tq_dtype_size(d->dtype);
    for (int k = 0; k < d->ndim; k++)
        n *= d->shape[k];
    return n;
}

static int write_model(const char *dir, uint64_t shard_size, tq_err *err)
{
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    tq_model_writer *w;
    if (tq_model_writer_open(&w, dir, decls, NT, shard_size, mk, mv, 1, err) != 0)
        return -1;
    for (int i = 0; i < NT; i++) {
        long k = tq_model_writer_index(w, decls[i].name);
        unsigned char buf[640];
        uint64_t n = nbytes_of(&decls[i]);
        for (uint64_t j = 0; j < n; j++)
            buf[j] = (unsigned char)(i * 37 + j);
        if (k < 0 || tq_model_writer_write(w, (size_t)k, 0, buf, n, err) != 0) {
            tq_model_writer_abort(w);
            return -1;
        }
    }
    return tq_model_writer_finish(w, err);
}

static void test_sharded(void)
{
    tq_err err = {0};
    const char *d = t_path("sharded");
    CHECK_OK(write_model(d, 512, &err));
    /* name order: lm_head(640) | model.embed(256) model.layers.0.b(32) | model.layers.0.w(256)
     * model.layers.1.w(256) | model.norm(32) */
    CHECK(tq_exists(join(d, "model-00001-of-00004.safetensors")) && tq_exists(join(d, "model-00004-of-00004.safetensors")));
    CHECK(!tq_exists(join(d, "model.safetensors")) && !tq_exists(join(d, "model-00006-of-00006.safetensors")));
    cJSON *idx = NULL;
    CHECK_OK(tq_json_read_file(join(d, "model.safetensors.index.json"), 1 << 20, &idx, &err));
    if (t_failed_here)
        return;
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "metadata"), "total_size")->valuedouble == 1472);
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "weight_map"), "model.layers.0.b")->valuestring,
                  "model-00002-of-00004.safetensors"));
    cJSON_Delete(idx);

    put(join(d, "config.json"), "{\"model_type\": \"llama\"}\n");
    put(join(d, "tokenizer.json"), "{\"tok\": 1}\n");
    put(join(d, ".hidden"), "x");
    put(join(d, "junk.safetensors.partial-abc123"), "x");
    tq_model *m;
    CHECK_OK(tq_model_open(&m, d, &err));
    if (t_failed_here)
        return;
    CHECK(m->n_files == 4 && m->n_tensors == NT);
    CHECK(m->config && !strcmp(cJSON_GetObjectItem(m->config, "model_type")->valuestring, "llama"));
    CHECK(m->n_extra == 1 && !strcmp(m->extra_files[0], "tokenizer.json"));
    for (size_t i = 1; i < m->n_tensors; i++)
        CHECK(strcmp(m->tensors[i - 1].info.name, m->tensors[i].info.name) < 0);
    const tq_model_tensor *t = tq_model_find(m, "model.layers.1.w");
    CHECK(t && !strcmp(tq_model_tensor_file(m, t), "model-00003-of-00004.safetensors"));
    unsigned char buf[256];
    CHECK_OK(tq_model_read(t, 0, buf, 256, &err));
    CHECK(buf[0] == (unsigned char)(1 * 37) && buf[255] == (unsigned char)(1 * 37 + 255));
    CHECK(tq_model_read(t, 1, buf, 256, &err) != 0);
    CHECK(tq_model_find(m, "nope") == NULL);
    uint64_t bytes;
    CHECK_OK(tq_model_read_all(m, 100, &bytes, &err));
    CHECK(bytes == 1472);

    /* round trip: read everything, write with the same shard size, same bytes */
    const char *d2 = t_path("sharded2");
    tq_st_decl dd[NT];
    for (size_t i = 0; i < m->n_tensors; i++) {
        dd[i].name = m->tensors[i].info.name;
        dd[i].dtype = m->tensors[i].info.dtype;
        dd[i].ndim = m->tensors[i].info.ndim;
        memcpy(dd[i].shape, m->tensors[i].info.shape, sizeof dd[i].shape);
    }
    const char *mk[] = {"format"}, *mv[] = {"pt"};
    tq_model_writer *w;
    CHECK_OK(tq_model_writer_open(&w, d2, dd, NT, 512, mk, mv, 1, &err));
    for (size_t i = 0; i < m->n_tensors && !t_failed_here; i++) {
        unsigned char b[640];
        CHECK_OK(tq_model_read(&m->tensors[i], 0, b, m->tensors[i].info.nbytes, &err));
        CHECK_OK(tq_model_writer_write(w, (size_t)tq_model_writer_index(w, dd[i].name), 0, b, m->tensors[i].info.nbytes, &err));
    }
    CHECK_OK(tq_model_writer_finish(w, &err));
    CHECK_OK(tq_model_copy_extras(m, d2, &err));
    static const char *same[] = {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                 "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                 "model.safetensors.index.json", "tokenizer.json"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        CHECKF(t_files_equal(join(d, same[i]), join(d2, same[i])), "%s differs", same[i]);
    tq_model_close(m);
}

static void test_single(void)
{
    tq_err err = {0};
    const char *d = t_path("single");
    CHECK_OK(write_model(d, 0, &err));
    CHECK(tq_exists(join(d, "model.safetensors")) && !tq_exists(join(d, "model.safetensors.index.json")));
    tq_model *m;
    CHECK_OK(tq_model_open(&m, d, &err));
    if (!t_failed_here) {
        CHECK(m->n_files == 1 && m->n_tensors == NT && m->config == NULL && m->n_extra == 0);
        tq_model_close(m);
    }
    /* the file on its own */
    CHECK_OK(tq_model_open(&m, join(d, "model.safetensors"), &err));
    if (!t_failed_here) {
        CHECK(m->n_files == 1 && m->n_tensors == NT);
        CHECK(!strcmp(tq_model_tensor_file(m, &m->tensors[0]), "model.safetensors"));
        tq_model_close(m);
    }
    /* rewriting with another shard count leaves no stale index or shards behind */
    put(join(d, "model-00001-of-00009.safetensorsX"), "keep");
    CHECK_OK(write_model(d, 512, &err));
    CHECK(!tq_exists(join(d, "model.safetensors")));
    CHECK_OK(write_model(d, 200, &err));
    CHECK(!tq_exists(join(d, "model-00004-of-00004.safetensors")) && tq_exists(join(d, "model-00006-of-00006.safetensors")));
    CHECK_OK(write_model(d, 0, &err));
    CHECK(!tq_exists(join(d, "model.safetensors.index.json")) && !tq_exists(join(d, "model-00001-of-00006.safetensors")));
    CHECK(tq_exists(join(d, "model-00001-of-00009.safetensorsX")));
    CHECK_OK(tq_model_open(&m, d, &err));
    if (!t_failed_here) {
        CHECK(m->n_files == 1 && m->n_tensors == NT && m->n_extra == 1);
        tq_model_close(m);
    }
}

static void test_no_index(void)
{
    tq_err err = {0};
    const char *d = t_path("noindex");
    CHECK_OK(write_model(d, 512, &err));
    unlink(join(d, "model.safetensors.index.json"));
    tq_model *m;
    CHECK_OK(tq_model_open(&m, d, &err));
    if (!t_failed_here) {
        CHECK(m->n_files == 4 && m->n_tensors == NT);
        tq_model_close(m);
    }
    /* the same tensor in two shards */
    const char *d2 = t_path("noindex-dup");
    CHECK_OK(write_model(d2, 0, &err));
    tq_copy_file(join(d2, "model.safetensors"), join(d2, "other.safetensors"), &err);
    CHECK(tq_model_open(&m, d2, &err) != 0);
    CHECKF(!strcmp(err.msg, "X: tensor 'lm_head' is in both model.safetensors and other.safetensors") ||
               strstr(err.msg, ": tensor 'lm_head' is in both model.safetensors and other.safetensors"), "%s", err.msg);
}

static void test_bad_index(void)
{
    tq_err err = {0};
    const char *d = t_path("badidx");
    char want[2048];
    tq_model *m;
    CHECK_OK(write_model(d, 512, &err));
    const char *ip = join(d, "model.safetensors.index.json");
    char *orig;
    size_t olen;
    CHECK_OK(tq_read_small_file(ip, 1 << 20, &orig, &olen, &err));
    if (t_failed_here)
        return;
    struct {
        const char *index, *msg;
    } cases[] = {
        {"{\"weight_map\": ", "invalid JSON near byte 14"},
        {"[]", "not a JSON object"},
        {"{\"metadata\": {}}", "no weight_map"},
        {"{\"weight_map\": []}", "weight_map is not an object"},
        {"{\"weight_map\": {\"a\": 1}}", "weight_map: tensor 'a': shard name is not a string"},
        {"{\"weight_map\": {\"a\": \"../model-00001-of-00004.safetensors\"}}",
         "weight_map: tensor 'a': shard '../model-00001-of-00004.safetensors' is not a file name in the model directory"},
        {"{\"weight_map\": {\"lm_head\": \"model-00009-of-00009.safetensors\"}}",
         "shard 'model-00009-of-00009.safetensors' (named for tensor 'lm_head') does not exist"},
        {"{\"weight_map\": {\"lm_head\": \"model-00001-of-00004.safetensors\", \"model.embed\": \"model-00003-of-00004.safetensors\", "
         "\"model.layers.0.b\": \"model-00002-of-00004.safetensors\", \"model.layers.0.w\": \"model-00003-of-00004.safetensors\", "
         "\"model.layers.1.w\": \"model-00003-of-00004.safetensors\", \"model.norm\": \"model-00004-of-00004.safetensors\"}}",
         "tensor 'model.embed' is listed in shard 'model-00003-of-00004.safetensors' but stored in 'model-00002-of-00004.safetensors'"},
        {"{\"weight_map\": {\"model.embed\": \"model-00002-of-00004.safetensors\"}}",
         "tensor 'model.layers.0.b' of shard 'model-00002-of-00004.safetensors' is not in the weight_map"},
        {"{\"weight_map\": {\"model.embed\": \"model-00002-of-00004.safetensors\", \"model.layers.0.b\": "
         "\"model-00002-of-00004.safetensors\", \"model.zzz\": \"model-00002-of-00004.safetensors\"}}",
         "tensor 'model.zzz' is not in shard 'model-00002-of-00004.safetensors'"},
        /* repeated keys: refused by the JSON reader (tq_json_read_file), naming the path */
        {"{\"weight_map\": {\"a\": \"x.safetensors\", \"a\": \"x.safetensors\"}}", "key \"weight_map.a\" appears twice"},
        {"{\"weight_map\": {}, \"weight_map\": {}}", "key \"weight_map\" appears twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        put(ip, cases[i].index);
        snprintf(want, sizeof want, "%s: %s", ip, cases[i].msg);
        int rc = tq_model_open(&m, d, &err);
        CHECKF(rc != 0 && !strcmp(err.msg, want), "case %zu: got '%s'", i, rc ? err.msg : "success");
        if (rc == 0)
            tq_model_close(m);
    }
    tq_write_file_atomic(ip, orig, olen, &err);
    free(orig);
    CHECK_OK(tq_model_open(&m, d, &err));
    if (!t_failed_here)
        tq_model_close(m);
    /* bad config.json */
    put(join(d, "config.json"), "{oops");
    CHECK(tq_model_open(&m, d, &err) != 0 && strstr(err.msg, "config.json: invalid JSON"));
    put(join(d, "config.json"), "[1]");
    CHECK(tq_model_open(&m, d, &err) != 0 && strstr(err.msg, "config.json: not a JSON object"));
}

static void test_gguf_and_empty(void)
{
    tq_err err = {0};
    tq_model *m;
    const char *d = t_path("gg");
    mkdir(d, 0755);
    CHECK(tq_model_open(&m, d, &err) != 0 && strstr(err.msg, "no model.safetensors.index.json, *.safetensors or *.gguf file"));
    put(join(d, "m.gguf"), "GGUF");
    /* handed to the GGUF reader, which finds the 4-byte file truncated */
    CHECK(tq_model_open(&m, d, &err) != 0 && err.code == TQ_EDATA && strstr(err.msg, "m.gguf: version runs past the end of the file"));
    CHECK(tq_model_open(&m, join(d, "m.gguf"), &err) != 0 && err.code == TQ_EDATA);
    CHECK(tq_model_open(&m, join(d, "missing.safetensors"), &err) != 0 && err.code == TQ_EIO);
}

static void test_writer_abort(void)
{
    tq_err err = {0};
    const char *d = t_path("mwabort");
    tq_model_writer *w;
    CHECK_OK(tq_model_writer_open(&w, d, decls, NT, 512, NULL, NULL, 0, &err));
    if (t_failed_here)
        return;
    unsigned char buf[640] = {0};
    CHECK_OK(tq_model_writer_write(w, 0, 0, buf, 640, &err));
    tq_model_writer_abort(w);
    char **names;
    size_t n;
    CHECK_OK(tq_list_dir(d, &names, &n, &err));
    CHECK(n == 0);
    tq_free_strv(names, n);
    /* incomplete: finish fails and leaves nothing */
    CHECK_OK(tq_model_writer_open(&w, d, decls, NT, 512, NULL, NULL, 0, &err));
    CHECK(tq_model_writer_finish(w, &err) != 0 && strstr(err.msg, "only 0 of 640 bytes were written"));
    CHECK_OK(tq_list_dir(d, &names, &n, &err));
    CHECK(n == 0);
    tq_free_strv(names, n);
}

int main(void)
{
    RUN(test_sharded);
    RUN(test_single);
    RUN(test_no_index);
    RUN(test_bad_index);
    RUN(test_gguf_and_empty);
    RUN(test_writer_abort);
    TEST_MAIN_END();
}
