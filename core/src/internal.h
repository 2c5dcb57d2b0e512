/* Internals of qattn_core shared between its source files. Not installed. */
#ifndef QATTN_INTERNAL_H
#define QATTN_INTERNAL_H

#include <stdarg.h>
#include "qattn/backend.h"
#include "qattn/convert.h"

#define QATTN_ERROR_BYTES 1024

/* The core's record of a buffer (opaque outside the core: backends see
 * their handle through qattn_buffer_handle). */
struct qattn_buffer {
    qattn_context *owner;
    void *handle;
    uint64_t bytes;
    int wrapped; /* non-zero: memory is the caller's; free releases the wrapper */
};

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
/* Appends a sentence to a plan's reason text of n bytes ("; "-separated,
 * truncating, never overflowing). */
void qattn__append_reason(char *reason, size_t n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* ASCII case-insensitive equality of two names (variant names in the
 * environment); qattn_name_contains (qattn/backend.h) is the substring form. */
int qattn__name_is(const char *a, const char *b);
/* Sets ctx's last error and returns s. */
qattn_status qattn__fail(qattn_context *ctx, qattn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- options (core/src/options.c) ----
 * Each copies the caller's options (NULL = defaults) into *out, a struct of
 * this build's layout with its size set, by the rule of qattn.h ("option
 * structs"); on failure it names options.size and *out holds the defaults.
 * Code past these reads only *out. */
qattn_status qattn__read_context_options(const qattn_context_options *in, qattn_context_options *out,
                                         char *err, size_t n);
qattn_status qattn__read_decode_options(const qattn_decode_options *in, qattn_decode_options *out,
                                        char *err, size_t n);
qattn_status qattn__read_mqa_logits_options(const qattn_mqa_logits_options *in,
                                            qattn_mqa_logits_options *out, char *err, size_t n);
qattn_status qattn__read_paged_mqa_logits_options(const qattn_paged_mqa_logits_options *in,
                                                  qattn_paged_mqa_logits_options *out, char *err,
                                                  size_t n);

/* ---- descriptor validation (core/src/validate_*.c) ----
 * Each returns QATTN_OK or a status with a message naming the argument and
 * the rule. `dtype_mask` is a bit set of (1u << qattn_dtype). */
#define QATTN_DT(t) (1u << (t))
qattn_status qattn__check_tensor(const qattn_tensor *t, const char *name, uint32_t dtype_mask,
                                 int32_t rank, char *err, size_t n);
/* The rule of every tensor an op writes (docs/ops.md, "Memory"): distinct
 * logical elements at distinct addresses. Its dimensions of extent > 1,
 * taken by increasing stride, must each step past every element the
 * smaller ones reach (a stride of 0 never does); a layout that interleaves
 * dimensions is refused too, though not every such layout overlaps.
 * QATTN_ERR_STRIDE naming the tensor and dimension. An absent tensor
 * passes; t must have passed the rank and extent checks. */
qattn_status qattn__check_output_layout(const qattn_tensor *t, const char *name, char *err, size_t n);
/* As qattn__check_tensor (last_may_broadcast: the last dimension may also
 * have stride 0, a broadcast read-only input), for a K/V cache or
 * its scales: any span and any stride (kernels form page and head bases in
 * 64 bits); the offsets inside a page are bounded by validate_decode.c. */
qattn_status qattn__check_cache_tensor(const qattn_tensor *t, const char *name, uint32_t dtype_mask,
                                       int32_t rank, int last_may_broadcast, char *err, size_t n);
/* Byte extent [first, last] a tensor touches; returns QATTN_ERR_OVERFLOW on
 * int64 overflow. */
qattn_status qattn__tensor_extent(const qattn_tensor *t, uint64_t *first, uint64_t *end_excl);
/* The bounds every size a planner or kernel computes with relies on, for a
 * descriptor that may have no buffer (the pure planners): rank in
 * rank_lo..rank_hi, every shape and stride in 0..INT32_MAX, the byte extent
 * within uint64. Names the argument on failure. */
qattn_status qattn__check_dims(const qattn_tensor *t, const char *name, int32_t rank_lo,
                               int32_t rank_hi, char *err, size_t n);
/* The same for a K/V cache or its scales: strides up to int64. */
qattn_status qattn__check_cache_dims(const qattn_tensor *t, const char *name, int32_t rank_lo,
                                     int32_t rank_hi, char *err, size_t n);
/* An e4m3 fp8 (fn or fnuz): the formats of the MQA ops. e5m2 is a cache
 * format of decode and the KV store only. */
int qattn__is_fp8(qattn_dtype t);

/* How kernels address a K/V cache or its scales is qattn_cache_view
 * (qattn/backend.h, made by tensor.c), public so backends share the one
 * description. Whether a cache (is_scale 0) or scale tensor is in the paged rank-4
 * (scales: rank-3) form. */
static inline int qattn__cache_is_paged(const qattn_tensor *t, int is_scale) {
    return t->rank == (is_scale ? 3 : 4);
}
/* Slots of a cache or scale tensor in either form; its kv heads and head
 * dim (the last two dimensions of a cache; scales: heads last). */
static inline int64_t qattn__cache_slots(const qattn_tensor *t, int is_scale) {
    /* unsigned: validation bounds the product, planners may see it first */
    return qattn__cache_is_paged(t, is_scale) ? (int64_t)((uint64_t)t->shape[0] * (uint64_t)t->shape[1])
                                              : t->shape[0];
}
static inline int64_t qattn__cache_heads(const qattn_tensor *t) { return t->shape[t->rank - 2]; }
static inline int64_t qattn__cache_head_dim(const qattn_tensor *t) { return t->shape[t->rank - 1]; }
/* Element offset of (slot, head g) in a view: the start of that head's row
 * (add d for a cache's element d). slot must be inside the cache. */
static inline int64_t qattn__cache_offset(const qattn_cache_view *v, int64_t slot, int64_t g) {
    return slot / v->page_rows * v->page_stride + slot % v->page_rows * v->row_stride +
           g * v->head_stride;
}

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
qattn_status qattn__validate_paged_mqa_logits(const qattn_paged_mqa_logits_args *a, char *err,
                                              size_t n);
/* The shape bounds of paged MQA logits the pure planner computes with. */
qattn_status qattn__check_paged_mqa_logits_shapes(const qattn_paged_mqa_logits_args *a, char *err,
                                                  size_t n);
/* Slots of the paged MQA cache (is_scale 0: rank 2 [N_slots, D] or rank 3
 * [N_pages, P, D]) or of its scales (rank 1 or rank 2). */
static inline int64_t qattn__paged_mqa_slots(const qattn_tensor *t, int is_scale) {
    return t->rank == (is_scale ? 2 : 3) ? (int64_t)((uint64_t)t->shape[0] * (uint64_t)t->shape[1])
                                         : t->shape[0];
}
/* Page and row strides in elements of that cache or its scales, for pages
 * of page_size rows: key row r of page g is at g * page + r * row. A
 * dimension of extent 1 contributes 0. */
static inline void qattn__paged_mqa_strides(const qattn_tensor *t, int is_scale, int64_t page_size,
                                            int64_t *page, int64_t *row) {
    if (t->rank == (is_scale ? 2 : 3)) {
        *page = t->shape[0] <= 1 ? 0 : t->strides[0];
        *row = t->shape[1] <= 1 ? 0 : t->strides[1];
    } else {
        *row = t->shape[0] <= 1 ? 0 : t->strides[0];
        *page = (int64_t)((uint64_t)*row * (uint64_t)page_size);
    }
}

/* ---- plan integrity (core/src/plan_seal.c) ----
 * A plan's last member `integrity` is a digest of all its bytes before it.
 * Planners hand every plan they return through the seal functions, so the
 * digest is computed over the final bytes; every consumer of a plan checks
 * it first and refuses a plan whose digest differs (edited after planning,
 * or made by another build of the library). */
/* Writes p to *out with what the run must match recorded (max_kv_len of
 * a; the layout of a's tensors) and the digest set. */
void qattn__seal_decode_plan(qattn_decode_plan *out, const qattn_decode_plan *p,
                             const qattn_decode_args *a);
void qattn__seal_mqa_logits_plan(qattn_mqa_logits_plan *out, const qattn_mqa_logits_plan *p,
                                 const qattn_mqa_logits_args *a);
/* QATTN_OK when the plan's digest matches its bytes; otherwise ctx's last
 * error says the plan changed after planning. */
qattn_status qattn__check_decode_sealed(qattn_context *ctx, const qattn_decode_plan *p);
qattn_status qattn__check_mqa_sealed(qattn_context *ctx, const qattn_mqa_logits_plan *p);
/* Digest of the layout a plan depends on: dtypes, shapes, strides and
 * 16-byte offset alignment of the args' tensors (decode: not the page
 * table, whose length changes every step). */
uint64_t qattn__decode_args_layout(const qattn_decode_args *a);
uint64_t qattn__mqa_args_layout(const qattn_mqa_logits_args *a);

/* ---- run-time plan checks (core/src/ops.c) ----
 * What every consumer of a sealed plan checks against the context: the
 * plan's shared memory fits this device, the backend has the entry point
 * (has_slot) and supports_op accepts the plan. Names op_name and variant in
 * the failure. */
/* qattn_decode_read (qattn/experimental.h), run through the op table. */
qattn_status qattn__decode_read(qattn_context *ctx, const qattn_decode_args *args, qattn_buffer *sum,
                                uint64_t sum_offset);
qattn_status qattn__check_plan_device(qattn_context *ctx, qattn_op op, const char *op_name,
                                      const void *plan, const char *variant, uint32_t shared_bytes,
                                      int has_slot);

/* ---- outputs over inputs (core/src/alias.c) ----
 * A run's tensors with their roles: QATTN__OUT is compared with every other
 * tensor, QATTN__OUT_SHARED with inputs only (the KV store's caches and
 * scales, which may interleave in one allocation). Refuses, naming both, an
 * output whose bytes meet another tensor's, and a workspace (may be NULL)
 * meeting any tensor. Absent tensors are skipped. */
#define QATTN_MAX_OPERANDS 16
typedef enum qattn__role { QATTN__IN, QATTN__OUT, QATTN__OUT_SHARED } qattn__role;
typedef struct qattn__operand {
    const qattn_tensor *t;
    const char *name;
    qattn__role kind;
} qattn__operand;
qattn_status qattn__check_alias(qattn_context *ctx, const qattn__operand *ops, int n,
                                const qattn_workspace *ws);
uint64_t qattn__paged_mqa_args_layout(const qattn_paged_mqa_logits_args *a);
qattn_status qattn__check_paged_mqa_sealed(qattn_context *ctx, const qattn_paged_mqa_logits_plan *p);
void qattn__seal_paged_mqa_logits_plan(qattn_paged_mqa_logits_plan *out,
                                       const qattn_paged_mqa_logits_plan *p,
                                       const qattn_paged_mqa_logits_args *a);

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
/* qattn_decode_read: adds the word sum of what decode reads to *sum. */
qattn_status qattn__ref_decode_read(const qattn_decode_args *a, uint32_t *sum);
qattn_status qattn__ref_mqa_logits(const qattn_mqa_logits_args *a);
qattn_status qattn__ref_paged_mqa_logits(const qattn_paged_mqa_logits_args *a);

/* Records a backend failure (with the backend's own message) on ctx. */
qattn_status qattn__backend_fail(qattn_context *ctx, qattn_status s, const char *what);

/* Reads an environment variable; NULL when unset or empty. */
const char *qattn__getenv(const char *name);

#endif /* QATTN_INTERNAL_H */
