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

/*
 * Decode's own access pattern (qattn_decode_read): what decode reads for a
 * call and nothing else, summed into one u32. The same design as
 * shaders/decode_read.comp: a workgroup per (split, kv head, request); a
 * thread takes one 16-byte chunk of a key's K and V rows, a step covers
 * QH_READ_WG / row_words keys and each thread issues QH_DREAD_LOADS steps'
 * loads before consuming any; chunk-0 threads read the two scales; the
 * first split of each (head, request) reads that head group's q rows. Keys
 * are bounded as decode bounds them (the pages the request's kv_indptr row
 * gives, slots inside the cache); page and head bases in 64 bits, the row
 * inside the page in 32.
 */
QH_KERNEL QH_LAUNCH_BOUNDS(QH_READ_WG) void qattn_decode_pattern_read(qh_read_params p) {
    __shared__ uint32_t red[QH_READ_WG];
    const uint32_t tid = qh_tid();
    const int32_t split = (int32_t)qh_bid_x(), g = (int32_t)qh_bid_y(), b = (int32_t)qh_bid_z();
    const int32_t ip0 = p.d.indptr[(int64_t)b * p.d.indptr_s];
    int32_t ip1 = p.d.indptr[(int64_t)(b + 1) * p.d.indptr_s];
    if (ip1 > p.d.n_indices) ip1 = p.d.n_indices;
    int64_t cap = ((int64_t)ip1 - ip0) * p.d.page_size;
    if (cap < 0) cap = 0;
    /* visible keys [lo, kv_lens[b]) as decode sees them, bounded by the pages
     * the request's row of kv_indptr gives (entries below 0 skipped) */
    const int32_t Lraw = p.d.lens[(int64_t)b * p.d.lens_s];
    const int64_t len = Lraw < 0 ? 0 : Lraw > cap ? cap : Lraw;
    const int32_t L = (int32_t)len;
    const int64_t lw = p.d.window_left >= 0 ? (int64_t)Lraw - p.d.R - p.d.window_left : 0;
    const int64_t skip = ip0 < 0 ? -(int64_t)ip0 * p.d.page_size : 0;
    int64_t lo64 = lw > skip ? lw : skip;
    lo64 = lo64 < 0 ? 0 : lo64 > 0x7FFFFFFF ? 0x7FFFFFFF : lo64;
    const int32_t lo = (int32_t)lo64;
    const int64_t k0_ = (int64_t)lo + (int64_t)split * p.d.keys_per_split;
    const int32_t k0 = k0_ > L ? L : (int32_t)k0_;
    const int64_t k1_ = split == p.d.num_splits - 1 ? L : (int64_t)k0 + p.d.keys_per_split;
    const int32_t k1 = k1_ > L ? L : (int32_t)k1_;

    const uint32_t rw = (uint32_t)p.d.row_words, kps = QH_READ_WG / rw;
    const uint32_t key = tid / rw, chunk = tid % rw;
    const bool lane_on = key < kps;
    const uint8_t *kh = p.d.k + (uint64_t)((int64_t)g * p.d.head_stride[0]) * (uint32_t)p.d.es + chunk * 16u;
    const uint8_t *vh = p.d.v + (uint64_t)((int64_t)g * p.d.head_stride[1]) * (uint32_t)p.d.es + chunk * 16u;
    const uint32_t *ksh = p.d.scaled ? p.d.ks + (int64_t)g * p.d.head_stride[2] : nullptr;
    const uint32_t *vsh = p.d.scaled ? p.d.vs + (int64_t)g * p.d.head_stride[3] : nullptr;
    const bool scales = p.d.scaled && chunk == 0;
    uint32_t acc = 0;
    for (int32_t base = k0; base < k1; base += (int32_t)kps * QH_DREAD_LOADS) {
        qh_u32x4 rk[QH_DREAD_LOADS], rv[QH_DREAD_LOADS];
        uint32_t sk[QH_DREAD_LOADS], sv[QH_DREAD_LOADS];
        bool on[QH_DREAD_LOADS];
#pragma unroll
        for (int j = 0; j < QH_DREAD_LOADS; ++j) {
            const int32_t k = base + j * (int32_t)kps + (int32_t)key;
            on[j] = lane_on && k < k1;
            int32_t page = -1, row = 0;
            if (on[j]) {
                page = p.d.indices[(int64_t)(ip0 + k / p.d.page_size) * p.d.indices_s];
                row = k % p.d.page_size;
            }
            on[j] = on[j] && page >= 0 && (int64_t)page * p.d.page_size + row < p.d.n_slots;
            const int64_t pg = on[j] ? page : 0;
            const uint32_t r = on[j] ? (uint32_t)row : 0u;
            rk[j] = *(const qh_u32x4 *)(kh + (uint64_t)(pg * p.d.page_stride[0] + (int64_t)(r * p.d.row_stride[0])) * (uint32_t)p.d.es);
            rv[j] = *(const qh_u32x4 *)(vh + (uint64_t)(pg * p.d.page_stride[1] + (int64_t)(r * p.d.row_stride[1])) * (uint32_t)p.d.es);
            sk[j] = sv[j] = 0u;
            if (scales) {
                sk[j] = ksh[pg * p.d.page_stride[2] + (int64_t)(r * p.d.row_stride[2])];
                sv[j] = vsh[pg * p.d.page_stride[3] + (int64_t)(r * p.d.row_stride[3])];
            }
        }
#pragma unroll
        for (int j = 0; j < QH_DREAD_LOADS; ++j)
            if (on[j])
                acc += rk[j].x + rk[j].y + rk[j].z + rk[j].w + rv[j].x + rv[j].y + rv[j].z + rv[j].w + sk[j] + sv[j];
    }
    /* q: the head group's R x G rows, once per (head, request) */
    if (split == 0) {
        const int32_t n = p.d.R * p.d.G * p.d.D;
        for (int32_t i = (int32_t)tid; i < n; i += QH_READ_WG) {
            const int32_t row = i / p.d.D, r = row / p.d.G, h = g * p.d.G + row % p.d.G;
            acc += p.d.q[(int64_t)b * p.d.q_sb + (int64_t)r * p.d.q_sr + (int64_t)h * p.d.q_sh + i % p.d.D];
        }
    }
    red[tid] = acc;
    qh_barrier();
    for (uint32_t h = QH_READ_WG / 2; h > 0; h >>= 1) {
        if (tid < h) red[tid] += red[tid + h];
        qh_barrier();
    }
    if (tid == 0) qh_atomic_add_u32(p.d.sum, red[0]);
}
