/*
 * The Vulkan backend (library qattn_vulkan, CMake target qattn::vulkan).
 *
 *   qattn_context *ctx;
 *   qattn_context_options o = {0};
 *   o.device = "0";               // or a name substring; NULL = QATTN_VULKAN_DEVICE, then 0
 *   qattn_context_create(qattn_backend_vulkan(), &o, &ctx, err, sizeof err);
 *
 * Vulkan is loaded at run time (volk): linking this library needs no
 * libvulkan, and a machine without a loader or device gets
 * QATTN_ERR_BACKEND_UNAVAILABLE from qattn_context_create.
 *
 * Device requirements: Vulkan 1.3 with bufferDeviceAddress, 8- and 16-bit
 * storage-buffer access, shaderInt8/16/64, subgroup arithmetic, shuffle,
 * ballot and vote operations in compute, and at least 256 bytes of push
 * constants. VK_KHR_cooperative_matrix (f16 16x16x16 -> f32) is enabled when
 * present; decode runs on it when the coopmat variant is chosen (pinned: on
 * the H200 the scalar kernels measured faster, docs/perf_decode_notes.md).
 *
 * qattn_buffer_wrap takes a pointer to a qattn_vk_native_buffer naming a
 * VkBuffer created on this context's device, bound to memory, with
 * VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT and
 * VK_BUFFER_USAGE_STORAGE_BUFFER_BIT (kernels reach buffers by device
 * address) plus TRANSFER_SRC/DST for uploads and downloads, and `bytes` no
 * larger than its size. Vulkan cannot be asked for a buffer's usage or size
 * afterwards, so the caller passes what it gave vkCreateBuffer; the size is
 * also checked against vkGetBufferMemoryRequirements.
 *
 * With qattn_context_options.debug_validation the Khronos validation layer
 * is enabled; any warning or error it reports makes the current call fail
 * with QATTN_ERR_DEVICE and the message becomes the last-error text.
 */
#ifndef QATTN_VULKAN_H
#define QATTN_VULKAN_H

#include "qattn/qattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The Vulkan backend's table; pass it to qattn_context_create(). Never NULL
 *  (whether a device exists is only known when a context is created). */
QATTN_API const qattn_backend_iface *qattn_backend_vulkan(void);

/** What `native` points to in qattn_buffer_wrap on this backend. */
typedef struct qattn_vk_native_buffer {
    const void *buffer; /* points to the VkBuffer */
    uint64_t size;      /* VkBufferCreateInfo::size it was created with */
    uint32_t usage;     /* VkBufferCreateInfo::usage (VkBufferUsageFlags) */
    uint32_t reserved;  /* 0 */
} qattn_vk_native_buffer;

#ifdef __cplusplus
}
#endif
#endif /* QATTN_VULKAN_H */
