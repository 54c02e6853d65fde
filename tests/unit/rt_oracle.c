/* tests/unit/rt_oracle.c — the reference forward pass of the runtime tests: every family the
 * runtime decodes, in f64, on the dense twins rt_fixture.c makes, written from the published
 * equations (the HuggingFace modeling code of each family; docs/runtime.md restates them) and
 * sharing no code with runtime/. Where the runtime reorders a computation for speed (latent
 * attention absorbed into the query, the delta-rule state stored transposed, RoPE pairs rotated
 * in place), this file does it the plain way. */
#include "rt_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- small pieces */
static void fx_mv(const dmat *m, const double *x, double *y)
{
    for (int r = 0; r < m->rows; r++) {
        double s = 0;
        for (int j = 0; j < m->cols; j++)
            s += m->w[(size_t)r * m->cols + j] * x[j];
        y[r] = s;
    }
}

/* y = W x + b (b may be NULL) */
static void fx_mvb(const dmat *m, const double *b, const double *x, double *y)
{
    fx_mv(m, x, y);
    for (int r = 0; b && r < m->rows; r++)
        y[r] += b[r];
}

static void fx_rms(double *o, const double *x, const double *w, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        o[i] = (w ? w[i] : 1.0) * x[i] * inv;
}

static double sigm(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static double silu(double x)
{
    return x * sigm(x);
}

/* Frequency of pair i of d rotated dims: theta^(-2i/d), and with rope_scaling "linear" divided
 * by the factor; "llama3" divides it when its wavelength 2π/f exceeds orig / low_freq_factor,
 * keeps it below orig / high_freq_factor, and between the two mixes f/factor and f with
 * weight s = (orig / wavelength - low) / (high - low) on f (transformers' llama3 rule). */
static double classic_freq(const fx_cfg *c, int i, int d)
{
    double f = pow(c->theta, -2.0 * i / d);
    if (c->rope_linear)
        return f / c->rs_factor;
    if (!c->rope_llama3)
        return f;
    double wl = 2 * M_PI / f;
    if (wl > c->rs_orig / c->rs_low_freq)
        return f / c->rs_factor;
    if (wl < c->rs_orig / c->rs_high_freq)
        return f;
    double sm = (c->rs_orig / wl - c->rs_low_freq) / (c->rs_high_freq - c->rs_low_freq);
    return (1 - sm) * f / c->rs_factor + sm * f;
}

static void fx_rope(double *v, int d, int pos, const fx_cfg *c)
{
    for (int i = 0; i < d / 2; i++) {
        double a = pos * classic_freq(c, i, d);
        double x1 = v[i], x2 = v[i + d / 2];
        v[i] = x1 * cos(a) - x2 * sin(a);
        v[i + d / 2] = x2 * cos(a) + x1 * sin(a);
    }
}

static void fx_mlp(const dmat *g, const dmat *u, const dmat *d, const double *x, double *out)
{
    double *a = malloc((size_t)g->rows * sizeof *a), *b = malloc((size_t)g->rows * sizeof *b);
    fx_mv(g, x, a);
    fx_mv(u, x, b);
    for (int i = 0; i < g->rows; i++)
        a[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
    fx_mv(d, a, out);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- llama, qwen3, qwen3_moe */
static void fx_forward_classic(const fx_model *m, fx_state *s, int token, int pos, double *logits)
{
    const fx_cfg *c = &m->c;
    int H = c->hidden, hd = c->head_dim, qd = c->heads * hd, kd = c->kv_heads * hd;
    double *x = malloc((size_t)H * 8), *h = malloc((size_t)H * 8), *q = malloc((size_t)qd * 8),
           *k = malloc((size_t)kd * 8), *v = malloc((size_t)kd * 8), *ao = malloc((size_t)qd * 8),
           *t = malloc((size_t)H * 8), *t2 = malloc((size_t)H * 8), *sc = malloc((size_t)(pos + 1) * 8);
    for (int i = 0; i < H; i++)
        x[i] = m->embed.w[(size_t)token * H + i];
    for (int l = 0; l < c->layers; l++) {
        const fx_layer *L = &m->L[l];
        fx_rms(h, x, L->in_norm, H, c->eps);
        fx_mv(&L->q, h, q);
        fx_mv(&L->k, h, k);
        fx_mv(&L->v, h, v);
        for (int hh = 0; hh < c->heads; hh++) {
            if (L->qn)
                fx_rms(q + hh * hd, q + hh * hd, L->qn, hd, c->eps);
            fx_rope(q + hh * hd, hd, pos, c);
        }
        for (int hh = 0; hh < c->kv_heads; hh++) {
            if (L->kn)
                fx_rms(k + hh * hd, k + hh * hd, L->kn, hd, c->eps);
            fx_rope(k + hh * hd, hd, pos, c);
        }
        memcpy(s->kc + ((size_t)l * s->ctx + pos) * kd, k, (size_t)kd * 8);
        memcpy(s->vc + ((size_t)l * s->ctx + pos) * kd, v, (size_t)kd * 8);
        /* Mistral (a llama with sliding_window): transformers' models/mistral/modeling_mistral.py
         * masks on every layer the keys with kv_idx <= q_idx - sliding_window
         * (sliding_window_causal mask): the last `window` positions, this one included */
        int p0 = c->arch == FX_LLAMA && c->window && pos - c->window + 1 > 0 ? pos - c->window + 1 : 0;
        for (int hh = 0; hh < c->heads; hh++) {
            int kh = hh / (c->heads / c->kv_heads);
            double mx = -1e300, sum = 0;
            for (int p = 0; p <= pos; p++) {
                if (p < p0) {
                    sc[p] = -1e300;
                    continue;
                }
                const double *kk = s->kc + ((size_t)l * s->ctx + p) * kd + kh * hd;
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += q[hh * hd + i] * kk[i];
                sc[p] = d / sqrt((double)hd);
                if (sc[p] > mx)
                    mx = sc[p];
            }
            for (int p = 0; p <= pos; p++)
                sum += (sc[p] = p < p0 ? 0.0 : exp(sc[p] - mx));
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int p = 0; p <= pos; p++)
                    o += sc[p] / sum * s->vc[((size_t)l * s->ctx + p) * kd + kh * hd + i];
                ao[hh * hd + i] = o;
            }
        }
        fx_mv(&L->o, ao, t);
        for (int i = 0; i < H; i++)
            x[i] += t[i];
        fx_rms(h, x, L->post_norm, H, c->eps);
        if (c->arch != FX_QWEN3_MOE) {
            fx_mlp(&L->gate, &L->up, &L->down, h, t);
        } else {
            double *pr = malloc((size_t)c->experts * 8);
            fx_mv(&L->router, h, pr);
            double mx = -1e300, sum = 0;
            for (int i = 0; i < c->experts; i++)
                mx = pr[i] > mx ? pr[i] : mx;
            for (int i = 0; i < c->experts; i++)
                sum += (pr[i] = exp(pr[i] - mx));
            for (int i = 0; i < c->experts; i++)
                pr[i] /= sum;
            int *sel = calloc((size_t)c->experts, sizeof(int));
            double wsum = 0;
            int ids[64];
            for (int kk = 0; kk < c->top_k; kk++) {
                int b = -1;
                for (int i = 0; i < c->experts; i++)
                    if (!sel[i] && (b < 0 || pr[i] > pr[b]))
                        b = i;
                sel[b] = 1;
                ids[kk] = b;
                wsum += pr[b];
            }
            memset(t, 0, (size_t)H * 8);
            for (int kk = 0; kk < c->top_k; kk++) {
                double w = pr[ids[kk]] / (c->norm_topk ? wsum : 1.0);
                fx_mlp(&L->eg[ids[kk]], &L->eu[ids[kk]], &L->ed[ids[kk]], h, t2);
                for (int i = 0; i < H; i++)
                    t[i] += w * t2[i];
            }
            if (c->shared_inter) {
                double gl;
                fx_mlp(&L->sg, &L->su, &L->sd, h, t2);
                fx_mv(&L->sgate, h, &gl);
                for (int i = 0; i < H; i++)
                    t[i] += t2[i] / (1.0 + exp(-gl));
            }
            free(sel);
            free(pr);
        }
        for (int i = 0; i < H; i++)
            x[i] += t[i];
    }
    fx_rms(h, x, m->norm, H, c->eps);
    fx_mv(&m->lm, h, logits);
    free(x); free(h); free(q); free(k); free(v); free(ao); free(t); free(t2); free(sc);
}

/* ---------------------------------------------------------------- rotary embeddings */
static double yarn_mscale(double scale, double m)
{
    return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

/* inverse frequencies of `dim` rotated dims, and the factor on cos / sin (YaRN: transformers'
 * modeling_rope_utils.py, _compute_yarn_parameters and its find_correction_range, which floors
 * low and ceils high only when rope_scaling's truncate is true, its default) */
static void fx_inv_freq(const fx_cfg *c, int dim, double *inv, double *factor)
{
    *factor = 1.0;
    for (int i = 0; i < dim / 2; i++)
        inv[i] = 1.0 / pow(c->theta, 2.0 * i / dim);
    if (!c->yarn)
        return;
    double f = c->rs_factor;
    *factor = c->rs_mscale && c->rs_mscale_all ? yarn_mscale(f, c->rs_mscale) / yarn_mscale(f, c->rs_mscale_all)
                                               : yarn_mscale(f, 1.0);
    double low = dim * log(c->rs_orig / (c->rs_beta_fast * 2 * M_PI)) / (2 * log(c->theta));
    double high = dim * log(c->rs_orig / (c->rs_beta_slow * 2 * M_PI)) / (2 * log(c->theta));
    if (c->rs_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    low = fmax(low, 0);
    high = fmin(high, dim - 1);
    if (low == high)
        high += 0.001;
    for (int i = 0; i < dim / 2; i++) {
        double ramp = fmin(fmax((i - low) / (high - low), 0), 1);
        double extrapolation = 1 - ramp; /* share of the original frequency */
        double interpolated = inv[i] / f;
        inv[i] = interpolated * (1 - extrapolation) + inv[i] * extrapolation;
    }
}

/* rotate_half on v[0..dim): halves (x1, x2) → (x1 cos - x2 sin, x2 cos + x1 sin) */
static void rope_half(double *v, int dim, int pos, const double *inv, double factor)
{
    for (int i = 0; i < dim / 2; i++) {
        double a = pos * inv[i], cs = cos(a) * factor, sn = sin(a) * factor;
        double x1 = v[i], x2 = v[i + dim / 2];
        v[i] = x1 * cs - x2 * sn;
        v[i + dim / 2] = x2 * cs + x1 * sn;
    }
}

/* DeepSeek's interleaved form as HF applies it: deinterleave (even dims first, then odd),
 * then rotate_half. The result is a permutation of the pairwise rotation, the same for q and k. */
static void rope_interleave(double *v, int dim, int pos, const double *inv, double factor)
{
    double *t = malloc((size_t)dim * sizeof *t);
    for (int i = 0; i < dim / 2; i++) {
        t[i] = v[2 * i];
        t[dim / 2 + i] = v[2 * i + 1];
    }
    rope_half(t, dim, pos, inv, factor);
    memcpy(v, t, (size_t)dim * sizeof *t);
    free(t);
}

/* ---------------------------------------------------------------- state */
static double *state_buf(fx_state *s, double ***arr, int layers, int l, size_t n)
{
    s->nl = layers;
    if (!*arr)
        *arr = calloc((size_t)layers, sizeof **arr);
    if (!(*arr)[l])
        (*arr)[l] = calloc(n ? n : 1, sizeof(double));
    return (*arr)[l];
}

void fx_state_free(fx_state *s)
{
    double ***arrs[] = {&s->lk, &s->lv, &s->conv, &s->ssm};
    for (int a = 0; a < 4; a++) {
        for (int l = 0; *arrs[a] && l < s->nl; l++)
            free((*arrs[a])[l]);
        free(*arrs[a]);
        *arrs[a] = NULL;
    }
}

/* ---------------------------------------------------------------- the other families */
/* Softmax attention (mixtral, gpt_oss, qwen3_next full layers): q, k, v (+ biases), the
 * qwen3_next output gate (q_proj gives [heads][query | gate]), per-head norms, rotate_half
 * RoPE on the first rot dims, a sliding window, sinks. x [H] in, out [H]. */
static void attention(const fx_model *m, fx_state *s, int l, int pos, const double *x, double *out)
{
    const fx_cfg *c = &m->c;
    const fx_layer *L = &m->L[l];
    int hd = c->head_dim, qd = c->heads * hd, kd = c->kv_heads * hd, gated = c->arch >= FX_QWEN3_NEXT;
    int rot = gated ? (int)(hd * c->prf) / 2 * 2 : hd;
    double *qq = malloc((size_t)2 * qd * 8), *q = malloc((size_t)qd * 8), *gate = malloc((size_t)qd * 8);
    double *ao = malloc((size_t)qd * 8), *sc = malloc((size_t)(pos + 2) * 8), inv[512], factor;
    fx_inv_freq(c, rot, inv, &factor);
    fx_mvb(&L->q, L->qb, x, qq);
    for (int h = 0; h < c->heads; h++)
        for (int i = 0; i < hd; i++) {
            q[h * hd + i] = gated ? qq[h * 2 * hd + i] : qq[h * hd + i];
            gate[h * hd + i] = gated ? qq[h * 2 * hd + hd + i] : 0;
        }
    double *K = state_buf(s, &s->lk, c->layers, l, (size_t)s->ctx * kd);
    double *V = state_buf(s, &s->lv, c->layers, l, (size_t)s->ctx * kd);
    double *k = K + (size_t)pos * kd, *v = V + (size_t)pos * kd;
    fx_mvb(&L->k, L->kb, x, k);
    fx_mvb(&L->v, L->vb, x, v);
    for (int h = 0; h < c->heads; h++) {
        if (L->qn)
            fx_rms(q + h * hd, q + h * hd, L->qn, hd, c->eps);
        rope_half(q + h * hd, rot, pos, inv, factor);
    }
    for (int h = 0; h < c->kv_heads; h++) {
        if (L->kn)
            fx_rms(k + h * hd, k + h * hd, L->kn, hd, c->eps);
        rope_half(k + h * hd, rot, pos, inv, factor);
    }
    int sliding = c->window && (c->arch == FX_MIXTRAL || (c->arch == FX_GPT_OSS && l % 2 == 0));
    int t0 = sliding && pos - c->window + 1 > 0 ? pos - c->window + 1 : 0;
    for (int h = 0; h < c->heads; h++) {
        int kh = h / (c->heads / c->kv_heads);
        double mx = -1e300, sum = 0;
        for (int t = t0; t <= pos; t++) {
            double d = 0;
            for (int i = 0; i < hd; i++)
                d += q[h * hd + i] * K[(size_t)t * kd + kh * hd + i];
            sc[t] = d / sqrt((double)hd);
            mx = fmax(mx, sc[t]);
        }
        if (L->sinks)
            mx = fmax(mx, L->sinks[h]);
        for (int t = t0; t <= pos; t++)
            sum += sc[t] = exp(sc[t] - mx);
        if (L->sinks) /* the sink takes probability mass and gives no value */
            sum += exp(L->sinks[h] - mx);
        for (int i = 0; i < hd; i++) {
            double o = 0;
            for (int t = t0; t <= pos; t++)
                o += sc[t] / sum * V[(size_t)t * kd + kh * hd + i];
            ao[h * hd + i] = gated ? o * sigm(gate[h * hd + i]) : o;
        }
    }
    fx_mvb(&L->o, L->ob, ao, out);
    free(qq); free(q); free(gate); free(ao); free(sc);
}

/* DeepSeek-V3 multi-head latent attention as HF computes it: per position the compressed
 * kv is normalised and expanded by kv_b_proj into per-head keys (nope part) and values; the
 * rope part of the key is one head shared by all; keys and values are cached expanded. */
static void mla(const fx_model *m, fx_state *s, int l, int pos, const double *x, double *out)
{
    const fx_cfg *c = &m->c;
    const fx_layer *L = &m->L[l];
    int nope = c->qk_nope, rope = c->qk_rope, qh = nope + rope, vh = c->v_head, kvl = c->kv_lora, nh = c->heads;
    double *q = malloc((size_t)nh * qh * 8), *ckv = malloc((size_t)(kvl + rope) * 8), *lat = malloc((size_t)kvl * 8);
    double *kv = malloc((size_t)nh * (nope + vh) * 8), *ao = malloc((size_t)nh * vh * 8), *sc = malloc((size_t)(pos + 1) * 8);
    double inv[512], factor;
    fx_inv_freq(c, rope, inv, &factor);
    if (c->q_lora) {
        double *t = malloc((size_t)c->q_lora * 8);
        fx_mv(&L->qa, x, t);
        fx_rms(t, t, L->qa_norm, c->q_lora, 1e-6);
        fx_mv(&L->qbm, t, q);
        free(t);
    } else {
        fx_mv(&L->q, x, q);
    }
    fx_mv(&L->kva, x, ckv);
    fx_rms(lat, ckv, L->kva_norm, kvl, 1e-6);
    fx_mv(&L->kvb, lat, kv);
    double *K = state_buf(s, &s->lk, c->layers, l, (size_t)s->ctx * nh * qh);
    double *V = state_buf(s, &s->lv, c->layers, l, (size_t)s->ctx * nh * vh);
    double *kr = ckv + kvl;
    rope_interleave(kr, rope, pos, inv, factor);
    for (int h = 0; h < nh; h++) {
        rope_interleave(q + h * qh + nope, rope, pos, inv, factor);
        double *k = K + ((size_t)pos * nh + h) * qh;
        memcpy(k, kv + (size_t)h * (nope + vh), (size_t)nope * 8);
        memcpy(k + nope, kr, (size_t)rope * 8);
        memcpy(V + ((size_t)pos * nh + h) * vh, kv + (size_t)h * (nope + vh) + nope, (size_t)vh * 8);
    }
    double scale = 1.0 / sqrt((double)qh);
    if (c->yarn && c->rs_mscale_all) {
        double ms = yarn_mscale(c->rs_factor, c->rs_mscale_all);
        scale *= ms * ms;
    }
    for (int h = 0; h < nh; h++) {
        double mx = -1e300, sum = 0;
        for (int t = 0; t <= pos; t++) {
            const double *k = K + ((size_t)t * nh + h) * qh;
            double d = 0;
            for (int i = 0; i < qh; i++)
                d += q[h * qh + i] * k[i];
            sc[t] = d * scale;
            mx = fmax(mx, sc[t]);
        }
        for (int t = 0; t <= pos; t++)
            sum += sc[t] = exp(sc[t] - mx);
        for (int i = 0; i < vh; i++) {
            double o = 0;
            for (int t = 0; t <= pos; t++)
                o += sc[t] / sum * V[((size_t)t * nh + h) * vh + i];
            ao[h * vh + i] = o;
        }
    }
    fx_mv(&L->o, ao, out);
    free(q); free(ckv); free(lat); free(kv); free(ao); free(sc);
}

/* Gated DeltaNet, HF's recurrent form: state [Dk][Dv] per value head. */
static void deltanet(const fx_model *m, fx_state *s, int l, const double *x, double *out)
{
    const fx_cfg *c = &m->c;
    const fx_layer *L = &m->L[l];
    int nk = c->lk_heads, dk = c->lk_dim, nv = c->lv_heads, dv = c->lv_dim, Kd = nk * dk, Vd = nv * dv;
    int C = 2 * Kd + Vd, Kc = c->conv_k, rep = nv / nk;
    double *mix = malloc((size_t)C * 8), *z = malloc((size_t)Vd * 8), *b = malloc((size_t)nv * 8),
           *a = malloc((size_t)nv * 8), *co = malloc((size_t)C * 8), *y = malloc((size_t)Vd * 8);
    fx_mv(&L->pqkv, x, mix);
    fx_mv(&L->pz, x, z);
    fx_mv(&L->pb, x, b);
    fx_mv(&L->pa, x, a);
    double *cs = state_buf(s, &s->conv, c->layers, l, (size_t)(Kc - 1) * C);
    for (int ch = 0; ch < C; ch++) { /* conv over the window (state rows, this input) */
        double acc = 0;
        for (int j = 0; j < Kc; j++)
            acc += L->conv[(size_t)ch * Kc + j] * (j < Kc - 1 ? cs[(size_t)j * C + ch] : mix[ch]);
        co[ch] = silu(acc);
    }
    for (int j = 0; j + 1 < Kc - 1; j++)
        memcpy(cs + (size_t)j * C, cs + (size_t)(j + 1) * C, (size_t)C * 8);
    if (Kc > 1)
        memcpy(cs + (size_t)(Kc - 2) * C, mix, (size_t)C * 8);
    double *q = co, *k = co + Kd, *v = co + 2 * Kd;
    for (int h = 0; h < nk; h++) { /* l2norm, eps 1e-6; q also scaled by 1/sqrt(Dk) */
        double sq = 0, sk = 0;
        for (int i = 0; i < dk; i++) {
            sq += q[h * dk + i] * q[h * dk + i];
            sk += k[h * dk + i] * k[h * dk + i];
        }
        for (int i = 0; i < dk; i++) {
            q[h * dk + i] *= 1.0 / sqrt(sq + 1e-6) / sqrt((double)dk);
            k[h * dk + i] *= 1.0 / sqrt(sk + 1e-6);
        }
    }
    double *S0 = state_buf(s, &s->ssm, c->layers, l, (size_t)nv * dk * dv);
    for (int hv = 0; hv < nv; hv++) {
        const double *qh = q + (hv / rep) * dk, *kh = k + (hv / rep) * dk;
        double *S = S0 + (size_t)hv * dk * dv; /* [Dk][Dv] */
        double beta = sigm(b[hv]);
        double sp = a[hv] + L->dt_bias[hv];
        sp = sp > 20 ? sp : log1p(exp(sp));
        double decay = exp(-exp(L->A_log[hv]) * sp);
        for (int i = 0; i < dk * dv; i++)
            S[i] *= decay;
        for (int j = 0; j < dv; j++) {
            double mem = 0;
            for (int i = 0; i < dk; i++)
                mem += S[i * dv + j] * kh[i];
            double delta = (v[hv * dv + j] - mem) * beta;
            for (int i = 0; i < dk; i++)
                S[i * dv + j] += kh[i] * delta;
        }
        for (int j = 0; j < dv; j++) {
            double o = 0;
            for (int i = 0; i < dk; i++)
                o += S[i * dv + j] * qh[i];
            y[hv * dv + j] = o;
        }
        fx_rms(y + hv * dv, y + hv * dv, L->gnorm, dv, c->eps);
        for (int j = 0; j < dv; j++)
            y[hv * dv + j] *= silu(z[hv * dv + j]);
    }
    fx_mv(&L->o, y, out);
    free(mix); free(z); free(b); free(a); free(co); free(y);
}

/* one expert: down(act(gate x + gb, up x + ub)) + db; act silu(g)·u or gpt-oss's clamped GLU */
static void expert(const fx_cfg *c, const dmat *g, const dmat *u, const dmat *d, const double *gb, const double *ub,
                   const double *db, const double *x, double *out)
{
    double *a = malloc((size_t)g->rows * 8), *b = malloc((size_t)g->rows * 8);
    fx_mvb(g, gb, x, a);
    fx_mvb(u, ub, x, b);
    for (int i = 0; i < g->rows; i++) {
        if (c->arch == FX_GPT_OSS) {
            double gg = fmin(a[i], c->swiglu_limit), uu = fmin(fmax(b[i], -c->swiglu_limit), c->swiglu_limit);
            a[i] = gg * sigm(1.702 * gg) * (uu + 1);
        } else {
            a[i] = silu(a[i]) * b[i];
        }
    }
    fx_mvb(d, db, a, out);
    free(a);
    free(b);
}

/* index of the largest v[i] not yet taken (ties: the lower index) */
static int argmax_free(const double *v, const int *taken, int n)
{
    int b = -1;
    for (int i = 0; i < n; i++)
        if (!taken[i] && (b < 0 || v[i] > v[b]))
            b = i;
    return b;
}

/* the MoE block: routing per family, experts, shared experts */
static void moe(const fx_model *m, int l, const double *x, double *out)
{
    const fx_cfg *c = &m->c;
    const fx_layer *L = &m->L[l];
    int E = c->experts, K = c->top_k, H = c->hidden, ids[64];
    double w[64], *lg = malloc((size_t)E * 8), *p = malloc((size_t)E * 8), *t = malloc((size_t)H * 8);
    int *taken = calloc((size_t)E, sizeof(int));
    fx_mvb(&L->router, L->rb, x, lg);
    if (c->arch == FX_DEEPSEEK) { /* sigmoid scores; pick by score + bias inside the best groups */
        double *choice = malloc((size_t)E * 8);
        for (int i = 0; i < E; i++) {
            p[i] = sigm(lg[i]);
            choice[i] = p[i] + L->ebias[i];
        }
        int per = E / c->n_group, *gtaken = calloc((size_t)c->n_group, sizeof(int));
        double *gs = malloc((size_t)c->n_group * 8);
        for (int g = 0; g < c->n_group; g++) {
            int tk[64] = {0};
            int a1 = argmax_free(choice + g * per, tk, per);
            tk[a1] = 1;
            int a2 = argmax_free(choice + g * per, tk, per);
            gs[g] = choice[g * per + a1] + choice[g * per + a2];
        }
        for (int j = 0; j < c->topk_group; j++)
            gtaken[argmax_free(gs, gtaken, c->n_group)] = 1;
        for (int i = 0; i < E; i++)
            if (!gtaken[i / per])
                choice[i] = 0.0;
        double sum = 0;
        for (int k = 0; k < K; k++) {
            ids[k] = argmax_free(choice, taken, E);
            taken[ids[k]] = 1;
            sum += w[k] = p[ids[k]];
        }
        for (int k = 0; k < K; k++)
            w[k] = (c->norm_topk ? w[k] / (sum + 1e-20) : w[k]) * c->route_scale;
        free(choice); free(gtaken); free(gs);
    } else if (c->arch == FX_GPT_OSS) { /* top-k logits, softmax over them */
        double mx = -1e300, sum = 0;
        for (int k = 0; k < K; k++) {
            ids[k] = argmax_free(lg, taken, E);
            taken[ids[k]] = 1;
            mx = fmax(mx, lg[ids[k]]);
        }
        for (int k = 0; k < K; k++)
            sum += w[k] = exp(lg[ids[k]] - mx);
        for (int k = 0; k < K; k++)
            w[k] /= sum;
    } else { /* softmax over all, top-k, renormalised (mixtral always, qwen when norm_topk_prob) */
        double mx = -1e300, sum = 0, ws = 0;
        for (int i = 0; i < E; i++)
            mx = fmax(mx, lg[i]);
        for (int i = 0; i < E; i++)
            sum += p[i] = exp(lg[i] - mx);
        for (int k = 0; k < K; k++) {
            ids[k] = argmax_free(p, taken, E);
            taken[ids[k]] = 1;
            ws += w[k] = p[ids[k]] / sum;
        }
        for (int k = 0; k < K && (c->norm_topk || c->arch == FX_MIXTRAL); k++)
            w[k] /= ws;
    }
    memset(out, 0, (size_t)H * 8);
    for (int k = 0; k < K; k++) {
        int e = ids[k];
        expert(c, &L->eg[e], &L->eu[e], &L->ed[e], L->egb ? L->egb[e] : NULL, L->eub ? L->eub[e] : NULL,
               L->edb ? L->edb[e] : NULL, x, t);
        for (int i = 0; i < H; i++)
            out[i] += w[k] * t[i];
    }
    if (L->sg.w) {
        double gl = 0;
        expert(c, &L->sg, &L->su, &L->sd, NULL, NULL, NULL, x, t);
        if (L->sgate.w)
            fx_mv(&L->sgate, x, &gl);
        for (int i = 0; i < H; i++)
            out[i] += (L->sgate.w ? sigm(gl) : 1.0) * t[i];
    }
    free(lg); free(p); free(t); free(taken);
}

static void fx_forward_family(const fx_model *m, fx_state *s, int token, int pos, double *logits)
{
    const fx_cfg *c = &m->c;
    int H = c->hidden;
    double *x = malloc((size_t)H * 8), *h = malloc((size_t)H * 8), *t = malloc((size_t)H * 8);
    for (int i = 0; i < H; i++)
        x[i] = m->embed.w[(size_t)token * H + i];
    for (int l = 0; l < c->layers; l++) {
        const fx_layer *L = &m->L[l];
        fx_rms(h, x, L->in_norm, H, c->eps);
        if (c->arch == FX_DEEPSEEK)
            mla(m, s, l, pos, h, t);
        else if (L->linear)
            deltanet(m, s, l, h, t);
        else
            attention(m, s, l, pos, h, t);
        for (int i = 0; i < H; i++)
            x[i] += t[i];
        fx_rms(h, x, L->post_norm, H, c->eps);
        if (L->moe)
            moe(m, l, h, t);
        else
            fx_mlp(&L->gate, &L->up, &L->down, h, t);
        for (int i = 0; i < H; i++)
            x[i] += t[i];
    }
    fx_rms(h, x, m->norm, H, c->eps);
    fx_mv(&m->lm, h, logits);
    free(x); free(h); free(t);
}

/* ---------------------------------------------------------------- qwen2, qwen2_moe */
/* Written from transformers' models/qwen2/modeling_qwen2.py (Qwen2Attention: q/k/v Linear
 * with bias=True, o_proj without; no q/k norm; rotate_half RoPE over the whole head_dim with
 * inv_freq = 1 / theta^(arange(0, d, 2) / d); eager_attention_forward: softmax of q·k ·
 * head_dim^-0.5 under the causal mask, a window of sliding_window positions on sliding
 * layers; Qwen2MLP: down(silu(gate x) * up x)), configuration_qwen2.py (Qwen2Config.
 * __post_init__: sliding_attention for layer i >= max_window_layers only when
 * use_sliding_window) and models/qwen2_moe/modeling_qwen2_moe.py (Qwen2MoeDecoderLayer: the
 * sparse block when the layer is not in mlp_only_layers and (i + 1) % decoder_sparse_step
 * == 0, else Qwen2MoeMLP of intermediate_size; Qwen2MoeSparseMoeBlock.forward: softmax over
 * the router logits, torch.topk, divided by their sum if norm_topk_prob, each chosen expert
 * times its weight, plus sigmoid(shared_expert_gate(x)) * shared_expert(x)). Shares nothing
 * with the other families' code above but the f64 helpers (fx_mv, fx_rms, silu). */
static void qwen2_mlp(const dmat *g, const dmat *u, const dmat *d, const double *x, double *out)
{
    double *a = malloc((size_t)g->rows * 8), *b = malloc((size_t)g->rows * 8);
    fx_mv(g, x, a);
    fx_mv(u, x, b);
    for (int i = 0; i < g->rows; i++)
        a[i] = silu(a[i]) * b[i];
    fx_mv(d, a, out);
    free(a);
    free(b);
}

/* rotate_half(x) = cat(-x2, x1); q_embed = q * cos + rotate_half(q) * sin, cos/sin of
 * cat(freqs, freqs) */
static void qwen2_rope(double *v, int d, int pos, double theta)
{
    double *r = malloc((size_t)d * 8), *o = malloc((size_t)d * 8);
    for (int i = 0; i < d / 2; i++) {
        r[i] = -v[i + d / 2];
        r[i + d / 2] = v[i];
    }
    for (int j = 0; j < d; j++) {
        int i = j % (d / 2);
        double freq = pos * (1.0 / pow(theta, (double)(2 * i) / d));
        o[j] = v[j] * cos(freq) + r[j] * sin(freq);
    }
    memcpy(v, o, (size_t)d * 8);
    free(r);
    free(o);
}

static void qwen2_sparse_moe(const fx_model *m, const fx_layer *L, const double *x, double *out)
{
    const fx_cfg *c = &m->c;
    int E = c->experts, H = c->hidden;
    double *rw = malloc((size_t)E * 8), *t = malloc((size_t)H * 8), mx = -1e300, sum = 0;
    fx_mv(&L->router, x, rw);
    for (int i = 0; i < E; i++)
        mx = fmax(mx, rw[i]);
    for (int i = 0; i < E; i++)
        sum += rw[i] = exp(rw[i] - mx);
    for (int i = 0; i < E; i++)
        rw[i] /= sum;
    int sel[64], *used = calloc((size_t)E, sizeof(int));
    double w[64], wsum = 0;
    for (int k = 0; k < c->top_k; k++) { /* torch.topk: largest first, ties to the lower index */
        int b = -1;
        for (int i = 0; i < E; i++)
            if (!used[i] && (b < 0 || rw[i] > rw[b]))
                b = i;
        used[b] = 1;
        sel[k] = b;
        wsum += w[k] = rw[b];
    }
    memset(out, 0, (size_t)H * 8);
    for (int k = 0; k < c->top_k; k++) {
        double wk = c->norm_topk ? w[k] / wsum : w[k];
        qwen2_mlp(&L->eg[sel[k]], &L->eu[sel[k]], &L->ed[sel[k]], x, t);
        for (int i = 0; i < H; i++)
            out[i] += wk * t[i];
    }
    double gl;
    qwen2_mlp(&L->sg, &L->su, &L->sd, x, t);
    fx_mv(&L->sgate, x, &gl);
    for (int i = 0; i < H; i++)
        out[i] += 1.0 / (1.0 + exp(-gl)) * t[i];
    free(rw); free(t); free(used);
}

static void fx_forward_qwen2(const fx_model *m, fx_state *s, int token, int pos, double *logits)
{
    const fx_cfg *c = &m->c;
    int H = c->hidden, hd = H / c->heads, qd = c->heads * hd, kd = c->kv_heads * hd; /* no head_dim key */
    double *x = malloc((size_t)H * 8), *h = malloc((size_t)H * 8), *t = malloc((size_t)H * 8),
           *q = malloc((size_t)qd * 8), *ao = malloc((size_t)qd * 8), *sc = malloc((size_t)(pos + 1) * 8);
    for (int i = 0; i < H; i++)
        x[i] = m->embed.w[(size_t)token * H + i];
    for (int l = 0; l < c->layers; l++) {
        const fx_layer *L = &m->L[l];
        fx_rms(h, x, L->in_norm, H, c->eps);
        double *K = state_buf(s, &s->lk, c->layers, l, (size_t)s->ctx * kd);
        double *V = state_buf(s, &s->lv, c->layers, l, (size_t)s->ctx * kd);
        double *k = K + (size_t)pos * kd, *v = V + (size_t)pos * kd;
        fx_mv(&L->q, h, q);
        fx_mv(&L->k, h, k);
        fx_mv(&L->v, h, v);
        for (int i = 0; i < qd; i++)
            q[i] += L->qb[i];
        for (int i = 0; i < kd; i++) {
            k[i] += L->kb[i];
            v[i] += L->vb[i];
        }
        for (int hh = 0; hh < c->heads; hh++)
            qwen2_rope(q + hh * hd, hd, pos, c->theta);
        for (int hh = 0; hh < c->kv_heads; hh++)
            qwen2_rope(k + hh * hd, hd, pos, c->theta);
        int sliding = c->use_sliding && l >= c->max_window_layers;
        for (int hh = 0; hh < c->heads; hh++) {
            int kh = hh / (c->heads / c->kv_heads); /* repeat_kv */
            double mx = -1e300, sum = 0;
            for (int p = 0; p <= pos; p++) {
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += q[hh * hd + i] * K[(size_t)p * kd + kh * hd + i];
                /* the mask: causal, and on sliding layers kv_idx > q_idx - sliding_window */
                sc[p] = sliding && !(p > pos - c->window) ? -INFINITY : d * pow((double)hd, -0.5);
                mx = fmax(mx, sc[p]);
            }
            for (int p = 0; p <= pos; p++)
                sum += sc[p] = exp(sc[p] - mx);
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int p = 0; p <= pos; p++)
                    o += sc[p] / sum * V[(size_t)p * kd + kh * hd + i];
                ao[hh * hd + i] = o;
            }
        }
        fx_mv(&L->o, ao, t);
        for (int i = 0; i < H; i++)
            x[i] += t[i];
        fx_rms(h, x, L->post_norm, H, c->eps);
        int sparse = c->arch == FX_QWEN2_MOE && c->experts > 0 && c->mlp_only != l + 1 && (l + 1) % c->sparse_step == 0;
        if (sparse)
            qwen2_sparse_moe(m, L, h, t);
        else
            qwen2_mlp(&L->gate, &L->up, &L->down, h, t);
        for (int i = 0; i < H; i++)
            x[i] += t[i];
    }
    fx_rms(h, x, m->norm, H, c->eps);
    fx_mv(&m->lm, h, logits);
    free(x); free(h); free(t); free(q); free(ao); free(sc);
}

/* ---------------------------------------------------------------- gemma4 */
/* Gemma 4's text model as transformers writes it (src/transformers/models/gemma4/
 * modeling_gemma4.py), line by line in f64:
 * - Gemma4RMSNorm: x · (mean(x²) + eps)^-0.5, times the weight as stored (with_scale=False:
 *   none); Gemma 4 has no "1 + w" (Gemma 3's Gemma3RMSNorm did);
 * - Gemma4TextScaledWordEmbedding: rows · embed_scale.to(weight.dtype), embed_scale =
 *   hidden_size ** 0.5 (so sqrt(H) rounded to the embedding's dtype);
 * - Gemma4TextAttention.forward: q_norm then rotary on q; k = k_proj(h), v = v_proj(h), or
 *   v = k (attention_k_eq_v on full layers: use_alternative_attention, v_proj None) before
 *   k_norm; k_norm then rotary on k; v_norm (no scale) on v; eager_attention_forward with
 *   scaling = self.scaling = 1.0, no softcap (Gemma4TextAttention passes none), the sliding
 *   mask kv_idx > q_idx - sliding_window (masking_utils' sliding window overlay);
 *   head_dim = global_head_dim on full layers, num_global_key_value_heads key heads there
 *   with attention_k_eq_v;
 * - Gemma4TextRotaryEmbedding: per layer type; "default": inv_freq = 1 / theta^(arange(0, d,
 *   2) / d), d = head_dim; "proportional" (modeling_rope_utils.py,
 *   _compute_proportional_rope_parameters with head_dim_key "global_head_dim"): rope_angles =
 *   int(partial_rotary_factor · D // 2) frequencies 1 / theta^(arange(0, 2·rope_angles, 2) / D)
 *   then zeros up to D/2; emb = cat(freqs, freqs); apply_rotary_pos_emb: x·cos + rotate_half(x)·sin;
 * - Gemma4TextMLP / Gemma4TextExperts: down(act(gate(x)) · up(x)), act = gelu_pytorch_tanh;
 * - Gemma4TextRouter.forward: norm (no scale), · scale · hidden_size^-0.5, proj, softmax over
 *   all experts, topk, divided by their sum, times per_expert_scale[index];
 * - Gemma4TextDecoderLayer.forward (no per-layer input): sandwich norms, the dense MLP and the
 *   experts side by side (router and pre_feedforward_layernorm_2 on the residual),
 *   hidden_states *= layer_scalar at the end;
 * - Gemma4ForCausalLM.forward: lm_head (tied to embed_tokens), logits / cap, tanh, · cap. */
static double g4_round(double v, int dtype)
{
    if (dtype == FX_BF16) { /* bf16: keep 8 significant bits, ties to even */
        int ex;
        double m = frexp(v, &ex) * 256.0;
        return ldexp(nearbyint(m), ex - 8);
    }
    if (dtype == FX_F16) {
        int ex;
        double m = frexp(v, &ex) * 2048.0;
        return ldexp(nearbyint(m), ex - 11);
    }
    return (float)v;
}

static double g4_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * pow(x, 3.0))));
}

