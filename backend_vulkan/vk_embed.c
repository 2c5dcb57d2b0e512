/* The embedding calls of qattn/vulkan.h: a context on the caller's device,
 * recording into the caller's command buffer, warm-up and the pipeline
 * cache. Each finds the context's backend instance through the core and
 * reports failures into the context's last error. The structs of vulkan.h
 * that carry a size pass the core's reader (qattn_struct_read/_write) with
 * their version tables below, so no call reads or writes past the caller's
 * version. */
#define _POSIX_C_SOURCE 200809L /* open flags, fstat */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vk_internal.h"

/* ---- the versions of vulkan.h's sized structs ---------------------------- */
/* Each struct as its first version declared it. A later version appends
 * fields to the public struct, a frozen copy of itself here and its row in
 * the table; the checks fail the build when the public struct changes in any
 * other way. */
typedef struct {
    size_t size;
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    uint32_t queue_family;
    uint32_t queue_index;
    const void *enabled_features_chain;
    const void *enabled_features_10;
    const char *const *enabled_extensions;
    uint32_t enabled_extension_count;
    void (*(*get_instance_proc_addr)(VkInstance instance, const char *name))(void);
} vulkan_device_v1;

typedef struct {
    size_t size;
    const qattn_decode_plan *decode_plans;
    size_t n_decode_plans;
    const qattn_mqa_logits_plan *mqa_plans;
    size_t n_mqa_plans;
    uint32_t kv_store_dtypes;
} warmup_set_v1;

typedef struct {
    size_t size;
    uint64_t created;
    uint64_t cache_hits;
    uint64_t compiled;
    uint64_t no_feedback;
    double create_ms;
} pipeline_stats_v1;

QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, size);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, instance);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, physical_device);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, device);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, queue_family);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, queue_index);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, enabled_features_chain);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, enabled_features_10);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, enabled_extensions);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, enabled_extension_count);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_device, vulkan_device_v1, get_instance_proc_addr);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_warmup_set, warmup_set_v1, size);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_warmup_set, warmup_set_v1, decode_plans);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_warmup_set, warmup_set_v1, n_decode_plans);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_warmup_set, warmup_set_v1, mqa_plans);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_warmup_set, warmup_set_v1, n_mqa_plans);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_warmup_set, warmup_set_v1, kv_store_dtypes);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_pipeline_stats, pipeline_stats_v1, size);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_pipeline_stats, pipeline_stats_v1, created);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_pipeline_stats, pipeline_stats_v1, cache_hits);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_pipeline_stats, pipeline_stats_v1, compiled);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_pipeline_stats, pipeline_stats_v1, no_feedback);
QATTN_STRUCT_SAME_FIELD(qattn_vulkan_pipeline_stats, pipeline_stats_v1, create_ms);

static const qattn_struct_version device_versions[] = {
    {sizeof(vulkan_device_v1), QATTN_STRUCT_END(vulkan_device_v1, get_instance_proc_addr)},
};
static const qattn_struct_version warmup_set_versions[] = {
    {sizeof(warmup_set_v1), QATTN_STRUCT_END(warmup_set_v1, kv_store_dtypes)},
};
static const qattn_struct_version pipeline_stats_versions[] = {
    {sizeof(pipeline_stats_v1), QATTN_STRUCT_END(pipeline_stats_v1, create_ms)},
};
#define N_VERSIONS(t) ((int)(sizeof(t) / sizeof((t)[0])))

/* The newest row of each table is this build's struct. */
_Static_assert(sizeof(qattn_vulkan_device) == sizeof(vulkan_device_v1),
               "qattn_vulkan_device changed: add its version to device_versions");
_Static_assert(sizeof(qattn_vulkan_warmup_set) == sizeof(warmup_set_v1),
               "qattn_vulkan_warmup_set changed: add its version to warmup_set_versions");
_Static_assert(sizeof(qattn_vulkan_pipeline_stats) == sizeof(pipeline_stats_v1),
               "qattn_vulkan_pipeline_stats changed: add its version to pipeline_stats_versions");

/* The Vulkan instance of ctx, or NULL (with ctx's last error set). */
static qattn_vk *vk_of(qattn_context *ctx, const char *fn) {
    qattn_vk *vk = (qattn_vk *)qattn_context_backend_instance(ctx, qattn_backend_vulkan());
    if (!vk && ctx) {
        char what[160];
        snprintf(what, sizeof what, "%s: ctx is not a Vulkan context", fn);
        qattn_context_backend_fail(ctx, QATTN_ERR_INVALID_ARGUMENT, what);
    }
    return vk;
}

