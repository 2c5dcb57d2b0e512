/*
 * Internals of the Vulkan backend shared by its source files (and by op
 * files such as vk_mqa_logits.c). Not installed.
 *
 * How an op runs on this backend
 *   1. Get pipelines:   qattn_vk_pipeline(vk, "decode_simt_fp8fn", spec, n, push_bytes, 0, &p)
 *      Pipelines are created on first use from the embedded SPIR-V (see
 *      shaders/CMakeLists.txt: the name is the qattn_shader() NAME) and cached
 *      per (shader name, specialization constants, required subgroup size).
 *   2. Record:          qattn_vk_begin(vk);
 *                       qattn_vk_dispatch(vk, p, &push, sizeof push, gx, gy, gz);
 *                       qattn_vk_barrier(vk);          // between dependent launches
 *                       qattn_vk_dispatch(...);
 *   3. Submit and wait: s = qattn_vk_submit(vk);  // times the op, checks validation
 *      On an error between begin and submit call qattn_vk_abandon(vk).
 *   Get every pipeline before qattn_vk_begin, and record only through
 *   qattn_vk_dispatch / qattn_vk_barrier: they write to vk->cur, which is
 *   the caller's command buffer in recording mode and NULL in warm-up (see
 *   qattn_vk_mode); an op never touches vk->cmd itself.
 *
 * Buffers are reached by device address (Vulkan 1.3 bufferDeviceAddress):
 * no descriptor sets. A kernel's push constants carry the 64-bit addresses
 * of its tensors (qattn_vk_addr(&tensor) = buffer address + byte offset)
 * plus strides and scalars. In GLSL declare them with GL_EXT_buffer_reference
 * (see shaders/common.glsl). Push blocks may use up to
 * QATTN_VK_PUSH_BYTES bytes.
 *
 * Every function returns a status and never prints; failures store their
 * text with qattn_vk_fail() so the iface's last_message slot can hand it to
 * the core. Validation-layer messages are collected by a debug-utils
 * messenger; qattn_vk_submit (and qattn_vk_check_messages) turn them into
 * QATTN_ERR_DEVICE.
 */
#ifndef QATTN_VK_INTERNAL_H
#define QATTN_VK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <volk.h>

#include "qattn/backend.h"
#include "qattn/vulkan.h"

/* Push-constant bytes every kernel may use. Vulkan guarantees only 128; the
 * backend refuses devices with less than this (all desktop GPUs, RADV,
 * NVIDIA and lavapipe offer 256). */
#define QATTN_VK_PUSH_BYTES 256u
/* Specialization constants per pipeline (constant_id 0..N-1). */
#define QATTN_VK_MAX_SPEC 24

/* The create info of a compute pipeline as the backend makes every one
 * (qattn_vk_pipeline; tools/qattn_vk_stats makes its own the same way):
 * specialization constants 0..n_spec-1 of 4 bytes each, entry "main", and
 * a pinned subgroup size (0 = none) with full subgroups. d holds every
 * struct ci points to, so it must outlive the create call. */
typedef struct qattn_vk_pipeline_desc {
    VkSpecializationMapEntry map[QATTN_VK_MAX_SPEC];
    VkSpecializationInfo spec;
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo req;
    VkComputePipelineCreateInfo ci;
} qattn_vk_pipeline_desc;

static inline void qattn_vk_pipeline_desc_init(qattn_vk_pipeline_desc *d, VkShaderModule module,
                                               const uint32_t *spec, uint32_t n_spec,
                                               uint32_t subgroup_size, VkPipelineLayout layout) {
    memset(d, 0, sizeof *d);
    for (uint32_t i = 0; i < n_spec && i < QATTN_VK_MAX_SPEC; ++i) {
        d->map[i].constantID = i;
        d->map[i].offset = i * 4u;
        d->map[i].size = 4;
    }
    d->spec.mapEntryCount = n_spec;
    d->spec.pMapEntries = d->map;
    d->spec.dataSize = n_spec * 4u;
    d->spec.pData = spec;
    d->req.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO;
    d->req.requiredSubgroupSize = subgroup_size;
    d->ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    d->ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    d->ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    d->ci.stage.module = module;
    d->ci.stage.pName = "main";
    d->ci.stage.pSpecializationInfo = n_spec ? &d->spec : NULL;
    if (subgroup_size != 0) {
        d->ci.stage.pNext = &d->req;
        d->ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
    }
    d->ci.layout = layout;
}
#define QATTN_VK_MESSAGE_BYTES 2048

