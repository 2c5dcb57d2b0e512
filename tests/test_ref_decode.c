/*
 * Decode attention on the cpu backend (the reference), through the public
 * API, against spec section 2:
 *  (a) small cases whose answers are worked out by hand in the comments;
 *  (b) seeded random cases against an independent f64 loop in this file,
 *      compared with the spec section 4 tolerances;
 *  (c) masking edges: L_b < R, rows with no visible key (with and without
 *      sinks), window_left 0, windows wider than the context, R > 1 causal
 *      rows, page sizes 1, 16 and odd, token-major and head-major caches with
 *      padded strides, and bad page indices;
 *  (d) what engines pass in besides (issue 27): f16 q, f16 o, fp8 e5m2
 *      caches, head dims 80, 96 and 192 and Dv != D (192/128, 64/128, ...),
 *      in hand-worked cases and against the same f64 loop.
 * Outputs are poisoned with 0xFF (NaN as bf16/f16/f32) before every run, and
 * the gaps between output elements must still hold the poison afterwards.
 */
#define _POSIX_C_SOURCE 200112L /* setenv, unsetenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_tensor.h"
#include "qattn/convert.h"
#include "qattn/qattn.h"
#include "test_rng.h"
#include "tolerance.h"

#define POISON 0xFF
#define MAX_B 8

typedef struct dcfg {
    const char *name;
    int B, R, Hq, Hkv, D;
    qattn_dtype kv;
    int P;              /* page size */
    int lens[MAX_B];    /* kv_lens */
    int window_left;    /* -1 = none */
    float softcap;      /* 0 = off */
    int sinks, lse;     /* optional operands present */
    int head_major;     /* cache laid out [head, slot, d] */
    int pad;            /* padding elements in every layout */
    int Dv;             /* V's and o's head dim; 0: D */
    qattn_dtype qdt, odt; /* q's and o's dtypes; 0 (INVALID): bf16 */
} dcfg;

static int cfg_dv(const dcfg *c) { return c->Dv ? c->Dv : c->D; }
static qattn_dtype cfg_qdt(const dcfg *c) { return c->qdt ? c->qdt : QATTN_BF16; }
static qattn_dtype cfg_odt(const dcfg *c) { return c->odt ? c->odt : QATTN_BF16; }

/* The bits of x in a 16-bit float format (bf16 or f16), rounded to nearest
 * even; and the value of such bits. */
static uint16_t half_bits(float x, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn_f32_to_f16(x) : qattn_f32_to_bf16(x);
}
static double half_value(uint16_t b, qattn_dtype dt) {
    return dt == QATTN_F16 ? qattn_f16_to_f32(b) : qattn_bf16_to_f32(b);
}

typedef struct dfix {
    dcfg c;
    float sm_scale;
    int64_t n_slots, n_pages;
    int32_t indptr[MAX_B + 1];
    int32_t *pages; /* the test's own copy of kv_indices */
    qt_ht q, kc, vc, ks, vs, indptr_t, indices_t, lens_t, sinks_t, o, lse;
} dfix;

static int is_fp8(qattn_dtype t) {
    return t == QATTN_FP8_E4M3FN || t == QATTN_FP8_E4M3FNUZ || t == QATTN_FP8_E5M2;
}

/* A random value of the cache's code format (never zero). */
static void random_kv_code(qt_rng *rng, qt_ht *t, int64_t n) {
    void *p = qt_ht_at_linear(t, n);
    if (t->dtype == QATTN_BF16) {
        uint16_t b = qattn_f32_to_bf16(qt_signed(rng, 0.05f, 1.0f));
        memcpy(p, &b, 2);
    } else if (t->dtype == QATTN_I8) {
        qt_fill_i8(rng, (int8_t *)p, 1);
    } else {
        qt_fill_fp8(rng, (uint8_t *)p, 1, t->dtype, 16.0f);
    }
}

/* Builds every host image for cfg: random q, caches, scales and sinks; a
 * shuffled page table with two spare pages; outputs full of poison. */
