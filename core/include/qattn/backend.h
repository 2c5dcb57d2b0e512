/*
 * The backend interface: what a backend library implements so qattn_core can
 * drive it. Users only pass the table to qattn_context_create(); backend
 * authors fill it in.
 *
 * A backend is a const table of function pointers plus an opaque instance
 * pointer (`be` below) created by `create`. The core validates every argument
 * against the operation's contract and the plan before calling an op slot,
 * so slots may trust shapes, dtypes, bounds and alignment; they still report
 * device failures through their status.
 */
#ifndef QATTN_BACKEND_H
#define QATTN_BACKEND_H

#include "qattn/qattn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QATTN_BACKEND_ABI 1

/** A buffer is the core's record (opaque, so it can change without breaking
 *  backends); a backend reaches its own part through this: the handle its
 *  buffer_alloc or buffer_wrap returned (a host pointer on cpu, the
 *  backend's own struct on GPUs). NULL for NULL. */
QATTN_API void *qattn_buffer_handle(const qattn_buffer *buf);

/** A resolved workspace range handed to op slots. buffer NULL = none. */
typedef struct qattn_workspace {
    qattn_buffer *buffer;
    uint64_t offset;
    uint64_t bytes;
} qattn_workspace;

/** Operations a device may be asked about. */
typedef enum qattn_op {
    QATTN_OP_DECODE,
    QATTN_OP_KV_STORE,
    QATTN_OP_MQA_LOGITS,
    QATTN_OP_PAGED_MQA_LOGITS
} qattn_op;

struct qattn_backend_iface {
    const char *name;      /* "cpu", "vulkan", "hip" */
    uint32_t abi_version;  /* QATTN_BACKEND_ABI */

    /* Required. Creates an instance on the device named by options (never
     * NULL here: the core passes a full-size copy of the caller's, or the
     * defaults). Writes a reason into err on failure. */
    qattn_status (*create)(const qattn_context_options *options, void **be,
                           char *err, size_t err_size);
    /* Required. Destroys an instance; be may be NULL. */
    void (*destroy)(void *be);
    /* Required. Capabilities of the instance's device. */
    qattn_status (*get_caps)(void *be, qattn_device_caps *caps);

    /* Required buffer slots. `bytes` > 0; ranges are checked by the core. */
    qattn_status (*buffer_alloc)(void *be, uint64_t bytes, void **handle);
    void (*buffer_free)(void *be, void *handle);
    qattn_status (*buffer_upload)(void *be, void *handle, uint64_t offset,
                                  const void *src, uint64_t bytes);
    qattn_status (*buffer_download)(void *be, void *handle, uint64_t offset,
                                    void *dst, uint64_t bytes);
    /* Optional. NULL: qattn_buffer_wrap returns QATTN_ERR_UNSUPPORTED.
     * buffer_free is never called on a wrapped handle. */
    qattn_status (*buffer_wrap)(void *be, void *native, uint64_t bytes, void **handle);
    /* Optional. Releases what buffer_wrap made (never the caller's memory).
     * NULL: wrapping allocated nothing. */
    void (*buffer_unwrap)(void *be, void *handle);

    /* Optional. Whether the device can run `plan` (a qattn_decode_plan or
     * qattn_mqa_logits_plan, per op; NULL for kv_store). NULL slot: every op
     * with a non-NULL entry point below is supported for every plan. A
     * backend returns 0 rather than failing inside the op. */
    int (*supports_op)(void *be, qattn_op op, const void *plan);

    /* Op entry points; NULL = op unsupported (QATTN_ERR_UNSUPPORTED). */
    qattn_status (*decode)(void *be, const qattn_decode_plan *plan,
                           const qattn_decode_args *args, const qattn_workspace *ws);
    qattn_status (*kv_store)(void *be, const qattn_kv_store_args *args);
    qattn_status (*mqa_logits)(void *be, const qattn_mqa_logits_plan *plan,
                               const qattn_mqa_logits_args *args,
                               const qattn_workspace *ws);

    /* Required. Waits for all enqueued work. */
    qattn_status (*synchronize)(void *be);
    /* Optional. Device time of the last op call in ms; NULL: unsupported. */
    qattn_status (*last_op_time_ms)(void *be, double *ms);
    /* Optional. qattn_read_stream: arguments checked by the core; adds the
     * word sum of src's range to the u32 at `sum`, timed as an op. NULL:
     * QATTN_ERR_UNSUPPORTED. */
    qattn_status (*read_stream)(void *be, void *src, uint64_t offset, uint64_t bytes,
                                void *sum, uint64_t sum_offset);
    /* Optional. Text of the backend's last failure (e.g. validation-layer
     * messages); copied into the context's last error. NULL: none. */
    const char *(*last_message)(void *be);
    /* Optional. The matrix-unit rate (TFLOP/s) of a GEMM with the tile
     * shape of a coopmat MQA logits plan; NULL: unsupported. */
    qattn_status (*mqa_matrix_ceiling)(void *be, const qattn_mqa_logits_plan *plan, double *tflops);
    /* Optional (NULL: unsupported). Paged MQA logits (spec 5); supports_op
     * gets a qattn_paged_mqa_logits_plan for QATTN_OP_PAGED_MQA_LOGITS. */
    qattn_status (*paged_mqa_logits)(void *be, const qattn_paged_mqa_logits_plan *plan,
                                     const qattn_paged_mqa_logits_args *args,
                                     const qattn_workspace *ws);
};

