/* Paged FP8 MQA logits on Vulkan (spec 5): one launch of the planned
 * variant, shaders/paged_mqa_logits_simt.comp or
 * shaders/paged_mqa_logits_matrix.comp (paged_mqa_logits_matrix_d<D>_<reg|
 * shared> by the plan's head dim and fragment_layout). The core builds the
 * push block (qattn_paged_mqa_kernel_args_of); the plan's geometry becomes
 * the specialization constants and nothing else: no length is read, so the
 * launch records into a command buffer once and replays every step. */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

/* Specialization constant ids of the simt shader. */
enum {
    SIMT_NTH, SIMT_D, SIMT_NROWS, SIMT_H, SIMT_P, SIMT_B, SIMT_Q_FNUZ, SIMT_K_FNUZ, SIMT_ALIGN16,
    SIMT_QSTAGE, SIMT_COUNT
};
/* ... and of the matrix shader. */
enum {
    MX_NTH, MX_NROWS, MX_H, MX_HP, MX_PR, MX_PASSES, MX_P, MX_B, MX_Q_FNUZ, MX_K_FNUZ, MX_KM, MX_NSG, MX_TN,
    MX_QR, MX_COUNT
};

#define PM_SIMT "paged_mqa_logits_simt"

/* The shader of a matrix plan, in buf; 0 when the plan's head dim has none. */
static int matrix_shader(const qattn_paged_mqa_logits_plan *p, char *buf, size_t n) {
    if (p->head_dim != 64 && p->head_dim != 128 && p->head_dim != 256) return 0;
    snprintf(buf, n, "paged_mqa_logits_matrix_d%d_%s", (int)p->head_dim, p->fragment_layout ? "reg" : "shared");
    return 1;
}

static int lists_shape(const qattn_device_caps *c, const qattn_matrix_shape *want) {
    for (int32_t i = 0; i < c->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *m = &c->matrix_shapes[i];
        if (m->m == want->m && m->n == want->n && m->k == want->k && m->a_type == want->a_type &&
            m->c_type == want->c_type)
            return 1;
    }
    return 0;
}

/* The matrix plan is the shader's layout: 4 subgroups of 32 lanes, the
 * keys of a step 16 x key_tiles per subgroup, 16-column blocks of q, the
 * shared arrays the planner counted, and a shape and fragment path this
 * device has. */
static int matrix_supported(qattn_vk *vk, const qattn_paged_mqa_logits_plan *p) {
    char name[64];
    if (!matrix_shader(p, name, sizeof name) || !qattn_vk_has_shader(name)) return 0;
    if (!vk->has_coopmat || !(vk->caps.features & QATTN_FEAT_COOPMAT) || !lists_shape(&vk->caps, &p->matrix_shape))
        return 0;
    const qattn_matrix_shape *s = &p->matrix_shape;
    if (s->m != 16 || s->k != 16 || (s->n != 16 && s->n != 8) || s->a_type != QATTN_F16 || s->c_type != QATTN_F32)
        return 0;
    if (p->fragment_layout && (s->n != 16 || !(vk->caps.features & QATTN_FEAT_FRAGMENT_LAYOUT))) return 0;
    if (p->subgroup_size != 32 || p->subgroups < 1 || p->workgroup_size != p->subgroup_size * p->subgroups)
        return 0;
    const int fixed = vk->caps.subgroup_size_min == vk->caps.subgroup_size_max;
    if (fixed ? vk->caps.subgroup_size_max != 32u
              : (!vk->has_subgroup_size_control || vk->caps.subgroup_size_min > 32u || vk->caps.subgroup_size_max < 32u))
        return 0;
    if (p->key_tiles < 1 || p->kv_tile != 16 * p->key_tiles * p->subgroups) return 0;
    if (!p->fragment_layout && p->key_tiles != 1) return 0; /* LAYOUT 0 holds one 16-key tile per subgroup */
    if (p->head_slots < p->heads || p->head_slots % 16 != 0 || p->q_row_halves != p->head_dim + 8) return 0;
    if (p->pass_rows < 1 || p->passes < 1 || (int64_t)p->pass_rows * p->passes < p->rows) return 0;
    if (p->load_bytes != 16) return 0;
    const int64_t qr = p->q_row_halves, hp = p->head_slots;
    int64_t bytes = (int64_t)p->pass_rows * hp * (qr * 2 + 4);
    if (!p->fragment_layout) bytes += (int64_t)p->subgroups * (16 * qr * 2 + 16 * 16 * 4);
    return bytes == (int64_t)p->shared_bytes;
}

