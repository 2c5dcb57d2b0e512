/* dtypes and tensor descriptors: sizes, names, and the per-descriptor rules
 * every operation applies before anything is launched. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

size_t qattn_dtype_size(qattn_dtype t) {
    switch (t) {
    case QATTN_BF16:
    case QATTN_F16:
        return 2;
    case QATTN_F32:
    case QATTN_I32:
        return 4;
    case QATTN_I8:
    case QATTN_FP8_E4M3FN:
    case QATTN_FP8_E4M3FNUZ:
    case QATTN_FP8_E5M2:
        return 1;
    default:
        return 0;
    }
}

const char *qattn_dtype_name(qattn_dtype t) {
    switch (t) {
    case QATTN_BF16: return "bf16";
    case QATTN_F16: return "f16";
    case QATTN_F32: return "f32";
    case QATTN_I32: return "i32";
    case QATTN_I8: return "i8";
    case QATTN_FP8_E4M3FN: return "fp8_e4m3fn";
    case QATTN_FP8_E4M3FNUZ: return "fp8_e4m3fnuz";
    case QATTN_FP8_E5M2: return "fp8_e5m2";
    default: return "invalid";
    }
}

int qattn__is_fp8(qattn_dtype t) { return t == QATTN_FP8_E4M3FN || t == QATTN_FP8_E4M3FNUZ; }

qattn_tensor qattn_tensor_contiguous(qattn_buffer *buffer, uint64_t offset, qattn_dtype dtype,
                                     int32_t rank, const int64_t *shape) {
    qattn_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = buffer;
    t.offset = offset;
    t.dtype = dtype;
    if (rank < 1 || rank > QATTN_MAX_RANK || !shape) {
        t.rank = rank; /* left invalid on purpose: validation names it */
        return t;
    }
    t.rank = rank;
    /* Saturates instead of overflowing: a shape too large for int64 strides
     * gets INT64_MAX strides, which validation then names (over int32). */
    int64_t stride = 1;
    for (int32_t i = rank - 1; i >= 0; --i) {
        t.shape[i] = shape[i];
        t.strides[i] = stride;
        const int64_t dim = shape[i] > 0 ? shape[i] : 1;
        stride = stride > INT64_MAX / dim ? INT64_MAX : stride * dim;
    }
    return t;
}

int qattn_tensor_present(const qattn_tensor *t) { return t && t->buffer != NULL; }

/* a * b + c on non-negative int64, reporting overflow instead of wrapping. */
static int mul_add_ok(int64_t a, int64_t b, int64_t c, int64_t *out) {
    if (a != 0 && b > (INT64_MAX - c) / a) return 0;
    *out = a * b + c;
    return 1;
}

/* Largest element index (from element 0) the tensor reaches, or -1 when it
 * has no elements. Returns 0 on int64 overflow. */
static int max_element_index(const qattn_tensor *t, int64_t *out) {
    int64_t idx = 0;
    for (int32_t i = 0; i < t->rank; ++i) {
        if (t->shape[i] == 0) {
            *out = -1;
            return 1;
        }
    }
    for (int32_t i = 0; i < t->rank; ++i) {
        if (!mul_add_ok(t->shape[i] - 1, t->strides[i], idx, &idx)) return 0;
    }
    *out = idx;
    return 1;
}

qattn_status qattn__tensor_extent(const qattn_tensor *t, uint64_t *first, uint64_t *end_excl) {
    int64_t idx;
    if (!max_element_index(t, &idx)) return QATTN_ERR_OVERFLOW;
    *first = t->offset;
    if (idx < 0) {
        *end_excl = t->offset;
        return QATTN_OK;
    }
    int64_t bytes;
    if (idx == INT64_MAX || !mul_add_ok(idx + 1, (int64_t)qattn_dtype_size(t->dtype), 0, &bytes))
        return QATTN_ERR_OVERFLOW;
    if (t->offset > UINT64_MAX - (uint64_t)bytes) return QATTN_ERR_OVERFLOW;
    *end_excl = t->offset + (uint64_t)bytes;
    return QATTN_OK;
}

