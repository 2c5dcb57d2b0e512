/* Run entry points of the operations, one table-driven path (run_op): each
 * op is a row (its validator, operands, plan checks, index check and
 * backend slot), and every run validates the descriptors, checks the plan
 * belongs to these arguments and this device, refuses outputs over inputs,
 * optionally verifies indices, then hands over to the backend. Nothing is
 * launched or written unless every check passes. Planners live in
 * plan_*.c, plan sealing and its checks in plan_seal.c. */
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

/* ---- the ops as rows -----------------------------------------------------
 * An op is a row: its validator, the tensors it reads and writes, the
 * checks of its plan (the planner's product: sealed, fits the device,
 * made for these args), its optional host index check, and its kernels
 * (the backend slot; the cpu backend's slot is the reference). run_op is
 * the one path every entry point takes, so every op gets every check in
 * the same order before any backend code runs:
 *   validate -> owners -> [plan: seal + device, match, workspace] ->
 *   outputs over inputs -> [no plan: slot, supports_op] -> indices -> launch */
typedef struct op_row {
    qattn_op op;
    int has_op;           /* 0: supports_op is not asked (an experimental op) */
    const char *name;     /* the slot, in "the %s backend has no %s op" */
    const char *entry;    /* the public call, in backend failures */
    const char *prefix;   /* leads validation messages (NULL: none) */
    qattn_status (*validate)(const void *args, char *err, size_t n);
    int (*operands)(const void *args, qattn__operand *ops); /* returns the count */
    int (*has_slot)(const qattn_backend_iface *iface);
    /* planned ops; NULL for planless ones */
    qattn_status (*plan_ok)(qattn_context *ctx, const void *plan);
    qattn_status (*plan_matches)(qattn_context *ctx, const void *plan, const void *args);
    uint64_t (*workspace_bytes)(const void *plan);
    /* QATTN_CHECK_INDICES=1; NULL: the op reads no index */
    qattn_status (*indices)(qattn_context *ctx, const void *args);
    qattn_status (*launch)(qattn_context *ctx, const void *plan, const void *args, const qattn_workspace *ws);
} op_row;

static qattn_status run_op(qattn_context *ctx, const op_row *row, const void *plan, const void *args,
                           qattn_buffer *workspace, uint64_t workspace_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (row->plan_ok && !plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s;
    if (row->prefix) {
        char err[QATTN_ERROR_BYTES];
        s = row->validate(args, err, sizeof err);
        if (s != QATTN_OK) return qattn__fail(ctx, s, "%s: %s", row->prefix, err);
    } else {
        s = row->validate(args, ctx->last_error, sizeof ctx->last_error);
        if (s != QATTN_OK) return s;
    }
    qattn__operand ops[QATTN_MAX_OPERANDS];
    const int n_ops = row->operands(args, ops);
    if ((s = check_owner(ctx, ops, n_ops)) != QATTN_OK) return s;
    qattn_workspace ws;
    memset(&ws, 0, sizeof ws);
    if (row->plan_ok) {
        if ((s = row->plan_ok(ctx, plan)) != QATTN_OK) return s;
        if ((s = row->plan_matches(ctx, plan, args)) != QATTN_OK) return s;
        s = resolve_workspace(ctx, row->workspace_bytes(plan), workspace, workspace_offset, &ws);
        if (s != QATTN_OK) return s;
    }
    if ((s = qattn__check_alias(ctx, ops, n_ops, &ws)) != QATTN_OK) return s;
    if (!row->plan_ok) {
        if (!row->has_slot(ctx->iface))
            return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "%s: the %s backend has no %s op",
                               row->prefix ? row->prefix : row->name, ctx->iface->name, row->name);
        if (row->has_op && ctx->iface->supports_op && !ctx->iface->supports_op(ctx->be, row->op, NULL))
            return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "%s: unsupported on %s", row->name, ctx->caps.arch);
    }
    if (row->indices && check_indices_enabled() && (s = row->indices(ctx, args)) != QATTN_OK) return s;
    s = row->launch(ctx, plan, args, &ws);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, row->entry);
    ctx->ops_run = 1;
    return QATTN_OK;
}

