/* Run entry points of the operations: validate the descriptors, check the
 * plan belongs to these arguments and this device, optionally verify
 * indices, then hand over to the backend. Nothing is launched or written
 * unless every check passes. Planners live in plan_*.c. */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- plan integrity --------------------------------------------------------
 * FNV-1a over the bytes, seeded with the plan type's tag and size (so a plan
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

static uint64_t decode_digest(const qattn_decode_plan *p) {
    return digest(DECODE_TAG, p, offsetof(qattn_decode_plan, integrity));
}

static uint64_t mqa_digest(const qattn_mqa_logits_plan *p) {
    return digest(MQA_TAG, p, offsetof(qattn_mqa_logits_plan, integrity));
}

/* The digest covers every byte before it only if it is the last member. */
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

static uint64_t decode_layout(const qattn_decode_args *a) {
    /* Not the page table (kv_indptr, kv_indices, kv_lens): its length
     * changes every step while the plan stays valid. */
    const qattn_tensor *ts[] = {&a->q, &a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale,
                                &a->sinks, &a->o, &a->lse};
    uint64_t h = DECODE_TAG ^ (uint64_t)(uint32_t)a->page_size;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; ++i) h = fold_tensor(h, ts[i]);
    return h;
}

static uint64_t mqa_layout(const qattn_mqa_logits_args *a) {
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
    out->args_layout = decode_layout(a);
    out->integrity = decode_digest(out);
}

void qattn__seal_mqa_logits_plan(qattn_mqa_logits_plan *out, const qattn_mqa_logits_plan *p,
                                 const qattn_mqa_logits_args *a) {
    memmove(out, p, sizeof *out);
    out->args_layout = mqa_layout(a);
    out->integrity = mqa_digest(out);
}

/* QATTN_CHECK_INDICES=1: verify every slot/page index on the host before
 * launching. Off by default because it downloads the index tensors. */
static int check_indices_enabled(void) {
    const char *v = qattn__getenv("QATTN_CHECK_INDICES");
    return v && strcmp(v, "0") != 0;
}

/* Downloads a rank-1 i32 tensor into a dense host array (caller frees). */
static qattn_status fetch_i32(qattn_context *ctx, const qattn_tensor *t, int32_t **out) {
    *out = NULL;
    int64_t n = t->shape[0];
    int32_t *dense = malloc((size_t)(n > 0 ? n : 1) * sizeof *dense);
    if (!dense) return qattn__fail(ctx, QATTN_ERR_OUT_OF_MEMORY, "index check: out of host memory");
    if (n > 0) {
        uint64_t first, end;
        qattn__tensor_extent(t, &first, &end);
        int32_t *raw = malloc((size_t)(end - first));
        if (!raw) {
            free(dense);
            return qattn__fail(ctx, QATTN_ERR_OUT_OF_MEMORY, "index check: out of host memory");
        }
        qattn_status s = ctx->iface->buffer_download(ctx->be, t->buffer->handle, first, raw, end - first);
        if (s != QATTN_OK) {
            free(raw);
            free(dense);
            return qattn__backend_fail(ctx, s, "index check");
        }
        for (int64_t i = 0; i < n; ++i) dense[i] = raw[i * t->strides[0]];
        free(raw);
    }
    *out = dense;
    return QATTN_OK;
}

/* The page table of a paged op (spec 2): B requests, n_slots cache slots,
 * pages of P keys, max_kv_len. */
typedef struct page_table {
    const qattn_tensor *indptr, *indices, *lens;
    int64_t B, n_slots, P, max_kv_len;
} page_table;

