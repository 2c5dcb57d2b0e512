/*
 * The HIP backend's runtime side: device discovery, capabilities, code
 * objects, buffers, the caller's stream and the timing events. Op launchers
 * live in hip_decode.c, hip_kv_store.c and hip_mqa_logits.c.
 *
 * Nothing here synchronises the host except the calls whose contract says
 * so (upload, download, synchronize, last_op_time_ms): ops only enqueue on
 * the context's current stream (qattn_context_options.stream, then
 * qattn_hip_set_stream), so a caller can capture them in a HIP graph.
 *
 * Every iface slot runs between qh_enter and qh_leave: the context's device
 * is made current for the call and the caller's current device restored
 * after it, so qattn never leaves an engine on another device.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/hip.h"
#include "qh_backend.h"
#include "qh_code_objects.h"

/* Which kernels each target has, and from which source (qh_kernels.def). */
static const struct {
    const char *name, *source;
    int targets;
} kernel_specs[QH_K_COUNT] = {
#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) {#name, #source, targets},
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC
};

qattn_status qh_fail(qh_backend *be, qattn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(be->msg, sizeof be->msg, fmt, ap);
    va_end(ap);
    return s;
}

qattn_status qh_check(qh_backend *be, hipError_t e, const char *what) {
    if (e == hipSuccess) return QATTN_OK;
    return qh_fail(be, QATTN_ERR_DEVICE, "%s: %s", what, hipGetErrorString(e));
}

/* ---- device discovery ---- */

/* "gfx942:sramecc+:xnack-" -> "gfx942": target features are not part of
 * the code-object choice (the objects are built feature-neutral). */
static void base_arch(const char *gcn, char *out, size_t n) {
    size_t i = 0;
    for (; gcn[i] && gcn[i] != ':' && i + 1 < n; ++i) out[i] = gcn[i];
    out[i] = '\0';
}

static int target_of(const char *arch) {
#if defined(QH_PLATFORM_NVIDIA)
    (void)arch;
    return QH_T_NV;
#else
    if (strcmp(arch, "gfx942") == 0) return QH_T_GFX942;
    if (strcmp(arch, "gfx1200") == 0 || strcmp(arch, "gfx1201") == 0) return QH_T_GFX12;
    return 0;
#endif
}

static qattn_status device_name_arch(qh_backend *be, int dev, char *name, size_t nn, char *arch,
                                     size_t na) {
#if defined(QH_PLATFORM_AMD)
    hipDeviceProp_t prop;
    qattn_status s = qh_check(be, hipGetDeviceProperties(&prop, dev), "hipGetDeviceProperties");
    if (s != QATTN_OK) return s;
    snprintf(name, nn, "%.*s", (int)(nn - 1), prop.name);
    base_arch(prop.gcnArchName, arch, na);
#elif defined(QH_PLATFORM_NVIDIA)
    struct cudaDeviceProp prop;
    qattn_status s = qh_check(be, cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    if (s != QATTN_OK) return s;
    snprintf(name, nn, "%.*s", (int)(nn - 1), prop.name);
    snprintf(arch, na, "sm_%d%d", prop.major, prop.minor);
    (void)base_arch;
#else
    qattn_status s = qh_check(be, qhsim_device_name_arch(dev, name, nn, arch, na), "simulated device");
    if (s != QATTN_OK) return s;
    (void)base_arch;
#endif
    return QATTN_OK;
}

static int contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; ++hay) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) ++i;
        if (i == n) return 1;
    }
    return n == 0;
}

/* options->device, then QATTN_HIP_DEVICE, then device 0: a decimal index or
 * a case-insensitive substring of the device name. */
static qattn_status pick_device(qh_backend *be, const char *sel, int count, int *out) {
    if (!sel || !sel[0]) sel = getenv("QATTN_HIP_DEVICE");
    if (!sel || !sel[0]) {
        *out = 0;
        return QATTN_OK;
    }
    char *end = NULL;
    long idx = strtol(sel, &end, 10);
    if (end && end != sel && *end == '\0') {
        if (idx < 0 || idx >= count)
            return qh_fail(be, QATTN_ERR_BACKEND_UNAVAILABLE, "device index %ld outside 0..%d", idx,
                           count - 1);
        *out = (int)idx;
        return QATTN_OK;
    }
    for (int d = 0; d < count; ++d) {
        char name[256], arch[96];
        qattn_status s = device_name_arch(be, d, name, sizeof name, arch, sizeof arch);
        if (s != QATTN_OK) return s;
        if (contains_ci(name, sel) || contains_ci(arch, sel)) {
            *out = d;
            return QATTN_OK;
        }
    }
    return qh_fail(be, QATTN_ERR_BACKEND_UNAVAILABLE, "no HIP device matches \"%s\"", sel);
}

