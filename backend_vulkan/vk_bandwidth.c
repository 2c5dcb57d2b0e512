/* qattn_read_stream on Vulkan: one launch of shaders/read_bandwidth.comp, the
 * streaming read whose time gives the device's read bandwidth through this
 * backend. Arguments are checked by the core. */
#include <string.h>

#include "vk_internal.h"

/* Mirrors the push block of read_bandwidth.comp (std430). */
typedef struct read_push {
    uint64_t src, sum;
    uint32_t words, pad;
} read_push;

/* Lanes per workgroup (the shader issues 4 loads of 16 bytes per lane and
 * step). */
#define READ_WG 256u
/* Workgroups per compute unit: on the H200 4-16 resident workgroups of 256
 * lanes with 4 loads in flight each streamed 4.48 TB/s, where 4 of 128 lanes
 * with one load managed 2.37 TB/s (shared/notes/anchors.md). */
#define READ_GROUPS_PER_CU 8u
/* Compute units assumed when the driver does not say (e.g. lavapipe). */
#define READ_DEFAULT_CUS 16u

qattn_status qattn_vk_read_stream(void *be, void *src, uint64_t offset, uint64_t bytes, void *sum,
                                  uint64_t sum_offset) {
    qattn_vk *vk = (qattn_vk *)be;
    const qattn_vk_buffer *s = (const qattn_vk_buffer *)src, *d = (const qattn_vk_buffer *)sum;
    read_push p;
    memset(&p, 0, sizeof p);
    p.src = s->address + offset;
    p.sum = d->address + sum_offset;
    p.words = (uint32_t)(bytes / 16);

    const uint32_t cus = vk->caps.compute_units > 0 ? (uint32_t)vk->caps.compute_units : READ_DEFAULT_CUS;
    uint32_t groups = cus * READ_GROUPS_PER_CU;
    /* No more workgroups than there are lanes' worth of words to read. */
    const uint64_t need = (p.words + READ_WG - 1) / READ_WG;
    if (need < groups) groups = (uint32_t)need;
    if (groups > vk->props.limits.maxComputeWorkGroupCount[0])
        groups = vk->props.limits.maxComputeWorkGroupCount[0];
    if (READ_WG > vk->props.limits.maxComputeWorkGroupInvocations)
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "read_stream: the device runs fewer than %u lanes per workgroup",
                             READ_WG);

    const uint32_t spec[1] = {READ_WG};
    VkPipeline pipe;
    qattn_status st = qattn_vk_pipeline(vk, "read_bandwidth", spec, 1, sizeof p, 0, &pipe);
    if (st != QATTN_OK) return st;
    if ((st = qattn_vk_begin(vk)) != QATTN_OK) return st;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, groups, 1, 1);
    return qattn_vk_submit(vk, "qattn_read_stream");
}
