/*
 * KV store (spec section 2): writes new bf16 or f16 tokens into the cache in
 * its format (bf16, fp8 e4m3fn / e4m3fnuz / e5m2, int8). One workgroup of
 * 64 threads per (token, kv head, K-or-V); K rows have D elements, V rows
 * Dv.
 *
 * Bit-exactness with the reference (core/src/ref_kv_store.c) rests on doing
 * the same f32 operations in the same order: amax of |x| (exact), one
 * correctly rounded division amax / fmax, then for every element one
 * correctly rounded division x / scale and the encoder of qh_fp8.h (or RNE
 * and a clamp for int8). The kernels are built without fast-math, so the
 * divisions are IEEE on every target.
 *
 * Slot -1 is padding; any slot outside [0, N_slots) is skipped so a bad
 * slot never writes out of bounds (QATTN_CHECK_INDICES=1 reports it first).
 */
#include "qh_device.h"
#include "qh_fp8.h"
#include "qh_lds.h"
#include "qh_params.h"

#define KVS_THREADS 64

/* Element offset of (slot, head g) through view i (qh_params.h): the page
 * and head bases in 64 bits, once per workgroup, the row inside the page in
 * 32 (a cache may span any number of elements). */
QH_DEV int64_t kvs_offset(const qh_kv_store_params &p, int i, int32_t slot, int32_t g) {
    const uint32_t s = (uint32_t)slot, rows = p.page_rows[i];
    return (int64_t)(s / rows) * p.page_stride[i] + (int64_t)g * p.head_stride[i] +
           (int64_t)((s % rows) * p.row_stride[i]);
}

template <int FMT>
QH_DEV void kv_store(const qh_kv_store_params &p) {
    __shared__ float red[KVS_THREADS / 32 + 1];
    const uint32_t tid = qh_tid();
    const int32_t t = (int32_t)qh_bid_x();
    const int32_t g = (int32_t)qh_bid_y();
    const bool is_v = qh_bid_z() != 0;
    const int32_t slot = p.slots[(uint32_t)t * (uint32_t)p.slots_s];
    if (slot < 0 || slot >= p.n_slots) return; /* uniform: before any barrier */

    const int32_t *ns = is_v ? p.vn_s : p.kn_s;
    const int n = is_v ? p.Dv : p.D;
    /* the source's dtype is one per call: a uniform branch per element */
    const bool f16 = p.src_f16 != 0;
    auto x_at = [&](const uint16_t *s, int d) { return f16 ? qh_f16_to_f32(s[d]) : qh_bf16_to_f32(s[d]); };
    const uint16_t *src = (is_v ? p.v_new : p.k_new) + (uint32_t)t * (uint32_t)ns[0] +
                          (uint32_t)g * (uint32_t)ns[1];
    constexpr int ESZ = FMT == QH_BF16 ? 2 : 1;
    uint8_t *dst = (is_v ? p.v_cache : p.k_cache) + (uint64_t)kvs_offset(p, is_v ? 1 : 0, slot, g) * ESZ;

    if constexpr (FMT == QH_BF16) {
        /* bf16 sources are copied bit for bit; f16 ones rounded to bf16 (RNE,
         * NaN stays a quiet NaN), as the reference does */
        for (int d = (int)tid; d < n; d += KVS_THREADS)
            ((uint16_t *)dst)[d] = f16 ? qh_f32_to_bf16(qh_f16_to_f32(src[d])) : src[d];
        return;
    } else {
        float amax = 0.0f;
        for (int d = (int)tid; d < n; d += KVS_THREADS) {
            const float a = qh_fabsf(x_at(src, d));
            if (a > amax) amax = a; /* NaN never wins, as in the reference */
        }
        amax = qh_block_max(amax, red, tid, KVS_THREADS);
        const float fmax = FMT == QH_I8 ? 127.0f : FMT == QH_FN ? 448.0f : FMT == QH_E5M2 ? 57344.0f : 240.0f;
        const float scale = amax == 0.0f ? 1.0f : amax / fmax;
        for (int d = (int)tid; d < n; d += KVS_THREADS) {
            const float y = x_at(src, d) / scale;
            uint32_t code;
            if constexpr (FMT == QH_I8) {
                /* int8 has no NaN: a NaN stores 0, as in the reference (fmax
                 * would turn it into -127) */
                const float r = qh_fminf(qh_fmaxf(qh_rintf(y), -127.0f), 127.0f);
                code = qh_isnan(y) ? 0u : (uint32_t)(uint8_t)(int8_t)r;
            } else {
                code = qh_f32_to_fp8<FMT>(y);
            }
            dst[d] = (uint8_t)code;
        }
        if (tid == 0) {
            float *sc = is_v ? p.v_scale : p.k_scale;
            sc[kvs_offset(p, is_v ? 3 : 2, slot, g)] = scale;
        }
    }
}

#define QH_KV_STORE(name, fmt)                                                          \
    QH_KERNEL QH_LAUNCH_BOUNDS(KVS_THREADS) void qattn_kv_store_##name(qh_kv_store_params p) { \
        kv_store<fmt>(p);                                                               \
    }
QH_KV_STORE(bf16, QH_BF16)
QH_KV_STORE(fn, QH_FN)
QH_KV_STORE(fnuz, QH_FNUZ)
QH_KV_STORE(i8, QH_I8)
QH_KV_STORE(e5m2, QH_E5M2)
