/* Regression tests of issue 11's rows that the core owns: sizes a planner
 * or kernel computes with are bounded before use (in validation and in the
 * pure planners, which fuzzers call without validation), and a plan changed
 * after planning is refused. Each case names its row of the issue. Every
 * refused call must name the argument and leave poisoned outputs untouched.
 * Runs on the cpu backend; under the sanitizer build a row that still
 * overflows is a UBSan report. */
#include <stdio.h>

#include "fake_devices.h"
#include "qattn/experimental.h"
#include "decode_fixture.h"

#define TWO32 ((int64_t)1 << 32)

/* ---- a small valid decode on the cpu (decode_fixture.h) ---- */
static int setup(void **state) {
    *state = qf_setup("hardening");
    return 0;
}

static int teardown(void **state) { return qf_teardown(state); }

static void expect(qattn_status got, const char *msg, const char *names, const char *what) {
    if (got == QATTN_OK || !strstr(msg, names)) {
        print_error("%s: status %s, message \"%s\" should name %s\n", what, qattn_status_name(got), msg,
                    names);
        fail();
    }
}

/* Row 1: a contiguous descriptor of a shape whose strides pass int64
 * saturates instead of overflowing, and validation names it. */
static void test_row1_contiguous_saturates(void **state) {
    (void)state;
    const int64_t shape[3] = {TWO32, TWO32, TWO32};
    qattn_tensor t = qattn_tensor_contiguous(NULL, 0, QATTN_BF16, 3, shape);
    assert_int_equal(t.strides[2], 1);
    assert_int_equal(t.strides[1], TWO32);
    assert_int_equal(t.strides[0], INT64_MAX); /* 2^64 wrapped to 0 before */
    const int64_t two[2] = {TWO32, TWO32};
    t = qattn_tensor_contiguous(NULL, 0, QATTN_BF16, 2, two);
    assert_int_equal(t.strides[0], TWO32);
}

/* Rows 5, 6, 8: the pure decode planner, given shapes past int32 without
 * any validation, refuses them instead of dividing by a truncated 0 or
 * planning for a truncated batch. */
