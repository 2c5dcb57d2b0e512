/*
 * The HIP decode launch a plan describes (hip_decode_launch.c): which
 * kernels, grids, workgroup sizes and dynamic LDS. A function of the plan
 * and the target alone, so tests/test_plan_decode.c checks it without a
 * device. Not installed.
 */
#ifndef QH_DECODE_LAUNCH_H
#define QH_DECODE_LAUNCH_H

#include <stddef.h>

#include "qattn/qattn.h"
#include "qh_kernel_ids.h"

typedef struct qh_decode_launch {
    enum qh_kernel_id kernel; /* the tiled stage 1 the plan's variant names */
    unsigned grid[3];
    unsigned block;           /* threads: plan.workgroup_size (one wave) */
    unsigned shared;          /* dynamic LDS bytes: plan.shared_bytes */
    unsigned merge_grid[3];
    unsigned merge_block;     /* plan.merge_workgroup_size */
} qh_decode_launch;

/* Fills *out from plan for a device of `target` (QH_T_GFX942, QH_T_GFX12 or
 * QH_T_NV) running waves of `wave` lanes; 0 with the reason in why when
 * these kernels cannot run the plan exactly as written. */
int qh_decode_launch_of(const qattn_decode_plan *plan, int target, int wave, qh_decode_launch *out, char *why,
                        size_t n);

/* The name of kernel k (qh_kernels.def). */
const char *qh_kernel_name(enum qh_kernel_id k);

#endif /* QH_DECODE_LAUNCH_H */
