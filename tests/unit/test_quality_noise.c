/* tq-verify quality --noise: the noise baseline model (tq_quality_noise_model) holds REF with
 * iid Gaussian noise of the requested energy in exactly the tensors that differ, none
 * elsewhere, the same bytes for the same seed and other draws for another. Checked against
 * the definition (moments of the added values), not against a second copy of the code. */
#include "formats/formats.h"
#include "testdata/mkmodel/mkmodel.h"
#include "tests/unit/check.h"
#include "verify/verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *read_f32(const tq_model *m, const char *name, uint64_t *n)
{
    tq_err err = {0};
    const tq_model_tensor *t = tq_model_find(m, name);
    if (!t)
        return NULL;
    void *raw = malloc(t->info.nbytes);
    float *f = malloc(t->info.nelem * sizeof *f);
    if (!raw || !f || tq_model_read(t, 0, raw, t->info.nbytes, &err) || tq_to_f32(t->info.dtype, raw, f, t->info.nelem, &err)) {
        free(raw), free(f);
        return NULL;
    }
    free(raw);
    *n = t->info.nelem;
    return f;
}

static void test_noise_model(void)
{
    tq_err err = {0};
    tq_mk_opts o;
    CHECK_OK(tq_mk_preset(&o, TQ_MK_QWEN3, "tiny", &err));
    o.quiet = 1;
    o.seed = 31;
    o.layers = 1;
    const char *ref = t_path("noise-ref");
    CHECK_OK(tq_mkmodel(ref, &o, &err));
    tq_model *m = NULL;
    CHECK_OK(tq_model_open(&m, ref, &err));
    /* a report in which two tensors differ, with chosen error energies */
    static const char *names[] = {"lm_head.weight", "model.layers.0.mlp.down_proj.weight"};
    const double rel[] = {0.11, 0.03};
    tq_quality_tensor t[2];
    tq_quality_report r = {.n = 2, .t = t};
    for (int i = 0; i < 2; i++) {
        uint64_t n;
        float *w = read_f32(m, names[i], &n);
        CHECK(w != NULL);
        double s = 0;
        for (uint64_t j = 0; w && j < n; j++)
            s += (double)w[j] * w[j];
        t[i] = (tq_quality_tensor){.name = (char *)names[i], .params = n, .sum2 = s, .err2 = rel[i] * s};
        free(w);
    }
    const char *d1 = t_path("noise-1"), *d2 = t_path("noise-1b"), *d3 = t_path("noise-2");
    CHECK_OK(tq_quality_noise_model(ref, &r, 1, d1, &err));
    CHECK_OK(tq_quality_noise_model(ref, &r, 1, d2, &err));
    CHECK_OK(tq_quality_noise_model(ref, &r, 2, d3, &err));
    tq_model *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tq_model_open(&a, d1, &err));
    CHECK_OK(tq_model_open(&b, d2, &err));
    CHECK_OK(tq_model_open(&c, d3, &err));
    CHECK(a && b && c && a->n_tensors == m->n_tensors);
    for (size_t i = 0; a && b && c && i < m->n_tensors; i++) {
        const tq_tensor_info *ti = &m->tensors[i].info;
        uint64_t n0, n1, n2, n3;
        float *w = read_f32(m, ti->name, &n0), *x = read_f32(a, ti->name, &n1), *y = read_f32(b, ti->name, &n2),
              *z = read_f32(c, ti->name, &n3);
        CHECK(w && x && y && z && n0 == n1 && n1 == n2 && n2 == n3);
        int k = !strcmp(ti->name, names[0]) ? 0 : !strcmp(ti->name, names[1]) ? 1 : -1;
        const tq_model_tensor *at = tq_model_find(a, ti->name);
        if (k < 0) { /* untouched: same dtype, same values */
            CHECKF(at->info.dtype == ti->dtype && !memcmp(w, x, n0 * sizeof *w), "%s changed", ti->name);
        } else {
            CHECKF(at->info.dtype == TQ_DT_F32, "%s: noisy tensor not f32", ti->name);
            CHECKF(!memcmp(x, y, n0 * sizeof *x), "%s: the same seed gave other draws", ti->name);
            CHECKF(memcmp(x, z, n0 * sizeof *x) != 0, "%s: another seed gave the same draws", ti->name);
            double sigma2 = t[k].err2 / (double)n0, m1 = 0, m2 = 0, m4 = 0, wx = 0;
            for (uint64_t j = 0; j < n0; j++) {
                double d = (double)x[j] - (double)w[j];
                m1 += d;
                m2 += d * d;
                m4 += d * d * d * d;
                wx += d * w[j];
            }
            double nn = (double)n0, var = m2 / nn, kurt = (m4 / nn) / (var * var);
            /* n0 draws (32768 or more): the energy, the mean, the correlation with w and the
             * kurtosis (3 for a normal) each within 5 of their standard errors */
            printf("  %s: %llu draws, energy %.4f of asked, mean %.2g sd, corr %.2g, kurtosis %.3f\n", ti->name,
                   (unsigned long long)n0, m2 / t[k].err2, m1 / nn / sqrt(sigma2), wx / sqrt(m2 * t[k].sum2), kurt);
            CHECKF(nn >= 32768 && fabs(m2 / t[k].err2 - 1) < 5 * sqrt(2 / nn), "%s: energy %.5f of asked", ti->name,
                   m2 / t[k].err2);
            CHECKF(fabs(m1 / nn) < 5 * sqrt(sigma2 / nn), "%s: noise mean %.3g", ti->name, m1 / nn);
            CHECKF(fabs(wx / sqrt(m2 * t[k].sum2)) < 5 / sqrt(nn), "%s: noise correlated with w", ti->name);
            CHECKF(fabs(kurt - 3) < 5 * sqrt(24 / nn), "%s: kurtosis %.3f", ti->name, kurt);
        }
        free(w), free(x), free(y), free(z);
    }
    tq_model_close(a);
    tq_model_close(b);
    tq_model_close(c);
    tq_model_close(m);
}

int main(void)
{
    RUN(test_noise_model);
    TEST_MAIN_END();
}