/* ---- decode ---- */
static qattn_status decode_validate(const void *args, char *err, size_t n) {
    return qattn__validate_decode(args, err, n);
}
static int decode_operands(const void *args, qattn__operand *ops) {
    const qattn_decode_args *a = args;
    const qattn__operand o[] = {
        {&a->q, "q", QATTN__IN},           {&a->k_cache, "k_cache", QATTN__IN},
        {&a->v_cache, "v_cache", QATTN__IN}, {&a->k_scale, "k_scale", QATTN__IN},
        {&a->v_scale, "v_scale", QATTN__IN}, {&a->kv_indptr, "kv_indptr", QATTN__IN},
        {&a->kv_indices, "kv_indices", QATTN__IN}, {&a->kv_lens, "kv_lens", QATTN__IN},
        {&a->sinks, "sinks", QATTN__IN},   {&a->o, "o", QATTN__OUT},
        {&a->lse, "lse", QATTN__OUT}};
    memcpy(ops, o, sizeof o);
    return (int)(sizeof o / sizeof o[0]);
}
static int decode_slot(const qattn_backend_iface *i) { return i->decode != NULL; }
static qattn_status decode_plan_check(qattn_context *ctx, const void *plan) {
    return decode_plan_ok(ctx, plan);
}
static qattn_status decode_matches(qattn_context *ctx, const void *vplan, const void *vargs) {
    const qattn_decode_plan *plan = vplan;
    const qattn_decode_args *args = vargs;
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
    return QATTN_OK;
}
static uint64_t decode_ws(const void *plan) { return ((const qattn_decode_plan *)plan)->workspace_bytes; }
static qattn_status decode_indices(qattn_context *ctx, const void *args) {
    return check_decode_indices(ctx, args);
}
static qattn_status decode_launch(qattn_context *ctx, const void *plan, const void *args,
                                  const qattn_workspace *ws) {
    return ctx->iface->decode(ctx->be, plan, args, ws);
}

/* ---- KV store (no plan) ---- */
static qattn_status store_validate(const void *args, char *err, size_t n) {
    return qattn__validate_kv_store(args, err, n);
}
static int store_operands(const void *args, qattn__operand *ops) {
    const qattn_kv_store_args *a = args;
    const qattn__operand o[] = {
        {&a->k_new, "k_new", QATTN__IN},           {&a->v_new, "v_new", QATTN__IN},
        {&a->slot_mapping, "slot_mapping", QATTN__IN}, {&a->k_cache, "k_cache", QATTN__OUT_SHARED},
        {&a->v_cache, "v_cache", QATTN__OUT_SHARED}, {&a->k_scale, "k_scale", QATTN__OUT_SHARED},
        {&a->v_scale, "v_scale", QATTN__OUT_SHARED}};
    memcpy(ops, o, sizeof o);
    return (int)(sizeof o / sizeof o[0]);
}
static int store_slot(const qattn_backend_iface *i) { return i->kv_store != NULL; }
static qattn_status store_indices(qattn_context *ctx, const void *args) { return check_store_indices(ctx, args); }
static qattn_status store_launch(qattn_context *ctx, const void *plan, const void *args,
                                 const qattn_workspace *ws) {
    (void)plan;
    (void)ws;
    return ctx->iface->kv_store(ctx->be, args);
}