static void test_rows5_6_8_decode_planner_bounds(void **state) {
    fix *f = *state;
    const qattn_device_caps caps = caps_h200();
    qattn_decode_plan plan;
    char err[256];
    struct {
        const char *row;
        int64_t B_, Hq, Hkv;
        const char *names;
    } cases[] = {
        {"row 5: B = 2^33, Hq = Hkv = 3 x 2^31", (int64_t)1 << 33, 3 * ((int64_t)1 << 31),
         3 * ((int64_t)1 << 31), "q"},
        {"row 6: Hq = Hkv = 2^32", B, TWO32, TWO32, "q"},
        {"row 8: B = 2^32 + 3", TWO32 + 3, HQ, HKV, "q"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        qattn_decode_args a = f->a;
        a.q.shape[0] = a.o.shape[0] = cases[i].B_;
        a.q.shape[2] = a.o.shape[2] = cases[i].Hq;
        a.k_cache.shape[1] = a.v_cache.shape[1] = cases[i].Hkv;
        a.kv_indptr.shape[0] = cases[i].B_ + 1;
        a.kv_lens.shape[0] = cases[i].B_;
        err[0] = '\0';
        memset(&plan, 0x5A, sizeof plan);
        qattn_status s = qattn_decode_plan_compute(&caps, &a, NULL, &plan, err, sizeof err);
        expect(s, err, cases[i].names, cases[i].row);
    }
    /* A huge stride on a size-1 dimension, unvalidated. */
    qattn_decode_args a = f->a;
    a.q.shape[1] = 1;
    a.q.strides[1] = INT64_MAX / 2;
    assert_int_not_equal(qattn_decode_plan_compute(&caps, &a, NULL, &plan, err, sizeof err), QATTN_OK);
    assert_non_null(strstr(err, "q"));
    a = f->a;
    a.k_cache.strides[0] = -5;
    assert_int_not_equal(qattn_decode_plan_compute(&caps, &a, NULL, &plan, err, sizeof err), QATTN_OK);
    assert_non_null(strstr(err, "k_cache"));
    /* The baseline plans. */
    assert_int_equal(qattn_decode_plan_compute(&caps, &f->a, NULL, &plan, err, sizeof err), QATTN_OK);
}

/* Row 7: broadcast q and o (every stride 0) keep a one-element span over a
 * logical shape of 8 x (2^31 - 2) x (2^31 - 1) rows: validation refuses it,
 * naming q, and nothing is written. */
static void test_row7_broadcast_shapes_bounded(void **state) {
    fix *f = *state;
    qattn_decode_args a = f->a;
    const int64_t big_b = INT32_MAX - 1, hq = INT32_MAX;
    a.q.shape[0] = a.o.shape[0] = big_b;
    a.q.shape[1] = a.o.shape[1] = 8;
    a.q.shape[2] = a.o.shape[2] = hq;
    for (int i = 0; i < 3; ++i) a.q.strides[i] = a.o.strides[i] = 0;
    a.k_cache.shape[1] = a.v_cache.shape[1] = 1;
    a.k_cache.strides[0] = a.v_cache.strides[0] = D;
    /* The index tensors must be contiguous: wrap a host array as one
     * large enough (nothing reads it, validation refuses first). */
    static int32_t dummy[16];
    qattn_buffer *wide = NULL;
    assert_int_equal(qattn_buffer_wrap(f->ctx, dummy, (uint64_t)(big_b + 1) * 4, &wide), QATTN_OK);
    a.kv_indptr = qattn_tensor_contiguous(wide, 0, QATTN_I32, 1, (int64_t[]){big_b + 1});
    a.kv_lens = qattn_tensor_contiguous(wide, 0, QATTN_I32, 1, (int64_t[]){big_b});
    qattn_decode_plan plan;
    memset(&plan, 0, sizeof plan);
    /* The pure planner (no validation) bounds the product itself. */
    const qattn_device_caps caps = caps_h200();
    char err[256] = "";
    qattn_status s = qattn_decode_plan_compute(&caps, &a, NULL, &plan, err, sizeof err);
    expect(s, err, "q", "row 7 plan_compute");
    assert_int_equal(s, QATTN_ERR_OVERFLOW);
    /* Validation refuses the broadcast o first since issue 24 item 2 (an
     * output's elements may not share memory; a distinct o of this shape
     * spans past int32 itself). */
    s = qattn_decode_plan_create(f->ctx, &a, NULL, &plan);
    expect(s, qattn_last_error(f->ctx), "o: stride[0] is 0", "row 7 plan_create, o broadcast");
    assert_int_equal(s, QATTN_ERR_STRIDE);
    s = qattn_decode_run(f->ctx, &plan, &a, f->ws, 0);
    expect(s, qattn_last_error(f->ctx), "o", "row 7 run");
    assert_true(qt_buf_all(f->ctx, f->o, QT_POISON));
    qattn_buffer_free(f->ctx, wide);
}

/* Validation bounds a stride on a size-1 dimension too (rows 2 and 7 of
 * decode's own tensors), naming it. */
static void test_size1_stride_bounded(void **state) {
    fix *f = *state;
    qattn_decode_args a = f->a;
    a.q.shape[1] = a.o.shape[1] = 1;
    a.q.strides[1] = (int64_t)INT32_MAX + 1;
    qattn_decode_plan plan;
    qattn_status s = qattn_decode_plan_create(f->ctx, &a, NULL, &plan);
    assert_int_equal(s, QATTN_ERR_OVERFLOW);
    assert_non_null(strstr(qattn_last_error(f->ctx), "q: stride[1]"));
}

/* Row 14 and deliverable 6: run refuses a plan whose fields changed after
 * planning (here 4 splits with no workspace), and a run whose max_kv_len
 * exceeds the plan's. A copy of a plan still runs. */
static void test_row14_plan_integrity(void **state) {
    fix *f = *state;
    qattn_decode_plan plan;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &f->a, NULL, &plan), QATTN_OK);
    assert_int_equal(plan.max_kv_len, f->a.max_kv_len);
    qattn_decode_plan edited = plan;
    edited.num_splits = 4;
    edited.workspace_bytes = 0;
    qattn_status s = qattn_decode_run(f->ctx, &edited, &f->a, NULL, 0);
    expect(s, qattn_last_error(f->ctx), "plan", "row 14: edited splits");
    assert_non_null(strstr(qattn_last_error(f->ctx), "changed after planning"));
    assert_true(qt_buf_all(f->ctx, f->o, QT_POISON));
    /* One flipped bit of the reason text is an edit too. */
    edited = plan;
    edited.reason[QATTN_REASON_BYTES - 1] ^= 1;
    assert_int_equal(qattn_decode_run(f->ctx, &edited, &f->a, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    edited = plan;
    edited.max_kv_len = 1 << 20;
    assert_int_equal(qattn_decode_run(f->ctx, &edited, &f->a, NULL, 0), QATTN_ERR_INVALID_ARGUMENT);
    /* kv_lens up to 16 need max_kv_len 16: a plan for 8 is refused. */
    qattn_decode_args small = f->a;
    small.max_kv_len = 8;
    qattn_decode_plan p8;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &small, NULL, &p8), QATTN_OK);
    s = qattn_decode_run(f->ctx, &p8, &f->a, f->ws, 0);
    expect(s, qattn_last_error(f->ctx), "max_kv_len", "run past the plan's max_kv_len");
    assert_true(qt_buf_all(f->ctx, f->o, QT_POISON));
    /* The plan records the layout it was made for: a run with another
     * stride (here on q's size-1 row dimension) is refused. */
    qattn_decode_args other = f->a;
    other.q.strides[1] = 0;
    assert_int_equal(qattn_decode_plan_create(f->ctx, &f->a, NULL, &plan), QATTN_OK);
    s = qattn_decode_run(f->ctx, &plan, &other, f->ws, 0);
    expect(s, qattn_last_error(f->ctx), "differs from what the plan was made for", "another layout");
    assert_true(qt_buf_all(f->ctx, f->o, QT_POISON));
    /* The pure planner's plans are sealed too; a copy runs. */
    qattn_device_caps caps;
    assert_int_equal(qattn_get_caps(f->ctx, &caps), QATTN_OK);
    qattn_decode_plan pure;
    assert_int_equal(qattn_decode_plan_compute(&caps, &f->a, NULL, &pure, NULL, 0), QATTN_OK);
    qattn_decode_plan copy = pure;
    assert_int_equal(qattn_decode_run(f->ctx, &copy, &f->a, f->ws, 0), QATTN_OK);
    assert_false(qt_buf_all(f->ctx, f->o, QT_POISON));
}

