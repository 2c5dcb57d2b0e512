/* Vulkan instance and device: loader (volk), optional validation layer with a
 * message collector, device selection, feature enabling and the device's
 * capabilities. */
#include <ctype.h>
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
    VkResult r = vkEnumeratePhysicalDevices(vk->instance, &count, NULL);
    if (r != VK_SUCCESS || count == 0) {
        snprintf(err, n, "vulkan: no physical device (%s)", qattn_vk_result_name(r));
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    VkPhysicalDevice *devs = calloc(count, sizeof *devs);
    if (!devs) return QATTN_ERR_OUT_OF_MEMORY;
    vkEnumeratePhysicalDevices(vk->instance, &count, devs);
    int chosen = -1;
    if (!sel || !*sel) {
        chosen = 0;
    } else if (all_digits(sel)) {
        long idx = strtol(sel, NULL, 10);
        if (idx >= 0 && idx < (long)count) chosen = (int)idx;
    } else {
        for (uint32_t i = 0; i < count && chosen < 0; ++i) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(devs[i], &p);
            if (str_contains_ci(p.deviceName, sel)) chosen = (int)i;
        }
    }
    if (chosen < 0) {
        int used = snprintf(err, n, "vulkan: no device matches \"%s\" among:", sel);
        for (uint32_t i = 0; i < count && used > 0 && (size_t)used < n; ++i) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(devs[i], &p);
            used += snprintf(err + used, n - (size_t)used, " [%u] %s", i, p.deviceName);
        }
        free(devs);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    vk->phys = devs[chosen];
    free(devs);
    vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
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
    volkLoadInstanceOnly(vk->instance);
    if (validation) {
        r = vkCreateDebugUtilsMessengerEXT(vk->instance, &mci, NULL, &vk->messenger);
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

static qattn_status create_device(qattn_vk *vk, char *err, size_t n) {
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
    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext) return QATTN_ERR_OUT_OF_MEMORY;
    vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n_ext, ext);
    const int e_coop = has_ext(ext, n_ext, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    const int e_bf16 = has_ext(ext, n_ext, "VK_KHR_shader_bfloat16");
    const int e_fp8 = has_ext(ext, n_ext, "VK_EXT_shader_float8");
    const int e_nvsm = has_ext(ext, n_ext, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    const int e_pexec = has_ext(ext, n_ext, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    const int e_amdcore = has_ext(ext, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_2_EXTENSION_NAME) &&
                          has_ext(ext, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
    free(ext);

    /* What the device supports. */
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
    if (e_coop) { *tail = &coop; tail = &coop.pNext; }
    if (e_bf16) { *tail = &bf16; tail = &bf16.pNext; }
    if (e_fp8) { *tail = &fp8; tail = &fp8.pNext; }
    vkGetPhysicalDeviceFeatures2(vk->phys, &f2);

    const char *missing = NULL;
    if (!f12.bufferDeviceAddress) missing = "bufferDeviceAddress";
    else if (!f12.storageBuffer8BitAccess) missing = "storageBuffer8BitAccess";
    else if (!f11.storageBuffer16BitAccess) missing = "storageBuffer16BitAccess";
    else if (!f2.features.shaderInt64) missing = "shaderInt64";
    else if (!f2.features.shaderInt16) missing = "shaderInt16";
    else if (!f12.shaderInt8) missing = "shaderInt8";
    if (missing) {
        snprintf(err, n, "vulkan: %s lacks the feature %s", vk->props.deviceName, missing);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    VkPhysicalDeviceSubgroupProperties sgp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sgp;
    vkGetPhysicalDeviceProperties2(vk->phys, &p2);
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

    /* What we enable: only what the shaders use. */
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
    e12.shaderFloat16 = f12.shaderFloat16;
    e12.vulkanMemoryModel = f12.vulkanMemoryModel;
    e12.vulkanMemoryModelDeviceScope = f12.vulkanMemoryModelDeviceScope;
    e13.subgroupSizeControl = f13.subgroupSizeControl;
    e13.computeFullSubgroups = f13.computeFullSubgroups;
    e13.maintenance4 = f13.maintenance4;
    const char *dev_exts[3];
    uint32_t n_dev_exts = 0;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pexec = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    if (vk->capture && e_pexec) {
        pexec.pipelineExecutableInfo = VK_TRUE;
        pexec.pNext = e13.pNext;
        e13.pNext = &pexec;
        dev_exts[n_dev_exts++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    } else {
        vk->capture = 0;
    }
    vk->has_coopmat = e_coop && coop.cooperativeMatrix && f12.shaderFloat16 && f12.vulkanMemoryModel;
    if (vk->has_coopmat) {
        ecoop.cooperativeMatrix = VK_TRUE;
        ecoop.pNext = e13.pNext;
        e13.pNext = &ecoop;
        dev_exts[n_dev_exts++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    }

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    if (!qf) return QATTN_ERR_OUT_OF_MEMORY;
    vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &nq, qf);
    /* The first compute family that also does graphics is the device's main
     * queue (fastest submission on most drivers); else any compute family. */
    uint32_t fam = UINT32_MAX;
    for (uint32_t i = 0; i < nq && fam == UINT32_MAX; ++i)
        if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && (qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) fam = i;
    for (uint32_t i = 0; i < nq && fam == UINT32_MAX; ++i)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = i;
    if (fam == UINT32_MAX) {
        free(qf);
        snprintf(err, n, "vulkan: %s has no compute queue", vk->props.deviceName);
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    vk->queue_family = fam;
    const uint32_t ts_bits = qf[fam].timestampValidBits;
    free(qf);

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
    VkResult r = vkCreateDevice(vk->phys, &dci, NULL, &vk->device);
    if (r != VK_SUCCESS) {
        snprintf(err, n, "vulkan: vkCreateDevice on %s failed (%s)", vk->props.deviceName,
                 qattn_vk_result_name(r));
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    volkLoadDeviceTable(&vk->vkd, vk->device);
    vk->vkd.vkGetDeviceQueue(vk->device, fam, 0, &vk->queue);

    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(vk->phys, &mp);
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
    VkPhysicalDeviceVulkan13Properties p13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nvsm = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceShaderCoreProperties2AMD amd2 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_2_AMD};
    VkPhysicalDeviceShaderCorePropertiesAMD amd1 = {
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    p2.pNext = &p13;
    void **ptail = &p13.pNext;
    if (e_nvsm) { *ptail = &nvsm; ptail = &nvsm.pNext; }
    if (e_amdcore) { *ptail = &amd2; amd2.pNext = &amd1; ptail = &amd1.pNext; }
    vkGetPhysicalDeviceProperties2(vk->phys, &p2);

    qattn_device_caps *c = &vk->caps;
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "vulkan:%.80s", vk->props.deviceName);
    snprintf(c->device_name, sizeof c->device_name, "%.120s", vk->props.deviceName);
    if (e_nvsm) c->compute_units = (int32_t)nvsm.shaderSMCount;
    else if (e_amdcore) c->compute_units = (int32_t)amd2.activeComputeUnitCount;
    else c->compute_units = 0; /* unknown: planners assume a default */
    c->subgroup_size_min = f13.subgroupSizeControl ? p13.minSubgroupSize : sgp.subgroupSize;
    c->subgroup_size_max = f13.subgroupSizeControl ? p13.maxSubgroupSize : sgp.subgroupSize;
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
    if (f12.shaderFloat16) c->features |= QATTN_FEAT_SHADER_F16;
    if (e_bf16 && bf16.f[0]) c->features |= QATTN_FEAT_BF16;
    vk->has_subgroup_size_control = f13.subgroupSizeControl && f13.computeFullSubgroups &&
                                    (p13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
    if (vk->has_subgroup_size_control) c->features |= QATTN_FEAT_SUBGROUP_SIZE_CONTROL;
    if (ts_bits > 0 && vk->props.limits.timestampPeriod > 0.0f) {
        c->features |= QATTN_FEAT_TIMESTAMPS;
        vk->timestamp_period_ns = vk->props.limits.timestampPeriod;
        vk->timestamp_mask = ts_bits >= 64 ? UINT64_MAX : ((1ull << ts_bits) - 1ull);
    }
    if (vk->has_coopmat) {
        uint32_t np = 0;
        vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(vk->phys, &np, NULL);
        VkCooperativeMatrixPropertiesKHR *cp = calloc(np ? np : 1, sizeof *cp);
        if (!cp) return QATTN_ERR_OUT_OF_MEMORY;
        for (uint32_t i = 0; i < np; ++i) cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
        vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(vk->phys, &np, cp);
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
    (void)fp8;
    return QATTN_OK;
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
        VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, QATTN_VK_PUSH_BYTES};
        VkPipelineLayoutCreateInfo lci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        lci.pushConstantRangeCount = 1;
        lci.pPushConstantRanges = &range;
        r = vk->vkd.vkCreatePipelineLayout(vk->device, &lci, NULL, &vk->layout);
    }
    if (r != VK_SUCCESS) {
        snprintf(err, n, "vulkan: creating command pool/fence/queries/layout failed (%s)",
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

qattn_status qattn_vk_create_ex(const qattn_context_options *options, int capture, void **be,
                                char *err, size_t err_size) {
    char scratch[8];
    if (!err || err_size == 0) {
        err = scratch;
        err_size = sizeof scratch;
    }
    err[0] = '\0';
    *be = NULL;
    VkResult r = volkInitialize();
    if (r != VK_SUCCESS) {
        snprintf(err, err_size, "vulkan: no Vulkan loader (libvulkan) found");
        return QATTN_ERR_BACKEND_UNAVAILABLE;
    }
    qattn_vk *vk = calloc(1, sizeof *vk);
    if (!vk) return QATTN_ERR_OUT_OF_MEMORY;
    vk->debug_validation = options && options->debug_validation;
    vk->capture = capture;
    const char *sel = options ? options->device : NULL;
    if (!sel || !*sel) sel = getenv("QATTN_VULKAN_DEVICE");
    qattn_status s = create_instance(vk, vk->debug_validation, err, err_size);
    if (s == QATTN_OK) s = pick_device(vk, sel, err, err_size);
    if (s == QATTN_OK) s = create_device(vk, err, err_size);
    if (s == QATTN_OK) s = create_runtime(vk, err, err_size);
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

void qattn_vk_destroy(void *be) {
    qattn_vk *vk = (qattn_vk *)be;
    if (!vk) return;
    if (vk->device) {
        vk->vkd.vkDeviceWaitIdle(vk->device);
        qattn_vk_pipelines_destroy(vk);
        if (vk->staging) vk->vkd.vkDestroyBuffer(vk->device, vk->staging, NULL);
        if (vk->staging_mem) vk->vkd.vkFreeMemory(vk->device, vk->staging_mem, NULL);
        if (vk->layout) vk->vkd.vkDestroyPipelineLayout(vk->device, vk->layout, NULL);
        if (vk->timestamps) vk->vkd.vkDestroyQueryPool(vk->device, vk->timestamps, NULL);
        if (vk->fence) vk->vkd.vkDestroyFence(vk->device, vk->fence, NULL);
        if (vk->pool) vk->vkd.vkDestroyCommandPool(vk->device, vk->pool, NULL);
        vk->vkd.vkDestroyDevice(vk->device, NULL);
    }
    if (vk->messenger) vkDestroyDebugUtilsMessengerEXT(vk->instance, vk->messenger, NULL);
    if (vk->instance) vkDestroyInstance(vk->instance, NULL);
    free(vk);
}

qattn_status qattn_vk_get_caps(void *be, qattn_device_caps *caps) {
    *caps = ((qattn_vk *)be)->caps;
    return QATTN_OK;
}
