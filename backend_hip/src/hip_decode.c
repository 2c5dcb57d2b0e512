/*
 * Decode attention on the HIP backend: launches exactly what the plan says
 * (core/src/plan_decode.c): the tiled stage 1 (kernels/decode.hip) on the
 * plan's grid, workgroup size and dynamic LDS, writing the partials at the
 * plan's workspace offsets, then the split merge on the plan's merge grid.
 * qh_decode_launch_of (hip_decode_launch.c) maps the plan to the launch;
 * nothing here re-derives a launch decision. The plan's variant is the
 * kernel that runs: simt -> qattn_decode_tiled_simt_*, matrix ->
 * qattn_decode_tiled_matrix_* (MFMA f16 on gfx942, WMMA f16 on gfx12,
 * nvcuda::wmma on the NVIDIA twin), regs -> qattn_decode_regs_*
 * (kernels/decode_regs.hip: mma.sync on the twin, MFMA / WMMA f16).
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
    /* 32-bit offsets (qh_params.h): the tiled kernels' offsets wrap past
     * 2^32 elements, so a cache tensor spanning more is refused rather than
     * read at wrapped offsets (the Vulkan kernel and the regs kernel form
     * 64-bit page bases) */
    const qattn_tensor *t4[4] = {&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale};
    static const char *const t4_name[4] = {"k_cache", "v_cache", "k_scale", "v_scale"};
    for (int i = 0; i < 4 && plan->variant != QATTN_DECODE_REGS; ++i) {
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
    /* The core's blocks, as Vulkan pushes them; the plan's values Vulkan
     * passes as specialization constants that the blocks do not hold. */
    qh_decode_params p;
    memset(&p, 0, sizeof p);
    const uint64_t ws_base = (uint64_t)(uintptr_t)qattn_buffer_handle(ws->buffer) + ws->offset;
    qattn_status s = qattn_decode_kernel_args_of(plan, a, qh_addr, ws_base, &p.t, &p.m, why, sizeof why);
    if (s != QATTN_OK) return qh_fail(be, s, "decode: %s", why);
    p.load_bytes = plan->load_bytes;
    p.merge_wg = plan->merge_workgroup_size;
    p.merge_dims = plan->merge_dims;
    p.head_dim = plan->head_dim;
    p.head_dim_v = plan->head_dim_v;

    s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch_shared(be, l.kernel, l.grid[0], l.grid[1], l.grid[2], l.block, l.shared, &p, "decode");
    if (s == QATTN_OK)
        s = qh_launch_shared(be, QH_K_qattn_decode_merge, l.merge_grid[0], l.merge_grid[1], l.merge_grid[2],
                             l.merge_block, 0, &p, "decode merge");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
