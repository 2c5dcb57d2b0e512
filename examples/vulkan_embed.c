/*
 * qattn inside your Vulkan engine, in one file you can copy from:
 *
 *   1. your instance and device (with the features qattn needs) become a
 *      qattn context: qattn_vulkan_context_create;
 *   2. your VkBuffers become qattn buffers without a copy: qattn_buffer_wrap;
 *   3. qattn's launches go into your command buffer, between your own
 *      commands: qattn_vulkan_record_begin / _end; you submit and wait.
 *
 * Here the "engine step" is a KV store of one new token into an int8 paged
 * cache followed by decode attention over that cache (B = 1, 8 query heads,
 * 2 KV heads, D = 128). The program checks the output against the same
 * two ops on qattn's CPU reference and exits 0 when they agree.
 *
 * Build: cc vulkan_embed.c $(pkg-config --cflags --libs qattn-core qattn-vulkan) -lvulkan
 * (the qattn tests build and run it against lavapipe).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

#include <qattn/convert.h>
#include <qattn/qattn.h>
#include <qattn/vulkan.h>

enum { HQ = 8, HKV = 2, D = 128, PAGE = 16, PAGES = 4, SLOTS = PAGE * PAGES, LEN = 50 };

/* How close the output must be to the reference: the spec's decode
 * tolerance (docs/ops.md section 4); qattn's own build of this example
 * takes it from the test suite's single definition. */
#ifdef QATTN_EXAMPLE_USE_TEST_TOLERANCE
#include "tolerance.h"
#define CLOSE_ENOUGH(got, ref) qt_tol_decode_o(got, ref)
#else
#define CLOSE_ENOUGH(got, ref) (fabs((got) - (ref)) <= 2e-3 + 2e-2 * fabs(ref))
#endif

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

/* ---- the engine's side: plain Vulkan ----------------------------------- */
/* What qattn_buffer_wrap requires of a VkBuffer: storage + device address
 * for the kernels, transfer source/destination for uploads and downloads. */
#define WRAP_USAGE                                                                         \
    (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |      \
     VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT)

static VkInstance instance;
static VkPhysicalDevice phys;
static VkDevice device;
static VkQueue queue;
static uint32_t family;

/* A storage buffer with a device address in host-visible memory (a real
 * engine would use device-local memory and its own uploads). */
typedef struct engine_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *map;
    VkDeviceSize size;
} engine_buffer;

static engine_buffer make_buffer(VkDeviceSize size) {
    engine_buffer b = {0};
    b.size = size;
    VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = size;
    bci.usage = WRAP_USAGE;
    if (vkCreateBuffer(device, &bci, NULL, &b.buffer) != VK_SUCCESS) DIE("vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, b.buffer, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; ++i)
        if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) type = i;
    if (type == UINT32_MAX) DIE("no host-visible memory");
    VkMemoryAllocateFlagsInfo flags = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.pNext = &flags;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    if (vkAllocateMemory(device, &ai, NULL, &b.memory) != VK_SUCCESS) DIE("vkAllocateMemory");
    vkBindBufferMemory(device, b.buffer, b.memory, 0);
    vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.map);
    return b;
}

static void free_buffer(engine_buffer *b) {
    vkDestroyBuffer(device, b->buffer, NULL);
    vkFreeMemory(device, b->memory, NULL);
}

/* The features qattn needs, as the engine enables them (keep these structs
 * alive until qattn_vulkan_context_create has read them). */
static VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
static VkPhysicalDeviceVulkan11Features f11 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
static VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
static VkPhysicalDeviceVulkan13Features f13 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};

