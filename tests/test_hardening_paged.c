/* Paged MQA logits (spec 5) against the core's hardening rows that the
 * other ops have (tests/test_hardening.c for decode and MQA): sizes and
 * strides bounded in validation and in the pure planner (which fuzzers
 * call without validation), capabilities checked before the planner
 * divides by them, a plan changed after planning or run with arguments of
 * another shape, scalar or layout refused, kv_lens past max_kv_len and the
 * index mode. On the cpu backend; every refused call must name what it
 * refuses and leave the poisoned logits untouched. Under the sanitizer
 * build an overflow here is a UBSan report. */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_devices.h"
#include "qattn/qattn.h"
#include "test_ctx.h"
#include "test_rng.h"

/* B 2 requests of N 1 row (so q's and weights' row stride addresses
 * nothing), H 4, D 64; 32 slots in pages of 4; max_kv_len 12. */
enum { B = 2, N = 1, H = 4, D = 64, P = 4, SLOTS = 32, M = 12, NIDX = 6 };

typedef struct fix {
    qattn_context *ctx;
    qattn_paged_mqa_logits_args a;
    qattn_buffer *b[8];
} fix;

static int setup(void **state) {
    fix *f = calloc(1, sizeof *f);
    f->ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("hardening_paged");
    uint8_t q[B * N * H * D], k[SLOTS * D];
    float ks[SLOTS], w[B * N * H];
    const int32_t indptr[B + 1] = {0, 3, 6}, indices[NIDX] = {5, 0, 7, 2, 6, 1}, lens[B] = {12, 9};
    qt_fill_fp8(&rng, q, sizeof q, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_fp8(&rng, k, sizeof k, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_f32_pos(&rng, ks, SLOTS, 0.5f, 1.0f);
    qt_fill_f32(&rng, w, B * N * H, 1.0f);
    qattn_context *ctx = f->ctx;
    f->b[0] = qt_buf(ctx, q, sizeof q);
    f->b[1] = qt_buf(ctx, k, sizeof k);
    f->b[2] = qt_buf(ctx, ks, sizeof ks);
    f->b[3] = qt_buf(ctx, w, sizeof w);
    f->b[4] = qt_buf(ctx, indptr, sizeof indptr);
    f->b[5] = qt_buf(ctx, indices, sizeof indices);
    f->b[6] = qt_buf(ctx, lens, sizeof lens);
    f->b[7] = qt_buf(ctx, NULL, B * N * M * 4 + 64); /* 64 guard bytes after the logits */
    qattn_paged_mqa_logits_args *a = &f->a;
    memset(a, 0, sizeof *a);
    a->q = qattn_tensor_contiguous(f->b[0], 0, QATTN_FP8_E4M3FN, 4, (int64_t[]){B, N, H, D});
    a->k_cache = qattn_tensor_contiguous(f->b[1], 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){SLOTS / P, P, D});
    a->k_scale = qattn_tensor_contiguous(f->b[2], 0, QATTN_F32, 2, (int64_t[]){SLOTS / P, P});
    a->weights = qattn_tensor_contiguous(f->b[3], 0, QATTN_F32, 3, (int64_t[]){B, N, H});
    a->kv_indptr = qattn_tensor_contiguous(f->b[4], 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a->kv_indices = qattn_tensor_contiguous(f->b[5], 0, QATTN_I32, 1, (int64_t[]){NIDX});
    a->kv_lens = qattn_tensor_contiguous(f->b[6], 0, QATTN_I32, 1, (int64_t[]){B});
    a->logits = qattn_tensor_contiguous(f->b[7], 0, QATTN_F32, 3, (int64_t[]){B, N, M});
    a->page_size = P;
    a->max_kv_len = M;
    a->clean_logits = 1;
    unsetenv("QATTN_CHECK_INDICES");
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fix *f = *state;
    for (int i = 0; i < 8; ++i) qattn_buffer_free(f->ctx, f->b[i]);
    qattn_context_free(f->ctx);
    free(f);
    unsetenv("QATTN_CHECK_INDICES");
    return 0;
}

static void expect(qattn_status got, const char *msg, const char *names, const char *what) {
    if (got == QATTN_OK || !strstr(msg, names)) {
        print_error("%s: status %s, message \"%s\" should name %s\n", what, qattn_status_name(got), msg, names);
        fail();
    }
}

static int logits_untouched(fix *f) { return qt_buf_all(f->ctx, f->b[7], QT_POISON); }

/* Rows 2, 3 and 7 of issue 11 for this op: strides past int32 or negative,
 * on q, weights and logits, are refused by validation (even where the
 * dimension has extent 1 and addresses nothing) and by the pure planner,
 * which fuzzers call without validation, each naming the tensor. */
static void test_strides_bounded(void **state) {
    fix *f = *state;
    const qattn_device_caps caps = caps_h200();
    const struct {
        const char *row, *names;
        int which, dim;
        int64_t stride;
    } cases[] = {
        {"q row stride 2^31 (N = 1: addresses nothing)", "q: ", 0, 1, (int64_t)INT32_MAX + 1},
        {"q head stride INT64_MAX / 4", "q: ", 0, 2, INT64_MAX / 4},
        {"q batch stride -1", "q: ", 0, 0, -1},
        {"weights head stride 2^40", "weights: ", 1, 2, (int64_t)1 << 40},
        {"weights batch stride -64", "weights: ", 1, 0, -64},
        {"logits batch stride 2^62", "logits: ", 2, 0, (int64_t)1 << 62},
    };
    qattn_paged_mqa_logits_plan plan;
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_paged_mqa_logits_args bad = f->a;
        qattn_tensor *t = cases[i].which == 0 ? &bad.q : cases[i].which == 1 ? &bad.weights : &bad.logits;
        t->strides[cases[i].dim] = cases[i].stride;
        qattn_status s = qattn_paged_mqa_logits_plan_create(f->ctx, &bad, NULL, &plan);
        expect(s, qattn_last_error(f->ctx), cases[i].names, cases[i].row);
        err[0] = '\0';
        s = qattn_paged_mqa_logits_plan_compute(&caps, &bad, NULL, &plan, err, sizeof err);
        expect(s, err, cases[i].names, cases[i].row);
        /* and a plan for valid arguments refuses them at run */
        qattn_paged_mqa_logits_plan good;
        assert_int_equal(qattn_paged_mqa_logits_plan_create(f->ctx, &f->a, NULL, &good), QATTN_OK);
        s = qattn_paged_mqa_logits_run(f->ctx, &good, &bad, NULL, 0);
        expect(s, qattn_last_error(f->ctx), cases[i].names, cases[i].row);
        assert_true(logits_untouched(f));
    }
}

/* Rows 5, 6 and 8 for this op: the pure planner, given shapes past int32
 * without validation, refuses them naming q, instead of planning for a
 * truncated batch or head count. */
static void test_planner_bounds(void **state) {
    fix *f = *state;
    const qattn_device_caps caps = caps_h200();
    const struct {
        const char *row;
        int64_t b, n, h;
    } cases[] = {
        {"B = 2^33", (int64_t)1 << 33, 1, 4},
        {"H = 2^31", 2, 1, (int64_t)1 << 31},
        {"B x N x H x D = 2^34 (each dimension within int32)", 1 << 16, 8, 64},
        {"B = -2", -2, 1, 4},
    };
    qattn_paged_mqa_logits_plan plan;
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_paged_mqa_logits_args a = f->a;
        a.q.shape[0] = a.weights.shape[0] = a.logits.shape[0] = cases[i].b;
        a.q.shape[1] = a.weights.shape[1] = a.logits.shape[1] = cases[i].n;
        a.q.shape[2] = a.weights.shape[2] = cases[i].h;
        a.q.shape[3] = 512;
        a.k_cache.shape[2] = 512;
        err[0] = '\0';
        qattn_status s = qattn_paged_mqa_logits_plan_compute(&caps, &a, NULL, &plan, err, sizeof err);
        expect(s, err, "q", cases[i].row);
    }
    /* max_kv_len at int32's end, rounded up to whole splits: within int32
     * or refused naming max_kv_len */
    qattn_paged_mqa_logits_args a = f->a;
    a.max_kv_len = INT32_MAX;
    a.logits.shape[2] = INT32_MAX;
    qattn_status s = qattn_paged_mqa_logits_plan_compute(&caps, &a, NULL, &plan, err, sizeof err);
    if (s == QATTN_OK) assert_true((int64_t)plan.num_splits * plan.keys_per_split <= INT32_MAX);
    else expect(s, err, "max_kv_len", "max_kv_len INT32_MAX");
}

