/* Internals of qattn_core shared between its source files. Not installed. */
#ifndef QATTN_INTERNAL_H
#define QATTN_INTERNAL_H

#include <stdarg.h>
#include "qattn/backend.h"
#include "qattn/convert.h"

#define QATTN_ERROR_BYTES 1024

struct qattn_context {
    const qattn_backend_iface *iface;
    void *be;
    qattn_device_caps caps;
    int ops_run;                    /* for last_op_time_ms */
    char last_error[QATTN_ERROR_BYTES];
};

/* Formats a message into err (may be NULL) and returns s. Pure functions
 * (validators, planners) report through this. */
qattn_status qattn__err(char *err, size_t err_size, qattn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Sets ctx's last error and returns s. */
qattn_status qattn__fail(qattn_context *ctx, qattn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- descriptor validation (core/src/validate_*.c) ----
 * Each returns QATTN_OK or a status with a message naming the argument and
 * the rule. `dtype_mask` is a bit set of (1u << qattn_dtype). */
#define QATTN_DT(t) (1u << (t))
qattn_status qattn__check_tensor(const qattn_tensor *t, const char *name, uint32_t dtype_mask,
                                 int32_t rank, char *err, size_t n);
/* Byte extent [first, last] a tensor touches; returns QATTN_ERR_OVERFLOW on
 * int64 overflow. */
qattn_status qattn__tensor_extent(const qattn_tensor *t, uint64_t *first, uint64_t *end_excl);
int qattn__tensor_is_contiguous(const qattn_tensor *t);
/* The bounds every size a planner or kernel computes with relies on, for a
 * descriptor that may have no buffer (the pure planners): rank in
 * rank_lo..rank_hi, every shape and stride in 0..INT32_MAX, the byte extent
 * within uint64. Names the argument on failure. */
qattn_status qattn__check_dims(const qattn_tensor *t, const char *name, int32_t rank_lo,
                               int32_t rank_hi, char *err, size_t n);
int qattn__is_fp8(qattn_dtype t);

/* How kernels address a K/V cache or its scales (spec 2): key row `row` of
 * page `page` is slot page * page_rows + row; its element (head g, dim d)
 * sits at page * page_stride + row * row_stride + g * head_stride + d
 * elements from element 0 (scales: no d). A rank-3 cache [N_slots, Hkv, D]
 * (scales [N_slots, Hkv]) is read as pages of `page_size` consecutive
 * slots; a rank-4 cache [N_pages, P, Hkv, D] (scales [N_pages, P, Hkv])
 * brings its own page and row strides. A slot is inside the cache iff
 * 0 <= slot < n_slots. Kernels take these five numbers, never the rank. */
typedef struct qattn__cache_view {
    int64_t n_slots;
    int64_t page_rows;
    int64_t page_stride, row_stride, head_stride;
} qattn__cache_view;
/* The view of `t` (a cache when is_scale is 0, else its scales) for pages
 * of page_size rows. Assumes t passed validation. */
qattn__cache_view qattn__cache_view_of(const qattn_tensor *t, int is_scale, int64_t page_size);

qattn_status qattn__validate_decode(const qattn_decode_args *a, char *err, size_t n);
/* What planners assume of device capabilities (they come from a backend or,
 * in the pure planners, from the caller): subgroup sizes powers of two in
 * 1..128 with min <= max, a workgroup of at least one widest subgroup and at
 * most 65536 threads, shared memory <= 1 GiB, 0..2^20 compute units (0 =
 * unknown), 0..QATTN_MAX_MATRIX_SHAPES matrix shapes. */
qattn_status qattn__check_caps(const qattn_device_caps *c, char *err, size_t n);
/* The shape bounds of decode that the planner computes with (every
 * dimension and stride within int32, B x R x Hq x D within int32, the
 * scalars in range), without looking at buffers: run by validation and by
 * the pure planner qattn_decode_plan_compute, which fuzzers call directly. */
qattn_status qattn__check_decode_shapes(const qattn_decode_args *a, char *err, size_t n);
/* The same for MQA logits (qattn_mqa_logits_plan_compute). */
qattn_status qattn__check_mqa_logits_shapes(const qattn_mqa_logits_args *a, char *err, size_t n);
qattn_status qattn__validate_kv_store(const qattn_kv_store_args *a, char *err, size_t n);
qattn_status qattn__validate_mqa_logits(const qattn_mqa_logits_args *a, char *err, size_t n);

/* ---- plan integrity (core/src/ops.c) ----
 * A plan's last member `integrity` is a digest of all its bytes before it.
 * Planners hand every plan they return through these, so the digest is
 * computed over the final bytes; run refuses a plan whose digest differs
 * (edited after planning, or made by another build of the library). */
/* Writes p to *out with what the run must match recorded (max_kv_len of
 * a; the layout of a's tensors) and the digest set. */
void qattn__seal_decode_plan(qattn_decode_plan *out, const qattn_decode_plan *p,
                             const qattn_decode_args *a);
void qattn__seal_mqa_logits_plan(qattn_mqa_logits_plan *out, const qattn_mqa_logits_plan *p,
                                 const qattn_mqa_logits_args *a);

/* Host address of element 0 of a tensor on the cpu backend. */
static inline void *qattn__host_ptr(const qattn_tensor *t) {
    return (char *)t->buffer->handle + t->offset;
}

/* ---- CPU reference implementations (core/src/ref_*.c) ----
 * Host-memory versions of each op, exactly the spec. Tensors' buffers are
 * cpu-backend buffers (handle = host pointer). Arguments are already
 * validated. */
qattn_status qattn__ref_decode(const qattn_decode_args *a);
qattn_status qattn__ref_kv_store(const qattn_kv_store_args *a);
qattn_status qattn__ref_mqa_logits(const qattn_mqa_logits_args *a);

/* Records a backend failure (with the backend's own message) on ctx. */
qattn_status qattn__backend_fail(qattn_context *ctx, qattn_status s, const char *what);

/* Reads an environment variable; NULL when unset or empty. */
const char *qattn__getenv(const char *name);

#endif /* QATTN_INTERNAL_H */
