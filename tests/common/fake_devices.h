/* Fake devices for the launch-free planner tests: capability sets of
 * devices the project cannot run on (or not in CI), described once so every
 * planner is tested against the same machines. Values come from
 * docs/environment.md (lavapipe, the H200 through Vulkan), RADV's
 * published RDNA4 limits and gfx942's ISA documents. Header-only. */
#ifndef QATTN_TEST_FAKE_DEVICES_H
#define QATTN_TEST_FAKE_DEVICES_H

#include <stdint.h>
#include <string.h>

#include "../../backend_hip/src/qh_target_caps.h"
#include "qattn/qattn.h"

static inline qattn_matrix_shape mshape(int m, int n, int k, qattn_dtype a, qattn_dtype c) {
    qattn_matrix_shape s = {(uint16_t)m, (uint16_t)n, (uint16_t)k, a, c};
    return s;
}

/* Mesa lavapipe as the Vulkan backend reports it: subgroup 8, 32 KiB,
 * no matrices, the packed converter (integer ops). */
static inline qattn_device_caps caps_lavapipe(void) {
    qattn_device_caps c;
    memset(&c, 0, sizeof c);
    strcpy(c.arch, "vulkan:llvmpipe");
    c.compute_units = 2; /* the build machine's cores */
    c.subgroup_size_min = c.subgroup_size_max = 8;
    c.max_shared_bytes = 32768;
    c.max_workgroup_size = 1024;
    c.features = QATTN_FEAT_SHADER_F16 | QATTN_FEAT_STORAGE_8BIT | QATTN_FEAT_STORAGE_16BIT |
                 QATTN_FEAT_TIMESTAMPS | QATTN_FEAT_SUBGROUP_SIZE_CONTROL;
    return c;
}

/* The H200 through Vulkan: subgroup 32, 48 KiB, f16/bf16 matrices. */
static inline qattn_device_caps caps_h200(void) {
    qattn_device_caps c = caps_lavapipe();
    strcpy(c.arch, "vulkan:NVIDIA H200");
    c.compute_units = 132;
    c.subgroup_size_min = c.subgroup_size_max = 32;
    c.max_shared_bytes = 49152;
    c.features |= QATTN_FEAT_COOPMAT | QATTN_FEAT_BF16;
    c.matrix_shapes[0] = mshape(16, 16, 16, QATTN_F16, QATTN_F16);
    c.matrix_shapes[1] = mshape(16, 16, 16, QATTN_F16, QATTN_F32);
    c.matrix_shapes[2] = mshape(16, 8, 16, QATTN_F16, QATTN_F32);
    c.matrix_shapes[3] = mshape(16, 16, 16, QATTN_BF16, QATTN_F32);
    c.n_matrix_shapes = 4;
    return c;
}

/* RDNA4 through RADV: subgroup 32 or 64 (pinnable), 64 KiB, 16x16x16. */
static inline qattn_device_caps caps_rdna4(void) {
    qattn_device_caps c = caps_lavapipe();
    strcpy(c.arch, "vulkan:AMD Radeon RX 9070 (RADV GFX1201)");
    c.compute_units = 64;
    c.subgroup_size_min = 32;
    c.subgroup_size_max = 64;
    c.max_shared_bytes = 65536;
    c.features |= QATTN_FEAT_COOPMAT | QATTN_FEAT_BF16;
    c.matrix_shapes[0] = mshape(16, 16, 16, QATTN_F16, QATTN_F32);
    c.matrix_shapes[1] = mshape(16, 16, 16, QATTN_BF16, QATTN_F32);
    c.n_matrix_shapes = 2;
    return c;
}

/* gfx942 (MI300) as the HIP backend reports it: wave 64, 64 KiB LDS, and
 * the features and matrix shapes of backend_hip/src/qh_target_caps.h (the
 * one description, which hip_runtime.c fills a device's caps from). */
static inline qattn_device_caps caps_gfx942(void) {
    qattn_device_caps c;
    memset(&c, 0, sizeof c);
    strcpy(c.arch, "gfx942");
    c.compute_units = 304;
    c.subgroup_size_min = c.subgroup_size_max = 64;
    c.max_shared_bytes = 65536;
    c.max_workgroup_size = 1024;
    qh_target_caps(QH_T_GFX942, &c);
    return c;
}

#endif
