/* The Vulkan backend's iface table: what qattn_core calls. */
#include "vk_internal.h"

static const char *vk_last_message(void *be) {
    const qattn_vk *vk = (const qattn_vk *)be;
    return vk && vk->message[0] ? vk->message : NULL;
}

static int vk_supports_op(void *be, qattn_op op, const void *plan) {
    qattn_vk *vk = (qattn_vk *)be;
    switch (op) {
    case QATTN_OP_DECODE:
        return qattn_vk_decode_supports(vk, (const qattn_decode_plan *)plan);
    case QATTN_OP_KV_STORE:
        return 1;
    case QATTN_OP_MQA_LOGITS:
        return qattn_vk_mqa_supports(vk, (const qattn_mqa_logits_plan *)plan);
    case QATTN_OP_PAGED_MQA_LOGITS:
        return qattn_vk_paged_mqa_supports(vk, (const qattn_paged_mqa_logits_plan *)plan);
    }
    return 0;
}

/* Device addresses: buffers over the same memory get overlapping ranges. */
static uint64_t vk_buffer_address(void *be, void *handle) {
    (void)be;
    return ((const qattn_vk_buffer *)handle)->address;
}

static const qattn_backend_iface VULKAN_IFACE = {
    .name = "vulkan",
    .abi_version = QATTN_BACKEND_ABI,
    .create = qattn_vk_create,
    .destroy = qattn_vk_destroy,
    .get_caps = qattn_vk_get_caps,
    .buffer_alloc = qattn_vk_buffer_alloc,
    .buffer_free = qattn_vk_buffer_free,
    .buffer_upload = qattn_vk_buffer_upload,
    .buffer_download = qattn_vk_buffer_download,
    .buffer_wrap = qattn_vk_buffer_wrap,
    .buffer_address = vk_buffer_address,
    .supports_op = vk_supports_op,
    .decode = qattn_vk_decode,
    .kv_store = qattn_vk_kv_store,
    .mqa_logits = qattn_vk_mqa_logits,
    .paged_mqa_logits = qattn_vk_paged_mqa_logits,
    .synchronize = qattn_vk_synchronize,
    .last_op_time_ms = qattn_vk_last_op_time_ms,
    .last_message = vk_last_message,
    .read_stream = qattn_vk_read_stream,
    .mqa_matrix_ceiling = qattn_vk_mqa_ceiling,
    .decode_read = qattn_vk_decode_read,
};

const qattn_backend_iface *qattn_backend_vulkan(void) { return &VULKAN_IFACE; }