static dfix dfix_make(qt_rng *rng, const dcfg *c) {
    dfix f;
    memset(&f, 0, sizeof f);
    f.c = *c;
    f.sm_scale = 2.0f / sqrtf((float)c->D);
    int64_t total = 2;
    for (int b = 0; b < c->B; ++b) total += (c->lens[b] + c->P - 1) / c->P;
    f.n_pages = total;
    f.n_slots = total * c->P;
    int32_t *perm = malloc((size_t)total * sizeof *perm);
    f.pages = malloc((size_t)total * sizeof *f.pages);
    for (int64_t i = 0; i < total; ++i) perm[i] = (int32_t)i;
    qt_shuffle_i32(rng, perm, (size_t)total);
    f.indptr[0] = 0;
    for (int b = 0; b < c->B; ++b) f.indptr[b + 1] = f.indptr[b] + (c->lens[b] + c->P - 1) / c->P;
    for (int64_t i = 0; i < total; ++i) f.pages[i] = perm[i]; /* spares at the end */
    free(perm);

    qt_layout dense = qt_layout_dense();
    qt_layout padded = {{0, 1, 2, 3}, c->pad, c->pad};
    qt_layout cache = {{c->head_major ? 1 : 0, c->head_major ? 0 : 1, 2, 3}, c->pad, c->pad};
    /* Scales keep their last dimension (kv head) contiguous, as every
     * descriptor must; padding still separates the slots. */
    qt_layout scl = {{0, 1, 2, 3}, c->pad, c->pad};

    const int64_t qs[4] = {c->B, c->R, c->Hq, c->D}, os[4] = {c->B, c->R, c->Hq, cfg_dv(c)};
    const int64_t cs[3] = {f.n_slots, c->Hkv, c->D}, vs[3] = {f.n_slots, c->Hkv, cfg_dv(c)};
    const int64_t ss[2] = {f.n_slots, c->Hkv};
    const int64_t bp1[1] = {c->B + 1}, bb[1] = {c->B}, np[1] = {f.n_pages}, hq[1] = {c->Hq};
    const int64_t lse_s[3] = {c->B, c->R, c->Hq};

    f.q = qt_ht_make(cfg_qdt(c), 4, qs, &padded, POISON);
    for (int64_t n = 0; n < qt_ht_count(&f.q); ++n) {
        uint16_t b = half_bits(qt_signed(rng, 0.05f, 1.0f), cfg_qdt(c));
        memcpy(qt_ht_at_linear(&f.q, n), &b, 2);
    }
    f.kc = qt_ht_make(c->kv, 3, cs, &cache, POISON);
    f.vc = qt_ht_make(c->kv, 3, vs, &cache, POISON);
    for (int64_t n = 0; n < qt_ht_count(&f.kc); ++n) random_kv_code(rng, &f.kc, n);
    for (int64_t n = 0; n < qt_ht_count(&f.vc); ++n) random_kv_code(rng, &f.vc, n);
    if (c->kv != QATTN_BF16) {
        /* fp8 codes span about [-16, 16]; int8 [-127, 127]: scales bring
         * both to values of order 1. */
        float lo = is_fp8(c->kv) ? 0.02f : 0.004f, hi = is_fp8(c->kv) ? 0.1f : 0.012f;
        f.ks = qt_ht_make(QATTN_F32, 2, ss, &scl, POISON);
        f.vs = qt_ht_make(QATTN_F32, 2, ss, &scl, POISON);
        for (int64_t n = 0; n < qt_ht_count(&f.ks); ++n) {
            float a = qt_uniform(rng, lo, hi), b = qt_uniform(rng, lo, hi);
            memcpy(qt_ht_at_linear(&f.ks, n), &a, 4);
            memcpy(qt_ht_at_linear(&f.vs, n), &b, 4);
        }
    }
    f.indptr_t = qt_ht_make(QATTN_I32, 1, bp1, &dense, POISON);
    f.lens_t = qt_ht_make(QATTN_I32, 1, bb, &dense, POISON);
    f.indices_t = qt_ht_make(QATTN_I32, 1, np, &dense, POISON);
    for (int b = 0; b <= c->B; ++b) qt_ht_set_i32(&f.indptr_t, b, f.indptr[b]);
    for (int b = 0; b < c->B; ++b) qt_ht_set_i32(&f.lens_t, b, c->lens[b]);
    for (int64_t i = 0; i < f.n_pages; ++i) qt_ht_set_i32(&f.indices_t, i, f.pages[i]);
    if (c->sinks) {
        f.sinks_t = qt_ht_make(QATTN_F32, 1, hq, &dense, POISON);
        for (int h = 0; h < c->Hq; ++h) qt_ht_set_f32(&f.sinks_t, h, 0, 0, 0, qt_signed(rng, 0.1f, 2.0f));
    }
    f.o = qt_ht_make(cfg_odt(c), 4, os, &padded, POISON);
    if (c->lse) f.lse = qt_ht_make(QATTN_F32, 3, lse_s, &padded, POISON);
    return f;
}

/* Every tensor of the fixture, listed once (see qt_ht_upload_present). */
static size_t dfix_tensors(dfix *f, qt_ht **out) {
    qt_ht *const all[] = {&f->q, &f->kc, &f->vc, &f->ks, &f->vs, &f->indptr_t, &f->indices_t, &f->lens_t,
                          &f->sinks_t, &f->o, &f->lse};
    memcpy(out, all, sizeof all);
    return sizeof all / sizeof all[0];
}

static void dfix_free(qattn_context *ctx, dfix *f) {
    qt_ht *ts[QT_HT_MAX_LIST];
    qt_ht_free_present(ctx, ts, dfix_tensors(f, ts));
    free(f->pages);
}

static qattn_decode_args dfix_args(qattn_context *ctx, dfix *f) {
    qt_ht *ts[QT_HT_MAX_LIST];
    qt_ht_upload_present(ctx, ts, dfix_tensors(f, ts));
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = qt_ht_desc(&f->q);
    a.k_cache = qt_ht_desc(&f->kc);
    a.v_cache = qt_ht_desc(&f->vc);
    if (f->ks.data) {
        a.k_scale = qt_ht_desc(&f->ks);
        a.v_scale = qt_ht_desc(&f->vs);
    }
    a.kv_indptr = qt_ht_desc(&f->indptr_t);
    a.kv_indices = qt_ht_desc(&f->indices_t);
    a.kv_lens = qt_ht_desc(&f->lens_t);
    if (f->sinks_t.data) a.sinks = qt_ht_desc(&f->sinks_t);
    a.o = qt_ht_desc(&f->o);
    if (f->lse.data) a.lse = qt_ht_desc(&f->lse);
    a.page_size = f->c.P;
    int maxlen = 0;
    for (int b = 0; b < f->c.B; ++b) maxlen = f->c.lens[b] > maxlen ? f->c.lens[b] : maxlen;
    a.max_kv_len = maxlen;
    a.sm_scale = f->sm_scale;
    a.window_left = f->c.window_left;
    a.logit_softcap = f->c.softcap;
    return a;
}

/* Plans and runs; returns the run status (plan failures fail the test). */
static qattn_status run_decode(qattn_context *ctx, const qattn_decode_args *a) {
    qattn_decode_plan plan;
    qattn_status s = qattn_decode_plan_create(ctx, a, NULL, &plan);
    if (s != QATTN_OK) fail_msg("plan: %s: %s", qattn_status_name(s), qattn_last_error(ctx));
    qattn_buffer *ws = NULL;
    if (plan.workspace_bytes) assert_int_equal(qattn_buffer_alloc(ctx, plan.workspace_bytes, &ws), QATTN_OK);
    s = qattn_decode_run(ctx, &plan, a, ws, 0);
    qattn_buffer_free(ctx, ws);
    return s;
}

static qattn_context *cpu_ctx(void) {
    qattn_context *ctx = NULL;
    char err[256] = "";
    qattn_status s = qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err);
    if (s != QATTN_OK) fail_msg("cpu context: %s", err);
    return ctx;
}

/* ---- the independent f64 reference --------------------------------------- */

