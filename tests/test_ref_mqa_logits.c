/*
 * FP8 MQA logits on the cpu backend (the reference), through the public API,
 * against spec section 3:
 *  (a) a hand-worked problem (mixed fn q / fnuz k, ReLU of negative dots,
 *      signed weights) under several windows;
 *  (b) seeded random problems against an independent f64 loop in this file,
 *      compared with the spec section 4 bound 4e-5 A + 1e-6;
 *  (c) windows clamped to [0, S_kv] (ks < 0, ke > S_kv), empty windows
 *      (ks == ke, ks > ke, both outside), clean_logits on (-inf exactly
 *      outside the window) and off (nothing written there), and logits row
 *      strides larger than S_kv whose padding must stay untouched.
 * The logits buffer is poisoned with 0xFF (NaN) before every run.
 */
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

typedef struct mcfg {
    const char *name;
    int S, H, D, S_kv;
    qattn_dtype qt, kt;
    int clean;
    int pad; /* extra elements per row in every tensor (logits row stride S_kv + pad) */
} mcfg;

typedef struct mfix {
    mcfg c;
    qt_ht q, k, ks_scale, w, ks, ke, logits;
} mfix;

/* A window for row i drawn from the edge cases in turn. */
static void random_window(qt_rng *rng, int i, int S_kv, int32_t *ks, int32_t *ke) {
    int a = (int)qt_int(rng, 0, S_kv), b = (int)qt_int(rng, 0, S_kv);
    switch (i % 8) {
    case 0: *ks = 0; *ke = S_kv; break;                                   /* everything */
    case 1: *ks = a < b ? a : b; *ke = a < b ? b : a; break;              /* inside */
    case 2: *ks = -(int32_t)qt_int(rng, 1, 1000); *ke = b; break;        /* ks < 0 clamps */
    case 3: *ks = a; *ke = S_kv + (int32_t)qt_int(rng, 1, 1000); break;  /* ke > S_kv clamps */
    case 4: *ks = a; *ke = a; break;                                      /* ks == ke: empty */
    case 5: *ks = a > b ? a : b; *ke = (a > b ? b : a) - 1; break;        /* ks > ke: empty */
    case 6: *ks = -50; *ke = -3; break;                                   /* left of 0: empty */
    default: *ks = S_kv + 2; *ke = S_kv + 9; break;                       /* right of S_kv: empty */
    }
}

static mfix mfix_make(qt_rng *rng, const mcfg *c) {
    mfix f;
    memset(&f, 0, sizeof f);
    f.c = *c;
    qt_layout padded = {{0, 1, 2, 3}, c->pad, c->pad};
    qt_layout dense = qt_layout_dense();
    const int64_t qs[3] = {c->S, c->H, c->D}, kss[2] = {c->S_kv, c->D}, skv[1] = {c->S_kv};
    const int64_t ws[2] = {c->S, c->H}, s1[1] = {c->S}, ls[2] = {c->S, c->S_kv};
    f.q = qt_ht_make(c->qt, 3, qs, &padded, POISON);
    f.k = qt_ht_make(c->kt, 2, kss, &padded, POISON);
    f.ks_scale = qt_ht_make(QATTN_F32, 1, skv, &padded, POISON);
    f.w = qt_ht_make(QATTN_F32, 2, ws, &padded, POISON);
    f.ks = qt_ht_make(QATTN_I32, 1, s1, &dense, POISON);
    f.ke = qt_ht_make(QATTN_I32, 1, s1, &padded, POISON);
    f.logits = qt_ht_make(QATTN_F32, 2, ls, &padded, POISON);
    /* fp8 values of magnitude up to 8 (codes of both signs, every binade
     * down to the subnormals appear), scales and weights of order 0.1-1. */
    for (int64_t n = 0; n < qt_ht_count(&f.q); ++n) qt_fill_fp8(rng, qt_ht_at_linear(&f.q, n), 1, c->qt, 8.0f);
    for (int64_t n = 0; n < qt_ht_count(&f.k); ++n) qt_fill_fp8(rng, qt_ht_at_linear(&f.k, n), 1, c->kt, 8.0f);
    for (int j = 0; j < c->S_kv; ++j) qt_ht_set_f32(&f.ks_scale, j, 0, 0, 0, qt_uniform(rng, 0.01f, 0.2f));
    for (int i = 0; i < c->S; ++i)
        for (int h = 0; h < c->H; ++h) qt_ht_set_f32(&f.w, i, h, 0, 0, qt_signed(rng, 0.05f, 1.0f));
    for (int i = 0; i < c->S; ++i) {
        int32_t a, b;
        random_window(rng, i, c->S_kv, &a, &b);
        qt_ht_set_i32(&f.ks, i, a);
        qt_ht_set_i32(&f.ke, i, b);
    }
    return f;
}

/* Every tensor of the fixture, listed once (see qt_ht_upload_present). */
static size_t mfix_tensors(mfix *f, qt_ht **out) {
    qt_ht *const all[] = {&f->q, &f->k, &f->ks_scale, &f->w, &f->ks, &f->ke, &f->logits};
    memcpy(out, all, sizeof all);
    return sizeof all / sizeof all[0];
}

