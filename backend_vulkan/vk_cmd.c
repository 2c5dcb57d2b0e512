/* Recording one op's launches into the context's command buffer, submitting
 * it, timing it with timestamp queries, and the backend's error texts. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

const char *qattn_vk_result_name(VkResult r) {
    switch (r) {
#define C(x) case x: return #x;
    C(VK_SUCCESS) C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_INCOMPLETE)
    C(VK_ERROR_OUT_OF_HOST_MEMORY) C(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST) C(VK_ERROR_MEMORY_MAP_FAILED)
    C(VK_ERROR_LAYER_NOT_PRESENT) C(VK_ERROR_EXTENSION_NOT_PRESENT)
    C(VK_ERROR_FEATURE_NOT_PRESENT) C(VK_ERROR_INCOMPATIBLE_DRIVER) C(VK_ERROR_TOO_MANY_OBJECTS)
    C(VK_ERROR_FORMAT_NOT_SUPPORTED) C(VK_ERROR_UNKNOWN) C(VK_ERROR_INVALID_SHADER_NV)
    C(VK_ERROR_OUT_OF_POOL_MEMORY) C(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef C
    default: return "VK_ERROR_(other)";
    }
}

qattn_status qattn_vk_fail(qattn_vk *vk, qattn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s = qattn_vformat_status(vk->message, sizeof vk->message, s, fmt, ap);
    va_end(ap);
    return s;
}

qattn_status qattn_vk_check(qattn_vk *vk, VkResult r, const char *what) {
    if (r == VK_SUCCESS) return QATTN_OK;
    qattn_status s = (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
                         ? QATTN_ERR_OUT_OF_MEMORY
                         : QATTN_ERR_DEVICE;
    return qattn_vk_fail(vk, s, "vulkan: %s failed (%s)", what, qattn_vk_result_name(r));
}

qattn_status qattn_vk_check_messages(qattn_vk *vk, const char *what) {
    if (vk->n_messages == 0) return QATTN_OK;
    qattn_vk_fail(vk, QATTN_ERR_DEVICE, "vulkan validation (%s): %s", what, vk->messages);
    vk->n_messages = 0;
    vk->messages[0] = '\0';
    return QATTN_ERR_DEVICE;
}

/* Orders this op's launches after those of the op recorded before it, so
 * one recorded op may read what an earlier one wrote (and may overwrite
 * what it read: the execution dependency covers that). */
