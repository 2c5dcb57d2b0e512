/*
 * The Vulkan backend (library qattn_vulkan, CMake target qattn::vulkan).
 *
 *   qattn_context *ctx;
 *   qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
 *   o.device = "0";               // or a name substring; NULL = QATTN_VULKAN_DEVICE, then 0
 *   qattn_context_create(qattn_backend_vulkan(), &o, &ctx, err, sizeof err);
 *
 * Vulkan is loaded at run time (volk): linking this library needs no
 * libvulkan, and a machine without a loader or device gets
 * QATTN_ERR_BACKEND_UNAVAILABLE from qattn_context_create. Every context has
 * its own instance- and device-level function tables: contexts may be made
 * and freed in any order, from any threads (one thread at a time per
 * context).
 *
 * Device requirements: Vulkan 1.3 with bufferDeviceAddress, 8- and 16-bit
 * storage-buffer access, shaderInt8/16/64, maintenance4 (workgroup sizes
 * from specialization constants), subgroup arithmetic, shuffle,
 * ballot and vote operations in compute, and at least 256 bytes of push
 * constants. VK_KHR_cooperative_matrix is enabled when present: decode's
 * matrix variant (fp8 and int8 caches, a 16x8x16 or 16x16x16 f16 -> f32
 * shape) and the coopmat variant of MQA logits run on it, each chosen by
 * its planner from the shapes the device lists.
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
 *
 * Embedding (the calls below): a context on the engine's own device, ops
 * recorded into the engine's command buffer, and a pipeline cache the
 * engine keeps between runs. Each call returns a status; on failure
 * qattn_last_error(ctx) says which argument broke which rule.
 */
#ifndef QATTN_VULKAN_H
#define QATTN_VULKAN_H

#include <stddef.h>
#include <stdint.h>

#include "qattn/qattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dispatchable handles, declared as vulkan_core.h declares them so this
 * header needs no Vulkan headers (repeating an identical typedef is valid C11
 * and C++). */
#ifndef VULKAN_CORE_H_
typedef struct VkInstance_T *VkInstance;
typedef struct VkPhysicalDevice_T *VkPhysicalDevice;
typedef struct VkDevice_T *VkDevice;
typedef struct VkCommandBuffer_T *VkCommandBuffer;
#endif

/** The Vulkan backend's table; pass it to qattn_context_create(). Never NULL
 *  (whether a device exists is only known when a context is created). */
QATTN_API const qattn_backend_iface *qattn_backend_vulkan(void);

/* ---- a context on the caller's device ---------------------------------- */

/* The structs below that start with `size` follow the rule of qattn.h
 * ("option structs"); each is in its first version, so a size other than
 * its sizeof (a larger one is a header newer than the library) fails with
 * QATTN_ERR_INVALID_ARGUMENT naming it. Those the library fills (the `out`
 * of qattn_vulkan_get_device and qattn_vulkan_pipeline_stats_get) get the
 * fields of the caller's version, and nothing when the size is refused. */

/** A device the caller created. Set `size` to sizeof(qattn_vulkan_device);
 *  fields added in later versions go at the end, and a smaller size means
 *  they are zero. qattn never destroys any of these objects: free the
 *  context first, then destroy the device and instance yourself. */
typedef struct qattn_vulkan_device {
    size_t size;
    /** Created with VkApplicationInfo.apiVersion >= VK_API_VERSION_1_3. */
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    /** The queue qattn submits to in the default mode (vkGetDeviceQueue with
     *  these). It must support compute. The queue is externally
     *  synchronized: do not submit to it from another thread while a qattn
     *  call on this context runs. */
    uint32_t queue_family;
    uint32_t queue_index;
    /** What the device was created with: the VkDeviceCreateInfo::pNext chain
     *  (VkPhysicalDeviceFeatures2, VkPhysicalDeviceVulkan11/12/13Features or
     *  the single-feature structs they replace, VkPhysicalDeviceCooperative-
     *  MatrixFeaturesKHR), VkDeviceCreateInfo::pEnabledFeatures (may be NULL)
     *  and the enabled device extensions. Only read during the call. */
    const void *enabled_features_chain;
    const void *enabled_features_10; /* a VkPhysicalDeviceFeatures * */
    const char *const *enabled_extensions;
    uint32_t enabled_extension_count;
    /** The instance's vkGetInstanceProcAddr (a PFN_vkGetInstanceProcAddr);
     *  NULL = the system loader's (libvulkan.so.1). */
    void (*(*get_instance_proc_addr)(VkInstance instance, const char *name))(void);
} qattn_vulkan_device;

