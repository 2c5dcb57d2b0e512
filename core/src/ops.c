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

static qattn_status check_owner(qattn_context *ctx, const qattn__operand *ops, int n) {
    for (int i = 0; i < n; ++i)
        if (ops[i].t->buffer && ops[i].t->buffer->owner != ctx)
            return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "%s: buffer belongs to another context",
                               ops[i].name);
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

/* A failure's message, led by `what` (the plan's name in the caller's
 * arguments) when there is one. */
static qattn_status named(qattn_context *ctx, qattn_status s, const char *what) {
    if (s == QATTN_OK || !what) return s;
    char msg[QATTN_ERROR_BYTES];
    memcpy(msg, ctx->last_error, sizeof msg);
    return qattn__fail(ctx, s, "%s: %s", what, msg);
}

/* Every check of a decode plan on its own, for every entry point that
 * takes one (run, and backends' calls such as qattn_vulkan_warmup): the
 * digest first, before any field is trusted. */
static qattn_status decode_plan_ok(qattn_context *ctx, const qattn_decode_plan *plan) {
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__check_decode_sealed(ctx, plan);
    if (s != QATTN_OK) return s;
    if (plan->num_splits < 1 || plan->num_splits > QATTN_MAX_SPLITS)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: num_splits %d outside 1..%d",
                           (int)plan->num_splits, QATTN_MAX_SPLITS);
    return qattn__check_plan_device(ctx, QATTN_OP_DECODE, "decode", plan,
                                    qattn_decode_variant_name(plan->variant), plan->shared_bytes,
                                    ctx->iface->decode != NULL);
}

static qattn_status mqa_plan_ok(qattn_context *ctx, const qattn_mqa_logits_plan *plan) {
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__check_mqa_sealed(ctx, plan);
    if (s != QATTN_OK) return s;
    return qattn__check_plan_device(ctx, QATTN_OP_MQA_LOGITS, "mqa_logits", plan,
                                    qattn_mqa_variant_name(plan->variant), plan->shared_bytes,
                                    ctx->iface->mqa_logits != NULL);
}

qattn_status qattn_context_check_decode_plan(qattn_context *ctx, const qattn_decode_plan *plan,
                                             const char *what) {
    return ctx ? named(ctx, decode_plan_ok(ctx, plan), what) : QATTN_ERR_INVALID_ARGUMENT;
}

qattn_status qattn_context_check_mqa_logits_plan(qattn_context *ctx, const qattn_mqa_logits_plan *plan,
                                                 const char *what) {
    return ctx ? named(ctx, mqa_plan_ok(ctx, plan), what) : QATTN_ERR_INVALID_ARGUMENT;
}

