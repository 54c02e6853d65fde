/* The GPU backend's whole decode against the CPU runtime's (docs/metal.md): the fixture models
 * of every family the runtime decodes (dense llama/qwen3, MoE qwen3_moe/mixtral/deepseek_v3/
 * gpt_oss/qwen3_next/qwen3_5_moe) in every weight kind (f32, bf16, f16, MLX affine 4/8, TurboQuant
 * 2/3/4, gpt-oss's MXFP4), resident and streamed from tq-split, decoded 32 teacher-forced
 * positions with tq_run_opts.backend = SHIM — runtime/metal/'s kernels and host logic, run on
 * this CPU — must give every position's logits within a relative error of 1e-4 of the CPU
 * backend's (max |shim - cpu| / max |cpu|) and the same greedy token. Where the build has
 * Metal the same runs go to the GPU, within 1e-3 and with the same tokens. */
#include "runtime/runtime.h"
#include "runtime/metal/rtm_internal.h"
#include "layout/split/split.h"
#include "tests/unit/check.h"
#include "tests/unit/rt_fixture.h"

#include <math.h>
#include <unistd.h>

#define NSEQ 32
/* A mapped split's decode (map_experts) is held bit for bit to the same split loaded resident
 * on its first NSEQ_MAPPED positions only: the same kernels on the same bytes, and a quarter of
 * the decode's time in make check. */
#define NSEQ_MAPPED 8

static int have_metal;
/* The shim's limit: 1e-4 with IEEE arithmetic; the GPU's 1e-3 in the fma and ftz modes
 * (tests/cli/metal-shim-modes.sh; docs/metal.md, Assumptions), which model a GPU that fuses
 * or flushes: the decode must stay within the tolerance the GPU is held to. */
static double shim_tol = 1e-4;

/* How a split's experts are held: read into the cache (or a model directory's tensors),
 * loaded resident, or mapped (tq_run_opts.map_experts). */
enum { READ, RESIDENT, MAPPED };

/* fx_decode_forced (rt_fixture.c) with the decode's stats in *st. */
static int decode(const char *dir, int backend, int mode, int nseq, const int32_t *seq, fx_logits *b,
                  int32_t *toks, tq_run_stats *st, tq_err *err)
{
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.threads = 2;
    o.backend = backend;
    o.resident = mode == RESIDENT;
    o.map_experts = mode == MAPPED;
    o.cache_budget = 1; /* streamed: every expert read again, its buffer freed while kernels are queued */
    o.on_logits = fx_collect;
    o.user = b;
    o.force_tokens = seq + 1;
    o.n_force = (size_t)nseq - 1;
    b->steps = 0;
    tq_runner *r;
    if (tq_runner_open(&r, dir, &o, err) != 0)
        return -1;
    int rc = tq_runner_generate(r, seq, 1, (size_t)nseq, toks, st, err);
    tq_runner_close(r);
    return rc;
}

