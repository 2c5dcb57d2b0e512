/*
 * A test's (or the bench's) own Vulkan objects, as an engine would have
 * them: an instance (optionally with the validation layer and a messenger
 * that counts what it says), a device with the features qattn needs, a
 * queue, host-visible buffers with device addresses, and a command buffer
 * with a fence.
 *
 * Entry points come from the system loader through dlopen +
 * vkGetInstanceProcAddr, never from link-time prototypes: a static qattn
 * build carries volk, whose global function pointers have the prototypes'
 * names. Header-only; include once per program.
 */
#ifndef QATTN_TEST_QT_VK_H
#define QATTN_TEST_QT_VK_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan_core.h>

#include "qattn/vulkan.h"

#define QT_VK_FNS(X)                                                                     \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) \
    X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceQueueFamilyProperties)         \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)     \
    X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)
#define QT_VK_DEV_FNS(X)                                                                        \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)               \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) \
    X(vkMapMemory) X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers)  \
    X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdPipelineBarrier) \
    X(vkCreateFence) X(vkDestroyFence) X(vkResetFences) X(vkWaitForFences) X(vkQueueSubmit)    \
    X(vkDeviceWaitIdle) X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool)      \
    X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)

typedef struct qt_vk {
    void *lib;
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkCreateInstance vkCreateInstance;
#define QT_VK_DECL(f) PFN_##f f;
    QT_VK_FNS(QT_VK_DECL)
    QT_VK_DEV_FNS(QT_VK_DECL)
#undef QT_VK_DECL
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    int own_instance, own_device;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkDevice device;
    uint32_t family;
    VkQueue queue;
    /* What the device was created with (kept for qattn_vulkan_context_create). */
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDeviceVulkan13Features f13;
    /* Validation messages (warnings and errors) seen by our messenger. */
    int n_messages;
    char first_message[1024];
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
} qt_vk;

