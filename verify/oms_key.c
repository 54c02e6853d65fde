/* Signing keys for model signatures (libcrypto EVP): ECDSA on P-256, P-384 and P-521 with
 * SHA-256/384/512 (DER signatures), and Ed25519; the model_signing key hint. */
#include "verify/verify_internal.h"

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEY_FILE (1u << 20)

struct tq_oms_key {
    EVP_PKEY *pkey;
    const EVP_MD *md;     /* NULL for Ed25519 (it hashes inside) */
    const char *type;
    char hint[65];
};

/* An encrypted key would make libcrypto ask for a passphrase on the terminal; refuse instead. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    *(int *)u = 1;
    return -1;
}

static const char *ossl_reason(void)
{
    unsigned long code = ERR_peek_last_error();
    const char *r = code ? ERR_reason_error_string(code) : NULL;
    return r ? r : "not a PEM key";
}

static int classify(tq_oms_key *k, const char *path, tq_err *e)
{
    if (EVP_PKEY_is_a(k->pkey, "ED25519")) {
        k->type = "ed25519";
        k->md = NULL;
        return 0;
    }
    if (EVP_PKEY_is_a(k->pkey, "EC")) {
        char curve[64] = "";
        size_t got = 0;
        if (EVP_PKEY_get_utf8_string_param(k->pkey, OSSL_PKEY_PARAM_GROUP_NAME, curve, sizeof curve, &got) != 1)
            return tq_fail(e, TQ_EUNSUP, "%s: an EC key without a named curve; use P-256, P-384 or P-521", path);
        if (!strcmp(curve, "prime256v1") || !strcmp(curve, "P-256")) {
            k->type = "ecdsa-p256";
            k->md = EVP_sha256();
        } else if (!strcmp(curve, "secp384r1") || !strcmp(curve, "P-384")) {
            k->type = "ecdsa-p384";
            k->md = EVP_sha384();
        } else if (!strcmp(curve, "secp521r1") || !strcmp(curve, "P-521")) {
            k->type = "ecdsa-p521";
            k->md = EVP_sha512();
        } else {
            return tq_fail(e, TQ_EUNSUP, "%s: EC curve %s is not supported (P-256, P-384, P-521 or Ed25519)", path,
                           curve);
        }
        return 0;
    }
    return tq_fail(e, TQ_EUNSUP, "%s: a %s key; model signatures use ECDSA (P-256, P-384, P-521) or Ed25519", path,
                   EVP_PKEY_get0_type_name(k->pkey) ? EVP_PKEY_get0_type_name(k->pkey) : "unknown");
}

/* The hint: hex SHA-256 of the public key written as PEM SubjectPublicKeyInfo. */
static int make_hint(tq_oms_key *k, const char *path, tq_err *e)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *data = NULL;
    long n;
    if (!b || PEM_write_bio_PUBKEY(b, k->pkey) != 1 || (n = BIO_get_mem_data(b, &data)) <= 0) {
        BIO_free(b);
        return tq_fail(e, TQ_EDATA, "%s: cannot write the public key: %s", path, ossl_reason());
    }
    unsigned char d[32];
    tq_sha256_buf(data, (size_t)n, d);
    tq_hex(d, 32, k->hint);
    BIO_free(b);
    return 0;
}

int tq_oms_key_load(const char *path, int is_private, tq_oms_key **out, tq_err *e)
{
    char *text;
    size_t len;
    *out = NULL;
    if (tq_read_small_file(path, MAX_KEY_FILE, &text, &len, e) != 0)
        return -1;
    tq_oms_key *k = tq_calloc(1, sizeof *k, e);
    BIO *b = k ? BIO_new_mem_buf(text, (int)len) : NULL;
    int rc = -1, asked = 0;
    if (k && !b)
        tq_fail(e, TQ_ENOMEM, "out of memory reading %s", path);
    if (b) {
        ERR_clear_error();
        k->pkey = is_private ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, &asked)
                             : PEM_read_bio_PUBKEY(b, NULL, no_passphrase, &asked);
        if (!k->pkey && asked)
            tq_fail(e, TQ_EUNSUP, "%s: the private key is encrypted; give tq an unencrypted PEM key", path);
        else if (!k->pkey && is_private)
            tq_fail(e, TQ_EDATA, "%s: no PEM private key (PKCS #8 or EC PRIVATE KEY): %s", path, ossl_reason());
        else if (!k->pkey)
            tq_fail(e, TQ_EDATA, "%s: no PEM public key (BEGIN PUBLIC KEY): %s", path, ossl_reason());
        else if (classify(k, path, e) == 0 && make_hint(k, path, e) == 0)
            rc = 0;
    }
    ERR_clear_error();
    BIO_free(b);
    /* the private key's PEM text is wiped before it is freed */
    memset(text, 0, len);
    free(text);
    if (rc != 0) {
        tq_oms_key_free(k);
        return -1;
    }
    *out = k;
    return 0;
}

void tq_oms_key_free(tq_oms_key *k)
{
    if (!k)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

const char *tq_oms_key_type(const tq_oms_key *k)
{
    return k->type;
}

const char *tq_oms_key_hint(const tq_oms_key *k)
{
    return k->hint;
}

int tq_oms_key_sign(const tq_oms_key *k, const unsigned char *msg, size_t n, unsigned char **sig, size_t *slen,
                    tq_err *e)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t cap = 0;
    unsigned char *s = NULL;
    int rc = -1;
    ERR_clear_error();
    if (!ctx)
        tq_fail(e, TQ_ENOMEM, "out of memory signing");
    else if (EVP_DigestSignInit(ctx, NULL, k->md, NULL, k->pkey) != 1 || EVP_DigestSign(ctx, NULL, &cap, msg, n) != 1)
        tq_fail(e, TQ_EIO, "signing failed: %s", ossl_reason());
    else if ((s = tq_malloc(cap ? cap : 1, e)) && EVP_DigestSign(ctx, s, &cap, msg, n) != 1)
        tq_fail(e, TQ_EIO, "signing failed: %s", ossl_reason());
    else if (s) {
        *sig = s;
        *slen = cap;
        s = NULL;
        rc = 0;
    }
    free(s);
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

int tq_oms_key_verify(const tq_oms_key *k, const unsigned char *msg, size_t n, const unsigned char *sig,
                      size_t slen, const char *what, tq_err *e)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    ERR_clear_error();
    int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, k->md, NULL, k->pkey) == 1 &&
             EVP_DigestVerify(ctx, sig, slen, msg, n) == 1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    if (!ctx)
        return tq_fail(e, TQ_ENOMEM, "out of memory verifying %s", what);
    return ok ? 0 : tq_fail(e, TQ_EDATA, "%s: the signature does not verify with this %s key (another key, or the "
                            "signed payload was changed)", what, k->type);
}