/** Creates a context on the caller's device. Checks what qattn needs (Vulkan
 *  1.3, the features of "Device requirements" above among the enabled ones,
 *  a compute queue) and returns QATTN_ERR_BACKEND_UNAVAILABLE naming the
 *  first missing feature, QATTN_ERR_INVALID_ARGUMENT for a bad descriptor
 *  (size, NULL handle, queue out of range). Optional features (cooperative
 *  matrix, subgroup size control, shaderFloat16, vulkanMemoryModel) are used
 *  only when the caller enabled them. `options` may be NULL; its `device`
 *  is ignored; debug_validation installs a debug-utils messenger on the
 *  caller's instance (which must have VK_EXT_debug_utils enabled; any
 *  warning or error from the whole instance then fails the current call). */
QATTN_API qattn_status qattn_vulkan_context_create(const qattn_vulkan_device *device,
                                                   const qattn_context_options *options,
                                                   qattn_context **out, char *err,
                                                   size_t err_size);

/** The handles the context runs on (its own or the imported ones), so the
 *  caller can create VkBuffers to wrap and command buffers to record into.
 *  Set out->size first. enabled_* fields come back NULL/0;
 *  get_instance_proc_addr comes back as the one qattn uses. */
QATTN_API qattn_status qattn_vulkan_get_device(qattn_context *ctx, qattn_vulkan_device *out);

/* ---- recording into the caller's command buffer ------------------------- */

/** From this call until qattn_vulkan_record_end, every op on ctx
 *  (qattn_decode_run, qattn_kv_store, qattn_mqa_logits_run) records its
 *  launches into `cmd` and returns without submitting or waiting.
 *
 *  Expected of the caller:
 *   - cmd is a primary command buffer in the recording state, from a pool of
 *     a queue family that supports compute, on ctx's device; it stays in
 *     that state until qattn_vulkan_record_end;
 *   - before the first recorded op, writes to its inputs (transfers, the
 *     caller's shaders) are made visible to compute-shader reads
 *     (dstStageMask COMPUTE_SHADER, dstAccessMask SHADER_READ), and earlier
 *     reads of its outputs have completed (an execution dependency to
 *     COMPUTE_SHADER);
 *   - after qattn_vulkan_record_end, the caller orders later reads of the
 *     outputs after srcStageMask COMPUTE_SHADER, srcAccessMask SHADER_WRITE;
 *   - the caller submits cmd, waits for it, and keeps every buffer, plan,
 *     the workspace and the context alive and unchanged until it completes.
 *  What qattn records: bind pipeline, push constants, dispatch, and
 *  compute-to-compute memory barriers between its own launches (also
 *  between two recorded ops, so one op may consume another's output). It
 *  binds no descriptor sets and leaves the compute pipeline binding and
 *  push constants changed. Uploads and downloads are not recorded: they run
 *  and complete immediately, and so does the host index check of
 *  QATTN_CHECK_INDICES=1 (it reads the index tensors when the op is
 *  recorded, not when it runs). qattn_last_op_time_ms has no time for
 *  recorded ops (QATTN_ERR_INVALID_ARGUMENT). One context records into one
 *  command buffer at a time; calls on a context are not thread-safe. */
QATTN_API qattn_status qattn_vulkan_record_begin(qattn_context *ctx, VkCommandBuffer cmd);
/** Leaves recording mode: later ops submit and wait again (the default).
 *  Records nothing; `ops` (may be NULL) receives how many ops were recorded. */
QATTN_API qattn_status qattn_vulkan_record_end(qattn_context *ctx, uint32_t *ops);

/* ---- pipelines ---------------------------------------------------------- */

/** What a warm-up compiles: every pipeline these plans need when run (each
 *  plan as made by qattn_*_plan_create on this context), and the KV store
 *  pipeline of every cache dtype in kv_store_dtypes (bits 1u << qattn_dtype).
 *  Set `size` to sizeof(qattn_vulkan_warmup_set). */
