/* The VkDevice of a context: created on the selected physical device with
 * only the features the shaders use, or imported from the caller and
 * checked for them; then its queue, memory types and the per-context
 * runtime objects (command pool, fence, timestamp queries, pipeline cache
 * and layout). Loader and instance: vk_instance.c; selection, features and
 * capabilities: vk_physical.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* Finds a memory type with `want` flags among `bits`; UINT32_MAX if none. */
static uint32_t find_memory(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits,
                            VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < mp->memoryTypeCount; ++i)
        if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want) return i;
    return UINT32_MAX;
}

/* Queue, memory types and capabilities of a device created with `en`
 * enabled (coop only together with its extension). */
static qattn_status setup_device(qattn_vk *vk, const qattn_vk_offer *o, const qattn_vk_feats *en,
                                 char *err, size_t n) {
    vk->has_coopmat = en->coop && en->f16 && en->vmm;
    qattn_vk_load_device_table(vk);
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

    return qattn_vk_read_caps(vk, o, en, ts_bits);
}

static qattn_status create_device(qattn_vk *vk, char *err, size_t n) {
    qattn_status s = qattn_vk_check_properties(vk, err, n);
    if (s != QATTN_OK) return s;
    qattn_vk_offer o;
    if ((s = qattn_vk_query_offer(vk, &o)) != QATTN_OK) return s;
    const char *missing = qattn_vk_first_missing(&o.f);
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
    const char *dev_exts[1];
    uint32_t n_dev_exts = 0;
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
    qattn_status s = qattn_vk_check_properties(vk, err, n);
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
    if ((s = qattn_vk_query_offer(vk, &o)) != QATTN_OK) return s;
    qattn_vk_feats en;
    enabled_from_chain(d->enabled_features_chain, (const VkPhysicalDeviceFeatures *)d->enabled_features_10,
                       &en);
    const char *missing = qattn_vk_first_missing(&en);
    if (missing) {
        snprintf(err, n, "vulkan: the imported device was created without the feature %s, which qattn "
                         "needs%s", missing, qattn_vk_first_missing(&o.f) ? " (and the device does not offer it)" : "");
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

/* The fragment layout of the device's matrix unit (vk_fragment_probe.c). */
static qattn_status probe(qattn_vk *vk, char *err, size_t n) {
    const qattn_status s = qattn_vk_probe_fragments(vk);
    if (s != QATTN_OK) snprintf(err, n, "vulkan: the fragment layout probe failed: %s", vk->message);
    return s;
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

qattn_status qattn_vk_create(const qattn_context_options *options, void **be, char *err,
                             size_t err_size) {
    char scratch[8];
    if (!err || err_size == 0) {
        err = scratch;
        err_size = sizeof scratch;
    }
    err[0] = '\0';
    *be = NULL;
    qattn_status s = qattn_vk_need_loader(err, err_size);
    if (s != QATTN_OK) return s;
    qattn_vk *vk = calloc(1, sizeof *vk);
    if (!vk) return QATTN_ERR_OUT_OF_MEMORY;
    vk->debug_validation = options && options->debug_validation;
    const char *sel = options ? options->device : NULL;
    if (!sel || !*sel) sel = getenv("QATTN_VULKAN_DEVICE");
    qattn_vk_lifetime_lock();
    s = qattn_vk_acquire_instance(vk, vk->debug_validation, err, err_size);
    if (s == QATTN_OK) s = qattn_vk_pick_device(vk, sel, err, err_size);
    if (s == QATTN_OK) s = create_device(vk, err, err_size);
    if (s == QATTN_OK) s = create_runtime(vk, err, err_size);
    qattn_vk_lifetime_unlock();
    if (s == QATTN_OK) s = probe(vk, err, err_size);
    return finish_create(vk, s, be, err, err_size); /* destroys on failure, taking the lock */
}

qattn_status qattn_vk_import(const qattn_vulkan_device *d, const qattn_context_options *options, void **be,
                             char *err, size_t err_size) {
    *be = NULL;
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
        qattn_status s = qattn_vk_need_loader(err, err_size);
        if (s != QATTN_OK) return s;
        gipa = vkGetInstanceProcAddr;
    }
    qattn_vk *vk = calloc(1, sizeof *vk);
    if (!vk) return QATTN_ERR_OUT_OF_MEMORY;
    vk->imported = 1;
    vk->instance = d->instance;
    vk->debug_validation = options && options->debug_validation;
    qattn_status s = QATTN_OK;
    const char *missing = qattn_vk_load_instance_table(vk, gipa);
    if (missing) {
        snprintf(err, err_size, "device->instance: no %s (is it a Vulkan 1.3 instance?)", missing);
        s = QATTN_ERR_INVALID_ARGUMENT;
    }
    /* Before anything is made on the instance (the messenger) or asked of
     * the physical device through it. */
    if (s == QATTN_OK) s = qattn_vk_check_phys_of_instance(vk, d->physical_device, err, err_size);
    if (s == QATTN_OK && vk->debug_validation) {
        if (!vk->vki.vkCreateDebugUtilsMessengerEXT || !vk->vki.vkDestroyDebugUtilsMessengerEXT) {
            snprintf(err, err_size, "options->debug_validation: the instance has no VK_EXT_debug_utils");
            s = QATTN_ERR_INVALID_ARGUMENT;
        } else {
            VkDebugUtilsMessengerCreateInfoEXT mci = qattn_vk_messenger_info(vk);
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
    if (s == QATTN_OK) s = probe(vk, err, err_size);
    return finish_create(vk, s, be, err, err_size);
}

void qattn_vk_destroy(void *be) {
    qattn_vk *vk = (qattn_vk *)be;
    if (!vk) return;
    qattn_vk_lifetime_lock();
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
    qattn_vk_release_instance(vk);
    qattn_vk_lifetime_unlock();
    free(vk);
}

qattn_status qattn_vk_get_caps(void *be, qattn_device_caps *caps) {
    *caps = ((qattn_vk *)be)->caps;
    return QATTN_OK;
}
