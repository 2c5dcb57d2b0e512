/* Descriptor rules of FP8 MQA logits (spec section 3). */
#include <inttypes.h>

#include "internal.h"

#define CHECK(expr)                        \
    do {                                   \
        qattn_status s_ = (expr);          \
        if (s_ != QATTN_OK) return s_;     \
    } while (0)

static qattn_status dim_is(const qattn_tensor *t, const char *name, int dim, int64_t want,
                           const char *what, char *err, size_t n) {
    if (t->shape[dim] != want)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: shape[%d] = %" PRId64 " but %s is %" PRId64,
                          name, dim, t->shape[dim], what, want);
    return QATTN_OK;
}

qattn_status qattn__validate_mqa_logits(const qattn_mqa_logits_args *a, char *err, size_t n) {
    if (!a) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    const uint32_t FP8 = QATTN_DT(QATTN_FP8_E4M3FN) | QATTN_DT(QATTN_FP8_E4M3FNUZ);
    const uint32_t F32 = QATTN_DT(QATTN_F32), I32 = QATTN_DT(QATTN_I32);
    CHECK(qattn__check_tensor(&a->q, "q", FP8, 3, err, n));
    const int64_t S = a->q.shape[0], H = a->q.shape[1], D = a->q.shape[2];
    if (S < 1) return qattn__err(err, n, QATTN_ERR_SHAPE, "q: %" PRId64 " rows, must be >= 1", S);
    if (H < 1) return qattn__err(err, n, QATTN_ERR_SHAPE, "q: %" PRId64 " heads, must be >= 1", H);
    if (D != 64 && D != 128 && D != 256 && D != 512)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "q: head dim %" PRId64 " not in {64, 128, 256, 512}", D);
    CHECK(qattn__check_tensor(&a->k, "k", FP8, 2, err, n));
    const int64_t Skv = a->k.shape[0];
    if (Skv < 1) return qattn__err(err, n, QATTN_ERR_SHAPE, "k: %" PRId64 " rows, must be >= 1", Skv);
    CHECK(dim_is(&a->k, "k", 1, D, "q's head dim", err, n));
    CHECK(qattn__check_tensor(&a->k_scale, "k_scale", F32, 1, err, n));
    CHECK(dim_is(&a->k_scale, "k_scale", 0, Skv, "S_kv", err, n));
    CHECK(qattn__check_tensor(&a->weights, "weights", F32, 2, err, n));
    CHECK(dim_is(&a->weights, "weights", 0, S, "S (q rows)", err, n));
    CHECK(dim_is(&a->weights, "weights", 1, H, "q heads", err, n));
    CHECK(qattn__check_tensor(&a->ks, "ks", I32, 1, err, n));
    CHECK(dim_is(&a->ks, "ks", 0, S, "S (q rows)", err, n));
    CHECK(qattn__check_tensor(&a->ke, "ke", I32, 1, err, n));
    CHECK(dim_is(&a->ke, "ke", 0, S, "S (q rows)", err, n));
    CHECK(qattn__check_tensor(&a->logits, "logits", F32, 2, err, n));
    CHECK(dim_is(&a->logits, "logits", 0, S, "S (q rows)", err, n));
    CHECK(dim_is(&a->logits, "logits", 1, Skv, "S_kv", err, n));
    if (S > 1 && a->logits.strides[0] < Skv)
        return qattn__err(err, n, QATTN_ERR_STRIDE,
                          "logits: row stride %" PRId64 " is smaller than S_kv %" PRId64,
                          a->logits.strides[0], Skv);
    CHECK(qattn__check_output_layout(&a->logits, "logits", err, n));
    /* Strides on size-1 dimensions were bounded by qattn__check_tensor;
     * the planner's own bounds follow. */
    return qattn__check_mqa_logits_shapes(a, err, n);
}

qattn_status qattn__check_mqa_logits_shapes(const qattn_mqa_logits_args *a, char *err, size_t n) {
    if (!a) return qattn__err(err, n, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    CHECK(qattn__check_dims(&a->q, "q", 3, 3, err, n));
    CHECK(qattn__check_dims(&a->k, "k", 2, 2, err, n));
    CHECK(qattn__check_dims(&a->weights, "weights", 2, 2, err, n));
    /* The planner reads these tensors' row strides (index64); a caller of
     * the pure planner may leave them zeroed (rank 0). */
    const qattn_tensor *const aux[] = {&a->k_scale, &a->ks, &a->ke, &a->logits};
    const char *const names[] = {"k_scale", "ks", "ke", "logits"};
    const int32_t rank[] = {1, 1, 1, 2};
    for (int i = 0; i < 4; ++i)
        CHECK(qattn__check_dims(aux[i], names[i], aux[i]->rank == 0 ? 0 : rank[i], rank[i], err, n));
    return QATTN_OK;
}
