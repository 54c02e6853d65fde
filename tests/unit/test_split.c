/* tq-split: layer-file headers, split output against the source bytes, split.json, join
 * round trips, thread-count invariance, O_DIRECT reads, malformed inputs, plan arithmetic. */
#include "check.h"

#include "formats/formats.h"
#include "layout/split/split.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static tq_err err;

/* ------------------------------------------------------------ test models */

enum { K_BF16, K_AFFINE4, K_TQ4 };

typedef struct mspec {
    int naming;          /* TQ_NAMING_HF / TQ_NAMING_MLX; 0 = dense */
    int kind;
    int layers, experts, hidden, inter;
    uint64_t shard_size;
    int drop_layer, drop_expert;       /* HF: omit this expert's up_proj.weight (-1: none) */
    int short_layer;                   /* this layer has experts-1 experts (-1: none) */
    int odd_layer, odd_expert;         /* HF: this expert's gate_proj.weight gets a wrong shape */
} mspec;

static mspec spec(int naming, int kind)
{
    mspec s = {naming, kind, 2, 4, 64, 32, 0, -1, -1, -1, -1, -1};
    return s;
}

typedef struct decls {
    tq_st_decl d[2048];
    char *names[2048];
    size_t n;
} decls;

static void add(decls *ds, tq_dtype dt, int ndim, uint64_t a, uint64_t b, uint64_t c, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static void add(decls *ds, tq_dtype dt, int ndim, uint64_t a, uint64_t b, uint64_t c, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tq_st_decl *d = &ds->d[ds->n];
    ds->names[ds->n] = strdup(buf);
    d->name = ds->names[ds->n];
    d->dtype = dt;
    d->ndim = ndim;
    d->shape[0] = a;
    d->shape[1] = b;
    d->shape[2] = c;
    ds->n++;
}

/* One linear of one expert (or stacked E experts when stack > 0), in the spec's kind. */
static void add_linear(decls *ds, const mspec *s, uint64_t stack, uint64_t out, uint64_t in, const char *base)
{
    int nd = stack ? 3 : 2;
#define DIMS(x, y) (stack ? stack : (x)), (stack ? (x) : (y)), (stack ? (y) : 0)
    if (s->kind == K_BF16) {
        add(ds, TQ_DT_BF16, nd, DIMS(out, in), "%s.weight", base);
    } else if (s->kind == K_AFFINE4) {
        add(ds, TQ_DT_U32, nd, DIMS(out, in / 8), "%s.weight", base);
        add(ds, TQ_DT_BF16, nd, DIMS(out, in / 32), "%s.scales", base);
        add(ds, TQ_DT_BF16, nd, DIMS(out, in / 32), "%s.biases", base);
    } else {
        add(ds, TQ_DT_U32, nd, DIMS(out, in / 8), "%s.weight", base);
        add(ds, TQ_DT_F16, nd, DIMS(out, in / 32), "%s.scales", base);
        add(ds, TQ_DT_F16, 1, 16, 0, 0, "%s.codebook", base);
        add(ds, TQ_DT_F16, 1, in, 0, 0, "%s.signs", base);
    }
#undef DIMS
}

static uint64_t fill_state;
static unsigned char next_byte(void)
{
    fill_state ^= fill_state << 13;
    fill_state ^= fill_state >> 7;
    fill_state ^= fill_state << 17;
    return (unsigned char)(fill_state >> 24);
}

static int write_model(const char *dir, const mspec *s)
{
    static decls ds;
    for (size_t i = 0; i < ds.n; i++)
        free(ds.names[i]);
    ds.n = 0;
    uint64_t H = (uint64_t)s->hidden, I = (uint64_t)s->inter;
    add(&ds, TQ_DT_BF16, 2, 96, H, 0, "model.embed_tokens.weight");
    add(&ds, TQ_DT_BF16, 1, H, 0, 0, "model.norm.weight");
    add(&ds, TQ_DT_BF16, 2, 96, H, 0, "lm_head.weight");
    for (int L = 0; L < s->layers; L++) {
        char b[128];
        snprintf(b, sizeof b, "model.layers.%d.self_attn.q_proj", L);
        add_linear(&ds, s, 0, H, H, b);
        add(&ds, TQ_DT_BF16, 1, H, 0, 0, "model.layers.%d.input_layernorm.weight", L);
        int E = s->experts - (L == s->short_layer);
        static const char *projs[3] = {"gate_proj", "up_proj", "down_proj"};
        if (!s->naming) {
            for (int p = 0; p < 3; p++) {
                snprintf(b, sizeof b, "model.layers.%d.mlp.%s", L, projs[p]);
                add_linear(&ds, s, 0, p == 2 ? H : I, p == 2 ? I : H, b);
            }
            continue;
        }
        add(&ds, TQ_DT_BF16, 2, (uint64_t)E, H, 0, "model.layers.%d.mlp.gate.weight", L);
        if (s->naming == TQ_NAMING_MLX) {
            for (int p = 0; p < 3; p++) {
                snprintf(b, sizeof b, "model.layers.%d.mlp.switch_mlp.%s", L, projs[p]);
                add_linear(&ds, s, (uint64_t)E, p == 2 ? H : I, p == 2 ? I : H, b);
            }
            continue;
        }
        for (int x = 0; x < E; x++)
            for (int p = 0; p < 3; p++) {
                if (L == s->drop_layer && x == s->drop_expert && p == 1)
                    continue;
                snprintf(b, sizeof b, "model.layers.%d.mlp.experts.%d.%s", L, x, projs[p]);
                uint64_t out = p == 2 ? H : I;
                if (L == s->odd_layer && x == s->odd_expert && p == 0)
                    out += 8;
                add_linear(&ds, s, 0, out, p == 2 ? I : H, b);
            }
    }
    const char *mk[] = {"format"}, *mv[] = {"mlx"};
    tq_model_writer *w;
    if (tq_model_writer_open(&w, dir, ds.d, ds.n, s->shard_size, mk, mv, 1, &err) != 0)
        return -1;
    fill_state = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < ds.n; i++) {
        long wi = tq_model_writer_index(w, ds.d[i].name);
        uint64_t nb = tq_dtype_size(ds.d[i].dtype);
        for (int k = 0; k < ds.d[i].ndim; k++)
            nb *= ds.d[i].shape[k];
        unsigned char *buf = malloc(nb ? nb : 1);
        for (uint64_t k = 0; k < nb; k++)
            buf[k] = next_byte();
        int rc = tq_model_writer_write(w, (size_t)wi, 0, buf, nb, &err);
        free(buf);
        if (rc != 0) {
            tq_model_writer_abort(w);
            return -1;
        }
    }
    if (tq_model_writer_finish(w, &err) != 0)
        return -1;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "model_type", s->naming ? "qwen3_moe" : "qwen3");
    cJSON_AddNumberToObject(c, "num_hidden_layers", s->layers);
    cJSON_AddNumberToObject(c, "hidden_size", s->hidden);
    cJSON_AddNumberToObject(c, "rms_norm_eps", 1e-6);
    if (s->naming) {
        cJSON_AddNumberToObject(c, "num_experts", s->experts);
        cJSON_AddNumberToObject(c, "num_experts_per_tok", 2);
    }
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    int rc = tq_json_write_file(p, c, &err);
    cJSON_Delete(c);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    const char tok[] = "{\"model_max_length\": 128}\n";
    if (rc == 0)
        rc = tq_write_file_atomic(p, tok, sizeof tok - 1, &err);
    return rc;
}