/* ---- MQA logits ---- */
static qattn_status mqa_validate(const void *args, char *err, size_t n) {
    return qattn__validate_mqa_logits(args, err, n);
}
static int mqa_operands(const void *args, qattn__operand *ops) {
    const qattn_mqa_logits_args *a = args;
    const qattn__operand o[] = {
        {&a->q, "q", QATTN__IN},           {&a->k, "k", QATTN__IN},
        {&a->k_scale, "k_scale", QATTN__IN}, {&a->weights, "weights", QATTN__IN},
        {&a->ks, "ks", QATTN__IN},         {&a->ke, "ke", QATTN__IN},
        {&a->logits, "logits", QATTN__OUT}};
    memcpy(ops, o, sizeof o);
    return (int)(sizeof o / sizeof o[0]);
}
static int mqa_slot(const qattn_backend_iface *i) { return i->mqa_logits != NULL; }
static qattn_status mqa_plan_check(qattn_context *ctx, const void *plan) { return mqa_plan_ok(ctx, plan); }
static qattn_status mqa_matches(qattn_context *ctx, const void *vplan, const void *vargs) {
    const qattn_mqa_logits_plan *plan = vplan;
    const qattn_mqa_logits_args *args = vargs;
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
    return QATTN_OK;
}
static uint64_t mqa_ws(const void *plan) { return ((const qattn_mqa_logits_plan *)plan)->workspace_bytes; }
static qattn_status mqa_launch(qattn_context *ctx, const void *plan, const void *args,
                               const qattn_workspace *ws) {
    return ctx->iface->mqa_logits(ctx->be, plan, args, ws);
}

/* ---- paged MQA logits ---- */
static qattn_status paged_mqa_plan_ok(qattn_context *ctx, const qattn_paged_mqa_logits_plan *plan) {
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__check_paged_mqa_sealed(ctx, plan);
    if (s != QATTN_OK) return s;
    return qattn__check_plan_device(ctx, QATTN_OP_PAGED_MQA_LOGITS, "paged_mqa_logits", plan,
                                    qattn_paged_mqa_variant_name(plan->variant), plan->shared_bytes,
                                    ctx->iface->paged_mqa_logits != NULL);
}
static qattn_status pmqa_validate(const void *args, char *err, size_t n) {
    return qattn__validate_paged_mqa_logits(args, err, n);
}
static int pmqa_operands(const void *args, qattn__operand *ops) {
    const qattn_paged_mqa_logits_args *a = args;
    const qattn__operand o[] = {
        {&a->q, "q", QATTN__IN},           {&a->k_cache, "k_cache", QATTN__IN},
        {&a->k_scale, "k_scale", QATTN__IN}, {&a->weights, "weights", QATTN__IN},
        {&a->kv_indptr, "kv_indptr", QATTN__IN}, {&a->kv_indices, "kv_indices", QATTN__IN},
        {&a->kv_lens, "kv_lens", QATTN__IN}, {&a->logits, "logits", QATTN__OUT}};
    memcpy(ops, o, sizeof o);
    return (int)(sizeof o / sizeof o[0]);
}
static int pmqa_slot(const qattn_backend_iface *i) { return i->paged_mqa_logits != NULL; }
static qattn_status pmqa_plan_check(qattn_context *ctx, const void *plan) {
    return paged_mqa_plan_ok(ctx, plan);
}
static qattn_status pmqa_matches(qattn_context *ctx, const void *vplan, const void *vargs) {
    const qattn_paged_mqa_logits_plan *plan = vplan;
    const qattn_paged_mqa_logits_args *args = vargs;
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
    return QATTN_OK;
}
static uint64_t pmqa_ws(const void *plan) {
    return ((const qattn_paged_mqa_logits_plan *)plan)->workspace_bytes;
}
static qattn_status pmqa_indices(qattn_context *ctx, const void *vargs) {
    const qattn_paged_mqa_logits_args *args = vargs;
    const page_table t = {&args->kv_indptr, &args->kv_indices, &args->kv_lens, args->q.shape[0],
                          qattn__paged_mqa_slots(&args->k_cache, 0), args->page_size, args->max_kv_len};
    return check_page_table(ctx, &t);
}
static qattn_status pmqa_launch(qattn_context *ctx, const void *plan, const void *args,
                                const qattn_workspace *ws) {
    return ctx->iface->paged_mqa_logits(ctx->be, plan, args, ws);
}

