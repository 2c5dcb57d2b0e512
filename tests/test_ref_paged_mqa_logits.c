/*
 * Paged FP8 MQA logits on the cpu backend (the reference), through the
 * public API, against spec section 5:
 *  (a) a hand-worked problem: two requests, shuffled pages of 2, fn q and
 *      fnuz k, ReLU of negative dots, signed weights, a request shorter
 *      than its rows (L_b < N), a column past every request;
 *  (b) seeded random problems against the independent f64 oracle of
 *      paged_mqa_case.h: N = 1..8, page sizes 1, 16 and 64, shuffled
 *      pages, empty requests and L_b < N, the fused layout (codes then the
 *      f32 scale in one slot row, and DeepGEMM's page form: P rows of codes
 *      then P scales), the rank-3 cache form, fn and fnuz mixed between q
 *      and k, clean_logits on (-inf exactly where nothing is visible) and
 *      off (nothing written there), padded rows and unaligned offsets;
 *  (c) out-of-range indices as decode handles them (spec 2): computed as
 *      the oracle says without QATTN_CHECK_INDICES, refused naming the
 *      entry and writing nothing with it;
 *  (d) descriptor rules and plan checks, each naming the argument.
 * The logits buffer is poisoned with 0xFF (NaN) before every run.
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

#include "paged_mqa_case.h"
#include "qattn/convert.h"
#include "qattn/qattn.h"
#include "test_rng.h"

#define POISON 0xFF

typedef struct bound {
    qattn_context *ctx;
    qattn_buffer *bufs[PM_NBUF];
    qattn_paged_mqa_logits_args a;
} bound;

static bound bind_cpu(const pm_case *k) {
    bound r;
    memset(&r, 0, sizeof r);
    char err[256];
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), NULL, &r.ctx, err, sizeof err), QATTN_OK);
    for (int i = 0; i < PM_NBUF; ++i) {
        if (!k->img[i]) continue;
        assert_int_equal(qattn_buffer_alloc(r.ctx, k->bytes[i], &r.bufs[i]), QATTN_OK);
        assert_int_equal(qattn_buffer_upload(r.ctx, r.bufs[i], 0, k->img[i], k->bytes[i]), QATTN_OK);
    }
    r.a = pm_bind(k, r.bufs);
    return r;
}

static void unbind(bound *r) {
    for (int i = 0; i < PM_NBUF; ++i) qattn_buffer_free(r->ctx, r->bufs[i]);
    qattn_context_free(r->ctx);
}

static qattn_status plan_and_run(bound *r) {
    qattn_paged_mqa_logits_plan plan;
    qattn_status s = qattn_paged_mqa_logits_plan_create(r->ctx, &r->a, NULL, &plan);
    if (s != QATTN_OK) return s;
    return qattn_paged_mqa_logits_run(r->ctx, &plan, &r->a, NULL, 0);
}

/* Runs case c on the reference and compares it with the oracle; returns the
 * logits image (caller frees) when out is non-NULL. */
static void check_case(const pm_cfg *c, const char *name) {
    qt_rng rng = qt_rng_for(name);
    pm_case k;
    pm_make(&k, c, &rng, POISON);
    bound r = bind_cpu(&k);
    const qattn_status s = plan_and_run(&r);
    QT_CHECK(&rng, s == QATTN_OK, "%s: %s (%s)", name, qattn_status_name(s), qattn_last_error(r.ctx));
    uint8_t *img = malloc(k.bytes[PM_LOGITS]);
    assert_int_equal(qattn_buffer_download(r.ctx, r.bufs[PM_LOGITS], 0, img, k.bytes[PM_LOGITS]), QATTN_OK);
    const size_t cells = (size_t)(c->B * c->N * k.M);
    double *ref = calloc(cells, sizeof *ref), *A = calloc(cells, sizeof *A);
    uint8_t *vis = calloc(cells, 1);
    pm_oracle(&k, ref, A, vis);
    int64_t nvis = 0;
    for (size_t i = 0; i < cells; ++i) nvis += vis[i];
    char msg[256];
    const int64_t bad = pm_check(&k, img, ref, A, vis, POISON, 1, msg, sizeof msg);
    QT_CHECK(&rng, bad == 0, "%s: %lld mismatches, first %s", name, (long long)bad, msg);
    /* A case that sees nothing could not fail on values. */
    QT_CHECK(&rng, nvis > 0 || c->max_len == 0, "%s: no visible logit", name);
    free(img);
    free(ref);
    free(A);
    free(vis);
    unbind(&r);
    pm_free(&k);
}