/* The device backend's counters (tq_run_stats gpu_*, counted in runtime/metal/backend.c, so
 * the shim's are the GPU's) for each fixture decode, held to ceilings: the values measured
 * when the counters were added (2026-12-03, on the shim), so that a change that makes the
 * decode dispatch more kernels, wait for the GPU more often or copy more bytes per token fails
 * here, without a GPU. A change that lowers them should lower the ceilings with it. Kinds:
 * "" resident from the model directory, "-streamed" from tq-split's files with a one-byte
 * cache budget (every expert block read again at every use), "-split-resident" the split
 * loaded resident. No decode stages a byte: resident weights are mapped in place (whole
 * 16 KiB pages, runtime/rt_internal.h) and copy no region; streamed expert blocks are read
 * into the device's memory, which the cache owns (runtime/backend.c, cache_alloc).
 * Waits per token (docs/metal.md, One wait per token): 1 for the logits; none for a MoE layer
 * whose experts are resident in stacked tensors or resident split blocks (the route stays on
 * the GPU and the expert kernels read their ids there: every resident fixture of qwen3_moe,
 * mixtral, gpt_oss and qwen2_moe waits once per token, down from 3); one per MoE layer whose
 * route the CPU reads back: streamed experts read into the cache (the CPU reads the chosen
 * blocks from disk, so it must learn the ids: kept on purpose). "-mapped": the split's layer
 * files mapped (map_experts) and wrapped in place, the experts found by id on the device like
 * resident split blocks: one wait per token, 0 staged bytes, no region copied (3 -> 1 on
 * qwen3_moe, gpt_oss and qwen2_moe, 5 -> 1 on qwen3_next and qwen3_5_moe). The Gated DeltaNet cores (qwen3_next, qwen3_5_moe)
 * run on the device (dn_conv, dn_core: two more dispatches per linear layer, 4 per token on
 * these 2-layer fixtures, whose waits go 3 -> 1 resident and 7 -> 5 streamed). DeepSeek-V3's latent attention heads run on the device (the
 * mla kernel: one more dispatch per layer, 3 per token on deepseek_v3, whose waits go 6 -> 1).
 * HF checkpoints with one tensor per expert (qwen3_moe-bf16, the -hf fixtures, and affine
 * parts: qwen3_moe-aff4-per-expert, 3 -> 1) are stacked at load (runtime/model.c,
 * bind_per_expert_stacked) and wait no more than the rest; TurboQuant under per-expert names
 * (a codebook and signs per expert: qwen3_moe-tq3-per-expert, 3 -> 1, seen failing at 3.00
 * with those bound one matrix each) too, each expert's codebook and signs found by id. */
typedef struct ceiling {
    const char *what;
    double dispatches, waits, staged_bytes;
} ceiling;
static const ceiling ceilings[] = {
    /* fixture, dispatches, waits, staged bytes per token */
    {"llama-f32", 36, 1, 0},
    {"llama-bf16", 36, 1, 0},
    {"llama-f16", 36, 1, 0},
    {"llama-aff4", 36, 1, 0},
    {"llama-aff8", 36, 1, 0},
    {"llama-tq3", 51, 1, 0},
    {"llama-tq4", 51, 1, 0},
    {"llama-tq2", 51, 1, 0},
    {"qwen3-tq3", 54, 1, 0},
    {"qwen3-bf16", 40, 1, 0},
    {"qwen3-bf16-streamed", 40, 1, 0},
    {"qwen3-bf16-split-resident", 40, 1, 0},
    {"qwen3-bf16-mapped", 40, 1, 0},
    {"qwen3_moe-tq3", 75, 1, 0},
    {"qwen3_moe-tq3-streamed", 75, 3, 0},
    {"qwen3_moe-tq3-split-resident", 75, 1, 0},
    {"qwen3_moe-tq3-mapped", 75, 1, 0},
    {"qwen3_moe-bf16", 70, 1, 0},
    {"qwen3_moe-bf16-streamed", 70, 3, 0},
    {"qwen3_moe-bf16-split-resident", 70, 1, 0},
    {"qwen3_moe-bf16-mapped", 70, 1, 0},
    {"qwen3_moe-aff4", 58, 1, 0},
    {"qwen3_moe-aff4-streamed", 58, 3, 0},
    {"qwen3_moe-aff4-split-resident", 58, 1, 0},
    {"qwen3_moe-aff4-mapped", 58, 1, 0},
    {"qwen3_moe-aff4-per-expert", 58, 1, 0},
    {"qwen3_moe-tq3-per-expert", 79, 1, 0},
    {"qwen3_moe-tq2", 75, 1, 0},
    {"qwen3_moe-tq2-streamed", 75, 3, 0},
    {"qwen3_moe-tq2-split-resident", 75, 1, 0},
    {"qwen3_moe-tq2-mapped", 75, 1, 0},
    {"mixtral-tq3", 71, 1, 0},
    {"mixtral-f16", 54, 1, 0},
    {"deepseek_v3-tq4", 126, 1, 0},
    {"deepseek_v3-aff8", 94, 1, 0},
    {"deepseek_v3-bf16-hf", 94, 1, 0},
    {"gpt_oss-aff4", 54, 1, 0},
    {"gpt_oss-bf16-hf", 54, 1, 0},
    {"gpt_oss-tq3", 71, 1, 0},
    {"gpt_oss-bf16-xw", 54, 1, 0},
    {"gpt_oss-bf16-xw-streamed", 54, 3, 0},
    {"gpt_oss-bf16-xw-split-resident", 54, 1, 0},
    {"gpt_oss-bf16-xw-mapped", 54, 1, 0},
    {"qwen3_next-tq3", 166, 1, 0},
    {"qwen3_next-bf16-hf", 129, 1, 0},
    {"qwen3_next-all-moe-tq3", 185, 1, 0},
    {"qwen3_next-all-moe-tq3-streamed", 185, 5, 0},
    {"qwen3_next-all-moe-tq3-split-resident", 185, 1, 0},
    {"qwen3_next-all-moe-tq3-mapped", 185, 1, 0},
    {"qwen3_next-bf16-wide-keys", 125, 3, 0},
    {"qwen3_5_moe-bf16-hf", 136, 1, 0},
    {"qwen3_5_moe-aff8", 136, 1, 0},
    {"qwen3_5_moe-aff8-streamed", 136, 5, 0},
    {"qwen3_5_moe-aff8-split-resident", 136, 1, 0},
    {"qwen3_5_moe-aff8-mapped", 136, 1, 0},
    {"qwen2-tq3", 74, 1, 0},
    {"qwen2-bf16-hf", 53, 1, 0},
    {"qwen2_moe-aff4", 103, 1, 0},
    {"qwen2_moe-aff4-streamed", 103, 3, 0},
    {"qwen2_moe-aff4-split-resident", 103, 1, 0},
    {"qwen2_moe-aff4-mapped", 103, 1, 0},
    {"qwen2_moe-bf16-hf", 103, 1, 0},
};

