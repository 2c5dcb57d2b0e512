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

/** The core's record of a buffer. `handle` belongs to the backend (a host
 *  pointer on cpu, the backend's own struct on GPUs). */
struct qattn_buffer {
    qattn_context *owner;
    void *handle;
    uint64_t bytes;
    int wrapped; /* non-zero: memory is the caller's; free releases the wrapper */
};

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
    QATTN_OP_MQA_LOGITS
} qattn_op;

struct qattn_backend_iface {
    const char *name;      /* "cpu", "vulkan", "hip" */
    uint32_t abi_version;  /* QATTN_BACKEND_ABI */

    /* Required. Creates an instance on the device named by options (never
     * NULL here: the core passes defaults). Writes a reason into err on
     * failure. */
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
    /* Optional. Text of the backend's last failure (e.g. validation-layer
     * messages); copied into the context's last error. NULL: none. */
    const char *(*last_message)(void *be);
    /* Optional. The matrix-unit rate (TFLOP/s) of a GEMM with the tile
     * shape of a coopmat MQA logits plan; NULL: unsupported. */
    qattn_status (*mqa_matrix_ceiling)(void *be, const qattn_mqa_logits_plan *plan, double *tflops);
};

#ifdef __cplusplus
}
#endif
#endif /* QATTN_BACKEND_H */