/* A buffer: what qattn_buffer.handle points to on this backend. */
typedef struct qattn_vk_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;   /* VK_NULL_HANDLE for a wrapped buffer */
    VkDeviceAddress address; /* of byte 0 */
    uint64_t bytes;
    int wrapped;
} qattn_vk_buffer;

/* One cached pipeline. */
typedef struct qattn_vk_pipeline_entry {
    const char *shader;              /* points into the embedded table */
    uint32_t n_spec;
    uint32_t spec[QATTN_VK_MAX_SPEC];
    uint32_t subgroup_size;          /* 0 = not pinned */
    VkPipeline pipeline;
} qattn_vk_pipeline_entry;

/* Instance-level entry points of one context's instance (volk's globals
 * would be shared by every context; these are not). */
typedef struct qattn_vk_instance_table {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkDestroyInstance vkDestroyInstance;
    PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices;
    PFN_vkGetPhysicalDeviceProperties vkGetPhysicalDeviceProperties;
    PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2;
    PFN_vkGetPhysicalDeviceFeatures2 vkGetPhysicalDeviceFeatures2;
    PFN_vkGetPhysicalDeviceMemoryProperties vkGetPhysicalDeviceMemoryProperties;
    PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties;
    PFN_vkEnumerateDeviceExtensionProperties vkEnumerateDeviceExtensionProperties;
    PFN_vkCreateDevice vkCreateDevice;
    PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;   /* NULL without debug utils */
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR;
} qattn_vk_instance_table;

/* Where qattn_vk_begin .. qattn_vk_submit put an op's launches. */
typedef enum qattn_vk_mode {
    QATTN_VK_SUBMIT = 0, /* the context's command buffer, submitted and waited for */
    QATTN_VK_RECORD,     /* the caller's command buffer (qattn_vulkan_record_begin) */
    QATTN_VK_PREPARE     /* nowhere: pipelines only (qattn_vulkan_warmup) */
} qattn_vk_mode;

/* The backend instance ("be" in backend.h). One per qattn_context. */
typedef struct qattn_vk {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger; /* only with debug_validation */
    VkPhysicalDevice phys;
    VkDevice device;
    qattn_vk_instance_table vki;        /* instance-level entry points */
    struct VolkDeviceTable vkd;               /* device-level entry points */
    VkQueue queue;
    uint32_t queue_family;
    uint32_t queue_index;
    int imported;                       /* instance, device, queue are the caller's */
    int shared_instance;                /* instance is the process's shared one */

    VkPhysicalDeviceProperties props;
    /* maxBufferSize (maintenance4): a larger buffer is refused.
     * maxMemoryAllocationSize (maintenance3): a larger allocation is still
     * tried (the spec lets it fail rather than forbids it; lavapipe and
     * NVIDIA make them), and a failure names this limit. */
    VkDeviceSize max_buffer_bytes, max_allocation_bytes;
    uint32_t mem_device;                /* memory type index: device-local */
    uint32_t mem_staging;               /* host-visible | host-coherent */
    int has_coopmat;                    /* VK_KHR_cooperative_matrix enabled */
    int has_subgroup_size_control;      /* requiredSubgroupSizeStages has compute */
    /* What the fragment probe (vk_fragment_probe.c) found: "nv-m16n8k16"
     * when QATTN_FEAT_FRAGMENT_LAYOUT is set, else why not. */
    char frag_layout[256];
    qattn_device_caps caps;

    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    int recording;                      /* between qattn_vk_begin and submit */
    qattn_vk_mode mode;
    VkCommandBuffer cur;                /* where dispatches go now; NULL when preparing */
    VkCommandBuffer ext_cmd;            /* the caller's, in QATTN_VK_RECORD */
    uint32_t ext_ops;                   /* ops recorded into ext_cmd so far */
    int last_op_recorded;               /* the last op went into ext_cmd: no time */

    VkQueryPool timestamps;             /* 2 queries: op start, op end */
    double timestamp_period_ns;         /* 0 = no timer */
    uint64_t timestamp_mask;
    double last_op_ms;
    int have_last_op;

    /* Staging memory for uploads/downloads, grown on demand. */
    VkBuffer staging;
    VkDeviceMemory staging_mem;
    void *staging_map;
    uint64_t staging_bytes;

    VkPipelineLayout layout;            /* push constants only */
    VkPipelineCache pipeline_cache;     /* every pipeline is created through it */
    uint64_t n_created, n_cache_hits, n_compiled, n_no_feedback;
    double create_ms;
    qattn_vk_pipeline_entry *pipelines;
    int n_pipelines, cap_pipelines;

    int debug_validation;
    int n_messages;                     /* unreported validation messages */
    char messages[QATTN_VK_MESSAGE_BYTES]; /* their text, newest appended */
    char message[QATTN_VK_MESSAGE_BYTES];  /* text of the last failure */
} qattn_vk;