static void check_counters(const char *what, const tq_run_stats *st)
{
    CHECKF(st->gpu == 1, "%s: the device backend's counters are missing", what);
    printf("  %-34s counters: {\"%s\", %.9g, %.9g, %.9g},\n", what, what, st->gpu_dispatches_per_token,
           st->gpu_waits_per_token, st->gpu_staged_bytes_per_token);
    CHECKF(st->gpu_staged_bytes_per_token == 0, "%s: %.0f bytes staged per token (%.0f of them weights)", what,
           st->gpu_staged_bytes_per_token, st->gpu_staged_weight_bytes_per_token);
    CHECKF(st->gpu_wrap_copies == 0, "%s: %llu weight regions copied instead of mapped", what,
           (unsigned long long)st->gpu_wrap_copies);
    for (size_t i = 0; i < sizeof ceilings / sizeof *ceilings; i++)
        if (strcmp(ceilings[i].what, what) == 0) {
            const ceiling *c = &ceilings[i];
            CHECKF(st->gpu_dispatches_per_token <= c->dispatches, "%s: %.2f dispatches per token (ceiling %.0f)", what,
                   st->gpu_dispatches_per_token, c->dispatches);
            CHECKF(st->gpu_waits_per_token <= c->waits, "%s: %.2f CPU waits per token (ceiling %.0f)", what,
                   st->gpu_waits_per_token, c->waits);
            CHECKF(st->gpu_staged_bytes_per_token <= c->staged_bytes, "%s: %.0f bytes staged per token (ceiling %.0f)",
                   what, st->gpu_staged_bytes_per_token, c->staged_bytes);
            return;
        }
    CHECKF(0, "%s: no ceiling for its counters in the table above", what);
}

/* Decode dir on the CPU and on `backend`; every step within tol, the same greedy tokens. The
 * CPU reads a split's experts (or loads them resident); the device holds them as `mode` says.
 * With keep, *keep gets the device's logits (the caller frees them). */