static void mfix_free(qattn_context *ctx, mfix *f) {
    qt_ht *ts[QT_HT_MAX_LIST];
    qt_ht_free_present(ctx, ts, mfix_tensors(f, ts));
}

/* Uploads, plans, runs and downloads the logits; returns the run status. */
static qattn_status mfix_run(qattn_context *ctx, mfix *f) {
    qt_ht *ts[QT_HT_MAX_LIST];
    qt_ht_upload_present(ctx, ts, mfix_tensors(f, ts));
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qt_ht_desc(&f->q);
    a.k = qt_ht_desc(&f->k);
    a.k_scale = qt_ht_desc(&f->ks_scale);
    a.weights = qt_ht_desc(&f->w);
    a.ks = qt_ht_desc(&f->ks);
    a.ke = qt_ht_desc(&f->ke);
    a.logits = qt_ht_desc(&f->logits);
    a.clean_logits = f->c.clean;
    qattn_mqa_logits_plan plan;
    qattn_status s = qattn_mqa_logits_plan_create(ctx, &a, NULL, &plan);
    if (s != QATTN_OK) fail_msg("plan: %s: %s", qattn_status_name(s), qattn_last_error(ctx));
    qattn_buffer *ws = NULL;
    if (plan.workspace_bytes) assert_int_equal(qattn_buffer_alloc(ctx, plan.workspace_bytes, &ws), QATTN_OK);
    s = qattn_mqa_logits_run(ctx, &plan, &a, ws, 0);
    qattn_buffer_free(ctx, ws);
    qt_ht_download(ctx, &f->logits);
    return s;
}

static qattn_context *cpu_ctx(void) {
    qattn_context *ctx = NULL;
    char err[256] = "";
    qattn_status s = qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err);
    if (s != QATTN_OK) fail_msg("cpu context: %s", err);
    return ctx;
}

static int is_poison_f32(const qt_ht *t, int64_t i, int64_t j) {
    const uint8_t *p = qt_ht_at(t, i, j, 0, 0);
    return p[0] == POISON && p[1] == POISON && p[2] == POISON && p[3] == POISON;
}

/* ---- the independent expectation ------------------------------------------ */

/* Compares every logit with an f64 loop: inside [max(ks,0), min(ke,S_kv))
 * the spec's sum within 4e-5 A + 1e-6; outside exactly -inf (clean) or
 * still the poison (not clean); row padding always the poison. */
static void check_logits(qt_rng *rng, const mfix *f) {
    const mcfg *c = &f->c;
    for (int i = 0; i < c->S; ++i) {
        int64_t lo = qt_ht_i32(&f->ks, i), hi = qt_ht_i32(&f->ke, i);
        lo = lo < 0 ? 0 : lo > c->S_kv ? c->S_kv : lo;
        hi = hi < 0 ? 0 : hi > c->S_kv ? c->S_kv : hi;
        for (int j = 0; j < c->S_kv; ++j) {
            float got = qt_ht_f32(&f->logits, i, j, 0, 0);
            if (!(lo <= j && j < hi)) {
                if (c->clean)
                    QT_CHECK(rng, isinf(got) && got < 0, "%s: logits[%d,%d] = %g outside [%lld,%lld), want -inf",
                             c->name, i, j, got, (long long)lo, (long long)hi);
                else
                    QT_CHECK(rng, is_poison_f32(&f->logits, i, j),
                             "%s: logits[%d,%d] outside the window was written (clean off)", c->name, i, j);
                continue;
            }
            double want = 0, a_bound = 0;
            const double kscale = qt_ht_f32(&f->ks_scale, j, 0, 0, 0);
            for (int h = 0; h < c->H; ++h) {
                double dot = 0, dot_abs = 0;
                for (int d = 0; d < c->D; ++d) {
                    double prod = qt_ht_value(&f->q, i, h, d, 0) * qt_ht_value(&f->k, j, d, 0, 0);
                    dot += prod;
                    dot_abs += fabs(prod);
                }
                const double w = qt_ht_f32(&f->w, i, h, 0, 0);
                want += w * fmax(0.0, kscale * dot);
                a_bound += qt_tol_mqa_a_term(w, kscale, dot_abs);
            }
            QT_CHECK(rng, qt_tol_mqa_logit(got, want, a_bound), "%s: logits[%d,%d] = %.9g, f64 loop %.9g (A %g)",
                     c->name, i, j, got, want, a_bound);
        }
    }
    QT_CHECK(rng, qt_ht_gaps_equal(&f->logits, POISON), "%s: logits written in the row padding", c->name);
}

/* ---- (a) hand-worked ------------------------------------------------------ */

