/* Vulkan instance and device: loader (volk), optional validation layer with a
 * message collector, device selection or import, feature enabling and
 * checking, and the device's capabilities.
 *
 * No Vulkan entry point is shared between contexts: volk's global loader
 * functions (vkCreateInstance, ...) are loaded once, instance-level ones go
 * into the context's own table (vki) and device-level ones into its
 * VolkDeviceTable (vkd). */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* Extension values newer than the headers this may be built against. */
#ifndef VK_KHR_shader_bfloat16
#define QATTN_VK_STYPE_BF16_FEATURES ((VkStructureType)1000141000)
#define QATTN_VK_COMPONENT_BF16 ((VkComponentTypeKHR)1000141000)
#else
#define QATTN_VK_STYPE_BF16_FEATURES VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR
#define QATTN_VK_COMPONENT_BF16 VK_COMPONENT_TYPE_BFLOAT16_KHR
#endif
#ifndef VK_EXT_shader_float8
#define QATTN_VK_STYPE_FP8_FEATURES ((VkStructureType)1000567000)
#define QATTN_VK_COMPONENT_E4M3 ((VkComponentTypeKHR)1000491002)
#else
#define QATTN_VK_STYPE_FP8_FEATURES VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT8_FEATURES_EXT
#define QATTN_VK_COMPONENT_E4M3 VK_COMPONENT_TYPE_FLOAT8_E4M3_EXT
#endif

/* The features structs of both extensions have the same layout: sType,
 * pNext, then VkBool32 flags. */
typedef struct qattn_vk_ext_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 f[3];
} qattn_vk_ext_features;

/* ---- loading ------------------------------------------------------------ */

static pthread_once_t loader_once = PTHREAD_ONCE_INIT;
static VkResult loader_result = VK_ERROR_INITIALIZATION_FAILED;
static void load_loader(void) { loader_result = volkInitialize(); }

/* volkLoadDeviceTable reads volk's global vkGetDeviceProcAddr; it is set to
 * this context's instance's one and read under this lock only. */
static pthread_mutex_t device_table_lock = PTHREAD_MUTEX_INITIALIZER;

/* Loads vk->vki from vk->instance; returns the name of a missing required
 * entry point, or NULL. */
static const char *load_instance_table(qattn_vk *vk, PFN_vkGetInstanceProcAddr gipa) {
    qattn_vk_instance_table *t = &vk->vki;
    memset(t, 0, sizeof *t);
    t->vkGetInstanceProcAddr = gipa;
#define QVK_LOAD(f) t->f = (PFN_##f)gipa(vk->instance, #f)
    QVK_LOAD(vkDestroyInstance);
    QVK_LOAD(vkEnumeratePhysicalDevices);
    QVK_LOAD(vkGetPhysicalDeviceProperties);
    QVK_LOAD(vkGetPhysicalDeviceProperties2);
    QVK_LOAD(vkGetPhysicalDeviceFeatures2);
    QVK_LOAD(vkGetPhysicalDeviceMemoryProperties);
    QVK_LOAD(vkGetPhysicalDeviceQueueFamilyProperties);
    QVK_LOAD(vkEnumerateDeviceExtensionProperties);
    QVK_LOAD(vkCreateDevice);
    QVK_LOAD(vkGetDeviceProcAddr);
    QVK_LOAD(vkCreateDebugUtilsMessengerEXT);
    QVK_LOAD(vkDestroyDebugUtilsMessengerEXT);
    QVK_LOAD(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR);
#undef QVK_LOAD
    if (!t->vkDestroyInstance) return "vkDestroyInstance";
    if (!t->vkEnumeratePhysicalDevices) return "vkEnumeratePhysicalDevices";
    if (!t->vkGetPhysicalDeviceProperties) return "vkGetPhysicalDeviceProperties";
    if (!t->vkGetPhysicalDeviceProperties2) return "vkGetPhysicalDeviceProperties2";
    if (!t->vkGetPhysicalDeviceFeatures2) return "vkGetPhysicalDeviceFeatures2";
    if (!t->vkGetPhysicalDeviceMemoryProperties) return "vkGetPhysicalDeviceMemoryProperties";
    if (!t->vkGetPhysicalDeviceQueueFamilyProperties) return "vkGetPhysicalDeviceQueueFamilyProperties";
    if (!t->vkEnumerateDeviceExtensionProperties) return "vkEnumerateDeviceExtensionProperties";
    if (!t->vkCreateDevice) return "vkCreateDevice";
    if (!t->vkGetDeviceProcAddr) return "vkGetDeviceProcAddr";
    return NULL;
}

static void load_device_table(qattn_vk *vk) {
    pthread_mutex_lock(&device_table_lock);
    PFN_vkGetDeviceProcAddr saved = vkGetDeviceProcAddr;
    vkGetDeviceProcAddr = vk->vki.vkGetDeviceProcAddr;
    volkLoadDeviceTable(&vk->vkd, vk->device);
    vkGetDeviceProcAddr = saved;
    pthread_mutex_unlock(&device_table_lock);
}