static void add_shape(qattn_device_caps *c, int m, int n, int k, qattn_dtype a, qattn_dtype acc) {
    if (c->n_matrix_shapes >= QATTN_MAX_MATRIX_SHAPES) return;
    qattn_matrix_shape *s = &c->matrix_shapes[c->n_matrix_shapes++];
    s->m = (uint16_t)m;
    s->n = (uint16_t)n;
    s->k = (uint16_t)k;
    s->a_type = a;
    s->c_type = acc;
}

/* Capabilities as this backend uses them: matrix shapes are the ones its
 * kernels issue (fp8 and f16 MFMA on gfx942, f16 WMMA on gfx12, f16 wmma on
 * the NVIDIA twin), not every shape
 * the hardware has, so the planners never pick a path (e.g. an f16
 * cooperative-matrix kernel) this backend does not implement. */
static qattn_status fill_caps(qh_backend *be) {
    qattn_device_caps *c = &be->caps;
    memset(c, 0, sizeof *c);
    char arch[96];
    qattn_status s = device_name_arch(be, be->device, c->device_name, sizeof c->device_name, arch,
                                      sizeof arch);
    if (s != QATTN_OK) return s;
    snprintf(c->arch, sizeof c->arch, "%.*s", (int)sizeof c->arch - 1, arch);
    int cu = 0, warp = 0, lds = 0, maxwg = 0;
    if ((s = qh_check(be, hipDeviceGetAttribute(&cu, hipDeviceAttributeMultiprocessorCount, be->device),
                      "hipDeviceGetAttribute(compute units)")) != QATTN_OK ||
        (s = qh_check(be, hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, be->device),
                      "hipDeviceGetAttribute(wave size)")) != QATTN_OK ||
        (s = qh_check(be, hipDeviceGetAttribute(&lds, hipDeviceAttributeMaxSharedMemoryPerBlock, be->device),
                      "hipDeviceGetAttribute(LDS per block)")) != QATTN_OK ||
        (s = qh_check(be, hipDeviceGetAttribute(&maxwg, hipDeviceAttributeMaxThreadsPerBlock, be->device),
                      "hipDeviceGetAttribute(max block)")) != QATTN_OK)
        return s;
    c->compute_units = cu;
    c->subgroup_size_min = c->subgroup_size_max = (uint32_t)warp;
    /* The device's per-block limit for the static LDS these kernels
     * declare (on NVIDIA the 48 KiB static limit, not the opt-in maximum,
     * which only dynamic shared memory can use). */
    c->max_shared_bytes = (uint32_t)lds;
    c->max_workgroup_size = (uint32_t)maxwg;
    c->features = QATTN_FEAT_SHADER_F16 | QATTN_FEAT_STORAGE_8BIT | QATTN_FEAT_STORAGE_16BIT |
                  QATTN_FEAT_BF16 | QATTN_FEAT_TIMESTAMPS;
    be->wave = warp;
    if (be->target == QH_T_GFX942) {
        c->features |= QATTN_FEAT_COOPMAT | QATTN_FEAT_PACKED_FP8_CVT | QATTN_FEAT_FP8_MATRIX;
        c->fp8_matrix_native = QATTN_FP8_E4M3FNUZ;
        add_shape(c, 16, 16, 32, QATTN_FP8_E4M3FNUZ, QATTN_F32); /* MQA staged (MFMA) */
        add_shape(c, 16, 16, 16, QATTN_F16, QATTN_F32);           /* tiled decode (MFMA f16) */
    } else if (be->target == QH_T_GFX12) {
        c->features |= QATTN_FEAT_COOPMAT | QATTN_FEAT_PACKED_FP8_CVT | QATTN_FEAT_FP8_MATRIX;
        c->fp8_matrix_native = QATTN_FP8_E4M3FN;
        add_shape(c, 16, 16, 16, QATTN_F16, QATTN_F32); /* tiled decode (WMMA f16) */
    } else {
        /* the NVIDIA twin: the tiled decode's products through nvcuda::wmma */
        c->features |= QATTN_FEAT_COOPMAT;
        add_shape(c, 16, 16, 16, QATTN_F16, QATTN_F32);
    }
    return QATTN_OK;
}

