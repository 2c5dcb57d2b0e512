/* Device buffers (device-local storage buffers reached by device address)
 * and host transfers through a staging buffer. Transfers complete before the
 * call returns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* Largest staging buffer: bigger transfers go in chunks of this size. */
#define STAGING_MAX (64ull << 20)

static const VkBufferUsageFlags DEVICE_USAGE =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
    VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;

/* Creates a buffer bound to fresh memory of type `mem_type`. */
static qattn_status make_buffer(qattn_vk *vk, uint64_t bytes, VkBufferUsageFlags usage,
                                uint32_t mem_type, int device_address, VkBuffer *buf,
                                VkDeviceMemory *mem) {
    VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = usage;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r = vk->vkd.vkCreateBuffer(vk->device, &bci, NULL, buf);
    if (r != VK_SUCCESS) return qattn_vk_check(vk, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    vk->vkd.vkGetBufferMemoryRequirements(vk->device, *buf, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vk->vki.vkGetPhysicalDeviceMemoryProperties(vk->phys, &mp);
    uint32_t type = mem_type;
    if (!(req.memoryTypeBits & (1u << type))) {
        /* The preferred type cannot hold this buffer: take one with the same
         * property flags that can. */
        VkMemoryPropertyFlags want = mp.memoryTypes[mem_type].propertyFlags;
        type = UINT32_MAX;
        for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; ++i)
            if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
                type = i;
        if (type == UINT32_MAX) {
            vk->vkd.vkDestroyBuffer(vk->device, *buf, NULL);
            *buf = VK_NULL_HANDLE;
            return qattn_vk_fail(vk, QATTN_ERR_OUT_OF_MEMORY, "vulkan: no memory type fits the buffer");
        }
    }
    VkMemoryAllocateFlagsInfo flags = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.pNext = device_address ? &flags : NULL;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    r = vk->vkd.vkAllocateMemory(vk->device, &ai, NULL, mem);
    if (r == VK_SUCCESS) r = vk->vkd.vkBindBufferMemory(vk->device, *buf, *mem, 0);
    if (r != VK_SUCCESS) {
        vk->vkd.vkDestroyBuffer(vk->device, *buf, NULL);
        if (*mem) vk->vkd.vkFreeMemory(vk->device, *mem, NULL);
        *buf = VK_NULL_HANDLE;
        *mem = VK_NULL_HANDLE;
        return qattn_vk_check(vk, r, "vkAllocateMemory");
    }
    return QATTN_OK;
}

/* A failed call consumes the validation messages it caused: they become
 * part of its own failure text instead of failing the next call. */
static qattn_status fail_drained(qattn_vk *vk, qattn_status s) {
    if (vk->n_messages == 0) return s;
    size_t used = strlen(vk->message);
    snprintf(vk->message + used, sizeof vk->message - used, "; validation: %s", vk->messages);
    vk->n_messages = 0;
    vk->messages[0] = '\0';
    return s;
}

static VkDeviceAddress address_of(qattn_vk *vk, VkBuffer b) {
    VkBufferDeviceAddressInfo info = {VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = b;
    return vk->vkd.vkGetBufferDeviceAddress(vk->device, &info);
}

qattn_status qattn_vk_buffer_alloc(void *be, uint64_t bytes, void **handle) {
    qattn_vk *vk = (qattn_vk *)be;
    *handle = NULL;
    /* Messages of an earlier call are not this one's to report or ignore. */
    qattn_status s = qattn_vk_check_messages(vk, "before qattn_buffer_alloc");
    if (s != QATTN_OK) return s;
    if (bytes > vk->max_buffer_bytes)
        return qattn_vk_fail(vk, QATTN_ERR_OUT_OF_MEMORY,
                             "bytes: %llu exceed the device's maxBufferSize of %llu bytes (%s)",
                             (unsigned long long)bytes, (unsigned long long)vk->max_buffer_bytes,
                             vk->props.deviceName);
    qattn_vk_buffer *b = calloc(1, sizeof *b);
    if (!b) return qattn_vk_fail(vk, QATTN_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    s = make_buffer(vk, bytes, DEVICE_USAGE, vk->mem_device, 1, &b->buffer, &b->memory);
    if (s != QATTN_OK) {
        free(b);
        if (bytes > vk->max_allocation_bytes) {
            /* The driver's own text first, then the likely reason. */
            size_t used = strlen(vk->message);
            snprintf(vk->message + used, sizeof vk->message - used,
                     " (bytes: %llu exceed the device's maxMemoryAllocationSize of %llu)",
                     (unsigned long long)bytes, (unsigned long long)vk->max_allocation_bytes);
        }
        return fail_drained(vk, s);
    }
    b->bytes = bytes;
    b->address = address_of(vk, b->buffer);
    if ((s = qattn_vk_check_messages(vk, "qattn_buffer_alloc")) != QATTN_OK) {
        qattn_vk_buffer_free(vk, b);
        return s;
    }
    *handle = b;
    return QATTN_OK;
}

/* VkBufferUsageFlags a wrapped buffer needs, with their names. */
static const struct {
    VkBufferUsageFlags bit;
    const char *name;
} WRAP_USAGE[] = {
    {VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT, "SHADER_DEVICE_ADDRESS"},
    {VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, "STORAGE_BUFFER"},
    {VK_BUFFER_USAGE_TRANSFER_SRC_BIT, "TRANSFER_SRC"},
    {VK_BUFFER_USAGE_TRANSFER_DST_BIT, "TRANSFER_DST"},
};

qattn_status qattn_vk_buffer_wrap(void *be, void *native, uint64_t bytes, void **handle) {
    qattn_vk *vk = (qattn_vk *)be;
    *handle = NULL;
    const qattn_vk_native_buffer *nb = (const qattn_vk_native_buffer *)native;
    if (!nb)
        return qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "native: NULL (want a qattn_vk_native_buffer *)");
    /* Non-zero marks a layout this build does not know: read nothing else. */
    if (nb->reserved != 0)
        return qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                             "native.reserved: %u, must be 0 (a qattn_vk_native_buffer of another version?)",
                             (unsigned)nb->reserved);
    if (!nb->buffer) return qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "native.buffer: NULL");
    VkBuffer vb = *(const VkBuffer *)nb->buffer;
    if (vb == VK_NULL_HANDLE)
        return qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "native.buffer: points to VK_NULL_HANDLE");
    for (size_t i = 0; i < sizeof WRAP_USAGE / sizeof WRAP_USAGE[0]; ++i)
        if (!(nb->usage & WRAP_USAGE[i].bit))
            return qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                                 "native.usage: 0x%x lacks VK_BUFFER_USAGE_%s_BIT (kernels reach "
                                 "buffers by device address; transfers copy into them)",
                                 (unsigned)nb->usage, WRAP_USAGE[i].name);
    if (bytes > nb->size)
        return qattn_vk_fail(vk, QATTN_ERR_OUT_OF_BOUNDS,
                             "bytes: %llu exceed the VkBuffer's %llu-byte size (native.size)",
                             (unsigned long long)bytes, (unsigned long long)nb->size);
    qattn_status s = qattn_vk_check_messages(vk, "before qattn_buffer_wrap");
    if (s != QATTN_OK) return s;
    /* The memory a buffer needs is at least its size: a size larger than
     * that is not the one it was created with. */
    VkMemoryRequirements req;
    vk->vkd.vkGetBufferMemoryRequirements(vk->device, vb, &req);
    if (nb->size > req.size)
        return fail_drained(vk, qattn_vk_fail(vk, QATTN_ERR_OUT_OF_BOUNDS,
                                              "native.size: %llu bytes, but the VkBuffer needs only "
                                              "%llu bytes of memory: not the size it was created with",
                                              (unsigned long long)nb->size,
                                              (unsigned long long)req.size));
    qattn_vk_buffer *b = calloc(1, sizeof *b);
    if (!b) return qattn_vk_fail(vk, QATTN_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    b->buffer = vb;
    b->bytes = bytes;
    b->wrapped = 1;
    b->address = address_of(vk, vb);
    if (b->address == 0) {
        free(b);
        return fail_drained(vk, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                                              "native: the VkBuffer has no device address (create it "
                                              "with VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT and "
                                              "bind memory allocated with "
                                              "VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT)"));
    }
    s = qattn_vk_check_messages(vk, "qattn_buffer_wrap");
    if (s != QATTN_OK) {
        free(b);
        return s;
    }
    *handle = b;
    return QATTN_OK;
}

