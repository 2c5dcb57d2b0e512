/* Decode attention on Vulkan: records exactly the launches of a plan
 * (core/src/plan_decode.c): the tiled stage 1 (shaders/decode_tiled.comp)
 * and the split merge (shaders/decode_merge.comp), into one command buffer.
 * Arguments were validated against the plan by the core; nothing here
 * re-derives a launch decision. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

/* Mirrors the push block in shaders/common_tiled.glsl (std430). */
typedef struct tiled_push {
    uint64_t q, k, v, ks, vs, indptr, indices, lens, ws_o, ws_ml;
    int64_t k_ps, v_ps, ks_ps, vs_ps, k_hs, v_hs, ks_hs, vs_hs, n_slots;
    uint32_t k_rs, v_rs, ks_rs, vs_rs;
    int32_t q_sb, q_sr, q_sh;
    int32_t indptr_s, indices_s, lens_s, n_indices;
    int32_t hq, hkv, page_size, window_left;
    int32_t num_splits, keys_per_split;
    float sm_scale, softcap;
} tiled_push;

/* Mirrors the push block in shaders/decode_merge.comp. */
typedef struct merge_push {
    uint64_t ws_o, ws_ml, sinks, o, lse;
    int32_t o_sb, o_sr, o_sh;
    int32_t lse_sb, lse_sr, lse_sh;
    int32_t sinks_s, hkv, R, QH, NR, S;
    int32_t D, perm, flags, pad0;
    float vf;
} merge_push;

#define FLAG_SINKS 1
#define FLAG_LSE 2

static const char *dtype_suffix(qattn_dtype dt) {
    switch (dt) {
    case QATTN_BF16: return "bf16";
    case QATTN_FP8_E4M3FN: return "fp8fn";
    case QATTN_FP8_E4M3FNUZ: return "fp8fnuz";
    case QATTN_I8: return "i8";
    default: return NULL;
    }
}