static void rmrf(const char *p)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0)
        fprintf(stderr, "rm failed\n");
}

/* ------------------------------------------------------------ checks */

static unsigned char *read_range(const char *path, uint64_t off, size_t len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    unsigned char *b = malloc(len ? len : 1);
    if (tq_pread_full(fd, b, len, off, path, &err) != 0) {
        free(b);
        b = NULL;
    }
    close(fd);
    return b;
}

/* Every expert block equals the source slices, headers parse with plain cJSON, offsets are
 * aligned, padding is zero, split.json hashes match the files. */
static void check_moe_split(const char *model, const char *out, uint64_t align)
{
    tq_model *m = NULL, *sm = NULL;
    tq_flash_manifest *man = NULL;
    CHECK_OK(tq_model_open(&m, model, &err));
    CHECK_OK(tq_flash_manifest_load(&man, out, &err));
    if (!m || !man)
        goto done;
    CHECK(man->kind == TQ_FLASH_MOE && man->align == align);
    for (size_t li = 0; li < man->n_layers; li++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", out, man->layers[li].file);
        tq_flash_header h;
        CHECK_OK(tq_flash_read(&h, path, &err));
        if (t_failed_here)
            break;
        /* a plain JSON parser reads the header once the NULs are stripped */
        unsigned char *page = read_range(path, 0, (size_t)align);
        CHECK(page != NULL);
        if (!page)
            break;
        size_t jl = strnlen((char *)page, (size_t)align);
        CHECK(jl < align);
        for (size_t k = jl; k < align; k++)
            CHECK(page[k] == 0);
        char *js = strndup((char *)page, jl);
        cJSON *j = cJSON_Parse(js);
        CHECK(j != NULL);
        const cJSON *lay = cJSON_GetObjectItem(j, "layout");
        CHECK(cJSON_GetObjectItem(lay, "data_start")->valuedouble == (double)align);
        CHECK(!strcmp(cJSON_GetObjectItem(j, "format")->valuestring, "moe_flash_v1"));
        CHECK(cJSON_GetObjectItem(j, "page_size")->valuedouble == (double)align);
        cJSON_Delete(j);
        free(js);
        free(page);
        CHECK(h.expert_block_size % align == 0 && h.data_start % align == 0);
        CHECK(h.num_experts == man->num_experts);
        for (uint64_t x = 0; x < h.num_experts; x++) {
            uint64_t off, len;
            CHECK_OK(tq_flash_expert_range(&h, x, &off, &len, &err));
            CHECK(off % align == 0);
            unsigned char *blk = read_range(path, off, (size_t)len);
            CHECK(blk != NULL);
            if (!blk)
                break;
            const tq_flash_block *b = tq_flash_manifest_block(man, (uint32_t)li, x);
            unsigned char d[32];
            tq_sha256_buf(blk, (size_t)len, d);
            CHECK(b && b->offset == off && b->length == len && !memcmp(d, b->sha256, 32));
            uint64_t used = 0;
            for (size_t k = 0; k < h.n_tensors; k++) {
                const tq_flash_tensor *t = &h.tensors[k];
                const char *tail = t->name + strlen("mlp.switch_mlp.");
                char n1[300], n2[300];
                snprintf(n1, sizeof n1, "%smlp.experts.%llu.%s", man->layers[li].prefix, (unsigned long long)x, tail);
                snprintf(n2, sizeof n2, "%smlp.switch_mlp.%s", man->layers[li].prefix, tail);
                const tq_model_tensor *st = tq_model_find(m, n1);
                uint64_t soff = 0;
                if (!st) {
                    st = tq_model_find(m, n2);
                    soff = x * t->nbytes;
                }
                CHECKF(st != NULL, "no source for %s", t->name);
                if (!st)
                    continue;
                unsigned char *src = malloc(t->nbytes ? t->nbytes : 1);
                CHECK_OK(tq_model_read(st, soff, src, (size_t)t->nbytes, &err));
                CHECKF(!memcmp(src, blk + t->offset, (size_t)t->nbytes), "layer %zu expert %llu %s differs", li,
                       (unsigned long long)x, t->name);
                free(src);
                CHECK(t->offset == used); /* packed back to back in gate, up, down order */
                used = t->offset + t->nbytes;
            }
            for (uint64_t k = used; k < len; k++)
                if (blk[k]) {
                    CHECK(blk[k] == 0);
                    break;
                }
            free(blk);
        }
        tq_flash_header_free(&h);
    }
    /* every listed file has its size and hash; pinned holds everything else */
    for (size_t i = 0; i < man->n_files; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", out, man->files[i].name);
        unsigned char d[32];
        uint64_t size;
        CHECK_OK(tq_sha256_file(path, d, &size, &err));
        CHECKF(size == man->files[i].size && !memcmp(d, man->files[i].sha256, 32), "%s", man->files[i].name);
    }
    CHECK(tq_flash_manifest_file(man, "tokenizer_config.json") != NULL);
    CHECK(tq_flash_manifest_file(man, "pinned.safetensors") != NULL);
    CHECK_OK(tq_model_open_split(&sm, out, TQ_NAMING_SOURCE, &err));
    if (sm) {
        CHECK(sm->n_tensors == m->n_tensors);
        for (size_t i = 0; i < m->n_tensors && i < sm->n_tensors; i++) {
            const tq_model_tensor *a = &m->tensors[i], *b = &sm->tensors[i];
            CHECKF(!strcmp(a->info.name, b->info.name) && a->info.nbytes == b->info.nbytes && a->info.dtype == b->info.dtype,
                   "tensor %s vs %s", a->info.name, b->info.name);
            if (t_failed_here)
                break;
            unsigned char *x = malloc(a->info.nbytes + 1), *y = malloc(a->info.nbytes + 1);
            CHECK_OK(tq_model_read(a, 0, x, (size_t)a->info.nbytes, &err));
            CHECK_OK(tq_model_read(b, 0, y, (size_t)b->info.nbytes, &err));
            CHECKF(!memcmp(x, y, (size_t)a->info.nbytes), "tensor %s differs", a->info.name);
            free(x);
            free(y);
        }
    }
done:
    tq_model_close(sm);
    tq_flash_manifest_free(man);
    tq_model_close(m);
}

