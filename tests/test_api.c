/* The public API's contract, launch-free where possible: statuses, versions,
 * contexts, buffers, and every descriptor rule of every op. Each bad call must
 * return the right status, name the argument in the last error, and leave the
 * (poisoned) outputs untouched. Runs on the cpu backend; the rules are the
 * core's, so they hold for every backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qattn/backend.h"
#include "qattn/qattn.h"

#include "fake_devices.h"
#include "test_ctx.h"

/* ---- status, version ---- */

static void test_status_names(void **state) {
    (void)state;
    for (int s = 0; s < QATTN_STATUS_COUNT; ++s) {
        const char *n = qattn_status_name((qattn_status)s);
        assert_non_null(strstr(n, "QATTN_"));
        assert_string_not_equal(n, "QATTN_STATUS_UNKNOWN");
        for (int t = 0; t < s; ++t) assert_string_not_equal(n, qattn_status_name((qattn_status)t));
        assert_true(strlen(qattn_status_text((qattn_status)s)) > 0);
    }
    assert_string_equal(qattn_status_name(QATTN_OK), "QATTN_OK");
    assert_string_equal(qattn_status_name(QATTN_ERR_SHAPE), "QATTN_ERR_SHAPE");
    assert_string_equal(qattn_status_name((qattn_status)9999), "QATTN_STATUS_UNKNOWN");
}

static void test_version(void **state) {
    (void)state;
    assert_int_equal(qattn_version_number(), QATTN_VERSION_NUMBER);
    assert_string_equal(qattn_version_string(), QATTN_VERSION_STRING);
}

static void test_dtypes(void **state) {
    (void)state;
    assert_int_equal(qattn_dtype_size(QATTN_BF16), 2);
    assert_int_equal(qattn_dtype_size(QATTN_F32), 4);
    assert_int_equal(qattn_dtype_size(QATTN_FP8_E4M3FNUZ), 1);
    assert_int_equal(qattn_dtype_size((qattn_dtype)77), 0);
    assert_string_equal(qattn_dtype_name(QATTN_FP8_E4M3FN), "fp8_e4m3fn");
    assert_string_equal(qattn_dtype_name((qattn_dtype)77), "invalid");
}

/* ---- contexts, buffers ---- */

static void test_context_errors(void **state) {
    (void)state;
    qattn_context *ctx = (qattn_context *)1;
    char err[256] = "";
    assert_int_equal(qattn_context_create(NULL, NULL, &ctx, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(err, "backend"));
    qattn_backend_iface broken = *qattn_backend_cpu();
    broken.buffer_alloc = NULL;
    assert_int_equal(qattn_context_create(&broken, NULL, &ctx, err, sizeof err), QATTN_ERR_INVALID_ARGUMENT);
    qattn_context_options opt = QATTN_CONTEXT_OPTIONS_INIT;
    opt.device = "7";
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), &opt, &ctx, err, sizeof err),
                     QATTN_ERR_BACKEND_UNAVAILABLE);
    assert_non_null(strstr(err, "device"));
    qattn_context_free(NULL); /* accepted */
    ctx = qt_cpu_ctx();
    assert_string_equal(qattn_backend_name(ctx), "cpu");
    qattn_device_caps caps;
    assert_int_equal(qattn_get_caps(ctx, &caps), QATTN_OK);
    assert_string_equal(caps.arch, "cpu");
    double ms;
    assert_int_equal(qattn_last_op_time_ms(ctx, &ms), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(ctx), "no op"));
    qattn_context_free(ctx);
}

static void test_buffers(void **state) {
    (void)state;
    qattn_context *ctx = qt_cpu_ctx(), *other = qt_cpu_ctx();
    qattn_buffer *b = NULL;
    assert_int_equal(qattn_buffer_alloc(ctx, 0, &b), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(ctx), "bytes"));
    assert_int_equal(qattn_buffer_alloc(ctx, 100, &b), QATTN_OK);
    assert_int_equal(qattn_buffer_size(b), 100);
    char data[128] = {1, 2, 3};
    assert_int_equal(qattn_buffer_upload(ctx, b, 90, data, 11), QATTN_ERR_OUT_OF_BOUNDS);
    assert_int_equal(qattn_buffer_upload(ctx, b, UINT64_MAX, data, 2), QATTN_ERR_OUT_OF_BOUNDS);
    assert_int_equal(qattn_buffer_download(ctx, b, 0, NULL, 4), QATTN_ERR_INVALID_ARGUMENT);
    assert_int_equal(qattn_buffer_upload(other, b, 0, data, 4), QATTN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(qattn_last_error(other), "another context"));
    assert_int_equal(qattn_buffer_upload(ctx, b, 90, data, 10), QATTN_OK);
    char back[10];
    assert_int_equal(qattn_buffer_download(ctx, b, 90, back, 10), QATTN_OK);
    assert_memory_equal(back, data, 10);
    /* Wrapping host memory on cpu: freeing the wrapper leaves it alone. */
    char *mine = malloc(64);
    qattn_buffer *w = NULL;
    assert_int_equal(qattn_buffer_wrap(ctx, mine, 64, &w), QATTN_OK);
    assert_int_equal(qattn_buffer_upload(ctx, w, 0, data, 3), QATTN_OK);
    assert_memory_equal(mine, data, 3);
    qattn_buffer_free(ctx, w);
    mine[0] = 9; /* still ours: ASan would flag a use after free */
    free(mine);
    qattn_buffer_free(ctx, NULL);
    qattn_buffer_free(ctx, b);
    qattn_context_free(ctx);
    qattn_context_free(other);
}

