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
 * not shapes: a key whose index is out of range is not visible (spec 2);
 * QATTN_CHECK_INDICES=1 turns such indices into an error before this runs.
 */
#include <stdlib.h>

#include "ref_util.h"

/* Largest head dim the reference keeps on its stack; validation allows only
 * 64, 128 and 256. */
#define REF_MAX_HEAD_DIM 256
#define REF_MAX_GROUP 16 /* query heads handled together per kv head */

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
    /* Keys past the capacity of the request's kv_indices entries do not
     * exist (visible_slots hides the rest). */
    const int64_t begin = qattn__ref_i32(&a->kv_indptr, b);
    int64_t end = qattn__ref_i32(&a->kv_indptr, b + 1);
    if (end > a->kv_indices.shape[0]) end = a->kv_indices.shape[0];
    const int64_t cap = end > begin ? (end - begin) * a->page_size : 0;
    /* nor keys whose entry would precede kv_indices[0] */
    if (begin < 0 && -begin * a->page_size > first) first = -begin * a->page_size;
    *lo = first;
    *hi = t < cap - 1 ? t : cap - 1; /* t < 0 makes the range empty */
}

/* The slots of the visible keys p in [lo, hi] of request b, in key order,
 * into slots (NULL: only count them), at most `cap` of them; returns how
 * many it counted or wrote (spec 2, without
 * the index mode, which ops.c applies before any backend runs): key p
 * exists only where its kv_indices entry kv_indptr[b] + p / P lies in
 * [kv_indptr[b], kv_indptr[b + 1]) and in [0, n_indices), and a page id
 * outside the cache hides it. Walks the entries, so the work is bounded by
 * the table and the keys that exist, whatever kv_lens and page_size claim.
 * The cap keeps the writes inside `slots` even when the table read now
 * differs from the one that sized it (validation refuses outputs over
 * inputs; the reference does not rely on that). */
static int64_t visible_slots(const qattn_decode_args *a, int64_t b, int64_t lo, int64_t hi,
                             int64_t *slots, int64_t cap) {
    const int64_t P = a->page_size, n_pages = a->kv_indices.shape[0];
    const int64_t n_slots = qattn__cache_slots(&a->k_cache, 0);
    const int64_t begin = qattn__ref_i32(&a->kv_indptr, b);
    int64_t end = qattn__ref_i32(&a->kv_indptr, b + 1);
    if (end > n_pages) end = n_pages;
    if (hi < lo || end <= begin) return 0;
    int64_t e0 = begin + lo / P, e1 = begin + hi / P;
    if (e0 < 0) e0 = 0;
    if (e1 > end - 1) e1 = end - 1;
    int64_t n = 0;
    for (int64_t e = e0; e <= e1; ++e) {
        const int64_t page = qattn__ref_i32(&a->kv_indices, e);
        if (page < 0 || page * P >= n_slots) continue;
        const int64_t base = (e - begin) * P;
        int64_t r0 = lo - base > 0 ? lo - base : 0, r1 = hi - base < P - 1 ? hi - base : P - 1;
        if (r1 > n_slots - page * P - 1) r1 = n_slots - page * P - 1;
        for (int64_t row = r0; row <= r1 && n < cap; ++row, ++n)
            if (slots) slots[n] = page * P + row;
    }
    return n;
}

/* A cache and its scales with their views (internal.h), for pages of the
 * call's page size. */
typedef struct kv_side {
    const qattn_tensor *cache, *scale;
    qattn_cache_view cv, sv;
} kv_side;

static kv_side side_of(const qattn_tensor *cache, const qattn_tensor *scale, int64_t page_size) {
    kv_side k;
    memset(&k, 0, sizeof k);
    k.cache = cache;
    k.scale = scale;
    k.cv = qattn_cache_view_of(cache, 0, page_size);
    if (qattn_tensor_present(scale)) k.sv = qattn_cache_view_of(scale, 1, page_size);
    return k;
}

/* K̂ or V̂ element: decode(code) * scale (bf16: the value itself). */
static double kv_value(const kv_side *k, int64_t slot, int64_t g, int64_t d) {
    double v = qattn__ref_decode_elem(qattn__ref_cache_at(k->cache, &k->cv, slot, g, d), k->cache->dtype);
    if (k->cache->dtype == QATTN_BF16) return v;
    float sc;
    memcpy(&sc, qattn__ref_cache_at(k->scale, &k->sv, slot, g, 0), sizeof sc);
    return v * (double)sc;
}

