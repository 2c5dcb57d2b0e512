/* Decode attention on Vulkan: turns a plan (core/src/plan_decode.c) into the
 * stage-1 launch (shaders/decode.comp, decode_coopmat.comp or
 * decode_stream.comp) and, with more
 * than one split, the merge launch (shaders/merge.comp), recorded into one
 * command buffer. Arguments were validated against the plan by the core.
 *
 * Workspace layout (plan->workspace_bytes): partial outputs [B, R, Hq,
 * splits, Dv] f32, then partial LSEs [B, R, Hq, splits] f32. */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"

/* Mirrors the push block in shaders/common_decode.glsl (std430). */
typedef struct decode_push {
    uint64_t q, k, v, ks, vs, indptr, indices, lens, sinks, o, lse, ws_o, ws_lse;
    int32_t q_sb, q_sr, q_sh;
    int32_t k_ss, k_sh, v_ss, v_sh;
    int32_t ks_ss, ks_sh, vs_ss, vs_sh;
    int32_t o_sb, o_sr, o_sh;
    int32_t lse_sb, lse_sr, lse_sh;
    int32_t indptr_s, indices_s, lens_s, sinks_s;
    int32_t hq, hkv, page_size, window_left;
    int32_t num_splits, keys_per_split, flags, pad0;
    float sm_scale, softcap;
} decode_push;

/* Mirrors the push block in shaders/merge.comp. */
typedef struct merge_push {
    uint64_t ws_o, ws_lse, sinks, o, lse;
    int32_t o_sb, o_sr, o_sh;
    int32_t lse_sb, lse_sr, lse_sh;
    int32_t sinks_s, hq, rows, num_splits, dv, flags;
} merge_push;

#define FLAG_SINKS 1
#define FLAG_LSE 2
#define MERGE_WG 64u
#define STREAM_VEC_SPEC 6 /* index of decode_stream.comp's load-width constant */

static uint32_t pow2_at_least(uint32_t x) {
    uint32_t p = 1;
    while (p < x) p *= 2;
    return p;
}

/* Shared bytes of decode_stream.comp (mirrors its declarations and the
 * planner's stream_shared). */
static uint64_t stream_shared(uint32_t D, uint32_t np, uint32_t tk) {
    const uint64_t rp = np < 4 ? 4 : np;
    return (uint64_t)np * D * 4u + 2u * (uint64_t)tk * rp * 4u + (uint64_t)tk * 4u + 3u * (uint64_t)np * 4u +
           2u * (uint64_t)tk * 4u;
}

static const char *dtype_suffix(qattn_dtype dt) {
    switch (dt) {
    case QATTN_BF16: return "bf16";
    case QATTN_FP8_E4M3FN: return "fp8fn";
    case QATTN_FP8_E4M3FNUZ: return "fp8fnuz";
    case QATTN_I8: return "i8";
    default: return NULL;
    }
}

/* Stage-1 launch of a plan: shader name, specialization constants, grid. */
typedef struct stage1 {
    char shader[48];
    uint32_t spec[QATTN_VK_MAX_SPEC];
    uint32_t n_spec;
    uint32_t grid[3];
    uint32_t subgroup_size; /* pinned, or 0 */
} stage1;

/* Derives the launch from the plan. Returns 0 (with why) when this device
 * cannot run it. */
