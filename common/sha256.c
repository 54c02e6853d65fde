/* SHA-256 (OpenSSL libcrypto EVP): streaming, buffers, byte ranges and whole files. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tq_sha256 {
    EVP_MD_CTX *ctx;
};

tq_sha256 *tq_sha256_new(void)
{
    tq_sha256 *h = malloc(sizeof *h);
    if (!h)
        return NULL;
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(h->ctx);
        free(h);
        return NULL;
    }
    return h;
}

void tq_sha256_update(tq_sha256 *h, const void *data, size_t len)
{
    EVP_DigestUpdate(h->ctx, data, len);
}

void tq_sha256_final(tq_sha256 *h, unsigned char out[32])
{
    unsigned int n = 32;
    EVP_DigestFinal_ex(h->ctx, out, &n);
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

void tq_sha256_buf(const void *data, size_t len, unsigned char out[32])
{
    unsigned int n = 32;
    EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

void tq_hex(const unsigned char *d, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = 0;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int tq_unhex32(const char *s, unsigned char out[32])
{
    for (int i = 0; i < 32; i++) {
        int hi = hexval((unsigned char)s[2 * i]), lo = hi < 0 ? -1 : hexval((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

#define HASH_CHUNK (4u << 20)

int tq_sha256_range(int fd, uint64_t off, uint64_t len, const char *path, unsigned char out[32], tq_err *e)
{
    tq_sha256 *h = tq_sha256_new();
    char *buf = tq_malloc(HASH_CHUNK, e);
    if (!h || !buf) {
        if (h)
            tq_sha256_final(h, out);
        free(buf);
        return h ? -1 : tq_fail(e, TQ_ENOMEM, "cannot create SHA-256 context");
    }
    while (len > 0) {
        size_t n = len < HASH_CHUNK ? (size_t)len : HASH_CHUNK;
        if (tq_pread_full(fd, buf, n, off, path, e) != 0) {
            tq_sha256_final(h, out);
            free(buf);
            return -1;
        }
        tq_sha256_update(h, buf, n);
        off += n;
        len -= n;
    }
    tq_sha256_final(h, out);
    free(buf);
    return 0;
}

int tq_sha256_file(const char *path, unsigned char out[32], uint64_t *size, tq_err *e)
{
    int fd = tq_open_regular(path, NULL, e);
    if (fd < 0)
        return -1;
    tq_sha256 *h = tq_sha256_new();
    char *buf = tq_malloc(HASH_CHUNK, e);
    uint64_t total = 0;
    int rc = (h && buf) ? 0 : -1;
    if (!h)
        tq_fail(e, TQ_ENOMEM, "cannot create SHA-256 context");
    while (rc == 0) {
        ssize_t n = read(fd, buf, HASH_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = tq_fail(e, TQ_EIO, "%s: read error at offset %llu: %s", path,
                         (unsigned long long)total, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        tq_sha256_update(h, buf, (size_t)n);
        total += (uint64_t)n;
    }
    if (h)
        tq_sha256_final(h, out);
    free(buf);
    close(fd);
    if (rc == 0 && size)
        *size = total;
    return rc;
}