static int engine_init(void) {
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "my-engine";
    app.apiVersion = VK_API_VERSION_1_3; /* qattn needs 1.3 */
    VkInstanceCreateInfo ici = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    if (vkCreateInstance(&ici, NULL, &instance) != VK_SUCCESS) return 0;
    uint32_t n = 1;
    if (vkEnumeratePhysicalDevices(instance, &n, &phys) < 0 || n == 0) return 0;
    VkQueueFamilyProperties qf[16];
    uint32_t nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf);
    for (family = 0; family < nq && !(qf[family].queueFlags & VK_QUEUE_COMPUTE_BIT); ++family) {}
    if (family == nq) return 0;
    f2.pNext = &f11;
    f11.pNext = &f12;
    f12.pNext = &f13;
    f2.features.shaderInt64 = f2.features.shaderInt16 = VK_TRUE;
    f11.storageBuffer16BitAccess = VK_TRUE;
    f12.storageBuffer8BitAccess = f12.bufferDeviceAddress = f12.shaderInt8 = f12.shaderFloat16 = VK_TRUE;
    f13.maintenance4 = VK_TRUE;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;
    VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &f2;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    if (vkCreateDevice(phys, &dci, NULL, &device) != VK_SUCCESS) return 0;
    vkGetDeviceQueue(device, family, 0, &queue);
    return 1;
}

