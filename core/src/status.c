/* Status names and messages, generated from QATTN_STATUS_LIST so the enum
 * and its names can never disagree; and the text helpers the core and the
 * backends share: error formatting, plan reasons, name matching. */
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

qattn_status qattn_vformat_status(char *msg, size_t n, qattn_status s, const char *fmt, va_list ap) {
    if (msg && n > 0) vsnprintf(msg, n, fmt, ap);
    return s;
}

qattn_status qattn__err(char *err, size_t err_size, qattn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s = qattn_vformat_status(err, err_size, s, fmt, ap);
    va_end(ap);
    return s;
}

qattn_status qattn__fail(qattn_context *ctx, qattn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s = qattn_vformat_status(ctx ? ctx->last_error : NULL, ctx ? sizeof ctx->last_error : 0, s, fmt, ap);
    va_end(ap);
    return s;
}

const char *qattn__getenv(const char *name) {
    const char *v = getenv(name);
    return (v && v[0]) ? v : NULL;
}

void qattn__append_reason(char *reason, size_t n, const char *fmt, ...) {
    size_t used = strlen(reason);
    if (used + 3 >= n) return;
    if (used) {
        memcpy(reason + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason + used, n - used, fmt, ap);
    va_end(ap);
}

static int lower_ascii(unsigned char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

int qattn_name_contains(const char *name, const char *pattern) {
    if (!name || !pattern) return 0;
    const size_t n = strlen(pattern);
    for (const char *h = name;; ++h) {
        size_t i = 0;
        while (i < n && h[i] && lower_ascii((unsigned char)h[i]) == lower_ascii((unsigned char)pattern[i])) ++i;
        if (i == n) return 1;
        if (!*h) return 0;
    }
}

int qattn__name_is(const char *a, const char *b) {
    return strlen(a) == strlen(b) && qattn_name_contains(a, b);
}