static int stage1_of(const qattn_vk *vk, const qattn_decode_plan *p, stage1 *st, char *why, size_t n) {
    memset(st, 0, sizeof *st);
    const char *dt = dtype_suffix(p->kv_dtype);
    if (!dt) {
        snprintf(why, n, "kv dtype %s", qattn_dtype_name(p->kv_dtype));
        return 0;
    }
    const uint32_t sg = vk->caps.subgroup_size_min;
    const uint32_t wg = (uint32_t)p->workgroup_size;
    if (wg == 0 || wg > vk->caps.max_workgroup_size || wg % sg != 0 || p->keys_per_tile <= 0 ||
        p->pipeline_depth <= 0 || p->q_heads_per_workgroup <= 0 ||
        (p->q_heads / p->kv_heads) % p->q_heads_per_workgroup != 0) {
        snprintf(why, n, "plan geometry does not fit this device (workgroup %u, subgroup %u)", wg, sg);
        return 0;
    }
    const uint32_t G = (uint32_t)(p->q_heads / p->kv_heads);
    const uint32_t qh = (uint32_t)p->q_heads_per_workgroup;
    const uint32_t D = (uint32_t)p->head_dim;
    if (p->head_dim_v != p->head_dim) {
        snprintf(why, n, "Dv %d != D %d", (int)p->head_dim_v, (int)p->head_dim);
        return 0;
    }
    st->subgroup_size = vk->has_subgroup_size_control ? sg : 0;
    if (p->variant == QATTN_DECODE_COOPMAT) {
        if (!vk->has_coopmat) {
            snprintf(why, n, "no cooperative matrix on this device");
            return 0;
        }
        if (!vk->has_subgroup_size_control && vk->caps.subgroup_size_min != vk->caps.subgroup_size_max) {
            snprintf(why, n, "coopmat needs a fixed subgroup size");
            return 0;
        }
        const uint32_t ns = wg / sg;
        const uint32_t nk = (uint32_t)p->keys_per_tile / ns;
        snprintf(st->shader, sizeof st->shader, "decode_coopmat_%s", dt);
        const uint32_t spec[] = {wg, D, (uint32_t)p->rows, qh, ns, nk, sg};
        memcpy(st->spec, spec, sizeof spec);
        st->n_spec = sizeof spec / sizeof spec[0];
        st->grid[0] = (uint32_t)p->num_splits;
        st->grid[1] = (uint32_t)p->kv_heads * (G / qh);
        st->grid[2] = (uint32_t)p->batch;
    } else if (p->variant == QATTN_DECODE_STREAM) {
        /* 8-lane key groups (shuffles), 16 rows at most (one 8-lane softmax
         * group each), whole V rows of D / 4 lanes per workgroup. */
        const uint32_t R = (uint32_t)p->rows, np = pow2_at_least(qh * R);
        const uint32_t kpg = (uint32_t)p->pipeline_depth;
        if (sg < 8 || wg % 8 != 0 || wg % (D / 4) != 0 || np > wg / 8 ||
            (uint32_t)p->keys_per_tile != wg / 8 * kpg || (uint32_t)p->keys_per_tile > wg) {
            snprintf(why, n, "stream geometry (workgroup %u, %u rows, tile %d) does not fit subgroups of %u",
                     wg, qh * R, (int)p->keys_per_tile, sg);
            return 0;
        }
        const uint64_t shared = stream_shared(D, np, (uint32_t)p->keys_per_tile);
        if (shared != p->shared_bytes || shared > vk->caps.max_shared_bytes) {
            snprintf(why, n, "plan's shared_bytes %u differ from this device's stream launch (%llu)",
                     (unsigned)p->shared_bytes, (unsigned long long)shared);
            return 0;
        }
        snprintf(st->shader, sizeof st->shader, "decode_stream_%s", dt);
        /* The load width (STREAM_VEC_SPEC) is set from the tensors' addresses
         * at run time; 16 here. */
        const uint32_t spec[] = {wg, D, R, qh, np, kpg, 16u, wg};
        memcpy(st->spec, spec, sizeof spec);
        st->n_spec = sizeof spec / sizeof spec[0];
        st->grid[0] = (uint32_t)p->num_splits;
        st->grid[1] = (uint32_t)p->kv_heads * (G / qh);
        st->grid[2] = (uint32_t)p->batch;
    } else {
        const uint32_t U = (uint32_t)p->pipeline_depth;
        const uint32_t lpk = wg * U / (uint32_t)p->keys_per_tile;
        const uint32_t R = (uint32_t)p->rows;
        const uint32_t rb = p->variant == QATTN_DECODE_GENERIC ? 1u : R;
        if (lpk == 0 || lpk > sg || (lpk & (lpk - 1)) != 0 || D % lpk != 0) {
            snprintf(why, n, "lanes per key %u do not fit subgroups of %u", lpk, sg);
            return 0;
        }
        const uint32_t nsg = wg / sg;
        const uint64_t shared = (uint64_t)nsg * qh * rb * (D + 2u) * 4u;
        if (shared != p->shared_bytes) {
            snprintf(why, n, "plan's shared_bytes %u differ from this device's launch (%llu)",
                     (unsigned)p->shared_bytes, (unsigned long long)shared);
            return 0;
        }
        if (p->variant == QATTN_DECODE_PACKED_FP8) {
            if (p->kv_dtype != QATTN_FP8_E4M3FN && p->kv_dtype != QATTN_FP8_E4M3FNUZ) {
                snprintf(why, n, "packed_fp8 with a %s cache", qattn_dtype_name(p->kv_dtype));
                return 0;
            }
            /* A precompiled specialization of this geometry when the build
             * has one (shaders/decode.variants.cmake), else the general one. */
            snprintf(st->shader, sizeof st->shader, "decode_packed_%s_l%uq%uu%u", dt, lpk, qh, U);
            if (D != 128 || R != 1 || !qattn_vk_has_shader(st->shader))
                snprintf(st->shader, sizeof st->shader, "decode_packed_%s", dt);
        } else {
            snprintf(st->shader, sizeof st->shader, "decode_scalar_%s", dt);
        }
        const uint32_t spec[] = {wg, D, lpk, R, qh, U, nsg, rb};
        memcpy(st->spec, spec, sizeof spec);
        st->n_spec = sizeof spec / sizeof spec[0];
        st->grid[0] = (uint32_t)p->num_splits;
        st->grid[1] = (uint32_t)p->kv_heads * (G / qh);
        st->grid[2] = (uint32_t)p->batch * (R / rb);
    }
    const uint32_t *lim = vk->props.limits.maxComputeWorkGroupCount;
    if (st->grid[0] > lim[0] || st->grid[1] > lim[1] || st->grid[2] > lim[2]) {
        snprintf(why, n, "grid %ux%ux%u exceeds the device's %ux%ux%u", st->grid[0], st->grid[1],
                 st->grid[2], lim[0], lim[1], lim[2]);
        return 0;
    }
    if (!qattn_vk_has_shader(st->shader)) {
        snprintf(why, n, "this build has no shader %s", st->shader);
        return 0;
    }
    return 1;
}