static double against_cpu(const char *dir, int vocab, uint64_t seed, int backend, int mode, double tol,
                          const char *what, float **keep)
{
    int32_t seq[NSEQ], t_cpu[NSEQ], t_dev[NSEQ];
    fx_sequence(vocab, seed, NSEQ, seq);
    size_t n = (size_t)NSEQ * (size_t)vocab;
    fx_logits a = {calloc(n, 4), 0, 0, NSEQ}, b = {calloc(n, 4), 0, 0, NSEQ};
    tq_err err = {0};
    tq_run_stats st;
    /* the CPU's decode of the last (dir, mode) is reused: the split read and mapped on the
     * device are both held to the CPU reading it */
    static char ref_dir[600];
    static int ref_mode = -1, ref_steps;
    static float *ref_v;
    static int32_t ref_t[NSEQ];
    int cpu_mode = mode == RESIDENT ? RESIDENT : READ;
    if (ref_v && cpu_mode == ref_mode && strcmp(dir, ref_dir) == 0) {
        memcpy(a.v, ref_v, n * 4);
        memcpy(t_cpu, ref_t, sizeof t_cpu);
        a.steps = ref_steps;
    } else {
        CHECK_OK(decode(dir, TQ_RUN_BACKEND_CPU, cpu_mode, NSEQ, seq, &a, t_cpu, &st, &err));
        CHECKF(st.gpu == 0, "%s: the CPU backend reports device counters", what);
        free(ref_v);
        if ((ref_v = malloc(n * 4)) != NULL) {
            memcpy(ref_v, a.v, n * 4);
            memcpy(ref_t, t_cpu, sizeof ref_t);
            ref_steps = a.steps;
            ref_mode = cpu_mode;
            snprintf(ref_dir, sizeof ref_dir, "%s", dir);
        }
    }
    int nseq = mode == MAPPED ? NSEQ_MAPPED : NSEQ; /* the device's positions; the CPU's first nseq */
    CHECK_OK(decode(dir, backend, mode, nseq, seq, &b, t_dev, &st, &err));
    check_counters(what, &st);
    if (mode == MAPPED) /* io "none": a split without expert layers (qwen3-bf16) */
        CHECKF((st.streamed == 1 && strcmp(st.io, "map") == 0 && st.expert_hits + st.expert_misses == 0) ||
                   (st.streamed == 0 && strcmp(st.io, "none") == 0),
               "%s: mapped experts reported as io %s, streamed %d, %llu misses", what, st.io, st.streamed,
               (unsigned long long)st.expert_misses);
    if (keep) { /* the caller's; read below and not freed here */
        if (!(*keep = malloc(n * 4)))
            *keep = NULL;
        else
            memcpy(*keep, b.v, n * 4);
    }
    if (a.steps != NSEQ || b.steps != (uint64_t)nseq) {
        CHECKF(0, "%s: a decode stopped early", what);
        free(a.v);
        free(b.v);
        return 1;
    }
    double worst = 0;
    int bad = 0;
    for (int s = 0; s < nseq; s++) {
        double mx = 0, d = 0;
        for (int i = 0; i < vocab; i++) {
            mx = fmax(mx, fabs((double)a.v[(size_t)s * vocab + i]));
            d = fmax(d, fabs((double)a.v[(size_t)s * vocab + i] - b.v[(size_t)s * vocab + i]));
        }
        worst = fmax(worst, mx > 0 ? d / mx : d);
        bad += t_cpu[s] != t_dev[s];
    }
    CHECKF(worst < tol, "%s: relative logit error %.3g (limit %.0e)", what, worst, tol);
    CHECKF(bad == 0, "%s: %d greedy tokens differ from the CPU backend's", what, bad);
    printf("  %-34s %s vs cpu: max relative logit error %.3g over %d positions, %d token differences\n", what,
           backend == TQ_RUN_BACKEND_SHIM ? "shim " : "metal", worst, nseq, bad);
    free(a.v);
    free(b.v);
    return worst;
}

/* TQ_METAL_FIXTURES="name name ...": only those fixtures (their resident, streamed, split
 * resident and mapped decodes), "threads" for shim_threads, "absent" for metal_absent; all
 * when unset. make check-tsan runs a representative few under ThreadSanitizer, where the whole
 * test is too slow (the Makefile says which and why). */
static int fixture_wanted(const char *name)
{
    return t_env_lists("TQ_METAL_FIXTURES", name);
}

/* Fixture c written to dir (TMP/rtm-what-PID); 0 when it could not be. */
static int gen(fx_cfg c, const char *what, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/rtm-%s-%d", t_tmpdir(), what, (int)getpid());
    fx_model m;
    int rc = fx_generate(&c, dir, &m);
    CHECKF(rc == 0, "cannot write the %s fixture to %s", what, dir);
    if (rc == 0)
        fx_free(&m);
    return rc == 0;
}

