/*
 * Streaming read (qattn_read_stream): reads a range of 16-byte words once and
 * adds the wrapping sum of its 32-bit words to one u32. It exists to be
 * timed: what it reaches is the read bandwidth a kernel gets on this device
 * through this backend, the ceiling qattn-bench reports decode against. The
 * same design as shaders/read_bandwidth.comp: each thread issues
 * QH_READ_LOADS independent 16-byte loads before consuming any, one step of
 * a workgroup covers QH_READ_WG * QH_READ_LOADS consecutive words (each load
 * instruction of a wave touches one contiguous span), the host launches
 * several workgroups per CU, each striding over the range, and the sum is
 * reduced in LDS so each workgroup issues one atomic.
 */
#include "qh_device.h"
#include "qh_read_params.h"

/* Relaxed device-wide add: the sum's order does not matter. */
QH_DEV void qh_atomic_add_u32(uint32_t *p, uint32_t v) {
#if defined(QH_AMD)
    __scoped_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __MEMORY_SCOPE_DEVICE);
#elif defined(QH_HOSTSIM)
    *p += v; /* workgroups run one after another in the simulation */
#else
    atomicAdd(p, v);
#endif
}

QH_KERNEL QH_LAUNCH_BOUNDS(QH_READ_WG) QH_WAVES_PER_SIMD(8) void qattn_read_bandwidth(qh_read_params p) {
    __shared__ uint32_t red[QH_READ_WG];
    const uint32_t tid = qh_tid(), g = qh_bid_x();
    const uint32_t step = QH_READ_WG * QH_READ_LOADS, full = p.words / step;
    const qh_u32x4 *src = (const qh_u32x4 *)p.src;
    uint32_t acc = 0;
    for (uint32_t c = g; c < full; c += p.groups) {
        const qh_u32x4 *base = src + c * step + tid;
        qh_u32x4 v[QH_READ_LOADS];
#pragma unroll
        for (int k = 0; k < QH_READ_LOADS; ++k) v[k] = base[k * QH_READ_WG];
#pragma unroll
        for (int k = 0; k < QH_READ_LOADS; ++k) acc += v[k].x + v[k].y + v[k].z + v[k].w;
    }
    /* The words after the last full step, spread over every thread of the grid. */
    for (uint32_t i = full * step + g * QH_READ_WG + tid; i < p.words; i += p.groups * QH_READ_WG) {
        const qh_u32x4 v = src[i];
        acc += v.x + v.y + v.z + v.w;
    }
    red[tid] = acc;
    qh_barrier();
    for (uint32_t h = QH_READ_WG / 2; h > 0; h >>= 1) {
        if (tid < h) red[tid] += red[tid + h];
        qh_barrier();
    }
    if (tid == 0) qh_atomic_add_u32(p.sum, red[0]);
}