static void dtype_list(uint32_t mask, char *buf, size_t n) {
    buf[0] = '\0';
    size_t used = 0;
    for (int d = 1; d < QATTN_DTYPE_COUNT; ++d) {
        if (!(mask & QATTN_DT(d))) continue;
        int w = snprintf(buf + used, n - used, "%s%s", used ? "|" : "", qattn_dtype_name((qattn_dtype)d));
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
}

/* wide: a K/V cache or its scales, which may span any number of elements
 * with strides of any size (kernels form their page and head bases in 64
 * bits; validate_decode.c bounds the offsets inside a page); every other
 * tensor spans at most 2^31 elements with strides in int32. */
static qattn_status check_tensor(const qattn_tensor *t, const char *name, uint32_t dtype_mask,
                                 int32_t rank, int last_may_broadcast, int wide, char *err, size_t n) {
    if (!t->buffer)
        return qattn__err(err, n, QATTN_ERR_NULL_BUFFER, "%s: buffer is NULL", name);
    if (t->dtype <= QATTN_DTYPE_INVALID || t->dtype >= QATTN_DTYPE_COUNT ||
        !(dtype_mask & QATTN_DT(t->dtype))) {
        char allowed[128];
        dtype_list(dtype_mask, allowed, sizeof allowed);
        return qattn__err(err, n, QATTN_ERR_DTYPE, "%s: dtype %s not allowed (expected %s)", name,
                          qattn_dtype_name(t->dtype), allowed);
    }
    if (t->rank != rank)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: rank %d, expected %d", name, (int)t->rank,
                          (int)rank);
    for (int32_t i = 0; i < rank; ++i) {
        if (t->shape[i] < 0)
            return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: shape[%d] = %" PRId64 " is negative",
                              name, (int)i, t->shape[i]);
        if (t->shape[i] > INT32_MAX)
            return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                              "%s: shape[%d] = %" PRId64 " exceeds int32 (kernels index with int32)",
                              name, (int)i, t->shape[i]);
        if (t->strides[i] < 0)
            return qattn__err(err, n, QATTN_ERR_STRIDE, "%s: stride[%d] = %" PRId64 " is negative",
                              name, (int)i, t->strides[i]);
        /* Also on a dimension of size 1, where it addresses nothing:
         * planners and kernels multiply every stride by tile sizes and
         * indices in int32/int64 and must not overflow doing so. */
        if (t->strides[i] > INT32_MAX && !wide)
            return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                              "%s: stride[%d] = %" PRId64 " exceeds int32 (kernels index with int32)",
                              name, (int)i, t->strides[i]);
    }
    if (t->strides[rank - 1] != 1 && !(last_may_broadcast && t->strides[rank - 1] == 0))
        return qattn__err(err, n, QATTN_ERR_STRIDE,
                          "%s: last dimension must be contiguous (stride 1%s, got %" PRId64 ")", name,
                          last_may_broadcast ? ", or 0 to broadcast" : "", t->strides[rank - 1]);
    size_t es = qattn_dtype_size(t->dtype);
    if (t->offset % es != 0)
        return qattn__err(err, n, QATTN_ERR_ALIGNMENT,
                          "%s: byte offset %" PRIu64 " is not a multiple of the %zu-byte element",
                          name, t->offset, es);
    int64_t idx;
    if (!max_element_index(t, &idx))
        return qattn__err(err, n, QATTN_ERR_OVERFLOW, "%s: extent overflows int64", name);
    if (idx > INT32_MAX && !wide)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "%s: spans %" PRId64 " elements, over int32 (kernels index with int32)",
                          name, idx + 1);
    uint64_t first, end;
    if (qattn__tensor_extent(t, &first, &end) != QATTN_OK)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW, "%s: byte extent overflows", name);
    if (end > t->buffer->bytes)
        return qattn__err(err, n, QATTN_ERR_OUT_OF_BOUNDS,
                          "%s: reaches byte %" PRIu64 " of a %" PRIu64 "-byte buffer", name, end,
                          t->buffer->bytes);
    return QATTN_OK;
}

static qattn_status check_dims(const qattn_tensor *t, const char *name, int32_t rank_lo,
                               int32_t rank_hi, int wide, char *err, size_t n) {
    if (t->rank < rank_lo || t->rank > rank_hi)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: rank %d outside %d..%d", name, (int)t->rank,
                          (int)rank_lo, (int)rank_hi);
    for (int32_t i = 0; i < t->rank; ++i) {
        if (t->shape[i] < 0 || t->shape[i] > INT32_MAX)
            return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                              "%s: shape[%d] = %" PRId64 " outside 0..int32 (kernels index with int32)",
                              name, (int)i, t->shape[i]);
        if (t->strides[i] < 0 || (t->strides[i] > INT32_MAX && !wide))
            return qattn__err(err, n, QATTN_ERR_STRIDE,
                              "%s: stride[%d] = %" PRId64 " outside 0..int32 (kernels index with int32)",
                              name, (int)i, t->strides[i]);
    }
    uint64_t first, end;
    if (qattn__tensor_extent(t, &first, &end) != QATTN_OK)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW, "%s: byte extent overflows", name);
    return QATTN_OK;
}

qattn_status qattn__check_dims(const qattn_tensor *t, const char *name, int32_t rank_lo,
                               int32_t rank_hi, char *err, size_t n) {
    return check_dims(t, name, rank_lo, rank_hi, 0, err, n);
}

qattn_status qattn__check_cache_dims(const qattn_tensor *t, const char *name, int32_t rank_lo,
                                     int32_t rank_hi, char *err, size_t n) {
    return check_dims(t, name, rank_lo, rank_hi, 1, err, n);
}

static int pow2(uint32_t x) { return x && !(x & (x - 1)); }

