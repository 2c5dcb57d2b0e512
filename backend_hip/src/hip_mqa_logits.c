/*
 * FP8 MQA logits on the HIP backend (kernels/mqa_logits.hip). The plan
 * names what runs; this file launches it and derives nothing:
 *   variant staged  -> with the plan's matrix shape fp8 16x16x32 (the
 *                      planner sets it where the device lists that shape:
 *                      gfx942) the MFMA kernel for the plan's head dim
 *                      (64/128/256); with none the FMA staged kernel.
 *                      The plan's subgroups are the kernel's waves (4,
 *                      sharing one 64-column LDS tile), its
 *                      rows_per_subgroup the rows each wave keeps.
 *   variant direct  -> the direct-load kernel: the plan's subgroups (1..8
 *                      waves) share the workgroup's rows_per_workgroup
 *                      rows and stride over their columns.
 *   grid_x, grid_y, kv_per_slice -> the launch grid and the columns of
 *                      each grid.y slice, as planned; subgroup_size x
 *                      subgroups_per_workgroup -> the block's threads;
 *                      load_bytes >= 4 -> word loads of q and k.
 * qh_mqa_supported() refuses (so the planner steps down, or a pinned
 * variant fails its gate) every plan these kernels cannot run as written:
 * coopmat (no such kernel here), a staged plan other than 4 waves x
 * 64-column tiles or with head dim > 256, a matrix shape whose kernel this
 * target lacks, a subgroup other than the device's wave, rows per subgroup
 * other than 1, 2 or 4, a grid that does not cover the rows, or slices that
 * do not cover the KV range.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_params.h"

/* The kernel a plan names, or -1: staged with the fp8 16x16x32 shape is
 * the MFMA kernel of its head dim, staged without a shape the FMA kernel,
 * direct the direct kernel (no shape). */
static int plan_kernel(const qattn_mqa_logits_plan *plan) {
    const qattn_matrix_shape *m = &plan->matrix_shape;
    const int mfma = m->m == 16 && m->n == 16 && m->k == 32 && m->a_type == QATTN_FP8_E4M3FNUZ &&
                     m->c_type == QATTN_F32;
    if (plan->variant == QATTN_MQA_DIRECT) return m->m == 0 ? QH_K_qattn_mqa_direct : -1;
    if (plan->variant != QATTN_MQA_STAGED) return -1;
    if (m->m == 0) return QH_K_qattn_mqa_staged_fma;
    if (!mfma) return -1;
    switch (plan->head_dim) {
    case 64: return QH_K_qattn_mqa_staged_mfma_d64;
    case 128: return QH_K_qattn_mqa_staged_mfma_d128;
    case 256: return QH_K_qattn_mqa_staged_mfma_d256;
    default: return -1;
    }
}

int qh_mqa_supported(const qh_backend *be, const qattn_mqa_logits_plan *plan) {
    if (!plan) return 0;
    const int32_t rps = plan->rows_per_subgroup, waves = plan->subgroups_per_workgroup;
    if (rps != 1 && rps != 2 && rps != 4) return 0;
    const int k = plan_kernel(plan);
    if (k < 0 || !be->fn[k] || plan->subgroup_size != be->wave) return 0;
    if (plan->load_bytes < 1 || plan->load_bytes > 16 || (plan->load_bytes & (plan->load_bytes - 1)) != 0)
        return 0;
    if (plan->grid_x < 1 || plan->grid_y < 1 || plan->kv_per_slice < 1 || plan->rows_per_workgroup < 1)
        return 0;
    /* The kernels take one row block per workgroup and one slice per
     * grid.y index: the grid must cover both ranges. */
    if ((int64_t)plan->grid_x * plan->rows_per_workgroup < plan->rows ||
        (int64_t)plan->grid_y * plan->kv_per_slice < plan->kv_len)
        return 0;
    switch (plan->variant) {
    case QATTN_MQA_STAGED:
        return waves == QH_MQA_WAVES && plan->kv_tile == QH_MQA_TILE && plan->head_dim <= 256 &&
               plan->kv_per_slice % QH_MQA_TILE == 0 && plan->rows_per_workgroup == waves * rps;
    case QATTN_MQA_DIRECT:
        return waves >= 1 && waves <= 8 && plan->rows_per_workgroup == rps;
    default:
        return 0;
    }
}

static int fmt_of(qattn_dtype t) { return t == QATTN_FP8_E4M3FN ? QH_FN : QH_FNUZ; }

qattn_status qh_mqa_logits(void *vbe, const qattn_mqa_logits_plan *plan,
                           const qattn_mqa_logits_args *a, const qattn_workspace *ws) {
    qh_backend *be = vbe;
    (void)ws;
    qh_mqa_params p;
    memset(&p, 0, sizeof p);
    p.q = qh_addr(&a->q);
    p.k = qh_addr(&a->k);
    p.k_scale = qh_addr(&a->k_scale);
    p.weights = qh_addr(&a->weights);
    p.ks = qh_addr(&a->ks);
    p.ke = qh_addr(&a->ke);
    p.logits = qh_addr(&a->logits);
    p.q_s[0] = qattn_stride32(&a->q, 0);
    p.q_s[1] = qattn_stride32(&a->q, 1);
    p.k_s = qattn_stride32(&a->k, 0);
    p.ksc_s = qattn_stride32(&a->k_scale, 0);
    p.w_s[0] = qattn_stride32(&a->weights, 0);
    p.w_s[1] = qattn_stride32(&a->weights, 1);
    p.ks_s = qattn_stride32(&a->ks, 0);
    p.ke_s = qattn_stride32(&a->ke, 0);
    p.lg_s = qattn_stride32(&a->logits, 0);
    p.S = (int32_t)a->q.shape[0];
    p.H = (int32_t)a->q.shape[1];
    p.D = (int32_t)a->q.shape[2];
    p.Skv = (int32_t)a->k.shape[0];
    p.q_fmt = fmt_of(a->q.dtype);
    p.k_fmt = fmt_of(a->k.dtype);
    if (a->clean_logits) p.flags |= QH_MQA_CLEAN;
    if (!qh_mqa_supported(be, plan))
        return qh_fail(be, QATTN_ERR_UNSUPPORTED, "mqa_logits: this backend cannot run the %s plan",
                       qattn_mqa_variant_name(plan->variant));
    /* Offsets and strides were checked at plan time (args_layout); the
     * buffers' own addresses only here. */
    if ((qh_addr(&a->q) | qh_addr(&a->k)) % (uint64_t)plan->load_bytes != 0)
        return qh_fail(be, QATTN_ERR_ALIGNMENT,
                       "mqa_logits: the plan reads q and k in %d-byte loads; their device addresses are not "
                       "that aligned",
                       (int)plan->load_bytes);
    if (plan->load_bytes >= 4) p.flags |= QH_MQA_ALIGNED4;
    p.rows_per_wave = plan->rows_per_subgroup;
    p.waves = plan->subgroups_per_workgroup;
    p.kv_per_slice = plan->kv_per_slice;
    const enum qh_kernel_id k = (enum qh_kernel_id)plan_kernel(plan);
    const unsigned gx = (unsigned)plan->grid_x, gy = (unsigned)plan->grid_y;
    const unsigned threads = (unsigned)(plan->subgroup_size * plan->subgroups_per_workgroup);

    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK) s = qh_launch(be, k, gx, gy, 1, threads, &p, "mqa_logits");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
