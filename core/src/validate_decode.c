/* Descriptor rules of decode attention and the KV store (spec section 2).
 * Runs before any plan or launch, so a bad call writes nothing. */
#include <inttypes.h>
#include <math.h>

#include "internal.h"

#define CHECK(expr)                        \
    do {                                   \
        qattn_status s_ = (expr);          \
        if (s_ != QATTN_OK) return s_;     \
    } while (0)

static const uint32_t KV_DTYPES = QATTN_DT(QATTN_BF16) | QATTN_DT(QATTN_FP8_E4M3FN) |
                                  QATTN_DT(QATTN_FP8_E4M3FNUZ) | QATTN_DT(QATTN_FP8_E5M2) |
                                  QATTN_DT(QATTN_I8);
/* q, o, k_new and v_new: the two 16-bit float formats engines run in. */
static const uint32_t HALF_DTYPES = QATTN_DT(QATTN_BF16) | QATTN_DT(QATTN_F16);

/* D and Dv: whole 16-element blocks (one matrix K step, one 32-byte bf16
 * load), at most 256 (the kernels' register and shared-memory budget). */
static int head_dim_ok(int64_t d) { return d >= 16 && d <= 256 && d % 16 == 0; }

static qattn_status shape_eq(const qattn_tensor *t, const char *name, int dim, int64_t want,
                             const char *what, char *err, size_t n) {
    if (t->shape[dim] != want)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: shape[%d] = %" PRId64 " but %s is %" PRId64,
                          name, dim, t->shape[dim], what, want);
    return QATTN_OK;
}

/* A cache (is_scale 0) or scale tensor in either of its forms: cache rank 3
 * [N_slots, Hkv, D] or rank 4 [N_pages, P, Hkv, D]; scales rank 2
 * [N_slots, Hkv] or rank 3 [N_pages, P, Hkv]. Scales may broadcast (stride 0
 * on any dimension, the last included) when `writes` is 0. */
static qattn_status check_kv_tensor(const qattn_tensor *t, const char *name, int is_scale,
                                    int writes, char *err, size_t n) {
    const int32_t flat = is_scale ? 2 : 3;
    if (t->buffer && t->rank != flat && t->rank != flat + 1)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          is_scale ? "%s: rank %d, expected 2 ([N_slots, Hkv]) or 3 ([N_pages, P, Hkv])"
                                   : "%s: rank %d, expected 3 ([N_slots, Hkv, D]) or 4 ([N_pages, P, Hkv, D])",
                          name, (int)t->rank);
    const int32_t rank = t->buffer ? t->rank : flat;
    CHECK(qattn__check_cache_tensor(t, name, is_scale ? QATTN_DT(QATTN_F32) : KV_DTYPES, rank,
                                    is_scale && !writes, err, n));
    if (qattn__cache_is_paged(t, is_scale) && t->shape[1] < 1)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: shape[1] = %" PRId64 " rows per page, must be >= 1",
                          name, t->shape[1]);
    /* The KV store writes every (slot, head) row: no two may share memory. */
    if (writes) CHECK(qattn__check_output_layout(t, name, err, n));
    return QATTN_OK;
}

/* A tensor of the cache in the rank-4 form whose rows per page differ from
 * the call's page size (decode: pages of the page table are pages of the
 * cache). */
static qattn_status check_page_rows(const qattn_tensor *t, const char *name, int is_scale,
                                    int64_t page_size, char *err, size_t n) {
    if (qattn__cache_is_paged(t, is_scale) && t->shape[1] != page_size)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "%s: rank %d with %" PRId64 " rows per page (shape[1]) but page_size is %" PRId64,
                          name, (int)t->rank, t->shape[1], page_size);
    return QATTN_OK;
}

/* Kernels form a page's base (and a kv head's) in 64 bits, once per page,
 * and the offsets inside a page (row x row stride + d) in 32: those must
 * stay below 2^31 for every row a slot inside the cache can have. Pages
 * are the call's page_size slots for a rank-3 tensor in decode, one slot in
 * the KV store (which addresses by slot). */
static qattn_status check_in_page(const qattn_tensor *t, const char *name, int is_scale,
                                  int64_t page_size, char *err, size_t n) {
    if (!qattn_tensor_present(t)) return QATTN_OK;
    const qattn_cache_view v = qattn_cache_view_of(t, is_scale, page_size);
    const int64_t rows = v.page_rows < v.n_slots ? v.page_rows : v.n_slots;
    if (rows < 1) return QATTN_OK;
    /* (rows - 1) x row stride lies inside the validated extent: no overflow */
    const int64_t last = (rows - 1) * v.row_stride + (is_scale ? 0 : qattn__cache_head_dim(t) - 1);
    if (last > INT32_MAX)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "%s: a page of %" PRId64 " rows with row stride %" PRId64 " reaches element %" PRId64
                          " inside the page, over int32 (kernels form page bases in 64 bits and offsets "
                          "inside a page in 32)",
                          name, rows, v.row_stride, last);
    return QATTN_OK;
}

