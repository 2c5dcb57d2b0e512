/* KV store on Vulkan: one launch of shaders/kv_store.comp, a workgroup per
 * (token, kv head, K-or-V). Arguments are validated by the core. */
#include <string.h>

#include "vk_internal.h"

/* Mirrors the push block of kv_store.comp (std430). Views per tensor in the
 * order k_cache, v_cache, k_scale, v_scale (qattn_cache_kernel_view). */
typedef struct kv_store_push {
    uint64_t src[2], cache[2], scale[2], slots;
    int64_t page_stride[4], head_stride[4];
    uint32_t page_rows[4], row_stride[4];
    int32_t src_stride[4];
    int32_t slots_stride, n_slots;
    int32_t head_dim[2]; /* D (k rows), Dv (v rows) */
    int32_t flags;       /* KV_STORE_SRC_F16 */
    int32_t pad_;
} kv_store_push;

#define KV_STORE_SRC_F16 1 /* k_new and v_new are f16 (else bf16); kv_store.comp's FLAG_SRC_F16 */

/* Threads per workgroup: covers D <= 64 in one step and keeps up to 256 to
 * four; the row is tiny, so more threads would only idle. */
#define KV_STORE_WG 64u

static const char *shader_for(qattn_dtype dt) {
    switch (dt) {
    case QATTN_BF16: return "kv_store_bf16";
    case QATTN_FP8_E4M3FN: return "kv_store_fp8fn";
    case QATTN_FP8_E4M3FNUZ: return "kv_store_fp8fnuz";
    case QATTN_FP8_E5M2: return "kv_store_fp8e5m2";
    case QATTN_I8: return "kv_store_i8";
    default: return NULL;
    }
}

qattn_status qattn_vk_kv_store(void *be, const qattn_kv_store_args *a) {
    qattn_vk *vk = (qattn_vk *)be;
    const int64_t T = a->k_new.shape[0], Hkv = a->k_new.shape[1];
    if (T == 0) return QATTN_OK;
    const char *name = shader_for(a->k_cache.dtype);
    if (!name) return qattn_vk_fail(vk, QATTN_ERR_DTYPE, "kv_store: cache dtype %s", qattn_dtype_name(a->k_cache.dtype));
    if (T > (int64_t)vk->props.limits.maxComputeWorkGroupCount[0] ||
        Hkv > (int64_t)vk->props.limits.maxComputeWorkGroupCount[1])
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "kv_store: %lld tokens x %lld heads exceed the grid limits",
                             (long long)T, (long long)Hkv);
    kv_store_push p;
    memset(&p, 0, sizeof p);
    const qattn_tensor *src[2] = {&a->k_new, &a->v_new};
    const qattn_tensor *cache[2] = {&a->k_cache, &a->v_cache};
    const qattn_tensor *scale[2] = {&a->k_scale, &a->v_scale};
    for (int w = 0; w < 2; ++w) {
        p.src[w] = qattn_vk_addr(src[w]);
        p.cache[w] = qattn_vk_addr(cache[w]);
        p.scale[w] = qattn_vk_addr(scale[w]);
        p.src_stride[2 * w] = qattn_vk_stride(src[w], 0);
        p.src_stride[2 * w + 1] = qattn_vk_stride(src[w], 1);
    }
    const qattn_kv_store_views views = qattn_kv_store_views_of(a);
    memcpy(p.page_stride, views.page_stride, sizeof p.page_stride);
    memcpy(p.head_stride, views.head_stride, sizeof p.head_stride);
    memcpy(p.page_rows, views.page_rows, sizeof p.page_rows);
    memcpy(p.row_stride, views.row_stride, sizeof p.row_stride);
    p.slots = qattn_vk_addr(&a->slot_mapping);
    p.slots_stride = qattn_vk_stride(&a->slot_mapping, 0);
    p.head_dim[0] = (int32_t)a->k_new.shape[2];
    p.head_dim[1] = (int32_t)a->v_new.shape[2];
    p.flags = a->k_new.dtype == QATTN_F16 ? KV_STORE_SRC_F16 : 0;
    p.n_slots = qattn_cache_kernel_view_of(&a->k_cache, 0, 1).n_slots;

    const uint32_t spec[1] = {KV_STORE_WG};
    VkPipeline pipe;
    qattn_status s = qattn_vk_pipeline(vk, name, spec, 1, sizeof p, 0, &pipe);
    if (s != QATTN_OK) return s;
    if ((s = qattn_vk_begin(vk)) != QATTN_OK) return s;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, (uint32_t)T, (uint32_t)Hkv, 2);
    return qattn_vk_submit(vk, "qattn_kv_store");
}
