/* FP8 MQA logits on Vulkan: one launch of the planned variant
 * (shaders/mqa_logits_simt.comp as mqa_logits_direct / mqa_logits_staged,
 * shaders/mqa_logits_coopmat.comp as mqa_logits_coopmat). The plan fixes the
 * geometry (m-tiles, n-tiles, row blocks, KV tiles, load width, grid); this
 * file checks the shaders were written for it, turns it into specialization
 * constants and the push block, and nothing else: no copies, no padding, no
 * allocation, no decision of its own. */
#include <string.h>

#include "vk_internal.h"

/* Mirrors the push block of mqa_logits_common.glsl (std430). */
typedef struct mqa_push {
    uint64_t q, k, k_scale, weights, ks, ke, logits;
    int32_t q_row, q_head, k_row, scale_stride, w_row, w_head, ks_stride, ke_stride, l_row;
    int32_t S, S_kv, H, row_blocks, tiles, clean;
} mqa_push;

/* Specialization constant ids (mqa_logits_common.glsl, mqa_logits_coopmat.comp). */
enum {
    SPEC_THREADS, SPEC_SG, SPEC_RPS, SPEC_NSG, SPEC_KT, SPEC_D, SPEC_Q_FNUZ, SPEC_K_FNUZ,
    SPEC_INDEX64, SPEC_ALIGN16, SPEC_MT, SPEC_NT, SPEC_HEADS, SPEC_TM, SPEC_TN, SPEC_TK, SPEC_COUNT
};
_Static_assert(SPEC_COUNT == QATTN_VK_MQA_SPEC_COUNT, "vk_internal.h names the count");

