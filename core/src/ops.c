/* Run entry points of the operations: validate the descriptors, check the
 * plan belongs to these arguments and this device, optionally verify
 * indices, then hand over to the backend. Nothing is launched or written
 * unless every check passes. Planners live in plan_*.c, plan sealing and its
 * checks in plan_seal.c. */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

static qattn_status check_decode_indices(qattn_context *ctx, const qattn_decode_args *a) {
    const int64_t B = a->q.shape[0], n_pages = a->kv_indices.shape[0];
    const int64_t n_slots = qattn__cache_slots(&a->k_cache, 0), P = a->page_size;
    int32_t *indptr = NULL, *lens = NULL, *pages = NULL;
    qattn_status s = fetch_i32(ctx, &a->kv_indptr, &indptr);
    if (s == QATTN_OK) s = fetch_i32(ctx, &a->kv_lens, &lens);
    if (s == QATTN_OK) s = fetch_i32(ctx, &a->kv_indices, &pages);
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

qattn_status qattn__check_plan_device(qattn_context *ctx, qattn_op op, const char *op_name,
                                     const void *plan, const char *variant, uint32_t shared_bytes,
                                     int has_slot) {
    if (shared_bytes > ctx->caps.max_shared_bytes)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: shared_bytes %u exceed this device's %u (plan made for another device?)",
                           (unsigned)shared_bytes, (unsigned)ctx->caps.max_shared_bytes);
    if (!has_slot)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "%s: the %s backend has no %s op", op_name,
                           ctx->iface->name, op_name);
    if (ctx->iface->supports_op && !ctx->iface->supports_op(ctx->be, op, plan))
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "%s: %s cannot run variant %s", op_name,
                           ctx->caps.arch, variant);
    return QATTN_OK;
}

/* The checks every planned op shares once its plan matches its args: the
 * plan fits this device and the backend can run it, and the workspace is
 * there. `has_slot` is whether the op's entry point exists. */
static qattn_status check_plan_launch(qattn_context *ctx, qattn_op op, const char *op_name,
                                      const void *plan, const char *variant, uint32_t shared_bytes,
                                      uint64_t workspace_bytes, int has_slot, qattn_buffer *workspace,
                                      uint64_t workspace_offset, qattn_workspace *ws) {
    qattn_status s = qattn__check_plan_device(ctx, op, op_name, plan, variant, shared_bytes, has_slot);
    if (s != QATTN_OK) return s;
    return resolve_workspace(ctx, workspace_bytes, workspace, workspace_offset, ws);
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
    if ((s = qattn__check_decode_sealed(ctx, plan)) != QATTN_OK) return s;
    if (plan->batch != args->q.shape[0] || plan->rows != args->q.shape[1] ||
        plan->q_heads != args->q.shape[2] || plan->head_dim != args->q.shape[3] ||
        plan->kv_heads != qattn__cache_heads(&args->k_cache) ||
        plan->head_dim_v != qattn__cache_head_dim(&args->v_cache) ||
        plan->kv_dtype != args->k_cache.dtype)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: made for B=%d R=%d Hq=%d Hkv=%d D=%d %s, args differ",
                           (int)plan->batch, (int)plan->rows, (int)plan->q_heads, (int)plan->kv_heads,
                           (int)plan->head_dim, qattn_dtype_name(plan->kv_dtype));
    if (plan->args_layout != qattn__decode_args_layout(args))
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
    if ((s = qattn__check_mqa_sealed(ctx, plan)) != QATTN_OK) return s;
    if (plan->rows != args->q.shape[0] || plan->heads != args->q.shape[1] ||
        plan->head_dim != args->q.shape[2] || plan->kv_len != args->k.shape[0] ||
        plan->q_dtype != args->q.dtype || plan->k_dtype != args->k.dtype)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "plan: made for S=%d S_kv=%d H=%d D=%d q %s k %s, args differ",
                           (int)plan->rows, (int)plan->kv_len, (int)plan->heads, (int)plan->head_dim,
                           qattn_dtype_name(plan->q_dtype), qattn_dtype_name(plan->k_dtype));
    if (plan->args_layout != qattn__mqa_args_layout(args))
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
