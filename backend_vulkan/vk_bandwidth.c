/* qattn_read_stream and qattn_decode_read on Vulkan: one launch each of
 * shaders/read_bandwidth.comp, the streaming read whose time gives the
 * device's read bandwidth through this backend, and of
 * shaders/decode_read.comp, decode's own access pattern. Arguments are
 * checked by the core. */
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

qattn_status qattn_vk_read_stream(void *be, void *src, uint64_t offset, uint64_t bytes, void *sum,
                                  uint64_t sum_offset) {
    qattn_vk *vk = (qattn_vk *)be;
    const qattn_vk_buffer *s = (const qattn_vk_buffer *)src, *d = (const qattn_vk_buffer *)sum;
    read_push p;
    memset(&p, 0, sizeof p);
    p.src = s->address + offset;
    p.sum = d->address + sum_offset;
    p.words = (uint32_t)(bytes / 16);

    uint32_t groups = qattn_read_stream_groups((uint32_t)vk->caps.compute_units, p.words, READ_WG);
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

/* Keys in flight per lane and step (decode_read.comp's LOADS). */
#define DECODE_READ_LOADS 4

qattn_status qattn_vk_decode_read(void *be, const qattn_decode_args *a, void *sum, uint64_t sum_offset) {
    qattn_vk *vk = (qattn_vk *)be;
    /* The push block is qattn/kernel_args.h's, built by the core. */
    qattn_decode_read_args p;
    uint32_t grid[3];
    char why[160];
    const qattn_status s = qattn_decode_read_args_of(a, qattn_vk_addr, ((const qattn_vk_buffer *)sum)->address + sum_offset,
                                                     (uint32_t)vk->caps.compute_units, READ_WG, DECODE_READ_LOADS, &p,
                                                     grid, why, sizeof why);
    if (s != QATTN_OK) return qattn_vk_fail(vk, s, "decode_read: %s", why);
    const uint32_t *lim = vk->props.limits.maxComputeWorkGroupCount;
    if (grid[0] > lim[0] || grid[1] > lim[1] || grid[2] > lim[2])
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "decode_read: grid %ux%ux%u exceeds the device's %ux%ux%u",
                             grid[0], grid[1], grid[2], lim[0], lim[1], lim[2]);

    const uint32_t spec[1] = {READ_WG};
    VkPipeline pipe;
    qattn_status st = qattn_vk_pipeline(vk, "decode_read", spec, 1, sizeof p, 0, &pipe);
    if (st != QATTN_OK) return st;
    if ((st = qattn_vk_begin(vk)) != QATTN_OK) return st;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, grid[0], grid[1], grid[2]);
    return qattn_vk_submit(vk, "qattn_decode_read");
}
