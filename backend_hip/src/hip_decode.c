/*
 * Decode attention on the HIP backend: maps a plan onto a kernel and its
 * launch geometry (kernels/decode.hip), then the split-KV merge.
 *
 * Variant downgrade chain (the plan names the variant; this backend runs):
 *   PACKED_FP8 -> qattn_decode_packed_<fmt>_g<G> on wave32 targets (gfx12,
 *                 and the NVIDIA twin) for the packed reader's shape (fp8,
 *                 D 128, R 1, GQA 4 or 8; K/V rows 16-byte aligned, else
 *                 QATTN_ERR_ALIGNMENT). On wave64 gfx942 -> generic, whose
 *                 fp8 path also reads four codes per 32-bit word and
 *                 converts them with v_cvt_pk_f32_fp8 (the packed reader's
 *                 WMMA math is RDNA-only).
 *   MULTIROW   -> generic: the generic kernel already shares every K/V load
 *                 across all query rows and heads of its group.
 *   COOPMAT    -> generic: HIP has no separate matrix-unit decode besides
 *                 the packed reader.
 *   GENERIC    -> generic.
 * Plan fields honoured and clamped (generic kernel):
 *   workgroup_size -> 64 or 128 threads (one key per thread per tile, so
 *                     keys_per_tile is the workgroup size; the LDS score
 *                     tile and the final reduction are sized for <= 128).
 *   q_heads_per_workgroup x rows -> query rows per workgroup, at most 16
 *                     (the kernel's register arrays); a group with more
 *                     rows runs as several chunks. The kernel instance is
 *                     the smallest of the 4/8/16-row ones that holds them.
 *   num_splits, keys_per_split -> grid.y and each split's key range.
 *   pipeline_depth -> not used (no software pipelining in these kernels).
 */
#include <inttypes.h>
#include <string.h>

#include "qh_backend.h"
#include "qh_params.h"

/* qh_kernels.def lists each format's generic kernels in the order
 * d64 r4, r8, r16, d128 r4, ... */
static int generic_kernel(qattn_dtype dt, int d, int rows) {
    const int di = d == 64 ? 0 : d == 128 ? 1 : 2;
    const int ri = rows <= 4 ? 0 : rows <= 8 ? 1 : 2;
    int first;
    switch (dt) {
    case QATTN_BF16: first = QH_K_qattn_decode_generic_bf16_d64_r4; break;
    case QATTN_I8: first = QH_K_qattn_decode_generic_i8_d64_r4; break;
    case QATTN_FP8_E4M3FN: first = QH_K_qattn_decode_generic_fn_d64_r4; break;
    case QATTN_FP8_E4M3FNUZ: first = QH_K_qattn_decode_generic_fnuz_d64_r4; break;
    default: return -1;
    }
    return first + 3 * di + ri;
}

static int packed_shape(const qattn_decode_plan *plan) {
    const int g = plan->kv_heads > 0 ? plan->q_heads / plan->kv_heads : 0;
    return (plan->kv_dtype == QATTN_FP8_E4M3FN || plan->kv_dtype == QATTN_FP8_E4M3FNUZ) &&
           plan->head_dim == 128 && plan->head_dim_v == 128 && plan->rows == 1 && (g == 4 || g == 8);
}

/* Whether this plan runs the packed reader here (else the generic kernel). */
static int runs_packed(const qh_backend *be, const qattn_decode_plan *plan) {
    return be->wave == 32 && packed_shape(plan);
}

int qh_decode_supported(const qh_backend *be, const qattn_decode_plan *plan) {
    if (!plan) return 0;
    (void)be;
    switch (plan->variant) {
    /* The HIP kernels do not follow the tiled plan yet (docs/hip.md): they
     * run any plan of the tiled design with their own geometry. */
    case QATTN_DECODE_SIMT:
    case QATTN_DECODE_MATRIX:
        return 1;
    default:
        return 0;
    }
}

/* K/V rows all start on `align`-byte boundaries (base, and the page, row
 * and head strides of the view the kernels address by). */