/* ---- decode_read (qattn/experimental.h): decode's reads, summed into a
 * u32 it writes; no plan ---- */
typedef struct decode_read_call {
    const qattn_decode_args *args;
    qattn_tensor sum; /* i32 [1] at sum_offset */
} decode_read_call;

/* A cache tensor whose rows and strides the 16-byte loads can follow. */
static qattn_status check_rows16(const qattn_tensor *t, const char *name, char *err, size_t n) {
    const qattn_cache_view v = qattn_cache_view_of(t, 0, 1);
    const int64_t es = (int64_t)qattn_dtype_size(t->dtype);
    const int64_t st[3] = {v.page_stride, v.row_stride, v.head_stride};
    int ok = (qattn__cache_head_dim(t) * es) % 16 == 0 && t->offset % 16 == 0;
    for (int i = 0; i < 3; ++i) ok &= (st[i] * es) % 16 == 0;
    if (!ok)
        return qattn__err(err, n, QATTN_ERR_ALIGNMENT,
                          "%s: its offset, rows and page, row and head strides must be multiples of 16 "
                          "bytes (the op reads rows in 16-byte loads)",
                          name);
    return QATTN_OK;
}
static qattn_status dread_validate(const void *vcall, char *err, size_t n) {
    const decode_read_call *c = vcall;
    qattn_status s = qattn__validate_decode(c->args, err, n);
    if (s == QATTN_OK) s = check_rows16(&c->args->k_cache, "k_cache", err, n);
    if (s == QATTN_OK) s = check_rows16(&c->args->v_cache, "v_cache", err, n);
    if (s != QATTN_OK) return s;
    /* Its kernels and reference read V rows of K's length. */
    if (qattn__cache_head_dim(&c->args->v_cache) != qattn__cache_head_dim(&c->args->k_cache))
        return qattn__err(err, n, QATTN_ERR_SHAPE,
                          "v_cache: head dim %" PRId64 " differs from k_cache's %" PRId64
                          " (decode_read reads K and V rows of one length)",
                          qattn__cache_head_dim(&c->args->v_cache), qattn__cache_head_dim(&c->args->k_cache));
    if (c->sum.offset % 4 != 0)
        return qattn__err(err, n, QATTN_ERR_ALIGNMENT, "sum_offset %" PRIu64 " is not a multiple of 4",
                          c->sum.offset);
    if (!c->sum.buffer) return qattn__err(err, n, QATTN_ERR_NULL_BUFFER, "sum is NULL");
    if (c->sum.offset > c->sum.buffer->bytes || c->sum.buffer->bytes - c->sum.offset < 4)
        return qattn__err(err, n, QATTN_ERR_OUT_OF_BOUNDS,
                          "sum: byte %" PRIu64 " + 4 exceeds its %" PRIu64 "-byte buffer", c->sum.offset,
                          c->sum.buffer->bytes);
    return QATTN_OK;
}
static int dread_operands(const void *vcall, qattn__operand *ops) {
    const decode_read_call *c = vcall;
    const qattn_decode_args *a = c->args;
    const qattn__operand o[] = {
        {&a->q, "q", QATTN__IN},           {&a->k_cache, "k_cache", QATTN__IN},
        {&a->v_cache, "v_cache", QATTN__IN}, {&a->k_scale, "k_scale", QATTN__IN},
        {&a->v_scale, "v_scale", QATTN__IN}, {&a->kv_indptr, "kv_indptr", QATTN__IN},
        {&a->kv_indices, "kv_indices", QATTN__IN}, {&a->kv_lens, "kv_lens", QATTN__IN},
        {&c->sum, "sum", QATTN__OUT}};
    memcpy(ops, o, sizeof o);
    return (int)(sizeof o / sizeof o[0]);
}
static int dread_slot(const qattn_backend_iface *i) { return i->decode_read != NULL; }
static qattn_status dread_launch(qattn_context *ctx, const void *plan, const void *vcall,
                                 const qattn_workspace *ws) {
    (void)plan;
    (void)ws;
    const decode_read_call *c = vcall;
    return ctx->iface->decode_read(ctx->be, c->args, c->sum.buffer->handle, c->sum.offset);
}

