/*
 * Decode attention on the HIP backend: launches exactly what the plan says
 * (core/src/plan_decode.c): the tiled stage 1 (kernels/decode.hip) on the
 * plan's grid, workgroup size and dynamic LDS, writing the partials at the
 * plan's workspace offsets, then the split merge on the plan's merge grid.
 * qh_decode_launch_of (hip_decode_launch.c) maps the plan to the launch;
 * nothing here re-derives a launch decision. The plan's variant is the
 * kernel that runs: simt -> qattn_decode_tiled_simt_*, matrix ->
 * qattn_decode_tiled_matrix_* (MFMA f16 on gfx942, WMMA f16 on gfx12,
 * nvcuda::wmma on the NVIDIA twin).
 */
#include <inttypes.h>
#include <string.h>

#include "qh_backend.h"
#include "qh_decode_launch.h"
#include "qh_params.h"

int qh_decode_supported(const qh_backend *be, const qattn_decode_plan *plan) {
    qh_decode_launch l;
    char why[192];
    if (!plan) return 0;
    if (!qh_decode_launch_of(plan, be->target, be->wave, &l, why, sizeof why)) {
        qh_fail((qh_backend *)be, QATTN_ERR_UNSUPPORTED, "decode: %s", why);
        return 0;
    }
    if (plan->shared_bytes > be->caps.max_shared_bytes || !be->fn[l.kernel]) {
        qh_fail((qh_backend *)be, QATTN_ERR_UNSUPPORTED, "decode: %s",
                !be->fn[l.kernel] ? "kernel not built for this target" : "plan's LDS exceeds the device's");
        return 0;
    }
    return 1;
}