/* Two directories hold the same files with the same bytes. */
static int same_dirs(const char *a, const char *b)
{
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "diff -r '%s' '%s' >/dev/null 2>&1", a, b);
    return system(cmd) == 0;
}

static int no_leftovers(const char *out)
{
    if (tq_exists(out))
        return 0;
    char parent[600];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    const char *base = slash + 1;
    *slash = 0;
    DIR *d = opendir(parent);
    int ok = 1;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, base, strlen(base)) && strstr(de->d_name, ".partial-"))
            ok = 0;
    if (d)
        closedir(d);
    return ok;
}

static void split_roundtrip(int naming, int kind, const char *tag)
{
    char mname[64], oname[64], jname[64];
    snprintf(mname, sizeof mname, "m-%s", tag);
    snprintf(oname, sizeof oname, "s-%s", tag);
    snprintf(jname, sizeof jname, "j-%s", tag);
    char *model = t_path(mname), *out = t_path(oname), *joined = t_path(jname);
    rmrf(model);
    rmrf(out);
    rmrf(joined);
    mspec s = spec(naming, kind);
    CHECK_OK(write_model(model, &s));
    tq_split_opts o = {.quiet = 1, .threads = 2};
    tq_split_result r;
    CHECK_OK(tq_split(model, out, &o, &r, &err));
    if (t_failed_here)
        return;
    CHECK(r.kind == TQ_FLASH_MOE && r.n_layers == 2 && r.num_experts == 4 && r.experts_per_tok == 2);
    check_moe_split(model, out, TQ_FLASH_DEFAULT_ALIGN);
    tq_split_join_opts jo = {.quiet = 1, .threads = 2};
    CHECK_OK(tq_split_join(out, joined, &jo, &err));
    /* tq wrote the source with default sharding: join gives back the same files */
    CHECKF(same_dirs(model, joined), "joined %s differs from the source", tag);
    rmrf(model);
    rmrf(out);
    rmrf(joined);
}

static void test_moe_mlx_bf16(void) { split_roundtrip(TQ_NAMING_MLX, K_BF16, "mlx-bf16"); }
static void test_moe_hf_bf16(void) { split_roundtrip(TQ_NAMING_HF, K_BF16, "hf-bf16"); }
static void test_moe_mlx_affine4(void) { split_roundtrip(TQ_NAMING_MLX, K_AFFINE4, "mlx-affine4"); }
static void test_moe_hf_affine4(void) { split_roundtrip(TQ_NAMING_HF, K_AFFINE4, "hf-affine4"); }
static void test_moe_mlx_tq4(void) { split_roundtrip(TQ_NAMING_MLX, K_TQ4, "mlx-tq4"); }

