/* Plan sealing: the digest every planner writes into the plans it returns
 * and every consumer of a plan (the run entry points, the experimental
 * measurement ops) checks before trusting a field. Kept apart from ops.c so
 * planners and run entry points both depend on it and not on each other. */
#include <stddef.h>
#include <string.h>

#include "internal.h"

/* FNV-1a over the bytes, seeded with the plan type's tag and size (so a plan
 * of another layout or op never matches), then a 64-bit finalizer so that
 * nearby plans get unrelated digests. This catches plans edited or
 * corrupted after planning; it is not a defence against a caller forging
 * one on purpose. */
static uint64_t digest(uint64_t tag, const void *bytes, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ tag ^ ((uint64_t)n << 32);
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; ++i) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

#define DECODE_TAG 0x71617474656e6431ull /* "qattend1" */
#define MQA_TAG 0x716174746d716131ull    /* "qattmqa1" */
#define PAGED_MQA_TAG 0x716174747061676dull /* "qattpagm" */

static uint64_t decode_digest(const qattn_decode_plan *p) {
    return digest(DECODE_TAG, p, offsetof(qattn_decode_plan, integrity));
}

static uint64_t mqa_digest(const qattn_mqa_logits_plan *p) {
    return digest(MQA_TAG, p, offsetof(qattn_mqa_logits_plan, integrity));
}

static uint64_t paged_mqa_digest(const qattn_paged_mqa_logits_plan *p) {
    return digest(PAGED_MQA_TAG, p, offsetof(qattn_paged_mqa_logits_plan, integrity));
}

/* The digest covers every byte before it only if it is the last member. */
_Static_assert(offsetof(qattn_paged_mqa_logits_plan, integrity) + sizeof(uint64_t) ==
                   sizeof(qattn_paged_mqa_logits_plan),
               "qattn_paged_mqa_logits_plan.integrity must be the last member");
_Static_assert(offsetof(qattn_decode_plan, integrity) + sizeof(uint64_t) == sizeof(qattn_decode_plan),
               "qattn_decode_plan.integrity must be the last member");
_Static_assert(offsetof(qattn_mqa_logits_plan, integrity) + sizeof(uint64_t) ==
                   sizeof(qattn_mqa_logits_plan),
               "qattn_mqa_logits_plan.integrity must be the last member");

/* Folds what a planner may read of a tensor into h: whether it is there,
 * dtype, rank, shape, strides and the offset's alignment (not the buffer
 * or the offset itself: a plan is made once per shape and layout and runs
 * on any buffers of that layout). */
static uint64_t fold_tensor(uint64_t h, const qattn_tensor *t) {
    int64_t w[3 + 2 * QATTN_MAX_RANK];
    memset(w, 0, sizeof w);
    w[0] = t->buffer != NULL;
    w[1] = t->dtype;
    w[2] = t->rank;
    for (int32_t i = 0; i < t->rank && i < QATTN_MAX_RANK; ++i) {
        w[3 + i] = t->shape[i];
        w[3 + QATTN_MAX_RANK + i] = t->strides[i];
    }
    w[1] |= (int64_t)(t->offset % 16u) << 32;
    return digest(h, w, sizeof w);
}

uint64_t qattn__decode_args_layout(const qattn_decode_args *a) {
    /* Not the page table (kv_indptr, kv_indices, kv_lens): its length
     * changes every step while the plan stays valid. */
    const qattn_tensor *ts[] = {&a->q, &a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale,
                                &a->sinks, &a->o, &a->lse};
    uint64_t h = DECODE_TAG ^ (uint64_t)(uint32_t)a->page_size;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; ++i) h = fold_tensor(h, ts[i]);
    return h;
}

uint64_t qattn__mqa_args_layout(const qattn_mqa_logits_args *a) {
    const qattn_tensor *ts[] = {&a->q, &a->k, &a->k_scale, &a->weights, &a->ks, &a->ke, &a->logits};
    uint64_t h = MQA_TAG;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; ++i) h = fold_tensor(h, ts[i]);
    return h;
}

void qattn__seal_decode_plan(qattn_decode_plan *out, const qattn_decode_plan *p,
                             const qattn_decode_args *a) {
    /* memmove, not assignment: every byte the digest covers is copied. */
    memmove(out, p, sizeof *out);
    out->max_kv_len = a->max_kv_len;
    out->args_layout = qattn__decode_args_layout(a);
    out->integrity = decode_digest(out);
}

void qattn__seal_mqa_logits_plan(qattn_mqa_logits_plan *out, const qattn_mqa_logits_plan *p,
                                 const qattn_mqa_logits_args *a) {
    memmove(out, p, sizeof *out);
    out->args_layout = qattn__mqa_args_layout(a);
    out->integrity = mqa_digest(out);
}

/* QATTN_OK when a plan's stored digest is the one of its bytes; otherwise
 * the failure names the op's planners. */
static qattn_status sealed(qattn_context *ctx, uint64_t stored, uint64_t computed, const char *op) {
    if (stored == computed) return QATTN_OK;
    return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                       "plan: its bytes changed after planning (integrity digest differs); "
                       "make plans only with qattn_%s_plan_create or _compute", op);
}

qattn_status qattn__check_decode_sealed(qattn_context *ctx, const qattn_decode_plan *p) {
    return sealed(ctx, p->integrity, decode_digest(p), "decode");
}

qattn_status qattn__check_mqa_sealed(qattn_context *ctx, const qattn_mqa_logits_plan *p) {
    return sealed(ctx, p->integrity, mqa_digest(p), "mqa_logits");
}

uint64_t qattn__paged_mqa_args_layout(const qattn_paged_mqa_logits_args *a) {
    /* Not the page table: its length changes every step. */
    const qattn_tensor *ts[] = {&a->q, &a->k_cache, &a->k_scale, &a->weights, &a->logits};
    uint64_t h = PAGED_MQA_TAG ^ (uint64_t)(uint32_t)a->page_size ^ ((uint64_t)(uint32_t)a->max_kv_len << 32);
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; ++i) h = fold_tensor(h, ts[i]);
    return h;
}

void qattn__seal_paged_mqa_logits_plan(qattn_paged_mqa_logits_plan *out, const qattn_paged_mqa_logits_plan *p,
                                       const qattn_paged_mqa_logits_args *a) {
    memmove(out, p, sizeof *out);
    out->args_layout = qattn__paged_mqa_args_layout(a);
    out->integrity = paged_mqa_digest(out);
}

qattn_status qattn__check_paged_mqa_sealed(qattn_context *ctx, const qattn_paged_mqa_logits_plan *p) {
    return sealed(ctx, p->integrity, paged_mqa_digest(p), "paged_mqa_logits");
}
