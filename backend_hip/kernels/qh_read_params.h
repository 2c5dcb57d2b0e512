/*
 * Parameter block of the streaming-read kernel (kernels/read_bandwidth.hip,
 * launched by src/hip_bandwidth.c for qattn_read_stream), under the layout
 * rules of qh_params.h.
 */
#ifndef QH_READ_PARAMS_H
#define QH_READ_PARAMS_H

#include "qh_params.h"

/* Threads per workgroup, and the 16-byte loads each keeps in flight per
 * step: a step of a workgroup reads QH_READ_WG * QH_READ_LOADS words. */
#define QH_READ_WG 256
#define QH_READ_LOADS 4

/* Keys in flight per thread and step of qattn_decode_read. */
#define QH_DREAD_LOADS 4

/* One block for the two kernels of read_bandwidth.hip (each reads its
 * part): the streaming read (src, sum, words, groups) and decode's own
 * access pattern (qattn_decode_read: d, the core's block as Vulkan pushes
 * it). */
typedef struct qh_read_params {
    QH_PTR(const uint32_t) src; /* first word of the range (16-byte aligned) */
    QH_PTR(uint32_t) sum;       /* the u32 the word sum is added to */
    uint32_t words;             /* 16-byte words (< 2^31, checked by the core) */
    uint32_t groups;            /* workgroups launched (kernels never read gridDim) */
    qattn_decode_read_args d;
} qh_read_params;

#ifdef __cplusplus
static_assert(sizeof(qh_read_params) % 8 == 0, "qh_read_params: size not a multiple of 8");
#else
_Static_assert(sizeof(qh_read_params) % 8 == 0, "qh_read_params: size not a multiple of 8");
#endif

#endif /* QH_READ_PARAMS_H */