static void g4_mlp(const dmat *g, const dmat *u, const dmat *d, const double *x, double *out)
{
    double *a = malloc((size_t)g->rows * 8), *b = malloc((size_t)g->rows * 8);
    fx_mv(g, x, a);
    fx_mv(u, x, b);
    for (int i = 0; i < g->rows; i++)
        a[i] = g4_gelu(a[i]) * b[i];
    fx_mv(d, a, out);
    free(a);
    free(b);
}

/* apply_rotary_pos_emb on one head of D dims with inv_freq [D/2] */
static void g4_rope(double *x, int D, int pos, const double *inv)
{
    double *cs = malloc((size_t)D * 8), *sn = malloc((size_t)D * 8), *rh = malloc((size_t)D * 8);
    for (int i = 0; i < D; i++) {
        double a = pos * inv[i % (D / 2)]; /* emb = cat(freqs, freqs) */
        cs[i] = cos(a);
        sn[i] = sin(a);
        rh[i] = i < D / 2 ? -x[i + D / 2] : x[i - D / 2]; /* rotate_half: cat(-x2, x1) */
    }
    for (int i = 0; i < D; i++)
        x[i] = x[i] * cs[i] + rh[i] * sn[i];
    free(cs);
    free(sn);
    free(rh);
}

static void fx_forward_gemma4(const fx_model *m, fx_state *s, int token, int pos, double *logits)
{
    const fx_cfg *c = &m->c;
    int H = c->hidden, E = c->experts, big = H > 2 * c->heads * c->g_head_dim ? H : 2 * c->heads * c->g_head_dim;
    double *x = malloc((size_t)H * 8), *h = malloc((size_t)H * 8), *t = malloc((size_t)H * 8), *t2 = malloc((size_t)H * 8),
           *q = malloc((size_t)big * 8), *ao = malloc((size_t)big * 8), *sc = malloc((size_t)(pos + 1) * 8),
           *mo = malloc((size_t)H * 8), *acc = malloc((size_t)H * 8);
    double scale = g4_round(sqrt((double)H), m->embed_dtype);
    for (int i = 0; i < H; i++)
        x[i] = m->embed.w[(size_t)token * H + i] * scale;
    for (int l = 0; l < c->layers; l++) {
        const fx_layer *L = &m->L[l];
        int D = L->full ? c->g_head_dim : c->head_dim;
        int kvh = L->full && c->k_eq_v ? c->g_kv_heads : c->kv_heads, kd = kvh * D;
        double *inv = calloc((size_t)D / 2, 8);
        if (L->full) { /* proportional */
            int angles = (int)floor(c->prf * D / 2.0);
            for (int i = 0; i < angles; i++)
                inv[i] = 1.0 / pow(c->theta_full, 2.0 * i / D);
        } else {
            for (int i = 0; i < D / 2; i++)
                inv[i] = 1.0 / pow(c->theta, 2.0 * i / D);
        }
        /* ---- attention */
        fx_rms(h, x, L->in_norm, H, c->eps);
        double *K = state_buf(s, &s->lk, c->layers, l, (size_t)s->ctx * kd);
        double *V = state_buf(s, &s->lv, c->layers, l, (size_t)s->ctx * kd);
        double *k = K + (size_t)pos * kd, *v = V + (size_t)pos * kd;
        fx_mv(&L->q, h, q);
        fx_mv(&L->k, h, k);
        if (L->v.w)
            fx_mv(&L->v, h, v);
        else
            memcpy(v, k, (size_t)kd * 8); /* value_states = key_states, before k_norm */
        for (int hh = 0; hh < c->heads; hh++) {
            fx_rms(q + hh * D, q + hh * D, L->qn, D, c->eps);
            g4_rope(q + hh * D, D, pos, inv);
        }
        for (int hh = 0; hh < kvh; hh++) {
            fx_rms(k + hh * D, k + hh * D, L->kn, D, c->eps);
            g4_rope(k + hh * D, D, pos, inv);
            fx_rms(v + hh * D, v + hh * D, NULL, D, c->eps);
        }
        for (int hh = 0; hh < c->heads; hh++) {
            int kh = hh / (c->heads / kvh);
            double mx = -1e300, sum = 0;
            for (int p = 0; p <= pos; p++) {
                double d = 0;
                for (int i = 0; i < D; i++)
                    d += q[hh * D + i] * K[(size_t)p * kd + kh * D + i];
                sc[p] = !L->full && !(p > pos - c->window) ? -INFINITY : d * 1.0;
                mx = fmax(mx, sc[p]);
            }
            for (int p = 0; p <= pos; p++)
                sum += sc[p] = exp(sc[p] - mx);
            for (int i = 0; i < D; i++) {
                double o = 0;
                for (int p = 0; p <= pos; p++)
                    o += sc[p] / sum * V[(size_t)p * kd + kh * D + i];
                ao[hh * D + i] = o;
            }
        }
        fx_mv(&L->o, ao, t);
        fx_rms(t, t, L->post_norm, H, c->eps);
        for (int i = 0; i < H; i++)
            x[i] += t[i];
        /* ---- feed-forward: residual = x */
        fx_rms(h, x, L->pre_ff, H, c->eps);
        g4_mlp(&L->gate, &L->up, &L->down, h, mo);
        if (L->moe) {
            fx_rms(mo, mo, L->post_ff1, H, c->eps); /* hidden_states_1 */
            double *pr = malloc((size_t)E * 8), mx = -1e300, sum = 0, wsum = 0, w[64];
            fx_rms(h, x, NULL, H, c->eps);
            for (int i = 0; i < H; i++)
                h[i] = h[i] * L->rscale[i] * pow((double)H, -0.5);
            fx_mv(&L->router, h, pr);
            for (int i = 0; i < E; i++)
                mx = fmax(mx, pr[i]);
            for (int i = 0; i < E; i++)
                sum += pr[i] = exp(pr[i] - mx);
            for (int i = 0; i < E; i++)
                pr[i] /= sum;
            int sel[64], *used = calloc((size_t)E, sizeof(int));
            for (int kk = 0; kk < c->top_k; kk++) { /* torch.topk: largest first, ties to the lower index */
                int b = -1;
                for (int i = 0; i < E; i++)
                    if (!used[i] && (b < 0 || pr[i] > pr[b]))
                        b = i;
                used[b] = 1;
                sel[kk] = b;
                wsum += w[kk] = pr[b];
            }
            fx_rms(h, x, L->pre_ff2, H, c->eps);
            memset(acc, 0, (size_t)H * 8);
            for (int kk = 0; kk < c->top_k; kk++) {
                double wk = w[kk] / wsum * L->pscale[sel[kk]];
                g4_mlp(&L->eg[sel[kk]], &L->eu[sel[kk]], &L->ed[sel[kk]], h, t2);
                for (int i = 0; i < H; i++)
                    acc[i] += wk * t2[i];
            }
            fx_rms(acc, acc, L->post_ff2, H, c->eps); /* hidden_states_2 */
            for (int i = 0; i < H; i++)
                mo[i] += acc[i];
            free(pr);
            free(used);
        }
        fx_rms(mo, mo, L->post_ff, H, c->eps);
        for (int i = 0; i < H; i++)
            x[i] = (x[i] + mo[i]) * L->lscalar;
        free(inv);
    }
    fx_rms(h, x, m->norm, H, c->eps);
    fx_mv(&m->lm, h, logits);
    for (int i = 0; c->softcap > 0 && i < c->vocab; i++)
        logits[i] = tanh(logits[i] / c->softcap) * c->softcap;
    free(x); free(h); free(t); free(t2); free(q); free(ao); free(sc); free(mo); free(acc);
}

