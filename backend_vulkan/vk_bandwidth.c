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

/* Mirrors the push block of decode_read.comp (std430). */
typedef struct decode_read_push {
    uint64_t q, k, v, ks, vs, indptr, indices, lens, sum;
    int64_t page_stride[4], head_stride[4], n_slots; /* k_cache, v_cache, k_scale, v_scale */
    uint32_t row_stride[4];
    int32_t q_sb, q_sr, q_sh, indptr_s, indices_s, lens_s, n_indices;
    int32_t page_size, window_left, R, G, D, row_words, es;
    int32_t keys_per_split, num_splits, scaled, pad_;
} decode_read_push;

/* Keys in flight per lane and step (decode_read.comp's LOADS). */
#define DECODE_READ_LOADS 4

qattn_status qattn_vk_decode_read(void *be, const qattn_decode_args *a, void *sum, uint64_t sum_offset) {
    qattn_vk *vk = (qattn_vk *)be;
    decode_read_push p;
    memset(&p, 0, sizeof p);
    p.q = qattn_vk_addr(&a->q);
    p.k = qattn_vk_addr(&a->k_cache);
    p.v = qattn_vk_addr(&a->v_cache);
    p.ks = qattn_vk_addr(&a->k_scale);
    p.vs = qattn_vk_addr(&a->v_scale);
    if ((p.k | p.v) % 16 != 0)
        return qattn_vk_fail(vk, QATTN_ERR_ALIGNMENT,
                             "decode_read: k_cache/v_cache device addresses are not 16-byte aligned");
    p.indptr = qattn_vk_addr(&a->kv_indptr);
    p.indices = qattn_vk_addr(&a->kv_indices);
    p.lens = qattn_vk_addr(&a->kv_lens);
    p.sum = ((const qattn_vk_buffer *)sum)->address + sum_offset;
    const qattn_decode_cache_views cv = qattn_decode_cache_views_of(a);
    qattn_decode_cache_views_arrays(&cv, p.page_stride, p.head_stride, p.row_stride);
    p.n_slots = cv.n_slots;
    p.q_sb = qattn_vk_stride(&a->q, 0);
    p.q_sr = qattn_vk_stride(&a->q, 1);
    p.q_sh = qattn_vk_stride(&a->q, 2);
    p.indptr_s = qattn_vk_stride(&a->kv_indptr, 0);
    p.indices_s = qattn_vk_stride(&a->kv_indices, 0);
    p.lens_s = qattn_vk_stride(&a->kv_lens, 0);
    p.n_indices = (int32_t)a->kv_indices.shape[0];
    const uint32_t cus = vk->caps.compute_units > 0 ? (uint32_t)vk->caps.compute_units : READ_DEFAULT_CUS;
    const qattn_decode_read_launch l = qattn_decode_read_launch_of(a, cus, READ_WG, DECODE_READ_LOADS,
                                                                   READ_GROUPS_PER_CU);
    const uint32_t B = (uint32_t)a->q.shape[0], Hkv = (uint32_t)a->k_cache.shape[a->k_cache.rank - 2];
    p.page_size = a->page_size;
    p.window_left = a->window_left;
    p.R = (int32_t)a->q.shape[1];
    p.G = l.q_heads_per_kv;
    p.D = (int32_t)a->q.shape[3];
    p.es = (int32_t)qattn_dtype_size(a->k_cache.dtype);
    p.row_words = l.row_words;
    p.keys_per_split = l.keys_per_split;
    p.num_splits = l.splits;
    p.scaled = qattn_tensor_present(&a->k_scale);
    const uint32_t *lim = vk->props.limits.maxComputeWorkGroupCount;
    if ((uint32_t)l.splits > lim[0] || Hkv > lim[1] || B > lim[2])
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "decode_read: grid %dx%ux%u exceeds the device's %ux%ux%u",
                             (int)l.splits, Hkv, B, lim[0], lim[1], lim[2]);

    const uint32_t spec[1] = {READ_WG};
    VkPipeline pipe;
    qattn_status st = qattn_vk_pipeline(vk, "decode_read", spec, 1, sizeof p, 0, &pipe);
    if (st != QATTN_OK) return st;
    if ((st = qattn_vk_begin(vk)) != QATTN_OK) return st;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, (uint32_t)l.splits, Hkv, B);
    return qattn_vk_submit(vk, "qattn_decode_read");
}
