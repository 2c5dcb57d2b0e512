/*
 * The HIP decode launch of a plan (qh_decode_launch.h): every number comes
 * from the plan; what this file adds is the check that the kernels were
 * built for it (one wave per workgroup, 16-key tiles, the LDS layout, the
 * matrix shape each target issues), so a plan this backend cannot run as
 * written is refused with the field that differs rather than run otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "qh_decode_launch.h"
#include "qh_kernels.def" /* QH_T_* */
#include "qh_params.h"

static const char *const kernel_names[] = {
#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) #name,
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC
};

const char *qh_kernel_name(enum qh_kernel_id k) {
    return (int)k >= 0 && k < QH_K_COUNT ? kernel_names[k] : "invalid";
}

/* Which of a format's five tiled kernels (qh_kernels.def: _d64, _d128,
 * _d256, then the generic _g128, _g256) runs head dims d (q, K) and dv (V):
 * the exact kernel where d = dv is one of its dims, else the generic one
 * of the smallest bound holding both. -1: none (the planner's dims are
 * multiples of 16 in 16..256). */
static int tiled_dims_index(int d, int dv) {
    if (d < 16 || dv < 16 || d > 256 || dv > 256 || d % 16 != 0 || dv % 16 != 0) return -1;
    if (d == dv && (d == 64 || d == 128 || d == 256)) return d == 64 ? 0 : d == 128 ? 1 : 2;
    return (d > dv ? d : dv) <= QH_DEC_GEN_SMALL ? 3 : 4;
}

/* qh_kernels.def lists each variant's kernels by dtype, then the five of
 * tiled_dims_index. */
static int tiled_kernel(int matrix, qattn_dtype dt, int d, int dv, int target) {
    const int di = tiled_dims_index(d, dv);
    if (di < 0) return -1;
    if (!matrix) {
        if (dt == QATTN_BF16) return QH_K_qattn_decode_tiled_simt_bf16_d64 + di;
        /* 8-bit simt (a pinned plan) exists on wave32 targets only */
        if (!(target & QH_T_WAVE32)) return -1;
        switch (dt) {
        case QATTN_I8: return QH_K_qattn_decode_tiled_simt_i8_d64 + di;
        case QATTN_FP8_E4M3FN: return QH_K_qattn_decode_tiled_simt_fn_d64 + di;
        case QATTN_FP8_E4M3FNUZ: return QH_K_qattn_decode_tiled_simt_fnuz_d64 + di;
        case QATTN_FP8_E5M2: return QH_K_qattn_decode_tiled_simt_e5m2_d64 + di;
        default: return -1;
        }
    }
    switch (dt) {
    case QATTN_I8: return QH_K_qattn_decode_tiled_matrix_i8_d64 + di;
    case QATTN_FP8_E4M3FN: return QH_K_qattn_decode_tiled_matrix_fn_d64 + di;
    case QATTN_FP8_E4M3FNUZ: return QH_K_qattn_decode_tiled_matrix_fnuz_d64 + di;
    case QATTN_FP8_E5M2: return QH_K_qattn_decode_tiled_matrix_e5m2_d64 + di;
    default: return -1;
    }
}

static const int kernel_targets[] = {
#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) targets,
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC
};

/* The register-resident kernel (decode_regs.hip): 8-bit caches, D = Dv in
 * {64, 128}, on the targets qh_kernels.def lists it for. */
static int regs_kernel(qattn_dtype dt, int d, int dv, int target) {
    const int di = d != dv ? -1 : d == 64 ? 0 : d == 128 ? 1 : -1;
    int k = -1;
    if (di < 0) return -1;
    switch (dt) {
    case QATTN_I8: k = QH_K_qattn_decode_regs_i8_d64 + di; break;
    case QATTN_FP8_E4M3FN: k = QH_K_qattn_decode_regs_fn_d64 + di; break;
    case QATTN_FP8_E4M3FNUZ: k = QH_K_qattn_decode_regs_fnuz_d64 + di; break;
    case QATTN_FP8_E5M2: k = QH_K_qattn_decode_regs_e5m2_d64 + di; break;
    default: return -1;
    }
    return (kernel_targets[k] & target) ? k : -1;
}

