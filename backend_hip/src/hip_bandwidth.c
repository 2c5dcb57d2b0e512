/*
 * qattn_read_stream and qattn_decode_read on the HIP backend: one launch
 * each of kernels/read_bandwidth.hip's streaming read, whose time gives the
 * device's read bandwidth through this backend, and of its decode-pattern
 * read. Arguments are checked by the core; like every op they only enqueue
 * on the caller's stream.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_read_params.h"

qattn_status qh_read_stream(void *vbe, void *src, uint64_t offset, uint64_t bytes, void *sum,
                            uint64_t sum_offset) {
    qh_backend *be = vbe;
    qh_read_params p;
    memset(&p, 0, sizeof p);
    p.src = (uint64_t)(uintptr_t)src + offset;
    p.sum = (uint64_t)(uintptr_t)sum + sum_offset;
    p.words = (uint32_t)(bytes / 16);
    const uint32_t groups = qattn_read_stream_groups((uint32_t)be->caps.compute_units, p.words, QH_READ_WG);
    p.groups = groups;
    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK) s = qh_launch(be, QH_K_qattn_read_bandwidth, groups, 1, 1, QH_READ_WG, &p, "read_stream");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}

qattn_status qh_decode_read(void *vbe, const qattn_decode_args *a, void *sum, uint64_t sum_offset) {
    qh_backend *be = vbe;
    qh_read_params p;
    uint32_t grid[3];
    char why[160];
    memset(&p, 0, sizeof p);
    const qattn_status s0 = qattn_decode_read_args_of(a, qh_addr, (uint64_t)(uintptr_t)sum + sum_offset,
                                                      (uint32_t)be->caps.compute_units, QH_READ_WG, QH_DREAD_LOADS,
                                                      &p.d, grid, why, sizeof why);
    if (s0 != QATTN_OK) return qh_fail(be, s0, "decode_read: %s", why);
    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK)
        s = qh_launch(be, QH_K_qattn_decode_pattern_read, grid[0], grid[1], grid[2], QH_READ_WG, &p, "decode_read");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