/* Returns s, recording it (with the backend's text) on ctx when it failed. */
static qattn_status report(qattn_context *ctx, qattn_status s, const char *fn) {
    return s == QATTN_OK ? s : qattn_context_backend_fail(ctx, s, fn);
}

/* The end of a call that fills a struct the caller sized (out->size): the
 * fields of the caller's version from `full`, this build's struct; nothing
 * when the size is refused. */
static qattn_status give(qattn_context *ctx, qattn_vk *vk, const char *fn, void *out, const void *full,
                         const qattn_struct_version *versions, int n, const char *type) {
    return report(ctx,
                  qattn_struct_write(out, full, versions, n, "out->size", type, NULL, vk->message,
                                     sizeof vk->message),
                  fn);
}

qattn_status qattn_vulkan_context_create(const qattn_vulkan_device *device,
                                         const qattn_context_options *options, qattn_context **out,
                                         char *err, size_t err_size) {
    char scratch[8];
    if (!err || err_size == 0) {
        err = scratch;
        err_size = sizeof scratch;
    }
    err[0] = '\0';
    if (out) *out = NULL;
    if (!out) {
        snprintf(err, err_size, "out: NULL");
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    qattn_context_options opt; /* the import reads this build's layouts only */
    qattn_status s = qattn_context_options_copy(options, &opt, err, err_size);
    if (s != QATTN_OK) return s;
    if (!device) {
        snprintf(err, err_size, "device: NULL");
        return QATTN_ERR_INVALID_ARGUMENT;
    }
    qattn_vulkan_device dev;
    s = qattn_struct_read(&dev, device, device_versions, N_VERSIONS(device_versions), "device->size",
                          "qattn_vulkan_device", NULL, err, err_size);
    if (s != QATTN_OK) return s;
    void *be = NULL;
    char why[1024] = "";
    s = qattn_vk_import(&dev, &opt, &be, why, sizeof why);
    if (s != QATTN_OK) {
        snprintf(err, err_size, "vulkan backend: %s", why[0] ? why : qattn_status_text(s));
        return s;
    }
    return qattn_context_adopt(qattn_backend_vulkan(), be, out, err, err_size);
}

qattn_status qattn_vulkan_get_device(qattn_context *ctx, qattn_vulkan_device *out) {
    static const char fn[] = "qattn_vulkan_get_device";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (!out) return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "out: NULL"), fn);
    qattn_vulkan_device d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.instance = vk->instance;
    d.physical_device = vk->phys;
    d.device = vk->device;
    d.queue_family = vk->queue_family;
    d.queue_index = vk->queue_index;
    d.get_instance_proc_addr = (void (*(*)(VkInstance, const char *))(void))vk->vki.vkGetInstanceProcAddr;
    return give(ctx, vk, fn, out, &d, device_versions, N_VERSIONS(device_versions), "qattn_vulkan_device");
}

qattn_status qattn_vulkan_record_begin(qattn_context *ctx, VkCommandBuffer cmd) {
    static const char fn[] = "qattn_vulkan_record_begin";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (!cmd) return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "cmd: VK_NULL_HANDLE"), fn);
    if (vk->mode != QATTN_VK_SUBMIT || vk->recording)
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                                         "ctx: already recording (call qattn_vulkan_record_end first)"),
                      fn);
    vk->mode = QATTN_VK_RECORD;
    vk->ext_cmd = cmd;
    vk->ext_ops = 0;
    return QATTN_OK;
}

qattn_status qattn_vulkan_record_end(qattn_context *ctx, uint32_t *ops) {
    static const char fn[] = "qattn_vulkan_record_end";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (vk->mode != QATTN_VK_RECORD)
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                                         "ctx: not recording (no qattn_vulkan_record_begin)"),
                      fn);
    if (ops) *ops = vk->ext_ops;
    vk->mode = QATTN_VK_SUBMIT;
    vk->ext_cmd = VK_NULL_HANDLE;
    vk->ext_ops = 0;
    return QATTN_OK;
}

/* ---- warm-up ----------------------------------------------------------- */

/* An op run with these arguments in QATTN_VK_PREPARE mode creates the
 * pipelines of its plan and launches nothing, so the tensors only need
 * shapes, dtypes and strides: they all name one small real allocation
 * (aligned, so every address-alignment choice is its widest). */
typedef qattn_buffer warm_buffer;