static VKAPI_ATTR VkBool32 VKAPI_CALL qt_vk_on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                      VkDebugUtilsMessageTypeFlagsEXT types,
                                                      const VkDebugUtilsMessengerCallbackDataEXT *d,
                                                      void *user) {
    (void)types;
    qt_vk *v = (qt_vk *)user;
    if (!(sev & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
        return VK_FALSE;
    if (v->n_messages++ == 0)
        snprintf(v->first_message, sizeof v->first_message, "%s", d && d->pMessage ? d->pMessage : "?");
    return VK_FALSE;
}

static inline int qt_vk_has_layer(qt_vk *v, const char *name) {
    PFN_vkEnumerateInstanceLayerProperties e =
        (PFN_vkEnumerateInstanceLayerProperties)v->gipa(NULL, "vkEnumerateInstanceLayerProperties");
    uint32_t n = 0;
    if (!e || e(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkLayerProperties *l = calloc(n, sizeof *l);
    int found = 0;
    if (l && e(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; ++i) found |= strcmp(l[i].layerName, name) == 0;
    free(l);
    return found;
}

static inline void qt_vk_load_device_fns(qt_vk *v) {
#define QT_VK_LOADD(f) v->f = (PFN_##f)v->vkGetDeviceProcAddr(v->device, #f);
    QT_VK_DEV_FNS(QT_VK_LOADD)
#undef QT_VK_LOADD
}

static inline int qt_vk_load_instance_fns(qt_vk *v) {
#define QT_VK_LOADI(f) v->f = (PFN_##f)v->gipa(v->instance, #f);
    QT_VK_FNS(QT_VK_LOADI)
#undef QT_VK_LOADI
    return v->vkCreateDevice && v->vkGetDeviceProcAddr;
}

/* Makes the command pool, command buffer and fence on v's queue family. */
static inline int qt_vk_make_cmd(qt_vk *v) {
    VkCommandPoolCreateInfo pci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = v->family;
    if (v->vkCreateCommandPool(v->device, &pci, NULL, &v->pool) != VK_SUCCESS) return 0;
    VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = v->pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    if (v->vkAllocateCommandBuffers(v->device, &ai, &v->cmd) != VK_SUCCESS) return 0;
    VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    return v->vkCreateFence(v->device, &fci, NULL, &v->fence) == VK_SUCCESS;
}

/* Opens the loader, makes an instance (validation: the Khronos layer and a
 * counting messenger) and a device on physical device 0 with qattn's
 * features; `without` names one required feature to leave out (to test the
 * check) or is NULL. Returns 0 on success, 77 when there is no loader or
 * device (skip), 1 on failure (err says why). */
static inline int qt_vk_open(qt_vk *v, int validation, const char *without, char *err, size_t n) {
    memset(v, 0, sizeof *v);
    v->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!v->lib) {
        snprintf(err, n, "no libvulkan.so.1");
        return 77;
    }
    v->gipa = (PFN_vkGetInstanceProcAddr)dlsym(v->lib, "vkGetInstanceProcAddr");
    v->vkCreateInstance = v->gipa ? (PFN_vkCreateInstance)v->gipa(NULL, "vkCreateInstance") : NULL;
    if (!v->vkCreateInstance) {
        snprintf(err, n, "the loader has no vkCreateInstance");
        return 77;
    }
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "qattn-test";
    app.apiVersion = VK_API_VERSION_1_3;
    const char *layer = "VK_LAYER_KHRONOS_validation";
    const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkDebugUtilsMessengerCreateInfoEXT mci = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = qt_vk_on_message;
    mci.pUserData = v;
    VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    if (validation) {
        if (!qt_vk_has_layer(v, layer)) {
            snprintf(err, n, "validation asked for but VK_LAYER_KHRONOS_validation is not installed");
            return 77;
        }
        ici.enabledLayerCount = 1;
        ici.ppEnabledLayerNames = &layer;
        ici.enabledExtensionCount = 1;
        ici.ppEnabledExtensionNames = &ext;
        ici.pNext = &mci;
    }
    if (v->vkCreateInstance(&ici, NULL, &v->instance) != VK_SUCCESS) {
        snprintf(err, n, "vkCreateInstance failed");
        return 77;
    }
    v->own_instance = 1;
    if (!qt_vk_load_instance_fns(v)) {
        snprintf(err, n, "instance entry points missing");
        return 1;
    }
    if (validation && v->vkCreateDebugUtilsMessengerEXT(v->instance, &mci, NULL, &v->messenger) != VK_SUCCESS) {
        snprintf(err, n, "vkCreateDebugUtilsMessengerEXT failed");
        return 1;
    }
    uint32_t count = 1;
    VkResult r = v->vkEnumeratePhysicalDevices(v->instance, &count, &v->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
        snprintf(err, n, "no physical device");
        return 77;
    }
    v->vkGetPhysicalDeviceProperties(v->phys, &v->props);
    uint32_t nq = 0;
    v->vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16) nq = 16;
    v->vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &nq, qf);
    v->family = UINT32_MAX;
    for (uint32_t i = 0; i < nq && v->family == UINT32_MAX; ++i)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) v->family = i;
    if (v->family == UINT32_MAX) {
        snprintf(err, n, "no compute queue");
        return 77;
    }
    /* Enable what qattn requires, as an engine would. */
    v->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    v->f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    v->f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    v->f13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
    v->f2.pNext = &v->f11;
    v->f11.pNext = &v->f12;
    v->f12.pNext = &v->f13;
    v->f2.features.shaderInt64 = VK_TRUE;
    v->f2.features.shaderInt16 = VK_TRUE;
    v->f11.storageBuffer16BitAccess = VK_TRUE;
    v->f12.storageBuffer8BitAccess = VK_TRUE;
    v->f12.bufferDeviceAddress = VK_TRUE;
    v->f12.shaderInt8 = VK_TRUE;
    v->f12.shaderFloat16 = VK_TRUE;
    v->f13.maintenance4 = VK_TRUE;
    if (without && strcmp(without, "bufferDeviceAddress") == 0) v->f12.bufferDeviceAddress = VK_FALSE;
    if (without && strcmp(without, "shaderInt8") == 0) v->f12.shaderInt8 = VK_FALSE;
    if (without && strcmp(without, "shaderInt64") == 0) v->f2.features.shaderInt64 = VK_FALSE;
    if (without && strcmp(without, "maintenance4") == 0) v->f13.maintenance4 = VK_FALSE;
    if (without && strcmp(without, "shaderFloat16") == 0) v->f12.shaderFloat16 = VK_FALSE;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = v->family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &v->f2;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    if (v->vkCreateDevice(v->phys, &dci, NULL, &v->device) != VK_SUCCESS) {
        snprintf(err, n, "vkCreateDevice failed");
        return 1;
    }
    v->own_device = 1;
    qt_vk_load_device_fns(v);
    v->vkGetDeviceQueue(v->device, v->family, 0, &v->queue);
    if (!qt_vk_make_cmd(v)) {
        snprintf(err, n, "command pool/buffer/fence failed");
        return 1;
    }
    return 0;
}

/* Uses the objects a qattn context runs on (qattn_vulkan_get_device) instead
 * of making its own: for timing qattn's own device. */
static inline int qt_vk_attach(qt_vk *v, const qattn_vulkan_device *d) {
    memset(v, 0, sizeof *v);
    v->gipa = (PFN_vkGetInstanceProcAddr)d->get_instance_proc_addr;
    v->instance = d->instance;
    v->phys = d->physical_device;
    v->device = d->device;
    v->family = d->queue_family;
    if (!v->gipa || !qt_vk_load_instance_fns(v)) return 0;
    v->vkGetPhysicalDeviceProperties(v->phys, &v->props);
    qt_vk_load_device_fns(v);
    v->vkGetDeviceQueue(v->device, v->family, d->queue_index, &v->queue);
    return qt_vk_make_cmd(v);
}

/* The descriptor qattn_vulkan_context_create takes for v's device. */
static inline qattn_vulkan_device qt_vk_import_desc(const qt_vk *v) {
    qattn_vulkan_device d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.instance = v->instance;
    d.physical_device = v->phys;
    d.device = v->device;
    d.queue_family = v->family;
    d.queue_index = 0;
    d.enabled_features_chain = &v->f2;
    d.get_instance_proc_addr = (void (*(*)(VkInstance, const char *))(void))v->gipa;
    return d;
}

static inline void qt_vk_close(qt_vk *v) {
    if (v->device) {
        v->vkDeviceWaitIdle(v->device);
        if (v->fence) v->vkDestroyFence(v->device, v->fence, NULL);
        if (v->pool) v->vkDestroyCommandPool(v->device, v->pool, NULL);
        if (v->own_device) v->vkDestroyDevice(v->device, NULL);
    }
    if (v->messenger) v->vkDestroyDebugUtilsMessengerEXT(v->instance, v->messenger, NULL);
    if (v->own_instance) v->vkDestroyInstance(v->instance, NULL);
    if (v->lib) dlclose(v->lib);
    memset(v, 0, sizeof *v);
}

/* A buffer in host-visible coherent memory with a device address, mapped. */
typedef struct qt_vk_buf {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *map;
    VkDeviceSize bytes;
} qt_vk_buf;

static inline int qt_vk_buf_make(qt_vk *v, VkDeviceSize bytes, qt_vk_buf *b) {
    memset(b, 0, sizeof *b);
    VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (v->vkCreateBuffer(v->device, &bci, NULL, &b->buffer) != VK_SUCCESS) return 0;
    VkMemoryRequirements req;
    v->vkGetBufferMemoryRequirements(v->device, b->buffer, &req);
    VkPhysicalDeviceMemoryProperties mp;
    v->vkGetPhysicalDeviceMemoryProperties(v->phys, &mp);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; ++i)
        if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) type = i;
    if (type == UINT32_MAX) return 0;
    VkMemoryAllocateFlagsInfo fl = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    fl.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.pNext = &fl;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    if (v->vkAllocateMemory(v->device, &ai, NULL, &b->memory) != VK_SUCCESS) return 0;
    if (v->vkBindBufferMemory(v->device, b->buffer, b->memory, 0) != VK_SUCCESS) return 0;
    if (v->vkMapMemory(v->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->map) != VK_SUCCESS) return 0;
    b->bytes = bytes;
    return 1;
}