/* Found by tests/fuzz/fuzz_plan: capabilities the planners divide by or
 * size workgroups from are checked first (a 2^32 - 255-lane subgroup gave a
 * workgroup of -255 threads), and an invalid cache dtype is refused before
 * its element size (0) divides anything (the SIGFPE of issue 11 row 4). */
static void test_fuzz_found_caps_and_dtype(void **state) {
    fix *f = *state;
    qattn_decode_plan plan;
    char err[256];
    qattn_device_caps caps = caps_h200();
    caps.subgroup_size_min = caps.subgroup_size_max = 0xFFFFFF01u;
    assert_int_equal(qattn_decode_plan_compute(&caps, &f->a, NULL, &plan, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "caps.subgroup_size"));
    caps = caps_h200();
    caps.max_workgroup_size = 0;
    assert_int_equal(qattn_decode_plan_compute(&caps, &f->a, NULL, &plan, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "caps.max_workgroup_size"));
    caps = caps_h200();
    caps.n_matrix_shapes = -3;
    qattn_mqa_logits_plan mp;
    assert_int_equal(qattn_mqa_logits_plan_compute(&caps, NULL, NULL, &mp, err, sizeof err),
                     QATTN_ERR_INVALID_ARGUMENT);
    caps = caps_h200();
    qattn_decode_args a = f->a;
    a.k_cache.dtype = a.v_cache.dtype = QATTN_DTYPE_INVALID;
    for (int v = 0; v < QATTN_DECODE_VARIANT_COUNT; ++v) {
        qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
        o.variant = (qattn_decode_variant)v;
        assert_int_equal(qattn_decode_plan_compute(&caps, &a, &o, &plan, err, sizeof err), QATTN_ERR_DTYPE);
        assert_non_null(strstr(err, "k_cache"));
    }
}

