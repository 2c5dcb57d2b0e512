/* The kernel arguments every GPU backend passes unchanged
 * (qattn/kernel_args.h): decode's stage and merge blocks, the
 * decode-pattern read's and paged MQA logits', built here once from a plan
 * and validated arguments. Backends only resolve device addresses. */
#include "internal.h"

/* Decode's four cache tensors as kernels address them: the views of
 * k_cache, v_cache and, for fp8/int8 caches, k_scale and v_scale (all zero
 * for bf16), and the slots inside all four (a key whose slot is outside is
 * not visible, spec 2). Rank-4 tensors bring their pages; rank-3 ones read
 * as pages of the call's page_size. Order: k, v, ks, vs. */
typedef struct cache_views {
    qattn_cache_kernel_view t[4];
    int32_t n_slots;
} cache_views;

static cache_views cache_views_of(const qattn_decode_args *a) {
    cache_views r;
    memset(&r, 0, sizeof r);
    const qattn_tensor *t[4] = {&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale};
    const int n = a->k_scale.buffer ? 4 : 2;
    for (int i = 0; i < n; ++i) {
        r.t[i] = qattn_cache_kernel_view_of(t[i], i >= 2, a->page_size);
        if (i == 0 || r.t[i].n_slots < r.n_slots) r.n_slots = r.t[i].n_slots;
    }
    return r;
}

/* The fields decode's stage block and the decode-pattern read's block share,
 * by name: the call's tensors, q's and the paging tensors' strides. */
#define PUT_CALL_FIELDS(d, a, address, k_addr, v_addr)            \
    do {                                                          \
        (d).q = address(&(a)->q);                                 \
        (d).k = (k_addr);                                         \
        (d).v = (v_addr);                                         \
        (d).ks = address(&(a)->k_scale);                          \
        (d).vs = address(&(a)->v_scale);                          \
        (d).indptr = address(&(a)->kv_indptr);                    \
        (d).indices = address(&(a)->kv_indices);                  \
        (d).lens = address(&(a)->kv_lens);                        \
        (d).q_sb = qattn_stride32(&(a)->q, 0);                    \
        (d).q_sr = qattn_stride32(&(a)->q, 1);                    \
        (d).q_sh = qattn_stride32(&(a)->q, 2);                    \
        (d).indptr_s = qattn_stride32(&(a)->kv_indptr, 0);        \
        (d).indices_s = qattn_stride32(&(a)->kv_indices, 0);      \
        (d).lens_s = qattn_stride32(&(a)->kv_lens, 0);            \
        (d).n_indices = (int32_t)(a)->kv_indices.shape[0];        \
        (d).page_size = (a)->page_size;                           \
        (d).window_left = (a)->window_left;                       \
    } while (0)

static qattn_status check_cache_alignment(uint64_t k, uint64_t v, int bytes, const char *op, char *why,
                                          size_t n) {
    if ((k | v) % (uint64_t)bytes == 0) return QATTN_OK;
    return qattn__err(why, n, QATTN_ERR_ALIGNMENT,
                      "k_cache/v_cache: %s reads them in %d-byte loads; their device addresses are not "
                      "that aligned",
                      op, bytes);
}

