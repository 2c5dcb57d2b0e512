/*
 * qattn_read_stream on the HIP backend: one launch of
 * kernels/read_bandwidth.hip, the streaming read whose time gives the
 * device's read bandwidth through this backend. Arguments are checked by the
 * core; like every op it only enqueues on the caller's stream.
 */
#include <string.h>

#include "qh_backend.h"
#include "qh_read_params.h"

/* Workgroups per CU: enough resident waves to keep every memory channel
 * busy (on the H200 8 workgroups of 256 per SM stream at the rate the
 * Vulkan shader of the same design reaches; shared/notes/anchors.md). */
#define READ_GROUPS_PER_CU 8u
/* CUs assumed when the runtime reports none. */
#define READ_DEFAULT_CUS 16u

qattn_status qh_read_stream(void *vbe, void *src, uint64_t offset, uint64_t bytes, void *sum,
                            uint64_t sum_offset) {
    qh_backend *be = vbe;
    qh_read_params p;
    memset(&p, 0, sizeof p);
    p.src = (uint64_t)(uintptr_t)src + offset;
    p.sum = (uint64_t)(uintptr_t)sum + sum_offset;
    p.words = (uint32_t)(bytes / 16);
    const uint32_t cus = be->caps.compute_units > 0 ? (uint32_t)be->caps.compute_units : READ_DEFAULT_CUS;
    uint32_t groups = cus * READ_GROUPS_PER_CU;
    const uint32_t need = (p.words + QH_READ_WG - 1) / QH_READ_WG;
    if (need < groups) groups = need;
    p.groups = groups;
    qattn_status s = qh_op_begin(be);
    if (s == QATTN_OK) s = qh_launch(be, QH_K_qattn_read_bandwidth, groups, 1, 1, QH_READ_WG, &p, "read_stream");
    if (s == QATTN_OK) s = qh_op_end(be);
    return s;
}