static void barrier_on(qattn_vk *vk, VkCommandBuffer cmd) {
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vk->vkd.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

qattn_status qattn_vk_begin(qattn_vk *vk) {
    if (vk->recording) return qattn_vk_fail(vk, QATTN_ERR_DEVICE, "vulkan: an op is already being recorded");
    qattn_status s = qattn_vk_check_messages(vk, "before recording");
    if (s != QATTN_OK) return s;
    if (vk->mode == QATTN_VK_PREPARE) {
        vk->cur = VK_NULL_HANDLE;
        vk->recording = 1;
        return QATTN_OK;
    }
    if (vk->mode == QATTN_VK_RECORD) {
        vk->cur = vk->ext_cmd;
        if (vk->ext_ops > 0) barrier_on(vk, vk->cur);
        vk->recording = 1;
        return QATTN_OK;
    }
    VkResult r = vk->vkd.vkResetCommandBuffer(vk->cmd, 0);
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (r == VK_SUCCESS) r = vk->vkd.vkBeginCommandBuffer(vk->cmd, &bi);
    if (r != VK_SUCCESS) return qattn_vk_check(vk, r, "vkBeginCommandBuffer");
    vk->cur = vk->cmd;
    vk->recording = 1;
    if (vk->timestamps) {
        vk->vkd.vkCmdResetQueryPool(vk->cmd, vk->timestamps, 0, 2);
        vk->vkd.vkCmdWriteTimestamp(vk->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, vk->timestamps, 0);
    }
    return QATTN_OK;
}

void qattn_vk_dispatch(qattn_vk *vk, VkPipeline p, const void *push, uint32_t push_bytes,
                       uint32_t gx, uint32_t gy, uint32_t gz) {
    if (!vk->cur) return; /* preparing: pipelines only */
    vk->vkd.vkCmdBindPipeline(vk->cur, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    if (push_bytes > 0)
        vk->vkd.vkCmdPushConstants(vk->cur, vk->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    vk->vkd.vkCmdDispatch(vk->cur, gx, gy, gz);
}

void qattn_vk_barrier(qattn_vk *vk) {
    if (vk->cur) barrier_on(vk, vk->cur);
}

void qattn_vk_abandon(qattn_vk *vk) {
    if (!vk->recording) return;
    vk->recording = 0;
    /* The caller's command buffer is theirs: what was recorded stays (ops
     * record nothing before they can no longer fail). */
    if (vk->cur == vk->cmd) {
        vk->vkd.vkEndCommandBuffer(vk->cmd);
        vk->vkd.vkResetCommandBuffer(vk->cmd, 0);
    }
    vk->cur = VK_NULL_HANDLE;
}

qattn_status qattn_vk_end_submit_wait(qattn_vk *vk, const char *what) {
    VkResult r = vk->vkd.vkEndCommandBuffer(vk->cmd);
    if (r != VK_SUCCESS) return qattn_vk_check(vk, r, "vkEndCommandBuffer");
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &vk->cmd;
    r = vk->vkd.vkResetFences(vk->device, 1, &vk->fence);
    if (r == VK_SUCCESS) r = vk->vkd.vkQueueSubmit(vk->queue, 1, &si, vk->fence);
    if (r == VK_SUCCESS) r = vk->vkd.vkWaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
    return r == VK_SUCCESS ? QATTN_OK : qattn_vk_check(vk, r, what);
}

qattn_status qattn_vk_submit(qattn_vk *vk, const char *what) {
    if (!vk->recording) return qattn_vk_fail(vk, QATTN_ERR_DEVICE, "vulkan: %s: nothing recorded", what);
    vk->recording = 0;
    if (vk->cur != vk->cmd) {
        /* Recorded into the caller's buffer, or only prepared: no time. */
        if (vk->cur) vk->ext_ops++;
        vk->last_op_recorded = 1;
        vk->have_last_op = 0;
        vk->cur = VK_NULL_HANDLE;
        return qattn_vk_check_messages(vk, what);
    }
    vk->cur = VK_NULL_HANDLE;
    vk->last_op_recorded = 0;
    if (vk->timestamps)
        vk->vkd.vkCmdWriteTimestamp(vk->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->timestamps, 1);
    qattn_status s = qattn_vk_end_submit_wait(vk, what);
    if (s != QATTN_OK) return s;
    vk->have_last_op = 0;
    if (vk->timestamps) {
        uint64_t ts[2] = {0, 0};
        VkResult r = vk->vkd.vkGetQueryPoolResults(vk->device, vk->timestamps, 0, 2, sizeof ts, ts, sizeof ts[0],
                                          VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
        if (r == VK_SUCCESS) {
            uint64_t ticks = (ts[1] - ts[0]) & vk->timestamp_mask;
            vk->last_op_ms = (double)ticks * vk->timestamp_period_ns * 1e-6;
            vk->have_last_op = 1;
        }
    }
    return qattn_vk_check_messages(vk, what);
}

qattn_status qattn_vk_synchronize(void *be) {
    qattn_vk *vk = (qattn_vk *)be;
    /* Every op waits for its own submission (recorded ops are the caller's
     * to wait for), so qattn's work is done here; still ask the device,
     * which reports a lost device. On an imported queue this also waits for
     * the caller's own submissions to it. */
    VkResult r = vk->vkd.vkQueueWaitIdle(vk->queue);
    if (r != VK_SUCCESS) return qattn_vk_check(vk, r, "vkQueueWaitIdle");
    return qattn_vk_check_messages(vk, "qattn_synchronize");
}

qattn_status qattn_vk_last_op_time_ms(void *be, double *ms) {
    qattn_vk *vk = (qattn_vk *)be;
    if (!vk->timestamps) return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "vulkan: the queue has no timestamps");
    if (vk->last_op_recorded)
        return qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                             "vulkan: the last op was recorded into the caller's command buffer or "
                             "only warmed up (not timed; time a command buffer with its own timestamps)");
    if (!vk->have_last_op)
        return qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "vulkan: no timed op has run yet");
    *ms = vk->last_op_ms;
    return QATTN_OK;
}