/* K̂ / V̂ at (slot, g, d): decoded code times its scale. */
static double kv_hat(const qt_ht *cache, const qt_ht *scale, int64_t slot, int64_t g, int64_t d) {
    double v = qt_ht_value(cache, slot, g, d, 0);
    return scale->data ? v * (double)qt_ht_f32(scale, slot, g, 0, 0) : v;
}

/* Spec 2 written as log-sum-exp over the list of visible keys: collects the
 * visible positions, their scores, lse = log(sum exp(s) [+ exp(sink)]), then
 * o = sum exp(s - lse) V̂. Writes o_exp [B,R,Hq,Dv] and lse_exp [B,R,Hq]. */
static void expected_decode(const dfix *f, double *o_exp, double *lse_exp) {
    const dcfg *c = &f->c;
    const int Dv = cfg_dv(c);
    const int64_t group = c->Hq / c->Hkv;
    int maxlen = 1;
    for (int b = 0; b < c->B; ++b) maxlen = c->lens[b] > maxlen ? c->lens[b] : maxlen;
    int64_t *slots = malloc((size_t)maxlen * sizeof *slots);
    double *s = malloc((size_t)maxlen * sizeof *s);
    for (int b = 0; b < c->B; ++b) {
        for (int r = 0; r < c->R; ++r) {
            const int64_t t = (int64_t)c->lens[b] - c->R + r;
            int n = 0;
            for (int64_t p = 0; p < c->lens[b]; ++p) {
                int visible = p <= t && (c->window_left < 0 || t - p <= c->window_left);
                if (!visible) continue;
                slots[n++] = (int64_t)f->pages[f->indptr[b] + p / c->P] * c->P + p % c->P;
            }
            for (int h = 0; h < c->Hq; ++h) {
                const int64_t g = h / group;
                const size_t row = ((size_t)b * c->R + r) * c->Hq + h;
                double mx = -INFINITY;
                for (int i = 0; i < n; ++i) {
                    double dot = 0;
                    for (int d = 0; d < c->D; ++d)
                        dot += qt_ht_value(&f->q, b, r, h, d) * kv_hat(&f->kc, &f->ks, slots[i], g, d);
                    s[i] = (double)f->sm_scale * dot;
                    if (c->softcap > 0) s[i] = c->softcap * tanh(s[i] / c->softcap);
                    mx = fmax(mx, s[i]);
                }
                double sink = c->sinks ? (double)qt_ht_f32(&f->sinks_t, h, 0, 0, 0) : -INFINITY;
                mx = fmax(mx, sink);
                double sum = c->sinks ? exp(sink - mx) : 0.0;
                for (int i = 0; i < n; ++i) sum += exp(s[i] - mx);
                double lse = (n == 0 && !c->sinks) ? -INFINITY : mx + log(sum);
                lse_exp[row] = lse;
                for (int d = 0; d < Dv; ++d) {
                    double o = 0;
                    for (int i = 0; i < n; ++i) o += exp(s[i] - lse) * kv_hat(&f->vc, &f->vs, slots[i], g, d);
                    o_exp[row * Dv + d] = o;
                }
            }
        }
    }
    free(slots);
    free(s);
}

/* Compares the downloaded o / lse with the f64 loop and checks the gaps. */
static void check_decode(qt_rng *rng, dfix *f) {
    const dcfg *c = &f->c;
    const int Dv = cfg_dv(c);
    size_t rows = (size_t)c->B * c->R * c->Hq;
    double *o_exp = malloc(rows * Dv * sizeof *o_exp), *lse_exp = malloc(rows * sizeof *lse_exp);
    expected_decode(f, o_exp, lse_exp);
    for (int b = 0; b < c->B; ++b)
        for (int r = 0; r < c->R; ++r)
            for (int h = 0; h < c->Hq; ++h) {
                size_t row = ((size_t)b * c->R + r) * c->Hq + h;
                for (int d = 0; d < Dv; ++d) {
                    double got = half_value(qt_ht_u16(&f->o, b, r, h, d), cfg_odt(c));
                    double want = o_exp[row * Dv + d];
                    QT_CHECK(rng, qt_tol_decode_o(got, want),
                             "%s: o[%d,%d,%d,%d] = %.7g, f64 loop %.7g (L=%d)", c->name, b, r, h, d,
                             got, want, c->lens[b]);
                }
                if (c->lse) {
                    double got = qt_ht_f32(&f->lse, b, r, h, 0);
                    QT_CHECK(rng, qt_tol_decode_lse(got, lse_exp[row]),
                             "%s: lse[%d,%d,%d] = %.7g, f64 loop %.7g (L=%d)", c->name, b, r, h, got,
                             lse_exp[row], c->lens[b]);
                }
            }
    QT_CHECK(rng, qt_ht_gaps_equal(&f->o, POISON), "%s: o written outside its elements", c->name);
    if (c->lse) QT_CHECK(rng, qt_ht_gaps_equal(&f->lse, POISON), "%s: lse written outside its elements", c->name);
    free(o_exp);
    free(lse_exp);
}

static void run_and_check(qattn_context *ctx, qt_rng *rng, const dcfg *c) {
    dfix f = dfix_make(rng, c);
    qattn_decode_args a = dfix_args(ctx, &f);
    qattn_status s = run_decode(ctx, &a);
    QT_CHECK(rng, s == QATTN_OK, "%s: run: %s: %s", c->name, qattn_status_name(s), qattn_last_error(ctx));
    qt_ht_download(ctx, &f.o);
    if (c->lse) qt_ht_download(ctx, &f.lse);
    check_decode(rng, &f);
    dfix_free(ctx, &f);
}

/* ---- (a) hand-worked cases ------------------------------------------------ */

