/* The sampler (runtime/sample.c) against distributions computed by hand from the definitions of HuggingFace transformers' logits warpers, and the text generation entry point (runtime/generate_text.c) on the trained qwen3-tiny model.
 *
 * Oracle for the filters: transformers/src/transformers/generation/logits_process.py,
 * TemperatureLogitsWarper.__call__ (scores / temperature), TopKLogitsWarper.__call__ (remove
 * scores < torch.topk(scores, top_k)[0][..., -1]: ties with the k-th kept) and
 * TopPLogitsWarper.__call__ (sort ascending, cumulative softmax, remove cumulative <= 1 - top_p,
 * keep the last), applied in that order by generation/utils.py _get_logits_processor. The
 * expected distributions below are worked out on paper from those definitions (comments show
 * the arithmetic), not by a second copy of the code: these tests prove correctness. The draw
 * test is statistical (counts within 5 standard deviations of the distribution), the
 * thread-count test is consistency. */
#include "check.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <string.h>

static tq_run_sampler *mk(double t, uint64_t k, double p, uint64_t seed, uint64_t vocab)
{
    tq_err err = {0};
    tq_run_sampling s = {.temperature = t, .top_k = k, .top_p = p, .seed = seed};
    tq_run_sampler *r = NULL;
    CHECK_OK(tq_run_sampler_new(&s, vocab, &r, &err));
    return r;
}

/* p[] against want[] within 1e-12 (the logits are floats of ln(q), so q is recovered to ~1e-8
 * relative: the tolerance for those cases is given by the caller). */
static int near(const double *p, const double *want, int n, double tol)
{
    for (int i = 0; i < n; i++)
        if (fabs(p[i] - want[i]) > tol) {
            printf("  p[%d] = %.12f, expected %.12f\n", i, p[i], want[i]);
            return 0;
        }
    return 1;
}

/* Logits ln(0.1), ln(0.2), ln(0.3), ln(0.4): softmax gives back 0.1 .. 0.4. */
static void q1234(float *l)
{
    l[0] = logf(0.1f), l[1] = logf(0.2f), l[2] = logf(0.3f), l[3] = logf(0.4f);
}

static void test_temperature(void)
{
    /* logits [0, ln 2]: T = 1 gives 1/3, 2/3; T = 0.5 gives scores [0, 2 ln 2]: 1/5, 4/5 */
    float l[2] = {0, (float)log(2.0)};
    double p[2];
    tq_run_sampler *s = mk(1, 0, 1, 0, 2);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){1.0 / 3, 2.0 / 3}, 2, 1e-7));
    tq_run_sampler_free(s);
    s = mk(0.5, 0, 1, 0, 2);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0.2, 0.8}, 2, 1e-7));
    tq_run_sampler_free(s);
}

static void test_top_k(void)
{
    float l[4];
    double p[4];
    q1234(l);
    /* top-k 2 keeps 0.3 and 0.4: 3/7, 4/7 */
    tq_run_sampler *s = mk(1, 2, 1, 0, 4);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0, 0, 3.0 / 7, 4.0 / 7}, 4, 1e-7));
    tq_run_sampler_free(s);
    /* ties with the k-th are kept (scores < k-th are removed, not "all but k"): logits
     * [1, 3, 3, 2] with top-k 1 keep both 3s, 1/2 each */
    float t[4] = {1, 3, 3, 2};
    s = mk(1, 1, 1, 0, 4);
    tq_run_sampler_dist(s, t, p);
    CHECK(near(p, (double[]){0, 0.5, 0.5, 0}, 4, 1e-15));
    tq_run_sampler_free(s);
    /* top-k at or above the vocabulary keeps all */
    s = mk(1, 9, 1, 0, 4);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0.1, 0.2, 0.3, 0.4}, 4, 1e-7));
    tq_run_sampler_free(s);
}

static void test_top_p(void)
{
    float l[4];
    double p[4];
    q1234(l);
    /* ascending 0.1, 0.2, 0.3, 0.4: cumulative 0.1, 0.3, 0.6, 1.0. top-p 0.5 removes
     * cumulative <= 0.5: 0.1 and 0.2; kept 0.3, 0.4: 3/7, 4/7 */
    tq_run_sampler *s = mk(1, 0, 0.5, 0, 4);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0, 0, 3.0 / 7, 4.0 / 7}, 4, 1e-7));
    tq_run_sampler_free(s);
    /* top-p 0.75 removes cumulative <= 0.25: only 0.1; kept 2/9, 3/9, 4/9 */
    s = mk(1, 0, 0.75, 0, 4);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0, 2.0 / 9, 3.0 / 9, 4.0 / 9}, 4, 1e-7));
    tq_run_sampler_free(s);
    /* top-p 0.35 removes cumulative <= 0.65: 0.1, 0.2, 0.3; 0.4 alone */
    s = mk(1, 0, 0.35, 0, 4);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0, 0, 0, 1}, 4, 0));
    tq_run_sampler_free(s);
    /* a tiny top-p removes all but the last (min_tokens_to_keep = 1) */
    s = mk(1, 0, 1e-9, 0, 4);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0, 0, 0, 1}, 4, 0));
    tq_run_sampler_free(s);
}