static qattn_tensor warm_tensor(warm_buffer *w, qattn_dtype dt, int32_t rank, int64_t d0, int64_t d1,
                                int64_t d2, int64_t d3) {
    const int64_t shape[4] = {d0, d1, d2, d3};
    return qattn_tensor_contiguous(w, 0, dt, rank, shape);
}

static qattn_status warm_decode(qattn_vk *vk, warm_buffer *w, const qattn_decode_plan *p) {
    const int64_t B = p->batch, R = p->rows, Hq = p->q_heads, Hkv = p->kv_heads;
    const int64_t D = p->head_dim, Dv = p->head_dim_v, P = 16;
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = warm_tensor(w, QATTN_BF16, 4, B, R, Hq, D);
    a.k_cache = warm_tensor(w, p->kv_dtype, 3, P, Hkv, D, 0);
    a.v_cache = warm_tensor(w, p->kv_dtype, 3, P, Hkv, Dv, 0);
    if (p->kv_dtype != QATTN_BF16) {
        a.k_scale = warm_tensor(w, QATTN_F32, 2, P, Hkv, 0, 0);
        a.v_scale = warm_tensor(w, QATTN_F32, 2, P, Hkv, 0, 0);
    }
    a.kv_indptr = warm_tensor(w, QATTN_I32, 1, B + 1, 0, 0, 0);
    a.kv_indices = warm_tensor(w, QATTN_I32, 1, B, 0, 0, 0);
    a.kv_lens = warm_tensor(w, QATTN_I32, 1, B, 0, 0, 0);
    a.o = warm_tensor(w, QATTN_BF16, 4, B, R, Hq, Dv);
    a.page_size = (int32_t)P;
    a.max_kv_len = (int32_t)P;
    a.sm_scale = 1.0f;
    a.window_left = -1;
    qattn_workspace ws = {w, 0, p->workspace_bytes};
    return qattn_vk_decode(vk, p, &a, p->workspace_bytes ? &ws : NULL);
}

static qattn_status warm_mqa(qattn_vk *vk, warm_buffer *w, const qattn_mqa_logits_plan *p) {
    const int64_t S = p->rows, Skv = p->kv_len, H = p->heads, D = p->head_dim;
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = warm_tensor(w, p->q_dtype, 3, S, H, D, 0);
    a.k = warm_tensor(w, p->k_dtype, 2, Skv, D, 0, 0);
    a.k_scale = warm_tensor(w, QATTN_F32, 1, Skv, 0, 0, 0);
    a.weights = warm_tensor(w, QATTN_F32, 2, S, H, 0, 0);
    a.ks = warm_tensor(w, QATTN_I32, 1, S, 0, 0, 0);
    a.ke = warm_tensor(w, QATTN_I32, 1, S, 0, 0, 0);
    a.logits = warm_tensor(w, QATTN_F32, 2, S, Skv, 0, 0);
    qattn_workspace ws = {w, 0, p->workspace_bytes};
    return qattn_vk_mqa_logits(vk, p, &a, p->workspace_bytes ? &ws : NULL);
}

static qattn_status warm_kv_store(qattn_vk *vk, warm_buffer *w, qattn_dtype dt) {
    const int64_t D = 128, Hkv = 1;
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = warm_tensor(w, QATTN_BF16, 3, 1, Hkv, D, 0);
    a.v_new = warm_tensor(w, QATTN_BF16, 3, 1, Hkv, D, 0);
    a.slot_mapping = warm_tensor(w, QATTN_I32, 1, 1, 0, 0, 0);
    a.k_cache = warm_tensor(w, dt, 3, 1, Hkv, D, 0);
    a.v_cache = warm_tensor(w, dt, 3, 1, Hkv, D, 0);
    if (dt != QATTN_BF16) {
        a.k_scale = warm_tensor(w, QATTN_F32, 2, 1, Hkv, 0, 0);
        a.v_scale = warm_tensor(w, QATTN_F32, 2, 1, Hkv, 0, 0);
    }
    return qattn_vk_kv_store(vk, &a);
}