int qattn_vk_paged_mqa_supports(qattn_vk *vk, const qattn_paged_mqa_logits_plan *p) {
    if (p->workgroup_size < 1 || (uint32_t)p->workgroup_size > vk->caps.max_workgroup_size) return 0;
    if (p->shared_bytes > vk->caps.max_shared_bytes) return 0;
    for (int i = 0; i < 3; ++i)
        if (p->grid[i] < 1 || p->grid[i] > vk->props.limits.maxComputeWorkGroupCount[i]) return 0;
    if (p->keys_per_split < p->kv_tile || p->keys_per_split % p->kv_tile != 0) return 0;
    switch (p->variant) {
    case QATTN_PAGED_MQA_SIMT:
        if (!qattn_vk_has_shader(PM_SIMT) || p->kv_tile != p->workgroup_size) return 0;
        if (p->load_bytes != 1 && p->load_bytes != 16) return 0;
        return !p->q_staged || p->q_stage_bytes == p->heads * p->head_dim * 2;
    case QATTN_PAGED_MQA_MATRIX: return matrix_supported(vk, p);
    default: return 0;
    }
}

qattn_status qattn_vk_paged_mqa_logits(void *be, const qattn_paged_mqa_logits_plan *plan,
                                       const qattn_paged_mqa_logits_args *a, const qattn_workspace *ws) {
    qattn_vk *vk = (qattn_vk *)be;
    (void)ws; /* the op needs none: logits are written directly */
    if (!qattn_vk_paged_mqa_supports(vk, plan))
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "paged_mqa_logits: this device cannot run the %s plan",
                             qattn_paged_mqa_variant_name(plan->variant));
    qattn_paged_mqa_kernel_args p;
    char why[256];
    qattn_status s = qattn_paged_mqa_kernel_args_of(plan, a, qattn_vk_addr, &p, why, sizeof why);
    if (s != QATTN_OK) return qattn_vk_fail(vk, s, "paged_mqa_logits: %s", why);

    VkPipeline pipe;
    if (plan->variant == QATTN_PAGED_MQA_SIMT) {
        uint32_t spec[SIMT_COUNT];
        spec[SIMT_NTH] = (uint32_t)plan->workgroup_size;
        spec[SIMT_D] = (uint32_t)plan->head_dim;
        spec[SIMT_NROWS] = (uint32_t)plan->rows;
        spec[SIMT_H] = (uint32_t)plan->heads;
        spec[SIMT_P] = (uint32_t)plan->page_size;
        spec[SIMT_B] = (uint32_t)plan->batch;
        spec[SIMT_Q_FNUZ] = plan->q_dtype == QATTN_FP8_E4M3FNUZ;
        spec[SIMT_K_FNUZ] = plan->k_dtype == QATTN_FP8_E4M3FNUZ;
        spec[SIMT_ALIGN16] = plan->load_bytes == 16;
        spec[SIMT_QSTAGE] = plan->q_staged ? 1u : 0u;
        s = qattn_vk_pipeline(vk, PM_SIMT, spec, SIMT_COUNT, sizeof p, 0, &pipe);
    } else {
        char name[64];
        matrix_shader(plan, name, sizeof name);
        uint32_t spec[MX_COUNT];
        spec[MX_NTH] = (uint32_t)plan->workgroup_size;
        spec[MX_NROWS] = (uint32_t)plan->rows;
        spec[MX_H] = (uint32_t)plan->heads;
        spec[MX_HP] = (uint32_t)plan->head_slots;
        spec[MX_PR] = (uint32_t)plan->pass_rows;
        spec[MX_PASSES] = (uint32_t)plan->passes;
        spec[MX_P] = (uint32_t)plan->page_size;
        spec[MX_B] = (uint32_t)plan->batch;
        spec[MX_Q_FNUZ] = plan->q_dtype == QATTN_FP8_E4M3FNUZ;
        spec[MX_K_FNUZ] = plan->k_dtype == QATTN_FP8_E4M3FNUZ;
        spec[MX_KM] = (uint32_t)plan->key_tiles;
        spec[MX_NSG] = (uint32_t)plan->subgroups;
        spec[MX_TN] = plan->matrix_shape.n;
        spec[MX_QR] = (uint32_t)plan->q_row_halves;
        /* the lane mapping is written for 32-lane subgroups: pinned where the
         * device varies them */
        const uint32_t pin = vk->caps.subgroup_size_min != vk->caps.subgroup_size_max ? 32u : 0u;
        s = qattn_vk_pipeline(vk, name, spec, MX_COUNT, sizeof p, pin, &pipe);
    }
    if (s != QATTN_OK) return s;
    if ((s = qattn_vk_begin(vk)) != QATTN_OK) return s;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, plan->grid[0], plan->grid[1], plan->grid[2]);
    return qattn_vk_submit(vk, "qattn_paged_mqa_logits_run");
}