void fx_forward(const fx_model *m, fx_state *s, int token, int pos, double *logits)
{
    if (m->c.arch == FX_GEMMA4)
        fx_forward_gemma4(m, s, token, pos, logits);
    else if (m->c.arch == FX_QWEN2 || m->c.arch == FX_QWEN2_MOE)
        fx_forward_qwen2(m, s, token, pos, logits);
    else if (m->c.arch >= FX_MIXTRAL)
        fx_forward_family(m, s, token, pos, logits);
    else
        fx_forward_classic(m, s, token, pos, logits);
}

/* ---------------------------------------------------------------- test configurations */
const char *fx_kind_name(int kind)
{
    static const char *const n[FX_NKINDS] = {"f32", "bf16", "f16", "aff4", "aff8", "tq3", "tq4", "tq2"};
    return kind >= 0 && kind < FX_NKINDS ? n[kind] : "?";
}

fx_cfg fx_small_cfg(int arch, int kind)
{
    fx_cfg c = {0};
    c.arch = arch;
    c.kind = kind;
    c.hidden = 64;
    c.inter = 96; /* down_proj input 96 = 12·8: an m = 12 Hadamard block */
    c.layers = 2;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.vocab = 80;
    c.theta = 10000.0;
    c.eps = 1e-6;
    c.seed = 7;
    c.tied = arch == FX_QWEN3;
    if (arch == FX_QWEN3_MOE) {
        c.experts = 8;
        c.top_k = 2;
        c.moe_inter = 32;
        c.norm_topk = 1;
    }
    return c;
}