void qattn_vk_buffer_free(void *be, void *handle) {
    qattn_vk *vk = (qattn_vk *)be;
    qattn_vk_buffer *b = (qattn_vk_buffer *)handle;
    if (!b) return;
    if (!b->wrapped) {
        /* The buffer may still be read by submitted work only if the caller
         * frees it mid-op; ops wait before returning, so it is idle here. */
        if (b->buffer) vk->vkd.vkDestroyBuffer(vk->device, b->buffer, NULL);
        if (b->memory) vk->vkd.vkFreeMemory(vk->device, b->memory, NULL);
    }
    free(b);
}

/* Makes the staging buffer at least `bytes` (<= STAGING_MAX) large. */
static qattn_status ensure_staging(qattn_vk *vk, uint64_t bytes) {
    if (vk->staging_bytes >= bytes) return QATTN_OK;
    if (vk->staging) {
        vk->vkd.vkDestroyBuffer(vk->device, vk->staging, NULL);
        vk->vkd.vkFreeMemory(vk->device, vk->staging_mem, NULL);
        vk->staging = VK_NULL_HANDLE;
        vk->staging_mem = VK_NULL_HANDLE;
        vk->staging_map = NULL;
        vk->staging_bytes = 0;
    }
    uint64_t want = 1ull << 20;
    while (want < bytes) want <<= 1;
    qattn_status s = make_buffer(vk, want, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                 vk->mem_staging, 0, &vk->staging, &vk->staging_mem);
    if (s != QATTN_OK) return s;
    VkResult r = vk->vkd.vkMapMemory(vk->device, vk->staging_mem, 0, VK_WHOLE_SIZE, 0, &vk->staging_map);
    if (r != VK_SUCCESS) return qattn_vk_check(vk, r, "vkMapMemory(staging)");
    vk->staging_bytes = want;
    return QATTN_OK;
}