int qh_decode_launch_of(const qattn_decode_plan *p, int target, int wave, qh_decode_launch *out, char *why,
                        size_t n) {
    memset(out, 0, sizeof *out);
    if (p->variant != QATTN_DECODE_SIMT && p->variant != QATTN_DECODE_MATRIX && p->variant != QATTN_DECODE_REGS) {
        snprintf(why, n, "no decode kernel for variant %s", qattn_decode_variant_name(p->variant));
        return 0;
    }
    const int regs = p->variant == QATTN_DECODE_REGS;
    const int matrix = p->variant == QATTN_DECODE_MATRIX || regs;
    const int k = regs ? regs_kernel(p->kv_dtype, p->head_dim, p->head_dim_v, target)
                       : tiled_kernel(matrix, p->kv_dtype, p->head_dim, p->head_dim_v, target);
    if (k < 0) {
        snprintf(why, n, "no %s decode kernel for a %s cache with D %d, Dv %d on this target",
                 qattn_decode_variant_name(p->variant),
                 qattn_dtype_name(p->kv_dtype), (int)p->head_dim, (int)p->head_dim_v);
        return 0;
    }
    if (p->subgroup_size != wave || p->workgroup_size != wave) {
        snprintf(why, n, "the plan's subgroup of %d lanes in workgroups of %d: these kernels run one wave of %d",
                 (int)p->subgroup_size, (int)p->workgroup_size, wave);
        return 0;
    }
    if (p->keys_per_tile != QH_DEC_TK) {
        snprintf(why, n, "plan.keys_per_tile %d: the kernels are built for tiles of %d keys", (int)p->keys_per_tile,
                 QH_DEC_TK);
        return 0;
    }
    const int rows = p->q_heads_per_workgroup * p->rows;
    if (p->row_slots < 1 || p->row_slots > QH_DEC_MAX_NR || p->q_heads_per_workgroup < 1 || rows > p->row_slots ||
        p->kv_heads < 1 || p->q_heads % p->kv_heads != 0 ||
        (p->q_heads / p->kv_heads) % p->q_heads_per_workgroup != 0 ||
        p->head_blocks != p->q_heads / p->kv_heads / p->q_heads_per_workgroup) {
        snprintf(why, n, "plan rows: %d heads x %d rows in %d row slots, %d head blocks", (int)p->q_heads_per_workgroup,
                 (int)p->rows, (int)p->row_slots, (int)p->head_blocks);
        return 0;
    }
    if (matrix) {
        const qattn_matrix_shape *s = &p->matrix_shape;
        if (s->m != 16 || s->n != 16 || s->k != 16 || s->a_type != QATTN_F16 || s->c_type != QATTN_F32 ||
            p->row_slots != 16) {
            snprintf(why, n, "plan matrix shape %ux%ux%u (%s) with %d row slots: these kernels issue 16x16x16 f16",
                     (unsigned)s->m, (unsigned)s->n, (unsigned)s->k, qattn_dtype_name(s->a_type), (int)p->row_slots);
            return 0;
        }
        if (!(target & (QH_T_GFX942 | QH_T_GFX12 | QH_T_NV))) {
            snprintf(why, n, "no matrix path for this target");
            return 0;
        }
    }
    if (regs) {
        /* the plan's LDS (q's staging in the Vulkan kernel; this one holds
         * q in registers and leaves it unused); tiles of one page (one page
         * id per tile); whole 16-byte chunks of K/V rows */
        if (p->shared_bytes != QATTN_DECODE_REGS_SHARED_BYTES(p->head_dim)) {
            snprintf(why, n, "plan.shared_bytes %u: a regs plan reserves %u B for D %d", (unsigned)p->shared_bytes,
                     (unsigned)QATTN_DECODE_REGS_SHARED_BYTES(p->head_dim), (int)p->head_dim);
            return 0;
        }
        if (!p->page_tiled) {
            snprintf(why, n, "plan.page_tiled 0: the regs kernel reads one page id per tile");
            return 0;
        }
        if (p->load_bytes != 16) {
            snprintf(why, n, "plan.load_bytes %d: the regs kernel loads 16-byte K/V chunks", (int)p->load_bytes);
            return 0;
        }
    } else if (p->shared_bytes != (uint32_t)QH_DEC_LDS_BYTES(p->head_dim, p->head_dim_v, p->row_slots)) {
        snprintf(why, n, "plan.shared_bytes %u: the kernel's LDS layout for D %d, Dv %d and %d row slots is %u B",
                 (unsigned)p->shared_bytes, (int)p->head_dim, (int)p->head_dim_v, (int)p->row_slots,
                 (unsigned)QH_DEC_LDS_BYTES(p->head_dim, p->head_dim_v, p->row_slots));
        return 0;
    }
    if (p->load_bytes != 1 && p->load_bytes != 2 && p->load_bytes != 4 && p->load_bytes != 8 && p->load_bytes != 16) {
        snprintf(why, n, "plan.load_bytes %d", (int)p->load_bytes);
        return 0;
    }
    const int mw = p->merge_workgroup_size;
    if (mw < 64 || mw > QH_DEC_MERGE_MAX_WG || (mw & (mw - 1)) != 0 || mw < p->head_dim_v / 4) {
        snprintf(why, n, "plan.merge_workgroup_size %d: the merge takes a power of two in 64..%d", mw,
                 QH_DEC_MERGE_MAX_WG);
        return 0;
    }
    if (p->merge_dims < 4 || p->merge_dims % 4 != 0 || p->head_dim_v % p->merge_dims != 0 ||
        mw < p->merge_dims / 4) {
        snprintf(why, n, "plan.merge_dims %d: a multiple of 4 dividing Dv %d", (int)p->merge_dims,
                 (int)p->head_dim_v);
        return 0;
    }
    if (p->num_splits < 1 || p->num_splits > QH_DEC_MAX_SPLITS || p->keys_per_split < 1 ||
        p->grid[0] != (uint32_t)p->num_splits) {
        snprintf(why, n, "plan splits: %d of %d keys, grid.x %u", (int)p->num_splits, (int)p->keys_per_split,
                 (unsigned)p->grid[0]);
        return 0;
    }
    out->kernel = (enum qh_kernel_id)k;
    memcpy(out->grid, p->grid, sizeof out->grid);
    out->block = (unsigned)p->workgroup_size;
    out->shared = p->shared_bytes;
    memcpy(out->merge_grid, p->merge_grid, sizeof out->merge_grid);
    out->merge_block = (unsigned)mw;
    return 1;
}