static void test_tensor_contiguous(void **state) {
    (void)state;
    int64_t shape[3] = {5, 3, 7};
    qattn_tensor t = qattn_tensor_contiguous(NULL, 16, QATTN_BF16, 3, shape);
    assert_int_equal(t.strides[2], 1);
    assert_int_equal(t.strides[1], 7);
    assert_int_equal(t.strides[0], 21);
    assert_int_equal(t.offset, 16);
    assert_false(qattn_tensor_present(&t));
}

/* ---- one answer when a backend refuses an AUTO plan ----
 * The cpu backend dressed as an H200 (so decode's matrix gate passes for an
 * fp8 cache) whose supports_op refuses every matrix decode plan. */
static qattn_backend_iface g_refusing;
static qattn_status refusing_caps(void *be, qattn_device_caps *c) {
    (void)be;
    *c = caps_h200();
    return QATTN_OK;
}
static int refusing_supports(void *be, qattn_op op, const void *plan) {
    (void)be;
    return op != QATTN_OP_DECODE || ((const qattn_decode_plan *)plan)->variant != QATTN_DECODE_MATRIX;
}

static void test_refused_auto_plan_steps_down(void **state) {
    (void)state;
    g_refusing = *qattn_backend_cpu();
    g_refusing.get_caps = refusing_caps;
    g_refusing.supports_op = refusing_supports;
    qattn_context *ctx = NULL;
    char err[256];
    assert_int_equal(qattn_context_create(&g_refusing, NULL, &ctx, err, sizeof err), QATTN_OK);
    enum { NS = 16, HQ = 4, D = 128 };
    qattn_buffer *q = qt_buf(ctx, NULL, HQ * D * 2), *kc = qt_buf(ctx, NULL, NS * D);
    qattn_buffer *vc = qt_buf(ctx, NULL, NS * D), *sc = qt_buf(ctx, NULL, NS * 4);
    qattn_buffer *ix = qt_buf(ctx, NULL, 64), *o = qt_buf(ctx, NULL, HQ * D * 2);
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(q, 0, QATTN_BF16, 4, (int64_t[]){1, 1, HQ, D});
    a.k_cache = qattn_tensor_contiguous(kc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){NS, 1, D});
    a.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){NS, 1, D});
    a.k_scale = qattn_tensor_contiguous(sc, 0, QATTN_F32, 2, (int64_t[]){NS, 1});
    a.v_scale = a.k_scale;
    a.kv_indptr = qattn_tensor_contiguous(ix, 0, QATTN_I32, 1, (int64_t[]){2});
    a.kv_indices = qattn_tensor_contiguous(ix, 16, QATTN_I32, 1, (int64_t[]){1});
    a.kv_lens = qattn_tensor_contiguous(ix, 32, QATTN_I32, 1, (int64_t[]){1});
    a.o = qattn_tensor_contiguous(o, 0, QATTN_BF16, 4, (int64_t[]){1, 1, HQ, D});
    a.page_size = NS;
    a.max_kv_len = NS;
    a.sm_scale = 0.088f;
    a.window_left = -1;
    /* The pure planner (no backend) takes the matrix variant here ... */
    qattn_device_caps caps = caps_h200();
    qattn_decode_plan plan;
    assert_int_equal(qattn_decode_plan_compute(&caps, &a, NULL, &plan, err, sizeof err), QATTN_OK);
    assert_int_equal(plan.variant, QATTN_DECODE_MATRIX);
    /* ... the refusing backend gets simt, and the reason says why. */
    assert_int_equal(qattn_decode_plan_create(ctx, &a, NULL, &plan), QATTN_OK);
    assert_int_equal(plan.variant, QATTN_DECODE_SIMT);
    assert_non_null(strstr(plan.reason, "matrix refused by the backend"));
    /* The stepped-down plan is sealed: its run passes the integrity check. */
    qattn_buffer *ws = NULL;
    assert_int_equal(qattn_buffer_alloc(ctx, plan.workspace_bytes, &ws), QATTN_OK);
    qattn_status s = qattn_decode_run(ctx, &plan, &a, ws, 0);
    assert_null(strstr(qattn_last_error(ctx), "changed after planning"));
    (void)s;
    /* A pinned matrix variant is the gate's failure, not a step down. */
    qattn_decode_options opt = QATTN_DECODE_OPTIONS_INIT;
    opt.variant = QATTN_DECODE_MATRIX;
    assert_int_equal(qattn_decode_plan_create(ctx, &a, &opt, &plan), QATTN_ERR_VARIANT_GATE);
    assert_non_null(strstr(qattn_last_error(ctx), "matrix (pinned)"));
    qattn_buffer *all[] = {q, kc, vc, sc, ix, o, ws};
    for (size_t i = 0; i < 7; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),   cmocka_unit_test(test_version),
        cmocka_unit_test(test_dtypes),         cmocka_unit_test(test_context_errors),
        cmocka_unit_test(test_buffers),        cmocka_unit_test(test_tensor_contiguous),
        cmocka_unit_test(test_refused_auto_plan_steps_down),
    };
    return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