static qattn_status check_in_pages(const qattn_tensor *kc, const qattn_tensor *vc, const qattn_tensor *ks,
                                   const qattn_tensor *vs, int64_t page_size, char *err, size_t n) {
    CHECK(check_in_page(kc, "k_cache", 0, page_size, err, n));
    CHECK(check_in_page(vc, "v_cache", 0, page_size, err, n));
    CHECK(check_in_page(ks, "k_scale", 1, page_size, err, n));
    return check_in_page(vs, "v_scale", 1, page_size, err, n);
}

static qattn_status same_slots(const qattn_tensor *t, const char *name, int is_scale,
                               int64_t want, char *err, size_t n) {
    const int64_t got = qattn__cache_slots(t, is_scale);
    if (got != want)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: %" PRId64 " slots%s but k_cache has %" PRId64, name,
                          got, qattn__cache_is_paged(t, is_scale) ? " (pages x rows)" : "", want);
    return QATTN_OK;
}

static qattn_status same_heads(const qattn_tensor *t, const char *name, int is_scale, int64_t want,
                               char *err, size_t n) {
    const int dim = t->rank - (is_scale ? 1 : 2);
    return shape_eq(t, name, dim, want, "k_cache's kv heads", err, n);
}

/* k/v caches and their scales, shared by decode and the KV store (`writes`:
 * the KV store, whose caches and scales are outputs). */
static qattn_status check_cache(const qattn_tensor *kc, const qattn_tensor *vc,
                                const qattn_tensor *ks, const qattn_tensor *vs, int writes,
                                char *err, size_t n) {
    CHECK(check_kv_tensor(kc, "k_cache", 0, writes, err, n));
    CHECK(check_kv_tensor(vc, "v_cache", 0, writes, err, n));
    if (vc->dtype != kc->dtype)
        return qattn__err(err, n, QATTN_ERR_DTYPE, "v_cache: dtype %s differs from k_cache's %s",
                          qattn_dtype_name(vc->dtype), qattn_dtype_name(kc->dtype));
    const int64_t slots = qattn__cache_slots(kc, 0), Hkv = qattn__cache_heads(kc);
    const int64_t D = qattn__cache_head_dim(kc);
    if (slots > INT32_MAX)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "k_cache: %" PRId64 " slots (pages x rows), over int32 (kernels index slots with int32)",
                          slots);
    CHECK(same_slots(vc, "v_cache", 0, slots, err, n));
    CHECK(same_heads(vc, "v_cache", 0, Hkv, err, n));
    if (Hkv < 1)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "k_cache: needs at least one kv head");
    if (!head_dim_ok(D))
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "k_cache: head dim %" PRId64 " is not a multiple of 16 in [16, 256]", D);
    const int64_t Dv = qattn__cache_head_dim(vc);
    if (!head_dim_ok(Dv))
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "v_cache: head dim %" PRId64 " is not a multiple of 16 in [16, 256]", Dv);
    if (kc->dtype == QATTN_BF16) {
        if (qattn_tensor_present(ks) || qattn_tensor_present(vs))
            return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                              "%s: a bf16 cache has no scales; pass an absent descriptor",
                              qattn_tensor_present(ks) ? "k_scale" : "v_scale");
        return QATTN_OK;
    }
    CHECK(check_kv_tensor(ks, "k_scale", 1, writes, err, n));
    CHECK(check_kv_tensor(vs, "v_scale", 1, writes, err, n));
    CHECK(same_slots(ks, "k_scale", 1, slots, err, n));
    CHECK(same_heads(ks, "k_scale", 1, Hkv, err, n));
    CHECK(same_slots(vs, "v_scale", 1, slots, err, n));
    CHECK(same_heads(vs, "v_scale", 1, Hkv, err, n));
    return QATTN_OK;
}

