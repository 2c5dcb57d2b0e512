/*
 * KV store on the HIP backend (kernels/kv_store.hip): bf16 or f16 tokens,
 * one 64-thread workgroup per (token, kv head, K or V); slots are bounds-checked in the
 * kernel, so a bad slot is skipped rather than written out of bounds.
 * Caches and scales of either form reach the kernel as their views.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_params.h"

qattn_status qh_kv_store(void *vbe, const qattn_kv_store_args *a) {
    qh_backend *be = vbe;
    qh_kv_store_params p;
    memset(&p, 0, sizeof p);
    p.k_new = qh_addr(&a->k_new);
    p.v_new = qh_addr(&a->v_new);
    p.slots = qh_addr(&a->slot_mapping);
    p.k_cache = qh_addr(&a->k_cache);
    p.v_cache = qh_addr(&a->v_cache);
    p.k_scale = qh_addr(&a->k_scale);
    p.v_scale = qh_addr(&a->v_scale);
    for (int i = 0; i < 2; ++i) {
        p.kn_s[i] = qattn_stride32(&a->k_new, i);
        p.vn_s[i] = qattn_stride32(&a->v_new, i);
    }
    const qattn_kv_store_views views = qattn_kv_store_views_of(a);
    memcpy(p.page_stride, views.page_stride, sizeof p.page_stride);
    memcpy(p.head_stride, views.head_stride, sizeof p.head_stride);
    memcpy(p.page_rows, views.page_rows, sizeof p.page_rows);
    memcpy(p.row_stride, views.row_stride, sizeof p.row_stride);
    p.slots_s = qattn_stride32(&a->slot_mapping, 0);
    p.n_slots = qattn_cache_kernel_view_of(&a->k_cache, 0, 1).n_slots;
    p.T = (int32_t)a->k_new.shape[0];
    p.Hkv = (int32_t)a->k_new.shape[1];
    p.D = (int32_t)a->k_new.shape[2];
    p.Dv = (int32_t)a->v_new.shape[2];
    p.src_f16 = a->k_new.dtype == QATTN_F16;

    enum qh_kernel_id k;
    switch (a->k_cache.dtype) {
    case QATTN_BF16: k = QH_K_qattn_kv_store_bf16; break;
    case QATTN_FP8_E4M3FN: k = QH_K_qattn_kv_store_fn; break;
    case QATTN_FP8_E4M3FNUZ: k = QH_K_qattn_kv_store_fnuz; break;
    case QATTN_I8: k = QH_K_qattn_kv_store_i8; break;
    case QATTN_FP8_E5M2: k = QH_K_qattn_kv_store_e5m2; break;
    default: return qh_fail(be, QATTN_ERR_DTYPE, "kv_store: cache dtype");
    }
    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK) s = qh_launch(be, k, (unsigned)p.T, (unsigned)p.Hkv, 2, 64, &p, "kv_store");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