/* s_p: sm_scale * q . K̂, then the optional softcap. */
/* The softcapped, scaled score of q against one decoded K row. */
static double score(const qattn_decode_args *a, const double *q, const double *krow) {
    const int64_t D = qattn__cache_head_dim(&a->k_cache);
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d) dot += q[d] * krow[d];
    double s = (double)a->sm_scale * dot;
    if (a->logit_softcap > 0.0f) {
        double cap = (double)a->logit_softcap;
        s = cap * tanh(s / cap);
    }
    return s;
}

qattn_status qattn__ref_decode(const qattn_decode_args *a) {
    const int64_t B = a->q.shape[0], R = a->q.shape[1], Hq = a->q.shape[2];
    const int64_t D = qattn__cache_head_dim(&a->k_cache), Dv = qattn__cache_head_dim(&a->v_cache);
    const int64_t Hkv = qattn__cache_heads(&a->k_cache);
    const kv_side ks = side_of(&a->k_cache, &a->k_scale, a->page_size);
    const kv_side vs = side_of(&a->v_cache, &a->v_scale, a->page_size);
    const int64_t group = Hq / Hkv; /* query heads per kv head */
    const int has_sinks = qattn_tensor_present(&a->sinks);
    const int has_lse = qattn_tensor_present(&a->lse);
    if (D > REF_MAX_HEAD_DIM || Dv > REF_MAX_HEAD_DIM) return QATTN_ERR_UNSUPPORTED;

    /* Per (request, row, kv head): every key's K and V row is decoded once
     * and used by all `group` query heads; each head's sums still run over
     * the keys in order, exactly as a per-head loop would. */
    int64_t max_keys = 0;
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t r = 0; r < R; ++r) {
            int64_t lo, hi;
            visible_range(a, b, r, &lo, &hi);
            const int64_t n = visible_slots(a, b, lo, hi, NULL, INT64_MAX);
            if (n > max_keys) max_keys = n;
        }
    }
    const int64_t nk = max_keys > 0 ? max_keys : 1;
    double *scores = malloc((size_t)(group * nk) * sizeof *scores);
    int64_t *slots = malloc((size_t)nk * sizeof *slots);
    double *qs = malloc((size_t)(group * D) * sizeof *qs);
    double *acc = malloc((size_t)(group * Dv) * sizeof *acc);
    if (!scores || !slots || !qs || !acc) {
        free(slots);
        free(scores);
        free(qs);
        free(acc);
        return QATTN_ERR_OUT_OF_MEMORY;
    }
    double row[REF_MAX_HEAD_DIM], m[REF_MAX_GROUP], z[REF_MAX_GROUP], sink[REF_MAX_GROUP];
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t r = 0; r < R; ++r) {
            int64_t lo, hi;
            visible_range(a, b, r, &lo, &hi);
            const int64_t visible = visible_slots(a, b, lo, hi, slots, nk);
            for (int64_t g = 0; g < Hkv; ++g) {
                for (int64_t h0 = 0; h0 < group; h0 += REF_MAX_GROUP) {
                    const int64_t nh = group - h0 < REF_MAX_GROUP ? group - h0 : REF_MAX_GROUP;
                    for (int64_t i = 0; i < nh; ++i) {
                        const int64_t h = g * group + h0 + i;
                        for (int64_t d = 0; d < D; ++d)
                            qs[i * D + d] =
                                qattn__ref_decode_elem(qattn__ref_at(&a->q, b, r, h, d), a->q.dtype);
                        sink[i] = has_sinks ? (double)qattn__ref_f32(&a->sinks, h, 0, 0, 0) : 0.0;
                        m[i] = has_sinks ? sink[i] : -INFINITY;
                    }
                    /* Pass 1: scores, and m over the visible scores and the sink. */
                    for (int64_t k = 0; k < visible; ++k) {
                        for (int64_t d = 0; d < D; ++d) row[d] = kv_value(&ks, slots[k], g, d);
                        for (int64_t i = 0; i < nh; ++i) {
                            double s = score(a, qs + i * D, row);
                            scores[i * nk + k] = s;
                            if (s > m[i]) m[i] = s;
                        }
                    }
                    /* Pass 2: Z and the unnormalised output. */
                    for (int64_t i = 0; i < nh; ++i) {
                        z[i] = has_sinks ? exp(sink[i] - m[i]) : 0.0;
                        for (int64_t d = 0; d < Dv; ++d) acc[i * Dv + d] = 0.0;
                    }
                    for (int64_t k = 0; k < visible; ++k) {
                        for (int64_t d = 0; d < Dv; ++d) row[d] = kv_value(&vs, slots[k], g, d);
                        for (int64_t i = 0; i < nh; ++i) {
                            double w = exp(scores[i * nk + k] - m[i]);
                            z[i] += w;
                            for (int64_t d = 0; d < Dv; ++d) acc[i * Dv + d] += w * row[d];
                        }
                    }
                    /* No visible key: o = 0 and lse = -inf, or lse = sink when
                     * a sink is given (then m = sink and Z = 1, so the general
                     * formula gives the same). */
                    const int empty = visible == 0;
                    for (int64_t i = 0; i < nh; ++i) {
                        const int64_t h = g * group + h0 + i;
                        for (int64_t d = 0; d < Dv; ++d) {
                            double o = empty ? 0.0 : acc[i * Dv + d] / z[i];
                            uint16_t bits = qattn__ref_f64_to_half(o, a->o.dtype);
                            memcpy(qattn__ref_at(&a->o, b, r, h, d), &bits, sizeof bits);
                        }
                        if (has_lse) {
                            double lse = empty ? (has_sinks ? sink[i] : -INFINITY) : m[i] + log(z[i]);
                            qattn__ref_put_f32(&a->lse, b, r, h, 0, (float)lse);
                        }
                    }
                }
            }
        }
    }
    free(slots);
    free(scores);
    free(qs);
    free(acc);
    return QATTN_OK;
}