static void test_tq_shared_tensors_pinned(void)
{
    char *model = t_path("m-tqpin"), *out = t_path("s-tqpin");
    rmrf(model);
    rmrf(out);
    mspec s = spec(TQ_NAMING_MLX, K_TQ4);
    CHECK_OK(write_model(model, &s));
    tq_split_opts o = {.quiet = 1};
    CHECK_OK(tq_split(model, out, &o, NULL, &err));
    char p[600];
    snprintf(p, sizeof p, "%s/pinned.safetensors", out);
    tq_st_file *f = NULL;
    CHECK_OK(tq_st_open(&f, p, &err));
    if (f) {
        CHECK(tq_st_find(f, "model.layers.0.mlp.switch_mlp.gate_proj.codebook") != NULL);
        CHECK(tq_st_find(f, "model.layers.1.mlp.switch_mlp.down_proj.signs") != NULL);
        CHECK(tq_st_find(f, "model.layers.0.mlp.gate.weight") != NULL);
        CHECK(tq_st_find(f, "model.layers.0.mlp.switch_mlp.gate_proj.weight") == NULL);
        CHECK(f->data_start % TQ_FLASH_DEFAULT_ALIGN == 0);
        CHECK(!strcmp(tq_st_meta(f, "format"), "mlx"));
        tq_st_close(f);
    }
    snprintf(p, sizeof p, "%s/config.json", out);
    cJSON *c = NULL;
    CHECK_OK(tq_json_read_file(p, 1 << 20, &c, &err));
    const cJSON *st = cJSON_GetObjectItem(c, "streaming");
    CHECK(st && !strcmp(cJSON_GetObjectItem(st, "pinned_file")->valuestring, "pinned.safetensors"));
    CHECK(st && !strcmp(cJSON_GetObjectItem(st, "expert_dir")->valuestring, "experts/"));
    CHECK(st && cJSON_GetObjectItem(st, "num_layers")->valuedouble == 2);
    CHECK(st && cJSON_GetObjectItem(st, "num_experts")->valuedouble == 4);
    CHECK(st && cJSON_GetObjectItem(st, "experts_per_tok")->valuedouble == 2);
    CHECK(!strcmp(cJSON_GetObjectItem(c, "model_type")->valuestring, "qwen3_moe")); /* kept */
    cJSON_Delete(c);
    rmrf(model);
    rmrf(out);
}

static void test_threads_and_align(void)
{
    char *model = t_path("m-thr"), *a = t_path("s-thr1"), *b = t_path("s-thr3"), *c = t_path("s-al64");
    rmrf(model);
    rmrf(a);
    rmrf(b);
    rmrf(c);
    mspec s = spec(TQ_NAMING_HF, K_AFFINE4);
    s.experts = 7;
    CHECK_OK(write_model(model, &s));
    tq_split_opts o1 = {.quiet = 1, .threads = 1}, o3 = {.quiet = 1, .threads = 3};
    CHECK_OK(tq_split(model, a, &o1, NULL, &err));
    CHECK_OK(tq_split(model, b, &o3, NULL, &err));
    CHECK(same_dirs(a, b));
    tq_split_opts o64 = {.quiet = 1, .threads = 2, .align = 65536};
    CHECK_OK(tq_split(model, c, &o64, NULL, &err));
    check_moe_split(model, c, 65536);
    rmrf(model);
    rmrf(a);
    rmrf(b);
    rmrf(c);
}

/* Read one expert block with O_DIRECT: the alignment works in practice, not only on paper. */
static int odirect_read(const char *split, int *refused)
{
    tq_flash_manifest *man = NULL;
    if (tq_flash_manifest_load(&man, split, &err) != 0)
        return -1;
    const tq_flash_block *b = tq_flash_manifest_block(man, 1, 2);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", split, man->layers[1].file);
    int rc = -1;
    *refused = 0;
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) {
        *refused = errno == EINVAL;
        tq_flash_manifest_free(man);
        return -1;
    }
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, (size_t)b->length) == 0) {
        ssize_t n = pread(fd, buf, (size_t)b->length, (off_t)b->offset);
        if (n < 0 && errno == EINVAL)
            *refused = 1;
        unsigned char d[32];
        if (n == (ssize_t)b->length) {
            tq_sha256_buf(buf, (size_t)b->length, d);
            rc = memcmp(d, b->sha256, 32) == 0 ? 0 : -2;
        }
    }
    free(buf);
    close(fd);
    tq_flash_manifest_free(man);
    return rc;
}

static void test_odirect(void)
{
    const char *root = getenv("TQ_ROOT");
    char dirs[2][512];
    snprintf(dirs[0], sizeof dirs[0], "%s", t_tmpdir());
    snprintf(dirs[1], sizeof dirs[1], "%s/build", root ? root : ".");
    int done = 0;
    for (int k = 0; k < 2 && !done; k++) {
        char model[600], out[600];
        snprintf(model, sizeof model, "%s/odirect-m.%d", dirs[k], (int)getpid());
        snprintf(out, sizeof out, "%s/odirect-s.%d", dirs[k], (int)getpid());
        rmrf(model);
        rmrf(out);
        mspec s = spec(TQ_NAMING_MLX, K_BF16);
        CHECK_OK(write_model(model, &s));
        tq_split_opts o = {.quiet = 1};
        CHECK_OK(tq_split(model, out, &o, NULL, &err));
        int refused = 0;
        int rc = odirect_read(out, &refused);
        if (rc == 0)
            done = 1;
        else if (!refused)
            CHECKF(rc == 0, "O_DIRECT read of an expert block failed (%d) in %s", rc, dirs[k]);
        else
            printf("note: %s refuses O_DIRECT; trying another directory\n", dirs[k]);
        rmrf(model);
        rmrf(out);
        if (t_failed_here)
            return;
    }
    if (!done)
        printf("note: no directory here accepts O_DIRECT; O_DIRECT read not exercised\n");
}

