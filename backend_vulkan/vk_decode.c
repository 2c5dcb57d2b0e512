/* Decode attention on Vulkan: records exactly the launches of a plan
 * (core/src/plan_decode.c): the tiled stage 1 (shaders/decode_tiled.comp)
 * and the split merge (shaders/decode_merge.comp), into one command buffer.
 * Arguments were validated against the plan by the core; nothing here
 * re-derives a launch decision. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

static const char *dtype_suffix(qattn_dtype dt) {
    switch (dt) {
    case QATTN_BF16: return "bf16";
    case QATTN_FP8_E4M3FN: return "fp8fn";
    case QATTN_FP8_E4M3FNUZ: return "fp8fnuz";
    case QATTN_FP8_E5M2: return "fp8e5m2";
    case QATTN_I8: return "i8";
    default: return NULL;
    }
}

int qattn_vk_decode_launch_of(const qattn_decode_plan *p, qattn_vk_decode_launch *out, char *why,
                              size_t n) {
    memset(out, 0, sizeof *out);
    const char *dt = dtype_suffix(p->kv_dtype);
    if (!dt || (p->variant != QATTN_DECODE_SIMT && p->variant != QATTN_DECODE_MATRIX &&
                p->variant != QATTN_DECODE_REGS)) {
        snprintf(why, n, "no tiled kernel for variant %s with a %s cache",
                 qattn_decode_variant_name(p->variant), qattn_dtype_name(p->kv_dtype));
        return 0;
    }
    if (p->variant == QATTN_DECODE_REGS && p->head_dim != p->head_dim_v) {
        snprintf(why, n, "the regs kernel needs equal head dims (D %d, Dv %d)", (int)p->head_dim,
                 (int)p->head_dim_v);
        return 0;
    }
    if (p->variant == QATTN_DECODE_REGS) /* its head dim is compiled in */
        snprintf(out->shader, sizeof out->shader, "decode_regs_%s_d%d", dt, (int)p->head_dim);
    else
        snprintf(out->shader, sizeof out->shader, "decode_%s_%s", qattn_decode_variant_name(p->variant), dt);
    const uint32_t spec[] = {(uint32_t)p->workgroup_size, (uint32_t)p->head_dim, (uint32_t)p->rows,
                             (uint32_t)p->q_heads_per_workgroup, (uint32_t)p->row_slots,
                             (uint32_t)p->subgroup_size, (uint32_t)p->load_bytes,
                             (uint32_t)p->keys_per_tile, (uint32_t)p->page_tiled, (uint32_t)p->head_dim_v};
    memcpy(out->spec, spec, sizeof spec);
    out->n_spec = sizeof spec / sizeof spec[0];
    memcpy(out->grid, p->grid, sizeof out->grid);
    out->subgroup_size = (uint32_t)p->subgroup_size;
    out->merge_spec[0] = (uint32_t)p->merge_workgroup_size;
    out->merge_spec[1] = (uint32_t)p->merge_dims;
    memcpy(out->merge_grid, p->merge_grid, sizeof out->merge_grid);
    return 1;
}

/* Whether this device runs the plan's launch as planned. */
static int device_fits(const qattn_vk *vk, const qattn_decode_plan *p, const qattn_vk_decode_launch *l,
                       char *why, size_t n) {
    const uint32_t *lim = vk->props.limits.maxComputeWorkGroupCount;
    if (p->variant != QATTN_DECODE_SIMT && !vk->has_coopmat) {
        snprintf(why, n, "no cooperative matrix on this device");
        return 0;
    }
    if (l->subgroup_size != vk->caps.subgroup_size_min || l->subgroup_size != vk->caps.subgroup_size_max) {
        if (!vk->has_subgroup_size_control || l->subgroup_size < vk->caps.subgroup_size_min ||
            l->subgroup_size > vk->caps.subgroup_size_max) {
            snprintf(why, n, "the plan's subgroup of %u lanes cannot be pinned here (%u..%u)", l->subgroup_size,
                     vk->caps.subgroup_size_min, vk->caps.subgroup_size_max);
            return 0;
        }
    }
    if (p->variant == QATTN_DECODE_REGS && !(vk->caps.features & QATTN_FEAT_FRAGMENT_LAYOUT)) {
        snprintf(why, n, "the fragment layout probe did not match the regs kernel's layout (%.80s)", vk->frag_layout);
        return 0;
    }
    if (p->shared_bytes > vk->caps.max_shared_bytes) {
        snprintf(why, n, "plan's %u B of shared memory > the device's %u", (unsigned)p->shared_bytes,
                 (unsigned)vk->caps.max_shared_bytes);
        return 0;
    }
    for (int i = 0; i < 3; ++i)
        if (l->grid[i] > lim[i] || l->merge_grid[i] > lim[i]) {
            snprintf(why, n, "grid %ux%ux%u exceeds the device's %ux%ux%u", l->grid[0], l->grid[1], l->grid[2],
                     lim[0], lim[1], lim[2]);
            return 0;
        }
    if (!qattn_vk_has_shader(l->shader)) {
        snprintf(why, n, "this build has no shader %s", l->shader);
        return 0;
    }
    return 1;
}

int qattn_vk_decode_supports(qattn_vk *vk, const qattn_decode_plan *plan) {
    qattn_vk_decode_launch l;
    char why[160];
    if (!plan) return 0;
    if (!qattn_vk_decode_launch_of(plan, &l, why, sizeof why) || !device_fits(vk, plan, &l, why, sizeof why)) {
        qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "decode: %s", why);
        return 0;
    }
    return 1;
}

qattn_status qattn_vk_decode(void *be, const qattn_decode_plan *plan, const qattn_decode_args *a,
                             const qattn_workspace *ws) {
    qattn_vk *vk = (qattn_vk *)be;
    qattn_vk_decode_launch l;
    char why[160];
    if (!qattn_vk_decode_launch_of(plan, &l, why, sizeof why) || !device_fits(vk, plan, &l, why, sizeof why))
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "decode: %s", why);
    /* The stage's and the merge's push blocks are qattn/kernel_args.h's,
     * built by the core. */
    qattn_decode_tile_args p;
    qattn_decode_merge_args m;
    qattn_status s = qattn_decode_kernel_args_of(plan, a, qattn_vk_addr, qattn_vk_ws_addr(ws, 0), &p, &m, why,
                                                 sizeof why);
    if (s != QATTN_OK) return qattn_vk_fail(vk, s, "decode: %s", why);
    VkPipeline s1, mg;
    /* A device of one subgroup size runs the plan's as it is; only a varying
     * one is pinned (device_fits checked that it can be). */
    const uint32_t pin = vk->caps.subgroup_size_min == vk->caps.subgroup_size_max ? 0u : l.subgroup_size;
    s = qattn_vk_pipeline(vk, l.shader, l.spec, l.n_spec, sizeof p, pin, &s1);
    if (s != QATTN_OK) return s;
    if ((s = qattn_vk_pipeline(vk, "decode_merge", l.merge_spec, 2, sizeof m, 0, &mg)) != QATTN_OK) return s;
    if ((s = qattn_vk_begin(vk)) != QATTN_OK) return s;
    qattn_vk_dispatch(vk, s1, &p, sizeof p, l.grid[0], l.grid[1], l.grid[2]);
    qattn_vk_barrier(vk);
    qattn_vk_dispatch(vk, mg, &m, sizeof m, l.merge_grid[0], l.merge_grid[1], l.merge_grid[2]);
    return qattn_vk_submit(vk, "qattn_decode_run");
}