/* ---- code objects ---- */

static const char *code_target(const qh_backend *be) {
    return be->target == QH_T_NV ? "cuda" : be->caps.arch;
}

static qattn_status load_kernels(qh_backend *be) {
    const char *want = code_target(be);
    const char *srcs[QH_MAX_MODULES];
    for (size_t i = 0; i < qh_code_object_count; ++i) {
        const qh_code_object *co = &qh_code_objects[i];
        if (strcmp(co->target, want) != 0) continue;
        if (be->n_modules == QH_MAX_MODULES)
            return qh_fail(be, QATTN_ERR_DEVICE, "more code objects than module slots");
        hipModule_t m;
        qattn_status s = qh_check(be, hipModuleLoadData(&m, co->begin), "hipModuleLoadData");
        if (s != QATTN_OK) return s;
        srcs[be->n_modules] = co->source;
        be->modules[be->n_modules++] = m;
    }
    if (be->n_modules == 0)
        return qh_fail(be, QATTN_ERR_UNSUPPORTED, "this build has no code object for %s (%s)",
                       be->caps.arch, be->caps.device_name);
    for (int k = 0; k < QH_K_COUNT; ++k) {
        if (!(kernel_specs[k].targets & be->target)) continue;
        int found = 0;
        for (int m = 0; m < be->n_modules && !found; ++m) {
            if (strcmp(srcs[m], kernel_specs[k].source) != 0) continue;
            found = hipModuleGetFunction(&be->fn[k], be->modules[m], kernel_specs[k].name) == hipSuccess;
        }
        if (!found)
            return qh_fail(be, QATTN_ERR_UNSUPPORTED, "code object for %s lacks kernel %s", want,
                           kernel_specs[k].name);
    }
    return QATTN_OK;
}

/* ---- the caller's current device ---- */

/* Makes the context's device current; returns the caller's (-1 when it
 * cannot be read, and then nothing is restored). hipSetDevice only when it
 * differs: it is cheap, but not free, on every call. */
static int qh_enter(qh_backend *be) {
    int prev = -1;
    if (hipGetDevice(&prev) != hipSuccess) prev = -1;
    if (prev != be->device) hipSetDevice(be->device);
    return prev;
}

static void qh_leave(qh_backend *be, int prev) {
    if (prev >= 0 && prev != be->device) hipSetDevice(prev);
}

/* ---- iface slots ---- */

static void qh_destroy(void *p) {
    qh_backend *be = p;
    if (!be) return;
    const int prev = qh_enter(be);
    for (int m = 0; m < be->n_modules; ++m) hipModuleUnload(be->modules[m]);
    if (be->ev_start) hipEventDestroy(be->ev_start);
    if (be->ev_stop) hipEventDestroy(be->ev_stop);
    qh_leave(be, prev);
    free(be);
}

static qattn_status qh_create(const qattn_context_options *opt, void **out, char *err, size_t n) {
    *out = NULL;
    qh_backend *be = calloc(1, sizeof *be);
    if (!be) {
        snprintf(err, n, "out of host memory");
        return QATTN_ERR_OUT_OF_MEMORY;
    }
    int count = 0, prev = -1;
    qattn_status s;
    if (hipGetDevice(&prev) != hipSuccess) prev = -1;
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count == 0) {
        s = qh_fail(be, QATTN_ERR_BACKEND_UNAVAILABLE, "no HIP device (%s platform): %s",
                    QH_PLATFORM_NAME, e != hipSuccess ? hipGetErrorString(e) : "device count 0");
        goto fail;
    }
    if ((s = pick_device(be, opt->device, count, &be->device)) != QATTN_OK) goto fail;
    if ((s = qh_check(be, hipSetDevice(be->device), "hipSetDevice")) != QATTN_OK) goto fail;
    be->stream = (hipStream_t)opt->stream;
    {
        char name[256], arch[96];
        if ((s = device_name_arch(be, be->device, name, sizeof name, arch, sizeof arch)) != QATTN_OK)
            goto fail;
        be->target = target_of(arch);
        if (!be->target) {
            s = qh_fail(be, QATTN_ERR_UNSUPPORTED,
                        "%s (%s) has no code object in this build (targets: gfx942, gfx1200, gfx1201)",
                        arch, name);
            goto fail;
        }
    }
    if ((s = fill_caps(be)) != QATTN_OK) goto fail;
    if ((s = load_kernels(be)) != QATTN_OK) goto fail;
    if ((s = qh_check(be, hipEventCreate(&be->ev_start), "hipEventCreate")) != QATTN_OK ||
        (s = qh_check(be, hipEventCreate(&be->ev_stop), "hipEventCreate")) != QATTN_OK)
        goto fail;
    if (prev >= 0 && prev != be->device) hipSetDevice(prev);
    *out = be;
    return QATTN_OK;
