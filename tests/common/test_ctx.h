/* Small cpu-backend helpers for API tests: a context, buffers filled with
 * data or with a poison byte, and a check that a buffer still holds only the
 * poison (i.e. a failed call wrote nothing). Header-only. */
#ifndef QATTN_TEST_CTX_H
#define QATTN_TEST_CTX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "qattn/qattn.h"

#define QT_POISON 0xA5

static inline qattn_context *qt_cpu_ctx(void) {
    qattn_context *ctx = NULL;
    char err[256];
    assert_int_equal(qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err), QATTN_OK);
    return ctx;
}

/* A buffer holding `data`, or the poison byte when data is NULL. */
static inline qattn_buffer *qt_buf(qattn_context *ctx, const void *data, size_t bytes) {
    qattn_buffer *b = NULL;
    assert_int_equal(qattn_buffer_alloc(ctx, bytes, &b), QATTN_OK);
    unsigned char *fill = NULL;
    if (!data) {
        fill = malloc(bytes);
        memset(fill, QT_POISON, bytes);
        data = fill;
    }
    assert_int_equal(qattn_buffer_upload(ctx, b, 0, data, bytes), QATTN_OK);
    free(fill);
    return b;
}

/* 1 when every byte of b still equals `byte`. */
static inline int qt_buf_all(qattn_context *ctx, const qattn_buffer *b, unsigned char byte) {
    uint64_t n = qattn_buffer_size(b);
    unsigned char *p = malloc(n);
    assert_int_equal(qattn_buffer_download(ctx, b, 0, p, n), QATTN_OK);
    int ok = 1;
    for (uint64_t i = 0; i < n; ++i) ok &= p[i] == byte;
    free(p);
    return ok;
}

#endif