/* Found by the fuzzers for the other planners, checked here for this one:
 * capabilities the planner divides by or sizes workgroups from are checked
 * first, and an invalid dtype is refused before its element size (0) is
 * used, for every variant. */
static void test_caps_and_dtype(void **state) {
    fix *f = *state;
    qattn_paged_mqa_logits_plan plan;
    char err[512];
    qattn_device_caps caps = caps_h200();
    caps.subgroup_size_min = caps.subgroup_size_max = 0xFFFFFF01u;
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &f->a, NULL, &plan, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "caps.subgroup_size"));
    caps = caps_h200();
    caps.max_workgroup_size = 0;
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &f->a, NULL, &plan, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "caps.max_workgroup_size"));
    caps = caps_h200();
    caps.n_matrix_shapes = -3;
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &f->a, NULL, &plan, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "caps.n_matrix_shapes"));
    caps = caps_h200();
    caps.max_shared_bytes = 0;
    qattn_status s = qattn_paged_mqa_logits_plan_compute(&caps, &f->a, NULL, &plan, err, sizeof err);
    expect(s, err, "shared memory", "a device without shared memory");
    caps = caps_h200();
    for (int v = 0; v < QATTN_PAGED_MQA_VARIANT_COUNT; ++v) {
        qattn_paged_mqa_logits_options o = QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT;
        o.variant = (qattn_paged_mqa_variant)v;
        for (int which = 0; which < 2; ++which) {
            qattn_paged_mqa_logits_args a = f->a;
            if (which) a.q.dtype = QATTN_DTYPE_INVALID;
            else a.k_cache.dtype = QATTN_DTYPE_INVALID;
            err[0] = '\0';
            assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &a, &o, &plan, err, sizeof err),
                             QATTN_ERR_DTYPE);
            assert_non_null(strstr(err, which ? "q" : "k_cache"));
            assert_int_equal(qattn_paged_mqa_logits_plan_create(f->ctx, &a, &o, &plan), QATTN_ERR_DTYPE);
            assert_non_null(strstr(qattn_last_error(f->ctx), which ? "q" : "k_cache"));
        }
    }
}