fail:
    snprintf(err, n, "%s", be->msg);
    qh_destroy(be);
    if (prev >= 0) hipSetDevice(prev); /* the caller's device, whatever failed */
    return s;
}

static qattn_status qh_get_caps(void *p, qattn_device_caps *caps) {
    *caps = ((qh_backend *)p)->caps;
    return QATTN_OK;
}

static qattn_status qh_buffer_alloc(void *p, uint64_t bytes, void **handle) {
    qh_backend *be = p;
    const int prev = qh_enter(be);
    void *d = NULL;
    hipError_t e = hipMalloc(&d, (size_t)bytes);
    qh_leave(be, prev);
    if (e != hipSuccess) {
        qh_check(be, e, "hipMalloc");
        return QATTN_ERR_OUT_OF_MEMORY;
    }
    *handle = d;
    return QATTN_OK;
}

static void qh_buffer_free(void *p, void *handle) {
    qh_backend *be = p;
    const int prev = qh_enter(be);
    hipFree(handle);
    qh_leave(be, prev);
}

/* A wrapped device pointer is its own handle; unwrapping frees nothing. */
static qattn_status qh_buffer_wrap(void *p, void *native, uint64_t bytes, void **handle) {
    (void)p;
    (void)bytes;
    *handle = native;
    return QATTN_OK;
}
static void qh_buffer_unwrap(void *p, void *handle) {
    (void)p;
    (void)handle;
}

/* Copies run on the caller's stream, so they are ordered with the ops
 * enqueued there, and are waited for (the API says they complete). */
static qattn_status qh_buffer_upload(void *p, void *handle, uint64_t offset, const void *src,
                                     uint64_t bytes) {
    qh_backend *be = p;
    const int prev = qh_enter(be);
    qattn_status s = qh_check(be, hipMemcpyAsync((char *)handle + offset, src, (size_t)bytes,
                                                 hipMemcpyHostToDevice, be->stream),
                              "hipMemcpyAsync(upload)");
    if (s == QATTN_OK) s = qh_check(be, hipStreamSynchronize(be->stream), "hipStreamSynchronize");
    qh_leave(be, prev);
    return s;
}

static qattn_status qh_buffer_download(void *p, void *handle, uint64_t offset, void *dst,
                                       uint64_t bytes) {
    qh_backend *be = p;
    const int prev = qh_enter(be);
    qattn_status s = qh_check(be, hipMemcpyAsync(dst, (const char *)handle + offset, (size_t)bytes,
                                                 hipMemcpyDeviceToHost, be->stream),
                              "hipMemcpyAsync(download)");
    if (s == QATTN_OK) s = qh_check(be, hipStreamSynchronize(be->stream), "hipStreamSynchronize");
    qh_leave(be, prev);
    return s;
}

static qattn_status qh_synchronize(void *p) {
    qh_backend *be = p;
    const int prev = qh_enter(be);
    qattn_status s = qh_check(be, hipStreamSynchronize(be->stream), "hipStreamSynchronize");
    qh_leave(be, prev);
    return s;
}

qattn_status qh_op_begin(qh_backend *be) {
    be->timed = 0;
    return qh_check(be, hipEventRecord(be->ev_start, be->stream), "hipEventRecord");
}

qattn_status qh_op_end(qh_backend *be) {
    qattn_status s = qh_check(be, hipEventRecord(be->ev_stop, be->stream), "hipEventRecord");
    be->timed = s == QATTN_OK;
    return s;
}

static qattn_status qh_last_op_time_ms(void *p, double *ms) {
    qh_backend *be = p;
    if (!be->timed) return qh_fail(be, QATTN_ERR_INVALID_ARGUMENT, "no timed op yet");
    const int prev = qh_enter(be);
    qattn_status s = qh_check(be, hipEventSynchronize(be->ev_stop), "hipEventSynchronize");
    float t = 0.0f;
    if (s == QATTN_OK) s = qh_check(be, hipEventElapsedTime(&t, be->ev_start, be->ev_stop), "hipEventElapsedTime");
    if (s == QATTN_OK) *ms = t;
    qh_leave(be, prev);
    return s;
}

