/*
 * Paged FP8 MQA logits on the HIP backend (kernels/paged_mqa_logits.hip),
 * the designs of the Vulkan shaders. The plan names what runs; this file
 * launches it and derives nothing. The parameter block is the core's
 * (qattn_paged_mqa_kernel_args_of). No length is read on the host.
 *
 * simt: workgroup_size threads (one per position of a kv_tile tile), grid[0]
 *   splits of keys_per_split positions by grid[1] requests (walked with that
 *   stride), the plan's shared_bytes of LDS, q staged in LDS when the plan
 *   says q_staged, word loads when its load_bytes says the rows are aligned.
 * matrix: qattn_paged_mqa_matrix_d<D>_<reg|shared> (fragment_layout 1 | 0;
 *   the formats are the block's q_fnuz/k_fnuz), subgroups x 32 lanes
 *   per workgroup, the same grid, the plan's shared_bytes of LDS (the
 *   shader's layout; fragment_layout picks the kernel's path).
 * qh_paged_mqa_supported() refuses a plan the kernels cannot run as written.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_params.h"

/* The kernel of a plan, or -1. */
static int kernel_of(const qh_backend *be, const qattn_paged_mqa_logits_plan *p) {
    if (p->variant == QATTN_PAGED_MQA_SIMT) {
        const int qn = p->q_dtype == QATTN_FP8_E4M3FNUZ, kn = p->k_dtype == QATTN_FP8_E4M3FNUZ;
        static const enum qh_kernel_id simt[2][2] = {
            {QH_K_qattn_paged_mqa_simt_fn_fn, QH_K_qattn_paged_mqa_simt_fn_fnuz},
            {QH_K_qattn_paged_mqa_simt_fnuz_fn, QH_K_qattn_paged_mqa_simt_fnuz_fnuz}};
        return simt[qn][kn];
    }
    if (p->variant != QATTN_PAGED_MQA_MATRIX) return -1;
    static const enum qh_kernel_id mx[3][2] = {
        {QH_K_qattn_paged_mqa_matrix_d64_shared, QH_K_qattn_paged_mqa_matrix_d64_reg},
        {QH_K_qattn_paged_mqa_matrix_d128_shared, QH_K_qattn_paged_mqa_matrix_d128_reg},
        {QH_K_qattn_paged_mqa_matrix_d256_shared, QH_K_qattn_paged_mqa_matrix_d256_reg}};
    const int d = p->head_dim == 64 ? 0 : p->head_dim == 128 ? 1 : p->head_dim == 256 ? 2 : -1;
    (void)be;
    return d < 0 ? -1 : (int)mx[d][p->fragment_layout ? 1 : 0];
}

/* The matrix kernel's own layout: 32-lane waves, 16x16x16 f16 products, the
 * LDS the planner counted for the plan's fragment path. */
static int matrix_ok(const qh_backend *be, const qattn_paged_mqa_logits_plan *p) {
    if (be->wave != 32 || p->subgroup_size != 32 || p->subgroups < 1 || p->subgroups > 4 ||
        p->workgroup_size != 32 * p->subgroups)
        return 0;
    const qattn_matrix_shape *s = &p->matrix_shape;
    if (s->m != 16 || s->n != 16 || s->k != 16 || s->a_type != QATTN_F16 || s->c_type != QATTN_F32) return 0;
    /* the kernels' fragments per wave: 2 with the layout path up to D 128 */
    if (p->key_tiles != (p->fragment_layout && p->head_dim <= 128 ? 2 : 1) ||
        p->kv_tile != 16 * p->key_tiles * p->subgroups)
        return 0;
    if (p->head_slots < p->heads || p->head_slots % 16 != 0 || p->q_row_halves != p->head_dim + 8) return 0;
    if (p->pass_rows < 1 || p->passes < 1 || (int64_t)p->pass_rows * p->passes < p->rows) return 0;
    if (p->load_bytes != 16) return 0;
    const int64_t qr = p->q_row_halves, hp = p->head_slots;
    int64_t bytes = (int64_t)p->pass_rows * hp * (qr * 2 + 4);
    if (!p->fragment_layout) bytes += (int64_t)p->subgroups * (16 * qr * 2 + 16 * 16 * 4);
    return bytes == (int64_t)p->shared_bytes;
}

int qh_paged_mqa_supported(const qh_backend *be, const qattn_paged_mqa_logits_plan *p) {
    if (!p) return 0;
    const int k = kernel_of(be, p);
    if (k < 0 || !be->fn[k]) return 0;
    if (p->shared_bytes > be->caps.max_shared_bytes) return 0;
    if (p->grid[0] < 1 || p->grid[1] < 1 || p->grid[2] != 1) return 0;
    if (p->keys_per_split < p->kv_tile || p->keys_per_split % p->kv_tile != 0 ||
        (int64_t)p->num_splits * p->keys_per_split < p->max_kv_len)
        return 0;
    if (p->variant == QATTN_PAGED_MQA_MATRIX) return matrix_ok(be, p);
    if (p->workgroup_size < 1 || p->workgroup_size > 128 || p->kv_tile != p->workgroup_size) return 0;
    /* the kernel's LDS: codes in rows of D + 4 bytes, 16 bytes per position,
     * q codes when staged; within what the plan reserved */
    const int64_t need = (int64_t)p->kv_tile * (p->head_dim + 4 + 16) +
                         (p->q_staged ? (int64_t)p->heads * p->head_dim : 0);
    return need <= (int64_t)p->shared_bytes;
}

qattn_status qh_paged_mqa_logits(void *vbe, const qattn_paged_mqa_logits_plan *plan,
                                 const qattn_paged_mqa_logits_args *a, const qattn_workspace *ws) {
    qh_backend *be = vbe;
    (void)ws; /* the op needs none */
    if (!qh_paged_mqa_supported(be, plan))
        return qh_fail(be, QATTN_ERR_UNSUPPORTED, "paged_mqa_logits: this backend cannot run the %s plan",
                       qattn_paged_mqa_variant_name(plan->variant));
    qh_paged_mqa_params p;
    memset(&p, 0, sizeof p);
    char why[256];
    qattn_status s = qattn_paged_mqa_kernel_args_of(plan, a, qh_addr, &p.a, why, sizeof why);
    if (s != QATTN_OK) return qh_fail(be, s, "paged_mqa_logits: %s", why);
    const enum qh_kernel_id kernel = (enum qh_kernel_id)kernel_of(be, plan);
    s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch_shared(be, kernel, plan->grid[0], plan->grid[1], 1, (unsigned)plan->workgroup_size,
                             plan->shared_bytes, &p, "paged_mqa_logits");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