static void test_dense(void)
{
    char *model = t_path("m-dense"), *out = t_path("s-dense"), *joined = t_path("j-dense");
    rmrf(model);
    rmrf(out);
    rmrf(joined);
    mspec s = spec(0, K_AFFINE4);
    s.layers = 3;
    CHECK_OK(write_model(model, &s));
    tq_split_opts o = {.quiet = 1, .threads = 2};
    tq_split_result r;
    CHECK_OK(tq_split(model, out, &o, &r, &err));
    CHECK(r.kind == TQ_FLASH_DENSE && r.n_layers == 3);
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, model, &err));
    for (int L = 0; m && L < 3; L++) {
        char path[600];
        snprintf(path, sizeof path, "%s/ffn_aligned/layer_%02d.bin", out, L);
        tq_flash_header h;
        CHECK_OK(tq_flash_read(&h, path, &err));
        if (t_failed_here)
            break;
        CHECK(h.kind == TQ_FLASH_DENSE && h.n_tensors == 9 && h.layer_idx == (uint64_t)L);
        CHECK(!strcmp(h.tensors[0].name, "mlp.gate_proj.weight") && !strcmp(h.tensors[8].name, "mlp.down_proj.biases"));
        for (size_t k = 0; k < h.n_tensors; k++) {
            const tq_flash_tensor *t = &h.tensors[k];
            CHECK(t->offset % TQ_FLASH_DEFAULT_ALIGN == 0);
            char n[200];
            snprintf(n, sizeof n, "model.layers.%d.%s", L, t->name);
            const tq_model_tensor *st = tq_model_find(m, n);
            CHECK(st != NULL);
            unsigned char *x = read_range(path, t->offset, (size_t)t->nbytes), *y = malloc(t->nbytes);
            CHECK(st && tq_model_read(st, 0, y, (size_t)t->nbytes, &err) == 0);
            CHECKF(x && !memcmp(x, y, (size_t)t->nbytes), "%s differs", n);
            free(x);
            free(y);
        }
        tq_flash_header_free(&h);
    }
    tq_model_close(m);
    tq_split_join_opts jo = {.quiet = 1};
    CHECK_OK(tq_split_join(out, joined, &jo, &err));
    CHECK(same_dirs(model, joined));
    rmrf(model);
    rmrf(out);
    rmrf(joined);
}

static void test_join_sharded_and_renamed(void)
{
    char *model = t_path("m-shard"), *out = t_path("s-shard"), *j1 = t_path("j-shard"), *j2 = t_path("j-mlx");
    rmrf(model);
    rmrf(out);
    rmrf(j1);
    rmrf(j2);
    mspec s = spec(TQ_NAMING_HF, K_BF16);
    s.shard_size = 20000; /* several shards */
    CHECK_OK(write_model(model, &s));
    char idx[600];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", model);
    CHECK(tq_exists(idx));
    tq_split_opts o = {.quiet = 1};
    CHECK_OK(tq_split(model, out, &o, NULL, &err));
    tq_split_join_opts jo = {.quiet = 1};
    CHECK_OK(tq_split_join(out, j1, &jo, &err));
    CHECK(same_dirs(model, j1));
    /* forced stacked names: expert e of the stacked tensor is the HF tensor of expert e */
    tq_split_join_opts jm = {.quiet = 1, .naming = TQ_NAMING_MLX};
    CHECK_OK(tq_split_join(out, j2, &jm, &err));
    tq_model *a = NULL, *b = NULL;
    CHECK_OK(tq_model_open(&a, model, &err));
    CHECK_OK(tq_model_open(&b, j2, &err));
    if (a && b) {
        const tq_model_tensor *st = tq_model_find(b, "model.layers.1.mlp.switch_mlp.down_proj.weight");
        const tq_model_tensor *e3 = tq_model_find(a, "model.layers.1.mlp.experts.3.down_proj.weight");
        CHECK(st && e3 && st->info.ndim == 3 && st->info.shape[0] == 4 && st->info.nbytes == 4 * e3->info.nbytes);
        if (st && e3) {
            unsigned char *x = malloc(e3->info.nbytes), *y = malloc(e3->info.nbytes);
            CHECK_OK(tq_model_read(st, 3 * e3->info.nbytes, x, (size_t)e3->info.nbytes, &err));
            CHECK_OK(tq_model_read(e3, 0, y, (size_t)e3->info.nbytes, &err));
            CHECK(!memcmp(x, y, (size_t)e3->info.nbytes));
            free(x);
            free(y);
        }
    }
    tq_model_close(a);
    tq_model_close(b);
    rmrf(model);
    rmrf(out);
    rmrf(j1);
    rmrf(j2);
}

/* ------------------------------------------------------------ malformed inputs */

static void expect_split_error(const mspec *s, const tq_split_opts *o, const char *needle, const char *tag)
{
    char mname[64], oname[64];
    snprintf(mname, sizeof mname, "m-bad-%s", tag);
    snprintf(oname, sizeof oname, "s-bad-%s", tag);
    char *model = t_path(mname), *out = t_path(oname);
    rmrf(model);
    rmrf(out);
    CHECK_OK(write_model(model, s));
    int rc = tq_split(model, out, o, NULL, &err);
    CHECKF(rc == -1 && err.code == TQ_EDATA && strstr(err.msg, needle), "%s: rc %d, message '%s'", tag, rc, err.msg);
    CHECKF(no_leftovers(out), "%s: output left behind", tag);
    rmrf(model);
}

static void test_bad_expert_count(void)
{
    mspec s = spec(TQ_NAMING_MLX, K_BF16);
    s.short_layer = 1;
    tq_split_opts o = {.quiet = 1};
    expect_split_error(&s, &o, "expert count mismatch between layers: layer 0 has 4 experts, layer 1 has 3", "count-mlx");
    mspec h = spec(TQ_NAMING_HF, K_BF16);
    h.short_layer = 1;
    expect_split_error(&h, &o, "expert count mismatch between layers", "count-hf");
}

static void test_bad_missing_expert(void)
{
    mspec s = spec(TQ_NAMING_HF, K_BF16);
    s.drop_layer = 1;
    s.drop_expert = 2;
    tq_split_opts o = {.quiet = 1};
    expect_split_error(&s, &o, "layer 1: expert 2 has no up_proj.weight tensor ('model.layers.1.mlp.experts.2.up_proj.weight' is missing)",
                       "missing");
    s.drop_expert = 3; /* the last one: caught by the cross-projection check */
    expect_split_error(&s, &o, "layer 1: expert 3 has no up_proj.weight tensor", "missing-last");
}

