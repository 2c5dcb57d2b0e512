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
    int64_t k_ps, v_ps, ks_ps, vs_ps, k_hs, v_hs, ks_hs, vs_hs, n_slots;
    uint32_t k_rs, v_rs, ks_rs, vs_rs;
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
    if ((p.k | p.v) % 16 != 0 || (p.ks | p.vs) % 4 != 0)
        return qattn_vk_fail(vk, QATTN_ERR_ALIGNMENT,
                             "decode_read: k_cache/v_cache device addresses are not 16-byte aligned");
    p.indptr = qattn_vk_addr(&a->kv_indptr);
    p.indices = qattn_vk_addr(&a->kv_indices);
    p.lens = qattn_vk_addr(&a->kv_lens);
    p.sum = ((const qattn_vk_buffer *)sum)->address + sum_offset;
    const qattn_decode_cache_views cv = qattn_decode_cache_views_of(a);
    p.k_ps = cv.k.page_stride;
    p.v_ps = cv.v.page_stride;
    p.ks_ps = cv.ks.page_stride;
    p.vs_ps = cv.vs.page_stride;
    p.k_hs = cv.k.head_stride;
    p.v_hs = cv.v.head_stride;
    p.ks_hs = cv.ks.head_stride;
    p.vs_hs = cv.vs.head_stride;
    p.n_slots = cv.n_slots;
    p.k_rs = cv.k.row_stride;
    p.v_rs = cv.v.row_stride;
    p.ks_rs = cv.ks.row_stride;
    p.vs_rs = cv.vs.row_stride;
    p.q_sb = qattn_vk_stride(&a->q, 0);
    p.q_sr = qattn_vk_stride(&a->q, 1);
    p.q_sh = qattn_vk_stride(&a->q, 2);
    p.indptr_s = qattn_vk_stride(&a->kv_indptr, 0);
    p.indices_s = qattn_vk_stride(&a->kv_indices, 0);
    p.lens_s = qattn_vk_stride(&a->kv_lens, 0);
    p.n_indices = (int32_t)a->kv_indices.shape[0];
    const int32_t B = (int32_t)a->q.shape[0], Hkv = (int32_t)a->k_cache.shape[a->k_cache.rank - 2];
    p.page_size = a->page_size;
    p.window_left = a->window_left;
    p.R = (int32_t)a->q.shape[1];
    p.G = (int32_t)a->q.shape[2] / Hkv;
    p.D = (int32_t)a->q.shape[3];
    p.es = (int32_t)qattn_dtype_size(a->k_cache.dtype);
    p.row_words = p.D * p.es / 16;
    p.scaled = qattn_tensor_present(&a->k_scale);

    /* Splits: about READ_GROUPS_PER_CU workgroups per compute unit over the
     * (kv head, request) pairs, each a whole number of steps of keys. */
    const uint32_t cus = vk->caps.compute_units > 0 ? (uint32_t)vk->caps.compute_units : READ_DEFAULT_CUS;
    const int64_t pairs = (int64_t)B * Hkv, want = (int64_t)cus * READ_GROUPS_PER_CU;
    int64_t keys = a->max_kv_len;
    if (a->window_left >= 0 && keys > (int64_t)a->window_left + p.R) keys = (int64_t)a->window_left + p.R;
    const int64_t step = (int64_t)(READ_WG / (uint32_t)p.row_words) * DECODE_READ_LOADS;
    int64_t splits = (want + pairs - 1) / pairs;
    const int64_t most = (keys + step - 1) / step;
    if (splits > most) splits = most;
    if (splits < 1) splits = 1;
    if (splits > vk->props.limits.maxComputeWorkGroupCount[0]) splits = vk->props.limits.maxComputeWorkGroupCount[0];
    int64_t per = (keys + splits - 1) / splits;
    per = (per + step - 1) / step * step;
    p.keys_per_split = (int32_t)(per > 0 ? per : step);
    p.num_splits = (int32_t)splits;
    if ((uint32_t)Hkv > vk->props.limits.maxComputeWorkGroupCount[1] ||
        (uint32_t)B > vk->props.limits.maxComputeWorkGroupCount[2])
        return qattn_vk_fail(vk, QATTN_ERR_UNSUPPORTED, "decode_read: %d kv heads x %d requests exceed the grid limits",
                             (int)Hkv, (int)B);

    const uint32_t spec[1] = {READ_WG};
    VkPipeline pipe;
    qattn_status st = qattn_vk_pipeline(vk, "decode_read", spec, 1, sizeof p, 0, &pipe);
    if (st != QATTN_OK) return st;
    if ((st = qattn_vk_begin(vk)) != QATTN_OK) return st;
    qattn_vk_dispatch(vk, pipe, &p, sizeof p, (uint32_t)splits, (uint32_t)Hkv, (uint32_t)B);
    return qattn_vk_submit(vk, "qattn_decode_read");
}
