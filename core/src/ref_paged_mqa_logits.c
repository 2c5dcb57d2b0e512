/*
 * CPU reference of paged FP8 MQA logits (spec section 5), on host memory.
 *
 * For request b with L = kv_lens[b] keys and N rows, row t sees positions
 * 0 <= p <= L - N + t below max_kv_len, and a position exists only where
 * the page table gives it a slot inside the cache, exactly as decode reads
 * its cache (spec 2): its entry kv_indptr[b] + p / P lies in
 * [kv_indptr[b], kv_indptr[b + 1]) and in [0, n_indices), and the slot
 * kv_indices[entry] * P + p % P lies in [0, N_slots). The logit of a visible
 * position is sum_h weights[b, t, h] * max(0, k_scale[slot] * q . k[slot]),
 * dot products and the head sum in f64 (fp8 products are exact there),
 * rounded once to f32. Every other column is -inf with clean_logits and
 * left untouched without. QATTN_CHECK_INDICES=1 turns bad indices into an
 * error before this runs.
 */
#include <stdlib.h>

#include "ref_util.h"

#define REF_MAX_DIM 512 /* the validator allows D <= 512 */

/* Address of (slot's row, element d) of the cache (is_scale 0, d = dim) or
 * of a slot's scale (is_scale 1, d = 0). */
static const char *slot_at(const qattn_tensor *t, int is_scale, int64_t P, int64_t slot, int64_t d) {
    int64_t page, row;
    qattn__paged_mqa_strides(t, is_scale, P, &page, &row);
    const int64_t e = slot / P * page + slot % P * row + d;
    return (const char *)qattn__host_ptr(t) + e * (int64_t)qattn_dtype_size(t->dtype);
}

/* The slot of position p of request b, or -1 when p has none (spec 2). */
static int64_t slot_of(const qattn_paged_mqa_logits_args *a, int64_t b, int64_t p) {
    const int64_t P = a->page_size, n_idx = a->kv_indices.shape[0];
    const int64_t begin = qattn__ref_i32(&a->kv_indptr, b), end = qattn__ref_i32(&a->kv_indptr, b + 1);
    const int64_t e = begin + p / P;
    if (e < begin || e >= end || e < 0 || e >= n_idx) return -1;
    const int64_t page = qattn__ref_i32(&a->kv_indices, e);
    const int64_t slot = page * P + p % P;
    if (page < 0 || slot >= qattn__paged_mqa_slots(&a->k_cache, 0)) return -1;
    return slot;
}

qattn_status qattn__ref_paged_mqa_logits(const qattn_paged_mqa_logits_args *a) {
    const int64_t B = a->q.shape[0], N = a->q.shape[1], H = a->q.shape[2], D = a->q.shape[3];
    const int64_t P = a->page_size, M = a->max_kv_len;
    const qattn_dtype qt = a->q.dtype, kt = a->k_cache.dtype;
    if (D > REF_MAX_DIM) return QATTN_ERR_UNSUPPORTED;
    double *qrow = malloc((size_t)(H * D) * sizeof *qrow);
    if (!qrow) return QATTN_ERR_OUT_OF_MEMORY;
    double krow[REF_MAX_DIM];

    for (int64_t b = 0; b < B; ++b) {
        const int64_t L = qattn__ref_i32(&a->kv_lens, b);
        for (int64_t t = 0; t < N; ++t) {
            const int64_t last = L - N + t; /* the row's own position */
            for (int64_t h = 0; h < H; ++h)
                for (int64_t d = 0; d < D; ++d)
                    qrow[h * D + d] = qattn__ref_decode_elem(qattn__ref_at(&a->q, b, t, h, d), qt);
            for (int64_t p = 0; p < M; ++p) {
                const int64_t slot = p <= last ? slot_of(a, b, p) : -1;
                if (slot < 0) {
                    if (a->clean_logits) qattn__ref_put_f32(&a->logits, b, t, p, 0, -INFINITY);
                    continue;
                }
                for (int64_t d = 0; d < D; ++d)
                    krow[d] = qattn__ref_decode_elem(slot_at(&a->k_cache, 0, P, slot, d), kt);
                float sc;
                memcpy(&sc, slot_at(&a->k_scale, 1, P, slot, 0), sizeof sc);
                double sum = 0.0;
                for (int64_t h = 0; h < H; ++h) {
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; ++d) dot += qrow[h * D + d] * krow[d];
                    double act = (double)sc * dot;
                    if (act < 0.0) act = 0.0;
                    sum += (double)qattn__ref_f32(&a->weights, b, t, h, 0) * act;
                }
                qattn__ref_put_f32(&a->logits, b, t, p, 0, (float)sum);
            }
        }
    }
    free(qrow);
    return QATTN_OK;
}
