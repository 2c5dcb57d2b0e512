/*
 * Host images of tensors for op tests: a byte image of a whole device buffer
 * plus the descriptor of one tensor inside it, with a chosen memory layout
 * (dimension order, padding between blocks, leading offset).
 *
 * Layout freedom is the point: the same logical tensor can be laid out
 * token-major or head-major, with padded rows, at an offset, so tests see
 * whether an implementation honours every stride. Bytes of the image that
 * belong to no element ("gaps") are filled with a chosen byte (0xFF makes
 * them NaN as bf16/f32/fp8-fn, -1 as i32), so a read of a gap shows up as
 * NaN or an index error, and a write into a gap is caught by
 * qt_ht_gaps_equal().
 *
 * Header-only; needs cmocka for the asserts (include cmocka.h first).
 */
#ifndef QATTN_TEST_HOST_TENSOR_H
#define QATTN_TEST_HOST_TENSOR_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/convert.h"
#include "qattn/qattn.h"

typedef struct qt_ht {
    qattn_dtype dtype;
    int32_t rank;
    int64_t shape[QATTN_MAX_RANK];
    int64_t strides[QATTN_MAX_RANK]; /* elements */
    uint64_t offset;                 /* bytes from the buffer start to element 0 */
    size_t bytes;                    /* size of the buffer image */
    uint8_t *data;                   /* host image of the whole buffer */
    qattn_buffer *buf;               /* device copy, after qt_ht_upload */
} qt_ht;

/* A layout: memory order of the dimensions from outermost to innermost
 * (must end with rank - 1: the last dimension stays contiguous), elements
 * of padding after each block of every non-innermost stride, and elements
 * before element 0. */
typedef struct qt_layout {
    int32_t order[QATTN_MAX_RANK];
    int64_t pad;
    int64_t lead;
} qt_layout;

static inline qt_layout qt_layout_dense(void) {
    qt_layout l = {{0, 1, 2, 3}, 0, 0};
    return l;
}

/* Makes a tensor image of `shape` with layout `l` (NULL = dense), every byte
 * set to `fill`. */
static inline qt_ht qt_ht_make(qattn_dtype dt, int32_t rank, const int64_t *shape,
                               const qt_layout *l, uint8_t fill) {
    qt_ht t;
    memset(&t, 0, sizeof t);
    qt_layout dense = qt_layout_dense();
    if (!l) l = &dense;
    t.dtype = dt;
    t.rank = rank;
    for (int32_t k = 0; k < rank; ++k) t.shape[k] = shape[k];
    int64_t s = 1;
    for (int32_t k = rank - 1; k >= 0; --k) {
        int32_t d = l->order[k];
        t.strides[d] = s;
        s = s * (shape[d] > 0 ? shape[d] : 1) + l->pad;
    }
    size_t es = qattn_dtype_size(dt);
    t.offset = (uint64_t)l->lead * es;
    t.bytes = (size_t)(l->lead + s + 1) * es;
    t.data = (uint8_t *)malloc(t.bytes);
    assert_non_null(t.data);
    memset(t.data, fill, t.bytes);
    return t;
}

static inline void *qt_ht_at(const qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t idx[QATTN_MAX_RANK] = {i0, i1, i2, i3};
    int64_t e = 0;
    for (int32_t k = 0; k < t->rank; ++k) e += idx[k] * t->strides[k];
    return t->data + t->offset + (size_t)e * qattn_dtype_size(t->dtype);
}

/* Number of elements, and the multi-index of linear element n (row-major
 * over the logical shape). */
static inline int64_t qt_ht_count(const qt_ht *t) {
    int64_t n = 1;
    for (int32_t k = 0; k < t->rank; ++k) n *= t->shape[k];
    return n;
}
static inline void qt_ht_index(const qt_ht *t, int64_t n, int64_t idx[QATTN_MAX_RANK]) {
    for (int32_t k = 0; k < QATTN_MAX_RANK; ++k) idx[k] = 0;
    for (int32_t k = t->rank - 1; k >= 0; --k) {
        idx[k] = n % t->shape[k];
        n /= t->shape[k];
    }
}
static inline void *qt_ht_at_linear(const qt_ht *t, int64_t n) {
    int64_t i[QATTN_MAX_RANK];
    qt_ht_index(t, n, i);
    return qt_ht_at(t, i[0], i[1], i[2], i[3]);
}

/* Typed element access. */
static inline float qt_ht_f32(const qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float v;
    memcpy(&v, qt_ht_at(t, i0, i1, i2, i3), 4);
    return v;
}
static inline void qt_ht_set_f32(qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    memcpy(qt_ht_at(t, i0, i1, i2, i3), &v, 4);
}
static inline int32_t qt_ht_i32(const qt_ht *t, int64_t i0) {
    int32_t v;
    memcpy(&v, qt_ht_at(t, i0, 0, 0, 0), 4);
    return v;
}
static inline void qt_ht_set_i32(qt_ht *t, int64_t i0, int32_t v) { memcpy(qt_ht_at(t, i0, 0, 0, 0), &v, 4); }
static inline uint16_t qt_ht_u16(const qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    uint16_t v;
    memcpy(&v, qt_ht_at(t, i0, i1, i2, i3), 2);
    return v;
}
static inline void qt_ht_set_u16(qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, uint16_t v) {
    memcpy(qt_ht_at(t, i0, i1, i2, i3), &v, 2);
}
static inline uint8_t qt_ht_u8(const qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return *(const uint8_t *)qt_ht_at(t, i0, i1, i2, i3);
}
static inline void qt_ht_set_u8(qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, uint8_t v) {
    *(uint8_t *)qt_ht_at(t, i0, i1, i2, i3) = v;
}