/* A small deterministic generator, so the example needs nothing else. */
static float next_value(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

int main(void) {
    if (!engine_init()) {
        printf("skipped: no Vulkan 1.3 device\n");
        return 77;
    }

    /* 1. The engine's device becomes a qattn context. */
    qattn_vulkan_device dev = {0};
    dev.size = sizeof dev;
    dev.instance = instance;
    dev.physical_device = phys;
    dev.device = device;
    dev.queue_family = family;
    dev.queue_index = 0;
    dev.enabled_features_chain = &f2; /* what VkDeviceCreateInfo.pNext was */
    qattn_context *ctx = NULL;
    char err[512];
    if (qattn_vulkan_context_create(&dev, NULL, &ctx, err, sizeof err) != QATTN_OK) DIE("qattn: %s", err);

    /* 2. The engine's buffers, wrapped. */
    enum { Q, KC, VC, KS, VS, INDPTR, INDICES, LENS, O, KNEW, VNEW, SLOT, NBUF };
    const VkDeviceSize size[NBUF] = {HQ * D * 2, SLOTS * HKV * D, SLOTS * HKV * D, SLOTS * HKV * 4, SLOTS * HKV * 4,
                                     2 * 4, PAGES * 4, 4, HQ * D * 2, HKV * D * 2, HKV * D * 2, 4};
    engine_buffer eb[NBUF];
    qattn_buffer *qb[NBUF];
    for (int i = 0; i < NBUF; ++i) {
        eb[i] = make_buffer(size[i]);
        const qattn_vk_native_buffer nb = {&eb[i].buffer, size[i], (uint32_t)WRAP_USAGE, 0};
        if (qattn_buffer_wrap(ctx, (void *)&nb, size[i], &qb[i]) != QATTN_OK)
            DIE("wrap: %s", qattn_last_error(ctx));
    }
    unsigned rng = 12345u;
    for (int i = 0; i < HQ * D; ++i) ((uint16_t *)eb[Q].map)[i] = qattn_f32_to_bf16(next_value(&rng));
    for (int i = 0; i < SLOTS * HKV * D; ++i) {
        ((int8_t *)eb[KC].map)[i] = (int8_t)(next_value(&rng) * 127.0f);
        ((int8_t *)eb[VC].map)[i] = (int8_t)(next_value(&rng) * 127.0f);
    }
    for (int i = 0; i < SLOTS * HKV; ++i) ((float *)eb[KS].map)[i] = ((float *)eb[VS].map)[i] = 0.01f;
    for (int i = 0; i < HKV * D; ++i) {
        ((uint16_t *)eb[KNEW].map)[i] = qattn_f32_to_bf16(2.0f * next_value(&rng));
        ((uint16_t *)eb[VNEW].map)[i] = qattn_f32_to_bf16(2.0f * next_value(&rng));
    }
    const int32_t pages[PAGES] = {2, 0, 3, 1};
    memcpy(eb[INDICES].map, pages, sizeof pages);
    ((int32_t *)eb[INDPTR].map)[0] = 0;
    ((int32_t *)eb[INDPTR].map)[1] = PAGES;
    ((int32_t *)eb[LENS].map)[0] = LEN;
    /* The new token is key LEN-1: page pages[(LEN-1)/PAGE], row (LEN-1)%PAGE. */
    ((int32_t *)eb[SLOT].map)[0] = pages[(LEN - 1) / PAGE] * PAGE + (LEN - 1) % PAGE;
    /* Copies of the inputs for the CPU check at the end (o poisoned). */
    void *copy[NBUF];
    for (int i = 0; i < NBUF; ++i) {
        copy[i] = malloc(size[i]);
        memcpy(copy[i], eb[i].map, size[i]);
    }
    memset(copy[O], 0xFF, size[O]);
    memset(eb[O].map, 0xFF, size[O]); /* NaN as bf16: an unwritten output shows */

    /* Descriptors of the two ops. */
    qattn_kv_store_args kv = {0};
    kv.k_new = qattn_tensor_contiguous(qb[KNEW], 0, QATTN_BF16, 3, (int64_t[]){1, HKV, D});
    kv.v_new = qattn_tensor_contiguous(qb[VNEW], 0, QATTN_BF16, 3, (int64_t[]){1, HKV, D});
    kv.slot_mapping = qattn_tensor_contiguous(qb[SLOT], 0, QATTN_I32, 1, (int64_t[]){1});
    kv.k_cache = qattn_tensor_contiguous(qb[KC], 0, QATTN_I8, 3, (int64_t[]){SLOTS, HKV, D});
    kv.v_cache = qattn_tensor_contiguous(qb[VC], 0, QATTN_I8, 3, (int64_t[]){SLOTS, HKV, D});
    kv.k_scale = qattn_tensor_contiguous(qb[KS], 0, QATTN_F32, 2, (int64_t[]){SLOTS, HKV});
    kv.v_scale = qattn_tensor_contiguous(qb[VS], 0, QATTN_F32, 2, (int64_t[]){SLOTS, HKV});
    qattn_decode_args de = {0};
    de.q = qattn_tensor_contiguous(qb[Q], 0, QATTN_BF16, 4, (int64_t[]){1, 1, HQ, D});
    de.k_cache = kv.k_cache;
    de.v_cache = kv.v_cache;
    de.k_scale = kv.k_scale;
    de.v_scale = kv.v_scale;
    de.kv_indptr = qattn_tensor_contiguous(qb[INDPTR], 0, QATTN_I32, 1, (int64_t[]){2});
    de.kv_indices = qattn_tensor_contiguous(qb[INDICES], 0, QATTN_I32, 1, (int64_t[]){PAGES});
    de.kv_lens = qattn_tensor_contiguous(qb[LENS], 0, QATTN_I32, 1, (int64_t[]){1});
    de.o = qattn_tensor_contiguous(qb[O], 0, QATTN_BF16, 4, (int64_t[]){1, 1, HQ, D});
    de.page_size = PAGE;
    de.max_kv_len = PAGES * PAGE;
    de.sm_scale = 1.0f / sqrtf((float)D);
    de.window_left = -1;
    qattn_decode_plan plan;
    if (qattn_decode_plan_create(ctx, &de, NULL, &plan) != QATTN_OK) DIE("plan: %s", qattn_last_error(ctx));
    engine_buffer ws = {0};
    qattn_buffer *qws = NULL;
    if (plan.workspace_bytes) { /* split-KV partials */
        ws = make_buffer(plan.workspace_bytes);
        const qattn_vk_native_buffer nb = {&ws.buffer, plan.workspace_bytes, (uint32_t)WRAP_USAGE, 0};
        if (qattn_buffer_wrap(ctx, (void *)&nb, plan.workspace_bytes, &qws) != QATTN_OK)
            DIE("wrap ws: %s", qattn_last_error(ctx));
    }
    /* Compile the pipelines now, not in the middle of the first step. */
    qattn_vulkan_warmup_set warm = {0};
    warm.size = sizeof warm;
    warm.decode_plans = &plan;
    warm.n_decode_plans = 1;
    warm.kv_store_dtypes = 1u << QATTN_I8;
    if (qattn_vulkan_warmup(ctx, &warm) != QATTN_OK) DIE("warm-up: %s", qattn_last_error(ctx));

    /* 3. Record into the engine's command buffer. */
    VkCommandPoolCreateInfo pci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.queueFamilyIndex = family;
    VkCommandPool pool;
    vkCreateCommandPool(device, &pci, NULL, &pool);
    VkCommandBufferAllocateInfo cai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cmd;
    vkAllocateCommandBuffers(device, &cai, &cmd);
    VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vkBeginCommandBuffer(cmd, &bi);
    /* Before qattn: our writes (here: the host's) visible to compute reads. */
    VkMemoryBarrier before = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_HOST_WRITE_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &before, 0,
                         NULL, 0, NULL);
    qattn_vulkan_record_begin(ctx, cmd);
    if (qattn_kv_store(ctx, &kv) != QATTN_OK) DIE("kv store: %s", qattn_last_error(ctx));
    /* qattn orders this decode after the store it recorded just before. */
    if (qattn_decode_run(ctx, &plan, &de, qws, 0) != QATTN_OK) DIE("decode: %s", qattn_last_error(ctx));
    qattn_vulkan_record_end(ctx, NULL);
    /* After qattn: its shader writes visible to what reads them next. */
    VkMemoryBarrier after = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_SHADER_WRITE_BIT,
                             VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0,
                         NULL, 0, NULL);
    vkEndCommandBuffer(cmd);
    VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    vkCreateFence(device, &fci, NULL, &fence);
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    vkQueueSubmit(queue, 1, &si, fence);
    vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX);

    /* The same two ops on the CPU reference, over copies of the inputs. */
    qattn_context *cpu = NULL;
    if (qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, sizeof err) != QATTN_OK) DIE("cpu: %s", err);
    qattn_buffer *cb[NBUF];
    for (int i = 0; i < NBUF; ++i)
        if (qattn_buffer_wrap(cpu, copy[i], size[i], &cb[i]) != QATTN_OK) DIE("cpu wrap: %s", qattn_last_error(cpu));
    qattn_kv_store_args ckv = kv;
    qattn_decode_args cde = de;
    qattn_tensor *ct[] = {&ckv.k_new, &ckv.v_new, &ckv.slot_mapping, &ckv.k_cache, &ckv.v_cache, &ckv.k_scale,
                          &ckv.v_scale, &cde.q, &cde.k_cache, &cde.v_cache, &cde.k_scale, &cde.v_scale,
                          &cde.kv_indptr, &cde.kv_indices, &cde.kv_lens, &cde.o};
    for (size_t i = 0; i < sizeof ct / sizeof ct[0]; ++i)
        for (int j = 0; j < NBUF; ++j)
            if (ct[i]->buffer == qb[j]) {
                ct[i]->buffer = cb[j];
                break;
            }
    qattn_decode_plan cplan;
    qattn_buffer *cws = NULL;
    if (qattn_kv_store(cpu, &ckv) != QATTN_OK || qattn_decode_plan_create(cpu, &cde, NULL, &cplan) != QATTN_OK ||
        qattn_buffer_alloc(cpu, cplan.workspace_bytes, &cws) != QATTN_OK ||
        qattn_decode_run(cpu, &cplan, &cde, cws, 0) != QATTN_OK)
        DIE("cpu reference: %s", qattn_last_error(cpu));
    qattn_buffer_free(cpu, cws);
    int bad = 0;
    for (int i = 0; i < HQ * D; ++i) {
        const float g = qattn_bf16_to_f32(((uint16_t *)eb[O].map)[i]), r = qattn_bf16_to_f32(((uint16_t *)copy[O])[i]);
        if (!CLOSE_ENOUGH((double)g, (double)r)) ++bad;
    }
    qattn_device_caps caps;
    qattn_get_caps(ctx, &caps);
    printf("vulkan_embed: KV store + decode recorded into the engine's command buffer on %s: %s (o[0] = %g)\n",
           caps.device_name, bad ? "MISMATCH" : "matches the CPU reference",
           qattn_bf16_to_f32(((uint16_t *)eb[O].map)[0]));

    /* Teardown: qattn first (it never destroys the engine's objects). */
    for (int i = 0; i < NBUF; ++i) {
        qattn_buffer_free(cpu, cb[i]);
        free(copy[i]);
    }
    qattn_context_free(cpu);
    for (int i = 0; i < NBUF; ++i) qattn_buffer_free(ctx, qb[i]);
    qattn_buffer_free(ctx, qws);
    qattn_context_free(ctx);
    for (int i = 0; i < NBUF; ++i) free_buffer(&eb[i]);
    if (ws.buffer) free_buffer(&ws);
    vkDestroyFence(device, fence, NULL);
    vkDestroyCommandPool(device, pool, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
    return bad ? 1 : 0;
}