/* Row 14 and deliverable 6 for this op: run refuses a plan whose fields
 * changed after planning (any byte, the reason's last included), and
 * arguments of another shape, page size, max_kv_len or layout than the
 * plan was made for; a copy of a plan, and the pure planner's plan for the
 * context's caps, run. */
static void test_plan_integrity(void **state) {
    fix *f = *state;
    qattn_paged_mqa_logits_plan plan;
    assert_int_equal(qattn_paged_mqa_logits_plan_create(f->ctx, &f->a, NULL, &plan), QATTN_OK);
    qattn_paged_mqa_logits_plan edited = plan;
    edited.num_splits += 1;
    edited.grid[0] += 1;
    qattn_status s = qattn_paged_mqa_logits_run(f->ctx, &edited, &f->a, NULL, 0);
    expect(s, qattn_last_error(f->ctx), "changed after planning", "edited splits");
    edited = plan;
    edited.reason[QATTN_REASON_BYTES - 1] ^= 1;
    assert_int_equal(qattn_paged_mqa_logits_run(f->ctx, &edited, &f->a, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    edited = plan;
    edited.shared_bytes = 1u << 30;
    assert_int_equal(qattn_paged_mqa_logits_run(f->ctx, &edited, &f->a, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    edited = plan;
    edited.max_kv_len = 1 << 20;
    assert_int_equal(qattn_paged_mqa_logits_run(f->ctx, &edited, &f->a, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    assert_true(logits_untouched(f));
    /* arguments the plan was not made for */
    const struct {
        const char *what, *names;
        int how;
    } cases[] = {
        {"max_kv_len 8 (plan: 12)", "max_kv_len", 0},
        {"page_size 2 (plan: 4)", "page_size", 1},
        {"one request (plan: 2)", "B=2", 2},
        {"k_cache fnuz (plan: fn)", "k fp8_e4m3fn", 3},
        {"logits rows padded to 16 (plan: 12)", "differs from what the plan was made for", 4},
        {"k_scale broadcast (stride 0)", "differs from what the plan was made for", 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_paged_mqa_logits_args o = f->a;
        switch (cases[i].how) {
        case 0: o.max_kv_len = 8; o.logits.shape[2] = 8; break;
        case 1: o.page_size = 2; o.k_cache.shape[0] = SLOTS / 2; o.k_cache.shape[1] = 2;
            o.k_cache.strides[0] = 2 * D; o.k_scale.shape[0] = SLOTS / 2; o.k_scale.shape[1] = 2;
            o.k_scale.strides[0] = 2; break;
        case 2: o.q.shape[0] = o.weights.shape[0] = o.logits.shape[0] = o.kv_lens.shape[0] = 1;
            o.kv_indptr.shape[0] = 2; break;
        case 3: o.k_cache.dtype = QATTN_FP8_E4M3FNUZ; break;
        case 4: o.logits.shape[0] = 1; o.q.shape[0] = o.weights.shape[0] = o.kv_lens.shape[0] = 1;
            o.kv_indptr.shape[0] = 2; o.logits.strides[0] = o.logits.strides[1] = 16; break;
        default: o.k_scale.strides[0] = o.k_scale.strides[1] = 0; break;
        }
        qattn_paged_mqa_logits_plan own;
        /* the arguments are valid: a plan of their own runs them */
        s = qattn_paged_mqa_logits_plan_create(f->ctx, &o, NULL, &own);
        if (s != QATTN_OK) fail_msg("%s: its own plan: %s", cases[i].what, qattn_last_error(f->ctx));
        if (cases[i].how == 4) { /* plan for one padded request and run the unpadded one */
            qattn_paged_mqa_logits_args one = o;
            one.logits.strides[0] = one.logits.strides[1] = M;
            s = qattn_paged_mqa_logits_run(f->ctx, &own, &one, NULL, 0);
        } else {
            s = qattn_paged_mqa_logits_run(f->ctx, &plan, &o, NULL, 0);
        }
        expect(s, qattn_last_error(f->ctx), cases[i].names, cases[i].what);
        assert_int_equal(s, QATTN_ERR_INVALID_ARGUMENT);
        assert_true(logits_untouched(f));
    }
    /* a copy runs, as does the pure planner's plan for these caps */
    qattn_device_caps caps;
    assert_int_equal(qattn_get_caps(f->ctx, &caps), QATTN_OK);
    qattn_paged_mqa_logits_plan pure, copy;
    assert_int_equal(qattn_paged_mqa_logits_plan_compute(&caps, &f->a, NULL, &pure, NULL, 0), QATTN_OK);
    copy = pure;
    assert_int_equal(qattn_paged_mqa_logits_run(f->ctx, &copy, &f->a, NULL, 0), QATTN_OK);
    assert_false(logits_untouched(f));
    /* NULL plan and args */
    assert_int_equal(qattn_paged_mqa_logits_run(f->ctx, NULL, &f->a, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(f->ctx), "plan"));
    assert_int_equal(qattn_paged_mqa_logits_run(f->ctx, &plan, NULL, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_paged_mqa_logits_plan_create(f->ctx, &f->a, NULL, NULL), QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_paged_mqa_logits_plan_create(NULL, &f->a, NULL, &plan), QATTN_ERR_INVALID_ARGUMENT);
}

/* Row 13 for this op: kv_lens past max_kv_len is computed over the
 * max_kv_len columns there are (nothing written past them: the guard
 * bytes after the logits keep their poison), and with
 * QATTN_CHECK_INDICES=1 refused naming kv_lens, nothing written. */
static void test_lens_past_max_kv_len(void **state) {
    fix *f = *state;
    const int32_t lens[B] = {40, 12};
    assert_int_equal(qattn_buffer_upload(f->ctx, f->b[6], 0, lens, sizeof lens), QATTN_OK);
    qattn_paged_mqa_logits_plan plan;
    assert_int_equal(qattn_paged_mqa_logits_plan_create(f->ctx, &f->a, NULL, &plan), QATTN_OK);
    setenv("QATTN_CHECK_INDICES", "1", 1);
    qattn_status s = qattn_paged_mqa_logits_run(f->ctx, &plan, &f->a, NULL, 0);
    assert_int_equal(s, QATTN_ERR_INDEX_OUT_OF_RANGE);
    assert_non_null(strstr(qattn_last_error(f->ctx), "kv_lens"));
    assert_true(logits_untouched(f));
    unsetenv("QATTN_CHECK_INDICES");
    assert_int_equal(qattn_paged_mqa_logits_run(f->ctx, &plan, &f->a, NULL, 0), QATTN_OK);
    float got[B * N * M + 16];
    assert_int_equal(qattn_buffer_download(f->ctx, f->b[7], 0, got, sizeof got), QATTN_OK);
    /* request 0 (length 40, N = 1) sees all 12 columns: none is -inf */
    for (int p = 0; p < M; ++p) assert_true(got[p] > -1e30f && got[p] == got[p]);
    const unsigned char *guard = (const unsigned char *)(got + B * N * M);
    for (int i = 0; i < 64; ++i) assert_int_equal(guard[i], QT_POISON);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_strides_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planner_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caps_and_dtype, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_integrity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lens_past_max_kv_len, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
