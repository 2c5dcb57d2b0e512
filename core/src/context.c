/* Contexts and buffers: the core's side of the backend interface. Every call
 * checks its arguments here, so backends see only well-formed requests. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int iface_complete(const qattn_backend_iface *b) {
    return b->abi_version == QATTN_BACKEND_ABI && b->name && b->create && b->destroy &&
           b->get_caps && b->buffer_alloc && b->buffer_free && b->buffer_upload &&
           b->buffer_download && b->synchronize;
}

qattn_status qattn_context_create(const qattn_backend_iface *backend,
                                  const qattn_context_options *options, qattn_context **out,
                                  char *err, size_t err_size) {
    if (out) *out = NULL;
    if (!out)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "out: NULL");
    if (!backend)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "backend: NULL");
    if (!iface_complete(backend))
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "backend: table is incomplete or of another ABI (want %d)",
                          QATTN_BACKEND_ABI);
    /* The backend reads this build's layout only. */
    qattn_context_options opt;
    qattn_status rs = qattn__read_context_options(options, &opt, err, err_size);
    if (rs != QATTN_OK) return rs;

    qattn_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return qattn__err(err, err_size, QATTN_ERR_OUT_OF_MEMORY, "context: out of memory");
    ctx->iface = backend;
    char why[QATTN_ERROR_BYTES] = "";
    qattn_status s = backend->create(&opt, &ctx->be, why, sizeof why);
    if (s == QATTN_OK) s = backend->get_caps(ctx->be, &ctx->caps);
    if (s != QATTN_OK) {
        if (ctx->be) backend->destroy(ctx->be);
        free(ctx);
        return qattn__err(err, err_size, s, "%s backend: %s", backend->name,
                          why[0] ? why : qattn_status_text(s));
    }
    *out = ctx;
    return QATTN_OK;
}

void qattn_context_free(qattn_context *ctx) {
    if (!ctx) return;
    ctx->iface->destroy(ctx->be);
    free(ctx);
}

void *qattn_buffer_handle(const qattn_buffer *buf) { return buf ? buf->handle : NULL; }

const char *qattn_last_error(const qattn_context *ctx) { return ctx ? ctx->last_error : ""; }

const char *qattn_backend_name(const qattn_context *ctx) { return ctx ? ctx->iface->name : ""; }

qattn_status qattn_get_caps(qattn_context *ctx, qattn_device_caps *caps) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!caps) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "caps: NULL");
    *caps = ctx->caps;
    return QATTN_OK;
}

/* Copies the backend's own explanation of a failure into the last error. */
static qattn_status backend_fail(qattn_context *ctx, qattn_status s, const char *what) {
    const char *msg = ctx->iface->last_message ? ctx->iface->last_message(ctx->be) : NULL;
    return qattn__fail(ctx, s, "%s: %s backend: %s", what, ctx->iface->name,
                       (msg && msg[0]) ? msg : qattn_status_text(s));
}

/* ---- buffers ---- */

static qattn_status new_buffer(qattn_context *ctx, uint64_t bytes, void *native,
                               qattn_buffer **out) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!out) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "out: NULL");
    *out = NULL;
    if (bytes == 0) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "bytes: must be > 0");
    qattn_buffer *b = calloc(1, sizeof *b);
    if (!b) return qattn__fail(ctx, QATTN_ERR_OUT_OF_MEMORY, "buffer: out of host memory");
    qattn_status s;
    if (native) {
        s = ctx->iface->buffer_wrap(ctx->be, native, bytes, &b->handle);
        b->wrapped = 1;
    } else {
        s = ctx->iface->buffer_alloc(ctx->be, bytes, &b->handle);
    }
    if (s != QATTN_OK) {
        free(b);
        return backend_fail(ctx, s, native ? "qattn_buffer_wrap" : "qattn_buffer_alloc");
    }
    b->owner = ctx;
    b->bytes = bytes;
    *out = b;
    return QATTN_OK;
}

qattn_status qattn_buffer_alloc(qattn_context *ctx, uint64_t bytes, qattn_buffer **out) {
    return new_buffer(ctx, bytes, NULL, out);
}

qattn_status qattn_buffer_wrap(qattn_context *ctx, void *native, uint64_t bytes,
                               qattn_buffer **out) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!ctx->iface->buffer_wrap)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED,
                           "qattn_buffer_wrap: the %s backend cannot wrap foreign memory",
                           ctx->iface->name);
    if (!native) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "native: NULL");
    return new_buffer(ctx, bytes, native, out);
}

void qattn_buffer_free(qattn_context *ctx, qattn_buffer *buf) {
    if (!ctx || !buf || buf->owner != ctx) return;
    if (!buf->wrapped)
        ctx->iface->buffer_free(ctx->be, buf->handle);
    else if (ctx->iface->buffer_unwrap)
        ctx->iface->buffer_unwrap(ctx->be, buf->handle);
    free(buf);
}