qattn_status qh_decode(void *vbe, const qattn_decode_plan *plan, const qattn_decode_args *a,
                       const qattn_workspace *ws) {
    qh_backend *be = vbe;
    qh_decode_launch l;
    char why[192];
    if (!qh_decode_launch_of(plan, be->target, be->wave, &l, why, sizeof why))
        return qh_fail(be, QATTN_ERR_UNSUPPORTED, "decode: %s", why);
    if (!ws || !ws->buffer || ws->bytes < plan->workspace_bytes)
        return qh_fail(be, QATTN_ERR_WORKSPACE, "decode: the plan needs %" PRIu64 " workspace bytes, given %" PRIu64,
                       plan->workspace_bytes, ws && ws->buffer ? ws->bytes : 0);
    qh_decode_params p;
    memset(&p, 0, sizeof p);
    p.q = qh_addr(&a->q);
    p.k = qh_addr(&a->k_cache);
    p.v = qh_addr(&a->v_cache);
    p.ks = qh_addr(&a->k_scale);
    p.vs = qh_addr(&a->v_scale);
    if ((p.k | p.v) % (uint64_t)plan->load_bytes != 0)
        return qh_fail(be, QATTN_ERR_ALIGNMENT,
                       "decode: the plan reads k_cache/v_cache in %d-byte loads; their device addresses are not "
                       "that aligned",
                       (int)plan->load_bytes);
    p.indptr = qh_addr(&a->kv_indptr);
    p.indices = qh_addr(&a->kv_indices);
    p.lens = qh_addr(&a->kv_lens);
    const uint64_t base = (uint64_t)(uintptr_t)qattn_buffer_handle(ws->buffer) + ws->offset;
    p.ws_o = base + plan->partial_o_offset;
    p.ws_ml = base + plan->partial_ml_offset;
    p.sinks = qh_addr(&a->sinks);
    p.o = qh_addr(&a->o);
    p.lse = qh_addr(&a->lse);
    /* 32-bit fields (qh_params.h): this kernel's offsets wrap past 2^32
     * elements, so a cache tensor spanning more is refused rather than
     * read at wrapped offsets (the Vulkan kernel forms 64-bit page bases) */
    const qattn_tensor *t4[4] = {&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale};
    static const char *const t4_name[4] = {"k_cache", "v_cache", "k_scale", "v_scale"};
    for (int i = 0; i < 4; ++i) {
        if (!t4[i]->buffer) continue;
        uint64_t span = 1;
        for (int d = 0; d < t4[i]->rank; ++d)
            span += (uint64_t)(t4[i]->shape[d] - 1) *
                    (uint64_t)(t4[i]->strides[d] < 0 ? -t4[i]->strides[d] : t4[i]->strides[d]);
        if (span > UINT32_MAX)
            return qh_fail(be, QATTN_ERR_UNSUPPORTED,
                           "decode: %s spans %" PRIu64 " elements; the HIP decode kernels address caches "
                           "of at most 2^32 elements (32-bit offsets)",
                           t4_name[i], span);
    }
    const qattn_decode_cache_views cv = qattn_decode_cache_views_of(a);
    p.k_ps = (uint32_t)cv.k.page_stride;
    p.v_ps = (uint32_t)cv.v.page_stride;
    p.ks_ps = (uint32_t)cv.ks.page_stride;
    p.vs_ps = (uint32_t)cv.vs.page_stride;
    p.k_hs = (uint32_t)cv.k.head_stride;
    p.v_hs = (uint32_t)cv.v.head_stride;
    p.ks_hs = (uint32_t)cv.ks.head_stride;
    p.vs_hs = (uint32_t)cv.vs.head_stride;
    p.k_rs = cv.k.row_stride;
    p.v_rs = cv.v.row_stride;
    p.ks_rs = cv.ks.row_stride;
    p.vs_rs = cv.vs.row_stride;
    p.n_slots = cv.n_slots;
    p.q_sb = qattn_stride32(&a->q, 0);
    p.q_sr = qattn_stride32(&a->q, 1);
    p.q_sh = qattn_stride32(&a->q, 2);
    p.indptr_s = qattn_stride32(&a->kv_indptr, 0);
    p.indices_s = qattn_stride32(&a->kv_indices, 0);
    p.lens_s = qattn_stride32(&a->kv_lens, 0);
    p.n_indices = (int32_t)a->kv_indices.shape[0];
    p.hq = plan->q_heads;
    p.hkv = plan->kv_heads;
    p.page_size = a->page_size;
    p.window_left = a->window_left;
    p.R = plan->rows;
    p.QH = plan->q_heads_per_workgroup;
    p.NR = plan->row_slots;
    p.num_splits = plan->num_splits;
    p.keys_per_split = plan->keys_per_split;
    p.load_bytes = plan->load_bytes;
    p.sm_scale = a->sm_scale;
    p.softcap = a->logit_softcap;
    p.o_sb = qattn_stride32(&a->o, 0);
    p.o_sr = qattn_stride32(&a->o, 1);
    p.o_sh = qattn_stride32(&a->o, 2);
    if (qattn_tensor_present(&a->lse)) {
        p.lse_sb = qattn_stride32(&a->lse, 0);
        p.lse_sr = qattn_stride32(&a->lse, 1);
        p.lse_sh = qattn_stride32(&a->lse, 2);
    }
    if (qattn_tensor_present(&a->sinks)) p.sinks_s = qattn_stride32(&a->sinks, 0);
    p.flags = (qattn_tensor_present(&a->sinks) ? QH_DEC_SINKS : 0) | (qattn_tensor_present(&a->lse) ? QH_DEC_LSE : 0);
    p.perm = plan->kv_dtype != QATTN_BF16;
    p.merge_wg = plan->merge_workgroup_size;
    p.D = plan->head_dim_v;
    p.merge_dims = plan->merge_dims;
    /* The staged V values times this are the decoded ones (fp8: the power
     * of two its f16 bit trick leaves). */
    p.vf = plan->kv_dtype == QATTN_FP8_E4M3FN ? 256.0f : plan->kv_dtype == QATTN_FP8_E4M3FNUZ ? 128.0f : 1.0f;

    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch_shared(be, l.kernel, l.grid[0], l.grid[1], l.grid[2], l.block, l.shared, &p, "decode");
    if (s == QATTN_OK)
        s = qh_launch_shared(be, QH_K_qattn_decode_merge, l.merge_grid[0], l.merge_grid[1], l.merge_grid[2],
                             l.merge_block, 0, &p, "decode merge");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