qattn_status qattn_vulkan_warmup(qattn_context *ctx, const qattn_vulkan_warmup_set *caller_set) {
    static const char fn[] = "qattn_vulkan_warmup";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (!caller_set) return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "set: NULL"), fn);
    qattn_vulkan_warmup_set copy; /* what follows reads this build's layout only */
    qattn_status rs = qattn_struct_read(&copy, caller_set, warmup_set_versions, N_VERSIONS(warmup_set_versions),
                                        "set->size", "qattn_vulkan_warmup_set", NULL, vk->message,
                                        sizeof vk->message);
    if (rs != QATTN_OK) return report(ctx, rs, fn);
    const qattn_vulkan_warmup_set *set = &copy;
    if ((set->n_decode_plans && !set->decode_plans) || (set->n_mqa_plans && !set->mqa_plans))
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "set: %s NULL with a count > 0",
                                         set->n_decode_plans && !set->decode_plans ? "decode_plans"
                                                                                   : "mqa_plans"),
                      fn);
    const uint32_t kv_ok = (1u << QATTN_BF16) | (1u << QATTN_FP8_E4M3FN) | (1u << QATTN_FP8_E4M3FNUZ) |
                           (1u << QATTN_FP8_E5M2) | (1u << QATTN_I8);
    if (set->kv_store_dtypes & ~kv_ok)
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                                         "set->kv_store_dtypes: 0x%x names a dtype no KV cache has "
                                         "(bf16, fp8 fn/fnuz/e5m2, i8)",
                                         set->kv_store_dtypes),
                      fn);
    /* Every plan passes the checks a run applies to it (the digest, this
     * device's limits, the backend can run it) before any pipeline is
     * built: an edited plan could ask the compiler for anything. */
    char name[64];
    for (size_t i = 0; i < set->n_decode_plans; ++i) {
        snprintf(name, sizeof name, "%s: set->decode_plans[%zu]", fn, i);
        qattn_status ps = qattn_context_check_decode_plan(ctx, &set->decode_plans[i], name);
        if (ps != QATTN_OK) return ps;
    }
    for (size_t i = 0; i < set->n_mqa_plans; ++i) {
        snprintf(name, sizeof name, "%s: set->mqa_plans[%zu]", fn, i);
        qattn_status ps = qattn_context_check_mqa_logits_plan(ctx, &set->mqa_plans[i], name);
        if (ps != QATTN_OK) return ps;
    }
    warm_buffer *w = NULL;
    qattn_status as = qattn_buffer_alloc(ctx, 256, &w);
    if (as != QATTN_OK) return as;
    const qattn_vk_mode saved = vk->mode;
    vk->mode = QATTN_VK_PREPARE;
    qattn_status s = QATTN_OK;
    char what[96];
    snprintf(what, sizeof what, "%s", fn);
    for (size_t i = 0; s == QATTN_OK && i < set->n_decode_plans; ++i) {
        s = warm_decode(vk, w, &set->decode_plans[i]);
        if (s != QATTN_OK) snprintf(what, sizeof what, "%s: decode_plans[%zu]", fn, i);
    }
    for (size_t i = 0; s == QATTN_OK && i < set->n_mqa_plans; ++i) {
        s = warm_mqa(vk, w, &set->mqa_plans[i]);
        if (s != QATTN_OK) snprintf(what, sizeof what, "%s: mqa_plans[%zu]", fn, i);
    }
    for (int dt = 0; s == QATTN_OK && dt < 32; ++dt)
        if (set->kv_store_dtypes & (1u << dt)) {
            s = warm_kv_store(vk, w, (qattn_dtype)dt);
            if (s != QATTN_OK) snprintf(what, sizeof what, "%s: kv_store %s", fn, qattn_dtype_name((qattn_dtype)dt));
        }
    if (vk->recording) qattn_vk_abandon(vk);
    vk->mode = saved;
    qattn_buffer_free(ctx, w);
    return report(ctx, s, what);
}

qattn_status qattn_vulkan_warmup_begin(qattn_context *ctx) {
    static const char fn[] = "qattn_vulkan_warmup_begin";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (vk->mode != QATTN_VK_SUBMIT || vk->recording)
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                                         "ctx: recording or already warming up (end that first)"),
                      fn);
    vk->mode = QATTN_VK_PREPARE;
    return QATTN_OK;
}

qattn_status qattn_vulkan_warmup_end(qattn_context *ctx) {
    static const char fn[] = "qattn_vulkan_warmup_end";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (vk->mode != QATTN_VK_PREPARE)
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                                         "ctx: not warming up (no qattn_vulkan_warmup_begin)"),
                      fn);
    vk->mode = QATTN_VK_SUBMIT;
    return QATTN_OK;
}

/* ---- pipeline cache ---------------------------------------------------- */