qattn_status qattn__check_caps(const qattn_device_caps *c, char *err, size_t n) {
    if (!c) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "caps: NULL");
    if (!pow2(c->subgroup_size_min) || !pow2(c->subgroup_size_max) || c->subgroup_size_max > 128 ||
        c->subgroup_size_min > c->subgroup_size_max)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                          "caps.subgroup_size_min/max: %u..%u, want powers of two with min <= max <= 128",
                          (unsigned)c->subgroup_size_min, (unsigned)c->subgroup_size_max);
    if (c->max_workgroup_size < c->subgroup_size_max || c->max_workgroup_size > 65536)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                          "caps.max_workgroup_size: %u, want subgroup_size_max (%u) .. 65536",
                          (unsigned)c->max_workgroup_size, (unsigned)c->subgroup_size_max);
    if (c->max_shared_bytes > (1u << 30))
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "caps.max_shared_bytes: %u > 1 GiB",
                          (unsigned)c->max_shared_bytes);
    if (c->compute_units < 0 || c->compute_units > (1 << 20))
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "caps.compute_units: %d outside 0..2^20",
                          (int)c->compute_units);
    if (c->n_matrix_shapes < 0 || c->n_matrix_shapes > QATTN_MAX_MATRIX_SHAPES)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "caps.n_matrix_shapes: %d outside 0..%d",
                          (int)c->n_matrix_shapes, QATTN_MAX_MATRIX_SHAPES);
    return QATTN_OK;
}

qattn_status qattn__check_tensor(const qattn_tensor *t, const char *name, uint32_t dtype_mask,
                                 int32_t rank, char *err, size_t n) {
    return check_tensor(t, name, dtype_mask, rank, 0, 0, err, n);
}

qattn_status qattn__check_cache_tensor(const qattn_tensor *t, const char *name, uint32_t dtype_mask,
                                       int32_t rank, int last_may_broadcast, char *err, size_t n) {
    return check_tensor(t, name, dtype_mask, rank, last_may_broadcast, 1, err, n);
}

qattn_status qattn__check_output_layout(const qattn_tensor *t, const char *name, char *err, size_t n) {
    if (!qattn_tensor_present(t) || t->rank < 1 || t->rank > QATTN_MAX_RANK) return QATTN_OK;
    int dims[QATTN_MAX_RANK], m = 0;
    for (int32_t i = 0; i < t->rank; ++i) {
        if (t->shape[i] == 0) return QATTN_OK; /* no elements */
        if (t->shape[i] > 1) dims[m++] = (int)i;
    }
    /* by stride, ascending (insertion sort of at most QATTN_MAX_RANK) */
    for (int i = 1; i < m; ++i)
        for (int j = i; j > 0 && t->strides[dims[j]] < t->strides[dims[j - 1]]; --j) {
            const int x = dims[j];
            dims[j] = dims[j - 1];
            dims[j - 1] = x;
        }
    /* reach: the largest element index the dimensions of smaller stride
     * address (validation bounded the extent, so no overflow) */
    int64_t reach = 0;
    for (int k = 0; k < m; ++k) {
        const int d = dims[k];
        if (t->strides[d] <= reach) {
            if (k == 0)
                return qattn__err(err, n, QATTN_ERR_STRIDE,
                                  "%s: stride[%d] is 0 on a dimension of %" PRId64 ", so distinct elements "
                                  "of this output share an address; every element an op writes needs its own",
                                  name, d, t->shape[d]);
            return qattn__err(err, n, QATTN_ERR_STRIDE,
                              "%s: stride[%d] = %" PRId64 " (shape[%d] = %" PRId64 ") does not step past "
                              "element %" PRId64 ", which its dimensions of smaller stride reach, so distinct "
                              "elements of this output overlap; every element an op writes needs its own address",
                              name, d, t->strides[d], d, t->shape[d], reach);
        }
        reach += (t->shape[d] - 1) * t->strides[d];
    }
    return QATTN_OK;
}

/* Stride of dimension dim, 0 where its extent is at most 1 (free there, and
 * possibly huge: it must not enter a product). */
static int64_t used_stride(const qattn_tensor *t, int dim) {
    return t->shape[dim] <= 1 ? 0 : t->strides[dim];
}

qattn_cache_view qattn_cache_view_of(const qattn_tensor *t, int is_scale, int64_t page_size) {
    qattn_cache_view v;
    memset(&v, 0, sizeof v);
    if (qattn__cache_is_paged(t, is_scale)) {
        v.page_rows = t->shape[1];
        v.n_slots = qattn__cache_slots(t, is_scale);
        v.page_stride = used_stride(t, 0);
        v.row_stride = used_stride(t, 1);
        v.head_stride = used_stride(t, 2);
    } else {
        v.page_rows = page_size;
        v.n_slots = t->shape[0];
        /* < 2^62 for a validated tensor (its used strides fit int32); in
         * unsigned arithmetic so a planner's look at unvalidated arguments
         * cannot overflow */
        v.page_stride = (int64_t)((uint64_t)used_stride(t, 0) * (uint64_t)page_size);
        v.row_stride = used_stride(t, 0);
        v.head_stride = used_stride(t, 1);
    }
    return v;
}
