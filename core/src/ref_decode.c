/*
 * CPU reference of decode attention over a paged, quantized KV cache
 * (spec section 2), on host memory.
 *
 * Deliberately the plainest form of the math: for each (request, query row,
 * query head) a first pass over the visible keys finds the max score, a
 * second pass recomputes each score, accumulates exp(s - m) and the weighted
 * values, and the row is normalised at the end. Everything is f64; the only
 * roundings are the final ones to the output dtypes (bf16 RNE for o, f32 for
 * lse). No workspace and no allocation.
 *
 * Every slot this reads is computed from kv_indptr/kv_indices, which are data,
 * not shapes, so a first pass checks each index the second pass will use and
 * returns QATTN_ERR_INDEX_OUT_OF_RANGE (writing nothing) on a bad one.
 */
#include "ref_util.h"

/* Largest head dim the reference keeps on its stack; validation allows only
 * 64, 128 and 256. */
#define REF_MAX_HEAD_DIM 256

/* The slot of key p of request b, or QATTN_ERR_INDEX_OUT_OF_RANGE when the
 * page table or the page id points outside the tensors. */
static qattn_status key_slot(const qattn_decode_args *a, int64_t b, int64_t p, int64_t *slot) {
    const int64_t P = a->page_size;
    const int64_t n_pages = a->kv_indices.shape[0];
    const int64_t n_slots = a->k_cache.shape[0];
    int64_t begin = qattn__ref_i32(&a->kv_indptr, b);
    int64_t end = qattn__ref_i32(&a->kv_indptr, b + 1);
    int64_t pos = begin + p / P; /* entry of kv_indices holding p's page */
    if (begin < 0 || pos >= end || pos >= n_pages) return QATTN_ERR_INDEX_OUT_OF_RANGE;
    int64_t page = qattn__ref_i32(&a->kv_indices, pos);
    if (page < 0) return QATTN_ERR_INDEX_OUT_OF_RANGE;
    int64_t s = page * P + p % P; /* page < 2^31, P < 2^31: no overflow */
    if (s >= n_slots) return QATTN_ERR_INDEX_OUT_OF_RANGE;
    *slot = s;
    return QATTN_OK;
}

/* Visible keys of row r of request b: [*lo, *hi], empty when *lo > *hi.
 * Position t = L_b - R + r; keys 0..t, and with a window only t - window_left
 * onwards. A negative t (fewer keys than rows) sees nothing. */
static void visible_range(const qattn_decode_args *a, int64_t b, int64_t r, int64_t *lo,
                          int64_t *hi) {
    const int64_t R = a->q.shape[1];
    int64_t L = qattn__ref_i32(&a->kv_lens, b);
    int64_t t = L - R + r;
    int64_t first = 0;
    if (a->window_left >= 0 && t - a->window_left > first) first = t - a->window_left;
    *lo = first;
    *hi = t; /* t < 0 makes the range empty */
}

/* K̂ or V̂ element: decode(code) * scale (bf16: the value itself). */
static double kv_value(const qattn_tensor *cache, const qattn_tensor *scale, int64_t slot,
                       int64_t g, int64_t d) {
    double v = qattn__ref_decode_elem(qattn__ref_at(cache, slot, g, d, 0), cache->dtype);
    if (cache->dtype == QATTN_BF16) return v;
    return v * (double)qattn__ref_f32(scale, slot, g, 0, 0);
}

/* s_p: sm_scale * q . K̂, then the optional softcap. */
static double score(const qattn_decode_args *a, const double *q, int64_t slot, int64_t g) {
    const int64_t D = a->k_cache.shape[2];
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d) dot += q[d] * kv_value(&a->k_cache, &a->k_scale, slot, g, d);
    double s = (double)a->sm_scale * dot;
    if (a->logit_softcap > 0.0f) {
        double cap = (double)a->logit_softcap;
        s = cap * tanh(s / cap);
    }
    return s;
}

/* First pass: every index the computation will read is inside the cache. */
static qattn_status check_indices(const qattn_decode_args *a) {
    const int64_t B = a->q.shape[0], R = a->q.shape[1];
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t r = 0; r < R; ++r) {
            int64_t lo, hi, slot;
            visible_range(a, b, r, &lo, &hi);
            for (int64_t p = lo; p <= hi; ++p) {
                qattn_status s = key_slot(a, b, p, &slot);
                if (s != QATTN_OK) return s;
            }
        }
    }
    return QATTN_OK;
}

qattn_status qattn__ref_decode(const qattn_decode_args *a) {
    const int64_t B = a->q.shape[0], R = a->q.shape[1], Hq = a->q.shape[2];
    const int64_t D = a->k_cache.shape[2], Dv = a->v_cache.shape[2];
    const int64_t Hkv = a->k_cache.shape[1];
    const int64_t group = Hq / Hkv; /* query heads per kv head */
    const int has_sinks = qattn_tensor_present(&a->sinks);
    const int has_lse = qattn_tensor_present(&a->lse);
    if (D > REF_MAX_HEAD_DIM || Dv > REF_MAX_HEAD_DIM) return QATTN_ERR_UNSUPPORTED;

    qattn_status st = check_indices(a);
    if (st != QATTN_OK) return st;

    double q[REF_MAX_HEAD_DIM], acc[REF_MAX_HEAD_DIM];
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t r = 0; r < R; ++r) {
            int64_t lo, hi;
            visible_range(a, b, r, &lo, &hi);
            for (int64_t h = 0; h < Hq; ++h) {
                const int64_t g = h / group;
                for (int64_t d = 0; d < D; ++d)
                    q[d] = qattn__ref_decode_elem(qattn__ref_at(&a->q, b, r, h, d), QATTN_BF16);
                const double sink = has_sinks ? (double)qattn__ref_f32(&a->sinks, h, 0, 0, 0) : 0.0;

                /* Pass 1: m over the visible scores and the sink. */
                double m = has_sinks ? sink : -INFINITY;
                for (int64_t p = lo; p <= hi; ++p) {
                    int64_t slot = 0;
                    (void)key_slot(a, b, p, &slot); /* checked above */
                    double s = score(a, q, slot, g);
                    if (s > m) m = s;
                }

                /* Pass 2: Z and the unnormalised output. */
                double z = has_sinks ? exp(sink - m) : 0.0;
                for (int64_t d = 0; d < Dv; ++d) acc[d] = 0.0;
                for (int64_t p = lo; p <= hi; ++p) {
                    int64_t slot = 0;
                    (void)key_slot(a, b, p, &slot);
                    double w = exp(score(a, q, slot, g) - m);
                    z += w;
                    for (int64_t d = 0; d < Dv; ++d)
                        acc[d] += w * kv_value(&a->v_cache, &a->v_scale, slot, g, d);
                }

                /* No visible key: o = 0 and lse = -inf, or lse = sink when
                 * a sink is given (then m = sink and Z = 1, so the general
                 * formula gives the same). */
                const int empty = lo > hi;
                for (int64_t d = 0; d < Dv; ++d) {
                    double o = empty ? 0.0 : acc[d] / z;
                    uint16_t bits = qattn__ref_f64_to_bf16(o);
                    memcpy(qattn__ref_at(&a->o, b, r, h, d), &bits, sizeof bits);
                }
                if (has_lse) {
                    double lse = empty ? (has_sinks ? sink : -INFINITY) : m + log(z);
                    qattn__ref_put_f32(&a->lse, b, r, h, 0, (float)lse);
                }
            }
        }
    }
    return QATTN_OK;
}