qattn_status qattn__validate_decode(const qattn_decode_args *a, char *err, size_t n) {
    if (!a) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    const uint32_t F32 = QATTN_DT(QATTN_F32), I32 = QATTN_DT(QATTN_I32);
    CHECK(qattn__check_tensor(&a->q, "q", HALF_DTYPES, 4, err, n));
    const int64_t B = a->q.shape[0], R = a->q.shape[1], Hq = a->q.shape[2];
    if (B < 1) return qattn__err(err, n, QATTN_ERR_SHAPE, "q: batch %" PRId64 " < 1", B);
    if (R < 1 || R > 8)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "q: %" PRId64 " query rows, must be 1..8", R);
    if (Hq < 1) return qattn__err(err, n, QATTN_ERR_SHAPE, "q: %" PRId64 " heads, must be >= 1", Hq);
    CHECK(check_cache(&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale, 0, err, n));
    CHECK(shape_eq(&a->q, "q", 3, qattn__cache_head_dim(&a->k_cache), "k_cache's head dim", err, n));
    const int64_t Hkv = qattn__cache_heads(&a->k_cache);
    if (Hq % Hkv != 0)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "q: %" PRId64 " heads is not a multiple of the %" PRId64 " kv heads", Hq, Hkv);
    CHECK(qattn__check_tensor(&a->kv_indptr, "kv_indptr", I32, 1, err, n));
    CHECK(shape_eq(&a->kv_indptr, "kv_indptr", 0, B + 1, "batch + 1", err, n));
    CHECK(qattn__check_tensor(&a->kv_indices, "kv_indices", I32, 1, err, n));
    CHECK(qattn__check_tensor(&a->kv_lens, "kv_lens", I32, 1, err, n));
    CHECK(shape_eq(&a->kv_lens, "kv_lens", 0, B, "batch", err, n));
    if (qattn_tensor_present(&a->sinks)) {
        CHECK(qattn__check_tensor(&a->sinks, "sinks", F32, 1, err, n));
        CHECK(shape_eq(&a->sinks, "sinks", 0, Hq, "q heads", err, n));
    }
    CHECK(qattn__check_tensor(&a->o, "o", HALF_DTYPES, 4, err, n));
    CHECK(shape_eq(&a->o, "o", 0, B, "batch", err, n));
    CHECK(shape_eq(&a->o, "o", 1, R, "query rows", err, n));
    CHECK(shape_eq(&a->o, "o", 2, Hq, "q heads", err, n));
    CHECK(shape_eq(&a->o, "o", 3, qattn__cache_head_dim(&a->v_cache), "v_cache's head dim", err, n));
    CHECK(qattn__check_output_layout(&a->o, "o", err, n));
    if (qattn_tensor_present(&a->lse)) {
        CHECK(qattn__check_tensor(&a->lse, "lse", F32, 3, err, n));
        CHECK(shape_eq(&a->lse, "lse", 0, B, "batch", err, n));
        CHECK(shape_eq(&a->lse, "lse", 1, R, "query rows", err, n));
        CHECK(shape_eq(&a->lse, "lse", 2, Hq, "q heads", err, n));
        CHECK(qattn__check_output_layout(&a->lse, "lse", err, n));
    }
    if (a->page_size < 1)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "page_size: %d, must be >= 1",
                          (int)a->page_size);
    CHECK(check_page_rows(&a->k_cache, "k_cache", 0, a->page_size, err, n));
    CHECK(check_page_rows(&a->v_cache, "v_cache", 0, a->page_size, err, n));
    if (qattn_tensor_present(&a->k_scale)) {
        CHECK(check_page_rows(&a->k_scale, "k_scale", 1, a->page_size, err, n));
        CHECK(check_page_rows(&a->v_scale, "v_scale", 1, a->page_size, err, n));
    }
    CHECK(check_in_pages(&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale, a->page_size, err, n));
    if (a->max_kv_len < 0)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "max_kv_len: %d, must be >= 0",
                          (int)a->max_kv_len);
    if (a->window_left < -1)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                          "window_left: %d, must be -1 (none) or >= 0", (int)a->window_left);
    if (!isfinite(a->sm_scale))
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "sm_scale: must be finite");
    if (!isfinite(a->logit_softcap) || a->logit_softcap < 0.0f)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                          "logit_softcap: must be finite and >= 0 (0 = off)");
    /* Per-tensor spans are within int32 here, but broadcast operands
     * (stride 0) keep a small span over a huge logical shape. */
    return qattn__check_decode_shapes(a, err, n);
}

