/* Helpers the planners share: the reason text of a plan, and the shape
 * rule every validator states the same way. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

void qattn__reason_add(char *reason, size_t size, const char *fmt, ...) {
    size_t used = strlen(reason); /* planners zero the plan first */
    if (used + 3 >= size) return;
    if (used) {
        memcpy(reason + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason + used, size - used, fmt, ap);
    va_end(ap);
}

qattn_status qattn__check_dim(const qattn_tensor *t, const char *name, int dim, int64_t want,
                              const char *what, char *err, size_t n) {
    if (t->shape[dim] != want)
        return qattn__err(err, n, QATTN_ERR_SHAPE, "%s: shape[%d] = %" PRId64 " but %s is %" PRId64,
                          name, dim, t->shape[dim], what, want);
    return QATTN_OK;
}
