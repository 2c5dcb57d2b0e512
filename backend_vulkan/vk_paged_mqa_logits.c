/* Paged FP8 MQA logits on Vulkan (spec 5): one launch of the planned
 * variant (shaders/paged_mqa_logits_simt.comp). The plan fixes the geometry,
 * the splits and the load width; this file turns them into specialization
 * constants and the push block, and nothing else: it reads no lengths, so
 * the launch records into a command buffer once and replays every step. */
#include <string.h>

#include "vk_internal.h"

/* Mirrors the push block of paged_mqa_logits_simt.comp (std430). */
typedef struct pm_push {
    uint64_t q, k, k_scale, weights, indptr, indices, lens, logits;
    int32_t q_b, q_t, q_h, k_row, k_page, s_row, s_page, w_b, w_t, l_b, l_t;
    int32_t n_slots, n_idx, M, kps, clean;
} pm_push;

/* Specialization constant ids of the shader. */
enum {
    SPEC_NTH, SPEC_D, SPEC_NROWS, SPEC_H, SPEC_P, SPEC_B, SPEC_Q_FNUZ, SPEC_K_FNUZ, SPEC_ALIGN16,
    SPEC_K_PAGED, SPEC_S_PAGED, SPEC_QSTAGE, SPEC_COUNT
};

#define PM_SHADER "paged_mqa_logits_simt"

int qattn_vk_paged_mqa_supports(qattn_vk *vk, const qattn_paged_mqa_logits_plan *p) {
    if (p->variant != QATTN_PAGED_MQA_SIMT || !qattn_vk_has_shader(PM_SHADER)) return 0;
    if (p->workgroup_size < 1 || (uint32_t)p->workgroup_size > vk->caps.max_workgroup_size) return 0;
    if (p->kv_tile != p->workgroup_size || p->shared_bytes > vk->caps.max_shared_bytes) return 0;
    if (p->load_bytes != 1 && p->load_bytes != 16) return 0;
    if (p->q_staged && p->q_stage_bytes != p->heads * p->head_dim * 2) return 0;
    for (int i = 0; i < 3; ++i)
        if (p->grid[i] < 1 || p->grid[i] > vk->props.limits.maxComputeWorkGroupCount[i]) return 0;
    return p->keys_per_split >= p->kv_tile && p->keys_per_split % p->kv_tile == 0;
}

/* A 16-byte plan needs the device addresses to keep the alignment the
 * descriptors promised (the buffers' own base addresses). */
static int addresses_aligned(const qattn_paged_mqa_logits_args *a) {
    return qattn_vk_addr(&a->q) % 16 == 0 && qattn_vk_addr(&a->k_cache) % 16 == 0;
}

qattn_status qattn_vk_paged_mqa_logits(void *be, const qattn_paged_mqa_logits_plan *plan,
                                       const qattn_paged_mqa_logits_args *a, const qattn_workspace *ws) {
    qattn_vk *vk = (qattn_vk *)be;
    (void)ws; /* the op needs none: logits are written directly */
    if (!qattn_vk_paged_mqa_supports(vk, plan))
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "paged_mqa_logits: this device cannot run the %s plan",
                             qattn_paged_mqa_variant_name(plan->variant));
    if (plan->load_bytes == 16 && !addresses_aligned(a))
        return qattn_vk_fail(vk, QATTN_ERR_ALIGNMENT,
                             "paged_mqa_logits: the plan loads q and k_cache 16 bytes at a time but a "
                             "buffer's device address is not 16-byte aligned");
    const int k_paged = a->k_cache.rank == 3, s_paged = a->k_scale.rank == 2;
    pm_push p;
    memset(&p, 0, sizeof p);
    p.q = qattn_vk_addr(&a->q);
    p.k = qattn_vk_addr(&a->k_cache);
    p.k_scale = qattn_vk_addr(&a->k_scale);
    p.weights = qattn_vk_addr(&a->weights);
    p.indptr = qattn_vk_addr(&a->kv_indptr);
    p.indices = qattn_vk_addr(&a->kv_indices);
    p.lens = qattn_vk_addr(&a->kv_lens);
    p.logits = qattn_vk_addr(&a->logits);
    p.q_b = qattn_vk_stride(&a->q, 0);
    p.q_t = qattn_vk_stride(&a->q, 1);
    p.q_h = qattn_vk_stride(&a->q, 2);
    p.k_row = qattn_vk_stride(&a->k_cache, k_paged ? 1 : 0);
    p.k_page = k_paged ? qattn_vk_stride(&a->k_cache, 0) : 0;
    p.s_row = qattn_vk_stride(&a->k_scale, s_paged ? 1 : 0);
    p.s_page = s_paged ? qattn_vk_stride(&a->k_scale, 0) : 0;
    p.w_b = qattn_vk_stride(&a->weights, 0);
    p.w_t = qattn_vk_stride(&a->weights, 1);
    p.l_b = qattn_vk_stride(&a->logits, 0);
    p.l_t = qattn_vk_stride(&a->logits, 1);
    p.n_slots = (int32_t)(k_paged ? a->k_cache.shape[0] * a->k_cache.shape[1] : a->k_cache.shape[0]);
    p.n_idx = (int32_t)a->kv_indices.shape[0];
    p.M = plan->max_kv_len;
    p.kps = plan->keys_per_split;
    p.clean = a->clean_logits ? 1 : 0;

    uint32_t spec[SPEC_COUNT];
    spec[SPEC_NTH] = (uint32_t)plan->workgroup_size;
    spec[SPEC_D] = (uint32_t)plan->head_dim;
    spec[SPEC_NROWS] = (uint32_t)plan->rows;
    spec[SPEC_H] = (uint32_t)plan->heads;
    spec[SPEC_P] = (uint32_t)plan->page_size;
    spec[SPEC_B] = (uint32_t)plan->batch;
    spec[SPEC_Q_FNUZ] = plan->q_dtype == QATTN_FP8_E4M3FNUZ;
    spec[SPEC_K_FNUZ] = plan->k_dtype == QATTN_FP8_E4M3FNUZ;
    spec[SPEC_ALIGN16] = plan->load_bytes == 16;
    spec[SPEC_K_PAGED] = (uint32_t)k_paged;
    spec[SPEC_S_PAGED] = (uint32_t)s_paged;
    spec[SPEC_QSTAGE] = plan->q_staged ? 1u : 0u;
    VkPipeline pipe;
    qattn_status s = qattn_vk_pipeline(vk, PM_SHADER, spec, SPEC_COUNT, sizeof p, 0, &pipe);
    if (s != QATTN_OK) return s;
    if ((s = qattn_vk_begin(vk)) != QATTN_OK) return s;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, plan->grid[0], plan->grid[1], plan->grid[2]);
    return qattn_vk_submit(vk, "qattn_paged_mqa_logits_run");
}