/* The table. */
enum { ROW_DECODE, ROW_KV_STORE, ROW_MQA_LOGITS, ROW_PAGED_MQA_LOGITS, ROW_DECODE_READ };
static const op_row OPS[] = {
    [ROW_DECODE] = {QATTN_OP_DECODE, 1, "decode", "qattn_decode_run", NULL, decode_validate, decode_operands,
                    decode_slot, decode_plan_check, decode_matches, decode_ws, decode_indices, decode_launch},
    [ROW_KV_STORE] = {QATTN_OP_KV_STORE, 1, "kv_store", "qattn_kv_store", NULL, store_validate, store_operands,
                      store_slot, NULL, NULL, NULL, store_indices, store_launch},
    [ROW_MQA_LOGITS] = {QATTN_OP_MQA_LOGITS, 1, "mqa_logits", "qattn_mqa_logits_run", NULL, mqa_validate,
                        mqa_operands, mqa_slot, mqa_plan_check, mqa_matches, mqa_ws, NULL, mqa_launch},
    [ROW_PAGED_MQA_LOGITS] = {QATTN_OP_PAGED_MQA_LOGITS, 1, "paged_mqa_logits", "qattn_paged_mqa_logits_run",
                              NULL, pmqa_validate, pmqa_operands, pmqa_slot, pmqa_plan_check, pmqa_matches,
                              pmqa_ws, pmqa_indices, pmqa_launch},
    [ROW_DECODE_READ] = {QATTN_OP_DECODE, 0, "decode_read", "qattn_decode_read", "qattn_decode_read",
                         dread_validate, dread_operands, dread_slot, NULL, NULL, NULL, NULL, dread_launch},
};

qattn_status qattn_decode_run(qattn_context *ctx, const qattn_decode_plan *plan,
                              const qattn_decode_args *args, qattn_buffer *workspace,
                              uint64_t workspace_offset) {
    return run_op(ctx, &OPS[ROW_DECODE], plan, args, workspace, workspace_offset);
}

qattn_status qattn_kv_store(qattn_context *ctx, const qattn_kv_store_args *args) {
    return run_op(ctx, &OPS[ROW_KV_STORE], NULL, args, NULL, 0);
}

qattn_status qattn_mqa_logits_run(qattn_context *ctx, const qattn_mqa_logits_plan *plan,
                                  const qattn_mqa_logits_args *args, qattn_buffer *workspace,
                                  uint64_t workspace_offset) {
    return run_op(ctx, &OPS[ROW_MQA_LOGITS], plan, args, workspace, workspace_offset);
}

qattn_status qattn_paged_mqa_logits_run(qattn_context *ctx, const qattn_paged_mqa_logits_plan *plan,
                                        const qattn_paged_mqa_logits_args *args, qattn_buffer *workspace,
                                        uint64_t workspace_offset) {
    return run_op(ctx, &OPS[ROW_PAGED_MQA_LOGITS], plan, args, workspace, workspace_offset);
}

qattn_status qattn__decode_read(qattn_context *ctx, const qattn_decode_args *args, qattn_buffer *sum,
                                uint64_t sum_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    decode_read_call c = {args, qattn_tensor_contiguous(sum, sum_offset, QATTN_I32, 1, (int64_t[]){1})};
    return run_op(ctx, &OPS[ROW_DECODE_READ], NULL, &c, NULL, 0);
}
