/*
 * The fragment layout probe on the Vulkan device this process sees: prints
 * what vk_fragment_probe.c found and checks that the capability bit agrees
 * with it (set exactly when the layout is the register-resident decode
 * kernel's), and that a plan of that kernel is offered only then. Exits 77
 * ("skipped") where the device has no 16x16x16 f16 matrix shape to probe
 * (lavapipe).
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"    /* the context's backend object */
#include "vk_internal.h" /* what the probe recorded */
#include "qattn/backends.h"

int main(void) {
    const qattn_backend_iface *b = qattn_backend_by_name("vulkan");
    qattn_context *ctx = NULL;
    char err[512];
    if (!b || qattn_context_create(b, NULL, &ctx, err, sizeof err) != QATTN_OK) {
        printf("skipped: no Vulkan device (%s)\n", b ? err : "not built");
        return 77;
    }
    const qattn_vk *vk = (const qattn_vk *)ctx->be;
    qattn_device_caps caps;
    qattn_get_caps(ctx, &caps);
    const int bit = (caps.features & QATTN_FEAT_FRAGMENT_LAYOUT) != 0;
    printf("device %s: fragment layout: %s (QATTN_FEAT_FRAGMENT_LAYOUT %s)\n", caps.device_name, vk->frag_layout,
           bit ? "set" : "clear");
    int rc = 0;
    if (strncmp(vk->frag_layout, "not probed", 10) == 0) {
        printf("skipped: nothing to probe\n");
        rc = bit ? 1 : 77;
    } else if (bit != (strcmp(vk->frag_layout, "nv-m16n8k16") == 0)) {
        printf("FAIL: the capability bit disagrees with the probe\n");
        rc = 1;
    }
    qattn_context_free(ctx);
    if (rc == 0) printf("1 passed, 0 failed\n");
    return rc;
}