qattn_status qattn_decode_kernel_args_of(const qattn_decode_plan *plan, const qattn_decode_args *a,
                                         qattn_address_fn address, uint64_t workspace,
                                         qattn_decode_tile_args *tile, qattn_decode_merge_args *merge,
                                         char *why, size_t why_size) {
    const uint64_t k = address(&a->k_cache), v = address(&a->v_cache);
    qattn_status s = check_cache_alignment(k, v, plan->load_bytes, "the plan", why, why_size);
    if (s != QATTN_OK) return s;

    qattn_decode_tile_args t;
    memset(&t, 0, sizeof t);
    PUT_CALL_FIELDS(t, a, address, k, v);
    t.ws_o = workspace ? workspace + plan->partial_o_offset : 0;
    t.ws_ml = workspace ? workspace + plan->partial_ml_offset : 0;
    const cache_views cv = cache_views_of(a);
    int64_t *ps[4] = {&t.k_ps, &t.v_ps, &t.ks_ps, &t.vs_ps}, *hs[4] = {&t.k_hs, &t.v_hs, &t.ks_hs, &t.vs_hs};
    uint32_t *rs[4] = {&t.k_rs, &t.v_rs, &t.ks_rs, &t.vs_rs};
    for (int i = 0; i < 4; ++i) {
        *ps[i] = cv.t[i].page_stride;
        *hs[i] = cv.t[i].head_stride;
        *rs[i] = cv.t[i].row_stride;
    }
    t.n_slots = cv.n_slots;
    t.hq = plan->q_heads;
    t.hkv = plan->kv_heads;
    t.num_splits = plan->num_splits;
    t.keys_per_split = plan->keys_per_split;
    t.sm_scale = a->sm_scale;
    t.softcap = a->logit_softcap;
    t.flags = a->q.dtype == QATTN_F16 ? QATTN_DECODE_TILE_Q_F16 : 0;

    qattn_decode_merge_args m;
    memset(&m, 0, sizeof m);
    m.ws_o = t.ws_o;
    m.ws_ml = t.ws_ml;
    m.sinks = address(&a->sinks);
    m.o = address(&a->o);
    m.lse = address(&a->lse);
    m.o_sb = qattn_stride32(&a->o, 0);
    m.o_sr = qattn_stride32(&a->o, 1);
    m.o_sh = qattn_stride32(&a->o, 2);
    m.lse_sb = qattn_stride32(&a->lse, 0);
    m.lse_sr = qattn_stride32(&a->lse, 1);
    m.lse_sh = qattn_stride32(&a->lse, 2);
    m.sinks_s = qattn_stride32(&a->sinks, 0);
    m.hkv = plan->kv_heads;
    m.R = plan->rows;
    m.QH = plan->q_heads_per_workgroup;
    m.NR = plan->row_slots;
    m.S = plan->num_splits;
    m.D = plan->head_dim_v;
    /* fp8 and int8 stages write each 4 dims in the order their decode
     * produces them: 0, 2, 1, 3 */
    /* The tiled kernels stage dims with positions 1, 2 of each group of four
     * swapped; the register-resident one writes its partials in dim order. */
    m.perm = plan->variant != QATTN_DECODE_REGS && plan->kv_dtype != QATTN_BF16;
    m.flags = (qattn_tensor_present(&a->sinks) ? QATTN_DECODE_MERGE_SINKS : 0) |
              (qattn_tensor_present(&a->lse) ? QATTN_DECODE_MERGE_LSE : 0) |
              (a->o.dtype == QATTN_F16 ? QATTN_DECODE_MERGE_O_F16 : 0);
    /* The staged V values times this are the decoded ones (e4m3: the power
     * of two its f16 bit trick leaves; e5m2's code << 8 is the f16 itself). */
    m.vf = plan->kv_dtype == QATTN_FP8_E4M3FN ? 256.0f : plan->kv_dtype == QATTN_FP8_E4M3FNUZ ? 128.0f : 1.0f;
    *tile = t;
    *merge = m;
    return QATTN_OK;
}

qattn_status qattn_decode_read_args_of(const qattn_decode_args *a, qattn_address_fn address, uint64_t sum,
                                       uint32_t compute_units, uint32_t wg, uint32_t loads,
                                       qattn_decode_read_args *out, uint32_t grid[3], char *why,
                                       size_t why_size) {
    const uint64_t k = address(&a->k_cache), v = address(&a->v_cache);
    qattn_status s = check_cache_alignment(k, v, 16, "decode_read", why, why_size);
    if (s != QATTN_OK) return s;

    qattn_decode_read_args p;
    memset(&p, 0, sizeof p);
    PUT_CALL_FIELDS(p, a, address, k, v);
    p.sum = sum;
    const cache_views cv = cache_views_of(a);
    for (int i = 0; i < 4; ++i) {
        p.page_stride[i] = cv.t[i].page_stride;
        p.head_stride[i] = cv.t[i].head_stride;
        p.row_stride[i] = cv.t[i].row_stride;
    }
    p.n_slots = cv.n_slots;

    const int64_t B = a->q.shape[0], R = a->q.shape[1], Hkv = a->k_cache.shape[a->k_cache.rank - 2];
    const int64_t D = a->q.shape[3], es = (int64_t)qattn_dtype_size(a->k_cache.dtype);
    p.R = (int32_t)R;
    p.G = (int32_t)(a->q.shape[2] / Hkv);
    p.D = (int32_t)D;
    p.es = (int32_t)es;
    p.row_words = (int32_t)(D * es / 16);
    p.scaled = qattn_tensor_present(&a->k_scale);

    /* Splits: enough workgroups for QATTN_READ_GROUPS_PER_CU per compute
     * unit, no more than there are steps of keys in the visible range. */
    const uint64_t cus = compute_units > 0 ? compute_units : QATTN_READ_DEFAULT_CUS;
    const int64_t want = (int64_t)(cus * QATTN_READ_GROUPS_PER_CU), pairs = B * Hkv;
    int64_t keys = a->max_kv_len;
    if (a->window_left >= 0 && keys > (int64_t)a->window_left + R) keys = (int64_t)a->window_left + R;
    const int64_t step = (int64_t)(wg / (uint32_t)p.row_words) * loads;
    int64_t splits = (want + pairs - 1) / pairs;
    const int64_t most = (keys + step - 1) / step;
    if (splits > most) splits = most;
    if (splits < 1) splits = 1;
    int64_t per = (keys + splits - 1) / splits;
    per = (per + step - 1) / step * step;
    p.num_splits = (int32_t)splits;
    p.keys_per_split = (int32_t)(per > 0 ? per : step);
    *out = p;
    grid[0] = (uint32_t)splits;
    grid[1] = (uint32_t)Hkv;
    grid[2] = (uint32_t)B;
    return QATTN_OK;
}