/* qattn_decode_read on the cpu backend (qattn/experimental.h): the word sum
 * of what decode reads, the union over rows of the visible keys, through
 * visible_slots as the reference decode reaches them. */
static uint32_t words_of(const void *p, int64_t bytes) {
    uint32_t s = 0, w;
    for (int64_t i = 0; i + 4 <= bytes; i += 4) {
        memcpy(&w, (const char *)p + i, 4);
        s += w;
    }
    return s;
}

qattn_status qattn__ref_decode_read(const qattn_decode_args *a, uint32_t *sum) {
    const int64_t B = a->q.shape[0], R = a->q.shape[1], Hq = a->q.shape[2], D = a->q.shape[3];
    const int64_t Hkv = qattn__cache_heads(&a->k_cache);
    const int64_t row = D * (int64_t)qattn_dtype_size(a->k_cache.dtype);
    const kv_side ks = side_of(&a->k_cache, &a->k_scale, a->page_size);
    const kv_side vs = side_of(&a->v_cache, &a->v_scale, a->page_size);
    const int scaled = qattn_tensor_present(&a->k_scale);
    uint32_t s = 0;
    for (int64_t b = 0; b < B; ++b) {
        /* rows 0 and R - 1 bound the union of the rows' visible ranges */
        int64_t lo, hi, lo_last, hi_last;
        visible_range(a, b, 0, &lo, &hi);
        visible_range(a, b, R - 1, &lo_last, &hi_last);
        const int64_t n = visible_slots(a, b, lo, hi_last, NULL, INT64_MAX);
        int64_t *slots = malloc((size_t)(n > 0 ? n : 1) * sizeof *slots);
        if (!slots) return QATTN_ERR_OUT_OF_MEMORY;
        visible_slots(a, b, lo, hi_last, slots, n);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t g = 0; g < Hkv; ++g) {
                s += words_of(qattn__ref_cache_at(ks.cache, &ks.cv, slots[i], g, 0), row);
                s += words_of(qattn__ref_cache_at(vs.cache, &vs.cv, slots[i], g, 0), row);
                if (scaled)
                    s += words_of(qattn__ref_cache_at(ks.scale, &ks.sv, slots[i], g, 0), 4) +
                         words_of(qattn__ref_cache_at(vs.scale, &vs.sv, slots[i], g, 0), 4);
            }
        free(slots);
        for (int64_t r = 0; r < R; ++r)
            for (int64_t h = 0; h < Hq; ++h)
                for (int64_t d = 0; d < D; ++d) s += qattn__ref_u16(qattn__ref_at(&a->q, b, r, h, d));
    }
    *sum += s;
    return QATTN_OK;
}
