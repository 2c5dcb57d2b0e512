/*
 * qattn's HIP backend (library qattn_hip, CMake target qattn::hip).
 *
 * Pass qattn_backend_hip() to qattn_context_create(). The backend runs on
 * AMD GPUs through ROCm (code objects for gfx942, gfx1200 and gfx1201 are
 * embedded in the library and chosen by the device's gcnArchName; any other
 * AMD target makes context creation fail with QATTN_ERR_UNSUPPORTED) or,
 * when built for the NVIDIA platform, on NVIDIA GPUs through the CUDA
 * runtime (the same kernel sources with their portable primitives).
 * docs/hip.md says what was verified on which hardware.
 *
 * Streams: set qattn_context_options.stream to a hipStream_t (a
 * cudaStream_t on the NVIDIA platform); NULL means the default stream.
 * qattn_hip_set_stream changes it between calls, so each call can follow
 * the caller's current stream (an engine's per-step or per-layer stream).
 * Ops (qattn_decode_run, qattn_kv_store, qattn_mqa_logits_run) only enqueue
 * work on that stream and never wait for the device, so they can be
 * captured in a HIP graph (a CUDA graph on the NVIDIA platform): the graph
 * keeps the device addresses of the tensors, so replays read whatever the
 * buffers hold then. QATTN_CHECK_INDICES=1 downloads the index tensors
 * before each op, which waits for the device: leave it off while capturing.
 * Buffer uploads and downloads are ordered on the same
 * stream and complete before they return (not capturable: do them outside
 * a capture); qattn_synchronize waits for the stream; qattn_last_op_time_ms
 * reads the events recorded around the last op.
 *
 * Current device: every call makes the context's device current while it
 * runs and restores the caller's current device before it returns.
 *
 * Memory: qattn_buffer_alloc uses hipMalloc. qattn_buffer_wrap(ctx, ptr,
 * bytes, &buf) wraps a device pointer the caller owns (from hipMalloc, a
 * framework's allocator, ...); qattn_buffer_free then releases only the
 * wrapper, never the memory.
 *
 * Device selection (qattn_context_options.device): NULL or "" = the
 * QATTN_HIP_DEVICE environment variable, then device 0; a decimal index;
 * or a case-insensitive substring of the device name or arch ("gfx942").
 */
#ifndef QATTN_HIP_H
#define QATTN_HIP_H

#include "qattn/qattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The HIP backend's table. Never NULL; whether a device is usable is
 *  decided by qattn_context_create (QATTN_ERR_BACKEND_UNAVAILABLE without a
 *  HIP device, QATTN_ERR_UNSUPPORTED for a device this build has no code
 *  object for). */
QATTN_API const qattn_backend_iface *qattn_backend_hip(void);

/** Sets the stream (hipStream_t / cudaStream_t; NULL = the default stream)
 *  that every later call on ctx enqueues on, until set again. The stream
 *  must belong to the context's device. QATTN_ERR_INVALID_ARGUMENT when ctx
 *  is not a HIP context. */
QATTN_API qattn_status qattn_hip_set_stream(qattn_context *ctx, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* QATTN_HIP_H */