static qattn_status check_page_table(qattn_context *ctx, const page_table *a) {
    const int64_t B = a->B, n_pages = a->indices->shape[0];
    const int64_t n_slots = a->n_slots, P = a->P;
    int32_t *indptr = NULL, *lens = NULL, *pages = NULL;
    qattn_status s = fetch_i32(ctx, a->indptr, &indptr);
    if (s == QATTN_OK) s = fetch_i32(ctx, a->lens, &lens);
    if (s == QATTN_OK) s = fetch_i32(ctx, a->indices, &pages);
    for (int64_t b = 0; s == QATTN_OK && b < B; ++b) {
        int64_t lo = indptr[b], hi = indptr[b + 1], L = lens[b];
        if (lo < 0 || hi < lo || hi > n_pages) {
            s = qattn__fail(ctx, QATTN_ERR_INDEX_OUT_OF_RANGE,
                            "kv_indptr: request %" PRId64 " spans pages [%" PRId64 ", %" PRId64
                            ") outside [0, %" PRId64 "]", b, lo, hi, n_pages);
        } else if (L < 0 || L > a->max_kv_len) {
            s = qattn__fail(ctx, QATTN_ERR_INDEX_OUT_OF_RANGE,
                            "kv_lens: request %" PRId64 " has %" PRId64 " keys, outside [0, max_kv_len %d]",
                            b, L, (int)a->max_kv_len);
        } else if ((L + P - 1) / P > hi - lo) {
            s = qattn__fail(ctx, QATTN_ERR_INDEX_OUT_OF_RANGE,
                            "kv_indptr: request %" PRId64 " has %" PRId64 " keys but only %" PRId64
                            " pages of %" PRId64, b, L, hi - lo, P);
        }
        for (int64_t j = 0; s == QATTN_OK && j * P < L; ++j) {
            int64_t used = (L - j * P) < P ? (L - j * P) : P;
            int64_t page = pages[lo + j];
            if (page < 0 || page * P + used > n_slots)
                s = qattn__fail(ctx, QATTN_ERR_INDEX_OUT_OF_RANGE,
                                "kv_indices[%" PRId64 "] = %" PRId64 ": page reaches past the %" PRId64
                                "-slot cache", lo + j, page, n_slots);
        }
    }
    free(indptr);
    free(lens);
    free(pages);
    return s;
}

static qattn_status check_decode_indices(qattn_context *ctx, const qattn_decode_args *a) {
    const page_table t = {&a->kv_indptr, &a->kv_indices, &a->kv_lens, a->q.shape[0],
                          qattn__cache_slots(&a->k_cache, 0), a->page_size, a->max_kv_len};
    return check_page_table(ctx, &t);
}

static qattn_status check_store_indices(qattn_context *ctx, const qattn_kv_store_args *a) {
    int32_t *slots = NULL;
    const int64_t n_slots = qattn__cache_slots(&a->k_cache, 0);
    qattn_status s = fetch_i32(ctx, &a->slot_mapping, &slots);
    for (int64_t t = 0; s == QATTN_OK && t < a->slot_mapping.shape[0]; ++t) {
        if (slots[t] < -1 || slots[t] >= n_slots)
            s = qattn__fail(ctx, QATTN_ERR_INDEX_OUT_OF_RANGE,
                            "slot_mapping[%" PRId64 "] = %d outside [-1, %" PRId64 ")", t, (int)slots[t],
                            n_slots);
    }
    free(slots);
    return s;
}

static qattn_status resolve_workspace(qattn_context *ctx, uint64_t need, qattn_buffer *buf,
                                      uint64_t offset, qattn_workspace *ws) {
    memset(ws, 0, sizeof *ws);
    if (need == 0) return QATTN_OK;
    if (!buf)
        return qattn__fail(ctx, QATTN_ERR_WORKSPACE, "workspace: NULL but the plan needs %" PRIu64 " bytes",
                           need);
    if (buf->owner != ctx)
        return qattn__fail(ctx, QATTN_ERR_WORKSPACE, "workspace: buffer belongs to another context");
    if (offset % 16 != 0)
        return qattn__fail(ctx, QATTN_ERR_ALIGNMENT, "workspace_offset: %" PRIu64 " is not 16-byte aligned",
                           offset);
    if (offset > buf->bytes || need > buf->bytes - offset)
        return qattn__fail(ctx, QATTN_ERR_WORKSPACE,
                           "workspace: %" PRIu64 " bytes from offset %" PRIu64 " exceed the %" PRIu64
                           "-byte buffer", need, offset, buf->bytes);
    ws->buffer = buf;
    ws->offset = offset;
    ws->bytes = need;
    return QATTN_OK;
}

static qattn_status check_owner(qattn_context *ctx, const qattn_tensor *ts, const char *const *names,
                                int n) {
    for (int i = 0; i < n; ++i)
        if (ts[i].buffer && ts[i].buffer->owner != ctx)
            return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "%s: buffer belongs to another context",
                               names[i]);
    return QATTN_OK;
}

