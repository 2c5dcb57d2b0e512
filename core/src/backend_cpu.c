/* The cpu backend: the spec's reference implementations behind the same
 * interface as the GPU backends, so tests and the bench can run one suite
 * against it. Buffers are host memory. Plans are accepted but ignored: the
 * reference computes each op directly, without splits or tiles. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

typedef struct cpu_backend {
    double last_ms;
} cpu_backend;

static qattn_status cpu_create(const qattn_context_options *options, void **be, char *err,
                               size_t n) {
    /* One host device: any selector other than default/"0"/"cpu" is a miss. */
    const char *dev = options->device;
    if (dev && dev[0] && strcmp(dev, "0") != 0 && strcmp(dev, "cpu") != 0)
        return qattn__err(err, n, QATTN_ERR_BACKEND_UNAVAILABLE,
                          "device \"%s\": the cpu backend has only device 0 (\"cpu\")", dev);
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b) return qattn__err(err, n, QATTN_ERR_OUT_OF_MEMORY, "out of host memory");
    *be = b;
    return QATTN_OK;
}

static void cpu_destroy(void *be) { free(be); }

static qattn_status cpu_get_caps(void *be, qattn_device_caps *caps) {
    memset(caps, 0, sizeof *caps);
    strcpy(caps->arch, "cpu");
    strcpy(caps->device_name, "host CPU (reference)");
    caps->compute_units = 1;
    caps->subgroup_size_min = caps->subgroup_size_max = 1;
    /* Nominal: planners need a budget to produce a plan; the reference itself
     * uses no shared memory. */
    caps->max_shared_bytes = 65536;
    caps->max_workgroup_size = 1024;
    caps->features = QATTN_FEAT_TIMESTAMPS | QATTN_FEAT_STORAGE_8BIT | QATTN_FEAT_STORAGE_16BIT |
                     QATTN_FEAT_SHADER_F16 | QATTN_FEAT_BF16;
    return QATTN_OK;
}

static qattn_status cpu_alloc(void *be, uint64_t bytes, void **handle) {
    if (bytes > SIZE_MAX - 63) return QATTN_ERR_OUT_OF_MEMORY;
    /* 64-byte alignment so alignment gates see what a GPU allocator gives. */
    void *p = aligned_alloc(64, (size_t)((bytes + 63) & ~(uint64_t)63));
    if (!p) return QATTN_ERR_OUT_OF_MEMORY;
    *handle = p;
    return QATTN_OK;
}

static void cpu_free(void *be, void *handle) { free(handle); }

/* The handle of a wrapped buffer is the caller's host pointer itself, so
 * there is nothing to unwrap. */
static qattn_status cpu_wrap(void *be, void *native, uint64_t bytes, void **handle) {
    *handle = native;
    return QATTN_OK;
}

static uint64_t cpu_address(void *be, void *handle) {
    (void)be;
    return (uint64_t)(uintptr_t)handle;
}

static qattn_status cpu_upload(void *be, void *handle, uint64_t off, const void *src, uint64_t n) {
    memcpy((char *)handle + off, src, (size_t)n);
    return QATTN_OK;
}

static qattn_status cpu_download(void *be, void *handle, uint64_t off, void *dst, uint64_t n) {
    memcpy(dst, (const char *)handle + off, (size_t)n);
    return QATTN_OK;
}

static double now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static qattn_status cpu_decode(void *be, const qattn_decode_plan *plan, const qattn_decode_args *a,
                               const qattn_workspace *ws) {
    double t0 = now_ms();
    qattn_status s = qattn__ref_decode(a);
    ((cpu_backend *)be)->last_ms = now_ms() - t0;
    return s;
}

static qattn_status cpu_kv_store(void *be, const qattn_kv_store_args *a) {
    double t0 = now_ms();
    qattn_status s = qattn__ref_kv_store(a);
    ((cpu_backend *)be)->last_ms = now_ms() - t0;
    return s;
}

static qattn_status cpu_mqa_logits(void *be, const qattn_mqa_logits_plan *plan,
                                   const qattn_mqa_logits_args *a, const qattn_workspace *ws) {
    double t0 = now_ms();
    qattn_status s = qattn__ref_mqa_logits(a);
    ((cpu_backend *)be)->last_ms = now_ms() - t0;
    return s;
}

static qattn_status cpu_paged_mqa_logits(void *be, const qattn_paged_mqa_logits_plan *plan,
                                         const qattn_paged_mqa_logits_args *a, const qattn_workspace *ws) {
    (void)plan;
    (void)ws;
    double t0 = now_ms();
    qattn_status s = qattn__ref_paged_mqa_logits(a);
    ((cpu_backend *)be)->last_ms = now_ms() - t0;
    return s;
}

/* The host's read rate: one pass of 32-bit adds, which compilers
 * vectorise into wide loads, over the range. */
static qattn_status cpu_read_stream(void *be, void *src, uint64_t offset, uint64_t bytes, void *sum,
                                    uint64_t sum_offset) {
    double t0 = now_ms();
    const unsigned char *p = (const unsigned char *)src + offset;
    uint32_t acc[4] = {0, 0, 0, 0};
    for (uint64_t i = 0; i < bytes; i += 16) {
        uint32_t w[4];
        memcpy(w, p + i, 16);
        for (int k = 0; k < 4; ++k) acc[k] += w[k];
    }
    uint32_t *out = (uint32_t *)((unsigned char *)sum + sum_offset);
    *out += acc[0] + acc[1] + acc[2] + acc[3];
    ((cpu_backend *)be)->last_ms = now_ms() - t0;
    return QATTN_OK;
}

static qattn_status cpu_decode_read(void *be, const qattn_decode_args *a, void *sum, uint64_t sum_offset) {
    double t0 = now_ms();
    uint32_t *out = (uint32_t *)((unsigned char *)sum + sum_offset), v;
    memcpy(&v, out, 4);
    qattn_status s = qattn__ref_decode_read(a, &v);
    memcpy(out, &v, 4);
    ((cpu_backend *)be)->last_ms = now_ms() - t0;
    return s;
}

static qattn_status cpu_synchronize(void *be) { return QATTN_OK; }

static qattn_status cpu_last_ms(void *be, double *ms) {
    *ms = ((cpu_backend *)be)->last_ms;
    return QATTN_OK;
}

static const qattn_backend_iface cpu_iface = {
    .name = "cpu",
    .abi_version = QATTN_BACKEND_ABI,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .get_caps = cpu_get_caps,
    .buffer_alloc = cpu_alloc,
    .buffer_free = cpu_free,
    .buffer_upload = cpu_upload,
    .buffer_download = cpu_download,
    .buffer_wrap = cpu_wrap,
    .buffer_unwrap = NULL,
    .buffer_address = cpu_address,
    .supports_op = NULL,
    .decode = cpu_decode,
    .kv_store = cpu_kv_store,
    .mqa_logits = cpu_mqa_logits,
    .paged_mqa_logits = cpu_paged_mqa_logits,
    .synchronize = cpu_synchronize,
    .last_op_time_ms = cpu_last_ms,
    .read_stream = cpu_read_stream,
    .last_message = NULL,
    .decode_read = cpu_decode_read,
};

const qattn_backend_iface *qattn_backend_cpu(void) { return &cpu_iface; }