qattn_status qh_launch(qh_backend *be, enum qh_kernel_id k, unsigned gx, unsigned gy, unsigned gz,
                       unsigned block, void *params, const char *what) {
    return qh_launch_shared(be, k, gx, gy, gz, block, 0, params, what);
}

qattn_status qh_launch_shared(qh_backend *be, enum qh_kernel_id k, unsigned gx, unsigned gy, unsigned gz,
                              unsigned block, unsigned shared, void *params, const char *what) {
    if (!be->fn[k])
        return qh_fail(be, QATTN_ERR_UNSUPPORTED, "%s: kernel %s is not built for %s", what,
                       kernel_specs[k].name, be->caps.arch);
    if (gx == 0 || gy == 0 || gz == 0) return QATTN_OK;
    void *args[1] = {params};
    return qh_check(be, hipModuleLaunchKernel(be->fn[k], gx, gy, gz, block, 1, 1, shared, be->stream, args, NULL),
                    what);
}

static int qh_supports_op(void *p, qattn_op op, const void *plan) {
    const qh_backend *be = p;
    switch (op) {
    case QATTN_OP_DECODE: return qh_decode_supported(be, plan);
    case QATTN_OP_KV_STORE: return 1;
    case QATTN_OP_MQA_LOGITS: return qh_mqa_supported(be, plan);
    case QATTN_OP_PAGED_MQA_LOGITS: return qh_paged_mqa_supported(be, plan);
    }
    return 0;
}

static const char *qh_last_message(void *p) { return ((qh_backend *)p)->msg; }

/* The ops, each between qh_enter and qh_leave (hip_decode.c and the other
 * launchers assume their device is current). */
static qattn_status qh_decode_slot(void *p, const qattn_decode_plan *plan, const qattn_decode_args *a,
                                   const qattn_workspace *ws) {
    const int prev = qh_enter(p);
    qattn_status s = qh_decode(p, plan, a, ws);
    qh_leave(p, prev);
    return s;
}

static qattn_status qh_kv_store_slot(void *p, const qattn_kv_store_args *a) {
    const int prev = qh_enter(p);
    qattn_status s = qh_kv_store(p, a);
    qh_leave(p, prev);
    return s;
}

static qattn_status qh_mqa_logits_slot(void *p, const qattn_mqa_logits_plan *plan,
                                       const qattn_mqa_logits_args *a, const qattn_workspace *ws) {
    const int prev = qh_enter(p);
    qattn_status s = qh_mqa_logits(p, plan, a, ws);
    qh_leave(p, prev);
    return s;
}

static qattn_status qh_paged_mqa_logits_slot(void *p, const qattn_paged_mqa_logits_plan *plan,
                                             const qattn_paged_mqa_logits_args *a, const qattn_workspace *ws) {
    const int prev = qh_enter(p);
    qattn_status s = qh_paged_mqa_logits(p, plan, a, ws);
    qh_leave(p, prev);
    return s;
}

static const qattn_backend_iface qh_iface = {
    .name = "hip",
    .abi_version = QATTN_BACKEND_ABI,
    .create = qh_create,
    .destroy = qh_destroy,
    .get_caps = qh_get_caps,
    .buffer_alloc = qh_buffer_alloc,
    .buffer_free = qh_buffer_free,
    .buffer_upload = qh_buffer_upload,
    .buffer_download = qh_buffer_download,
    .buffer_wrap = qh_buffer_wrap,
    .buffer_unwrap = qh_buffer_unwrap,
    .supports_op = qh_supports_op,
    .decode = qh_decode_slot,
    .kv_store = qh_kv_store_slot,
    .mqa_logits = qh_mqa_logits_slot,
    .paged_mqa_logits = qh_paged_mqa_logits_slot,
    .synchronize = qh_synchronize,
    .last_op_time_ms = qh_last_op_time_ms,
    .read_stream = qh_read_stream,
    .last_message = qh_last_message,
};

const qattn_backend_iface *qattn_backend_hip(void) { return &qh_iface; }

qattn_status qattn_hip_set_stream(qattn_context *ctx, void *stream) {
    qh_backend *be = qattn_context_instance(ctx, &qh_iface);
    if (!be)
        return qattn_context_fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                                  "qattn_hip_set_stream: ctx is not a HIP context");
    be->stream = (hipStream_t)stream;
    return QATTN_OK;
}