/* The checks every planned op shares once its plan matches its args: the
 * plan fits this device, the workspace is there, and the backend has the op
 * and can run this plan. `has_slot` is whether the op's entry point exists. */
static qattn_status check_plan_launch(qattn_context *ctx, qattn_op op, const char *op_name,
                                      const void *plan, const char *variant, uint32_t shared_bytes,
                                      uint64_t workspace_bytes, int has_slot, qattn_buffer *workspace,
                                      uint64_t workspace_offset, qattn_workspace *ws) {
    if (shared_bytes > ctx->caps.max_shared_bytes)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: shared_bytes %u exceed this device's %u (plan made for another device?)",
                           (unsigned)shared_bytes, (unsigned)ctx->caps.max_shared_bytes);
    qattn_status s = resolve_workspace(ctx, workspace_bytes, workspace, workspace_offset, ws);
    if (s != QATTN_OK) return s;
    if (!has_slot)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "%s: the %s backend has no %s op", op_name,
                           ctx->iface->name, op_name);
    if (ctx->iface->supports_op && !ctx->iface->supports_op(ctx->be, op, plan))
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "%s: %s cannot run variant %s", op_name,
                           ctx->caps.arch, variant);
    return QATTN_OK;
}

qattn_status qattn_decode_run(qattn_context *ctx, const qattn_decode_plan *plan,
                              const qattn_decode_args *args, qattn_buffer *workspace,
                              uint64_t workspace_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_decode(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const qattn_tensor ts[] = {args->q, args->k_cache, args->v_cache, args->k_scale, args->v_scale,
                               args->kv_indptr, args->kv_indices, args->kv_lens, args->sinks,
                               args->o, args->lse};
    const char *const names[] = {"q", "k_cache", "v_cache", "k_scale", "v_scale", "kv_indptr",
                                 "kv_indices", "kv_lens", "sinks", "o", "lse"};
    if ((s = check_owner(ctx, ts, names, 11)) != QATTN_OK) return s;
    /* Before any field of the plan is trusted. */
    if (plan->integrity != decode_digest(plan))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: its bytes changed after planning (integrity digest differs); "
                           "make plans only with qattn_decode_plan_create or _compute");
    if (plan->batch != args->q.shape[0] || plan->rows != args->q.shape[1] ||
        plan->q_heads != args->q.shape[2] || plan->head_dim != args->q.shape[3] ||
        plan->kv_heads != qattn__cache_heads(&args->k_cache) ||
        plan->head_dim_v != qattn__cache_head_dim(&args->v_cache) ||
        plan->kv_dtype != args->k_cache.dtype)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: made for B=%d R=%d Hq=%d Hkv=%d D=%d %s, args differ",
                           (int)plan->batch, (int)plan->rows, (int)plan->q_heads, (int)plan->kv_heads,
                           (int)plan->head_dim, qattn_dtype_name(plan->kv_dtype));
    if (plan->args_layout != decode_layout(args))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "args: a dtype, stride, shape or 16-byte alignment of q, the caches, "
                           "scales, sinks, o or lse (or page_size) differs from what the plan was "
                           "made for; plan again");
    if (args->max_kv_len > plan->max_kv_len)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "max_kv_len: %d exceeds the %d the plan was made for (its splits cover "
                           "only that many keys)",
                           (int)args->max_kv_len, (int)plan->max_kv_len);
    if (plan->num_splits < 1 || plan->num_splits > QATTN_MAX_SPLITS)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: num_splits %d outside 1..%d",
                           (int)plan->num_splits, QATTN_MAX_SPLITS);
    qattn_workspace ws;
    s = check_plan_launch(ctx, QATTN_OP_DECODE, "decode", plan, qattn_decode_variant_name(plan->variant),
                          plan->shared_bytes, plan->workspace_bytes, ctx->iface->decode != NULL,
                          workspace, workspace_offset, &ws);
    if (s != QATTN_OK) return s;
    if (check_indices_enabled() && (s = check_decode_indices(ctx, args)) != QATTN_OK) return s;
    s = ctx->iface->decode(ctx->be, plan, args, &ws);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_decode_run");
    ctx->ops_run = 1;
    return QATTN_OK;
}