static void test_hand(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("mqa.hand");
    /* S = 4 identical rows, H = 2, D = 64, S_kv = 3; q fn, k fnuz.
     * q head 0 = 1.0 everywhere (fn 0x38), head 1 = -1.0 (fn 0xB8).
     * k rows (fnuz): k0 = 0.5 (0x38), k1 = -0.25 (0xB0), k2 = 1.0 (0x40);
     * k_scale = (2, 4, 0.5); weights = (1.5, -0.5).
     * Head 0: q.k_j = 64 k_j = (32, -16, 64); * k_scale = (64, -64, 32);
     *         ReLU -> (64, 0, 32).
     * Head 1: q.k_j = (-32, 16, -64); * k_scale = (-64, 64, -32); ReLU -> (0, 64, 0).
     * logits_j = 1.5 head0 - 0.5 head1 = (96, -32, 48).
     * Windows: row 0 [0, 3) all; row 1 [-5, 2) -> [0, 2); row 2 [2, 100) ->
     * [2, 3); row 3 [2, 1) empty. */
    const float want[3] = {96.0f, -32.0f, 48.0f};
    const int32_t ks[4] = {0, -5, 2, 2}, ke[4] = {3, 2, 100, 1};
    const int lo[4] = {0, 0, 2, 3}, hi[4] = {3, 2, 3, 3};
    for (int clean = 0; clean < 2; ++clean) {
        mcfg c = {"hand", 4, 2, 64, 3, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, clean, clean ? 253 : 1};
        qt_rng_case(&rng, (uint64_t)clean);
        mfix f = mfix_make(&rng, &c);
        const uint8_t kcode[3] = {0x38, 0xB0, 0x40};
        const float kscale[3] = {2.0f, 4.0f, 0.5f};
        for (int i = 0; i < 4; ++i) {
            for (int d = 0; d < 64; ++d) {
                qt_ht_set_u8(&f.q, i, 0, d, 0, 0x38);
                qt_ht_set_u8(&f.q, i, 1, d, 0, 0xB8);
            }
            qt_ht_set_f32(&f.w, i, 0, 0, 0, 1.5f);
            qt_ht_set_f32(&f.w, i, 1, 0, 0, -0.5f);
            qt_ht_set_i32(&f.ks, i, ks[i]);
            qt_ht_set_i32(&f.ke, i, ke[i]);
        }
        for (int j = 0; j < 3; ++j) {
            for (int d = 0; d < 64; ++d) qt_ht_set_u8(&f.k, j, d, 0, 0, kcode[j]);
            qt_ht_set_f32(&f.ks_scale, j, 0, 0, 0, kscale[j]);
        }
        QT_ASSERT_EQ(&rng, mfix_run(ctx, &f), QATTN_OK);
        for (int i = 0; i < 4; ++i)
            for (int j = 0; j < 3; ++j) {
                float got = qt_ht_f32(&f.logits, i, j, 0, 0);
                if (lo[i] <= j && j < hi[i]) QT_ASSERT(&rng, got == want[j]);
                else if (clean) QT_ASSERT(&rng, isinf(got) && got < 0);
                else QT_ASSERT(&rng, is_poison_f32(&f.logits, i, j));
            }
        check_logits(&rng, &f);
        mfix_free(ctx, &f);
    }
    qattn_context_free(ctx);
}

/* ---- (b), (c) -------------------------------------------------------------- */

static const mcfg RANDOM_CASES[] = {
    /* name               S   H   D    S_kv q                    k                    clean pad */
    {"fn_fn_clean256",    5,  4,  64,  37,  QATTN_FP8_E4M3FN,   QATTN_FP8_E4M3FN,   1,    219},
    {"fnuz_fn_dirty",     17, 8,  128, 300, QATTN_FP8_E4M3FNUZ, QATTN_FP8_E4M3FN,   0,    0},
    {"fn_fnuz_d512",      1,  16, 512, 64,  QATTN_FP8_E4M3FN,   QATTN_FP8_E4M3FNUZ, 1,    3},
    {"fnuz_fnuz_s33",     33, 2,  256, 129, QATTN_FP8_E4M3FNUZ, QATTN_FP8_E4M3FNUZ, 1,    127},
    {"fn_fn_h64_dirty",   9,  64, 64,  20,  QATTN_FP8_E4M3FN,   QATTN_FP8_E4M3FN,   0,    5},
    {"fn_fnuz_skv1",      8,  3,  64,  1,   QATTN_FP8_E4M3FN,   QATTN_FP8_E4M3FNUZ, 1,    0},
};

static void test_random_vs_f64(void **state) {
    (void)state;
    qattn_context *ctx = cpu_ctx();
    qt_rng rng = qt_rng_for("mqa.random");
    const size_t n = sizeof RANDOM_CASES / sizeof RANDOM_CASES[0];
    for (size_t i = 0; i < n; ++i)
        for (int rep = 0; rep < 2; ++rep) {
            qt_rng_case(&rng, i * 2 + (size_t)rep);
            mfix f = mfix_make(&rng, &RANDOM_CASES[i]);
            qattn_status s = mfix_run(ctx, &f);
            QT_CHECK(&rng, s == QATTN_OK, "%s: %s: %s", RANDOM_CASES[i].name, qattn_status_name(s),
                     qattn_last_error(ctx));
            check_logits(&rng, &f);
            mfix_free(ctx, &f);
        }
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),
        cmocka_unit_test(test_random_vs_f64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
