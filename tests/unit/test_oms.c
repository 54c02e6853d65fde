/* Unit tests of the model-signature text pieces against published definitions: base64 (RFC
 * 4648's test vectors), the DSSE PAE (the DSSE spec's worked example), model_signing's order
 * of file names (Python's PurePosixPath ordering, worked out by hand), and the round trip of
 * a payload and a bundle through tq's own reader. */
#include "tests/unit/check.h"
#include "verify/verify_internal.h"

static void test_base64_rfc4648(void)
{
    /* RFC 4648, section 10 */
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    tq_err err;
    for (int i = 0; i < 7; i++) {
        char *s = tq_oms_b64_encode((const unsigned char *)plain[i], strlen(plain[i]), &err);
        CHECKF(s && !strcmp(s, enc[i]), "encode '%s': '%s'", plain[i], s ? s : "(null)");
        free(s);
        unsigned char *d = NULL;
        size_t n = 0;
        CHECK_OK(tq_oms_b64_decode(enc[i], strlen(enc[i]), &d, &n, "t", &err));
        CHECKF(d && n == strlen(plain[i]) && !memcmp(d, plain[i], n), "decode '%s'", enc[i]);
        free(d);
        /* without padding, as DSSE allows */
        size_t l = strlen(enc[i]);
        while (l && enc[i][l - 1] == '=')
            l--;
        d = NULL;
        CHECK_OK(tq_oms_b64_decode(enc[i], l, &d, &n, "t", &err));
        CHECKF(d && n == strlen(plain[i]) && !memcmp(d, plain[i], n), "decode unpadded '%.*s'", (int)l, enc[i]);
        free(d);
    }
    /* URL-safe alphabet: 0xfb 0xff = "+/8=" standard, "-_8=" URL-safe */
    unsigned char *d = NULL;
    size_t n = 0;
    CHECK_OK(tq_oms_b64_decode("-_8=", 4, &d, &n, "t", &err));
    CHECK(d && n == 2 && d[0] == 0xfb && d[1] == 0xff);
    free(d);
    static const char *const bad[] = {"Zg=", "Z", "Zm9v!", "Zm 9v", "Zh==", "Zm9=", "Zg===", "=Zg=", "Zm9vYg=a"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        d = NULL;
        CHECKF(tq_oms_b64_decode(bad[i], strlen(bad[i]), &d, &n, "t", &err) != 0 && !d, "'%s' accepted", bad[i]);
        CHECKF(strstr(err.msg, "bad base64"), "'%s': %s", bad[i], err.msg);
    }
}

static void test_pae_dsse_example(void)
{
    /* the DSSE protocol's example: PAE of ("http://example.com/HelloWorld", "hello world") */
    static const char want[] = "DSSEv1 29 http://example.com/HelloWorld 11 hello world";
    tq_err err;
    size_t n = 0;
    unsigned char *p = tq_oms_pae("http://example.com/HelloWorld", (const unsigned char *)"hello world", 11, &n, &err);
    CHECK(p && n == strlen(want) && !memcmp(p, want, n));
    free(p);
    p = tq_oms_pae("t", NULL, 0, &n, &err);
    CHECK(p && n == 13 && !memcmp(p, "DSSEv1 1 t 0 ", 13));
    free(p);
}

static void test_name_order(void)
{
    /* PurePosixPath compares component lists: "d0/b" < "d0-x" although '-' < '/' in bytes */
    CHECK(tq_oms_name_cmp("d0/b", "d0-x") < 0);
    CHECK(strcmp("d0/b", "d0-x") > 0);
    CHECK(tq_oms_name_cmp("a/b", "a") > 0);
    CHECK(tq_oms_name_cmp("a", "a/b") < 0);
    CHECK(tq_oms_name_cmp("a.b/c", "a/c") > 0);
    CHECK(tq_oms_name_cmp("f0", "f0") == 0);
    CHECK(tq_oms_name_cmp("d1/f10", "f0") < 0);
    CHECK(tq_oms_name_cmp("Z", "a") < 0);
    CHECK(tq_oms_name_cmp("\xc3\xa9", "z") > 0); /* U+00E9 after 'z', as in code points */
}

static void test_payload_roundtrip(void)
{
    tq_err err;
    tq_oms_res res[2] = {{(char *)"a/b", {1}}, {(char *)"c", {2}}};
    char *ign[] = {(char *)".git", (char *)"model.sig"};
    tq_oms_stmt s = {.name = (char *)"m", .allow_symlinks = 1, .ignore = ign, .n_ignore = 2, .res = res, .n_res = 2};
    tq_oms_subject(res, 2, s.subject);
    size_t len = 0;
    char *p = tq_oms_payload(&s, &len, &err);
    CHECK(p != NULL);
    tq_oms_stmt back;
    CHECK_OK(tq_oms_payload_parse(p, len, "t", &back, &err));
    CHECK(back.n_res == 2 && !strcmp(back.res[0].name, "a/b") && back.res[1].sha256[0] == 2);
    CHECK(back.allow_symlinks == 1 && back.n_ignore == 2 && !strcmp(back.ignore[1], "model.sig"));
    CHECK(!strcmp(back.name, "m") && !memcmp(back.subject, s.subject, 32));
    tq_oms_stmt_free(&back);
    /* a subject that does not match the resources */
    s.subject[0] ^= 1;
    char *q = tq_oms_payload(&s, &len, &err);
    CHECK(q && tq_oms_payload_parse(q, len, "t", &back, &err) != 0 && strstr(err.msg, "does not match the resources"));
    free(q);
    unsigned char sig[3] = {1, 2, 3};
    size_t blen = 0;
    char *b = tq_oms_bundle_make((const unsigned char *)p, strlen(p), sig, 3, "abc", &blen, &err);
    tq_oms_env env;
    CHECK(b != NULL);
    CHECK_OK(tq_oms_bundle_parse(b, blen, "t", &env, &err));
    CHECK(env.payload_len == strlen(p) && !memcmp(env.payload, p, env.payload_len));
    CHECK(env.sig_len == 3 && env.sig[2] == 3 && env.hint && !strcmp(env.hint, "abc"));
    CHECK(!strcmp(env.payload_type, TQ_OMS_PAYLOAD_TYPE));
    tq_oms_env_free(&env);
    /* every cut of the bundle is refused with a message */
    for (size_t cut = 0; cut < blen; cut += 7) {
        CHECKF(tq_oms_bundle_parse(b, cut, "t", &env, &err) != 0 && err.msg[0], "cut at %zu accepted", cut);
    }
    free(b);
    free(p);
}

int main(void)
{
    RUN(test_base64_rfc4648);
    RUN(test_pae_dsse_example);
    RUN(test_name_order);
    RUN(test_payload_roundtrip);
    TEST_MAIN_END();
}
