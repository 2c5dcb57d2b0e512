/* Descriptor rules of paged FP8 MQA logits (spec section 5). Runs before
 * any plan or launch, so a bad call writes nothing. */
#include <inttypes.h>

#include "internal.h"

#define CHECK(expr)                        \
    do {                                   \
        qattn_status s_ = (expr);          \
        if (s_ != QATTN_OK) return s_;     \
    } while (0)

/* The rule "dimension `dim` of `name` equals `what`" (QATTN_ERR_SHAPE
 * naming both). */
static qattn_status dim_is(const qattn_tensor *t, const char *name, int dim, int64_t want, const char *what,
                           char *err, size_t n) {
    if (t->shape[dim] != want)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: shape[%d] = %" PRId64 " but %s is %" PRId64, name, dim,
                          t->shape[dim], what, want);
    return QATTN_OK;
}

static qattn_status check_scalars(const qattn_paged_mqa_logits_args *a, char *err, size_t n) {
    if (a->page_size < 1)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "page_size: %d, must be >= 1",
                          (int)a->page_size);
    if (a->max_kv_len < 1)
        return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT,
                          "max_kv_len: %d, must be >= 1 (the logits' column count)", (int)a->max_kv_len);
    return QATTN_OK;
}

/* The cache in its two forms: rank 2 [N_slots, D] or rank 3
 * [N_pages, P, D] with P = page_size; its scales rank 1 [N_slots] or rank 2
 * [N_pages, P]. */
static qattn_status check_cache_form(const qattn_tensor *t, const char *name, int is_scale,
                                     int32_t page_size, char *err, size_t n) {
    const int32_t flat = is_scale ? 1 : 2;
    if (t->rank == flat + 1 && t->shape[1] != page_size)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "%s: rank %d with %" PRId64 " rows per page (shape[1]) but page_size is %d",
                          name, (int)t->rank, t->shape[1], (int)page_size);
    return QATTN_OK;
}

/* Kernels form a page's base in 64 bits and the offset of a key row (and
 * of its last element, `last` elements in) inside the page in 32: that
 * offset must stay below 2^31 for every row a slot can have. */
static qattn_status check_in_page(const qattn_tensor *t, const char *name, int is_scale, int32_t page_size,
                                  int64_t elems, char *err, size_t n) {
    int64_t page, row;
    qattn__paged_mqa_strides(t, is_scale, page_size, &page, &row);
    const int64_t slots = qattn__paged_mqa_slots(t, is_scale);
    const int64_t rows = page_size < slots ? page_size : slots;
    if (rows < 1) return QATTN_OK;
    if (row > 0 && (rows - 1 > (INT32_MAX - (elems - 1)) / row))
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "%s: a page of %" PRId64 " rows with row stride %" PRId64
                          " reaches past element 2^31 inside the page (kernels form page bases in 64 bits and "
                          "offsets inside a page in 32)",
                          name, rows, row);
    return QATTN_OK;
}