/* The order matters, and is transformers': temperature, then top-k, then top-p. */
static void test_order(void)
{
    float l[4];
    double p[4];
    q1234(l);
    /* top-k 2 first: kept 0.3, 0.4 renormalised to 3/7 = 0.4286, 4/7 = 0.5714; then top-p 0.5
     * removes cumulative <= 0.5: 3/7. Only the last is left. (Top-p first would keep 0.3 and
     * 0.4, then top-k 2 both.) */
    tq_run_sampler *s = mk(1, 2, 0.5, 0, 4);
    tq_run_sampler_dist(s, l, p);
    CHECK(near(p, (double[]){0, 0, 0, 1}, 4, 0));
    tq_run_sampler_free(s);
    /* temperature 2 before top-p 0.65: scores ln(q)/2, softmax ∝ sqrt(q): 0.31623, 0.44721,
     * 0.54772, 0.63246 (sum 1.94362) = 0.16270, 0.23009, 0.28180, 0.32540; cumulative 0.16270,
     * 0.39279: 1 - 0.65 = 0.35 removes only the first; kept ∝ sqrt(0.2), sqrt(0.3), sqrt(0.4).
     * (Top-p on the untempered 0.1 .. 0.4 would remove 0.1 and 0.2: cumulative 0.3 <= 0.35.) */
    s = mk(2, 0, 0.65, 0, 4);
    tq_run_sampler_dist(s, l, p);
    double z = sqrt(0.2) + sqrt(0.3) + sqrt(0.4);
    CHECK(near(p, (double[]){0, sqrt(0.2) / z, sqrt(0.3) / z, sqrt(0.4) / z}, 4, 1e-7));
    tq_run_sampler_free(s);
}

/* Greedy is the argmax, lowest id on ties, and draws nothing; top-k 1 and a tiny top-p sample
 * the argmax whatever the seed. */
