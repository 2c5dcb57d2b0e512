/* A program that links qattn's HIP backend: creates a context on it (or
 * reports that this host has no HIP device) and frees it. Exit 0 either
 * way; 1 if the backend's table is missing or creation fails otherwise. */
#include <stdio.h>

#include <qattn/backends.h>
#include <qattn/qattn.h>

int main(void) {
    /* by name: linking qattn::hip (or pkg-config qattn-hip) makes
     * qattn/backends.h name it */
    const qattn_backend_iface *hip = qattn_backend_by_name("hip");
    if (!hip) {
        fprintf(stderr, "qattn hip: linked but qattn_backend_by_name(\"hip\") is NULL\n");
        return 1;
    }
    char err[512] = "";
    qattn_context *ctx = NULL;
    qattn_status s = qattn_context_create(hip, NULL, &ctx, err, sizeof err);
    if (s == QATTN_ERR_BACKEND_UNAVAILABLE || s == QATTN_ERR_UNSUPPORTED) {
        printf("qattn hip: linked; no usable device here (%s)\n", err);
        return 0;
    }
    if (s != QATTN_OK) {
        fprintf(stderr, "qattn hip: %s: %s\n", qattn_status_name(s), err);
        return 1;
    }
    qattn_device_caps caps;
    qattn_get_caps(ctx, &caps);
    printf("qattn hip: context on %s (%s)\n", caps.device_name, caps.arch);
    qattn_context_free(ctx);
    return 0;
}