int qattn_vk_decode_supports(qattn_vk *vk, const qattn_decode_plan *plan) {
    stage1 st;
    char why[160];
    if (!plan) return 0;
    if (!stage1_of(vk, plan, &st, why, sizeof why)) {
        qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "decode: %s", why);
        return 0;
    }
    return 1;
}

qattn_status qattn_vk_decode(void *be, const qattn_decode_plan *plan, const qattn_decode_args *a,
                             const qattn_workspace *ws) {
    qattn_vk *vk = (qattn_vk *)be;
    stage1 st;
    char why[160];
    if (!stage1_of(vk, plan, &st, why, sizeof why))
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "decode: %s", why);

    decode_push p;
    memset(&p, 0, sizeof p);
    p.q = qattn_vk_addr(&a->q);
    p.k = qattn_vk_addr(&a->k_cache);
    p.v = qattn_vk_addr(&a->v_cache);
    p.ks = qattn_vk_addr(&a->k_scale);
    p.vs = qattn_vk_addr(&a->v_scale);
    p.indptr = qattn_vk_addr(&a->kv_indptr);
    p.indices = qattn_vk_addr(&a->kv_indices);
    p.lens = qattn_vk_addr(&a->kv_lens);
    p.sinks = qattn_vk_addr(&a->sinks);
    p.o = qattn_vk_addr(&a->o);
    p.lse = qattn_vk_addr(&a->lse);
    const uint64_t lse_off = (uint64_t)plan->batch * (uint64_t)plan->rows * (uint64_t)plan->q_heads *
                             (uint64_t)plan->num_splits * (uint64_t)plan->head_dim_v * 4u;
    if (plan->num_splits > 1) {
        p.ws_o = qattn_vk_ws_addr(ws, 0);
        p.ws_lse = qattn_vk_ws_addr(ws, lse_off);
    }
    p.q_sb = qattn_vk_stride(&a->q, 0);
    p.q_sr = qattn_vk_stride(&a->q, 1);
    p.q_sh = qattn_vk_stride(&a->q, 2);
    p.k_ss = qattn_vk_stride(&a->k_cache, 0);
    p.k_sh = qattn_vk_stride(&a->k_cache, 1);
    p.v_ss = qattn_vk_stride(&a->v_cache, 0);
    p.v_sh = qattn_vk_stride(&a->v_cache, 1);
    p.ks_ss = qattn_vk_stride(&a->k_scale, 0);
    p.ks_sh = qattn_vk_stride(&a->k_scale, 1);
    p.vs_ss = qattn_vk_stride(&a->v_scale, 0);
    p.vs_sh = qattn_vk_stride(&a->v_scale, 1);
    p.o_sb = qattn_vk_stride(&a->o, 0);
    p.o_sr = qattn_vk_stride(&a->o, 1);
    p.o_sh = qattn_vk_stride(&a->o, 2);
    p.lse_sb = qattn_vk_stride(&a->lse, 0);
    p.lse_sr = qattn_vk_stride(&a->lse, 1);
    p.lse_sh = qattn_vk_stride(&a->lse, 2);
    p.indptr_s = qattn_vk_stride(&a->kv_indptr, 0);
    p.indices_s = qattn_vk_stride(&a->kv_indices, 0);
    p.lens_s = qattn_vk_stride(&a->kv_lens, 0);
    p.sinks_s = qattn_vk_stride(&a->sinks, 0);
    p.hq = plan->q_heads;
    p.hkv = plan->kv_heads;
    p.page_size = a->page_size;
    p.window_left = a->window_left;
    p.num_splits = plan->num_splits;
    p.keys_per_split = plan->keys_per_split;
    p.flags = (qattn_tensor_present(&a->sinks) ? FLAG_SINKS : 0) |
              (qattn_tensor_present(&a->lse) ? FLAG_LSE : 0);
    p.sm_scale = a->sm_scale;
    p.softcap = a->logit_softcap;

    if (plan->variant == QATTN_DECODE_COOPMAT) {
        /* Widest K/V load every row start allows (device addresses, so the
         * buffer's own alignment counts too). */
        const uint64_t bits = p.k | p.v | ((uint64_t)p.k_ss | (uint64_t)p.k_sh | (uint64_t)p.v_ss |
                                           (uint64_t)p.v_sh);
        st.spec[st.n_spec++] = (bits % 16u == 0) ? 16u : (bits % 4u == 0) ? 4u : 1u;
    } else if (plan->variant == QATTN_DECODE_STREAM) {
        /* Widest load every K/V row start allows, in bytes (device
         * addresses: the buffer's own alignment counts too). */
        const uint64_t es = qattn_dtype_size(plan->kv_dtype);
        const uint64_t bits = p.k | p.v |
                              (((uint64_t)(uint32_t)p.k_ss | (uint64_t)(uint32_t)p.k_sh | (uint64_t)(uint32_t)p.v_ss |
                                (uint64_t)(uint32_t)p.v_sh) *
                               es);
        st.spec[STREAM_VEC_SPEC] = bits % 16u == 0 ? 16u : bits % 8u == 0 ? 8u : bits % 4u == 0 ? 4u
                                                                           : bits % 2u == 0 ? 2u : 1u;
    }
    VkPipeline s1, mg = VK_NULL_HANDLE;
    qattn_status s = qattn_vk_pipeline(vk, st.shader, st.spec, st.n_spec, sizeof p, st.subgroup_size, &s1);
    if (s != QATTN_OK) return s;
    merge_push m;
    memset(&m, 0, sizeof m);
    if (plan->num_splits > 1) {
        const uint32_t spec[1] = {MERGE_WG};
        if ((s = qattn_vk_pipeline(vk, "decode_merge", spec, 1, sizeof m, 0, &mg)) != QATTN_OK) return s;
        m.ws_o = p.ws_o;
        m.ws_lse = p.ws_lse;
        m.sinks = p.sinks;
        m.o = p.o;
        m.lse = p.lse;
        m.o_sb = p.o_sb;
        m.o_sr = p.o_sr;
        m.o_sh = p.o_sh;
        m.lse_sb = p.lse_sb;
        m.lse_sr = p.lse_sr;
        m.lse_sh = p.lse_sh;
        m.sinks_s = p.sinks_s;
        m.hq = plan->q_heads;
        m.rows = plan->rows;
        m.num_splits = plan->num_splits;
        m.dv = plan->head_dim_v;
        m.flags = p.flags;
    }
    if ((s = qattn_vk_begin(vk)) != QATTN_OK) return s;
    qattn_vk_dispatch(vk, s1, &p, sizeof p, st.grid[0], st.grid[1], st.grid[2]);
    if (plan->num_splits > 1) {
        qattn_vk_barrier(vk);
        qattn_vk_dispatch(vk, mg, &m, sizeof m, (uint32_t)plan->q_heads, (uint32_t)plan->rows,
                          (uint32_t)plan->batch);
    }
    return qattn_vk_submit(vk, "qattn_decode_run");
}