uint64_t qattn_buffer_size(const qattn_buffer *buf) { return buf ? buf->bytes : 0; }

static qattn_status check_range(qattn_context *ctx, const qattn_buffer *buf, uint64_t offset,
                                const void *host, uint64_t bytes, const char *fn) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!buf) return qattn__fail(ctx, QATTN_ERR_NULL_BUFFER, "%s: buf is NULL", fn);
    if (buf->owner != ctx)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "%s: buf belongs to another context", fn);
    if (!host && bytes) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "%s: host pointer NULL", fn);
    if (offset > buf->bytes || bytes > buf->bytes - offset)
        return qattn__fail(ctx, QATTN_ERR_OUT_OF_BOUNDS,
                           "%s: range [%" PRIu64 ", +%" PRIu64 ") exceeds the %" PRIu64 "-byte buffer",
                           fn, offset, bytes, buf->bytes);
    return QATTN_OK;
}

qattn_status qattn_buffer_upload(qattn_context *ctx, qattn_buffer *buf, uint64_t offset,
                                 const void *src, uint64_t bytes) {
    qattn_status s = check_range(ctx, buf, offset, src, bytes, "qattn_buffer_upload");
    if (s != QATTN_OK || bytes == 0) return s;
    s = ctx->iface->buffer_upload(ctx->be, buf->handle, offset, src, bytes);
    return s == QATTN_OK ? s : backend_fail(ctx, s, "qattn_buffer_upload");
}

qattn_status qattn_buffer_download(qattn_context *ctx, const qattn_buffer *buf, uint64_t offset,
                                   void *dst, uint64_t bytes) {
    qattn_status s = check_range(ctx, buf, offset, dst, bytes, "qattn_buffer_download");
    if (s != QATTN_OK || bytes == 0) return s;
    s = ctx->iface->buffer_download(ctx->be, buf->handle, offset, dst, bytes);
    return s == QATTN_OK ? s : backend_fail(ctx, s, "qattn_buffer_download");
}

qattn_status qattn_synchronize(qattn_context *ctx) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    qattn_status s = ctx->iface->synchronize(ctx->be);
    return s == QATTN_OK ? s : backend_fail(ctx, s, "qattn_synchronize");
}

qattn_status qattn_last_op_time_ms(qattn_context *ctx, double *ms) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!ms) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "ms: NULL");
    if (!ctx->iface->last_op_time_ms)
        return qattn__fail(ctx, QATTN_ERR_UNSUPPORTED, "qattn_last_op_time_ms: the %s backend has no timer",
                           ctx->iface->name);
    if (!ctx->ops_run)
        return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "qattn_last_op_time_ms: no op has run yet");
    qattn_status s = ctx->iface->last_op_time_ms(ctx->be, ms);
    return s == QATTN_OK ? s : backend_fail(ctx, s, "qattn_last_op_time_ms");
}

/* Shared by the op entry points (ops.c). */
qattn_status qattn__backend_fail(qattn_context *ctx, qattn_status s, const char *what) {
    return backend_fail(ctx, s, what);
}

qattn_status qattn_context_adopt(const qattn_backend_iface *iface, void *be, qattn_context **out,
                                 char *err, size_t err_size) {
    if (out) *out = NULL;
    if (!iface || !iface_complete(iface)) {
        /* Without a valid table there is no destroy to call: the instance
         * stays the caller's. */
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "iface: NULL, incomplete or of another ABI (want %d)", QATTN_BACKEND_ABI);
    }
    if (!out || !be) {
        iface->destroy(be);
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, out ? "be: NULL" : "out: NULL");
    }
    qattn_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        iface->destroy(be);
        return qattn__err(err, err_size, QATTN_ERR_OUT_OF_MEMORY, "context: out of memory");
    }
    ctx->iface = iface;
    ctx->be = be;
    qattn_status s = iface->get_caps(be, &ctx->caps);
    if (s != QATTN_OK) {
        const char *msg = iface->last_message ? iface->last_message(be) : NULL;
        qattn__err(err, err_size, s, "%s backend: %s", iface->name,
                   (msg && msg[0]) ? msg : qattn_status_text(s));
        qattn_context_free(ctx);
        return s;
    }
    *out = ctx;
    return QATTN_OK;
}

void *qattn_context_backend_instance(qattn_context *ctx, const qattn_backend_iface *iface) {
    return ctx && iface && ctx->iface == iface ? ctx->be : NULL;
}

qattn_status qattn_context_backend_fail(qattn_context *ctx, qattn_status s, const char *what) {
    if (!ctx) return s;
    return backend_fail(ctx, s, what ? what : "backend call");
}
