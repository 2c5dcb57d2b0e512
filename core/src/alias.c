/* Outputs may not share bytes with inputs (docs/ops.md, "Memory"): an
 * output written while an input is still being read changes what the rest
 * of the call reads (the reference sizes its key lists from the page table,
 * and a GPU's workgroups race), so every run entry point refuses such a call
 * before anything is launched. Two tensors share bytes when their byte
 * ranges (first to last byte each reaches, whatever lies between) intersect:
 * in one buffer, or, where the backend reports buffer addresses, in two
 * buffers over the same memory (two wraps of one array). */
#include <inttypes.h>

#include "internal.h"

typedef struct span {
    const void *space; /* the buffer, or NULL for the backend's address space */
    uint64_t lo, hi;   /* [lo, hi) */
} span;

static span span_at(const qattn_context *ctx, const qattn_buffer *buf, uint64_t first, uint64_t end) {
    span s = {buf, first, end};
    if (ctx->iface->buffer_address) {
        const uint64_t base = ctx->iface->buffer_address(ctx->be, buf->handle);
        s.space = NULL;
        s.lo = base + first;
        s.hi = base + end;
    }
    return s;
}

static int meet(const span *a, const span *b) {
    return a->space == b->space && a->lo < a->hi && b->lo < b->hi && a->lo < b->hi && b->lo < a->hi;
}

qattn_status qattn__check_alias(qattn_context *ctx, const qattn__operand *ops, int n,
                                const qattn_workspace *ws) {
    span sp[QATTN_MAX_OPERANDS];
    if (n > QATTN_MAX_OPERANDS) n = QATTN_MAX_OPERANDS;
    for (int i = 0; i < n; ++i) {
        uint64_t first = 0, end = 0;
        if (qattn_tensor_present(ops[i].t)) qattn__tensor_extent(ops[i].t, &first, &end);
        sp[i] = qattn_tensor_present(ops[i].t) ? span_at(ctx, ops[i].t->buffer, first, end)
                                               : (span){NULL, 0, 0};
    }
    for (int i = 0; i < n; ++i) {
        if (ops[i].kind == QATTN__IN) continue;
        for (int j = 0; j < n; ++j) {
            if (j == i || (ops[j].kind != QATTN__IN && j < i)) continue; /* each pair once */
            if (ops[i].kind == QATTN__OUT_SHARED && ops[j].kind == QATTN__OUT_SHARED) continue;
            if (meet(&sp[i], &sp[j]))
                return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                                   "%s: its bytes overlap %s's; an output may not share memory with "
                                   "an input or another output (docs/ops.md, \"Memory\")",
                                   ops[i].name, ops[j].name);
        }
    }
    if (ws && ws->buffer) {
        const span w = span_at(ctx, ws->buffer, ws->offset, ws->offset + ws->bytes);
        for (int i = 0; i < n; ++i)
            if (meet(&w, &sp[i]))
                return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                                   "workspace: its %" PRIu64 " bytes from offset %" PRIu64
                                   " overlap %s's; the run writes the workspace (docs/ops.md, \"Memory\")",
                                   ws->bytes, ws->offset, ops[i].name);
    }
    return QATTN_OK;
}
