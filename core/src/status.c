/* Status names and messages, generated from QATTN_STATUS_LIST so the enum
 * and its names can never disagree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *qattn_status_name(qattn_status s) {
    switch (s) {
#define QATTN_STATUS_NAME_(name, text) \
    case name:                         \
        return #name;
        QATTN_STATUS_LIST(QATTN_STATUS_NAME_)
#undef QATTN_STATUS_NAME_
    default:
        return "QATTN_STATUS_UNKNOWN";
    }
}

const char *qattn_status_text(qattn_status s) {
    switch (s) {
#define QATTN_STATUS_TEXT_(name, text) \
    case name:                         \
        return text;
        QATTN_STATUS_LIST(QATTN_STATUS_TEXT_)
#undef QATTN_STATUS_TEXT_
    default:
        return "unknown status";
    }
}

qattn_status qattn__err(char *err, size_t err_size, qattn_status s, const char *fmt, ...) {
    if (err && err_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return s;
}

qattn_status qattn__fail(qattn_context *ctx, qattn_status s, const char *fmt, ...) {
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->last_error, sizeof ctx->last_error, fmt, ap);
        va_end(ap);
    }
    return s;
}

const char *qattn__getenv(const char *name) {
    const char *v = getenv(name);
    return (v && v[0]) ? v : NULL;
}