/* The element's value (no scale): bf16/f16/f32/fp8 decoded, i8 as integer. */
static inline double qt_ht_value(const qt_ht *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const void *p = qt_ht_at(t, i0, i1, i2, i3);
    switch (t->dtype) {
    case QATTN_BF16: {
        uint16_t b;
        memcpy(&b, p, 2);
        return qattn_bf16_to_f32(b);
    }
    case QATTN_F16: {
        uint16_t b;
        memcpy(&b, p, 2);
        return qattn_f16_to_f32(b);
    }
    case QATTN_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case QATTN_I8: return (double)*(const int8_t *)p;
    case QATTN_FP8_E4M3FN:
    case QATTN_FP8_E4M3FNUZ:
    case QATTN_FP8_E5M2: return qattn_fp8_to_f32(*(const uint8_t *)p, t->dtype);
    default: return NAN;
    }
}

/* The descriptor of t inside its device buffer (after qt_ht_upload). */
static inline qattn_tensor qt_ht_desc(const qt_ht *t) {
    qattn_tensor d;
    memset(&d, 0, sizeof d);
    d.buffer = t->buf;
    d.offset = t->offset;
    d.dtype = t->dtype;
    d.rank = t->rank;
    for (int32_t k = 0; k < t->rank; ++k) {
        d.shape[k] = t->shape[k];
        d.strides[k] = t->strides[k];
    }
    return d;
}

/* Allocates the device buffer (once) and copies the whole image into it. */
static inline void qt_ht_upload(qattn_context *ctx, qt_ht *t) {
    if (!t->buf) assert_int_equal(qattn_buffer_alloc(ctx, t->bytes, &t->buf), QATTN_OK);
    assert_int_equal(qattn_buffer_upload(ctx, t->buf, 0, t->data, t->bytes), QATTN_OK);
}

/* Copies the whole device buffer back into the image. */
static inline void qt_ht_download(qattn_context *ctx, qt_ht *t) {
    assert_int_equal(qattn_buffer_download(ctx, t->buf, 0, t->data, t->bytes), QATTN_OK);
}

static inline void qt_ht_free(qattn_context *ctx, qt_ht *t) {
    qattn_buffer_free(ctx, t->buf);
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* A fixture lists its tensors once (absent optional ones have data NULL);
 * these walk that list, so uploading and freeing cover the same set. */
#define QT_HT_MAX_LIST 16
static inline void qt_ht_upload_present(qattn_context *ctx, qt_ht *const *ts, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (ts[i]->data) qt_ht_upload(ctx, ts[i]);
}
static inline void qt_ht_free_present(qattn_context *ctx, qt_ht *const *ts, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (ts[i]->data) qt_ht_free(ctx, ts[i]);
}

/* A byte mask of the image: 1 where a byte belongs to an element. */
static inline uint8_t *qt_ht_element_mask(const qt_ht *t) {
    uint8_t *m = (uint8_t *)calloc(t->bytes, 1);
    assert_non_null(m);
    size_t es = qattn_dtype_size(t->dtype);
    for (int64_t n = 0; n < qt_ht_count(t); ++n) {
        size_t at = (size_t)((uint8_t *)qt_ht_at_linear(t, n) - t->data);
        memset(m + at, 1, es);
    }
    return m;
}

/* 1 when every gap byte (not part of an element) of t equals `byte`: the
 * op wrote nothing outside the tensor's elements. */
static inline int qt_ht_gaps_equal(const qt_ht *t, uint8_t byte) {
    uint8_t *m = qt_ht_element_mask(t);
    int ok = 1;
    for (size_t i = 0; i < t->bytes; ++i)
        if (!m[i] && t->data[i] != byte) ok = 0;
    free(m);
    return ok;
}

/* 1 when every byte of the image equals `byte` (nothing was written). */
static inline int qt_ht_all_bytes(const qt_ht *t, uint8_t byte) {
    for (size_t i = 0; i < t->bytes; ++i)
        if (t->data[i] != byte) return 0;
    return 1;
}

/* Sets every element byte to `byte` (gaps untouched). */
static inline void qt_ht_poison(qt_ht *t, uint8_t byte) {
    size_t es = qattn_dtype_size(t->dtype);
    for (int64_t n = 0; n < qt_ht_count(t); ++n) memset(qt_ht_at_linear(t, n), byte, es);
}

#endif /* QATTN_TEST_HOST_TENSOR_H */
