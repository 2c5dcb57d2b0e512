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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),   cmocka_unit_test(test_version),
        cmocka_unit_test(test_dtypes),         cmocka_unit_test(test_context_errors),
        cmocka_unit_test(test_buffers),        cmocka_unit_test(test_tensor_contiguous),
    };
    return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