/* ---- errors ------------------------------------------------------------ */
/* Stores a formatted failure text (read through the iface's last_message)
 * and returns s. */
qattn_status qattn_vk_fail(qattn_vk *vk, qattn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Maps a VkResult to a status, storing "what: VK_ERROR_..." as the text. */
qattn_status qattn_vk_check(qattn_vk *vk, VkResult r, const char *what);
/* QATTN_ERR_DEVICE with the collected validation messages when any arrived
 * since the last check (and clears them); QATTN_OK otherwise. */
qattn_status qattn_vk_check_messages(qattn_vk *vk, const char *what);
const char *qattn_vk_result_name(VkResult r);

/* ---- loader and instance (vk_instance.c) ------------------------------- */
/* Loads the system's Vulkan loader once per process (volk's global-level
 * entry points never change afterwards). */
qattn_status qattn_vk_need_loader(char *err, size_t n);
/* Loads vk->vki from vk->instance through gipa; returns the name of a
 * missing required entry point, or NULL. */
const char *qattn_vk_load_instance_table(qattn_vk *vk, PFN_vkGetInstanceProcAddr gipa);
/* Loads vk->vkd from vk->device. */
void qattn_vk_load_device_table(qattn_vk *vk);
/* The messenger that collects validation warnings and errors into vk. */
VkDebugUtilsMessengerCreateInfoEXT qattn_vk_messenger_info(qattn_vk *vk);
/* Creates qattn's own instance (with the validation layer and messenger
 * when `validation`) and loads vk->vki. */
qattn_status qattn_vk_create_instance(qattn_vk *vk, int validation, char *err, size_t n);
/* The process-wide lock every creation and destruction of a context's
 * instance and device runs under. */
void qattn_vk_lifetime_lock(void);
void qattn_vk_lifetime_unlock(void);
/* Under the lifetime lock: vk->instance (and vk->vki) for a context qattn
 * makes itself: the process's shared instance (made by the first such
 * context) without validation, an own one with it (its messenger must hear
 * only this context). Release gives it back (destroying the shared one
 * with its last context); both leave an imported instance alone. */
qattn_status qattn_vk_acquire_instance(qattn_vk *vk, int validation, char *err, size_t n);
void qattn_vk_release_instance(qattn_vk *vk);

/* ---- physical device: selection, features, caps (vk_physical.c) -------- */
/* The features qattn's shaders use: required ones first. */
typedef struct qattn_vk_feats {
    VkBool32 bda, s8, s16, i64, i16, i8, maint4, f16; /* required */
    VkBool32 vmm, vmm_dev, sgsc, cfs, coop;            /* used when present */
} qattn_vk_feats;

/* What the device offers: extensions (as flags) and features. */
typedef struct qattn_vk_offer {
    int e_coop, e_bf16, e_nvsm, e_amdcore;
    qattn_vk_feats f;
    VkBool32 bf16;
} qattn_vk_offer;

/* Picks vk->phys (and reads vk->props): selector NULL or "" = device 0,
 * a decimal index, or a case-insensitive substring of the name. */
qattn_status qattn_vk_pick_device(qattn_vk *vk, const char *sel, char *err, size_t n);
/* QATTN_OK when phys is one of the physical devices vkEnumeratePhysicalDevices
 * lists for vk->instance (a caller's handles of another instance would put
 * the messenger and every instance-level call on the wrong instance);
 * otherwise INVALID_ARGUMENT naming device->physical_device. */
qattn_status qattn_vk_check_phys_of_instance(qattn_vk *vk, VkPhysicalDevice phys, char *err, size_t n);
/* Device properties every context needs, whoever made the device. */
qattn_status qattn_vk_check_properties(qattn_vk *vk, char *err, size_t n);
/* What vk->phys offers. */
qattn_status qattn_vk_query_offer(qattn_vk *vk, qattn_vk_offer *o);
/* The first required feature `f` lacks, named as in the Vulkan spec; NULL
 * when none. */
const char *qattn_vk_first_missing(const qattn_vk_feats *f);
/* Fills vk->caps (and the size-control and timestamp fields) for a device
 * created with `en` enabled; ts_bits = the queue's timestampValidBits. */
qattn_status qattn_vk_read_caps(qattn_vk *vk, const qattn_vk_offer *o, const qattn_vk_feats *en,
                               uint32_t ts_bits);

/* ---- device (vk_device.c) ---------------------------------------------- */
qattn_status qattn_vk_create(const qattn_context_options *options, void **be, char *err,
                             size_t err_size);
/* A context on the caller's instance/device/queue (qattn_vulkan_context_create):
 * checks the enabled features, never destroys the imported objects. `device`
 * is that call's copy in this build's layout (never NULL). */
qattn_status qattn_vk_import(const qattn_vulkan_device *device, const qattn_context_options *options,
                             void **be, char *err, size_t err_size);
void qattn_vk_destroy(void *be);
qattn_status qattn_vk_get_caps(void *be, qattn_device_caps *caps);

/* ---- buffers (vk_buffer.c) --------------------------------------------- */
qattn_status qattn_vk_buffer_alloc(void *be, uint64_t bytes, void **handle);
void qattn_vk_buffer_free(void *be, void *handle);
qattn_status qattn_vk_buffer_upload(void *be, void *handle, uint64_t offset, const void *src,
                                    uint64_t bytes);
qattn_status qattn_vk_buffer_download(void *be, void *handle, uint64_t offset, void *dst,
                                      uint64_t bytes);
qattn_status qattn_vk_buffer_wrap(void *be, void *native, uint64_t bytes, void **handle);
/* Device address of element 0 of t; 0 when t is absent (buffer NULL). */
static inline VkDeviceAddress qattn_vk_addr(const qattn_tensor *t) {
    if (!t || !t->buffer) return 0;
    const qattn_vk_buffer *b = (const qattn_vk_buffer *)qattn_buffer_handle(t->buffer);
    return b->address + t->offset;
}
/* Stride of dimension `dim` as the int32 kernels use it (qattn_stride32,
 * qattn/backend.h: 0 where the extent is at most 1 or the tensor absent). */
static inline int32_t qattn_vk_stride(const qattn_tensor *t, int dim) { return qattn_stride32(t, dim); }
/* Device address of byte `offset` of a workspace range; 0 when none. */
static inline VkDeviceAddress qattn_vk_ws_addr(const qattn_workspace *ws, uint64_t offset) {
    if (!ws || !ws->buffer) return 0;
    const qattn_vk_buffer *b = (const qattn_vk_buffer *)qattn_buffer_handle(ws->buffer);
    return b->address + ws->offset + offset;
}

/* ---- pipelines (vk_pipeline.c) ----------------------------------------- */
/* The compute pipeline of embedded shader `shader` with specialization
 * constants spec[0..n_spec) as constant_id 0..n_spec-1 (uint32 each; pass
 * floats through their bits), created on first use and cached.
 * `push_bytes` is the size of the shader's push block (<= QATTN_VK_PUSH_BYTES).
 * `subgroup_size` != 0 pins the subgroup size (requires
 * QATTN_FEAT_SUBGROUP_SIZE_CONTROL and a size in the device's range) and asks
 * for full subgroups. Returns QATTN_ERR_UNSUPPORTED for an unknown shader. */
qattn_status qattn_vk_pipeline(qattn_vk *vk, const char *shader, const uint32_t *spec,
                               uint32_t n_spec, uint32_t push_bytes, uint32_t subgroup_size,
                               VkPipeline *out);
void qattn_vk_pipelines_destroy(qattn_vk *vk); /* and the pipeline cache */
/* Merges a vkGetPipelineCacheData blob of this device into the cache;
 * refuses one of another device/driver (header check) and changes nothing. */
qattn_status qattn_vk_pipeline_cache_load(qattn_vk *vk, const void *data, size_t bytes);
/* data NULL: *bytes = size needed; else copies up to *bytes (capacity). */
qattn_status qattn_vk_pipeline_cache_save(qattn_vk *vk, void *data, size_t *bytes);
/* Monotonic-enough host clock in ms (timespec_get). */
double qattn_vk_now_ms(void);
/* Whether the library embeds a shader of that name. */
int qattn_vk_has_shader(const char *shader);

/* ---- recording and submission (vk_cmd.c) ------------------------------- */
/* Ops call these four the same way in every mode (vk->mode):
 *   QATTN_VK_SUBMIT:  begin starts the context's command buffer and writes
 *                     the start timestamp; submit ends it, submits, waits and
 *                     stores the op's device time.
 *   QATTN_VK_RECORD:  launches go into the caller's command buffer; begin
 *                     adds a barrier after an earlier recorded op; submit
 *                     only checks validation messages (no host wait).
 *   QATTN_VK_PREPARE: nothing is recorded: an op run then only creates its
 *                     pipelines (warm-up).
 * Starts one op. Fails if the device is lost or validation spoke. */
qattn_status qattn_vk_begin(qattn_vk *vk);
/* Records push constants + a dispatch of gx*gy*gz workgroups. */
void qattn_vk_dispatch(qattn_vk *vk, VkPipeline p, const void *push, uint32_t push_bytes,
                       uint32_t gx, uint32_t gy, uint32_t gz);
/* Makes shader writes of earlier dispatches visible to later ones. */
void qattn_vk_barrier(qattn_vk *vk);
/* Finishes the op as its mode says (above) and checks validation messages.
 * `what` names the op in failure texts. */
qattn_status qattn_vk_submit(qattn_vk *vk, const char *what);
/* Ends vk->cmd, submits it and waits for it (ops through qattn_vk_submit,
 * and the staging transfers); `what` names a failed submit or wait. */
qattn_status qattn_vk_end_submit_wait(qattn_vk *vk, const char *what);
/* Ends an op begun with qattn_vk_begin without submitting it. */
void qattn_vk_abandon(qattn_vk *vk);
qattn_status qattn_vk_synchronize(void *be);
qattn_status qattn_vk_last_op_time_ms(void *be, double *ms);

/* ---- ops ----------------------------------------------------------------- */
qattn_status qattn_vk_decode(void *be, const qattn_decode_plan *plan, const qattn_decode_args *args,
                             const qattn_workspace *ws);
qattn_status qattn_vk_kv_store(void *be, const qattn_kv_store_args *args);
/* qattn_decode_read (vk_bandwidth.c). */
qattn_status qattn_vk_decode_read(void *be, const qattn_decode_args *a, void *sum, uint64_t sum_offset);
/* qattn_read_stream (vk_bandwidth.c). */
qattn_status qattn_vk_read_stream(void *be, void *src, uint64_t offset, uint64_t bytes, void *sum,
                                  uint64_t sum_offset);
/* MQA logits (vk_mqa_logits.c). */
qattn_status qattn_vk_mqa_logits(void *be, const qattn_mqa_logits_plan *plan,
                                 const qattn_mqa_logits_args *args, const qattn_workspace *ws);
/* Also from vk_mqa_logits.c: whether this device can run
 * `plan` (the iface's supports_op answer for QATTN_OP_MQA_LOGITS). */
int qattn_vk_mqa_supports(qattn_vk *vk, const qattn_mqa_logits_plan *plan);
/* The MQA kernels' specialization constants for a plan (geometry, formats,
 * load width: all plan fields); returns how many the plan's variant takes. */
#define QATTN_VK_MQA_SPEC_COUNT 16
uint32_t qattn_vk_mqa_spec(const qattn_mqa_logits_plan *plan, uint32_t spec[QATTN_VK_MQA_SPEC_COUNT]);
/* Paged MQA logits (vk_paged_mqa_logits.c) and whether the device can run
 * a plan of it (the supports_op answer for QATTN_OP_PAGED_MQA_LOGITS). */
qattn_status qattn_vk_paged_mqa_logits(void *be, const qattn_paged_mqa_logits_plan *plan,
                                       const qattn_paged_mqa_logits_args *args, const qattn_workspace *ws);
int qattn_vk_paged_mqa_supports(qattn_vk *vk, const qattn_paged_mqa_logits_plan *plan);
/* The matrix ceiling of a coopmat MQA plan (vk_ceiling.c). */
qattn_status qattn_vk_mqa_ceiling(void *be, const qattn_mqa_logits_plan *plan, double *tflops);
int qattn_vk_decode_supports(qattn_vk *vk, const qattn_decode_plan *plan);
/* Runs shaders/fragment_probe.comp once: sets QATTN_FEAT_FRAGMENT_LAYOUT in
 * vk->caps when the device's f16 fragments hold their elements as the regs
 * decode kernel assumes, and says what it found in vk->frag_layout. A
 * failure of the probe itself leaves the bit clear (the kernel is then not
 * chosen); only a lost device is an error. */
qattn_status qattn_vk_probe_fragments(qattn_vk *vk);
/* The launches of a decode plan, derived from the plan alone (no device):
 * what qattn_vk_decode records, so a launch-free test can compare them with
 * the plan. Returns 0 (with why) for a plan no tiled shader runs. */
typedef struct qattn_vk_decode_launch {
    char shader[48];
    uint32_t spec[10];            /* decode_tiled.comp's constant_id 0..9 */
    uint32_t n_spec;
    uint32_t grid[3];
    uint32_t subgroup_size;
    uint32_t merge_spec[2];       /* merge workgroup size, dims per workgroup */
    uint32_t merge_grid[3];
} qattn_vk_decode_launch;
int qattn_vk_decode_launch_of(const qattn_decode_plan *p, qattn_vk_decode_launch *out, char *why,
                              size_t n);

#endif /* QATTN_VK_INTERNAL_H */
