/* The measurement ops of qattn/experimental.h. Each exists so a caller
 * (qattn-bench) can measure a ceiling reachable through a backend and hold
 * the attention ops against it. The core checks every argument (a plan as
 * every plan consumer does); the backend slots only measure. */
#include <inttypes.h>

#include "internal.h"
#include "qattn/experimental.h"

static qattn_status check_buffer(qattn_context *ctx, const qattn_buffer *b, const char *name,
                                 uint64_t offset, uint64_t bytes) {
    if (!b) return qattn__fail(ctx, QATTN_ERR_NULL_BUFFER, "qattn_read_stream: %s is NULL", name);
    if (b->owner != ctx)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "qattn_read_stream: %s belongs to another context", name);
    if (offset > b->bytes || bytes > b->bytes - offset)
        return qattn__fail(ctx, QATTN_ERR_OUT_OF_BOUNDS,
                           "qattn_read_stream: %s range [%" PRIu64 ", +%" PRIu64 ") exceeds its %" PRIu64
                           "-byte buffer", name, offset, bytes, b->bytes);
    return QATTN_OK;
}

qattn_status qattn_read_stream(qattn_context *ctx, const qattn_buffer *src, uint64_t offset,
                               uint64_t bytes, qattn_buffer *sum, uint64_t sum_offset) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (bytes == 0 || bytes % 16 != 0)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                           "qattn_read_stream: bytes %" PRIu64 " must be a positive multiple of 16", bytes);
    if (bytes / 16 >= (UINT64_C(1) << 31))
        return qattn__fail(ctx, QATTN_ERR_OVERFLOW,
                           "qattn_read_stream: bytes %" PRIu64 " is 2^31 or more 16-byte words", bytes);
    if (offset % 16 != 0)
        return qattn__fail(ctx, QATTN_ERR_ALIGNMENT,
                           "qattn_read_stream: offset %" PRIu64 " is not a multiple of 16", offset);
    if (sum_offset % 4 != 0)
        return qattn__fail(ctx, QATTN_ERR_ALIGNMENT,
                           "qattn_read_stream: sum_offset %" PRIu64 " is not a multiple of 4", sum_offset);
    qattn_status s = check_buffer(ctx, src, "src", offset, bytes);
    if (s == QATTN_OK) s = check_buffer(ctx, sum, "sum", sum_offset, 4);
    if (s != QATTN_OK) return s;
    const qattn_tensor in = qattn_tensor_contiguous((qattn_buffer *)src, offset, QATTN_I32, 1,
                                                    (int64_t[]){(int64_t)(bytes / 4)});
    const qattn_tensor out = qattn_tensor_contiguous(sum, sum_offset, QATTN_I32, 1, (int64_t[]){1});
    const qattn__operand ops[] = {{&in, "src", QATTN__IN}, {&out, "sum", QATTN__OUT}};
    if ((s = qattn__check_alias(ctx, ops, 2, NULL)) != QATTN_OK) return s;
    if (!ctx->iface->read_stream)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "qattn_read_stream: the %s backend has no read kernel",
                           ctx->iface->name);
    s = ctx->iface->read_stream(ctx->be, src->handle, offset, bytes, sum->handle, sum_offset);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_read_stream");
    ctx->ops_run = 1;
    return QATTN_OK;
}

qattn_status qattn_mqa_matrix_ceiling(qattn_context *ctx, const qattn_mqa_logits_plan *plan,
                                      double *tflops) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!tflops) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "tflops: NULL");
    *tflops = 0.0;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__check_mqa_sealed(ctx, plan);
    if (s == QATTN_OK)
        s = qattn__check_plan_device(ctx, QATTN_OP_MQA_LOGITS, "qattn_mqa_matrix_ceiling", plan,
                                     qattn_mqa_variant_name(plan->variant), plan->shared_bytes,
                                     ctx->iface->mqa_matrix_ceiling != NULL);
    if (s != QATTN_OK) return s;
    s = ctx->iface->mqa_matrix_ceiling(ctx->be, plan, tflops);
    if (s != QATTN_OK) return qattn__backend_fail(ctx, s, "qattn_mqa_matrix_ceiling");
    return QATTN_OK;
}

/* qattn_decode_read is a row of the op table (ops.c): the same checks as
 * every op, its sum an output that may not meet its inputs. */
qattn_status qattn_decode_read(qattn_context *ctx, const qattn_decode_args *args, qattn_buffer *sum,
                               uint64_t sum_offset) {
    return qattn__decode_read(ctx, args, sum, sum_offset);
}