/* Sets every d of q[b, r, h, :] / a cache row to one value. */
static void set_q_row(dfix *f, int b, int r, int h, float v) {
    for (int d = 0; d < f->c.D; ++d) qt_ht_set_u16(&f->q, b, r, h, d, half_bits(v, cfg_qdt(&f->c)));
}
static int64_t slot_of(const dfix *f, int b, int p) {
    return (int64_t)f->pages[f->indptr[b] + p / f->c.P] * f->c.P + p % f->c.P;
}
static void set_bf16_kv_row(qt_ht *t, int64_t slot, int g, int D, float v) {
    for (int d = 0; d < D; ++d) qt_ht_set_u16(t, slot, g, d, 0, qattn_f32_to_bf16(v));
}
static uint16_t o_bits(const dfix *f, int b, int r, int h, int d) { return qt_ht_u16(&f->o, b, r, h, d); }

static void test_hand_two_keys(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.hand_two_keys");
    /* One head, D = 64, two keys, bf16 cache, sm_scale 1.
     * q = 1/8 everywhere; K0 = 1/8 everywhere -> q.K0 = 64 * 1/64 = 1;
     * K1 = 0 -> q.K1 = 0. Scores s = (1, 0), m = 1,
     * Z = e^0 + e^-1 = 1.36787944, lse = 1 + ln(1.36787944) = 1.31326169.
     * V0 = +1, V1 = -1: o = (e^0 * 1 + e^-1 * -1) / Z = (1 - 0.36787944) /
     * 1.36787944 = 0.46211716 (= tanh(1/2)). bf16: 0.46211716 = 1.84846863 *
     * 2^-2, 1.84846863 * 128 = 236.6 -> 237: 237/128 * 2^-2 = 0.462890625,
     * bits 0x3EED. */
    dcfg c = {"hand_two_keys", 1, 1, 1, 1, 64, QATTN_BF16, 1, {2}, -1, 0, 0, 1, 0, 0, 0, 0, 0};
    dfix f = dfix_make(&rng, &c);
    f.sm_scale = 1.0f;
    set_q_row(&f, 0, 0, 0, 0.125f);
    set_bf16_kv_row(&f.kc, slot_of(&f, 0, 0), 0, 64, 0.125f);
    set_bf16_kv_row(&f.kc, slot_of(&f, 0, 1), 0, 64, 0.0f);
    set_bf16_kv_row(&f.vc, slot_of(&f, 0, 0), 0, 64, 1.0f);
    set_bf16_kv_row(&f.vc, slot_of(&f, 0, 1), 0, 64, -1.0f);
    qattn_decode_args a = dfix_args(ctx, &f);
    QT_ASSERT_EQ(&rng, run_decode(ctx, &a), QATTN_OK);
    qt_ht_download(ctx, &f.o);
    qt_ht_download(ctx, &f.lse);
    for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, o_bits(&f, 0, 0, 0, d), 0x3EED);
    QT_ASSERT(&rng, qt_tol_decode_lse(qt_ht_f32(&f.lse, 0, 0, 0, 0), 1.31326169));
    QT_ASSERT(&rng, fabs(qt_ht_f32(&f.lse, 0, 0, 0, 0) - 1.31326169) < 1e-6);
    check_decode(&rng, &f); /* and the f64 loop agrees */
    dfix_free(ctx, &f);
    qattn_context_free(ctx);
}

