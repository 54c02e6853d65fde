/* The fuzz targets' scratch directory (fz_file.h): one per process, in /dev/shm when there is
 * one, removed at exit; and the generated model they fuzz a file of. */
#include "fz_file.h"

#include "common/common.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fz_root[256];

static void fz_cleanup(void)
{
    if (fz_root[0])
        tq_rm_tree(fz_root);
}

const char *fz_dir(void)
{
    if (!fz_root[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(fz_root, sizeof fz_root, "%s/tq-fuzz-XXXXXX", base);
        if (!mkdtemp(fz_root)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_root;
}

const char *fz_path(const char *rel)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", fz_dir(), rel);
    return p;
}

void fz_write(const char *rel, const uint8_t *data, size_t size)
{
    const char *p = fz_path(rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(p);
        abort();
    }
    for (size_t off = 0; off < size;) {
        ssize_t n = write(fd, data + off, size - off);
        if (n <= 0) {
            perror(p);
            abort();
        }
        off += (size_t)n;
    }
    close(fd);
}

void fz_note(const char *msg)
{
    if (getenv("TQ_FUZZ_VERBOSE"))
        fprintf(stderr, "refused: %s\n", msg);
}

void fz_mk_opts(tq_mk_opts *o, tq_mk_arch arch)
{
    tq_err e;
    if (tq_mk_preset(o, arch, "tiny", &e) != 0) {
        fprintf(stderr, "fuzz: %s\n", e.msg);
        abort();
    }
    o->quiet = 1;
    o->threads = 1;
}

void fz_mk_small_moe(tq_mk_opts *o)
{
    fz_mk_opts(o, TQ_MK_QWEN3_MOE);
    o->layers = 2;
    o->hidden = 64;
    o->moe_intermediate = 64;
    o->experts = 4;
    o->heads = 2;
    o->kv_heads = 1;
    o->vocab = 64;
}

const char *fz_mkmodel(const char *rel, const tq_mk_opts *o)
{
    char *dir = strdup(fz_path(rel));
    tq_err e;
    if (!dir || tq_mkmodel(dir, o, &e) != 0) {
        fprintf(stderr, "fuzz: %s\n", dir ? e.msg : "out of memory");
        abort();
    }
    return dir;
}