/* (a) the hand-worked problem; the expected values are worked out in the
 * comments. */
static void test_hand_worked(void **state) {
    (void)state;
    qattn_context *ctx = NULL;
    char err[256];
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err), QATTN_OK);
    enum { B = 2, N = 2, H = 2, D = 64, P = 2, SLOTS = 6, M = 4 };
    const qattn_dtype QT = QATTN_FP8_E4M3FN, KT = QATTN_FP8_E4M3FNUZ;
    uint8_t q[B][N][H][D], kc[SLOTS][D];
    memset(q, 0, sizeof q);
    memset(kc, 0, sizeof kc);
    /* q, both requests alike: row 0 h0 (1, 2), h1 (-1, 1); row 1 h0 (0.5, 0), h1 (2, 2) */
    const float qv[N][H][2] = {{{1, 2}, {-1, 1}}, {{0.5f, 0}, {2, 2}}};
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < N; ++t)
            for (int h = 0; h < H; ++h)
                for (int d = 0; d < 2; ++d) q[b][t][h][d] = qattn_f32_to_fp8(qv[t][h][d], QT);
    /* keys (first two dims) and scales of slots 0..5 */
    const float kv[SLOTS][2] = {{1, 1}, {2, -1}, {-1, 0.5f}, {4, 0}, {1, 0}, {3, 3}};
    const float ksc[SLOTS] = {0.5f, 0.25f, 1.0f, 2.0f, 1.0f, 1.0f};
    for (int s = 0; s < SLOTS; ++s)
        for (int d = 0; d < 2; ++d) kc[s][d] = qattn_f32_to_fp8(kv[s][d], KT);
    const float w[B][N][H] = {{{1, -2}, {0.5f, 3}}, {{1, -2}, {0.5f, 3}}};
    /* request 0: pages 1, 0 (positions 0, 1 -> slots 2, 3; 2 -> slot 0), L = 3;
     * request 1: page 2 (position 0 -> slot 4), L = 1 < N */
    const int32_t indptr[B + 1] = {0, 2, 3}, indices[3] = {1, 0, 2}, lens[B] = {3, 1};
    qattn_buffer *bq, *bk, *bs, *bw, *bi, *bx, *bl, *bo;
    assert_int_equal(qattn_buffer_alloc(ctx, sizeof q, &bq), QATTN_OK);
    assert_int_equal(qattn_buffer_alloc(ctx, sizeof kc, &bk), QATTN_OK);
    assert_int_equal(qattn_buffer_alloc(ctx, sizeof ksc, &bs), QATTN_OK);
    assert_int_equal(qattn_buffer_alloc(ctx, sizeof w, &bw), QATTN_OK);
    assert_int_equal(qattn_buffer_alloc(ctx, sizeof indptr, &bi), QATTN_OK);
    assert_int_equal(qattn_buffer_alloc(ctx, sizeof indices, &bx), QATTN_OK);
    assert_int_equal(qattn_buffer_alloc(ctx, sizeof lens, &bl), QATTN_OK);
    assert_int_equal(qattn_buffer_alloc(ctx, 4 * B * N * M, &bo), QATTN_OK);
    qattn_buffer_upload(ctx, bq, 0, q, sizeof q);
    qattn_buffer_upload(ctx, bk, 0, kc, sizeof kc);
    qattn_buffer_upload(ctx, bs, 0, ksc, sizeof ksc);
    qattn_buffer_upload(ctx, bw, 0, w, sizeof w);
    qattn_buffer_upload(ctx, bi, 0, indptr, sizeof indptr);
    qattn_buffer_upload(ctx, bx, 0, indices, sizeof indices);
    qattn_buffer_upload(ctx, bl, 0, lens, sizeof lens);
    qattn_paged_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    const int64_t sq[4] = {B, N, H, D}, sk[2] = {SLOTS, D}, ss[1] = {SLOTS}, sw[3] = {B, N, H};
    const int64_t si[1] = {B + 1}, sx[1] = {3}, sl[1] = {B}, so[3] = {B, N, M};
    a.q = qattn_tensor_contiguous(bq, 0, QT, 4, sq);
    a.k_cache = qattn_tensor_contiguous(bk, 0, KT, 2, sk);
    a.k_scale = qattn_tensor_contiguous(bs, 0, QATTN_F32, 1, ss);
    a.weights = qattn_tensor_contiguous(bw, 0, QATTN_F32, 3, sw);
    a.kv_indptr = qattn_tensor_contiguous(bi, 0, QATTN_I32, 1, si);
    a.kv_indices = qattn_tensor_contiguous(bx, 0, QATTN_I32, 1, sx);
    a.kv_lens = qattn_tensor_contiguous(bl, 0, QATTN_I32, 1, sl);
    a.logits = qattn_tensor_contiguous(bo, 0, QATTN_F32, 3, so);
    a.page_size = P;
    a.max_kv_len = M;
    const float NI = -INFINITY;
    /* request 0, row 0 sees positions 0, 1 (L - N + 0 = 1):
     *   p0 slot 2 (-1, .5) x1: h0 1*-1 + 2*.5 = 0 -> 0; h1 1 + .5 = 1.5 -> w -2: -3.  => -3
     *   p1 slot 3 (4, 0) x2:   h0 4 -> 8 -> w 1: 8;     h1 -4 -> 0.               => 8
     * row 1 sees positions 0..2:
     *   p0: h0 -.5 -> 0; h1 -2 + 1 = -1 -> 0                                      => 0
     *   p1: h0 2 x2 = 4 -> w .5: 2; h1 8 x2 = 16 -> w 3: 48                       => 50
     *   p2 slot 0 (1, 1) x.5: h0 .5 x.5 -> w .5: .125; h1 4 x.5 = 2 -> w 3: 6     => 6.125
     * request 1 (L = 1 < N = 2): row 0 sees nothing; row 1 sees position 0:
     *   p0 slot 4 (1, 0) x1: h0 .5 -> w .5: .25; h1 2 -> w 3: 6                   => 6.25 */
    const float want[B][N][M] = {{{-3, 8, NI, NI}, {0, 50, 6.125f, NI}},
                                 {{NI, NI, NI, NI}, {6.25f, NI, NI, NI}}};
    for (int clean = 1; clean >= 0; --clean) {
        a.clean_logits = clean;
        float got[B][N][M];
        memset(got, POISON, sizeof got);
        qattn_buffer_upload(ctx, bo, 0, got, sizeof got);
        qattn_paged_mqa_logits_plan plan;
        assert_int_equal(qattn_paged_mqa_logits_plan_create(ctx, &a, NULL, &plan), QATTN_OK);
        assert_int_equal(qattn_paged_mqa_logits_run(ctx, &plan, &a, NULL, 0), QATTN_OK);
        qattn_buffer_download(ctx, bo, 0, got, sizeof got);
        for (int b = 0; b < B; ++b)
            for (int t = 0; t < N; ++t)
                for (int p = 0; p < M; ++p) {
                    uint32_t u;
                    memcpy(&u, &got[b][t][p], 4);
                    if (isinf(want[b][t][p])) {
                        if (clean) assert_true(isinf(got[b][t][p]) && got[b][t][p] < 0);
                        else assert_int_equal(u, 0xFFFFFFFFu); /* untouched */
                    } else {
                        assert_float_equal(got[b][t][p], want[b][t][p], 0.0f);
                    }
                }
    }
    qattn_buffer *all[] = {bq, bk, bs, bw, bi, bx, bl, bo};
    for (int i = 0; i < 8; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

/* (b) random cases over the factors, each against the oracle. */
static void test_random_vs_oracle(void **state) {
    (void)state;
    static const int PAGES[] = {1, 16, 64};
    const qattn_dtype F[2] = {QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ};
    int idx = 0;
    for (int n = 1; n <= 8; ++n)
        for (int pi = 0; pi < 3; ++pi) {
            pm_cfg c;
            memset(&c, 0, sizeof c);
            c.N = n;
            c.P = PAGES[pi];
            c.B = 1 + (idx * 5) % 7;
            c.H = (idx % 3 == 0) ? 1 : (idx % 3 == 1) ? 4 : 16;
            c.D = (idx % 4 == 3) ? 128 : 64;
            c.qt = F[idx & 1];
            c.kt = F[(idx >> 1) & 1];
            c.clean = (idx >> 2) & 1;
            c.fused = idx % 3 == 2;
            c.paged3 = (idx / 3) % 2;
            c.pad = idx % 5 == 1 && !c.fused;
            c.max_len = 1 + (idx * 37) % (3 * c.P + 90);
            char name[128];
            snprintf(name, sizeof name, "paged_mqa/random_%d_N%d_P%d_B%d_H%d_D%d_%s%s_c%d_f%d_r%d_p%d", idx,
                     c.N, c.P, c.B, c.H, c.D, c.qt == F[0] ? "fn" : "fnuz", c.kt == F[0] ? "fn" : "fnuz",
                     c.clean, c.fused, c.paged3, c.pad);
            check_case(&c, name);
            ++idx;
        }
}

/* (c) each page-table fault: without the index mode the oracle's answer;
 * with QATTN_CHECK_INDICES=1 the call fails naming the entry and writes
 * nothing. */
static void test_bad_indices(void **state) {
    (void)state;
    for (int bad = PM_BAD_PAGE; bad < PM_BAD_COUNT; ++bad)
        for (int P = 1; P <= 16; P += 15) {
            pm_cfg c;
            memset(&c, 0, sizeof c);
            c.B = 3;
            c.N = 1 + bad % 4;
            c.H = 4;
            c.D = 64;
            c.P = P;
            c.qt = QATTN_FP8_E4M3FN;
            c.kt = bad & 1 ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN;
            c.clean = 1;
            c.max_len = 40;
            c.bad = bad;
            c.paged3 = P == 16;
            char name[96];
            snprintf(name, sizeof name, "paged_mqa/bad_%d_P%d", bad, P);
            unsetenv("QATTN_CHECK_INDICES");
            check_case(&c, name);
            qt_rng rng = qt_rng_for(name);
            pm_case k;
            pm_make(&k, &c, &rng, POISON);
            bound r = bind_cpu(&k);
            setenv("QATTN_CHECK_INDICES", "1", 1);
            const qattn_status s = plan_and_run(&r);
            unsetenv("QATTN_CHECK_INDICES");
            QT_CHECK(&rng, s == QATTN_ERR_INDEX_OUT_OF_RANGE, "%s: %s (%s)", name, qattn_status_name(s),
                     qattn_last_error(r.ctx));
            const char *m = qattn_last_error(r.ctx);
            QT_CHECK(&rng, strstr(m, "kv_") != NULL && strstr(m, "request") != NULL ? 1 : strstr(m, "kv_indices[") != NULL,
                     "%s: message names no entry: %s", name, m);
            uint8_t *img = malloc(k.bytes[PM_LOGITS]);
            qattn_buffer_download(r.ctx, r.bufs[PM_LOGITS], 0, img, k.bytes[PM_LOGITS]);
            for (size_t i = 0; i < k.bytes[PM_LOGITS]; ++i) QT_CHECK(&rng, img[i] == POISON, "%s: wrote byte %zu", name, i);
            free(img);
            unbind(&r);
            pm_free(&k);
        }
}

/* (d) descriptor rules: each broken argument is refused with its name in
 * the message, and nothing is written. */
static void test_validation(void **state) {
    (void)state;
    pm_cfg c;
    memset(&c, 0, sizeof c);
    c.B = 2;
    c.N = 3;
    c.H = 4;
    c.D = 64;
    c.P = 16;
    c.qt = c.kt = QATTN_FP8_E4M3FN;
    c.clean = 1;
    c.max_len = 50;
    c.paged3 = 1;
    qt_rng rng = qt_rng_for("paged_mqa/validation");
    pm_case k;
    pm_make(&k, &c, &rng, POISON);
    bound r = bind_cpu(&k);
    const qattn_paged_mqa_logits_args good = r.a;
    struct {
        const char *name, *needle;
        qattn_status want;
    } cases[] = {
        {"rows 0", "q:", QATTN_ERR_SHAPE},          {"q bf16", "q:", QATTN_ERR_DTYPE},
        {"page_size 0", "page_size", QATTN_ERR_INVALID_ARGUMENT},
        {"page rows", "k_cache", QATTN_ERR_SHAPE},  {"scale slots", "k_scale", QATTN_ERR_SHAPE},
        {"logits cols", "logits", QATTN_ERR_SHAPE}, {"weights rows", "weights", QATTN_ERR_SHAPE},
        {"indptr len", "kv_indptr", QATTN_ERR_SHAPE}, {"k dim", "k_cache", QATTN_ERR_SHAPE},
        {"max_kv_len 0", "max_kv_len", QATTN_ERR_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_paged_mqa_logits_args a = good;
        switch (i) {
        case 0: a.q.shape[1] = 0; break;
        case 1: a.q.dtype = QATTN_BF16; break;
        case 2: a.page_size = 0; break;
        case 3: a.page_size = 8; break;
        case 4: a.k_scale.shape[0] -= 1; break;
        case 5: a.logits.shape[2] -= 1; break;
        case 6: a.weights.shape[1] = 2; break;
        case 7: a.kv_indptr.shape[0] = c.B; break;
        case 8: a.k_cache.shape[2] = 32; break;
        default: a.max_kv_len = 0; break;
        }
        qattn_paged_mqa_logits_plan plan;
        const qattn_status s = qattn_paged_mqa_logits_plan_create(r.ctx, &a, NULL, &plan);
        if (s != cases[i].want || !strstr(qattn_last_error(r.ctx), cases[i].needle))
            fail_msg("%s: %s (%s), want %s naming %s", cases[i].name, qattn_status_name(s),
                     qattn_last_error(r.ctx), qattn_status_name(cases[i].want), cases[i].needle);
    }
    /* run refuses a plan edited after planning, and args it was not made for */
    qattn_paged_mqa_logits_plan plan;
    assert_int_equal(qattn_paged_mqa_logits_plan_create(r.ctx, &good, NULL, &plan), QATTN_OK);
    qattn_paged_mqa_logits_plan edited = plan;
    edited.keys_per_split += edited.kv_tile;
    assert_int_equal(qattn_paged_mqa_logits_run(r.ctx, &edited, &good, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(r.ctx), "plan"));
    qattn_paged_mqa_logits_args other = good;
    other.clean_logits = 0;
    other.logits.strides[1] += 0; /* same layout: accepted */
    /* another layout of the same shape (one element more between requests;
     * one less would overlap them, which validation refuses: issue 24 item 3) */
    other.logits.strides[0] += 1;
    assert_int_equal(qattn_paged_mqa_logits_run(r.ctx, &plan, &other, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    uint8_t *img = malloc(k.bytes[PM_LOGITS]);
    qattn_buffer_download(r.ctx, r.bufs[PM_LOGITS], 0, img, k.bytes[PM_LOGITS]);
    for (size_t i = 0; i < k.bytes[PM_LOGITS]; ++i) assert_int_equal(img[i], POISON);
    free(img);
    unbind(&r);
    pm_free(&k);
}

/* The pure planner: splits cover max_kv_len from caps and max_kv_len
 * alone (the same plan whatever kv_lens hold), tiles fit shared memory. */
static void test_planner(void **state) {
    (void)state;
    qattn_device_caps caps;
    memset(&caps, 0, sizeof caps);
    caps.compute_units = 132;
    caps.subgroup_size_min = caps.subgroup_size_max = 32;
    caps.max_shared_bytes = 48 * 1024;
    caps.max_workgroup_size = 1024;
    static const int MAXLEN[] = {1, 63, 64, 4097, 32768, 131072};
    static const int BS[] = {1, 4, 16, 64, 70000};
    for (int di = 0; di < 4; ++di)
        for (size_t mi = 0; mi < sizeof MAXLEN / sizeof MAXLEN[0]; ++mi)
            for (size_t bi = 0; bi < sizeof BS / sizeof BS[0]; ++bi) {
                qattn_paged_mqa_logits_args a;
                memset(&a, 0, sizeof a);
                const int64_t D = 64 << di;
                const int64_t N = BS[bi] > 65535 ? 1 : 8, H = BS[bi] > 65535 ? 4 : 64;
                const int64_t sq[4] = {BS[bi], N, H, D}, sk[2] = {1000, D};
                a.q = qattn_tensor_contiguous(NULL, 0, QATTN_FP8_E4M3FN, 4, sq);
                a.k_cache = qattn_tensor_contiguous(NULL, 0, QATTN_FP8_E4M3FN, 2, sk);
                const int64_t sw[3] = {BS[bi], N, H};
                a.weights = qattn_tensor_contiguous(NULL, 0, QATTN_F32, 3, sw);
                a.page_size = 64;
                a.max_kv_len = MAXLEN[mi];
                qattn_paged_mqa_logits_plan p;
                char err[256];
                const qattn_status s = qattn_paged_mqa_logits_plan_compute(&caps, &a, NULL, &p, err, sizeof err);
                if (s != QATTN_OK) fail_msg("B %d max_kv_len %d D %d: %s", BS[bi], MAXLEN[mi], (int)D, err);
                assert_true(p.shared_bytes <= caps.max_shared_bytes);
                assert_true(p.keys_per_split % p.kv_tile == 0 && p.keys_per_split > 0);
                assert_true((int64_t)p.num_splits * p.keys_per_split >= MAXLEN[mi]);
                assert_true((int64_t)(p.num_splits - 1) * p.keys_per_split < MAXLEN[mi]);
                assert_true(p.grid[0] == (uint32_t)p.num_splits && p.grid[0] <= 65535 && p.grid[1] >= 1 &&
                            p.grid[1] <= 65535);
                assert_int_equal(p.workspace_bytes, 0);
                assert_int_equal(p.load_bytes, 16);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked),   cmocka_unit_test(test_random_vs_oracle),
        cmocka_unit_test(test_bad_indices),   cmocka_unit_test(test_validation),
        cmocka_unit_test(test_planner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