/* Copies between the staging buffer and buf; to_device selects direction. */
static qattn_status copy_chunk(qattn_vk *vk, qattn_vk_buffer *buf, uint64_t offset, uint64_t bytes,
                               int to_device) {
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    VkResult r = vk->vkd.vkResetCommandBuffer(vk->cmd, 0);
    if (r == VK_SUCCESS) r = vk->vkd.vkBeginCommandBuffer(vk->cmd, &bi);
    if (r != VK_SUCCESS) return qattn_vk_check(vk, r, "vkBeginCommandBuffer(transfer)");
    /* Earlier shader writes (ops) must land before a download reads them and
     * before an upload overwrites what they read. */
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
    mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    vk->vkd.vkCmdPipelineBarrier(vk->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    VkBufferCopy region;
    region.size = bytes;
    if (to_device) {
        region.srcOffset = 0;
        region.dstOffset = offset;
        vk->vkd.vkCmdCopyBuffer(vk->cmd, vk->staging, buf->buffer, 1, &region);
    } else {
        region.srcOffset = offset;
        region.dstOffset = 0;
        vk->vkd.vkCmdCopyBuffer(vk->cmd, buf->buffer, vk->staging, 1, &region);
    }
    VkMemoryBarrier mb2 = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb2.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb2.dstAccessMask = to_device ? (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT)
                                  : VK_ACCESS_HOST_READ_BIT;
    vk->vkd.vkCmdPipelineBarrier(vk->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 to_device ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
                                           : VK_PIPELINE_STAGE_HOST_BIT,
                                 0, 1, &mb2, 0, NULL, 0, NULL);
    return qattn_vk_end_submit_wait(vk, "transfer submit");
}

static qattn_status transfer(qattn_vk *vk, qattn_vk_buffer *buf, uint64_t offset, void *host,
                             uint64_t bytes, int to_device, const char *what) {
    if (vk->recording) return qattn_vk_fail(vk, QATTN_ERR_DEVICE, "%s: an op is being recorded", what);
    if (bytes == 0) return QATTN_OK;
    /* The range must lie in the buffer (the core checked it against the
     * size the buffer was made with; this holds for wrapped ones too). */
    if (offset > buf->bytes || bytes > buf->bytes - offset)
        return qattn_vk_fail(vk, QATTN_ERR_OUT_OF_BOUNDS, "%s: [%llu, +%llu) outside a %llu-byte buffer",
                             what, (unsigned long long)offset, (unsigned long long)bytes,
                             (unsigned long long)buf->bytes);
    /* Fail before writing anything on messages an earlier call left. */
    qattn_status s = qattn_vk_check_messages(vk, "before the transfer");
    if (s != QATTN_OK) return s;
    uint64_t chunk = bytes < STAGING_MAX ? bytes : STAGING_MAX;
    s = ensure_staging(vk, chunk);
    if (s != QATTN_OK) return fail_drained(vk, s);
    for (uint64_t done = 0; done < bytes; done += chunk) {
        uint64_t n = bytes - done < chunk ? bytes - done : chunk;
        if (to_device) memcpy(vk->staging_map, (const char *)host + done, (size_t)n);
        if ((s = copy_chunk(vk, buf, offset + done, n, to_device)) != QATTN_OK) return s;
        if (!to_device) memcpy((char *)host + done, vk->staging_map, (size_t)n);
    }
    return qattn_vk_check_messages(vk, what);
}

qattn_status qattn_vk_buffer_upload(void *be, void *handle, uint64_t offset, const void *src,
                                    uint64_t bytes) {
    return transfer((qattn_vk *)be, (qattn_vk_buffer *)handle, offset, (void *)src, bytes, 1,
                    "qattn_buffer_upload");
}

qattn_status qattn_vk_buffer_download(void *be, void *handle, uint64_t offset, void *dst,
                                      uint64_t bytes) {
    return transfer((qattn_vk *)be, (qattn_vk_buffer *)handle, offset, dst, bytes, 0,
                    "qattn_buffer_download");
}
