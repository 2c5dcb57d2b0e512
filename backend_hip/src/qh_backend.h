/*
 * The HIP backend's instance and what its source files share: the device,
 * the caller's stream, the loaded modules and one function handle per
 * kernel of qh_kernels.def. Not installed.
 */
#ifndef QH_BACKEND_H
#define QH_BACKEND_H

#include <stdint.h>

#include "qattn/backend.h"
#include "qh_platform.h"

#include "qh_kernel_ids.h"

#define QH_MAX_MODULES 8
#define QH_MSG_BYTES 512

typedef struct qh_backend {
    int device;
    int target;          /* QH_T_GFX942, QH_T_GFX12 or QH_T_NV */
    int wave;            /* wave / warp size */
    hipStream_t stream;  /* the caller's (qattn_context_options.stream) */
    qattn_device_caps caps;
    hipModule_t modules[QH_MAX_MODULES];
    int n_modules;
    hipFunction_t fn[QH_K_COUNT]; /* NULL where the kernel is not built for this target */
    hipEvent_t ev_start, ev_stop;
    int timed;           /* an op has recorded both events */
    char msg[QH_MSG_BYTES];
} qh_backend;

/* Records a device error (with the runtime's text) and returns
 * QATTN_ERR_DEVICE; QATTN_OK for hipSuccess. */
qattn_status qh_check(qh_backend *be, hipError_t e, const char *what);
/* Records a message and returns s. */
qattn_status qh_fail(qh_backend *be, qattn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Launches kernel `k` with one parameter block on the caller's stream;
 * never waits. */
qattn_status qh_launch(qh_backend *be, enum qh_kernel_id k, unsigned gx, unsigned gy, unsigned gz,
                       unsigned block, void *params, const char *what);
/* The same with `shared` bytes of dynamic LDS (the tiled decode's, from
 * its plan). */
qattn_status qh_launch_shared(qh_backend *be, enum qh_kernel_id k, unsigned gx, unsigned gy, unsigned gz,
                              unsigned block, unsigned shared, void *params, const char *what);
/* Brackets an op's launches with the timing events (last_op_time_ms). */
qattn_status qh_op_begin(qh_backend *be);
qattn_status qh_op_end(qh_backend *be);

/* Device address of element 0 of a tensor (0 for an absent operand). */
static inline uint64_t qh_addr(const qattn_tensor *t) {
    return t->buffer ? (uint64_t)(uintptr_t)qattn_buffer_handle(t->buffer) + t->offset : 0;
}

/* Runtime slots (hip_runtime.c). qh_enter makes the context's device
 * current and returns the caller's (-1: unknown, nothing is restored);
 * qh_leave restores it. */
int qh_enter(qh_backend *be);
void qh_leave(qh_backend *be, int prev);
qattn_status qh_create(const qattn_context_options *opt, void **out, char *err, size_t n);
void qh_destroy(void *be);
qattn_status qh_get_caps(void *be, qattn_device_caps *caps);
qattn_status qh_buffer_alloc(void *be, uint64_t bytes, void **handle);
void qh_buffer_free(void *be, void *handle);
qattn_status qh_buffer_wrap(void *be, void *native, uint64_t bytes, void **handle);
void qh_buffer_unwrap(void *be, void *handle);
qattn_status qh_buffer_upload(void *be, void *handle, uint64_t offset, const void *src, uint64_t bytes);
qattn_status qh_buffer_download(void *be, void *handle, uint64_t offset, void *dst, uint64_t bytes);
qattn_status qh_synchronize(void *be);
qattn_status qh_last_op_time_ms(void *be, double *ms);

/* Op entry points (hip_decode.c, hip_kv_store.c, hip_mqa_logits.c). */
int qh_decode_supported(const qh_backend *be, const qattn_decode_plan *plan);
int qh_mqa_supported(const qh_backend *be, const qattn_mqa_logits_plan *plan);
qattn_status qh_decode(void *be, const qattn_decode_plan *plan, const qattn_decode_args *args,
                       const qattn_workspace *ws);
qattn_status qh_kv_store(void *be, const qattn_kv_store_args *args);
/* qattn_decode_read and qattn_read_stream (hip_bandwidth.c). */
qattn_status qh_decode_read(void *be, const qattn_decode_args *a, void *sum, uint64_t sum_offset);
qattn_status qh_read_stream(void *be, void *src, uint64_t offset, uint64_t bytes, void *sum,
                            uint64_t sum_offset);
qattn_status qh_mqa_logits(void *be, const qattn_mqa_logits_plan *plan,
                           const qattn_mqa_logits_args *args, const qattn_workspace *ws);
/* Paged MQA logits (hip_paged_mqa_logits.c). */
int qh_paged_mqa_supported(const qh_backend *be, const qattn_paged_mqa_logits_plan *plan);
qattn_status qh_paged_mqa_logits(void *be, const qattn_paged_mqa_logits_plan *plan,
                                 const qattn_paged_mqa_logits_args *args, const qattn_workspace *ws);

#endif /* QH_BACKEND_H */