/* ---- for backend libraries' own public calls (e.g. qattn/vulkan.h) ----- */
/** Makes a context around an instance the backend created itself (for
 *  example on a device the caller handed it), calling iface->get_caps once.
 *  Takes ownership of `be`: on failure it is destroyed with iface->destroy. */
QATTN_API qattn_status qattn_context_adopt(const qattn_backend_iface *iface, void *be,
                                           qattn_context **out, char *err, size_t err_size);
/** For a backend's own context-creating calls (qattn_vulkan_context_create):
 *  checks options->size by the rule of qattn.h ("option structs") and writes
 *  a copy in this build's layout to *out (NULL options = the defaults), so
 *  the backend reads only *out, never past the caller's size. Returns
 *  QATTN_ERR_INVALID_ARGUMENT with the reason in err (may be NULL). */
QATTN_API qattn_status qattn_context_options_copy(const qattn_context_options *options,
                                                  qattn_context_options *out, char *err,
                                                  size_t err_size);
/** The backend instance of ctx when ctx runs `iface`; NULL otherwise (NULL
 *  ctx, or a context of another backend). */
QATTN_API void *qattn_context_backend_instance(qattn_context *ctx, const qattn_backend_iface *iface);
/** Records a failure of a backend-specific call on ctx's last error, with the
 *  backend's own text (iface->last_message), and returns s. */
QATTN_API qattn_status qattn_context_backend_fail(qattn_context *ctx, qattn_status s, const char *what);
/** Stride of dimension `dim` in elements as int32 kernels take it: 0 for an
 *  absent tensor or a dimension of extent <= 1 (its stride is free and is
 *  never multiplied by more than 0). The core bounds every tensor's span to
 *  int32, so every other stride fits. */
static inline int32_t qattn_stride32(const qattn_tensor *t, int dim) {
    if (!t || !t->buffer || t->shape[dim] <= 1) return 0;
    return (int32_t)t->strides[dim];
}

/** For a backend's own extension calls (qattn_hip_set_stream, ...): the
 *  instance `ctx` runs on when it was created with `iface`, else NULL. */
QATTN_API void *qattn_context_instance(qattn_context *ctx, const qattn_backend_iface *iface);
/** Records an extension call's failure as ctx's last error; returns s. */
QATTN_API qattn_status qattn_context_fail(qattn_context *ctx, qattn_status s, const char *message);

/** How a backend addresses a K/V cache or its scales (spec 2), whatever
 *  its form. Key row `row` of page `page` is slot page * page_rows + row;
 *  its element (head g, dim d) is at page * page_stride + row * row_stride
 *  + g * head_stride + d elements from element 0 (scales: no d). A rank-3
 *  cache [N_slots, Hkv, D] (scales [N_slots, Hkv]) reads as pages of
 *  `page_size` consecutive slots; a rank-4 cache [N_pages, P, Hkv, D]
 *  (scales [N_pages, P, Hkv]) brings its own page and row strides. A slot
 *  is inside the cache iff 0 <= slot < n_slots. Kernels take these five
 *  numbers, never the rank. A dimension of extent 1 contributes stride 0.
 *  Decode passes the call's page_size (rank-4 tensors then have
 *  P = page_size); the KV store passes 1 and addresses by slot:
 *  page = slot / page_rows, row = slot % page_rows. */
typedef struct qattn_cache_view {
    int64_t n_slots;
    int64_t page_rows;
    int64_t page_stride, row_stride, head_stride;
} qattn_cache_view;

/** The view of a validated cache (is_scale 0) or scale tensor. */
QATTN_API qattn_cache_view qattn_cache_view_of(const qattn_tensor *t, int is_scale, int64_t page_size);

/** The view in 32 bits, as int32 kernels take it. For a slot inside the
 *  cache the element offset is below 2^31 (the core bounds every tensor's
 *  span to int32), so offsets computed in unsigned 32-bit arithmetic from
 *  these truncated strides are exact; only a rank-3 view's page_stride
 *  (stride x page_size) can need more bits, and then no page past the
 *  first is inside the cache. n_slots and page_rows fit int32. */
typedef struct qattn_cache_view32 {
    int32_t n_slots, page_rows;
    uint32_t page_stride, row_stride, head_stride;
} qattn_cache_view32;

static inline qattn_cache_view32 qattn_cache_view32_of(const qattn_tensor *t, int is_scale,
                                                       int64_t page_size) {
    const qattn_cache_view v = qattn_cache_view_of(t, is_scale, page_size);
    qattn_cache_view32 w;
    w.n_slots = (int32_t)v.n_slots;
    w.page_rows = (int32_t)v.page_rows;
    w.page_stride = (uint32_t)(uint64_t)v.page_stride;
    w.row_stride = (uint32_t)(uint64_t)v.row_stride;
    w.head_stride = (uint32_t)(uint64_t)v.head_stride;
    return w;
}

#ifdef __cplusplus
}
#endif
#endif /* QATTN_BACKEND_H */
