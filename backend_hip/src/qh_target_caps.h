/*
 * What a HIP target offers the planners besides what the runtime queries
 * from the device (compute units, wave size, LDS and block limits): the
 * features, and the matrix shapes this backend's kernels issue (fp8 and f16
 * MFMA on gfx942, f16 WMMA on gfx12, f16 wmma on the NVIDIA twin), not every
 * shape the hardware has, so the planners never pick a path this backend
 * does not implement.
 *
 * The one description of each target: hip_runtime.c fills a device's caps
 * from it, and the tests that plan for a target without its device
 * (tests/common/fake_devices.h, tests/hip) take it from here, so they
 * cannot drift from what the runtime reports. Header-only, no HIP headers.
 */
#ifndef QH_TARGET_CAPS_H
#define QH_TARGET_CAPS_H

#include "../kernels/qh_kernels.def" /* only the QH_T_* target bits */
#include "qattn/qattn.h"

static inline void qh_caps_add_shape(qattn_device_caps *c, int m, int n, int k, qattn_dtype a,
                                     qattn_dtype acc) {
    if (c->n_matrix_shapes >= QATTN_MAX_MATRIX_SHAPES) return;
    qattn_matrix_shape *s = &c->matrix_shapes[c->n_matrix_shapes++];
    s->m = (uint16_t)m;
    s->n = (uint16_t)n;
    s->k = (uint16_t)k;
    s->a_type = a;
    s->c_type = acc;
}

/* Sets c->features and c->matrix_shapes for `target` (QH_T_GFX942,
 * QH_T_GFX12 or QH_T_NV); leaves every other field as it is. */
static inline void qh_target_caps(int target, qattn_device_caps *c) {
    c->features = QATTN_FEAT_SHADER_F16 | QATTN_FEAT_STORAGE_8BIT | QATTN_FEAT_STORAGE_16BIT |
                  QATTN_FEAT_BF16 | QATTN_FEAT_TIMESTAMPS | QATTN_FEAT_COOPMAT;
    /* The register-resident decode knows its fragments from the ISA (the
     * twin's mma.sync fragments are fixed by PTX; on the H200 its regs
     * kernels pass parity: docs/runs/h200-s7-1). */
    if (target & QH_T_REGS) c->features |= QATTN_FEAT_FRAGMENT_LAYOUT;
    c->n_matrix_shapes = 0;
    if (target == QH_T_GFX942) /* MQA staged (MFMA fp8) */
        qh_caps_add_shape(c, 16, 16, 32, QATTN_FP8_E4M3FNUZ, QATTN_F32);
    /* the tiled decode: MFMA f16 (gfx942), WMMA f16 (gfx12), nvcuda::wmma */
    qh_caps_add_shape(c, 16, 16, 16, QATTN_F16, QATTN_F32);
}

#endif /* QH_TARGET_CAPS_H */