qattn_status qattn_decode_run(qattn_context *ctx, const qattn_decode_plan *plan,
                              const qattn_decode_args *args, qattn_buffer *workspace,
                              uint64_t workspace_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_decode(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const qattn__operand ops[] = {
        {&args->q, "q", QATTN__IN},           {&args->k_cache, "k_cache", QATTN__IN},
        {&args->v_cache, "v_cache", QATTN__IN}, {&args->k_scale, "k_scale", QATTN__IN},
        {&args->v_scale, "v_scale", QATTN__IN}, {&args->kv_indptr, "kv_indptr", QATTN__IN},
        {&args->kv_indices, "kv_indices", QATTN__IN}, {&args->kv_lens, "kv_lens", QATTN__IN},
        {&args->sinks, "sinks", QATTN__IN},   {&args->o, "o", QATTN__OUT},
        {&args->lse, "lse", QATTN__OUT}};
    const int n_ops = (int)(sizeof ops / sizeof ops[0]);
    if ((s = check_owner(ctx, ops, n_ops)) != QATTN_OK) return s;
    if ((s = decode_plan_ok(ctx, plan)) != QATTN_OK) return s;
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
    qattn_workspace ws;
    s = resolve_workspace(ctx, plan->workspace_bytes, workspace, workspace_offset, &ws);
    if (s != QATTN_OK) return s;
    if ((s = qattn__check_alias(ctx, ops, n_ops, &ws)) != QATTN_OK) return s;
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
    const qattn__operand ops[] = {
        {&args->k_new, "k_new", QATTN__IN},           {&args->v_new, "v_new", QATTN__IN},
        {&args->slot_mapping, "slot_mapping", QATTN__IN}, {&args->k_cache, "k_cache", QATTN__OUT_SHARED},
        {&args->v_cache, "v_cache", QATTN__OUT_SHARED}, {&args->k_scale, "k_scale", QATTN__OUT_SHARED},
        {&args->v_scale, "v_scale", QATTN__OUT_SHARED}};
    const int n_ops = (int)(sizeof ops / sizeof ops[0]);
    if ((s = check_owner(ctx, ops, n_ops)) != QATTN_OK) return s;
    if ((s = qattn__check_alias(ctx, ops, n_ops, NULL)) != QATTN_OK) return s;
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
    const qattn__operand ops[] = {
        {&args->q, "q", QATTN__IN},           {&args->k, "k", QATTN__IN},
        {&args->k_scale, "k_scale", QATTN__IN}, {&args->weights, "weights", QATTN__IN},
        {&args->ks, "ks", QATTN__IN},         {&args->ke, "ke", QATTN__IN},
        {&args->logits, "logits", QATTN__OUT}};
    const int n_ops = (int)(sizeof ops / sizeof ops[0]);
    if ((s = check_owner(ctx, ops, n_ops)) != QATTN_OK) return s;
    if ((s = mqa_plan_ok(ctx, plan)) != QATTN_OK) return s;
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
    s = resolve_workspace(ctx, plan->workspace_bytes, workspace, workspace_offset, &ws);
    if (s != QATTN_OK) return s;
    if ((s = qattn__check_alias(ctx, ops, n_ops, &ws)) != QATTN_OK) return s;
    s = ctx->iface->mqa_logits(ctx->be, plan, args, &ws);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_mqa_logits_run");
    ctx->ops_run = 1;
    return QATTN_OK;
}

static qattn_status paged_mqa_plan_ok(qattn_context *ctx, const qattn_paged_mqa_logits_plan *plan) {
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__check_paged_mqa_sealed(ctx, plan);
    if (s != QATTN_OK) return s;
    return qattn__check_plan_device(ctx, QATTN_OP_PAGED_MQA_LOGITS, "paged_mqa_logits", plan,
                                    qattn_paged_mqa_variant_name(plan->variant), plan->shared_bytes,
                                    ctx->iface->paged_mqa_logits != NULL);
}

qattn_status qattn_paged_mqa_logits_run(qattn_context *ctx, const qattn_paged_mqa_logits_plan *plan,
                                        const qattn_paged_mqa_logits_args *args, qattn_buffer *workspace,
                                        uint64_t workspace_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_paged_mqa_logits(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const qattn__operand ops[] = {
        {&args->q, "q", QATTN__IN},           {&args->k_cache, "k_cache", QATTN__IN},
        {&args->k_scale, "k_scale", QATTN__IN}, {&args->weights, "weights", QATTN__IN},
        {&args->kv_indptr, "kv_indptr", QATTN__IN}, {&args->kv_indices, "kv_indices", QATTN__IN},
        {&args->kv_lens, "kv_lens", QATTN__IN}, {&args->logits, "logits", QATTN__OUT}};
    const int n_ops = (int)(sizeof ops / sizeof ops[0]);
    if ((s = check_owner(ctx, ops, n_ops)) != QATTN_OK) return s;
    if ((s = paged_mqa_plan_ok(ctx, plan)) != QATTN_OK) return s;
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
    if (plan->args_layout != qattn__paged_mqa_args_layout(args))
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "args: a dtype, stride, shape or 16-byte alignment of q, k_cache, k_scale, "
                           "weights or logits differs from what the plan was made for; plan again");
    qattn_workspace ws;
    s = resolve_workspace(ctx, plan->workspace_bytes, workspace, workspace_offset, &ws);
    if (s != QATTN_OK) return s;
    if ((s = qattn__check_alias(ctx, ops, n_ops, &ws)) != QATTN_OK) return s;
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