static void test_bad_shapes(void)
{
    mspec s = spec(TQ_NAMING_HF, K_AFFINE4);
    s.odd_layer = 0;
    s.odd_expert = 1;
    tq_split_opts o = {.quiet = 1};
    expect_split_error(&s, &o, "'model.layers.0.mlp.experts.1.gate_proj.weight' is U32 [40, 8] but 'model.layers.0.mlp.experts.0.gate_proj.weight' is U32 [32, 8]",
                       "shapes");
}

static void test_bad_header_overflow(void)
{
    mspec s = spec(TQ_NAMING_MLX, K_AFFINE4);
    tq_split_opts o = {.quiet = 1, .align = 4096, .test_header_pad = 4000};
    expect_split_error(&s, &o, "experts/layer_00.bin: header is", "overflow");
    CHECK(strstr(err.msg, "does not fit in its 4096-byte page (use a larger --align)"));
}

static void test_refuses_nonempty_output(void)
{
    char *model = t_path("m-ne"), *out = t_path("s-ne");
    rmrf(model);
    rmrf(out);
    mspec s = spec(TQ_NAMING_MLX, K_BF16);
    CHECK_OK(write_model(model, &s));
    mkdir(out, 0755);
    char p[600];
    snprintf(p, sizeof p, "%s/keep", out);
    CHECK_OK(tq_write_file_atomic(p, "x", 1, &err));
    tq_split_opts o = {.quiet = 1};
    CHECK(tq_split(model, out, &o, NULL, &err) == -1 && err.code == TQ_EEXIST);
    CHECK(tq_exists(p));
    unlink(p); /* an empty directory is fine */
    CHECK_OK(tq_split(model, out, &o, NULL, &err));
    rmrf(model);
    rmrf(out);
}

/* ------------------------------------------------------------ headers */

static const char *good_moe =
    "{\"format\":\"moe_flash_v1\",\"page_size\":16384,\"layer_idx\":3,\"total_size\":49152,"
    "\"layout\":{\"num_experts\":2,\"expert_block_size\":16384,\"data_start\":16384,\"tensors\":{"
    "\"mlp.switch_mlp.gate_proj.weight\":{\"inner_offset\":0,\"nbytes\":64,\"dtype\":\"mlx.core.uint32\",\"shape_per_expert\":[4,4]},"
    "\"mlp.switch_mlp.gate_proj.scales\":{\"inner_offset\":64,\"nbytes\":8,\"dtype\":\"bfloat16\",\"shape_per_expert\":[4,1]}}}}";

static int parse_str(const char *json, uint64_t page, tq_flash_header *h)
{
    size_t n = strlen(json);
    char *buf = calloc(1, page > n + 1 ? page : n + 1);
    memcpy(buf, json, n);
    int rc = tq_flash_parse(h, buf, page > n + 1 ? page : n + 1, UINT64_MAX, "t.bin", &err);
    free(buf);
    return rc;
}

static void test_header_parse(void)
{
    tq_flash_header h;
    CHECK_OK(parse_str(good_moe, 16384, &h));
    CHECK(h.kind == TQ_FLASH_MOE && h.num_experts == 2 && h.layer_idx == 3 && h.n_tensors == 2);
    CHECK(h.tensors[0].dtype == TQ_DT_U32 && h.tensors[1].dtype == TQ_DT_BF16 && h.tensors[1].offset == 64);
    /* the variant without "mlp." names the same tensors */
    CHECK(tq_flash_find(&h, "switch_mlp.gate_proj.scales") == &h.tensors[1]);
    CHECK(tq_flash_find(&h, "mlp.switch_mlp.gate_proj.weight") == &h.tensors[0]);
    uint64_t off, len;
    CHECK_OK(tq_flash_expert_range(&h, 1, &off, &len, &err));
    CHECK(off == 32768 && len == 16384);
    CHECK(tq_flash_expert_range(&h, 2, &off, &len, &err) == -1);
    tq_flash_header_free(&h);
    /* writer -> parser round trip, safetensors dtype names accepted too */
    tq_flash_tensor ts[2] = {{.name = "mlp.switch_mlp.up_proj.weight", .dtype = TQ_DT_U32, .ndim = 2, .shape = {32, 8}},
                             {.name = "mlp.switch_mlp.up_proj.scales", .dtype = TQ_DT_F16, .ndim = 2, .shape = {32, 1}}};
    tq_flash_header w = {.kind = TQ_FLASH_MOE, .page_size = 4096, .layer_idx = 7, .num_experts = 3, .n_tensors = 2, .tensors = ts};
    CHECK_OK(tq_flash_layout(&w, &err));
    CHECK(w.expert_block_size == 4096 && w.total_size == 4096 * 4 && ts[1].offset == 1024);
    char *js = tq_flash_header_json(&w, "w.bin", &err);
    CHECK(js != NULL);
    CHECK(js && strstr(js, "\"dtype\":\"uint32\"") && strstr(js, "\"shape_per_expert\":[32,8]"));
    CHECK(js && parse_str(js, 4096, &h) == 0 && h.num_experts == 3 && h.tensors[1].nbytes == 64);
    tq_flash_header_free(&h);
    free(js);
    CHECK_OK(parse_str("{\"format\":\"flash_aligned_v1\",\"page_size\":4096,\"layer_idx\":0,\"total_size\":12288,"
                       "\"tensors\":{\"mlp.gate_proj.weight\":{\"offset\":4096,\"nbytes\":16,\"dtype\":\"F16\",\"shape\":[8]},"
                       "\"mlp.up_proj.weight\":{\"offset\":8192,\"nbytes\":4096,\"dtype\":\"BF16\",\"shape\":[2048]}}}",
                       4096, &h));
    CHECK(h.kind == TQ_FLASH_DENSE && h.n_tensors == 2 && h.tensors[1].offset == 8192);
    tq_flash_header_free(&h);
}