qattn_status qattn_kv_store(qattn_context *ctx, const qattn_kv_store_args *args) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    qattn_status s = qattn__validate_kv_store(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const qattn_tensor ts[] = {args->k_new, args->v_new, args->slot_mapping, args->k_cache,
                               args->v_cache, args->k_scale, args->v_scale};
    const char *const names[] = {"k_new", "v_new", "slot_mapping", "k_cache", "v_cache", "k_scale",
                                 "v_scale"};
    if ((s = check_owner(ctx, ts, names, 7)) != QATTN_OK) return s;
    if (!ctx->iface->kv_store)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "kv_store: the %s backend has no kv_store op",
                           ctx->iface->name);
    if (ctx->iface->supports_op && !ctx->iface->supports_op(ctx->be, QATTN_OP_KV_STORE, NULL))
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "kv_store: unsupported on %s", ctx->caps.arch);
    if (check_indices_enabled() && (s = check_store_indices(ctx, args)) != QATTN_OK) return s;
    s = ctx->iface->kv_store(ctx->be, args);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_kv_store");
    ctx->ops_run = 1;
    return QATTN_OK;
}

qattn_status qattn_mqa_logits_run(qattn_context *ctx, const qattn_mqa_logits_plan *plan,
                                  const qattn_mqa_logits_args *args, qattn_buffer *workspace,
                                  uint64_t workspace_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_mqa_logits(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const qattn_tensor ts[] = {args->q, args->k, args->k_scale, args->weights, args->ks, args->ke,
                               args->logits};
    const char *const names[] = {"q", "k", "k_scale", "weights", "ks", "ke", "logits"};
    if ((s = check_owner(ctx, ts, names, 7)) != QATTN_OK) return s;
    /* Before any field of the plan is trusted. */
    if (plan->integrity != mqa_digest(plan))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: its bytes changed after planning (integrity digest differs); "
                           "make plans only with qattn_mqa_logits_plan_create or _compute");
    if (plan->rows != args->q.shape[0] || plan->heads != args->q.shape[1] ||
        plan->head_dim != args->q.shape[2] || plan->kv_len != args->k.shape[0] ||
        plan->q_dtype != args->q.dtype || plan->k_dtype != args->k.dtype)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: made for S=%d S_kv=%d H=%d D=%d q %s k %s, args differ",
                           (int)plan->rows, (int)plan->kv_len, (int)plan->heads, (int)plan->head_dim,
                           qattn_dtype_name(plan->q_dtype), qattn_dtype_name(plan->k_dtype));
    if (plan->args_layout != mqa_layout(args))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "args: a dtype, stride, shape or 16-byte alignment of a tensor differs "
                           "from what the plan was made for (the kernels' index width depends on "
                           "the strides); plan again");
    qattn_workspace ws;
    s = check_plan_launch(ctx, QATTN_OP_MQA_LOGITS, "mqa_logits", plan,
                          qattn_mqa_variant_name(plan->variant), plan->shared_bytes,
                          plan->workspace_bytes, ctx->iface->mqa_logits != NULL, workspace,
                          workspace_offset, &ws);
    if (s != QATTN_OK) return s;
    s = ctx->iface->mqa_logits(ctx->be, plan, args, &ws);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_mqa_logits_run");
    ctx->ops_run = 1;
    return QATTN_OK;
}

qattn_status qattn_mqa_matrix_ceiling(qattn_context *ctx, const qattn_mqa_logits_plan *plan,
                                      double *tflops) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    if (!tflops) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "tflops: NULL");
    *tflops = 0.0;
    if (!ctx->iface->mqa_matrix_ceiling)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "qattn_mqa_matrix_ceiling: the %s backend has none",
                           ctx->iface->name);
    qattn_status s = ctx->iface->mqa_matrix_ceiling(ctx->be, plan, tflops);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_mqa_matrix_ceiling");
    return QATTN_OK;
}

/* ---- paged MQA logits ------------------------------------------------------ */
#define PAGED_MQA_TAG 0x716174747061676dull /* "qattpagm" */

