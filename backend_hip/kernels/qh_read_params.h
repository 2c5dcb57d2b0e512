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
 * part): the streaming read (src, words, groups) and decode's own access
 * pattern (qattn_decode_read: the rest, with the decode parameters'
 * meanings, qh_params.h). */
typedef struct qh_read_params {
    QH_PTR(const uint32_t) src; /* first word of the range (16-byte aligned) */
    QH_PTR(uint32_t) sum;       /* the u32 the word sum is added to */
    QH_PTR(const uint16_t) q;
    QH_PTR(const uint8_t) k;
    QH_PTR(const uint8_t) v;
    QH_PTR(const uint32_t) ks; /* scale bits; null for bf16 caches */
    QH_PTR(const uint32_t) vs;
    QH_PTR(const int32_t) indptr;
    QH_PTR(const int32_t) indices;
    QH_PTR(const int32_t) lens;
    /* views of k_cache, v_cache, k_scale, v_scale (qattn_cache_kernel_view) */
    int64_t page_stride[4], head_stride[4];
    int64_t n_slots;
    uint32_t words;             /* 16-byte words (< 2^31, checked by the core) */
    uint32_t groups;            /* workgroups launched (kernels never read gridDim) */
    uint32_t row_stride[4];
    int32_t q_sb, q_sr, q_sh, indptr_s, indices_s, lens_s, n_indices;
    int32_t page_size, window_left, R, G, D, row_words, es;
    int32_t keys_per_split, num_splits, scaled, pad_;
} qh_read_params;

#ifdef __cplusplus
static_assert(sizeof(qh_read_params) % 8 == 0, "qh_read_params: size not a multiple of 8");
#else
_Static_assert(sizeof(qh_read_params) % 8 == 0, "qh_read_params: size not a multiple of 8");
#endif

#endif /* QH_READ_PARAMS_H */
