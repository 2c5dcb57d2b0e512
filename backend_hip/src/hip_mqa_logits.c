/*
 * FP8 MQA logits on the HIP backend (kernels/mqa_logits.hip).
 *
 * Variant downgrade chain:
 *   COOPMAT, STAGED -> staged: on gfx942 the MFMA kernel for D 64/128/256,
 *                      elsewhere the FMA staged kernel; head dim > 256
 *                      (no 64-column tile fits the LDS budget of 3
 *                      workgroups per CU) falls back to direct-load.
 *   DIRECT          -> direct-load.
 * Plan fields honoured and clamped:
 *   rows_per_subgroup       -> 1, 2 or 4 rows per wave (3 runs as 4).
 *   subgroups_per_workgroup -> staged: always 4 waves (the kernel's LDS tile
 *                              is shared by 4); direct: 1..8 waves.
 *   kv_per_slice            -> columns per grid.y slice (the whole KV range
 *                              when 0); grid.y is recomputed from it and
 *                              kept <= 65535 by widening slices if needed.
 *   kv_tile                 -> fixed 64 columns in the staged kernels.
 *   grid_x/grid_y           -> recomputed from the clamped values above.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_params.h"

int qh_mqa_supported(const qh_backend *be, const qattn_mqa_logits_plan *plan) {
    (void)be;
    if (!plan) return 0;
    return plan->variant == QATTN_MQA_DIRECT || plan->variant == QATTN_MQA_STAGED ||
           plan->variant == QATTN_MQA_COOPMAT;
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
    if (qh_addr(&a->q) % 4 == 0 && p.q_s[0] % 4 == 0 && p.q_s[1] % 4 == 0 && qh_addr(&a->k) % 4 == 0 &&
        p.k_s % 4 == 0)
        p.flags |= QH_MQA_ALIGNED4;

    p.rows_per_wave = plan->rows_per_subgroup <= 1 ? 1 : plan->rows_per_subgroup == 2 ? 2 : 4;
    const int staged = plan->variant != QATTN_MQA_DIRECT && p.D <= 256;
    enum qh_kernel_id k;
    if (staged) {
        p.waves = QH_MQA_WAVES;
        if (be->target == QH_T_GFX942)
            k = p.D == 64 ? QH_K_qattn_mqa_staged_mfma_d64
                          : p.D == 128 ? QH_K_qattn_mqa_staged_mfma_d128 : QH_K_qattn_mqa_staged_mfma_d256;
        else
            k = QH_K_qattn_mqa_staged_fma;
    } else {
        int w = plan->subgroups_per_workgroup;
        p.waves = w < 1 ? 1 : w > 8 ? 8 : w;
        k = QH_K_qattn_mqa_direct;
    }
    int64_t per = plan->kv_per_slice > 0 ? plan->kv_per_slice : p.Skv;
    if (per > p.Skv) per = p.Skv;
    if (per < 1) per = 1;
    if ((p.Skv + per - 1) / per > 65535) per = (p.Skv + 65534) / 65535;
    p.kv_per_slice = (int32_t)per;
    const int64_t rows_blk = (int64_t)p.waves * p.rows_per_wave;
    const unsigned gx = (unsigned)((p.S + rows_blk - 1) / rows_blk);
    const unsigned gy = (unsigned)((p.Skv + per - 1) / per);

    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch(be, k, gx, gy, 1, (unsigned)(p.waves * be->wave), &p, "mqa_logits");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
