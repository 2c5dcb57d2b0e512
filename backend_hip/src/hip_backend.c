/* The HIP backend's iface table (what qattn_core calls) and its public
 * extension calls (qattn/hip.h). The runtime slots are in hip_runtime.c,
 * the ops in hip_decode.c, hip_kv_store.c, hip_mqa_logits.c, hip_paged_mqa_logits.c and
 * hip_bandwidth.c; this file only ties them together, so no op file and
 * the runtime depend on each other through it. */
#include "qattn/hip.h"
#include "qh_backend.h"

static int qh_supports_op(void *p, qattn_op op, const void *plan) {
    const qh_backend *be = p;
    switch (op) {
    case QATTN_OP_DECODE: return qh_decode_supported(be, plan);
    case QATTN_OP_KV_STORE: return 1;
    case QATTN_OP_MQA_LOGITS: return qh_mqa_supported(be, plan);
    case QATTN_OP_PAGED_MQA_LOGITS: return qh_paged_mqa_supported(be, plan);
    }
    return 0;
}

static const char *qh_last_message(void *p) { return ((qh_backend *)p)->msg; }

/* The ops, each between qh_enter and qh_leave (hip_decode.c and the other
 * launchers assume their device is current). */
static qattn_status qh_decode_slot(void *p, const qattn_decode_plan *plan, const qattn_decode_args *a,
                                   const qattn_workspace *ws) {
    const int prev = qh_enter(p);
    qattn_status s = qh_decode(p, plan, a, ws);
    qh_leave(p, prev);
    return s;
}

static qattn_status qh_kv_store_slot(void *p, const qattn_kv_store_args *a) {
    const int prev = qh_enter(p);
    qattn_status s = qh_kv_store(p, a);
    qh_leave(p, prev);
    return s;
}

static qattn_status qh_mqa_logits_slot(void *p, const qattn_mqa_logits_plan *plan,
                                       const qattn_mqa_logits_args *a, const qattn_workspace *ws) {
    const int prev = qh_enter(p);
    qattn_status s = qh_mqa_logits(p, plan, a, ws);
    qh_leave(p, prev);
    return s;
}

static qattn_status qh_paged_mqa_logits_slot(void *p, const qattn_paged_mqa_logits_plan *plan,
                                             const qattn_paged_mqa_logits_args *a, const qattn_workspace *ws) {
    const int prev = qh_enter(p);
    qattn_status s = qh_paged_mqa_logits(p, plan, a, ws);
    qh_leave(p, prev);
    return s;
}

/* Handles are device pointers, allocated or wrapped: one address space. */
static uint64_t qh_buffer_address(void *p, void *handle) {
    (void)p;
    return (uint64_t)(uintptr_t)handle;
}

static const qattn_backend_iface qh_iface = {
    .name = "hip",
    .abi_version = QATTN_BACKEND_ABI,
    .create = qh_create,
    .destroy = qh_destroy,
    .get_caps = qh_get_caps,
    .buffer_alloc = qh_buffer_alloc,
    .buffer_free = qh_buffer_free,
    .buffer_upload = qh_buffer_upload,
    .buffer_download = qh_buffer_download,
    .buffer_wrap = qh_buffer_wrap,
    .buffer_unwrap = qh_buffer_unwrap,
    .buffer_address = qh_buffer_address,
    .supports_op = qh_supports_op,
    .decode = qh_decode_slot,
    .kv_store = qh_kv_store_slot,
    .mqa_logits = qh_mqa_logits_slot,
    .paged_mqa_logits = qh_paged_mqa_logits_slot,
    .synchronize = qh_synchronize,
    .last_op_time_ms = qh_last_op_time_ms,
    .last_message = qh_last_message,
    .read_stream = qh_read_stream,
    .decode_read = qh_decode_read,
};

const qattn_backend_iface *qattn_backend_hip(void) { return &qh_iface; }

qattn_status qattn_hip_set_stream(qattn_context *ctx, void *stream) {
    qh_backend *be = qattn_context_backend_instance(ctx, &qh_iface);
    if (!be)
        return qattn_context_backend_fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                                          "qattn_hip_set_stream: ctx is not a HIP context");
    be->stream = (hipStream_t)stream;
    return QATTN_OK;
}