static void bad_header(const char *json, const char *needle);
static char *subst(const char *from, const char *to);

/* mlx-sniper's header (docs/compatibility.md, mlx-sniper): no format, page_size or
 * total_size, num_experts at the top level, Python's json.dumps spacing, mlx.core. dtypes. */
static void test_header_peer(void)
{
    static const char *peer =
        "{\"layer_idx\": 1, \"num_experts\": 2, \"layout\": {\"expert_block_size\": 16384, \"data_start\": 16384, "
        "\"tensors\": {\"switch_mlp.gate_proj.weight\": {\"inner_offset\": 0, \"nbytes\": 64, \"shape_per_expert\": [4, 4], "
        "\"dtype\": \"mlx.core.uint32\"}, \"switch_mlp.gate_proj.scales\": {\"inner_offset\": 64, \"nbytes\": 8, "
        "\"shape_per_expert\": [4, 1], \"dtype\": \"mlx.core.bfloat16\"}}}}";
    size_t n = strlen(peer);
    char *buf = calloc(1, 16384);
    memcpy(buf, peer, n);
    tq_flash_header h;
    CHECK_OK(tq_flash_parse(&h, buf, 16384, 49152, "p.bin", &err));
    CHECK(h.kind == TQ_FLASH_MOE && h.num_experts == 2 && h.layer_idx == 1 && h.page_size == 16384 &&
          h.total_size == 49152 && h.tensors[1].dtype == TQ_DT_BF16);
    CHECK(tq_flash_find(&h, "mlp.switch_mlp.gate_proj.scales") == &h.tensors[1]);
    tq_flash_header_free(&h);
    /* the size is what a peer header has instead of total_size: it must fit E blocks exactly */
    CHECK(tq_flash_parse(&h, buf, 16384, 49153, "p.bin", &err) == -1 && strstr(err.msg, "!= data_start"));
    CHECK(tq_flash_parse(&h, buf, 16384, UINT64_MAX, "p.bin", &err) == -1 && strstr(err.msg, "file size is unknown"));
    free(buf);
    /* without a layout object, or with keys of tq's own header, a missing format is an error */
    bad_header("{\"layer_idx\": 1}", "no 'format' string");
    bad_header(subst("\"format\":\"moe_flash_v1\",", ""), "no 'format' string");
}

static void bad_header(const char *json, const char *needle)
{
    tq_flash_header h;
    int rc = parse_str(json, 16384, &h);
    CHECKF(rc == -1 && err.code == TQ_EDATA && strstr(err.msg, needle), "'%s' gave rc %d '%s'", needle, rc, err.msg);
}

static char *subst(const char *from, const char *to)
{
    static char buf[4096];
    const char *p = strstr(good_moe, from);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good_moe), good_moe, to, p + strlen(from));
    return buf;
}

static void test_header_hostile(void)
{
    bad_header("", "empty");
    bad_header("[1,2]", "not a JSON object");
    bad_header("{\"format\":\"moe_flash_v1\"", "not valid JSON");
    bad_header(subst("moe_flash_v1", "moe_flash_v9"), "unknown format");
    bad_header(subst("\"page_size\":16384", "\"page_size\":16385"), "page_size 16385 is not a power of two");
    bad_header(subst("\"page_size\":16384", "\"page_size\":1024"), "page_size 1024");
    bad_header(subst("\"layer_idx\":3", "\"layer_idx\":-3"), "'layer_idx' is not a non-negative integer");
    bad_header(subst("\"layer_idx\":3", "\"layer_idx\":3.5"), "'layer_idx' is not a non-negative integer");
    bad_header(subst("\"total_size\":49152", "\"total_size\":1e300"), "'total_size' is not a non-negative integer");
    bad_header(subst("\"total_size\":49152", "\"total_size\":49153"), "total_size 49153 != data_start");
    bad_header(subst("\"num_experts\":2", "\"num_experts\":0"), "num_experts 0");
    bad_header(subst("\"expert_block_size\":16384", "\"expert_block_size\":100"), "expert_block_size 100");
    bad_header(subst("\"data_start\":16384", "\"data_start\":100"), "data_start 100");
    bad_header(subst("\"nbytes\":64", "\"nbytes\":65"), "nbytes 65 but shape and dtype give 64");
    bad_header(subst("\"inner_offset\":64", "\"inner_offset\":60"), "overlaps the previous tensor");
    /* one byte of overlap is enough (good_moe itself, adjacent at 64, parses) */
    bad_header(subst("\"inner_offset\":64", "\"inner_offset\":63"),
               "tensor 'mlp.switch_mlp.gate_proj.scales' at offset 63 overlaps the previous tensor");
    bad_header(subst("\"inner_offset\":64", "\"inner_offset\":16380"), "outside the expert block");
    bad_header(subst("\"inner_offset\":64", "\"inner_offset\":18446744073709551615"), "not a non-negative integer");
    bad_header(subst("\"dtype\":\"bfloat16\"", "\"dtype\":\"bfloat17\""), "unknown dtype");
    bad_header(subst("[4,1]", "[4,1,1,1,1,1,1,1,1]"), "9 dimensions");
    bad_header(subst("[4,1]", "[4294967296,4294967296]"), "shape size overflows");
    bad_header(subst("mlp.switch_mlp.gate_proj.scales", "mlp.switch_mlp.gate_proj.weight"), "appears twice");
    bad_header(subst("\"tensors\":{", "\"tensors\":{},\"x\":{"), "no tensors");
    /* bytes after the JSON, inside the page */
    tq_flash_header h;
    size_t n = strlen(good_moe);
    char *buf = calloc(1, 16384);
    memcpy(buf, good_moe, n);
    buf[n + 10] = 'x';
    CHECK(tq_flash_parse(&h, buf, 16384, UINT64_MAX, "t.bin", &err) == -1 && strstr(err.msg, "non-NUL byte"));
    /* no NUL at all within the buffer */
    memset(buf, ' ', 16384);
    CHECK(tq_flash_parse(&h, buf, 16384, UINT64_MAX, "t.bin", &err) == -1);
    /* the file size must match total_size */
    memset(buf, 0, 16384);
    memcpy(buf, good_moe, n);
    CHECK(tq_flash_parse(&h, buf, 16384, 49151, "t.bin", &err) == -1 && strstr(err.msg, "the file is 49151 bytes"));
    free(buf);
    /* a header that fills its page is refused by the writer (no truncation) */
    tq_flash_tensor ts[1] = {{.name = "mlp.switch_mlp.gate_proj.weight", .dtype = TQ_DT_U32, .ndim = 1, .shape = {4}}};
    char longname[5000];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    ts[0].name = longname;
    tq_flash_header w = {.kind = TQ_FLASH_MOE, .page_size = 4096, .num_experts = 1, .n_tensors = 1, .tensors = ts};
    CHECK_OK(tq_flash_layout(&w, &err));
    CHECK(tq_flash_header_json(&w, "x.bin", &err) == NULL && strstr(err.msg, "does not fit in its 4096-byte page"));
}