static void test_hand_int8_fp8_scales(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.hand_scales");
    /* The same two-key problem stored quantized, to see scales applied per
     * (slot, head). int8: K0 codes 2 with k_scale 1/16 -> K̂0 = 1/8; K1 codes
     * 5 with scale 0 -> K̂1 = 0 (a zero scale is legal data). V0 codes 2,
     * v_scale 0.5 -> +1; V1 codes -4, v_scale 0.25 -> -1. So o = tanh(1/2)
     * -> bf16 0x3EED again and lse = 1.31326169.
     * fp8 fn: 0x38 = 1.0 (e = 7, m = 0), 0xB8 = -1.0; K0 = 0x38 * 0.125,
     * K1 = 0x38 * 0, V0 = 0x38 * 1, V1 = 0xB8 * 1. fnuz: 0x40 = 1.0, 0xC0 = -1.
     * e5m2: 0x3C = 1.0 (e = 15, m = 0: f16 0x3C00), 0xBC = -1. */
    const qattn_dtype dts[4] = {QATTN_I8, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_FP8_E5M2};
    for (int i = 0; i < 4; ++i) {
        dcfg c = {"hand_scales", 1, 1, 2, 1, 64, dts[i], 16, {2}, -1, 0, 0, 1, i == 1, 2, 0, 0, 0};
        qt_rng_case(&rng, (uint64_t)i);
        dfix f = dfix_make(&rng, &c);
        f.sm_scale = 1.0f;
        set_q_row(&f, 0, 0, 0, 0.125f);
        set_q_row(&f, 0, 0, 1, 0.125f); /* two q heads sharing the kv head */
        int64_t s0 = slot_of(&f, 0, 0), s1 = slot_of(&f, 0, 1);
        uint8_t one = dts[i] == QATTN_FP8_E4M3FNUZ ? 0x40 : dts[i] == QATTN_FP8_E5M2 ? 0x3C : 0x38;
        for (int d = 0; d < 64; ++d) {
            if (dts[i] == QATTN_I8) {
                qt_ht_set_u8(&f.kc, s0, 0, d, 0, 2);
                qt_ht_set_u8(&f.kc, s1, 0, d, 0, 5);
                qt_ht_set_u8(&f.vc, s0, 0, d, 0, 2);
                qt_ht_set_u8(&f.vc, s1, 0, d, 0, (uint8_t)(int8_t)-4);
            } else {
                qt_ht_set_u8(&f.kc, s0, 0, d, 0, one);
                qt_ht_set_u8(&f.kc, s1, 0, d, 0, one);
                qt_ht_set_u8(&f.vc, s0, 0, d, 0, one);
                qt_ht_set_u8(&f.vc, s1, 0, d, 0, (uint8_t)(one | 0x80));
            }
        }
        int q8 = dts[i] == QATTN_I8;
        qt_ht_set_f32(&f.ks, s0, 0, 0, 0, q8 ? 0.0625f : 0.125f);
        qt_ht_set_f32(&f.ks, s1, 0, 0, 0, 0.0f);
        qt_ht_set_f32(&f.vs, s0, 0, 0, 0, q8 ? 0.5f : 1.0f);
        qt_ht_set_f32(&f.vs, s1, 0, 0, 0, q8 ? 0.25f : 1.0f);
        qattn_decode_args a = dfix_args(ctx, &f);
        QT_ASSERT_EQ(&rng, run_decode(ctx, &a), QATTN_OK);
        qt_ht_download(ctx, &f.o);
        qt_ht_download(ctx, &f.lse);
        for (int h = 0; h < 2; ++h) {
            for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, o_bits(&f, 0, 0, h, d), 0x3EED);
            QT_ASSERT(&rng, fabs(qt_ht_f32(&f.lse, 0, 0, h, 0) - 1.31326169) < 1e-6);
        }
        check_decode(&rng, &f);
        dfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

/* The two-key problem of test_hand_two_keys with q and o in f16 and K and
 * V of different head dims: D = 192 with q = 1/8 everywhere and K0 = 1/8 on
 * the first 64 dims (0 on the rest), so q.K0 = 64/64 = 1 again; K1 = 0; V
 * rows of Dv = 128: V0 = +1, V1 = -1. o = tanh(1/2) = 0.46211716 in every
 * one of the 128 dims: f16 ulp in [1/4, 1/2) is 2^-12, 0.46211716 * 4096 =
 * 1892.83 -> 1893 = 0.4621582 (exponent 13, mantissa 869: 0x3765); as bf16
 * 0x3EED (test_hand_two_keys). lse = 1.31326169. Then the same with D = 64
 * (q.K0 = 1 with K0 = 1/8 everywhere), Dv = 128, f16 q and bf16 o, and
 * D = 128, Dv = 64, bf16 q and f16 o, on an e5m2 cache (1/8 = 0x30, 1 = 0x3C,
 * -1 = 0xBC, scales 1). */
static void test_hand_f16_and_dv(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.hand_f16_dv");
    const struct {
        int D, Dv;
        qattn_dtype q, o, kv;
        uint16_t want;
    } cases[3] = {{192, 128, QATTN_F16, QATTN_F16, QATTN_BF16, 0x3765},
                  {64, 128, QATTN_F16, QATTN_BF16, QATTN_BF16, 0x3EED},
                  {128, 64, QATTN_BF16, QATTN_F16, QATTN_FP8_E5M2, 0x3765}};
    for (int i = 0; i < 3; ++i) {
        dcfg c = {"hand_f16_dv", 1, 1, 2, 1, cases[i].D, cases[i].kv, 16, {2}, -1, 0, 0, 1, i == 2, 1,
                  cases[i].Dv, cases[i].q, cases[i].o};
        qt_rng_case(&rng, (uint64_t)i);
        dfix f = dfix_make(&rng, &c);
        f.sm_scale = 1.0f;
        set_q_row(&f, 0, 0, 0, 0.125f);
        set_q_row(&f, 0, 0, 1, 0.125f);
        const int64_t s0 = slot_of(&f, 0, 0), s1 = slot_of(&f, 0, 1);
        const int e5 = cases[i].kv == QATTN_FP8_E5M2;
        for (int d = 0; d < cases[i].D; ++d) {
            const float k0 = d < 64 ? 0.125f : 0.0f;
            if (e5) {
                qt_ht_set_u8(&f.kc, s0, 0, d, 0, d < 64 ? 0x30 : 0x00);
                qt_ht_set_u8(&f.kc, s1, 0, d, 0, 0x00);
            } else {
                qt_ht_set_u16(&f.kc, s0, 0, d, 0, qattn_f32_to_bf16(k0));
                qt_ht_set_u16(&f.kc, s1, 0, d, 0, 0x0000);
            }
        }
        for (int d = 0; d < cases[i].Dv; ++d) {
            if (e5) {
                qt_ht_set_u8(&f.vc, s0, 0, d, 0, 0x3C);
                qt_ht_set_u8(&f.vc, s1, 0, d, 0, 0xBC);
            } else {
                qt_ht_set_u16(&f.vc, s0, 0, d, 0, qattn_f32_to_bf16(1.0f));
                qt_ht_set_u16(&f.vc, s1, 0, d, 0, qattn_f32_to_bf16(-1.0f));
            }
        }
        if (e5) {
            const int64_t sl[2] = {s0, s1};
            for (int k = 0; k < 2; ++k) {
                qt_ht_set_f32(&f.ks, sl[k], 0, 0, 0, 1.0f);
                qt_ht_set_f32(&f.vs, sl[k], 0, 0, 0, 1.0f);
            }
        }
        qattn_decode_args a = dfix_args(ctx, &f);
        QT_ASSERT_EQ(&rng, run_decode(ctx, &a), QATTN_OK);
        qt_ht_download(ctx, &f.o);
        qt_ht_download(ctx, &f.lse);
        for (int h = 0; h < 2; ++h) {
            for (int d = 0; d < cases[i].Dv; ++d) QT_ASSERT_EQ(&rng, o_bits(&f, 0, 0, h, d), cases[i].want);
            QT_ASSERT(&rng, fabs(qt_ht_f32(&f.lse, 0, 0, h, 0) - 1.31326169) < 1e-6);
        }
        check_decode(&rng, &f);
        dfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

static void test_hand_window_rows(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.hand_window_rows");
    /* L = 4 keys, R = 2 rows, page size 2; K = 0 so every visible score is 0
     * and o is the plain mean of the visible V; V_p = p + 1.
     * Row r has position t = L - R + r: row 0 -> t = 2, row 1 -> t = 3.
     * No window: row 0 sees p = 0..2 -> o = (1+2+3)/3 = 2, lse = ln 3;
     *            row 1 sees p = 0..3 -> o = 2.5, lse = ln 4.
     * window_left 1: row 0 sees p = 1..2 -> o = 2.5, lse = ln 2;
     *                row 1 sees p = 2..3 -> o = 3.5, lse = ln 2.
     * window_left 0: each row sees only p = t -> o = 3 and 4, lse = 0. */
    const int windows[3] = {-1, 1, 0};
    const double want_o[3][2] = {{2.0, 2.5}, {2.5, 3.5}, {3.0, 4.0}};
    const double want_lse[3][2] = {{log(3.0), log(4.0)}, {log(2.0), log(2.0)}, {0.0, 0.0}};
    for (int w = 0; w < 3; ++w) {
        for (int hm = 0; hm < 2; ++hm) {
            dcfg c = {"hand_window_rows", 1, 2, 1, 1, 64, QATTN_BF16, 2, {4}, windows[w], 0, 0, 1, hm, 1, 0, 0, 0};
            qt_rng_case(&rng, (uint64_t)(w * 2 + hm));
            dfix f = dfix_make(&rng, &c);
            for (int p = 0; p < 4; ++p) {
                set_bf16_kv_row(&f.kc, slot_of(&f, 0, p), 0, 64, 0.0f);
                set_bf16_kv_row(&f.vc, slot_of(&f, 0, p), 0, 64, (float)(p + 1));
            }
            qattn_decode_args a = dfix_args(ctx, &f);
            QT_ASSERT_EQ(&rng, run_decode(ctx, &a), QATTN_OK);
            qt_ht_download(ctx, &f.o);
            qt_ht_download(ctx, &f.lse);
            for (int r = 0; r < 2; ++r) {
                for (int d = 0; d < 64; ++d)
                    QT_ASSERT(&rng, qattn_bf16_to_f32(o_bits(&f, 0, r, 0, d)) == (float)want_o[w][r]);
                QT_ASSERT(&rng, fabs(qt_ht_f32(&f.lse, 0, r, 0, 0) - want_lse[w][r]) < 1e-6);
            }
            check_decode(&rng, &f);
            dfix_free(ctx, &f);
        }
    }
    qattn_context_free(ctx);
}

static void test_hand_empty_rows_and_sinks(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.hand_empty_sinks");
    /* Request 0: L = 1 key, R = 3 rows: positions t = -2, -1, 0. Rows 0 and 1
     * see nothing; row 2 sees key 0. Request 1: L = 0, every row empty.
     * K = 1/8, q = 1/8 -> s = 1 * sm_scale = 1 (sm_scale 1); V0 = 1.
     * Without sinks: empty rows o = 0, lse = -inf; row 2: o = 1, lse = 1.
     * With sink 0.5 on head 0: empty rows o = 0, lse = 0.5; row 2: m = 1,
     * Z = e^0 + e^(0.5-1) = 1.60653066, o = 1/Z = 0.62245933 (bf16 0.62109375
     * 0x3F1F: 0.62245933*256 = 159.35 -> 159 = 0x9F), lse = 1 + ln Z = 1.47407698. */
    for (int with_sinks = 0; with_sinks < 2; ++with_sinks) {
        dcfg c = {"hand_empty_sinks", 2, 3, 1, 1, 64, QATTN_BF16, 1, {1, 0}, -1, 0, with_sinks, 1, 0, 0, 0, 0, 0};
        qt_rng_case(&rng, (uint64_t)with_sinks);
        dfix f = dfix_make(&rng, &c);
        f.sm_scale = 1.0f;
        for (int r = 0; r < 3; ++r) set_q_row(&f, 0, r, 0, 0.125f);
        set_bf16_kv_row(&f.kc, slot_of(&f, 0, 0), 0, 64, 0.125f);
        set_bf16_kv_row(&f.vc, slot_of(&f, 0, 0), 0, 64, 1.0f);
        if (with_sinks) qt_ht_set_f32(&f.sinks_t, 0, 0, 0, 0, 0.5f);
        qattn_decode_args a = dfix_args(ctx, &f);
        QT_ASSERT_EQ(&rng, run_decode(ctx, &a), QATTN_OK);
        qt_ht_download(ctx, &f.o);
        qt_ht_download(ctx, &f.lse);
        const double empty_lse = with_sinks ? 0.5 : -INFINITY;
        for (int b = 0; b < 2; ++b)
            for (int r = 0; r < 3; ++r) {
                if (b == 0 && r == 2) continue;
                for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, o_bits(&f, b, r, 0, d), 0x0000);
                QT_ASSERT(&rng, qt_ht_f32(&f.lse, b, r, 0, 0) == (float)empty_lse);
            }
        for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, o_bits(&f, 0, 2, 0, d), with_sinks ? 0x3F1F : 0x3F80);
        QT_ASSERT(&rng, fabs(qt_ht_f32(&f.lse, 0, 2, 0, 0) - (with_sinks ? 1.47407698 : 1.0)) < 1e-6);
        check_decode(&rng, &f);
        dfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

static void test_hand_softcap(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.hand_softcap");
    /* q = 1/4, K0 = 1/8: q.K0 = 64/32 = 2; K1 = 0: 0. softcap 2:
     * s0 = 2 tanh(2/2) = 1.52318831, s1 = 2 tanh(0) = 0. V = +1 / -1:
     * o = tanh(s0 / 2) = tanh(0.76159416) = 0.64201499; bf16: 0.64201499 * 256
     * = 164.36 -> 164 -> 0.640625 (0x3F24); lse = s0 + ln(1 + e^-s0) =
     * 1.52318831 + 0.19722304 = 1.72041135. Without the cap the same inputs
     * give s0 = 2: o = tanh(1) = 0.76159416 -> 0.76171875 (0x3F43: 194.97 ->
     * 195), lse = 2 + ln(1 + e^-2) = 2.12692801. */
    for (int capped = 0; capped < 2; ++capped) {
        dcfg c = {"hand_softcap", 1, 1, 1, 1, 64, QATTN_BF16, 1, {2}, -1, capped ? 2.0f : 0.0f, 0, 1, 0, 0, 0, 0, 0};
        qt_rng_case(&rng, (uint64_t)capped);
        dfix f = dfix_make(&rng, &c);
        f.sm_scale = 1.0f;
        set_q_row(&f, 0, 0, 0, 0.25f);
        set_bf16_kv_row(&f.kc, slot_of(&f, 0, 0), 0, 64, 0.125f);
        set_bf16_kv_row(&f.kc, slot_of(&f, 0, 1), 0, 64, 0.0f);
        set_bf16_kv_row(&f.vc, slot_of(&f, 0, 0), 0, 64, 1.0f);
        set_bf16_kv_row(&f.vc, slot_of(&f, 0, 1), 0, 64, -1.0f);
        qattn_decode_args a = dfix_args(ctx, &f);
        QT_ASSERT_EQ(&rng, run_decode(ctx, &a), QATTN_OK);
        qt_ht_download(ctx, &f.o);
        qt_ht_download(ctx, &f.lse);
        for (int d = 0; d < 64; ++d) QT_ASSERT_EQ(&rng, o_bits(&f, 0, 0, 0, d), capped ? 0x3F24 : 0x3F43);
        QT_ASSERT(&rng, fabs(qt_ht_f32(&f.lse, 0, 0, 0, 0) - (capped ? 1.72041135 : 2.12692801)) < 1e-6);
        check_decode(&rng, &f);
        dfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

/* ---- (b), (c): random cases against the f64 loop -------------------------- */

static const dcfg RANDOM_CASES[] = {
    /* name                 B  R  Hq Hkv D    kv                   P   lens                 win  cap  sink lse hm pad */
    {"bf16_p1_plain",       3, 1, 4, 4, 64,  QATTN_BF16,          1,  {5, 17, 1},          -1,  0,   0,   1,  0, 0, 0, 0, 0},
    {"fn_p16_gqa_win",      2, 4, 8, 2, 128, QATTN_FP8_E4M3FN,    16, {40, 3},             7,   0,   1,   1,  1, 3, 0, 0, 0},
    {"fnuz_p7_self_cap",    3, 2, 6, 3, 64,  QATTN_FP8_E4M3FNUZ,  7,  {0, 33, 16},         0,   2,   0,   1,  0, 1, 0, 0, 0},
    {"i8_p16_mqa_widewin",  2, 8, 16, 1, 256, QATTN_I8,           16, {20, 64},            1000, 0,  1,   1,  1, 1, 0, 0, 0},
    {"bf16_p1_L<R_sinks",   1, 3, 2, 1, 128, QATTN_BF16,          1,  {2},                 -1,  0,   1,   1,  1, 0, 0, 0, 0},
    {"fn_p16_nolse_cap30",  4, 1, 4, 2, 256, QATTN_FP8_E4M3FN,    16, {1, 16, 17, 50},     4,   30,  0,   0,  0, 2, 0, 0, 0},
    {"i8_p1_r5_all",        2, 5, 4, 2, 64,  QATTN_I8,            1,  {9, 5},              2,   1.5, 1,   1,  0, 2, 0, 0, 0},
    {"fnuz_p3_hm_long",     2, 2, 4, 4, 128, QATTN_FP8_E4M3FNUZ,  3,  {100, 31},           -1,  0,   1,   1,  1, 0, 0, 0, 0},
    {"bf16_p16_gqa8",       1, 8, 8, 1, 64,  QATTN_BF16,          16, {129},               31,  0,   0,   1,  0, 4, 0, 0, 0},
    /* issue 27: f16 q / o, e5m2 caches, head dims 80/96/192, Dv != D (Dv, q, o last) */
    {"e5m2_p16_gqa4_f16qo", 2, 2, 8, 2, 128, QATTN_FP8_E5M2, 16, {40, 17}, -1, 0, 1, 1, 0, 0, 0, QATTN_F16, QATTN_F16},
    {"e5m2_p1_hm_D80_cap", 3, 1, 4, 4, 80, QATTN_FP8_E5M2, 1, {9, 1, 33}, 5, 2, 0, 1, 1, 2, 0, 0, 0},
    {"fn_p16_D96_f16o", 2, 3, 6, 3, 96, QATTN_FP8_E4M3FN, 16, {50, 3}, -1, 0, 1, 1, 0, 1, 0, 0, QATTN_F16},
    {"bf16_p1_D96_f16q", 1, 4, 4, 1, 96, QATTN_BF16, 1, {21}, 7, 0, 0, 1, 1, 0, 0, QATTN_F16, 0},
    {"fnuz_p16_hm_D192", 2, 1, 8, 4, 192, QATTN_FP8_E4M3FNUZ, 16, {33, 16}, -1, 30, 1, 1, 1, 3, 0, 0, 0},
    {"bf16_p16_192_128", 2, 2, 4, 2, 192, QATTN_BF16, 16, {19, 64}, -1, 0, 1, 1, 0, 0, 128, QATTN_F16, QATTN_F16},
    {"e5m2_p1_hm_192_128", 2, 1, 8, 2, 192, QATTN_FP8_E5M2, 1, {12, 30}, 9, 0, 0, 1, 1, 1, 128, 0, QATTN_F16},
    {"i8_p16_64_128", 3, 2, 4, 1, 64, QATTN_I8, 16, {1, 17, 40}, -1, 1.5, 1, 1, 0, 2, 128, QATTN_F16, 0},
    {"fn_p1_hm_64_128", 1, 8, 8, 2, 64, QATTN_FP8_E4M3FN, 1, {25}, 3, 0, 1, 0, 1, 0, 128, 0, 0},
    {"e5m2_p16_128_64", 2, 1, 2, 2, 128, QATTN_FP8_E5M2, 16, {16, 31}, -1, 0, 0, 1, 0, 1, 64, QATTN_F16, QATTN_BF16},
    {"bf16_p1_D16_Dv240", 1, 2, 2, 1, 16, QATTN_BF16, 1, {13}, -1, 0, 0, 1, 1, 0, 240, 0, QATTN_F16},
};

static void test_random_vs_f64(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.random");
    const size_t n = sizeof RANDOM_CASES / sizeof RANDOM_CASES[0];
    for (size_t i = 0; i < n; ++i) {
        for (int rep = 0; rep < 2; ++rep) { /* fresh inputs per repetition */
            qt_rng_case(&rng, i * 2 + (size_t)rep);
            run_and_check(ctx, &rng, &RANDOM_CASES[i]);
        }
    }
    qattn_context_free(ctx);
}

/* Random lengths, page sizes and windows, one request each, so L_b < R,
 * L_b = 0 and windows of every width relative to L_b come up. */
static void test_random_shapes(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.random_shapes");
    const qattn_dtype dts[4] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8};
    const int pages[4] = {1, 16, 5, 2};
    for (int i = 0; i < 24; ++i) {
        qt_rng_case(&rng, (uint64_t)i);
        dcfg c;
        memset(&c, 0, sizeof c);
        c.name = "random_shape";
        c.B = (int)qt_int(&rng, 1, 3);
        c.R = (int)qt_int(&rng, 1, 8);
        c.Hkv = (int)qt_int(&rng, 1, 2);
        c.Hq = c.Hkv * (int)qt_int(&rng, 1, 3);
        c.D = 64;
        c.kv = dts[i % 4];
        c.P = pages[(i / 4) % 4];
        for (int b = 0; b < c.B; ++b) c.lens[b] = (int)qt_int(&rng, 0, 24);
        c.window_left = (int)qt_int(&rng, -1, 12);
        c.softcap = (qt_u64(&rng) & 1) ? 0.0f : 3.0f;
        c.sinks = (int)(qt_u64(&rng) & 1);
        c.lse = 1;
        c.head_major = (int)(qt_u64(&rng) & 1);
        c.pad = (int)qt_int(&rng, 0, 3);
        run_and_check(ctx, &rng, &c);
    }
    qattn_context_free(ctx);
}

/* The same over the issue 27 axes: every cache dtype (e5m2 included), q and
 * o each bf16 or f16, D and Dv drawn from the head dims engines use (Dv
 * differing from D in about half the cases), page sizes 1 and 16, token-
 * and head-major caches. */
static void test_random_shapes_new_axes(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.random_shapes_27");
    const qattn_dtype dts[5] = {QATTN_FP8_E5M2, QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8};
    const int dims[7] = {64, 80, 96, 128, 192, 256, 48};
    for (int i = 0; i < 30; ++i) {
        qt_rng_case(&rng, (uint64_t)i);
        dcfg c;
        memset(&c, 0, sizeof c);
        c.name = "random_shape_27";
        c.B = (int)qt_int(&rng, 1, 3);
        c.R = (int)qt_int(&rng, 1, 4);
        c.Hkv = (int)qt_int(&rng, 1, 2);
        c.Hq = c.Hkv * (int)qt_int(&rng, 1, 4);
        c.D = dims[qt_int(&rng, 0, 6)];
        c.Dv = (qt_u64(&rng) & 1) ? dims[qt_int(&rng, 0, 6)] : 0;
        c.kv = dts[i % 5];
        c.qdt = (i / 5) % 2 ? QATTN_F16 : QATTN_BF16;
        c.odt = (i / 10) % 2 ? QATTN_F16 : QATTN_BF16;
        c.P = (i / 5) % 3 == 2 ? 1 : 16;
        for (int b = 0; b < c.B; ++b) c.lens[b] = (int)qt_int(&rng, 0, 40);
        c.window_left = (int)qt_int(&rng, -1, 20);
        c.softcap = (qt_u64(&rng) & 1) ? 0.0f : 5.0f;
        c.sinks = (int)(qt_u64(&rng) & 1);
        c.lse = 1;
        c.head_major = i % 2;
        c.pad = (int)qt_int(&rng, 0, 2);
        run_and_check(ctx, &rng, &c);
    }
    qattn_context_free(ctx);
}

/* A page index outside the cache (spec 2): with QATTN_CHECK_INDICES=1 the
 * call fails with INDEX_OUT_OF_RANGE and leaves o and lse untouched; without
 * it the key is not visible and the call computes the rest. */
static void test_bad_page_index(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("decode.bad_index");
    for (int variant = 0; variant < 3; ++variant) {
        dcfg c = {"bad_index", 2, 2, 2, 1, 64, QATTN_FP8_E4M3FN, 4, {9, 6}, -1, 0, 1, 1, 0, 1, 0, 0, 0};
        qt_rng_case(&rng, (uint64_t)variant);
        dfix f = dfix_make(&rng, &c);
        /* request 1's second page: past the cache, negative, or one page too far */
        int32_t bad = variant == 0 ? (int32_t)(f.n_slots / c.P) : variant == 1 ? -1 : (int32_t)(f.n_slots / c.P + 7);
        qt_ht_set_i32(&f.indices_t, f.indptr[1] + 1, bad);
        qattn_decode_args a = dfix_args(ctx, &f);
        setenv("QATTN_CHECK_INDICES", "1", 1);
        qattn_status s = run_decode(ctx, &a);
        unsetenv("QATTN_CHECK_INDICES");
        QT_CHECK(&rng, s == QATTN_ERR_INDEX_OUT_OF_RANGE, "bad page %d: got %s", bad, qattn_status_name(s));
        qt_ht_download(ctx, &f.o);
        qt_ht_download(ctx, &f.lse);
        QT_CHECK(&rng, qt_ht_all_bytes(&f.o, POISON), "bad page %d: o was written", bad);
        QT_CHECK(&rng, qt_ht_all_bytes(&f.lse, POISON), "bad page %d: lse was written", bad);
        s = run_decode(ctx, &a);
        QT_CHECK(&rng, s == QATTN_OK, "bad page %d without the index mode: got %s", bad, qattn_status_name(s));
        qt_ht_download(ctx, &f.o);
        QT_CHECK(&rng, !qt_ht_all_bytes(&f.o, POISON), "bad page %d without the index mode: o not written", bad);
        dfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_two_keys),
        cmocka_unit_test(test_hand_int8_fp8_scales),
        cmocka_unit_test(test_hand_f16_and_dv),
        cmocka_unit_test(test_hand_window_rows),
        cmocka_unit_test(test_hand_empty_rows_and_sinks),
        cmocka_unit_test(test_hand_softcap),
        cmocka_unit_test(test_random_vs_f64),
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_random_shapes_new_axes),
        cmocka_unit_test(test_bad_page_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