/* Page and row strides of paged MQA's cache (is_scale 0) or scales as
 * kernels take them: a rank-2 cache (rank-1 scales) reads as pages of P
 * slots. With one row per page no row offset is ever formed, so its
 * stride (which may then exceed 32 bits) is passed as 0. */
static void paged_mqa_view(const qattn_tensor *t, int is_scale, int64_t P, int64_t *ps, uint32_t *rs) {
    int64_t page, row;
    qattn__paged_mqa_strides(t, is_scale, P, &page, &row);
    *ps = page;
    *rs = P > 1 ? (uint32_t)row : 0u; /* validation keeps (P - 1) x row below 2^31 */
}

qattn_status qattn_paged_mqa_kernel_args_of(const qattn_paged_mqa_logits_plan *plan,
                                            const qattn_paged_mqa_logits_args *a, qattn_address_fn address,
                                            qattn_paged_mqa_kernel_args *out, char *why, size_t why_size) {
    qattn_paged_mqa_kernel_args p;
    memset(&p, 0, sizeof p);
    p.q = address(&a->q);
    p.k = address(&a->k_cache);
    if (plan->load_bytes == 16 && (p.q % 16 != 0 || p.k % 16 != 0))
        return qattn__err(why, why_size, QATTN_ERR_ALIGNMENT,
                          "q/k_cache: the plan loads them 16 bytes at a time; their device addresses are not "
                          "16-byte aligned");
    p.ks = address(&a->k_scale);
    p.w = address(&a->weights);
    p.indptr = address(&a->kv_indptr);
    p.indices = address(&a->kv_indices);
    p.lens = address(&a->kv_lens);
    p.logits = address(&a->logits);
    paged_mqa_view(&a->k_cache, 0, plan->page_size, &p.k_ps, &p.k_rs);
    paged_mqa_view(&a->k_scale, 1, plan->page_size, &p.ks_ps, &p.ks_rs);
    p.q_sb = qattn_stride32(&a->q, 0);
    p.q_sr = qattn_stride32(&a->q, 1);
    p.q_sh = qattn_stride32(&a->q, 2);
    p.w_sb = qattn_stride32(&a->weights, 0);
    p.w_sr = qattn_stride32(&a->weights, 1);
    p.l_sb = qattn_stride32(&a->logits, 0);
    p.l_sr = qattn_stride32(&a->logits, 1);
    p.n_slots = (int32_t)qattn__paged_mqa_slots(&a->k_cache, 0);
    p.n_indices = (int32_t)a->kv_indices.shape[0];
    p.B = plan->batch;
    p.N = plan->rows;
    p.H = plan->heads;
    p.D = plan->head_dim;
    p.P = plan->page_size;
    p.M = plan->max_kv_len;
    p.num_splits = plan->num_splits;
    p.keys_per_split = plan->keys_per_split;
    p.grid_y = (int32_t)plan->grid[1];
    p.clean = a->clean_logits ? 1 : 0;
    p.kv_tile = plan->kv_tile;
    p.q_staged = plan->q_staged;
    p.load16 = plan->load_bytes == 16;
    p.head_slots = plan->head_slots;
    p.pass_rows = plan->pass_rows;
    p.passes = plan->passes;
    p.key_tiles = plan->key_tiles;
    p.subgroups = plan->subgroups;
    p.fragment_layout = plan->fragment_layout;
    p.q_row_halves = plan->q_row_halves;
    p.q_fnuz = plan->q_dtype == QATTN_FP8_E4M3FNUZ;
    p.k_fnuz = plan->k_dtype == QATTN_FP8_E4M3FNUZ;
    /* the matrix kernels stage codes as f16 of value x 2^-8 (fn) or 2^-7
     * (fnuz): a product of two carries both */
    p.unshift = (p.q_fnuz ? 128.0f : 256.0f) * (p.k_fnuz ? 128.0f : 256.0f);
    *out = p;
    return QATTN_OK;
}