/* The shim (and, where built, the GPU) against the CPU on fixture c, resident; with split,
 * also streamed from tq-split's layer files (experts read into the cache, then staged) and the
 * split loaded resident (tq-split handles the qwen3_moe, qwen3_next and qwen3_5_moe fixtures
 * and dense FFN files). */
static void both(fx_cfg c, const char *what, int split)
{
    char dir[512], sdir[600];
    if (!fixture_wanted(what) || !gen(c, what, dir, sizeof dir))
        return;
    against_cpu(dir, c.vocab, c.seed, TQ_RUN_BACKEND_SHIM, READ, shim_tol, what, NULL);
    if (have_metal)
        against_cpu(dir, c.vocab, c.seed, TQ_RUN_BACKEND_METAL, READ, 1e-3, what, NULL);
    if (!split)
        return;
    snprintf(sdir, sizeof sdir, "%s.split", dir);
    tq_err err = {0};
    tq_split_opts so = {0};
    so.threads = 1;
    so.quiet = 1;
    tq_split_result res;
    CHECK_OK(tq_split(dir, sdir, &so, &res, &err));
    char w2[128];
    float *res_v = NULL, *map_v = NULL;
    snprintf(w2, sizeof w2, "%s-streamed", what);
    against_cpu(sdir, c.vocab, c.seed, TQ_RUN_BACKEND_SHIM, READ, shim_tol, w2, NULL);
    snprintf(w2, sizeof w2, "%s-mapped", what);
    against_cpu(sdir, c.vocab, c.seed, TQ_RUN_BACKEND_SHIM, MAPPED, shim_tol, w2, &map_v);
    snprintf(w2, sizeof w2, "%s-split-resident", what);
    against_cpu(sdir, c.vocab, c.seed, TQ_RUN_BACKEND_SHIM, RESIDENT, shim_tol, w2, &res_v);
    snprintf(w2, sizeof w2, "%s-mapped", what);
    /* the mapped file's blocks are the resident copy's bytes, found by the same id-indexed
     * kernels: the same logits bit for bit */
    CHECKF(res_v && map_v && memcmp(res_v, map_v, (size_t)NSEQ_MAPPED * (size_t)c.vocab * 4) == 0,
           "%s: mapped experts' logits differ from the split loaded resident", w2);
    free(res_v);
    free(map_v);
    if (have_metal) {
        snprintf(w2, sizeof w2, "%s-streamed", what);
        against_cpu(sdir, c.vocab, c.seed, TQ_RUN_BACKEND_METAL, READ, 1e-3, w2, NULL);
        snprintf(w2, sizeof w2, "%s-mapped", what);
        against_cpu(sdir, c.vocab, c.seed, TQ_RUN_BACKEND_METAL, MAPPED, 1e-3, w2, NULL);
    }
}

/* llama / qwen3 / qwen3_moe as test_runtime.c builds them, another seed per kind. */
static fx_cfg base_cfg(int arch, int kind)
{
    fx_cfg c = fx_small_cfg(arch, kind);
    c.seed = 11 + (uint64_t)kind;
    return c;
}

static void name(char *out, size_t cap, const char *arch, int kind, const char *extra)
{
    snprintf(out, cap, "%s-%s%s", arch, fx_kind_name(kind), extra);
}

static void dense_kinds(void)
{
    char w[96];
    for (int k = 0; k < FX_NKINDS; k++) {
        name(w, sizeof w, "llama", k, "");
        both(base_cfg(FX_LLAMA, k), w, 0);
    }
    name(w, sizeof w, "qwen3", FX_TQ3, "");
    both(base_cfg(FX_QWEN3, FX_TQ3), w, 0);
    name(w, sizeof w, "qwen3", FX_BF16, "");
    both(base_cfg(FX_QWEN3, FX_BF16), w, 1); /* split: dense FFNs in flash_aligned files */
}

