/* Scratch directory for fuzz targets whose library entry point reads files (model
 * directories, split.json, bundles): one per process, in /dev/shm when there is one, removed
 * at exit. The input is written to a file there and the real entry point opens it. */
#ifndef TQ_FUZZ_FILE_H
#define TQ_FUZZ_FILE_H

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

/* The per-process scratch directory (created on first use). */
static const char *fz_dir(void)
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

/* fz_dir()/rel, in a static buffer (one at a time). */
static const char *fz_path(const char *rel)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", fz_dir(), rel);
    return p;
}

/* Replace fz_dir()/rel with exactly data[0..size). */
static void fz_write(const char *rel, const uint8_t *data, size_t size)
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

/* With TQ_FUZZ_VERBOSE set (replaying a corpus by hand), say why an input was refused. */
static void fz_note(const char *msg)
{
    if (getenv("TQ_FUZZ_VERBOSE"))
        fprintf(stderr, "refused: %s\n", msg);
}

#endif
