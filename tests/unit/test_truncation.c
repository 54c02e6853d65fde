/* Inputs that change under the tool: a shard truncated after tq_model_open must make
 * tq_model_read fail with a message naming the file and the offset, never return short or
 * stale data. */
#include "formats/formats.h"
#include "testdata/mkmodel/mkmodel.h"
#include "tests/unit/check.h"

#include <stdint.h>
#include <unistd.h>

static char dir[512];

static void make_model(void)
{
    tq_err err;
    snprintf(dir, sizeof dir, "%s/tq-trunc-XXXXXX", t_tmpdir());
    CHECK(mkdtemp(dir) != NULL);
    strcat(dir, "/m");
    tq_mk_opts o;
    CHECK_OK(tq_mk_preset(&o, TQ_MK_LLAMA, "tiny", &err));
    o.shard_size = 200000; /* several shards */
    o.quiet = 1;
    o.threads = 1;
    CHECK_OK(tq_mkmodel(dir, &o, &err));
}

static void test_truncated_shard_read_fails(void)
{
    tq_err err;
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, dir, &err));
    if (!m)
        return;
    CHECK(m->n_files > 1);
    /* in a shard holding several tensors: the one stored last, and the one stored first */
    const tq_model_tensor *last = NULL, *first = NULL;
    const tq_st_file *f = NULL;
    for (size_t k = 0; k < m->n_files && !(last && first && last != first); k++) {
        f = m->files[k];
        last = first = NULL;
        for (size_t i = 0; i < m->n_tensors; i++) {
            const tq_model_tensor *t = &m->tensors[i];
            if (t->file != f || t->info.nbytes < 64)
                continue;
            if (!last || t->info.offset > last->info.offset)
                last = t;
            if (!first || t->info.offset < first->info.offset)
                first = t;
        }
    }
    CHECK(last && first && last != first);
    if (!last || !first || last == first) {
        tq_model_close(m);
        return;
    }
    const char *path = f->path;
    const char *base = strrchr(path, '/') + 1;
    uint64_t cut = last->info.offset + 40;
    CHECK(truncate(path, (off_t)cut) == 0);

    uint64_t cap = last->info.nbytes > first->info.nbytes ? last->info.nbytes : first->info.nbytes;
    unsigned char *buf = malloc(cap);
    CHECK(buf != NULL);
    /* the part before the cut still reads; the whole tensor does not */
    CHECK_OK(tq_model_read(last, 0, buf, 40, &err));
    err.msg[0] = 0;
    CHECK(tq_model_read(last, 0, buf, last->info.nbytes, &err) != 0);
    CHECKF(strstr(err.msg, path) != NULL, "message does not name %s: %s", path, err.msg);
    CHECKF(strstr(err.msg, "unexpected end of file") != NULL, "%s", err.msg);
    char at[64];
    snprintf(at, sizeof at, "offset %llu", (unsigned long long)cut);
    CHECKF(strstr(err.msg, at) != NULL, "message does not say '%s': %s", at, err.msg);
    CHECK(err.code == TQ_EDATA);
    /* a read that starts past the new end fails the same way */
    err.msg[0] = 0;
    CHECK(tq_model_read(last, 48, buf, 8, &err) != 0);
    CHECKF(strstr(err.msg, path) && strstr(err.msg, "unexpected end of file"), "%s", err.msg);
    /* a tensor wholly before the cut is unaffected */
    CHECK_OK(tq_model_read(first, 0, buf, first->info.nbytes, &err));
    free(buf);
    char *shard = strdup(base);
    tq_model_close(m);

    /* opened again, the shortened shard is refused up front */
    m = NULL;
    err.msg[0] = 0;
    CHECK(tq_model_open(&m, dir, &err) != 0);
    CHECKF(strstr(err.msg, shard) != NULL, "message does not name %s: %s", shard, err.msg);
    free(shard);
    tq_model_close(m);
}

int main(void)
{
    make_model();
    RUN(test_truncated_shard_read_fails);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%.*s'", (int)(strlen(dir) - 2), dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    TEST_MAIN_END();
}