static int rows_aligned(const qattn_tensor *t, int64_t page_size, uint64_t align) {
    const uint64_t es = qattn_dtype_size(t->dtype);
    const qattn_cache_view v = qattn_cache_view_of(t, 0, page_size);
    return qh_addr(t) % align == 0 && ((uint64_t)v.page_stride * es) % align == 0 &&
           ((uint64_t)v.row_stride * es) % align == 0 && ((uint64_t)v.head_stride * es) % align == 0;
}

/* kv heads of a rank-3 or rank-4 cache: its second-to-last dimension */
static int64_t kv_heads_of(const qattn_tensor *t) { return t->shape[t->rank - 2]; }

static void fill_params(const qattn_decode_plan *plan, const qattn_decode_args *a,
                        qh_decode_params *p) {
    memset(p, 0, sizeof *p);
    p->k = qh_addr(&a->k_cache);
    p->v = qh_addr(&a->v_cache);
    p->k_scale = qh_addr(&a->k_scale);
    p->v_scale = qh_addr(&a->v_scale);
    p->indices = qh_addr(&a->kv_indices);
    /* every cache tensor through its view, for pages of the call's size */
    const qattn_cache_view32 kv = qattn_cache_view32_of(&a->k_cache, 0, a->page_size);
    const qattn_cache_view32 vv = qattn_cache_view32_of(&a->v_cache, 0, a->page_size);
    p->k_ps = kv.page_stride;
    p->k_rs = kv.row_stride;
    p->v_ps = vv.page_stride;
    p->v_rs = vv.row_stride;
    p->k_sh = (int32_t)kv.head_stride;
    p->v_sh = (int32_t)vv.head_stride;
    if (a->k_scale.buffer) {
        const qattn_cache_view32 ksv = qattn_cache_view32_of(&a->k_scale, 1, a->page_size);
        const qattn_cache_view32 vsv = qattn_cache_view32_of(&a->v_scale, 1, a->page_size);
        p->ks_ps = ksv.page_stride;
        p->ks_rs = ksv.row_stride;
        p->vs_ps = vsv.page_stride;
        p->vs_rs = vsv.row_stride;
        p->ks_sh = (int32_t)ksv.head_stride;
        p->vs_sh = (int32_t)vsv.head_stride;
    }
    p->indices_s = qattn_stride32(&a->kv_indices, 0);
    p->n_pages = (int32_t)a->kv_indices.shape[0];
    p->n_slots = kv.n_slots;
    p->page_size = a->page_size;
    p->window_left = a->window_left;
    p->sm_scale = a->sm_scale;
    p->softcap = a->logit_softcap;
    p->q = qh_addr(&a->q);
    p->indptr = qh_addr(&a->kv_indptr);
    p->lens = qh_addr(&a->kv_lens);
    for (int i = 0; i < 3; ++i) {
        p->q_s[i] = qattn_stride32(&a->q, i);
        p->o_s[i] = qattn_stride32(&a->o, i);
        if (a->lse.buffer) p->lse_s[i] = qattn_stride32(&a->lse, i);
    }
    p->indptr_s = qattn_stride32(&a->kv_indptr, 0);
    p->lens_s = qattn_stride32(&a->kv_lens, 0);
    p->B = (int32_t)a->q.shape[0];
    p->R = (int32_t)a->q.shape[1];
    p->Hq = (int32_t)a->q.shape[2];
    p->Hkv = (int32_t)kv_heads_of(&a->k_cache);
    p->D = (int32_t)a->q.shape[3];
    p->num_splits = plan->num_splits;
    p->keys_per_split = plan->keys_per_split;
    p->o = qh_addr(&a->o);
    p->lse = qh_addr(&a->lse);
    p->sinks = qh_addr(&a->sinks);
    if (a->sinks.buffer) p->sinks_s = qattn_stride32(&a->sinks, 0);
    if (a->sinks.buffer) p->flags |= QH_DEC_SINKS;
    if (a->lse.buffer) p->flags |= QH_DEC_LSE;
    /* 4-element loads: 4 bytes of fp8/int8, 8 bytes of bf16 */
    const uint64_t vec_align = 4 * qattn_dtype_size(a->k_cache.dtype);
    if (rows_aligned(&a->k_cache, a->page_size, vec_align) && rows_aligned(&a->v_cache, a->page_size, vec_align))
        p->flags |= QH_DEC_KV_VEC;
}

