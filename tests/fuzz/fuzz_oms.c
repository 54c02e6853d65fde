/* Fuzz target: model-signature parsing on arbitrary bytes (the input is a model.sig file):
 * tq_oms_bundle_parse, and tq_oms_payload_parse of the payload it holds and of the input
 * itself (so the statement reader is reached without the base64 layer). Whatever parses must
 * be written again (tq_oms_bundle_make, tq_oms_payload) and read back to the same content. */
#include "verify/verify_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void statement(const char *p, size_t len)
{
    tq_err e;
    tq_oms_stmt s, t;
    if (tq_oms_payload_parse(p, len, "fuzz/payload", &s, &e) != 0) {
        if (s.res || s.name || !e.msg[0])
            abort();
        return;
    }
    unsigned char d[32];
    tq_oms_subject(s.res, s.n_res, d);
    if (memcmp(d, s.subject, 32))
        abort();
    for (size_t i = 0; i < s.n_res; i++)
        if (strcmp(s.res[i].name, ".") && !tq_verify_path_ok(s.res[i].name))
            abort();
    size_t n = 0;
    char *again = tq_oms_payload(&s, &n, &e);
    if (!again || tq_oms_payload_parse(again, n, "again", &t, &e) != 0)
        abort();
    if (strcmp(s.name, t.name) || s.n_res != t.n_res || s.n_ignore != t.n_ignore ||
        s.allow_symlinks != t.allow_symlinks || memcmp(s.subject, t.subject, 32))
        abort();
    for (size_t i = 0; i < s.n_res; i++)
        if (strcmp(s.res[i].name, t.res[i].name) || memcmp(s.res[i].sha256, t.res[i].sha256, 32))
            abort();
    for (size_t i = 0; i < s.n_ignore; i++)
        if (strcmp(s.ignore[i], t.ignore[i]))
            abort();
    free(again);
    tq_oms_stmt_free(&t);
    tq_oms_stmt_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tq_err e;
    tq_oms_env env, back;
    statement((const char *)data, size);
    if (tq_oms_bundle_parse((const char *)data, size, "fuzz/model.sig", &env, &e) != 0) {
        if (env.payload || env.sig || !e.msg[0])
            abort();
        return 0;
    }
    size_t n = 0;
    char *again = tq_oms_bundle_make(env.payload, env.payload_len, env.sig, env.sig_len, env.hint ? env.hint : "",
                                     &n, &e);
    if (!again || tq_oms_bundle_parse(again, n, "again", &back, &e) != 0)
        abort();
    if (back.payload_len != env.payload_len || back.sig_len != env.sig_len ||
        (env.payload_len && memcmp(back.payload, env.payload, env.payload_len)) ||
        memcmp(back.sig, env.sig, env.sig_len) || (env.hint && (!back.hint || strcmp(env.hint, back.hint))))
        abort();
    statement((const char *)env.payload, env.payload_len);
    free(again);
    tq_oms_env_free(&back);
    tq_oms_env_free(&env);
    return 0;
}