qattn_status qattn__check_decode_shapes(const qattn_decode_args *a, char *err, size_t n) {
    if (!a) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    CHECK(qattn__check_dims(&a->q, "q", 4, 4, err, n));
    /* A cache is [N_slots, Hkv, D] or paged [N_pages, P, Hkv, D]. */
    CHECK(qattn__check_cache_dims(&a->k_cache, "k_cache", 3, 4, err, n));
    CHECK(qattn__check_cache_dims(&a->v_cache, "v_cache", 3, 4, err, n));
    const qattn_tensor *const opt[] = {&a->k_scale, &a->v_scale, &a->kv_indptr, &a->kv_indices,
                                       &a->kv_lens, &a->sinks, &a->o, &a->lse};
    const char *const names[] = {"k_scale", "v_scale", "kv_indptr", "kv_indices",
                                 "kv_lens", "sinks", "o", "lse"};
    for (int i = 0; i < 8; ++i)
        if (qattn_tensor_present(opt[i]))
            CHECK((i < 2 ? qattn__check_cache_dims : qattn__check_dims)(opt[i], names[i], 1, 4, err, n));
    /* Element sizes divide and multiply in the planner: a known KV dtype. */
    if (a->k_cache.dtype <= QATTN_DTYPE_INVALID || a->k_cache.dtype >= QATTN_DTYPE_COUNT ||
        !(KV_DTYPES & QATTN_DT(a->k_cache.dtype)) || a->v_cache.dtype != a->k_cache.dtype)
        return qattn__err(err, n, QATTN_ERR_DTYPE,
                          "k_cache/v_cache: dtypes %s/%s, want one of bf16, fp8 (e4m3fn, e4m3fnuz, e5m2), i8",
                          qattn_dtype_name(a->k_cache.dtype), qattn_dtype_name(a->v_cache.dtype));
    const int64_t B = a->q.shape[0], R = a->q.shape[1], Hq = a->q.shape[2], D = a->q.shape[3];
    const int64_t Hkv = a->k_cache.shape[a->k_cache.rank - 2];
    if (B < 1 || R < 1 || Hq < 1)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "q: shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                          "], batch, rows and heads must be >= 1", B, R, Hq, D);
    if (Hkv < 1)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "k_cache: %" PRId64 " kv heads, must be >= 1", Hkv);
    /* Kernels number (request, row, head) triples and their elements in
     * int32. Each factor is <= INT32_MAX, so a product of a value already
     * <= INT32_MAX and one more factor fits int64: check after each. */
    const int64_t Dv = a->v_cache.shape[a->v_cache.rank - 1];
    const int64_t dmax = D > Dv ? D : Dv;
    int64_t rows = B * R;
    if (rows <= INT32_MAX) rows *= Hq;
    if (rows > INT32_MAX || rows * dmax > INT32_MAX)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "q: B x R x Hq x D = %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64
                          " exceeds int32 (kernels index with int32)", B, R, Hq, dmax);
    if (a->page_size < 1)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "page_size: %d, must be >= 1",
                          (int)a->page_size);
    if (a->max_kv_len < 0)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "max_kv_len: %d, must be >= 0",
                          (int)a->max_kv_len);
    return QATTN_OK;
}

qattn_status qattn__validate_kv_store(const qattn_kv_store_args *a, char *err, size_t n) {
    if (!a) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    CHECK(check_cache(&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale, 1, err, n));
    CHECK(qattn__check_tensor(&a->k_new, "k_new", HALF_DTYPES, 3, err, n));
    CHECK(qattn__check_tensor(&a->v_new, "v_new", HALF_DTYPES, 3, err, n));
    if (a->v_new.dtype != a->k_new.dtype)
        return qattn__err(err, n, QATTN_ERR_DTYPE, "v_new: dtype %s differs from k_new's %s",
                          qattn_dtype_name(a->v_new.dtype), qattn_dtype_name(a->k_new.dtype));
    const int64_t T = a->k_new.shape[0];
    const int64_t Hkv = qattn__cache_heads(&a->k_cache), D = qattn__cache_head_dim(&a->k_cache);
    CHECK(shape_eq(&a->k_new, "k_new", 1, Hkv, "k_cache's kv heads", err, n));
    CHECK(shape_eq(&a->k_new, "k_new", 2, D, "k_cache's head dim", err, n));
    CHECK(shape_eq(&a->v_new, "v_new", 0, T, "k_new's token count", err, n));
    CHECK(shape_eq(&a->v_new, "v_new", 1, Hkv, "v_cache's kv heads", err, n));
    CHECK(shape_eq(&a->v_new, "v_new", 2, qattn__cache_head_dim(&a->v_cache), "v_cache's head dim", err, n));
    CHECK(qattn__check_tensor(&a->slot_mapping, "slot_mapping", QATTN_DT(QATTN_I32), 1, err, n));
    CHECK(shape_eq(&a->slot_mapping, "slot_mapping", 0, T, "k_new's token count", err, n));
    CHECK(check_in_pages(&a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale, 1, err, n));
    /* Broadcast new tokens (stride 0) keep a small span over T tokens;
     * kernels number (token, head, dim) in int32. Hkv and D are the
     * cache's, in either form (rank 4 puts P before them). Each factor is
     * <= INT32_MAX, so checking after each product stays within int64. */
    const int64_t heads = T * Hkv, Dv = qattn__cache_head_dim(&a->v_cache), dmax = D > Dv ? D : Dv;
    if (heads > INT32_MAX || heads * dmax > INT32_MAX)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "k_new: T x Hkv x D = %" PRId64 " x %" PRId64 " x %" PRId64
                          " exceeds int32 (kernels index with int32)",
                          T, Hkv, dmax);
    return QATTN_OK;
}
