/*
 * LDS (shared memory) staging helpers: cooperative tile copies from global
 * memory and block-wide reductions. Kept apart so every kernel stages the
 * same way and the copy width is decided in one place.
 */
#ifndef QH_LDS_H
#define QH_LDS_H

#include "qh_device.h"

/* Copies `rows` rows of `row_bytes` bytes from global memory (row r at
 * src + r * src_stride bytes) into LDS rows `dst_stride` bytes apart, all
 * threads of the block cooperating. Rows at or past `valid_rows` are
 * zero-filled so math on a short last tile reads defined data. `align` is
 * the alignment every source row start is known to have (16, 4 or 1): it
 * picks 16-byte, 4-byte or single-byte copies. `dst_stride` is a multiple
 * of 4; row_bytes a multiple of 16 (true for every head dim here). */
QH_DEV void qh_lds_stage_rows(uint8_t *dst, int dst_stride, const uint8_t *src, uint32_t src_stride,
                              int rows, int valid_rows, int row_bytes, int align, uint32_t tid,
                              uint32_t nthreads) {
    if (align >= 16 && dst_stride % 16 == 0) {
        const int per_row = row_bytes / 16;
        for (int i = (int)tid; i < rows * per_row; i += (int)nthreads) {
            const int r = i / per_row, c = i % per_row;
            qh_u32x4 w = {0u, 0u, 0u, 0u};
            if (r < valid_rows) w = *(const qh_u32x4 *)(src + (uint32_t)r * src_stride + 16 * c);
            *(qh_u32x4 *)(dst + r * dst_stride + 16 * c) = w;
        }
    } else if (align >= 4) {
        const int per_row = row_bytes / 4;
        for (int i = (int)tid; i < rows * per_row; i += (int)nthreads) {
            const int r = i / per_row, c = i % per_row;
            uint32_t w = 0u;
            if (r < valid_rows) w = *(const uint32_t *)(src + (uint32_t)r * src_stride + 4 * c);
            *(uint32_t *)(dst + r * dst_stride + 4 * c) = w;
        }
    } else {
        const int per_row = row_bytes / 4;
        for (int i = (int)tid; i < rows * per_row; i += (int)nthreads) {
            const int r = i / per_row, c = i % per_row;
            uint32_t w = 0u;
            if (r < valid_rows) {
                const uint8_t *s = src + (uint32_t)r * src_stride + 4 * c;
                w = (uint32_t)s[0] | ((uint32_t)s[1] << 8) | ((uint32_t)s[2] << 16) | ((uint32_t)s[3] << 24);
            }
            *(uint32_t *)(dst + r * dst_stride + 4 * c) = w;
        }
    }
}

/* Block-wide max / sum through `scratch` (one float per wave). All threads
 * must call; every thread gets the result. */
QH_DEV float qh_block_max(float v, float *scratch, uint32_t tid, uint32_t nthreads) {
    v = qh_wave_max(v);
    const uint32_t w = tid / QH_WAVE, nw = (nthreads + QH_WAVE - 1) / QH_WAVE;
    if (qh_lane() == 0) scratch[w] = v;
    qh_barrier();
    float r = scratch[0];
    for (uint32_t i = 1; i < nw; ++i) r = qh_fmaxf(r, scratch[i]);
    qh_barrier();
    return r;
}

#endif /* QH_LDS_H */