static void qwen3_moe(void)
{
    static const int kinds[] = {FX_TQ3, FX_BF16, FX_AFF4, FX_TQ2};
    char w[96];
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        fx_cfg c = base_cfg(FX_QWEN3_MOE, kinds[i]);
        if (kinds[i] == FX_BF16) {
            c.hf_expert_names = 1;
            c.shared_inter = 32;
        }
        name(w, sizeof w, "qwen3_moe", kinds[i], "");
        both(c, w, 1);
    }
    /* quantized experts under HF per-expert names: weight, scales and biases each stacked at
     * load (runtime/model.c, bind_per_expert_stacked), so the route stays on the device */
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_AFF4);
    c.hf_expert_names = 1;
    both(c, "qwen3_moe-aff4-per-expert", 0);
    /* TurboQuant under HF per-expert names: each expert its own signs (the fixture's are random
     * per matrix) and its own codebook (own_codebooks), stacked at load like the affine parts
     * and found by id on the device (the hadamard and mv_tq_ex kernels), so the route stays on
     * the device too: a kernel reading expert 0's signs or codebook for every expert fails
     * the logits (seen: 2.54 relative with expert 0's signs) */
    c = base_cfg(FX_QWEN3_MOE, FX_TQ3);
    c.hf_expert_names = 1;
    c.own_codebooks = 1;
    both(c, "qwen3_moe-tq3-per-expert", 0);
}

/* HF names for bf16 (gpt_oss: MXFP4 experts as released), the MLX form otherwise. */
static void family(int arch, const char *an, const int *kinds, size_t nk, int split)
{
    char w[96];
    for (size_t i = 0; i < nk; i++) {
        fx_cfg c = fx_family_cfg(arch, kinds[i]);
        c.hf_expert_names = kinds[i] == FX_BF16;
        if (split && arch == FX_QWEN3_NEXT)
            c.mlp_only = 0; /* tq-split wants experts in every layer */
        name(w, sizeof w, an, kinds[i], c.hf_expert_names ? "-hf" : "");
        both(c, w, split && !c.hf_expert_names);
    }
}

static void mixtral(void)
{
    static const int k[] = {FX_TQ3, FX_F16};
    family(FX_MIXTRAL, "mixtral", k, 2, 0);
}
static void deepseek(void)
{
    static const int k[] = {FX_TQ4, FX_AFF8, FX_BF16};
    family(FX_DEEPSEEK, "deepseek_v3", k, 3, 0);
}
static void gpt_oss(void)
{
    static const int k[] = {FX_AFF4, FX_BF16, FX_TQ3};
    family(FX_GPT_OSS, "gpt_oss", k, 3, 0);
}
/* gpt-oss in float as transformers saves it (x @ W, gate/up interleaved), square experts:
 * the experts made into the MLX form at load (rt_store_get_xw) live in the store's memory the
 * device maps, and the split holds the MLX form's blocks */
static void gpt_oss_xw(void)
{
    fx_cfg c = fx_family_cfg(FX_GPT_OSS, FX_BF16);
    c.moe_inter = c.inter = c.hidden;
    c.hf_expert_names = 2;
    both(c, "gpt_oss-bf16-xw", 1);
}
static void qwen3_next(void)
{
    static const int k[] = {FX_TQ3, FX_BF16};
    family(FX_QWEN3_NEXT, "qwen3_next", k, 2, 0);
    family(FX_QWEN3_NEXT, "qwen3_next-all-moe", k, 1, 1);
}
/* Key heads of 260 (beyond RTM_DN_MAXD): the backend declines the DeltaNet kernels and the
 * core runs on the CPU after a sync (runtime/deltanet.c), one wait per linear layer again. */
static void qwen3_next_wide(void)
{
    fx_cfg c = fx_family_cfg(FX_QWEN3_NEXT, FX_BF16);
    c.lk_dim = 260;
    both(c, "qwen3_next-bf16-wide-keys", 0);
}
static void qwen3_5_moe(void)
{
    static const int k[] = {FX_BF16, FX_AFF8};
    family(FX_QWEN3_5_MOE, "qwen3_5_moe", k, 2, 1);
}

