/* The next-token choice: greedy argmax, or temperature / top-k / top-p sampling from a seeded stream (runtime.h, tq_run_sampling). */
#include "runtime/rt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tq_run_sampler {
    tq_run_sampling s;
    uint64_t vocab;
    uint64_t rng[4];  /* xoshiro256** state */
    double *sc;       /* [vocab] scores: logits / temperature */
    double *w;        /* [vocab] exp(score - max) of the kept ids, 0 for the others */
    struct scored {
        double v;
        int32_t id;
    } *ord;           /* [vocab] top-p candidates sorted by score, descending (ties: lower id first) */
    double *heap;     /* [top_k] top-k's min-heap */
};

/* splitmix64 (Steele, Lea and Flood 2014; the seeding xoshiro's authors recommend). */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** 1.0 (Blackman and Vigna, prng.di.unimi.it). */
static uint64_t xoshiro_next(uint64_t s[4])
{
    const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

int tq_run_sampler_new(const tq_run_sampling *s, uint64_t vocab, tq_run_sampler **out, tq_err *e)
{
    *out = NULL;
    if (!(s->temperature >= 0) || s->temperature > 1e6)
        return tq_fail(e, TQ_EUSAGE, "temperature %g: expected 0 (greedy) or above", s->temperature);
    if (!(s->top_p >= 0 && s->top_p <= 1))
        return tq_fail(e, TQ_EUSAGE, "top-p %g: expected a value in (0, 1]", s->top_p);
    if (vocab == 0 || vocab > INT32_MAX)
        return tq_fail(e, TQ_EUSAGE, "vocabulary of %llu tokens", (unsigned long long)vocab);
    tq_run_sampler *r = tq_calloc(1, sizeof *r, e);
    if (!r)
        return -1;
    r->s = *s;
    r->vocab = vocab;
    uint64_t x = s->seed;
    for (int i = 0; i < 4; i++)
        r->rng[i] = splitmix64(&x);
    if (s->temperature > 0 &&
        (!(r->sc = tq_malloc(vocab * sizeof *r->sc, e)) || !(r->w = tq_malloc(vocab * sizeof *r->w, e)) ||
         !(r->ord = tq_malloc(vocab * sizeof *r->ord, e)) ||
         !(r->heap = tq_malloc((s->top_k > 0 && s->top_k < vocab ? s->top_k : 1) * sizeof *r->heap, e)))) {
        tq_run_sampler_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

void tq_run_sampler_free(tq_run_sampler *s)
{
    if (!s)
        return;
    free(s->sc);
    free(s->w);
    free(s->ord);
    free(s->heap);
    free(s);
}

static int32_t argmax_f(const float *v, uint64_t n)
{
    uint64_t b = 0;
    for (uint64_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return (int32_t)b;
}

/* qsort order of ord[]: score descending, then id ascending (a total order, so every qsort
 * gives the same array). */
static int by_score_desc(const void *a, const void *b)
{
    const struct scored *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The top_k-th largest score (1 <= k < vocab): the root of a min-heap of the k largest, built in
 * one pass over the ids (O(V log k); the value does not depend on how it is found). */
static double kth_largest(tq_run_sampler *s, uint64_t k)
{
    double *h = s->heap;
    for (uint64_t i = 0; i < s->vocab; i++) {
        double v = s->sc[i];
        uint64_t j;
        if (i < k) { /* sift up */
            for (j = i; j > 0 && h[(j - 1) / 2] > v; j = (j - 1) / 2)
                h[j] = h[(j - 1) / 2];
        } else if (v > h[0]) { /* replace the root, sift down */
            for (j = 0;;) {
                uint64_t c = 2 * j + 1;
                if (c >= k)
                    break;
                if (c + 1 < k && h[c + 1] < h[c])
                    c++;
                if (h[c] >= v)
                    break;
                h[j] = h[c];
                j = c;
            }
        } else {
            continue;
        }
        h[j] = v;
    }
    return h[0];
}

/* w[i] = exp(score_i - max) for the kept ids, 0 for the filtered ones; -1 when a logit is not
 * finite (the step is then greedy). */
static int weights(tq_run_sampler *s, const float *logits)
{
    const uint64_t V = s->vocab;
    const tq_run_sampling *p = &s->s;
    double *sc = s->sc, *w = s->w, m = -INFINITY;
    for (uint64_t i = 0; i < V; i++) {
        if (!isfinite(logits[i]))
            return -1;
        sc[i] = (double)logits[i] / p->temperature; /* TemperatureLogitsWarper */
        m = sc[i] > m ? sc[i] : m;
    }
    /* TopKLogitsWarper: remove the scores below the top_k-th largest (ties with it kept) */
    double kth = p->top_k > 0 && p->top_k < V ? kth_largest(s, p->top_k) : -INFINITY;
    for (uint64_t i = 0; i < V; i++)
        w[i] = sc[i] >= kth ? rt_exp(sc[i] - m) : 0;
    if (!(p->top_p > 0 && p->top_p < 1))
        return 0;
    /* TopPLogitsWarper: the kept tokens' softmax w / z summed from the smallest score up;
     * every token whose running sum is <= 1 - top_p is removed, never the largest. */
    double z = 0, cut = 1 - p->top_p;
    uint64_t n = 0;
    for (uint64_t i = 0; i < V; i++)
        if (w[i] > 0) {
            z += w[i];
            n++;
        }
    /* Sorting only what can matter: a token with w <= thr comes, in ascending order, after
     * only such tokens, whose sum is at most n thr < cut z (the 1e-9 margin covers the
     * rounding of any order of summing them), so it is removed; their sum starts the running
     * sum. The largest has w = 1 > thr, so it is never among them. */
    double thr = cut * z / (double)n * (1 - 1e-9), cum = 0;
    uint64_t c = 0;
    for (uint64_t i = 0; i < V; i++)
        if (w[i] > 0 && w[i] <= thr) {
            cum += w[i] / z;
            w[i] = 0;
        } else if (w[i] > 0) {
            s->ord[c++] = (struct scored){sc[i], (int32_t)i};
        }
    qsort(s->ord, c, sizeof *s->ord, by_score_desc);
    for (uint64_t j = c; j-- > 1;) {
        cum += w[s->ord[j].id] / z;
        if (!(cum <= cut))
            break;
        w[s->ord[j].id] = 0;
    }
    return 0;
}

void tq_run_sampler_dist(tq_run_sampler *s, const float *logits, double *p)
{
    const uint64_t V = s->vocab;
    if (s->s.temperature == 0 || weights(s, logits) != 0) {
        for (uint64_t i = 0; i < V; i++)
            p[i] = 0;
        p[argmax_f(logits, V)] = 1;
        return;
    }
    double z = 0;
    for (uint64_t i = 0; i < V; i++)
        z += s->w[i];
    for (uint64_t i = 0; i < V; i++)
        p[i] = s->w[i] / z;
}

int32_t tq_run_sampler_next(tq_run_sampler *s, const float *logits)
{
    const uint64_t V = s->vocab;
    if (s->s.temperature == 0)
        return argmax_f(logits, V);
    double u = (double)(xoshiro_next(s->rng) >> 11) * 0x1p-53; /* [0, 1), 53 bits */
    if (weights(s, logits) != 0)
        return argmax_f(logits, V);
    double z = 0;
    int32_t last = 0;
    for (uint64_t i = 0; i < V; i++)
        if (s->w[i] > 0) {
            z += s->w[i];
            last = (int32_t)i;
        }
    double target = u * z, acc = 0;
    for (uint64_t i = 0; i < V; i++) {
        if (s->w[i] <= 0)
            continue;
        acc += s->w[i];
        if (target < acc)
            return (int32_t)i;
    }
    return last; /* rounding: u * z at the very top */
}