static const char *shader_for(qattn_mqa_variant v) {
    switch (v) {
    case QATTN_MQA_DIRECT: return "mqa_logits_direct";
    case QATTN_MQA_STAGED: return "mqa_logits_staged";
    case QATTN_MQA_COOPMAT: return "mqa_logits_coopmat";
    default: return NULL;
    }
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The plan's q/k load width as the shaders take it: 16-byte loads or bytes. */
static int plan_align16(const qattn_mqa_logits_plan *p) { return p->load_bytes >= 16; }

/* Whether the device lists the matrix shape a plan was made for. */
static int lists_shape(const qattn_device_caps *c, const qattn_matrix_shape *want) {
    for (int32_t i = 0; i < c->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *m = &c->matrix_shapes[i];
        if (m->m == want->m && m->n == want->n && m->k == want->k && m->a_type == want->a_type &&
            m->c_type == want->c_type)
            return 1;
    }
    return 0;
}

/* Threads of the plan's workgroup. */
static int64_t plan_threads(const qattn_mqa_logits_plan *p) {
    return (int64_t)p->subgroup_size * p->subgroups_per_workgroup;
}

int qattn_vk_mqa_supports(qattn_vk *vk, const qattn_mqa_logits_plan *p) {
    const char *name = shader_for(p->variant);
    if (!name || !qattn_vk_has_shader(name)) return 0;
    const int64_t threads = plan_threads(p);
    if (p->subgroup_size < 1 || threads < 1 || threads > vk->caps.max_workgroup_size) return 0;
    if (p->shared_bytes > vk->caps.max_shared_bytes || p->kv_tile < 1) return 0;
    if (p->grid_x < 1 || p->grid_y < 1 ||
        (uint32_t)p->grid_x > vk->props.limits.maxComputeWorkGroupCount[0] ||
        (uint32_t)p->grid_y > vk->props.limits.maxComputeWorkGroupCount[1])
        return 0;
    if (p->rows_per_subgroup < 1 || p->rows_per_subgroup > 4 || p->rows_per_workgroup < 1) return 0;
    /* The shaders stride grid_x over row_blocks and deal kv_tiles out over
     * grid_y; no shader here reads a matrix shape on a SIMT variant. */
    if (p->row_blocks != cdiv(p->rows, p->rows_per_workgroup) || p->kv_tiles != cdiv(p->kv_len, p->kv_tile) ||
        p->grid_x > p->row_blocks || p->grid_y > p->kv_tiles)
        return 0;
    if (p->load_bytes < 1 || p->load_bytes > 16 || (p->load_bytes & (p->load_bytes - 1)) != 0) return 0;
    if (p->variant != QATTN_MQA_COOPMAT && p->matrix_shape.m != 0) return 0;
    switch (p->variant) {
    case QATTN_MQA_DIRECT:
        return p->kv_tile % threads == 0 && p->rows_per_workgroup == p->rows_per_subgroup;
    case QATTN_MQA_STAGED:
        return p->kv_tile % p->subgroup_size == 0 &&
               p->rows_per_workgroup == p->rows_per_subgroup * p->subgroups_per_workgroup;
    case QATTN_MQA_COOPMAT: {
        if (!vk->has_coopmat || !(vk->caps.features & QATTN_FEAT_COOPMAT) || !lists_shape(&vk->caps, &p->matrix_shape))
            return 0;
        /* The matrix layout needs the exact subgroup width it was planned for. */
        const int fixed = vk->caps.subgroup_size_min == vk->caps.subgroup_size_max;
        if (fixed && (uint32_t)p->subgroup_size != vk->caps.subgroup_size_max) return 0;
        if (!fixed && !vk->has_subgroup_size_control) return 0;
        if ((uint32_t)p->subgroup_size < vk->caps.subgroup_size_min ||
            (uint32_t)p->subgroup_size > vk->caps.subgroup_size_max)
            return 0;
        /* The shader's layout: a subgroup holds m_tiles 16-pair tiles of one
         * row (subgroups_per_row of them per row) or whole rows. */
        const int64_t mt = p->m_tiles, units = p->heads / 16;
        const int64_t spr = units > mt ? units / mt : 1, rpsg = mt > units ? mt / units : 1;
        return p->heads % 16 == 0 && (mt == 1 || mt == 2 || mt == 4) && (units % mt == 0 || mt % units == 0) &&
               p->subgroups_per_row == spr && p->n_tiles >= 1 && p->n_tiles <= 4 &&
               p->kv_tile == 16 * p->n_tiles && p->subgroups_per_workgroup % spr == 0 &&
               p->rows_per_workgroup == p->subgroups_per_workgroup / spr * rpsg &&
               p->rows_per_subgroup == rpsg;
    }
    default:
        return 0;
    }
}

uint32_t qattn_vk_mqa_spec(const qattn_mqa_logits_plan *plan, uint32_t spec[QATTN_VK_MQA_SPEC_COUNT]) {
    memset(spec, 0, QATTN_VK_MQA_SPEC_COUNT * sizeof *spec);
    spec[SPEC_THREADS] = (uint32_t)plan_threads(plan);
    spec[SPEC_SG] = (uint32_t)plan->subgroup_size;
    spec[SPEC_RPS] = (uint32_t)plan->rows_per_subgroup;
    spec[SPEC_NSG] = (uint32_t)plan->subgroups_per_workgroup;
    spec[SPEC_KT] = (uint32_t)plan->kv_tile;
    spec[SPEC_D] = (uint32_t)plan->head_dim;
    spec[SPEC_Q_FNUZ] = plan->q_dtype == QATTN_FP8_E4M3FNUZ ? 1u : 0u;
    spec[SPEC_K_FNUZ] = plan->k_dtype == QATTN_FP8_E4M3FNUZ ? 1u : 0u;
    spec[SPEC_INDEX64] = plan->index64 ? 1u : 0u;
    spec[SPEC_ALIGN16] = plan_align16(plan) ? 1u : 0u;
    if (plan->variant != QATTN_MQA_COOPMAT) return SPEC_MT;
    spec[SPEC_MT] = (uint32_t)plan->m_tiles;
    spec[SPEC_NT] = (uint32_t)plan->n_tiles;
    spec[SPEC_HEADS] = (uint32_t)plan->heads;
    spec[SPEC_TM] = plan->matrix_shape.m; /* listed by the device: supports() checked */
    spec[SPEC_TN] = plan->matrix_shape.n;
    spec[SPEC_TK] = plan->matrix_shape.k;
    return SPEC_COUNT;
}

qattn_status qattn_vk_mqa_logits(void *be, const qattn_mqa_logits_plan *plan,
                                 const qattn_mqa_logits_args *a, const qattn_workspace *ws) {
    qattn_vk *vk = (qattn_vk *)be;
    (void)ws; /* the op needs no workspace: logits are written directly */
    if (!qattn_vk_mqa_supports(vk, plan))
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "mqa_logits: this device cannot run the %s plan",
                             qattn_mqa_variant_name(plan->variant));
    mqa_push p;
    memset(&p, 0, sizeof p);
    p.q = qattn_vk_addr(&a->q);
    p.k = qattn_vk_addr(&a->k);
    /* Offsets and strides were checked at plan time (args_layout); the
     * buffers' own addresses only here. */
    if ((p.q | p.k) % (uint64_t)plan->load_bytes != 0)
        return qattn_vk_fail(vk, QATTN_ERR_ALIGNMENT,
                             "mqa_logits: the plan reads q and k in %d-byte loads; their device addresses are "
                             "not that aligned",
                             (int)plan->load_bytes);
    p.k_scale = qattn_vk_addr(&a->k_scale);
    p.weights = qattn_vk_addr(&a->weights);
    p.ks = qattn_vk_addr(&a->ks);
    p.ke = qattn_vk_addr(&a->ke);
    p.logits = qattn_vk_addr(&a->logits);
    p.q_row = qattn_vk_stride(&a->q, 0);
    p.q_head = qattn_vk_stride(&a->q, 1);
    p.k_row = qattn_vk_stride(&a->k, 0);
    p.scale_stride = qattn_vk_stride(&a->k_scale, 0);
    p.w_row = qattn_vk_stride(&a->weights, 0);
    p.w_head = qattn_vk_stride(&a->weights, 1);
    p.ks_stride = qattn_vk_stride(&a->ks, 0);
    p.ke_stride = qattn_vk_stride(&a->ke, 0);
    p.l_row = qattn_vk_stride(&a->logits, 0);
    p.S = plan->rows;
    p.S_kv = plan->kv_len;
    p.H = plan->heads;
    p.row_blocks = plan->row_blocks;
    p.tiles = plan->kv_tiles;
    p.clean = a->clean_logits ? 1 : 0;

    uint32_t spec[QATTN_VK_MQA_SPEC_COUNT];
    const uint32_t n_spec = qattn_vk_mqa_spec(plan, spec);
    uint32_t pin = 0;
    if (plan->variant == QATTN_MQA_COOPMAT && vk->has_subgroup_size_control) pin = (uint32_t)plan->subgroup_size;
    VkPipeline pipe;
    qattn_status s = qattn_vk_pipeline(vk, shader_for(plan->variant), spec, n_spec, sizeof p, pin, &pipe);
    if (s != QATTN_OK) return s;
    if ((s = qattn_vk_begin(vk)) != QATTN_OK) return s;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, (uint32_t)plan->grid_x, (uint32_t)plan->grid_y, 1);
    return qattn_vk_submit(vk, "qattn_mqa_logits_run");
}