fx_cfg fx_family_cfg(int arch, int kind)
{
    fx_cfg c = fx_small_cfg(arch, kind); /* every case below sets its own intermediate size */
    c.seed = 17 + (uint64_t)arch;
    c.experts = 8;
    c.top_k = 2;
    c.moe_inter = 32;
    c.norm_topk = 1;
    switch (arch) {
    case FX_MIXTRAL:
        c.moe_inter = 96; /* the expert width is intermediate_size */
        c.inter = 96;
        c.window = 8;
        c.eps = 1e-5;
        c.theta = 1e6;
        break;
    case FX_DEEPSEEK: /* a dense first layer, q LoRA, 4 groups of 2 experts, YaRN + mscale */
        c.layers = 3;
        c.inter = 96;
        c.q_lora = 32;
        c.kv_lora = 32;
        c.qk_nope = 16;
        c.qk_rope = 8;
        c.v_head = 16;
        c.head_dim = 24;
        c.kv_heads = c.heads;
        c.n_shared = 1;
        c.first_dense = 1;
        c.n_group = 4;
        c.topk_group = 2;
        c.top_k = 3;
        c.route_scale = 2.5;
        c.yarn = 1;
        c.rs_factor = 40;
        c.rs_orig = 4096;
        c.rs_beta_fast = 32;
        c.rs_beta_slow = 1;
        c.rs_mscale = 1;
        c.rs_mscale_all = 1;
        c.rs_truncate = 1;
        break;
    case FX_GPT_OSS: /* sliding then full layer, sinks, biases, YaRN without truncation */
        c.moe_inter = 32;
        c.inter = 32;
        c.window = 6;
        c.eps = 1e-5;
        c.theta = 150000;
        c.yarn = 1;
        c.rs_factor = 32;
        c.rs_orig = 4096;
        c.rs_beta_fast = 32;
        c.rs_beta_slow = 1;
        c.rs_truncate = 0;
        c.swiglu_limit = 0.6; /* small enough that the clamps act on these weights */
        break;
    case FX_QWEN2:
    case FX_QWEN2_MOE:
        /* The keys and settings of published configs (config.json of Qwen/Qwen2.5-0.5B:
         * Qwen2ForCausalLM, rope_theta 1000000, rms_norm_eps 1e-06, use_sliding_window false,
         * sliding_window 32768, max_window_layers 24 = num_hidden_layers, tie_word_embeddings
         * true, no head_dim; Qwen/Qwen1.5-MoE-A2.7B: Qwen2MoeForCausalLM, num_experts 60,
         * num_experts_per_tok 4, moe_intermediate_size 1408, shared_expert_intermediate_size
         * 5632 = intermediate_size, norm_topk_prob false, decoder_sparse_step 1,
         * use_sliding_window false, sliding_window 32768, max_window_layers 21,
         * tie_word_embeddings false), at this file's sizes; test_runtime_families.c's
         * qwen2_sliding turns the window on. */
        c.layers = 3;
        c.theta = 1e6;
        c.eps = 1e-6;
        c.window = 32768;
        c.max_window_layers = c.layers;
        c.sparse_step = 1;
        c.tied = arch == FX_QWEN2;
        if (arch == FX_QWEN2_MOE) {
            c.top_k = 4;
            c.norm_topk = 0;
            c.shared_inter = c.inter; /* 96: an m = 12 Hadamard block for down_proj */
            c.mlp_only = 2;           /* layer 1 dense (mlp_only_layers [1]) */
        }
        break;
    case FX_GEMMA4:
        /* The keys and settings of google/gemma-4-26B-A4B-it's config.json
         * (https://huggingface.co/google/gemma-4-26B-A4B-it/blob/main/config.json, text_config:
         * hidden_size 2816, intermediate_size 2112, 30 layers, 16 heads, num_key_value_heads 8,
         * head_dim 256, global_head_dim 512, attention_k_eq_v true, num_global_key_value_heads 2,
         * sliding_window 1024, layer_types 5 sliding : 1 full, rope_parameters sliding_attention
         * {default, 10000} and full_attention {proportional, 1000000, partial_rotary_factor 0.25},
         * final_logit_softcapping 30.0, enable_moe_block true, 128 experts, top_k_experts 8,
         * moe_intermediate_size 704, rms_norm_eps 1e-06, hidden_activation gelu_pytorch_tanh,
         * hidden_size_per_layer_input 0, num_kv_shared_layers 0, tie_word_embeddings true), at
         * this file's sizes: hidden 96 (sqrt(96) is not a bf16 or f16 number, so the embedding
         * scale's rounding shows), sliding, sliding, full; a window of 6 over 32 positions; the
         * full layer's 32-dim heads turn 4 of their 16 pairs. */
        c.hidden = 96;
        c.layers = 3;
        c.heads = 4;
        c.kv_heads = 2;
        c.head_dim = 16;
        c.g_head_dim = 32;
        c.g_kv_heads = 1;
        c.k_eq_v = 1;
        c.full_every = 6;
        c.window = 6;
        c.theta = 10000.0;
        c.theta_full = 1e6;
        c.prf = 0.25;
        c.softcap = 30.0;
        c.inter = 96;
        c.moe_inter = 32;
        c.top_k = 2;
        c.tied = 1;
        break;
    default: /* qwen3_next, qwen3_5_moe: linear, full, linear, full; a shared expert; partial rotary */
        c.layers = 4;
        c.heads = 2;
        c.kv_heads = 1;
        c.head_dim = 32;
        c.inter = 96;
        c.shared_inter = 32;
        c.lk_heads = 2;
        c.lv_heads = 4;
        c.lk_dim = 16;
        c.lv_dim = 16;
        c.conv_k = 4;
        c.full_interval = 2;
        c.prf = 0.25;
        c.theta = 1e7;
        c.layer_types = arch == FX_QWEN3_5_MOE;
        c.mlp_only = arch == FX_QWEN3_NEXT ? 3 : 0; /* layer 2: a dense MLP */
        c.tied = arch == FX_QWEN3_5_MOE;
        break;
    }
    return c;
}