typedef struct qattn_vulkan_warmup_set {
    size_t size;
    const qattn_decode_plan *decode_plans;
    size_t n_decode_plans;
    const qattn_mqa_logits_plan *mqa_plans;
    size_t n_mqa_plans;
    uint32_t kv_store_dtypes;
} qattn_vulkan_warmup_set;

/** Compiles every pipeline of `set` now (launches nothing), so no later run
 *  of those plans compiles one. Pipelines of plans already warmed are
 *  reused. Fails with the first plan this device cannot run. */
QATTN_API qattn_status qattn_vulkan_warmup(qattn_context *ctx, const qattn_vulkan_warmup_set *set);

/** The other way to warm up: between these two calls, op calls on ctx
 *  (qattn_decode_run, qattn_kv_store, qattn_mqa_logits_run, with their real
 *  arguments, validated as always) create their pipelines and launch
 *  nothing: no output or cache is written. Use it when the arguments are at
 *  hand (an engine's startup): it compiles exactly what those calls will run. */
QATTN_API qattn_status qattn_vulkan_warmup_begin(qattn_context *ctx);
QATTN_API qattn_status qattn_vulkan_warmup_end(qattn_context *ctx);

/** Adds a VkPipelineCache blob (from qattn_vulkan_pipeline_cache_save, or
 *  vkGetPipelineCacheData of a cache of the same device) to the context's
 *  cache, so pipelines it holds are not compiled again. A blob of another
 *  device, driver or version is refused with QATTN_ERR_INVALID_ARGUMENT and
 *  changes nothing. Load before the first op or warm-up to benefit fully. */
QATTN_API qattn_status qattn_vulkan_pipeline_cache_load(qattn_context *ctx, const void *data,
                                                        size_t bytes);
/** Writes the context's pipeline cache. With data NULL, *bytes receives the
 *  size needed; otherwise *bytes is the capacity of data on entry and the
 *  size written on return (QATTN_ERR_OUT_OF_BOUNDS when too small, with
 *  *bytes set to the size needed and nothing written). */
QATTN_API qattn_status qattn_vulkan_pipeline_cache_save(qattn_context *ctx, void *data,
                                                        size_t *bytes);
/** The largest pipeline-cache file load_file reads. A cache holds the
 *  pipelines a context built: four decode and MQA pipelines made a 150 KB
 *  blob on an H200 (about 38 KB each), so 64 MiB is room for over 1,500,
 *  more than every variant and geometry a context builds. */
#define QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES (64u << 20)
/** The same through a file. load_file of a missing file returns
 *  QATTN_ERR_INVALID_ARGUMENT and loads nothing (a first run has none), as
 *  does a path that is not a regular file (a directory, a FIFO, a device)
 *  or a file over QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES, which is not read;
 *  save_file replaces the file (written to path.tmp, then renamed). */
QATTN_API qattn_status qattn_vulkan_pipeline_cache_load_file(qattn_context *ctx, const char *path);
QATTN_API qattn_status qattn_vulkan_pipeline_cache_save_file(qattn_context *ctx, const char *path);

/** Counters of the pipelines a context made. `compiled` counts those the
 *  driver reported it did not find in the pipeline cache (pipeline creation
 *  feedback, core in Vulkan 1.3); `no_feedback` those for which the driver
 *  gave no feedback (counted as neither hit nor compiled). */
typedef struct qattn_vulkan_pipeline_stats {
    size_t size; /* sizeof(qattn_vulkan_pipeline_stats) */
    uint64_t created;
    uint64_t cache_hits;
    uint64_t compiled;
    uint64_t no_feedback;
    double create_ms; /* host time spent creating them */
} qattn_vulkan_pipeline_stats;

QATTN_API qattn_status qattn_vulkan_pipeline_stats_get(qattn_context *ctx,
                                                       qattn_vulkan_pipeline_stats *out);

/** What `native` points to in qattn_buffer_wrap on this backend. Unlike
 *  the option structs it has no leading size: it describes a VkBuffer (its
 *  `size` is the buffer's, as VkBufferCreateInfo names it), and `reserved`
 *  is its room to grow instead: it must be 0 (anything else is refused with
 *  QATTN_ERR_INVALID_ARGUMENT and nothing is wrapped), so a later layout can
 *  mark itself there and a library that does not know it refuses it rather
 *  than misread it. */
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