qattn_status qh_decode(void *vbe, const qattn_decode_plan *plan, const qattn_decode_args *a,
                       const qattn_workspace *ws) {
    qh_backend *be = vbe;
    qh_decode_params p;
    fill_params(plan, a, &p);
    const int64_t B = p.B, R = p.R, Hq = p.Hq, Hkv = p.Hkv, D = p.D, G = Hq / Hkv;

    if (p.num_splits > 1) {
        /* Split partials, the planner's layout: o f32 [B, R, Hq, splits, D],
         * then LSE f32 [B, R, Hq, splits]; every key must fall in a split. */
        const uint64_t rows = (uint64_t)p.num_splits * (uint64_t)(B * R * Hq);
        const uint64_t need = rows * (uint64_t)(D + 1) * 4u;
        if (!ws->buffer || ws->bytes < need)
            return qh_fail(be, QATTN_ERR_WORKSPACE,
                           "decode: %d splits need %" PRIu64 " workspace bytes, plan gives %" PRIu64,
                           (int)p.num_splits, need, ws->buffer ? ws->bytes : 0);
        if (p.keys_per_split < 1 || (int64_t)p.keys_per_split * p.num_splits < a->max_kv_len)
            return qh_fail(be, QATTN_ERR_INVALID_ARGUMENT,
                           "decode: plan splits cover %" PRId64 " keys, max_kv_len is %d",
                           (int64_t)p.keys_per_split * p.num_splits, (int)a->max_kv_len);
        const uint64_t base = (uint64_t)(uintptr_t)qattn_buffer_handle(ws->buffer) + ws->offset;
        p.ws_o = base;
        p.ws_lse = base + rows * (uint64_t)D * 4u;
    }
    if (p.n_slots == 0) p.n_pages = 0; /* nothing can be read: every row is empty */

    int kernel, block;
    unsigned gx;
    /* The packed reader takes 16-byte words: layouts whose rows are not
     * 16-byte aligned run the generic kernel. */
    if (runs_packed(be, plan) && rows_aligned(&a->k_cache, a->page_size, 16) &&
        rows_aligned(&a->v_cache, a->page_size, 16)) {
        const int fn = a->k_cache.dtype == QATTN_FP8_E4M3FN;
        kernel = fn ? (G == 4 ? QH_K_qattn_decode_packed_fn_g4 : QH_K_qattn_decode_packed_fn_g8)
                    : (G == 4 ? QH_K_qattn_decode_packed_fnuz_g4 : QH_K_qattn_decode_packed_fnuz_g8);
        block = 32 * QH_PACKED_WAVES;
        gx = (unsigned)(B * Hkv);
    } else {
        block = plan->workgroup_size <= 64 ? 64 : QH_DEC_MAX_WG;
        if (block < be->wave) block = be->wave;
        int64_t rows = G * R;
        int64_t per = plan->q_heads_per_workgroup > 0 ? (int64_t)plan->q_heads_per_workgroup * R : rows;
        if (per > rows) per = rows;
        if (per > QH_DEC_MAX_ROWS) per = QH_DEC_MAX_ROWS;
        if (per < 1) per = 1;
        p.rows_per_block = (int32_t)per;
        p.n_qchunks = (int32_t)((rows + per - 1) / per);
        kernel = generic_kernel(a->k_cache.dtype, (int)D, (int)per);
        gx = (unsigned)(B * Hkv * p.n_qchunks);
    }
    p.wg = block;
    if (kernel < 0) return qh_fail(be, QATTN_ERR_UNSUPPORTED, "decode: no kernel for this dtype");

    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch(be, (enum qh_kernel_id)kernel, gx, (unsigned)p.num_splits, 1, (unsigned)block, &p,
                      "decode");
    if (s == QATTN_OK && p.num_splits > 1)
        s = qh_launch(be, QH_K_qattn_decode_merge, (unsigned)(B * R * Hq), 1, 1, 64, &p, "decode merge");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