/* ---- MQA logits: rows 2 and 3, and its plan's integrity ---- */
enum { S = 4, H = 4, MD = 64, SKV = 1 };

static void test_rows2_3_mqa_strides(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("hardening_mqa");
    uint8_t q[S * H * MD], k[SKV * MD];
    float ksc[SKV], w[S * H];
    int32_t ks[S] = {0, 0, 0, 0}, ke[S] = {1, 1, 1, 1};
    qt_fill_fp8(&rng, q, sizeof q, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_fp8(&rng, k, sizeof k, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_f32_pos(&rng, ksc, SKV, 0.5f, 1.0f);
    qt_fill_f32_pos(&rng, w, S * H, 0.5f, 1.0f);
    qattn_buffer *bq = qt_buf(ctx, q, sizeof q), *bk = qt_buf(ctx, k, sizeof k);
    qattn_buffer *bks = qt_buf(ctx, ksc, sizeof ksc), *bw = qt_buf(ctx, w, sizeof w);
    qattn_buffer *bs = qt_buf(ctx, ks, sizeof ks), *be = qt_buf(ctx, ke, sizeof ke);
    qattn_buffer *bl = qt_buf(ctx, NULL, S * SKV * 4);
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){S, H, MD});
    a.k = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){SKV, MD});
    a.k_scale = qattn_tensor_contiguous(bks, 0, QATTN_F32, 1, (int64_t[]){SKV});
    a.weights = qattn_tensor_contiguous(bw, 0, QATTN_F32, 2, (int64_t[]){S, H});
    a.ks = qattn_tensor_contiguous(bs, 0, QATTN_I32, 1, (int64_t[]){S});
    a.ke = qattn_tensor_contiguous(be, 0, QATTN_I32, 1, (int64_t[]){S});
    a.logits = qattn_tensor_contiguous(bl, 0, QATTN_F32, 2, (int64_t[]){S, SKV});
    qattn_mqa_logits_plan plan;
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &plan), QATTN_OK);
    /* Row 2: S_kv = 1, so k's row stride addresses nothing and passed. */
    qattn_mqa_logits_args bad = a;
    bad.k.strides[0] = INT64_MAX / 2;
    qattn_status s = qattn_mqa_logits_plan_create(ctx, &bad, NULL, &plan);
    expect(s, qattn_last_error(ctx), "k: stride[0]", "row 2 plan_create");
    /* Row 3: the pure planner with huge or negative q / weights strides. */
    qattn_device_caps caps = caps_h200();
    char err[256];
    const struct {
        const char *row, *names;
        int which, dim;
        int64_t stride;
    } cases[] = {
        {"row 3: q head stride INT64_MAX / 4", "q", 0, 1, INT64_MAX / 4},
        {"row 3: q row stride -1", "q", 0, 0, -1},
        {"row 3: weights head stride 2^40", "weights", 1, 1, (int64_t)1 << 40},
        {"row 3: weights row stride -64", "weights", 1, 0, -64},
        {"row 3: logits row stride 2^62", "logits", 2, 0, (int64_t)1 << 62},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        bad = a;
        qattn_tensor *t = cases[i].which == 0 ? &bad.q : cases[i].which == 1 ? &bad.weights : &bad.logits;
        t->strides[cases[i].dim] = cases[i].stride;
        err[0] = '\0';
        s = qattn_mqa_logits_plan_compute(&caps, &bad, NULL, &plan, err, sizeof err);
        expect(s, err, cases[i].names, cases[i].row);
    }
    /* Integrity: an edited plan is refused before anything runs. */
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &a, NULL, &plan), QATTN_OK);
    qattn_mqa_logits_plan edited = plan;
    edited.kv_per_slice = 1 << 30;
    s = qattn_mqa_logits_run(ctx, &edited, &a, NULL, 0);
    expect(s, qattn_last_error(ctx), "changed after planning", "edited mqa plan");
    assert_true(qt_buf_all(ctx, bl, QT_POISON));
    /* The experimental ceiling consumes plans too: the same check first. */
    double tflops = -1.0;
    s = qattn_mqa_matrix_ceiling(ctx, &edited, &tflops);
    expect(s, qattn_last_error(ctx), "changed after planning", "edited plan to the ceiling");
    assert_true(tflops == 0.0);
    tflops = -1.0;
    assert_int_equal(qattn_mqa_matrix_ceiling(ctx, &plan, &tflops), QATTN_ERR_UNSUPPORTED);
    assert_non_null(strstr(qattn_last_error(ctx), "qattn_mqa_matrix_ceiling"));
    assert_true(tflops == 0.0);
    /* index64 was planned from these strides: other strides are refused. */
    qattn_mqa_logits_args wide = a;
    wide.q.strides[0] = H * MD + 64;
    wide.q.shape[0] = 1;
    wide.weights.shape[0] = wide.ks.shape[0] = wide.ke.shape[0] = wide.logits.shape[0] = 1;
    qattn_mqa_logits_plan one;
    assert_int_equal(qattn_mqa_logits_plan_create(ctx, &wide, NULL, &one), QATTN_OK);
    wide.q.strides[0] = H * MD;
    s = qattn_mqa_logits_run(ctx, &one, &wide, NULL, 0);
    expect(s, qattn_last_error(ctx), "differs from what the plan was made for", "mqa: another layout");
    assert_true(qt_buf_all(ctx, bl, QT_POISON));
    qattn_mqa_logits_plan copy = plan;
    assert_int_equal(qattn_mqa_logits_run(ctx, &copy, &a, NULL, 0), QATTN_OK);
    assert_false(qt_buf_all(ctx, bl, QT_POISON));
    qattn_buffer *all[] = {bq, bk, bks, bw, bs, be, bl};
    for (size_t i = 0; i < 7; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

/* Issue 18 item 4: the KV store's int32 rule counts T x Hkv x D with the
 * cache's own kv heads and head dim, in either form; it multiplied
 * shape[1] and shape[2], which for a rank-4 cache are P and Hkv. */
static void test_kv_store_rank4_int32_rule(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx();
    qt_rng rng = qt_rng_for("hardening_store4");
    /* Valid: [1, 65536, 1, 64] with T = 32768 (32768 x 1 x 64 = 2^21);
     * refused before as 32768 x 65536 "over int32". */
    enum { T = 32768, PR = 65536, SD = 64 };
    uint16_t *kn = malloc((size_t)T * SD * 2);
    int32_t *slots = malloc((size_t)T * 4);
    qt_fill_bf16(&rng, kn, (size_t)T * SD, 1.0f);
    for (int t = 0; t < T; ++t) slots[t] = 2 * t + 1;
    qattn_buffer *bk = qt_buf(ctx, kn, (size_t)T * SD * 2), *bs = qt_buf(ctx, slots, (size_t)T * 4);
    qattn_buffer *kc = qt_buf(ctx, NULL, (size_t)PR * SD * 2), *vc = qt_buf(ctx, NULL, (size_t)PR * SD * 2);
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = a.v_new = qattn_tensor_contiguous(bk, 0, QATTN_BF16, 3, (int64_t[]){T, 1, SD});
    a.slot_mapping = qattn_tensor_contiguous(bs, 0, QATTN_I32, 1, (int64_t[]){T});
    a.k_cache = qattn_tensor_contiguous(kc, 0, QATTN_BF16, 4, (int64_t[]){1, PR, 1, SD});
    a.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_BF16, 4, (int64_t[]){1, PR, 1, SD});
    qattn_status s = qattn_kv_store(ctx, &a);
    if (s != QATTN_OK) print_error("valid rank-4 store refused: %s\n", qattn_last_error(ctx));
    assert_int_equal(s, QATTN_OK);
    uint16_t got[SD];
    const int t_probe = T - 3;
    assert_int_equal(qattn_buffer_download(ctx, kc, (uint64_t)slots[t_probe] * SD * 2, got, sizeof got),
                     QATTN_OK);
    assert_memory_equal(got, kn + (size_t)t_probe * SD, sizeof got);
    /* Over the limit with P = 1: [1, 1, 32768, 64] and T = 1024 broadcast
     * tokens is 1024 x 32768 x 64 = 2^31 elements; passed before as
     * 1024 x 1 x 32768. Every slot is -1, so the old code "ran" it. */
    enum { T2 = 1024, H2 = 32768 };
    for (int t = 0; t < T2; ++t) slots[t] = -1;
    assert_int_equal(qattn_buffer_upload(ctx, bs, 0, slots, (size_t)T2 * 4), QATTN_OK);
    qattn_buffer *kc2 = qt_buf(ctx, NULL, (size_t)H2 * SD * 2), *vc2 = qt_buf(ctx, NULL, (size_t)H2 * SD * 2);
    qattn_kv_store_args b = a;
    b.k_new = qattn_tensor_contiguous(bk, 0, QATTN_BF16, 3, (int64_t[]){T2, H2, SD});
    b.k_new.strides[0] = b.k_new.strides[1] = 0; /* one token row for all */
    b.v_new = b.k_new;
    b.slot_mapping = qattn_tensor_contiguous(bs, 0, QATTN_I32, 1, (int64_t[]){T2});
    b.k_cache = qattn_tensor_contiguous(kc2, 0, QATTN_BF16, 4, (int64_t[]){1, 1, H2, SD});
    b.v_cache = qattn_tensor_contiguous(vc2, 0, QATTN_BF16, 4, (int64_t[]){1, 1, H2, SD});
    s = qattn_kv_store(ctx, &b);
    expect(s, qattn_last_error(ctx), "T x Hkv x D", "rank-4 store over int32");
    assert_int_equal(s, QATTN_ERR_OVERFLOW);
    assert_non_null(strstr(qattn_last_error(ctx), "1024 x 32768 x 64"));
    assert_true(qt_buf_all(ctx, kc2, QT_POISON));
    qattn_buffer *all[] = {bk, bs, kc, vc, kc2, vc2};
    for (size_t i = 0; i < 6; ++i) qattn_buffer_free(ctx, all[i]);
    free(kn);
    free(slots);
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row1_contiguous_saturates),
        cmocka_unit_test_setup_teardown(test_rows5_6_8_decode_planner_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_row7_broadcast_shapes_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size1_stride_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_row14_plan_integrity, setup, teardown),
        cmocka_unit_test(test_rows2_3_mqa_strides),
        cmocka_unit_test_setup_teardown(test_fuzz_found_caps_and_dtype, setup, teardown),
        cmocka_unit_test(test_kv_store_rank4_int32_rule),
    };
    return cmocka_run_group_tests_name("hardening", tests, NULL, NULL);
}