static void test_greedy(void)
{
    float l[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    double p[5];
    tq_run_sampler *g = mk(0, 0, 0, 0, 5);
    CHECK(tq_run_sampler_next(g, l) == 1);
    tq_run_sampler_dist(g, l, p);
    CHECK(p[1] == 1 && p[0] == 0 && p[3] == 0);
    tq_run_sampler_free(g);
    float u[5] = {0.5f, 2.0f, -1.0f, 2.5f, 1.9f};
    for (uint64_t seed = 0; seed < 50; seed++) {
        tq_run_sampler *k = mk(1.5, 1, 1, seed, 5), *t = mk(1.5, 0, 1e-9, seed, 5);
        for (int i = 0; i < 4; i++) {
            CHECK(tq_run_sampler_next(k, u) == 3);
            CHECK(tq_run_sampler_next(t, u) == 3);
        }
        tq_run_sampler_free(k);
        tq_run_sampler_free(t);
    }
}

/* Draws follow the distribution: 40000 draws from 0.1 .. 0.4, each count within 5 standard
 * deviations (sqrt(n p (1 - p)) <= 98) of n p. And the same seed gives the same draws. */
static void test_draws(void)
{
    float l[4];
    q1234(l);
    const int n = 40000;
    int c[4] = {0};
    tq_run_sampler *s = mk(1, 0, 1, 12345, 4), *s2 = mk(1, 0, 1, 12345, 4), *s3 = mk(1, 0, 1, 12346, 4);
    int same = 1, differ = 0;
    for (int i = 0; i < n; i++) {
        int32_t a = tq_run_sampler_next(s, l), b = tq_run_sampler_next(s2, l), d = tq_run_sampler_next(s3, l);
        CHECK(a >= 0 && a < 4);
        c[a]++;
        same &= a == b;
        differ |= a != d;
    }
    for (int i = 0; i < 4; i++) {
        double q = 0.1 * (i + 1), sd = sqrt(n * q * (1 - q));
        CHECKF(fabs(c[i] - n * q) < 5 * sd, "token %d drawn %d times of %d, expected about %.0f", i, c[i], n, n * q);
    }
    CHECK(same);
    CHECK(differ);
    tq_run_sampler_free(s);
    tq_run_sampler_free(s2);
    tq_run_sampler_free(s3);
}

/* On a large vocabulary (where the sampler takes its shortcuts: a heap for top-k, skipping the
 * tokens top-p must remove before sorting), the kept set and the distribution equal the
 * warpers' definitions applied literally: sort everything, cut, softmax, cumulative sum in
 * ascending order. The reference below is written from transformers' code, independently of
 * runtime/sample.c. */
typedef struct ref_tok {
    double v;
    int id;
} ref_tok;
static int ref_desc(const void *a, const void *b)
{
    const ref_tok *x = a, *y = b;
    return x->v != y->v ? (x->v > y->v ? -1 : 1) : (x->id > y->id) - (x->id < y->id);
}
static void ref_dist(const float *l, int V, double T, int k, double P, double *p)
{
    ref_tok *t = malloc(V * sizeof *t);
    char *keep = malloc(V);
    for (int i = 0; i < V; i++) {
        t[i] = (ref_tok){l[i] / T, i};
        keep[i] = 1;
    }
    qsort(t, V, sizeof *t, ref_desc); /* descending; ascending is this read backwards */
    int n = V;
    if (k > 0 && k < V) { /* scores < the k-th largest removed */
        n = k;
        while (n < V && t[n].v >= t[k - 1].v)
            n++;
        for (int j = n; j < V; j++)
            keep[t[j].id] = 0;
    }
    double m = t[0].v, z = 0;
    for (int j = 0; j < n; j++)
        z += exp(t[j].v - m);
    if (P > 0 && P < 1) { /* ascending cumulative softmax <= 1 - P removed, the last kept */
        double cum = 0;
        for (int j = n - 1; j >= 1; j--) {
            cum += exp(t[j].v - m) / z;
            if (cum > 1 - P)
                break;
            keep[t[j].id] = 0;
        }
    }
    double zk = 0;
    for (int i = 0; i < V; i++)
        zk += keep[i] ? exp(l[i] / T - m) : 0;
    for (int i = 0; i < V; i++)
        p[i] = keep[i] ? exp(l[i] / T - m) / zk : 0;
    free(t);
    free(keep);
}

static void test_large_vocab(void)
{
    const int V = 50000;
    float *l = malloc(V * sizeof *l);
    double *p = malloc(V * sizeof *p), *want = malloc(V * sizeof *want);
    uint64_t seed = 17;
    for (int i = 0; i < V; i++)
        l[i] = (float)(3 * t_nrand(&seed));
    l[123] = l[4567]; /* a tie */
    struct {
        double t;
        int k;
        double p;
    } cases[] = {{1, 40, 1}, {0.7, 0, 0.9}, {1.3, 0, 0.5}, {1, 50, 0.95}, {0.5, 1000, 0.99}, {2, 0, 0.999}, {1, 1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tq_run_sampler *s = mk(cases[c].t, (uint64_t)cases[c].k, cases[c].p, 0, V);
        tq_run_sampler_dist(s, l, p);
        ref_dist(l, V, cases[c].t, cases[c].k, cases[c].p, want);
        int kept = 0, kept_ref = 0, same = 1;
        double worst = 0;
        for (int i = 0; i < V; i++) {
            kept += p[i] > 0;
            kept_ref += want[i] > 0;
            same &= (p[i] > 0) == (want[i] > 0);
            worst = fmax(worst, fabs(p[i] - want[i]));
        }
        CHECKF(same && worst < 1e-9, "T %g top-k %d top-p %g: %d kept, reference %d, max |dp| %g", cases[c].t,
               cases[c].k, cases[c].p, kept, kept_ref, worst);
        CHECK(kept >= 1 && kept < V);
        tq_run_sampler_free(s);
    }
    free(l);
    free(p);
    free(want);
}

static void test_bad_settings(void)
{
    tq_err err = {0};
    tq_run_sampler *r = NULL;
    tq_run_sampling s = {.temperature = -1};
    CHECK(tq_run_sampler_new(&s, 4, &r, &err) != 0 && err.code == TQ_EUSAGE && !r);
    s = (tq_run_sampling){.temperature = 1, .top_p = 1.5};
    CHECK(tq_run_sampler_new(&s, 4, &r, &err) != 0 && err.code == TQ_EUSAGE && !r);
    s = (tq_run_sampling){.temperature = NAN};
    CHECK(tq_run_sampler_new(&s, 4, &r, &err) != 0 && !r);
}

/* ------------------------------------------------ text generation on qwen3-tiny */
typedef struct pieces {
    char buf[8192];
    size_t len;
    int calls;
} pieces;

static int on_text(void *user, const char *t, size_t n)
{
    pieces *p = user;
    if (p->len + n < sizeof p->buf) {
        memcpy(p->buf + p->len, t, n);
        p->len += n;
    }
    p->calls++;
    return 0;
}

static char model_dir[1024];

static int open_tiny(tq_runner **r, tq_tok **t, int threads, const tq_run_sampling *smp)
{
    tq_err err = {0};
    const char *root = getenv("TQ_ROOT");
    snprintf(model_dir, sizeof model_dir, "%s/testdata/models/qwen3-tiny", root ? root : ".");
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.threads = threads;
    if (smp)
        o.sampling = *smp;
    if (tq_tok_load(model_dir, t, &err) != 0 || tq_runner_open(r, model_dir, &o, &err) != 0) {
        printf("  %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* The text handed to the callback, piece by piece, is the result's text and the tokenizer's
 * decode of the generated ids; it is real English-looking text (the model was trained). */
static void test_generate_text(void)
{
    tq_runner *r;
    tq_tok *t;
    tq_err err = {0};
    if (open_tiny(&r, &t, 1, NULL) != 0) {
        CHECK(0);
        return;
    }
    pieces pc = {0};
    tq_run_text_opts to = {.max_tokens = 24, .stop_at_eos = 1, .on_text = on_text, .user = &pc};
    tq_run_text_result res;
    tq_run_stats st;
    const char *prompt = "The module";
    CHECK_OK(tq_runner_generate_text(r, t, prompt, strlen(prompt), &to, &res, &st, &err));
    char *dec = NULL;
    size_t dl = 0;
    CHECK_OK(tq_tok_decode(t, res.tokens, res.n_tokens, &dec, &dl, &err));
    CHECK(res.n_tokens == st.generated_tokens && res.n_tokens >= 1 && res.n_tokens <= 24);
    CHECK(res.n_prompt == 2 && res.prompt_ids[0] >= 0);
    CHECK(pc.len == res.text_len && !memcmp(pc.buf, res.text, pc.len));
    CHECKF(!res.stopped && dl == res.text_len && !memcmp(dec, res.text, dl), "decode '%s', streamed '%s'", dec,
           res.text);
    CHECK(pc.calls >= 2); /* streamed, not handed over at the end */
    size_t letters = 0;
    for (size_t i = 0; i < res.text_len; i++)
        letters += (res.text[i] | 32) >= 'a' && (res.text[i] | 32) <= 'z';
    CHECKF(letters >= 20, "'%s'", res.text);
    free(dec);
    tq_run_text_result_free(&res);
    tq_runner_close(r);
    tq_tok_free(t);
}

/* A fixed seed gives the same sampled tokens for 1 and 3 threads (the logits do not depend on
 * the thread count and the sampler runs on one), and a sampled run differs from greedy. */
static void test_sampled_threads(void)
{
    tq_run_sampling smp = {.temperature = 1.0, .top_k = 40, .top_p = 0.95, .seed = 7};
    int32_t ids[2][32];
    size_t n[2] = {0};
    for (int k = 0; k < 2; k++) {
        tq_runner *r;
        tq_tok *t;
        tq_err err = {0};
        if (open_tiny(&r, &t, k ? 3 : 1, &smp) != 0) {
            CHECK(0);
            return;
        }
        tq_run_text_opts to = {.max_tokens = 32};
        tq_run_text_result res;
        CHECK_OK(tq_runner_generate_text(r, t, "The module", 10, &to, &res, NULL, &err));
        n[k] = res.n_tokens;
        if (res.tokens)
            memcpy(ids[k], res.tokens, res.n_tokens * sizeof *ids[k]);
        tq_run_text_result_free(&res);
        tq_runner_close(r);
        tq_tok_free(t);
    }
    CHECK(n[0] == 32 && n[1] == 32 && !memcmp(ids[0], ids[1], sizeof ids[0]));
}

int main(void)
{
    RUN(test_temperature);
    RUN(test_top_k);
    RUN(test_top_p);
    RUN(test_order);
    RUN(test_greedy);
    RUN(test_draws);
    RUN(test_large_vocab);
    RUN(test_bad_settings);
    RUN(test_generate_text);
    RUN(test_sampled_threads);
    TEST_MAIN_END();
}