static inline void qt_vk_buf_free(qt_vk *v, qt_vk_buf *b) {
    if (b->buffer) v->vkDestroyBuffer(v->device, b->buffer, NULL);
    if (b->memory) v->vkFreeMemory(v->device, b->memory, NULL);
    memset(b, 0, sizeof *b);
}

/* A global memory barrier in v->cmd. */
static inline void qt_vk_cmd_barrier(qt_vk *v, VkPipelineStageFlags src, VkAccessFlags src_access,
                              VkPipelineStageFlags dst, VkAccessFlags dst_access) {
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = src_access;
    mb.dstAccessMask = dst_access;
    v->vkCmdPipelineBarrier(v->cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static inline int qt_vk_cmd_begin(qt_vk *v) {
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    return v->vkResetCommandBuffer(v->cmd, 0) == VK_SUCCESS && v->vkBeginCommandBuffer(v->cmd, &bi) == VK_SUCCESS;
}

/* Ends, submits and waits for v->cmd. */
static inline int qt_vk_cmd_submit_wait(qt_vk *v) {
    if (v->vkEndCommandBuffer(v->cmd) != VK_SUCCESS) return 0;
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &v->cmd;
    return v->vkResetFences(v->device, 1, &v->fence) == VK_SUCCESS &&
           v->vkQueueSubmit(v->queue, 1, &si, v->fence) == VK_SUCCESS &&
           v->vkWaitForFences(v->device, 1, &v->fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS;
}

#endif /* QATTN_TEST_QT_VK_H */