static void test_plan_math(void)
{
    const uint64_t G = 1ull << 30;
    tq_split_ram_plan p = {.kind = TQ_FLASH_MOE, .ram = 16 * G, .pinned_bytes = 2 * G, .n_layers = 48, .num_experts = 128,
                 .experts_per_tok = 8, .block_size = 1u << 20};
    tq_split_plan_compute(&p);
    CHECK(p.envelope == 12 * G);                      /* max(8, 0.75*16) = 12, min(16, 12, 192) */
    CHECK(p.cache_budget == 7 * G);                   /* 12 - 2 - 3 */
    CHECK(p.bytes_per_token_cold == 48ull * 8 * (1u << 20));
    CHECK(p.blocks_total == 48 * 128 && p.blocks_cached == 6144); /* 7 GiB holds 7168 > all 6144 */
    CHECK(p.cached_share == 1.0);
    p.block_size = 4u << 20;
    tq_split_plan_compute(&p);
    CHECK(p.blocks_cached == 1792 && fabs(p.cached_share - 1792.0 / 6144) < 1e-12);
    p.ram = 8 * G;                                    /* max(8, 6) = 8 -> envelope 8 */
    tq_split_plan_compute(&p);
    CHECK(p.envelope == 8 * G && p.cache_budget == 3 * G);
    p.ram = 4 * G;                                    /* min(4, 8) = 4 < pinned + reserve */
    tq_split_plan_compute(&p);
    CHECK(p.envelope == 4 * G && p.cache_budget == 0 && p.blocks_cached == 0);
    p.ram = 1024 * G;                                 /* capped at 192 GiB */
    tq_split_plan_compute(&p);
    CHECK(p.envelope == 192 * G && p.cache_budget == 187 * G);
    tq_split_ram_plan d = {.kind = TQ_FLASH_DENSE, .ram = 32 * G, .pinned_bytes = G, .n_layers = 10, .block_size = G, .ffn_bytes = 10 * G};
    tq_split_plan_compute(&d);
    CHECK(d.envelope == 24 * G && d.cache_budget == 20 * G && d.blocks_cached == 10 && d.bytes_per_token_cold == 10 * G);
}

static void test_plan_model(void)
{
    char *model = t_path("m-plan");
    rmrf(model);
    mspec s = spec(TQ_NAMING_HF, K_AFFINE4);
    CHECK_OK(write_model(model, &s));
    tq_split_opts o = {0};
    tq_split_ram_plan p;
    CHECK_OK(tq_split_plan(model, &o, 16ull << 30, &p, &err));
    CHECK(p.kind == TQ_FLASH_MOE && p.n_layers == 2 && p.num_experts == 4 && p.experts_per_tok == 2);
    CHECK(p.block_size == 16384 && p.bytes_per_token_cold == 2 * 2 * 16384);
    CHECK(p.blocks_total == 8 && p.blocks_cached == 8);
    uint64_t pinned = 0;
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, model, &err));
    for (size_t i = 0; m && i < m->n_tensors; i++)
        if (!strstr(m->tensors[i].info.name, ".experts."))
            pinned += m->tensors[i].info.nbytes;
    tq_model_close(m);
    CHECK(p.pinned_bytes == pinned);
    rmrf(model);
}

int main(void)
{
    RUN(test_header_parse);
    RUN(test_header_hostile);
    RUN(test_header_peer);
    RUN(test_plan_math);
    RUN(test_moe_mlx_bf16);
    RUN(test_moe_hf_bf16);
    RUN(test_moe_mlx_affine4);
    RUN(test_moe_hf_affine4);
    RUN(test_moe_mlx_tq4);
    RUN(test_tq_shared_tensors_pinned);
    RUN(test_threads_and_align);
    RUN(test_odirect);
    RUN(test_dense);
    RUN(test_join_sharded_and_renamed);
    RUN(test_bad_expert_count);
    RUN(test_bad_missing_expert);
    RUN(test_bad_shapes);
    RUN(test_bad_header_overflow);
    RUN(test_refuses_nonempty_output);
    RUN(test_plan_model);
    TEST_MAIN_END();
}