/* qwen2 (q/k/v biases) and qwen2_moe (shared expert with its sigmoid gate, a dense layer);
 * qwen2_moe's MLX form also streamed from tq-split's layer files */
static void qwen2(void)
{
    static const int k[] = {FX_TQ3, FX_BF16};
    family(FX_QWEN2, "qwen2", k, 2, 0);
    static const int km[] = {FX_AFF4, FX_BF16};
    family(FX_QWEN2_MOE, "qwen2_moe", km, 2, 1);
}

/* The same logits on the shim for any thread count (its CPU parts run on the pool). */
static void shim_threads(void)
{
    char dir[512];
    fx_cfg c = base_cfg(FX_QWEN3_MOE, FX_TQ3);
    if (!fixture_wanted("threads") || !gen(c, "threads", dir, sizeof dir))
        return;
    int32_t seq[NSEQ], toks[NSEQ];
    fx_sequence(c.vocab, 5, NSEQ, seq);
    size_t n = (size_t)NSEQ * (size_t)c.vocab;
    fx_logits a = {calloc(n, 4), 0, 0, NSEQ}, b = {calloc(n, 4), 0, 0, NSEQ};
    tq_err err = {0};
    tq_run_opts o;
    for (int i = 0; i < 2; i++) {
        tq_run_opts_default(&o);
        o.threads = i ? 5 : 1;
        o.backend = TQ_RUN_BACKEND_SHIM;
        CHECK_OK(fx_decode_forced(dir, &o, seq, NSEQ, i ? &b : &a, toks, &err));
    }
    CHECK(a.steps == NSEQ && memcmp(a.v, b.v, n * 4) == 0);
    free(a.v);
    free(b.v);
}

/* Without Metal in the build, asking for it fails as a usage error that says so. */
static void metal_absent(void)
{
    if (have_metal || !fixture_wanted("absent"))
        return;
    char dir[512];
    if (!gen(base_cfg(FX_LLAMA, FX_F32), "absent", dir, sizeof dir))
        return;
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.backend = TQ_RUN_BACKEND_METAL;
    tq_runner *r = NULL;
    tq_err err = {0};
    CHECK(tq_runner_open(&r, dir, &o, &err) != 0 && err.code == TQ_EUSAGE && strstr(err.msg, "no Metal backend"));
    CHECK(r == NULL);
}

int main(void)
{
    rtm_shim_ftz = getenv("TQ_SHIM_FTZ") != NULL;
    if (rtm_shim_ftz || strcmp(rtm_shim_fp, "fma") == 0) {
        shim_tol = 1e-3;
        printf("  shim mode:%s%s: the shim is held to the GPU's 1e-3\n", rtm_shim_ftz ? " ftz" : "",
               strcmp(rtm_shim_fp, "fma") == 0 ? " fma" : "");
    }
    tq_run_opts o;
    tq_run_opts_default(&o);
    o.backend = TQ_RUN_BACKEND_METAL;
    {
        /* Is there a GPU to run on? A throwaway model answers through the public API. */
        char dir[512];
        if (gen(base_cfg(FX_LLAMA, FX_F32), "probe", dir, sizeof dir)) {
            tq_runner *r = NULL;
            tq_err err = {0};
            have_metal = tq_runner_open(&r, dir, &o, &err) == 0;
            tq_runner_close(r);
            printf("  metal: %s\n", have_metal ? "present: every comparison also runs on the GPU" : err.msg);
        }
        /* make check-metal: a run that was meant for the GPU and skipped it has failed. */
        const char *req = getenv("TQ_REQUIRE_METAL");
        if (!have_metal && req && *req) {
            printf("FAIL metal: TQ_REQUIRE_METAL is set, but the GPU backend did not open\n");
            t_fail++;
        }
    }
    RUN(dense_kinds);
    RUN(qwen3_moe);
    RUN(mixtral);
    RUN(deepseek);
    RUN(gpt_oss);
    RUN(gpt_oss_xw);
    RUN(qwen3_next);
    RUN(qwen3_next_wide);
    RUN(qwen3_5_moe);
    RUN(qwen2);
    RUN(shim_threads);
    RUN(metal_absent);
    TEST_MAIN_END();
}
