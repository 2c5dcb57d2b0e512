/* The physical device: selection by index or name, the properties and
 * features qattn needs or uses (what a device offers), and the
 * capabilities planners read, from the features a device was created
 * with. */
#include <ctype.h>
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
#define QATTN_VK_COMPONENT_E4M3 ((VkComponentTypeKHR)1000491002)
#else
#define QATTN_VK_COMPONENT_E4M3 VK_COMPONENT_TYPE_FLOAT8_E4M3_EXT
#endif

/* The bf16 features struct, declared here for headers that predate it:
 * sType, pNext, then VkBool32 flags. */
typedef struct qattn_vk_ext_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 f[3];
} qattn_vk_ext_features;

static int has_ext(const VkExtensionProperties *ext, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; ++i)
        if (strcmp(ext[i].extensionName, name) == 0) return 1;
    return 0;
}

static int all_digits(const char *s) {
    if (!*s) return 0;
    for (; *s; ++s)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

qattn_status qattn_vk_pick_device(qattn_vk *vk, const char *sel, char *err, size_t n) {
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
            if (qattn_name_contains(p.deviceName, sel)) chosen = (int)i;
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

const char *qattn_vk_first_missing(const qattn_vk_feats *f) {
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

qattn_status qattn_vk_check_properties(qattn_vk *vk, char *err, size_t n) {
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

qattn_status qattn_vk_query_offer(qattn_vk *vk, qattn_vk_offer *o) {
    memset(o, 0, sizeof *o);
    uint32_t n_ext = 0;
    vk->vki.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext) return QATTN_ERR_OUT_OF_MEMORY;
    vk->vki.vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n_ext, ext);
    o->e_coop = has_ext(ext, n_ext, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    o->e_bf16 = has_ext(ext, n_ext, "VK_KHR_shader_bfloat16");
    o->e_nvsm = has_ext(ext, n_ext, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    o->e_amdcore = has_ext(ext, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_2_EXTENSION_NAME) &&
                   has_ext(ext, n_ext, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
    free(ext);

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

qattn_status qattn_vk_read_caps(qattn_vk *vk, const qattn_vk_offer *o, const qattn_vk_feats *en,
                               uint32_t ts_bits) {
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
        }
        free(cp);
        if (c->n_matrix_shapes > 0) c->features |= QATTN_FEAT_COOPMAT;
    }
    return QATTN_OK;
}

qattn_status qattn_vk_check_phys_of_instance(qattn_vk *vk, VkPhysicalDevice phys, char *err, size_t n) {
    uint32_t count = 0;
    VkResult r = vk->vki.vkEnumeratePhysicalDevices(vk->instance, &count, NULL);
    VkPhysicalDevice *devs = r == VK_SUCCESS && count ? calloc(count, sizeof *devs) : NULL;
    if (devs) r = vk->vki.vkEnumeratePhysicalDevices(vk->instance, &count, devs);
    int found = 0;
    for (uint32_t i = 0; devs && (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < count; ++i)
        found |= devs[i] == phys;
    free(devs);
    if (found) return QATTN_OK;
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        snprintf(err, n, "device->instance: vkEnumeratePhysicalDevices failed (%s)", qattn_vk_result_name(r));
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    snprintf(err, n, "device->physical_device: not one of the %u physical devices of device->instance "
                     "(handles of another VkInstance?)", count);
    return QATTN_ERR_INVALID_ARGUMENT;
}