int qattn_vk_decode_launch_of(const qattn_decode_plan *p, qattn_vk_decode_launch *out, char *why,
                              size_t n) {
    memset(out, 0, sizeof *out);
    const char *dt = dtype_suffix(p->kv_dtype);
    if (!dt || (p->variant != QATTN_DECODE_SIMT && p->variant != QATTN_DECODE_MATRIX)) {
        snprintf(why, n, "no tiled kernel for variant %s with a %s cache",
                 qattn_decode_variant_name(p->variant), qattn_dtype_name(p->kv_dtype));
        return 0;
    }
    snprintf(out->shader, sizeof out->shader, "decode_%s_%s", qattn_decode_variant_name(p->variant), dt);
    const uint32_t spec[] = {(uint32_t)p->workgroup_size, (uint32_t)p->head_dim, (uint32_t)p->rows,
                             (uint32_t)p->q_heads_per_workgroup, (uint32_t)p->row_slots,
                             (uint32_t)p->subgroup_size, (uint32_t)p->load_bytes,
                             (uint32_t)p->keys_per_tile, (uint32_t)p->page_tiled};
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
    if (p->variant == QATTN_DECODE_MATRIX && !vk->has_coopmat) {
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
    tiled_push p;
    memset(&p, 0, sizeof p);
    p.q = qattn_vk_addr(&a->q);
    p.k = qattn_vk_addr(&a->k_cache);
    p.v = qattn_vk_addr(&a->v_cache);
    p.ks = qattn_vk_addr(&a->k_scale);
    p.vs = qattn_vk_addr(&a->v_scale);
    if ((p.k | p.v) % (uint64_t)plan->load_bytes != 0)
        return qattn_vk_fail(vk, QATTN_ERR_ALIGNMENT,
                             "decode: the plan reads k_cache/v_cache in %d-byte loads; their buffers' "
                             "device addresses are not that aligned", (int)plan->load_bytes);
    p.indptr = qattn_vk_addr(&a->kv_indptr);
    p.indices = qattn_vk_addr(&a->kv_indices);
    p.lens = qattn_vk_addr(&a->kv_lens);
    p.ws_o = qattn_vk_ws_addr(ws, plan->partial_o_offset);
    p.ws_ml = qattn_vk_ws_addr(ws, plan->partial_ml_offset);
    const qattn_decode_cache_views cv = qattn_decode_cache_views_of(a);
    p.k_ps = cv.k.page_stride;
    p.v_ps = cv.v.page_stride;
    p.ks_ps = cv.ks.page_stride;
    p.vs_ps = cv.vs.page_stride;
    p.k_hs = cv.k.head_stride;
    p.v_hs = cv.v.head_stride;
    p.ks_hs = cv.ks.head_stride;
    p.vs_hs = cv.vs.head_stride;
    p.k_rs = cv.k.row_stride;
    p.v_rs = cv.v.row_stride;
    p.ks_rs = cv.ks.row_stride;
    p.vs_rs = cv.vs.row_stride;
    p.n_slots = cv.n_slots;
    p.q_sb = qattn_vk_stride(&a->q, 0);
    p.q_sr = qattn_vk_stride(&a->q, 1);
    p.q_sh = qattn_vk_stride(&a->q, 2);
    p.indptr_s = qattn_vk_stride(&a->kv_indptr, 0);
    p.indices_s = qattn_vk_stride(&a->kv_indices, 0);
    p.lens_s = qattn_vk_stride(&a->kv_lens, 0);
    p.n_indices = (int32_t)a->kv_indices.shape[0];
    p.hq = plan->q_heads;
    p.hkv = plan->kv_heads;
    p.page_size = a->page_size;
    p.window_left = a->window_left;
    p.num_splits = plan->num_splits;
    p.keys_per_split = plan->keys_per_split;
    p.sm_scale = a->sm_scale;
    p.softcap = a->logit_softcap;

    merge_push m;
    memset(&m, 0, sizeof m);
    m.ws_o = p.ws_o;
    m.ws_ml = p.ws_ml;
    m.sinks = qattn_vk_addr(&a->sinks);
    m.o = qattn_vk_addr(&a->o);
    m.lse = qattn_vk_addr(&a->lse);
    m.o_sb = qattn_vk_stride(&a->o, 0);
    m.o_sr = qattn_vk_stride(&a->o, 1);
    m.o_sh = qattn_vk_stride(&a->o, 2);
    m.lse_sb = qattn_vk_stride(&a->lse, 0);
    m.lse_sr = qattn_vk_stride(&a->lse, 1);
    m.lse_sh = qattn_vk_stride(&a->lse, 2);
    m.sinks_s = qattn_vk_stride(&a->sinks, 0);
    m.hkv = plan->kv_heads;
    m.R = plan->rows;
    m.QH = plan->q_heads_per_workgroup;
    m.NR = plan->row_slots;
    m.S = plan->num_splits;
    m.D = plan->head_dim_v;
    m.perm = plan->kv_dtype != QATTN_BF16;
    m.flags = (qattn_tensor_present(&a->sinks) ? FLAG_SINKS : 0) | (qattn_tensor_present(&a->lse) ? FLAG_LSE : 0);
    /* The staged V values times this are the decoded ones (fp8: the power
     * of two its f16 bit trick leaves). */
    m.vf = plan->kv_dtype == QATTN_FP8_E4M3FN ? 256.0f : plan->kv_dtype == QATTN_FP8_E4M3FNUZ ? 128.0f : 1.0f;

    VkPipeline s1, mg;
    /* A device of one subgroup size runs the plan's as it is; only a varying
     * one is pinned (device_fits checked that it can be). */
    const uint32_t pin = vk->caps.subgroup_size_min == vk->caps.subgroup_size_max ? 0u : l.subgroup_size;
    qattn_status s = qattn_vk_pipeline(vk, l.shader, l.spec, l.n_spec, sizeof p, pin, &s1);
    if (s != QATTN_OK) return s;
    if ((s = qattn_vk_pipeline(vk, "decode_merge", l.merge_spec, 2, sizeof m, 0, &mg)) != QATTN_OK) return s;
    if ((s = qattn_vk_begin(vk)) != QATTN_OK) return s;
    qattn_vk_dispatch(vk, s1, &p, sizeof p, l.grid[0], l.grid[1], l.grid[2]);
    qattn_vk_barrier(vk);
    qattn_vk_dispatch(vk, mg, &m, sizeof m, l.merge_grid[0], l.merge_grid[1], l.merge_grid[2]);
    return qattn_vk_submit(vk, "qattn_decode_run");
}