qattn_status qattn_vulkan_pipeline_cache_load(qattn_context *ctx, const void *data, size_t bytes) {
    static const char fn[] = "qattn_vulkan_pipeline_cache_load";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    return report(ctx, qattn_vk_pipeline_cache_load(vk, data, bytes), fn);
}

qattn_status qattn_vulkan_pipeline_cache_save(qattn_context *ctx, void *data, size_t *bytes) {
    static const char fn[] = "qattn_vulkan_pipeline_cache_save";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    return report(ctx, qattn_vk_pipeline_cache_save(vk, data, bytes), fn);
}

/* Opens path for reading only if it is a regular file of at most the cap
 * (not blocking on a FIFO: O_NONBLOCK, then fstat on the descriptor that
 * is read, so the file cannot be swapped in between); returns its size in
 * *n, or -1 with the reason in vk's message. */
static int open_cache_file(qattn_vk *vk, const char *path, size_t *n) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "path: cannot open %s", path);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "path: %s is not a regular file", path);
        return -1;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES) {
        close(fd);
        qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT,
                      "path: %s has %lld bytes, over the %u a pipeline cache can have "
                      "(QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES)",
                      path, (long long)st.st_size, (unsigned)QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES);
        return -1;
    }
    *n = (size_t)st.st_size;
    return fd;
}

qattn_status qattn_vulkan_pipeline_cache_load_file(qattn_context *ctx, const char *path) {
    static const char fn[] = "qattn_vulkan_pipeline_cache_load_file";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (!path) return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "path: NULL"), fn);
    size_t n = 0;
    const int fd = open_cache_file(vk, path, &n);
    if (fd < 0) return report(ctx, QATTN_ERR_INVALID_ARGUMENT, fn);
    void *data = malloc(n > 0 ? n : 1);
    if (!data) {
        close(fd);
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_OUT_OF_MEMORY, "vulkan: out of host memory"), fn);
    }
    size_t got = 0;
    while (got < n) { /* a regular file: reads block, short ones continue */
        const ssize_t r = read(fd, (char *)data + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    qattn_status s = got == n ? qattn_vk_pipeline_cache_load(vk, data, got)
                              : qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "path: short read of %s", path);
    free(data);
    return report(ctx, s, fn);
}

qattn_status qattn_vulkan_pipeline_cache_save_file(qattn_context *ctx, const char *path) {
    static const char fn[] = "qattn_vulkan_pipeline_cache_save_file";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (!path) return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "path: NULL"), fn);
    size_t n = 0;
    qattn_status s = qattn_vk_pipeline_cache_save(vk, NULL, &n);
    if (s != QATTN_OK) return report(ctx, s, fn);
    void *data = malloc(n ? n : 1);
    if (!data) return report(ctx, qattn_vk_fail(vk, QATTN_ERR_OUT_OF_MEMORY, "vulkan: out of host memory"), fn);
    if ((s = qattn_vk_pipeline_cache_save(vk, data, &n)) != QATTN_OK) {
        free(data);
        return report(ctx, s, fn);
    }
    const size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        free(data);
        return report(ctx, qattn_vk_fail(vk, QATTN_ERR_OUT_OF_MEMORY, "vulkan: out of host memory"), fn);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    int ok = f != NULL;
    if (f) {
        ok = fwrite(data, 1, n, f) == n;
        ok = (fclose(f) == 0) && ok;
    }
    if (ok) ok = rename(tmp, path) == 0;
    else if (f) remove(tmp);
    free(data);
    if (!ok) {
        s = qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "path: cannot write %s (through %s)", path, tmp);
        free(tmp);
        return report(ctx, s, fn);
    }
    free(tmp);
    return QATTN_OK;
}

qattn_status qattn_vulkan_pipeline_stats_get(qattn_context *ctx, qattn_vulkan_pipeline_stats *out) {
    static const char fn[] = "qattn_vulkan_pipeline_stats_get";
    qattn_vk *vk = vk_of(ctx, fn);
    if (!vk) return QATTN_ERR_INVALID_ARGUMENT;
    if (!out) return report(ctx, qattn_vk_fail(vk, QATTN_ERR_INVALID_ARGUMENT, "out: NULL"), fn);
    const qattn_vulkan_pipeline_stats st = {sizeof st, vk->n_created, vk->n_cache_hits,
                                            vk->n_compiled, vk->n_no_feedback, vk->create_ms};
    return give(ctx, vk, fn, out, &st, pipeline_stats_versions, N_VERSIONS(pipeline_stats_versions),
                "qattn_vulkan_pipeline_stats");
}