_Static_assert(offsetof(qattn_paged_mqa_logits_plan, integrity) + sizeof(uint64_t) ==
                   sizeof(qattn_paged_mqa_logits_plan),
               "qattn_paged_mqa_logits_plan.integrity must be the last member");

static uint64_t paged_mqa_digest(const qattn_paged_mqa_logits_plan *p) {
    return digest(PAGED_MQA_TAG, p, offsetof(qattn_paged_mqa_logits_plan, integrity));
}

static uint64_t paged_mqa_layout(const qattn_paged_mqa_logits_args *a) {
    /* Not the page table: its length changes every step. */
    const qattn_tensor *ts[] = {&a->q, &a->k_cache, &a->k_scale, &a->weights, &a->logits};
    uint64_t h = PAGED_MQA_TAG ^ (uint64_t)(uint32_t)a->page_size ^ ((uint64_t)(uint32_t)a->max_kv_len << 32);
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; ++i) h = fold_tensor(h, ts[i]);
    return h;
}

void qattn__seal_paged_mqa_logits_plan(qattn_paged_mqa_logits_plan *out,
                                       const qattn_paged_mqa_logits_plan *p,
                                       const qattn_paged_mqa_logits_args *a) {
    memmove(out, p, sizeof *out);
    out->args_layout = paged_mqa_layout(a);
    out->integrity = paged_mqa_digest(out);
}

qattn_status qattn_paged_mqa_logits_run(qattn_context *ctx, const qattn_paged_mqa_logits_plan *plan,
                                        const qattn_paged_mqa_logits_args *args, qattn_buffer *workspace,
                                        uint64_t workspace_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_paged_mqa_logits(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const qattn_tensor ts[] = {args->q, args->k_cache, args->k_scale, args->weights, args->kv_indptr,
                               args->kv_indices, args->kv_lens, args->logits};
    const char *const names[] = {"q", "k_cache", "k_scale", "weights", "kv_indptr", "kv_indices",
                                 "kv_lens", "logits"};
    if ((s = check_owner(ctx, ts, names, 8)) != QATTN_OK) return s;
    if (plan->integrity != paged_mqa_digest(plan))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: its bytes changed after planning (integrity digest differs); "
                           "make plans only with qattn_paged_mqa_logits_plan_create or _compute");
    if (plan->batch != args->q.shape[0] || plan->rows != args->q.shape[1] ||
        plan->heads != args->q.shape[2] || plan->head_dim != args->q.shape[3] ||
        plan->q_dtype != args->q.dtype || plan->k_dtype != args->k_cache.dtype ||
        plan->page_size != args->page_size || plan->max_kv_len != args->max_kv_len)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: made for B=%d N=%d H=%d D=%d q %s k %s page_size %d max_kv_len %d, "
                           "args differ",
                           (int)plan->batch, (int)plan->rows, (int)plan->heads, (int)plan->head_dim,
                           qattn_dtype_name(plan->q_dtype), qattn_dtype_name(plan->k_dtype),
                           (int)plan->page_size, (int)plan->max_kv_len);
    if (plan->args_layout != paged_mqa_layout(args))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "args: a dtype, stride, shape or 16-byte alignment of q, k_cache, k_scale, "
                           "weights or logits differs from what the plan was made for; plan again");
    qattn_workspace ws;
    s = check_plan_launch(ctx, QATTN_OP_PAGED_MQA_LOGITS, "paged_mqa_logits", plan,
                          qattn_paged_mqa_variant_name(plan->variant), plan->shared_bytes,
                          plan->workspace_bytes, ctx->iface->paged_mqa_logits != NULL, workspace,
                          workspace_offset, &ws);
    if (s != QATTN_OK) return s;
    if (check_indices_enabled()) {
        const page_table t = {&args->kv_indptr, &args->kv_indices, &args->kv_lens, args->q.shape[0],
                              qattn__paged_mqa_slots(&args->k_cache, 0), args->page_size,
                              args->max_kv_len};
        if ((s = check_page_table(ctx, &t)) != QATTN_OK) return s;
    }
    s = ctx->iface->paged_mqa_logits(ctx->be, plan, args, &ws);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_paged_mqa_logits_run");
    ctx->ops_run = 1;
    return QATTN_OK;
}