static void msg_append(qattn_vk *vk, const char *text) {
    size_t used = strlen(vk->messages);
    if (used + 2 >= sizeof vk->messages) return; /* keep the first ones */
    snprintf(vk->messages + used, sizeof vk->messages - used, "%s%s", used ? "\n" : "", text);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    qattn_vk *vk = (qattn_vk *)user;
    if (!(severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
        return VK_FALSE;
    vk->n_messages++;
    msg_append(vk, data && data->pMessage ? data->pMessage : "(validation message without text)");
    return VK_FALSE;
}

static int has_ext(const VkExtensionProperties *ext, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; ++i)
        if (strcmp(ext[i].extensionName, name) == 0) return 1;
    return 0;
}

static int has_layer(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkLayerProperties *l = calloc(n, sizeof *l);
    if (!l) return 0;
    int found = 0;
    if (vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; ++i) found |= strcmp(l[i].layerName, name) == 0;
    free(l);
    return found;
}

static int str_contains_ci(const char *hay, const char *needle) {
    size_t nl = strlen(needle);
    for (const char *h = hay; *h; ++h) {
        size_t i = 0;
        while (i < nl && h[i] && tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i])) ++i;
        if (i == nl) return 1;
    }
    return nl == 0;
}

static int all_digits(const char *s) {
    if (!*s) return 0;
    for (; *s; ++s)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* Picks the physical device: selector = decimal index or name substring. */
static qattn_status pick_device(qattn_vk *vk, const char *sel, char *err, size_t n) {
    uint32_t count = 0;
    VkResult r = vk->vki.vkEnumeratePhysicalDevices(vk->instance, &count, NULL);
    if (r != VK_SUCCESS || count == 0) {
        snprintf(err, n, "vulkan: no physical device (%s)", qattn_vk_result_name(r));
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    VkPhysicalDevice *devs = calloc(count, sizeof *devs);
    if (!devs) return QATTN_ERR_OUT_OF_MEMORY;
    vk->vki.vkEnumeratePhysicalDevices(vk->instance, &count, devs);
    int chosen = -1;
    if (!sel || !*sel) {
        chosen = 0;
    } else if (all_digits(sel)) {
        long idx = strtol(sel, NULL, 10);
        if (idx >= 0 && idx < (long)count) chosen = (int)idx;
    } else {
        for (uint32_t i = 0; i < count && chosen < 0; ++i) {
            VkPhysicalDeviceProperties p;
            vk->vki.vkGetPhysicalDeviceProperties(devs[i], &p);
            if (str_contains_ci(p.deviceName, sel)) chosen = (int)i;
        }
    }
    if (chosen < 0) {
        int used = snprintf(err, n, "vulkan: no device matches \"%s\" among:", sel);
        for (uint32_t i = 0; i < count && used > 0 && (size_t)used < n; ++i) {
            VkPhysicalDeviceProperties p;
            vk->vki.vkGetPhysicalDeviceProperties(devs[i], &p);
            used += snprintf(err + used, n - (size_t)used, " [%u] %s", i, p.deviceName);
        }
        free(devs);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    vk->phys = devs[chosen];
    free(devs);
    vk->vki.vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
    return QATTN_OK;
}

static qattn_status create_instance(qattn_vk *vk, int validation, char *err, size_t n) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "qattn";
    app.pEngineName = "qattn";
    app.apiVersion = VK_API_VERSION_1_3;
    const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
    const char *exts[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkDebugUtilsMessengerCreateInfoEXT mci = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = on_debug_message;
    mci.pUserData = vk;
    VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    if (validation) {
        if (!has_layer(layers[0])) {
            snprintf(err, n, "vulkan: debug_validation asked for but VK_LAYER_KHRONOS_validation is "
                             "not installed");
            return QATTN_ERR_BACKEND_UNAVAILABLE;
        }
        ci.enabledLayerCount = 1;
        ci.ppEnabledLayerNames = layers;
        ci.enabledExtensionCount = 1;
        ci.ppEnabledExtensionNames = exts;
        ci.pNext = &mci; /* also catches messages of instance creation */
    }
    VkResult r = vkCreateInstance(&ci, NULL, &vk->instance);
    if (r != VK_SUCCESS) {
        snprintf(err, n, "vulkan: vkCreateInstance failed (%s)", qattn_vk_result_name(r));
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    const char *missing = load_instance_table(vk, vkGetInstanceProcAddr);
    if (missing) {
        snprintf(err, n, "vulkan: the instance has no %s", missing);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    if (validation) {
        if (!vk->vki.vkCreateDebugUtilsMessengerEXT || !vk->vki.vkDestroyDebugUtilsMessengerEXT) {
            snprintf(err, n, "vulkan: the instance has no VK_EXT_debug_utils entry points");
            return QATTN_ERR_BACKEND_UNAVAILABLE;
        }
        r = vk->vki.vkCreateDebugUtilsMessengerEXT(vk->instance, &mci, NULL, &vk->messenger);
        if (r != VK_SUCCESS) {
            snprintf(err, n, "vulkan: vkCreateDebugUtilsMessengerEXT failed (%s)",
                     qattn_vk_result_name(r));
            return QATTN_ERR_BACKEND_UNAVAILABLE;
        }
    }
    return QATTN_OK;
}

/* Finds a memory type with `want` flags among `bits`; UINT32_MAX if none. */
static uint32_t find_memory(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                            VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp->memoryTypeCount; ++i)
        if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want) return i;
    return UINT32_MAX;
}

/* The features qattn's shaders use: required ones first. */
typedef struct qattn_vk_feats {
    VkBool32 bda, s8, s16, i64, i16, i8, maint4, f16; /* required */
    VkBool32 vmm, vmm_dev, sgsc, cfs, coop;            /* used when present */
} qattn_vk_feats;

/* The first required feature `f` lacks, named as in the Vulkan spec; NULL
 * when none. */
static const char *first_missing(const qattn_vk_feats *f) {
    if (!f->bda) return "bufferDeviceAddress (VkPhysicalDeviceVulkan12Features)";
    if (!f->s8) return "storageBuffer8BitAccess (VkPhysicalDeviceVulkan12Features)";
    if (!f->s16) return "storageBuffer16BitAccess (VkPhysicalDeviceVulkan11Features)";
    if (!f->i64) return "shaderInt64 (VkPhysicalDeviceFeatures)";
    if (!f->i16) return "shaderInt16 (VkPhysicalDeviceFeatures)";
    if (!f->i8) return "shaderInt8 (VkPhysicalDeviceVulkan12Features)";
    /* The shaders size their workgroups with specialization constants
     * (LocalSizeId), which needs maintenance4. */
    if (!f->maint4) return "maintenance4 (VkPhysicalDeviceVulkan13Features)";
    /* The decode tiles are staged in f16. */
    if (!f->f16) return "shaderFloat16 (VkPhysicalDeviceVulkan12Features)";
    return NULL;
}

/* What the device offers: extensions (as flags) and features. */
typedef struct qattn_vk_offer {
    int e_coop, e_bf16, e_nvsm, e_pexec, e_amdcore;
    qattn_vk_feats f;
    VkBool32 bf16;
} qattn_vk_offer;

/* Device properties every context needs, whoever made the device. */
static qattn_status check_properties(qattn_vk *vk, char *err, size_t n) {
    if (VK_API_VERSION_MAJOR(vk->props.apiVersion) == 1 &&
        VK_API_VERSION_MINOR(vk->props.apiVersion) < 3) {
        snprintf(err, n, "vulkan: %s offers Vulkan %u.%u, qattn needs 1.3", vk->props.deviceName,
                 VK_API_VERSION_MAJOR(vk->props.apiVersion), VK_API_VERSION_MINOR(vk->props.apiVersion));
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    if (vk->props.limits.maxPushConstantsSize < QATTN_VK_PUSH_BYTES) {
        snprintf(err, n, "vulkan: %s has %u bytes of push constants, qattn needs %u",
                 vk->props.deviceName, vk->props.limits.maxPushConstantsSize, QATTN_VK_PUSH_BYTES);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    VkPhysicalDeviceSubgroupProperties sgp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sgp;
    vk->vki.vkGetPhysicalDeviceProperties2(vk->phys, &p2);
    const VkSubgroupFeatureFlags need_sg =
        VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
        VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT |
        VK_SUBGROUP_FEATURE_BALLOT_BIT | VK_SUBGROUP_FEATURE_VOTE_BIT;
    if (!(sgp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
        (sgp.supportedOperations & need_sg) != need_sg) {
        snprintf(err, n, "vulkan: %s lacks subgroup basic/arithmetic/shuffle/ballot/vote in compute",
                 vk->props.deviceName);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    return QATTN_OK;
}

static qattn_status query_offer(qattn_vk *vk, qattn_vk_offer *o) {
    memset(o, 0, sizeof *o);
    uint32_t n_ext = 0;
    vk->vki.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext) return QATTN_ERR_OUT_OF_MEMORY;
    vk->vki.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n_ext, ext);
    o->e_coop = has_ext(ext, n_ext, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    o->e_bf16 = has_ext(ext, n_ext, "VK_KHR_shader_bfloat16");
    const int e_fp8 = has_ext(ext, n_ext, "VK_EXT_shader_float8");
    o->e_nvsm = has_ext(ext, n_ext, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    o->e_pexec = has_ext(ext, n_ext, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    o->e_amdcore = has_ext(ext, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_2_EXTENSION_NAME) &&
                   has_ext(ext, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
    free(ext);

    qattn_vk_ext_features fp8 = {QATTN_VK_STYPE_FP8_FEATURES, NULL, {0}};
    qattn_vk_ext_features bf16 = {QATTN_VK_STYPE_BF16_FEATURES, NULL, {0}};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    VkPhysicalDeviceVulkan13Features f13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &f11;
    f11.pNext = &f12;
    f12.pNext = &f13;
    void **tail = &f13.pNext;
    if (o->e_coop) { *tail = &coop; tail = &coop.pNext; }
    if (o->e_bf16) { *tail = &bf16; tail = &bf16.pNext; }
    if (e_fp8) { *tail = &fp8; tail = &fp8.pNext; }
    vk->vki.vkGetPhysicalDeviceFeatures2(vk->phys, &f2);
    qattn_vk_feats *f = &o->f;
    f->bda = f12.bufferDeviceAddress;
    f->s8 = f12.storageBuffer8BitAccess;
    f->s16 = f11.storageBuffer16BitAccess;
    f->i64 = f2.features.shaderInt64;
    f->i16 = f2.features.shaderInt16;
    f->i8 = f12.shaderInt8;
    f->f16 = f12.shaderFloat16;
    f->vmm = f12.vulkanMemoryModel;
    f->vmm_dev = f12.vulkanMemoryModelDeviceScope;
    f->sgsc = f13.subgroupSizeControl;
    f->cfs = f13.computeFullSubgroups;
    f->maint4 = f13.maintenance4;
    f->coop = o->e_coop && coop.cooperativeMatrix;
    o->bf16 = o->e_bf16 && bf16.f[0];
    return QATTN_OK;
}

/* Queue, memory types and capabilities of a device created with `en`
 * enabled (coop only together with its extension). */
static qattn_status setup_device(qattn_vk *vk, const qattn_vk_offer *o, const qattn_vk_feats *en,
                                 char *err, size_t n) {
    vk->has_coopmat = en->coop && en->f16 && en->vmm;
    load_device_table(vk);
    vk->vkd.vkGetDeviceQueue(vk->device, vk->queue_family, vk->queue_index, &vk->queue);
    if (!vk->queue) {
        snprintf(err, n, "vulkan: vkGetDeviceQueue(family %u, index %u) gave no queue", vk->queue_family,
                 vk->queue_index);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    uint32_t nq = 0;
    vk->vki.vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    if (!qf) return QATTN_ERR_OUT_OF_MEMORY;
    vk->vki.vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, qf);
    const uint32_t ts_bits = vk->queue_family < nq ? qf[vk->queue_family].timestampValidBits : 0;
    free(qf);

    VkPhysicalDeviceMemoryProperties mp;
    vk->vki.vkGetPhysicalDeviceMemoryProperties(vk->phys, &mp);
    vk->mem_device = find_memory(&mp, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    vk->mem_staging = find_memory(&mp, ~0u, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                                VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (vk->mem_staging == UINT32_MAX)
        vk->mem_staging = find_memory(&mp, ~0u, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (vk->mem_device == UINT32_MAX) vk->mem_device = 0;
    if (vk->mem_staging == UINT32_MAX) {
        snprintf(err, n, "vulkan: %s has no host-visible coherent memory", vk->props.deviceName);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }

    /* Optional sources of caps. */
    VkPhysicalDeviceSubgroupProperties sgp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceVulkan13Properties p13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nvsm = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceShaderCoreProperties2AMD amd2 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_2_AMD};
    VkPhysicalDeviceShaderCorePropertiesAMD amd1 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    VkPhysicalDeviceMaintenance3Properties m3 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceMaintenance4Properties m4 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sgp;
    sgp.pNext = &p13;
    p13.pNext = &m3;
    m3.pNext = &m4;
    void **ptail = &m4.pNext;
    if (o->e_nvsm) { *ptail = &nvsm; ptail = &nvsm.pNext; }
    if (o->e_amdcore) { *ptail = &amd2; amd2.pNext = &amd1; ptail = &amd1.pNext; }
    vk->vki.vkGetPhysicalDeviceProperties2(vk->phys, &p2);

    vk->max_buffer_bytes = m4.maxBufferSize;
    vk->max_allocation_bytes = m3.maxMemoryAllocationSize;

    qattn_device_caps *c = &vk->caps;
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "vulkan:%.80s", vk->props.deviceName);
    snprintf(c->device_name, sizeof c->device_name, "%.120s", vk->props.deviceName);
    if (o->e_nvsm) c->compute_units = (int32_t)nvsm.shaderSMCount;
    else if (o->e_amdcore) c->compute_units = (int32_t)amd2.activeComputeUnitCount;
    else c->compute_units = 0; /* unknown: planners assume a default */
    c->subgroup_size_min = o->f.sgsc ? p13.minSubgroupSize : sgp.subgroupSize;
    c->subgroup_size_max = o->f.sgsc ? p13.maxSubgroupSize : sgp.subgroupSize;
    if (c->subgroup_size_min == 0) c->subgroup_size_min = sgp.subgroupSize;
    if (c->subgroup_size_max == 0) c->subgroup_size_max = sgp.subgroupSize;
    c->max_shared_bytes = vk->props.limits.maxComputeSharedMemorySize;
    c->max_workgroup_size = vk->props.limits.maxComputeWorkGroupInvocations;
    if (vk->props.limits.maxComputeWorkGroupSize[0] < c->max_workgroup_size)
        c->max_workgroup_size = vk->props.limits.maxComputeWorkGroupSize[0];
    c->features = QATTN_FEAT_STORAGE_8BIT | QATTN_FEAT_STORAGE_16BIT;
    /* The packed fp8 reader converts four codes per 32-bit word with integer
     * operations every device accepted here has. */
    c->features |= QATTN_FEAT_PACKED_FP8_CVT;
    if (en->f16) c->features |= QATTN_FEAT_SHADER_F16;
    if (o->bf16) c->features |= QATTN_FEAT_BF16;
    vk->has_subgroup_size_control = en->sgsc && en->cfs &&
                                    (p13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
    if (vk->has_subgroup_size_control) c->features |= QATTN_FEAT_SUBGROUP_SIZE_CONTROL;
    if (ts_bits > 0 && vk->props.limits.timestampPeriod > 0.0f) {
        c->features |= QATTN_FEAT_TIMESTAMPS;
        vk->timestamp_period_ns = vk->props.limits.timestampPeriod;
        vk->timestamp_mask = ts_bits >= 64 ? UINT64_MAX : ((1ull << ts_bits) - 1ull);
    }
    if (vk->has_coopmat && vk->vki.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) {
        uint32_t np = 0;
        vk->vki.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(vk->phys, &np, NULL);
        VkCooperativeMatrixPropertiesKHR *cp = calloc(np ? np : 1, sizeof *cp);
        if (!cp) return QATTN_ERR_OUT_OF_MEMORY;
        for (uint32_t i = 0; i < np; ++i) cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
        vk->vki.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(vk->phys, &np, cp);
        for (uint32_t i = 0; i < np && c->n_matrix_shapes < QATTN_MAX_MATRIX_SHAPES; ++i) {
            if (cp[i].scope != VK_SCOPE_SUBGROUP_KHR || cp[i].AType != cp[i].BType ||
                cp[i].CType != cp[i].ResultType)
                continue;
            qattn_dtype a = QATTN_DTYPE_INVALID, cc = QATTN_DTYPE_INVALID;
            if (cp[i].AType == VK_COMPONENT_TYPE_FLOAT16_KHR) a = QATTN_F16;
            else if (cp[i].AType == QATTN_VK_COMPONENT_BF16) a = QATTN_BF16;
            else if (cp[i].AType == VK_COMPONENT_TYPE_SINT8_KHR) a = QATTN_I8;
            else if (cp[i].AType == QATTN_VK_COMPONENT_E4M3) a = QATTN_FP8_E4M3FN;
            if (cp[i].CType == VK_COMPONENT_TYPE_FLOAT32_KHR) cc = QATTN_F32;
            else if (cp[i].CType == VK_COMPONENT_TYPE_FLOAT16_KHR) cc = QATTN_F16;
            else if (cp[i].CType == VK_COMPONENT_TYPE_SINT32_KHR) cc = QATTN_I32;
            if (a == QATTN_DTYPE_INVALID || cc == QATTN_DTYPE_INVALID) continue;
            qattn_matrix_shape *s = &c->matrix_shapes[c->n_matrix_shapes++];
            s->m = (uint16_t)cp[i].MSize;
            s->n = (uint16_t)cp[i].NSize;
            s->k = (uint16_t)cp[i].KSize;
            s->a_type = a;
            s->c_type = cc;
            if (a == QATTN_FP8_E4M3FN) {
                c->features |= QATTN_FEAT_FP8_MATRIX;
                c->fp8_matrix_native = QATTN_FP8_E4M3FN;
            }
        }
        free(cp);
        if (c->n_matrix_shapes > 0) c->features |= QATTN_FEAT_COOPMAT;
    }
    return QATTN_OK;
}

static qattn_status create_device(qattn_vk *vk, char *err, size_t n) {
    qattn_status s = check_properties(vk, err, n);
    if (s != QATTN_OK) return s;
    qattn_vk_offer o;
    if ((s = query_offer(vk, &o)) != QATTN_OK) return s;
    const char *missing = first_missing(&o.f);
    if (missing) {
        snprintf(err, n, "vulkan: %s lacks the feature %s", vk->props.deviceName, missing);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }

    /* What we enable: only what the shaders use. */
    qattn_vk_feats en = o.f;
    en.coop = o.f.coop && o.f.f16 && o.f.vmm;
    VkPhysicalDeviceFeatures2 e2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    VkPhysicalDeviceVulkan11Features e11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features e12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan13Features e13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR ecoop = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    e2.pNext = &e11;
    e11.pNext = &e12;
    e12.pNext = &e13;
    e2.features.shaderInt64 = VK_TRUE;
    e2.features.shaderInt16 = VK_TRUE;
    e11.storageBuffer16BitAccess = VK_TRUE;
    e12.storageBuffer8BitAccess = VK_TRUE;
    e12.bufferDeviceAddress = VK_TRUE;
    e12.shaderInt8 = VK_TRUE;
    e12.shaderFloat16 = en.f16;
    e12.vulkanMemoryModel = en.vmm;
    e12.vulkanMemoryModelDeviceScope = en.vmm_dev;
    e13.subgroupSizeControl = en.sgsc;
    e13.computeFullSubgroups = en.cfs;
    e13.maintenance4 = VK_TRUE;
    const char *dev_exts[3];
    uint32_t n_dev_exts = 0;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pexec = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    if (vk->capture && o.e_pexec) {
        pexec.pipelineExecutableInfo = VK_TRUE;
        pexec.pNext = e13.pNext;
        e13.pNext = &pexec;
        dev_exts[n_dev_exts++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    } else {
        vk->capture = 0;
    }
    if (en.coop) {
        ecoop.cooperativeMatrix = VK_TRUE;
        ecoop.pNext = e13.pNext;
        e13.pNext = &ecoop;
        dev_exts[n_dev_exts++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    }

    uint32_t nq = 0;
    vk->vki.vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    if (!qf) return QATTN_ERR_OUT_OF_MEMORY;
    vk->vki.vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, qf);
    /* The first compute family that also does graphics is the device's main
     * queue (fastest submission on most drivers); else any compute family. */
    uint32_t fam = UINT32_MAX;
    for (uint32_t i = 0; i < nq && fam == UINT32_MAX; ++i)
        if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && (qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) fam = i;
    for (uint32_t i = 0; i < nq && fam == UINT32_MAX; ++i)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = i;
    free(qf);
    if (fam == UINT32_MAX) {
        snprintf(err, n, "vulkan: %s has no compute queue", vk->props.deviceName);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    vk->queue_family = fam;
    vk->queue_index = 0;

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = fam;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &e2;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.enabledExtensionCount = n_dev_exts;
    dci.ppEnabledExtensionNames = dev_exts;
    VkResult r = vk->vki.vkCreateDevice(vk->phys, &dci, NULL, &vk->device);
    if (r != VK_SUCCESS) {
        snprintf(err, n, "vulkan: vkCreateDevice on %s failed (%s)", vk->props.deviceName,
                 qattn_vk_result_name(r));
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    return setup_device(vk, &o, &en, err, n);
}

/* ---- import ------------------------------------------------------------- */

/* The features a caller's VkDeviceCreateInfo enabled: its pNext chain (the
 * 1.1-1.3 aggregate structs or the single-feature structs they replace) and
 * pEnabledFeatures. */
static void enabled_from_chain(const void *chain, const VkPhysicalDeviceFeatures *f10,
                               qattn_vk_feats *en) {
    memset(en, 0, sizeof *en);
    if (f10) {
        en->i64 = f10->shaderInt64;
        en->i16 = f10->shaderInt16;
    }
    /* A cycle in the chain is the caller's bug; the bound keeps it finite. */
    int guard = 0;
    for (const VkBaseInStructure *p = (const VkBaseInStructure *)chain; p && guard < 256;
         p = p->pNext, ++guard) {
        switch (p->sType) {
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2: {
            const VkPhysicalDeviceFeatures2 *f = (const void *)p;
            en->i64 |= f->features.shaderInt64;
            en->i16 |= f->features.shaderInt16;
            break;
        }
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
            en->s16 |= ((const VkPhysicalDeviceVulkan11Features *)(const void *)p)->storageBuffer16BitAccess;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
            const VkPhysicalDeviceVulkan12Features *f = (const void *)p;
            en->bda |= f->bufferDeviceAddress;
            en->s8 |= f->storageBuffer8BitAccess;
            en->i8 |= f->shaderInt8;
            en->f16 |= f->shaderFloat16;
            en->vmm |= f->vulkanMemoryModel;
            en->vmm_dev |= f->vulkanMemoryModelDeviceScope;
            break;
        }
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES: {
            const VkPhysicalDeviceVulkan13Features *f = (const void *)p;
            en->sgsc |= f->subgroupSizeControl;
            en->cfs |= f->computeFullSubgroups;
            en->maint4 |= f->maintenance4;
            break;
        }
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES:
            en->bda |= ((const VkPhysicalDeviceBufferDeviceAddressFeatures *)(const void *)p)->bufferDeviceAddress;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES:
            en->s8 |= ((const VkPhysicalDevice8BitStorageFeatures *)(const void *)p)->storageBuffer8BitAccess;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
            en->s16 |= ((const VkPhysicalDevice16BitStorageFeatures *)(const void *)p)->storageBuffer16BitAccess;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES: {
            const VkPhysicalDeviceShaderFloat16Int8Features *f = (const void *)p;
            en->f16 |= f->shaderFloat16;
            en->i8 |= f->shaderInt8;
            break;
        }
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES: {
            const VkPhysicalDeviceVulkanMemoryModelFeatures *f = (const void *)p;
            en->vmm |= f->vulkanMemoryModel;
            en->vmm_dev |= f->vulkanMemoryModelDeviceScope;
            break;
        }
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES: {
            const VkPhysicalDeviceSubgroupSizeControlFeatures *f = (const void *)p;
            en->sgsc |= f->subgroupSizeControl;
            en->cfs |= f->computeFullSubgroups;
            break;
        }
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES:
            en->maint4 |= ((const VkPhysicalDeviceMaintenance4Features *)(const void *)p)->maintenance4;
            break;
        case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR:
            en->coop |= ((const VkPhysicalDeviceCooperativeMatrixFeaturesKHR *)(const void *)p)->cooperativeMatrix;
            break;
        default:
            break;
        }
    }
}

static qattn_status import_device(qattn_vk *vk, const qattn_vulkan_device *d, char *err, size_t n) {
    vk->phys = d->physical_device;
    vk->device = d->device;
    vk->queue_family = d->queue_family;
    vk->queue_index = d->queue_index;
    vk->vki.vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
    qattn_status s = check_properties(vk, err, n);
    if (s != QATTN_OK) return s;
    uint32_t nq = 0;
    vk->vki.vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    if (!qf) return QATTN_ERR_OUT_OF_MEMORY;
    vk->vki.vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, qf);
    const int fam_ok = d->queue_family < nq;
    const VkQueueFamilyProperties fam = fam_ok ? qf[d->queue_family] : (VkQueueFamilyProperties){0};
    free(qf);
    if (!fam_ok) {
        snprintf(err, n, "device->queue_family: %u, but %s has %u queue families", d->queue_family,
                 vk->props.deviceName, nq);
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    if (!(fam.queueFlags & VK_QUEUE_COMPUTE_BIT)) {
        snprintf(err, n, "device->queue_family: family %u has no VK_QUEUE_COMPUTE_BIT", d->queue_family);
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    if (d->queue_index >= fam.queueCount) {
        snprintf(err, n, "device->queue_index: %u, but family %u has %u queues", d->queue_index,
                 d->queue_family, fam.queueCount);
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    qattn_vk_offer o;
    if ((s = query_offer(vk, &o)) != QATTN_OK) return s;
    qattn_vk_feats en;
    enabled_from_chain(d->enabled_features_chain, (const VkPhysicalDeviceFeatures *)d->enabled_features_10,
                       &en);
    const char *missing = first_missing(&en);
    if (missing) {
        snprintf(err, n, "vulkan: the imported device was created without the feature %s, which qattn "
                         "needs%s", missing, first_missing(&o.f) ? " (and the device does not offer it)" : "");
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    int coop_ext = 0;
    for (uint32_t i = 0; i < d->enabled_extension_count; ++i)
        if (d->enabled_extensions && d->enabled_extensions[i] &&
            strcmp(d->enabled_extensions[i], VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME) == 0)
            coop_ext = 1;
    en.coop = en.coop && coop_ext && o.f.coop;
    /* Enabled implies offered for a valid device; intersect anyway so an
     * inconsistent descriptor cannot make qattn use what is not there. */
    en.f16 &= o.f.f16;
    en.vmm &= o.f.vmm;
    en.vmm_dev &= o.f.vmm_dev;
    en.sgsc &= o.f.sgsc;
    en.cfs &= o.f.cfs;
    return setup_device(vk, &o, &en, err, n);
}

static qattn_status create_runtime(qattn_vk *vk, char *err, size_t n) {
    VkCommandPoolCreateInfo pci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = vk->queue_family;
    VkResult r = vk->vkd.vkCreateCommandPool(vk->device, &pci, NULL, &vk->pool);
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ai.commandPool = vk->pool;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        r = vk->vkd.vkAllocateCommandBuffers(vk->device, &ai, &vk->cmd);
    }
    if (r == VK_SUCCESS) {
        VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vk->vkd.vkCreateFence(vk->device, &fci, NULL, &vk->fence);
    }
    if (r == VK_SUCCESS && vk->timestamp_period_ns > 0.0) {
        VkQueryPoolCreateInfo qci = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qci.queryCount = 2;
        r = vk->vkd.vkCreateQueryPool(vk->device, &qci, NULL, &vk->timestamps);
    }
    if (r == VK_SUCCESS) {
        VkPipelineCacheCreateInfo cci = {VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
        r = vk->vkd.vkCreatePipelineCache(vk->device, &cci, NULL, &vk->pipeline_cache);
    }
    if (r == VK_SUCCESS) {
        VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, QATTN_VK_PUSH_BYTES};
        VkPipelineLayoutCreateInfo lci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        lci.pushConstantRangeCount = 1;
        lci.pPushConstantRanges = &range;
        r = vk->vkd.vkCreatePipelineLayout(vk->device, &lci, NULL, &vk->layout);
    }
    if (r != VK_SUCCESS) {
        snprintf(err, n, "vulkan: creating command pool/fence/queries/pipeline cache/layout failed (%s)",
                 qattn_vk_result_name(r));
        return r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY
                   ? QATTN_ERR_OUT_OF_MEMORY
                   : QATTN_ERR_DEVICE;
    }
    return QATTN_OK;
}

qattn_status qattn_vk_create(const qattn_context_options *options, void **be, char *err,
                             size_t err_size) {
    return qattn_vk_create_ex(options, 0, be, err, err_size);
}

/* Loads the system's Vulkan loader once per process (volk's global-level
 * entry points never change afterwards). */
static qattn_status need_loader(char *err, size_t n) {
    pthread_once(&loader_once, load_loader);
    if (loader_result != VK_SUCCESS) {
        snprintf(err, n, "vulkan: no Vulkan loader (libvulkan) found");
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    return QATTN_OK;
}

/* The end of every creation: validation spoke, or the context is ready. */
static qattn_status finish_create(qattn_vk *vk, qattn_status s, void **be, char *err, size_t err_size) {
    if (s == QATTN_OK && vk->n_messages > 0) {
        snprintf(err, err_size, "vulkan: validation during device creation: %s", vk->messages);
        s = QATTN_ERR_DEVICE;
    }
    if (s != QATTN_OK) {
        if (s == QATTN_ERR_OUT_OF_MEMORY && !err[0]) snprintf(err, err_size, "vulkan: out of host memory");
        qattn_vk_destroy(vk);
        return s;
    }
    *be = vk;
    return QATTN_OK;
}

qattn_status qattn_vk_create_ex(const qattn_context_options *options, int capture, void **be,
                                char *err, size_t err_size) {
    char scratch[8];
    if (!err || err_size == 0) {
        err = scratch;
        err_size = sizeof scratch;
    }
    err[0] = '\0';
    *be = NULL;
    qattn_status s = need_loader(err, err_size);
    if (s != QATTN_OK) return s;
    qattn_vk *vk = calloc(1, sizeof *vk);
    if (!vk) return QATTN_ERR_OUT_OF_MEMORY;
    vk->debug_validation = options && options->debug_validation;
    vk->capture = capture;
    const char *sel = options ? options->device : NULL;
    if (!sel || !*sel) sel = getenv("QATTN_VULKAN_DEVICE");
    s = create_instance(vk, vk->debug_validation, err, err_size);
    if (s == QATTN_OK) s = pick_device(vk, sel, err, err_size);
    if (s == QATTN_OK) s = create_device(vk, err, err_size);
    if (s == QATTN_OK) s = create_runtime(vk, err, err_size);
    return finish_create(vk, s, be, err, err_size);
}

qattn_status qattn_vk_import(const qattn_vulkan_device *d, const qattn_context_options *options, void **be,
                             char *err, size_t err_size) {
    *be = NULL;
    if (!d) {
        snprintf(err, err_size, "device: NULL");
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    if (d->size != sizeof *d) { /* one version so far; larger is a newer header */
        snprintf(err, err_size, "device->size: %zu, want sizeof(qattn_vulkan_device) = %zu", d->size,
                 sizeof(qattn_vulkan_device));
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    const char *null_field = !d->instance ? "instance" : !d->physical_device ? "physical_device"
                           : !d->device ? "device" : NULL;
    if (null_field) {
        snprintf(err, err_size, "device->%s: NULL", null_field);
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    if (d->enabled_extension_count > 0 && !d->enabled_extensions) {
        snprintf(err, err_size, "device->enabled_extensions: NULL with enabled_extension_count %u",
                 d->enabled_extension_count);
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)d->get_instance_proc_addr;
    if (!gipa) {
        qattn_status s = need_loader(err, err_size);
        if (s != QATTN_OK) return s;
        gipa = vkGetInstanceProcAddr;
    }
    qattn_vk *vk = calloc(1, sizeof *vk);
    if (!vk) return QATTN_ERR_OUT_OF_MEMORY;
    vk->imported = 1;
    vk->instance = d->instance;
    vk->debug_validation = options && options->debug_validation;
    qattn_status s = QATTN_OK;
    const char *missing = load_instance_table(vk, gipa);
    if (missing) {
        snprintf(err, err_size, "device->instance: no %s (is it a Vulkan 1.3 instance?)", missing);
        s = QATTN_ERR_INVALID_ARGUMENT;
    }
    if (s == QATTN_OK && vk->debug_validation) {
        if (!vk->vki.vkCreateDebugUtilsMessengerEXT || !vk->vki.vkDestroyDebugUtilsMessengerEXT) {
            snprintf(err, err_size, "options->debug_validation: the instance has no VK_EXT_debug_utils");
            s = QATTN_ERR_INVALID_ARGUMENT;
        } else {
            VkDebugUtilsMessengerCreateInfoEXT mci = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
            mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                  VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
            mci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
            mci.pfnUserCallback = on_debug_message;
            mci.pUserData = vk;
            VkResult r = vk->vki.vkCreateDebugUtilsMessengerEXT(vk->instance, &mci, NULL, &vk->messenger);
            if (r != VK_SUCCESS) {
                snprintf(err, err_size, "vulkan: vkCreateDebugUtilsMessengerEXT failed (%s)",
                         qattn_vk_result_name(r));
                s = QATTN_ERR_BACKEND_UNAVAILABLE;
            }
        }
    }
    if (s == QATTN_OK) s = import_device(vk, d, err, err_size);
    if (s == QATTN_OK) s = create_runtime(vk, err, err_size);
    return finish_create(vk, s, be, err, err_size);
}

void qattn_vk_destroy(void *be) {
    qattn_vk *vk = (qattn_vk *)be;
    if (!vk) return;
    if (vk->device && vk->vkd.vkDestroyDevice) {
        /* An own device may still run transfers' or ops' last work only if a
         * call failed midway; an imported one is the caller's to wait for
         * (qattn's default-mode work has completed when its call returned). */
        if (!vk->imported) vk->vkd.vkDeviceWaitIdle(vk->device);
        qattn_vk_pipelines_destroy(vk);
        if (vk->staging) vk->vkd.vkDestroyBuffer(vk->device, vk->staging, NULL);
        if (vk->staging_mem) vk->vkd.vkFreeMemory(vk->device, vk->staging_mem, NULL);
        if (vk->layout) vk->vkd.vkDestroyPipelineLayout(vk->device, vk->layout, NULL);
        if (vk->timestamps) vk->vkd.vkDestroyQueryPool(vk->device, vk->timestamps, NULL);
        if (vk->fence) vk->vkd.vkDestroyFence(vk->device, vk->fence, NULL);
        if (vk->pool) vk->vkd.vkDestroyCommandPool(vk->device, vk->pool, NULL);
        if (!vk->imported) vk->vkd.vkDestroyDevice(vk->device, NULL);
    } else if (vk->device && !vk->imported && vk->vki.vkGetDeviceProcAddr) {
        /* Created but its table not loaded (a failure in between). */
        PFN_vkDestroyDevice destroy =
            (PFN_vkDestroyDevice)vk->vki.vkGetDeviceProcAddr(vk->device, "vkDestroyDevice");
        if (destroy) destroy(vk->device, NULL);
    }
    if (vk->messenger) vk->vki.vkDestroyDebugUtilsMessengerEXT(vk->instance, vk->messenger, NULL);
    if (vk->instance && !vk->imported && vk->vki.vkDestroyInstance) vk->vki.vkDestroyInstance(vk->instance, NULL);
    free(vk);
}

qattn_status qattn_vk_get_caps(void *be, qattn_device_caps *caps) {
    *caps = ((qattn_vk *)be)->caps;
    return QATTN_OK;
}
