/* The matrix ceiling of the coopmat MQA logits kernel: times
 * shaders/mqa_logits_ceiling.comp, a GEMM loop with the plan's tile shape
 * (subgroups, m-tiles of q in registers, KV tile and head dim in shared
 * memory, the planned hardware matrix shape and subgroup width), and turns
 * its device time into TFLOP/s. qattn-bench prints each MQA preset's share
 * of it. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

typedef struct ceiling_push {
    uint64_t dst;
    int32_t iters, pad;
} ceiling_push;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One launch of the ceiling kernel, its device time in *ms. */
static qattn_status launch(qattn_vk *vk, VkPipeline pipe, const ceiling_push *p, uint32_t groups, double *ms) {
    qattn_status s = qattn_vk_begin(vk);
    if (s != QATTN_OK) return s;
    qattn_vk_dispatch(vk, pipe, p, sizeof *p, groups, 1, 1);
    if ((s = qattn_vk_submit(vk, "mqa ceiling")) != QATTN_OK) return s;
    return qattn_vk_last_op_time_ms(vk, ms);
}

qattn_status qattn_vk_mqa_ceiling(void *be, const qattn_mqa_logits_plan *plan, double *tflops) {
    qattn_vk *vk = (qattn_vk *)be;
    *tflops = 0.0;
    if (plan->variant != QATTN_MQA_COOPMAT || !qattn_vk_has_shader("mqa_logits_ceiling") ||
        !qattn_vk_mqa_supports(vk, plan))
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED,
                             "mqa ceiling: plan: needs a coopmat plan this device runs (got %s)",
                             qattn_mqa_variant_name(plan->variant));
    uint32_t spec[QATTN_VK_MQA_SPEC_COUNT];
    const uint32_t n_spec = qattn_vk_mqa_spec(plan, spec);
    const uint32_t pin = vk->has_subgroup_size_control ? (uint32_t)plan->subgroup_size : 0u;
    VkPipeline pipe;
    qattn_status s = qattn_vk_pipeline(vk, "mqa_logits_ceiling", spec, n_spec, sizeof(ceiling_push), pin, &pipe);
    if (s != QATTN_OK) return s;
    /* Eight workgroups per compute unit: several waves of the device, so
     * the tail is small against the whole. */
    const uint32_t cus = vk->caps.compute_units > 0 ? (uint32_t)vk->caps.compute_units : 16u;
    const uint32_t groups = cus * 8u;
    const uint32_t nsg = (uint32_t)plan->subgroups_per_workgroup;
    const uint32_t tile = plan->matrix_shape.m * plan->matrix_shape.n;
    void *h = NULL;
    if ((s = qattn_vk_buffer_alloc(vk, (uint64_t)groups * nsg * tile * 4u, &h)) != QATTN_OK) return s;
    ceiling_push p = {((qattn_vk_buffer *)h)->address, 64, 0};
    /* Products per pass per subgroup: (16 MT) x kv_tile x D multiply-adds. */
    const double mt = plan->m_tiles;
    const double flop_per_iter = 2.0 * 16.0 * mt * plan->kv_tile * plan->head_dim * nsg * groups;
    double ms = 0.0, runs[5];
    /* Grow the pass count until one launch lasts >= 2 ms, keep launching
     * until >= 500 ms of device time have passed (an idle GPU runs its
     * clocks low; docs/perf_mqa_notes.md has the measurement), then take
     * the median of five. */
    double warm = 0.0;
    for (int grow = 0; grow < 16; ++grow) {
        if ((s = launch(vk, pipe, &p, groups, &ms)) != QATTN_OK) break;
        warm += ms;
        if (ms >= 2.0 || p.iters >= (1 << 20)) break;
        p.iters *= ms > 0.1 ? 2 : 8;
    }
    for (int w = 0; s == QATTN_OK && warm < 500.0 && w < 4096; ++w) {
        s = launch(vk, pipe, &p, groups, &ms);
        warm += ms > 0.0 ? ms : 0.1;
    }
    for (int r = 0; s == QATTN_OK && r < 5; ++r) s = launch(vk, pipe, &p, groups, &runs[r]);
    qattn_vk_buffer_free(vk, h);
    if (s != QATTN_OK) return s;
    qsort(runs, 5, sizeof runs[0], cmp_double);
    if (runs[2] <= 0.0) return qattn_vk_fail(vk, QATTN_ERR_DEVICE, "mqa ceiling: the device timer read 0");
    *tflops = flop_per_iter * p.iters / (runs[2] * 1e9);
    return QATTN_OK;
}
