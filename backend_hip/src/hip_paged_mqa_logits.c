/*
 * Paged FP8 MQA logits on the HIP backend (kernels/paged_mqa_logits.hip),
 * the design of the Vulkan SIMT kernel. The plan names what runs; this file
 * launches it and derives nothing: workgroup_size threads (one per
 * position of a kv_tile tile), grid[0] splits of keys_per_split positions
 * by grid[1] requests (walked with that stride), the plan's shared_bytes of
 * LDS, q staged in LDS when the plan says q_staged, word loads when its
 * load_bytes says the rows are aligned. No length is read on the host.
 * qh_paged_mqa_supported() refuses a plan the kernel cannot run as written.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_params.h"

int qh_paged_mqa_supported(const qh_backend *be, const qattn_paged_mqa_logits_plan *p) {
    if (!p || p->variant != QATTN_PAGED_MQA_SIMT) return 0;
    if (p->workgroup_size < 1 || p->workgroup_size > 128 || p->kv_tile != p->workgroup_size) return 0;
    if (p->shared_bytes > be->caps.max_shared_bytes) return 0;
    /* the kernel's LDS: codes in rows of D + 4 bytes, 12 bytes per position,
     * q codes when staged; within what the plan reserved */
    const int64_t need = (int64_t)p->kv_tile * (p->head_dim + 4 + 12) +
                         (p->q_staged ? (int64_t)p->heads * p->head_dim : 0);
    if (need > (int64_t)p->shared_bytes) return 0;
    if (p->grid[0] < 1 || p->grid[1] < 1 || p->grid[2] != 1) return 0;
    return p->keys_per_split >= p->kv_tile && p->keys_per_split % p->kv_tile == 0 &&
           (int64_t)p->num_splits * p->keys_per_split >= p->max_kv_len;
}

qattn_status qh_paged_mqa_logits(void *vbe, const qattn_paged_mqa_logits_plan *plan,
                                 const qattn_paged_mqa_logits_args *a, const qattn_workspace *ws) {
    qh_backend *be = vbe;
    (void)ws; /* the op needs none */
    if (!qh_paged_mqa_supported(be, plan))
        return qh_fail(be, QATTN_ERR_UNSUPPORTED, "paged_mqa_logits: this backend cannot run the %s plan",
                       qattn_paged_mqa_variant_name(plan->variant));
    const int k_paged = a->k_cache.rank == 3, s_paged = a->k_scale.rank == 2;
    qh_paged_mqa_params p;
    memset(&p, 0, sizeof p);
    p.q = qh_addr(&a->q);
    p.k = qh_addr(&a->k_cache);
    p.k_scale = qh_addr(&a->k_scale);
    p.weights = qh_addr(&a->weights);
    p.indptr = qh_addr(&a->kv_indptr);
    p.indices = qh_addr(&a->kv_indices);
    p.lens = qh_addr(&a->kv_lens);
    p.logits = qh_addr(&a->logits);
    for (int i = 0; i < 3; ++i) p.q_s[i] = qattn_stride32(&a->q, i);
    p.k_row = qattn_stride32(&a->k_cache, k_paged ? 1 : 0);
    p.k_page = k_paged ? qattn_stride32(&a->k_cache, 0) : 0;
    p.s_row = qattn_stride32(&a->k_scale, s_paged ? 1 : 0);
    p.s_page = s_paged ? qattn_stride32(&a->k_scale, 0) : 0;
    p.w_s[0] = qattn_stride32(&a->weights, 0);
    p.w_s[1] = qattn_stride32(&a->weights, 1);
    p.l_s[0] = qattn_stride32(&a->logits, 0);
    p.l_s[1] = qattn_stride32(&a->logits, 1);
    p.n_slots = (int32_t)(k_paged ? a->k_cache.shape[0] * a->k_cache.shape[1] : a->k_cache.shape[0]);
    p.n_idx = (int32_t)a->kv_indices.shape[0];
    p.M = plan->max_kv_len;
    p.kps = plan->keys_per_split;
    p.B = plan->batch;
    p.N = plan->rows;
    p.H = plan->heads;
    p.D = plan->head_dim;
    p.P = plan->page_size;
    p.nth = plan->workgroup_size;
    p.grid_y = (int32_t)plan->grid[1];
    p.k_paged = k_paged;
    p.s_paged = s_paged;
    p.q_staged = plan->q_staged;
    p.clean = a->clean_logits ? 1 : 0;
    p.q_fmt = plan->q_dtype == QATTN_FP8_E4M3FN ? QH_FN : QH_FNUZ;
    p.k_fmt = plan->k_dtype == QATTN_FP8_E4M3FN ? QH_FN : QH_FNUZ;
    /* A 16-byte plan needs the buffers' device addresses to keep the
     * alignment its descriptors promised. */
    if (plan->load_bytes == 16 && (p.q % 16 != 0 || p.k % 16 != 0))
        return qh_fail(be, QATTN_ERR_ALIGNMENT,
                       "paged_mqa_logits: the plan loads q and k_cache in aligned words but a buffer's "
                       "device address is not 16-byte aligned");
    p.aligned4 = plan->load_bytes == 16;
    /* the plan's formats name the kernel */
    const int qn = plan->q_dtype == QATTN_FP8_E4M3FNUZ, kn = plan->k_dtype == QATTN_FP8_E4M3FNUZ;
    const enum qh_kernel_id kernel = qn ? (kn ? QH_K_qattn_paged_mqa_simt_fnuz_fnuz : QH_K_qattn_paged_mqa_simt_fnuz_fn)
                                        : (kn ? QH_K_qattn_paged_mqa_simt_fn_fnuz : QH_K_qattn_paged_mqa_simt_fn_fn);
    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch_shared(be, kernel, plan->grid[0], plan->grid[1], 1,
                             (unsigned)plan->workgroup_size, plan->shared_bytes, &p, "paged_mqa_logits");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