qattn_status qattn__validate_paged_mqa_logits(const qattn_paged_mqa_logits_args *a, char *err, size_t n) {
    if (!a) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    const uint32_t FP8 = QATTN_DT(QATTN_FP8_E4M3FN) | QATTN_DT(QATTN_FP8_E4M3FNUZ);
    const uint32_t F32 = QATTN_DT(QATTN_F32), I32 = QATTN_DT(QATTN_I32);
    CHECK(qattn__check_tensor(&a->q, "q", FP8, 4, err, n));
    const int64_t B = a->q.shape[0], N = a->q.shape[1], H = a->q.shape[2], D = a->q.shape[3];
    if (B < 1) return qattn__err(err, n, QATTN_ERR_SHAPE, "q: batch %" PRId64 " < 1", B);
    if (N < 1 || N > 8)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "q: %" PRId64 " rows per request, must be 1..8", N);
    if (H < 1) return qattn__err(err, n, QATTN_ERR_SHAPE, "q: %" PRId64 " heads, must be >= 1", H);
    if (D != 64 && D != 128 && D != 256 && D != 512)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "q: head dim %" PRId64 " not in {64, 128, 256, 512}", D);
    CHECK(check_scalars(a, err, n)); /* before the cache forms and logits compare with them */
    if (a->k_cache.buffer && a->k_cache.rank != 2 && a->k_cache.rank != 3)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "k_cache: rank %d, expected 2 ([N_slots, D]) or 3 ([N_pages, P, D])",
                          (int)a->k_cache.rank);
    /* The cache and its scales may span any number of elements (kernels
     * form a page's base in 64 bits); the offsets inside a page stay below
     * 2^31 (check_in_page). */
    CHECK(qattn__check_cache_tensor(&a->k_cache, "k_cache", FP8, a->k_cache.buffer ? a->k_cache.rank : 2, 0,
                                    err, n));
    CHECK(dim_is(&a->k_cache, "k_cache", a->k_cache.rank - 1, D, "q's head dim", err, n));
    CHECK(check_cache_form(&a->k_cache, "k_cache", 0, a->page_size, err, n));
    if (a->k_scale.buffer && a->k_scale.rank != 1 && a->k_scale.rank != 2)
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "k_scale: rank %d, expected 1 ([N_slots]) or 2 ([N_pages, P])",
                          (int)a->k_scale.rank);
    {
        /* Scales have free strides on every dimension (a fused layout puts a
         * slot's scale after its codes): checked as a view with a trailing
         * contiguous dimension of one element. */
        qattn_tensor sv = a->k_scale;
        const int32_t r = sv.buffer ? sv.rank : 1;
        if (r >= 1 && r < QATTN_MAX_RANK) {
            sv.rank = r + 1;
            sv.shape[r] = 1;
            sv.strides[r] = 1;
        }
        CHECK(qattn__check_cache_tensor(&sv, "k_scale", F32, r + 1, 0, err, n));
    }
    CHECK(check_cache_form(&a->k_scale, "k_scale", 1, a->page_size, err, n));
    const int64_t slots = qattn__paged_mqa_slots(&a->k_cache, 0);
    if (slots > INT32_MAX)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "k_cache: %" PRId64 " slots, over int32 (kernels index slots with int32)", slots);
    if (qattn__paged_mqa_slots(&a->k_scale, 1) != slots)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "k_scale: %" PRId64 " slots but k_cache has %" PRId64,
                          qattn__paged_mqa_slots(&a->k_scale, 1), slots);
    CHECK(check_in_page(&a->k_cache, "k_cache", 0, a->page_size, D, err, n));
    CHECK(check_in_page(&a->k_scale, "k_scale", 1, a->page_size, 1, err, n));
    CHECK(qattn__check_tensor(&a->weights, "weights", F32, 3, err, n));
    CHECK(dim_is(&a->weights, "weights", 0, B, "batch", err, n));
    CHECK(dim_is(&a->weights, "weights", 1, N, "q's rows per request", err, n));
    CHECK(dim_is(&a->weights, "weights", 2, H, "q heads", err, n));
    CHECK(qattn__check_tensor(&a->kv_indptr, "kv_indptr", I32, 1, err, n));
    CHECK(dim_is(&a->kv_indptr, "kv_indptr", 0, B + 1, "batch + 1", err, n));
    CHECK(qattn__check_tensor(&a->kv_indices, "kv_indices", I32, 1, err, n));
    CHECK(qattn__check_tensor(&a->kv_lens, "kv_lens", I32, 1, err, n));
    CHECK(dim_is(&a->kv_lens, "kv_lens", 0, B, "batch", err, n));
    CHECK(qattn__check_tensor(&a->logits, "logits", F32, 3, err, n));
    CHECK(dim_is(&a->logits, "logits", 0, B, "batch", err, n));
    CHECK(dim_is(&a->logits, "logits", 1, N, "q's rows per request", err, n));
    CHECK(dim_is(&a->logits, "logits", 2, a->max_kv_len, "max_kv_len", err, n));
    /* rows (and requests) may not overwrite each other: a row stride below
     * max_kv_len, or a batch stride below N row strides, is refused */
    CHECK(qattn__check_output_layout(&a->logits, "logits", err, n));
    return qattn__check_paged_mqa_logits_shapes(a, err, n);
}

qattn_status qattn__check_paged_mqa_logits_shapes(const qattn_paged_mqa_logits_args *a, char *err,
                                                  size_t n) {
    if (!a) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    CHECK(qattn__check_dims(&a->q, "q", 4, 4, err, n));
    CHECK(qattn__check_cache_dims(&a->k_cache, "k_cache", 2, 3, err, n));
    CHECK(qattn__check_dims(&a->weights, "weights", 3, 3, err, n));
    /* The planner reads these for the layout digest only; a caller of the
     * pure planner may leave them zeroed (rank 0). */
    CHECK(qattn__check_cache_dims(&a->k_scale, "k_scale", 0, 3, err, n));
    const qattn_tensor *const aux[] = {&a->kv_indptr, &a->kv_indices, &a->kv_lens, &a->logits};
    const char *const names[] = {"kv_indptr", "kv_indices", "kv_lens", "logits"};
    for (int i = 0; i < 4; ++i)
        CHECK(qattn__check_dims(aux[i], names[i], 0, 3, err, n));
    CHECK(check_scalars(a, err, n));
    /* Kernels number (request, row, head) triples and q's bytes in int32. */
    const int64_t B = a->q.shape[0], N = a->q.shape[1], H = a->q.shape[2], D = a->q.shape[3];
    int64_t rows = B * N;
    if (rows <= INT32_MAX) rows *= H;
    if (rows > INT32_MAX || rows * D > INT32_MAX)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "q: B x N x H x D = %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64
                          " exceeds int32 (kernels index with int32)", B, N, H, D);
    return QATTN_OK;
}
